"""Run, strength and study configurations (pydantic). A run is fully described by its
config plus the cache.

One module per part of a config: :mod:`~credo.config.roles` (the model playing each
role), :mod:`~credo.config.run`, :mod:`~credo.config.perturbation`,
:mod:`~credo.config.baselines`, :mod:`~credo.config.tasks`, :mod:`~credo.config.executor`,
:mod:`~credo.config.adaptive`, :mod:`~credo.config.evaluation`,
:mod:`~credo.config.strength`, :mod:`~credo.config.study`; :mod:`~credo.config.files`
reads YAML and knows the default cache; :mod:`~credo.config.renames` holds the old names
still read. Every name is importable from ``credo.config`` itself.
"""

from __future__ import annotations

from credo.config.adaptive import AdaptiveConfig, AdaptiveScore
from credo.config.baselines import BaselineConfig
from credo.config.evaluation import (
    ClaimsConfig,
    CombineConfig,
    EvaluationConfig,
    RiskLevels,
    risk_levels,
    with_fitted,
)
from credo.config.executor import ExecutorConfig
from credo.config.files import (
    ConfigFile,
    default_cache_dir,
    default_cache_path,
    read_yaml_mapping,
    validation_message,
)
from credo.config.perturbation import PerturbationConfig
from credo.config.renames import (
    BASELINE_RENAMES,
    CONFIG_RENAMES,
    DEPRECATED_KEYWORDS,
    DEPRECATED_SINCE,
    PERTURBATION_RENAMES,
    REMOVED_IN,
    RUN_RENAMES,
    current_names,
    renamed_keys,
    renamed_keyword,
)
from credo.config.roles import ROLE_OPTION_FIELDS, JudgeConfig, RoleConfig, role_dump
from credo.config.run import DEFAULT_LIMIT, PromptStyle, RunConfig, reads_own_file
from credo.config.strength import (
    DEFAULT_MODEL_OPTIONS,
    DEFAULT_SURPRISAL_MODEL,
    PerturbationKind,
    StrengthConfig,
)
from credo.config.study import STUDY_RUN_FIXED, StudyConfig, StudyModel, slug
from credo.config.tasks import AnswerFormatName, LmEvalConfig, TaskFileConfig

__all__ = [
    "BASELINE_RENAMES",
    "CONFIG_RENAMES",
    "DEFAULT_LIMIT",
    "DEFAULT_MODEL_OPTIONS",
    "DEFAULT_SURPRISAL_MODEL",
    "DEPRECATED_KEYWORDS",
    "DEPRECATED_SINCE",
    "PERTURBATION_RENAMES",
    "REMOVED_IN",
    "ROLE_OPTION_FIELDS",
    "RUN_RENAMES",
    "STUDY_RUN_FIXED",
    "AdaptiveConfig",
    "AdaptiveScore",
    "AnswerFormatName",
    "BaselineConfig",
    "ClaimsConfig",
    "CombineConfig",
    "ConfigFile",
    "EvaluationConfig",
    "ExecutorConfig",
    "JudgeConfig",
    "LmEvalConfig",
    "PerturbationConfig",
    "PerturbationKind",
    "PromptStyle",
    "RiskLevels",
    "RoleConfig",
    "RunConfig",
    "StrengthConfig",
    "StudyConfig",
    "StudyModel",
    "TaskFileConfig",
    "current_names",
    "default_cache_dir",
    "default_cache_path",
    "read_yaml_mapping",
    "reads_own_file",
    "renamed_keys",
    "renamed_keyword",
    "risk_levels",
    "role_dump",
    "slug",
    "validation_message",
    "with_fitted",
]

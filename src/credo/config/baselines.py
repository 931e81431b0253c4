"""The baselines that need generations of their own (Müller et al., Wu et al. App. J)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_serializer

from credo.config.renames import BASELINE_RENAMES, old_names_read
from credo.config.roles import RoleConfig, role_dump
from credo.types import SamplingParams


class BaselineConfig(BaseModel):
    """Settings of the baselines of Müller et al. and Wu et al. (App. J) that need generations
    of their own.

    CCP's NLI step is asked of the run's LLM judge (``RunConfig.judge``).

    ``followups`` caps how many original samples per item get the verbalized and P(True)
    follow-up questions and CCP's NLI judgments (None = all n); identical sample texts
    share one cached follow-up. ``logprobs`` top alternatives are recorded on every
    original sample when the backend has them (CCP reads them; recording them always
    means adding CCP to a finished run regenerates nothing).
    """

    model_config = ConfigDict(extra="forbid")

    followups: int | None = Field(
        None, ge=1, description="original samples per item asked the verbalized and P(True) "
        "follow-ups and CCP's NLI judgments; None = all n",
    )
    logprobs: int = Field(
        5, ge=0, le=20, description="top token alternatives recorded on every original sample when "
        "the backend has them (CCP reads them); 0 = none",
    )
    label_top_logprobs: int = Field(
        20, ge=1, le=20, description="top alternatives read for label probability's option letter",
    )
    apricot_samples: int | None = Field(None, ge=2, description="verdicts per option; None = n")
    apricot_max_tokens: int = Field(128, ge=8, description="generation cap of an APriCoT verdict")
    paraphrases: int = Field(5, ge=2, description="paraphrased prompts per item")
    paraphrase_candidates: int | None = Field(
        None, ge=1, description="paraphrases drawn per item; None = 2 x paraphrases"
    )
    paraphraser: RoleConfig | None = Field(
        None, description="model writing paraphrases (a spec or a role mapping; its old name "
        "`paraphrase_generator:` is deprecated and read until 0.2.0); None = the "
        "perturbation writer"
    )
    paraphrase_sampling: SamplingParams = Field(
        SamplingParams(temperature=1.0, max_tokens=160), description="sampling parameters of the "
        "paraphrase writer",
    )
    ccp_min_prob: float = Field(
        0.05, gt=0.0, le=1.0, description="CCP: token alternatives at least this probable are "
        "judged by the NLI step",
    )
    kle_t: float = Field(
        0.3, gt=0.0, le=1000.0,
        description="KLE's heat-kernel time t: larger t, more diffusion, agreeing answers "
        "nearer confidence 1 (n identical answers score a function of t*n; Nikitin et al. "
        "2024 select t on validation data; credo.methods.kle.select_heat_t)",
    )

    _old_names = old_names_read(BASELINE_RENAMES, "baselines.")
    """``paraphrase_generator:`` is the paraphraser's deprecated name (read until 0.2.0)."""

    def method_options(self) -> dict[str, Any]:
        """The settings scoring methods read from ``ItemSamples.options``: ``followups``
        and ``ccp_min_prob`` (CCP, the follow-up scope) and ``kle_t`` (KLE)."""
        return {"followups": self.followups, "ccp_min_prob": self.ccp_min_prob,
                "kle_t": self.kle_t}

    @field_serializer("paraphraser")
    def _dump_paraphraser(self, role: RoleConfig | None) -> Any:
        return role_dump(role)



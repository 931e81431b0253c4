"""Adaptive sampling: draw in rounds, stop an item once its stopping rule holds."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from credo.registry import STOPPING_RULES

AdaptiveScore = Literal["self_consistency", "semantic_entropy", "c3", "c3_cross"]
"""The scores the interval and decision rules read, computed from the answers drawn."""


class AdaptiveConfig(BaseModel):
    """Adaptive sampling: per item, draw samples in rounds and stop once the
    stopping rule ``rule`` holds (:mod:`credo.plan.adaptive` defines the rules and their
    sources). Part of no request: the samples an adaptive run draws are the first ones of
    the full run's requests. ``epsilon`` None takes the rule's default
    (:data:`credo.plan.adaptive.DEFAULT_EPSILON`); ``scores`` None reads every score the
    rules know (the decision rule: the certificate's method, where a certificate gives the
    threshold)."""

    model_config = ConfigDict(extra="forbid")

    rule: str = Field(
        "interval", description="the stopping rule, a name registered in "
        "credo.plan.adaptive.STOPPING_RULES: consensus, interval or decision, or one of "
        "your own",
    )
    round: int = Field(4, ge=1, description="samples added per round to an unsettled item")
    min: int = Field(4, ge=2, description="samples every item gets before any rule is read")
    epsilon: float | None = Field(
        None, gt=0, description="interval rule: the most an item's reported score may differ "
        "from the full run's, at the rule's confidence (default 0.1)"
    )
    window: int | None = Field(
        None, ge=2, description="consensus rule: the last answers that must agree (default: "
        "round, at least 2)"
    )
    confidence: float = Field(0.95, gt=0, lt=1, description="level of the rules' intervals")
    threshold: float | None = Field(
        None, ge=0, le=1, description="decision rule: the score threshold; None = the run's "
        "certificate's (RunConfig.certificate)"
    )
    scores: list[AdaptiveScore] | None = Field(
        None, min_length=1, description="the scores the interval and decision rules read "
        "(self_consistency, semantic_entropy: original stage; c3, c3_cross: perturbed "
        "stage); None = all four, or the certificate's method for the decision rule"
    )

    @field_validator("rule")
    @classmethod
    def _registered_rule(cls, rule: str) -> str:
        """``rule`` names a registered stopping rule (:data:`credo.registry.STOPPING_RULES`);
        the error lists the registered ones."""
        if rule not in STOPPING_RULES:
            raise ValueError(str(STOPPING_RULES.unknown(rule)))
        return rule



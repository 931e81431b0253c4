"""What a labelled run is evaluated with, part of no request: coverage at risk, scores
fitted on the labelled items, and claim-level credibility of long answers."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field


def risk_levels(value: list[float]) -> list[float]:
    """Risk levels ``α`` (the coverage and the claims settings'): each strictly between 0
    and 1, repeats dropped, the first kept."""
    bad = [a for a in value if not 0 < a < 1]
    if bad:
        raise ValueError(f"every alpha must lie strictly between 0 and 1; got {bad}")
    return list(dict.fromkeys(value))


RiskLevels = Annotated[list[float], AfterValidator(risk_levels)]
"""A list of risk levels, checked by :func:`risk_levels`."""


class EvaluationConfig(BaseModel):
    """How a labelled run's answers are judged for acting on them:
    coverage at risk ``α`` for each of ``alphas`` with confidence ``1 − delta``, over
    ``splits`` random calibration/test halves of the run's items
    (:mod:`credo.evaluate.coverage`). Evaluation only, part of no request."""

    model_config = ConfigDict(extra="forbid")

    alphas: RiskLevels = Field(
        default_factory=lambda: [0.1], min_length=1,
        description="risk levels: the most errors among the answered items",
    )
    delta: float = Field(0.1, gt=0, lt=1, description="chance a certified threshold misleads")
    splits: int = Field(100, ge=1, description="random calibration/test splits of the items")


class CombineConfig(BaseModel):
    """Scores fitted on the run's labelled items (:mod:`credo.evaluate.combine`), each
    cross-fitted over ``folds`` folds of items so that no item is scored by a model that
    saw its label: method ``combined``, a combination of the ``methods``' scores
    (``model``: logistic regression, or isotonic regression on its linear score), and
    methods ``calibrated:<method>``, one method's score mapped by ``calibration`` (Platt
    scaling or isotonic regression). ``fitted``: functions to apply instead of fitting
    (by method name, as a certificate records them: ``credo run --certificate`` and the
    gateway fill it). Evaluation only, part of no request."""

    model_config = ConfigDict(extra="forbid")

    methods: list[str] = Field(
        default_factory=list, description="the methods whose scores `combined` combines "
        "(--combine M1,M2); none: no combination",
    )
    model: Literal["logistic", "isotonic"] = Field(
        "logistic", description="how the scores are combined: logistic regression, or "
        "isotonic regression on its linear score",
    )
    calibration: Literal["platt", "isotonic"] = Field(
        "platt", description="how a calibrated:<method> maps its method's score",
    )
    folds: int = Field(5, ge=2, description="folds of items the fits are cross-fitted over")
    fitted: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="fitted functions to apply instead of fitting, "
        "by method (a certificate's: filled by --certificate)",
    )


def with_fitted(methods: list[str], combine: CombineConfig) -> list[str]:
    """``methods`` with what its fitted scores need: ``combined`` when
    ``combine.methods`` names scores to combine, and the methods a fitted score reads
    (``combine.methods`` for ``combined``, ``m`` for ``calibrated:m``) placed before the
    first fitted one where missing. A ValueError for ``combined`` without
    ``combine.methods``."""
    out = list(methods)
    if combine.methods and "combined" not in out:
        out.append("combined")
    wanted: list[str] = []
    for name in out:
        if name == "combined":
            wanted.extend(combine.methods)
        elif name.startswith("calibrated:"):
            wanted.append(name[len("calibrated:"):])
    if "combined" in out and not combine.methods:
        raise ValueError("method combined combines the scores of combine.methods "
                         "(--combine M1,M2); name them")
    extra = [m for m in dict.fromkeys(wanted) if m and m not in out]
    first = next((i for i, m in enumerate(out)
                  if m == "combined" or m.startswith("calibrated:")), len(out))
    return [*out[:first], *extra, *out[first:]]


class ClaimsConfig(BaseModel):
    """Claim-level credibility of long answers (docs/claims.md): each item's
    answer split into claims (``split``: ``model``, the judge role's atomic facts, or
    ``sentences``, the offline fallback), each claim scored by the claim ``methods``
    (:mod:`credo.methods.claims`) and labelled by the FActScore grader (a knowledge
    folder) or the annotated claim file ``labels``; evaluated per claim and reported with
    the share of claims retained at each of ``alphas``. Part of no request: the claim
    stages' requests are keyed by their prompts."""

    model_config = ConfigDict(extra="forbid")

    split: Literal["model", "sentences"] = Field(
        "sentences", description="how answers are split: model (the judge lists atomic "
        "facts, one request per answer) or sentences (no model)",
    )
    split_max_tokens: int = Field(512, ge=16, description="the splitting reply's length")
    methods: list[str] = Field(
        default_factory=lambda: ["frequency", "claim_c3", "verbalized", "ordinal"],
        min_length=1, description="claim methods: frequency, claim_c3, verbalized, ordinal",
    )
    confidence_max_tokens: int = Field(8, ge=1, description="the verbalised confidence's reply")
    labels: Path | None = Field(
        None, description="an annotated claim file (docs/claims.md): its items' claims and "
        "labels replace the split of the items with its ids; None = the FActScore grader's "
        "checks where the task has a knowledge folder",
    )
    alphas: RiskLevels = Field(
        default_factory=lambda: [0.1, 0.2], min_length=1,
        description="levels of the report's retained share (conformal factuality)",
    )
    judge_labels: bool = Field(
        False, description="label the claims of items with no knowledge source by the "
        "grader role's own knowledge (is the claim true of the entity?): judge-only "
        "labels, as good as the grader model, named so in the report",
    )



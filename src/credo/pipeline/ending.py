"""One ending of a run: evaluation, post-hoc calibration, the neutrality test
and the run's outcome, shared by ``credo run``, ``credo score``, ``credo study``,
:func:`credo.run`, :func:`credo.api.score` and :func:`credo.api.study`.

:func:`end_run` is what every pipeline ends in (strength's too: the outcome and the
incomplete marker's fields); a pipeline whose items are scored gets the item-level
and response-level metrics (with the config's ``calibrate``), why a method has no score
on some items, Wu et al., App. A.3's neutrality test when the run generated perturbed samples,
the coverage at risk α of every method with its degenerate-score flags
(:mod:`credo.evaluate.coverage`, with the config's ``evaluation``), and the
:class:`Outcome`. :func:`decide_outcome` is the one rule for the outcome; the
command line maps it to an exit status (:data:`EXIT_STATUS`), the Python API raises
:class:`~credo.errors.NeutralityFailed` for :attr:`Outcome.NEUTRALITY_FAILED` once the
run folder is written.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from credo.config import RunConfig
from credo.evaluate.coverage import coverage_table, degenerate_table
from credo.evaluate.neutrality import neutrality_record
from credo.evaluate.tables import evaluate_items, evaluate_responses, unavailable_reasons
from credo.methods.scoring import ItemResult
from credo.numbers import fmt_number
from credo.plan.samples import ORIGINAL, PERTURBED

log = logging.getLogger(__name__)

__all__ = ["EXIT_STATUS", "Ending", "Outcome", "decide_outcome", "end_run", "labelled",
           "neutrality_test", "status_record"]


class Outcome(StrEnum):
    """How a run ended."""

    COMPLETE = "complete"
    """Every item scored; the prefixes passed the gate (or it is not ``fail``)."""
    INCOMPLETE_BUDGET = "incomplete-budget"
    """The cost budget (``max_cost_usd``) left items ungenerated; a rerun resumes."""
    INCOMPLETE_FAILURES = "incomplete-failures"
    """Requests failed after the backend's retries; a rerun retries them."""
    NEUTRALITY_FAILED = "neutrality-failed"
    """The prefixes failed App. A.3's test under ``perturbation.neutrality: fail``."""


EXIT_STATUS: Mapping[Outcome, int] = {
    Outcome.COMPLETE: 0,
    Outcome.INCOMPLETE_BUDGET: 3,
    Outcome.INCOMPLETE_FAILURES: 3,
    Outcome.NEUTRALITY_FAILED: 4,
}
"""The command line's exit status of each outcome (``credo --help``)."""


@dataclass(frozen=True)
class Ending:
    """What :func:`end_run` computed. Every pipeline's: the outcome and ``status``, the
    fields of its incomplete marker (``run_status.json``: :func:`status_record`). A
    pipeline that scores items adds the metrics (``credo.evaluate.tables``), the
    unavailable reasons, the neutrality record (empty when not tested) and
    (:mod:`credo.evaluate.coverage`) the coverage at risk per method and α with the
    degenerate methods' reasons (both empty without known correctness)."""

    outcome: Outcome
    status: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)
    response_metrics: dict[str, dict[str, float]] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)
    neutrality: dict[str, Any] = field(default_factory=dict)
    coverage: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    degenerate: dict[str, str] = field(default_factory=dict)


def end_run(
    items: Sequence[ItemResult] | None = None,
    config: RunConfig | None = None,
    *,
    incomplete: Mapping[str, str],
    stopped_by_budget: bool,
    test_neutrality: bool = False,
) -> Ending:
    """The ending of every pipeline (``credo run``, ``credo score``, ``credo strength
    run``, the gateway's batches): the outcome (:func:`decide_outcome`: exit 3 when
    ``incomplete``, the budget's before failures') and the incomplete marker's fields
    (:func:`status_record`). With scored ``items`` and their ``config``, also the
    evaluation with the config's bins, bootstrap, seed and post-hoc calibration, the
    unavailable reasons, the neutrality test (when ``test_neutrality``: the run generated
    perturbed samples), the coverage at risk of ``config.evaluation`` with the
    degenerate-score flags, and the outcome under the config's neutrality gate."""
    if items is None or config is None:  # a pipeline without scored items (strength)
        outcome = decide_outcome(incomplete, stopped_by_budget, {}, "off")
        return Ending(outcome, status_record(outcome, incomplete, stopped_by_budget))
    args = (items, config.methods, config.ece_bins, config.bootstrap, config.seed,
            config.calibrate)
    graded = labelled(items)
    record = neutrality_test(items, config) if test_neutrality and graded else {}
    ev = config.evaluation
    outcome = decide_outcome(incomplete, stopped_by_budget, record,
                             config.perturbation.neutrality)
    return Ending(
        outcome=outcome,
        status=status_record(outcome, incomplete, stopped_by_budget),
        metrics=evaluate_items(*args) if graded else {},
        response_metrics=evaluate_responses(*args) if graded else {},
        unavailable=unavailable_reasons(items, config.methods),
        neutrality=record,
        coverage=coverage_table(items, config.methods, ev.alphas, ev.delta, ev.splits,
                                config.seed),
        degenerate=degenerate_table(items, config.methods),
    )


def status_record(
    outcome: Outcome, incomplete: Mapping[str, str], stopped_by_budget: bool
) -> dict[str, Any]:
    """The fields every run folder's incomplete marker (``run_status.json``, written
    last) holds: complete or incomplete, the outcome, how many units are incomplete and
    whether the budget stopped the run (a rerun resumes from the cache)."""
    return {
        "status": "incomplete" if incomplete else "complete",
        "outcome": outcome.value,
        "items_incomplete": len(incomplete),
        **({"stopped_by_budget": True} if stopped_by_budget else {}),
    }


def labelled(items: Sequence[ItemResult]) -> bool:
    """Whether any item's correctness is known: a run on questions without gold answers is scored,
    not evaluated (no metrics, no neutrality test)."""
    return any(not math.isnan(r.performance) for r in items)


def decide_outcome(
    incomplete: Mapping[str, str],
    stopped_by_budget: bool,
    neutrality: Mapping[str, Any],
    gate: str,
) -> Outcome:
    """The outcome of a run: incomplete items first (the budget's before failures'), then
    the neutrality gate; a run with incomplete items is never judged on neutrality."""
    if incomplete:
        return Outcome.INCOMPLETE_BUDGET if stopped_by_budget else Outcome.INCOMPLETE_FAILURES
    if gate == "fail" and neutrality and not neutrality["neutral"]:
        return Outcome.NEUTRALITY_FAILED
    return Outcome.COMPLETE


def neutrality_test(items: Sequence[ItemResult], config: RunConfig) -> dict[str, Any]:
    """App. A.3's test on the run's own samples: Δ = #correct perturbed − #correct
    original per item, mean with a bootstrap CI (``perturbation.neutrality`` off: none)."""
    if config.perturbation.neutrality == "off":
        return {}
    rows = [(r.item.id, r.set_correct.get(ORIGINAL, ()), r.set_correct.get(PERTURBED, ()))
            for r in items]
    record = neutrality_record(rows, seed=config.seed)
    if record is not None and not record["neutral"]:
        log.info(
            "the prefixes are not neutral for this model: mean Δ = %s of %d samples, 95%% CI"
            " [%s, %s] (the neutrality test); C3 is confounded by them",
            *(fmt_number(record[k], 2, sign=True) if k != "samples_per_set" else record[k]
              for k in ("mean_delta", "samples_per_set", "low", "high")),
        )
    return record or {}

"""Paired bootstrap comparison of two methods scored on the same items.

Two methods evaluated on the same benchmark items are not independent samples: an item
that is hard for one is usually hard for the other. The paired bootstrap therefore draws
one set of resampled item indices per replicate and evaluates *both* methods on it, so
the replicate difference ``Δ* = M(A[idx]) − M(B[idx])`` keeps the pairing (Efron and
Tibshirani 1993, §16; the same resampling as Müller et al., §3.7's 1000-resample CIs).

Per-generation comparisons (``clusters``: the question of each generation) draw
questions instead of generations, all of a question's generations together (the cluster
bootstrap of :mod:`credo.evaluate.weighted`), for both methods from the same draws.

The two-sided p-value is the smallest α for which the percentile interval of ``Δ*``
excludes 0, ``p = min(1, 2 · min(P(Δ* ≤ 0), P(Δ* ≥ 0)))``, with the usual ``(k+1)/(B+1)``
correction so that it is never exactly 0. A method compared with itself gives Δ* = 0 in
every replicate: Δ = 0, CI = [0, 0], p = 1.

The full-sample values come from the row functions of :mod:`credo.evaluate.metrics`:
:func:`~credo.evaluate.metrics.auroc_rows` (scikit-learn's ``roc_auc_score``) and
:func:`~credo.evaluate.metrics.ece_rows` (the bins of :mod:`credo.evaluate.binning`, equal
width or one per discrete level), re-exported here with
:func:`~credo.evaluate.metrics.average_precision`. The replicates run on the weighted
bootstrap engine (:mod:`credo.evaluate.weighted`): each method's items sorted once, each
replicate's indices turned into multiplicities, equal to the row functions on the
resampled items (``tests/test_report.py``) and ~50× faster than scikit-learn per replicate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from credo.evaluate.metrics import (
    FEW_IN_CLASS,
    as_unit_interval,
    auroc_rows,
    average_precision,
    ece_rows,
    labels_from_performance,
    prr_rows,
    smaller_class,
)
from credo.evaluate.weighted import WeightedSample
from credo.ties import settle_scores

__all__ = [
    "PAIRED_METRICS",
    "PairedDifference",
    "auroc_rows",
    "average_precision",
    "ece_rows",
    "paired_bootstrap",
]

PAIRED_METRICS = ("auroc", "ece", "prr")
"""The metrics :func:`paired_bootstrap` compares (each paired on the same resamples)."""

ArrayLike = Sequence[float] | np.ndarray


@dataclass(frozen=True)
class PairedDifference:
    """``metric(A) − metric(B)`` on the same items, with its paired bootstrap CI and p."""

    metric: str
    method_a: str
    method_b: str
    delta: float
    low: float
    high: float
    p_value: float
    n_items: int
    n_resamples: int
    n_valid: int
    confidence: float
    #: Items in the smaller class of the labels 1[p̄ ≥ 0.5] (-1: not counted). A ΔAUROC on
    #: fewer than :data:`~credo.evaluate.metrics.FEW_IN_CLASS` is decided by those items.
    smaller_class: int = -1
    #: The clusters (questions) the resamples drew, for a per-generation comparison;
    #: -1: the rows themselves were drawn.
    n_clusters: int = -1

    @property
    def significant(self) -> bool:
        """True when the CI excludes 0."""
        return bool(self.low > 0.0 or self.high < 0.0)

    @property
    def few(self) -> bool:
        """Whether a ranking Δ rests on fewer than ``FEW_IN_CLASS`` items of one class."""
        return self.metric == "auroc" and 0 <= self.smaller_class < FEW_IN_CLASS


def paired_bootstrap(
    scores_a: ArrayLike,
    scores_b: ArrayLike,
    performance: ArrayLike,
    *,
    metrics: Sequence[str] = ("auroc", "ece"),
    method_a: str = "A",
    method_b: str = "B",
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    n_bins: int = 10,
    levels_a: ArrayLike | None = None,
    levels_b: ArrayLike | None = None,
    clusters: ArrayLike | None = None,
) -> dict[str, PairedDifference]:
    """Paired bootstrap of ΔAUROC and ΔECE between methods A and B on the same N items.

    Parameters
    ----------
    scores_a, scores_b : float in [0, 1], shape (N,)
        The two methods' scores, item ``i`` at position ``i`` in both.
    performance : float in [0, 1], shape (N,)
        Per-item performance p̄ (ECE target); AUROC uses the label ``1[p̄ >= 0.5]``.
    metrics : names among ``"auroc"``, ``"ece"`` and ``"prr"`` (quality p̄)
    n_resamples, confidence, seed
        B resamples of the N item indices with replacement (the same indices for both
        methods), the two-sided percentile interval at ``confidence``, the generator seed.
        B = 0: the point estimates Δ alone (CI and p NaN, ``n_valid`` 0).
    n_bins : equal-width ECE bins; ``levels_a`` / ``levels_b`` switch a method to
        discrete-level ECE (Müller et al., App. A.11.3).
    clusters : shape (N,), optional
        The cluster of each row (the question of a generation, for per-generation
        scores against each generation's correctness): each replicate draws the C
        clusters with replacement, ``default_rng(seed).integers(0, C, (B, C))``, and keeps
        all their rows, for both methods alike.

    Returns
    -------
    ``{metric: PairedDifference}``. Replicates where a metric is undefined (AUROC on a
    resample with one class) are dropped and counted in ``n_valid``; with none left the
    difference is NaN.
    """
    a = settle_scores(as_unit_interval(scores_a, "scores_a"))  # equal within rounding: tied
    b = settle_scores(as_unit_interval(scores_b, "scores_b"))
    p = as_unit_interval(performance, "performance")
    if not (a.size == b.size == p.size):
        raise ValueError(
            f"scores_a, scores_b and performance differ in length: {a.size}, {b.size}, {p.size}"
        )
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    if n_resamples < 0:
        raise ValueError(f"n_resamples must be >= 0, got {n_resamples}")
    unknown = set(metrics) - set(PAIRED_METRICS)
    if unknown:
        raise ValueError(f"unknown metrics {sorted(unknown)}; known: auroc, ece, prr")
    y = labels_from_performance(p)
    ids = None
    units = a.size
    if clusters is not None:
        ids = np.asarray(clusters)
        if ids.shape != a.shape:
            raise ValueError(f"clusters must give one cluster per score, got shape {ids.shape}"
                             f" for {a.shape}")
        units = np.unique(ids).size
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, units, size=(n_resamples, units)) if units else np.zeros((0, 0), int)
    reps = _replicates(a, b, p, y, idx, metrics, n_bins, levels_a, levels_b, ids) \
        if n_resamples else {m: np.zeros(0) for m in metrics}
    out: dict[str, PairedDifference] = {}
    for name in metrics:
        if name == "auroc":
            full_a = auroc_rows(a[None, :], y[None, :])[0] if a.size else math.nan
            full_b = auroc_rows(b[None, :], y[None, :])[0] if a.size else math.nan
        elif name == "prr":
            full_a = prr_rows(a[None, :], p[None, :])[0] if a.size else math.nan
            full_b = prr_rows(b[None, :], p[None, :])[0] if a.size else math.nan
        else:
            full_a = ece_rows(a[None, :], p[None, :], n_bins, levels_a)[0] if a.size else math.nan
            full_b = ece_rows(b[None, :], p[None, :], n_bins, levels_b)[0] if a.size else math.nan
        out[name] = replace(
            _summarise(name, method_a, method_b, full_a - full_b, reps[name], a.size,
                       n_resamples, confidence),
            smaller_class=smaller_class(y), n_clusters=-1 if ids is None else units,
        )
    return out


def _replicates(
    a: np.ndarray,
    b: np.ndarray,
    p: np.ndarray,
    y: np.ndarray,
    idx: np.ndarray,
    metrics: Sequence[str],
    n_bins: int,
    levels_a: ArrayLike | None,
    levels_b: ArrayLike | None,
    clusters: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """``M(A[idx]) − M(B[idx])`` for every row of ``idx`` (row or cluster draws) and every
    metric."""
    if a.size == 0:
        return {m: np.zeros(0) for m in metrics}
    wa = WeightedSample(a, p, y, n_bins=n_bins, levels=levels_a, clusters=clusters)
    wb = WeightedSample(b, p, y, n_bins=n_bins, levels=levels_b, clusters=clusters)
    va = wa.evaluate(wa.weights(idx), list(metrics))
    vb = wb.evaluate(wb.weights(idx), list(metrics))
    return {m: va[m] - vb[m] for m in metrics}


def _summarise(
    metric: str,
    method_a: str,
    method_b: str,
    delta: float,
    rep: np.ndarray,
    n_items: int,
    n_resamples: int,
    confidence: float,
) -> PairedDifference:
    rep = rep[~np.isnan(rep)]
    if rep.size == 0 or math.isnan(delta):
        return PairedDifference(
            metric, method_a, method_b, float(delta), math.nan, math.nan, math.nan,
            n_items, n_resamples, int(rep.size), confidence,
        )
    alpha = 1.0 - confidence
    low, high = np.quantile(rep, [alpha / 2.0, 1.0 - alpha / 2.0])
    k = rep.size
    below = (np.sum(rep <= 0.0) + 1) / (k + 1)
    above = (np.sum(rep >= 0.0) + 1) / (k + 1)
    p = min(1.0, 2.0 * min(below, above))
    return PairedDifference(
        metric, method_a, method_b, float(delta), float(low), float(high), float(p),
        n_items, n_resamples, int(k), confidence,
    )

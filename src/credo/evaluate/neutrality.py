"""Perturbation neutrality (Wu et al., App. A.3): does the context prefix shift correctness?

Per item ``Δ = #correct perturbed − #correct original``; if the prefixes leaked or
contradicted the answer, the distribution of Δ would shift away from 0. A pure statistic
of correctness flags: the perturbation stage writes the prefixes, the run records which
samples were correct, and :func:`neutrality` reads only those flags.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import bootstrap


@dataclass(frozen=True)
class Neutrality:
    """Δ per item (Wu et al., App. A.3) and the mean Δ with its bootstrap CI."""

    item_ids: tuple[str, ...]
    delta: np.ndarray
    samples_per_set: int
    mean: float
    low: float
    high: float
    confidence: float


def neutrality(
    original_correct: Mapping[str, Sequence[bool]],
    perturbed_correct: Mapping[str, Sequence[bool]],
    *,
    confidence: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
) -> Neutrality:
    """``Δ_i = #correct perturbed − #correct original`` per item (Wu et al., App. A.3).

    The paper draws 30 samples from each prompt. When a run drew n original and m
    perturbed samples with n ≠ m, the first ``min(n, m)`` of each set (in sample order)
    are counted, so that both counts are out of the same number of tries. Items missing
    from either mapping are skipped. The CI of the mean is scipy's percentile bootstrap
    over items.
    """
    ids = tuple(i for i in original_correct if i in perturbed_correct)
    if not ids:
        raise ValueError("no item has both original and perturbed correctness")
    k = min(min(len(original_correct[i]), len(perturbed_correct[i])) for i in ids)
    if k < 1:
        raise ValueError("an item has no original or no perturbed sample")
    delta = np.array(
        [
            int(np.sum(np.asarray(perturbed_correct[i][:k], dtype=bool)))
            - int(np.sum(np.asarray(original_correct[i][:k], dtype=bool)))
            for i in ids
        ],
        dtype=float,
    )
    mean = float(delta.mean())
    low, high = _mean_ci(delta, confidence, n_resamples, seed)
    return Neutrality(ids, delta, k, mean, low, high, confidence)


def _mean_ci(x: np.ndarray, confidence: float, n_resamples: int, seed: int) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean of ``x``: NaN for fewer than 2 values, the
    value itself when all are equal (scipy refuses a degenerate sample)."""
    if x.size < 2:
        return math.nan, math.nan
    if np.all(x == x[0]):
        return float(x[0]), float(x[0])
    res = bootstrap(
        (x,),
        np.mean,
        confidence_level=confidence,
        n_resamples=n_resamples,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def neutrality_record(
    items: Sequence[tuple[str, Sequence[object], Sequence[object]]], seed: int = 0
) -> dict[str, float | int | bool] | None:
    """App. A.3's test of a run as a JSON record, or None when no item has both original
    and perturbed correctness: ``items`` are ``(item id, original flags, perturbed
    flags)``; only items whose flags are all bools count. ``neutral`` is whether the
    95% CI of the mean Δ contains 0 (when it does not, the prefixes shift correctness
    and C3 is confounded by them)."""
    orig = {i: list(o) for i, o, p in items if _bools(o) and _bools(p)}
    pert = {i: list(p) for i, o, p in items if _bools(o) and _bools(p)}
    try:
        nt = neutrality(orig, pert, seed=seed)
    except ValueError:
        return None
    defined = not (math.isnan(nt.low) or math.isnan(nt.high))
    return {
        "mean_delta": nt.mean,
        "low": nt.low,
        "high": nt.high,
        "items": len(nt.item_ids),
        "samples_per_set": nt.samples_per_set,
        "confidence": nt.confidence,
        "neutral": (not defined) or nt.low <= 0.0 <= nt.high,
    }


def _bools(flags: Sequence[object]) -> bool:
    return bool(flags) and all(isinstance(f, bool) for f in flags)

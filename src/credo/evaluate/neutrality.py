"""Perturbation neutrality (000 App. A.3): does the context prefix shift correctness?

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
    """Δ per item (000 App. A.3) and the mean Δ with its bootstrap CI."""

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
    """``Δ_i = #correct perturbed − #correct original`` per item (000 App. A.3).

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

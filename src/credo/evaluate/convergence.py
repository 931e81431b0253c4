"""Trial-count convergence (Wu et al., App. B, Fig. 7): estimates as the number of samples grows.

Wu et al., App. B chooses the number of samples per question by watching the estimates settle as
samples are added ("the estimated behavior stabilizes after about 20 samples"). Given the
cached samples of a run, :func:`trial_convergence` recomputes, for every prefix length
``k = 2, 3, ...``, each item's C3 from its first ``k`` original and first ``k`` perturbed
answers, its self-consistency from the first ``k`` original answers and its performance
from the first ``k`` correctness flags, and reports the mean over items and the mean
absolute distance to the estimate from all samples.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from credo.kernels.registry import Kernel
from credo.methods.c3 import c3
from credo.methods.self_consistency import self_consistency

INDICATOR = "indicator"


@dataclass(frozen=True)
class ItemTrials:
    """One item's answers in sample order (``None`` = unparsable) and original correctness."""

    item_id: str
    original: Sequence[Hashable | None]
    perturbed: Sequence[Hashable | None]
    correct: Sequence[bool]


@dataclass(frozen=True)
class Convergence:
    """Per estimate: the k values, the mean over items and the mean |estimate_k − estimate_K|."""

    k: np.ndarray
    mean: dict[str, np.ndarray]
    abs_change: dict[str, np.ndarray]
    n_items: int


def trial_convergence(
    items: Sequence[ItemTrials], kernel: str | Kernel = "indicator", k_min: int = 2
) -> Convergence:
    """C3, self-consistency and p̄ on the first k samples, k = k_min .. K (Wu et al., App. B).

    ``K`` is the largest k every item supports for the estimate: ``min(n, m)`` for C3 and
    ``n`` for self-consistency and performance. Estimates past their own ``K`` are NaN.
    """
    if not items:
        raise ValueError("no items to compute convergence on")
    if k_min < 2:
        raise ValueError(f"k_min must be >= 2 (unbiased estimators need 2 samples), got {k_min}")
    n = min(len(it.original) for it in items)
    m = min(len(it.perturbed) for it in items)
    k_max = max(n, m)
    if n < k_min:
        raise ValueError(f"items have only {n} original samples; need at least {k_min}")
    ks = np.arange(k_min, k_max + 1)
    curves = {name: np.full((len(items), ks.size), np.nan) for name in ("C3", "self_consistency",
                                                                         "performance")}
    fill = _indicator_curves if isinstance(kernel, str) and kernel == INDICATOR \
        else _kernel_curves
    for i, it in enumerate(items):
        fill(it, ks, n, m, curves, i, kernel)
    mean: dict[str, np.ndarray] = {}
    change: dict[str, np.ndarray] = {}
    for name, mat in curves.items():
        valid = ~np.isnan(mat).all(axis=0)
        if not valid.any():
            continue
        last = mat[:, np.flatnonzero(valid)[-1]]
        with np.errstate(invalid="ignore"):
            mean[name] = np.where(valid, np.nanmean(np.where(valid, mat, 0.0), axis=0), np.nan)
            change[name] = np.where(
                valid, np.nanmean(np.abs(np.where(valid, mat, 0.0) - last[:, None]), axis=0),
                np.nan,
            )
    return Convergence(ks, mean, change, len(items))


def _kernel_curves(it: ItemTrials, ks: np.ndarray, n: int, m: int,
                   curves: dict[str, np.ndarray], i: int, kernel: str | Kernel) -> None:
    """Row ``i`` of ``curves``: each estimate recomputed on every prefix."""
    for j, k in enumerate(ks):
        if k <= n:
            curves["self_consistency"][i, j] = self_consistency(it.original[:k], kernel)
            curves["performance"][i, j] = float(np.mean(it.correct[:k]))
        if k <= n and k <= m:
            curves["C3"][i, j] = c3(it.original[:k], it.perturbed[:k], kernel)


def _indicator_curves(it: ItemTrials, ks: np.ndarray, n: int, m: int,
                      curves: dict[str, np.ndarray], i: int, kernel: str | Kernel) -> None:
    """Row ``i`` of ``curves`` under the indicator kernel, one sample at a time: the
    counts of each answer in the prefixes give the pair sums (``Σ_{i≠j} 1[y_i = y_j] =
    Σ_a c_a² − Σ_a c_a``, an unparsable answer matching nothing; ``Σ_ij 1[y_i = y'_j] =
    Σ_a c_a c'_a``), so the K prefixes cost O(K) instead of O(K³), with the values of
    :func:`~credo.methods.self_consistency.self_consistency` and
    :func:`~credo.methods.c3.c3` to the last bit (integer sums, the same divisions)."""
    orig: dict[Hashable, int] = {}
    pert: dict[Hashable, int] = {}
    sq_o = sq_p = parsed_o = parsed_p = cross = right = 0
    for k in range(1, int(ks[-1]) + 1):
        if k <= n:
            a = it.original[k - 1]
            right += bool(it.correct[k - 1])
            if a is not None:
                c = orig.get(a, 0)
                sq_o += 2 * c + 1
                parsed_o += 1
                cross += pert.get(a, 0) if k <= m else 0
                orig[a] = c + 1
        if k <= m and k <= n:
            b = it.perturbed[k - 1]
            if b is not None:
                c = pert.get(b, 0)
                sq_p += 2 * c + 1
                parsed_p += 1
                cross += orig.get(b, 0)
                pert[b] = c + 1
        j = k - int(ks[0])
        if j < 0:
            continue
        if k <= n:
            within_o = (sq_o - parsed_o) / (k * (k - 1))
            curves["self_consistency"][i, j] = float(within_o)
            curves["performance"][i, j] = right / k
        if k <= n and k <= m:
            within_p = (sq_p - parsed_p) / (k * (k - 1))
            mmd2 = float(within_o + within_p - 2.0 * (cross / (k * k)))
            curves["C3"][i, j] = float(np.clip(1.0 - mmd2 / 2.0, 0.0, 1.0))

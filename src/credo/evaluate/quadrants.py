"""Benchmark diagnosis quadrants (Wu et al., §5.3, Fig. 4).

Per benchmark item, average the performance p̄ and the C3 score over the models (runs)
that answered it, then split the items at the median performance and the median C3:

=============  ===============  ========================================================
region         performance, C3  what Wu et al., §5.3 reads into it
=============  ===============  ========================================================
mastered       high, high       solved with a stable answer (green; saturation)
brittle        high, low        right but sensitive to perturbation (yellow; leakage?)
biased         low, high        consistently wrong under perturbation (red; shared priors)
unlearned      low, low         wrong and inconsistent (gray; knowledge not learned)
=============  ===============  ========================================================

An item is *high* when its value is above the split. The paper splits at the median over
all instances of its six benchmarks; a small run often has many items tied at the median
(p̄ = 0 on a hard benchmark, C3 = 1 on an easy one), and a fixed rule for ties would then
put nearly every item on one side. Items tied with the split go to the side that holds
fewer items strictly (:func:`tie_goes_high`), which keeps the split as even as the ties
allow. Pass ``perf_split`` / ``c3_split`` (e.g. 0.5) to split at a fixed value, or at the
medians of a pooled set of items.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

REGIONS: tuple[str, ...] = ("mastered", "brittle", "biased", "unlearned")
REGION_COLORS: dict[str, str] = {
    "mastered": "#2ca02c",
    "brittle": "#e6b800",
    "biased": "#d62728",
    "unlearned": "#7f7f7f",
}


@dataclass(frozen=True)
class Quadrants:
    """Per-item means, the two splits and the region of every item."""

    item_ids: tuple[str, ...]
    performance: np.ndarray
    c3: np.ndarray
    n_models: np.ndarray
    perf_split: float
    c3_split: float
    regions: tuple[str, ...]
    counts: dict[str, int] = field(default_factory=dict)

    def items_in(self, region: str) -> list[str]:
        """Item ids of ``region`` in input order."""
        return [i for i, r in zip(self.item_ids, self.regions, strict=True) if r == region]


def tie_goes_high(values: np.ndarray, split: float) -> bool:
    """Whether values equal to ``split`` count as high: when fewer values lie strictly
    above the split than strictly below it."""
    v = np.asarray(values, dtype=float)
    return bool(np.sum(v > split) < np.sum(v < split))


def region_of(
    performance: float,
    c3: float,
    perf_split: float,
    c3_split: float,
    *,
    perf_ties_high: bool = False,
    c3_ties_high: bool = False,
) -> str:
    """The Wu et al., Fig. 4 region of one item; a value equal to a split is high only when
    that split's ``*_ties_high`` says so (see :func:`tie_goes_high`)."""
    high_perf = performance > perf_split or (perf_ties_high and performance == perf_split)
    high_c3 = c3 > c3_split or (c3_ties_high and c3 == c3_split)
    if high_perf:
        return "mastered" if high_c3 else "brittle"
    return "biased" if high_c3 else "unlearned"


def diagnose(
    runs: Sequence[Mapping[str, tuple[float, float]]],
    *,
    perf_split: float | None = None,
    c3_split: float | None = None,
) -> Quadrants:
    """Quadrants of the items of one benchmark answered by one or more models.

    Parameters
    ----------
    runs : one mapping per model (run), ``item id -> (p̄, C3)``; NaN values are skipped.
        Items answered by any run are included, each averaged over the runs that have it
        (Wu et al., Fig. 4 averages over 16 models); the order is that of first appearance.
    perf_split, c3_split : the splits; default the medians of the per-item means.
    """
    order: dict[str, None] = {}
    for r in runs:
        order.update(dict.fromkeys(r))
    ids = tuple(order)
    perf = np.full(len(ids), np.nan)
    c3 = np.full(len(ids), np.nan)
    n_models = np.zeros(len(ids), dtype=int)
    for k, item in enumerate(ids):
        pairs = [
            r[item] for r in runs
            if item in r and not (math.isnan(r[item][0]) or math.isnan(r[item][1]))
        ]
        if pairs:
            perf[k] = float(np.mean([p for p, _ in pairs]))
            c3[k] = float(np.mean([c for _, c in pairs]))
            n_models[k] = len(pairs)
    ok = n_models > 0
    ids = tuple(i for i, keep in zip(ids, ok, strict=True) if keep)
    perf, c3, n_models = perf[ok], c3[ok], n_models[ok]
    if not ids:
        raise ValueError("no item has both a performance and a C3 score")
    ps = float(np.median(perf)) if perf_split is None else float(perf_split)
    cs = float(np.median(c3)) if c3_split is None else float(c3_split)
    pt, ct = tie_goes_high(perf, ps), tie_goes_high(c3, cs)
    regions = tuple(
        region_of(p, c, ps, cs, perf_ties_high=pt, c3_ties_high=ct)
        for p, c in zip(perf, c3, strict=True)
    )
    counts = {r: regions.count(r) for r in REGIONS}
    return Quadrants(ids, perf, c3, n_models, ps, cs, regions, counts)

"""Flip rates by perturbation strength (Le et al., §4.1 eq. 2, §4.3).

A perturbation *flips* an instance when the model's answer after it differs from the
answer before it. Eq. 2 counts flips among the instances of one strength level:

    FR(s) = #{i : s_i = s and y_i != y'_i} / #{i : s_i = s}

Responsive self-consistency is FR(3) (higher is better), robust self-consistency FR(0)
(lower is better), and overall self-consistency FR(3) - FR(0) (§4.4.2).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from scipy.stats import binomtest

STRENGTH_LEVELS: tuple[int, ...] = (0, 1, 2, 3)
"""The rubric's levels (Le et al., Table 1): 0 no/minimal, 1 small, 2 moderately strong,
3 strong."""


def flip_rates(
    strengths: Sequence[int | None], flipped: Sequence[bool | None]
) -> dict[int, float]:
    """FR(s) of Le et al., eq. 2 for every strength level ``s`` that occurs, in increasing order.

    ``strengths[i]`` is instance ``i``'s perturbation strength and ``flipped[i]`` whether
    its answer changed (``y_i != y'_i``). Instances whose strength or flip is ``None``
    (an unparsable rating, an answer that could not be read) are left out of both the
    numerator and the denominator. A level with no instance has no entry.

    >>> flip_rates([0, 0, 3, 3, 3], [False, True, True, True, False])
    {0: 0.5, 3: 0.6666666666666666}
    """
    counts = _counts(strengths, flipped)
    return {s: flips / n for s, (n, flips) in sorted(counts.items())}


@dataclass(frozen=True)
class FlipRate:
    """FR(s) with its counts and a Wilson score interval (NaN when ``n == 0``)."""

    strength: int
    n: int
    flips: int
    rate: float
    low: float
    high: float

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


def flip_rate_table(
    strengths: Sequence[int | None],
    flipped: Sequence[bool | None],
    levels: Sequence[int] = STRENGTH_LEVELS,
    confidence: float = 0.95,
) -> list[FlipRate]:
    """One :class:`FlipRate` per level in ``levels`` (empty levels have ``n = 0``, rate NaN).

    The interval is the Wilson score interval at ``confidence`` (scipy's
    ``binomtest(...).proportion_ci(method="wilson")``), which stays inside [0, 1] and is
    sensible for the small counts per level that strength binning produces.
    """
    counts = _counts(strengths, flipped)
    unknown = sorted(set(counts) - set(levels))
    if unknown:
        raise ValueError(f"strengths {unknown} are not among the levels {list(levels)}")
    rows = []
    for s in levels:
        n, flips = counts.get(s, (0, 0))
        low, high = wilson_interval(flips, n, confidence)
        rows.append(FlipRate(s, n, flips, flips / n if n else math.nan, low, high))
    return rows


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval for ``successes`` out of ``n`` (``(nan, nan)`` for n = 0)."""
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n == 0:
        return math.nan, math.nan
    ci = binomtest(successes, n).proportion_ci(confidence_level=confidence, method="wilson")
    return float(ci.low), float(ci.high)


def flip_rate_summary(
    rates: dict[int, float] | Sequence[FlipRate],
) -> dict[str, float | None]:
    """FR(3), FR(0) and FR(3) - FR(0): what Le et al., §4.4 calls responsive, robust and overall
    self-consistency (keys ``responsive_fr3``, ``robust_fr0``, ``overall``).

    Not :func:`credo.self_consistency` (agreement among n samples, Wu et al., App. J). A level
    without instances gives ``None`` (and so does the overall difference).
    """
    if isinstance(rates, dict):
        by_level = {s: r for s, r in rates.items() if not math.isnan(r)}
    else:
        by_level = {r.strength: r.rate for r in rates if r.n > 0}
    fr3, fr0 = by_level.get(3), by_level.get(0)
    overall = fr3 - fr0 if fr3 is not None and fr0 is not None else None
    return {"responsive_fr3": fr3, "robust_fr0": fr0, "overall": overall}


def _counts(
    strengths: Sequence[int | None], flipped: Sequence[bool | None]
) -> dict[int, tuple[int, int]]:
    """``{level: (n, flips)}`` over instances with both a strength and a flip."""
    if len(strengths) != len(flipped):
        raise ValueError(
            f"strengths has {len(strengths)} entries but flipped has {len(flipped)}"
        )
    counts: dict[int, tuple[int, int]] = {}
    for i, (s, f) in enumerate(zip(strengths, flipped, strict=True)):
        if s is None or f is None:
            continue
        if isinstance(s, bool) or int(s) != s:
            raise ValueError(f"strengths[{i}] = {s!r} is not an integer level")
        n, k = counts.get(int(s), (0, 0))
        counts[int(s)] = (n + 1, k + int(bool(f)))
    return counts


__all__ = [
    "STRENGTH_LEVELS",
    "FlipRate",
    "flip_rate_summary",
    "flip_rate_table",
    "flip_rates",
    "wilson_interval",
]

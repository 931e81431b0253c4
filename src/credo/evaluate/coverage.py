"""Coverage at risk α and degenerate scores: what a run says about acting on its answers.

**Coverage at risk α.** For each method and each ``α`` of ``evaluation.alphas``: the
share of items the method lets you answer when a threshold on its scores is certified to
keep the selective risk (the error rate among the answered items) at most ``α`` with
probability ``1 − δ`` (Learn then Test, Angelopoulos et al. 2021,
:mod:`credo.evaluate.certify`). It is estimated honestly from the run's own items:
``evaluation.splits`` random calibration/test halves, each certifying on one half and
counting on the other (:func:`coverage_at_risk`): the mean test
coverage, its standard deviation and 5–95% range, the share of splits whose test risk
exceeded ``α`` and the share that certified anything. The correctness that counts is the
correctness of the answer credo gives each item (``ItemResult.answer_correct``: the most
central original sample's, the modal answer under the indicator kernel; a grade counts
as correct at 0.5 or more, as ``credo certify`` does);
items without a score or a known correctness are left out. Below :data:`MIN_ITEMS` such
items nothing is split and the entry says so (``"note"``) instead of a number.

**Degenerate scores** (:func:`degenerate_reason`): a method whose scores cannot rank this
run's items, precisely either

* *concentrated*: at least :data:`CONCENTRATED_SHARE` (80%) of the items' scores lie within
  :data:`CONCENTRATED_RADIUS` (0.05) of one value, or
* *confident but wrong*: a score of at least :data:`HIGH_SCORE` (0.9) on more than half the
  items while fewer than :data:`LOW_ACCURACY` (60%) of those items' answers are correct.

Both are judged on the items with a score and a known correctness, from
:data:`MIN_ITEMS` of them on. The second is what C3 shows on every ≤ 1.5B model at
T = 1: the answers are diffuse with and without the prefixes, the two sample sets look
alike, MMD² ≈ 0 and C3 ≈ 1 on most items (Wu et al., §3; docs/results.md). "Their answers" are
those of the high-scored items: a method confident where it is right is not flagged even
when the run's accuracy is low.

:func:`coverage_at_risk` is the estimate on one score vector (also
``credo.coverage_at_risk``); :func:`risk_coverage_curve` gives the selective risk against
coverage over every threshold (Geifman & El-Yaniv 2017's risk–coverage curve), the
figure of report.html.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from credo.evaluate.binomial import check_level
from credo.evaluate.thresholds import (
    SELECT_FRACTION,
    certified_threshold,
    check_inputs,
    check_method,
)
from credo.methods.scoring import ItemResult

__all__ = [
    "CONCENTRATED_RADIUS",
    "CONCENTRATED_SHARE",
    "HIGH_SCORE",
    "LOW_ACCURACY",
    "MIN_ITEMS",
    "CoverageAtRisk",
    "alpha_key",
    "coverage_at_risk",
    "coverage_table",
    "degenerate_reason",
    "degenerate_table",
    "most_answers",
    "risk_coverage_curve",
]

MIN_ITEMS = 10
"""Fewest items (with a score and a known correctness) that coverage at risk is estimated
on: each split's calibration and test halves hold at least 5 items."""
CONCENTRATED_SHARE = 0.8
CONCENTRATED_RADIUS = 0.05
HIGH_SCORE = 0.9
LOW_ACCURACY = 0.6

ArrayLike = Sequence[float] | np.ndarray


@dataclass(frozen=True)
class CoverageAtRisk:
    """What :func:`coverage_at_risk` measured over ``splits`` calibration/test splits.

    ``coverage_mean``, ``coverage_std``, ``coverage_q05``, ``coverage_q95``: the share of
    test items accepted (0 where nothing was certified); ``exceed_rate``: share of splits
    whose accepted test items erred more often than ``alpha`` (a finite test half is noisy,
    so this can exceed ``delta`` somewhat even for a valid procedure); ``certified_rate``:
    share of splits where a threshold was certified; ``risk_mean``: mean test error rate
    among accepted items over the splits that accepted any; ``coverages``: each split's
    test coverage, in split order (the same ``seed`` and item count give the same splits,
    so two score vectors on the same items compare split by split).
    """

    coverage_mean: float
    coverage_std: float
    coverage_q05: float
    coverage_q95: float
    exceed_rate: float
    certified_rate: float
    risk_mean: float | None
    alpha: float
    delta: float | None
    method: str
    splits: int
    calibration_fraction: float
    coverages: tuple[float, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def coverage_at_risk(
    scores: ArrayLike,
    correct: ArrayLike,
    alpha: float = 0.1,
    delta: float = 0.1,
    *,
    method: str = "ltt",
    splits: int = 100,
    calibration_fraction: float = 0.5,
    seed: int = 0,
) -> CoverageAtRisk:
    """Coverage a certified threshold reaches on new items, estimated by splitting a run.

    ``splits`` times: a random ``calibration_fraction`` of the items calibrates
    :func:`credo.evaluate.certify.certify` (``method``, ``alpha``, ``delta``), the rest
    test it: the share of test items accepted (0 when nothing was certified) and whether
    their error rate exceeded ``alpha``. The items are assumed exchangeable; the
    calibration sets are smaller than the whole run, so the coverage is a slight
    underestimate of what all items certify.
    """
    s, wrong = check_inputs(scores, correct)
    if not 0.0 < calibration_fraction < 1.0:
        raise ValueError(f"calibration_fraction must lie in (0, 1); got {calibration_fraction!r}")
    if splits < 1:
        raise ValueError(f"splits must be at least 1; got {splits!r}")
    n_cal = round(calibration_fraction * s.size)
    if n_cal < 1 or n_cal >= s.size:
        raise ValueError(f"{s.size} items cannot be split {calibration_fraction:g} / rest")
    alpha = check_level(alpha, "alpha")
    delta = check_level(delta, "delta")
    check_method(method, SELECT_FRACTION)
    rng = np.random.default_rng(seed)
    cov = np.zeros(splits)
    risk = np.full(splits, np.nan)
    certified = np.zeros(splits, dtype=bool)
    for j in range(splits):  # certify's threshold on each split (not its message)
        perm = rng.permutation(s.size)
        cal, test = perm[:n_cal], perm[n_cal:]
        t, _ = certified_threshold(s[cal], wrong[cal], alpha, delta, method, SELECT_FRACTION,
                          int(rng.integers(2**31)))
        acc = np.zeros(test.size, dtype=bool) if t is None else s[test] >= t
        certified[j] = t is not None
        cov[j] = acc.mean()
        if acc.any():
            risk[j] = wrong[test][acc].mean()
    accepted_any = ~np.isnan(risk)
    return CoverageAtRisk(
        coverage_mean=float(cov.mean()),
        coverage_std=float(cov.std(ddof=1)) if splits > 1 else 0.0,
        coverage_q05=float(np.quantile(cov, 0.05)),
        coverage_q95=float(np.quantile(cov, 0.95)),
        exceed_rate=float(np.mean(accepted_any & (np.nan_to_num(risk) > alpha))),
        certified_rate=float(certified.mean()),
        risk_mean=float(np.nanmean(risk)) if accepted_any.any() else None,
        alpha=alpha,
        delta=None if method == "crc" else delta,
        method=method,
        splits=splits,
        calibration_fraction=calibration_fraction,
        coverages=tuple(float(x) for x in cov),
    )


def alpha_key(alpha: float) -> str:
    """metrics.json's key of a risk level: ``0.1`` -> ``"0.1"`` (``repr``-free, ``%g``)."""
    return f"{alpha:g}"


def labelled_rows(
    items: Sequence[ItemResult], method: str
) -> tuple[np.ndarray, np.ndarray]:
    """The method's scores and the 0/1 correctness of the answers credo gives, over the
    items with both (a grade counts as correct at 0.5 or more)."""
    rows = [(r.scores.get(method, math.nan), r.answer_correct) for r in items]
    keep = [(s, c) for s, c in rows if math.isfinite(s) and math.isfinite(c)]
    s = np.array([s for s, _ in keep], dtype=float)
    c = np.array([c >= 0.5 for _, c in keep], dtype=bool)
    return s, c


def coverage_table(
    items: Sequence[ItemResult],
    methods: Sequence[str],
    alphas: Sequence[float],
    delta: float,
    splits: int,
    seed: int = 0,
) -> dict[str, dict[str, dict[str, Any]]]:
    """Per method, per ``α`` (:func:`alpha_key`): coverage at risk over ``splits`` random
    half splits (module docstring): ``n_items``, ``coverage_mean``, ``coverage_std``,
    ``coverage_q05``, ``coverage_q95``, ``exceed_rate``, ``certified_rate``,
    ``risk_mean``, ``delta``, ``splits``, ``procedure``; or ``n_items`` and ``note`` when
    fewer than :data:`MIN_ITEMS` items have a score and a known correctness. Empty when
    no item's answer has a known correctness (a run without gold)."""
    if not any(math.isfinite(r.answer_correct) for r in items):
        return {}
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for name in methods:
        s, c = labelled_rows(items, name)
        out[name] = {alpha_key(a): _entry(s, c, a, delta, splits, seed) for a in alphas}
    return out


def _entry(s: np.ndarray, c: np.ndarray, alpha: float, delta: float, splits: int,
           seed: int) -> dict[str, Any]:
    if s.size < MIN_ITEMS:
        return {"n_items": int(s.size),
                "note": f"too few items to split ({s.size} with a score and a known "
                        f"correctness; {MIN_ITEMS} needed)"}
    r = coverage_at_risk(s, c, alpha, delta, splits=splits, seed=seed)
    return {
        "n_items": int(s.size),
        "coverage_mean": r.coverage_mean,
        "coverage_std": r.coverage_std,
        "coverage_q05": r.coverage_q05,
        "coverage_q95": r.coverage_q95,
        "exceed_rate": r.exceed_rate,
        "certified_rate": r.certified_rate,
        "risk_mean": r.risk_mean,
        "delta": r.delta,
        "splits": r.splits,
        "procedure": r.method,
    }


def most_answers(
    coverage: Mapping[str, Mapping[str, Mapping[str, Any]]], alpha: float
) -> tuple[str, dict[str, Any]] | None:
    """The method with the largest mean coverage at ``alpha`` (the first on ties) and its
    entry; None when no method has a number there or every coverage is 0."""
    key = alpha_key(alpha)
    found = [(m, dict(d[key])) for m, d in coverage.items()
             if key in d and "coverage_mean" in d[key]]
    if not found:
        return None
    best = max(found, key=lambda x: x[1]["coverage_mean"])  # max keeps the first on ties
    return best if best[1]["coverage_mean"] > 0 else None


def degenerate_reason(scores: Sequence[float] | np.ndarray, correct: Sequence[float] |
                      np.ndarray, method: str = "") -> str | None:
    """Why ``scores`` are degenerate on these items (module docstring), or None.

    ``scores``: one score in [0, 1] per item; ``correct``: whether each item's answer is
    correct (0/1). C3's high-score case names its cause (answers diffuse in both sample
    sets, MMD² ≈ 0)."""
    s = np.asarray(scores, dtype=float)
    c = np.asarray(correct, dtype=float)
    if s.size == 0:
        return None
    srt = np.sort(s)
    within = np.searchsorted(srt, srt + 2 * CONCENTRATED_RADIUS + 1e-12, side="right")
    counts = within - np.arange(srt.size)
    j = int(np.argmax(counts))
    share = counts[j] / s.size
    high = s >= HIGH_SCORE
    if high.mean() > 0.5 and c[high].mean() < LOW_ACCURACY:
        why = (f"score ≥ {HIGH_SCORE:g} on {high.mean():.0%} of items while only "
               f"{c[high].mean():.0%} of their answers are correct")
        if method.startswith("c3"):
            why += ("; answers diffuse in both conditions, MMD² ≈ 0 (as every ≤ 1.5B model "
                    "shows at T = 1)")
        return why
    if share >= CONCENTRATED_SHARE:
        centre = (srt[j] + srt[j + counts[j] - 1]) / 2
        return (f"{share:.0%} of items score within {CONCENTRATED_RADIUS:g} of "
                f"{centre:.2f}: the scores barely separate the items")
    return None


def degenerate_table(items: Sequence[ItemResult], methods: Sequence[str]) -> dict[str, str]:
    """Per method whose scores are degenerate on this run's labelled items, the reason
    (:func:`degenerate_reason`); empty for a run without gold. A method with fewer than
    :data:`MIN_ITEMS` labelled items is not judged (a share of a handful says little)."""
    out = {}
    for name in methods:
        s, c = labelled_rows(items, name)
        if s.size < MIN_ITEMS:
            continue
        why = degenerate_reason(s, c, name)
        if why is not None:
            out[name] = why
    return out


def risk_coverage_curve(
    scores: Sequence[float] | np.ndarray, correct: Sequence[float] | np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Coverage and selective risk at every threshold ``t`` (each distinct score, highest
    first): the share of items with ``score >= t`` and the error rate among them (Geifman
    & El-Yaniv 2017). Ties enter together."""
    s = np.asarray(scores, dtype=float)
    wrong = ~np.asarray(correct, dtype=bool)
    if s.size == 0:
        return np.zeros(0), np.zeros(0)
    order = np.argsort(-s, kind="stable")
    ss = s[order]
    last = np.r_[ss[1:] != ss[:-1], True]
    m = np.arange(1, s.size + 1)[last]
    k = np.cumsum(wrong[order])[last]
    return m / s.size, k / m

"""Agreement of a strength measure with human strength labels (Le et al., §3.4, Table 2).

Pearson and Spearman correlations for every measure; Cohen's linearly weighted kappa
(Cohen 1968) only for a measure on the labels' own 0-3 scale (the LLM judge), as in the
paper: cosine distance and change in surprisal are continuous.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import cohen_kappa_score


def linear_kappa(
    a: Sequence[int], b: Sequence[int], labels: Sequence[int] | None = None
) -> float:
    """Cohen's kappa with linear weights, w_ij = |i - j| / (k - 1), between two raters.

    kappa = 1 - sum(w * O) / sum(w * E), with O the observed and E the chance-expected
    (outer product of the marginals) contingency tables. Computed by scikit-learn's
    ``cohen_kappa_score(weights="linear")``. ``labels`` fixes the ordered scale; by
    default it is every integer from the smallest to the largest value seen, so that a
    level neither rater used still counts in the distances (scikit-learn alone would
    index only the values present, making 1 and 3 adjacent when nobody chose 2).
    """
    if len(a) != len(b):
        raise ValueError(f"the raters have {len(a)} and {len(b)} ratings")
    if len(a) == 0:
        raise ValueError("linear_kappa needs at least one pair of ratings")
    for name, values in (("a", a), ("b", b)):
        for i, v in enumerate(values):
            if v is None or isinstance(v, bool) or int(v) != v:
                raise ValueError(f"{name}[{i}] = {v!r} is not an integer rating")
    if labels is None:
        lo = int(min(min(a), min(b)))
        hi = int(max(max(a), max(b)))
        labels = list(range(lo, hi + 1))
    if len(labels) < 2:
        return 1.0  # a single-level scale: every pair agrees
    return float(
        cohen_kappa_score(
            [int(x) for x in a], [int(x) for x in b], labels=list(labels), weights="linear"
        )
    )


@dataclass(frozen=True)
class Agreement:
    """Pearson r, Spearman rho and (for a 0-3 measure) linear kappa over ``n`` pairs."""

    measure: str
    n: int
    pearson: float
    spearman: float
    kappa: float | None
    skipped: int = 0

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def agreement(
    measure: str,
    predicted: Sequence[float | None],
    labels: Sequence[int],
    *,
    categorical: bool | None = None,
    scale: Sequence[int] = (0, 1, 2, 3),
) -> Agreement:
    """Agreement between a measure's values and the human labels (Le et al., §3.4).

    Pairs whose predicted value is ``None`` or NaN (an unparsable judge reply, a backend
    without logprobs) are skipped and counted in ``skipped``. ``categorical`` (default:
    every value is an integer on ``scale``) decides whether kappa is computed. With fewer
    than two pairs or a constant side, the correlations are NaN.
    """
    if len(predicted) != len(labels):
        raise ValueError(f"{len(predicted)} predicted values for {len(labels)} labels")
    pairs = [
        (float(p), int(y))
        for p, y in zip(predicted, labels, strict=True)
        if p is not None and not math.isnan(float(p))
    ]
    skipped = len(labels) - len(pairs)
    x = np.array([p for p, _ in pairs], dtype=float)
    y = np.array([t for _, t in pairs], dtype=float)
    if categorical is None:
        categorical = bool(pairs) and all(p.is_integer() and int(p) in scale for p, _ in pairs)
    pearson = spearman = math.nan
    if len(pairs) >= 2 and np.ptp(x) > 0 and np.ptp(y) > 0:
        pearson = float(pearsonr(x, y).statistic)
        spearman = float(spearmanr(x, y).statistic)
    kappa = None
    if categorical and pairs:
        kappa = linear_kappa([int(p) for p, _ in pairs], [t for _, t in pairs], labels=scale)
    return Agreement(measure, len(pairs), pearson, spearman, kappa, skipped)


__all__ = ["Agreement", "agreement", "linear_kappa"]

"""Bootstrap confidence intervals, calibration correlation and polarisation (Müller et al.,
§3.7, §4).

Müller et al., §3.7: "we estimate bootstrap confidence intervals at the 95% confidence level over
calibration curves and representative ECE values using 1000 resamples". The resampling is
scipy's (:func:`scipy.stats.bootstrap`, paired over items, percentile intervals). The
named metrics are those of the registry (:mod:`credo.evaluate.registry`):
ECE, MCE, Brier, AUROC, AUPRC-P/N, AUARC and PRR are evaluated on the same resample
indices by the weighted engine of :mod:`credo.evaluate.weighted`, all metrics of one
method from one set of weights (:func:`bootstrap_cis`); a registered metric without a
weighted form gets its row function on the same resamples (:func:`registry_bootstrap`);
any other metric callable goes through scipy's loop.

Polarisation (Müller et al., §4, Fig. A.2 tables) is read from the normalised entropy of the bucket
counts of a calibration plot: 1 when scores spread evenly over the bins, 0 when every
score falls into one bin (a collapsed, polarised distribution).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
from scipy import stats

from credo.evaluate import registry
from credo.evaluate.binning import bin_index, number_of_bins
from credo.evaluate.weighted import (
    WeightedSample,
    resample_indices,
    weighted_bootstrap,
)
from credo.ties import settle_scores

ArrayLike = Sequence[float] | np.ndarray
Metric = Callable[[np.ndarray, np.ndarray], float]

#: Metrics a name can select in :func:`bootstrap_ci`: the registry of
#: :mod:`credo.evaluate.registry`, each a checked one-sample function
#: ``(scores, targets) -> float``; targets are the quality (p̄ or 0/1 correctness) for
#: ECE, MCE, AUARC and PRR, 0/1 labels for the rest (a metric's ``target``).
NAMED_METRICS: Mapping[str, registry.Metric] = registry.METRICS
#: The metrics with a bootstrap CI (``bootstrap=True``), in the registry's order (live).
CI_METRICS = registry.names(bootstrap=True)


@dataclass(frozen=True)
class RowMetric:
    """A metric that evaluates every row of (B, N) score and target matrices in one call.

    ``rows(scores, targets) -> (B,)`` is one of the row functions of
    :mod:`credo.evaluate.metrics`; :func:`bootstrap_distribution` hands it all resamples
    at once instead of calling a function per resample. Called on one (N,) pair it gives
    the metric's value, so a point estimate and its interval share the implementation.
    """

    rows: Callable[[np.ndarray, np.ndarray], np.ndarray]

    def __call__(self, scores: ArrayLike, targets: ArrayLike) -> float:
        s = np.asarray(scores, dtype=float)
        t = np.asarray(targets, dtype=float)
        return float(self.rows(s[None, :], t[None, :])[0])


def bootstrap_ci(
    metric: str | Metric,
    scores: ArrayLike,
    targets: ArrayLike,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of ``metric(scores, targets)`` (Müller et
    al., §3.7).

    Items are resampled with replacement, scores and targets together (scipy's paired
    bootstrap), ``n_resamples`` times. ``metric`` is a callable ``(scores, targets) ->
    float`` or the name of a registered metric (:mod:`credo.evaluate.registry`): targets
    are the per-item performance in [0, 1] for a ``p_bar`` metric (``"ece"``, ``"mce"``,
    ``"auarc"``, ``"prr"``), 0/1 labels for a ``label`` one (``"brier"``, ``"auroc"``,
    ``"auprc_pos"``, ``"auprc_neg"``); a name runs on :func:`registry_bootstrap` (10
    ECE/MCE bins; see :func:`bootstrap_cis` for other bins and several metrics at once).

    A resample on which the metric is undefined (NaN: e.g. AUROC on a resample holding
    one class) is left out of the percentiles; if more than half are undefined the
    interval is ``(nan, nan)``.

    Returns
    -------
    (low, high) : the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` percentiles.
    """
    _resolve(metric)
    s, t = _paired(scores, targets, "targets")
    _check_resampling(n_resamples, confidence)
    if s.size < 2:
        return (math.nan, math.nan)
    dist = bootstrap_distribution(metric, s, t, n_resamples, seed)
    return percentile_interval(dist, confidence)


def bootstrap_cis(
    scores: ArrayLike,
    quality: ArrayLike,
    labels: ArrayLike | None = None,
    metrics: Sequence[str] = CI_METRICS,
    *,
    n_bins: int = 10,
    levels: ArrayLike | None = None,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    clusters: ArrayLike | None = None,
) -> dict[str, tuple[float, float]]:
    """Percentile bootstrap CIs of several metrics of one method, from the same resamples.

    Every resample (the indices of :func:`bootstrap_ci` with the same ``seed``) is
    evaluated for all ``metrics`` (by default every registered metric with a CI) at once
    by :func:`registry_bootstrap`. ``quality`` is the target of the ``p_bar`` metrics
    (ECE, MCE, AUARC, PRR: p̄ at item level, 0/1 correctness per generation); ``labels``
    (0/1) that of the ``label`` metrics (Brier, AUROC, AUPRC-P/N), by default ``quality``
    itself. ECE and MCE use ``n_bins`` equal-width bins or one per discrete
    level. A metric undefined on more than half of the resamples gets ``(nan, nan)``.

    ``clusters``: one cluster id per row (the question a generation answers). Each
    resample then draws clusters with replacement and keeps all their rows (the cluster
    bootstrap of :mod:`credo.evaluate.weighted`): rows of one question are not
    independent, and resampling them one by one gives intervals too narrow. Fewer than
    2 clusters: ``(nan, nan)``.
    """
    s, q = _paired(scores, quality, "quality")
    if labels is None:
        labels = q
    _, y = _paired(s, labels, "labels")
    _check_resampling(n_resamples, confidence)
    unknown = set(metrics) - set(CI_METRICS)
    if unknown:
        raise ValueError(f"unknown metrics {sorted(unknown)}; known: {list(CI_METRICS)}")
    units = s.size if clusters is None else np.unique(_clusters(clusters, s)).size
    if units < 2:
        return {m: (math.nan, math.nan) for m in metrics}
    dist = registry_bootstrap(s, q, y, metrics, n_resamples, seed, n_bins=n_bins,
                              levels=levels, clusters=clusters)
    return {m: percentile_interval(dist[m], confidence) for m in metrics}


def registry_bootstrap(
    scores: np.ndarray,
    quality: np.ndarray,
    labels: np.ndarray | None,
    metrics: Sequence[str],
    n_resamples: int,
    seed: int = 0,
    *,
    n_bins: int = 10,
    levels: ArrayLike | None = None,
    clusters: ArrayLike | None = None,
) -> dict[str, np.ndarray]:
    """The ``n_resamples`` values of each registered metric of ``metrics`` on the resamples
    of :func:`credo.evaluate.weighted.resample_indices` (Müller et al., §3.7).

    Metrics registered ``weighted`` run on the weighted engine
    (:func:`~credo.evaluate.weighted.weighted_bootstrap`); any other gets its row function
    on the resampled (batch, N) matrices, batch by batch, on the same indices. Targets:
    ``labels`` for label metrics (required for them), ``quality`` for the rest.
    ``clusters``: the cluster of each row; a resample draws clusters (with all their
    rows) instead of rows (:func:`bootstrap_cis`).
    """
    chosen = [registry.get(m) for m in metrics]
    fast = [m.name for m in chosen if m.weighted]
    out: dict[str, np.ndarray] = {}
    ids = None if clusters is None else _clusters(clusters, scores)
    if fast:
        sample = WeightedSample(scores, quality, labels, n_bins=n_bins, levels=levels,
                                clusters=ids)
        out.update(weighted_bootstrap(sample, fast, n_resamples, seed))
    rest = [m for m in chosen if not m.weighted]
    if rest:
        if labels is None and any(m.target == "label" for m in rest):
            raise ValueError(f"{[m.name for m in rest if m.target == 'label']} need labels")
        parts: dict[str, list[np.ndarray]] = {m.name: [] for m in rest}
        members = _members(ids) if ids is not None else None
        units = scores.size if members is None else len(members)
        for idx in resample_indices(units, n_resamples, seed):
            if members is not None:  # rows of each drawn cluster: one resample at a time
                for draw in idx:
                    rows = np.concatenate([members[c] for c in draw])
                    for m in rest:
                        t = m.target_of(quality, labels)  # type: ignore[arg-type]
                        parts[m.name].append(m.values(scores[rows][None, :],
                                                      t[rows][None, :], n_bins, levels))
                continue
            for m in rest:
                t = m.target_of(quality, labels)  # type: ignore[arg-type]
                parts[m.name].append(m.values(scores[idx], t[idx], n_bins, levels))
        out.update({k: np.concatenate(v) if v else np.zeros(0) for k, v in parts.items()})
    return {m: out[m] for m in metrics}


def percentile_interval(dist: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """The two-sided percentile interval of a bootstrap distribution, NaN resamples left
    out; ``(nan, nan)`` when more than half are NaN (Müller et al., §3.7)."""
    finite = dist[np.isfinite(dist)]
    if finite.size == 0 or finite.size * 2 < dist.size:
        return (math.nan, math.nan)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.percentile(finite, [100 * alpha, 100 * (1 - alpha)])
    return (float(low), float(high))


def bootstrap_distribution(
    metric: str | Metric,
    scores: ArrayLike,
    targets: ArrayLike,
    n_resamples: int = 1000,
    seed: int = 0,
) -> np.ndarray:
    """The ``n_resamples`` values of ``metric`` on paired item resamples (NaN where undefined).

    A metric name runs on :func:`registry_bootstrap` (targets as in
    :func:`bootstrap_ci`); a :class:`RowMetric` gets all resamples in one call, as (B, N)
    matrices; any other callable is called once per resample. The resamples are the same
    in all three cases.
    """
    fn = _resolve(metric)
    s = np.asarray(scores, dtype=float)
    t = np.asarray(targets, dtype=float)
    if isinstance(metric, str):
        labels = t if registry.get(metric).target == "label" else None
        return registry_bootstrap(s, t, labels, [metric], n_resamples, seed)[metric]
    rows = fn.rows if isinstance(fn, RowMetric) else None

    def statistic(a: np.ndarray, b: np.ndarray, axis: int = -1) -> float | np.ndarray:
        if rows is not None:
            return rows(np.atleast_2d(a), np.atleast_2d(b))
        return fn(a, b)

    # Only the resampled values are used (percentiles taken above, NaN-aware), so scipy's
    # own interval and its warnings about undefined resamples are beside the point.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = stats.bootstrap(
            (s, t),
            statistic,
            paired=True,
            vectorized=rows is not None,
            n_resamples=n_resamples,
            method="percentile",
            random_state=np.random.default_rng(seed),
        )
    return np.asarray(res.bootstrap_distribution, dtype=float)


def calibration_curve(
    scores: ArrayLike, correct: ArrayLike, n_bins: int = 10, levels: ArrayLike | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-bin (mean score, mean correctness, count) of a calibration plot.

    The bins of :func:`credo.evaluate.binning.bin_index`: equal-width as in
    :func:`credo.evaluate.metrics.ece`, or one bin per discrete level (nearest level) when
    ``levels`` is given (Müller et al., App. A.11.3). Empty bins have NaN means and count 0.
    """
    s = np.asarray(scores, dtype=float)
    c = np.asarray(correct, dtype=float)
    if s.shape != c.shape or s.ndim != 1:
        raise ValueError(
            f"scores and correct must be 1-d of equal length, got {s.shape}, {c.shape}"
        )
    k = number_of_bins(n_bins, levels)
    bins = bin_index(s, n_bins, levels)
    counts = np.bincount(bins, minlength=k).astype(int)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_s = np.bincount(bins, weights=s, minlength=k) / counts
        mean_c = np.bincount(bins, weights=c, minlength=k) / counts
    return mean_s, mean_c, counts


def calibration_correlation(
    scores: ArrayLike, correct: ArrayLike, n_bins: int = 10, levels: ArrayLike | None = None
) -> float:
    """Pearson calibration correlation (Müller et al., Fig. 4): Pearson r between the mean score and
    the accuracy of the non-empty bins of the calibration plot (scipy ``pearsonr``).

    1 means accuracy rises linearly with confidence across bins; NaN when fewer than
    three bins are occupied or either side is constant.
    """
    mean_s, mean_c, counts = calibration_curve(scores, correct, n_bins, levels)
    occupied = counts > 0
    if occupied.sum() < 3:
        return math.nan
    x, y = mean_s[occupied], mean_c[occupied]
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    return float(stats.pearsonr(x, y).statistic)


def polarisation_entropy(
    scores: ArrayLike, n_bins: int = 10, levels: ArrayLike | None = None
) -> float:
    """Normalised entropy of the bin counts, ``H(counts / N) / log(B)`` (Müller et al., Fig. A.2).

    ``scipy.stats.entropy`` of the counts of the equal-width bins (or discrete levels),
    divided by the entropy of the uniform distribution over the ``B`` bins. 0 = every
    score in one bin (polarised), 1 = scores spread evenly. NaN for no scores.
    """
    s = np.asarray(scores, dtype=float)
    if s.size == 0:
        return math.nan
    _, _, counts = calibration_curve(s, np.zeros_like(s), n_bins, levels)
    if counts.size < 2:
        return math.nan
    return float(stats.entropy(counts) / math.log(counts.size))


def row_metrics(n_bins: int = 10) -> dict[str, RowMetric]:
    """The metrics of :data:`NAMED_METRICS` as :class:`RowMetric` functions of (scores,
    targets), in the registry's order (:mod:`credo.evaluate.registry`).

    The row functions of :mod:`credo.evaluate.metrics` (the one implementation of each
    formula: ECE and MCE with ``n_bins`` equal-width bins, scikit-learn's ROC, average
    precision and Brier score) without the input checks of the public metrics. Targets
    are p̄ for ECE, MCE, AUARC and PRR and 0/1 labels for the rest (Wu et al., App. E.2); NaN
    where undefined.
    """
    return {
        m.name: RowMetric(partial(m.values, n_bins=n_bins) if m.binned else m.rows)
        for m in registry.registered()
    }


def _clusters(clusters: ArrayLike, scores: np.ndarray) -> np.ndarray:
    """The cluster ids as an array of the scores' shape, or a ValueError."""
    ids = np.asarray(clusters)
    if ids.shape != np.shape(scores):
        raise ValueError(f"clusters must give one cluster per score, got shape {ids.shape} "
                         f"for {np.shape(scores)}")
    return ids


def _members(ids: np.ndarray) -> list[np.ndarray]:
    """The rows of each cluster, clusters in the order of their sorted ids (the order
    :class:`~credo.evaluate.weighted.WeightedSample` numbers them)."""
    _, inverse = np.unique(ids, return_inverse=True)
    return [np.flatnonzero(inverse == c) for c in range(int(inverse.max()) + 1)]


def _paired(a: ArrayLike, b: ArrayLike, name: str) -> tuple[np.ndarray, np.ndarray]:
    """The scores ``a`` (settled: :func:`credo.ties.settle`) and ``b``, both 1-d of one
    length."""
    s = settle_scores(np.asarray(a, dtype=float))
    t = np.asarray(b, dtype=float)
    if s.ndim != 1 or t.ndim != 1 or s.shape != t.shape:
        raise ValueError(f"scores and {name} must be 1-d of equal length, got {s.shape}, "
                         f"{t.shape}")
    return s, t


def _check_resampling(n_resamples: int, confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")


def _resolve(metric: str | Metric) -> Metric:
    if callable(metric):
        return metric
    return registry.get(metric)

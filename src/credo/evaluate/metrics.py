"""Calibration, ranking and selective-prediction metrics (Wu et al., App. E.2; LM-Polygraph).

Per benchmark item ``i`` the evaluation has a score ``s_i`` in [0, 1] (a method's
credibility) and an empirical performance ``p̄_i`` (mean correctness over the ``n``
original samples). Ranking metrics use the binary label ``y_i = 1[p̄_i >= 0.5]``; the
rejection metrics (AUARC, PRR) use the quality ``p̄_i`` itself (Wu et al., App. E.2's per-item
performance). Per generation, label and quality are the 0/1 correctness.

ROC and precision-recall areas and the Brier score come from scikit-learn; ECE, MCE and
the accuracy-rejection area are written here because scikit-learn does not provide them,
with the bins of :mod:`credo.evaluate.binning`.

Each formula has one implementation, vectorised over the rows of a (B, N) matrix so that
bootstrap resamples are evaluated together: :func:`ece_rows`, :func:`mce_rows`,
:func:`auroc_rows`, :func:`average_precision_rows`, :func:`brier_rows`,
:func:`auarc_rows`, :func:`prr_rows`. The public one-sample functions (:func:`ece`,
:func:`auroc`, ...) and the registry's :class:`~credo.evaluate.registry.Metric` check
their inputs once, with the one validator :func:`metric_inputs`, and call them on one row
(:func:`one_row`); the paired tests and the generic bootstrap call the row functions on
inputs already checked. The bootstrap of the named metrics runs on the weighted engine of
:mod:`credo.evaluate.weighted`, tested equal to these functions on every resample.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np
from sklearn import config_context
from sklearn.metrics import average_precision_score, brier_score_loss, roc_auc_score

from credo.evaluate.binning import bin_index, number_of_bins
from credo.ties import settle_scores

ArrayLike = Sequence[float] | np.ndarray


def labels_from_performance(performance: ArrayLike, threshold: float = 0.5) -> np.ndarray:
    """Binary labels ``y_i = 1[p̄_i >= threshold]`` (Wu et al., App. E.2)."""
    perf = as_unit_interval(performance, "performance")
    return (perf >= threshold).astype(int)


def ece(scores: ArrayLike, performance: ArrayLike, n_bins: int = 10) -> float:
    """Expected Calibration Error over equal-width bins (Wu et al., App. E.2).

    ``ECE = sum_b |I_b| / N * |perf(I_b) - score(I_b)|`` where the ``n_bins`` bins split
    [0, 1] into equal widths, a score ``s`` falls in bin ``min(floor(s * B), B - 1)``
    (so 1.0 lies in the last bin), ``perf(I_b)`` is the mean performance and
    ``score(I_b)`` the mean score of the items in bin ``b``. Empty bins contribute 0.

    Parameters
    ----------
    scores : sequence of float in [0, 1], shape (N,)
    performance : sequence of float in [0, 1], shape (N,)
        Per-item performance, e.g. mean correctness ``p̄_i``, or 0/1 correctness.
    n_bins : int >= 1

    Returns
    -------
    float in [0, 1]; NaN when N == 0.
    """
    s, p = metric_inputs(scores, performance)
    number_of_bins(n_bins)
    return one_row(ece_rows, s, p, n_bins=n_bins)


def ece_discrete(scores: ArrayLike, performance: ArrayLike, levels: ArrayLike) -> float:
    """ECE with one bin per discrete score level (Müller et al., App. A.11.3).

    For scores that take a fixed set of values (Answer Consistency with n = 10 samples
    takes the 11 values 0, 0.1, ..., 1), each item is put in the bin of the nearest
    level and the usual weighted gap is summed.
    """
    s, p = metric_inputs(scores, performance)
    number_of_bins(levels=levels)
    return one_row(ece_rows, s, p, levels=levels)


def auroc(scores: ArrayLike, labels: ArrayLike) -> float:
    """Area under the ROC curve of ``scores`` separating ``labels`` 1 from 0.

    scikit-learn's ``roc_auc_score``. NaN (with a warning) when only one class is
    present, where the area is undefined.
    """
    s, y = metric_inputs(scores, labels, "label")
    if np.unique(y).size < 2:
        _warn_one_class("AUROC")
        return math.nan
    return one_row(auroc_rows, s, y)


def auprc_pos(scores: ArrayLike, labels: ArrayLike) -> float:
    """AUPRC-P: average precision for detecting correct items (label 1) by ``scores``.

    scikit-learn's ``average_precision_score(labels, scores)`` (Wu et al., App. E.2). NaN when
    there is no positive item.
    """
    s, y = metric_inputs(scores, labels, "label")
    if y.sum() == 0:
        _warn_one_class("AUPRC-P")
        return math.nan
    return average_precision(s, y)


def auprc_neg(scores: ArrayLike, labels: ArrayLike) -> float:
    """AUPRC-N: average precision for detecting incorrect items, labels ``1 - y`` and
    scores ``1 - s`` (Wu et al., App. E.2). NaN when there is no negative item."""
    s, y = metric_inputs(scores, labels, "label")
    if (1 - y).sum() == 0:
        _warn_one_class("AUPRC-N")
        return math.nan
    return one_row(auprc_neg_rows, s, y)


def mce(
    scores: ArrayLike, performance: ArrayLike, n_bins: int = 10, levels: ArrayLike | None = None
) -> float:
    """Maximum Calibration Error: the largest gap over the non-empty bins.

    ``MCE = max_{b : |I_b| > 0} |perf(I_b) − score(I_b)|`` with the bins of :func:`ece`
    (``n_bins`` equal-width bins, or one per discrete level when ``levels`` is given;
    :mod:`credo.evaluate.binning`). Naeini et al. (AAAI 2015) define it beside ECE.

    Returns
    -------
    float in [0, 1]; NaN when N == 0.
    """
    s, p = metric_inputs(scores, performance)
    number_of_bins(n_bins, levels)
    return one_row(mce_rows, s, p, n_bins=n_bins, levels=levels)


def brier(scores: ArrayLike, labels: ArrayLike) -> float:
    """Brier score ``1/N Σ_i (s_i − y_i)²`` of confidences against 0/1 labels (lower is better).

    scikit-learn's ``brier_score_loss(labels, scores)``. At item level the labels are
    ``1[p̄ ≥ 0.5]``, per generation the generation's correctness. NaN when N == 0.
    """
    s, y = metric_inputs(scores, labels, "label")
    return one_row(brier_rows, s, y)


def auarc(scores: ArrayLike, quality: ArrayLike) -> float:
    """Area under the accuracy-rejection curve (Nadeem et al. 2009; LM-Polygraph).

    Items are rejected lowest score first; at rejection level ``j/N``
    (``j = 0, 1, …, N − 1``) the ``N − j`` items with the highest scores are kept and
    their mean quality is read off. AUARC is the mean of those N values,
    ``1/N Σ_{k=1..N} Q_k / k`` with ``Q_k`` the total quality of the top k. Tied scores
    cannot be ordered, so the items of a tie group share the group's mean quality (the
    expected curve over every order of the ties). Quality: p̄ at item level, 0/1
    correctness per generation.

    Returns
    -------
    float in [0, 1]; NaN when N == 0.
    """
    s, q = metric_inputs(scores, quality, name="quality")
    return one_row(auarc_rows, s, q)


def prr(scores: ArrayLike, quality: ArrayLike) -> float:
    """Prediction rejection ratio, LM-Polygraph's headline metric (Malinin et al. 2017;
    Vashurin et al., TACL 2025).

    ``PRR = (AUARC(s) − AUARC(random)) / (AUARC(oracle) − AUARC(random))`` where
    AUARC(random) is the mean quality (a random order keeps the mean at every level) and
    the oracle rejects the lowest-quality items first (``AUARC(quality, quality)``).
    1 = the scores order the items as well as their quality, 0 = no better than chance,
    negative = worse: at most 1, unbounded below (one good item among N ranked last gives
    about −N / ln N). NaN when N == 0 or every item has the same quality (the oracle
    equals random), or the quality varies so little (1e−16) that in floating point the
    oracle's area does not exceed random's (:func:`prr_ratio`).
    """
    s, q = metric_inputs(scores, quality, name="quality")
    return one_row(prr_rows, s, q)


# ----------------------------------------------------------- row-vectorised formulas


def ece_rows(
    scores: np.ndarray,
    performance: np.ndarray,
    n_bins: int = 10,
    levels: ArrayLike | None = None,
) -> np.ndarray:
    """ECE of every row of a (B, N) score matrix (Wu et al., App. E.2; Müller et al., App. A.11.3).

    Per row, ``Σ_b |Σ_{i∈b} p̄_i − Σ_{i∈b} s_i| / N``, which equals the weighted gap
    ``Σ_b |I_b|/N · |mean p̄ − mean s|`` of :func:`ece`; bins from
    :func:`credo.evaluate.binning.bin_index` (equal-width, or the nearest of ``levels``).
    No range checks: inputs are checked by the caller. NaN for every row when N == 0.
    """
    binned = _bin_sums(scores, performance, n_bins, levels)
    if binned is None:
        return np.full(np.shape(scores)[0], np.nan)
    gap, _ = binned
    return np.abs(gap).sum(axis=1) / np.shape(scores)[1]


def mce_rows(
    scores: np.ndarray,
    performance: np.ndarray,
    n_bins: int = 10,
    levels: ArrayLike | None = None,
) -> np.ndarray:
    """MCE of every row of a (B, N) score matrix: ``max_b |Σ_{i∈b} (p̄_i − s_i)| / |I_b|``
    over the non-empty bins of :func:`credo.evaluate.binning.bin_index`. No range
    checks. NaN for every row when N == 0."""
    binned = _bin_sums(scores, performance, n_bins, levels, counts=True)
    if binned is None:
        return np.full(np.shape(scores)[0], np.nan)
    gap, count = binned
    assert count is not None
    with np.errstate(invalid="ignore", divide="ignore"):
        per_bin = np.where(count > 0, np.abs(gap) / count, -np.inf)
    return per_bin.max(axis=1)


def brier_rows(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Brier score of every row of a (B, N) score matrix against 0/1 labels:
    scikit-learn's ``brier_score_loss`` per row. NaN for every row when N == 0."""
    s, y = _rows(scores, labels)
    if s.shape[1] == 0:
        return np.full(s.shape[0], np.nan)
    with config_context(skip_parameter_validation=True):
        return np.array([brier_score_loss(yy, ss) for ss, yy in zip(s, y, strict=True)])


def auarc_rows(scores: np.ndarray, quality: np.ndarray) -> np.ndarray:
    """AUARC of every row of a (B, N) score matrix against the (B, N) quality (see
    :func:`auarc`): per row, sort by score (descending), give each tie group its mean
    quality, and average the running mean quality ``Q_k / k`` over k = 1..N. No range
    checks. NaN for every row when N == 0."""
    s = np.asarray(scores, dtype=float)
    q = np.asarray(quality, dtype=float)
    if s.shape != q.shape or s.ndim != 2:
        raise ValueError(f"scores and quality must be equal (B, N) matrices, got {s.shape}")
    rows, n = s.shape
    if n == 0:
        return np.full(rows, np.nan)
    order = np.argsort(-s, axis=1, kind="stable")
    s_sorted = np.take_along_axis(s, order, axis=1)
    q_sorted = np.take_along_axis(q, order, axis=1)
    new_group = np.ones_like(s_sorted, dtype=bool)
    new_group[:, 1:] = s_sorted[:, 1:] != s_sorted[:, :-1]
    group = np.cumsum(new_group.ravel()) - 1  # tie groups, numbered across the rows
    size = np.bincount(group)
    tied = (np.bincount(group, weights=q_sorted.ravel()) / size)[group].reshape(rows, n)
    return (np.cumsum(tied, axis=1) / np.arange(1, n + 1)).mean(axis=1)


def prr_rows(scores: np.ndarray, quality: np.ndarray) -> np.ndarray:
    """PRR of every row (see :func:`prr`): ``(AUARC − mean q) / (AUARC(q, q) − mean q)``,
    NaN for rows whose quality is constant. No range checks."""
    s = np.asarray(scores, dtype=float)
    q = np.asarray(quality, dtype=float)
    model = auarc_rows(s, q)
    if s.shape[1] == 0:
        return model
    oracle = auarc_rows(q, q)
    random = q.mean(axis=1)
    constant = q.max(axis=1) == q.min(axis=1)
    return np.where(constant, np.nan, prr_ratio(model, oracle, random))


def prr_ratio(model: np.ndarray, oracle: np.ndarray, random: np.ndarray) -> np.ndarray:
    """``(model − random) / (oracle − random)`` capped at 1, NaN where ``oracle ≤ random``.

    AUARC(s) ≤ AUARC(oracle) for every s, so PRR ≤ 1, with equality when the scores order
    the items as the quality does, and the oracle beats random whenever the quality
    varies. The areas are summed along different paths; on quality that barely varies
    (differences of 1e−9) their differences are rounding noise, which could pass 1 or
    leave the oracle no better than random: there PRR is capped, or NaN.
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = (model - random) / (oracle - random)
    return np.where(oracle > random, np.minimum(ratio, 1.0), np.nan)


def auroc_rows(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """AUROC of every row of a (B, N) score matrix against the (B, N) 0/1 labels.

    scikit-learn's ``roc_auc_score`` of each row (ties count one half), computed in one
    call over the rows holding both classes (multilabel, ``average=None``: the same
    binary computation per row). NaN for rows with a single class. No range checks.
    """
    s, y = _rows(scores, labels)
    n_pos = y.sum(axis=1)
    return _sklearn_rows(roc_auc_score, s, y, (n_pos > 0) & (n_pos < y.shape[1]))


def average_precision_rows(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Average precision of every row of a (B, N) score matrix against 0/1 labels.

    scikit-learn's ``average_precision_score`` of each row, ``Σ_k (R_k − R_{k−1}) P_k``
    over the distinct score thresholds (ties share one threshold), in one call over the
    rows with a positive label. NaN for rows without one. No range checks.

    A weighted mean of precisions whose weights (the recall steps) sum to 1, so at most
    1, with equality exactly when every precision is 1; scikit-learn's sum of rounded
    recall steps gave 1.0000000000000002 there (all items positive), so values are
    clipped to 1.
    """
    s, y = _rows(scores, labels)
    return np.minimum(_sklearn_rows(average_precision_score, s, y, y.sum(axis=1) > 0), 1.0)


def auprc_neg_rows(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """AUPRC-N of every row: :func:`average_precision_rows` of ``1 − s`` against ``1 − y``
    (Wu et al., App. E.2). NaN for rows without a negative label."""
    s, y = _rows(scores, labels)
    return average_precision_rows(1.0 - s, 1 - y)


def average_precision(scores: ArrayLike, labels: ArrayLike) -> float:
    """AUPRC-P of one (N,) score vector without input checks (Wu et al., App. E.2):
    :func:`average_precision_rows` on one row. NaN when there is no positive label."""
    s = np.asarray(scores, dtype=float)
    y = np.asarray(labels)
    return float(average_precision_rows(s[None, :], y[None, :])[0])


# --------------------------------------------------------------------------- helpers


def _bin_sums(
    scores: np.ndarray,
    performance: np.ndarray,
    n_bins: int,
    levels: ArrayLike | None,
    counts: bool = False,
) -> tuple[np.ndarray, np.ndarray | None] | None:
    """Per row and bin of :func:`credo.evaluate.binning.bin_index`, ``Σ (p̄_i − s_i)``
    and (with ``counts``) the number of scores: (B, n_bins) matrices, each one bincount
    over all rows; None when N == 0."""
    s = np.asarray(scores, dtype=float)
    p = np.asarray(performance, dtype=float)
    if s.shape != p.shape or s.ndim != 2:
        raise ValueError(f"scores and performance must be equal (B, N) matrices, got {s.shape}")
    rows, n = s.shape
    if n == 0:
        return None
    n_b = number_of_bins(n_bins, levels)
    flat = (np.arange(rows)[:, None] * n_b + bin_index(s, n_bins, levels)).ravel()
    gap = np.bincount(flat, weights=(p - s).ravel(), minlength=rows * n_b)
    count = np.bincount(flat, minlength=rows * n_b).reshape(rows, n_b) if counts else None
    return gap.reshape(rows, n_b), count


def _rows(scores: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores, dtype=float)
    y = np.asarray(labels)
    if s.shape != y.shape or s.ndim != 2:
        raise ValueError(f"scores and labels must be (B, N) matrices, got {s.shape}, {y.shape}")
    return s, y.astype(int)


def _sklearn_rows(
    metric: Callable[..., Any], s: np.ndarray, y: np.ndarray, valid: np.ndarray
) -> np.ndarray:
    """``metric(y[b], s[b])`` for the rows where ``valid``, NaN elsewhere.

    Several rows go through one call in scikit-learn's multilabel form (rows as label
    columns, ``average=None``), which runs the binary metric on each column. The inputs
    are checked by our callers, so sklearn's parameter validation is skipped.
    """
    out = np.full(s.shape[0], np.nan)
    k = int(valid.sum())
    if k == 0:
        return out
    with config_context(skip_parameter_validation=True):
        if k == 1:
            out[valid] = metric(y[valid][0], s[valid][0])
        else:
            out[valid] = metric(y[valid].T, s[valid].T, average=None)
    return out


def metric_inputs(
    scores: ArrayLike,
    target: ArrayLike,
    kind: Literal["p_bar", "label"] = "p_bar",
    *,
    name: str | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The one input check of every metric, at the door of the
    one-sample functions and of :class:`credo.evaluate.registry.Metric`: ``scores`` and
    ``target`` are 1-d of equal length and hold no NaN; the scores lie in [0, 1]; a
    ``"p_bar"`` target (p̄, or a quality) lies in [0, 1], a ``"label"`` target is 0 or 1
    (so every value is finite). ``name`` is the target's name in messages (default
    ``performance``, or ``labels``). Returns the scores as floats and the target (labels
    as ints); a ValueError says what is wrong. The scores are settled
    (:func:`credo.ties.settle`: equal within rounding, equal). The row functions check
    nothing: their callers checked here."""
    s = settle_scores(as_unit_interval(scores, "scores"))
    if kind == "label":
        what = name or "labels"
        y = np.asarray(target)
        if y.ndim != 1:
            raise ValueError(f"{what} must be 1-d, got shape {y.shape}")
        if y.size and not np.isin(y, (0, 1)).all():
            raise ValueError(f"{what} must be 0 or 1")
        t: np.ndarray = y.astype(int)
    elif kind == "p_bar":
        what = name or "performance"
        t = as_unit_interval(target, what)
    else:
        raise ValueError(f"a metric's target is 'p_bar' or 'label', got {kind!r}")
    if s.shape[0] != t.shape[0]:
        raise ValueError(f"scores and {what} differ in length: {s.shape[0]} != {t.shape[0]}")
    return s, t


def one_row(rows: Callable[..., np.ndarray], scores: np.ndarray, target: np.ndarray,
            **options: Any) -> float:
    """A row function on one checked sample (:func:`metric_inputs`); NaN for no items."""
    if scores.size == 0:
        return math.nan
    return float(rows(scores[None, :], target[None, :], **options)[0])


def as_unit_interval(x: ArrayLike, name: str) -> np.ndarray:
    """``x`` as a 1-d float array in [0, 1] without NaN, or a ValueError naming ``name``."""
    arr = np.asarray(x, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-d, got shape {arr.shape}")
    if np.isnan(arr).any():
        raise ValueError(f"{name} contains NaN; drop items without a score first")
    if arr.size and (arr.min() < 0.0 or arr.max() > 1.0):
        raise ValueError(f"{name} must lie in [0, 1], got range [{arr.min()}, {arr.max()}]")
    return arr


def _warn_one_class(metric: str) -> None:
    warnings.warn(f"{metric} is undefined with a single class; returning NaN", stacklevel=3)


FEW_IN_CLASS = 5
"""A ranking metric (AUROC, AUPRC) whose smaller class has fewer items than this rests on
those few items alone: reports mark it and paired tests on it say so."""


def smaller_class(labels: ArrayLike) -> int:
    """The number of items in the smaller of the two classes of 0/1 ``labels``."""
    y = np.asarray(labels)
    positives = int((y == 1).sum())
    return min(positives, int(y.size) - positives)

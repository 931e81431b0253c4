"""Calibration and ranking metrics of 000 App. E.2.

Per benchmark item ``i`` the evaluation has a score ``s_i`` in [0, 1] (a method's
credibility) and an empirical performance ``p̄_i`` (mean correctness over the ``n``
original samples). Ranking metrics use the binary label ``y_i = 1[p̄_i >= 0.5]``.

ROC and precision-recall areas come from scikit-learn; ECE is written here because it is
one line of binning that scikit-learn does not provide, with the bins of
:mod:`credo.evaluate.binning`.

Each formula has one implementation, vectorised over the rows of a (B, N) matrix so that
bootstrap resamples are evaluated together: :func:`ece_rows`, :func:`auroc_rows` and
:func:`average_precision_rows`. The public one-sample functions (:func:`ece`,
:func:`auroc`, ...) check their inputs at the door (sklearn-style) and call them on one
row; the bootstrap and the paired tests call the row functions on inputs already checked.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from sklearn import config_context
from sklearn.metrics import average_precision_score, roc_auc_score

from credo.evaluate.binning import bin_index, number_of_bins

ArrayLike = Sequence[float] | np.ndarray


def labels_from_performance(performance: ArrayLike, threshold: float = 0.5) -> np.ndarray:
    """Binary labels ``y_i = 1[p̄_i >= threshold]`` (000 App. E.2)."""
    perf = _as_unit_interval(performance, "performance")
    return (perf >= threshold).astype(int)


def ece(scores: ArrayLike, performance: ArrayLike, n_bins: int = 10) -> float:
    """Expected Calibration Error over equal-width bins (000 App. E.2).

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
    s = _as_unit_interval(scores, "scores")
    p = _as_unit_interval(performance, "performance")
    _check_same_length(s, p, "scores", "performance")
    number_of_bins(n_bins)
    if s.size == 0:
        return math.nan
    return float(ece_rows(s[None, :], p[None, :], n_bins)[0])


def ece_discrete(scores: ArrayLike, performance: ArrayLike, levels: ArrayLike) -> float:
    """ECE with one bin per discrete score level (002 App. A.11.3).

    For scores that take a fixed set of values (Answer Consistency with n = 10 samples
    takes the 11 values 0, 0.1, ..., 1), each item is put in the bin of the nearest
    level and the usual weighted gap is summed.
    """
    s = _as_unit_interval(scores, "scores")
    p = _as_unit_interval(performance, "performance")
    _check_same_length(s, p, "scores", "performance")
    number_of_bins(levels=levels)
    if s.size == 0:
        return math.nan
    return float(ece_rows(s[None, :], p[None, :], levels=levels)[0])


def auroc(scores: ArrayLike, labels: ArrayLike) -> float:
    """Area under the ROC curve of ``scores`` separating ``labels`` 1 from 0.

    scikit-learn's ``roc_auc_score``. NaN (with a warning) when only one class is
    present, where the area is undefined.
    """
    s, y = _scores_labels(scores, labels)
    if np.unique(y).size < 2:
        _warn_one_class("AUROC")
        return math.nan
    return float(auroc_rows(s[None, :], y[None, :])[0])


def auprc_pos(scores: ArrayLike, labels: ArrayLike) -> float:
    """AUPRC-P: average precision for detecting correct items (label 1) by ``scores``.

    scikit-learn's ``average_precision_score(labels, scores)`` (000 App. E.2). NaN when
    there is no positive item.
    """
    s, y = _scores_labels(scores, labels)
    if y.sum() == 0:
        _warn_one_class("AUPRC-P")
        return math.nan
    return average_precision(s, y)


def auprc_neg(scores: ArrayLike, labels: ArrayLike) -> float:
    """AUPRC-N: average precision for detecting incorrect items, labels ``1 - y`` and
    scores ``1 - s`` (000 App. E.2). NaN when there is no negative item."""
    s, y = _scores_labels(scores, labels)
    if (1 - y).sum() == 0:
        _warn_one_class("AUPRC-N")
        return math.nan
    return float(auprc_neg_rows(s[None, :], y[None, :])[0])


# ----------------------------------------------------------- row-vectorised formulas


def ece_rows(
    scores: np.ndarray,
    performance: np.ndarray,
    n_bins: int = 10,
    levels: ArrayLike | None = None,
) -> np.ndarray:
    """ECE of every row of a (B, N) score matrix (000 App. E.2; 002 App. A.11.3).

    Per row, ``Σ_b |Σ_{i∈b} p̄_i − Σ_{i∈b} s_i| / N``, which equals the weighted gap
    ``Σ_b |I_b|/N · |mean p̄ − mean s|`` of :func:`ece`; bins from
    :func:`credo.evaluate.binning.bin_index` (equal-width, or the nearest of ``levels``).
    No range checks: inputs are checked by the caller. NaN for every row when N == 0.
    """
    s = np.asarray(scores, dtype=float)
    p = np.asarray(performance, dtype=float)
    if s.shape != p.shape or s.ndim != 2:
        raise ValueError(f"scores and performance must be equal (B, N) matrices, got {s.shape}")
    rows, n = s.shape
    n_b = number_of_bins(n_bins, levels)
    if n == 0:
        return np.full(rows, np.nan)
    flat = (np.arange(rows)[:, None] * n_b + bin_index(s, n_bins, levels)).ravel()
    gap = np.bincount(flat, weights=(p - s).ravel(), minlength=rows * n_b)
    return np.abs(gap).reshape(rows, n_b).sum(axis=1) / n


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
    """
    s, y = _rows(scores, labels)
    return _sklearn_rows(average_precision_score, s, y, y.sum(axis=1) > 0)


def auprc_neg_rows(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """AUPRC-N of every row: :func:`average_precision_rows` of ``1 − s`` against ``1 − y``
    (000 App. E.2). NaN for rows without a negative label."""
    s, y = _rows(scores, labels)
    return average_precision_rows(1.0 - s, 1 - y)


def average_precision(scores: ArrayLike, labels: ArrayLike) -> float:
    """AUPRC-P of one (N,) score vector without input checks (000 App. E.2):
    :func:`average_precision_rows` on one row. NaN when there is no positive label."""
    s = np.asarray(scores, dtype=float)
    y = np.asarray(labels)
    return float(average_precision_rows(s[None, :], y[None, :])[0])


# --------------------------------------------------------------------------- helpers


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


def _as_unit_interval(x: ArrayLike, name: str) -> np.ndarray:
    arr = np.asarray(x, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-d, got shape {arr.shape}")
    if np.isnan(arr).any():
        raise ValueError(f"{name} contains NaN; drop items without a score first")
    if arr.size and (arr.min() < 0.0 or arr.max() > 1.0):
        raise ValueError(f"{name} must lie in [0, 1], got range [{arr.min()}, {arr.max()}]")
    return arr


def _scores_labels(scores: ArrayLike, labels: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    s = _as_unit_interval(scores, "scores")
    y = np.asarray(labels)
    if y.ndim != 1:
        raise ValueError(f"labels must be 1-d, got shape {y.shape}")
    if y.size and not np.isin(y, (0, 1)).all():
        raise ValueError("labels must be 0 or 1")
    _check_same_length(s, y, "scores", "labels")
    return s, y.astype(int)


def _check_same_length(a: np.ndarray, b: np.ndarray, na: str, nb: str) -> None:
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"{na} and {nb} differ in length: {a.shape[0]} != {b.shape[0]}")


def _warn_one_class(metric: str) -> None:
    warnings.warn(f"{metric} is undefined with a single class; returning NaN", stacklevel=3)

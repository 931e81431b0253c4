"""Calibration and ranking metrics of 000 App. E.2.

Per benchmark item ``i`` the evaluation has a score ``s_i`` in [0, 1] (a method's
credibility) and an empirical performance ``p̄_i`` (mean correctness over the ``n``
original samples). Ranking metrics use the binary label ``y_i = 1[p̄_i >= 0.5]``.

ROC and precision-recall areas come from scikit-learn; ECE is written here because it is
one line of binning that scikit-learn does not provide.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np
from sklearn.metrics import average_precision_score, roc_auc_score

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
    if n_bins < 1:
        raise ValueError(f"n_bins must be >= 1, got {n_bins}")
    if s.size == 0:
        return math.nan
    bins = np.minimum((s * n_bins).astype(int), n_bins - 1)
    return _binned_gap(bins, s, p)


def ece_discrete(scores: ArrayLike, performance: ArrayLike, levels: ArrayLike) -> float:
    """ECE with one bin per discrete score level (002 App. A.11.3).

    For scores that take a fixed set of values (Answer Consistency with n = 10 samples
    takes the 11 values 0, 0.1, ..., 1), each item is put in the bin of the nearest
    level and the usual weighted gap is summed.
    """
    s = _as_unit_interval(scores, "scores")
    p = _as_unit_interval(performance, "performance")
    _check_same_length(s, p, "scores", "performance")
    lv = np.asarray(levels, dtype=float)
    if lv.ndim != 1 or lv.size == 0:
        raise ValueError("levels must be a non-empty 1-d sequence")
    if s.size == 0:
        return math.nan
    bins = np.abs(s[:, None] - lv[None, :]).argmin(axis=1)
    return _binned_gap(bins, s, p)


def auroc(scores: ArrayLike, labels: ArrayLike) -> float:
    """Area under the ROC curve of ``scores`` separating ``labels`` 1 from 0.

    scikit-learn's ``roc_auc_score``. NaN (with a warning) when only one class is
    present, where the area is undefined.
    """
    s, y = _scores_labels(scores, labels)
    if np.unique(y).size < 2:
        _warn_one_class("AUROC")
        return math.nan
    return float(roc_auc_score(y, s))


def auprc_pos(scores: ArrayLike, labels: ArrayLike) -> float:
    """AUPRC-P: average precision for detecting correct items (label 1) by ``scores``.

    scikit-learn's ``average_precision_score(labels, scores)`` (000 App. E.2). NaN when
    there is no positive item.
    """
    s, y = _scores_labels(scores, labels)
    if y.sum() == 0:
        _warn_one_class("AUPRC-P")
        return math.nan
    return float(average_precision_score(y, s))


def auprc_neg(scores: ArrayLike, labels: ArrayLike) -> float:
    """AUPRC-N: average precision for detecting incorrect items, labels ``1 - y`` and
    scores ``1 - s`` (000 App. E.2). NaN when there is no negative item."""
    s, y = _scores_labels(scores, labels)
    if (1 - y).sum() == 0:
        _warn_one_class("AUPRC-N")
        return math.nan
    return float(average_precision_score(1 - y, 1.0 - s))


# --------------------------------------------------------------------------- helpers


def _binned_gap(bins: np.ndarray, s: np.ndarray, p: np.ndarray) -> float:
    total = 0.0
    for b in np.unique(bins):
        mask = bins == b
        total += mask.sum() * abs(p[mask].mean() - s[mask].mean())
    return float(total / s.size)


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

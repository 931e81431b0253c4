"""Post-hoc calibration of a method's scores, cross-fitted over items.

A method's score may rank items well and still be miscalibrated; a monotone map fitted
on held-out data tells how much of its ECE a recalibration removes. Two maps, both
scikit-learn's:

- ``"isotonic"``: isotonic regression of the target on the score (Zadrozny and Elkan,
  KDD 2002), ``IsotonicRegression(out_of_bounds="clip")``: a non-decreasing step
  function; scores outside the fitted range get the end values.
- ``"platt"``: logistic regression of the target on the score (Platt 1999),
  ``LogisticRegression`` on the one feature ``s``, unpenalised (``C = inf``): the
  maximum-likelihood sigmoid ``σ(a s + b)``. A target in [0, 1] (the item-level p̄) is
  fitted as a soft label: the item enters as a positive with weight p̄ and a negative
  with weight 1 − p̄, which is the likelihood of its n samples' correctness.

Cross-fitting: the items are split into ``k`` folds (scikit-learn's
``KFold(shuffle=True, random_state=seed)``; k = 5, or the number of items when fewer);
each fold's scores are mapped by a calibrator fitted on the other folds only, so no item
is scored by a map fitted on it. Per generation, the folds are the items' folds: every
generation of an item is held out together. A training part whose targets are all
equal fits the constant map to that value.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import KFold

__all__ = [
    "CALIBRATIONS",
    "DEFAULT_FOLDS",
    "Calibration",
    "calibration_folds",
    "cross_fitted",
    "fit_calibrator",
]

Calibration = Literal["none", "isotonic", "platt"]
CALIBRATIONS: tuple[str, ...] = ("none", "isotonic", "platt")
DEFAULT_FOLDS = 5

ArrayLike = Sequence[float] | np.ndarray


def cross_fitted(
    scores: ArrayLike,
    targets: ArrayLike,
    method: Calibration,
    *,
    items: ArrayLike | None = None,
    k: int = DEFAULT_FOLDS,
    seed: int = 0,
) -> np.ndarray:
    """Every score mapped by a calibrator fitted on the other folds of items.

    Parameters
    ----------
    scores, targets : float in [0, 1], shape (N,)
        A method's scores and what they should predict (p̄ per item, or 0/1 correctness
        per generation).
    method : "isotonic" or "platt" ("none" returns the scores unchanged)
    items : shape (N,), optional
        The item of each row (per-generation rows); the folds are over distinct items,
        in order of first appearance. None: every row is its own item.
    k : the number of folds, at most the number of items
    seed : the fold shuffle (the run seed)

    Returns
    -------
    float array of shape (N,), the calibrated scores; all NaN with fewer than 2 items.
    """
    s = np.asarray(scores, dtype=float)
    t = np.asarray(targets, dtype=float)
    if s.ndim != 1 or s.shape != t.shape:
        raise ValueError(f"scores and targets must be 1-d of equal length, got {s.shape}, "
                         f"{t.shape}")
    if method not in CALIBRATIONS:
        raise ValueError(f"calibration must be one of {CALIBRATIONS}, got {method!r}")
    if method == "none":
        return s.copy()
    group = _item_index(items, s.size)
    n_items = int(group.max()) + 1 if group.size else 0
    out = np.full(s.size, np.nan)
    if n_items < 2:
        return out
    for train_items, test_items in calibration_folds(n_items, k, seed):
        train = np.isin(group, train_items)
        test = np.isin(group, test_items)
        out[test] = fit_calibrator(method, s[train], t[train])(s[test])
    return out


def calibration_folds(
    n_items: int, k: int = DEFAULT_FOLDS, seed: int = 0
) -> list[tuple[np.ndarray, np.ndarray]]:
    """(train, test) item indices of each fold: ``KFold(min(k, n_items), shuffle=True,
    random_state=seed)`` over ``range(n_items)``. Needs n_items >= 2 and k >= 2."""
    if n_items < 2:
        raise ValueError(f"cross-fitting needs at least 2 items, got {n_items}")
    if k < 2:
        raise ValueError(f"cross-fitting needs k >= 2 folds, got {k}")
    folds = KFold(n_splits=min(k, n_items), shuffle=True, random_state=seed)
    return list(folds.split(np.arange(n_items)))


def fit_calibrator(
    method: Calibration, scores: np.ndarray, targets: np.ndarray
) -> Callable[[np.ndarray], np.ndarray]:
    """The map fitted on (scores, targets): ``"isotonic"`` or ``"platt"`` (module
    docstring); the constant map when the targets are all equal."""
    s = np.asarray(scores, dtype=float)
    t = np.asarray(targets, dtype=float)
    if t.size == 0:
        raise ValueError("cannot fit a calibrator on no data")
    if np.all(t == t[0]):
        value = float(t[0])
        return lambda x: np.full(np.shape(x), value)
    if method == "isotonic":
        iso = IsotonicRegression(out_of_bounds="clip").fit(s, t)
        return lambda x: np.asarray(iso.predict(np.asarray(x, dtype=float)), dtype=float)
    if method == "platt":
        X, y, w = platt_data(s, t)
        model = LogisticRegression(C=np.inf, max_iter=1000)
        with warnings.catch_warnings():  # separable folds: the sigmoid steepens, still monotone
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(X, y, sample_weight=w)
        return lambda x: model.predict_proba(np.asarray(x, dtype=float)[:, None])[:, 1]
    raise ValueError(f"calibration must be 'isotonic' or 'platt', got {method!r}")


def platt_data(scores: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                                 np.ndarray]:
    """Soft targets as weighted labels: each row ``(s, 1)`` with weight t and ``(s, 0)``
    with weight 1 − t, zero weights dropped (0/1 targets give the plain data)."""
    X = np.concatenate([scores, scores])[:, None]
    y = np.concatenate([np.ones(scores.size), np.zeros(scores.size)])
    w = np.concatenate([targets, 1.0 - targets])
    keep = w > 0
    return X[keep], y[keep], w[keep]


def _item_index(items: ArrayLike | None, n: int) -> np.ndarray:
    """0-based item number of each row, items numbered by first appearance."""
    if items is None:
        return np.arange(n)
    keys = list(items)
    if len(keys) != n:
        raise ValueError(f"items must have one entry per score, got {len(keys)} for {n}")
    first: dict[object, int] = {}
    return np.array([first.setdefault(x, len(first)) for x in keys], dtype=int)

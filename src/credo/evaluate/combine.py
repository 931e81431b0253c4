"""Scores fitted on labelled items: a combination of several methods' scores, and a
calibrated version of one, each cross-fitted so that no item is scored by a model that
saw its label.

Every fitted score is one function, :class:`FittedScore`: a linear stage
``z = b + Σ_k w_k s_k`` on the method scores ``s``, then a link into [0, 1]:

==============  ========================================================================
``logistic``    combination: logistic regression of correctness on the scores
                (scikit-learn's ``LogisticRegression``, L2 with C = 1: the scores lie in
                [0, 1], so one penalty suits every weight), ``σ(z)``
``isotonic``    combination: that logistic regression's ``z``, then isotonic regression of
                correctness on ``z`` (a non-decreasing step function, linear between its
                knots as scikit-learn's ``IsotonicRegression.predict`` is)
``platt``       calibration of one score: ``σ(a s + b)``, unpenalised (Platt 1999;
                :func:`credo.evaluate.calibration.fit_calibrator`)
``isotonic``    calibration of one score: isotonic regression on ``s`` itself (w = 1, b = 0)
==============  ========================================================================

The target is each item's p̄, the share of its samples that are correct (what the
item-level metrics read), fitted as a soft label: the item enters as a positive with
weight p̄ and a negative with weight 1 − p̄ (:func:`credo.evaluate.calibration.platt_data`).
A training set whose targets are all equal fits the constant (link ``constant``).

Cross-fitting (:func:`cross_fit`): the labelled items with every input score are split
into ``k`` folds (:func:`~credo.evaluate.calibration.calibration_folds`: the run seed's
shuffle); each fold is scored by the function fitted on the others. The function fitted
on all of them is the one a certificate records and applies to new items (their scores
never entered a fit); items without a label are scored by it too.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression

from credo.evaluate.calibration import DEFAULT_FOLDS, calibration_folds

__all__ = ["COMBINATIONS", "SINGLE", "FittedScore", "cross_fit", "fit_score"]

Kind = Literal["logistic", "isotonic", "platt"]
COMBINATIONS: tuple[str, ...] = ("logistic", "isotonic")
"""How several scores are combined."""
SINGLE: tuple[str, ...] = ("platt", "isotonic")
"""How one score is calibrated."""
LINKS = ("sigmoid", "isotonic", "constant")


@dataclass(frozen=True)
class FittedScore:
    """A fitted function of method scores into [0, 1] (module docstring): ``inputs`` the
    methods it reads, in order; ``weights`` and ``intercept`` the linear stage; ``link``
    ``sigmoid``, ``isotonic`` (knots ``x`` non-decreasing, values ``y``, linear between
    them and constant beyond the ends) or ``constant`` (``y[0]``); ``kind`` how it was
    fitted; ``items`` how many labelled items it was fitted on."""

    kind: str
    inputs: tuple[str, ...]
    weights: tuple[float, ...]
    intercept: float
    link: str
    x: tuple[float, ...] = ()
    y: tuple[float, ...] = ()
    items: int = 0

    def __call__(self, scores: np.ndarray | Sequence[Sequence[float]]) -> np.ndarray:
        """The fitted score of each row of ``scores`` (shape (N, len(inputs))), in
        [0, 1]; NaN where an input is NaN."""
        s = np.asarray(scores, dtype=float).reshape(-1, len(self.inputs))
        missing = np.isnan(s).any(axis=1)
        w = np.asarray(self.weights, dtype=float)
        z = np.where(missing[:, None], 0.0, s) @ w + self.intercept
        if self.link == "sigmoid":
            out = 0.5 * (1.0 + np.tanh(z / 2.0))  # σ(z) without overflow
        elif self.link == "isotonic":
            out = np.interp(z, self.x, self.y)
        else:
            out = np.full(z.shape, self.y[0])
        return np.where(missing, np.nan, np.clip(out, 0.0, 1.0))

    def to_dict(self) -> dict[str, Any]:
        """As a certificate and ``metrics.json`` record it (plain JSON)."""
        return {"kind": self.kind, "inputs": list(self.inputs), "weights": list(self.weights),
                "intercept": self.intercept, "link": self.link, "x": list(self.x),
                "y": list(self.y), "items": self.items}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FittedScore:
        """The function :meth:`to_dict` wrote; a ValueError says which field is wrong."""
        try:
            out = cls(str(data["kind"]), tuple(str(m) for m in data["inputs"]),
                      tuple(float(w) for w in data["weights"]), float(data["intercept"]),
                      str(data["link"]), tuple(float(v) for v in data.get("x", ())),
                      tuple(float(v) for v in data.get("y", ())), int(data.get("items", 0)))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"not a fitted score ({type(e).__name__}: {e})") from None
        numbers = (*out.weights, out.intercept, *out.x, *out.y)
        if not out.inputs or len(out.weights) != len(out.inputs):
            raise ValueError("a fitted score needs one weight per input")
        if out.link not in LINKS:
            raise ValueError(f"link must be one of {', '.join(LINKS)}, got {out.link!r}")
        if not all(math.isfinite(v) for v in numbers):
            raise ValueError("a fitted score's numbers must be finite")
        if out.link == "isotonic" and (len(out.x) != len(out.y) or not out.x
                                       or np.any(np.diff(out.x) < 0)):
            raise ValueError("an isotonic link needs as many knots as values, in order")
        if out.link != "sigmoid" and not all(0.0 <= v <= 1.0 for v in out.y):
            raise ValueError("an isotonic or constant link's values lie in [0, 1]")
        if out.link == "constant" and not out.y:
            raise ValueError("a constant link needs its value")
        return out


def fit_score(kind: Kind, inputs: Sequence[str], scores: np.ndarray,
              targets: np.ndarray) -> FittedScore:
    """The function of ``kind`` (module docstring) fitted on ``scores`` (shape (N, K),
    no NaN) and ``targets`` (p̄ in [0, 1], shape (N,)). ``platt`` and single-score
    ``isotonic`` take one input (K = 1); ``logistic`` any number."""
    s = np.asarray(scores, dtype=float).reshape(len(targets), len(inputs))
    t = np.asarray(targets, dtype=float)
    names = tuple(inputs)
    if t.size == 0:
        raise ValueError("cannot fit a score on no items")
    if np.all(t == t[0]):
        return FittedScore(kind, names, (0.0,) * len(names), 0.0, "constant", (), (float(t[0]),),
                           int(t.size))
    if kind == "isotonic" and len(names) == 1:
        return _isotonic(kind, names, (1.0,), 0.0, s[:, 0], t)
    if kind not in ("logistic", "isotonic", "platt"):
        raise ValueError(f"kind must be logistic, isotonic or platt, got {kind!r}")
    w, b = _logistic(s, t, penalised=kind != "platt")
    if kind == "isotonic":
        return _isotonic(kind, names, w, b, s @ np.asarray(w) + b, t)
    return FittedScore(kind, names, w, b, "sigmoid", items=int(t.size))


def cross_fit(
    kind: Kind,
    inputs: Sequence[str],
    scores: np.ndarray,
    targets: np.ndarray,
    *,
    k: int = DEFAULT_FOLDS,
    seed: int = 0,
    groups: Sequence[object] | np.ndarray | None = None,
) -> tuple[np.ndarray, FittedScore | None]:
    """Each row's fitted score from a function fitted without it (module docstring), and
    the function fitted on every usable row (None when fewer than 2 are usable).

    ``scores`` (N, K) may hold NaN (that row gets NaN and enters no fit); ``targets``
    (N,) NaN for an unlabelled row (scored by the full function, never fitted on).
    ``groups`` (N,): rows of one group (the claims of one answer) are held out together,
    the folds drawn over the groups in order of first appearance; None: each row alone."""
    s = np.asarray(scores, dtype=float).reshape(len(targets), len(inputs))
    t = np.asarray(targets, dtype=float)
    usable = ~np.isnan(s).any(axis=1) & ~np.isnan(t)
    rows = np.flatnonzero(usable)
    out = np.full(t.size, np.nan)
    if rows.size < 2:
        return out, None
    first: dict[object, int] = {}
    group = (np.arange(rows.size) if groups is None else
             np.array([first.setdefault(g, len(first)) for g in np.asarray(groups,
                                                                         dtype=object)[rows]]))
    if group.max() < 1:
        return out, None
    for train, test in calibration_folds(int(group.max()) + 1, k, seed):
        fit_rows, held = rows[np.isin(group, train)], rows[np.isin(group, test)]
        f = fit_score(kind, inputs, s[fit_rows], t[fit_rows])
        out[held] = f(s[held])
    full = fit_score(kind, inputs, s[rows], t[rows])
    rest = ~usable & ~np.isnan(s).any(axis=1)
    if rest.any():
        out[rest] = full(s[rest])
    return out, full


def _logistic(s: np.ndarray, t: np.ndarray, penalised: bool) -> tuple[tuple[float, ...], float]:
    X, y, w = _soft(s, t)
    model = LogisticRegression(C=1.0 if penalised else np.inf, max_iter=1000)
    with warnings.catch_warnings():  # separable folds: the sigmoid steepens, still monotone
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y, sample_weight=w)
    return tuple(float(v) for v in model.coef_[0]), float(model.intercept_[0])


def _soft(s: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Soft targets as weighted labels (:func:`~credo.evaluate.calibration.platt_data`,
    for any number of features): each row ``(s, 1)`` with weight t and ``(s, 0)`` with
    weight 1 − t, zero weights dropped."""
    X = np.concatenate([s, s])
    y = np.concatenate([np.ones(len(t)), np.zeros(len(t))])
    w = np.concatenate([t, 1.0 - t])
    keep = w > 0
    return X[keep], y[keep], w[keep]


def _isotonic(kind: str, names: tuple[str, ...], w: tuple[float, ...], b: float,
              z: np.ndarray, t: np.ndarray) -> FittedScore:
    iso = IsotonicRegression(out_of_bounds="clip", y_min=0.0, y_max=1.0).fit(z, t)
    return FittedScore(kind, names, w, b, "isotonic",
                       tuple(float(v) for v in iso.X_thresholds_),
                       tuple(float(v) for v in iso.y_thresholds_), int(t.size))

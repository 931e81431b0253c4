"""The threshold each certification procedure picks, and the inputs they all check.

The procedures of :mod:`credo.evaluate.certify` (Learn then Test with a selection split,
SGR, plain fixed-sequence testing, conformal risk control), each a function of the
scores and errors of a calibration set that returns the loosest certified threshold and
its p-value: :func:`certified_threshold`. :func:`credo.evaluate.certify.certify` turns
its answer into a certificate; :func:`credo.evaluate.coverage.coverage_at_risk` repeats
it over random calibration/test splits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from credo.evaluate.binomial import binomial_p_value, leading_run, projected_p_value
from credo.ties import settle_scores

__all__ = ["METHODS", "SELECT_FRACTION", "as_scores", "certified_threshold", "check_inputs",
           "check_method", "ladder"]

METHODS = ("ltt", "sgr", "fixed-sequence", "crc")
ArrayLike = Sequence[float] | np.ndarray

SELECT_FRACTION = 0.3
"""The share of calibration items that orders the thresholds in ``ltt``."""


def certified_threshold(s, wrong, alpha, delta, method, select_fraction, seed):
    """``method``'s certified threshold and its p-value, or ``(None, None)``: ``s`` the
    checked scores, ``wrong`` whether each item's answer is wrong (:func:`check_inputs`)."""
    return _PROCEDURES[method](s, wrong, alpha, delta, select_fraction, seed)


def check_method(method: str, select_fraction: float) -> None:
    """A ValueError unless ``method`` is one of :data:`METHODS` (and, for ``ltt``,
    ``select_fraction`` lies in (0, 1))."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
    if method == "ltt" and not 0.0 < select_fraction < 1.0:
        raise ValueError(f"select_fraction must lie in (0, 1); got {select_fraction!r}")


# --- procedures: each returns (threshold or None, p-value or None) ------------------------


def ladder(s: np.ndarray, wrong: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct scores from highest to lowest, with the number of items accepted (``m``)
    and of errors among them (``k``) when the threshold is each score."""
    order = np.argsort(-s, kind="stable")
    ss = s[order]
    last = np.r_[ss[1:] != ss[:-1], True]
    m = np.arange(1, s.size + 1)[last]
    k = np.cumsum(wrong[order])[last]
    return ss[last], m, k


def _fixed_sequence(s, wrong, alpha, delta):
    ts, m, k = ladder(s, wrong)
    p = binomial_p_value(k, m, alpha)
    run = leading_run(p <= delta)
    return (None, None) if run == 0 else (float(ts[run - 1]), float(p[run - 1]))


def _sgr(s, wrong, alpha, delta):
    """Geifman & El-Yaniv (2017) Algorithm 1 in accepted-count form: binary search over
    the top-``z`` sets, ``ceil(log2 N)`` tests at ``delta / ceil(log2 N)``."""
    ss = np.sort(s)[::-1]
    tests = max(1, math.ceil(math.log2(s.size)))
    level = delta / tests
    lo, hi = 0, s.size  # accepted counts: lo always fails or is empty, search (lo, hi]
    best: tuple[float | None, float | None] = (None, None)
    best_m = 0
    for _ in range(tests):
        z = (lo + hi + 1) // 2
        t = ss[z - 1]
        acc = s >= t
        p = float(binomial_p_value(wrong[acc].sum(), acc.sum(), alpha))
        if p <= level:
            lo = z
            if acc.sum() > best_m:
                best, best_m = (float(t), p), int(acc.sum())
        else:
            hi = z - 1
        if lo >= hi:
            break
    return best


def _ltt_split(s, wrong, alpha, delta, select_fraction, seed):
    """Learn then Test with a selection split: order on one part, fixed-sequence on the
    rest (:mod:`credo.evaluate.certify`)."""
    if s.size < 2:
        return None, None
    n_sel = min(max(1, round(select_fraction * s.size)), s.size - 1)
    perm = np.random.default_rng(seed).permutation(s.size)
    sel, test = perm[:n_sel], perm[n_sel:]
    ts, m1, k1 = ladder(s[sel], wrong[sel])
    scale = test.size / sel.size
    p_hat = projected_p_value(k1 * scale, m1 * scale, alpha)
    grid = ts[int(np.argmin(p_hat)):]  # most promising first, then looser, in order
    st = np.sort(s[test])
    m2 = st.size - np.searchsorted(st, grid, side="left")
    k2 = _errors_at(s[test], wrong[test], grid)
    p = binomial_p_value(k2, m2, alpha)
    run = leading_run(p <= delta)
    return (None, None) if run == 0 else (float(grid[run - 1]), float(p[run - 1]))


def _errors_at(s: np.ndarray, wrong: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Errors among items with ``s >= t`` for each ``t`` of ``grid``."""
    sw = np.sort(s[wrong])
    return sw.size - np.searchsorted(sw, grid, side="left")


def _crc(s, wrong, alpha):
    """Loosest distinct score with ``(k + 1) / (N + 1) <= alpha`` (Angelopoulos et al. 2022,
    B = 1); None when even answering only the top group breaks it."""
    ts, _, k = ladder(s, wrong)
    ok = (k + 1.0) / (s.size + 1.0) <= alpha
    run = leading_run(ok)  # k only grows as the threshold loosens
    return None if run == 0 else float(ts[run - 1])


_PROCEDURES = {
    "ltt": _ltt_split,
    "sgr": lambda s, wrong, alpha, delta, _f, _seed: _sgr(s, wrong, alpha, delta),
    "fixed-sequence": lambda s, wrong, alpha, delta, _f, _seed: _fixed_sequence(
        s, wrong, alpha, delta),
    "crc": lambda s, wrong, alpha, _d, _f, _seed: (_crc(s, wrong, alpha), None),
}
"""Each method's procedure, ``(s, wrong, alpha, delta, select_fraction, seed) -> (t, p)``."""


# --- input checks -------------------------------------------------------------------------


def as_scores(scores: ArrayLike) -> np.ndarray:
    """The scores as a checked float array, settled (:func:`credo.ties.settle`: scores
    equal within rounding are one score, so a threshold accepts both or neither)."""
    s = np.asarray(scores, dtype=float)
    if s.ndim != 1:
        raise ValueError(f"scores must be one-dimensional; got shape {s.shape}")
    if not np.all(np.isfinite(s)):
        raise ValueError("scores must be finite (no NaN or infinity)")
    return settle_scores(s)


def check_inputs(scores: ArrayLike, correct: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """The checked scores (:func:`as_scores`) and whether each answer is wrong."""
    s = as_scores(scores)
    c = np.asarray(correct)
    if c.shape != s.shape:
        raise ValueError(f"correct has shape {c.shape}, scores {s.shape}: one per item")
    if s.size == 0:
        raise ValueError("certify needs at least one calibration item")
    if c.dtype != bool:
        cf = np.asarray(c, dtype=float)
        if not np.all((cf == 0) | (cf == 1)):
            raise ValueError("correct must be 0/1 or boolean")
        c = cf == 1
    return s, ~c

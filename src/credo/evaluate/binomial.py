"""The exact binomial test every certificate runs, and its fixed-sequence stop.

A threshold is certified by testing ``H: risk > alpha`` with the exact binomial p-value
``P(Binom(m, alpha) <= k)`` (``k`` errors among ``m`` accepted items) along a fixed order
of thresholds, stopping at the first test that fails. Score thresholds
(:mod:`credo.evaluate.certify`) and claim thresholds (:mod:`credo.evaluate.claims`) share
these pieces: the p-value (:func:`binomial_p_value`, extended to real counts by
:func:`projected_p_value`), the stop (:func:`leading_run`), how many items a test needs
(:func:`items_needed`) and the check of a level (:func:`check_level`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.special import betainc
from scipy.stats import binom, norm

__all__ = ["binomial_p_value", "check_level", "items_needed", "leading_run",
           "projected_p_value"]

ArrayLike = Sequence[float] | np.ndarray


def binomial_p_value(errors: ArrayLike, accepted: ArrayLike, alpha: float) -> np.ndarray:
    """Exact p-value of ``H: risk > alpha`` given ``errors`` among ``accepted`` items.

    ``P(Binom(m, alpha) <= k)``, the chance of so few errors if the risk were ``alpha``
    (it is larger for any risk above ``alpha``: a valid p-value). 1 where ``m = 0``.
    """
    k = np.asarray(errors, dtype=float)
    m = np.asarray(accepted, dtype=float)
    return np.where(m > 0, binom.cdf(k, m, alpha), 1.0)


def projected_p_value(k: np.ndarray, m: np.ndarray, alpha: float) -> np.ndarray:
    """The binomial p-value extended to real counts, ``I_{1-alpha}(m - k, k + 1)``."""
    ok = m > k
    out = np.ones_like(m, dtype=float)
    out[ok] = betainc(m[ok] - k[ok], k[ok] + 1.0, 1.0 - alpha)
    return out


def items_needed(error_rate: float, alpha: float, level: float, limit: int = 10**7) -> int | None:
    """Fewest accepted items ``m`` with ``P(Binom(m, alpha) <= floor(error_rate * m)) <=
    level``: how many items at this error rate a binomial test needs. None if none up to
    ``limit`` (always when ``error_rate >= alpha``)."""
    if error_rate >= alpha:
        return None
    m0 = _approx_needed(np.array([error_rate]), alpha, level)[0]
    hi = int(min(limit, 4 * m0 + 200))
    m = np.arange(1, hi + 1, dtype=float)
    ok = np.nonzero(binom.cdf(np.floor(error_rate * m + 1e-9), m, alpha) <= level)[0]
    return int(ok[0]) + 1 if ok.size else None


def _approx_needed(rates: np.ndarray, alpha: float, level: float) -> np.ndarray:
    """Normal approximation of :func:`items_needed`: ``(z sqrt(alpha (1 - alpha)) /
    (alpha - r))^2`` with ``z`` the upper ``level`` quantile."""
    z = float(norm.isf(level))
    return (z * math.sqrt(alpha * (1.0 - alpha)) / (alpha - rates)) ** 2


def leading_run(passed: np.ndarray) -> int:
    """Length of the leading run of True in ``passed`` (fixed-sequence: stop at a failure)."""
    fails = np.nonzero(~passed)[0]
    return int(fails[0]) if fails.size else int(passed.size)


def check_level(x: float, name: str) -> float:
    """``x`` as a float, or a ValueError naming ``name`` when it is not in (0, 1)."""
    x = float(x)
    if not 0.0 < x < 1.0:
        raise ValueError(f"{name} must lie in (0, 1); got {x!r}")
    return x

"""Scores equal within rounding are equal: the one rule every reader of a score applies.

Floating point gives one number two spellings when it is computed in two ways: the mean
of answer consistency's per-generation values and self-consistency's pair count are the
same fraction, yet ``math.fsum(acs) / n`` and ``pairs / (n (n - 1))`` may differ in the
last bit; an eigenvalue of exactly 1 comes back from ``eigh`` as 1 ± 1e-16. Left as they
are, such scores split ties: a ranking metric orders two items by rounding noise, an
equal-width bin edge puts 0.5 and 0.49999999999999994 in different bins, and a certified
threshold accepts one spelling and refuses the other.

:func:`settle` gives every score one spelling. A score within ``1e-12`` (relative to its
size, at least 1) of a fraction ``p/q`` with ``q <= 10_000`` becomes the float nearest
to that fraction (so 2/3 stays the correctly rounded 2/3, and self-consistency and answer
consistency on up to 100 samples, whose values are fractions with denominators
``n (n - 1)``, tie exactly); any other score is rounded to 12 decimals. Methods' scores are
settled where they are made (:meth:`credo.methods.base.MethodSpec.score`), given scores
where they are read, and every metric, bootstrap, paired test and certificate settles
what it is handed, so arrays from outside credo are read the same way. Settling is
idempotent and moves no score by more than 1.5e-12 (times its size above 1).

Two scores that differ by a few units in the last place settle to the same number,
except when they straddle a 12th-decimal rounding boundary without lying near a
fraction of denominator at most 10,000: for two arbitrary reals a few ulps apart that
happens with probability of the order of 1e-4.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import overload

import numpy as np

__all__ = ["DECIMALS", "DENOMINATOR", "TOLERANCE", "settle", "settle_scores"]

DENOMINATOR = 10_000
"""The largest denominator of a fraction a score snaps to."""
TOLERANCE = 1e-12
"""How far (relative to ``max(1, |x|)``) a score may lie from a fraction to snap to it."""
DECIMALS = 12
"""The decimals kept of a score that is near no such fraction."""


@overload
def settle(x: float) -> float: ...
@overload
def settle(x: np.ndarray) -> np.ndarray: ...
def settle(x: float | np.ndarray) -> float | np.ndarray:
    """``x`` in its one spelling (module docstring): a float for a number, an array of
    the same shape for an array. NaN and infinities are kept; ``-0.0`` becomes ``0.0``."""
    if isinstance(x, np.ndarray):
        return settle_scores(x)
    return _settle_one(float(x))


def settle_scores(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """:func:`settle` of every value, as a float array of the input's shape (each
    distinct value is settled once)."""
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        return arr.copy()
    distinct, inverse = np.unique(arr, return_inverse=True)
    settled = np.array([_settle_one(float(v)) for v in distinct], dtype=float)
    return settled[inverse].reshape(arr.shape)


def _settle_one(x: float) -> float:
    if not math.isfinite(x):
        return x
    if x == int(x):
        return float(int(x))  # integers (and -0.0) need no snapping
    rounded = round(x, DECIMALS)
    near = Fraction(rounded).limit_denominator(DENOMINATOR)
    snapped = near.numerator / near.denominator  # the float nearest to p/q
    if abs(snapped - rounded) <= TOLERANCE * max(1.0, abs(x)):
        return snapped
    return rounded

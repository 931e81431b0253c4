"""The binning rule of calibration: which bin a score falls in (Wu et al., App. E.2;
Müller et al., App. A.11.3).

Every binned quantity of the evaluation (ECE, the calibration curve, the polarisation
entropy of the bin counts, the paired bootstrap's ECE rows, the report's reliability
diagrams and histograms) takes its bin index from :func:`bin_index`, so the rule is
written once:

- **equal-width bins** (Wu et al., App. E.2): ``B`` bins split [0, 1] into equal widths and a
  score ``s`` falls in bin ``min(floor(s · B), B − 1)``, so 1.0 lies in the last bin;
- **discrete levels** (Müller et al., App. A.11.3): for scores that take a fixed set of values
  (Answer Consistency with n samples takes k/n), one bin per level and a score falls in
  the bin of the nearest level (the first of two equally near ones).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

ArrayLike = Sequence[float] | np.ndarray


def bin_index(
    scores: ArrayLike, n_bins: int = 10, levels: ArrayLike | None = None
) -> np.ndarray:
    """The bin of every score: ``min(floor(s · B), B − 1)``, or the nearest of ``levels``.

    Parameters
    ----------
    scores : float in [0, 1], any shape, e.g. (N,) or a (R, N) matrix of resamples
        Not checked here: callers validate at their door (NaN has no bin).
    n_bins : int >= 1
        ``B`` equal-width bins; ignored when ``levels`` is given.
    levels : non-empty 1-d sequence of float, optional
        Discrete score levels; bin ``k`` is ``levels[k]``.

    Returns
    -------
    int array of the shape of ``scores`` with values in ``0 .. number_of_bins − 1``.
    """
    s = np.asarray(scores, dtype=float)
    if levels is None:
        b = number_of_bins(n_bins)
        return np.minimum((s * b).astype(np.intp), b - 1)
    lv = _levels(levels)
    return np.abs(s[..., None] - lv).argmin(axis=-1)


def number_of_bins(n_bins: int = 10, levels: ArrayLike | None = None) -> int:
    """``B``: ``n_bins``, or the number of ``levels`` when given.

    Raises ValueError when ``n_bins < 1`` or ``levels`` is not a non-empty 1-d sequence.
    """
    if levels is not None:
        return int(_levels(levels).size)
    b = int(n_bins)
    if b < 1:
        raise ValueError(f"n_bins must be >= 1, got {n_bins}")
    return b


def bin_centres(n_bins: int = 10, levels: ArrayLike | None = None) -> np.ndarray:
    """The centre of every bin: ``(k + 0.5) / B`` for equal-width bins, else the levels."""
    if levels is not None:
        return _levels(levels).copy()
    b = number_of_bins(n_bins)
    return (np.arange(b) + 0.5) / b


def _levels(levels: ArrayLike) -> np.ndarray:
    lv = np.asarray(levels, dtype=float)
    if lv.ndim != 1 or lv.size == 0:
        raise ValueError("levels must be a non-empty 1-d sequence")
    return lv

"""Indicator kernel on normalised answers, k(y, y') = 1[y = y'] (Wu et al., App. H).

An unparsable answer is passed as ``None`` and matches nothing, not even another
unparsable answer: two failures to answer are no evidence of agreement. (The diagonal
k(y, y) = 1 never enters the unbiased estimators, which skip i = j.)
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence

import numpy as np

from credo.kernels.registry import kernel


@kernel("indicator")
def indicator_gram(xs: Sequence[Hashable], ys: Sequence[Hashable]) -> np.ndarray:
    """``K[i, j] = 1[xs[i] == ys[j]]``, with ``None`` (unparsable) matching nothing.

    Each answer is given a code (equal answers: those a dict takes for one key, as
    ``==`` does; an unparsable answer, or a float NaN, which equals nothing, a code of its
    own) and K compares the codes, vectorised: 5,000 × 5,000 answers in well under a
    second."""
    codes: dict[Hashable, int] = {}
    spare = iter(range(-1, -len(xs) - len(ys) - 2, -1))  # codes that match nothing
    cx = np.array([_code(x, codes, spare) for x in xs], dtype=np.int64)
    cy = np.array([_code(y, codes, spare) for y in ys], dtype=np.int64)
    return (cx[:, None] == cy[None, :]).astype(float)


def _code(answer: Hashable, codes: dict[Hashable, int], spare: Iterator[int]) -> int:
    if answer is None or (isinstance(answer, float) and answer != answer):
        return next(spare)
    return codes.setdefault(answer, len(codes))

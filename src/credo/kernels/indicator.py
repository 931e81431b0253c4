"""Indicator kernel on normalised answers, k(y, y') = 1[y = y'] (Wu et al., App. H).

An unparsable answer is passed as ``None`` and matches nothing, not even another
unparsable answer: two failures to answer are no evidence of agreement. (The diagonal
k(y, y) = 1 never enters the unbiased estimators, which skip i = j.)
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from credo.kernels.registry import kernel


@kernel("indicator")
def indicator_gram(xs: Sequence[Hashable], ys: Sequence[Hashable]) -> np.ndarray:
    """``K[i, j] = 1[xs[i] == ys[j]]``, with ``None`` (unparsable) matching nothing."""
    K = np.zeros((len(xs), len(ys)), dtype=float)
    for i, x in enumerate(xs):
        if x is None:
            continue
        for j, y in enumerate(ys):
            if y is not None and x == y:
                K[i, j] = 1.0
    return K

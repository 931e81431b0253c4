"""Sum of the eigenvalues of the graph Laplacian, U_EigV (Lin et al., TMLR 2024,
"Generating with Confidence: Uncertainty Quantification for Black-box Large Language
Models", §4.2)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from credo.kernels.registry import Kernel
from credo.methods.base import ORIGINAL, Score, sample_set_method
from credo.methods.graph import class_graph, settle, too_many_distinct


def eigv(answers: Sequence[Hashable | None], kernel: str | Kernel = "indicator") -> float:
    """``U_EigV = Σ_k max(0, 1 − λ_k)``, λ the eigenvalues of the normalised Laplacian
    ``L = I − D^{−1/2} W D^{−1/2}`` of the answers' similarity graph W
    (:func:`credo.methods.graph.similarity_graph`), a continuous count of the semantic
    sets (Lin et al. 2024 eq. 5).

    Range [1, K]. Each term is at most 1, so U ≤ K, with equality iff every λ is 0, i.e.
    W = I (K isolated answers). Below: ``Σ_k (1 − λ_k) = K − tr L = Σ_i W_ii / d_i =
    Σ_i 1/d_i ≥ K / K = 1`` as every degree ``d_i ≤ K``, and the clipped sum is at least
    the unclipped one; W = all ones (one answer K times) has λ = 0 once and 1 K − 1
    times, U = 1. L has one zero eigenvalue per connected component, so U ≥ the number
    of components; with the indicator kernel U equals the number of distinct answers.
    Needs K >= 2. Rounded by :func:`~credo.methods.graph.settle` (ties stay ties).
    The spectrum is read through the distinct answers
    (:meth:`~credo.methods.graph.ClassGraph.normalized_spectrum`), exactly.
    """
    lam, _, within, times = class_graph(answers, kernel).normalized_spectrum()
    return float(settle(float(np.clip(1.0 - lam, 0.0, None).sum()
                              + times @ np.clip(1.0 - within, 0.0, None))))


@sample_set_method(
    "eigv", reads=ORIGINAL,
    summary="1 − (U_EigV − 1)/(K − 1), Laplacian eigenvalue sum (Lin et al. 2024)",
)
def eigv_confidence(answers: Sequence[Hashable | None], kernel: Kernel) -> float | Score:
    """Confidence ``1 − (U_EigV − 1) / (K − 1)`` in [0, 1] (U ∈ [1, K], see :func:`eigv`):
    1 when all K answers are equivalent, 0 when none is similar to another. Not
    available above :data:`~credo.methods.graph.MAX_DISTINCT` distinct answers."""
    if why := too_many_distinct(answers):
        return Score.not_available(why)
    u = eigv(answers, kernel)
    return float(np.clip(1.0 - (u - 1.0) / (len(answers) - 1), 0.0, 1.0))

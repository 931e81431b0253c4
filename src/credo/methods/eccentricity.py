"""Eccentricity of the answers' spectral embeddings, U_Ecc and C_Ecc (Lin et al., TMLR
2024, "Generating with Confidence", §4.2-4.3)."""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

import numpy as np

from credo.kernels.registry import Kernel
from credo.methods.base import ORIGINAL, Score, sample_set_method
from credo.methods.graph import class_graph, settle, too_many_distinct

EIGV_THRESHOLD = 0.9
"""Eigenvectors of L with eigenvalue below this embed the answers (Lin et al.'s default)."""


def eccentricity(
    answers: Sequence[Hashable | None],
    kernel: str | Kernel = "indicator",
    threshold: float = EIGV_THRESHOLD,
) -> float:
    """``U_Ecc = ‖[v'_1, …, v'_K]‖_F``: the distances of the answers' spectral embeddings
    from their centroid, combined as a 2-norm (Lin et al. 2024 eq. 6).

    ``v_j`` is row j of the matrix of the eigenvectors of the normalised Laplacian L of
    the similarity graph (:func:`credo.methods.graph.similarity_graph`) whose eigenvalues
    are below ``threshold`` (k of them), and ``v'_j = v_j − (1/K) Σ_i v_i``. The value
    depends on the span of those eigenvectors only, not on the basis eigh returns:
    ``U² = k − ‖Vᵀ1‖² / K``.

    Range [0, √(K − 1)]: 0 when all answers are equivalent (k = 1, the embedding is
    constant); ``U² ≤ k ≤ K − 1`` when k < K, and ``U² = K − 1`` when k = K (then V is a
    basis of R^K and ‖Vᵀ1‖² = K), the case W = I. With the indicator kernel
    ``U = √(C − 1)``, C the number of distinct answers. Needs K >= 2.
    """
    u2 = settle(float(np.sum(_centred_norms2(answers, kernel, threshold))))
    return float(math.sqrt(max(float(u2), 0.0)))


def eccentricity_confidences(
    answers: Sequence[Hashable | None],
    kernel: str | Kernel = "indicator",
    threshold: float = EIGV_THRESHOLD,
) -> np.ndarray:
    """``1 − ‖v'_j‖ / √(1 − 1/K)`` per answer, in [0, 1]: Lin et al.'s ``C_Ecc = −‖v'_j‖``
    mapped by its bound ``‖v'_j‖² = (C P C)_jj ≤ C_jj = 1 − 1/K`` (P the projection on
    the kept eigenvectors, C the centring matrix)."""
    k = len(answers)
    d = np.sqrt(np.clip(settle(_centred_norms2(answers, kernel, threshold)), 0.0, None))
    return np.clip(1.0 - d / math.sqrt(1.0 - 1.0 / k), 0.0, 1.0)


def _centred_norms2(
    answers: Sequence[Hashable | None], kernel: str | Kernel, threshold: float
) -> np.ndarray:
    """``‖v'_j‖² = P_jj − 2 (P1)_j / K + 1ᵀP1 / K²`` for every answer j. Callers round
    (:func:`~credo.methods.graph.settle`) before any square root: a 1e-17 residue would
    become 3e-9 under it. P is read through the distinct answers
    (:class:`~credo.methods.graph.ClassGraph`): on the class indicators from the reduced
    spectrum, within a class the projector ``I_a − J_a/m_a`` when its eigenvalue
    ``1 − c_a/d_a`` is below the threshold."""
    g = class_graph(answers, kernel)
    lam, vec, within, _ = g.normalized_spectrum()
    y = vec[:, lam < threshold]  # the kept eigenvectors on the class indicators
    yy = y @ y.T
    root = np.sqrt(g.sizes)
    # P = Σ_kept (class-indicator part) + Σ_{a: 1 − c_a/d_a < threshold} (I_a − J_a/m_a)
    p_diag = np.diag(yy) / g.sizes + np.where(within < threshold, 1.0 - 1.0 / g.sizes, 0.0)
    p1 = (yy @ root) / root  # (P1)_j, the same for every node of a class
    total = float(np.sum((y.T @ root) ** 2))  # 1ᵀP1: the within-class part sums to 0
    k = g.k
    return (p_diag - 2.0 * p1 / k + total / k**2)[g.index]


@sample_set_method(
    "eccentricity", reads=ORIGINAL,
    summary="1 − U_Ecc/√(K − 1), spread of the spectral embeddings (Lin et al. 2024)",
)
def eccentricity_confidence(answers: Sequence[Hashable | None], kernel: Kernel) -> Score:
    """Confidence ``1 − U_Ecc / √(K − 1)`` in [0, 1] (U ∈ [0, √(K − 1)], see
    :func:`eccentricity`); per generation ``1 − ‖v'_j‖ / √(1 − 1/K)``. Not available
    above :data:`~credo.methods.graph.MAX_DISTINCT` distinct answers."""
    if why := too_many_distinct(answers):
        return Score.not_available(why)
    u = eccentricity(answers, kernel)
    conf = eccentricity_confidences(answers, kernel)
    value = float(np.clip(1.0 - u / math.sqrt(len(answers) - 1), 0.0, 1.0))
    return Score(value, tuple(float(c) for c in conf), ORIGINAL)

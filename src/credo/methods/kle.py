"""Kernel language entropy (Nikitin et al., NeurIPS 2024, "Kernel Language Entropy:
Fine-grained Uncertainty Quantification for LLMs from Semantic Similarities")."""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

import numpy as np

from credo.kernels.registry import Kernel
from credo.methods.base import ORIGINAL, ItemSamples, method
from credo.methods.graph import settle, similarity_graph

HEAT_T = 0.3
"""Heat-kernel time t: LM-Polygraph's default for KLE (the paper tunes t per dataset on a
grid; its code's default is 0.4)."""


def kle(
    answers: Sequence[Hashable | None],
    kernel: str | Kernel = "indicator",
    t: float = HEAT_T,
) -> float:
    """``KLE = VNE(ρ) = −tr(ρ ln ρ)`` in nats, ρ the unit-trace heat kernel of the answers'
    similarity graph (Nikitin et al. 2024, §3, KLE with K_heat).

    ``K_t = exp(−t L)`` with L = D − W the graph Laplacian of W
    (:func:`credo.methods.graph.similarity_graph`; the paper's code uses this
    unnormalised Laplacian by default), computed from ``eigh(L)``. As in the paper's
    code, K_t is normalised to unit diagonal and divided by K:
    ``ρ_ij = K_ij / √(K_ii K_jj) / K``, so tr ρ = 1; this is ``K_t / tr K_t`` whenever
    the diagonal of K_t is constant (e.g. all answers equivalent, all distinct, or
    equal-sized clusters). ρ is positive semi-definite, so VNE lies in [0, ln K]: ln K
    when W = I (L = 0, ρ = I/K). Needs K >= 2. Rounded by
    :func:`~credo.methods.graph.settle` (ties stay ties).
    """
    w = similarity_graph(answers, kernel)
    lap = np.diag(w.sum(axis=1)) - w
    lam, vec = np.linalg.eigh(lap)
    heat = (vec * np.exp(-t * lam)) @ vec.T
    d = np.sqrt(np.diag(heat))
    rho = heat / np.outer(d, d) / w.shape[0]
    mu = np.clip(np.linalg.eigvalsh((rho + rho.T) / 2.0), 0.0, None)
    mu = mu[mu > 1e-12]
    return float(settle(float(-(mu * np.log(mu)).sum())))


@method(
    "kle",
    needs=(ORIGINAL,),
    summary="1 − KLE / ln K, von Neumann entropy of the heat kernel (Nikitin et al. 2024)",
)
def score_kle(samples: ItemSamples, kernel: Kernel) -> float:
    """Confidence ``1 − KLE / ln K`` in [0, 1] (KLE ∈ [0, ln K], see :func:`kle`), t = 0.3.
    Unlike the discrete entropies it stays below 1 when all answers agree: the heat
    kernel at finite t keeps weight ``e^{−tK}`` off the constant eigenvector."""
    answers = samples.answers(ORIGINAL)
    return float(np.clip(1.0 - kle(answers, kernel) / math.log(len(answers)), 0.0, 1.0))

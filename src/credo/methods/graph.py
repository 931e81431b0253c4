"""The similarity graph of one item's samples, shared by the graph estimators.

Lin et al. (TMLR 2024, "Generating with Confidence", §4) and Nikitin et al. (NeurIPS
2024, "Kernel Language Entropy") read uncertainty off a weighted graph whose nodes are
the K sampled answers and whose weights are their pairwise similarities. Here the weights
come from the run's kernel (indicator, embedding or judge; 000 App. H):

- :func:`similarity_graph`: ``W = (K + Kᵀ)/2`` clipped to [0, 1] with ``W_ii = 1`` (Lin
  et al. symmetrise and put ones on the diagonal). An unparsable answer (``None``)
  matches nothing, so it is an isolated node: its own cluster, not a node of degree 0.
- :func:`semantic_clusters`: the connected components of the graph with an edge where
  both ``k(y_i, y_j) ≥ 0.5`` and ``k(y_j, y_i) ≥ 0.5`` (Kuhn et al., ICLR 2023:
  bidirectional entailment; with the indicator kernel, equal answers).
- :func:`normalized_laplacian`: ``L = I − D^{−1/2} W D^{−1/2}``, ``D = diag(W 1)``.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np
from scipy.sparse.csgraph import connected_components

from credo.kernels.registry import Kernel, get_kernel
from credo.ties import DECIMALS
from credo.ties import settle as settle_value

__all__ = ["SPECTRAL_DECIMALS", "normalized_laplacian", "semantic_clusters", "settle",
           "similarity_graph"]

EDGE = 0.5
"""Similarity at or above which two answers are in one semantic cluster."""


def similarity_graph(
    answers: Sequence[Hashable | None], kernel: str | Kernel = "indicator"
) -> np.ndarray:
    """The (K, K) weight matrix W of the answers (module docstring). Needs K >= 2."""
    k = _check(answers)
    gram = np.asarray(get_kernel(kernel)(answers, answers), dtype=float)
    w = np.clip((gram + gram.T) / 2.0, 0.0, 1.0)
    none = np.array([a is None for a in answers])
    w[none, :] = 0.0
    w[:, none] = 0.0
    w[np.arange(k), np.arange(k)] = 1.0
    return w


def semantic_clusters(
    answers: Sequence[Hashable | None], kernel: str | Kernel = "indicator"
) -> np.ndarray:
    """The cluster number of every answer (0-based, in order of first appearance)."""
    _check(answers)
    gram = np.asarray(get_kernel(kernel)(answers, answers), dtype=float)
    edges = (gram >= EDGE) & (gram.T >= EDGE)
    none = np.array([a is None for a in answers])
    edges[none, :] = False
    edges[:, none] = False
    _, labels = connected_components(edges, directed=False)
    first: dict[int, int] = {}
    return np.array([first.setdefault(int(c), len(first)) for c in labels], dtype=int)


def normalized_laplacian(w: np.ndarray) -> np.ndarray:
    """``L = I − D^{−1/2} W D^{−1/2}`` of a weight matrix with positive row sums."""
    d = 1.0 / np.sqrt(w.sum(axis=1))
    lap = np.eye(w.shape[0]) - d[:, None] * w * d[None, :]
    return (lap + lap.T) / 2.0  # exactly symmetric for eigh


SPECTRAL_DECIMALS = DECIMALS
"""Decimals the spectral estimators keep of a value near no small fraction (:func:`settle`)."""


def settle(x: np.ndarray | float) -> np.ndarray | float:
    """``x`` settled by credo's one rule for scores equal within rounding
    (:func:`credo.ties.settle`: the nearest fraction of denominator at most 10,000 within
    1e-12, else :data:`SPECTRAL_DECIMALS` decimals).

    ``eigh`` returns an exact eigenvalue such as 1 as 1 ± a few 1e-16, and the error
    differs with the order of the answers. Left as is, two items whose answers form the
    same clusters (equal U_EigV, KLE or U_Ecc in exact arithmetic) got scores 1e-16 apart,
    so ranking metrics broke their ties by rounding noise: on 20 MMLU items the indicator
    kernel's U_EigV (exactly the number of distinct answers) had AUROC 0.87 against 0.82
    for that count itself. Rounding the spectral quantities well above ``eigh``'s error
    (~K·1e-16) and far below any difference between distinct graphs restores the ties.
    """
    return settle_value(x)


def _check(answers: Sequence[Hashable | None]) -> int:
    k = len(answers)
    if k < 2:
        raise ValueError(f"the graph estimators need at least 2 samples, got {k}")
    return k

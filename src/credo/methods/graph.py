"""The similarity graph of one item's samples, shared by the graph estimators.

Lin et al. (TMLR 2024, "Generating with Confidence", §4) and Nikitin et al. (NeurIPS
2024, "Kernel Language Entropy") read uncertainty off a weighted graph whose nodes are
the K sampled answers and whose weights are their pairwise similarities. Here the weights
come from the run's kernel (indicator, embedding or judge; Wu et al., App. H):

- :func:`similarity_graph`: ``W = (K + Kᵀ)/2`` clipped to [0, 1] with ``W_ii = 1`` (Lin
  et al. symmetrise and put ones on the diagonal). An unparsable answer (``None``)
  matches nothing, so it is an isolated node: its own cluster, not a node of degree 0.
- :func:`semantic_clusters`: the connected components of the graph with an edge where
  both ``k(y_i, y_j) ≥ 0.5`` and ``k(y_j, y_i) ≥ 0.5`` (Kuhn et al., ICLR 2023:
  bidirectional entailment; with the indicator kernel, equal answers).
- :func:`normalized_laplacian`: ``L = I − D^{−1/2} W D^{−1/2}``, ``D = diag(W 1)``.

**K samples, U distinct answers** (:class:`ClassGraph`). A kernel is a function of two
answers, so samples with the same answer are identical nodes: W is made of blocks, one
per pair of distinct answers, and the estimators read it through U × U matrices instead of
K × K ones, exactly. With ``m_a`` samples of answer a, ``S_ab`` the weight between a
sample of a and one of b (``S_aa``: between two samples of a) and ``c_a = 1 − S_aa``
(the diagonal is 1), ``W = E S Eᵀ + diag(c)`` (E: the K × U membership matrix), every
degree of class a is ``d_a = Σ_b m_b S_ab + c_a``, and R^K splits into two invariant
subspaces of W, D and so of both Laplacians: the class indicators (U dimensions: in the
basis ``1_a / √m_a`` W is ``M = √m S √m + diag(c)``) and the vectors summing to zero
within one class (K − U dimensions, on which W acts as ``c_a``: the normalised Laplacian
has eigenvalue ``1 − c_a / d_a`` there, the unnormalised one ``d_a − c_a``, each
``m_a − 1`` times). The unparsable answers are one more class with ``S = 0`` (they match
nothing, not even each other) and ``c = 1``. So 10,000 samples of a handful of answers
score in milliseconds; the spectral estimators (EigV, eccentricity, KLE) and the degree
are refused as not available above :data:`MAX_DISTINCT` distinct answers, where the U × U
eigendecomposition alone would take minutes and gigabytes.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.sparse import csr_array
from scipy.sparse.csgraph import connected_components

from credo.kernels.distinct import DistinctAnswers, distinct_answers
from credo.kernels.registry import Kernel, get_kernel
from credo.ties import DECIMALS
from credo.ties import settle as settle_value

__all__ = [
    "MAX_DISTINCT",
    "SPECTRAL_DECIMALS",
    "ClassGraph",
    "class_graph",
    "normalized_laplacian",
    "semantic_clusters",
    "settle",
    "similarity_graph",
    "too_many_distinct",
]

EDGE = 0.5
"""Similarity at or above which two answers are in one semantic cluster."""

MAX_DISTINCT = 2000
"""The most distinct answers (U) the graph estimators (degree, eccentricity, EigV, KLE)
score an item with: their U × U eigendecomposition takes about a second there and
grows as U³ (10,000 distinct answers: minutes and over a gigabyte). Above it the
method is not available for the item, with the reason (:func:`too_many_distinct`); the
number of samples does not count, only how many of them differ."""


@dataclass(frozen=True)
class ClassGraph:
    """The similarity graph of K answers as U classes of identical nodes (module
    docstring): ``sizes`` m (U,), ``s`` the class weights S (U, U) and ``c = 1 − diag
    S``, ``index`` the class of each answer, in answer order."""

    sizes: np.ndarray
    s: np.ndarray
    index: np.ndarray

    @property
    def k(self) -> int:
        """The number of answers K."""
        return int(self.sizes.sum())

    @property
    def c(self) -> np.ndarray:
        """``W_ii − S_aa``: what the unit diagonal adds to a node's weights."""
        return 1.0 - np.diag(self.s)

    @property
    def degrees(self) -> np.ndarray:
        """``d_a = Σ_b m_b S_ab + c_a``, the degree of every node of class a."""
        return self.s @ self.sizes + self.c

    def reduced(self) -> np.ndarray:
        """``M = √m S √m + diag(c)``: W on the class indicators ``1_a / √m_a``."""
        r = np.sqrt(self.sizes)
        return r[:, None] * self.s * r[None, :] + np.diag(self.c)

    def normalized_spectrum(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The normalised Laplacian's eigenvalues: on the class indicators (U values and
        their eigenvectors, in the basis ``1_a / √m_a``), and within the classes (``1 −
        c_a / d_a``, each ``m_a − 1`` times). Returns ``(lam, vec, within, times)``."""
        d = self.degrees
        inv = 1.0 / np.sqrt(d)
        lap = np.eye(len(d)) - inv[:, None] * self.reduced() * inv[None, :]
        lam, vec = np.linalg.eigh((lap + lap.T) / 2.0)
        return lam, vec, 1.0 - self.c / d, self.sizes - 1.0


def class_graph(answers: Sequence[Hashable | None], kernel: str | Kernel = "indicator"
                ) -> ClassGraph:
    """The :class:`ClassGraph` of the answers: their distinct parsable answers (the
    kernel asked for those alone), then one class of the unparsable ones if any. Needs
    K >= 2."""
    _check(answers)
    found = distinct_answers(answers)
    u = len(found.values)
    s = np.zeros((u, u))
    if u:
        gram = found.gram(kernel)
        s = np.clip((gram + gram.T) / 2.0, 0.0, 1.0)
    index, sizes = found.index.copy(), found.counts
    if found.unparsable:  # one class that matches nothing, itself included
        s = np.pad(s, ((0, 1), (0, 1)))
        sizes = np.append(sizes, float(found.unparsable))
        index[index < 0] = u
    return ClassGraph(sizes, s, index)


def too_many_distinct(answers: Sequence[Hashable | None]) -> str:
    """Why the graph estimators do not score these answers (more than
    :data:`MAX_DISTINCT` distinct ones), or "" when they do."""
    u = len({a for a in answers if a is not None})
    if u <= MAX_DISTINCT:
        return ""
    return (f"{u} distinct answers among {len(answers)} samples: above the graph "
            f"estimators' {MAX_DISTINCT} (their eigendecomposition grows as the cube of "
            "the distinct answers)")


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
    """The cluster number of every answer (0-based, in order of first appearance).

    Computed on the distinct answers (module docstring): two distinct answers are joined
    where the kernel is at least :data:`EDGE` both ways; the samples of one answer are
    one cluster when ``k(a, a) ≥ EDGE`` or when the answer is joined to another, else
    each is a cluster of its own (as an unparsable answer always is)."""
    _check(answers)
    found = distinct_answers(answers)
    u = len(found.values)
    label = np.full(len(answers), -1, dtype=np.int64)
    if u:
        edges, own = _edges(found, kernel)
        _, comp = connected_components(edges, directed=False)
        label = np.where(found.index >= 0, comp[np.maximum(found.index, 0)], -1)
        joined = np.zeros(u, dtype=bool)
        joined[edges.nonzero()[0]] = True
        alone = ~own & ~joined  # its samples are joined to nothing
        split = (found.index >= 0) & alone[np.maximum(found.index, 0)]
        label[split] = -1
    spare = (label.max(initial=-1) + 1) + np.arange(len(answers))
    label = np.where(label < 0, spare, label)  # each on its own
    first: dict[int, int] = {}
    return np.array([first.setdefault(int(c), len(first)) for c in label], dtype=int)


def _edges(found: DistinctAnswers, kernel: str | Kernel) -> tuple[csr_array, np.ndarray]:
    """The semantic edges between distinct answers (both ``k(a, b)`` and ``k(b, a)`` at
    least :data:`EDGE`, ``a ≠ b``) as a sparse matrix, and whether ``k(a, a) ≥ EDGE``;
    asked a block of rows (and the matching columns) at a time, so thousands of
    different answers never hold the U × U matrix."""
    gram = get_kernel(kernel)
    values = list(found.values)
    u = len(values)
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    own = np.zeros(u, dtype=bool)
    for start, block in found.row_blocks(kernel):
        stop = start + len(block)
        back = np.asarray(gram(values, values[start:stop]), dtype=float).reshape(u, -1).T
        both = (block >= EDGE) & (back >= EDGE)
        span = np.arange(stop - start)
        own[start:stop] = both[span, start + span]
        both[span, start + span] = False
        r, c = both.nonzero()
        rows.append(r + start)
        cols.append(c)
    r, c = np.concatenate(rows), np.concatenate(cols)
    return csr_array((np.ones(r.size, dtype=bool), (r, c)), shape=(u, u)), own


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

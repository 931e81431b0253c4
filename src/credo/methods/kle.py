"""Kernel language entropy (Nikitin et al., NeurIPS 2024, "Kernel Language Entropy:
Fine-grained Uncertainty Quantification for LLMs from Semantic Similarities").

**The scale, and the heat-kernel time t.** The confidence ``1 − KLE / ln K`` is 0 when no
two answers are similar (W = I: L = 0, ρ = I/K, KLE = ln K) but, unlike the discrete
entropies, it is not 1 when all K answers agree. Then W is all ones, L = K·I − J, and the
heat kernel ``exp(−tL)`` has eigenvalue 1 on the constant vector and ``e^{−tK}`` on the
K − 1 others: ρ keeps the weight ``e^{−tK}`` off the constant eigenvector, and the
confidence of K identical answers is a function of ``t·K`` alone. At the default
t = 0.3, five identical answers score 0.16 (KLE 1.35 of ln 5 = 1.61), ten 0.44 and thirty
0.99; at t = 1 five score 0.90. So with few samples the default t leaves even unanimous
items far from 1: KLE ranks items (AUROC, PRR) on its own scale rather than stating a
probability, and ECE/Brier of its raw value mostly measure that scale (``calibrate``
maps it).

t is a hyperparameter of the method. Nikitin et al. select the kernel and t per dataset
on validation data; LM-Polygraph's default is 0.3, the paper's code's 0.4. credo keeps
0.3 (:data:`HEAT_T`) and lets a run change it: ``baselines: {kle_t: 1.0}`` in a run's or
``credo score``'s YAML reaches the method as ``ItemSamples.options["kle_t"]``.
:func:`select_heat_t` is the paper's choice made on labelled validation items: the t of
a grid whose KLE ranks them best (AUROC against 1[p̄ ≥ 0.5]); use it on items you do not
evaluate on.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

import numpy as np

from credo.kernels.registry import Kernel
from credo.methods.base import ORIGINAL, ItemSamples, Score, method
from credo.methods.graph import class_graph, settle, too_many_distinct

HEAT_T = 0.3
"""Heat-kernel time t: LM-Polygraph's default for KLE (the paper tunes t per dataset on
validation data; its code's default is 0.4). A run's ``baselines.kle_t`` replaces it."""

T_GRID = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0)
"""The heat times :func:`select_heat_t` tries by default."""


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
    :func:`~credo.methods.graph.settle` (ties stay ties). Computed through the distinct
    answers (:class:`~credo.methods.graph.ClassGraph`): L, K_t and ρ keep the classes'
    block structure, so ρ's eigenvalues are those of its U × U reduction and, within
    each class a, ``e^{−t(d_a − c_a)} / (K (K_t)_aa)`` ``m_a − 1`` times; exactly the
    K × K computation.
    """
    g = class_graph(answers, kernel)
    d, m = g.degrees, g.sizes
    lap = np.diag(d) - g.reduced()  # L on the class indicators 1_a / √m_a
    lam, vec = np.linalg.eigh((lap + lap.T) / 2.0)
    heat = (vec * np.exp(-t * lam)) @ vec.T
    within = np.exp(-t * (d - g.c))  # exp(−tL) within a class, m_a − 1 times
    diag = np.diag(heat) / m + (1.0 - 1.0 / m) * within  # K_t's diagonal, per class
    rho = heat / np.sqrt(np.outer(diag, diag)) / g.k
    mu = np.concatenate([np.linalg.eigvalsh((rho + rho.T) / 2.0), within / diag / g.k])
    times = np.concatenate([np.ones(len(d)), m - 1.0])
    mu = np.clip(mu, 0.0, None)
    keep = (mu > 1e-12) & (times > 0)
    return float(settle(float(-(times[keep] * mu[keep] * np.log(mu[keep])).sum())))


@method(
    "kle",
    needs=(ORIGINAL,),
    summary="1 − KLE / ln K, von Neumann entropy of the heat kernel at t = baselines.kle_t "
    "(default 0.3; Nikitin et al. 2024)",
    min_samples={ORIGINAL: 2},
)
def score_kle(samples: ItemSamples, kernel: Kernel) -> float | Score:
    """Confidence ``1 − KLE / ln K`` in [0, 1] (KLE ∈ [0, ln K], see :func:`kle`), at the
    heat time ``samples.options["kle_t"]`` (default :data:`HEAT_T`). 0 when no two answers
    are similar; K identical answers score a function of t·K that reaches 1 only as t·K
    grows (0.16 for five answers at t = 0.3; the module docstring). Rounded by
    :func:`~credo.methods.graph.settle`, so the extremes are exact. Not available below
    2 samples, or above :data:`~credo.methods.graph.MAX_DISTINCT` distinct answers."""
    answers = samples.answers(ORIGINAL)
    if why := too_many_distinct(answers):
        return Score.not_available(why)
    t = float(samples.options.get("kle_t", HEAT_T))
    return kle_confidence(answers, kernel, t)


def kle_confidence(
    answers: Sequence[Hashable | None], kernel: str | Kernel = "indicator", t: float = HEAT_T
) -> float:
    """The method's confidence ``1 − KLE / ln K`` of one item's answers at heat time t."""
    ratio = kle(answers, kernel, t) / math.log(len(answers))
    return float(settle(float(np.clip(1.0 - ratio, 0.0, 1.0))))


def select_heat_t(
    items: Sequence[Sequence[Hashable | None]],
    performance: Sequence[float],
    kernel: str | Kernel = "indicator",
    grid: Sequence[float] = T_GRID,
) -> tuple[float, dict[float, float]]:
    """The heat time of ``grid`` whose KLE confidence ranks validation items best.

    ``items`` holds each validation item's answers (2 or more), ``performance`` its p̄ (or
    0/1 correctness); the criterion is AUROC against ``1[p̄ ≥ 0.5]``, as the evaluation
    reads it (scikit-learn's ``roc_auc_score``, as :func:`credo.evaluate.metrics.auroc`).
    Returns the best t (the smallest of equally good ones) and every t's AUROC. Nikitin
    et al. select t on validation data in this way; choosing it on the items a run then
    evaluates would flatter the method.
    Raises ValueError when the labels hold one class (no AUROC to compare).
    """
    from sklearn.metrics import roc_auc_score  # the evaluation's AUROC (evaluate.metrics)

    labels = (np.asarray(performance, dtype=float) >= 0.5).astype(int)
    if len(items) != labels.size:
        raise ValueError(f"{len(items)} items but {labels.size} performance values")
    if np.unique(labels).size < 2:
        raise ValueError("select_heat_t needs validation items of both classes")
    table = {
        float(t): float(roc_auc_score(labels, [kle_confidence(a, kernel, float(t))
                                               for a in items]))
        for t in sorted(grid)
    }
    best = max(table, key=lambda t: (table[t], -t))
    return best, table

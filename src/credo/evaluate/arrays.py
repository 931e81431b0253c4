"""Any scores, evaluated as credo evaluates its own: :func:`evaluate` on two arrays.

``credo.evaluate(scores, correct)`` is the evaluation of a run's method, for scores that
come from anywhere (a reward model, a judge, another toolkit's estimator): every
registered metric (:mod:`credo.evaluate.registry`: ECE, MCE, Brier, AUROC, AUPRC-P/N,
AUARC, PRR) with its 95% bootstrap interval, the mean score, the Pearson calibration
correlation and the polarisation. With ``questions`` (the question of each row) the rows
are generations and the intervals resample questions, all of a question's rows together
(the cluster bootstrap). The scores are settled (:func:`credo.ties.settle`) as every
metric of credo reads them.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from credo.evaluate import registry
from credo.evaluate.bootstrap import bootstrap_cis
from credo.evaluate.metrics import labels_from_performance, metric_inputs
from credo.evaluate.tables import add_cis, metric_values

__all__ = ["evaluate"]

ArrayLike = Sequence[float] | np.ndarray


def evaluate(
    scores: ArrayLike,
    correct: ArrayLike,
    *,
    questions: Sequence[object] | np.ndarray | None = None,
    n_bins: int = 10,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, float]:
    """Evaluate ``scores`` against ``correct`` with credo's metrics and intervals.

    Parameters
    ----------
    scores : float in [0, 1], shape (N,)
        One score per row, higher = more likely right; no NaN (drop unscored rows first).
    correct : float in [0, 1], shape (N,)
        Each row's correctness: 0/1 (or bool) per answer, or an item's p̄ (the share of
        its samples that are right). The calibration metrics (ECE, MCE) and the quality
        of AUARC and PRR read it as given; the ranking metrics and Brier read the label
        ``1[correct >= 0.5]``.
    questions : shape (N,), optional
        The question of each row, when rows are generations of shared questions: the
        metrics are the per-generation ones and the intervals resample questions.
    n_bins : the equal-width ECE/MCE bins.
    n_resamples, confidence, seed : the bootstrap (0 resamples: no intervals).

    Returns
    -------
    ``{metric: value}`` for every registered metric of the level (per item, or per
    generation with ``questions``), ``<metric>_low`` / ``<metric>_high`` (NaN where
    undefined on most resamples), ``mean_score``, ``pearson``, ``polarisation``,
    ``smaller_class`` (rows in the smaller class of the labels), ``n`` and, with
    ``questions``, ``n_questions``. A ValueError names a wrong argument.
    """
    s, perf = metric_inputs(scores, correct, "p_bar", name="correct")
    labels = labels_from_performance(perf)
    level: registry.Level = "item" if questions is None else "generation"
    ids = None
    if questions is not None:
        ids = np.asarray(questions)
        if ids.shape != s.shape:
            raise ValueError(f"questions must give one question per score, got shape "
                             f"{ids.shape} for {s.shape}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # one class: NaN, said by the value
        out = metric_values(s, perf, labels, n_bins, None, level)
    out["n"] = int(s.size)
    if ids is not None:
        out["n_questions"] = int(np.unique(ids).size)
    if n_resamples > 0:
        names = registry.names(level, bootstrap=True)
        cis = bootstrap_cis(s, perf, labels, names, n_bins=n_bins, n_resamples=n_resamples,
                            confidence=confidence, seed=seed, clusters=ids)
        add_cis(out, cis)
    return out

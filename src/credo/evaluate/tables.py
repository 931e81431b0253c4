"""Evaluation tables of a run (000 App. E.2; 002 §3.5-3.7): every method's scores
against correctness, per item and per generation, with bootstrap CIs.

Pure functions of the scoring stage's :class:`~credo.methods.scoring.ItemResult` list;
they know nothing of how the samples were generated.
"""

from __future__ import annotations

import math
import warnings
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from credo.evaluate.bootstrap import (
    bootstrap_ci,
    calibration_correlation,
    polarisation_entropy,
    row_metrics,
)
from credo.evaluate.metrics import (
    auprc_neg,
    auprc_pos,
    auroc,
    ece,
    ece_discrete,
    labels_from_performance,
)
from credo.methods.scoring import ItemResult

__all__ = ["METRICS", "RESPONSE_CI_METRICS", "evaluate_items", "evaluate_responses",
           "unavailable_reasons"]

METRICS = ("ece", "auroc", "auprc_pos", "auprc_neg")
#: Metrics that get bootstrap CIs at the response level (002 §3.7 reports ECE and AUROC).
RESPONSE_CI_METRICS = ("ece", "auroc")


def evaluate_items(
    items: Sequence[ItemResult],
    methods: Sequence[str],
    n_bins: int = 10,
    n_resamples: int = 0,
    seed: int = 0,
) -> dict[str, dict[str, float]]:
    """Item-level evaluation per method (000 App. E.2): score vs p̄ and vs 1[p̄ ≥ 0.5].

    ECE, AUROC, AUPRC-P, AUPRC-N, mean score, Pearson calibration correlation and the
    polarisation entropy (002 Fig. 4, §4), over the items the method scored
    (``n_items``); with ``n_resamples`` > 0 also 95% bootstrap CIs as ``<metric>_low``
    and ``<metric>_high`` (002 §3.7). Extras a method reports (e.g. label mass) are
    averaged.
    """
    out: dict[str, dict[str, float]] = {}
    # A metric undefined on one class is NaN and shown as n/a in the report; no warning.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for name in methods:
            # items without a score, or whose correctness is unavailable (NaN p̄), are out
            rows = [
                r for r in items if not math.isnan(r.scores[name]) and not math.isnan(r.performance)
            ]
            s = np.array([r.scores[name] for r in rows], dtype=float)
            perf = np.array([r.performance for r in rows], dtype=float)
            labels = labels_from_performance(perf) if rows else np.zeros(0, dtype=int)
            d = _metrics(s, perf, labels, n_bins, None)
            d["n_items"] = len(rows)
            if n_resamples and len(rows) >= 2:
                fns = row_metrics(n_bins)  # ECE with the run's bins, as the point value
                for metric in METRICS:
                    target = perf if metric == "ece" else labels
                    lo, hi = bootstrap_ci(fns[metric], s, target, n_resamples, seed=seed)
                    d[f"{metric}_low"], d[f"{metric}_high"] = lo, hi
            extras: dict[str, list[float]] = defaultdict(list)
            for r in rows:
                for k, v in r.method_scores[name].extras.items():
                    extras[k].append(v)
            d.update({k: float(np.mean(v)) for k, v in extras.items()})
            out[name] = d
    return out


def evaluate_responses(
    items: Sequence[ItemResult],
    methods: Sequence[str],
    n_bins: int = 10,
    n_resamples: int = 0,
    seed: int = 0,
) -> dict[str, dict[str, float]]:
    """Response-level evaluation (002 §3.5–3.7): each generation's confidence against
    that generation's own correctness, for methods that score generations.

    Discrete-valued scores (Answer Consistency) use one ECE bin per value (002 App.
    A.11.3). Bootstrap CIs resample responses.
    """
    out: dict[str, dict[str, float]] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for name in methods:
            conf: list[float] = []
            corr: list[float] = []
            levels = None
            for r in items:
                sc = r.method_scores[name]
                if not sc.responses:
                    continue
                levels = levels or sc.levels
                for value, ok in zip(sc.responses, r.set_correct.get(sc.of, ()), strict=False):
                    if value is not None and ok is not None:
                        conf.append(value)
                        corr.append(float(ok))
            if not conf:
                continue
            s, c = np.array(conf), np.array(corr)
            d = _metrics(s, c, c.astype(int), n_bins, levels)
            d["n_responses"] = len(conf)
            d["accuracy"] = float(c.mean())
            if n_resamples and len(conf) >= 2:
                for metric in RESPONSE_CI_METRICS:
                    fn = _discrete_ece(levels) if metric == "ece" and levels else metric
                    lo, hi = bootstrap_ci(fn, s, c, n_resamples, seed=seed)
                    d[f"{metric}_low"], d[f"{metric}_high"] = lo, hi
            out[name] = d
    return out


def _metrics(
    s: np.ndarray, target: np.ndarray, labels: np.ndarray, n_bins: int, levels: Any
) -> dict[str, float]:
    if s.size == 0:
        return {k: math.nan for k in (*METRICS, "mean_score", "pearson", "polarisation")}
    return {
        "ece": ece_discrete(s, target, levels) if levels else ece(s, target, n_bins),
        "auroc": auroc(s, labels),
        "auprc_pos": auprc_pos(s, labels),
        "auprc_neg": auprc_neg(s, labels),
        "mean_score": float(s.mean()),
        "pearson": calibration_correlation(s, target, n_bins, levels),
        "polarisation": polarisation_entropy(s, n_bins, levels),
    }


def _discrete_ece(levels: tuple[float, ...]):
    def metric(s: np.ndarray, c: np.ndarray) -> float:
        return ece_discrete(s, c, levels)

    return metric


def unavailable_reasons(items: Sequence[ItemResult], methods: Sequence[str]) -> dict[str, str]:
    """Per method, why items have no score: the reasons and how many items each."""
    out = {}
    for name in methods:
        reasons: dict[str, int] = defaultdict(int)
        for r in items:
            sc = r.method_scores[name]
            if math.isnan(sc.value):
                reasons[sc.unavailable or "no score"] += 1
        if reasons:
            out[name] = "; ".join(
                f"{why} ({k} of {len(items)} items)" for why, k in reasons.items()
            )
    return out

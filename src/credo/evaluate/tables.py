"""Evaluation tables of a run (Wu et al., App. E.2; Müller et al., §3.5-3.7): every method's scores
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

from credo.evaluate import registry
from credo.evaluate.bootstrap import (
    bootstrap_cis,
    calibration_correlation,
    polarisation_entropy,
)
from credo.evaluate.calibration import Calibration, cross_fitted
from credo.evaluate.metrics import labels_from_performance, smaller_class
from credo.evaluate.registry import Level
from credo.methods.scoring import ItemResult

__all__ = ["METRICS", "RESPONSE_CI_METRICS", "add_cis", "evaluate_items",
           "evaluate_responses", "metric_values", "unavailable_reasons"]

#: Metrics of the item table with a bootstrap CI: the registered metrics evaluated per
#: item (:mod:`credo.evaluate.registry`), calibration (ECE, MCE, Brier),
#: ranking (AUROC, AUPRC-P, AUPRC-N) and rejection (AUARC, PRR). A live view.
METRICS = registry.names("item", bootstrap=True)
#: Metrics that get bootstrap CIs at the response level: all registered per generation,
#: now that the weighted bootstrap makes 10^5 responses cheap (Müller et al., §3.7 reports ECE and
#: AUROC).
RESPONSE_CI_METRICS = registry.names("generation", bootstrap=True)


def evaluate_items(
    items: Sequence[ItemResult],
    methods: Sequence[str],
    n_bins: int = 10,
    n_resamples: int = 0,
    seed: int = 0,
    calibrate: Calibration = "none",
) -> dict[str, dict[str, float]]:
    """Item-level evaluation per method (Wu et al., App. E.2): score vs p̄ and vs 1[p̄ ≥ 0.5].

    ECE and MCE against p̄, Brier, AUROC, AUPRC-P and AUPRC-N against the label
    1[p̄ ≥ 0.5], AUARC and PRR with p̄ as the quality, the mean score, Pearson calibration
    correlation and the polarisation entropy (Müller et al., Fig. 4, §4), over the items the method
    scored (``n_items``); with ``n_resamples`` > 0 also 95% bootstrap CIs as
    ``<metric>_low`` and ``<metric>_high`` (Müller et al., §3.7), all metrics of a method from the
    same resamples. With ``calibrate`` "isotonic" or "platt", ``ece_calibrated`` and
    ``brier_calibrated`` are the same metrics of the scores mapped by a calibrator
    cross-fitted over items (:mod:`credo.evaluate.calibration`, folds seeded by
    ``seed``). Extras a method reports (e.g. label mass) are averaged.
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
            d = metric_values(s, perf, labels, n_bins, None, "item")
            d["n_items"] = len(rows)
            if n_resamples and len(rows) >= 2:
                cis = bootstrap_cis(s, perf, labels, METRICS, n_bins=n_bins,
                                    n_resamples=n_resamples, seed=seed)
                add_cis(d, cis)
            if calibrate != "none":
                d.update(_calibrated(s, perf, labels, n_bins, calibrate, seed, None, "item"))
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
    calibrate: Calibration = "none",
) -> dict[str, dict[str, float]]:
    """Response-level evaluation (Müller et al., §3.5–3.7): each generation's confidence against
    that generation's own correctness, for methods that score generations.

    The metrics of :func:`evaluate_items` with the 0/1 correctness as target, label and
    quality. Discrete-valued scores (Answer Consistency) use one ECE/MCE bin per value
    (Müller et al., App. A.11.3). Bootstrap CIs resample questions: each resample draws items with
    replacement and keeps all their generations (the cluster bootstrap,
    :func:`~credo.evaluate.bootstrap.bootstrap_cis` with ``clusters``), since the
    generations of one question are not independent. Calibrated ECE and Brier
    (``calibrate``) are cross-fitted over items: all generations of an item are held out
    together; their ECE uses ``n_bins`` equal-width bins (the calibrated scores leave the
    discrete levels).
    """
    out: dict[str, dict[str, float]] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for name in methods:
            conf: list[float] = []
            corr: list[float] = []
            owner: list[int] = []
            levels = None
            for k, r in enumerate(items):
                sc = r.method_scores[name]
                if not sc.responses:
                    continue
                levels = levels or sc.levels
                for value, ok in zip(sc.responses, r.set_correct.get(sc.of, ()), strict=False):
                    if value is not None and ok is not None:
                        conf.append(value)
                        corr.append(float(ok))
                        owner.append(k)
            if not conf:
                continue
            s, c = np.array(conf), np.array(corr)
            d = metric_values(s, c, c.astype(int), n_bins, levels, "generation")
            d["n_responses"] = len(conf)
            d["n_items"] = len(set(owner))
            d["accuracy"] = float(c.mean())
            if n_resamples and len(conf) >= 2:
                cis = bootstrap_cis(s, c, c, RESPONSE_CI_METRICS, n_bins=n_bins, levels=levels,
                                    n_resamples=n_resamples, seed=seed, clusters=owner)
                add_cis(d, cis)
            if calibrate != "none":
                d.update(_calibrated(s, c, c, n_bins, calibrate, seed, np.array(owner),
                                     "generation"))
            out[name] = d
    return out


def metric_values(
    s: np.ndarray, target: np.ndarray, labels: np.ndarray, n_bins: int, levels: Any,
    per: Level,
) -> dict[str, float]:
    """The registered metrics of level ``per`` of the scores ``s`` against ``target``
    (p̄ or 0/1) and ``labels`` (inputs checked by each metric), then the mean score, the
    smaller class, Pearson and polarisation: every evaluation table's row."""
    chosen = registry.registered(per)
    if s.size == 0:
        return {k: math.nan for k in (*(m.name for m in chosen), "mean_score", "pearson",
                                      "polarisation")}
    return {
        **{m.name: m(s, m.target_of(target, labels), n_bins, levels) for m in chosen},
        "mean_score": float(s.mean()),
        "smaller_class": smaller_class(labels),
        "pearson": calibration_correlation(s, target, n_bins, levels),
        "polarisation": polarisation_entropy(s, n_bins, levels),
    }


def add_cis(d: dict[str, float], cis: dict[str, tuple[float, float]]) -> None:
    """Each metric's interval into ``d`` as ``<metric>_low`` and ``<metric>_high``."""
    for metric, (lo, hi) in cis.items():
        d[f"{metric}_low"], d[f"{metric}_high"] = lo, hi


def _calibrated(
    s: np.ndarray,
    target: np.ndarray,
    labels: np.ndarray,
    n_bins: int,
    method: Calibration,
    seed: int,
    items: np.ndarray | None,
    per: Level,
) -> dict[str, float]:
    """``<metric>_calibrated`` of the cross-fitted calibrated scores for the metrics
    registered ``calibrated`` (ECE with ``n_bins`` equal-width bins, Brier); NaN below 2
    items."""
    chosen = registry.registered(per, calibrated=True)
    cal = cross_fitted(s, target, method, items=items, seed=seed)
    if s.size == 0 or np.isnan(cal).any():
        return {f"{m.name}_calibrated": math.nan for m in chosen}
    cal = np.clip(cal, 0.0, 1.0)
    return {f"{m.name}_calibrated": m(cal, m.target_of(target, labels), n_bins) for m in chosen}


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

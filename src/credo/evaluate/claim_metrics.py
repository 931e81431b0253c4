"""Claim methods evaluated per claim against the claim labels.

Every claim with a label and a finite score of the method is one row: the score is the
confidence, the label the target (0/1) of every metric registered per generation
(:mod:`credo.evaluate.registry`: ECE, AUROC, AUPRC, Brier, PRR, ...), computed by the
same table function as the response-level evaluation. Claims of one answer are not
independent (one answer, one set of samples), so the confidence intervals are a
*cluster* bootstrap: each resample draws the items (answers) with replacement and keeps
all their claims (Field & Welsh 2007), percentile intervals over ``n_resamples`` draws
of :func:`credo.evaluate.weighted.resample_indices` (a resample on which a metric is
undefined is left out; more than half undefined: NaN).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np

from credo.evaluate import registry
from credo.evaluate.bootstrap import percentile_interval
from credo.evaluate.tables import _metrics
from credo.evaluate.weighted import resample_indices
from credo.tasks.claims import ClaimItem

__all__ = ["claim_rows", "evaluate_claim_methods"]


def claim_rows(
    items: Sequence[ClaimItem], method: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(scores, labels, item index)`` of every labelled claim with a finite score."""
    s, y, owner = [], [], []
    for k, item in enumerate(items):
        for c in item.claims:
            v = c.scores.get(method)
            if c.correct is None or v is None or not math.isfinite(v):
                continue
            s.append(float(v))
            y.append(int(c.correct))
            owner.append(k)
    return np.array(s, dtype=float), np.array(y, dtype=int), np.array(owner, dtype=int)


def evaluate_claim_methods(
    items: Sequence[ClaimItem],
    methods: Sequence[str],
    *,
    n_bins: int = 10,
    n_resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, dict[str, float]]:
    """Per method: the generation-level metrics over its labelled claims, ``n_claims``,
    ``n_items`` and, with ``n_resamples`` > 0, ``<metric>_low`` / ``<metric>_high`` from
    the cluster bootstrap over items (module docstring). A method with no labelled,
    scored claim is left out."""
    out: dict[str, dict[str, float]] = {}
    chosen = [m for m in registry.registered("generation") if m.bootstrap]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for name in methods:
            s, y, owner = claim_rows(items, name)
            if s.size == 0:
                continue
            d = _metrics(s, y.astype(float), y, n_bins, None, "generation")
            d["n_claims"] = int(s.size)
            d["n_items"] = int(np.unique(owner).size)
            if n_resamples > 0:
                d.update(_cluster_cis(s, y, owner, chosen, n_bins, n_resamples, seed,
                                      confidence))
            out[name] = d
    return out


def _cluster_cis(s, y, owner, chosen, n_bins, n_resamples, seed, confidence):
    groups = [np.nonzero(owner == g)[0] for g in np.unique(owner)]
    dist: dict[str, list[float]] = {m.name: [] for m in chosen}
    for draw in resample_indices(len(groups), n_resamples, seed):
        for row in np.atleast_2d(draw):
            idx = np.concatenate([groups[g] for g in row])
            ss, yy = s[idx], y[idx]
            for m in chosen:
                try:
                    value = m(ss, m.target_of(yy.astype(float), yy), n_bins, None)
                except ValueError:  # a resample on which the metric is undefined
                    value = math.nan
                dist[m.name].append(value)
    out = {}
    for name, values in dist.items():
        lo, hi = percentile_interval(np.array(values, dtype=float), confidence)
        out[f"{name}_low"], out[f"{name}_high"] = lo, hi
    return out

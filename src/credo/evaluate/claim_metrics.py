"""Claim methods evaluated per claim against the claim labels.

Every claim with a label and a finite score of the method is one row: the score is the
confidence, the label the target (0/1) of every metric registered per generation
(:mod:`credo.evaluate.registry`: ECE, AUROC, AUPRC, Brier, PRR, ...), computed by the
same table function as the response-level evaluation. Claims of one answer are not
independent (one answer, one set of samples), so the confidence intervals are a
*cluster* bootstrap: each resample draws the items (answers) with replacement and keeps
all their claims (Field & Welsh 2007), percentile intervals over ``n_resamples`` draws
of :func:`credo.evaluate.weighted.resample_indices` (a resample on which a metric is
undefined is left out; more than half undefined: NaN), on the weighted engine that every
per-generation interval uses (:func:`~credo.evaluate.bootstrap.bootstrap_cis` with
``clusters``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np

from credo.evaluate import registry
from credo.evaluate.bootstrap import bootstrap_cis
from credo.evaluate.tables import add_cis, metric_values
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
            d = metric_values(s, y.astype(float), y, n_bins, None, "generation")
            d["n_claims"] = int(s.size)
            d["n_items"] = int(np.unique(owner).size)
            if n_resamples > 0:
                cis = bootstrap_cis(s, y.astype(float), y, [m.name for m in chosen],
                                    n_bins=n_bins, n_resamples=n_resamples,
                                    confidence=confidence, seed=seed, clusters=owner)
                add_cis(d, cis)
            out[name] = d
    return out

"""What the report computes from a run folder: tables with CIs, paired tests, quadrants,
convergence and perturbation checks. Pure functions of :class:`RunData`; no model calls
(the diversity check's similarities are read from ``perturbation_similarity.json``,
written by the perturbation stage or by ``credo report`` with the embedder available).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from credo.evaluate import registry
from credo.evaluate.bootstrap import bootstrap_cis
from credo.evaluate.convergence import Convergence, ItemTrials, trial_convergence
from credo.evaluate.metrics import (
    FEW_IN_CLASS,
    labels_from_performance,
    smaller_class,
)
from credo.evaluate.neutrality import Neutrality, neutrality
from credo.evaluate.paired import PairedDifference, paired_bootstrap
from credo.evaluate.quadrants import Quadrants, diagnose
from credo.report.figures import discrete_levels
from credo.report.rundata import SIMILARITY_FILE, RunData

#: ``name -> header`` of the item-level metrics of the report's tables: the metrics
#: registered per item (:mod:`credo.evaluate.registry`), a live view.
CI_METRICS = registry.headers("item")


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its bootstrap CI (NaN when undefined)."""

    value: float
    low: float = math.nan
    high: float = math.nan


@dataclass
class MethodSummary:
    """One method of one run: metrics with CIs, extra metrics from metrics.json, levels."""

    method: str
    n_items: int
    estimates: dict[str, Estimate]
    extra: dict[str, float] = field(default_factory=dict)
    levels: np.ndarray | None = None
    note: str = ""
    #: Items in the smaller class of 1[p̄ ≥ 0.5]: ranking metrics on fewer than
    #: FEW_IN_CLASS are marked.
    smaller_class: int = -1

    @property
    def few(self) -> bool:
        """Whether its AUROC / AUPRC rest on a class of fewer than FEW_IN_CLASS items."""
        return 0 <= self.smaller_class < FEW_IN_CLASS


def method_summaries(
    run: RunData, *, n_resamples: int = 1000, confidence: float = 0.95, seed: int = 0
) -> list[MethodSummary]:
    """The metrics of :data:`CI_METRICS` with bootstrap CIs for every method of ``run``.

    Recomputed from scores.jsonl (Wu et al., App. E.2: targets p̄ for ECE, MCE, AUARC and PRR,
    labels 1[p̄ ≥ 0.5] for the rest, as registered; ECE and MCE with the run's
    ``ece_bins`` equal-width bins) so point and interval come from the same data; points
    from each registered metric's row function (:mod:`credo.evaluate.registry`), CIs from
    :func:`~credo.evaluate.bootstrap.bootstrap_cis` (Müller et al., §3.7: 95%, 1000 resamples; all
    metrics of a method from the same resamples, as in metrics.json). Other numeric
    entries of metrics.json (Pearson calibration correlation, polarisation, mean score,
    calibrated ECE, ...) are carried as ``extra``.
    """
    perf = run.performance
    n_bins = int(run.config.get("ece_bins") or 10)
    chosen = registry.registered("item")
    out = []
    for m in run.methods:
        s = run.score(m)
        ok = ~(np.isnan(s) | np.isnan(perf))
        s_ok, p_ok = s[ok], perf[ok]
        y = labels_from_performance(p_ok).astype(float) if p_ok.size else np.zeros(0)
        values = {
            x.name: float(x.values(s_ok[None, :], x.target_of(p_ok, y)[None, :], n_bins)[0])
            if s_ok.size else math.nan
            for x in chosen
        }
        defined = [x.name for x in chosen if x.bootstrap and not math.isnan(values[x.name])]
        cis: dict[str, tuple[float, float]] = {}
        if defined and n_resamples > 0:
            cis = bootstrap_cis(s_ok, p_ok, y, defined, n_bins=n_bins, n_resamples=n_resamples,
                                confidence=confidence, seed=seed)
        est = {k: Estimate(values[k], *cis.get(k, (math.nan, math.nan))) for k in values}
        extra = {
            k: float(v)
            for k, v in ((run.metrics.get("methods") or {}).get(m) or {}).items()
            if isinstance(v, int | float) and not isinstance(v, bool)
            and k not in registry.METRICS
            and k not in ("items", "n_items", "smaller_class")
            and not k.endswith(("_low", "_high"))
        }
        out.append(
            MethodSummary(m, int(ok.sum()), est, extra, discrete_levels(s_ok), run.method_note(m),
                          smaller_class(y))
        )
    return out


def default_pairs(methods: Sequence[str], reference: str | None = None) -> list[tuple[str, str]]:
    """(reference, other) for every other method; the reference is ``combined`` when
    present (a combination is tested against every score it combines, the best single one
    among them), else ``c3`` when present, else the first method."""
    if not methods:
        return []
    ref = reference if reference in methods else next(
        (m for m in ("combined", "c3") if m in methods), methods[0])
    return [(ref, m) for m in methods if m != ref]


def paired_tests(
    run: RunData,
    pairs: Sequence[tuple[str, str]],
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> list[dict[str, PairedDifference]]:
    """ΔAUROC and ΔECE (A − B) with paired bootstrap CIs and p for each pair of methods,
    on the items both methods scored (:func:`credo.evaluate.paired.paired_bootstrap`)."""
    perf = run.performance
    n_bins = int(run.config.get("ece_bins") or 10)
    out = []
    for a, b in pairs:
        if a not in run.methods or b not in run.methods:
            raise ValueError(f"{run.path}: no method {a if a not in run.methods else b!r}; "
                             f"methods: {', '.join(run.methods)}")
        sa, sb = run.score(a), run.score(b)
        ok = ~(np.isnan(sa) | np.isnan(sb) | np.isnan(perf))
        if ok.sum() < 2:
            continue
        out.append(
            paired_bootstrap(
                sa[ok], sb[ok], perf[ok], method_a=a, method_b=b, n_resamples=n_resamples,
                confidence=confidence, seed=seed, n_bins=n_bins,
            )
        )
    return out


def quadrant_inputs(run: RunData, c3_method: str = "c3") -> dict[str, tuple[float, float]]:
    """``item id -> (p̄, C3)`` of one run, for :func:`credo.evaluate.quadrants.diagnose`."""
    if c3_method not in run.methods:
        return {}
    perf, s = run.performance, run.score(c3_method)
    return {
        i: (float(p), float(c))
        for i, p, c in zip(run.item_ids, perf, s, strict=True)
        if not (math.isnan(p) or math.isnan(c))
    }


def quadrants_for(runs: Sequence[RunData], c3_method: str = "c3") -> Quadrants | None:
    """Quadrants of the items of runs of one task, averaged over the runs (Wu et al., Fig. 4)."""
    inputs = [q for q in (quadrant_inputs(r, c3_method) for r in runs) if q]
    return diagnose(inputs) if inputs else None


def neutrality_of(run: RunData, seed: int = 0) -> Neutrality | str:
    """Δ per item from samples.jsonl (Wu et al., App. A.3), or why it cannot be computed."""
    groups = grouped_samples(run)
    orig: dict[str, list[bool]] = {}
    pert: dict[str, list[bool]] = {}
    missing = 0
    for (item, set_name), rows in groups.items():
        if set_name not in ("original", "perturbed"):
            continue
        flags = [r.get("correct") for r in rows]
        if any(not isinstance(f, bool) for f in flags):
            missing += 1
            continue
        (orig if set_name == "original" else pert)[item] = flags
    if not pert:
        if missing:
            return ("samples.jsonl has no correctness for perturbed samples (written before it "
                    "was recorded); rerun the same config, which reads every sample from the cache")
        return "the run has no perturbed samples"
    try:
        return neutrality(orig, pert, seed=seed)
    except ValueError as e:
        return str(e)


def convergence_of(run: RunData) -> Convergence | str:
    """Trial-count convergence from samples.jsonl (Wu et al., App. B), or why not."""
    kernel = str(run.config.get("kernel") or "indicator")
    if kernel != "indicator":
        return f"convergence is recomputed with the indicator kernel only (run kernel: {kernel})"
    groups = grouped_samples(run)
    items = []
    for item in run.item_ids:
        o = groups.get((item, "original"), [])
        p = groups.get((item, "perturbed"), [])
        if len(o) < 2:
            continue
        items.append(
            ItemTrials(item, [r.get("answer") for r in o], [r.get("answer") for r in p],
                       [bool(r.get("correct")) for r in o])
        )
    if not items:
        return "samples.jsonl has fewer than 2 original samples per item"
    try:
        return trial_convergence(items)
    except ValueError as e:
        return str(e)


def grouped_samples(run: RunData) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """samples.jsonl rows by (item id, set), each list in sample-index order."""
    cache = run.extras.get("_grouped")
    if cache is not None:
        return cache
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for s in run.samples:
        out.setdefault((str(s.get("id")), str(s.get("set"))), []).append(s)
    for rows in out.values():
        rows.sort(key=lambda r: int(r.get("index", 0)))
    run.extras["_grouped"] = out
    return out


def similarity_of(run: RunData) -> dict[str, Any] | str:
    """Pairwise cosine similarities of the kept perturbations of each item (Wu et al., App. A.2),
    as ``perturbation_similarity.json`` of the run folder records them, or why there are none.

    The record is ``{"embedder", "threshold", "items", "similarities"}``
    (:func:`credo.perturb.quality.similarity_record`). The report never embeds anything:
    without the file it returns an explanation that the page shows instead of the figure.
    """
    cached = run.extras.get(SIMILARITY_FILE)
    if cached is not None:
        return cached
    if not any(len(g) >= 2 for g in run.kept_perturbations()):
        return "no item kept two or more perturbations"
    return (f"not computed: run `credo report {run.path}` with the embedder available, "
            "or rerun the config")

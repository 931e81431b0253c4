"""Self-contained HTML reports: one page per run and a comparison page across runs.

Every figure is a base64 PNG inside the page and the styles are inline, so a page opens
offline, from any folder, with no network access. Everything is recomputed from run
folders (:func:`credo.report.rundata.load_run`), so a report regenerates without a model
(design.md: the report reads the run folder only). The diversity check's similarities come
from the folder's ``perturbation_similarity.json``; the page explains their absence.

* :func:`write_run_report` writes ``report.html`` (and the Parquet exports) into a run
  folder; :func:`credo.report.writer.write_run` calls it at the end of every run.
* :func:`write_report` is ``credo report RUN_DIR [RUN_DIR ...] --out DIR``: a comparison
  page ``index.html`` (Wu et al., Table 1-style method × metric table with bootstrap CIs, paired
  tests, reliability diagrams, diagnosis quadrants per task, neutrality) and one page per run.

This module prepares the data (analyses, figures as ``data:`` URIs, rows of the tables);
the markup lives in the jinja2 templates of ``credo/report/templates`` (``run.html.j2``,
``comparison.html.j2``, shared ``macros.html.j2``), rendered with autoescaping on.
"""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from jinja2 import Environment, PackageLoader, Undefined, select_autoescape
from pydantic import BaseModel, ConfigDict, Field

from credo import jsonio
from credo.evaluate import registry
from credo.evaluate.metrics import FEW_IN_CLASS, ece, ece_discrete
from credo.evaluate.paired import PairedDifference
from credo.evaluate.quadrants import REGION_COLORS, REGIONS, Quadrants
from credo.numbers import fmt_number
from credo.report import analysis as an
from credo.report import figures as fg
from credo.report.coverage import (
    alphas_of,
    coverage_cell,
    coverage_detail_rows,
    coverage_headers,
    headline_lines,
)
from credo.report.export import write_parquet
from credo.report.ledger import ledger_notes, ledger_table_rows
from credo.report.md_pieces import answer_summary, m_text
from credo.report.phrases import ABOVE_STATS, incomplete_note, report_title
from credo.report.rundata import STATUS_FILE, RunData, load_run, read_flip_rates

log = logging.getLogger(__name__)

RUN_PAGE = "report.html"


class ReportOptions(BaseModel):
    """Knobs of a report (``credo report`` flags, validated here); the defaults follow
    Müller et al., §3.7 (95%, 1000 resamples)."""

    model_config = ConfigDict(extra="forbid")

    n_resamples: int = Field(1000, ge=1, description="bootstrap resamples")
    confidence: float = Field(0.95, gt=0.0, lt=1.0, description="CI level")
    seed: int = Field(0, ge=0, description="bootstrap seed")
    pairs: list[tuple[str, str]] | None = None
    reference: str | None = None
    c3_method: str = "c3"
    flip_rates: list[tuple[str, list[dict[str, Any]]]] = Field(default_factory=list)


@dataclass
class RunAnalysis:
    """Everything the pages show about one run, computed once."""

    run: RunData
    summaries: list[an.MethodSummary]
    pairs: list[dict[str, PairedDifference]]
    quadrants: Quadrants | None
    neutrality: Any
    convergence: Any
    similarity: Any
    figures: dict[str, str] = field(default_factory=dict)


# --------------------------------------------------------------------------- entry points


def write_run_report(
    run_dir: str | Path, options: ReportOptions | None = None, *, out: str | Path | None = None,
    status: dict[str, Any] | None = None,
) -> Path:
    """Write ``report.html`` (or ``out``) and the Parquet exports for one run folder, each
    atomically; ``status`` stands for the folder's ``run_status.json`` (the run writer's,
    which writes the marker after the page)."""
    opts = options or ReportOptions()
    run = load_run(run_dir)
    if status is not None:
        run.extras[STATUS_FILE] = status
    write_parquet(run.path)
    a = analyse(run, opts)
    target = Path(out) if out else run.path / RUN_PAGE
    target.parent.mkdir(parents=True, exist_ok=True)
    jsonio.write_text(target, render_run_page(a, opts))
    return target


def write_run_report_after_run(run_dir: str | Path,
                               status: dict[str, Any] | None = None) -> Path:
    """:func:`write_run_report` with the default options, as called by ``write_run`` at
    the end of a run (from the files just written and the ``status`` it will write; no
    model)."""
    return write_run_report(run_dir, ReportOptions(), status=status)


def write_report(
    run_dirs: Sequence[str | Path], out: str | Path, options: ReportOptions | None = None
) -> Path:
    """``credo report``: ``out/index.html`` comparing the runs plus ``out/<run>.html`` each.

    Returns the comparison page's path. Parquet exports missing from a run folder are
    written there too.
    """
    opts = options or ReportOptions()
    if not run_dirs:
        raise ValueError("no run folders given")
    runs = [load_run(d) for d in run_dirs]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    names = _unique_names(runs)
    analyses = []
    for run, name in zip(runs, names, strict=True):
        if not (run.path / "scores.parquet").exists():
            write_parquet(run.path)
        a = analyse(run, opts)
        analyses.append(a)
        jsonio.write_text(out / f"{name}.html", render_run_page(a, opts))
    page = out / "index.html"
    jsonio.write_text(page, render_comparison_page(analyses, names, opts))
    return page


def analyse(run: RunData, opts: ReportOptions) -> RunAnalysis:
    """Compute tables, tests, checks and figures of one run."""
    t0 = time.perf_counter()
    summaries = an.method_summaries(
        run, n_resamples=opts.n_resamples, confidence=opts.confidence, seed=opts.seed
    )
    pairs = opts.pairs or an.default_pairs(run.methods, opts.reference)
    pairs = [p for p in pairs if p[0] in run.methods and p[1] in run.methods]
    tests = an.paired_tests(run, pairs, n_resamples=opts.n_resamples,
                            confidence=opts.confidence, seed=opts.seed)
    try:
        quads = an.quadrants_for([run], opts.c3_method)
    except ValueError:
        quads = None
    a = RunAnalysis(
        run, summaries, tests, quads, an.neutrality_of(run, opts.seed), an.convergence_of(run),
        an.similarity_of(run),
    )
    a.figures = _run_figures(a, opts)
    log.info("analysed %s in %.1f s", run.path, time.perf_counter() - t0)
    return a


# --------------------------------------------------------------------------- figures


def _run_figures(a: RunAnalysis, opts: ReportOptions) -> dict[str, str]:
    """Every figure of one run's page as a ``data:`` URI, keyed by section."""
    run = a.run
    figs = _method_figures(run, [s for s in a.summaries if s.n_items > 0], opts.seed)
    figs.update(_coverage_figure(run))
    figs.update(_diagnosis_figures(a))
    figs.update(_perturbation_figures(run, a.similarity))
    flips = list(opts.flip_rates)
    if "flip_rates.csv" in run.extras:
        flips.insert(0, (str(run.path / "flip_rates.csv"), run.extras["flip_rates.csv"]))
    if flips:
        figs["flip_rates"] = _flip_rate_figure(flips)
    return figs


def _method_figures(run: RunData, ms: Sequence[an.MethodSummary], seed: int) -> dict[str, str]:
    """Reliability diagrams, score histograms (Müller et al., §3.7) and ROC/PR curves of the
    methods."""
    if not ms:
        return {}
    perf = run.performance
    n_bins = int(run.config.get("ece_bins") or 10)
    cols = min(4, len(ms))
    rows = math.ceil(len(ms) / cols)
    fig, axes = fg.new_figure(3.1 * cols, 3.0 * rows, rows, cols)
    fig2, axes2 = fg.new_figure(3.1 * cols, 2.5 * rows, rows, cols)
    curves = {}
    for k, s in enumerate(ms):
        sc = run.score(s.method)
        ok = ~(np.isnan(sc) | np.isnan(perf))
        ax, ax2 = axes[k // cols][k % cols], axes2[k // cols][k % cols]
        e = (ece_discrete(sc[ok], perf[ok], s.levels) if s.levels is not None
             else ece(sc[ok], perf[ok], n_bins))
        fg.plot_reliability(ax, sc[ok], perf[ok], s.method, n_bins=n_bins, levels=s.levels,
                            ece_value=e, seed=seed)
        fg.plot_score_histogram(ax2, sc[ok], s.method, n_bins=n_bins, levels=s.levels)
        curves[s.method] = (sc[ok], (perf[ok] >= 0.5).astype(int))
    for k in range(len(ms), rows * cols):
        axes[k // cols][k % cols].axis("off")
        axes2[k // cols][k % cols].axis("off")
    figs = {"reliability": fg.figure_to_data_uri(fig), "histograms": fg.figure_to_data_uri(fig2)}
    fig, axes = fg.new_figure(9.0, 3.6, 1, 2)
    fg.plot_roc_pr(axes[0][0], axes[0][1], curves)
    figs["roc_pr"] = fg.figure_to_data_uri(fig)
    return figs


def _coverage_figure(run: RunData) -> dict[str, str]:
    """The risk–coverage curve of every method with each α of the run's
    coverage at risk marked; none for a run without it (no known correctness)."""
    from credo.evaluate.coverage import risk_coverage_curve

    if not run.coverage:
        return {}
    correct = run.answer_correct
    curves = {}
    for name in run.methods:
        s = run.score(name)
        ok = np.isfinite(s) & np.isfinite(correct)
        if ok.any():
            curves[name] = risk_coverage_curve(s[ok], correct[ok] >= 0.5)
    fig, axes = fg.new_figure(5.6, 3.8)
    fg.plot_risk_coverage(axes[0][0], curves, [float(a) for a in alphas_of(run.coverage)])
    return {"risk_coverage": fg.figure_to_data_uri(fig)}


def _diagnosis_figures(a: RunAnalysis) -> dict[str, str]:
    """Quadrants (Wu et al., Fig. 4), trial-count convergence (App. B), neutrality (App. A.3)."""
    figs: dict[str, str] = {}
    if a.quadrants is not None:
        figs["quadrants"] = _quadrant_figure(
            a.quadrants, f"{a.run.task}: {len(a.quadrants.item_ids)} items")
    if not isinstance(a.convergence, str):
        fig, axes = fg.new_figure(9.0, 3.4, 1, 2)
        fg.plot_convergence(axes[0][0], axes[0][1], a.convergence)
        figs["convergence"] = fg.figure_to_data_uri(fig)
    if not isinstance(a.neutrality, str):
        nt = a.neutrality
        fig, axes = fg.new_figure(5.2, 3.4)
        fg.plot_neutrality(axes[0][0], nt.delta, nt.mean, nt.low, nt.high, nt.samples_per_set,
                           f"neutrality: {len(nt.item_ids)} items")
        figs["neutrality"] = fg.figure_to_data_uri(fig)
    return figs


def _perturbation_figures(run: RunData, similarity: dict[str, Any] | str) -> dict[str, str]:
    """Diversity of the kept perturbations and the threshold calibration (Wu et al., App. A.2)."""
    figs: dict[str, str] = {}
    if isinstance(similarity, dict):
        fig, axes = fg.new_figure(5.2, 3.4)
        fg.plot_similarity_histogram(axes[0][0], np.array(similarity["similarities"]),
                                     "kept perturbations, within item",
                                     threshold=similarity.get("threshold"))
        figs["similarity"] = fg.figure_to_data_uri(fig)
    cal = run.extras.get("threshold_calibration.json")
    if cal:
        fig, axes = fg.new_figure(5.2, 3.4)
        fg.plot_similarity_histogram(axes[0][0], np.array(cal.get("similarities", [])),
                                     "paraphrases of premises (A.2)", threshold=cal.get("k"),
                                     threshold_label=f"k ({cal.get('percentile', 5)}th pct.)")
        figs["calibration"] = fg.figure_to_data_uri(fig)
    return figs


def _quadrant_figure(q: Quadrants, title: str) -> str:
    fig, axes = fg.new_figure(5.2, 4.6)
    fg.plot_quadrants(axes[0][0], q, title)
    return fg.figure_to_data_uri(fig)


def _flip_rate_figure(flips: Sequence[tuple[str, list[dict[str, Any]]]]) -> str:
    """One panel per strength run: flip rate against strength (Le et al.)."""
    fig, axes = fg.new_figure(5.6 * len(flips), 3.6, 1, len(flips))
    for k, (src, rows) in enumerate(flips):
        fg.plot_flip_rates(axes[0][k], rows, f"flip rate vs strength: {Path(src).parent.name}")
    return fg.figure_to_data_uri(fig)


# --------------------------------------------------------------------------- pages


def render_run_page(a: RunAnalysis, opts: ReportOptions) -> str:
    """The full HTML page of one run (``templates/run.html.j2``)."""
    run = a.run
    return _render(
        "run.html.j2",
        title=f"credo · {run.label}",
        a=a,
        run=run,
        opts=opts,
        facts=_run_facts(run),
        bins=run.config.get("ece_bins") or 10,
        methods=_method_table(a.summaries, run.coverage),
        headline=headline_lines(run.coverage, run.degenerate),
        coverage=_coverage_rows(run.coverage),
        responses=_responses(run),
        topic=run.extras.get("topic_check.json"),
        similarity=_similarity_summary(a.similarity),
        counts=_perturbation_counts(run),
        calibration=run.extras.get("threshold_calibration.json"),
        items=_item_rows(a),
        claims=_claims(run),
        files=sorted(p.name for p in run.path.iterdir() if p.is_file()),
    )


def _claims(run: RunData) -> dict[str, Any] | None:
    """The claim section: the method table and each answer's claims marked
    retained or removed (:mod:`credo.report.claims`); None for a run without claims."""
    from credo.report.claims import claim_answers, claim_table, nothing_to_split
    from credo.report.rundata import CLAIM_METRICS_FILE

    summary = run.extras.get(CLAIM_METRICS_FILE)
    if summary is None:
        return None
    empty = nothing_to_split(run.claims, run.metrics.get("stats"))
    if empty is not None:  # the stage was on and made nothing: say why
        return {"empty": empty}
    table = claim_table(summary)
    return {"header": table[0], "rows": table[1:], "unavailable": summary.get("unavailable")
            or {}, "stats": summary.get("stats") or {}, **claim_answers(run.claims, summary)}


def render_comparison_page(
    analyses: Sequence[RunAnalysis], names: Sequence[str], opts: ReportOptions
) -> str:
    """The comparison page across runs (Wu et al., Table 1 layout: methods × run metrics;
    ``templates/comparison.html.j2``)."""
    runs = [
        {"name": name, "label": marked_label(a.run), "n_items": len(a.run.scores),
         "n": a.run.config.get("n", "?"), "m": _m_shown(a.run),
         "accuracy": a.run.metrics.get("accuracy"), "path": str(a.run.path)}
        for a, name in zip(analyses, names, strict=True)
    ]
    return _render(
        "comparison.html.j2",
        title="credo report",
        analyses=analyses,
        runs=runs,
        opts=opts,
        bins=analyses[0].run.config.get("ece_bins") or 10,
        table=_comparison_table(analyses),
        quadrants=_task_quadrants(analyses, opts.c3_method),
        topics=[(a.run.label, a.run.extras["topic_check.json"]) for a in analyses
                if "topic_check.json" in a.run.extras],
        flip_rates=_flip_rate_figure(opts.flip_rates) if opts.flip_rates else None,
    )


# --------------------------------------------------------------------------- page data


def _m_shown(run: RunData) -> str:
    """``m = <drawn> perturbed`` (:func:`~credo.report.md_pieces.m_text`): the perturbed
    samples the folder holds, the config's m beside it where they differ."""
    configured = run.config.get("m", "?")
    drawn = run.m_drawn
    return m_text(drawn, configured) if drawn is not None else f"m = {configured} perturbed"


def _run_facts(run: RunData) -> dict[str, Any]:
    """The run's configuration and statistics for the facts table."""
    c, m = run.config, run.metrics
    pert = c.get("perturbation") or {}
    return {
        "model": m.get("model", run.model),
        "n_items": len(run.scores),
        "positives": int(np.nansum(run.performance >= 0.5)),
        "accuracy": m.get("accuracy"),
        "correctness": m.get("correctness"),
        "n": c.get("n", "?"),
        "m": _m_shown(run),
        "sampling": c.get("sampling") or {},
        "prompt_style": c.get("prompt_style"),
        "kernel": c.get("kernel"),
        "writer": (f"none (snippets of the corpus {Path(pert['corpus']).name})"
                   if pert.get("corpus")
                   # an older run folder names the writer "generator"
                   else pert.get("writer") or pert.get("generator") or c.get("model")),
        "threshold": pert.get("threshold"),
        "embedder": pert.get("embedder"),
        "stats": {k: v for k, v in (m.get("stats") or {}).items()
                  if k != "ledger" and k not in ABOVE_STATS},
        "ledger": _ledger(m.get("stats") or {}),
        "status": run.status,
        "incomplete": m.get("incomplete") or {},
        "title": report_title(run.task, run.model, run.given),
        "given": run.given,
        "answers": (m.get("stats") or {}).get("answers"),
        "given_scores": (m.get("stats") or {}).get("given_scores"),
        "incomplete_note": _incomplete_note(run),
    }


def _incomplete_note(run: RunData) -> str:
    """The incomplete items of a folder scored without a model, as report.md says them
    (left out of every table, scored on fewer samples; what completes them)."""
    incomplete = (run.metrics.get("incomplete") or {}) if run.given else {}
    if not incomplete:
        return ""
    shown = set(run.item_ids)
    left_out = sum(1 for i in incomplete if str(i) not in shown)
    return incomplete_note(left_out, len(incomplete) - left_out,
                           "the log lacks some or all of their samples", given=True)


def _ledger(stats: dict[str, Any]) -> dict[str, Any] | None:
    """The ledger table (header, rows) and its notes, from ``stats.ledger``; None for a
    run folder without one (written before the ledger, or scored without a model)."""
    ledger = stats.get("ledger")
    if not isinstance(ledger, dict) or not ledger.get("stages"):
        return None
    rows = ledger_table_rows(ledger)
    return {
        "header": rows[0],
        "rows": rows[1:],
        "notes": ledger_notes(ledger),
        "stopped": bool(ledger.get("stopped_by_budget")),
    }


def _method_table(
    summaries: Sequence[an.MethodSummary], coverage: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Method × metric with CIs; extra metrics.json columns; the best method per metric;
    the coverage at risk α beside AUROC (headers and, per method, one
    cell per α; none without coverage)."""
    coverage = coverage or {}
    alphas = alphas_of(coverage)
    return {
        "summaries": summaries,
        "extras": list(dict.fromkeys(k for s in summaries for k in s.extra)),
        "best": _best(summaries),
        "coverage_headers": coverage_headers(coverage),
        "coverage": {s.method: [coverage_cell(coverage.get(s.method, {}).get(a))
                                for a in alphas] for s in summaries},
    }


def _coverage_rows(coverage: dict[str, Any]) -> dict[str, Any] | None:
    """The coverage-at-risk detail table (header, rows), None without coverage."""
    if not coverage:
        return None
    rows = coverage_detail_rows(coverage)
    return {"header": rows[0], "rows": rows[1:]}


def _comparison_table(analyses: Sequence[RunAnalysis]) -> dict[str, Any]:
    """One row per method, one (summary or None, best-by-metric) cell per run."""
    methods = list(dict.fromkeys(s.method for a in analyses for s in a.summaries))
    bests = [_best(a.summaries) for a in analyses]
    rows = [
        {"method": m,
         "cells": [(next((x for x in a.summaries if x.method == m), None), best)
                   for a, best in zip(analyses, bests, strict=True)]}
        for m in methods
    ]
    runs = [{"label": marked_label(a.run), "n_items": len(a.run.scores),
             "accuracy": a.run.metrics.get("accuracy")} for a in analyses]
    return {"runs": runs, "rows": rows}


def marked_label(run: RunData) -> str:
    """The run's label, with its status after it unless it is complete
    (``"gsm8k · m (incomplete)"``): a comparison never shows a cut-short run unmarked."""
    return run.label if run.status == "complete" else f"{run.label} ({run.status})"


_PICK = {"lower": min, "higher": max}


def _best(summaries: Sequence[an.MethodSummary]) -> dict[str, str]:
    """The best method per metric among two or more: the lowest or the highest value, as
    the metric's registered direction says (none for direction "none")."""
    best: dict[str, str] = {}
    for m in registry.registered("item"):
        k = m.name
        vals = [(s.estimates[k].value, s.method) for s in summaries
                if not math.isnan(s.estimates[k].value)]
        if len(vals) >= 2 and m.direction in _PICK:
            best[k] = _PICK[m.direction](vals)[1]
    return best


def _responses(run: RunData) -> dict[str, Any]:
    """Per-generation metrics and unavailable methods, as metrics.json states them."""
    unavailable = run.metrics.get("unavailable") or {}
    resp = {m: d for m, d in (run.metrics.get("responses") or {}).items() if isinstance(d, dict)}
    keys = [k for k in registry.names("generation") if any(k in d for d in resp.values())]
    others = list(dict.fromkeys(
        k for d in resp.values() for k, v in d.items()
        if k not in keys and not k.endswith(("_low", "_high"))
        and isinstance(v, int | float) and not isinstance(v, bool)))
    rows = [
        {"method": m,
         "estimates": [an.Estimate(_num(d.get(k)), _num(d.get(f"{k}_low")),
                                   _num(d.get(f"{k}_high"))) for k in keys],
         "others": [d.get(k) for k in others]}
        for m, d in resp.items()
    ]
    return {"unavailable": unavailable, "ci_keys": keys, "other_keys": others, "rows": rows}


def _similarity_summary(similarity: dict[str, Any] | str) -> dict[str, Any] | None:
    """The diversity caption's numbers (Wu et al., App. A.2) when the run folder has them."""
    if not isinstance(similarity, dict):
        return None
    s = np.array(similarity["similarities"])
    return {"n_items": similarity.get("items"), "embedder": similarity.get("embedder"),
            "median": float(np.median(s)), "p95": float(np.percentile(s, 95))}


def _perturbation_counts(run: RunData) -> dict[str, int] | None:
    """The diversity filter's counts over items (perturbations.jsonl), None without any."""
    if not run.perturbations:
        return None
    kept = [len(k) for k in run.kept_perturbations()]
    return {
        "candidates": sum(int(p.get("candidates", 0)) for p in run.perturbations),
        "invalid": sum(int(p.get("rejected_invalid", 0)) for p in run.perturbations),
        "similar": sum(int(p.get("rejected_similar", 0)) for p in run.perturbations),
        "kept_min": min(kept),
        "kept_max": max(kept),
    }


def _item_rows(a: RunAnalysis) -> list[dict[str, Any]]:
    """Per item: id, gold, p̄, each method's score, region, its answers (the three
    commonest and every correct one: :func:`~credo.report.md_pieces.answer_summary`)."""
    regions = {}
    if a.quadrants is not None:
        regions = dict(zip(a.quadrants.item_ids, a.quadrants.regions, strict=True))
    methods = a.run.methods
    correct: dict[str, list[Any]] = {}
    for s in a.run.samples:
        if s.get("set") == "original":
            correct.setdefault(str(s.get("id")), []).append(s.get("correct"))
    rows = []
    for r in a.run.scores:
        sc = r.get("scores") or {}
        rows.append({
            "id": r["id"],
            "gold": r.get("gold"),
            "p_bar": r.get("p_bar"),
            "scores": [sc.get(m) for m in methods],
            "region": regions.get(str(r["id"]), ""),
            "answers": answer_summary(r.get("original_answers") or [],
                                      correct.get(str(r["id"]), [])),
        })
    return rows


def _task_quadrants(analyses: Sequence[RunAnalysis], c3_method: str) -> list[dict[str, Any]]:
    """Per task: the quadrants of its items averaged over its runs (Wu et al., Fig. 4), or None."""
    by_task: dict[str, list[RunAnalysis]] = {}
    for a in analyses:
        by_task.setdefault(a.run.task, []).append(a)
    blocks = []
    for task, group in by_task.items():
        try:
            q = an.quadrants_for([g.run for g in group], c3_method)
        except ValueError:
            q = None
        block: dict[str, Any] = {"task": task, "quadrants": q}
        if q is not None:
            block["models"] = ", ".join(sorted({g.run.model for g in group}))
            block["figure"] = _quadrant_figure(
                q, f"{task}: {len(q.item_ids)} items, {len(group)} run(s)")
        blocks.append(block)
    return blocks


# --------------------------------------------------------------------------- helpers


def _render(template: str, **context: Any) -> str:
    """Render one page template with the time stamp the footer shows."""
    stamp = time.strftime("%Y-%m-%d %H:%M")
    return _environment().get_template(template).render(stamp=stamp, **context)


@functools.cache
def _environment() -> Environment:
    """The templates of ``credo/report/templates``, autoescaped; ``None`` renders empty,
    ``fmt`` formats a number to 3 decimals (n/a when missing), ``is nan`` tests NaN."""
    env = Environment(
        loader=PackageLoader("credo.report", "templates"),
        autoescape=select_autoescape(("html", "j2"), default_for_string=True, default=True),
        finalize=lambda x: "" if x is None else x,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["fmt"] = _fmt
    env.filters["num"] = lambda x, digits=3: fmt_number(x, digits)
    env.filters["signed"] = lambda x, digits=3: fmt_number(x, digits, sign=True)
    env.tests["nan"] = _is_nan
    env.globals.update(ci_metrics=an.CI_METRICS, metric_labels=registry.headers(),
                       regions=REGIONS, region_colors=REGION_COLORS,
                       ranking_metrics=registry.names(ranking=True), few_in_class=FEW_IN_CLASS)
    return env


def _fmt(x: Any) -> str:
    """A number with 3 decimals; n/a for None, booleans, NaN and missing values."""
    if x is None or isinstance(x, bool | Undefined):
        return "n/a"
    try:
        v = float(x)
    except (TypeError, ValueError):
        return str(x)
    return fmt_number(v)


def _is_nan(x: Any) -> bool:
    try:
        return math.isnan(x)
    except TypeError:
        return False


def _num(x: Any) -> float:
    try:
        return math.nan if x is None or isinstance(x, bool) else float(x)
    except (TypeError, ValueError):
        return math.nan


def _unique_names(runs: Sequence[RunData]) -> list[str]:
    names: list[str] = []
    for r in runs:
        base = r.path.name or "run"
        name = base if base not in names else f"{r.path.parent.name}-{base}"
        k = 2
        while name in names:
            name = f"{base}-{k}"
            k += 1
        names.append(name)
    return names


def load_flip_rates(paths: Sequence[str | Path]) -> list[tuple[str, list[dict[str, Any]]]]:
    """``flip_rates.csv`` of each strength run folder (or the CSV itself)."""
    out = []
    for p in paths:
        p = Path(p)
        csv_path = p / "flip_rates.csv" if p.is_dir() else p
        if not csv_path.is_file():
            raise FileNotFoundError(f"{csv_path}: no flip_rates.csv (a strength run folder?)")
        out.append((str(csv_path), read_flip_rates(csv_path)))
    return out

"""Self-contained HTML reports: one page per run and a comparison page across runs.

Every figure is a base64 PNG inside the page and the styles are inline, so a page opens
offline, from any folder, with no network access. Everything is recomputed from run
folders (:func:`credo.report.rundata.load_run`), so a report regenerates without a model
(design.md: the report reads the run folder only). The diversity check's similarities come
from the folder's ``perturbation_similarity.json``; the page explains their absence.

* :func:`write_run_report` writes ``report.html`` (and the Parquet exports) into a run
  folder; :func:`credo.report.writer.write_run` calls it at the end of every run.
* :func:`write_report` is ``credo report RUN_DIR [RUN_DIR ...] --out DIR``: a comparison
  page ``index.html`` (000 Table 1-style method × metric table with bootstrap CIs, paired
  tests, reliability diagrams, diagnosis quadrants per task, neutrality) and one page per run.
"""

from __future__ import annotations

import html
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from credo.evaluate.metrics import ece, ece_discrete
from credo.evaluate.paired import PairedDifference
from credo.evaluate.quadrants import REGION_COLORS, REGIONS, Quadrants
from credo.report import analysis as an
from credo.report import figures as fg
from credo.report.export import write_parquet
from credo.report.rundata import RunData, load_run, read_flip_rates

log = logging.getLogger(__name__)

RUN_PAGE = "report.html"


@dataclass
class ReportOptions:
    """Knobs of a report; the defaults follow 002 §3.7 (95%, 1000 resamples)."""

    n_resamples: int = 1000
    confidence: float = 0.95
    seed: int = 0
    pairs: list[tuple[str, str]] | None = None
    reference: str | None = None
    c3_method: str = "c3"
    flip_rates: list[tuple[str, list[dict[str, Any]]]] = field(default_factory=list)


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
    run_dir: str | Path, options: ReportOptions | None = None, *, out: str | Path | None = None
) -> Path:
    """Write ``report.html`` (or ``out``) and the Parquet exports for one run folder."""
    opts = options or ReportOptions()
    run = load_run(run_dir)
    write_parquet(run.path)
    a = analyse(run, opts)
    target = Path(out) if out else run.path / RUN_PAGE
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render_run_page(a, opts), encoding="utf-8")
    return target


def write_run_report_after_run(run_dir: str | Path) -> Path:
    """:func:`write_run_report` with the default options, as called by ``write_run`` at
    the end of a run (from the files just written; no model)."""
    return write_run_report(run_dir, ReportOptions())


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
        (out / f"{name}.html").write_text(render_run_page(a, opts), encoding="utf-8")
    page = out / "index.html"
    page.write_text(render_comparison_page(analyses, names, opts), encoding="utf-8")
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
    run = a.run
    perf = run.performance
    n_bins = int(run.config.get("ece_bins") or 10)
    figs: dict[str, str] = {}
    ms = [s for s in a.summaries if s.n_items > 0]
    if ms:
        cols = min(4, len(ms))
        rows = math.ceil(len(ms) / cols)
        fig, axes = fg.new_figure(3.1 * cols, 3.0 * rows, rows, cols)
        fig2, axes2 = fg.new_figure(3.1 * cols, 2.5 * rows, rows, cols)
        for k, s in enumerate(ms):
            sc = run.score(s.method)
            ok = ~(np.isnan(sc) | np.isnan(perf))
            ax, ax2 = axes[k // cols][k % cols], axes2[k // cols][k % cols]
            e = (ece_discrete(sc[ok], perf[ok], s.levels) if s.levels is not None
                 else ece(sc[ok], perf[ok], n_bins))
            fg.plot_reliability(ax, sc[ok], perf[ok], s.method, n_bins=n_bins, levels=s.levels,
                                ece_value=e, seed=opts.seed)
            fg.plot_score_histogram(ax2, sc[ok], s.method, n_bins=n_bins, levels=s.levels)
        for k in range(len(ms), rows * cols):
            axes[k // cols][k % cols].axis("off")
            axes2[k // cols][k % cols].axis("off")
        figs["reliability"] = fg.figure_to_data_uri(fig)
        figs["histograms"] = fg.figure_to_data_uri(fig2)
        fig, axes = fg.new_figure(9.0, 3.6, 1, 2)
        curves = {}
        for s in ms:
            sc = run.score(s.method)
            ok = ~(np.isnan(sc) | np.isnan(perf))
            curves[s.method] = (sc[ok], (perf[ok] >= 0.5).astype(int))
        fg.plot_roc_pr(axes[0][0], axes[0][1], curves)
        figs["roc_pr"] = fg.figure_to_data_uri(fig)
    if a.quadrants is not None:
        fig, axes = fg.new_figure(5.2, 4.6)
        fg.plot_quadrants(axes[0][0], a.quadrants, f"{run.task}: {len(a.quadrants.item_ids)} items")
        figs["quadrants"] = fg.figure_to_data_uri(fig)
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
    if isinstance(a.similarity, dict):
        fig, axes = fg.new_figure(5.2, 3.4)
        fg.plot_similarity_histogram(axes[0][0], np.array(a.similarity["similarities"]),
                                     "kept perturbations, within item",
                                     threshold=a.similarity.get("threshold"))
        figs["similarity"] = fg.figure_to_data_uri(fig)
    cal = run.extras.get("threshold_calibration.json")
    if cal:
        fig, axes = fg.new_figure(5.2, 3.4)
        fg.plot_similarity_histogram(axes[0][0], np.array(cal.get("similarities", [])),
                                     "paraphrases of premises (A.2)", threshold=cal.get("k"),
                                     threshold_label=f"k ({cal.get('percentile', 5)}th pct.)")
        figs["calibration"] = fg.figure_to_data_uri(fig)
    flips = list(opts.flip_rates)
    if "flip_rates.csv" in run.extras:
        flips.insert(0, (str(run.path / "flip_rates.csv"), run.extras["flip_rates.csv"]))
    if flips:
        fig, axes = fg.new_figure(5.6 * len(flips), 3.6, 1, len(flips))
        for k, (src, rows) in enumerate(flips):
            fg.plot_flip_rates(axes[0][k], rows, f"flip rate vs strength: {Path(src).parent.name}")
        figs["flip_rates"] = fg.figure_to_data_uri(fig)
    return figs


# --------------------------------------------------------------------------- pages

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;
max-width:1320px;padding:0 16px;color:#222;line-height:1.4}
h1{font-size:1.5em;margin-bottom:.2em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid
#ddd;padding-bottom:.2em}h3{font-size:1.05em}
table{border-collapse:collapse;font-size:.85em;margin:.6em 0}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:right;vertical-align:top}
th{background:#f3f3f3}td.l,th.l{text-align:left}
.ci{color:#666;font-size:.85em;white-space:nowrap}.best{font-weight:bold;background:#eef6ee}
.note{color:#555;font-size:.88em}.sig{color:#b00;font-weight:bold}
img.fig{max-width:100%;border:1px solid #eee;margin:.4em 0}
.grid{display:flex;flex-wrap:wrap;gap:14px;align-items:flex-start}
.grid>div{flex:0 1 600px;min-width:0}td.ids{font-size:.8em;text-align:left}
.swatch{display:inline-block;width:.9em;height:.9em;margin:0 .25em 0 .8em;vertical-align:-.1em}
code{background:#f5f5f5;padding:0 3px}.small{font-size:.8em}
details{margin:.3em 0}
"""

# Sets data-figures-ok on <body> once every <img> has decoded (the browser test reads it).
CHECK_SCRIPT = """
<script>
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var ok = imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length;
  document.body.setAttribute('data-figures', String(imgs.length));
  document.body.setAttribute('data-figures-ok', String(ok));
});
</script>
"""


def render_run_page(a: RunAnalysis, opts: ReportOptions) -> str:
    """The full HTML page of one run."""
    run = a.run
    body = [f"<h1>credo run: {_e(run.task)} on {_e(run.model)}</h1>", _run_facts(run)]
    body += ["<h2>Calibration and ranking (000 Table 1, App. E.2)</h2>", _ci_caption(run, opts),
             _method_table(a.summaries)]
    body += _responses_section(run)
    body += _pairs_section(a, opts)
    body += _figure_sections(a)
    body += _items_section(a)
    body.append(_files_section(run))
    return _page(f"credo · {run.label}", body)


def render_comparison_page(
    analyses: Sequence[RunAnalysis], names: Sequence[str], opts: ReportOptions
) -> str:
    """The comparison page across runs (000 Table 1 layout: methods × run metrics)."""
    body = [f"<h1>credo report: {len(analyses)} runs</h1>", "<ul>"]
    for a, name in zip(analyses, names, strict=True):
        r = a.run
        acc = r.metrics.get("accuracy")
        body.append(
            f'<li><a href="{_e(name)}.html">{_e(r.label)}</a> · {len(r.scores)} items · '
            f"n = {_e(r.config.get('n', '?'))}, m = {_e(r.config.get('m', '?'))} · accuracy "
            f"{_fmt(acc)} · <span class=small>{_e(str(r.path))}</span></li>"
        )
    body.append("</ul>")
    body += ["<h2>Calibration and ranking with bootstrap CIs (000 Table 1)</h2>",
             _ci_caption(analyses[0].run, opts), _comparison_table(analyses)]
    body.append("<h2>Paired comparisons on the same items</h2>")
    body.append(_pairs_caption(opts))
    for a in analyses:
        if a.pairs:
            body += [f"<h3>{_e(a.run.label)}</h3>", _pairs_table(a.pairs)]
    body.append("<h2>Reliability diagrams</h2>")
    for a in analyses:
        if "reliability" in a.figures:
            body += [f"<h3>{_e(a.run.label)}</h3>", _img(a.figures["reliability"], "reliability")]
    body.append("<h2>Benchmark diagnosis (000 §5.3, Fig. 4)</h2>")
    body.append(_quadrant_caption())
    by_task: dict[str, list[RunAnalysis]] = {}
    for a in analyses:
        by_task.setdefault(a.run.task, []).append(a)
    quad_blocks = []
    for task, group in by_task.items():
        try:
            q = an.quadrants_for([g.run for g in group], opts.c3_method)
        except ValueError:
            q = None
        if q is None:
            quad_blocks.append(f"<div><h3>{_e(task)}</h3><p class=note>no {opts.c3_method} "
                               "scores</p></div>")
            continue
        fig, axes = fg.new_figure(5.2, 4.6)
        models = ", ".join(sorted({g.run.model for g in group}))
        fg.plot_quadrants(axes[0][0], q, f"{task}: {len(q.item_ids)} items, {len(group)} run(s)")
        quad_blocks.append(
            f"<div><h3>{_e(task)} <span class=small>({_e(models)})</span></h3>"
            f"{_img(fg.figure_to_data_uri(fig), 'quadrants ' + task)}{_region_lists(q)}</div>"
        )
    body.append('<div class="grid">' + "".join(quad_blocks) + "</div>")
    body.append("<h2>Perturbation neutrality (000 App. A.3)</h2>")
    body.append(_neutrality_caption())
    blocks = []
    for a in analyses:
        if "neutrality" in a.figures:
            inner = _img(a.figures["neutrality"], "neutrality") + _neutrality_line(a.neutrality)
        else:
            inner = f"<p class=note>{_e(a.neutrality)}</p>"
        blocks.append(f"<div><h3>{_e(a.run.label)}</h3>{inner}</div>")
    body.append('<div class="grid">' + "".join(blocks) + "</div>")
    topic = [a for a in analyses if "topic_check.json" in a.run.extras]
    if topic:
        body.append("<h2>Topic alignment (000 App. A.4)</h2>")
        for a in topic:
            body += [f"<h3>{_e(a.run.label)}</h3>", _topic_block(a.run.extras["topic_check.json"])]
    if opts.flip_rates:
        fig, axes = fg.new_figure(5.6 * len(opts.flip_rates), 3.6, 1, len(opts.flip_rates))
        for k, (src, rows) in enumerate(opts.flip_rates):
            fg.plot_flip_rates(axes[0][k], rows, f"flip rate vs strength: {Path(src).parent.name}")
        body += ["<h2>Flip rate against perturbation strength (003)</h2>",
                 _img(fg.figure_to_data_uri(fig), "flip rates")]
    return _page("credo report", body)


# --------------------------------------------------------------------------- sections


def _run_facts(run: RunData) -> str:
    c, m = run.config, run.metrics
    samp = c.get("sampling") or {}
    pert = c.get("perturbation") or {}
    acc = m.get("accuracy")
    perf = run.performance
    pos = int(np.nansum(perf >= 0.5))
    rows = [
        ("model", f"<code>{_e(m.get('model', run.model))}</code>"),
        ("items", f"{len(run.scores)} (label 1 = p̄ ≥ 0.5: {pos} items)"),
        ("accuracy (mean p̄)", _fmt(acc)),
        ("samples", f"n = {_e(c.get('n', '?'))} original, m = {_e(c.get('m', '?'))} perturbed; "
                    f"T = {_e(samp.get('temperature'))}, top_p = {_e(samp.get('top_p'))}, "
                    f"top_k = {_e(samp.get('top_k'))}, min_p = {_e(samp.get('min_p'))}, "
                    f"max_tokens = {_e(samp.get('max_tokens'))}"),
        ("prompt style / kernel", f"{_e(c.get('prompt_style'))} / {_e(c.get('kernel'))}"),
        ("perturbations", f"generator {_e(pert.get('generator') or c.get('model'))}, "
                          f"threshold k = {_e(pert.get('threshold'))}, "
                          f"embedder {_e(pert.get('embedder'))}"),
        ("methods", ", ".join(_e(x) for x in run.methods)),
        ("sample sets", ", ".join(_e(x) for x in run.sample_sets())),
    ]
    stats = m.get("stats") or {}
    if stats:
        rows.append(("run", ", ".join(f"{_e(k.replace('_', ' '))}: {_e(v)}"
                                      for k, v in stats.items())))
    return "<table>" + "".join(
        f"<tr><th class=l>{k}</th><td class=l>{v}</td></tr>" for k, v in rows
    ) + "</table>"


def _ci_caption(run: RunData, opts: ReportOptions) -> str:
    bins = run.config.get("ece_bins") or 10
    return (
        f"<p class=note>Point estimates recomputed from <code>scores.jsonl</code>; "
        f"{int(opts.confidence * 100)}% percentile bootstrap CIs over items, "
        f"{opts.n_resamples} resamples (002 §3.7). ECE against p̄ with {bins} equal-width bins "
        "(the reliability diagrams of discrete-score methods use one bin per level); AUROC, "
        "AUPRC-P, AUPRC-N against the label 1[p̄ ≥ 0.5]. n/a: undefined (one class). "
        "Best value per column in bold.</p>"
    )


def _method_table(summaries: Sequence[an.MethodSummary]) -> str:
    extras = list(dict.fromkeys(k for s in summaries for k in s.extra))
    head = ["<th class=l>method</th>", "<th>items</th>"]
    head += [f"<th>{_e(lbl)}</th>" for lbl in an.CI_METRICS.values()]
    head += [f"<th>{_e(k.replace('_', ' '))}</th>" for k in extras]
    best = _best(summaries)
    rows = []
    for s in summaries:
        cells = [f"<td class=l>{_e(s.method)}"
                 + (f"<br><span class=note>{_e(s.note)}</span>" if s.note else "")
                 + (" <span class=note>(discrete)</span>" if s.levels is not None else "")
                 + "</td>", f"<td>{s.n_items}</td>"]
        for k in an.CI_METRICS:
            cells.append(_ci_cell(s.estimates[k], best.get(k) == s.method))
        cells += [f"<td>{_fmt(s.extra.get(k))}</td>" for k in extras]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return "<table><tr>" + "".join(head) + "</tr>" + "".join(rows) + "</table>"


def _comparison_table(analyses: Sequence[RunAnalysis]) -> str:
    methods = list(dict.fromkeys(s.method for a in analyses for s in a.summaries))
    top = "<tr><th class=l rowspan=2>method</th>" + "".join(
        f"<th colspan={len(an.CI_METRICS)}>{_e(a.run.label)}<br><span class=note>"
        f"{len(a.run.scores)} items, acc. {_fmt(a.run.metrics.get('accuracy'))}</span></th>"
        for a in analyses
    ) + "</tr>"
    sub = "<tr>" + "".join(
        f"<th>{_e(lbl)}</th>" for _ in analyses for lbl in an.CI_METRICS.values()
    ) + "</tr>"
    rows = []
    bests = [_best(a.summaries) for a in analyses]
    for m in methods:
        cells = [f"<td class=l>{_e(m)}</td>"]
        for a, best in zip(analyses, bests, strict=True):
            s = next((x for x in a.summaries if x.method == m), None)
            for k in an.CI_METRICS:
                cells.append(_ci_cell(s.estimates[k], best.get(k) == m) if s else "<td>–</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return "<table>" + top + sub + "".join(rows) + "</table>"


def _best(summaries: Sequence[an.MethodSummary]) -> dict[str, str]:
    best: dict[str, str] = {}
    for k in an.CI_METRICS:
        vals = [(s.estimates[k].value, s.method) for s in summaries
                if not math.isnan(s.estimates[k].value)]
        if len(vals) >= 2:
            pick = min(vals) if k in an.LOWER_IS_BETTER else max(vals)
            best[k] = pick[1]
    return best


def _ci_cell(e: an.Estimate, best: bool) -> str:
    cls = ' class="best"' if best else ""
    if math.isnan(e.value):
        return f"<td{cls}>n/a</td>"
    ci = ("" if math.isnan(e.low) else
          f"<br><span class=ci>[{e.low:.3f}, {e.high:.3f}]</span>")
    return f"<td{cls}>{e.value:.3f}{ci}</td>"


def _responses_section(run: RunData) -> list[str]:
    """Per-generation metrics and unavailable methods, as metrics.json states them."""
    out: list[str] = []
    unavailable = run.metrics.get("unavailable") or {}
    if unavailable:
        out += ["<p class=note>Methods without a score on some items: "
                + "; ".join(f"<b>{_e(m)}</b>: {_e(why)}" for m, why in unavailable.items())
                + "</p>"]
    resp = {m: d for m, d in (run.metrics.get("responses") or {}).items() if isinstance(d, dict)}
    if not resp:
        return out
    keys = [k for k in an.CI_METRICS if any(k in d for d in resp.values())]
    others = list(dict.fromkeys(
        k for d in resp.values() for k, v in d.items()
        if k not in keys and not k.endswith(("_low", "_high"))
        and isinstance(v, int | float) and not isinstance(v, bool)))
    head = ("<tr><th class=l>method</th>"
            + "".join(f"<th>{_e(an.CI_METRICS[k])}</th>" for k in keys)
            + "".join(f"<th>{_e(k.replace('_', ' '))}</th>" for k in others) + "</tr>")
    rows = []
    for m, d in resp.items():
        cells = [f"<td class=l>{_e(m)}</td>"]
        for k in keys:
            v, lo, hi = (_num(d.get(k)), _num(d.get(f"{k}_low")), _num(d.get(f"{k}_high")))
            cells.append(_ci_cell(an.Estimate(v, lo, hi), False))
        cells += [f"<td>{_fmt(d.get(k))}</td>" for k in others]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    out += ["<h3>Per generation (002 §3.5-3.7)</h3>",
            "<p class=note>Each generation's confidence against its own correctness, as "
            "computed by the run (<code>metrics.json</code> \"responses\").</p>",
            "<table>" + head + "".join(rows) + "</table>"]
    return out


def _num(x: Any) -> float:
    try:
        return math.nan if x is None or isinstance(x, bool) else float(x)
    except (TypeError, ValueError):
        return math.nan


def _pairs_caption(opts: ReportOptions) -> str:
    return (
        "<p class=note>Δ = metric(A) − metric(B) on the items both methods scored; each of "
        f"{opts.n_resamples} bootstrap replicates resamples the items once and evaluates both "
        f"methods on the same indices. {int(opts.confidence * 100)}% percentile CI; two-sided "
        "p = 2·min(P(Δ* ≤ 0), P(Δ* ≥ 0)). ΔAUROC &gt; 0 favours A, ΔECE &lt; 0 favours A. "
        "Red: CI excludes 0.</p>"
    )


def _pairs_section(a: RunAnalysis, opts: ReportOptions) -> list[str]:
    if not a.pairs:
        return []
    return ["<h2>Paired comparisons (ΔAUROC, ΔECE)</h2>", _pairs_caption(opts),
            _pairs_table(a.pairs)]


def _pairs_table(pairs: Sequence[dict[str, PairedDifference]]) -> str:
    head = ("<tr><th class=l>A</th><th class=l>B</th><th>items</th><th>ΔAUROC</th><th>CI</th>"
            "<th>p</th><th>ΔECE</th><th>CI</th><th>p</th></tr>")
    rows = []
    for d in pairs:
        first = next(iter(d.values()))
        cells = [f"<td class=l>{_e(first.method_a)}</td>", f"<td class=l>{_e(first.method_b)}</td>",
                 f"<td>{first.n_items}</td>"]
        for k in ("auroc", "ece"):
            x = d.get(k)
            if x is None or math.isnan(x.delta):
                cells += ["<td>n/a</td>", "<td></td>", "<td></td>"]
                continue
            cls = " class=sig" if x.significant else ""
            ci = "n/a" if math.isnan(x.low) else f"[{x.low:+.3f}, {x.high:+.3f}]"
            valid = ("" if x.n_valid == x.n_resamples
                     else f" <span class=note>({x.n_valid} valid)</span>")
            cells += [f"<td{cls}>{x.delta:+.3f}</td>", f"<td>{ci}{valid}</td>",
                      f"<td>{_fmt(x.p_value)}</td>"]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return "<table>" + head + "".join(rows) + "</table>"


def _figure_sections(a: RunAnalysis) -> list[str]:
    f, run = a.figures, a.run
    out: list[str] = []
    if "reliability" in f:
        out += ["<h2>Reliability diagrams</h2>",
                "<p class=note>Bars: mean p̄ per score bin (numbers: items); dots: the bin's "
                "mean score and mean p̄ with a 95% bootstrap interval; dashed: perfect "
                "calibration. Discrete scores get one bin per level (002 App. A.11.3).</p>",
                _img(f["reliability"], "reliability diagrams")]
    if "histograms" in f:
        out += ["<h2>Score distributions (polarisation, 002 §3.7)</h2>",
                "<p class=note>Entropy of the bin counts over log(bins): 1 = spread evenly, "
                "0 = every score in one bin, where ECE stops measuring calibration.</p>",
                _img(f["histograms"], "score histograms")]
    if "roc_pr" in f:
        out += ["<h2>ROC and precision-recall curves</h2>", _img(f["roc_pr"], "ROC and PR")]
    out.append("<h2>Benchmark diagnosis (000 §5.3, Fig. 4)</h2>")
    if a.quadrants is not None:
        out += [_quadrant_caption(), '<div class="grid"><div>', _img(f["quadrants"], "quadrants"),
                "</div><div>", _region_lists(a.quadrants), "</div></div>"]
    else:
        out.append("<p class=note>No C3 scores in this run.</p>")
    out.append("<h2>Trial-count convergence (000 App. B)</h2>")
    if "convergence" in f:
        out += ["<p class=note>Each item's estimate from its first k original (and first k "
                "perturbed) samples, recomputed from <code>samples.jsonl</code> with the indicator "
                "kernel; right: mean distance to the estimate from all samples.</p>",
                _img(f["convergence"], "convergence")]
    else:
        out.append(f"<p class=note>{_e(a.convergence)}</p>")
    out.append("<h2>Perturbation quality (000 App. A)</h2>")
    out.append("<h3>Neutrality (A.3)</h3>")
    if "neutrality" in f:
        out += [_neutrality_caption(), _img(f["neutrality"], "neutrality"),
                _neutrality_line(a.neutrality)]
    else:
        out.append(f"<p class=note>{_e(a.neutrality)}</p>")
    out.append("<h3>Topic alignment (A.4)</h3>")
    if "topic_check.json" in run.extras:
        out.append(_topic_block(run.extras["topic_check.json"]))
    else:
        out.append("<p class=note>Not run. <code>credo perturb topic-check RUN_DIR --judge MODEL"
                   "</code> asks a judge that sees only each perturbation for its domain.</p>")
    out.append("<h3>Diversity (A.2)</h3>")
    if "similarity" in f:
        sim = a.similarity
        s = np.array(sim["similarities"])
        out += [f"<p class=note>Pairwise cosine similarity of the perturbations kept for each "
                f"item ({sim.get('items')} items with ≥ 2 kept; embedder "
                f"{_e(sim.get('embedder'))}); the filter keeps a candidate only below k. "
                f"Median {np.median(s):.3f}, 95th percentile {np.percentile(s, 95):.3f}.</p>",
                _img(f["similarity"], "similarity")]
    else:
        out.append(f"<p class=note>{_e(a.similarity)}</p>")
    kept = [len(k) for k in run.kept_perturbations()]
    if run.perturbations:
        cand = sum(int(p.get("candidates", 0)) for p in run.perturbations)
        inval = sum(int(p.get("rejected_invalid", 0)) for p in run.perturbations)
        simr = sum(int(p.get("rejected_similar", 0)) for p in run.perturbations)
        out.append(f"<p class=note>Candidates {cand}; rejected by the rules {inval}; rejected "
                   f"as too similar {simr}; kept per item min {min(kept)}, max {max(kept)}.</p>")
    cal = run.extras.get("threshold_calibration.json")
    if cal:
        out += ["<h3>Threshold calibration (A.2)</h3>",
                f"<p class=note>k = <b>{cal['k']:.4f}</b>, the {cal.get('percentile')}th "
                f"percentile of {cal.get('pairs')} within-premise paraphrase similarities "
                f"({cal.get('premises')} premises paraphrased by <code>{_e(cal.get('model'))}"
                f"</code>, embedder {_e(cal.get('embedder'))}; paper: k = 0.8124 with GPT-4.1 "
                "and all-mpnet-base-v2).</p>", _img(f["calibration"], "threshold calibration")]
    if "flip_rates" in f:
        out += ["<h2>Flip rate against perturbation strength (003)</h2>",
                _img(f["flip_rates"], "flip rates")]
    return out


def _quadrant_caption() -> str:
    return (
        "<p class=note>Per item: mean performance p̄ and mean C3 over the runs of the task; "
        "split at the medians (items tied with a median go to the side with fewer items). "
        + fg.region_legend_html()
        + " — mastered: right and stable; brittle: right but sensitive to perturbation; "
        "biased: consistently wrong; unlearned: wrong and inconsistent.</p>"
    )


def _region_lists(q: Quadrants) -> str:
    parts = ["<table><tr><th class=l>region</th><th>items</th><th class=l>ids</th></tr>"]
    for r in REGIONS:
        ids = q.items_in(r)
        shown = ", ".join(_e(i) for i in ids[:40]) + (" …" if len(ids) > 40 else "")
        parts.append(f'<tr><td class=l><span class="swatch" style="background:{REGION_COLORS[r]}">'
                     f"</span>{r}</td><td>{len(ids)}</td><td class=ids>{shown}</td></tr>")
    return "".join(parts) + "</table>"


def _neutrality_caption() -> str:
    return ("<p class=note>Per item Δ = #correct perturbed − #correct original over the same "
            "number of samples; a systematic shift from 0 would mean the context helps or "
            "misleads. Mean with a 95% percentile bootstrap CI over items.</p>")


def _neutrality_line(nt: Any) -> str:
    if isinstance(nt, str):
        return f"<p class=note>{_e(nt)}</p>"
    ci = "" if math.isnan(nt.low) else f", 95% CI [{nt.low:+.2f}, {nt.high:+.2f}]"
    return (f"<p class=note>mean Δ = <b>{nt.mean:+.2f}</b>{ci} over {len(nt.item_ids)} items "
            f"({nt.samples_per_set} samples per set); items with Δ &gt; 0: "
            f"{int((nt.delta > 0).sum())}, Δ &lt; 0: {int((nt.delta < 0).sum())}.</p>")


def _topic_block(tc: dict[str, Any]) -> str:
    counts = tc.get("counts") or {}
    rows = "".join(f"<tr><td class=l>{_e(d)}</td><td>{n}</td></tr>" for d, n in counts.items())
    examples = "".join(
        f"<tr><td class=l>{_e(r.get('text'))}</td><td class=l>{_e(r.get('judged'))}</td>"
        f"<td>{'✓' if r.get('aligned') else '✗'}</td></tr>"
        for r in (tc.get("rows") or [])[:30]
    )
    return (
        f"<p>Judge <code>{_e(tc.get('judge'))}</code> saw only each of {tc.get('n')} distinct "
        f"perturbations and picked a domain: <b>{tc.get('aligned')} / {tc.get('n')} = "
        f"{_fmt(tc.get('rate'))}</b> in the benchmark's domain ({_e(tc.get('expected'))}); "
        f"{tc.get('unparsable')} replies named no domain (paper: ~96%).</p>"
        f'<div class="grid"><table><tr><th class=l>judged domain</th><th>count</th></tr>{rows}'
        "</table><details><summary>perturbations and verdicts</summary><table><tr>"
        f"<th class=l>perturbation</th><th class=l>judged</th><th>aligned</th></tr>{examples}"
        "</table></details></div>"
    )


def _items_section(a: RunAnalysis) -> list[str]:
    run = a.run
    methods = run.methods
    regions = {}
    if a.quadrants is not None:
        regions = dict(zip(a.quadrants.item_ids, a.quadrants.regions, strict=True))
    head = ("<tr><th class=l>id</th><th class=l>gold</th><th>p̄</th>"
            + "".join(f"<th>{_e(m)}</th>" for m in methods)
            + "<th class=l>region</th><th class=l>original answers</th></tr>")
    rows = []
    for r in run.scores:
        sc = r.get("scores") or {}
        answers = r.get("original_answers") or []
        counts: dict[str, int] = {}
        for v in answers:
            key = "∅" if v is None else str(v)
            counts[key] = counts.get(key, 0) + 1
        ranked = sorted(counts.items(), key=lambda kv: -kv[1])[:3]
        top = ", ".join(f"{_e(k)}×{n}" for k, n in ranked)
        rows.append(
            f"<tr><td class=l>{_e(r['id'])}</td><td class=l>{_e(r.get('gold'))}</td>"
            f"<td>{_fmt(r.get('p_bar'))}</td>"
            + "".join(f"<td>{_fmt(sc.get(m))}</td>" for m in methods)
            + f"<td class=l>{_e(regions.get(str(r['id']), ''))}</td><td class=l>{top}</td></tr>"
        )
    return ["<h2>Items</h2>", "<details><summary>per-item scores</summary><table>" + head
            + "".join(rows) + "</table></details>"]


def _files_section(run: RunData) -> str:
    files = sorted(p.name for p in run.path.iterdir() if p.is_file())
    return ("<h2>Files</h2><p class=note>In <code>" + _e(str(run.path)) + "</code>: "
            + ", ".join(f"<code>{_e(f)}</code>" for f in files)
            + ". <code>scores.parquet</code> and <code>samples.parquet</code> load with "
            "<code>pandas.read_parquet</code> or <code>polars.read_parquet</code>.</p>")


# --------------------------------------------------------------------------- helpers


def _page(title: str, body: Sequence[str]) -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M")
    return (
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body>\n"
        + "\n".join(body)
        + f"\n<p class=note>Written by credo on {stamp}; every figure is embedded and "
        "regenerates from the run folders with <code>credo report</code>.</p>"
        + CHECK_SCRIPT + "</body></html>\n"
    )


def _img(uri: str, alt: str) -> str:
    return f'<img class="fig" alt="{_e(alt)}" src="{uri}">'


def _e(x: Any) -> str:
    return html.escape("" if x is None else str(x))


def _fmt(x: Any) -> str:
    if x is None or isinstance(x, bool):
        return "n/a"
    try:
        v = float(x)
    except (TypeError, ValueError):
        return _e(x)
    return "n/a" if math.isnan(v) else f"{v:.3f}"


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

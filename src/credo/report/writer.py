"""Write a run folder: config, per-item scores, metrics, samples and a Markdown report.

Files
-----
``config.yaml``         the run's configuration (with the cache it used)
``scores.jsonl``        one row per item: id, gold, p̄, each method's score, answers
``metrics.json``        per method: ECE, AUROC, AUPRC-P, AUPRC-N, mean score; run stats
``samples.jsonl``       every sample (set, prefix, text, extracted answer, correctness;
                        perturbed samples too, for the neutrality check of 000 App. A.3)
``perturbations.jsonl`` the kept context prefixes per item and the filter's counts
``report.md``           the tables a reader wants first
``report.html``         the self-contained HTML report with figures (credo.report.html)
``scores.parquet``, ``samples.parquet``  the same tables for pandas / polars
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from credo.tasks.answers import is_correct

if TYPE_CHECKING:
    from credo.run.runner import RunResult

log = logging.getLogger(__name__)

METRIC_LABELS = {
    "ece": "ECE ↓",
    "auroc": "AUROC ↑",
    "auprc_pos": "AUPRC-P ↑",
    "auprc_neg": "AUPRC-N ↑",
    "mean_score": "mean score",
}


def write_run(result: RunResult, out: str | Path) -> Path:
    """Write every file of the run folder ``out`` and return its path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = result.config.model_dump(mode="json")
    cfg["cache"] = str(result.config.cache_path)
    (out / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    _write_jsonl(out / "scores.jsonl", _score_rows(result))
    _write_jsonl(out / "samples.jsonl", _sample_rows(result))
    _write_jsonl(
        out / "perturbations.jsonl",
        (
            {
                "id": p.item_id,
                "kept": list(p.kept),
                "candidates": p.candidates,
                "rejected_invalid": p.rejected_invalid,
                "rejected_similar": p.rejected_similar,
            }
            for p in result.perturbation_sets.values()
        ),
    )
    metrics = {
        "task": result.task.name,
        "model": result.model_identity,
        "items": len(result.items),
        "accuracy": _clean(result.accuracy),
        "methods": {m: {k: _clean(v) for k, v in d.items()} for m, d in result.metrics.items()},
        "stats": result.stats,
    }
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2), encoding="utf-8")
    (out / "report.md").write_text(render_markdown(result), encoding="utf-8")
    _write_html_report(out)
    return out


def _write_html_report(out: Path) -> None:
    """report.html and the Parquet exports (issue 6), from the files just written.

    A failure here is logged, never raised: the run's data are already on disk and
    ``credo report RUN_DIR`` rewrites the page.
    """
    from credo.report.html import write_run_report_after_run

    try:
        write_run_report_after_run(out)
    except Exception:
        log.exception("could not write %s/report.html; run `credo report %s`", out, out)


def metrics_table_rows(result: RunResult) -> list[list[str]]:
    """Header plus one row per method: method, ECE, AUROC, AUPRC-P, AUPRC-N, mean score."""
    keys = list(METRIC_LABELS)
    rows = [["method", *(METRIC_LABELS[k] for k in keys)]]
    for method, d in result.metrics.items():
        rows.append([method, *(_fmt(d.get(k, math.nan)) for k in keys)])
    return rows


def render_markdown(result: RunResult) -> str:
    """The run report as Markdown."""
    c = result.config
    rows = metrics_table_rows(result)
    table = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    table += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    labels = [r.performance >= 0.5 for r in result.items]
    lines = [
        f"# credo run: {result.task.name} on {c.model}",
        "",
        f"- model: `{result.model_identity}`",
        f"- items: {len(result.items)} (label 1 = p̄ ≥ 0.5: {sum(labels)} items)",
        f"- samples per item: n = {c.n} original, m = {c.m} perturbed (one per perturbation),"
        f" T = {c.sampling.temperature}, top_p = {c.sampling.top_p}, top_k = {c.sampling.top_k},"
        f" min_p = {c.sampling.min_p}, max_tokens = {c.sampling.max_tokens}",
        f"- prompt style: {c.prompt_style}; kernel: {c.kernel}; seed: {c.seed}",
        f"- accuracy (mean p̄ over items): {_fmt(result.accuracy)}",
        "",
        "## Calibration and ranking (000 App. E.2)",
        "",
        "Scores against per-item performance p̄ (ECE, 10 equal-width bins) and against the",
        "label 1[p̄ ≥ 0.5] (AUROC, AUPRC-P; AUPRC-N with labels 1 − y and scores 1 − s).",
        "n/a: the metric is undefined because all items share one label.",
        "",
        *table,
        "",
        "## Run",
        "",
        *(f"- {k.replace('_', ' ')}: {v}" for k, v in result.stats.items()),
    ]
    if result.perturbation_sets:
        kept = [len(p.kept) for p in result.perturbation_sets.values()]
        cand = sum(p.candidates for p in result.perturbation_sets.values())
        inval = sum(p.rejected_invalid for p in result.perturbation_sets.values())
        sim = sum(p.rejected_similar for p in result.perturbation_sets.values())
        lines += [
            "",
            "## Perturbations (000 §3, App. A)",
            "",
            f"- candidates drawn: {cand}; rejected by the rules: {inval}; rejected as too"
            f" similar (cosine ≥ {c.perturbation.threshold}): {sim}",
            f"- kept per item: min {min(kept)}, max {max(kept)} (m = {c.m})",
            "",
            "Examples (first item):",
            "",
        ]
        first = result.items[0] if result.items else None
        if first is not None:
            for p in list(dict.fromkeys(first.perturbations))[:5]:
                lines.append(f"- {p}")
    lines += ["", "## Items", "", "| id | gold | p̄ | " + " | ".join(c.methods) + " | answers |"]
    lines.append("|" + "---|" * (4 + len(c.methods)))
    for r in result.items:
        answers = _answer_summary([s.answer.value for s in r.original])
        lines.append(
            f"| {r.item.id} | {r.item.gold} | {_fmt(r.performance)} | "
            + " | ".join(_fmt(r.scores[m]) for m in c.methods)
            + f" | {answers} |"
        )
    return "\n".join(lines) + "\n"


def _score_rows(result: RunResult):
    for r in result.items:
        yield {
            "id": r.item.id,
            "gold": r.item.gold,
            "p_bar": r.performance,
            "label": int(r.performance >= 0.5),
            "scores": r.scores,
            "original_answers": [s.answer.value for s in r.original],
            "perturbed_answers": [s.answer.value for s in r.perturbed],
        }


def _sample_rows(result: RunResult):
    for r in result.items:
        for i, (s, ok) in enumerate(zip(r.original, r.correct, strict=True)):
            yield {"id": r.item.id, "set": "original", "index": i, "prefix": None,
                   "text": s.text, "answer": s.answer.value, "correct": ok}
        for i, (s, p) in enumerate(zip(r.perturbed, r.perturbations, strict=True)):
            yield {"id": r.item.id, "set": "perturbed", "index": i, "prefix": p,
                   "text": s.text, "answer": s.answer.value,
                   "correct": is_correct(s.answer, r.item, result.task.format)}


def _answer_summary(values: list[str | None]) -> str:
    counts: dict[str, int] = {}
    for v in values:
        key = "∅" if v is None else v
        counts[key] = counts.get(key, 0) + 1
    top = sorted(counts.items(), key=lambda kv: -kv[1])[:3]
    return ", ".join(f"{k}×{n}" for k, n in top)


def _write_jsonl(path: Path, rows) -> None:
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def _clean(x: float) -> float | None:
    return None if isinstance(x, float) and math.isnan(x) else x


def _fmt(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{x:.3f}"

"""Write a run folder: config, per-item scores, metrics, samples and a Markdown report.

Files
-----
``config.yaml``         the run's configuration (with the cache it used)
``scores.jsonl``        one row per item: id, gold, p̄, each method's score, answers
``metrics.json``        per method, item level: ECE, MCE, Brier, AUROC, AUPRC-P, AUPRC-N,
                        AUARC, PRR with bootstrap CIs (``<metric>_low`` / ``_high``),
                        Pearson calibration correlation, polarisation, mean score, items
                        scored, and with ``calibrate`` the cross-fitted ``ece_calibrated``
                        and ``brier_calibrated``; ``responses``: the same per generation
                        (002 §3.5-3.7); ``unavailable``: why a method has no score;
                        ``stats``: the run's counters, with ``stats.ledger``: requests,
                        samples, reported tokens and cost per stage (credo.generation.ledger);
                        ``coverage_at_risk[method][alpha]`` (issue 23 item 2; alpha as
                        ``"0.1"``, credo.evaluate.coverage): the share of items answered at
                        selective risk alpha, over ``evaluation.splits`` calibration/test
                        halves: ``coverage_mean``, ``coverage_std``, ``coverage_q05``,
                        ``coverage_q95``, ``exceed_rate`` (splits whose test risk exceeded
                        alpha), ``certified_rate``, ``risk_mean``, ``n_items``, ``delta``,
                        ``splits``, ``procedure``; or ``n_items`` and ``note`` when too few
                        items to split; ``degenerate[method]``: why its scores are
                        degenerate on this run. Both absent without known correctness;
                        ``task_identity``: the task as a certificate records it (family,
                        format, domain, prompt digest, correctness; issue 34)
``samples.jsonl``       every sample of every set (set, index, ref, prefix, text, extracted
                        answer, correctness, the method confidences given to it)
``perturbations.jsonl`` the kept context prefixes per item and the filter's counts
``perturbation_similarity.json``  pairwise cosine similarities of the kept perturbations
                        (000 App. A.2), when the result carries them
``report.md``           the tables a reader wants first
``answers.jsonl``       with a certificate (issue 23): per item the answer, the certified
                        method's score and whether it is accepted at the certificate's risk;
                        with a claim certificate (issue 33) the retained and removed claims
                        and the filtered answer
``claims.jsonl``        a run with ``claims`` (issue 33): per item its answer and claims
                        (text, label where known, every claim method's finite score), in
                        the layout ``credo certify RUN_DIR --claims`` and ``read_claims`` read
``claim_metrics.json``  the claim methods' metrics per claim with CIs, the conformal
                        threshold and retained share per method and alpha, unavailable ones
``report.html``         the self-contained HTML report with figures (credo.report.html)
``scores.parquet``, ``samples.parquet``  the same tables for pandas / polars
``run_status.json``     written last (issue 34 item 10): complete, or incomplete (items
                        whose requests failed; a rerun completes them), with the run's
                        outcome (complete, incomplete-budget, incomplete-failures,
                        neutrality-failed) and ``files``, every other file written;
                        absent when writing was interrupted
"""

from __future__ import annotations

import logging
import math
from collections import ChainMap
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import yaml

from credo import jsonio
from credo.evaluate import registry
from credo.evaluate.metrics import FEW_IN_CLASS
from credo.evaluate.registry import Level
from credo.models.urls import redact_url
from credo.pipeline.ending import status_record
from credo.report.claims import claim_file_rows, claim_markdown
from credo.report.coverage import (
    coverage_cell,
    coverage_detail_rows,
    coverage_headers,
    headline_lines,
)
from credo.report.ledger import ledger_notes, ledger_table_rows
from credo.report.markdown import answer_summary, fmt_number, md_cell, md_table
from credo.report.phrases import ABOVE_STATS, incomplete_note, report_title
from credo.report.rundata import (
    CLAIM_METRICS_FILE,
    CLAIMS_FILE,
    OPTIONAL_JSON,
    SIMILARITY_FILE,
    STATUS_FILE,
)

if TYPE_CHECKING:
    from credo.config import StudyConfig
    from credo.evaluate.claims import ClaimCertificate
    from credo.pipeline.certificate import RunCertificate
    from credo.pipeline.runner import RunResult

log = logging.getLogger(__name__)

#: Table headers by metrics.json key: the registered metrics' (``ECE ↓``), their
#: calibrated forms' (``ECE cal. ↓``) and the mean score's; live views of
#: :mod:`credo.evaluate.registry` (issue 22 item 4).
METRIC_LABELS = ChainMap(registry.headers(), registry.headers(calibrated=True),
                         {"mean_score": "mean score"})


ANSWERS_FILE = "answers.jsonl"
"""The decisions of a run with a certificate (:func:`write_answers`)."""
PREVIOUS_RUN_FILES = (*OPTIONAL_JSON, "report.html", "scores.parquet", "samples.parquet",
                      ANSWERS_FILE, CLAIMS_FILE)
"""Files of a run folder that a run may not write (or writes last, after the marker):
removed before a run is written into the folder, so none of them outlives its run."""


def write_run(result: RunResult, out: str | Path,
              certificate: RunCertificate | ClaimCertificate | None = None) -> Path:
    """Write every file of the run folder ``out`` and return its path.

    Each file is written atomically (:func:`credo.jsonio.write_text`). The status marker
    ``run_status.json`` is removed first and written last (issue 34 item 10), after the
    run's data, report.md, ``answers.jsonl`` (with a ``certificate``: :func:`write_answers`),
    report.html and the Parquet exports, and it lists those files (``files``): a folder
    without it was interrupted while being written (or comes from a credo before the
    marker), and ``credo report`` says which listed file is missing. A run owns its
    folder (issue 21): the files a previous run into ``out`` wrote and this one may not
    (:data:`PREVIOUS_RUN_FILES`: its ``perturbation_similarity.json``, whose "Diversity"
    section would describe the old perturbations, its report.html, …) are removed
    first; files credo never writes are left alone.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / STATUS_FILE).unlink(missing_ok=True)
    for name in PREVIOUS_RUN_FILES:  # a run owns its folder (issue 21)
        (out / name).unlink(missing_ok=True)
    cfg = _without_credentials(result.config.model_dump(mode="json"))
    cfg["cache"] = str(result.config.cache_path)
    if result.source:  # a score run: only the sampling settings the file records
        given = str(result.stats.get("given_sampling", ""))
        keys = {part.split("=", 1)[0] for part in given.split(", ") if "=" in part}
        cfg["sampling"] = {k: v for k, v in cfg["sampling"].items() if k in keys}
    files = [jsonio.write_text(out / "config.yaml", yaml.safe_dump(cfg, sort_keys=False))]
    files.append(jsonio.write_jsonl(out / "scores.jsonl", _score_rows(result)))
    files.append(jsonio.write_jsonl(out / "samples.jsonl", _sample_rows(result)))
    files.append(jsonio.write_jsonl(
        out / "perturbations.jsonl",
        (
            {
                "id": p.item_id,
                "kept": list(p.kept),
                "candidates": p.candidates,
                "rejected_invalid": p.rejected_invalid,
                "rejected_similar": p.rejected_similar,
                "rejected_by": p.rejected_by,
            }
            for p in result.perturbation_sets.values()
        ),
    ))
    metrics = {
        "task": result.task.name,
        "model": result.model_identity,
        "items": len(result.items),
        "accuracy": result.accuracy,
        "correctness": correctness_of(result),
        "task_identity": result.task_identity,  # what a certificate records (issue 34)
        "methods": result.metrics,
        "responses": result.response_metrics,
        "unavailable": result.unavailable,
        "stats": {**result.stats, "ledger": result.ledger} if result.ledger else result.stats,
    }
    if result.incomplete:
        metrics["incomplete"] = result.incomplete
    if result.neutrality:
        metrics["neutrality"] = result.neutrality
    if result.coverage:
        metrics["coverage_at_risk"] = result.coverage
    if result.degenerate:
        metrics["degenerate"] = result.degenerate
    files.append(jsonio.write_text(out / "metrics.json", jsonio.dumps(metrics, indent=2)))
    if result.perturbation_similarity:
        files.append(jsonio.write_text(out / SIMILARITY_FILE,
                                       jsonio.dumps(result.perturbation_similarity)))
    files += _claim_files(result, out)
    files.append(jsonio.write_text(out / "report.md", render_markdown(result)))
    files += _answers(result, certificate, out)
    # issue 22: the marker every pipeline's ending fills (credo.pipeline.ending)
    marker = status_record(result.outcome, result.incomplete, result.stopped_by_budget)
    status = {
        "status": marker["status"], "outcome": marker["outcome"], "items": len(result.items),
        **marker, "written": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    exports = _write_html_report(out, status)
    if exports is None:  # logged; the folder stays unmarked: not all its files are there
        return out
    status["files"] = sorted(p.name for p in (*files, *exports))
    jsonio.write_text(out / STATUS_FILE, jsonio.dumps(status, indent=2))
    return out


def write_study_config(config: StudyConfig, out: str | Path) -> Path:
    """``out/study.yaml``: a study's config as its runs' ``config.yaml`` is written (every
    URL's credentials removed, the cache file spelled out); ``credo study --config`` on
    it reruns the study."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = _without_credentials(config.model_dump(mode="json"))
    cfg["cache"] = str(config.cache_path)
    path = out / "study.yaml"
    jsonio.write_text(path, yaml.safe_dump(cfg, sort_keys=False))
    return path


def _without_credentials(value: Any) -> Any:
    """``value`` (a config dump) with the userinfo and the credential query parameters of
    every URL in it removed (``http://user:KEY@host/v1?api_key=K`` -> ``http://host/v1``,
    :func:`credo.models.urls.redact_url`): no secret is written to a file (issue 21).
    A rerun from that config.yaml needs the credentials again (an environment variable
    named by ``model_options.api_key_env``, or the URL given on the command line)."""
    if isinstance(value, dict):
        return {k: _without_credentials(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_credentials(v) for v in value]
    if isinstance(value, str) and "://" in value:
        return redact_url(value)
    return value


def _write_html_report(out: Path, status: dict[str, Any]) -> list[Path] | None:
    """report.html and the Parquet exports (issue 6), from the files just written, the
    page showing ``status`` (the marker written after it); the files written.

    A failure here is logged, never raised (None): the run's data are already on disk;
    the folder then gets no status marker, so it reads as interrupted, and a rerun of
    its config (every sample cached) writes it whole.
    """
    from credo.report.html import RUN_PAGE, write_run_report_after_run

    try:
        page = write_run_report_after_run(out, status)
    except Exception as e:
        log.error("could not write %s or its Parquet exports (%s: %s); the run folder is "
                  "left without %s: rerun its config (every sample is cached)",
                  out / RUN_PAGE, type(e).__name__, e, STATUS_FILE,
                  exc_info=log.isEnabledFor(logging.INFO))
        return None
    return [page, out / "scores.parquet", out / "samples.parquet"]


def metrics_table_rows(result: RunResult, compact: bool = False) -> list[list[str]]:
    """Header plus one row per method: method, items scored, ECE, MCE, Brier, AUROC,
    AUPRC-P, AUPRC-N, AUARC, PRR (each with its 95% bootstrap CI when computed), the
    calibrated ECE and Brier when the run calibrates, Pearson calibration correlation,
    polarisation, mean score. ``compact`` (the terminal): the headline metrics
    (:data:`COMPACT_METRICS`) without CIs, which report.md and report.html carry. Beside
    AUROC, the coverage at risk α per α of a labelled run (issue 23 item 2: mean ± sd over
    the splits; the mean alone when ``compact``)."""
    rows = _table_rows(result.metrics, "items", "n_items", "item", compact=compact)
    return with_coverage(rows, result.coverage, compact)


def with_coverage(rows: list[list[str]], coverage: dict[str, dict[str, dict[str, Any]]],
                  compact: bool) -> list[list[str]]:
    """``rows`` (header first, method first) with one coverage-at-risk column per α after
    the AUROC column (the last column without AUROC); unchanged without coverage."""
    if not coverage:
        return rows
    header = rows[0]
    auroc = registry.headers().get("auroc")
    at = header.index(auroc) + 1 if auroc in header else len(header)
    alphas = list(dict.fromkeys(a for d in coverage.values() for a in d))
    out = [header[:at] + coverage_headers(coverage) + header[at:]]
    for row in rows[1:]:
        entries = coverage.get(row[0], {})
        cells = [coverage_cell(entries.get(a), compact) for a in alphas]
        out.append(row[:at] + cells + row[at:])
    return out


def response_table_rows(result: RunResult, compact: bool = False) -> list[list[str]]:
    """002-style rows: each generation's confidence against its own correctness (the
    metrics of :func:`metrics_table_rows`, plus the accuracy)."""
    return _table_rows(result.response_metrics, "responses", "n_responses", "generation",
                       accuracy=True, compact=compact)


COMPACT_METRICS = registry.names(headline=True)
"""What the terminal table shows: the metrics registered ``headline`` (issue 22 item 4):
calibration (ECE, Brier), ranking (AUROC, AUPRC-P/N) and LM-Polygraph's PRR."""


def _compact_rows(
    metrics: dict[str, dict[str, float]], count_label: str, count_key: str, per: Level,
    accuracy: bool,
) -> list[list[str]]:
    keys = registry.names(per, headline=True)
    rows = [["method", count_label, *(["accuracy"] if accuracy else []),
             *(METRIC_LABELS[k] for k in keys), "mean score"]]
    for method, d in metrics.items():
        rows.append([method, str(d.get(count_key, "")),
                     *([fmt_number(d.get("accuracy"))] if accuracy else []),
                     *(fmt_number(d.get(k)) + _few_mark(d, k) for k in keys),
                     fmt_number(d.get("mean_score"))])
    return rows


def _table_rows(
    metrics: dict[str, dict[str, float]],
    count_label: str,
    count_key: str,
    per: Level,
    accuracy: bool = False,
    compact: bool = False,
) -> list[list[str]]:
    if compact:
        return _compact_rows(metrics, count_label, count_key, per, accuracy)
    keys = registry.names(per)
    calibrated = [k for k in registry.headers(per, calibrated=True)
                  if any(k in d for d in metrics.values())]
    rows = [
        [
            "method",
            count_label,
            *(["accuracy"] if accuracy else []),
            *(METRIC_LABELS[k] for k in keys),
            *(METRIC_LABELS[k] for k in calibrated),
            "Pearson ↑",
            "polarisation",
            "mean score",
        ]
    ]
    for method, d in metrics.items():
        rows.append(
            [
                method,
                str(d.get(count_key, "")),
                *([fmt_number(d.get("accuracy"))] if accuracy else []),
                *(_with_ci(d, k) + _few_mark(d, k) for k in keys),
                *(fmt_number(d.get(k)) for k in calibrated),
                fmt_number(d.get("pearson")),
                fmt_number(d.get("polarisation")),
                fmt_number(d.get("mean_score")),
            ]
        )
    return rows


RANKING_METRICS = registry.names(ranking=True)
"""The ranking metrics (AUROC, AUPRC-P/N): marked when the smaller class is small."""
FEW_MARK = " †"
FEW_NOTE = (
    f"†: the smaller class has fewer than {FEW_IN_CLASS} items; this ranking metric rests on"
    " them alone."
)


def _few_mark(d: dict[str, float], key: str) -> str:
    """``FEW_MARK`` on a ranking metric whose smaller class has under FEW_IN_CLASS items."""
    few = d.get("smaller_class")
    return FEW_MARK if key in RANKING_METRICS and few is not None and few < FEW_IN_CLASS else ""


def few_in_class(metrics: dict[str, dict[str, float]]) -> bool:
    """Whether any method's ranking metrics rest on a class of fewer than FEW_IN_CLASS."""
    return any(_few_mark(d, k) for d in metrics.values() for k in RANKING_METRICS)


def _with_ci(d: dict[str, float], key: str) -> str:
    value = fmt_number(d.get(key, math.nan))
    lo, hi = d.get(f"{key}_low"), d.get(f"{key}_high")
    if lo is None or hi is None or value == "n/a" or math.isnan(lo) or math.isnan(hi):
        return value
    return f"{value} [{lo:.2f}, {hi:.2f}]"


def correctness_of(result: RunResult) -> str:
    """How the run's correctness was decided (issue 25 item 3: metrics.json and the
    reports name it): :func:`credo.tasks.grading.describe_correctness`, with the grader
    model of a grader that asks one, and what the grading stage said of it on this run
    (e.g. FActScore without a knowledge source: unavailable for every item)."""
    from credo.tasks.grading import describe_correctness

    c = result.config
    said = result.stats.get("correctness")
    if result.source:  # a score run: the file's own, or credo's grading (given_stats)
        return str(said or "none")
    rule = describe_correctness(result.task, (c.grader or c.judge).model or c.model)
    return f"{rule}; {said}" if said else rule


def render_markdown(result: RunResult) -> str:
    """The run report as Markdown."""
    c = result.config
    table = md_table(metrics_table_rows(result))
    labels = [r.performance >= 0.5 for r in result.items]
    if result.source:
        origin = [
            f"- generations: given in `{result.source}`, scored without a model"
            f" ({result.stats.get('given_samples', '?')} samples)",
            f"- samples per item: {result.stats.get('given_samples_per_item', '?')}; sampling:"
            f" {result.stats.get('given_sampling', '?')}",
            *([f"- answers: {result.stats['answers']}"] if result.stats.get("answers") else []),
            f"- kernel: {c.kernel}; seed: {c.seed}",
        ]
    else:
        origin = [
            f"- samples per item: n = {c.n} original, m = {c.m} perturbed (one per perturbation),"
            f" T = {c.sampling.temperature}, top_p = {c.sampling.top_p},"
            f" top_k = {c.sampling.top_k}, min_p = {c.sampling.min_p},"
            f" max_tokens = {c.sampling.max_tokens}",
            f"- prompt style: {c.prompt_style}; kernel: {c.kernel}; seed: {c.seed}",
        ]
    first = headline_lines(result.coverage, result.degenerate)
    lines = [
        f"# {report_title(result.task.name, c.model, result.stats.get('given_layout'))}",
        "",
        *(f"- {line}" for line in first),
        *([""] if first else []),
        *([] if result.source else [f"- model: `{result.model_identity}`"]),
        f"- items: {len(result.items)} (label 1 = p̄ ≥ 0.5: {sum(labels)} items)",
        *origin,
        f"- accuracy (mean p̄ over items): {fmt_number(result.accuracy)}",
        f"- correctness: {correctness_of(result)}",
        *([f"- {UNLABELLED_NOTE}"] if not result.metrics and result.items else []),
        "",
        "## Calibration and ranking (000 App. E.2)",
        "",
        f"Scores against per-item performance p̄ (ECE and MCE, {c.ece_bins} equal-width bins)",
        "and against the label 1[p̄ ≥ 0.5] (Brier, AUROC, AUPRC-P; AUPRC-N with labels 1 − y",
        "and scores 1 − s). AUARC: mean of p̄ over the items kept when rejecting the",
        "lowest-scored first, averaged over rejection levels; PRR = (AUARC − random) /",
        "(oracle − random) (LM-Polygraph).",
        f"Brackets: 95% bootstrap CIs over items ({c.bootstrap} resamples, 002 §3.7).",
        *_calibration_note(c.calibrate),
        "n/a: undefined (all items share one label) or not available (see below).",
        "",
        *table,
        "",
        *([FEW_NOTE, ""] if few_in_class(result.metrics) else []),
        *_coverage_section(result),
        *_neutrality_section(result),
        *_response_section(result),
        *_histogram_section(result),
        *_unavailable_section(result),
        *(claim_markdown(claim_file_rows(result.claims), result.claims.to_dict(),
                         result.stats) if result.claims is not None else []),
        "## Run",
        "",
        *(f"- {k.replace('_', ' ')}: {v}" for k, v in result.stats.items()
          if k not in ABOVE_STATS),
        *_ledger_section(result.ledger),
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
            f"- rejections per rule ({c.perturbation.rules} rules, writer prompt"
            f" {c.perturbation.prompt}): " + _rule_counts(result),
            f"- kept per item: min {min(kept)}, max {max(kept)} (m = {c.m})",
            "",
            "Examples (first item):",
            "",
        ]
        first = result.items[0] if result.items else None
        if first is not None:
            for p in list(dict.fromkeys(first.perturbations))[:5]:
                lines.append(f"- {p}")
    items = [["id", "gold", "p̄", *c.methods, "answers"]]
    for r in result.items:
        answers = answer_summary([s.answer.value for s in r.original],
                                 r.set_correct.get("original", ()))
        items.append([md_cell(r.item.id), md_cell(r.item.gold), fmt_number(r.performance),
                      *(fmt_number(r.scores[m]) for m in c.methods),
                      md_cell(answers, len(answers))])
    lines += ["", "## Items", "", *md_table(items)]
    return "\n".join(lines) + "\n"


def _ledger_section(ledger: dict[str, Any]) -> list[str]:
    """The ledger (requests, samples, reported tokens, cost per stage) and its notes."""
    if not ledger or not ledger.get("stages"):
        return []
    return [
        "",
        "## Ledger",
        "",
        "Per stage: requests (distinct cached requests) and samples asked for, samples read",
        "from the cache and generated, backend calls, and the tokens the server reported",
        "for the samples generated in this run.",
        "",
        *md_table(ledger_table_rows(ledger)),
        "",
        *(f"- {line}" for line in ledger_notes(ledger)),
    ]


def _calibration_note(method: str) -> list[str]:
    if method == "none":
        return []
    how = "isotonic regression" if method == "isotonic" else "Platt scaling"
    return [f"Cal.: ECE and Brier after {how} of each method's scores, cross-fitted over 5",
            "folds of items (no item is scored by a map fitted on it)."]


def neutrality_line(record: dict[str, Any]) -> str:
    """000 App. A.3's verdict on the run's prefixes in one line."""
    stated = (
        f"mean Δ = {record['mean_delta']:+.2f} of {record['samples_per_set']} samples per item,"
        f" {int(record['confidence'] * 100)}% CI [{record['low']:+.2f}, {record['high']:+.2f}]"
        f" over {record['items']} items"
    )
    if record["neutral"]:
        return f"The prefixes pass the neutrality test (000 App. A.3): {stated}."
    return (
        f"The prefixes are not neutral for this model (000 App. A.3): {stated}; C3 is"
        " confounded by non-neutral prefixes (a stronger writer, stricter rules or corpus"
        " noise may help)."
    )


def _rule_counts(result: RunResult) -> str:
    totals: dict[str, int] = {}
    for p in result.perturbation_sets.values():
        for rule, k in p.rejected_by.items():
            totals[rule] = totals.get(rule, 0) + k
    return ", ".join(f"{r} {k}" for r, k in sorted(totals.items(), key=lambda x: -x[1])) or "none"


def _coverage_section(result: RunResult) -> list[str]:
    """Coverage at risk α per method (issue 23 item 2), with how it was estimated."""
    if not result.coverage:
        return []
    ev = result.config.evaluation
    return [
        "## Coverage at risk α (issue 23)",
        "",
        "The share of items a method lets you answer when a threshold on its scores is",
        f"certified (Learn then Test, δ = {ev.delta:g}) to keep the error rate among the",
        "answered items at most α. Estimated on this run's items: "
        f"{ev.splits} random halves calibrate,",
        "the other halves count (mean ± sd, 5–95% range); risk > α: splits whose answered",
        "test items erred more often than α; certified: splits with any threshold. The",
        "correctness is the answer credo gives (the modal original answer). Degenerate:",
        "≥ 80% of scores within 0.05 of one value, or a score ≥ 0.9 on most items while",
        "fewer than 60% of their answers are correct.",
        "",
        *md_table(coverage_detail_rows(result.coverage)),
        "",
    ]


def _neutrality_section(result: RunResult) -> list[str]:
    if not result.neutrality:
        return []
    return ["## Neutrality of the prefixes (000 App. A.3)", "",
            "Δ = #correct under a prefix − #correct without, per item; neutral prefixes keep it"
            " centred at 0.", "", neutrality_line(result.neutrality), ""]


def _response_section(result: RunResult) -> list[str]:
    if not result.response_metrics:
        return []
    return [
        "## Per generation (002 §3.5–3.7)",
        "",
        "Each generation's confidence against that generation's own correctness, for the",
        "methods that score generations. Answer Consistency uses one ECE bin per discrete",
        "value (002 App. A.11.3); its choice-task responses are APriCoT verdicts. Pearson:",
        "correlation of bin confidence and bin accuracy over the calibration plot (002",
        "Fig. 4). Polarisation: normalised entropy of the bin counts (0 = all in one bin).",
        "",
        *md_table(response_table_rows(result)),
        "",
    ]


def _histogram_section(result: RunResult) -> list[str]:
    """Bin counts of each method's item scores: the polarisation picture of 002 §4."""
    from credo.evaluate.bootstrap import calibration_curve

    bins = result.config.ece_bins
    rows = [["method", *(f"{i / bins:.1f}–" for i in range(bins))]]
    for name in result.metrics:
        s = np.array([r.scores[name] for r in result.items], dtype=float)
        s = s[~np.isnan(s)]
        if s.size == 0:
            continue
        _, _, counts = calibration_curve(s, np.zeros_like(s), bins)
        rows.append([name, *(str(int(c)) for c in counts)])
    return [
        "## Score histograms (002 §4)",
        "",
        f"Item scores per method in {bins} equal-width bins from 0 to 1 (counts); a",
        "polarised method piles its items into one bin.",
        "",
        *md_table(rows),
        "",
    ]


def _unavailable_section(result: RunResult) -> list[str]:
    lines = []
    mass = result.metrics.get("label_prob", {}).get("label_mass")
    if mass is not None:
        lines += [
            f"Task comprehension (002 §3.6): mean probability mass on the option letters at"
            f" the answer token, before normalisation: {fmt_number(mass)}.",
            "",
        ]
    if result.unavailable:
        lines += ["## Methods without a score on some items", ""]
        lines += [f"- {m}: {why}" for m, why in result.unavailable.items()]
        lines.append("")
    if result.incomplete:
        shown = {r.item.id for r in result.items}
        left_out = sum(1 for i in result.incomplete if i not in shown)
        lines += [
            "## Incomplete items",
            "",
            incomplete_note(left_out, len(result.incomplete) - left_out,
                            _incomplete_why(result), given=bool(result.source)),
            "",
            *(f"- {md_cell(i)}: {why}" for i, why in result.incomplete.items()),
            "",
        ]
    return lines


def _incomplete_why(result: RunResult) -> str:
    if result.source:
        return "the log lacks some or all of their samples"
    if result.stopped_by_budget:
        return ("the cost budget (max_cost_usd) was reached before their requests were sent."
                " Rerun with a higher budget: it generates only what is missing.")
    return ("some of their requests failed after the backend's retries. Rerun the same"
            " config: it generates only what is missing.")


UNLABELLED_NOTE = (
    "no item has a gold answer: every method's score and the answer credo gives are in "
    "scores.jsonl; nothing is evaluated (issue 23)"
)
"""What a run on questions without gold answers says instead of its metrics."""


def write_answers(result: RunResult, cert: RunCertificate, out: str | Path) -> Path:
    """``out/answers.jsonl``: per item its id, question, the answer credo gives (the modal
    original answer), the certified method's score, ``accept`` (score at or above the
    certified threshold; never when nothing was certified or the item has no answer) and
    the certificate's α, δ and procedure (issue 23, item 4)."""
    c = cert.certificate
    path = Path(out) / ANSWERS_FILE
    rows = []
    for r in result.items:
        score = r.scores.get(cert.method, math.nan)
        known = r.answer is not None and not math.isnan(score)
        rows.append({
            "id": r.item.id, "question": r.item.question, "answer": r.answer,
            "score": None if math.isnan(score) else score,
            "accept": bool(known and c.threshold is not None and score >= c.threshold),
            "method": cert.method, "alpha": c.alpha, "delta": c.delta,
            "procedure": c.method,
        })
    jsonio.write_jsonl(path, rows)
    return path


def _score_rows(result: RunResult):
    for r in result.items:
        yield {
            "id": r.item.id,
            "gold": r.item.gold,
            "p_bar": r.performance,  # NaN (null in the file) when correctness is unknown
            "label": None if math.isnan(r.performance) else int(r.performance >= 0.5),
            # the answer credo gives (the modal original answer) and its correctness, what
            # a certificate's selective risk counts (issue 23); null when unknown
            "answer": r.answer,
            "answer_correct": r.answer_correct,
            "scores": r.scores,
            "original_answers": [s.answer.value for s in r.original],
            "perturbed_answers": [s.answer.value for s in r.perturbed],
        }


def _sample_rows(result: RunResult):
    for r in result.items:
        confidences: dict[tuple[str, int], dict[str, float | None]] = {}
        for name, sc in r.method_scores.items():
            for i, v in enumerate(sc.responses):
                confidences.setdefault((sc.of, i), {})[name] = v
        for set_name, samples in r.sets.items():
            correct = r.set_correct.get(set_name, ())
            for i, s in enumerate(samples):
                yield {
                    "id": r.item.id,
                    "set": set_name,
                    "index": i,
                    "ref": list(s.ref),
                    "prefix": r.perturbations[i] if set_name == "perturbed" else None,
                    "text": s.text,
                    "answer": s.answer.value,
                    "correct": correct[i] if i < len(correct) else None,
                    "confidence": confidences.get((set_name, i), {}),
                }


def _claim_files(result: RunResult, out: Path) -> list[Path]:
    """``claims.jsonl`` and ``claim_metrics.json`` of a run with claims (issue 33)."""
    if result.claims is None:
        return []
    return [jsonio.write_jsonl(out / CLAIMS_FILE, claim_file_rows(result.claims)),
            jsonio.write_text(out / CLAIM_METRICS_FILE,
                              jsonio.dumps(result.claims.to_dict(), indent=2))]


def _answers(result: RunResult, certificate: Any, out: Path) -> list[Path]:
    """``answers.jsonl`` under a run certificate or a claim certificate; none without."""
    from credo.evaluate.claims import ClaimCertificate

    if isinstance(certificate, ClaimCertificate):
        return [write_claim_answers(result, certificate, out)]
    return [] if certificate is None else [write_answers(result, certificate, out)]


def write_claim_answers(result: RunResult, cert: ClaimCertificate, out: str | Path) -> Path:
    """``out/answers.jsonl`` under a claim certificate (issue 33): per item its id,
    question, the answer, the filtered answer (the retained claims joined by spaces),
    the retained and removed claims (text and the certificate's score), and the
    certificate's score, threshold, alpha, a and delta. An item whose claims lack the
    certificate's score keeps none (``error`` says why)."""
    from credo.evaluate.claims import apply_claim_certificate

    rows = []
    for item in (result.claims.items if result.claims is not None else []):
        head = {"id": item.id, "question": item.prompt, "answer": item.answer,
                "score": cert.score, "threshold": cert.threshold, "alpha": cert.alpha,
                "a": cert.a, "delta": cert.delta}
        try:
            (f,) = apply_claim_certificate(cert, [item])
        except ValueError as e:
            rows.append({**head, "filtered_answer": "", "retained": [],
                         "removed": [{"text": c.text} for c in item.claims], "error": str(e)})
            continue
        d = f.to_dict()
        rows.append({**head, "filtered_answer": " ".join(c.text for c in f.retained),
                     "retained": d["retained"], "removed": d["removed"]})
    if rows and isinstance(rows[0]["threshold"], float) and math.isinf(rows[0]["threshold"]):
        for r in rows:
            r["threshold"] = "-inf"
    return jsonio.write_jsonl(Path(out) / ANSWERS_FILE, rows)

"""The run folder's ``report.md``, rendered (the folder writer,
:mod:`credo.report.writer`, writes it; this module only renders Markdown), and the
Markdown pieces the strength folder's ``report.md`` shares.

- :func:`render_markdown`: a :class:`~credo.pipeline.runner.RunResult` as report.md: the
  headline, how the samples were drawn, the metrics tables (item level; per generation),
  coverage at risk, neutrality, score histograms, unavailable and incomplete items, the
  run's counters and ledger, the perturbations and the items.
- :func:`metrics_table_rows`, :func:`response_table_rows`: the metrics tables as rows,
  also printed by the terminal (``compact``); :func:`neutrality_line`,
  :data:`UNLABELLED_NOTE`, :data:`FEW_NOTE`: sentences the command line says alike;
  :func:`correctness_of`: how the run's correctness was decided (metrics.json records it).
- The Markdown pieces (pipe tables, one-line cells, fixed-decimal numbers, an item's
  answers in one cell) are :mod:`credo.report.md_pieces`', re-exported here.
"""

from __future__ import annotations

import math
from collections import ChainMap
from typing import TYPE_CHECKING, Any

import numpy as np

from credo.evaluate import registry
from credo.evaluate.metrics import FEW_IN_CLASS
from credo.evaluate.registry import Level
from credo.report.claims import claim_file_rows, claim_markdown
from credo.report.coverage import (
    coverage_cell,
    coverage_detail_rows,
    coverage_headers,
    headline_lines,
)
from credo.report.ledger import ledger_notes, ledger_table_rows
from credo.report.md_pieces import (
    answer_summary,
    cut_text,
    drawn_m,
    fmt_number,
    m_text,
    md_cell,
    md_table,
)
from credo.report.phrases import ABOVE_STATS, incomplete_note, report_title

if TYPE_CHECKING:
    from credo.pipeline.runner import RunResult

__all__ = [
    "FEW_NOTE",
    "UNLABELLED_NOTE",
    "accuracy_line",
    "answer_summary",
    "correctness_of",
    "cut_text",
    "few_in_class",
    "fmt_number",
    "md_cell",
    "md_table",
    "metrics_table_rows",
    "neutrality_line",
    "render_markdown",
    "response_table_rows",
    "result_m",
    "with_coverage",
]

#: Table headers by metrics.json key: the registered metrics' (``ECE ↓``), their
#: calibrated forms' (``ECE cal. ↓``) and the mean score's; live views of
#: :mod:`credo.evaluate.registry`.
METRIC_LABELS = ChainMap(registry.headers(), registry.headers(calibrated=True),
                         {"mean_score": "mean score"})


def metrics_table_rows(result: RunResult, compact: bool = False) -> list[list[str]]:
    """Header plus one row per method: method, items scored, ECE, MCE, Brier, AUROC,
    AUPRC-P, AUPRC-N, AUARC, PRR (each with its 95% bootstrap CI when computed), the
    calibrated ECE and Brier when the run calibrates, Pearson calibration correlation,
    polarisation, mean score. ``compact`` (the terminal): the headline metrics
    (:data:`COMPACT_METRICS`) without CIs, which report.md and report.html carry. Beside
    AUROC, the coverage at risk α per α of a labelled run (mean ± sd over
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
    """Müller et al.-style rows: each generation's confidence against its own correctness (the
    metrics of :func:`metrics_table_rows`, plus the accuracy)."""
    return _table_rows(result.response_metrics, "responses", "n_responses", "generation",
                       accuracy=True, compact=compact)


COMPACT_METRICS = registry.names(headline=True)
"""What the terminal table shows: the metrics registered ``headline``:
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
    return f"{value} [{fmt_number(lo, 2)}, {fmt_number(hi, 2)}]"


def correctness_of(result: RunResult) -> str:
    """How the run's correctness was decided (metrics.json and the
    reports name it): :func:`credo.tasks.grading.describe_correctness`, with the grader
    model of a grader that asks one, and what the grading stage said of it on this run
    (e.g. FActScore without a knowledge source: unavailable for every item), then the
    rule by which two answers are one answer (:func:`~credo.tasks.answers.answer_rule`:
    numbers by exact value under the number format)."""
    from credo.tasks.answers import answer_rule
    from credo.tasks.grading import describe_correctness

    c = result.config
    said = result.stats.get("correctness")
    if result.source:  # a score run: the file's own, or credo's grading, and the rule
        return str(said or "none")
    rule = describe_correctness(result.task, (c.grader or c.judge).model or c.model)
    rule = f"{rule}; {said}" if said else rule
    return f"{rule}; answers compared as {answer_rule(result.task.format)}"


def accuracy_line(result: RunResult) -> str:
    """credo's accuracy and what it averages; for generations a tool wrote, the tool's
    own accuracy beside it with what that averages (lm-eval: the one response its filter
    keeps per document; inspect_ai: its log's metric), so the two numbers are read as
    what they are rather than as a disagreement."""
    own = f"accuracy (mean p̄ over items): {fmt_number(result.accuracy)}"
    tool = result.stats.get("tool_accuracy")
    if not isinstance(tool, int | float) or isinstance(tool, bool):
        return own
    return (f"{own}, p̄ the share of correct answers among every response of an item; "
            f"{result.stats.get('tool_accuracy_is', 'the tool')}: {fmt_number(tool)}")


def result_m(result: RunResult) -> int:
    """m as the run drew it (:func:`~credo.report.md_pieces.drawn_m`): the most perturbed
    samples of a scored item."""
    return drawn_m([len(r.perturbed) for r in result.items])


def render_markdown(result: RunResult) -> str:
    """The run report as Markdown."""
    c = result.config
    table = md_table(metrics_table_rows(result))
    labels = [r.performance >= 0.5 for r in result.items]
    if result.source:
        origin = [
            f"- generations: given in `{result.source}`, scored without a model"
            f" ({result.stats.get('given_samples', '?')} samples)",
            f"- samples per item: {result.stats.get('given_samples_per_item', '?')} original,"
            f" {m_text(result_m(result), c.m)}; sampling:"
            f" {result.stats.get('given_sampling', '?')}",
            *([f"- answers: {result.stats['answers']}"] if result.stats.get("answers") else []),
            *([f"- given scores: {result.stats['given_scores']}"]
              if result.stats.get("given_scores") else []),
            f"- kernel: {c.kernel}; seed: {c.seed}",
        ]
    else:
        origin = [
            f"- samples per item: n = {c.n} original, {m_text(result_m(result), c.m)} (one per"
            " perturbation),"
            f" T = {c.sampling.temperature}, top_p = {c.sampling.top_p},"
            f" top_k = {c.sampling.top_k}, min_p = {c.sampling.min_p},"
            f" max_tokens = {c.sampling.max_tokens}",
            f"- prompt style: {c.prompt_style}; kernel: {c.kernel}; seed: {c.seed}",
        ]
    first = headline_lines(result.coverage, result.degenerate)
    if result.stats.get("identical_repeats"):  # why the scores say nothing
        first = [*first, str(result.stats["identical_repeats"])]
    if result.certificate is not None:  # which answers a certificate let through
        first = [result.certificate.line(), *first]
    lines = [
        f"# {report_title(result.task.name, c.model, result.stats.get('given_layout'))}",
        "",
        *(f"- {line}" for line in first),
        *([""] if first else []),
        *([] if result.source else [f"- model: `{result.model_identity}`"]),
        f"- items: {len(result.items)} (label 1 = p̄ ≥ 0.5: {sum(labels)} items)",
        *origin,
        f"- {accuracy_line(result)}",
        f"- correctness: {correctness_of(result)}",
        *([f"- {UNLABELLED_NOTE}"] if not result.metrics and result.items else []),
        "",
        "## Calibration and ranking (Wu et al., App. E.2)",
        "",
        f"Scores against per-item performance p̄ (ECE and MCE, {c.ece_bins} equal-width bins)",
        "and against the label 1[p̄ ≥ 0.5] (Brier, AUROC, AUPRC-P; AUPRC-N with labels 1 − y",
        "and scores 1 − s). AUARC: mean of p̄ over the items kept when rejecting the",
        "lowest-scored first, averaged over rejection levels; PRR = (AUARC − random) /",
        "(oracle − random) (LM-Polygraph).",
        f"Brackets: 95% bootstrap CIs over items ({c.bootstrap} resamples, Müller et al., §3.7).",
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
            "## Perturbations (Wu et al., §3, App. A)",
            "",
            f"- candidates drawn: {cand}; rejected by the rules: {inval}; rejected as too"
            f" similar (cosine ≥ {c.perturbation.threshold}): {sim}",
            f"- rejections per rule ({c.perturbation.rules} rules, writer prompt"
            f" {c.perturbation.prompt}): " + _rule_counts(result),
            f"- kept per item: min {min(kept)}, max {max(kept)} ({m_text(result_m(result), c.m)})",
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
    """Wu et al., App. A.3's verdict on the run's prefixes in one line."""
    stated = (
        f"mean Δ = {fmt_number(record['mean_delta'], 2, sign=True)} of "
        f"{record['samples_per_set']} samples per item, {int(record['confidence'] * 100)}% CI "
        f"[{fmt_number(record['low'], 2, sign=True)}, {fmt_number(record['high'], 2, sign=True)}]"
        f" over {record['items']} items"
    )
    if record["neutral"]:
        return f"The prefixes pass the neutrality test (Wu et al., App. A.3): {stated}."
    return (
        f"The prefixes are not neutral for this model (Wu et al., App. A.3): {stated}; C3 is"
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
    """Coverage at risk α per method, with how it was estimated."""
    if not result.coverage:
        return []
    ev = result.config.evaluation
    return [
        "## Coverage at risk α",
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
    return ["## Neutrality of the prefixes (Wu et al., App. A.3)", "",
            "Δ = #correct under a prefix − #correct without, per item; neutral prefixes keep it"
            " centred at 0.", "", neutrality_line(result.neutrality), ""]


def _response_section(result: RunResult) -> list[str]:
    if not result.response_metrics:
        return []
    return [
        "## Per generation (Müller et al., §3.5–3.7)",
        "",
        "Each generation's confidence against that generation's own correctness, for the",
        "methods that score generations. Answer Consistency uses one ECE bin per discrete",
        "value (Müller et al., App. A.11.3); its choice-task responses are APriCoT verdicts.",
        "Pearson:",
        "correlation of bin confidence and bin accuracy over the calibration plot (Müller et al.",
        "Fig. 4). Polarisation: normalised entropy of the bin counts (0 = all in one bin).",
        "Brackets: 95% bootstrap CIs resampling questions (all of a question's generations",
        "together: they are not independent).",
        "",
        *md_table(response_table_rows(result)),
        "",
    ]


def _histogram_section(result: RunResult) -> list[str]:
    """Bin counts of each method's item scores: the polarisation picture of Müller et al., §4."""
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
        "## Score histograms (Müller et al., §4)",
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
            f"Task comprehension (Müller et al., §3.6): mean probability mass on the option "
            f"letters at the answer token, before normalisation: {fmt_number(mass)}.",
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
    "scores.jsonl; nothing is evaluated"
)
"""What a run on questions without gold answers says instead of its metrics."""

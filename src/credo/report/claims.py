"""The claim section of a run's reports, from the run folder's files:
``claims.jsonl`` (per answer its claims, labels and scores) and ``claim_metrics.json``
(the claim methods' metrics with CIs, the calibrated thresholds per alpha, the
unavailable methods). report.md gets :func:`claim_markdown`; report.html the same
table (:func:`claim_table`) and each answer with its claims marked retained or removed
at the first alpha by the best-ranking method (:func:`claim_answers`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from credo.evaluate import registry
from credo.report.md_pieces import fmt_number, md_table

__all__ = ["CLAIM_METRICS", "claim_answers", "claim_file_rows", "claim_markdown",
           "claim_table", "marking_method", "nothing_to_split"]

CLAIM_METRICS = registry.names(headline=True)
"""The per-claim metrics the reports show: the registry's headline metrics, as the run's
terminal table (every metric is in claim_metrics.json)."""
_HEADERS = registry.headers()


def claim_file_rows(run: Any) -> list[dict[str, Any]]:
    """``claims.jsonl`` of a :class:`~credo.pipeline.claims.ClaimRun`: per item its id,
    prompt, answer and claims (text, ``correct`` where known, the finite scores; a NaN
    score is left out, as the claim-file layout has no missing scores)."""
    rows = []
    for item in run.items:
        claims = []
        for c in item.claims:
            row: dict[str, Any] = {"text": c.text}
            if c.correct is not None:
                row["correct"] = c.correct
            row["scores"] = {k: v for k, v in c.scores.items() if math.isfinite(v)}
            claims.append(row)
        rows.append({"id": item.id, "prompt": item.prompt, "answer": item.answer,
                     "claims": claims})
    return rows


def _cell(d: Mapping[str, Any], metric: str) -> str:
    v = d.get(metric)
    lo, hi = d.get(f"{metric}_low"), d.get(f"{metric}_high")
    text = fmt_number(v if isinstance(v, int | float) else math.nan)
    if isinstance(lo, int | float) and isinstance(hi, int | float) and math.isfinite(lo) \
            and math.isfinite(hi):
        text += f" [{fmt_number(lo)}, {fmt_number(hi)}]"
    return text


def _alphas(summary: Mapping[str, Any]) -> list[str]:
    seen: dict[str, None] = {}
    for by_alpha in (summary.get("retained") or {}).values():
        seen.update(dict.fromkeys(by_alpha))
    return list(seen)


def _retained_cell(cert: Mapping[str, Any] | None) -> str:
    if not cert:
        return "n/a"
    if cert.get("threshold") is None:
        return f"none (needs {cert.get('n_needed') or '?'} answers)"
    return f"{100 * float(cert.get('retained', 0.0)):.0f}%"


def claim_table(summary: Mapping[str, Any]) -> list[list[str]]:
    """Header and one row per claim method: claims evaluated, the metrics with their
    CIs, and the share of claims retained at each alpha."""
    alphas = _alphas(summary)
    rows = [["claim method", "claims", *(_HEADERS[m] for m in CLAIM_METRICS),
             *(f"retained at α = {a}" for a in alphas)]]
    metrics = summary.get("metrics") or {}
    retained = summary.get("retained") or {}
    for name in summary.get("methods") or []:
        if name in (summary.get("unavailable") or {}):
            continue
        d = metrics.get(name, {})
        rows.append([name, str(d.get("n_claims", 0)), *(_cell(d, m) for m in CLAIM_METRICS),
                     *(_retained_cell(retained.get(name, {}).get(a)) for a in alphas)])
    return rows


def marking_method(summary: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The method and alpha the HTML marks claims by: the first alpha, the method with
    the highest AUROC among those with a threshold there (else the first method)."""
    alphas = _alphas(summary)
    if not alphas:
        return None, None
    a = alphas[0]
    retained = summary.get("retained") or {}
    metrics = summary.get("metrics") or {}
    candidates = [m for m in summary.get("methods") or []
                  if (retained.get(m, {}).get(a) or {}).get("threshold") is not None]
    if not candidates:
        return None, a
    def auroc(m: str) -> float:
        v = metrics.get(m, {}).get("auroc")
        return v if isinstance(v, int | float) and math.isfinite(v) else -1.0
    return max(candidates, key=auroc), a


def claim_answers(rows: Sequence[Mapping[str, Any]], summary: Mapping[str, Any],
                  limit: int = 50) -> dict[str, Any]:
    """Each answer (the first ``limit``) with its claims marked: ``kept`` (score above
    the marking method's threshold at its alpha), its score and label."""
    method, alpha = marking_method(summary)
    cert = ((summary.get("retained") or {}).get(method or "", {}).get(alpha or "") or {})
    t = cert.get("threshold")
    threshold = -math.inf if t == "-inf" else t
    out = []
    for row in rows[:limit]:
        claims = []
        for c in row.get("claims") or []:
            s = (c.get("scores") or {}).get(method) if method else None
            kept = threshold is not None and isinstance(s, int | float) and s > threshold
            claims.append({"text": c.get("text", ""), "score": s, "kept": kept,
                           "correct": c.get("correct")})
        out.append({"id": row.get("id", ""), "prompt": row.get("prompt", ""),
                    "claims": claims})
    return {"method": method, "alpha": alpha, "threshold": t, "answers": out,
            "more": max(0, len(rows) - limit)}


def nothing_to_split(rows: Sequence[Mapping[str, Any]],
                     run_stats: Mapping[str, Any] | None = None) -> str | None:
    """Why a run with the claim stage on has no claim (None when it has some): no item
    reached the claim stage (the run's items dropped for lack of perturbations, or left
    incomplete by failed requests: ``run_stats``, the run's stats), or the answers held no
    sentence."""
    if any(r.get("claims") for r in rows):
        return None
    stats = run_stats or {}
    if rows:
        return (f"No claim: the {len(rows)} answers split into none (empty answers, or a "
                "splitting reply that listed no fact and an answer with no sentence).")
    why = [f"{n} {what}" for n, what in (
        (stats.get("items_dropped_without_perturbations", 0),
         "dropped without perturbations: the writer gave no usable prefix, "
         "see perturbations.jsonl"),
        (stats.get("items_incomplete", 0),
         "incomplete: their requests failed, a rerun completes them")) if n]
    return ("No answer was split into claims: no item reached the claim stage"
            + (f" ({'; '.join(why)})" if why else "") + ".")


def claim_markdown(rows: Sequence[Mapping[str, Any]], summary: Mapping[str, Any],
                   run_stats: Mapping[str, Any] | None = None) -> list[str]:
    """The report.md section: counts, the method table, the unavailable methods; with no
    claim, why (:func:`nothing_to_split`, from the run's stats ``run_stats``)."""
    stats = summary.get("stats") or {}
    n_items = len(rows)
    n_claims = sum(len(r.get("claims") or []) for r in rows)
    per = f"{n_claims / n_items:.1f} per answer; " if n_items else ""
    empty = nothing_to_split(rows, run_stats)
    head = "## Claims (claim-level credibility, conformal factuality)"
    if empty is not None:
        return [head, "", empty, ""]
    lines = [
        head,
        "",
        f"- answers split: {n_items}; claims: {n_claims} ({per}"
        f"split: {stats.get('claims_split', '?')}); labelled: "
        f"{stats.get('claims_labelled', 0)} (labels: {stats.get('claim_labels', '?')})",
        "- each answer is the original sample credo gives; claim methods score each claim "
        "(frequency: other original samples supporting it; claim_c3: that support under the "
        "perturbed prompts against the original's; verbalized: the model's stated "
        "confidence; ordinal: position)",
        "- metrics per labelled claim; brackets: 95% bootstrap CIs resampling answers "
        "(their claims together)",
        "- retained at α: the share of this run's claims kept by the conformal threshold "
        "calibrated on its own labelled answers (Mohri & Hashimoto 2024; every retained "
        "claim correct with probability ≥ 1 − α for a new answer); `credo certify RUN_DIR "
        "--claims` writes the certificate",
        "",
    ]
    if summary.get("metrics"):
        lines += [*md_table(claim_table(summary)), ""]
    else:
        lines += ["No claim is labelled: nothing is evaluated (labels come from the "
                  "FActScore grader with a knowledge folder, or claims.labels).", ""]
    for name, why in (summary.get("unavailable") or {}).items():
        lines.append(f"- {name}: not available ({why})")
    if summary.get("unavailable"):
        lines.append("")
    return lines

"""Write a run folder: config, per-item scores, metrics, samples and the reports (this module
writes files; report.md is rendered by :mod:`credo.report.markdown`,
report.html by :mod:`credo.report.html`).

Files
-----
``config.yaml``         the run's configuration (with the cache it used)
``scores.jsonl``        one row per item: id, gold, p̄, each method's score, answers
``metrics.json``        per method, item level: ECE, MCE, Brier, AUROC, AUPRC-P, AUPRC-N,
                        AUARC, PRR with bootstrap CIs (``<metric>_low`` / ``_high``),
                        Pearson calibration correlation, polarisation, mean score, items
                        scored, and with ``calibrate`` the cross-fitted ``ece_calibrated``
                        and ``brier_calibrated``; ``responses``: the same per generation
                        (Müller et al., §3.5-3.7); ``unavailable``: why a method has no score;
                        ``stats``: the run's counters, with ``stats.ledger``: requests,
                        samples, reported tokens and cost per stage (credo.generation.ledger);
                        ``coverage_at_risk[method][alpha]`` (alpha as
                        ``"0.1"``, credo.evaluate.coverage): the share of items answered at
                        selective risk alpha, over ``evaluation.splits`` calibration/test
                        halves: ``coverage_mean``, ``coverage_std``, ``coverage_q05``,
                        ``coverage_q95``, ``exceed_rate`` (splits whose test risk exceeded
                        alpha), ``certified_rate``, ``risk_mean``, ``n_items``, ``delta``,
                        ``splits``, ``procedure``; or ``n_items`` and ``note`` when too few
                        items to split; ``degenerate[method]``: why its scores are
                        degenerate on this run. Both absent without known correctness;
                        ``task_identity``: the task as a certificate records it (family,
                        format, domain, prompt digest, correctness); ``fitted``: the
                        functions of the fitted scores (``combined``,
                        ``calibrated:<method>``) fitted on all labelled items, which
                        ``credo certify`` records
``samples.jsonl``       every sample of every set (set, index, ref, prefix, text, extracted
                        answer, correctness, the method confidences given to it; the
                        scores a file gave it, ``scores``, and its item, ``item_scores``)
``perturbations.jsonl`` the kept context prefixes per item and the filter's counts
``perturbation_similarity.json``  pairwise cosine similarities of the kept perturbations
                        (Wu et al., App. A.2), when the result carries them
``report.md``           the tables a reader wants first
``answers.jsonl``       with a certificate: per item the answer, the certified
                        method's score and whether it is accepted at the certificate's risk;
                        with a claim certificate the retained and removed claims
                        and the filtered answer
``claims.jsonl``        a run with ``claims``: per item its answer and claims
                        (text, label where known, every claim method's finite score), in
                        the layout ``credo certify RUN_DIR --claims`` and ``read_claims`` read
``claim_metrics.json``  the claim methods' metrics per claim with CIs, the conformal
                        threshold and retained share per method and alpha, unavailable ones
``report.html``         the self-contained HTML report with figures (credo.report.html)
``scores.parquet``, ``samples.parquet``  the same tables for pandas / polars
``run_status.json``     written last: complete, or incomplete (items
                        whose requests failed; a rerun completes them), with the run's
                        outcome (complete, incomplete-budget, incomplete-failures,
                        neutrality-failed) and ``files``, every other file written;
                        absent when writing was interrupted
"""

from __future__ import annotations

import logging
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from credo import jsonio
from credo.models.urls import redact_url
from credo.pipeline.ending import status_record
from credo.report.claims import claim_file_rows
from credo.report.markdown import correctness_of, render_markdown
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
    ``run_status.json`` is removed first and written last, after the
    run's data, report.md, ``answers.jsonl`` (with a ``certificate``: :func:`write_answers`),
    report.html and the Parquet exports, and it lists those files (``files``): a folder
    without it was interrupted while being written (or comes from a credo before the
    marker), and ``credo report`` says which listed file is missing. A run owns its
    folder: the files a previous run into ``out`` wrote and this one may not
    (:data:`PREVIOUS_RUN_FILES`: its ``perturbation_similarity.json``, whose "Diversity"
    section would describe the old perturbations, its report.html, …) are removed
    first; files credo never writes are left alone.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / STATUS_FILE).unlink(missing_ok=True)
    for name in PREVIOUS_RUN_FILES:  # a run owns its folder
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
        "task_identity": result.task_identity,  # what a certificate records
        "methods": result.metrics,
        "responses": result.response_metrics,
        "unavailable": result.unavailable,
        "stats": {**result.stats, "ledger": result.ledger} if result.ledger else result.stats,
    }
    optional = {"incomplete": result.incomplete, "neutrality": result.neutrality,
                "coverage_at_risk": result.coverage, "degenerate": result.degenerate,
                "fitted": result.fitted,
                "certificate": None if result.certificate is None
                else result.certificate.to_dict()}
    metrics.update({k: v for k, v in optional.items() if v})
    files.append(jsonio.write_text(out / "metrics.json", jsonio.dumps(metrics, indent=2)))
    if result.perturbation_similarity:
        files.append(jsonio.write_text(out / SIMILARITY_FILE,
                                       jsonio.dumps(result.perturbation_similarity)))
    files += _claim_files(result, out)
    files.append(jsonio.write_text(out / "report.md", render_markdown(result)))
    files += _answers(result, certificate, out)
    # the marker every pipeline's ending fills (credo.pipeline.ending)
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
    :func:`credo.models.urls.redact_url`): no secret is written to a file.
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
    """report.html and the Parquet exports, from the files just written, the
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



def write_answers(result: RunResult, cert: RunCertificate, out: str | Path) -> Path:
    """``out/answers.jsonl``: per item its id, question, the answer credo gives (the modal
    original answer), the certified method's score, ``accept`` (score at or above the
    certified threshold; never when nothing was certified or the item has no answer) and
    the certificate's α, δ and procedure."""
    from credo.pipeline.certificate import accepts

    c = cert.certificate
    path = Path(out) / ANSWERS_FILE
    rows = []
    for r in result.items:
        score = r.scores.get(cert.method, math.nan)
        rows.append({
            "id": r.item.id, "question": r.item.question, "answer": r.answer,
            "score": None if math.isnan(score) else score,
            "accept": accepts(cert, score, r.answer),
            "method": cert.method, "alpha": c.alpha, "delta": c.delta,
            "procedure": c.procedure,
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
            # a certificate's selective risk counts; null when unknown
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
                row = {
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
                # the scores a file gave (credo score): read again by credo score
                if s.scores:
                    row["scores"] = dict(s.scores)
                if r.item_scores and set_name == "original":
                    row["item_scores"] = dict(r.item_scores)
                yield row


def _claim_files(result: RunResult, out: Path) -> list[Path]:
    """``claims.jsonl`` and ``claim_metrics.json`` of a run with claims."""
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
    """``out/answers.jsonl`` under a claim certificate: per item its id,
    question, the answer, the filtered answer (the retained claims joined by spaces),
    the retained and removed claims (text and the certificate's score), and the
    certificate's score, threshold, alpha, a and delta. An item whose claims lack the
    certificate's score keeps none (``error`` says why)."""
    from credo.evaluate.claims import apply_claim_certificate

    rows = []
    for item in (result.claims.items if result.claims is not None else []):
        head = {"id": item.id, "question": item.prompt, "answer": item.answer,
                "score": cert.method, "threshold": cert.threshold, "alpha": cert.alpha,
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

"""``credo report``: HTML reports from run folders (:func:`report`), with the prefixes'
similarities a folder lacks written first (:func:`write_missing_similarities`, the only
model ``credo report`` loads)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from credo import jsonio
from credo.errors import UserError

if TYPE_CHECKING:
    from credo.report.rundata import RunData

__all__ = ["ReportResult", "report", "write_missing_similarities"]

log = logging.getLogger(__name__)


@dataclass
class ReportResult:
    """``credo report``'s result: the page written, the run folders read, the similarity
    files written first (Wu et al., App. A.2), each unfinished run with its status, and each run
    folder that lacked files its status marker lists, with those files
    and the ones still missing after the report (it writes report.html and the Parquet
    exports again)."""

    page: Path
    runs: list[RunData]
    similarities: list[Path] = field(default_factory=list)
    unfinished: list[tuple[Path, str]] = field(default_factory=list)
    lacking: list[tuple[Path, list[str], list[str]]] = field(default_factory=list)


def report(
    runs: Sequence[str | Path],
    *,
    out: str | Path | None = None,
    resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    pairs: str | Sequence[tuple[str, str]] | None = None,
    reference: str | None = None,
    c3_method: str = "c3",
    strength: Sequence[str | Path] = (),
    embedder: str | None = None,
) -> ReportResult:
    """HTML reports from run folders: one run without ``out``: ``RUN/report.html``;
    several (or ``out``): ``out/index.html`` comparing them (default folder
    ``credo-report``). Run folders lacking ``perturbation_similarity.json`` get it first
    (:func:`write_missing_similarities`, the only model ``credo report`` loads).
    ``pairs`` is a list of (A, B) or the text ``A:B,C:D``."""
    from pydantic import ValidationError

    from credo.config import validation_message
    from credo.report.html import ReportOptions, load_flip_rates, write_report, write_run_report
    from credo.report.rundata import load_run

    loaded = [load_run(r) for r in runs]
    missing = {r.path: r.missing_files for r in loaded if r.missing_files}
    _check_report_outputs(loaded, out)
    if isinstance(pairs, str):
        pairs = _parse_pairs(pairs) if pairs else None
    for a, b in pairs or []:
        for r in loaded:
            if a not in r.methods or b not in r.methods:
                raise UserError(f"--pairs {a}:{b}: {r.path} has methods {r.methods}")
    _check_report_methods(loaded, pairs, reference, c3_method)
    try:
        flips = load_flip_rates([Path(s) for s in strength])
    except FileNotFoundError as e:
        raise UserError(f"--strength: {e}") from None
    try:
        opts = ReportOptions(
            n_resamples=resamples, confidence=confidence, seed=seed, pairs=pairs,
            reference=reference, c3_method=c3_method, flip_rates=flips,
        )
    except ValidationError as e:
        raise UserError(validation_message(e, "options")) from None
    written = write_missing_similarities(loaded, embedder)
    if len(loaded) == 1 and out is None:
        page = write_run_report(loaded[0].path, opts)
    else:
        page = write_report([r.path for r in loaded], Path(out or "credo-report"), opts)
    unfinished = [(r.path, r.status) for r in loaded if r.status != "complete"]
    lacking = [(path, names, [n for n in names if not (path / n).is_file()])
               for path, names in missing.items()]
    return ReportResult(Path(page), loaded, written, unfinished, lacking)


def _check_report_outputs(loaded: Sequence[RunData], out: str | Path | None) -> None:
    """Every file :func:`report` writes can be written, before the embedder is loaded: one run
    without ``out``: its report.html and Parquet exports;
    else the ``out`` folder and the exports a run folder lacks."""
    from credo.report.html import RUN_PAGE

    alone = len(loaded) == 1 and out is None
    if not alone:
        jsonio.check_writable(Path(out or "credo-report"), "the report (--out)")
    for run in loaded:
        names = [RUN_PAGE] if alone else []
        names += [n for n in ("scores.parquet", "samples.parquet")
                  if alone or not (run.path / n).exists()]
        for name in names:
            jsonio.check_file_writable(run.path / name, "the report's files (RUN_DIR)")


def _check_report_methods(
    loaded: Sequence[RunData], pairs: Any, reference: str | None, c3_method: str
) -> None:
    """A :class:`UserError` naming ``--reference`` or ``--c3-method`` when a run folder
    does not score that method (the page would silently fall back to another), and
    ``--reference`` given with ``--pairs`` (which names every pair itself)."""
    if reference is not None and pairs:
        raise UserError("--reference applies without --pairs only (--pairs names every "
                        "pair compared); give one of them")
    named = [("--reference", reference)] + ([("--c3-method", c3_method)]
                                            if c3_method != "c3" else [])
    for flag, method in named:
        for r in loaded:
            if method is not None and method not in r.methods:
                raise UserError(f"{flag} {method}: {r.path} has no such scores (methods: "
                                f"{', '.join(r.methods)})")


def _parse_pairs(text: str) -> list[tuple[str, str]]:
    pairs = []
    for part in text.split(","):
        a, sep, b = part.strip().partition(":")
        if not sep or not a or not b:
            raise UserError(f"--pairs expects A:B[,C:D...], got {part!r}")
        pairs.append((a, b))
    return pairs


def write_missing_similarities(runs: Sequence[RunData], embedder: str | None) -> list[Path]:
    """Write ``perturbation_similarity.json`` into each run folder that lacks it and has an
    item with two or more kept perturbations (Wu et al., App. A.2); return the files written.

    ``embedder`` names the sentence embedder (default: each run's configured one; ``none``
    skips the check). Each embedder is loaded once, only when a run needs it; a failure
    to load it or to write the file is logged and the report goes on without the figure.
    """
    from credo.report.rundata import SIMILARITY_FILE

    if embedder == "none":
        return []
    loaded: dict[str, Any] = {}
    written: list[Path] = []
    for run in runs:
        groups = [g for g in run.kept_perturbations() if len(g) >= 2]
        if SIMILARITY_FILE in run.extras or not groups:
            continue
        pert = run.config.get("perturbation") or {}
        name = embedder or pert.get("embedder")
        if not name:
            continue
        if name not in loaded:
            loaded[name] = _load_embedder(name)
        if loaded[name] is None:
            continue
        from credo.perturb.quality import similarity_record

        record = similarity_record(groups, loaded[name], pert.get("threshold"))
        target = run.path / SIMILARITY_FILE
        try:
            jsonio.write_text(target, jsonio.dumps(record))
        except OSError as e:  # a read-only run folder still gets its report
            log.warning("diversity check not saved: %s: %s", target, e)
            continue
        run.extras[SIMILARITY_FILE] = record
        written.append(target)
    return written


def _load_embedder(name: str) -> Any:
    """The sentence embedder ``name``, or None (logged) when it cannot be loaded."""
    from credo.generation.pool import shared_embedder

    try:
        return shared_embedder(name)
    except Exception as e:  # the report is still useful without the diversity figure
        log.warning("diversity check skipped: could not load embedder %r: %s", name, e)
        return None

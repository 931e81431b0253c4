"""What the application layer's commands share (the modules of :mod:`credo.app`):
the model pool a run-like config opens (with the models a caller hands in), a finished
run folder read back as its config and the task it recorded, the neutrality ending, the
checks of the files a command writes, and a replay's pool, its checks of the full run it
replays from the cache and of the replay against that run's folder.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from credo.config import RunConfig, StrengthConfig
    from credo.generation.pool import ModelPool
    from credo.models.base import Model
    from credo.models.embedders import Embedder
    from credo.pipeline.runner import RunResult
    from credo.tasks.base import Task

__all__ = [
    "HandedIn",
    "HelperModels",
    "check_certificate_out",
    "check_complete",
    "check_min",
    "check_neutral",
    "check_replayed",
    "check_run_folder",
    "check_score_out",
    "check_writable",
    "config_pool",
    "folder_config",
    "full_run_config",
    "given_roles",
    "is_given",
    "recorded_task",
    "replay_cache",
    "replay_pool",
    "run_identity",
]


def check_writable(folder: str | Path, what: str) -> None:
    """Fail with a :class:`UserError` naming ``folder`` unless a file can be written there,
    before any model is called (:func:`credo.jsonio.check_writable`: the folders made
    for the check are removed again)."""
    from credo.jsonio import check_writable as check

    check(folder, what)


def check_certificate_out(out: str | Path, run_dir: str | Path) -> None:
    """Fail with a :class:`UserError` naming ``--out`` unless the certificate file can be
    written there (its missing folders are made when it is) and it is none of the files
    of ``run_dir`` the certificate is made from, before anything is read."""
    from credo.jsonio import check_file_writable, check_not_input
    from credo.report.rundata import READ_FILES

    check_not_input(out, [Path(run_dir) / name for name in READ_FILES],
                    "the certificate (--out)")
    check_file_writable(out, "the certificate (--out)")


def check_complete(data: Any, allow: bool) -> dict[str, Any] | None:
    """None for a complete run folder; for an incomplete or interrupted one a
    :class:`UserError` naming the folder and ``--allow-incomplete``, or with ``allow``
    what the certificate records of it: the status and the items left out. A certificate
    calibrated on the items that finished holds for those alone: the items left out are
    those whose requests failed (or whose samples an eval log lacks), not a random draw."""
    from credo.errors import UserError
    from credo.report.rundata import STATUS_FILE

    status = data.status
    if status == "complete":
        return None
    marker = data.extras.get(STATUS_FILE) or {}
    left = marker.get("items_incomplete") if isinstance(marker, dict) else None
    record = {"status": status, "items_incomplete": left if isinstance(left, int) else None}
    if allow:
        return record
    why = (f"{left} items left out (run_status.json)" if isinstance(left, int)
           else "no run_status.json: its writer did not finish")
    fix = ("complete the log with the tool that wrote it and score it again" if
           is_given(data.config) else "rerun its config into the folder to complete it")
    raise UserError(f"{data.path}: an {status} run folder ({why}); a certificate on the "
                    f"items that finished holds for those alone: {fix}, or pass "
                    "--allow-incomplete (the certificate records it)")


def check_score_out(samples: str | Path, out: str | Path) -> None:
    """Fail with a :class:`UserError` when the run folder ``out`` of ``credo score``
    would replace the file it scores: the file lies in ``out`` under the name of a file
    a run folder holds (``credo score RUN/samples.jsonl --out RUN``)."""
    from credo.errors import UserError
    from credo.jsonio import check_not_input
    from credo.report.run_files import RUN_FILES
    from credo.report.writer import PREVIOUS_RUN_FILES

    names = {f.name for f in RUN_FILES} | set(PREVIOUS_RUN_FILES)
    for name in sorted(names):
        try:
            check_not_input(Path(out) / name, [samples], "")
        except UserError:
            raise UserError(f"{samples}: the file scored is the {name} of the run folder "
                            f"--out {out}, which the score would write over; give another "
                            "--out") from None


def config_pool(
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


def replay_pool(
    config: RunConfig, roles: Mapping[str, Model | None], embedder: Any = None
) -> ModelPool:
    """The pool of a replay from ``config``'s cache (:func:`config_pool` with ``roles``
    and ``embedder``): no progress bar, no server reached, no sample drawn that the cache
    lacks."""
    return config_pool(config, show_progress=False, roles=roles, embedder=embedder,
                       reach=False, replay=True)


class HelperModels(TypedDict, total=False):
    """The helper models a caller can hand a run-like command (:func:`credo.run`,
    :func:`credo.api.dry_run`, :func:`credo.study`, :func:`credo.api.simulate_adaptive`,
    :func:`credo.api.certify_adaptive`) as keywords, each in place of the one the config
    names; tests pass scripted models. Nothing handed in is modified or closed.

    One declaration for every command that takes them (the commands' signatures read
    ``**handed: Unpack[...]``, PEP 692), so a role is added in one place."""

    #: writes the context prefixes and the paraphrases
    writer: Model | None
    #: the LLM judge: CCP's NLI step, the judge kernel, open-ended grading
    judge: Model | None
    #: the sentence embedder (the embedding kernel, the prefixes' diversity filter)
    embedder: Embedder | None
    #: the writer's deprecated name, accepted for one release with a DeprecationWarning
    perturber: Model | None


class HandedIn(HelperModels, total=False):
    """:class:`HelperModels` and the model under test and the task, which replace what
    the config names (a study names several models: ``models=`` instead)."""

    #: the model under test
    model: Model | None
    #: the task (its items and grader) in place of ``config.task``
    task: Task | None


def given_roles(
    handed: Mapping[str, Any], where: str, allowed: type[HelperModels] = HandedIn
) -> dict[str, Model | None]:
    """The models a run-like command was handed (``handed``, its ``**`` keywords), by
    role, for :func:`config_pool` (None: the config's own); the writer by its name or its
    deprecated one (``perturber=``, with a :class:`DeprecationWarning` pointing at the
    command's caller). A keyword that is not one of ``allowed``'s is the
    :class:`TypeError` Python raises for an unexpected keyword of ``where``."""
    from credo.config import renamed_keyword
    from credo.generation.pool import JUDGE, MODEL, WRITER

    for name in handed:
        if name not in allowed.__optional_keys__:
            raise TypeError(f"{where}() got an unexpected keyword argument '{name}'")
    writer = renamed_keyword(handed.get("writer"), handed.get("perturber"), "perturber",
                             stacklevel=4)
    return {MODEL: handed.get("model"), WRITER: writer, JUDGE: handed.get("judge")}


def is_given(config: Mapping[str, Any]) -> bool:
    """Whether a run folder's config is a ``credo score`` run's (its model ``given:…``)."""
    return str(config.get("model", "")).startswith("given:")


def recorded_task(data: Any) -> dict[str, str]:
    """The task a run folder's items come from (``metrics.json["task_identity"]``);
    a :class:`~credo.errors.UserError` when an older credo wrote the folder."""
    from credo.errors import UserError
    from credo.pipeline.certificate import TASK_FIELDS

    task = data.metrics.get("task_identity")
    if not isinstance(task, dict) or any(not isinstance(task.get(f), str) for f in TASK_FIELDS):
        again = "score the file again" if is_given(data.config) else \
            "rerun it into the same folder (its samples come from the cache)"
        raise UserError(f"{data.path / 'metrics.json'}: no task_identity (an older credo "
                        f"wrote the folder), so what the run's task was cannot be "
                        f"recorded; {again}")
    return {f: task[f] for f in TASK_FIELDS}


def run_identity(data: Any) -> str:
    """The identity of the model a run folder's run sampled (``metrics.json``'s
    ``model``), not the spec its config names."""
    return str(data.metrics.get("model") or data.model)


def check_run_folder(folder: Path) -> None:
    """A :class:`~credo.errors.UserError` unless ``folder`` holds a run's
    ``config.yaml``, before anything is read or replayed."""
    from credo.errors import UserError

    if not (folder / "config.yaml").is_file():
        raise UserError(f"{folder}: no config.yaml; is it a finished run folder?")


def full_run_config(data: Any, folder: Path, replayed: str) -> RunConfig:
    """The config of the full run whose folder ``data`` (at ``folder``) a replay reads
    (:func:`folder_config`); an adaptive run's is a :class:`~credo.errors.UserError`
    saying that ``replayed`` (what replays it) a full run: its cache lacks the full
    sample sets of its settled items."""
    from credo.errors import UserError

    config = folder_config(data)
    if config.adaptive is not None:
        raise UserError(f"{folder}: an adaptive run (config.yaml's adaptive: rule "
                        f"{config.adaptive.rule}); {replayed} a full run, whose cache holds "
                        "every sample of every item")
    return config


def replay_cache(config: RunConfig, folder: Path, command: str, then: str = "") -> Path:
    """The cache file ``config`` names, from which ``command`` replays the run of
    ``folder``; a :class:`~credo.errors.UserError` when there is none (``then``: what
    the message adds)."""
    from credo.errors import UserError

    cache = config.cache_path
    if not cache.is_file():
        raise UserError(f"{cache}: no such cache file; {command} replays {folder} from the "
                        f"cache its run wrote (config.yaml's cache){then}")
    return cache


def folder_config(data: Any) -> RunConfig:
    """A run folder's ``config.yaml`` as a :class:`~credo.config.RunConfig`, one line
    naming the file when it does not validate. A ``credo score`` folder records its n
    and m as the file holds them (1 sample per item, 0 perturbed),
    which a config for ``credo run`` refuses; they are kept as they are."""
    from pydantic import ValidationError

    from credo.config import RUN_RENAMES, RunConfig, current_names, validation_message
    from credo.errors import UserError

    where = data.path / "config.yaml"
    fields = {k: v for k, v in current_names(data.config, RUN_RENAMES).items()
              if k in RunConfig.model_fields}
    counts = {k: fields.pop(k) for k in ("n", "m") if k in fields} if is_given(data.config) \
        else {}
    for key, value in counts.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise UserError(f"{where}: {key} must be a whole number, got {value!r}")
    try:
        config = RunConfig.model_validate(fields)
    except ValidationError as e:
        raise UserError(validation_message(e, str(where))) from None
    return config.model_copy(update=counts) if counts else config


def check_neutral(result: RunResult, study: Any = None) -> None:
    """Raise :class:`~credo.errors.NeutralityFailed` when ``result`` ended with its
    prefixes failing the neutrality gate (one ending of a run); ``study``: the
    :class:`~credo.app.study.StudyResult` of the runs so far, for a study."""
    from credo.pipeline.ending import Outcome

    if result.outcome is not Outcome.NEUTRALITY_FAILED:
        return
    from credo.errors import NeutralityFailed
    from credo.report.markdown import neutrality_line

    raise NeutralityFailed(
        f"{neutrality_line(result.neutrality)} (perturbation.neutrality: fail; run folder "
        f"{result.config.out})",
        result,
        study,
    )


def check_min(points: Sequence[Any], config: RunConfig, data: Any) -> None:
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


def check_replayed(full: RunResult, data: Any, cache: Path) -> None:
    """The full replay against the run folder: every item the folder
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

"""The experiment drivers of the Python API: several runs, or replays of one, towards a
finding (apart from the entry points of :mod:`credo.api`, which re-exports
them).

- :func:`study`: ``credo study``, every task with every model, one run folder each and
  one comparison report.
- :func:`calibrate_prompt`: ``credo perturb calibrate-prompt``, the most neutral prefix
  setting on a calibration split; :func:`calibrate_prompt_file`: the same from
  a run config file, the choice written into a copy of it.
- :func:`simulate_adaptive`: ``credo adaptive RUN_DIR``, what adaptive sampling would have
  drawn and scored, replayed from a full run's cache with no model call.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from credo.entry import (
    check_min,
    check_neutral,
    check_replayed,
    check_writable,
    config_pool,
    folder_config,
    is_given,
    recorded_task,
    writer_given,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from credo.config import RunConfig, StudyConfig
    from credo.generation.pool import ModelPool
    from credo.models.base import Model
    from credo.models.embedders import Embedder
    from credo.pipeline.runner import RunResult
    from credo.tasks.base import Task

__all__ = [
    "PREFIX_SETTINGS",
    "AdaptiveSimulation",
    "PromptCalibration",
    "StudyResult",
    "StudyRun",
    "calibrate_prompt",
    "calibrate_prompt_file",
    "simulate_adaptive",
    "study",
]


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
    whose mean Δ (Wu et al., App. A.3) is closest to 0. Returns the choice and one row per
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
    with config_pool(config, show_progress=show_progress) as pool:
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
    one row per setting tried (:func:`calibrate_prompt`), the config file's
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
    """:func:`calibrate_prompt` for the run config file ``config``: the writer
    prompt and rules most neutral on ``items`` calibration items, written into the file's
    ``perturbation`` section and saved as ``write_config`` when given (the command line only prints
    the result)."""
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
    if write_config is not None:  # before the first call
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
    (``study``: this result).
    """
    writer = writer_given(writer, perturber)
    from contextlib import ExitStack

    from credo.generation.pool import JUDGE, MODEL, WRITER
    from credo.pipeline.checks import method_specs
    from credo.pipeline.runner import configured_task

    config = _lm_eval_groups(config)
    configs = config.run_configs()
    for cfg in configs:
        method_specs(cfg.methods)  # an unknown method fails before anything runs
    # every task is read before the first run: a bad one leaves no run folder
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
            with config_pool(
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
        check_neutral(result.runs[-1].result, result)
    return result


def _lm_eval_groups(config: StudyConfig) -> StudyConfig:
    """``config`` with each ``lm-eval:<group>`` task replaced by the group's tasks
    (lm-eval is imported only when a task names it)."""
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
    its ``samples.jsonl`` (:func:`~credo.pipeline.simulate.simulate_given`).
    ``options`` are the other fields of :class:`~credo.config.AdaptiveConfig`
    (``round``, ``min``, ``window``, ``confidence``, ``threshold``). Writes
    ``adaptive.md``, ``adaptive.json`` and ``adaptive.png`` into ``out`` (default
    ``RUN_DIR/adaptive``) when ``write``; ``method`` is the one they show (default: c3
    when scored, else the first). The models, embedder and task replace the config's as
    in :func:`run`.

    ``run_dir`` may also be a samples file in any layout ``credo score`` reads (credo's
    JSONL, lm-eval's samples, an inspect log): its samples are replayed
    in ``orders`` random orders per item (seeded) and the points averaged
    (:func:`credo.pipeline.simulate.simulate_orders`); ``given`` holds what ``credo
    score`` is told of it (``answer_format``, ``lm_eval_filter``,
    ``recompute_correctness``, ``methods``, ``seed``);
    the files go to ``out`` (default ``<file stem>-adaptive`` beside it).

    A replay that cannot read what it needs is a :class:`~credo.errors.UserError` in one
    line, found before anything is written: a damaged run folder
    (:func:`~credo.report.rundata.load_run`), an empty ``scores.jsonl``, an adaptive
    run's folder (its cache lacks the full sets), ``min`` above the run's n (or m), the
    cache file missing, or a cache lacking some of the items the folder scored."""
    writer = writer_given(writer, perturber)
    from credo.errors import UserError
    from credo.generation.pool import JUDGE, MODEL, WRITER
    from credo.pipeline.simulate import simulate, simulate_given
    from credo.report.rundata import load_run

    folder = Path(run_dir)
    points = _points(rules, epsilons, options)
    _check_replay_input(folder, n_resamples)
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
    config = folder_config(data)
    if config.adaptive is not None:
        raise UserError(f"{folder}: an adaptive run (config.yaml's adaptive: rule "
                        f"{config.adaptive.rule}); credo adaptive replays a full run, whose "
                        "cache holds every sample of every item")
    check_min(points, config, data)
    _check_shown(method, config.methods, str(folder))
    target = folder / "adaptive" if out is None else Path(out)
    if write:  # before the replay
        check_writable(target, "the adaptive outputs (--out)")
    roles = {MODEL: model, WRITER: writer, JUDGE: judge}
    if is_given(data.config):
        from credo.importers import read_generations
        from credo.tasks.base import AnswerFormat

        fmt = AnswerFormat(recorded_task(data)["format"])
        generations = read_generations(folder / "samples.jsonl")
        with config_pool(config, show_progress=False, roles={JUDGE: judge},
                          embedder=embedder, reach=False, replay=True) as pool:
            full, replayed = simulate_given(config, generations, pool, fmt, points,
                                            n_resamples=n_resamples)
    else:
        cache = config.cache_path
        if not cache.is_file():
            raise UserError(f"{cache}: no such cache file; credo adaptive replays {folder} "
                            "from the cache its run wrote (config.yaml's cache), and writes "
                            "nothing without it")
        with config_pool(config, show_progress=False, roles=roles, embedder=embedder,
                          reach=False, replay=True) as pool:
            full, replayed = simulate(config, pool, points, task, n_resamples=n_resamples,
                                      check_full=lambda r: check_replayed(r, data, cache))
    found = [p for p, _ in replayed]
    shown = method or ("c3" if "c3" in full.metrics else next(iter(full.metrics), ""))
    files: dict[str, Path] = {}
    if write:
        from credo.report.adaptive import write_adaptive

        files = write_adaptive(found, target, shown)
    return AdaptiveSimulation(folder, shown, found, files)


def _check_replay_input(folder: Path, n_resamples: int) -> None:
    """A :class:`~credo.errors.UserError` for a path that is neither a file nor a folder,
    or a bootstrap size that is no whole number >= 0 (0: the point estimates alone)."""
    from credo.errors import UserError

    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 0:
        raise UserError(f"--bootstrap {n_resamples}: the paired bootstrap's resamples must "
                        "be a whole number >= 0 (0: the point estimates alone)")
    if not folder.exists():
        raise UserError(f"{folder}: no such file or folder; credo adaptive replays a "
                        "finished run's folder or a samples file `credo score` reads")


def _check_shown(method: str | None, scored: Sequence[str], source: str) -> None:
    """A :class:`~credo.errors.UserError` naming ``--method`` when the method the table
    and figure are to show is not one the replay scores (``scored``)."""
    if method is not None and method not in scored:
        from credo.errors import UserError

        raise UserError(f"--method {method}: not among the methods {source} is replayed "
                        f"with ({', '.join(scored)}); name one of them")


def _points(
    rules: Sequence[str], epsilons: Sequence[float | None], options: Mapping[str, Any] | None
) -> list[Any]:
    """One :class:`~credo.config.AdaptiveConfig` per rule (per ε for the interval rule),
    a bad option a one-line :class:`~credo.errors.UserError`."""
    from pydantic import ValidationError

    from credo.config import AdaptiveConfig, validation_message
    from credo.errors import UserError
    from credo.registry import STOPPING_RULES

    points = []
    for rule in dict.fromkeys(rules):
        known = STOPPING_RULES.get(rule)  # an unknown one: the config's error below
        for eps in (epsilons if known is not None and known.uses_epsilon else (None,)):
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
    from credo.importers import read_generations
    from credo.pipeline.checks import method_specs
    from credo.pipeline.score import default_methods, given_config
    from credo.pipeline.simulate import simulate_orders
    from credo.tasks.base import AnswerFormat

    try:
        fmt = AnswerFormat(answer_format)
    except ValueError:
        known = ", ".join(f.value for f in AnswerFormat)
        raise UserError(f"unknown answer format {answer_format!r} (--format); known: "
                        f"{known}") from None
    if methods:
        method_specs(list(methods))
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise UserError(f"--seed {seed}: the seed of the sample orders must be a whole "
                        "number >= 0")
    least = min((p.min for p in points), default=0)
    generations = read_generations(path, lm_eval_filter=lm_eval_filter,
                                   recompute=recompute_correctness)
    config = RunConfig(bootstrap=0, seed=seed, cache=None)
    update = given_config(config, generations)
    update["methods"] = list(methods) if methods else default_methods(generations, fmt)
    _check_shown(method, update["methods"], str(path))
    if least > update["n"]:
        raise UserError(f"--min {least}: more than the {update['n']} original samples the "
                        f"file holds per item at most; give --min at most {update['n']}")
    config = config.model_copy(update={"task": str(path), "model": generations.model_label,
                                       **update})
    where = Path(out) if out is not None else path.parent / f"{path.stem}-adaptive"
    if write:  # before the replay
        check_writable(where, "the adaptive outputs (--out)")
    with config_pool(config, show_progress=False, roles={JUDGE: judge}, embedder=embedder,
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

"""``credo adaptive``: what adaptive sampling would have drawn and scored, replayed from
a finished full run's cache (or a samples file) with no model call
(:func:`simulate_adaptive`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from credo.app import common

if TYPE_CHECKING:
    from credo.models.base import Model
    from credo.models.embedders import Embedder

__all__ = ["AdaptiveSimulation", "simulate_adaptive"]


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
    write: bool = True,
    orders: int = 1,
    given: Mapping[str, Any] | None = None,
    **handed: Unpack[common.HandedIn],
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
    in :func:`~credo.app.run.run`.

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
    roles = common.given_roles(handed, "simulate_adaptive")
    embedder, judge = handed.get("embedder"), handed.get("judge")
    from credo.errors import UserError
    from credo.generation.pool import JUDGE
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
    common.check_run_folder(folder)
    data = load_run(folder)
    if not data.scores:
        raise UserError(f"{folder / 'scores.jsonl'}: no items (emptied?); there is nothing "
                        "to replay (rerun the run to write its folder again)")
    config = common.full_run_config(data, folder, "credo adaptive replays")
    common.check_min(points, config, data)
    _check_shown(method, config.methods, str(folder))
    target = folder / "adaptive" if out is None else Path(out)
    if write:  # before the replay
        common.check_writable(target, "the adaptive outputs (--out)")
    if common.is_given(data.config):
        from credo.importers import read_generations
        from credo.tasks.base import AnswerFormat

        fmt = AnswerFormat(common.recorded_task(data)["format"])
        generations = read_generations(folder / "samples.jsonl")
        with common.replay_pool(config, {JUDGE: judge}, embedder) as pool:
            full, replayed = simulate_given(config, generations, pool, fmt, points,
                                            n_resamples=n_resamples)
    else:
        cache = common.replay_cache(config, folder, "credo adaptive",
                                    ", and writes nothing without it")
        with common.replay_pool(config, roles, embedder) as pool:
            full, replayed = simulate(config, pool, points, handed.get("task"),
                                      n_resamples=n_resamples,
                                      check_full=lambda r: common.check_replayed(r, data, cache))
    found = [p for p, _ in replayed]
    return _simulation(folder, found, full.metrics, method, target if write else None)


def _simulation(
    source: Path,
    found: list[Any],
    scored: Mapping[str, Any],
    method: str | None,
    out: Path | None,
    fallback: str = "",
) -> AdaptiveSimulation:
    """What a replay of ``source`` found (``found``: a point per rule and ε), showing
    ``method`` (default: c3 when the full replay ``scored`` it, else its first method,
    else ``fallback``), its files written into ``out`` unless that is None."""
    shown = method or ("c3" if "c3" in scored else next(iter(scored), fallback))
    files: dict[str, Path] = {}
    if out is not None:
        from credo.report.adaptive import write_adaptive

        files = write_adaptive(found, out, shown)
    return AdaptiveSimulation(source, shown, found, files)


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
        common.check_writable(where, "the adaptive outputs (--out)")
    with common.replay_pool(config, {JUDGE: judge}, embedder) as pool:
        full, found = simulate_orders(config, generations, pool, fmt, points, orders=orders,
                                      seed=seed, n_resamples=n_resamples,
                                      recompute=recompute_correctness)
    return _simulation(path, list(found), full.metrics, method, where if write else None,
                       config.methods[0])

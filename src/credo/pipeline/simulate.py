"""What adaptive sampling would have drawn and scored, replayed from a full run's cache
(``credo adaptive RUN_DIR``).

The full run is replayed from the cache (every sample is there: nothing is asked of a
model), then the same config with ``adaptive`` set, once per rule and ε, through the
same :func:`~credo.pipeline.runner.run_pipeline` on a pool whose executors read the cache
only (:attr:`credo.generation.executor.Executor.replay`). The adaptive run's samples are
the first ones of the full run's requests, and the stopping rules are the live run's
(:mod:`credo.plan.adaptive`), so the replay is what a live adaptive run draws and scores:
same samples, same scores (tests/test_adaptive.py). A sample the full run never drew
(possible only where the adaptive run's writer rule context differs from the full run's,
see :class:`~credo.perturb.context.PrefixWriter`) is not invented: its item is counted as
not replayable and left out of both sides of the comparison.

Per point, the samples of each stage (original, writer candidates, perturbed) against
the full run's, and per method the change of AUROC, ECE and PRR with paired bootstrap
CIs (:func:`credo.evaluate.paired.paired_bootstrap`), both runs scored against the full
run's p̄ (the better estimate of each item's accuracy: an adaptive item's own p̄ rests
on fewer samples). And the change of coverage at risk α for each α of the run's
``evaluation.alphas`` (:func:`credo.evaluate.coverage.coverage_at_risk`): each
run with its own answers' correctness (an adaptive run may give another modal answer:
what a user of it would act on), on the same calibration/test splits of the same items,
so the difference is paired split by split; its interval is the central 95% of the
per-split differences (the spread of one split's estimate, not a CI of the mean).

Generations a user gave (a ``credo score`` folder) are replayed the same
way without a cache: an item's given samples, in file order, are the samples it drew,
and :func:`simulate_given` keeps, per rule, the first ones of each set up to the first
size of the schedule at which the rule holds (:func:`given_drawn`), then scores both
sides with :func:`~credo.pipeline.score.score_generations`.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from credo.config import AdaptiveConfig, RunConfig
from credo.errors import UserError
from credo.evaluate.coverage import MIN_ITEMS, coverage_at_risk
from credo.evaluate.paired import PAIRED_METRICS, PairedDifference, paired_bootstrap
from credo.generation.pool import ModelPool
from credo.importers import Generations, GivenSample
from credo.pipeline.runner import RunResult, run_pipeline
from credo.pipeline.score import given_answer, score_generations
from credo.plan.adaptive import next_size, settled, tolerance
from credo.plan.samples import FOLLOW_UP_SETS, ORIGINAL, PERTURBED
from credo.tasks.base import AnswerFormat, Task

__all__ = ["STAGES", "AdaptivePoint", "compare", "given_drawn", "mean_point", "reorder",
           "simulate", "simulate_given", "simulate_orders", "stage_samples"]

STAGES = ("original", "writer", "perturbed")
"""The stages whose samples adaptive sampling saves."""

METRICS = PAIRED_METRICS
"""The metrics replayed: those :func:`paired_bootstrap` pairs."""


@dataclass(frozen=True)
class AdaptivePoint:
    """One rule and ε replayed: samples per stage (adaptive, full) on the items both
    runs scored, and per method the paired Δ (adaptive − full) of every metric."""

    rule: str
    epsilon: float | None
    samples: dict[str, tuple[float, float]]
    deltas: dict[str, dict[str, PairedDifference]]
    items: int
    not_replayable: tuple[str, ...] = ()
    #: Per item id: its original and perturbed samples drawn (adaptive).
    drawn: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: Per item id: every method's score on the samples drawn (adaptive).
    scores: dict[str, dict[str, float]] = field(default_factory=dict)
    #: Per method, per α: Δ coverage at risk α (adaptive − full) with the central 95% of
    #: the per-split differences, as (delta, low, high).
    coverage: dict[str, dict[float, tuple[float, float, float]]] = field(default_factory=dict)
    #: Sample orders averaged (:func:`simulate_orders`; 1: the order the samples came in).
    orders: int = 1

    @property
    def saved(self) -> float:
        """Fraction of all samples (every stage) the rule did not draw."""
        a = sum(x for x, _ in self.samples.values())
        f = sum(y for _, y in self.samples.values())
        return 1.0 - a / f if f else math.nan

    def saved_in(self, stage: str) -> float:
        """Fraction of ``stage``'s samples the rule did not draw."""
        a, f = self.samples[stage]
        return 1.0 - a / f if f else math.nan


def stage_samples(result: RunResult, ids: set[str]) -> dict[str, int]:
    """Samples of each stage of :data:`STAGES` over the items ``ids``."""
    items = [r for r in result.items if r.item.id in ids]
    return {
        "original": sum(len(r.original) for r in items),
        "writer": sum(result.perturbation_sets[r.item.id].candidates
                      for r in items if r.item.id in result.perturbation_sets),
        "perturbed": sum(len(r.sets.get(PERTURBED, ())) for r in items),
    }


def compare(
    adaptive: RunResult,
    full: RunResult,
    rule: str,
    epsilon: float | None,
    *,
    n_resamples: int = 1000,
) -> AdaptivePoint:
    """``adaptive`` against ``full`` on the items both scored (module docstring)."""
    a_items = {r.item.id: r for r in adaptive.items}
    f_items = {r.item.id: r for r in full.items}
    ids = set(a_items) & set(f_items)
    order = [r.item.id for r in full.items if r.item.id in ids]
    a_n, f_n = stage_samples(adaptive, ids), stage_samples(full, ids)
    deltas: dict[str, dict[str, PairedDifference]] = {}
    perf = np.array([f_items[i].performance for i in order])
    for method in full.metrics:
        a = np.array([a_items[i].scores.get(method, math.nan) for i in order])
        f = np.array([f_items[i].scores.get(method, math.nan) for i in order])
        ok = np.isfinite(a) & np.isfinite(f) & np.isfinite(perf)
        try:
            deltas[method] = paired_bootstrap(
                a[ok], f[ok], perf[ok], metrics=METRICS, method_a=f"{method} ({rule})",
                method_b=method, n_resamples=n_resamples, n_bins=full.config.ece_bins,
            )
        except ValueError:  # a score outside [0, 1]: no paired ECE
            continue
    coverage = {method: _coverage_deltas(method, [a_items[i] for i in order],
                                         [f_items[i] for i in order], full.config)
                for method in full.metrics}
    return AdaptivePoint(
        rule, epsilon, {s: (a_n[s], f_n[s]) for s in STAGES}, deltas, len(ids),
        tuple(sorted((set(f_items) ^ set(a_items)) | set(full.incomplete)
                     | set(adaptive.incomplete))),
        {i: (len(a_items[i].original), len(a_items[i].sets.get(PERTURBED, ()))) for i in order},
        {i: dict(a_items[i].scores) for i in order},
        {m: c for m, c in coverage.items() if c},
    )


def _coverage_deltas(
    method: str, adaptive: Sequence[Any], full: Sequence[Any], config: RunConfig
) -> dict[float, tuple[float, float, float]]:
    """Per α: Δ coverage at risk (module docstring); empty where either run lacks
    :data:`~credo.evaluate.coverage.MIN_ITEMS` items with a score and a known correctness
    on both sides (the items must be the same for the splits to pair)."""
    rows = np.array([(a.scores.get(method, math.nan), a.answer_correct,
                      f.scores.get(method, math.nan), f.answer_correct)
                     for a, f in zip(adaptive, full, strict=True)], dtype=float).reshape(-1, 4)
    rows = rows[np.isfinite(rows).all(axis=1)]
    if len(rows) < MIN_ITEMS:
        return {}
    a_s, a_c, f_s, f_c = rows.T
    ev = config.evaluation
    out = {}
    for alpha in ev.alphas:
        a = coverage_at_risk(a_s, a_c >= 0.5, alpha, ev.delta, splits=ev.splits, seed=config.seed)
        f = coverage_at_risk(f_s, f_c >= 0.5, alpha, ev.delta, splits=ev.splits, seed=config.seed)
        diff = np.array(a.coverages) - np.array(f.coverages)
        low, high = np.quantile(diff, [0.025, 0.975])
        out[alpha] = (float(diff.mean()), float(low), float(high))
    return out


def simulate(
    config: RunConfig,
    pool: ModelPool,
    points: Sequence[AdaptiveConfig],
    task: Task | None = None,
    *,
    n_resamples: int = 1000,
    check_full: Callable[[RunResult], None] | None = None,
) -> tuple[RunResult, list[tuple[AdaptivePoint, RunResult]]]:
    """The full run of ``config`` replayed from ``pool``'s cache, and each adaptive
    config of ``points`` replayed and compared with it. ``pool`` must be a replay pool
    (``ModelPool(replay=True)``) for the claim "no model call" to hold. ``check_full`` is
    called with the full replay before any point is replayed (``credo adaptive`` checks
    it against the run folder: a cache short of items is an error)."""
    full = run_pipeline(config.model_copy(update={"adaptive": None}), pool, task)
    if check_full is not None:
        check_full(full)
    out = []
    for point in points:
        result = run_pipeline(config.model_copy(update={"adaptive": point}), pool, task)
        out.append((compare(result, full, point.rule, tolerance(point),
                            n_resamples=n_resamples), result))
    return full, out


def given_drawn(
    generations: Generations, point: AdaptiveConfig, fmt: AnswerFormat
) -> Generations:
    """The given samples an adaptive run under ``point`` would have drawn (module
    docstring): per item, the first k of its original samples, k the first size of the
    schedule (:func:`~credo.plan.adaptive.next_size`) at which
    :func:`~credo.plan.adaptive.settled` holds on their answers, the item's own count
    being the full size; then the same for its perturbed samples with those originals
    fixed. Other sets are kept whole (a live adaptive run draws them in full). The rules
    read the answers as ``credo score`` compares them under ``fmt``
    (:func:`~credo.pipeline.score.given_answer`)."""
    choices = {it.id: len(it.choices) for it in generations.items}
    as_given = bool(generations.compared)
    sets: dict[str, dict[str, list[GivenSample]]] = defaultdict(lambda: defaultdict(list))
    for s in generations.samples:
        sets[s.item][s.set].append(s)
    keep: dict[tuple[str, str], int] = {}
    for item, its in sets.items():
        originals = [given_answer(s, fmt, choices.get(item, 0), as_given=as_given).value
                     for s in its.get(ORIGINAL, ())]
        k = _stop(point, originals, None)
        keep[item, ORIGINAL] = k
        perturbed = [given_answer(s, fmt, choices.get(item, 0), as_given=as_given).value
                     for s in its.get(PERTURBED, ())]
        if perturbed:
            keep[item, PERTURBED] = _stop(point, originals[:k], perturbed)
    seen: dict[tuple[str, str], int] = defaultdict(int)
    drawn = []
    for s in generations.samples:
        at = seen[s.item, s.set]
        seen[s.item, s.set] += 1
        if at < keep.get((s.item, s.set), at + 1):
            drawn.append(s)
    return dataclasses.replace(generations, samples=drawn)


def _stop(point: AdaptiveConfig, originals: list[Any], perturbed: list[Any] | None) -> int:
    """How many of a stage's answers an adaptive run draws (the original stage when
    ``perturbed`` is None): the schedule's sizes in turn until the rule holds or the
    stage's full size."""
    full = len(originals if perturbed is None else perturbed)
    size = 0
    while size < full:
        size = next_size(size, full, point)
        if perturbed is None:
            done = settled(point, originals[:size], size=full)
        else:
            done = settled(point, originals, perturbed[:size], size=full)
        if done:
            break
    return size


def simulate_given(
    config: RunConfig,
    generations: Generations,
    pool: ModelPool,
    fmt: AnswerFormat,
    points: Sequence[AdaptiveConfig],
    *,
    n_resamples: int = 1000,
) -> tuple[RunResult, list[tuple[AdaptivePoint, RunResult]]]:
    """:func:`simulate` for generations a user gave (a ``credo score`` folder): the full
    set scored, and each adaptive config of ``points`` on the samples it would have
    drawn (:func:`given_drawn`), compared with it. No model is called unless a method
    needs a judge (``pool`` a replay pool: then only its cache is read)."""
    full = score_generations(config, generations, pool, fmt)
    out = []
    for point in points:
        result = score_generations(config, given_drawn(generations, point, fmt), pool, fmt)
        out.append((compare(result, full, point.rule, tolerance(point),
                            n_resamples=n_resamples), result))
    return full, out


def simulate_orders(
    config: RunConfig,
    generations: Generations,
    pool: ModelPool,
    fmt: AnswerFormat,
    points: Sequence[AdaptiveConfig],
    *,
    orders: int,
    seed: int = 0,
    n_resamples: int = 1000,
    recompute: bool = False,
) -> tuple[RunResult, list[AdaptivePoint]]:
    """:func:`simulate_given` over ``orders`` random orders of each item's samples
    (samples a user drew from any API come in an order of no meaning,
    and where a rule stops depends on it): the full set scored once (its scores do not
    depend on the order), each point replayed on each order (:func:`reorder`, seeded by
    ``seed`` and the order's number) and averaged (:func:`mean_point`). ``orders`` 1 is
    the file's own order, as :func:`simulate_given` replays it. ``recompute``: credo
    grades the answers against each item's gold (``--recompute-correctness``)."""
    if orders < 1:
        raise UserError(f"--orders {orders}: give at least 1")
    if orders > 1:
        followups = sorted({s.set for s in generations.samples if s.set in FOLLOW_UP_SETS})
        if followups:
            raise UserError(f"--orders {orders}: the file's {', '.join(followups)} samples "
                            "refer to original samples by their position, which a new order "
                            "would break; replay the file's own order (--orders 1)")
    full = score_generations(config, generations, pool, fmt, recompute=recompute)
    found: list[list[AdaptivePoint]] = [[] for _ in points]
    for r in range(orders):
        given = generations if orders == 1 else reorder(generations, seed, r)
        for j, point in enumerate(points):
            result = score_generations(config, given_drawn(given, point, fmt), pool, fmt,
                                       recompute=recompute)
            found[j].append(compare(result, full, point.rule, tolerance(point),
                                   n_resamples=n_resamples))
    return full, [mean_point(ps) for ps in found]


def reorder(generations: Generations, seed: int, order: int) -> Generations:
    """``generations`` with each item's original samples, and its perturbed samples,
    shuffled (a permutation drawn from ``numpy.random.default_rng([seed, order])``; every
    other set and the order of the items kept)."""
    rng = np.random.default_rng([seed, order])
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, s in enumerate(generations.samples):
        if s.set in (ORIGINAL, PERTURBED):
            groups[s.item, s.set].append(i)
    place = list(range(len(generations.samples)))
    for positions in groups.values():
        for at, source in zip(positions, rng.permutation(positions), strict=True):
            place[at] = int(source)
    return dataclasses.replace(generations,
                               samples=[generations.samples[i] for i in place])


def mean_point(points: Sequence[AdaptivePoint]) -> AdaptivePoint:
    """The mean of one rule's points over sample orders: samples per stage, per-item
    samples drawn, every Δ with the ends of its CI, and Δ coverage (the means of the
    per-order figures; the items must be the same in every order)."""
    first = points[0]
    if len(points) == 1:
        return first
    k = len(points)

    def mean(xs: Sequence[float]) -> float:
        return float(np.mean(xs))

    samples = {s: (mean([p.samples[s][0] for p in points]), first.samples[s][1])
               for s in first.samples}
    deltas = {
        method: {m: dataclasses.replace(
            d, delta=mean([p.deltas[method][m].delta for p in points]),
            low=mean([p.deltas[method][m].low for p in points]),
            high=mean([p.deltas[method][m].high for p in points]),
            p_value=mean([p.deltas[method][m].p_value for p in points]))
            for m, d in by.items() if all(m in p.deltas.get(method, {}) for p in points)}
        for method, by in first.deltas.items()}
    coverage = {
        method: {a: tuple(mean([p.coverage[method][a][i] for p in points])  # type: ignore[misc]
                          for i in range(3))
                 for a in by if all(a in p.coverage.get(method, {}) for p in points)}
        for method, by in first.coverage.items()}
    drawn = {i: (mean([p.drawn[i][0] for p in points]), mean([p.drawn[i][1] for p in points]))
             for i in first.drawn if all(i in p.drawn for p in points)}
    lost = tuple(sorted({i for p in points for i in p.not_replayable}))
    return AdaptivePoint(first.rule, first.epsilon, samples, deltas, first.items, lost,
                         drawn, {}, coverage, orders=k)

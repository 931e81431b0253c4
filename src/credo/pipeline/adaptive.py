"""Adaptive sampling in the runner: an item's sets drawn in rounds, each item
stopped once its stopping rule (:mod:`credo.plan.adaptive`) holds.

Stage 1, the original samples: every unsettled item gets its next round (``min``, then
``round`` more, up to n) and all those requests go to the executor in one call, so the
backend batches across items as in a full run; an item stops once
:func:`credo.plan.adaptive.settled` holds for its originals. Stage 2, with the originals
final: per round, the prefix writer (:class:`credo.perturb.context.PrefixWriter`) gives
each unsettled item the prefixes its next perturbed round needs (one batched writer call
per step), then the perturbed samples of all of them go in one call, and the rule reads
both sets. A sample set of k samples is always the first k of the full run's request,
so ``credo adaptive RUN_DIR`` replays exactly this from the full run's cache.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from credo.config import AdaptiveConfig
from credo.perturb.context import PerturbationSet
from credo.pipeline.stages import SampleSetStage, StageDriver
from credo.plan.adaptive import next_size, settled
from credo.plan.sample_sets import PlanContext
from credo.plan.samples import ORIGINAL, PERTURBED
from credo.tasks.base import Task

__all__ = ["adaptive_originals", "adaptive_perturbed"]

Prefixes = Callable[[Mapping[str, int]], dict[str, PerturbationSet]]
"""Gives each item id at least its number of kept prefixes where it can."""


def adaptive_originals(
    task: Task,
    ctx: PlanContext,
    driver: StageDriver,
    out: Any,
    config: AdaptiveConfig,
) -> None:
    """The original samples of every item, in rounds until its rule holds or n; then
    ``ctx.originals`` as the runner's phase 1 leaves it. Each round is one run of the
    original set's stage through ``driver`` (its failed items go into
    ``driver.incomplete``)."""
    n = ctx.config.n
    incomplete = driver.incomplete
    pending = [it for it in task.items if it.id not in incomplete]
    rnd = 0
    while pending:
        rnd += 1
        for it in pending:
            ctx.sizes[(it.id, ORIGINAL)] = next_size(ctx.sizes.get((it.id, ORIGINAL), 0), n,
                                                     config)
        driver.run([SampleSetStage(ORIGINAL, out)], pending, ctx,
                   f"sampling answers (round {rnd})")
        pending = [
            it for it in pending
            if it.id not in incomplete and ctx.sizes[(it.id, ORIGINAL)] < n
            and not settled(config, [s.key for s in out[it.id][ORIGINAL][0]], size=n)
        ]
    ctx.originals = {
        it.id: out[it.id][ORIGINAL][0]
        for it in task.items
        if it.id not in incomplete and ORIGINAL in out[it.id]
    }


def adaptive_perturbed(
    task: Task,
    ctx: PlanContext,
    prefixes: Prefixes,
    driver: StageDriver,
    out: Any,
    config: AdaptiveConfig,
) -> dict[str, PerturbationSet]:
    """The prefixes and perturbed samples of every item, in rounds until its rule holds
    or m; returns the prefix sets (an item without one had its writer requests fail and
    is in ``driver.incomplete``; one with no kept prefix is left for the runner to drop)."""
    m = ctx.config.m
    incomplete = driver.incomplete
    psets: dict[str, PerturbationSet] = {}
    pending = [it for it in task.items if it.id not in incomplete]
    rnd = 0
    while pending:
        rnd += 1
        targets = {it.id: next_size(ctx.sizes.get((it.id, PERTURBED), 0), m, config)
                   for it in pending}
        psets.update(prefixes(targets))
        for it in pending:
            if it.id not in psets:
                incomplete.setdefault(it.id, "perturbed prompts missing (requests failed)")
        pending = [it for it in pending if it.id in psets and psets[it.id].kept]
        for it in pending:
            ctx.sizes[(it.id, PERTURBED)] = targets[it.id]
        ctx.perturbations.update(psets)
        driver.run([SampleSetStage(PERTURBED, out)], pending, ctx,
                   f"sampling perturbed answers (round {rnd})")
        pending = [
            it for it in pending
            if it.id not in incomplete and targets[it.id] < m
            and not settled(config, [s.key for s in out[it.id][ORIGINAL][0]],
                            [s.key for s in out[it.id][PERTURBED][0]], size=m)
        ]
    return psets

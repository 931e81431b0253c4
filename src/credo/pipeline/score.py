"""``score_generations``: the pipeline entered at the scoring stage with generations a user
already has (design.md: ``credo score`` enters the pipeline at Scores).

The given samples become the same :class:`~credo.plan.samples.Sample` sets a run
generates; kernels build as in a run (the embedding kernel loads only its embedder, the
judge kernel asks the pool's judge), correctness is the given one (or, for items whose
samples carry none, the grading stage's from the item's gold answer), and the scoring and
evaluation stages are the run's. No model is called for methods that read only samples.
A method whose sample sets the input lacks is reported as not available, not guessed.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict

from credo.config import RunConfig
from credo.errors import UserError
from credo.evaluate.tables import evaluate_items, evaluate_responses, unavailable_reasons
from credo.generation.pool import GRADER, JUDGE, ModelPool
from credo.methods import get_method
from credo.methods.scoring import score_items
from credo.pipeline.runner import RunResult, build_kernels, grade_items
from credo.plan.samples import ORIGINAL, PERTURBED, ItemSamples, Sample
from credo.tasks.answers import Answer
from credo.tasks.base import AnswerFormat, Item, Task
from credo.tasks.generations import Generations, GivenSample

__all__ = ["score_generations"]


def score_generations(
    config: RunConfig, generations: Generations, pool: ModelPool, fmt: AnswerFormat
) -> RunResult:
    """Score ``generations`` with ``config.methods`` under ``config.kernel``; writes nothing.

    ``fmt`` is the answers' format (which methods apply, how a gold answer grades).
    """
    t0 = time.perf_counter()
    task = _task(generations, fmt)
    _assign_roles(pool, config)
    specs = [get_method(name) for name in config.methods]
    by_item: dict[str, dict[str, list[GivenSample]]] = defaultdict(lambda: defaultdict(list))
    for s in generations.samples:
        by_item[s.item][s.set].append(s)
    lacking = [it.id for it in task.items if ORIGINAL not in by_item[it.id]]
    if lacking:
        raise UserError(
            f"{generations.source}: item {lacking[0]!r} has no 'original' samples"
            f" ({len(lacking)} items lack them); every item needs its original samples"
        )
    generated = {
        it.id: {name: _set(it, rows, fmt) for name, rows in by_item[it.id].items()}
        for it in task.items
    }
    answers = [
        ItemSamples(it.id, {n: s for n, (s, _) in generated[it.id].items()
                            if n in (ORIGINAL, PERTURBED, "paraphrased")},
                    fmt, len(it.choices))
        for it in task.items
    ]
    stats: dict[str, int | float | str] = {}
    incomplete: dict[str, str] = {}
    kernels = build_kernels(config, specs, task, answers, pool, stats, incomplete)
    graded = _given_or_graded(config, task, generated, answers, pool, stats, incomplete)
    present = {name for sets in by_item.values() for name in sets}
    logprobs = any(s.logprobs for s in generations.samples)
    items = score_items(
        task, generated, graded, specs, kernels,
        default_kernel=config.kernel, logprobs=logprobs,
        prefixes={i: tuple(s.prefix or "" for s in sets.get(PERTURBED, ()))
                  for i, sets in by_item.items()},
        options=config.baselines.method_options(),
        available_sets=present,
    )
    metrics = evaluate_items(items, config.methods, config.ece_bins, config.bootstrap, config.seed)
    response_metrics = evaluate_responses(
        items, config.methods, config.ece_bins, config.bootstrap, config.seed
    )
    run_stats: dict[str, int | float | str] = {
        "items": len(items),
        "seconds_total": round(time.perf_counter() - t0, 2),
        "given_samples": len(generations.samples),
        "given_layout": generations.layout,
        "unparsable_answers": sum(
            1 for r in items for s in (*r.original, *r.perturbed) if not s.answer.parsed
        ),
        **stats,
    }
    return RunResult(
        config, task, f"given:{generations.layout}:{generations.source}", items, metrics,
        run_stats, {}, response_metrics, unavailable_reasons(items, config.methods),
        incomplete=incomplete, source=generations.source, ledger=pool.ledger.to_dict(),
    )


def _assign_roles(pool: ModelPool, config: RunConfig) -> None:
    """Only judges: there is no model under test. The judge kernel asks ``judge.model``,
    the graders ``grader.model`` (default: the judge); neither is loaded unless used."""
    if config.judge.model:
        pool.assign(JUDGE, config.judge.model, config.judge.model_options)
    if config.grader is not None and config.grader.model:
        pool.assign(GRADER, config.grader.model, config.grader.model_options)
    elif pool.has(JUDGE):
        pool.assign(GRADER, same_as=JUDGE)


def _task(generations: Generations, fmt: AnswerFormat) -> Task:
    items = tuple(
        Item(g.id, g.question, g.gold, g.choices, source=generations.source)
        for g in generations.items
    )
    return Task(generations.source, items, fmt, "")


def _set(
    item: Item, rows: list[GivenSample], fmt: AnswerFormat
) -> tuple[tuple[Sample, ...], tuple[bool | float | None, ...]]:
    samples = tuple(Sample(r.text, Answer(r.answer, r.text), r.logprobs, r.ref) for r in rows)
    return samples, tuple(r.correct for r in rows)


def _given_or_graded(
    config: RunConfig,
    task: Task,
    generated: dict[str, dict[str, tuple[tuple[Sample, ...], tuple]]],
    answers: list[ItemSamples],
    pool: ModelPool,
    stats: dict[str, int | float | str],
    incomplete: dict[str, str],
) -> dict[str, tuple[bool | float, ...]]:
    """The given correctness of every original sample; items that give none and have a
    gold answer are graded as a run grades them; the rest are unknown (NaN)."""
    out: dict[str, tuple[bool | float, ...]] = {}
    to_grade = []
    for it, its in zip(task.items, answers, strict=True):
        given = generated[it.id].get(ORIGINAL, ((), ()))[1]
        if any(c is not None for c in given):
            out[it.id] = tuple(math.nan if c is None else c for c in given)
        elif it.gold:
            to_grade.append((it, its))
        else:
            out[it.id] = tuple(math.nan for _ in given)
    if to_grade:
        sub = Task(task.name, tuple(it for it, _ in to_grade), task.format, task.domain)
        out.update(grade_items(config, sub, [its for _, its in to_grade], pool, stats, incomplete))
    return out

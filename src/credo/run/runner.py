"""``run(config)``: the pipeline end to end, stage by stage.

task -> prompts -> perturbations -> generation plan (cached) -> answers -> scores ->
evaluation -> report. Only two stages call a model: perturbation generation and the
executor of the sampling plan. Scores are pure functions of the cached samples; the
evaluation joins them with correctness, which never feeds a score.
"""

from __future__ import annotations

import logging
import math
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from credo.config import RunConfig
from credo.evaluate.metrics import auprc_neg, auprc_pos, auroc, ece, labels_from_performance
from credo.methods.base import ORIGINAL, PERTURBED, ItemSamples, Sample, get_method
from credo.models.base import GenerationRequest, Model
from credo.perturb.context import PerturbationSet, generate_perturbations
from credo.perturb.embeddings import Embedder, load_embedder
from credo.run.executor import Executor, PlannedRequest
from credo.run.open_ended import prepare_scoring
from credo.store.sqlite import GenerationStore
from credo.tasks.answers import extract_answer
from credo.tasks.base import Item, Task
from credo.tasks.builtin import load_task
from credo.tasks.prompts import render_messages

log = logging.getLogger(__name__)

METRICS = ("ece", "auroc", "auprc_pos", "auprc_neg")


@dataclass(frozen=True)
class ItemResult:
    """Everything a run knows about one item."""

    item: Item
    perturbations: tuple[str, ...]
    original: tuple[Sample, ...]
    perturbed: tuple[Sample, ...]
    correct: tuple[bool, ...]
    scores: dict[str, float]

    @property
    def performance(self) -> float:
        """p̄: mean correctness over the n original samples (000 App. E.2)."""
        return float(np.mean(self.correct)) if self.correct else math.nan


@dataclass
class RunResult:
    """The outcome of :func:`run`: per-item results, metrics per method, run statistics."""

    config: RunConfig
    task: Task
    model_identity: str
    items: list[ItemResult]
    metrics: dict[str, dict[str, float]]
    stats: dict[str, float | int | str] = field(default_factory=dict)
    perturbation_sets: dict[str, PerturbationSet] = field(default_factory=dict)

    @property
    def accuracy(self) -> float:
        """Mean of p̄ over items: the model's accuracy on the original prompts."""
        return float(np.mean([r.performance for r in self.items])) if self.items else math.nan


def run(
    config: RunConfig,
    *,
    model: Model | None = None,
    perturber: Model | None = None,
    embedder: Embedder | None = None,
    task: Task | None = None,
    show_progress: bool = True,
    write: bool = True,
) -> RunResult:
    """Run C3 and the selected baselines on a task, write the report, return the results.

    ``model``, ``perturber``, ``embedder`` and ``task`` replace what ``config`` names
    (tests pass a scripted model); nothing passed in is modified or closed.
    """
    t0 = time.perf_counter()
    task = (task or load_task(config.task)).head(config.limit)
    specs = [get_method(name) for name in config.methods]
    needs = {ORIGINAL} | {s for spec in specs for s in spec.needs}
    unsupported = needs - {ORIGINAL, PERTURBED}
    if unsupported:
        raise ValueError(f"sample sets {sorted(unsupported)} are not supported by this runner yet")

    owned: list[Model] = []
    if model is None:
        model = _load_model(config.model, config.model_options)
        owned.append(model)
    store = GenerationStore(config.cache_path)
    try:
        executor = Executor(model, store, config.seed, config.max_block, show_progress)
        executors = [executor]
        psets: dict[str, PerturbationSet] = {}
        dropped: list[str] = []
        if PERTURBED in needs:
            if perturber is None:
                gen_name = config.perturbation.generator
                if gen_name is None or gen_name == config.model:
                    perturber = model
                else:
                    perturber = _load_model(gen_name, {})
                    owned.append(perturber)
            pexec = Executor(perturber, store, config.seed, config.max_block, show_progress)
            executors.append(pexec)
            psets = generate_perturbations(
                task.items,
                config.m,
                task.domain,
                pexec,
                embedder or load_embedder(config.perturbation.embedder),
                config.perturbation,
            )
        t_perturb = time.perf_counter()
        dropped = [it.id for it in task.items if it.id in psets and not psets[it.id].kept]
        if dropped:
            log.warning(
                "%d items dropped: no perturbation candidate passed the rules (%s)",
                len(dropped),
                ", ".join(dropped[:10]),
            )
            task = Task(
                task.name,
                tuple(it for it in task.items if it.id not in dropped),
                task.format,
                task.domain,
            )
        scoring_stats: dict[str, float | int | str] = {}
        items = _sample_and_score(task, config, executor, psets, needs, embedder, scoring_stats)
        t_sample = time.perf_counter()
        metrics = evaluate_items(items, config.methods, config.ece_bins)
        stats: dict[str, float | int | str] = {
            "items": len(items),
            "seconds_total": round(time.perf_counter() - t0, 2),
            "seconds_perturbations": round(t_perturb - t0, 2),
            "seconds_sampling": round(t_sample - t_perturb, 2),
            "generated_samples": _total(executors, "generated_samples"),
            "cached_samples": _total(executors, "cached_samples"),
            "generated_tokens": _total(executors, "completion_tokens"),
            "unparsable_answers": sum(
                1 for r in items for s in (*r.original, *r.perturbed) if not s.answer.parsed
            ),
            "items_dropped_without_perturbations": len(dropped),
            "items_with_reused_perturbations": sum(
                1 for p in psets.values() if len(p.kept) < config.m
            ),
            **scoring_stats,
        }
        result = RunResult(config, task, model.identity, items, metrics, stats, psets)
    finally:
        store.close()
        for m in owned:
            m.close()
    if write:
        from credo.report.writer import write_run

        write_run(result, config.out)
    return result


def evaluate_items(
    items: list[ItemResult], methods: list[str], n_bins: int = 10
) -> dict[str, dict[str, float]]:
    """ECE, AUROC, AUPRC-P, AUPRC-N and mean score per method (000 App. E.2)."""
    # Items whose correctness is unavailable (NaN p̄, e.g. long form without a knowledge
    # source) are left out of the metrics; all of them unavailable gives NaN metrics.
    items = [r for r in items if not math.isnan(r.performance)]
    perf = np.array([r.performance for r in items], dtype=float)
    # A metric undefined on one class is NaN and shown as n/a in the report; no warning.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return _evaluate(items, perf, methods, n_bins)


def _evaluate(
    items: list[ItemResult], perf: np.ndarray, methods: list[str], n_bins: int
) -> dict[str, dict[str, float]]:
    labels = labels_from_performance(perf) if items else np.zeros(0, dtype=int)
    out: dict[str, dict[str, float]] = {}
    for name in methods:
        s = np.array([r.scores[name] for r in items], dtype=float)
        out[name] = {
            "ece": ece(s, perf, n_bins),
            "auroc": auroc(s, labels),
            "auprc_pos": auprc_pos(s, labels),
            "auprc_neg": auprc_neg(s, labels),
            "mean_score": float(s.mean()) if s.size else math.nan,
        }
    return out


def _total(executors: list[Executor], field: str) -> int:
    """Sum of one :class:`ExecutionStats` field over every call of every executor."""
    return sum(getattr(h, field) for ex in executors for h in ex.history)


def _load_model(spec: str, options: dict) -> Model:
    from credo.models.registry import load_model

    return load_model(spec, **options)


def _sample_and_score(
    task: Task,
    config: RunConfig,
    executor: Executor,
    psets: dict[str, PerturbationSet],
    needs: set[str],
    embedder: Embedder | None = None,
    stats: dict[str, float | int | str] | None = None,
) -> list[ItemResult]:
    stats = {} if stats is None else stats
    style = config.prompt_style
    planned: list[PlannedRequest] = []
    layout: list[tuple[Item, int, list[tuple[int, int]], list[str]]] = []
    for it in task.items:
        first = len(planned)
        planned.append(
            PlannedRequest(
                GenerationRequest(
                    messages=render_messages(it, task.format, style), params=config.sampling
                ),
                config.n,
                label=f"{it.id}/original",
            )
        )
        picks: list[tuple[int, int]] = []  # (planned index, sample index) per perturbed sample
        prefixes: list[str] = []
        if PERTURBED in needs:
            prefixes = psets[it.id].prefixes(config.m)
            uses = Counter(prefixes)
            where: dict[str, int] = {}
            for p in uses:
                where[p] = len(planned)
                req = GenerationRequest(
                    messages=render_messages(it, task.format, style, prefix=p),
                    params=config.sampling,
                )
                planned.append(PlannedRequest(req, uses[p], label=f"{it.id}/perturbed"))
            seen: Counter[str] = Counter()
            for p in prefixes:
                picks.append((where[p], seen[p]))
                seen[p] += 1
        layout.append((it, first, picks, prefixes))

    gens = executor.execute(planned, description="sampling answers")
    specs = [get_method(name) for name in config.methods]
    built = []
    for it, first, picks, _ in layout:
        original = tuple(_sample(g.text, it, task) for g in gens[first])
        perturbed = tuple(_sample(gens[pi][si].text, it, task) for pi, si in picks)
        built.append(ItemSamples(it.id, {ORIGINAL: original, PERTURBED: perturbed}))
    # Hook (issue 4): kernels that need preparing (embedding, judge) and the grading stage
    # (sandboxed code tests, SimpleQA / FActScore judges), after sampling, before scoring.
    support = prepare_scoring(task, config, built, executor, embedder=embedder)
    stats.update(support.stats)
    results = []
    for (it, _, _, prefixes), samples in zip(layout, built, strict=True):
        original, perturbed = samples.sets[ORIGINAL], samples.sets[PERTURBED]
        correct = support.correctness[it.id]
        scores = {
            spec.name: spec.scorer(samples, support.kernel(spec.kernel or config.kernel, it.id))
            for spec in specs
        }
        results.append(ItemResult(it, tuple(prefixes), original, perturbed, correct, scores))
    return results


def _sample(text: str, item: Item, task: Task) -> Sample:
    return Sample(text, extract_answer(text, task.format, n_choices=len(item.choices)))

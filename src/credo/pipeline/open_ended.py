"""Kernels and correctness for open-ended answers: the run-stage hook between sampling and scoring.

:func:`prepare_scoring` runs once, after every sample of the run is generated and before
any score is computed. It

1. builds each kernel the selected methods use (the run's ``kernel`` and any method
   written ``<method>@<kernel>``): the embedding kernel with the configured embedder and
   a persistent embedding cache beside the generation cache (000 App. H); the judge
   kernel by planning the unique answer pairs of every item, having the judge model
   answer them at T = 0 through the cached :class:`~credo.generation.executor.Executor`, and
   parsing the verdicts (000 App. D.5, :mod:`credo.kernels.judge`);
2. decides the correctness of every original sample, the *grading stage*: exact rules
   for numbers, letters and short text; the sandboxed tests for code
   (:mod:`credo.tasks.humaneval`); a judge for items marked ``meta["grader"]``:
   ``simpleqa`` (correct / incorrect / not attempted against the gold answers,
   :mod:`credo.tasks.factual`) and ``factscore`` (fraction of a biography's claims
   supported by a knowledge source, :mod:`credo.tasks.longform`; NaN, reported as
   unavailable, without one).

Judge and grader calls are generations like any other: planned, deduplicated, cached,
resumable. Correctness never feeds a score (design.md): the grades are only joined
with the scores by the evaluation.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from credo.config import JudgeConfig, RunConfig
from credo.generation.executor import Executor, PlannedRequest
from credo.kernels.embedding import EmbeddingCache, EmbeddingKernel, load_kernel_embedder
from credo.kernels.judge import (
    VerdictTable,
    build_verdict_table,
    judge_requests,
    naive_comparisons,
    plan_judge_pairs,
)
from credo.kernels.registry import Kernel, get_kernel
from credo.methods.base import ItemSamples, Sample, get_method
from credo.models.base import Model
from credo.models.embedders import Embedder
from credo.tasks.answers import is_correct
from credo.tasks.base import AnswerFormat, Item, Task
from credo.tasks.factual import SIMPLEQA, Grade, grading_messages, parse_grade, pregrade
from credo.tasks.humaneval import canonical_code
from credo.tasks.longform import (
    FACTSCORE,
    FolderKnowledgeSource,
    KnowledgeSource,
    claims,
    parse_support,
    retrieve,
    support_messages,
)
from credo.types import GenerationRequest, SamplingParams

log = logging.getLogger(__name__)

__all__ = ["ScoringSupport", "prepare_scoring"]


@dataclass
class ScoringSupport:
    """What scoring needs beyond the samples: kernels per item, correctness per sample."""

    kernels: dict[str, Kernel | VerdictTable]
    correctness: dict[str, tuple[bool | float, ...]]
    stats: dict[str, int | float | str] = field(default_factory=dict)

    def kernel(self, name: str, item_id: str) -> Kernel:
        """The Gram function of kernel ``name`` for item ``item_id``."""
        k = self.kernels[name]
        return k.kernel_for(item_id) if isinstance(k, VerdictTable) else k


def prepare_scoring(
    task: Task,
    config: RunConfig,
    samples: Sequence[ItemSamples],
    executor: Executor,
    *,
    embedder: Embedder | None = None,
    knowledge: KnowledgeSource | None = None,
    judge_model: Model | None = None,
) -> ScoringSupport:
    """Kernels and correctness for ``samples`` (one :class:`ItemSamples` per task item).

    ``executor`` is the run's sampling executor: its store caches the judge's verdicts and
    its model is the judge unless ``config.judge.model`` (or ``judge_model``) names
    another. ``embedder`` replaces ``config.kernel_embedder``; ``knowledge`` replaces the
    knowledge folder a FActScore item names. Nothing passed in is closed.
    """
    by_id = {it.id: it for it in task.items}
    missing = [s.item_id for s in samples if s.item_id not in by_id]
    if missing:
        raise ValueError(f"samples for items not in task {task.name!r}: {missing[:5]}")
    judge = _Judge(config, config.judge, executor, judge_model)
    # correctness may deserve a stronger model than the kernel's pair verdicts
    grader = (
        judge if config.grader is None else _Judge(config, config.grader, executor, None, judge)
    )
    stats: dict[str, int | float | str] = {}
    try:
        names = {get_method(m).kernel or config.kernel for m in config.methods}
        kernels: dict[str, Kernel | VerdictTable] = {}
        for name in sorted(names):
            if name == "embedding":
                kernels[name] = _embedding_kernel(config, samples, embedder, stats)
            elif name == "judge":
                kernels[name] = _judge_table(task.format, by_id, samples, judge, stats)
            else:
                kernels[name] = get_kernel(name)
        correctness = _grade(task, by_id, samples, grader, knowledge, stats)
    finally:
        judge.close()
        grader.close()
    return ScoringSupport(kernels, correctness, stats)


# --------------------------------------------------------------------------- kernels


def _embedding_kernel(
    config: RunConfig,
    samples: Sequence[ItemSamples],
    embedder: Embedder | None,
    stats: dict[str, int | float | str],
) -> EmbeddingKernel:
    cache = EmbeddingCache(config.cache_path.with_name("embeddings.sqlite"))
    kern = EmbeddingKernel(embedder or load_kernel_embedder(config.kernel_embedder), cache=cache)
    kern.prefetch([s.key for its in samples for group in its.sets.values() for s in group])
    stats["embedding_kernel_texts_embedded"] = kern.embedded_texts
    return kern


def _judge_table(
    fmt: AnswerFormat,
    by_id: dict[str, Item],
    samples: Sequence[ItemSamples],
    judge: _Judge,
    stats: dict[str, int | float | str],
) -> VerdictTable:
    answers = {s.item_id: [x.key for group in s.sets.values() for x in group] for s in samples}
    canonical = canonical_code if fmt is AnswerFormat.CODE else None
    # For code the judge compares behaviour: it sees the signature (the prompt without its
    # docstring), not the docstring's examples, which would double every prompt's length.
    questions = {i: (canonical or str)(by_id[i].question) for i in answers}
    pairs = plan_judge_pairs(answers, questions, canonical)
    requests = judge_requests(pairs, judge.params)
    planned = [
        PlannedRequest(r, 1, label=f"{p.item_id}/judge")
        for p, r in zip(pairs, requests, strict=True)
    ]
    gens = judge.execute(planned, "judging answer pairs") if planned else []
    table = build_verdict_table(pairs, [g[0].text for g in gens], canonical)
    naive = sum(naive_comparisons(*_set_sizes(s)) for s in samples)
    stats.update(
        judge_pairs_unique=len(pairs),
        judge_comparisons_naive=naive,
        judge_calls_generated=judge.last.generated_samples if judge.last else 0,
        judge_calls_cached=judge.last.cached_samples if judge.last else 0,
        judge_unparsable_verdicts=table.unparsable,
    )
    if table.unparsable:
        log.warning("%d judge replies were neither Yes nor No (read as not equivalent)",
                    table.unparsable)
    return table


def _set_sizes(s: ItemSamples) -> tuple[int, int]:
    from credo.methods.base import ORIGINAL, PERTURBED

    return len(s.sets.get(ORIGINAL, ())), len(s.sets.get(PERTURBED, ()))


# --------------------------------------------------------------------------- grading


def _grade(
    task: Task,
    by_id: dict[str, Item],
    samples: Sequence[ItemSamples],
    judge: _Judge,
    knowledge: KnowledgeSource | None,
    stats: dict[str, int | float | str],
) -> dict[str, tuple[bool | float, ...]]:
    """Correctness of every original sample, per item id (the grading stage)."""
    from credo.methods.base import ORIGINAL

    originals = {s.item_id: s.sets[ORIGINAL] for s in samples}
    graders = Counter(by_id[i].meta.get("grader", "") for i in originals)
    out: dict[str, tuple[bool | float, ...]] = {}
    simple = {i: o for i, o in originals.items() if by_id[i].meta.get("grader") == SIMPLEQA}
    longform = {i: o for i, o in originals.items() if by_id[i].meta.get("grader") == FACTSCORE}
    if simple:
        out.update(_grade_simpleqa(by_id, simple, judge, stats))
    if longform:
        out.update(_grade_factscore(by_id, longform, judge, knowledge, stats))
    for i, orig in originals.items():
        if i in out:
            continue
        grader = by_id[i].meta.get("grader")
        if grader:
            raise ValueError(f"item {i!r}: unknown grader {grader!r} (known: simpleqa, factscore)")
        out[i] = tuple(is_correct(s.answer, by_id[i], task.format) for s in orig)
    if task.format is AnswerFormat.CODE:
        stats["code_samples_passing"] = int(sum(sum(v) for v in out.values()))
    log.debug("graders used: %s", dict(graders))
    return out


def _grade_simpleqa(
    by_id: dict[str, Item],
    originals: dict[str, tuple[Sample, ...]],
    judge: _Judge,
    stats: dict[str, int | float | str],
) -> dict[str, tuple[bool | float, ...]]:
    """SimpleQA grades (correct / incorrect / not attempted); only CORRECT counts as correct."""
    grades: dict[tuple[str, str], Grade] = {}
    todo: list[tuple[str, str]] = []
    for i, orig in originals.items():
        for s in orig:
            key = (i, s.text.strip())
            if key in grades or key in todo:
                continue
            decided = pregrade(by_id[i], s.answer.value)
            if decided is None:
                todo.append(key)
            else:
                grades[key] = decided
    decided_free = len(grades)
    planned = [
        PlannedRequest(
            GenerationRequest(messages=grading_messages(by_id[i], text), params=judge.params),
            1,
            label=f"{i}/grade",
        )
        for i, text in todo
    ]
    gens = judge.execute(planned, "grading answers") if planned else []
    for key, g in zip(todo, gens, strict=True):
        grades[key] = parse_grade(g[0].text)
    out = {i: tuple(_grade_value(grades[(i, s.text.strip())]) for s in orig)
           for i, orig in originals.items()}
    counts = Counter(grades[(i, s.text.strip())] for i, orig in originals.items() for s in orig)
    stats.update(
        {f"graded_{g.value}": counts.get(g, 0) for g in Grade},
        grading_unique_answers=len(grades),
        grading_decided_without_judge=decided_free,
        grading_calls_generated=judge.last.generated_samples if planned and judge.last else 0,
        grading_calls_cached=judge.last.cached_samples if planned and judge.last else 0,
    )
    if counts.get(Grade.UNPARSABLE):
        log.warning("%d grader replies were unparsable (counted as not correct)",
                    counts[Grade.UNPARSABLE])
    return out


def _grade_value(grade: Grade) -> bool:
    return grade is Grade.CORRECT


def _grade_factscore(
    by_id: dict[str, Item],
    originals: dict[str, tuple[Sample, ...]],
    judge: _Judge,
    knowledge: KnowledgeSource | None,
    stats: dict[str, int | float | str],
) -> dict[str, tuple[bool | float, ...]]:
    """Per sample: supported claims / claims (FActScore); NaN without a knowledge source."""
    out: dict[str, tuple[bool | float, ...]] = {}
    sources: dict[str, KnowledgeSource] = {}
    plan: dict[tuple[str, str], None] = {}  # (item id, claim), each claim checked once
    for i, orig in originals.items():
        src = knowledge or _folder_source(by_id[i], sources)
        if src is None:
            out[i] = tuple(math.nan for _ in orig)
            continue
        sources.setdefault(i, src)
        for s in orig:
            for c in claims(s.answer.value):
                plan.setdefault((i, c), None)
    unavailable = sum(1 for i in out)
    if unavailable:
        stats["correctness"] = (
            f"unavailable for {unavailable} of {len(originals)} items: no knowledge source"
            " (task factscore:<file>,knowledge=<folder>)"
        )
    if not plan and not sources:
        return out
    requests = []
    for i, c in plan:
        entity = by_id[i].meta.get("entity", "")
        src = sources[i]
        passages = (
            src.retrieve(entity, c)  # type: ignore[attr-defined]
            if hasattr(src, "retrieve")
            else retrieve(src.passages(entity), c)
        )
        messages = support_messages(entity, c, passages)
        requests.append(
            PlannedRequest(
                GenerationRequest(messages=messages, params=judge.params), 1, label=f"{i}/support"
            )
        )
    gens = judge.execute(requests, "checking claims") if requests else []
    verdicts = {key: parse_support(g[0].text) for key, g in zip(plan, gens, strict=True)}
    no_claims = 0
    for i, orig in originals.items():
        if i in out:
            continue
        scores = []
        for s in orig:
            cs = claims(s.answer.value)
            if not cs:
                no_claims += 1
                scores.append(0.0)
                continue
            scores.append(sum(1 for c in cs if verdicts[(i, c)]) / len(cs))
        out[i] = tuple(scores)
    stats.update(
        factscore_claims_checked=len(plan),
        factscore_unparsable_verdicts=sum(1 for v in verdicts.values() if v is None),
        factscore_samples_without_claims=no_claims,
    )
    return out


def _folder_source(item: Item, cache: dict[str, KnowledgeSource]) -> KnowledgeSource | None:
    folder = item.meta.get("knowledge")
    if not folder:
        return None
    for src in cache.values():
        if isinstance(src, FolderKnowledgeSource) and str(src.folder) == folder:
            return src
    return FolderKnowledgeSource(folder)


# --------------------------------------------------------------------------- the judge


class _Judge:
    """A judge (or grader) model behind an executor sharing the run's cache; loaded on
    first use. ``settings`` is ``config.judge`` or ``config.grader``."""

    def __init__(
        self,
        config: RunConfig,
        settings: JudgeConfig,
        executor: Executor,
        model: Model | None,
        twin: _Judge | None = None,
    ) -> None:
        self.config = config
        self.settings = settings
        self.twin = twin  # a judge whose model this one shares when the specs are equal
        self.base = executor
        self.model = model
        self.owned: Model | None = None
        self.executor: Executor | None = None
        self.last = None
        self.params = SamplingParams(temperature=0.0, max_tokens=settings.max_tokens)

    def execute(self, planned: list[PlannedRequest], description: str):
        if self.executor is None:
            self.executor = Executor(
                self._model(),
                self.base.store,
                self.config.seed,
                self.config.max_block,
                self.base.show_progress,
            )
        gens = self.executor.execute(planned, description=description)
        self.last = self.executor.history[-1]
        return gens

    def _model(self) -> Model:
        if self.model is not None:
            return self.model
        if self.owned is not None:
            return self.owned
        spec = self.settings.model
        if spec is None or spec == self.config.model:
            return self.base.model
        twin = self.twin
        if twin is not None and (twin.settings.model, twin.settings.model_options) == (
            spec,
            self.settings.model_options,
        ):
            return twin._model()  # one server for judge and grader; the twin closes it
        from credo.models.registry import load_model

        self.owned = load_model(spec, **self.settings.model_options)
        return self.owned

    def close(self) -> None:
        if self.owned is not None:
            self.owned.close()
            self.owned = None


"""``credo strength run``: perturb, rate strength, read answers, compute flip rates (003 §3-4).

For each model under test and each item of a multiple-choice task:

1. the model writes its original chain of thought (greedy);
2. a writer model (default: the model itself, as each CoT model's perturbations in the
   paper come from its own CoT) writes an input perturbation (Fig. 8) and a CoT
   perturbation (App. D combination of Fig. 7 mistakes, or Fig. 10 paraphrases when x = 0);
3. the strength of every perturbation is measured three ways: the LLM judge (0-3 rubric),
   cosine distance (all-MiniLM-L6-v2) and change in mean surprisal (forced decoding on a
   small embedded model);
4. the model's answers before and after come from first-token letter probabilities
   (App. H): direct answers for input perturbations, answers after the original and the
   perturbed CoT for CoT perturbations;
5. FR(s) per strength (judge rating) with Wilson intervals, FR(3), FR(0), FR(3) - FR(0).

Every model call goes through a cached :class:`~credo.generation.executor.Executor`, so a rerun
costs nothing and an interrupted run resumes. The output folder is described in
:mod:`credo.strength.report`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from credo.config import DEFAULT_MODEL_OPTIONS, PerturbationKind, StrengthConfig
from credo.generation.executor import Executor
from credo.generation.store import GenerationStore
from credo.models.base import Model
from credo.models.embedders import Embedder, load_embedder
from credo.strength.answers import answer_letters, generate_cots
from credo.strength.judge import JudgeCase, judge_strengths
from credo.strength.perturbations import (
    Perturbation,
    join_steps,
    question_block,
    split_steps,
    write_cot_perturbations,
    write_input_perturbations,
)
from credo.strength.surprisal import load_scorer, score_texts
from credo.tasks.base import AnswerFormat, Item, Task

log = logging.getLogger(__name__)

@dataclass
class StrengthRow:
    """One (model, item, perturbation): texts, the three strengths, answers, flip."""

    model: str
    item_id: str
    perturbation_type: str
    question: str
    choices: list[str]
    gold: str
    cot: str
    text_before: str
    text_after: str | None
    perturbed_steps: list[int]
    cot_steps: int
    judge_rating: int | None = None
    judge_reply: str | None = None
    cosine_distance: float | None = None
    surprisal_before: float | None = None
    surprisal_after: float | None = None
    surprisal_change: float | None = None
    answer_before: str | None = None
    answer_after: str | None = None
    answer_source: str | None = None
    flipped: bool | None = None
    correct_before: bool | None = None
    correct_after: bool | None = None
    writer_reply: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class StrengthResult:
    """All rows of a run plus what produced them."""

    config: StrengthConfig
    task: Task
    rows: list[StrengthRow]
    seconds: float = 0.0
    identities: dict[str, str] = field(default_factory=dict)


def run_strength(
    config: StrengthConfig,
    *,
    models: dict[str, Model] | None = None,
    embedder: Embedder | None = None,
    scorer: Model | None = None,
    task: Task | None = None,
    show_progress: bool = True,
) -> StrengthResult:
    """Run the strength pipeline and write its folder to ``config.out``.

    ``models`` maps model specs (``config.models``, ``writer``, ``judge``) to ready
    backends (tests pass scripted ones); missing specs are loaded with
    :func:`credo.models.registry.load_model` and closed at the end. ``scorer`` replaces
    the surprisal scorer (a backend whose generations carry a text's token logprobs).
    """
    from credo.strength.report import write_strength_run
    from credo.tasks.builtin import load_task

    t0 = time.perf_counter()
    task = (task or load_task(config.task)).head(config.limit)
    if task.format is not AnswerFormat.CHOICE:
        raise ValueError(
            f"task {task.name!r} has answer format {task.format.value!r}; strength analysis "
            "reads option-letter probabilities and needs a multiple-choice task"
        )
    items = [it for it in task.items if it.choices]
    if not items:
        raise ValueError(f"task {task.name!r} has no multiple-choice items")

    loaded: dict[str, Model] = dict(models or {})
    owned: list[Any] = []

    def get(spec: str) -> Model:
        if spec not in loaded:
            from credo.models.registry import load_model

            options = config.model_options if _is_embedded(spec) else {}
            loaded[spec] = load_model(spec, **options)
            owned.append(loaded[spec])
        return loaded[spec]

    store = GenerationStore(config.cache_path)
    rows: list[StrengthRow] = []
    identities: dict[str, str] = {}
    try:
        emb = embedder or load_embedder(config.embedder)
        if scorer is None and config.surprisal_model:
            scorer = load_scorer(config.surprisal_model)
            if scorer is not None:
                owned.append(scorer)
        scorer_ex = (
            Executor(scorer, store, config.seed, config.max_block, show_progress)
            if scorer is not None
            else None
        )
        for spec in config.models:
            model = get(spec)
            identities[spec] = model.identity

            def executor(m: Model) -> Executor:
                return Executor(m, store, config.seed, config.max_block, show_progress)

            ex = executor(model)
            writer_ex = executor(get(config.writer)) if config.writer else ex
            judge_ex = executor(get(config.judge)) if config.judge else ex
            rows.extend(
                _run_model(spec, items, config, ex, writer_ex, judge_ex, emb, scorer_ex)
            )
    finally:
        for m in owned:
            m.close()
        store.close()
    result = StrengthResult(config, task, rows, time.perf_counter() - t0, identities)
    write_strength_run(result, config.out)
    return result


def _run_model(
    spec: str,
    items: Sequence[Item],
    config: StrengthConfig,
    ex: Executor,
    writer_ex: Executor,
    judge_ex: Executor,
    embedder: Embedder,
    scorer_ex: Executor | None,
) -> list[StrengthRow]:
    """Every perturbation row for one model under test."""
    by_id = {it.id: it for it in items}
    cots = generate_cots(ex, items)
    # The CoT as steps, one per line: the "original CoT" every later stage sees.
    cot_text = {it.id: join_steps(split_steps(c)) or c for it, c in zip(items, cots, strict=True)}
    perts: list[Perturbation] = []
    if "input" in config.types:
        perts += write_input_perturbations(writer_ex, items, [cot_text[it.id] for it in items])
    if "cot" in config.types:
        perts += write_cot_perturbations(
            writer_ex, items, [cot_text[it.id] for it in items], seed=config.seed,
            mode=config.cot_mode,
        )
    rows = []
    for p in perts:
        it = by_id[p.item_id]
        rows.append(
            StrengthRow(
                model=spec,
                item_id=it.id,
                perturbation_type=p.kind,
                question=it.question,
                choices=list(it.choices),
                gold=it.gold,
                cot=cot_text[it.id],
                text_before=p.before,
                text_after=p.after,
                perturbed_steps=list(p.steps),
                cot_steps=p.m or len(split_steps(cot_text[it.id])),
                writer_reply=p.raw if p.after is None else None,
            )
        )
    usable = [r for r in rows if r.text_after is not None]
    if not usable:
        return rows

    # Answers before and after (App. H): direct for input, after the CoT otherwise.
    asks_items, asks_q, asks_cot = [], [], []
    for r in usable:
        it = by_id[r.item_id]
        if r.perturbation_type == "input":
            asks_items += [it, it]
            asks_q += [None, r.text_after]
            asks_cot += [None, None]
        else:
            asks_items += [it, it]
            asks_q += [None, None]
            asks_cot += [r.text_before, r.text_after]
    letters = answer_letters(ex, asks_items, asks_q, asks_cot)
    for k, r in enumerate(usable):
        before, after = letters[2 * k], letters[2 * k + 1]
        r.answer_before, r.answer_after = before.letter, after.letter
        r.answer_source = before.source
        if before.letter is not None and after.letter is not None:
            r.flipped = before.letter != after.letter
        r.correct_before = None if before.letter is None else before.letter == r.gold
        r.correct_after = None if after.letter is None else after.letter == r.gold

    # Strength 1: the LLM judge.
    cases = []
    for r in usable:
        it = by_id[r.item_id]
        if r.perturbation_type == "input":
            cases.append(
                JudgeCase("input", question_block(it), r.cot, question_block(it, r.text_after))
            )
        else:
            assert r.text_after is not None
            cases.append(JudgeCase(r.perturbation_type, question_block(it), r.text_before,
                                   r.text_after))
    for r, verdict in zip(usable, judge_strengths(judge_ex, cases), strict=True):
        r.judge_rating, r.judge_reply = verdict.rating, verdict.reply

    # Strength 2: cosine distance 1 - cos(e(x), e(x')) on normalised embeddings.
    before_vecs = embedder.encode([r.text_before for r in usable])
    after_vecs = embedder.encode([r.text_after or "" for r in usable])
    cos = np.sum(np.asarray(before_vecs) * np.asarray(after_vecs), axis=1)
    for r, c in zip(usable, cos, strict=True):
        r.cosine_distance = float(1.0 - c)

    # Strength 3: change in mean surprisal.
    if scorer_ex is not None:
        texts = [r.text_before for r in usable] + [r.text_after or "" for r in usable]
        h = score_texts(scorer_ex, texts)
        for k, r in enumerate(usable):
            hb, ha = h[k], h[len(usable) + k]
            r.surprisal_before, r.surprisal_after = hb, ha
            if hb is not None and ha is not None:
                r.surprisal_change = abs(hb - ha)
    return rows


def _is_embedded(spec: str) -> bool:
    from credo.models.weights import EMBEDDED_MODELS, is_local_gguf

    return spec in EMBEDDED_MODELS or is_local_gguf(spec) or spec.startswith("gguf:")


__all__ = [
    "DEFAULT_MODEL_OPTIONS",
    "PerturbationKind",
    "StrengthConfig",
    "StrengthResult",
    "StrengthRow",
    "run_strength",
]

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

Every model comes from one :class:`~credo.generation.pool.ModelPool` (roles: each model
under test, its writer and its judge, the surprisal scorer; see :func:`assign_roles`), and
every call goes through the pool's cached executors, so a rerun costs nothing and an
interrupted run resumes. The pipeline writes nothing: :func:`credo.api.run_strength` runs
it and writes the output folder described in :mod:`credo.report.strength`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from credo.config import DEFAULT_MODEL_OPTIONS, PerturbationKind, RoleConfig, StrengthConfig
from credo.errors import UserError
from credo.generation.executor import Executor
from credo.generation.pool import SURPRISAL, ModelPool
from credo.generation.roles import assign_roles as assign
from credo.generation.roles import judge_role, model_role, strength_roles, writer_role
from credo.models.base import Model
from credo.models.embedders import Embedder
from credo.models.weights import is_embedded_spec
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
from credo.strength.surprisal import score_texts, surprisal_spec
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


def run_strength_pipeline(
    config: StrengthConfig, pool: ModelPool, task: Task | None = None
) -> StrengthResult:
    """The stages of 003's pipeline for every model under test, models from ``pool``.

    Roles already assigned in ``pool`` stay (models handed in); the others come from
    ``config`` (:func:`assign_roles`). Writes nothing; closes nothing.
    """
    t0 = time.perf_counter()
    task = strength_task(config, task)
    items = [it for it in task.items if it.choices]
    assign_roles(pool, config)
    pool.preflight(preflight_roles(pool, config))  # every role checked before any call
    embedder = pool.embedder(config.embedder)
    scorer = pool.executor(SURPRISAL) if pool.has(SURPRISAL) else None
    rows: list[StrengthRow] = []
    identities: dict[str, str] = {}
    for spec in config.models:
        identities[spec] = pool.model(model_role(spec)).identity
        executors = _ModelExecutors(
            model=pool.executor(model_role(spec)),
            writer=pool.executor(writer_role(spec)),
            judge=pool.executor(judge_role(spec)),
            scorer=scorer,
        )
        rows.extend(_run_model(spec, items, config, executors, embedder))
    return StrengthResult(config, task, rows, time.perf_counter() - t0, identities)


def strength_task(config: StrengthConfig, task: Task | None = None) -> Task:
    """The run's task (``task`` or the one ``config`` names), cut to ``config.limit``.

    Raises ValueError unless it is multiple choice with items that have options: the
    answers are read from option-letter probabilities (App. H).
    """
    from credo.tasks.builtin import load_task

    task = (task or load_task(config.task)).head(config.limit)
    if task.format is not AnswerFormat.CHOICE:
        raise UserError(
            f"task {task.name!r} has answer format {task.format.value!r}; strength analysis "
            "reads option-letter probabilities and needs a multiple-choice task"
        )
    if not any(it.choices for it in task.items):
        raise UserError(f"task {task.name!r} has no multiple-choice items")
    return task


# ---------------------------------------------------------------------- roles


def model_options(spec: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The load options of ``spec``: ``options`` for an embedded model, none otherwise."""
    return dict(options) if is_embedded_spec(spec) else {}


def assign_roles(
    pool: ModelPool,
    config: StrengthConfig,
    models: Mapping[str, Model] | None = None,
    scorer: Model | None = None,
) -> None:
    """The strength run's roles (:func:`credo.generation.roles.strength_roles`); roles
    already assigned stay. A spec in ``models`` is that model, for every role naming it;
    the surprisal role is ``scorer`` when given, else ``forced:<config.surprisal_model>``
    when that model can score given text (:func:`surprisal_spec`), else unassigned."""
    roles = strength_roles(config)
    for role, played in roles.items():
        if isinstance(played, RoleConfig) and played.model in (models or {}):
            pool.assign(role, model=(models or {})[played.model])
    if scorer is not None:
        pool.assign(SURPRISAL, model=scorer)
    forced = None
    if scorer is None and config.surprisal_model and not pool.has(SURPRISAL):
        forced = surprisal_spec(config.surprisal_model)
    assign(pool, strength_roles(config, forced))


def preflight_roles(pool: ModelPool, config: StrengthConfig) -> list[str]:
    """Every role a strength run asks, in stage order (issue 20: the preflight's list)."""
    roles = [r for spec in config.models
             for r in (model_role(spec), writer_role(spec), judge_role(spec))]
    return roles + ([SURPRISAL] if pool.has(SURPRISAL) else [])


# ---------------------------------------------------------------------- one model


@dataclass(frozen=True)
class _ModelExecutors:
    """The cached executors one model under test runs on."""

    model: Executor
    writer: Executor
    judge: Executor
    scorer: Executor | None


def _run_model(
    spec: str,
    items: Sequence[Item],
    config: StrengthConfig,
    ex: _ModelExecutors,
    embedder: Embedder,
) -> list[StrengthRow]:
    """Every perturbation row for one model under test: original CoTs, perturbations,
    answers before and after (App. H), then the three strengths (§3.3)."""
    by_id = {it.id: it for it in items}
    cot_text = _original_cots(ex.model, items)
    perts = _perturbations(ex.writer, items, cot_text, config)
    rows = [_row(spec, by_id[p.item_id], p, cot_text[p.item_id]) for p in perts]
    usable = [r for r in rows if r.text_after is not None]
    if not usable:
        return rows
    _read_answers(ex.model, usable, by_id)
    _rate_with_judge(ex.judge, usable, by_id)
    _cosine_distances(embedder, usable)
    if ex.scorer is not None:
        _surprisal_changes(ex.scorer, usable)
    return rows


def _original_cots(ex: Executor, items: Sequence[Item]) -> dict[str, str]:
    """The CoT as steps, one per line: the "original CoT" every later stage sees."""
    cots = generate_cots(ex, items)
    return {it.id: join_steps(split_steps(c)) or c for it, c in zip(items, cots, strict=True)}


def _perturbations(
    writer: Executor, items: Sequence[Item], cot_text: dict[str, str], config: StrengthConfig
) -> list[Perturbation]:
    """The perturbations of ``config.types``: input (Fig. 8), then CoT (App. D)."""
    cots = [cot_text[it.id] for it in items]
    perts: list[Perturbation] = []
    if "input" in config.types:
        perts += write_input_perturbations(writer, items, cots)
    if "cot" in config.types:
        perts += write_cot_perturbations(
            writer, items, cots, seed=config.seed, mode=config.cot_mode
        )
    return perts


def _row(spec: str, it: Item, p: Perturbation, cot: str) -> StrengthRow:
    """A row before any measurement: the texts and which steps changed."""
    return StrengthRow(
        model=spec,
        item_id=it.id,
        perturbation_type=p.kind,
        question=it.question,
        choices=list(it.choices),
        gold=it.gold,
        cot=cot,
        text_before=p.before,
        text_after=p.after,
        perturbed_steps=list(p.steps),
        cot_steps=p.m or len(split_steps(cot)),
        writer_reply=p.raw if p.after is None else None,
    )


def _read_answers(ex: Executor, usable: Sequence[StrengthRow], by_id: dict[str, Item]) -> None:
    """Answers before and after (App. H): direct for input, after the CoT otherwise."""
    asks_items: list[Item] = []
    asks_q: list[str | None] = []
    asks_cot: list[str | None] = []
    for r in usable:
        it = by_id[r.item_id]
        asks_items += [it, it]
        if r.perturbation_type == "input":
            asks_q += [None, r.text_after]
            asks_cot += [None, None]
        else:
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


def _rate_with_judge(
    judge: Executor, usable: Sequence[StrengthRow], by_id: dict[str, Item]
) -> None:
    """Strength 1: the LLM judge's 0-3 rating (Fig. 17), the raw reply kept."""
    cases = []
    for r in usable:
        it = by_id[r.item_id]
        assert r.text_after is not None
        if r.perturbation_type == "input":
            cases.append(
                JudgeCase("input", question_block(it), r.cot, question_block(it, r.text_after))
            )
        else:
            cases.append(
                JudgeCase(r.perturbation_type, question_block(it), r.text_before, r.text_after)
            )
    for r, verdict in zip(usable, judge_strengths(judge, cases), strict=True):
        r.judge_rating, r.judge_reply = verdict.rating, verdict.reply


def _cosine_distances(embedder: Embedder, usable: Sequence[StrengthRow]) -> None:
    """Strength 2: cosine distance 1 - cos(e(x), e(x')) on normalised embeddings."""
    before_vecs = embedder.encode([r.text_before for r in usable])
    after_vecs = embedder.encode([r.text_after or "" for r in usable])
    cos = np.sum(np.asarray(before_vecs) * np.asarray(after_vecs), axis=1)
    for r, c in zip(usable, cos, strict=True):
        r.cosine_distance = float(1.0 - c)


def _surprisal_changes(scorer: Executor, usable: Sequence[StrengthRow]) -> None:
    """Strength 3: change in mean surprisal Δh = |h(x) - h(x')| (eq. 1)."""
    texts = [r.text_before for r in usable] + [r.text_after or "" for r in usable]
    h = score_texts(scorer, texts)
    for k, r in enumerate(usable):
        hb, ha = h[k], h[len(usable) + k]
        r.surprisal_before, r.surprisal_after = hb, ha
        if hb is not None and ha is not None:
            r.surprisal_change = abs(hb - ha)


__all__ = [
    "DEFAULT_MODEL_OPTIONS",
    "PerturbationKind",
    "StrengthConfig",
    "StrengthResult",
    "StrengthRow",
    "assign_roles",
    "judge_role",
    "model_options",
    "model_role",
    "run_strength_pipeline",
    "strength_task",
    "writer_role",
]

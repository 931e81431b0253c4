"""``credo strength run``: perturb, rate strength, read answers, compute flip rates (Le et
al., §3-4).

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
under test, its writer and its judge, the surprisal scorer; see :func:`assign_roles`).
Each model call is a planned stage (:class:`~credo.strength.answers.CotStage`,
:class:`~credo.strength.perturbations.InputWriterStage` and
:class:`~credo.strength.perturbations.CotWriterStage`,
:class:`~credo.strength.answers.LetterStage`, :class:`~credo.strength.judge.JudgeStage`,
:class:`~credo.strength.surprisal.SurprisalStage`) run by the one stage driver
(:class:`~credo.pipeline.stages.StageDriver`), so a strength run has what every command
has: the cache (a rerun costs nothing, a killed run resumes), the ledger per stage, the
budget stop (``max_cost_usd``), preflight of every role, the dry run
(:func:`estimate_strength`: ``credo strength run --dry-run``) and the outcome: a model's
item one of whose requests failed (or that the budget left) is left out and named in
:attr:`StrengthResult.incomplete`, and the outcome is incomplete (exit 3; a rerun
generates only what is missing). The pipeline writes nothing:
:func:`credo.api.run_strength` runs it and writes the output folder described in
:mod:`credo.report.strength`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from credo.config import DEFAULT_MODEL_OPTIONS, PerturbationKind, RoleConfig, StrengthConfig
from credo.errors import UserError
from credo.generation.pool import SURPRISAL, ModelPool
from credo.generation.roles import assign_roles as assign
from credo.generation.roles import judge_role, model_role, strength_roles, writer_role
from credo.models.base import Model
from credo.models.embedders import Embedder
from credo.models.weights import is_embedded_spec
from credo.pipeline.ending import Outcome, decide_outcome, end_run
from credo.pipeline.estimate import RunEstimate
from credo.pipeline.stages import Stage, StageDriver, StageEstimate
from credo.strength.answers import CotStage, LetterAsk, LetterStage
from credo.strength.judge import JudgeCase, JudgeStage
from credo.strength.perturbations import (
    CotWriterStage,
    InputWriterStage,
    Perturbation,
    join_steps,
    question_block,
    split_steps,
)
from credo.strength.surprisal import SurprisalStage, surprisal_spec
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
    """All rows of a run plus what produced them; ``incomplete`` names each model's item
    left out because some of its requests failed or the budget stopped them
    (``<model>/<item id>`` -> why) and ``ledger`` is the pool's
    (:meth:`credo.generation.ledger.Ledger.to_dict`)."""

    config: StrengthConfig
    task: Task
    rows: list[StrengthRow]
    seconds: float = 0.0
    identities: dict[str, str] = field(default_factory=dict)
    incomplete: dict[str, str] = field(default_factory=dict)
    ledger: dict[str, Any] = field(default_factory=dict)
    #: The incomplete marker's fields from the run's ending
    #: (:func:`credo.pipeline.ending.end_run`); ``run_status.json`` holds them.
    status: dict[str, Any] = field(default_factory=dict)

    @property
    def stopped_by_budget(self) -> bool:
        """Whether the cost budget (``max_cost_usd``) left requests ungenerated."""
        return bool(self.ledger.get("stopped_by_budget"))

    @property
    def outcome(self) -> Outcome:
        """How the run ended (:func:`credo.pipeline.ending.decide_outcome`)."""
        return decide_outcome(self.incomplete, self.stopped_by_budget, {}, "off")


def run_strength_pipeline(
    config: StrengthConfig, pool: ModelPool, task: Task | None = None
) -> StrengthResult:
    """The stages of Le et al.'s pipeline for every model under test, models from ``pool``.

    Roles already assigned in ``pool`` stay (models handed in); the others come from
    ``config`` (:func:`assign_roles`). Writes nothing; closes nothing.
    """
    t0 = time.perf_counter()
    task = strength_task(config, task)
    rows, incomplete, identities, _ = _drive(config, pool, task, dry_run=False)
    ledger = pool.ledger.to_dict()
    # every pipeline's ending (no scored items: the outcome and the incomplete marker)
    ending = end_run(incomplete=incomplete,
                     stopped_by_budget=bool(ledger.get("stopped_by_budget")))
    return StrengthResult(config, task, rows, time.perf_counter() - t0, identities,
                          incomplete, ledger, ending.status)


def estimate_strength(
    config: StrengthConfig, pool: ModelPool, task: Task | None = None
) -> RunEstimate:
    """What a strength run would ask of its models, per stage and model under test,
    with no model call and no server contacted (``credo strength run --dry-run``): the
    stages run by the driver in its dry run (:class:`~credo.pipeline.stages.StageDriver`),
    every stage counted by the estimate machinery; a stage planned on texts not in the
    cache yet (the writers before the CoTs are cached...) is ``estimated``."""
    task = strength_task(config, task)
    _, _, _, estimates = _drive(config, pool, task, dry_run=True)
    return RunEstimate(task.name, len([it for it in task.items if it.choices]),
                       ", ".join(config.specs), estimates)


def _drive(
    config: StrengthConfig, pool: ModelPool, task: Task, *, dry_run: bool
) -> tuple[list[StrengthRow], dict[str, str], dict[str, str], list[StageEstimate]]:
    """The stages of every model under test through one driver each: the rows, the
    incomplete ``<model>/<item>``, the identities and (dry run) the estimates."""
    items = [it for it in task.items if it.choices]
    assign_roles(pool, config)
    checked = StageDriver(pool, dry_run=dry_run)  # every role before any call
    checked.preflight(preflight_roles(pool, config), max_cost_usd=config.max_cost_usd)
    embedder = None if dry_run else pool.embedder(config.embedder)
    rows: list[StrengthRow] = []
    incomplete: dict[str, str] = {}
    identities: dict[str, str] = {}
    estimates: list[StageEstimate] = list(checked.estimates)  # the dry run's probes
    for spec in config.specs:
        identities[spec] = pool.model(model_role(spec), probe=not dry_run).identity
        driver = StageDriver(pool, dry_run=dry_run)
        rows.extend(_run_model(spec, items, config, driver, embedder))
        incomplete.update({f"{spec}/{i}": why for i, why in driver.incomplete.items()})
        estimates.extend(driver.estimates)
    return rows, incomplete, identities, estimates


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
    """Every role a strength run asks, in stage order (the preflight's list)."""
    roles = [r for spec in config.specs
             for r in (model_role(spec), writer_role(spec), judge_role(spec))]
    return roles + ([SURPRISAL] if pool.has(SURPRISAL) else [])


# ---------------------------------------------------------------------- one model


def _run_model(
    spec: str,
    items: Sequence[Item],
    config: StrengthConfig,
    driver: StageDriver,
    embedder: Embedder | None,
) -> list[StrengthRow]:
    """Every perturbation row for one model under test, its stages through ``driver``:
    original CoTs, perturbations, answers before and after (App. H), then the three
    strengths (§3.3). An item one of whose requests failed is in ``driver.incomplete``
    and has no row. ``embedder`` None (the dry run): no cosine distances."""
    by_id = {it.id: it for it in items}
    (cots,) = driver.run([CotStage(model_role(spec))], items)
    cot_text = {i: join_steps(split_steps(c)) or c for i, c in cots.items()}
    ready = [it for it in items if it.id in cot_text]
    writers: list[Stage] = []
    if "input" in config.types:
        writers.append(InputWriterStage(writer_role(spec)))
    if "cot" in config.types:
        writers.append(CotWriterStage(writer_role(spec), seed=config.seed, mode=config.cot_mode))
    written = driver.run(writers, ready, cot_text)
    rows = [_row(spec, by_id[p.item_id], p, cot_text[p.item_id])
            for perts in written for it in ready
            if it.id not in driver.incomplete for p in perts.get(it.id, ())]
    usable = [r for r in rows if r.text_after is not None]
    if usable:
        _read_answers(driver, model_role(spec), usable, by_id)
        _rate_with_judge(driver, judge_role(spec), usable, by_id)
        usable = [r for r in usable if r.item_id not in driver.incomplete]
        if embedder is not None and usable:
            _cosine_distances(embedder, usable)
        if driver.pool.has(SURPRISAL):
            _surprisal_changes(driver, usable)
    return [r for r in rows if r.item_id not in driver.incomplete]


def _by_item(rows: Iterable[StrengthRow]) -> dict[str, list[StrengthRow]]:
    """``rows`` grouped by item id (the driver's units), in order."""
    out: dict[str, list[StrengthRow]] = {}
    for r in rows:
        out.setdefault(r.item_id, []).append(r)
    return out


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


def _read_answers(
    driver: StageDriver, role: str, usable: Sequence[StrengthRow], by_id: dict[str, Item]
) -> None:
    """Answers before and after (App. H): direct for input, after the CoT otherwise."""
    units = _by_item(usable)
    asks = {}
    for unit, rows in units.items():
        it = by_id[unit]
        asks[unit] = [
            a for r in rows for a in (
                (LetterAsk(it), LetterAsk(it, r.text_after)) if r.perturbation_type == "input"
                else (LetterAsk(it, None, r.text_before), LetterAsk(it, None, r.text_after))
            )
        ]
    (letters,) = driver.run([LetterStage(role)], asks)
    for unit, answers in letters.items():
        for k, r in enumerate(units[unit]):
            before, after = answers[2 * k], answers[2 * k + 1]
            r.answer_before, r.answer_after = before.letter, after.letter
            r.answer_source = before.source
            if before.letter is not None and after.letter is not None:
                r.flipped = before.letter != after.letter
            r.correct_before = None if before.letter is None else before.letter == r.gold
            r.correct_after = None if after.letter is None else after.letter == r.gold


def _rate_with_judge(
    driver: StageDriver, role: str, usable: Sequence[StrengthRow], by_id: dict[str, Item]
) -> None:
    """Strength 1: the LLM judge's 0-3 rating (Fig. 17), the raw reply kept."""
    units = _by_item(r for r in usable if r.item_id not in driver.incomplete)
    cases = {unit: [_case(r, by_id[unit]) for r in rows] for unit, rows in units.items()}
    (verdicts,) = driver.run([JudgeStage(role)], cases)
    for unit, got in verdicts.items():
        for r, verdict in zip(units[unit], got, strict=True):
            r.judge_rating, r.judge_reply = verdict.rating, verdict.reply


def _case(r: StrengthRow, it: Item) -> JudgeCase:
    """What the judge sees of row ``r``: the question, the reasoning and the perturbed text."""
    assert r.text_after is not None
    if r.perturbation_type == "input":
        return JudgeCase("input", question_block(it), r.cot, question_block(it, r.text_after))
    return JudgeCase(r.perturbation_type, question_block(it), r.text_before, r.text_after)


def _cosine_distances(embedder: Embedder, usable: Sequence[StrengthRow]) -> None:
    """Strength 2: cosine distance 1 - cos(e(x), e(x')) on normalised embeddings."""
    before_vecs = embedder.encode([r.text_before for r in usable])
    after_vecs = embedder.encode([r.text_after or "" for r in usable])
    cos = np.sum(np.asarray(before_vecs) * np.asarray(after_vecs), axis=1)
    for r, c in zip(usable, cos, strict=True):
        r.cosine_distance = float(1.0 - c)


def _surprisal_changes(driver: StageDriver, usable: Sequence[StrengthRow]) -> None:
    """Strength 3: change in mean surprisal Δh = |h(x) - h(x')| (eq. 1)."""
    units = _by_item(usable)
    texts = {unit: [t for r in rows for t in (r.text_before, r.text_after or "")]
             for unit, rows in units.items()}
    scorer = driver.pool.model(SURPRISAL, probe=not driver.dry_run)
    stage = SurprisalStage(SURPRISAL, scorer.identity, scorer.capabilities.logprobs)
    (h,) = driver.run([stage], texts)
    for unit, rows in units.items():
        values = h.get(unit, {})
        for r in rows:
            hb, ha = values.get(r.text_before), values.get(r.text_after or "")
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
    "estimate_strength",
    "judge_role",
    "model_options",
    "model_role",
    "run_strength_pipeline",
    "strength_task",
    "writer_role",
]

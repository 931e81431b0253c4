"""``estimate_run(config, pool)``: what a run would ask of its models, with no model call.

``credo run --dry-run`` prints it. Per stage (the ledger's stages,
:mod:`credo.generation.ledger`): the requests and samples, how many samples are cached
already, the backend calls the missing ones take, an estimate of their prompt tokens, a
bound on their completion tokens, and their cost at the model's prices.

The dry run is the plan without running, and it is the stage driver's
(:class:`~credo.pipeline.stages.StageDriver` with ``dry_run``, as
``credo strength run --dry-run``'s): the run's own stages (the sample sets'
:class:`~credo.pipeline.stages.SampleSetStage`, the writer's
:class:`~credo.perturb.context.WriterCallStage`, the
:class:`~credo.perturb.paraphrase.ParaphraseStage`, the judge's
:class:`~credo.kernels.judge.JudgePairsStage`, SimpleQA's
:class:`~credo.tasks.factual.SimpleQAStage`, FActScore's
:class:`~credo.tasks.longform.ClaimCheckStage`) are planned and counted by the driver,
and its preflight counts the probes; where a stage reads generated text, on placeholder
texts of their longest length, all distinct. No formula of a stage is repeated here.

What is known before sampling and what is estimated:

* **planned** (exact, cache counted): the original samples, the label and APriCoT
  requests (they depend on the item only), the perturbation writer's first round and the
  paraphrase writer's candidates. Later writer rounds depend on the diversity filter and
  are not counted (at most ``perturbation.max_rounds`` rounds in all).
* **estimated** (from n, m and the config; cache unknown): perturbed samples (m per item,
  one request per prefix, each prefix at most the writer's ``max_tokens`` long),
  paraphrased samples, the follow-ups (verbalized, P(True): one per original sample, at
  most ``baselines.followups``; identical samples share one, so this is an upper bound),
  judge pairs (at most every pair of distinct answers: u(u−1)/2 per item with u ≤ n + m,
  and u ≤ the options of a choice item), SimpleQA grading (at most one per sample) and
  a served model's probe when none is stored for it (at most
  :data:`~credo.models.openai_probe.MAX_PROBE_REQUESTS` tiny requests).
* **unknown**: CCP's NLI judgments (they depend on the samples' token alternatives).
  FActScore's claim checks are estimated by their own stage
  (:class:`~credo.tasks.longform.ClaimCheckStage`) on placeholder biographies of
  ``max_tokens`` tokens in sentences of :data:`CLAIM_TOKENS` tokens (one claim each).

Tokens. Prompt tokens are characters / :data:`CHARS_PER_TOKEN` of the rendered messages,
once per backend call (as the ledger counts them); completion tokens are at most
``max_tokens`` per sample; answers a later prompt quotes (follow-ups, judge pairs,
grading) are taken at ``max_tokens`` too. Nothing here calls a model: the models are
built (which loads nothing) for their identities, which the cache keys need.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from credo.config import RunConfig
from credo.generation.pool import MODEL, ModelPool
from credo.kernels.judge import JudgePairsStage
from credo.perturb.context import PerturbationSet, WriterCallStage, more_candidates
from credo.perturb.paraphrase import ParaphraseSet, ParaphraseStage
from credo.pipeline.claims import plan_claims
from credo.pipeline.runner import (
    configured_task,
    prepare_run,
    task_sampling_line,
    with_task_sampling,
)
from credo.pipeline.stages import (
    CHARS_PER_TOKEN,
    ESTIMATED,
    PLANNED,
    SampleSetStage,
    SetOut,
    Stage,
    StageDriver,
    StageEstimate,
    placeholder_text,
    prompt_tokens,
)
from credo.plan.claims import ClaimSource
from credo.plan.sample_sets import PlanContext, get_sample_set
from credo.plan.samples import ORIGINAL, PARAPHRASED, PERTURBED, ItemSamples, Sample
from credo.tasks.answers import Answer
from credo.tasks.base import AnswerFormat, Item, Task
from credo.tasks.claims import read_claims
from credo.tasks.factual import SIMPLEQA, SimpleQAStage
from credo.tasks.longform import FACTSCORE, ClaimCheckStage, knowledge_sources
from credo.tasks.prompts import LETTERS
from credo.types import SamplingParams

__all__ = ["CHARS_PER_TOKEN", "RunEstimate", "StageEstimate", "estimate_run", "prompt_tokens"]

EXACT_SETS = ("label", "apricot")
"""Phase-1 sample sets besides the original whose requests depend on the item only."""


@dataclass
class RunEstimate:
    """The stages of a run as :func:`estimate_run` sees them before any model call."""

    task: str
    items: int
    model: str
    stages: list[StageEstimate] = field(default_factory=list)
    task_size: int | None = None
    """Items of the task before ``limit`` cut it."""
    limit: int | None = None
    """The run's ``limit`` (None: every item)."""
    notes: list[str] = field(default_factory=list)
    """Lines about the run's settings the table rests on (the sampling settings taken
    from the task's own tool)."""

    def total(self) -> StageEstimate:
        """The stages added up (``unknown`` stages count nothing; the cost is None when
        no stage is priced; ``cached_samples`` counts the planned stages only)."""
        total = StageEstimate("total", "", "", PLANNED)
        for s in self.stages:
            total.requests += s.requests
            total.samples += s.samples
            total.cached_samples = (total.cached_samples or 0) + (s.cached_samples or 0)
            total.calls += s.calls
            total.prompt_tokens += s.prompt_tokens
            total.completion_tokens += s.completion_tokens
            if s.cost_usd is not None:
                total.cost_usd = (total.cost_usd or 0.0) + s.cost_usd
        return total


def estimate_run(config: RunConfig, pool: ModelPool, task: Task | None = None) -> RunEstimate:
    """The run ``config`` describes, stage by stage, without calling a model (the module
    docstring says what is planned and what estimated): the run's own stages through the
    stage driver's dry run (:class:`~credo.pipeline.stages.StageDriver`, ``dry_run``),
    whose preflight counts the probes. ``pool`` supplies the models (built, not called)
    and the cache; ``task`` replaces the configured one. Raises
    :class:`~credo.errors.UserError` for what a run would refuse before its first call."""
    driver = StageDriver(pool, dry_run=True)
    task = task or configured_task(config)
    config = with_task_sampling(config, task)
    prepared = prepare_run(config, pool, task, reach=False, driver=driver)
    task, needs = prepared.task, prepared.needs
    ctx = _dummy_context(task, config, prepared.capabilities.logprobs,
                         prepared.capabilities.grammar)
    est = RunEstimate(task.name, len(task.items), pool.model(MODEL).identity,
                      task_size=prepared.task_size, limit=config.limit)
    own = task_sampling_line(config, task)
    if own is not None:
        est.notes.append(own)
    out: SetOut = {}
    items = list(task.items)
    _dry(driver, SampleSetStage(ORIGINAL, out), items, ctx, PLANNED)
    if PERTURBED in needs and config.perturbation.corpus is None:
        _writer_round(driver, task, config)
    if PARAPHRASED in needs:
        b = config.baselines
        _dry(driver, ParaphraseStage(b.paraphrases, b.paraphrase_sampling,
                                     b.paraphrase_candidates), items, None, PLANNED)
    for name in _later_sets(needs):
        basis = PLANNED if name in EXACT_SETS else ESTIMATED
        _dry(driver, SampleSetStage(name, out), items, ctx, basis, _SET_NOTES.get(
            name, "" if basis == PLANNED else "one per original sample (at most)"))
    kernels = {spec.kernel or config.kernel for spec in prepared.specs}
    if "judge" in kernels:
        _judge_pairs(driver, task, config, needs)
    _grading(driver, task, config)
    est.stages = list(driver.estimates)
    if config.claims is not None:
        est.stages += _claim_stages(pool, task, config)
    return est


# --------------------------------------------------------------------------- stages

_SET_NOTES = {
    PERTURBED: "m per item, each prefix at most the writer's max_tokens long",
    PARAPHRASED: "one per kept paraphrase",
}
"""The dry run's note of the sample sets planned on placeholder prompts."""


def _dry(
    driver: StageDriver, stage: Stage, items: Any, context: Any, basis: str, note: str = ""
) -> None:
    """``stage`` through the dry ``driver``, its count of ``basis`` noted ``note``."""
    stage.note = note
    driver.run([stage], items, context, basis=basis)


def _later_sets(needs: set[str]) -> list[str]:
    """The needed sample sets after the original ones: phase 1, then the follow-ups."""
    rest = needs - {ORIGINAL}
    return sorted(
        rest, key=lambda n: (get_sample_set(n).phase, n not in (PERTURBED, PARAPHRASED), n)
    )


def _writer_round(driver: StageDriver, task: Task, config: RunConfig) -> None:
    """The perturbation writer's first round: each item's writer call for its first
    candidates (:class:`credo.perturb.context.WriterCallStage`, as
    :class:`~credo.perturb.context.PrefixWriter` asks it: no prefix kept yet)."""
    p = config.perturbation
    stage = WriterCallStage(task.domain, p, {it.id: it for it in task.items})
    wanted = {it.id: more_candidates(config.m, p) for it in task.items}
    _dry(driver, stage, wanted, None, PLANNED,
         f"round 1 of at most {p.max_rounds}; later rounds depend on the diversity filter")


def _judge_pairs(driver: StageDriver, task: Task, config: RunConfig, needs: set[str]) -> None:
    """The judge kernel's stage (:class:`credo.kernels.judge.JudgePairsStage`) on
    placeholder answers, all distinct: at most every pair of distinct answers."""
    counts = {ORIGINAL: config.n, PERTURBED: config.m if PERTURBED in needs else 0,
              PARAPHRASED: config.baselines.paraphrases if PARAPHRASED in needs else 0}
    samples = [_placeholder_answers(it, task.format, counts, config.sampling.max_tokens)
               for it in task.items]
    _dry(driver, JudgePairsStage(task.format, config.judge.max_tokens), samples,
         {it.id: it for it in task.items}, ESTIMATED,
         "at most every pair of distinct answers: u(u-1)/2 per item, u <= n + m")


def _grading(driver: StageDriver, task: Task, config: RunConfig) -> None:
    """SimpleQA grades (the grader's stage, :class:`credo.tasks.factual.SimpleQAStage`,
    on placeholder answers: at most one per original sample) and FActScore claim checks
    (:func:`_claim_checks`) of the items whose grader asks the judge."""
    graders = {it.meta.get("grader") for it in task.items}
    if SIMPLEQA in graders:
        settings = config.grader or config.judge
        params = SamplingParams(temperature=0.0, max_tokens=settings.max_tokens)
        graded = [it for it in task.items if it.meta.get("grader") == SIMPLEQA]
        originals = {
            it.id: _placeholder_answers(
                it, task.format, {ORIGINAL: config.n}, config.sampling.max_tokens
            ).sets[ORIGINAL]
            for it in graded
        }
        _dry(driver, SimpleQAStage(params), originals, {it.id: it for it in graded},
             ESTIMATED, "at most one per original sample (exact matches need none)")
    if FACTSCORE in graders:
        _claim_checks(driver, task, config)


CLAIM_TOKENS = 20
"""The length of one sentence (one claim, :func:`credo.tasks.longform.claims`) in the
estimate of FActScore's claim checks."""


def _claim_checks(driver: StageDriver, task: Task, config: RunConfig) -> None:
    """FActScore's claim checks, planned by the stage that checks them
    (:class:`credo.tasks.longform.ClaimCheckStage`) on placeholder biographies of
    ``max_tokens`` tokens in sentences of :data:`CLAIM_TOKENS` tokens, every claim
    distinct: one check per sentence of each original sample, for the items with a
    knowledge source (the others are not checked: their correctness is unavailable)."""
    settings = config.grader or config.judge
    params = SamplingParams(temperature=0.0, max_tokens=settings.max_tokens)
    graded = {it.id: it for it in task.items if it.meta.get("grader") == FACTSCORE}
    sources = knowledge_sources(graded, list(graded))
    per = max(1, config.sampling.max_tokens // CLAIM_TOKENS)
    filler = "x" * (CHARS_PER_TOKEN * (CLAIM_TOKENS - 4))
    originals = {
        i: tuple(Sample(text, Answer(text, text)) for text in (
            " ".join(f"Claim {i} {k} {j} {filler}." for j in range(per))
            for k in range(config.n)))
        for i in sources
    }
    note = (f"one per sentence of each original sample ({per} sentences of {CLAIM_TOKENS} "
            "tokens each, all distinct)" if sources else
            "no knowledge source: correctness unavailable, no claim is checked")
    if sources and len(sources) < len(graded):
        note += f"; {len(graded) - len(sources)} items without a knowledge source: none"
    _dry(driver, ClaimCheckStage(params, sources), originals, graded, ESTIMATED, note)


def _claim_stages(pool: ModelPool, task: Task, config: RunConfig) -> list[StageEstimate]:
    """The claim stage, planned by the run's own function
    (:func:`credo.pipeline.claims.plan_claims`) through a dry stage driver on placeholder
    answers: each item's answer of ``max_tokens`` tokens in sentences of
    :data:`CLAIM_TOKENS` tokens, its n - 1 other original samples and m perturbed ones
    all distinct; the judge's split on its placeholder reply (one fact per 12 tokens of
    ``claims.split_max_tokens``). Every count is estimated (the answers are not drawn)."""
    c = config.claims
    assert c is not None
    per = max(1, config.sampling.max_tokens // CLAIM_TOKENS)
    filler = "x" * (CHARS_PER_TOKEN * (CLAIM_TOKENS - 4))
    long = placeholder_text(config.sampling.max_tokens)
    sources = {
        it.id: ClaimSource(
            it.id, it.question, " ".join(f"Claim {it.id} {j} {filler}." for j in range(per)),
            tuple(f"{long}{k}" for k in range(config.n - 1)),
            tuple(f"{long}p{k}" for k in range(config.m)), str(it.meta.get("entity", "")))
        for it in task.items
    }
    annotated = ({a.id: a for a in read_claims(c.labels)} if c.labels is not None else {})
    driver = StageDriver(pool, dry_run=True)
    plan_claims(config, sources, {it.id: it for it in task.items}, driver, annotated)
    return [dataclasses.replace(e, basis=ESTIMATED, cached_samples=None,
                                note=e.note or "on placeholder answers")
            for e in driver.estimates]


# --------------------------------------------------------------------------- helpers


def _placeholder_answers(
    item: Item, fmt: AnswerFormat, counts: dict[str, int], max_tokens: int
) -> ItemSamples:
    """Answer samples not yet drawn, all distinct: ``counts[set]`` of each answer set, of
    the longest length (a choice item's answers are its option letters, taken in turn)."""
    long = placeholder_text(max_tokens)
    sets: dict[str, tuple[Sample, ...]] = {}
    k = 0
    for name, n in counts.items():
        made = []
        for _ in range(n):
            text = LETTERS[k % len(item.choices)] if fmt is AnswerFormat.CHOICE else f"{long}{k}"
            made.append(Sample(text, Answer(text, text)))
            k += 1
        sets[name] = tuple(made)
    return ItemSamples(item.id, sets, fmt, len(item.choices))


def _dummy_context(task: Task, config: RunConfig, logprobs: bool, grammar: bool) -> PlanContext:
    """A plan context whose perturbations, paraphrases and original samples are
    placeholders of their longest length, all distinct (so every request counts)."""
    prefix = placeholder_text(config.perturbation.sampling.max_tokens)
    para = placeholder_text(config.baselines.paraphrase_sampling.max_tokens)
    answer = placeholder_text(config.sampling.max_tokens)
    ctx = PlanContext(task, config, logprobs, grammar)
    for it in task.items:
        ctx.perturbations[it.id] = PerturbationSet(
            it.id, tuple(f"{prefix}{j}." for j in range(config.m)), config.m, 0, 0
        )
        ctx.paraphrases[it.id] = ParaphraseSet(
            it.id, tuple(f"{para}{j}" for j in range(config.baselines.paraphrases)),
            config.baselines.paraphrases, 0,
        )
        ctx.originals[it.id] = tuple(
            Sample(f"{answer}{i}", Answer(None, f"{answer}{i}")) for i in range(config.n)
        )
    return ctx


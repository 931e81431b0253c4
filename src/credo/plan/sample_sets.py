"""Generation plans per sample set: which requests a set needs and how its samples are built.

Every sample set a method may declare in ``needs`` (see :mod:`credo.methods.base`) has a
planner here, registered with :func:`sample_set`. A planner turns one item into an
:class:`ItemPlan`: the requests to run (through the cached executor) and a function
that builds the set's :class:`Sample` objects from the returned generations. Phase 1
sets depend only on the item; phase 2 sets (follow-ups) read the original samples. The
runner executes all plans of one phase and one model in a single executor call, so the
backend batches across items and sets, and every set is generated once per run and
reused by every method that reads it (Müller et al., §3.1).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from credo.config import RunConfig
from credo.generation.executor import PlannedRequest
from credo.perturb.context import PerturbationSet
from credo.perturb.paraphrase import ParaphraseSet
from credo.plan import samples
from credo.plan.ccp_alternatives import ccp_alternatives
from credo.plan.samples import Sample
from credo.registry import Registry
from credo.tasks.answers import Answer, answer_for
from credo.tasks.base import AnswerFormat, Item, Task
from credo.tasks.followups import (
    apricot_messages,
    label_messages,
    nli_messages,
    normalise_label_token,
    p_true_messages,
    parse_confidence,
    parse_nli,
    parse_verdict,
    verbalized_messages,
)
from credo.tasks.grading import is_correct
from credo.tasks.prompts import LETTERS, render_messages
from credo.types import Generation, GenerationRequest, Message, SamplingParams

Runner = Literal["model", "judge"]


@dataclass
class PlanContext:
    """What planners read: the task, the config, earlier stages' outputs."""

    task: Task
    config: RunConfig
    logprobs: bool
    grammar: bool = False
    perturbations: dict[str, PerturbationSet] = field(default_factory=dict)
    paraphrases: dict[str, ParaphraseSet] = field(default_factory=dict)
    originals: dict[str, tuple[Sample, ...]] = field(default_factory=dict)
    #: Adaptive sampling: the samples an item's set holds so far, by
    #: ``(item id, set name)``; a set not named holds the configured n (or m).
    sizes: dict[tuple[str, str], int] = field(default_factory=dict)

    def size(self, item: Item, name: str, configured: int) -> int:
        """How many samples ``item``'s set ``name`` holds: its adaptive size, else
        ``configured``. The first k samples of a request are the same for any k."""
        return self.sizes.get((item.id, name), configured)

    def original_messages(self, item: Item) -> tuple[Message, ...]:
        """The task prompt of ``item`` as the original samples saw it."""
        return render_messages(item, self.task.format, self.config.prompt_style)

    def followup_scope(self, item: Item) -> int:
        """How many of the item's original samples get follow-ups."""
        n = len(self.originals[item.id])
        k = self.config.baselines.followups
        return n if k is None else min(n, k)


@dataclass
class ItemPlan:
    """The requests one sample set needs for one item, and how to build its samples."""

    requests: list[PlannedRequest]
    build: Callable[[list[list[Generation]]], tuple[Sample, ...]]
    #: Per sample: whether its answer is right (None when the sample has no answer of
    #: its own, e.g. a follow-up). Filled by ``build``'s caller through ``correct``.
    correct: Callable[[Sample], bool | None] = lambda s: None


Planner = Callable[[Item, PlanContext], ItemPlan]


@dataclass(frozen=True)
class SampleSetSpec:
    """A registered sample set: its phase, which model generates it, and its planner."""

    name: str
    phase: int
    runner: Runner
    planner: Planner


SAMPLE_SETS: Registry[SampleSetSpec] = Registry("sample set")
"""Every sample set's planner by the set's name (:func:`sample_set` registers one)."""


def sample_set(
    name: str, *, phase: int = 1, runner: Runner = "model"
) -> Callable[[Planner], Planner]:
    """Register ``planner`` for sample set ``name``."""
    return SAMPLE_SETS.register(name, lambda planner: SampleSetSpec(name, phase, runner, planner))


def get_sample_set(name: str) -> SampleSetSpec:
    """The registered sample set ``name``; a user error lists the known ones."""
    return SAMPLE_SETS[name]


# --------------------------------------------------------------------------- helpers


def _answer_sample(
    text: str,
    item: Item,
    fmt: AnswerFormat,
    gen: Generation | None = None,
    ref: tuple[int, ...] = (),
) -> Sample:
    return Sample(
        text,
        answer_for(text, item, fmt),
        gen.logprobs if gen is not None else None,
        ref,
    )


def _answer_correct(item: Item, fmt: AnswerFormat) -> Callable[[Sample], bool | None]:
    if fmt is AnswerFormat.LONG_FORM or item.meta.get("grader"):
        # a judge decides (SimpleQA grades, FActScore support): the grading stage of
        # grading stage (credo.tasks.grading), after sampling; no answer of its own here
        return lambda s: None
    if not item.gold:  # a question without gold: its correctness is unknown
        return lambda s: None
    return lambda s: is_correct(s.answer, item, fmt)


def _greedy(max_tokens: int, top_logprobs: int = 0) -> SamplingParams:
    return SamplingParams(temperature=0.0, max_tokens=max_tokens, top_logprobs=top_logprobs)


# --------------------------------------------------------------------------- phase 1


@sample_set(samples.ORIGINAL)
def plan_original(item: Item, ctx: PlanContext) -> ItemPlan:
    """n samples of the task prompt, with top-k logprobs when the backend has them."""
    cfg = ctx.config
    params = cfg.sampling
    if ctx.logprobs and cfg.baselines.logprobs > params.top_logprobs:
        params = params.model_copy(update={"top_logprobs": cfg.baselines.logprobs})
    req = GenerationRequest(messages=ctx.original_messages(item), params=params)
    fmt = ctx.task.format

    def build(gens: list[list[Generation]]) -> tuple[Sample, ...]:
        return tuple(_answer_sample(g.text, item, fmt, g) for g in gens[0])

    return ItemPlan(
        [PlannedRequest(req, ctx.size(item, samples.ORIGINAL, cfg.n), f"{item.id}/original")],
        build,
        _answer_correct(item, fmt),
    )


@sample_set(samples.PERTURBED)
def plan_perturbed(item: Item, ctx: PlanContext) -> ItemPlan:
    """m samples (an adaptive run's size so far), sample j under the j-th context prefix
    (Wu et al., §3); a prefix reused k times is one request of k samples."""
    cfg = ctx.config
    fmt = ctx.task.format
    prefixes = ctx.perturbations[item.id].prefixes(ctx.size(item, samples.PERTURBED, cfg.m))
    uses = Counter(prefixes)
    order = list(uses)
    requests = [
        PlannedRequest(
            GenerationRequest(
                messages=render_messages(item, fmt, cfg.prompt_style, prefix=p),
                params=cfg.sampling,
            ),
            uses[p],
            f"{item.id}/perturbed",
        )
        for p in order
    ]
    picks: list[tuple[int, int]] = []
    seen: Counter[str] = Counter()
    for p in prefixes:
        picks.append((order.index(p), seen[p]))
        seen[p] += 1

    def build(gens: list[list[Generation]]) -> tuple[Sample, ...]:
        return tuple(_answer_sample(gens[r][j].text, item, fmt) for r, j in picks)

    return ItemPlan(requests, build, _answer_correct(item, fmt))


@sample_set(samples.PARAPHRASED)
def plan_paraphrased(item: Item, ctx: PlanContext) -> ItemPlan:
    """One sample of the task prompt per kept paraphrase of the question."""
    cfg = ctx.config
    fmt = ctx.task.format
    kept = ctx.paraphrases[item.id].kept if item.id in ctx.paraphrases else ()
    requests = [
        PlannedRequest(
            GenerationRequest(
                messages=render_messages(
                    dataclasses.replace(item, question=p), fmt, cfg.prompt_style
                ),
                params=cfg.sampling,
            ),
            1,
            f"{item.id}/paraphrased",
        )
        for p in kept
    ]

    def build(gens: list[list[Generation]]) -> tuple[Sample, ...]:
        return tuple(_answer_sample(g[0].text, item, fmt) for g in gens)

    return ItemPlan(requests, build, _answer_correct(item, fmt))


@sample_set(samples.LABEL)
def plan_label(item: Item, ctx: PlanContext) -> ItemPlan:
    """One greedy letter-only answer with the top logprobs of its tokens (Müller et al., §3.4),
    restricted to the option letters by a grammar where the backend supports one."""
    fmt = ctx.task.format
    if fmt != AnswerFormat.CHOICE or not ctx.logprobs:
        return ItemPlan([], lambda gens: ())
    params = _greedy(4, ctx.config.baselines.label_top_logprobs)
    if ctx.grammar:
        # Structured decoding (Müller et al., §3.6): the reply is one option letter. The logprobs
        # are still those of the unrestricted distribution, so the label mass shows
        # how much probability the letters get on their own (task comprehension).
        letters = " | ".join(f'"{c}"' for c in LETTERS[: len(item.choices)])
        params = params.model_copy(update={"grammar": f"root ::= {letters}", "max_tokens": 1})
    req = GenerationRequest(messages=label_messages(item), params=params)

    def build(gens: list[list[Generation]]) -> tuple[Sample, ...]:
        return (_answer_sample(gens[0][0].text, item, fmt, gens[0][0]),)

    return ItemPlan([PlannedRequest(req, 1, f"{item.id}/label")], build, _answer_correct(item, fmt))


@sample_set(samples.APRICOT)
def plan_apricot(item: Item, ctx: PlanContext) -> ItemPlan:
    """Per option, k sampled chain-of-thought verdicts on whether it is correct (Müller et
    al., §3.6)."""
    cfg = ctx.config
    if ctx.task.format != AnswerFormat.CHOICE:
        return ItemPlan([], lambda gens: ())
    k = cfg.baselines.apricot_samples or cfg.n
    params = cfg.sampling.model_copy(
        update={"max_tokens": cfg.baselines.apricot_max_tokens, "top_logprobs": 0}
    )
    requests = [
        PlannedRequest(
            GenerationRequest(messages=apricot_messages(item, o), params=params),
            k,
            f"{item.id}/apricot/{LETTERS[o]}",
        )
        for o in range(len(item.choices))
    ]

    def build(gens: list[list[Generation]]) -> tuple[Sample, ...]:
        return tuple(
            Sample(g.text, Answer(parse_verdict(g.text), g.text), None, (o,))
            for o, option_gens in enumerate(gens)
            for g in option_gens
        )

    def correct(s: Sample) -> bool | None:
        # A verdict is right when it calls the gold option correct and any other one
        # incorrect; an unparsable verdict is wrong (Müller et al., App. A.11.3).
        if s.answer.value is None:
            return False
        return bool(s.answer.value) == (LETTERS[s.ref[0]] == item.gold)

    return ItemPlan(requests, build, correct)


# --------------------------------------------------------------------------- phase 2


@sample_set(samples.VERBALIZED, phase=2)
def plan_verbalized(item: Item, ctx: PlanContext) -> ItemPlan:
    """After original sample i, greedily ask for the probability that it is correct."""
    originals = ctx.originals[item.id]
    base = ctx.original_messages(item)
    scope = range(ctx.followup_scope(item))
    requests = [
        PlannedRequest(
            GenerationRequest(
                messages=verbalized_messages(base, originals[i].text), params=_greedy(16)
            ),
            1,
            f"{item.id}/verbalized/{i}",
        )
        for i in scope
    ]

    def build(gens: list[list[Generation]]) -> tuple[Sample, ...]:
        return tuple(
            Sample(g[0].text, Answer(parse_confidence(g[0].text), g[0].text), None, (i,))
            for i, g in zip(scope, gens, strict=True)
        )

    return ItemPlan(requests, build)


@sample_set(samples.P_TRUE, phase=2)
def plan_p_true(item: Item, ctx: PlanContext) -> ItemPlan:
    """After original sample i, the P(True) question, one greedy token with top logprobs."""
    if not ctx.logprobs:
        return ItemPlan([], lambda gens: ())
    originals = ctx.originals[item.id]
    scope = range(ctx.followup_scope(item))
    params = _greedy(1, ctx.config.baselines.label_top_logprobs)
    requests = [
        PlannedRequest(
            GenerationRequest(messages=p_true_messages(item, originals[i].text), params=params),
            1,
            f"{item.id}/p_true/{i}",
        )
        for i in scope
    ]

    def build(gens: list[list[Generation]]) -> tuple[Sample, ...]:
        return tuple(
            Sample(
                g[0].text,
                Answer(normalise_label_token(g[0].text) or None, g[0].text),
                g[0].logprobs,
                (i,),
            )
            for i, g in zip(scope, gens, strict=True)
        )

    return ItemPlan(requests, build)


@sample_set(samples.NLI, phase=2, runner="judge")
def plan_nli(item: Item, ctx: PlanContext) -> ItemPlan:
    """CCP's NLI step: per original sample and judged token alternative, one greedy verdict."""
    originals = ctx.originals[item.id]
    min_prob = ctx.config.baselines.ccp_min_prob
    refs: list[tuple[int, int, int]] = []
    requests: list[PlannedRequest] = []
    for i in range(ctx.followup_scope(item)):
        lps = originals[i].logprobs
        if not lps:
            continue
        for pos, rank, prefix, tok, alt in ccp_alternatives(lps, min_prob):
            refs.append((i, pos, rank))
            requests.append(
                PlannedRequest(
                    GenerationRequest(
                        messages=nli_messages(prefix + tok, prefix + alt), params=_greedy(4)
                    ),
                    1,
                    f"{item.id}/nli/{i}",
                )
            )

    def build(gens: list[list[Generation]]) -> tuple[Sample, ...]:
        return tuple(
            Sample(g[0].text, Answer(parse_nli(g[0].text), g[0].text), None, ref)
            for ref, g in zip(refs, gens, strict=True)
        )

    return ItemPlan(requests, build)

"""Stages and the one driver that runs them (design.md "A stage").

A :class:`Stage` is the unit every command is built from: a ``name`` (its ledger stage),
the pool ``role`` it asks, ``plan(items, context)`` (the requests of every unit: an
item, or one model's item in a strength run) and ``read(generations)`` (what the stage
makes of the generations of the units whose requests all succeeded). A stage never
calls a model: the :class:`StageDriver` does, for every command (``credo run``'s sample
sets and its adaptive rounds, ``credo strength run``'s six stages, FActScore's claim
checks), so each gets from one place

* the cache and the ledger per stage: every request goes through the pool's cached
  executor of the stage's role, counted under the stage's name;
* one executor call per role for the stages run together (the backend batches across
  items and stages);
* the budget stop: the pool's ledger stops dispatching at ``max_cost_usd``
  (:class:`~credo.errors.BudgetReached`);
* failed requests: :class:`~credo.errors.RequestsFailed` is caught, every other unit is
  read, the failed units go into ``incomplete`` (a rerun generates only what is
  missing), and :meth:`StageDriver.outcome` is the run's outcome
  (:func:`credo.pipeline.ending.decide_outcome`: exit 3 when incomplete);
* preflight of the stages' roles (:meth:`StageDriver.preflight`:
  :meth:`~credo.generation.pool.ModelPool.preflight`);
* the dry run: with ``dry_run`` the driver calls no model; it counts every stage's
  planned requests (:func:`count_planned`: keys, samples, cached samples, backend calls,
  prompt and completion tokens, cost at the role's prices) into
  :attr:`StageDriver.estimates`, and hands each stage its cached generations where the
  cache holds them, else placeholders (:meth:`Stage.placeholder`), so the later stages
  are planned on something of the right shape. A stage planned on a placeholder is
  ``estimated``, not ``planned``.

The :class:`Stage` shape and the runner the driver extends,
:class:`~credo.generation.stage.StageRunner` (plan, one executor call per role, failed
units into ``incomplete``, read: the algorithm itself), live in
:mod:`credo.generation.stage` (below the tasks, whose graders run stages too: FActScore's
claim checks); the driver adds the pool (each role's executor), the preflight and the
dry run. This module re-exports both.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from credo.generation.executor import PlannedRequest, sample_blocks
from credo.generation.pool import PROBE_STAGE, ModelPool
from credo.generation.stage import (
    CHARS_PER_TOKEN,
    Generated,
    RoleRequests,
    Stage,
    StagePlan,
    StageRunner,
    placeholder_text,
)
from credo.models.openai_probe import (
    MAX_PROBE_CHOICES,
    MAX_PROBE_REQUESTS,
    PROBE_MAX_TOKENS,
    PROBE_PROMPT,
)
from credo.pipeline.checks import RUNNER_ROLES, warn_unpriced
from credo.pipeline.ending import Outcome, decide_outcome
from credo.plan.sample_sets import PlanContext, get_sample_set
from credo.plan.samples import NLI, Sample
from credo.types import Generation, GenerationRequest, Message

log = logging.getLogger(__name__)

__all__ = [
    "CHARS_PER_TOKEN",
    "ESTIMATED",
    "PLANNED",
    "UNKNOWN",
    "SampleSetStage",
    "Stage",
    "StageDriver",
    "StageEstimate",
    "StagePlan",
    "StageRunner",
    "count_planned",
    "placeholder_text",
    "probe_estimate",
    "prompt_tokens",
]

PLANNED = "planned"
ESTIMATED = "estimated"
UNKNOWN = "unknown"

@dataclass
class StageEstimate:
    """What one stage would ask of one model. ``basis`` is ``planned`` (the requests the
    run will send, cache counted), ``estimated`` (from the config or placeholder
    replies; ``cached_samples`` None: unknown) or ``unknown`` (counts 0, ``note`` says
    why)."""

    stage: str
    role: str
    model: str
    basis: str
    note: str = ""
    requests: int = 0
    samples: int = 0
    cached_samples: int | None = 0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None


def prompt_tokens(messages: Sequence[Message]) -> int:
    """The prompt estimate of ``messages``: their characters / :data:`CHARS_PER_TOKEN`,
    rounded up."""
    return math.ceil(sum(len(m.content) for m in messages) / CHARS_PER_TOKEN)


def count_planned(
    pool: ModelPool,
    stage: str,
    role: str,
    planned: Sequence[PlannedRequest],
    basis: str,
    note: str = "",
) -> StageEstimate:
    """Count ``planned`` as the role's executor would run it: distinct keys, samples,
    cached samples (``planned`` only), blocks of missing samples (one call each, or one
    per sample on a backend without parallel samples), tokens and cost."""
    ex = pool.executor(role)
    parallel = ex.model.capabilities.parallel_samples
    wanted: dict[str, int] = {}
    template: dict[str, GenerationRequest] = {}
    for p in planned:
        k = ex.key(p.request)
        wanted[k] = max(wanted.get(k, 0), p.n)
        template.setdefault(k, p.request)
    est = StageEstimate(stage, role, ex.model.identity, basis, note,
                        cached_samples=0 if basis == PLANNED else None)
    for k, n in wanted.items():
        cached = pool.store.cached_indices(k) if basis == PLANNED else set()
        missing = [i for i in range(n) if i not in cached]
        calls = len(sample_blocks(missing, ex.max_block)) if parallel else len(missing)
        req = template[k]
        est.requests += 1
        est.samples += n
        if est.cached_samples is not None:
            est.cached_samples += n - len(missing)
        est.calls += calls
        est.prompt_tokens += calls * prompt_tokens(req.messages)
        est.completion_tokens += len(missing) * req.params.max_tokens
    prices = pool.prices(role)
    if prices is not None:
        est.cost_usd = prices.cost(est.prompt_tokens, est.completion_tokens)
    return est


def probe_estimate(pool: ModelPool, role: str) -> StageEstimate:
    """A served model's probe (no probe stored for it yet): how many requests and
    choices it asks depends on the server's answers, so at most
    :data:`~credo.models.openai_probe.MAX_PROBE_REQUESTS` calls and
    :data:`~credo.models.openai_probe.MAX_PROBE_CHOICES` choices of at most
    :data:`~credo.models.openai_probe.PROBE_MAX_TOKENS` tokens."""
    calls = MAX_PROBE_REQUESTS
    est = StageEstimate(
        PROBE_STAGE, role, pool.model(role, probe=False).identity, ESTIMATED,
        f"at most {calls} tiny requests, once per served model (then stored)",
        requests=calls, samples=MAX_PROBE_CHOICES, cached_samples=None, calls=calls,
        prompt_tokens=calls * prompt_tokens((Message(role="user", content=PROBE_PROMPT),)),
        completion_tokens=MAX_PROBE_CHOICES * PROBE_MAX_TOKENS,
    )
    prices = pool.prices(role)
    if prices is not None:
        est.cost_usd = prices.cost(est.prompt_tokens, est.completion_tokens)
    return est


class StageDriver(StageRunner):
    """The stage runner of a command over ``pool`` (the module docstring): each stage's
    role on the pool's cached executor of that role (the cache, the ledger per stage,
    the budget stop, failed requests into ``incomplete``:
    :class:`~credo.generation.stage.StageRunner`), the preflight of the roles and, with
    ``dry_run``, the count of every stage instead of its calls."""

    def __init__(
        self, pool: ModelPool, incomplete: dict[str, str] | None = None, dry_run: bool = False
    ) -> None:
        super().__init__(lambda role: pool.executor(role), incomplete)
        self.pool = pool
        self.dry_run = dry_run
        #: The dry run's count per stage, in the order the stages ran.
        self.estimates: list[StageEstimate] = []
        #: Whether a stage has read a placeholder (dry run): the later ones are estimated.
        self._guessed = False

    def preflight(
        self, roles: Sequence[str], *, reach: bool = True, max_cost_usd: float | None = None
    ) -> None:
        """Every role of ``roles`` checked before the first call, the one preflight of
        every command (:meth:`ModelPool.preflight`: built with its options, embedded
        weights present, a served model's server answers); with ``reach`` False or in
        the dry run each is built (its options checked) and no server is contacted, and
        the dry run counts the probe each served model without a stored one would send
        (:func:`probe_estimate`). With ``max_cost_usd``, the models without prices are
        named in a warning (:func:`~credo.pipeline.checks.warn_unpriced`)."""
        roles = list(dict.fromkeys(roles))
        if reach and not self.dry_run:
            self.pool.preflight(roles)
        else:
            for role in roles:
                self.pool.model(role, probe=False)
        if self.dry_run:
            self.estimates += [probe_estimate(self.pool, role)
                               for role, _ in self.pool.unprobed(roles)]
        if max_cost_usd is not None:
            warn_unpriced(self.pool, roles)

    def _every_role(self) -> bool:
        """The dry run counts a stage that asks nothing too (zeros)."""
        return self.dry_run

    def _answer(self, asked: RoleRequests) -> list[list[Generation] | None]:
        """One role's requests executed (:meth:`StageRunner._answer`), or in the dry run
        counted and answered without a model (:meth:`_dry`)."""
        return self._dry(asked) if self.dry_run else super()._answer(asked)

    def _dry(self, asked: RoleRequests) -> list[list[Generation] | None]:
        """The dry run of one role's requests: each of its stages counted
        (:func:`count_planned`; a stage that cannot be counted, ``uncounted``, is
        ``unknown``), each request answered from the cache when it holds all its samples,
        else by its stage's placeholder (no model is called)."""
        role, planned, stages = asked.role, asked.planned, asked.asking
        basis = asked.basis or (ESTIMATED if self._guessed else PLANNED)
        for stage in dict.fromkeys(asked.of_role):
            if stage.uncounted:
                self.estimates.append(StageEstimate(
                    stage.name, role, self.pool.model(role, probe=False).identity, UNKNOWN,
                    stage.uncounted, cached_samples=None))
                continue
            mine = [p for p, s in zip(planned, stages, strict=True) if s is stage]
            self.estimates.append(
                count_planned(self.pool, stage.name, role, mine, basis, stage.note))
        ex = self.pool.executor(role)
        out: list[list[Generation] | None] = []
        for p, stage in zip(planned, stages, strict=True):
            key = ex.key(p.request)
            if self.pool.store.cached_indices(key) >= set(range(p.n)):
                out.append(self.pool.store.get(key, range(p.n)))
            else:
                self._guessed = True
                out.append([Generation(stage.placeholder(p.request)) for _ in range(p.n)])
        return out

    @property
    def stopped_by_budget(self) -> bool:
        """Whether the cost budget (``max_cost_usd``) left requests undispatched."""
        return self.pool.ledger.stopped

    def outcome(self, neutrality: Mapping[str, Any] | None = None, gate: str = "off") -> Outcome:
        """The command's outcome (:func:`~credo.pipeline.ending.decide_outcome`)."""
        return decide_outcome(self.incomplete, self.stopped_by_budget, neutrality or {}, gate)


UNCOUNTED = {NLI: "depends on the token alternatives of the samples"}
"""The sample sets the dry run cannot count, and why."""

SetOut = dict[str, dict[str, tuple[tuple[Sample, ...], tuple[bool | None, ...]]]]
"""Per item id, per sample set: the samples and each one's correctness."""


class SampleSetStage(Stage):
    """Sample set ``name`` of every item (:mod:`credo.plan.sample_sets`), read into ``out``:
    ``credo run``'s original, perturbed, paraphrased, label, APriCoT, follow-up and NLI
    samples, and the adaptive rounds."""

    def __init__(self, name: str, out: SetOut) -> None:
        self.name = name
        self._spec = get_sample_set(name)
        self.role = RUNNER_ROLES[self._spec.runner]
        self.description = name
        self.uncounted = UNCOUNTED.get(name, "")
        self._out = out
        self._plans: dict[str, Any] = {}

    def plan(self, items: Sequence[Any], context: PlanContext) -> StagePlan:
        """Each item's plan by the set's planner."""
        self._plans = {it.id: self._spec.planner(it, context) for it in items}
        return {i: list(p.requests) for i, p in self._plans.items()}

    def read(self, generations: Generated) -> None:
        """Build each complete item's samples and their correctness into ``out``."""
        for unit, chunk in generations.items():
            plan = self._plans[unit]
            samples = plan.build(chunk)
            self._out.setdefault(unit, {})[self.name] = (
                samples, tuple(plan.correct(s) for s in samples))

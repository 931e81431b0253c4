"""The shape of a stage (a name, the role it asks, ``plan(items, context)`` and
``read(generations)``) and the one runner of stages, :class:`StageRunner`: plan, one
executor call per role, failed units into ``incomplete``, read. Both sit here, in the
generation layer, so that every layer that plans requests (tasks' graders,
perturbations, the strength pipeline, the runner's sample sets) can state and run its
stages without reaching up; the pipeline's :class:`credo.pipeline.stages.StageDriver`
is the runner over a model pool (preflight, the dry run). A stage decides nothing about
models: it says what it asks of its role and what it makes of the answers.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

from credo.errors import RequestsFailed
from credo.generation.executor import ExecutionStats, Executor, PlannedRequest
from credo.types import Generation, GenerationRequest

__all__ = ["CHARS_PER_TOKEN", "Generated", "RoleRequests", "Stage", "StagePlan",
           "StageRunner", "placeholder_text"]

CHARS_PER_TOKEN = 4
"""Characters per token of the prompt estimate (English text with common tokenizers)."""

StagePlan = dict[str, list[PlannedRequest]]
"""A stage's plan: per unit (an item id...), its requests in order (possibly none)."""

Generated = dict[str, list[list[Generation]]]
"""Per unit whose requests all succeeded: the generations of each of its requests."""


class Stage(ABC):
    """One stage of a command: a name (its ledger stage), the role it asks, its plan and
    its reading of the generations. Subclasses set ``name`` and ``role`` and may keep
    what :meth:`plan` worked out for :meth:`read` (a stage object serves one plan)."""

    name: str
    role: str
    #: What the progress bar says while the stage's requests run.
    description: str = ""
    #: Why a unit is incomplete when one of its requests of this stage failed (before
    #: " (requests failed)"); None: "<name> samples missing".
    missing: str | None = None
    #: What the dry run's table says of this stage's count (``credo run --dry-run``).
    note: str = ""
    #: Why the dry run cannot count this stage's requests (they depend on what the
    #: samples hold: CCP's NLI judgments); empty: it counts them.
    uncounted: str = ""

    def incomplete_reason(self) -> str:
        """What ``incomplete`` says of a unit one of whose requests failed."""
        return f"{self.missing or self.name + ' samples missing'} (requests failed)"

    @abstractmethod
    def plan(self, items: Any, context: Any) -> StagePlan:
        """The requests of every unit of ``items`` (items, or per unit what the stage
        reads: a strength run's rows...) given ``context``; nothing is called."""

    @abstractmethod
    def read(self, generations: Generated) -> Any:
        """What the stage makes of the generations of the complete units."""

    def placeholder(self, request: GenerationRequest) -> str:
        """A reply of the right shape for the dry run (a sample not drawn yet): by
        default a text of ``max_tokens`` tokens by the estimate."""
        return placeholder_text(request.params.max_tokens)


def placeholder_text(tokens: int) -> str:
    """A text of about ``tokens`` tokens by the estimate (a sample not yet drawn)."""
    return "x" * (CHARS_PER_TOKEN * tokens)


Asked = dict[tuple[int, str, int], list[Generation] | None]
"""Per (stage's position, unit, request's position): its generations (None: failed)."""


@dataclasses.dataclass(frozen=True)
class RoleRequests:
    """One role's requests in one :meth:`StageRunner.run`, answered together: the
    role, its stages (``of_role``), the stage of each request (``asking``), the
    requests (``planned``), what the progress bar says (``description``; None: the first
    asking stage's) and a dry run's basis of the counts (``basis``)."""

    role: str
    of_role: list[Stage]
    asking: list[Stage]
    planned: list[PlannedRequest]
    description: str | None = None
    basis: str | None = None


class StageRunner:
    """Runs stages: the one home of plan -> execute -> mark incomplete -> read.

    :meth:`run` plans every stage on the same items (units already in ``incomplete``
    get no request), executes their requests in one call of each role's executor (a
    request counted in the ledger under its stage's name unless it names its own),
    puts a unit one of whose requests failed (:class:`~credo.errors.RequestsFailed`:
    the retries ran out, the cost budget stopped dispatching) into ``incomplete`` and
    has each stage read its complete units. ``executor(role)`` gives the executor of a
    role; it is asked only when the role has requests (a run whose answers need no
    judge builds none). With ``strict`` a failed request is not caught: the
    ``RequestsFailed`` reaches the caller, after everything else was generated and
    cached.

    :meth:`on` is a runner on one executor, whatever the stages' roles (a kernel,
    grader or writer used on its own, ``credo strength agree``); the pipeline's
    :class:`credo.pipeline.stages.StageDriver` is this runner over a model pool, with
    the preflight of the roles and the dry run.
    """

    def __init__(
        self,
        executor: Callable[[str], Executor],
        incomplete: dict[str, str] | None = None,
        *,
        strict: bool = False,
    ) -> None:
        self._executor_of = executor
        #: Why each incomplete unit is (shared with the caller when it passed its own).
        self.incomplete: dict[str, str] = {} if incomplete is None else incomplete
        #: The counts of the executor call each stage's requests went in, by stage name,
        #: for the latest run of that stage (absent: it asked nothing; the stages of one
        #: role run together share one call).
        self.executed: dict[str, ExecutionStats] = {}
        self.strict = strict

    @classmethod
    def on(
        cls, executor: Executor, incomplete: dict[str, str] | None = None, *,
        strict: bool = False,
    ) -> StageRunner:
        """A runner whose every stage runs on ``executor``, whatever its role."""
        return cls(lambda _role: executor, incomplete, strict=strict)

    def executor(self, role: str) -> Executor:
        """The executor of ``role``."""
        return self._executor_of(role)

    def run(
        self,
        stages: Sequence[Stage],
        items: Any,
        context: Any = None,
        description: str | None = None,
        *,
        basis: str | None = None,
    ) -> list[Any]:
        """Plan every stage on ``items`` and ``context``, execute their requests (one
        executor call per role, each request counted under its stage), and return what
        each stage read, in order. Units already in ``incomplete`` get no request; a
        unit one of whose requests failed goes into ``incomplete`` and is not read.
        ``description`` is what the progress bar says (default: the first asking
        stage's). ``basis`` is a dry run's basis of these stages' counts (the driver's;
        None: planned until a stage has read a placeholder)."""
        plans: list[StagePlan] = []
        for stage in stages:
            plan = stage.plan(items, context)
            plans.append({u: reqs for u, reqs in plan.items() if u not in self.incomplete})
            self.executed.pop(stage.name, None)
        every = self._every_role()
        by_role: dict[str, list[tuple[int, str, int]]] = {}
        flat: dict[str, list[PlannedRequest]] = {}
        for s, (stage, plan) in enumerate(zip(stages, plans, strict=True)):
            if every:  # a stage that asks nothing is answered too (a dry run counts it)
                by_role.setdefault(stage.role, [])
                flat.setdefault(stage.role, [])
            for unit, reqs in plan.items():
                for j, r in enumerate(reqs):
                    by_role.setdefault(stage.role, []).append((s, unit, j))
                    flat.setdefault(stage.role, []).append(
                        dataclasses.replace(r, stage=r.stage or stage.name))
        got: Asked = {}
        for role, where in by_role.items():
            asking = [stages[w[0]] for w in where]
            of_role = [st for st in stages if st.role == role]
            gens = self._answer(RoleRequests(role, of_role, asking, flat[role], description,
                                             basis))
            got.update(zip(where, gens, strict=True))
        return self._read(stages, plans, got)

    def _every_role(self) -> bool:
        """Whether :meth:`_answer` is asked for a role none of whose stages has a request
        (a dry run counts such a stage: zeros)."""
        return False

    def _answer(self, asked: RoleRequests) -> list[list[Generation] | None]:
        """The generations of one role's requests, from one call of its executor, whose
        counts go into :attr:`executed` under each asking stage; what failed (or the
        budget left) is None, unless ``strict``."""
        if not asked.planned:
            return []
        first = asked.asking[0]
        ex = self.executor(asked.role)
        try:
            gens: list[list[Generation] | None] = list(
                ex.execute(asked.planned, asked.description or first.description or first.name))
        except RequestsFailed as e:  # every other request is done; those units are incomplete
            if self.strict:
                raise
            gens = list(e.results)
        last = ex.last_stats
        if last is not None:
            for stage in asked.asking:
                self.executed[stage.name] = last
        return gens

    def _read(self, stages: Sequence[Stage], plans: list[StagePlan], got: Asked) -> list[Any]:
        """What each stage reads of its complete units; a unit with a failed request goes
        into ``incomplete``."""
        out = []
        for s, (stage, plan) in enumerate(zip(stages, plans, strict=True)):
            generated: Generated = {}
            for unit, reqs in plan.items():
                chunk = [got[(s, unit, j)] for j in range(len(reqs))]
                if any(g is None for g in chunk):
                    self.incomplete.setdefault(unit, stage.incomplete_reason())
                    continue
                generated[unit] = [g for g in chunk if g is not None]
            out.append(stage.read(generated))
        return out

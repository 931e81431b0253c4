"""The shape of a stage: a name, the role it asks, ``plan(items, context)``
and ``read(generations)``. The one driver that runs stages is
:class:`credo.pipeline.stages.StageDriver`; the shape sits here, in the generation
layer, so that every layer that plans requests (tasks' graders, perturbations, the
strength pipeline, the runner's sample sets) can state its stages without reaching up.
A stage decides nothing about models: it says what it asks of its role and what it
makes of the answers.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from typing import Any

from credo.errors import RequestsFailed
from credo.generation.executor import ExecutionStats, Executor, PlannedRequest
from credo.types import Generation, GenerationRequest

__all__ = ["CHARS_PER_TOKEN", "Generated", "Stage", "StagePlan", "execute_stage",
           "placeholder_text"]

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


def execute_stage(
    stage: Stage, executor: Executor, items: Any, context: Any, incomplete: dict[str, str]
) -> tuple[Any, ExecutionStats | None]:
    """One stage on one executor, for a caller without the pipeline's driver (a kernel
    or grader used on its own): its plan (units already in ``incomplete`` left out) in
    one cached call, failed units into ``incomplete``, and what the stage read, with the
    call's counts (None: nothing was asked). The pipeline runs stages through
    :class:`credo.pipeline.stages.StageDriver`, which does the same for several stages
    and roles, and the dry run."""
    plan = {u: r for u, r in stage.plan(items, context).items() if u not in incomplete}
    flat = [dataclasses.replace(r, stage=r.stage or stage.name)
            for reqs in plan.values() for r in reqs]
    gens: list[list[Generation] | None] = []
    if flat:
        try:
            gens = list(executor.execute(flat, stage.description or stage.name))
        except RequestsFailed as e:  # every other request is done; those units are incomplete
            gens = list(e.results)
    out: Generated = {}
    k = 0
    for unit, reqs in plan.items():
        chunk = gens[k : k + len(reqs)]
        k += len(reqs)
        if any(g is None for g in chunk):
            incomplete.setdefault(unit, stage.incomplete_reason())
        else:
            out[unit] = [g for g in chunk if g is not None]
    return stage.read(out), (executor.last_stats if flat else None)

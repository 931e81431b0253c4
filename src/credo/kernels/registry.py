"""Kernel registry: ``@kernel("name")`` registers a Gram-matrix function, and
``@kernel_builder("name")`` how the kernel builds itself for a run from its config.

A kernel with no builder is used as registered (the indicator kernel). A builder gets a
:class:`KernelContext` (the run's items and answer samples, what the kernel needs: the
judge role's executor and settings, the embedder and its cache; a stats dict to report
into) and returns :class:`ItemKernels`: the Gram function of each item. A kernel sees
neither the run's config nor the model pool. The embedding kernel builds with
the run's embedder and its persistent cache; the judge kernel plans its requests
(:func:`credo.kernels.judge.plan_judge_stage`, which the dry run plans with too) and
sends them through the judge role's executor. The
pipeline builds every kernel its methods name with :func:`build_kernel`, no if/elif.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np

from credo.generation.stage import StageRunner
from credo.registry import Registry

if TYPE_CHECKING:
    from pathlib import Path

    from credo.generation.executor import Executor
    from credo.models.embedders import Embedder
    from credo.plan.samples import ItemSamples
    from credo.tasks.base import Item, Task

Kernel = Callable[[Sequence[Hashable], Sequence[Hashable]], np.ndarray]
"""``gram(xs, ys) -> K`` with ``K[i, j] = k(xs[i], ys[j])``, shape ``(len(xs), len(ys))``."""

KERNELS: Registry[Kernel] = Registry("kernel")
"""Every Gram-matrix function by name (:func:`kernel` registers one)."""


class ItemKernels(Protocol):
    """A kernel built for one run: the Gram function of each item."""

    def kernel_for(self, item_id: str) -> Kernel: ...


@dataclass(frozen=True)
class SameForEveryItem:
    """A kernel that does not depend on the item (indicator, a fixed embedding)."""

    gram: Kernel

    def kernel_for(self, item_id: str) -> Kernel:
        return self.gram


@dataclass
class KernelContext:
    """What a kernel builder reads: the run's task, every item's answer samples
    (original, perturbed, paraphrased), the run's stats, and what the kernels need, not
    the run's config or model pool: ``judge`` returns the judge role's cached executor
    (built on first call: a run without the judge kernel builds none) and
    ``judge_max_tokens`` bounds a verdict; ``embedder`` returns the embedding kernel's
    embedder and ``embedding_cache`` is its persistent cache file (None: in memory). A
    builder that could not get what an item needs (a judge request whose retries ran
    out) says why in ``incomplete``; the run leaves that item out and marks it."""

    task: Task
    samples: Sequence[ItemSamples]
    judge: Callable[[], Executor] | None = None
    judge_max_tokens: int = 8
    embedder: Callable[[], Embedder] | None = None
    embedding_cache: Path | None = None
    stats: dict[str, int | float | str] = field(default_factory=dict)
    incomplete: dict[str, str] = field(default_factory=dict)
    #: What runs a kernel's stages (the cache, the ledger, failed units into
    #: ``incomplete``): the run's :class:`~credo.pipeline.stages.StageDriver`; None: a
    #: :class:`~credo.generation.stage.StageRunner` on ``judge()``, sharing
    #: ``incomplete`` (a stage with requests and no ``judge`` is a ValueError).
    runner: StageRunner | None = None

    def __post_init__(self) -> None:
        if self.runner is None:
            self.runner = StageRunner(self._judge_executor, self.incomplete)

    def _judge_executor(self, role: str) -> Executor:
        """The judge's executor, for a stage of any role (none: a ValueError)."""
        if self.judge is None:
            raise ValueError("the judge kernel needs the judge's executor (KernelContext.judge)")
        return self.judge()

    @property
    def items(self) -> Mapping[str, Item]:
        """The task's items by id."""
        return {it.id: it for it in self.task.items}


KernelBuilder = Callable[[KernelContext], ItemKernels]
BUILDERS: Registry[KernelBuilder] = Registry("kernel builder")
"""How a kernel builds itself for a run, by kernel name (:func:`kernel_builder`)."""


def kernel(name: str) -> Callable[[Kernel], Kernel]:
    """Register a Gram-matrix function under ``name``."""
    return KERNELS.register(name)


def kernel_builder(name: str) -> Callable[[KernelBuilder], KernelBuilder]:
    """Register how kernel ``name`` builds itself for a run (see the module docstring)."""
    return BUILDERS.register(name)


def get_kernel(name_or_fn: str | Kernel) -> Kernel:
    """The kernel registered as ``name_or_fn``, or ``name_or_fn`` itself if callable."""
    return name_or_fn if callable(name_or_fn) else KERNELS[name_or_fn]


def build_kernel(name: str, ctx: KernelContext) -> ItemKernels:
    """Kernel ``name`` built for the run of ``ctx`` (its builder, or the plain function)."""
    builder = BUILDERS.get(name)
    return builder(ctx) if builder is not None else SameForEveryItem(get_kernel(name))

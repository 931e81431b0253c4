"""Method registry: each scoring method is a pure function of cached samples.

``@method("c3", needs=("original", "perturbed"))`` registers a scorer. A scorer takes the
:class:`ItemSamples` of one item and the kernel to compare answers with, and returns a
credibility score in [0, 1]. It never calls a model: the runner plans every sample set
that the selected methods declare in ``needs``, generates each one once, and hands every
method the same cached samples (002 §3's shared-generation design).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field, replace

from credo.kernels.registry import Kernel
from credo.tasks.answers import Answer

ORIGINAL = "original"
PERTURBED = "perturbed"


@dataclass(frozen=True)
class Sample:
    """One cached generation and the answer extracted from it."""

    text: str
    answer: Answer

    @property
    def key(self) -> Hashable | None:
        """The normalised answer for the indicator kernel; None when unparsable."""
        return self.answer.value


@dataclass(frozen=True)
class ItemSamples:
    """Every sample set generated for one item, by set name (``original``, ``perturbed``)."""

    item_id: str
    sets: Mapping[str, tuple[Sample, ...]] = field(default_factory=dict)

    def answers(self, name: str) -> list[Hashable | None]:
        """Normalised answers of sample set ``name`` in sample order."""
        try:
            return [s.key for s in self.sets[name]]
        except KeyError:
            raise KeyError(f"item {self.item_id!r} has no {name!r} samples") from None


Scorer = Callable[[ItemSamples, Kernel], float]


@dataclass(frozen=True)
class MethodSpec:
    """A registered method: its scorer, the sample sets it needs, and a one-line summary."""

    name: str
    scorer: Scorer
    needs: tuple[str, ...]
    summary: str
    kernel: str | None = None
    """The kernel this method scores with; None = the run's ``kernel`` (``c3@judge``)."""


METHODS: dict[str, MethodSpec] = {}


def method(name: str, *, needs: tuple[str, ...], summary: str = "") -> Callable[[Scorer], Scorer]:
    """Register ``scorer`` as method ``name`` needing the sample sets ``needs``."""

    def register(scorer: Scorer) -> Scorer:
        if name in METHODS:
            raise ValueError(f"method {name!r} is registered twice")
        doc = (scorer.__doc__ or "").strip().splitlines()
        METHODS[name] = MethodSpec(name, scorer, tuple(needs), summary or (doc[0] if doc else ""))
        return scorer

    return register


def get_method(name: str) -> MethodSpec:
    """The registered method ``name``; a ValueError lists the known ones.

    ``"<method>@<kernel>"`` (``c3@embedding``, ``self_consistency@judge``) is the method
    scored with that kernel instead of the run's, so one run can report one method under
    several kernels (000 App. H: the kernel is a choice of the task's answer format).
    """
    base, sep, kernel_name = name.partition("@")
    try:
        spec = METHODS[base]
    except KeyError:
        raise ValueError(
            f"unknown method {base!r}; known methods: {', '.join(sorted(METHODS))}"
        ) from None
    if not sep:
        return spec
    from credo.kernels import KERNELS

    if kernel_name not in KERNELS:
        raise ValueError(
            f"method {name!r}: unknown kernel {kernel_name!r}; known kernels:"
            f" {', '.join(sorted(KERNELS))}"
        )
    return replace(spec, name=name, kernel=kernel_name)

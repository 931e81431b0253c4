"""Method registry: each scoring method is a pure function of cached samples.

``@method("c3", needs=("original", "perturbed"))`` registers a scorer. A scorer takes the
:class:`ItemSamples` of one item and the kernel to compare answers with, and returns a
credibility score in [0, 1] (a float), or a :class:`Score` that also carries one
confidence per response (Müller et al.'s response-level calibration) or says why the method is not
available for this item. It never calls a model: the runner plans every sample set that
the selected methods declare in ``needs``, generates each one once, and hands every
method the same cached samples (Müller et al., §3.1's shared-generation design).

The sample sets ``needs`` may name are listed in :mod:`credo.plan.samples`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from credo.errors import UserError
from credo.kernels.registry import Kernel
from credo.plan.samples import (
    APRICOT,
    FOLLOW_UP_SETS,
    LABEL,
    NLI,
    ORIGINAL,
    P_TRUE,
    PARAPHRASED,
    PERTURBED,
    VERBALIZED,
    ItemSamples,
    Sample,
)
from credo.registry import Registry
from credo.tasks.base import AnswerFormat
from credo.ties import settle

__all__ = [
    "APRICOT",
    "FOLLOW_UP_SETS",
    "LABEL",
    "METHODS",
    "NLI",
    "ORIGINAL",
    "PARAPHRASED",
    "PERTURBED",
    "PREFIXED",
    "P_TRUE",
    "SCORE_RANGE",
    "VERBALIZED",
    "ItemSamples",
    "MethodSpec",
    "Sample",
    "Score",
    "get_method",
    "mean_confidence",
    "method",
    "sample_set_method",
    "settled",
]


@dataclass(frozen=True)
class Score:
    """A method's output for one item.

    ``value`` is the item-level credibility in [0, 1], NaN when the method is not
    available (``unavailable`` says why). ``responses`` holds one confidence per sample
    of set ``of`` (None where that sample has none, e.g. an unparsable verbalized
    confidence), for Müller et al.'s response-level calibration. ``levels`` lists the discrete
    values the response scores can take (Müller et al., App. A.11.3's discrete bins), when they do.
    ``extras`` carries named side figures (e.g. label probability's task comprehension).
    """

    value: float
    responses: tuple[float | None, ...] = ()
    of: str = ORIGINAL
    levels: tuple[float, ...] | None = None
    unavailable: str = ""
    extras: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def not_available(cls, reason: str) -> Score:
        """A NaN score that says why."""
        return cls(math.nan, unavailable=reason)


def settled(score: Score) -> Score:
    """``score`` with its value, response scores and levels settled
    (:func:`credo.ties.settle`; None responses kept)."""
    return replace(
        score,
        value=settle(score.value),
        responses=tuple(None if r is None else settle(r) for r in score.responses),
        levels=None if score.levels is None else tuple(settle(v) for v in score.levels),
    )


def mean_confidence(values: Sequence[float]) -> float:
    """The mean of per-generation confidences in [0, 1], as an item's value: exactly
    rounded (``math.fsum``), so it does not depend on the samples' order (items with the
    same confidences tie) and stays in [min, max] of the values. Needs one value."""
    return min(max(math.fsum(values) / len(values), min(values)), max(values))


Scorer = Callable[[ItemSamples, Kernel], "float | Score"]
Needs = tuple[str, ...] | Callable[[AnswerFormat | None], tuple[str, ...]]


COMPARED_SETS = (ORIGINAL, PERTURBED, PARAPHRASED)
"""The answer sets whose samples methods compare with one another."""


SCORE_RANGE = (0.0, 1.0)
"""The scores of every method of credo: credibilities in [0, 1] (module docstring)."""


@dataclass(frozen=True)
class MethodSpec:
    """A registered method: its scorer, the sample sets it needs, and a one-line summary.

    ``needs`` is a tuple of sample-set names, or a function of the task's answer format
    returning one (Answer Consistency reads APriCoT verdicts on choice tasks and the
    original answers elsewhere). ``formats`` restricts the method to some answer formats
    (None = all); ``logprobs`` says it reads token logprobs, so a backend without them
    makes it "not available on this backend". ``min_samples`` gives, per sample set, the
    fewest samples the method can score (self-consistency needs 2 original samples);
    :meth:`score` reports an item below it, or one without a set the method reads, as not
    available instead of calling the scorer (an item is scored or says why,
    never raises).
    """

    name: str
    scorer: Scorer
    needs: Needs
    summary: str
    formats: tuple[AnswerFormat, ...] | None = None
    logprobs: bool = False
    kernel: str | None = None
    """The kernel this method scores with; None = the run's ``kernel`` (``c3@judge``).
    A method registered with one scores with it only (``luq``: the embedding kernel)."""
    min_samples: Mapping[str, int] = field(default_factory=dict)
    score_range: tuple[float, float] = SCORE_RANGE
    """The lowest and highest score the method gives: a threshold outside it accepts
    every answer or none, so a certificate holding one is refused."""
    compares: bool = True
    """Whether the method compares the samples of the sets it reads with one another (so
    an item needs 2 of each: :meth:`short_sets`); a given score reads one sample alone."""
    fitted: bool = False
    """Whether the score is fitted on the run's labelled items after every other method
    scored them (``combined``, ``calibrated:<method>``: :mod:`credo.methods.fitted`), not
    computed by the scorer from one item's samples."""

    def needs_for(self, fmt: AnswerFormat | None) -> tuple[str, ...]:
        """The sample sets this method reads on a task of format ``fmt`` (None: a format
        that is not multiple choice)."""
        return tuple(self.needs(fmt)) if callable(self.needs) else tuple(self.needs)

    def short_sets(self, fmt: AnswerFormat, sets: Mapping[str, tuple]) -> tuple[str, ...]:
        """The sample sets this method compares that hold fewer than 2 samples in ``sets``
        (one item's): a method that reads only answer sets (original, perturbed,
        paraphrased) compares their samples, so it needs 2 of each (one given
        sample per item makes it not available for that item, not a crash)."""
        needs = self.needs_for(fmt)
        if not self.compares or not needs or not set(needs) <= set(COMPARED_SETS):
            return ()
        return tuple(name for name in needs if len(sets.get(name, ())) < 2)

    def applies_to(self, fmt: AnswerFormat) -> bool:
        """Whether the method is defined for tasks of format ``fmt``."""
        return self.formats is None or fmt in self.formats

    def score(self, samples: ItemSamples, kernel: Kernel) -> Score:
        """Run the scorer and wrap a bare float as a :class:`Score`; an item without a
        sample set the method reads, or with fewer samples than ``min_samples``, is not
        available (the scorer is not called). The value, the response scores and the
        levels are settled (:func:`credo.ties.settle`): scores equal within rounding are
        one score for every metric, threshold and certificate that reads them."""
        lacking = self.lacking(samples)
        if lacking:
            return Score.not_available(lacking)
        out = self.scorer(samples, kernel)
        return settled(out if isinstance(out, Score) else Score(float(out)))

    def lacking(self, samples: ItemSamples) -> str:
        """Why the method cannot score ``samples`` ("" when it can): a sample set it reads
        is missing, or holds fewer samples than ``min_samples`` asks."""
        for name in self.needs_for(samples.format):
            have = samples.sets.get(name)
            if have is None:
                return f"the item has no {name} samples"
            least = self.min_samples.get(name, 0)
            if len(have) < least:
                return f"{len(have)} {name} samples; it needs at least {least}"
        return ""


METHODS: Registry[MethodSpec] = Registry("method")
"""Every scoring method by name (:func:`method` registers one)."""

PREFIXED: dict[str, Callable[[str], MethodSpec]] = {}
"""Families of methods named by a prefix, each with the function that builds a member
from its full name (``"given:"``: :func:`credo.methods.given.given_method`, registered
there); :func:`get_method` reads them before the registry."""


def method(
    name: str,
    *,
    needs: Needs,
    summary: str = "",
    formats: tuple[AnswerFormat, ...] | None = None,
    logprobs: bool = False,
    min_samples: Mapping[str, int] | None = None,
    kernel: str | None = None,
) -> Callable[[Scorer], Scorer]:
    """Register ``scorer`` as method ``name`` needing the sample sets ``needs``, at least
    ``min_samples[set]`` samples of a set, scored with ``kernel`` (None: the run's; see
    :class:`MethodSpec`)."""

    def spec(scorer: Scorer) -> MethodSpec:
        doc = (scorer.__doc__ or "").strip().splitlines()
        return MethodSpec(
            name,
            scorer,
            needs if callable(needs) else tuple(needs),
            summary or (doc[0] if doc else ""),
            formats,
            logprobs,
            kernel,
            min_samples=dict(min_samples or {}),
        )

    return METHODS.register(name, spec)


AnswersScorer = Callable[[Sequence[Hashable | None], Kernel], "float | Score"]


def sample_set_method(
    name: str, *, reads: str, summary: str, min_samples: int = 2
) -> Callable[[AnswersScorer], AnswersScorer]:
    """Register, as method ``name``, a function of one sample set's answers: the
    decorated ``f(answers, kernel)`` is scored on the answers of the set ``reads``, and an
    item with fewer than ``min_samples`` of them is not available (:func:`method` with
    ``needs=(reads,)``, ``min_samples={reads: min_samples}``). ``f`` is returned
    unchanged: the same function scores a list of answers outside a run."""

    def register(f: AnswersScorer) -> AnswersScorer:
        @functools.wraps(f)
        def scorer(samples: ItemSamples, kernel: Kernel) -> float | Score:
            return f(samples.answers(reads), kernel)

        method(name, needs=(reads,), summary=summary, min_samples={reads: min_samples})(scorer)
        return f

    return register


def get_method(name: str) -> MethodSpec:
    """The registered method ``name``; a ValueError lists the known ones.

    ``"<method>@<kernel>"`` (``c3@embedding``, ``self_consistency@judge``) is the method
    scored with that kernel instead of the run's, so one run can report one method under
    several kernels (Wu et al., App. H: the kernel is a choice of the task's answer format).
    A name with a prefix of :data:`PREFIXED` is that family's method: ``"given:<name>"``
    is a score the input file gives (:mod:`credo.methods.given`).
    """
    for prefix, build in PREFIXED.items():
        if name.startswith(prefix):
            return build(name)
    base, sep, kernel_name = name.partition("@")
    spec = METHODS[base]
    if not sep:
        return spec
    from credo.kernels import KERNELS

    if kernel_name not in KERNELS:
        raise UserError(f"method {name!r}: {KERNELS.unknown(kernel_name)}")
    if spec.kernel is not None and kernel_name != spec.kernel:
        raise UserError(f"method {name!r}: {base} scores with the {spec.kernel} kernel only")
    return replace(spec, name=name, kernel=kernel_name)

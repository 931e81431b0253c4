"""The scoring stage: every selected method on every item's cached samples (design.md).

:func:`score_items` runs each method's pure scorer on the :class:`ItemSamples` of each
item with the kernel it names (the run's ``kernel``, or ``<method>@<kernel>``), and
returns one :class:`ItemResult` per item: the samples, their correctness from the
grading stage and every method's :class:`Score`. A method that does not apply to the
task's format, or needs logprobs the backend does not return, gets a NaN score that says
why (design.md: capabilities, not exceptions). Correctness is carried along for the
evaluation; it never feeds a score.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from credo.kernels.distinct import distinct_answers, self_similarities
from credo.kernels.indicator import indicator_gram
from credo.kernels.registry import ItemKernels, Kernel
from credo.methods.base import MethodSpec, Score
from credo.plan.samples import ORIGINAL, PERTURBED, ItemSamples, Sample
from credo.tasks.base import Item, Task

__all__ = ["MODAL", "GeneratedSets", "ItemResult", "central_sample", "score_items"]

MODAL = -1
""":attr:`ItemResult.chosen` of an item whose answer no kernel chose: the modal rule."""

GeneratedSets = Mapping[str, Mapping[str, tuple[tuple[Sample, ...], tuple[bool | None, ...]]]]
"""Per item id, per sample set: the samples and each one's correctness (None = none)."""


@dataclass(frozen=True)
class ItemResult:
    """Everything a run knows about one item.

    ``sets`` holds every generated sample set by name and ``set_correct`` the
    correctness of each of their samples (None where a sample has no answer of its own);
    ``method_scores`` each method's full :class:`Score` and ``scores`` its item value.
    """

    item: Item
    perturbations: tuple[str, ...]
    original: tuple[Sample, ...]
    perturbed: tuple[Sample, ...]
    correct: tuple[bool, ...]
    scores: dict[str, float]
    sets: dict[str, tuple[Sample, ...]] = field(default_factory=dict)
    set_correct: dict[str, tuple[bool | None, ...]] = field(default_factory=dict)
    method_scores: dict[str, Score] = field(default_factory=dict)
    #: The original sample whose answer credo gives, as :func:`score_items` chose it under
    #: the run's kernel (:func:`central_sample`); :data:`MODAL`: not chosen by a kernel.
    chosen: int | None = MODAL
    #: Scores a file gave the item as a whole (``credo score``), by name.
    item_scores: Mapping[str, float | None] = field(default_factory=dict)

    @property
    def performance(self) -> float:
        """p̄: mean correctness over the n original samples (Wu et al., App. E.2)."""
        return float(np.mean(self.correct)) if self.correct else math.nan

    @property
    def answer_index(self) -> int | None:
        """The original sample whose answer credo gives for this item: the
        most central parsed sample under the run's kernel (:attr:`chosen`), else
        the first sample of the modal parsed answer (self-consistency's majority vote,
        ties to the answer seen first: the central sample under the indicator kernel);
        None when no original sample has a parsed answer."""
        if self.chosen != MODAL:
            return self.chosen
        return central_sample([s.answer.value for s in self.original], indicator_gram)

    @property
    def answer(self) -> str | None:
        """The answer credo gives (:attr:`answer_index`'s), or None."""
        i = self.answer_index
        return None if i is None else self.original[i].answer.value

    @property
    def answer_correct(self) -> float:
        """Whether :attr:`answer` is correct (1.0 / 0.0; a grade in [0, 1] for graded
        open answers); NaN when the item has no gold or no parsed answer. What a
        certificate's selective risk counts."""
        i = self.answer_index
        if i is None:
            return 0.0 if self.correct and not math.isnan(self.performance) else math.nan
        value = self.correct[i] if i < len(self.correct) else math.nan
        return float(value)


def score_items(
    task: Task,
    generated: GeneratedSets,
    graded: Mapping[str, tuple[bool | float, ...]],
    specs: Sequence[MethodSpec],
    kernels: Mapping[str, ItemKernels],
    *,
    default_kernel: str,
    logprobs: bool,
    prefixes: Mapping[str, tuple[str, ...]],
    options: Mapping[str, Any],
    available_sets: set[str] | None = None,
    item_scores: Mapping[str, Mapping[str, float | None]] | None = None,
    show_progress: bool = False,
) -> list[ItemResult]:
    """One :class:`ItemResult` per task item (see the module docstring).

    ``graded`` is the grading stage's correctness of each item's original samples (NaN
    where unknown, kept as None per sample); ``prefixes`` the context prefix of each
    perturbed sample; ``options`` the run settings some methods read (``followups``,
    ``ccp_min_prob``, ``kle_t``). ``available_sets`` (given generations) limits the sample sets
    there are: a method that needs another one is not available, with the reason.
    ``item_scores``: per item id, the scores a file gives the item as a whole (read by
    the given-score methods, :mod:`credo.methods.given`).
    ``show_progress``: a progress bar of the (item, method) scores done, on stderr.
    """
    built = kernels.get(default_kernel)  # the run's kernel chooses each item's answer

    def score_item(it: Item, progress: _ScoringProgress) -> ItemResult:
        """Every method's score of one item, and its answer."""
        sets = {name: samples for name, (samples, _) in generated[it.id].items()}
        correct = {name: c for name, (_, c) in generated[it.id].items()}
        correct[ORIGINAL] = tuple(None if _nan(c) else c for c in graded[it.id])
        samples = ItemSamples(it.id, sets, task.format, len(it.choices), options,
                              dict((item_scores or {}).get(it.id) or {}))
        scores = {}
        for spec in specs:
            progress.now(it.id, spec.name)
            scores[spec.name] = _score(spec, samples, task, kernels, default_kernel, logprobs,
                                       available_sets)
            progress.advance()
        return ItemResult(
            it,
            prefixes.get(it.id, ()) if PERTURBED in sets else (),
            sets[ORIGINAL],
            sets.get(PERTURBED, ()),
            graded[it.id],
            {k: v.value for k, v in scores.items()},
            sets,
            correct,
            scores,
            MODAL if built is None else central_sample(
                samples.answers(ORIGINAL), built.kernel_for(it.id)),
            dict(samples.scores),
        )

    with _ScoringProgress(len(task.items) * len(specs), show_progress) as progress:
        return [score_item(it, progress) for it in task.items]


class _ScoringProgress:
    """A rich progress bar of the scores computed (one per item and method), naming the
    item and method at work; nothing when disabled."""

    def __init__(self, total: int, show: bool) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        # a console of its own, on the terminal's output as the sampling bars (rich's
        # shared console can be left pointing at a stream a caller swapped)
        self._progress = Progress(TextColumn("[bold]scoring"), BarColumn(),
                                  MofNCompleteColumn(), TimeElapsedColumn(),
                                  TextColumn("{task.fields[at]}"), disable=not show,
                                  console=Console())
        self._task = self._progress.add_task("scoring", total=total, at="")

    def __enter__(self) -> _ScoringProgress:
        self._progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.__exit__(None, None, None)

    def now(self, item: str, method: str) -> None:
        """Say which item and method are being scored."""
        self._progress.update(self._task, at=f"{item} · {method}")

    def advance(self) -> None:
        """One score done."""
        self._progress.update(self._task, advance=1)


def central_sample(answers: Sequence[Hashable | None], gram: Kernel) -> int | None:
    """The answer credo gives among an item's original samples (for open-ended
    answers, the most central sample): the parsed sample ``i`` with the largest
    ``Σ_{j≠i} k(y_i, y_j)`` over the other parsed samples, the first on ties (a kernel
    medoid; the sum is the sample's term in generalized consistency, Wu et al., eq. 2); None
    when no sample has a parsed answer (``None``).

    Under the indicator kernel the sum is the count of the sample's answer less one, so
    the choice is the first sample of the modal answer, the majority vote of
    self-consistency (Wang et al. 2023); under the embedding or judge kernel, the sample
    whose answer agrees most with the rest."""
    found = distinct_answers(answers)
    if not found.values:
        return None
    # every sample of a distinct answer a has the same sum, Σ_b m_b k(a, b) − k(a, a)
    totals = -self_similarities(found, gram)
    for start, block in found.row_blocks(gram):
        totals[start:start + len(block)] += block @ found.counts
    # ties within rounding are ties: sums of one set of terms in another order differ;
    # the distinct answers are in order of first appearance, so the first is the earliest
    best = np.flatnonzero(np.isclose(totals, totals.max(), rtol=1e-9, atol=1e-12))[0]
    return int(np.flatnonzero(found.index == best)[0])


def _score(
    spec: MethodSpec,
    samples: ItemSamples,
    task: Task,
    kernels: Mapping[str, ItemKernels],
    default_kernel: str,
    logprobs: bool,
    available_sets: set[str] | None = None,
) -> Score:
    if not spec.applies_to(task.format):
        allowed = ", ".join(f.value for f in spec.formats or ())
        return Score.not_available(f"defined for {allowed} tasks only")
    missing = [s for s in spec.needs_for(task.format)
               if available_sets is not None and s not in available_sets]
    if missing:
        return Score.not_available(f"needs the {', '.join(missing)} samples; the input has none")
    short = spec.short_sets(task.format, samples.sets)
    if short:
        return Score.not_available(
            f"needs at least 2 {short[0]!r} samples per item; the item has fewer")
    if spec.logprobs and not logprobs:
        if available_sets is not None:
            return Score.not_available("needs token logprobs; the input has none")
        return Score.not_available("not available on this backend: it returns no token logprobs")
    kernel = kernels[spec.kernel or default_kernel].kernel_for(samples.item_id)
    return spec.score(samples, kernel)


def _nan(x: object) -> bool:
    return isinstance(x, float) and math.isnan(x)

"""Scores a user already has, evaluated as methods: ``given:<name>``.

A file ``credo score`` reads may give each sample a score of its own (``scores: {name:
value}``: a reward model's, a judge's, P(True) or CCP computed by another tool) and each
item one (``item_scores``). Method ``given:<name>`` reads them, so they meet every metric,
bootstrap interval, paired test, figure and certificate credo's own methods meet:

- the item's value is its given item score, else the mean of its original samples'
  given scores (:func:`~credo.methods.base.mean_confidence`, as verbalized confidence
  and P(True) make an item's value of theirs);
- the response scores are the original samples' given scores, for the per-generation
  evaluation (none when the file gives the score per item only).

Given scores lie in [0, 1]: the readers refuse a value outside it
(:func:`credo.importers.base.score_value`), so a certified threshold lies in [0, 1] as
for every method of credo (:data:`~credo.methods.base.SCORE_RANGE`). The method needs no
kernel and no second sample: one sample per item is enough.
"""

from __future__ import annotations

from functools import partial

from credo.errors import UserError
from credo.kernels.registry import Kernel
from credo.methods.base import (
    ORIGINAL,
    PREFIXED,
    ItemSamples,
    MethodSpec,
    Score,
    mean_confidence,
)

__all__ = ["GIVEN", "given_method", "given_score_name", "is_given", "score_given"]

GIVEN = "given:"
"""The prefix of a given score's method name (``given:reward``)."""


def is_given(method: str) -> bool:
    """Whether ``method`` names a given score (``given:<name>``)."""
    return method.startswith(GIVEN)


def given_score_name(method: str) -> str:
    """The score's name in the file of method ``given:<name>``."""
    return method[len(GIVEN):]


def given_method(method: str) -> MethodSpec:
    """The method ``given:<name>`` (module docstring); a :class:`UserError` for a method
    name with no score name or with a kernel (``given:x@judge``: it compares nothing)."""
    name = given_score_name(method)
    if not name:
        raise UserError(f"method {method!r}: name the given score, e.g. given:reward")
    if "@" in name:
        raise UserError(f"method {method!r}: a given score reads no kernel; drop '@...'")
    return MethodSpec(
        method, partial(score_given, name), (ORIGINAL,),
        f"the file's own score {name!r} (per sample, or per item)",
        min_samples={ORIGINAL: 1}, compares=False,
    )


def score_given(name: str, samples: ItemSamples, kernel: Kernel | None = None) -> Score:
    """Given score ``name`` of one item (module docstring): the item's own, else the mean
    of its original samples' (None ones left out); not available when the file gives the
    item neither."""
    per = tuple(s.score(name) for s in samples.sets.get(ORIGINAL, ()))
    known = [v for v in per if v is not None]
    value = samples.scores.get(name)
    if value is None:
        if not known:
            return Score.not_available(f"the file gives no {name!r} score for the item")
        value = mean_confidence(known)
    return Score(value, per if known else (), ORIGINAL)


PREFIXED[GIVEN] = given_method

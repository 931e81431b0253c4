"""An item's answers as its distinct answers and how often each was given.

A kernel is a function of two answers, ``K[i, j] = k(y_i, y'_j)``, and every kernel maps
an unparsable answer (``None``) to a row and column of zeros. So the Gram matrix of K
samples is the Gram matrix of their U distinct answers, each row and column repeated as
often as its answer was given: every sum over sample pairs is a sum over pairs of distinct
answers weighted by their counts, and a graph of the samples is a graph of U classes of
identical nodes (:mod:`credo.methods.graph`). With K in the thousands and few distinct
answers (a number, an option letter, a short answer), the estimators cost U² kernel
values instead of K², exactly: no sample is dropped and no value approximated.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from credo.kernels.registry import Kernel, get_kernel

__all__ = ["BLOCK", "DistinctAnswers", "distinct_answers", "gram_sum", "gram_trace",
           "self_similarities"]

BLOCK = 1024
"""Rows of a Gram matrix over distinct answers computed at once (:meth:`DistinctAnswers.
row_blocks`): 1024 × 10,000 values are 80 MB."""


@dataclass(frozen=True)
class DistinctAnswers:
    """The distinct parsable answers of a list of answers (in order of first appearance),
    how often each was given, and for each answer its position among them (-1 for an
    unparsable one, ``None``)."""

    values: tuple[Hashable, ...]
    counts: np.ndarray
    index: np.ndarray

    @property
    def unparsable(self) -> int:
        """How many answers were ``None``."""
        return int(np.sum(self.index < 0))

    def gram(self, kernel: str | Kernel, other: DistinctAnswers | None = None) -> np.ndarray:
        """``k(a, b)`` for the distinct answers a of these and b of ``other`` (default:
        these), shape ``(U, U')``."""
        return self._block(kernel, self.values, other)

    def row_blocks(
        self, kernel: str | Kernel, other: DistinctAnswers | None = None
    ) -> Iterator[tuple[int, np.ndarray]]:
        """:meth:`gram` in blocks of at most :data:`BLOCK` rows, ``(first row, block)``:
        thousands of distinct answers (open-ended ones, all different) never hold the
        whole U × U' matrix at once."""
        for start in range(0, len(self.values), BLOCK):
            yield start, self._block(kernel, self.values[start:start + BLOCK], other)

    def _block(self, kernel: str | Kernel, rows: Sequence[Hashable],
               other: DistinctAnswers | None) -> np.ndarray:
        theirs = self if other is None else other
        return np.asarray(get_kernel(kernel)(list(rows), list(theirs.values)),
                          dtype=float).reshape(len(rows), len(theirs.values))


def distinct_answers(answers: Sequence[Hashable | None]) -> DistinctAnswers:
    """``answers`` as :class:`DistinctAnswers` (equal answers: those a dict takes for the
    same key, as the indicator kernel's ``==`` does; a float NaN equals nothing, so each
    is a distinct answer of its own)."""
    position: dict[Hashable, int] = {}
    values: list[Hashable] = []
    index = np.empty(len(answers), dtype=np.int64)
    for i, a in enumerate(answers):
        if a is None:
            index[i] = -1
            continue
        key = (_NAN, i) if isinstance(a, float) and a != a else a
        found = position.setdefault(key, len(position))
        if found == len(values):
            values.append(a)
        index[i] = found
    counts = np.bincount(index[index >= 0], minlength=len(values)).astype(float)
    return DistinctAnswers(tuple(values), counts, index)


def gram_sum(kernel: str | Kernel, xs: Sequence[Hashable | None],
             ys: Sequence[Hashable | None]) -> float:
    """``Σ_i Σ_j k(xs[i], ys[j])`` from the distinct answers of each (module docstring)."""
    dx, dy = distinct_answers(xs), distinct_answers(ys)
    if not dx.values or not dy.values:
        return 0.0
    return float(sum(dx.counts[start:start + len(block)] @ block @ dy.counts
                     for start, block in dx.row_blocks(kernel, dy)))


def gram_trace(kernel: str | Kernel, xs: Sequence[Hashable | None]) -> float:
    """``Σ_i k(xs[i], xs[i])``: each distinct answer's ``k(a, a)`` times its count."""
    dx = distinct_answers(xs)
    if not dx.values:
        return 0.0
    return float(dx.counts @ self_similarities(dx, kernel))


def self_similarities(found: DistinctAnswers, kernel: str | Kernel) -> np.ndarray:
    """``k(a, a)`` of every distinct answer, asked a block at a time."""
    out = np.empty(len(found.values))
    for start in range(0, len(found.values), BLOCK):
        rows = found.values[start:start + BLOCK]
        out[start:start + len(rows)] = np.diag(np.asarray(
            get_kernel(kernel)(list(rows), list(rows)), dtype=float))
    return out


_NAN = object()
"""The key of a NaN answer, with its position: no two NaNs share a key."""

"""What every importer gives: the generations of a file, as :func:`credo.importers.read_generations`
returns them (the samples, the items they belong to, what the file says of its
correctness and sampling)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from credo.types import TokenLogprob

__all__ = ["Generations", "GivenItem", "GivenSample", "finite_number"]


@dataclass(frozen=True)
class GivenSample:
    """One generation as given: its item, sample set, text, answer and correctness."""

    item: str
    set: str
    text: str
    answer: str | float | bool | None
    correct: bool | float | None = None
    ref: tuple[int, ...] = ()
    prefix: str | None = None
    logprobs: tuple[TokenLogprob, ...] | None = None


@dataclass(frozen=True)
class GivenItem:
    """What the file says about one item (empty where it says nothing)."""

    id: str
    question: str = ""
    gold: str = ""
    choices: tuple[str, ...] = ()


@dataclass
class Generations:
    """Every given sample, in file order, and the items they belong to."""

    source: str
    layout: str
    items: list[GivenItem] = field(default_factory=list)
    samples: list[GivenSample] = field(default_factory=list)
    correctness: str = ""
    """What the given ``correct`` values are: the tool's own metric or scorer, or 'given'."""
    failed: dict[str, int] = field(default_factory=dict)
    """Per item, the samples the log marks errored, left out."""
    cancelled: dict[str, int] = field(default_factory=dict)
    """Per item, the samples that started and were cancelled (the log holds them with
    inspect_ai's cancellation error), left out."""
    not_started: dict[str, int] = field(default_factory=dict)
    """Per item, the samples an unfinished eval planned (its sample ids times its epochs)
    and never started: absent from the log, neither errored nor cancelled."""
    status: str = ""
    """The log's own status when it is not a finished one ('error', 'cancelled')."""
    settings: dict[str, Any] = field(default_factory=dict)
    """The sampling settings the file records (``temperature``, ``max_tokens``, ...;
    ``repeats`` / ``epochs``)."""
    answers: str = ""
    """How the answers were read from the responses, where the file's layout says more
    than 'as given' (lm-eval: its filter)."""


def finite_number(value: Any) -> bool:
    """Whether ``value`` is a finite int or float (a bool is not)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)

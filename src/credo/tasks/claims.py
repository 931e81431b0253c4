"""Claims of long answers: the typed records and the reader of annotated claim files.

An :class:`ClaimItem` is one long answer split into :class:`Claim` s; each claim carries
its text, zero or more named scores (higher = more credible) and its label: correct,
wrong, or unknown (``None``, an unlabelled claim). The conformal procedures of
:mod:`credo.evaluate.claims` take these items; the claim-splitting stage and the claim
scoring methods (later work) build them. They live in the tasks layer, the
lowest layer that needs them (the reader below returns them; ``credo.evaluate`` imports
them and re-exports them).

**The claim file layout** (:func:`read_claims`), JSON Lines (``.jsonl``, one item per
line) or JSON (``.json``: a list of items, or an object holding one list of items, such
as ``{"data": [...]}``), optionally gzipped (``.gz``)::

    {"id": "bio-1", "prompt": "Tell me a bio of Ada Lovelace", "answer": "...",
     "claims": [{"text": "Ada Lovelace was born in 1815.", "correct": true,
                 "scores": {"frequency": 4.0, "verbalized": 0.9}}, ...]}

Per item: ``claims`` (a list, required, may be empty); ``id`` (string or integer;
default ``<file stem>-<item number>``, unique in the file); ``prompt`` (or ``question``)
and ``answer`` (or ``original-output``): optional strings.

Per claim: the text in ``text`` (or ``subclaim``, or ``claim``), a string; the label in
``correct`` (true / false / null, or 1 / 0) or in ``annotation``, a mark: ``Y`` (yes) and
``S`` (supported) count as correct, ``N`` (no) and ``U`` (unsupported) as wrong (Mohri &
Hashimoto's code, ``CORRECT_ANNOTATIONS = ["Y", "S"]``), compared after stripping
spaces and case; both fields absent or null: unknown. Scores: a ``scores`` object of
name -> number, a number in ``score`` (named ``score``), and every field whose name ends
in ``-score`` (named by the whole field name, e.g. ``frequency+gpt-score``), plus
``noise`` (the paper's tie-breaking draw) when present. Every score must be a finite
number. Other fields are ignored.

This reads the paper's released files as they are
(``conformal-factual-lm/out/*_subclaims_with_scores.jsonl``: one pretty-printed JSON
object despite the name; save or link it as ``.json``).

A malformed file raises :class:`~credo.tasks.loaders.DatasetError` (a
:class:`~credo.errors.UserError`) in one line naming the file, the item number (and the
line of a JSON Lines file) and the claim number.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from credo.tasks.loaders import DatasetError, read_rows

__all__ = [
    "CORRECT_MARKS",
    "WRONG_MARKS",
    "Claim",
    "ClaimItem",
    "read_claims",
    "score_names",
]

CORRECT_MARKS = frozenset({"Y", "S"})
"""Annotation marks counted as correct (Mohri & Hashimoto 2024's code)."""
WRONG_MARKS = frozenset({"N", "U"})
"""Annotation marks counted as wrong: "N" (no) and "U" (unsupported)."""


@dataclass(frozen=True)
class Claim:
    """One atomic claim of an answer.

    ``scores``: name -> credibility (higher = more credible); ``correct``: the label
    (None: unknown); ``mark``: the annotation mark the label came from, as given."""

    text: str = ""
    correct: bool | None = None
    scores: Mapping[str, float] = field(default_factory=dict, hash=False)
    mark: str | None = None


@dataclass(frozen=True)
class ClaimItem:
    """One answer and its claims, in the answer's order."""

    id: str
    claims: tuple[Claim, ...]
    prompt: str = ""
    answer: str = ""
    source: str = ""
    """Where the item came from (file and item number), for error messages."""

    @classmethod
    def of(
        cls,
        scores: Sequence[float],
        correct: Sequence[bool | None] | None = None,
        *,
        id: str = "",
        name: str = "score",
    ) -> ClaimItem:
        """An item of textless claims from one score per claim (named ``name``) and,
        optionally, one label per claim: the shortest way to call
        :func:`credo.certify_claims` from arrays."""
        labels = [None] * len(scores) if correct is None else list(correct)
        if len(labels) != len(scores):
            raise ValueError(f"item {id!r}: {len(scores)} scores but {len(labels)} labels")
        return cls(id, tuple(
            Claim(correct=None if c is None else bool(c), scores={name: float(s)})
            for s, c in zip(scores, labels, strict=True)))


def score_names(items: Sequence[ClaimItem]) -> list[str]:
    """The score names every claim of every item has, sorted (all of none when no item
    has a claim)."""
    common: set[str] | None = None
    for item in items:
        for claim in item.claims:
            common = set(claim.scores) if common is None else common & set(claim.scores)
    return sorted(common or ())


def read_claims(path: str | Path) -> list[ClaimItem]:
    """Every item of the annotated claim file at ``path`` (module docstring: the layout).

    Raises :class:`~credo.tasks.loaders.DatasetError` naming the file, item and claim for
    a missing file, text that is not UTF-8 or not JSON, an item that is not an object or
    has no ``claims`` list, a claim without text, an unknown mark, a score that is not a
    finite number, a repeated id, or a file with no item."""
    p = Path(path)
    suffixes = [s.lower() for s in p.suffixes if s.lower() != ".gz"]
    if not suffixes or suffixes[-1] not in (".json", ".jsonl", ".ndjson"):
        raise DatasetError(f"{p}: a claim file is .json or .jsonl (optionally .gz); got "
                           f"{(suffixes[-1] if suffixes else '') or 'no suffix'!r}")
    lines = suffixes[-1] != ".json"
    items: list[ClaimItem] = []
    seen: dict[str, str] = {}
    for number, (line, row) in enumerate(read_rows(p), 1):
        where = f"{p}: item {number}" + (f" (line {line})" if lines else "")
        item = _item(row, where, f"{p.name.split('.')[0]}-{number}")
        if item.id in seen:
            raise DatasetError(f"{where}: id {item.id!r} repeats {seen[item.id]}")
        seen[item.id] = f"item {number}"
        items.append(item)
    if not items:
        raise DatasetError(f"{p}: no items")
    return items


# --------------------------------------------------------------------------- one item


def _item(row: Mapping[str, Any], where: str, default_id: str) -> ClaimItem:
    claims = row.get("claims")
    if not isinstance(claims, list):
        got = "no 'claims' field" if claims is None else f"'claims' is {type(claims).__name__}"
        raise DatasetError(f"{where}: expected a 'claims' list; {got}")
    raw_id = row.get("id", default_id)
    if isinstance(raw_id, bool) or not isinstance(raw_id, str | int) or raw_id == "":
        raise DatasetError(f"{where}: 'id' must be a non-empty string or an integer")
    return ClaimItem(
        id=str(raw_id),
        claims=tuple(_claim(c, f"{where}: claim {j}") for j, c in enumerate(claims, 1)),
        prompt=_text(row, ("prompt", "question"), where, required=False),
        answer=_text(row, ("answer", "original-output"), where, required=False),
        source=where,
    )


def _text(row: Mapping[str, Any], names: tuple[str, ...], where: str, *, required: bool) -> str:
    for name in names:
        value = row.get(name)
        if value is None:
            continue
        if not isinstance(value, str):
            raise DatasetError(f"{where}: {name!r} must be a string, got {type(value).__name__}")
        return value
    if required:
        raise DatasetError(f"{where}: no claim text (a 'text', 'subclaim' or 'claim' string)")
    return ""


def _claim(raw: Any, where: str) -> Claim:
    if not isinstance(raw, Mapping):
        raise DatasetError(f"{where}: expected an object, got {type(raw).__name__}")
    text = _text(raw, ("text", "subclaim", "claim"), where, required=True)
    mark, from_mark = _mark(raw.get("annotation"), where)
    correct = _correct(raw.get("correct"), where)
    if correct is not None and from_mark is not None and correct != from_mark:
        raise DatasetError(f"{where}: 'correct' is {correct} but annotation {mark!r} says "
                           f"{from_mark}")
    return Claim(text, from_mark if correct is None else correct, _scores(raw, where), mark)


def _mark(value: Any, where: str) -> tuple[str | None, bool | None]:
    if value is None:
        return None, None
    if not isinstance(value, str):
        raise DatasetError(f"{where}: 'annotation' must be a mark string, got "
                           f"{type(value).__name__}")
    key = value.strip().upper()
    if key in CORRECT_MARKS:
        return value, True
    if key in WRONG_MARKS:
        return value, False
    raise DatasetError(f"{where}: unknown annotation {value!r}; expected "
                       f"{'/'.join(sorted(CORRECT_MARKS))} (correct) or "
                       f"{'/'.join(sorted(WRONG_MARKS))} (wrong)")


def _correct(value: Any, where: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    raise DatasetError(f"{where}: 'correct' must be true, false, 1, 0 or null; got "
                       f"{_short(value)}")


def _scores(raw: Mapping[str, Any], where: str) -> dict[str, float]:
    found: dict[str, Any] = {}
    given = raw.get("scores")
    if given is not None:
        if not isinstance(given, Mapping):
            raise DatasetError(f"{where}: 'scores' must be an object of name -> number")
        found.update(given)
    for name, value in raw.items():
        if name in ("score", "noise") or (isinstance(name, str) and name.endswith("-score")):
            if name in found:
                raise DatasetError(f"{where}: score {name!r} given twice")
            found[name] = value
    out = {}
    for name, value in found.items():
        number = float(value) if isinstance(value, int | float) and not isinstance(
            value, bool) and _finite(value) else None
        if number is None:
            raise DatasetError(f"{where}: score {name!r} must be a finite number; got "
                               f"{_short(value)}")
        out[str(name)] = number
    return out


def _finite(value: int | float) -> bool:
    try:
        return math.isfinite(float(value))
    except OverflowError:  # an integer beyond a float's range
        return False


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."

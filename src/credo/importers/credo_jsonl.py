"""credo's own JSON Lines of generations (a run folder's ``samples.jsonl`` too): one
object per sample (:mod:`credo.importers`).

Scores a user already has ride along: ``scores: {name: value}`` on a sample row gives
that sample's score ``name`` (a reward model's, a judge's, token probabilities computed
elsewhere), ``item_scores: {name: value}`` on any row of an item gives the item's (the
rows of one item that give it must agree). Each value is a number in [0, 1] or null;
a value outside [0, 1] is refused, naming the line (:func:`~credo.importers.base.score_value`).
``credo score`` evaluates them as methods ``given:<name>``."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from credo.importers import base
from credo.tasks.loaders import DatasetError
from credo.types import TokenLogprob

__all__ = ["FIELDS", "read_credo"]

FIELDS = frozenset({"item", "id", "set", "answer", "correct", "text", "gold", "question",
                    "choices", "ref", "prefix", "logprobs", "scores", "item_scores", "index"})
"""The fields of a row credo reads (a run folder's ``index`` and its per-method
``confidence`` object are its own bookkeeping: known, not read)."""


def read_credo(path: Path, rows: base.Rows) -> base.Generations:
    """The generations of credo's JSONL ``path``, its ``(line, row)`` pairs ``rows``."""
    out = base.Generations(str(path), "credo")
    items: dict[str, base.GivenItem] = {}
    for line_no, row in rows:
        where = f"{path}:{line_no}"
        item = row.get("item", row.get("id"))
        if not isinstance(item, str | int) or isinstance(item, bool) or str(item) == "":
            raise DatasetError(f"{where}: 'item' (or 'id') must be a non-empty string")
        item = str(item)
        _count_not_read(out, row)
        sample = _sample(item, row, where)
        out.samples.append(sample)
        for name in sample.scores:
            out.score_fields.setdefault(name, f"scores.{name}")
        given = _scores(row.get("item_scores"), "item_scores", where)
        for name in given:
            out.score_fields.setdefault(name, f"item_scores.{name}")
        before = items.get(item)
        if before is None or not before.question:
            new = _item(item, row, where)
            items[item] = replace(new, scores=dict(before.scores) if before else {},
                                  where=before.where if before else where)
        items[item] = base.with_item_scores(items[item], given, where)
    out.items = list(items.values())
    if any(s.correct is not None for s in out.samples):
        out.correctness = "given (the file's 'correct')"
    return out


def _sample(item: str, row: Mapping[str, Any], where: str) -> base.GivenSample:
    sample_set = row.get("set", "original")
    if not isinstance(sample_set, str) or not sample_set:
        raise DatasetError(f"{where}: 'set' must be a sample set name, got {sample_set!r}")
    answer = _answer(row.get("answer"), where)
    text = row.get("text")
    if text is not None and not isinstance(text, str):
        raise DatasetError(f"{where}: 'text' must be a string")
    return base.GivenSample(
        item, sample_set, text if text is not None else _text(answer), answer,
        _correct(row.get("correct"), where), _ref(row.get("ref"), where),
        row.get("prefix") if isinstance(row.get("prefix"), str) else None,
        _logprobs(row.get("logprobs"), where), where,
        _scores(row.get("scores"), "scores", where),
    )


def _count_not_read(out: base.Generations, row: Mapping[str, Any]) -> None:
    """Count the fields of ``row`` credo does not read (:data:`FIELDS`)."""
    for key in row:
        if key not in FIELDS and not (key == "confidence" and isinstance(row[key], Mapping)):
            out.not_read[key] = out.not_read.get(key, 0) + 1


def _scores(value: Any, key: str, where: str) -> dict[str, float | None]:
    """A row's ``scores`` or ``item_scores`` object: names to values in [0, 1] or null."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise DatasetError(f"{where}: '{key}' must be an object of score names to numbers in "
                           f"[0, 1], got {type(value).__name__}")
    return {base.score_name(k, f"{where}: '{key}'"): base.score_value(v, f"{where}: {key}.{k}")
            for k, v in value.items()}


def _item(item: str, row: Mapping[str, Any], where: str) -> base.GivenItem:
    choices = row.get("choices") or ()
    if not isinstance(choices, list | tuple) or not all(isinstance(c, str) for c in choices):
        raise DatasetError(f"{where}: 'choices' must be a list of option texts")
    return base.GivenItem(item, str(row.get("question") or ""), str(row.get("gold") or ""),
                          tuple(choices))


def _answer(value: Any, where: str) -> str | float | bool | None:
    if value is None or isinstance(value, str | bool):
        return value
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value) if isinstance(value, float) else str(value)
    raise DatasetError(f"{where}: 'answer' must be a string, a number, a bool or null")


def _text(answer: str | float | bool | None) -> str:
    return "" if answer is None else str(answer)


def _correct(value: Any, where: str) -> bool | float | None:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int | float) and 0.0 <= value <= 1.0:
        return float(value)
    raise DatasetError(f"{where}: 'correct' must be true, false, null or a number in [0, 1]")


def _ref(value: Any, where: str) -> tuple[int, ...]:
    if value is None:
        return ()
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool)
                                       for v in value):
        return tuple(value)
    raise DatasetError(f"{where}: 'ref' must be a list of integers")


def _logprobs(value: Any, where: str) -> tuple[TokenLogprob, ...] | None:
    if value is None:
        return None
    try:
        return tuple(
            TokenLogprob(str(t["token"]), float(t["logprob"]),
                         tuple((str(a), float(b)) for a, b in t.get("top", ())))
            for t in value
        )
    except (TypeError, KeyError, ValueError):
        raise DatasetError(
            f"{where}: 'logprobs' must be a list of {{token, logprob, top: [[token, logprob]]}}"
        ) from None


def _read(path: Path, rows: base.Rows | None, options: base.ReadOptions) -> base.Generations:
    assert rows is not None  # a JSON Lines layout
    return read_credo(path, rows)


base.IMPORTERS.add("credo", base.Importer(_read, claims=lambda row: "doc_id" not in row))

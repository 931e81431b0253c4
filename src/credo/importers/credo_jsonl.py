"""credo's own JSON Lines of generations (a run folder's ``samples.jsonl`` too): one
object per sample (:mod:`credo.importers`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from credo.importers.base import (
    IMPORTERS,
    Generations,
    GivenItem,
    GivenSample,
    Importer,
    ReadOptions,
    Rows,
)
from credo.tasks.loaders import DatasetError
from credo.types import TokenLogprob

__all__ = ["read_credo"]


def read_credo(path: Path, rows: Rows) -> Generations:
    """The generations of credo's JSONL ``path``, its ``(line, row)`` pairs ``rows``."""
    out = Generations(str(path), "credo")
    items: dict[str, GivenItem] = {}
    for line_no, row in rows:
        where = f"{path}:{line_no}"
        item = row.get("item", row.get("id"))
        if not isinstance(item, str | int) or isinstance(item, bool) or str(item) == "":
            raise DatasetError(f"{where}: 'item' (or 'id') must be a non-empty string")
        item = str(item)
        sample_set = row.get("set", "original")
        if not isinstance(sample_set, str) or not sample_set:
            raise DatasetError(f"{where}: 'set' must be a sample set name, got {sample_set!r}")
        answer = _answer(row.get("answer"), where)
        text = row.get("text")
        if text is not None and not isinstance(text, str):
            raise DatasetError(f"{where}: 'text' must be a string")
        out.samples.append(
            GivenSample(
                item, sample_set, text if text is not None else _text(answer), answer,
                _correct(row.get("correct"), where), _ref(row.get("ref"), where),
                row.get("prefix") if isinstance(row.get("prefix"), str) else None,
                _logprobs(row.get("logprobs"), where), where,
            )
        )
        if item not in items or not items[item].question:
            items[item] = _item(item, row, where)
    out.items = list(items.values())
    if any(s.correct is not None for s in out.samples):
        out.correctness = "given (the file's 'correct')"
    return out


def _item(item: str, row: Mapping[str, Any], where: str) -> GivenItem:
    choices = row.get("choices") or ()
    if not isinstance(choices, list | tuple) or not all(isinstance(c, str) for c in choices):
        raise DatasetError(f"{where}: 'choices' must be a list of option texts")
    return GivenItem(item, str(row.get("question") or ""), str(row.get("gold") or ""),
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


def _read(path: Path, rows: Rows | None, options: ReadOptions) -> Generations:
    assert rows is not None  # a JSON Lines layout
    return read_credo(path, rows)


IMPORTERS.add("credo", Importer(_read, claims=lambda row: "doc_id" not in row))

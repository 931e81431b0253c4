"""Generations in a CSV table, one row per sample (:mod:`credo.importers`): the fields of
credo's JSON Lines as columns, for tables a spreadsheet or another tool wrote.

Columns: ``item`` (or ``id``), ``set`` (default ``original``), ``answer``, ``correct``
(true/false, yes/no, 1/0 or a number in [0, 1]; empty: unknown), ``text``, ``gold``,
``question``; a score given per sample in a column ``scores.<name>``, one given per item
in ``item_scores.<name>`` (the rows of an item must agree). Another table's own names are
mapped with ``columns`` (``credo score FILE.csv --columns
item=question_id,answer=prediction,scores.judge=judge_prob``): the field on the left is
read from the column on the right. The fields are separated by commas or semicolons,
whichever the header line holds more of; in a semicolon table a score or a correctness
may be written with a decimal comma (``0,75``). Answers are read as written (their
format normalises them). An empty score cell is a missing value (``credo score`` refuses
it for a score it evaluates, naming the line); a score outside [0, 1] is refused.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from credo.errors import UserError
from credo.importers import base
from credo.tasks.loaders import DatasetError, read_csv

__all__ = ["FIELDS", "read_table", "sniff_delimiter"]

FIELDS = ("item", "set", "answer", "correct", "text", "gold", "question")
"""The fields a column may hold, besides ``scores.<name>`` and ``item_scores.<name>``."""
SAMPLE_SCORES, ITEM_SCORES = "scores.", "item_scores."

_TRUE = frozenset({"true", "yes", "1", "1.0"})
_FALSE = frozenset({"false", "no", "0", "0.0"})


def read_table(path: Path, columns: Mapping[str, str] | None = None) -> base.Generations:
    """The generations of the CSV table ``path`` (module docstring); ``columns`` maps a
    credo field (``item``, ``scores.conf``) to the table's column that holds it."""
    delimiter = sniff_delimiter(path)
    rows = read_csv(path, delimiter=delimiter)
    first = next(rows, None)
    if first is None:
        raise DatasetError(f"{path}: no rows under the header")
    header = list(first[1])
    fields = _fields(path, header, dict(columns or {}))
    out = base.Generations(str(path), "csv")
    used = set(fields.values())
    items: dict[str, base.GivenItem] = {}
    for line_no, row in _chain(first, rows):
        where = f"{path}:{line_no}"
        cell = {f: (row.get(col) or "").strip() for f, col in fields.items()}
        item = cell.get("item", "")
        if not item:
            raise DatasetError(f"{where}: the item column ({fields['item']!r}) is empty")
        scores = {name[len(SAMPLE_SCORES):]: _score(cell[name], delimiter,
                                                     f"{where}: column {fields[name]!r}")
                  for name in fields if name.startswith(SAMPLE_SCORES)}
        answer = cell.get("answer") or None
        out.samples.append(base.GivenSample(
            item, cell.get("set") or "original", cell.get("text") or answer or "", answer,
            _correct(cell.get("correct", ""), delimiter, where), where=where, scores=scores))
        given = {name[len(ITEM_SCORES):]: _score(cell[name], delimiter,
                                                  f"{where}: column {fields[name]!r}")
                 for name in fields if name.startswith(ITEM_SCORES)}
        items[item] = _merge(items.get(item), item, cell, given, where)
        for col in row:
            if col not in used and col:
                out.not_read[col] = out.not_read.get(col, 0) + 1
    for name, col in fields.items():
        for prefix in (SAMPLE_SCORES, ITEM_SCORES):
            if name.startswith(prefix):
                out.score_fields[name[len(prefix):]] = f"column {col!r}"
    out.items = list(items.values())
    if any(s.correct is not None for s in out.samples):
        out.correctness = f"given (the table's {fields['correct']!r} column)"
    out.answers = f"the {fields.get('answer', 'answer')!r} column; fields separated by " \
                  f"{'semicolons' if delimiter == ';' else 'commas'}"
    return out


def sniff_delimiter(path: Path) -> str:
    """``;`` when the header line splits into more fields at semicolons than at commas,
    else ``,``."""
    try:
        with path.open("rb") as fh:
            head = fh.readline().decode("utf-8-sig", errors="replace")
    except OSError as e:
        raise DatasetError(f"{path}: cannot read it ({e.strerror or e})") from None
    counts = {d: len(next(csv.reader(io.StringIO(head), delimiter=d), [])) for d in ",;"}
    return ";" if counts[";"] > counts[","] else ","


def _fields(path: Path, header: list[str], columns: dict[str, str]) -> dict[str, str]:
    """credo field -> the table's column: the mapping's, else a column of the field's own
    name (``id`` for ``item``); a mapping naming an unknown field or a missing column,
    or a table without an item column, is refused."""
    for name, col in columns.items():
        known = name in FIELDS or name.startswith((SAMPLE_SCORES, ITEM_SCORES))
        if not known:
            raise UserError(f"--columns: {name!r} is not a field credo reads (fields: "
                            f"{', '.join(FIELDS)}, scores.<name>, item_scores.<name>)")
        if name.startswith((SAMPLE_SCORES, ITEM_SCORES)):
            base.score_name(name.split(".", 1)[1], f"--columns {name}")
        if col not in header:
            raise UserError(f"--columns {name}={col}: {path} has no column {col!r} (columns: "
                            f"{', '.join(header)})")
    mapped = set(columns.values())
    fields = dict(columns)
    for col in header:
        if col in mapped:
            continue
        name = "item" if col == "id" and "item" not in fields else col
        if name in FIELDS and name not in fields:
            fields[name] = col
        elif col.startswith((SAMPLE_SCORES, ITEM_SCORES)) and col not in fields:
            base.score_name(col.split(".", 1)[1], f"{path}:1: column {col!r}")
            fields[col] = col
    if "item" not in fields:
        raise DatasetError(f"{path}:1: no item column (a column 'item' or 'id', or "
                           "--columns item=<column>)")
    return fields


def _number(text: str, delimiter: str) -> float | None:
    """A cell as a number (a decimal comma in a semicolon table), None if it is none."""
    if delimiter == ";" and "," in text and "." not in text:
        text = text.replace(",", ".")
    try:
        return float(text)
    except ValueError:
        return None


def _score(text: str, delimiter: str, where: str) -> float | None:
    if not text:
        return None
    value = _number(text, delimiter)
    if value is None:
        raise DatasetError(f"{where} must be a number in [0, 1] or empty, got {text!r}")
    return base.score_value(value, where)


def _correct(text: str, delimiter: str, where: str) -> bool | float | None:
    if not text:
        return None
    low = text.lower()
    if low in _TRUE or low in _FALSE:
        return low in _TRUE
    value = _number(text, delimiter)
    if value is None or not 0.0 <= value <= 1.0:
        raise DatasetError(f"{where}: 'correct' must be true/false, yes/no, 1/0, a number in "
                           f"[0, 1] or empty, got {text!r}")
    return value


def _merge(before: base.GivenItem | None, item: str, cell: Mapping[str, str],
           given: dict[str, float | None], where: str) -> base.GivenItem:
    """The item with one more row: its question and gold where it had none, and its
    item scores, which must agree with the earlier rows'."""
    it = before or base.GivenItem(item, where=where)
    if not it.question and cell.get("question"):
        it = replace(it, question=cell["question"])
    if not it.gold and cell.get("gold"):
        it = replace(it, gold=cell["gold"])
    return base.with_item_scores(it, given, where)


def _chain(first: tuple[int, Mapping[str, Any]], rest: base.Rows) -> base.Rows:
    yield first
    yield from rest


def _read(path: Path, rows: base.Rows | None, options: base.ReadOptions) -> base.Generations:
    return read_table(path, options.columns)


base.IMPORTERS.add("csv", base.Importer(_read, suffixes=(".csv",)))

"""Load benchmark items from local files: JSON Lines, a JSON list, or CSV (optionally gzipped).

A :class:`FieldMapping` says which fields of a row hold the id, the question (or the parts
it is joined from), the choices and the gold answer. :func:`load_items` turns every row into
an :class:`~credo.tasks.base.Item` with a normalised gold answer, or raises
:class:`DatasetError` naming the file, the line and the problem.

Line numbers are 1-based: the physical line for JSON Lines, the line a record starts on
for CSV (the header is line 1), and the position in the list for a JSON file.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import string
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from credo.errors import UserError
from credo.tasks.answers import normalise_gold
from credo.tasks.base import AnswerFormat, Item

__all__ = [
    "GOLD_TRANSFORMS",
    "DatasetError",
    "FieldMapping",
    "gsm8k_gold",
    "load_items",
    "parse_json",
    "read_rows",
]

LETTERS = string.ascii_uppercase


class DatasetError(UserError):
    """A data file that cannot be read as items; the message names the file and line."""


class DataFileNotFound(DatasetError, FileNotFoundError):
    """A data file that does not exist (a :class:`DatasetError` and a FileNotFoundError)."""


def gsm8k_gold(answer: str) -> str:
    """The final answer of a GSM8K solution: the text after the last ``####``."""
    if "####" not in answer:
        raise ValueError("no '####' final-answer marker in the answer")
    return answer.rsplit("####", 1)[1].strip()


GOLD_TRANSFORMS: dict[str, Callable[[str], str]] = {"gsm8k": gsm8k_gold}
"""Named gold transforms usable as ``FieldMapping(gold_transform="gsm8k")``."""


@dataclass(frozen=True)
class FieldMapping:
    """Which fields of a row make an :class:`Item`.

    Attributes:
        question: the field holding the question text (ignored when ``question_parts``
            is given).
        gold: the field holding the reference answer.
        id: the field holding a unique id; None gives ids ``f"{stem}-{line_no}"``.
        choices: for multiple choice, either a list of fields (one option each, in order),
            or one field holding a list of option texts or an object
            ``{"label": [...], "text": [...]}`` (the Hugging Face ARC layout).
        gold_is_index: the gold field is a 0-based option index rather than a letter.
        question_parts: fields joined with ``question_sep`` to make the question
            (SVAMP: ``("Body", "Question")``).
        question_sep: the separator for ``question_parts``.
        gold_transform: applied to the gold text before normalisation; a callable or the
            name of one in :data:`GOLD_TRANSFORMS` (``"gsm8k"`` keeps what follows ``####``).
        meta: fields copied, as strings, into :attr:`Item.meta`.
    """

    question: str = "question"
    gold: str = "answer"
    id: str | None = None
    choices: Sequence[str] | str | None = None
    gold_is_index: bool = False
    question_parts: Sequence[str] | None = None
    question_sep: str = " "
    gold_transform: Callable[[str], str] | str | None = None
    meta: Sequence[str] = field(default=())

    def __post_init__(self) -> None:
        if isinstance(self.gold_transform, str) and self.gold_transform not in GOLD_TRANSFORMS:
            raise ValueError(
                f"unknown gold_transform {self.gold_transform!r}; known: {sorted(GOLD_TRANSFORMS)}"
            )
        if self.question_parts is not None and not self.question_parts:
            raise ValueError("question_parts must name at least one field")

    def transform(self, gold: str) -> str:
        """Apply :attr:`gold_transform` to a gold text."""
        t = self.gold_transform
        if t is None:
            return gold
        fn = GOLD_TRANSFORMS[t] if isinstance(t, str) else t
        return fn(gold)


# --------------------------------------------------------------------------- reading rows


def _guarded(path: Path, rows: Iterator[tuple[int, Any]]) -> Iterator[tuple[int, Any]]:
    """``rows``, with a file that cannot be opened or decompressed reported as a
    :class:`DatasetError` naming it (a missing file, a truncated or non-gzip ``.gz``)."""
    try:
        yield from rows
    except FileNotFoundError:
        raise DataFileNotFound(f"{path}: no such file") from None
    except (EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise DatasetError(f"{path}: not a complete gzip file ({e or type(e).__name__})") from None
    except OSError as e:
        raise DatasetError(f"{path}: cannot read it ({e.strerror or e})") from None


def _open_binary(path: Path) -> BinaryIO:
    if path.suffix.lower() == ".gz":
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return path.open("rb")


def _kind(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    ext = suffixes[-1] if suffixes else ""
    if ext in (".jsonl", ".ndjson"):
        return "jsonl"
    if ext == ".json":
        return "json"
    if ext == ".csv":
        return "csv"
    raise DatasetError(
        f"{path}: unknown data file type {ext or '(none)'!r}; "
        "expected .jsonl, .json or .csv (optionally .gz)"
    )


def parse_json(text: str | bytes, path: str | Path, line: int | str | None = None) -> Any:
    """``text`` parsed as JSON, or a :class:`DatasetError` naming ``path`` and ``line`` (for
    a whole file: the line of a syntax error). Besides invalid JSON, Python's parser
    refuses an integer of more than 4,300 digits (a ValueError) and nesting deeper than its
    recursion limit (a RecursionError); both are malformed input too."""
    where = f"{path}:{line}" if line is not None else str(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        at = where if line is not None else f"{path}:{e.lineno}"
        raise DatasetError(f"{at}: invalid JSON: {e.msg}") from None
    except ValueError as e:  # "Exceeds the limit (4300 digits) for integer string conversion"
        raise DatasetError(f"{where}: invalid JSON: {str(e).split(';')[0]}") from None
    except RecursionError:
        raise DatasetError(f"{where}: invalid JSON: nested too deeply to read") from None


def _iter_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    with _open_binary(path) as fh:
        for line_no, raw in enumerate(fh, 1):
            try:
                text = raw.decode("utf-8-sig" if line_no == 1 else "utf-8")
            except UnicodeDecodeError as e:
                raise DatasetError(f"{path}:{line_no}: not UTF-8 text ({e})") from e
            if not text.strip():
                continue
            yield line_no, parse_json(text, path, line_no)


def _iter_json(path: Path) -> Iterator[tuple[int, Any]]:
    with _open_binary(path) as fh:
        data = fh.read()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise DatasetError(f"{path}:{line}: not UTF-8 text ({e})") from None
    rows = parse_json(text, path)
    if isinstance(rows, dict):  # {"data": [...]} and similar wrappers
        lists = [v for v in rows.values() if isinstance(v, list)]
        if len(lists) == 1:
            rows = lists[0]
    if not isinstance(rows, list):
        raise DatasetError(f"{path}: expected a JSON list of objects, got {type(rows).__name__}")
    yield from enumerate(rows, 1)


def _iter_csv(
    path: Path, skip_lines: int = 0, delimiter: str = ","
) -> Iterator[tuple[int, Any]]:
    with _open_binary(path) as fb:
        text = io.TextIOWrapper(fb, encoding="utf-8-sig", newline="")
        reader = csv.DictReader(text, delimiter=delimiter)
        try:
            for _ in range(skip_lines):
                if not text.readline():
                    raise DatasetError(f"{path}: expected {skip_lines} banner lines and a header")
            start = skip_lines + 2
            for row in reader:
                if None in row:
                    raise DatasetError(
                        f"{path}:{start}: {len(row[None]) if row[None] else 0} more values "
                        f"than the {len(reader.fieldnames or [])} header columns"
                    )
                yield start, row
                start = skip_lines + reader.line_num + 1
        except UnicodeDecodeError:
            line, reason = _first_non_utf8(path)
            raise DatasetError(f"{path}:{line}: not UTF-8 text ({reason})") from None
        except csv.Error as e:
            raise DatasetError(f"{path}:{skip_lines + reader.line_num}: invalid CSV: {e}") from e


def _first_non_utf8(path: Path) -> tuple[int, str]:
    """The line of the first byte of ``path`` (decompressed) that is not UTF-8, and why.

    The CSV reader decodes in blocks, so its error locates the block, not the line; the bytes are
    read again to find it."""
    with _open_binary(path) as fh:
        data = fh.read()
    try:
        data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        return data[: e.start].count(b"\n") + 1, f"{e.reason} at byte {e.start}"
    return 1, "undecodable"


def read_csv(
    path: str | Path, skip_lines: int = 0, delimiter: str = ","
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line_no, row)`` for every row of a CSV file (``.gz`` too) whose header follows
    ``skip_lines`` banner lines (FreshQA has two), its fields separated by ``delimiter``;
    line numbers are the file's.

    Raises :class:`DatasetError` naming the file and line for text that is not UTF-8,
    invalid CSV, or a row with more values than the header has columns.
    """
    yield from _guarded(Path(path), _iter_csv(Path(path), skip_lines, delimiter))


def read_jsonl(path: str | Path) -> Iterator[tuple[int, Mapping[str, Any]]]:
    """``(line_no, row)`` for every object of a JSON Lines file (``.gz`` too), whatever
    its suffix; blank lines are skipped.

    Raises :class:`DatasetError` naming the file and line for text that is not UTF-8, not
    JSON, or not an object.
    """
    p = Path(path)
    for line_no, row in _guarded(p, _iter_jsonl(p)):
        if not isinstance(row, Mapping):
            raise DatasetError(f"{p}:{line_no}: expected an object, got {type(row).__name__}")
        yield line_no, row


_READERS: dict[str, Callable[[Path], Iterator[tuple[int, Any]]]] = {
    "jsonl": _iter_jsonl,
    "json": _iter_json,
    "csv": _iter_csv,
}


def read_rows(path: str | Path) -> Iterator[tuple[int, Mapping[str, Any]]]:
    """``(line_no, row)`` for every record of a ``.jsonl``/``.json``/``.csv`` file (or ``.gz``).

    Raises :class:`DatasetError` for unreadable records and for rows that are not objects.
    """
    p = Path(path)
    for line_no, row in _guarded(p, _READERS[_kind(p)](p)):
        if not isinstance(row, Mapping):
            raise DatasetError(f"{p}:{line_no}: expected an object, got {type(row).__name__}")
        yield line_no, row


# --------------------------------------------------------------------------- rows -> items


def _scalar(row: Mapping[str, Any], name: str, where: str) -> str:
    """A field as a string: present, not null, not a list or object."""
    if name not in row:
        raise DatasetError(f"{where}: missing field {name!r} (fields: {sorted(row)})")
    value = row[name]
    if value is None:
        raise DatasetError(f"{where}: field {name!r} is missing a value")
    if isinstance(value, (list, dict)):
        raise DatasetError(f"{where}: field {name!r} should be text, got {type(value).__name__}")
    return str(value)


def _question(row: Mapping[str, Any], m: FieldMapping, where: str) -> str:
    if m.question_parts is not None:
        parts = [_scalar(row, f, where).strip() for f in m.question_parts]
        text = m.question_sep.join(p for p in parts if p)
    else:
        text = _scalar(row, m.question, where).strip()
    if not text:
        raise DatasetError(f"{where}: empty question")
    return text


def _choices(
    row: Mapping[str, Any], m: FieldMapping, where: str
) -> tuple[tuple[str, ...], tuple[str, ...] | None]:
    """Option texts and, when the data names them, their labels."""
    labels: tuple[str, ...] | None = None
    if isinstance(m.choices, str):
        options, labels = _choice_list(row, m.choices, where)
    else:
        assert m.choices is not None
        options = tuple(_scalar(row, f, where).strip() for f in m.choices)
    if len(options) < 2 or len(options) > len(LETTERS):
        raise DatasetError(f"{where}: {len(options)} options; need 2 to {len(LETTERS)}")
    if labels is not None and len(labels) != len(options):
        raise DatasetError(f"{where}: {len(labels)} labels for {len(options)} options")
    if labels is not None and len(set(labels)) != len(labels):
        twice = sorted({x for x in labels if labels.count(x) > 1})
        raise DatasetError(f"{where}: option labels {twice} appear more than once")
    for i, opt in enumerate(options):
        if not opt:
            raise DatasetError(f"{where}: option {LETTERS[i]} is empty")
    return options, labels


def _choice_list(
    row: Mapping[str, Any], field: str, where: str
) -> tuple[tuple[str, ...], tuple[str, ...] | None]:
    """Options held in one field: a list of texts, or ``{"text": [...], "label": [...]}``."""
    if field not in row or row[field] is None:
        raise DatasetError(f"{where}: missing field {field!r} (fields: {sorted(row)})")
    value = row[field]
    labels: tuple[str, ...] | None = None
    if isinstance(value, Mapping):
        if "text" not in value:
            raise DatasetError(f"{where}: field {field!r} has no 'text' list")
        texts = value["text"]
        if "label" in value:
            labels = tuple(str(x).strip() for x in value["label"])
    elif isinstance(value, list):
        texts = value
    else:
        raise DatasetError(
            f"{where}: field {field!r} should be a list of options, got {type(value).__name__}"
        )
    if not isinstance(texts, list) or any(isinstance(t, (list, dict)) or t is None for t in texts):
        raise DatasetError(f"{where}: field {field!r} should hold a list of texts")
    return tuple(str(t).strip() for t in texts), labels


def _choice_gold(
    gold: str, n: int, labels: tuple[str, ...] | None, m: FieldMapping, where: str
) -> str:
    """The gold option as a letter, from an index, a label or a letter."""
    if m.gold_is_index:
        try:
            index = int(gold.strip())
        except ValueError:
            raise DatasetError(f"{where}: gold index {gold!r} is not an integer") from None
        if not 0 <= index < n:
            raise DatasetError(f"{where}: gold index {index} out of range for {n} options")
        return LETTERS[index]
    key = gold.strip()
    if labels is not None:
        if key not in labels:
            raise DatasetError(f"{where}: gold {key!r} is not one of the labels {list(labels)}")
        return LETTERS[labels.index(key)]
    letter = key.strip("()").upper()
    if len(letter) != 1 or letter not in LETTERS[:n]:
        raise DatasetError(f"{where}: gold {gold!r} is not a letter A-{LETTERS[n - 1]}")
    return letter


def _item(
    line_no: int, row: Mapping[str, Any], path: Path, fmt: AnswerFormat, m: FieldMapping
) -> Item:
    where = f"{path}:{line_no}"
    item_id = _scalar(row, m.id, where).strip() if m.id is not None else ""
    if m.id is not None and not item_id:
        raise DatasetError(f"{where}: empty id in field {m.id!r}")
    if not item_id:
        item_id = f"{path.name.split('.', 1)[0]}-{line_no}"
    question = _question(row, m, where)
    if m.gold not in row:  # a question without a gold answer: unknown
        return _unlabelled(item_id, question, row, fmt, m, where)
    try:
        gold = m.transform(_scalar(row, m.gold, where))
    except DatasetError:
        raise
    except ValueError as e:
        raise DatasetError(f"{where}: gold {row.get(m.gold)!r}: {e}") from e
    choices: tuple[str, ...] = ()
    if m.choices is not None:
        choices, labels = _choices(row, m, where)
        gold = _choice_gold(gold, len(choices), labels, m, where)
    elif fmt is AnswerFormat.CHOICE:
        raise DatasetError(f"{where}: a CHOICE task needs FieldMapping.choices")
    try:
        gold = normalise_gold(gold, fmt)
    except ValueError as e:
        raise DatasetError(f"{where}: gold {gold!r} does not fit format {fmt.value}: {e}") from e
    if not gold:
        raise DatasetError(f"{where}: empty gold answer")
    meta = {name: _scalar(row, name, where) for name in m.meta}
    return Item(id=item_id, question=question, gold=gold, choices=choices, meta=meta, source=where)


def _unlabelled(
    item_id: str, question: str, row: Mapping[str, Any], fmt: AnswerFormat, m: FieldMapping,
    where: str,
) -> Item:
    """An item whose correctness is unknown (``gold`` empty): scored, never graded."""
    choices: tuple[str, ...] = ()
    if m.choices is not None:
        choices, _ = _choices(row, m, where)
    elif fmt is AnswerFormat.CHOICE:
        raise DatasetError(f"{where}: a CHOICE task needs FieldMapping.choices")
    meta = {name: _scalar(row, name, where) for name in m.meta}
    return Item(id=item_id, question=question, gold="", choices=choices, meta=meta, source=where)


def load_items(
    path: str | Path,
    fmt: AnswerFormat,
    mapping: FieldMapping,
    *,
    keep: Callable[[Mapping[str, Any]], bool] | None = None,
) -> list[Item]:
    """Read every row of ``path`` as an :class:`Item`.

    ``keep`` selects rows before they are checked (rows it rejects are never validated).
    A file whose rows have no gold field at all is a set of questions to answer: its
    items carry an empty ``gold`` (correctness unknown; a run scores them and
    evaluates nothing); a gold field missing from some rows only is an error at the first
    such row. Raises :class:`DatasetError` (a :class:`ValueError`) naming ``file:line`` for
    a malformed row, a duplicate id, or a file without rows.
    """
    p = Path(path)
    fmt = AnswerFormat(fmt)
    items: list[Item] = []
    seen: dict[str, str] = {}
    n_rows = 0
    for line_no, row in read_rows(p):
        n_rows += 1
        if keep is not None and not keep(row):
            continue
        item = _item(line_no, row, p, fmt, mapping)
        _all_or_no_gold(items, item, mapping)
        if item.id in seen:
            raise DatasetError(
                f"{item.source}: duplicate id {item.id!r} (first at {seen[item.id]})"
            )
        seen[item.id] = item.source
        items.append(item)
    if n_rows == 0:
        raise DatasetError(f"{p}: no rows")
    return items


def _all_or_no_gold(before: list[Item], item: Item, m: FieldMapping) -> None:
    """Every item has its gold answer, or none has (an unlabelled file): the first row
    that breaks the rule set by the rows ``before`` it is named (an unlabelled first row
    is named when a later one has a gold answer)."""
    if not before or bool(before[0].gold) == bool(item.gold):
        return
    first = item if before[0].gold else before[0]
    raise DatasetError(
        f"{first.source}: missing field {m.gold!r} (other rows have it; a file of "
        "questions without answers has it in no row)"
    )

"""Science benchmarks from users' files: SciQ (open-ended or multiple choice) and SciBench
(numbers graded with SciBench's relative tolerance).

* ``sciq:<path>``: SciQ (Welbl et al. 2017). Two layouts:

  - plain text (``.txt``, LitCab's open-ended copy): blank-line-separated blocks of two
    lines, the question and its answer. Items are SHORT_TEXT, graded SimpleQA-style
    (``meta["grader"] = "simpleqa"``, the answer in ``meta["gold_answers"]``): an answer
    equal to the gold after normalisation is correct without a call, anything else goes
    to the grading judge (:mod:`credo.tasks.factual`).
  - the original release's JSON (a list, or JSON Lines) of ``question``,
    ``distractor1-3``, ``correct_answer``, ``support``: multiple choice (CHOICE) with the
    correct answer and the three distractors shuffled by a fixed per-item permutation
    (``meta["choice_order"]`` lists where each shown option came from: 0 is the correct
    answer). Rows without distractors make the file open-ended like the text layout.

  Ids are ``sciq-<file stem>-<k>`` (k: the 0-based position in the file).

* ``scibench:<path>``: SciBench (Wang et al. 2024) textbook problems: one of its
  ``dataset/original/<book>.json`` files or the folder of them. A folder's
  ``*_sol.json`` files (the problems with worked solutions, which SciBench uses as
  few-shot examples) are left out; name one to load it. Rows: ``problem_text``,
  ``answer_number``, ``unit``, ``source``, ``problemid``. The question is the problem
  followed by "Give the answer in <unit>." when it has a unit, as SciBench's evaluation
  appends the unit; a unit with a power of ten (``$10^{-19} \\mathrm{~J}$``) asks for the
  mantissa, which is what ``answer_number`` holds. Items are NUMBER, with
  ``meta["rel_tol"] = "0.05"``: SciBench counts an answer correct within a relative
  error of 5% (its paper, §3; the repository's evaluation scripts used absolute bounds
  of 0.1 in some versions), which the NUMBER correctness rule honours
  (:mod:`credo.tasks.grading`). Ids are ``scibench-<source>-<problemid>``; a problem id
  that repeats within a book (three do) gets ``#2``, ``#3`` in file order.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from credo.tasks.answers import normalise_number, normalise_text
from credo.tasks.base import AnswerFormat, Item, Task
from credo.tasks.loaders import LETTERS, DatasetError, read_jsonl, read_rows
from credo.tasks.registry import required_argument, task_loader

__all__ = ["SCIBENCH_REL_TOL", "load_scibench", "load_sciq"]

SCIQ_DOMAIN = "school science"
SCIBENCH_DOMAIN = "college-level science and mathematics problems"
SCIBENCH_REL_TOL = "0.05"
"""SciBench's tolerance: an answer within 5% relative error of the gold is correct."""

_SIMPLEQA = "simpleqa"  # the grader's name (credo.tasks.factual); no import needed
_DISTRACTORS = ("distractor1", "distractor2", "distractor3")


# --------------------------------------------------------------------------- sciq


@task_loader("sciq", source="your file", usage="sciq:<path to test.txt or test.json>")
def _sciq(arg: str | None) -> Task:
    """SciQ from the user's file: ``sciq:<path to a .txt, .json or .jsonl file>``."""
    arg = required_argument(arg, "task 'sciq' needs a file: 'sciq:<path to test.txt or test.json>'")
    return load_sciq(arg)


def load_sciq(path: str | Path) -> Task:
    """SciQ: the plain-text question/answer blocks (open-ended) or the original JSON
    (multiple choice when the rows have distractors); see the module docstring."""
    p = Path(path)
    if not p.is_file():
        raise DatasetError(f"{p}: no such file")
    stem = p.name.split(".", 1)[0]
    if p.suffix.lower() == ".txt":
        rows = [
            (line_no, {"question": q, "correct_answer": a})
            for line_no, q, a in _text_blocks(p)
        ]
    else:
        rows = list(_json_rows(p))
    if not rows:
        raise DatasetError(f"{p}: no questions")
    choice = all(d in rows[0][1] for d in _DISTRACTORS)
    items = [_sciq_item(row, f"{p}:{line_no}", f"sciq-{stem}-{k}", choice)
             for k, (line_no, row) in enumerate(rows)]
    fmt = AnswerFormat.CHOICE if choice else AnswerFormat.SHORT_TEXT
    return Task("sciq", tuple(items), fmt, SCIQ_DOMAIN)


def _text_blocks(path: Path) -> Iterator[tuple[int, str, str]]:
    """``(line_no, question, answer)`` of every blank-line-separated block of a text file."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as e:
        raise DatasetError(f"{path}: not UTF-8 text ({e})") from None
    block: list[tuple[int, str]] = []
    for line_no, line in enumerate([*text.splitlines(), ""], 1):
        if line.strip():
            block.append((line_no, line.strip()))
            continue
        if not block:
            continue
        if len(block) != 2:
            raise DatasetError(
                f"{path}:{block[0][0]}: a SciQ block is two lines, question then answer; "
                f"this one has {len(block)}"
            )
        yield block[0][0], block[0][1], block[1][1]
        block = []


def _json_rows(path: Path) -> Iterator[tuple[int, Mapping[str, Any]]]:
    """Rows of a JSON list or of JSON Lines (whatever the suffix)."""
    with path.open("rb") as fh:
        head = fh.read(4096).lstrip()
    if head.startswith(b"{"):
        yield from read_jsonl(path)
    else:
        yield from read_rows(path)


def _sciq_item(row: Mapping[str, Any], where: str, item_id: str, choice: bool) -> Item:
    question = _field(row, "question", where)
    answer = _field(row, "correct_answer", where)
    meta = {"support": str(row["support"]).strip()} if str(row.get("support") or "").strip() else {}
    if not choice:
        if not normalise_text(answer):
            raise DatasetError(f"{where}: answer {answer!r} is empty once normalised")
        meta.update(grader=_SIMPLEQA, gold_answers=json.dumps([answer], ensure_ascii=False))
        return Item(item_id, question, normalise_text(answer), meta=meta, source=where)
    options = [answer, *(_field(row, d, where) for d in _DISTRACTORS)]
    order = _permutation(item_id, len(options))  # shown position -> original index
    meta["choice_order"] = ",".join(map(str, order))
    return Item(
        item_id,
        question,
        LETTERS[order.index(0)],
        tuple(options[i] for i in order),
        meta=meta,
        source=where,
    )


def _field(row: Mapping[str, Any], key: str, where: str) -> str:
    value = row.get(key)
    if value is None or isinstance(value, (list, dict)) or not str(value).strip():
        raise DatasetError(f"{where}: field {key!r} must be a non-empty text")
    return str(value).strip()


def _permutation(item_id: str, n: int) -> list[int]:
    """A fixed pseudo-random order of ``range(n)``, seeded by the item id."""
    seed = int.from_bytes(hashlib.sha256(f"sciq:{item_id}".encode()).digest()[:8])
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return order


# --------------------------------------------------------------------------- scibench


@task_loader("scibench", fmt=AnswerFormat.NUMBER, source="your file",
             usage="scibench:<path to dataset/original>")
def _scibench(arg: str | None) -> Task:
    """SciBench from the user's files: ``scibench:<a book's .json file or their folder>``."""
    arg = required_argument(arg, "task 'scibench' needs a file or folder: "
                            "'scibench:<path to dataset/original>'")
    return load_scibench(arg)


def load_scibench(path: str | Path) -> Task:
    """SciBench problems from one ``<book>.json`` file, or from every ``*.json`` of a
    folder except the ``*_sol.json`` ones, in file-name order (module docstring)."""
    p = Path(path)
    if p.is_dir():
        files = sorted(f for f in p.glob("*.json") if not f.name.endswith("_sol.json"))
        if not files:
            raise DatasetError(f"{p}: no SciBench .json files (other than *_sol.json)")
    elif p.is_file():
        files = [p]
    else:
        raise DatasetError(f"{p}: no such file or folder")
    items: list[Item] = []
    seen: dict[str, int] = {}
    for f in files:
        for line_no, row in read_rows(f):
            item = _scibench_item(row, f"{f}:{line_no}", f.name.split(".", 1)[0])
            seen[item.id] = seen.get(item.id, 0) + 1
            if seen[item.id] > 1:  # a problem id repeated in a book: numbered in file order
                item = dataclasses.replace(item, id=f"{item.id}#{seen[item.id]}")
            items.append(item)
    if not items:
        raise DatasetError(f"{p}: no problems")
    return Task("scibench", tuple(items), AnswerFormat.NUMBER, SCIBENCH_DOMAIN)


def _scibench_item(row: Mapping[str, Any], where: str, book: str) -> Item:
    problem = _field(row, "problem_text", where)
    raw = _field(row, "answer_number", where)
    try:
        gold = normalise_number(raw)
    except ValueError:
        raise DatasetError(f"{where}: answer_number {raw!r} is not a number") from None
    unit = scibench_unit(str(row.get("unit") or ""))
    source = " ".join(str(row.get("source") or "").split()) or book
    problem_id = "_".join(str(row.get("problemid") or "").split())
    if not problem_id:
        raise DatasetError(f"{where}: field 'problemid' must be a non-empty text")
    question = f"{problem} Give the answer in {unit}." if unit else problem
    return Item(
        f"scibench-{source}-{problem_id}",
        question,
        gold,
        meta={"source": source, "problemid": problem_id, "unit": unit,
              "rel_tol": SCIBENCH_REL_TOL},
        source=where,
    )


def scibench_unit(unit: str) -> str:
    """A SciBench unit as the question states it: whitespace collapsed, a bare ``$``
    (a currency, not a LaTeX delimiter) written as "dollars"."""
    text = " ".join(unit.split())
    return "dollars" if text == "$" else text

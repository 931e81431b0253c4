"""Loaders for the multiple-choice benchmarks of Le et al. (§3.1): ARC-Challenge,
OpenBookQA, StrategyQA and BIG-Bench(-Hard) sports understanding, and Wu et al.'s
CommonsenseQA (§4, App. I), from users' files.

Registered as tasks that take the file path as argument (``load_task("strategyqa:/data/
strategyqa/test.jsonl")``). Layouts read (JSON Lines; OpenBookQA's ``.json`` files that
hold one object per line are read as JSON Lines too):

* ``arc_challenge``: Hugging Face ARC rows ``id``, ``question``, ``choices {label, text}``,
  ``answerKey`` (other fields, such as a model ``response``, are ignored).
* ``openbookqa``: SWAG-style rows ``id``, ``sent1`` (stem), ``sent2``, ``ending0-3``,
  ``label`` (gold index); or the AI2 layout ``id``, ``question {stem, choices}``,
  ``answerKey``.
* ``strategyqa``: ``id`` or ``qid``, ``question``, ``answer`` (bool) → options A) Yes
  B) No, as in Le et al., Fig. 4.
* ``bbh_sports``: ``id``, ``question`` (a sentence), ``answer`` (1/0, or
  ``target`` "yes"/"no" in the BBH file) → "Is the following sentence plausible?"
  with options A) plausible B) implausible.
* ``commonsenseqa``: the Hugging Face layout ``id``, ``question`` (text),
  ``question_concept``, ``choices {label, text}``, ``answerKey``; or the original
  release's ``id``, ``question {stem, question_concept, choices [{label, text}]}``,
  ``answerKey``. The public test split has no answer keys (an empty ``answerKey`` is an
  error naming the row): use the validation split.

A malformed row raises :class:`~credo.tasks.loaders.DatasetError` naming ``file:line``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from credo.tasks.base import AnswerFormat, Item, Task
from credo.tasks.loaders import DatasetError, read_jsonl, read_rows
from credo.tasks.registry import required_argument, task_loader

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
SPORTS_PROMPT = "Is the following sentence plausible? "
COMMONSENSE_DOMAIN = "commonsense reasoning"
"""CommonsenseQA's perturbation domain: Wu et al., App. A.4's name for the benchmark's domain."""

RowParser = Callable[[Mapping[str, Any], str], tuple[str, str, tuple[str, ...], str]]
"""``parse(row, where) -> (id, question, choices, gold letter)``."""


def load_mc_file(path: str | Path, parse: RowParser, name: str, domain: str) -> Task:
    """A CHOICE task from ``path``, one :class:`Item` per row through ``parse``."""
    p = Path(path)
    if not p.is_file():
        raise DatasetError(f"{p}: no such file")
    items: list[Item] = []
    seen: dict[str, str] = {}
    for line_no, row in _rows(p):
        where = f"{p}:{line_no}"
        item_id, question, choices, gold = parse(row, where)
        if item_id in seen:
            raise DatasetError(f"{where}: duplicate id {item_id!r} (first at {seen[item_id]})")
        seen[item_id] = where
        items.append(Item(item_id, question, gold, choices, source=where))
    if not items:
        raise DatasetError(f"{p}: no rows")
    return Task(name, tuple(items), AnswerFormat.CHOICE, domain)


def _rows(path: Path) -> Iterator[tuple[int, Mapping[str, Any]]]:
    """``read_rows``, except that a ``.json`` file holding JSON Lines is read as such."""
    if path.suffix.lower() == ".json":
        with path.open("rb") as fh:
            head = fh.read(4096).lstrip()
        if head.startswith(b"{"):
            yield from read_jsonl(path)
            return
    yield from read_rows(path)


def _text(row: Mapping[str, Any], key: str, where: str) -> str:
    value = row.get(key)
    if value is None or isinstance(value, (list, dict)) or not str(value).strip():
        raise DatasetError(f"{where}: field {key!r} must be a non-empty text")
    return str(value).strip()


def _id(row: Mapping[str, Any], where: str, *keys: str) -> str:
    for key in keys:
        if row.get(key) is not None and str(row[key]).strip():
            return str(row[key]).strip()
    raise DatasetError(f"{where}: no id field (looked for {', '.join(keys)})")


def _bool(value: Any, where: str, key: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "yes", "1", "false", "no", "0"):
        return value.strip().lower() in ("true", "yes", "1")
    raise DatasetError(f"{where}: field {key!r} must be true/false (or 1/0, yes/no), got {value!r}")


def parse_arc(row: Mapping[str, Any], where: str) -> tuple[str, str, tuple[str, ...], str]:
    """ARC (Hugging Face layout)."""
    choices = row.get("choices")
    if not isinstance(choices, Mapping) or not isinstance(choices.get("text"), list):
        raise DatasetError(f"{where}: field 'choices' must be {{'label': [...], 'text': [...]}}")
    texts = tuple(str(t).strip() for t in choices["text"])
    labels = [str(x).strip() for x in choices.get("label") or LETTERS[: len(texts)]]
    if len(labels) != len(texts) or len(texts) < 2:
        raise DatasetError(f"{where}: {len(texts)} options with {len(labels)} labels")
    key = _text(row, "answerKey", where)
    if key not in labels:
        raise DatasetError(f"{where}: answerKey {key!r} is not one of the labels {labels}")
    return _id(row, where, "id"), _text(row, "question", where), texts, LETTERS[labels.index(key)]


def parse_openbookqa(row: Mapping[str, Any], where: str) -> tuple[str, str, tuple[str, ...], str]:
    """OpenBookQA: SWAG-style (``sent1``, ``ending0-3``, ``label``) or AI2 layout."""
    if "sent1" in row:
        stem = " ".join(
            s for s in (_text(row, "sent1", where), str(row.get("sent2") or "").strip()) if s
        )
        endings = []
        k = 0
        while f"ending{k}" in row:
            endings.append(_text(row, f"ending{k}", where))
            k += 1
        if len(endings) < 2:
            raise DatasetError(f"{where}: need fields ending0, ending1, ...")
        label = row.get("label")
        if isinstance(label, bool) or not isinstance(label, int) or not 0 <= label < len(endings):
            raise DatasetError(f"{where}: label must be an option index 0-{len(endings) - 1}")
        return _id(row, where, "id"), stem, tuple(endings), LETTERS[label]
    q = row.get("question")
    if not isinstance(q, Mapping):
        raise DatasetError(f"{where}: expected SWAG-style 'sent1' or an AI2 'question' object")
    flat = {
        "id": row.get("id"),
        "question": q.get("stem"),
        "answerKey": row.get("answerKey"),
        "choices": {
            "label": [c.get("label") for c in q.get("choices", [])],
            "text": [c.get("text") for c in q.get("choices", [])],
        },
    }
    return parse_arc(flat, where)


def parse_commonsenseqa(
    row: Mapping[str, Any], where: str
) -> tuple[str, str, tuple[str, ...], str]:
    """CommonsenseQA: the Hugging Face layout or the original (AI2-style) one."""
    if not str(row.get("answerKey") or "").strip():
        raise DatasetError(
            f"{where}: empty answerKey (CommonsenseQA's test split is unlabelled; "
            "use the validation split)"
        )
    if isinstance(row.get("question"), Mapping):
        return parse_openbookqa(row, where)
    return parse_arc(row, where)


def parse_strategyqa(row: Mapping[str, Any], where: str) -> tuple[str, str, tuple[str, ...], str]:
    """StrategyQA: a yes/no question as options A) Yes B) No."""
    answer = _bool(row.get("answer"), where, "answer")
    return (
        _id(row, where, "id", "qid"),
        _text(row, "question", where),
        ("Yes", "No"),
        ("A" if answer else "B"),
    )


def parse_sports(row: Mapping[str, Any], where: str) -> tuple[str, str, tuple[str, ...], str]:
    """Sports understanding: is the sentence plausible? A) plausible B) implausible."""
    sentence = _text(row, "question" if "question" in row else "input", where)
    if sentence.lower().startswith(SPORTS_PROMPT.lower()):
        sentence = sentence[len(SPORTS_PROMPT) :].strip()
    key = "answer" if "answer" in row else "target"
    plausible = _bool(row.get(key), where, key)
    item_id = _id(row, where, "id") if "id" in row else where.rsplit(":", 1)[-1]
    return (
        f"sports-{item_id}",
        f"{SPORTS_PROMPT}{sentence}",
        ("plausible", "implausible"),
        ("A" if plausible else "B"),
    )


def _path(name: str, arg: str | None) -> str:
    return required_argument(arg, f"task {name!r} needs a file: '{name}:<path to the JSONL file>'")


def _file_task(name: str, parse: RowParser, domain: str, what: str) -> None:
    """Register task ``name``: a multiple-choice file the user gives as ``name:<path>``,
    one item per row through ``parse``, ``domain`` the perturbation writer's topic;
    ``what`` the loader's docstring."""

    def load(arg: str | None) -> Task:
        return load_mc_file(_path(name, arg), parse, name, domain)

    load.__doc__ = what
    load.__name__ = load.__qualname__ = f"_{name}"
    task_loader(name, fmt=AnswerFormat.CHOICE, source="your file",
                usage=f"{name}:<path to the JSONL file>")(load)


_file_task("arc_challenge", parse_arc, "grade-school science",
           "ARC-Challenge from a Hugging Face-layout JSONL file.")
_file_task("openbookqa", parse_openbookqa, "elementary science",
           "OpenBookQA from a SWAG-style or AI2-layout JSON Lines file.")
_file_task("commonsenseqa", parse_commonsenseqa, COMMONSENSE_DOMAIN,
           "CommonsenseQA (Wu et al., §4) from a Hugging Face- or original-layout JSON Lines file.")
_file_task("strategyqa", parse_strategyqa, "implicit multi-step reasoning",
           "StrategyQA yes/no questions as two-option multiple choice.")
_file_task("bbh_sports", parse_sports, "sports understanding",
           "BIG-Bench(-Hard) sports understanding as two-option multiple choice.")


__all__ = [
    "load_mc_file",
    "parse_arc",
    "parse_commonsenseqa",
    "parse_openbookqa",
    "parse_sports",
    "parse_strategyqa",
]

"""Generations a user already has, read from files: what ``credo score`` scores.

Four layouts, told apart by the file (:func:`read_generations`):

* **credo's own** JSON Lines, one object per sample: ``{"item": str, "set": "original" |
  "perturbed" | "paraphrased" | <any sample set>, "answer": str | null, "correct": true |
  false | null}``, optional ``text``, ``gold``, ``question``, ``choices``, ``ref``,
  ``prefix`` and ``logprobs`` (``[{"token", "logprob", "top": [[token, logprob], ...]}]``).
  A run folder's ``samples.jsonl`` is read as it is (``id`` for ``item``), so a finished
  run's samples score again without a model.
* **lm-evaluation-harness** ``--log_samples`` output (``samples_<task>_<date>.jsonl``): one
  row per document and filter; the sampled generations of a document are ``resps[0]`` (a
  task with ``repeats: n`` has n of them), their extracted answers ``filtered_resps`` when
  it has one per generation; a generation is correct when its answer equals ``target``
  (after trimming and case folding). The first filter of each document is read unless
  ``lm_eval_filter`` names another. Log-likelihood rows (multiple choice) hold no sampled
  answers and are refused.
* **inspect_ai** eval logs, ``.json`` (a ``samples`` list) or ``.eval`` (a zip of
  ``samples/<id>_epoch_<k>.json``): each epoch of a sample is one generation of item
  ``id``; the answer is the first score's ``answer`` (else the completion), correct when
  that score's value is ``C`` / ``1`` / true, wrong when ``I`` / ``0`` / false.

A bad row raises :class:`~credo.tasks.loaders.DatasetError` naming the file and line.
"""

from __future__ import annotations

import lzma
import math
import zipfile
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from credo.tasks.loaders import DataFileNotFound, DatasetError, parse_json, read_jsonl
from credo.types import TokenLogprob

__all__ = ["Generations", "GivenItem", "GivenSample", "read_generations"]


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


def read_generations(path: str | Path, *, lm_eval_filter: str | None = None) -> Generations:
    """Read generations from ``path`` in whichever layout it has (module docstring)."""
    p = Path(path)
    if not p.is_file():
        raise DataFileNotFound(f"{p}: no such file")
    if p.suffix == ".eval":
        return _from_inspect(p, _inspect_zip_samples(p))
    if p.suffix == ".json":
        return _from_inspect(p, _inspect_json_samples(p))
    rows = read_jsonl(p)
    first = next(rows, None)
    if first is None:
        raise DatasetError(f"{p}: no rows")
    line_no, row = first
    rows = _chain((line_no, row), rows)
    if "doc_id" in row:
        return _from_lm_eval(p, rows, lm_eval_filter)
    return _from_credo(p, rows)


def _chain(first: tuple[int, Mapping[str, Any]], rest: Iterator) -> Iterator:
    yield first
    yield from rest


# --------------------------------------------------------------------------- credo


def _from_credo(path: Path, rows: Iterator[tuple[int, Mapping[str, Any]]]) -> Generations:
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
                _logprobs(row.get("logprobs"), where),
            )
        )
        if item not in items or not items[item].question:
            items[item] = _item(item, row, where)
    out.items = list(items.values())
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


# --------------------------------------------------------------------------- lm-eval


def _from_lm_eval(
    path: Path, rows: Iterator[tuple[int, Mapping[str, Any]]], wanted: str | None
) -> Generations:
    out = Generations(str(path), "lm-evaluation-harness")
    seen: dict[str, str] = {}  # doc id -> the filter read
    for line_no, row in rows:
        where = f"{path}:{line_no}"
        doc = str(row.get("doc_id"))
        flt = str(row.get("filter", "none"))
        if (wanted is not None and flt != wanted) or seen.setdefault(doc, flt) != flt:
            continue
        texts = _lm_eval_responses(row.get("resps"), where)
        answers = _lm_eval_answers(row.get("filtered_resps"), texts)
        target = row.get("target")
        gold = "" if target is None else str(target)
        for text, answer in zip(texts, answers, strict=True):
            correct = _same(answer, gold) if gold else None
            out.samples.append(GivenSample(doc, "original", text, answer, correct))
        out.items.append(GivenItem(doc, _lm_eval_question(row), gold))
    if not out.samples:
        raise DatasetError(f"{path}: no rows with filter {wanted!r}")
    return out


def _lm_eval_responses(resps: Any, where: str) -> list[str]:
    groups = resps if isinstance(resps, list) else []
    flat = [r for group in groups for r in (group if isinstance(group, list) else [group])]
    if not flat or not all(isinstance(r, str) for r in flat):
        raise DatasetError(
            f"{where}: 'resps' holds no generated texts (a log-likelihood task has no sampled"
            " answers to score)"
        )
    return flat


def _lm_eval_answers(filtered: Any, texts: list[str]) -> list[str | None]:
    values = filtered if isinstance(filtered, list) else []
    if len(values) == 1 and isinstance(values[0], list):
        values = values[0]
    if len(values) == len(texts) and all(isinstance(v, str) for v in values):
        return [v.strip() or None for v in values]
    return [t.strip() or None for t in texts]


def _lm_eval_question(row: Mapping[str, Any]) -> str:
    doc = row.get("doc")
    if isinstance(doc, Mapping):
        for key in ("question", "query", "problem", "prompt", "input"):
            if isinstance(doc.get(key), str):
                return doc[key]
    return ""


def _same(answer: str | None, gold: str) -> bool:
    return answer is not None and answer.strip().casefold() == gold.strip().casefold()


# --------------------------------------------------------------------------- inspect_ai


def _inspect_json_samples(path: Path) -> Iterator[tuple[str, Mapping[str, Any]]]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise DatasetError(f"{path}: not a JSON eval log ({e})") from None
    except OSError as e:
        raise DatasetError(f"{path}: cannot read it ({e.strerror or e})") from None
    log = parse_json(text, path)
    samples = log.get("samples") if isinstance(log, dict) else None
    if not isinstance(samples, list):
        raise DatasetError(f"{path}: an inspect_ai eval log needs a 'samples' list")
    for k, sample in enumerate(samples):
        yield f"{path}: samples[{k}]", sample


_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, lzma.LZMAError, EOFError,
               OSError, NotImplementedError, RuntimeError, ValueError)
"""What :mod:`zipfile` raises for a damaged archive or member: a bad directory or CRC, a
cut or corrupt compressed stream, an unknown compression method (NotImplementedError),
an encrypted member (RuntimeError), an impossible offset (ValueError, OSError)."""


def _inspect_zip_samples(path: Path) -> Iterator[tuple[str, Mapping[str, Any]]]:
    try:
        archive = zipfile.ZipFile(path)
    except _ZIP_ERRORS as e:
        raise DatasetError(f"{path}: not an inspect_ai .eval archive ({e})") from None
    with archive:
        names = sorted(n for n in archive.namelist()
                       if n.startswith("samples/") and n.endswith(".json"))
        for name in names:
            try:
                text = archive.read(name).decode("utf-8")
            except UnicodeDecodeError as e:
                raise DatasetError(f"{path}:{name}: not JSON ({e})") from None
            except _ZIP_ERRORS as e:
                raise DatasetError(f"{path}:{name}: a damaged archive member ({e})") from None
            yield f"{path}:{name}", parse_json(text, f"{path}:{name}")


def _from_inspect(path: Path, samples: Iterator[tuple[str, Mapping[str, Any]]]) -> Generations:
    out = Generations(str(path), "inspect_ai")
    items: dict[str, GivenItem] = {}
    ordered: list[tuple[str, int, GivenSample]] = []
    for where, sample in samples:
        if not isinstance(sample, Mapping) or "id" not in sample:
            raise DatasetError(f"{where}: a sample needs an 'id'")
        item = str(sample["id"])
        text = _inspect_completion(sample.get("output"))
        answer, correct = _inspect_score(sample.get("scores"), text, where)
        epoch = _inspect_epoch(sample.get("epoch"), where)
        ordered.append((item, epoch, GivenSample(item, "original", text, answer, correct)))
        if item not in items:
            target = sample.get("target")
            gold = target[0] if isinstance(target, list) and target else target
            question = sample.get("input") if isinstance(sample.get("input"), str) else ""
            items[item] = GivenItem(item, question, "" if gold is None else str(gold),
                                    _inspect_choices(sample.get("choices"), where))
    if not ordered:
        raise DatasetError(f"{path}: no samples")
    order = {item: k for k, item in enumerate(items)}
    out.samples = [s for _, _, s in sorted(ordered, key=lambda t: (order[t[0]], t[1]))]
    out.items = list(items.values())
    return out


def _inspect_epoch(value: Any, where: str) -> int:
    """A sample's epoch: absent or null is 1, else a positive integer (issue 21)."""
    if value is None:
        return 1
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    raise DatasetError(f"{where}: 'epoch' must be a positive integer, got {value!r:.40}")


def _inspect_choices(value: Any, where: str) -> tuple[str, ...]:
    """A sample's option texts: absent, null or a list of strings (issue 21)."""
    if value is None:
        return ()
    if isinstance(value, list) and all(isinstance(c, str) for c in value):
        return tuple(value)
    raise DatasetError(f"{where}: 'choices' must be a list of option texts")


def _inspect_completion(output: Any) -> str:
    """The completion of a sample's ``output``; "" where the log holds none readable."""
    if not isinstance(output, Mapping):
        return ""
    if isinstance(output.get("completion"), str):
        return output["completion"]
    choices = output.get("choices")
    for choice in choices if isinstance(choices, list) else ():
        message = choice.get("message") if isinstance(choice, Mapping) else None
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, str):
            return content
        if isinstance(content, list):  # content parts: the text ones
            return "".join(p["text"] for p in content
                           if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return ""


_RIGHT = {"C", "CORRECT", "1", "TRUE", "YES"}
_WRONG = {"I", "INCORRECT", "0", "FALSE", "NO"}


def _inspect_score(
    scores: Any, text: str, where: str
) -> tuple[str | None, bool | float | None]:
    """The first scorer's extracted answer and verdict (C/I, 1/0, true/false, a number)."""
    if not isinstance(scores, Mapping) or not scores:
        return (text.strip() or None), None
    score = next(iter(scores.values()))
    if not isinstance(score, Mapping):
        raise DatasetError(f"{where}: a score must be an object with a 'value'")
    given = score.get("answer")
    answer = given.strip() if isinstance(given, str) and given.strip() else (text.strip() or None)
    value = score.get("value")
    if isinstance(value, bool):
        return answer, value
    if isinstance(value, int | float) and 0 <= value <= 1:
        return answer, float(value) if value not in (0, 1) else bool(value)
    key = str(value).strip().upper()
    return answer, True if key in _RIGHT else False if key in _WRONG else None

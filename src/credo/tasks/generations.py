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
  task with ``repeats: n`` has n of them). Correctness is lm-eval's own: the task's first
  metric with a per-sample score in [0, 1] (``exact_match``), applied to each response
  after the row's filter, as lm-eval applies it to the one it keeps
  (:mod:`credo.tasks.lm_eval_scores`; the answer is what the filter keeps, normalised as
  the task's ``exact_match`` compares: what ``credo run --task lm-eval:<task>`` compares
  too). The first filter of each document is read unless ``lm_eval_filter`` names another.
  An item's id is ``credo run``'s, ``<task>@<revision>:<doc_id>``, where the results file
  beside the samples names a pinned or local dataset; else the document's own id field
  when every document has a distinct one, else ``doc_id`` (issue 34 item 12).
  Log-likelihood rows (multiple choice) hold no sampled answers and are refused, and so is
  lm-eval's ``results_*.json`` (aggregates, no generations).
* **inspect_ai** eval logs, ``.json`` (a ``samples`` list) or ``.eval`` (a zip of
  ``samples/<id>_epoch_<k>.json``, zstd-compressed by current inspect_ai: read through its
  own reader when it is installed, else with ``zstandard``): each epoch of a sample is one
  generation of item ``id``; the answer is the first score's ``answer`` (else the
  completion), correct when that scorer's value is ``C`` / ``1`` / true, wrong when ``I`` /
  ``0`` / false. Samples the log marks errored (:attr:`Generations.failed`) or cancelled
  (:attr:`Generations.cancelled`: inspect's cancellation error), and those an unfinished
  eval never started (:attr:`Generations.not_started`), are left out and counted.

With ``recompute``, the files' own correctness is not read (credo grades the answers).
A bad row raises :class:`~credo.tasks.loaders.DatasetError` naming the file and line.
"""

from __future__ import annotations

import lzma
import math
import struct
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


def read_generations(
    path: str | Path, *, lm_eval_filter: str | None = None, recompute: bool = False
) -> Generations:
    """Read generations from ``path`` in whichever layout it has (module docstring).

    ``recompute``: the file's own correctness is not wanted (credo grades the answers),
    so lm-eval's metric is not rebuilt."""
    p = Path(path)
    if not p.is_file():
        raise DataFileNotFound(f"{p}: no such file")
    if p.suffix == ".eval":
        return _from_inspect(p, *_inspect_eval(p))
    if p.suffix == ".json":
        return _from_inspect(p, *_inspect_json(p))
    rows = read_jsonl(p)
    first = next(rows, None)
    if first is None:
        raise DatasetError(f"{p}: no rows")
    line_no, row = first
    rows = _chain((line_no, row), rows)
    if "doc_id" in row:
        return _from_lm_eval(p, rows, lm_eval_filter, recompute)
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


# --------------------------------------------------------------------------- lm-eval


def _from_lm_eval(
    path: Path, rows: Iterator[tuple[int, Mapping[str, Any]]], wanted: str | None,
    recompute: bool,
) -> Generations:
    from credo.tasks.lm_eval_scores import read_lm_eval_rows

    out = Generations(str(path), "lm-evaluation-harness")
    seen: dict[str, str] = {}  # doc id -> the filter read
    kept: list[tuple[int, Mapping[str, Any]]] = []
    for line_no, row in rows:
        doc = str(row.get("doc_id"))
        flt = str(row.get("filter", "none"))
        if (wanted is not None and flt != wanted) or seen.setdefault(doc, flt) != flt:
            continue
        kept.append((line_no, row))
    if not kept:
        raise DatasetError(f"{path}: no rows with filter {wanted!r}")
    texts = [_lm_eval_responses(row.get("resps"), f"{path}:{n}") for n, row in kept]
    flt = str(kept[0][1].get("filter", "none"))
    read = read_lm_eval_rows(path, kept, texts, flt, recompute=recompute)
    out.correctness = read.correctness
    out.answers = read.answered
    for (_, row), doc, its_texts, answers, scores in zip(
        kept, read.ids, texts, read.answers, read.scores, strict=True
    ):
        target = row.get("target")
        gold = "" if target is None else str(target)
        for text, answer, score in zip(its_texts, answers, scores, strict=True):
            out.samples.append(GivenSample(doc, "original", text, answer, _verdict(score)))
        out.items.append(GivenItem(doc, _lm_eval_question(row), gold))
    out.settings = _lm_eval_settings(kept[0][1], len(texts[0]))
    return out


def _verdict(score: float | None) -> bool | float | None:
    """A score in [0, 1] as credo's correctness: 0 and 1 are wrong and right."""
    if score is None:
        return None
    return bool(score) if score in (0.0, 1.0) else float(score)


def _lm_eval_settings(row: Mapping[str, Any], repeats: int) -> dict[str, Any]:
    """The sampling settings the row's request says (``arguments.gen_args_0.arg_1``)."""
    args = row.get("arguments")
    first = next(iter(args.values()), None) if isinstance(args, Mapping) and args else None
    gen = first.get("arg_1") if isinstance(first, Mapping) else None
    gen = gen if isinstance(gen, Mapping) else {}
    out: dict[str, Any] = {"repeats": repeats}
    for theirs, ours in (("temperature", "temperature"), ("top_p", "top_p"),
                         ("top_k", "top_k"), ("max_gen_toks", "max_tokens")):
        if _number(gen.get(theirs)):
            out[ours] = gen[theirs]
    if gen.get("do_sample") is False and "temperature" not in out:
        out["temperature"] = 0.0
    return out


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _lm_eval_responses(resps: Any, where: str) -> list[str]:
    groups = resps if isinstance(resps, list) else []
    flat = [r for group in groups for r in (group if isinstance(group, list) else [group])]
    if not flat or not all(isinstance(r, str) for r in flat):
        raise DatasetError(
            f"{where}: 'resps' holds no generated texts (a log-likelihood task has no sampled"
            " answers to score)"
        )
    return flat


def _lm_eval_question(row: Mapping[str, Any]) -> str:
    doc = row.get("doc")
    if isinstance(doc, Mapping):
        for key in ("question", "query", "problem", "prompt", "input"):
            if isinstance(doc.get(key), str):
                return doc[key]
    return ""


# --------------------------------------------------------------------------- inspect_ai


Samples = Iterator[tuple[str, Mapping[str, Any]]]
"""``(where, sample)`` for each sample of an inspect_ai log."""


def _inspect_json(path: Path) -> tuple[Samples, Mapping[str, Any]]:
    """The samples and the header (``status``, ``eval``, ``plan``) of a ``.json`` log."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise DatasetError(f"{path}: not a JSON eval log ({e})") from None
    except OSError as e:
        raise DatasetError(f"{path}: cannot read it ({e.strerror or e})") from None
    log = parse_json(text, path)
    if isinstance(log, dict) and "samples" not in log and {"configs", "results"} <= log.keys():
        raise DatasetError(
            f"{path}: an lm-evaluation-harness results file holds aggregate metrics, no"
            " generations; score the samples_<task>_<date>.jsonl lm-eval writes beside it"
            " with --log_samples"
        )
    samples = log.get("samples") if isinstance(log, dict) else None
    if not isinstance(samples, list):
        raise DatasetError(f"{path}: an inspect_ai eval log needs a 'samples' list")
    return ((f"{path}: samples[{k}]", sample) for k, sample in enumerate(samples)), log


def _inspect_eval(path: Path) -> tuple[Samples, Mapping[str, Any]]:
    """The samples and header of a ``.eval`` log: through inspect_ai's own reader when it
    is installed (it resolves attachments), else (or where it fails) the archive read
    here, zstd members included (:func:`_inspect_zip`)."""
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        return _inspect_zip(path)
    try:
        log = read_eval_log(str(path), resolve_attachments=True)
        header = {"status": log.status,
                  "eval": log.eval.model_dump(mode="json", exclude_none=True),
                  "plan": log.plan.model_dump(mode="json", exclude_none=True)}
        samples = [(f"{path}:samples/{s.id}_epoch_{s.epoch}", _inspect_sample(s))
                   for s in log.samples or ()]
    except Exception:  # inspect_ai's reader on a file it cannot read: ours says why
        return _inspect_zip(path)
    return iter(samples), header


def _inspect_sample(s: Any) -> dict[str, Any]:
    """The fields credo reads of one of inspect_ai's ``EvalSample``."""
    return {
        "id": s.id, "epoch": s.epoch, "target": s.target, "choices": s.choices,
        "input": s.input if isinstance(s.input, str) else "",
        "output": {"completion": s.output.completion if s.output is not None else ""},
        "scores": {k: {"value": v.value, "answer": v.answer} for k, v in
                   (s.scores or {}).items()},
        "error": s.error.message if s.error is not None else None,
    }


_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, lzma.LZMAError, EOFError,
               OSError, NotImplementedError, RuntimeError, ValueError, struct.error)
"""What :mod:`zipfile` raises for a damaged archive or member: a bad directory or CRC, a
cut or corrupt compressed stream, an unknown compression method (NotImplementedError),
an encrypted member (RuntimeError), an impossible offset (ValueError, OSError)."""

ZSTD = 93
"""The zip compression method of Zstandard, which inspect_ai writes ``.eval`` logs with."""


def _inspect_zip(path: Path) -> tuple[Samples, Mapping[str, Any]]:
    try:
        archive = zipfile.ZipFile(path)
    except _ZIP_ERRORS as e:
        raise DatasetError(f"{path}: not an inspect_ai .eval archive ({e})") from None
    with archive:
        infos = sorted((i for i in archive.infolist()
                        if i.filename.startswith("samples/") and i.filename.endswith(".json")),
                       key=lambda i: i.filename)
        header: Any = {}
        if "header.json" in archive.namelist():
            header = _zip_json(path, archive, archive.getinfo("header.json"))
        samples = [(f"{path}:{i.filename}", _zip_json(path, archive, i)) for i in infos]
    return iter(samples), header if isinstance(header, Mapping) else {}


def _zip_json(path: Path, archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> Any:
    where = f"{path}:{info.filename}"
    try:
        data = _zstd_member(path, info) if info.compress_type == ZSTD else archive.read(info)
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DatasetError(f"{where}: not JSON ({e})") from None
    except _ZIP_ERRORS as e:
        raise DatasetError(f"{where}: a damaged archive member ({e})") from None
    return parse_json(text, where)


def _zstd_member(path: Path, info: zipfile.ZipInfo) -> bytes:
    """A zstd-compressed member (:mod:`zipfile` cannot read them) through ``zstandard``."""
    try:
        import zstandard
    except ImportError:
        raise DatasetError(
            f"{path}: its members are zstd-compressed, as inspect_ai writes .eval logs; install"
            " inspect-ai (pip install 'credo[interop]') or zstandard to read it"
        ) from None
    with path.open("rb") as f:
        f.seek(info.header_offset)
        local = f.read(30)
        if len(local) < 30 or local[:4] != b"PK\x03\x04":
            raise zipfile.BadZipFile(f"no local header for {info.filename}")
        name_len, extra_len = struct.unpack("<HH", local[26:30])
        f.seek(info.header_offset + 30 + name_len + extra_len)
        raw = f.read(info.compress_size)
    try:
        data = zstandard.ZstdDecompressor().decompressobj().decompress(raw)
    except zstandard.ZstdError as e:
        raise ValueError(f"bad zstd data ({e})") from None
    if len(data) != info.file_size or zlib.crc32(data) != info.CRC:
        raise zipfile.BadZipFile(f"bad CRC or size of {info.filename}")
    return data


_UNFINISHED = {"error", "cancelled", "started"}
"""The log statuses of an eval that did not finish."""


def _from_inspect(path: Path, samples: Samples, header: Mapping[str, Any]) -> Generations:
    out = Generations(str(path), "inspect_ai")
    items: dict[str, GivenItem] = {}
    ordered: list[tuple[str, int, GivenSample]] = []
    scorers: dict[str, None] = {}
    for where, sample in samples:
        if not isinstance(sample, Mapping) or "id" not in sample:
            raise DatasetError(f"{where}: a sample needs an 'id'")
        item = str(sample["id"])
        epoch = _inspect_epoch(sample.get("epoch"), where)
        error = sample.get("error")
        if error:  # errored or cancelled: no generation of the model's
            lost = out.cancelled if _cancellation(error) else out.failed
            lost[item] = lost.get(item, 0) + 1
            continue
        text = _attached(_inspect_completion(sample.get("output")), sample)
        answer, correct = _inspect_score(sample.get("scores"), text, where)
        if isinstance(sample.get("scores"), Mapping) and sample["scores"]:
            scorers[str(next(iter(sample["scores"])))] = None
        ordered.append((item, epoch, GivenSample(item, "original", text, answer, correct)))
        if item not in items:
            items[item] = _inspect_item(item, sample, where)
    _inspect_header(out, header, ordered)
    if not ordered:
        lost = [f"{sum(d.values())} {what}" for d, what in
                ((out.failed, "errored"), (out.cancelled, "cancelled"),
                 (out.not_started, "never started")) if d]
        why = f" ({', '.join(lost)})" if lost else ""
        raise DatasetError(f"{path}: no samples{why}")
    order = {item: k for k, item in enumerate(items)}
    out.samples = [s for _, _, s in sorted(ordered, key=lambda t: (order[t[0]], t[1]))]
    out.items = list(items.values())
    if any(s.correct is not None for s in out.samples):
        out.correctness = f"inspect_ai scorer {', '.join(scorers) or '?'} (its value per sample)"
    return out


def _inspect_item(item: str, sample: Mapping[str, Any], where: str) -> GivenItem:
    target = sample.get("target")
    gold = target[0] if isinstance(target, list) and target else target
    question = sample.get("input") if isinstance(sample.get("input"), str) else ""
    return GivenItem(item, _attached(question, sample), "" if gold is None else str(gold),
                     _inspect_choices(sample.get("choices"), where))


def _attached(text: str, sample: Mapping[str, Any]) -> str:
    """``text``, or the attachment it refers to (``attachment://<hash>``)."""
    attachments = sample.get("attachments")
    if text.startswith("attachment://") and isinstance(attachments, Mapping):
        found = attachments.get(text.removeprefix("attachment://"))
        return found if isinstance(found, str) else text
    return text


def _cancellation(error: Any) -> bool:
    """Whether a sample's ``error`` is inspect_ai's record of a cancelled sample: its
    message is the repr of a cancellation (``CancelledError(...)``, ``Cancelled(...)``),
    the rule of inspect_ai's ``is_cancellation_message``."""
    message = error.get("message") if isinstance(error, Mapping) else error
    return isinstance(message, str) and message.startswith(_CANCELLED)


_CANCELLED = ("CancelledError(", "Cancelled(")
"""How the message of a cancelled sample's error starts (inspect_ai 0.3.285)."""


def _inspect_header(
    out: Generations, header: Mapping[str, Any], ordered: list[tuple[str, int, GivenSample]]
) -> None:
    """The log's status, settings and, for an eval that did not finish, the epochs of
    each item it never started (counted in :attr:`Generations.not_started`)."""
    ev = header.get("eval") if isinstance(header.get("eval"), Mapping) else {}
    config = ev.get("config") if isinstance(ev.get("config"), Mapping) else {}
    epochs = config.get("epochs")
    status = header.get("status")
    if isinstance(status, str) and status in _UNFINISHED:
        out.status = status
        if isinstance(epochs, int) and not isinstance(epochs, bool) and epochs > 0:
            dataset = ev.get("dataset") if isinstance(ev.get("dataset"), Mapping) else {}
            ids = dataset.get("sample_ids")
            have: dict[str, int] = {}
            for item, _, _ in ordered:
                have[item] = have.get(item, 0) + 1
            for item in [str(i) for i in ids] if isinstance(ids, list) else list(have):
                missing = (epochs - have.get(item, 0) - out.failed.get(item, 0)
                           - out.cancelled.get(item, 0))
                if missing > 0:
                    out.not_started[item] = out.not_started.get(item, 0) + missing
    if isinstance(epochs, int) and not isinstance(epochs, bool):
        out.settings["epochs"] = epochs
    plan = header.get("plan") if isinstance(header.get("plan"), Mapping) else {}
    for source in (plan.get("config"), ev.get("model_generate_config")):
        for key in ("temperature", "top_p", "top_k", "max_tokens", "seed"):
            value = source.get(key) if isinstance(source, Mapping) else None
            if _number(value):
                out.settings.setdefault(key, value)


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

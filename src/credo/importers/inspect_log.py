"""inspect_ai eval logs, ``.json`` or ``.eval`` (:mod:`credo.importers`)."""

from __future__ import annotations

import lzma
import re
import struct
import zipfile
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from credo.importers import base
from credo.tasks.loaders import DatasetError, parse_json

__all__ = ["natural_key", "read_inspect"]


Samples = Iterator[tuple[str, Mapping[str, Any]]]
"""``(where, sample)`` for each sample of an inspect_ai log."""


def read_inspect(path: Path, scorer: str | None = None) -> base.Generations:
    """The generations of an inspect_ai log: a ``.eval`` archive, else a ``.json`` log.
    Correctness and answers are scorer ``scorer``'s (None: the log's first scorer); a
    scorer the log does not hold is a :class:`~credo.tasks.loaders.DatasetError` naming
    those it does."""
    samples, header = _inspect_eval(path) if path.suffix == ".eval" else _inspect_json(path)
    return _generations(path, list(samples), header, scorer)


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
    if not isinstance(log, dict):
        raise DatasetError(f"{path}: {_what_json(log)}")
    samples = log.get("samples")
    if not isinstance(samples, list):
        raise DatasetError(f"{path}: an inspect_ai eval log needs a 'samples' list")
    return ((f"{path}: samples[{k}]", sample) for k, sample in enumerate(samples)), log


def _what_json(value: Any) -> str:
    """What a ``.json`` file that is no object holds, and how credo reads it instead: a
    list of credo's sample rows or of lm-eval's, which are JSON Lines layouts."""
    rows = value if isinstance(value, list) else []
    first = rows[0] if rows and all(isinstance(r, Mapping) for r in rows) else None
    if first is not None and "doc_id" in first:
        what = "a JSON list of lm-evaluation-harness sample rows"
    elif first is not None and ("item" in first or "id" in first):
        what = "a JSON list of credo sample rows"
    else:
        return (f"a JSON {type(value).__name__}, not an inspect_ai eval log (an object "
                "with a 'samples' list)")
    return (f"{what}, not an inspect_ai eval log (a .json file is read as one); credo reads "
            "such rows as JSON Lines: one object per line, in a .jsonl file")


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
                  "plan": log.plan.model_dump(mode="json", exclude_none=True),
                  "results": log.results.model_dump(mode="json", exclude_none=True)
                  if log.results is not None else None}
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


def _generations(path: Path, samples: list[tuple[str, Mapping[str, Any]]],
                 header: Mapping[str, Any], wanted: str | None) -> base.Generations:
    out = base.Generations(str(path), "inspect_ai")
    items: dict[str, base.GivenItem] = {}
    ordered: list[tuple[str, int, base.GivenSample]] = []
    scorers = _scorers(samples)
    if wanted is not None and wanted not in scorers:
        held = ", ".join(scorers) or "none: its samples hold no scores"
        raise DatasetError(f"{path}: --scorer {wanted!r}: the log holds no score of it "
                           f"(its scorers: {held})")
    scorer = wanted if wanted is not None else next(iter(scorers), None)
    seen: dict[tuple[str, int], str] = {}  # (id, epoch) -> where it was first
    for where, sample in samples:
        if not isinstance(sample, Mapping) or "id" not in sample:
            raise DatasetError(f"{where}: a sample needs an 'id'")
        item = str(sample["id"])
        epoch = _inspect_epoch(sample.get("epoch"), where)
        if (item, epoch) in seen:
            raise DatasetError(f"{where}: sample {item!r} epoch {epoch} again (first at "
                               f"{seen[item, epoch]}); a log holds each epoch of a sample "
                               "once: logs merged by hand? score each eval's log alone")
        seen[item, epoch] = where
        error = sample.get("error")
        if error:  # errored or cancelled: no generation of the model's
            lost = out.cancelled if _cancellation(error) else out.failed
            lost[item] = lost.get(item, 0) + 1
            continue
        text = _attached(_inspect_completion(sample.get("output")), sample)
        answer, correct = _inspect_score(sample.get("scores"), scorer, text, where)
        ordered.append((item, epoch, base.GivenSample(item, "original", text, answer, correct)))
        if item not in items:
            items[item] = _inspect_item(item, sample, where)
    _inspect_header(out, header, ordered)
    if not ordered:
        lost = [f"{sum(d.values())} {what}" for d, what in
                ((out.failed, "errored"), (out.cancelled, "cancelled"),
                 (out.not_started, "never started")) if d]
        why = f" ({', '.join(lost)})" if lost else ""
        raise DatasetError(f"{path}: no samples{why}")
    natural = sorted(items, key=natural_key)  # q1, q2, q10: the dataset's order
    order = {item: k for k, item in enumerate(natural)}
    out.samples = [s for _, _, s in sorted(ordered, key=lambda t: (order[t[0]], t[1]))]
    out.items = [items[item] for item in natural]
    out.scorers = tuple(scorers)
    if any(s.correct is not None for s in out.samples):
        others = [name for name in scorers if name != scorer]
        out.correctness = f"inspect_ai scorer {scorer or '?'} (its value per sample)" + (
            f"; the log's other scorers: {', '.join(others)} (credo score --scorer NAME)"
            if others else "")
    _tool_accuracy(out, header, scorer)
    return out


def _scorers(samples: list[tuple[str, Mapping[str, Any]]]) -> dict[str, None]:
    """The scorers whose scores the log's samples hold, in the order they first appear
    (a task's scorers in its order)."""
    found: dict[str, None] = {}
    for _, sample in samples:
        scores = sample.get("scores") if isinstance(sample, Mapping) else None
        if isinstance(scores, Mapping):
            found.update(dict.fromkeys(str(k) for k in scores))
    return found


def _tool_accuracy(out: base.Generations, header: Mapping[str, Any], scorer: str | None) -> None:
    """inspect_ai's own accuracy, as the log's ``results`` report it for the scorer whose
    values credo reads (its ``accuracy`` metric, else its first numeric one): one value
    per sample, its epochs reduced by the scorer's reducer (inspect's default: the
    mean)."""
    results = header.get("results") if isinstance(header.get("results"), Mapping) else {}
    scores = results.get("scores") if isinstance(results.get("scores"), list) else []
    for entry in scores:
        if not isinstance(entry, Mapping) or scorer not in (entry.get("scorer"),
                                                            entry.get("name")):
            continue
        metrics = entry.get("metrics") if isinstance(entry.get("metrics"), Mapping) else {}
        named = [metrics.get("accuracy"), *metrics.values()]
        for metric in named:
            value = metric.get("value") if isinstance(metric, Mapping) else None
            if base.finite_number(value):
                reducer = entry.get("reducer") or "mean"
                out.tool_accuracy = float(value)
                out.tool_accuracy_is = (
                    f"inspect_ai's {metric.get('name', 'metric')} of scorer {scorer}, as "
                    f"its log reports it: one value per sample, its epochs reduced by "
                    f"{reducer}")
                return


def natural_key(item: str) -> tuple[tuple[int, int | str], ...]:
    """A sample id's sort key in natural order: its runs of digits compared as numbers
    (``q2`` before ``q10``; inspect's numeric ids ``1, 2, 10`` as numbers), the rest as
    text. A log's member names (``samples/q10_epoch_1.json``) and inspect's own reader put
    ``q10`` before ``q2``."""
    return tuple((1, int(part)) if part.isascii() and part.isdigit() else (0, part)
                 for part in re.split(r"([0-9]+)", item) if part)


def _inspect_item(item: str, sample: Mapping[str, Any], where: str) -> base.GivenItem:
    target = sample.get("target")
    gold = target[0] if isinstance(target, list) and target else target
    question = sample.get("input") if isinstance(sample.get("input"), str) else ""
    return base.GivenItem(item, _attached(question, sample), "" if gold is None else str(gold),
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
    out: base.Generations,
    header: Mapping[str, Any],
    ordered: list[tuple[str, int, base.GivenSample]],
) -> None:
    """The log's task and model, status, settings and, for an eval that did not finish,
    the epochs of each item it never started (counted in :attr:`Generations.not_started`)."""
    ev = header.get("eval") if isinstance(header.get("eval"), Mapping) else {}
    out.task, out.model = (ev[k] if isinstance(ev.get(k), str) else "" for k in ("task", "model"))
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
            if base.finite_number(value):
                out.settings.setdefault(key, value)


def _inspect_epoch(value: Any, where: str) -> int:
    """A sample's epoch: absent or null is 1, else a positive integer."""
    if value is None:
        return 1
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    raise DatasetError(f"{where}: 'epoch' must be a positive integer, got {value!r:.40}")


def _inspect_choices(value: Any, where: str) -> tuple[str, ...]:
    """A sample's option texts: absent, null or a list of strings."""
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
    scores: Any, scorer: str | None, text: str, where: str
) -> tuple[str | None, bool | float | None]:
    """Scorer ``scorer``'s extracted answer and verdict (C/I, 1/0, true/false, a
    number); the completion and no verdict where the sample holds no score of it."""
    if not isinstance(scores, Mapping) or scorer not in scores:
        return (text.strip() or None), None
    score = scores[scorer]
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


def _read(path: Path, rows: base.Rows | None, options: base.ReadOptions) -> base.Generations:
    return read_inspect(path, options.scorer)


base.IMPORTERS.add("inspect", base.Importer(_read, suffixes=(".eval", ".json")))

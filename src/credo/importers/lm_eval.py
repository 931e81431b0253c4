"""lm-evaluation-harness ``--log_samples`` output: one row per document and filter
(:mod:`credo.importers`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from credo.importers import base
from credo.tasks.loaders import DatasetError

__all__ = ["read_lm_eval"]


def read_lm_eval(
    path: Path, rows: base.Rows, wanted: str | None, recompute: bool
) -> base.Generations:
    """The generations of lm-eval's samples file ``path`` (its ``(line, row)`` pairs
    ``rows``), the first filter of each document unless ``wanted`` names one;
    ``recompute``: lm-eval's metric is not rebuilt (credo grades the answers)."""
    from credo.tasks.lm_eval_scores import read_lm_eval_rows, samples_origin

    out = base.Generations(str(path), "lm-evaluation-harness")
    seen: dict[str, str] = {}  # doc id -> the filter read
    lines: dict[tuple[str, str], int] = {}  # (doc id, filter) -> the line it is on
    kept: list[tuple[int, Mapping[str, Any]]] = []
    for line_no, row in rows:
        doc = str(row.get("doc_id"))
        flt = str(row.get("filter", "none"))
        first = lines.setdefault((doc, flt), line_no)
        if first != line_no:
            raise DatasetError(
                f"{path}:{line_no}: doc_id {doc} with filter {flt!r} again (first on line "
                f"{first}); lm-eval logs each document once per filter: files appended to "
                "one another? score each run's samples file alone"
            )
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
    out.compared = "lm-eval's filtered answers, as the task's exact_match compares them"
    for (_, row), doc, its_texts, answers, scores in zip(
        kept, read.ids, texts, read.answers, read.scores, strict=True
    ):
        target = row.get("target")
        gold = "" if target is None else str(target)
        for text, answer, score in zip(its_texts, answers, scores, strict=True):
            out.samples.append(base.GivenSample(doc, "original", text, answer, _verdict(score)))
        out.items.append(base.GivenItem(doc, _lm_eval_question(row), gold))
    out.settings = _lm_eval_settings(kept[0][1], len(texts[0]))
    out.task, out.model = samples_origin(path)
    _tool_accuracy(out, kept, str(path), flt)
    return out


def _tool_accuracy(out: base.Generations, rows: list[tuple[int, Mapping[str, Any]]], where: str,
                   flt: str) -> None:
    """lm-eval's own accuracy: the mean over documents of the metric it logged for each,
    which it computed on the one response its filter keeps (the first, with
    ``take_first``; the commonest, with ``majority_vote``): what its results table
    reports for the task."""
    from credo.tasks.lm_eval_scores import function_metrics, metric_of, task_config

    found = task_config(Path(where))
    try:
        metric = metric_of(rows, where, function_metrics(found[1] if found else None))
    except DatasetError:  # no per-document score in [0, 1]: nothing to compare with
        return
    out.tool_accuracy = sum(float(row[metric]) for _, row in rows) / len(rows)
    out.tool_accuracy_is = (f"lm-eval's {metric} (filter {flt}) as it logged it: the mean "
                            "over documents of the one response its filter keeps")


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
        if base.finite_number(gen.get(theirs)):
            out[ours] = gen[theirs]
    if gen.get("do_sample") is False and "temperature" not in out:
        out["temperature"] = 0.0
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


def _lm_eval_question(row: Mapping[str, Any]) -> str:
    doc = row.get("doc")
    if isinstance(doc, Mapping):
        for key in ("question", "query", "problem", "prompt", "input"):
            if isinstance(doc.get(key), str):
                return doc[key]
    return ""


def _read(path: Path, rows: base.Rows | None, options: base.ReadOptions) -> base.Generations:
    assert rows is not None  # a JSON Lines layout
    return read_lm_eval(path, rows, options.lm_eval_filter, options.recompute)


base.IMPORTERS.add("lm-eval", base.Importer(_read, claims=lambda row: "doc_id" in row))

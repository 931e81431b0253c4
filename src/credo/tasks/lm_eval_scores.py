"""lm-evaluation-harness's own correctness of every sampled response (issue 25 item 4).

An lm-eval ``--log_samples`` row holds all ``repeats`` responses of a document but the
task's metric only for the one its filter kept (``take_first``). The task's metric and
filters are in the ``results_<date>.json`` lm-eval writes next to the samples file
(``configs[<task>]``): :func:`per_response_scores` rebuilds that task with lm-eval itself
(its documents are the rows' own ``doc``; nothing is downloaded), runs the row's filter on
each response alone and the task's ``process_results`` on the result, so every response
is scored as lm-eval scores the one it keeps (``ignore_punctuation``,
``regexes_to_ignore``, ``regex`` filters and all). The rebuilt task must reproduce the
metric lm-eval logged for every row (its filter over all responses), or nothing is used.

Without lm-eval installed or without the results file, the logged metric is the
correctness of a row's only response; rows with several need both.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from credo.tasks.loaders import DatasetError

__all__ = ["LmEvalScoring", "metric_of", "per_response_scores", "task_config"]

_SAMPLES = re.compile(r"^samples_(?P<task>.+)_(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2}T[^/]*)$")


class LmEvalScoring:
    """What scored the responses: the metric, the filter and how (for the report)."""

    def __init__(self, metric: str, flt: str, config: Mapping[str, Any] | None) -> None:
        self.metric = metric
        self.filter = flt
        self.config = config

    def describe(self) -> str:
        """``lm-eval exact_match (filter strict: regex, take_first; ignore_case, ...)``."""
        steps = ""
        options: list[str] = []
        if self.config is not None:
            for f in self.config.get("filter_list") or ():
                if isinstance(f, Mapping) and f.get("name") == self.filter:
                    steps = ", ".join(str(s.get("function")) for s in f.get("filter") or ()
                                      if isinstance(s, Mapping))
            for m in self.config.get("metric_list") or ():
                if isinstance(m, Mapping) and m.get("metric") == self.metric:
                    options = [f"{k}={v}" for k, v in m.items()
                               if k not in ("metric", "aggregation", "higher_is_better")]
        how = f"filter {self.filter}" + (f": {steps}" if steps else "")
        return f"lm-eval {self.metric} ({how}{'; ' + ', '.join(options) if options else ''})"


def task_config(samples: Path) -> tuple[str, Mapping[str, Any]] | None:
    """The task's name and config from the ``results_<date>.json`` next to ``samples``
    (``samples_<task>_<date>.jsonl``); None when there is none or it does not say."""
    match = _SAMPLES.match(samples.name.removesuffix(".jsonl"))
    if match is None:
        return None
    candidates = [samples.with_name(f"results_{match['date']}.json"),
                  *sorted(samples.parent.glob("results_*.json"), reverse=True)]
    for path in dict.fromkeys(candidates):
        try:
            configs = json.loads(path.read_text(encoding="utf-8")).get("configs")
        except (OSError, ValueError, AttributeError, RecursionError):
            continue
        if isinstance(configs, Mapping):
            for name in (match["task"], *configs):
                if match["task"].startswith(str(name)) and isinstance(configs.get(name), Mapping):
                    return str(name), configs[name]
    return None


def metric_of(rows: Sequence[tuple[int, Mapping[str, Any]]], where: str) -> str:
    """The task's first metric whose logged value is a score in [0, 1] on every row."""
    names = rows[0][1].get("metrics")
    for name in names if isinstance(names, list) else ():
        if all(_unit(row.get(name)) for _, row in rows):
            return str(name)
    raise DatasetError(
        f"{where}: none of lm-eval's metrics {names!r} is a per-sample score in [0, 1];"
        " pass --recompute-correctness to grade each answer against 'target'"
    )


def _unit(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and 0.0 <= value <= 1.0)


def per_response_scores(
    path: Path,
    rows: Sequence[tuple[int, Mapping[str, Any]]],
    responses: Sequence[Sequence[str]],
    flt: str,
) -> tuple[list[list[float]], list[list[str]] | None, LmEvalScoring]:
    """Each response's score under the task's metric and filter ``flt`` (module
    docstring) and, when lm-eval rescored them, the answer its filter extracts from each;
    or a :class:`DatasetError` saying what is missing."""
    metric = metric_of(rows, str(path))
    found = task_config(path)
    if all(len(r) == 1 for r in responses):  # the logged metric is the response's own
        return ([[float(row[metric])] for _, row in rows], None,
                LmEvalScoring(metric, flt, found[1] if found else None))
    if found is None:
        raise DatasetError(
            f"{path}: the task's metric and filters (lm-eval's results_*.json written with it)"
            " are not next to this file, and lm-eval logs the metric of one response per"
            " document; keep the results file beside it, or pass --recompute-correctness"
        )
    try:
        from lm_eval.api.task import ConfigurableTask  # noqa: F401
    except ImportError:
        raise DatasetError(
            f"{path}: scoring each of a document's responses with the task's own metric"
            " needs lm-eval (pip install 'credo[interop]'), or pass --recompute-correctness"
        ) from None
    name, config = found
    return _score_with_lm_eval(path, name, config, rows, responses, flt, metric)


def _score_with_lm_eval(
    path: Path,
    name: str,
    config: Mapping[str, Any],
    rows: Sequence[tuple[int, Mapping[str, Any]]],
    responses: Sequence[Sequence[str]],
    flt: str,
    metric: str,
) -> tuple[list[list[float]], list[list[str]], LmEvalScoring]:
    docs = [row.get("doc") if isinstance(row.get("doc"), Mapping) else {} for _, row in rows]
    try:
        task = _rebuilt_task(config, docs)
        ensemble = next(f for f in task._filters if f.name == flt)
    except Exception as e:  # lm-eval's own failure to rebuild the task from its config
        raise DatasetError(
            f"{path}: lm-eval cannot rebuild task {name!r} from its results file"
            f" ({type(e).__name__}: {str(e)[:120]}); pass --recompute-correctness"
        ) from None
    out, answers = [], []
    for (line_no, row), doc, texts in zip(rows, docs, responses, strict=True):
        try:
            _, logged = _score(task, ensemble, doc, list(texts), metric)
            scored = [_score(task, ensemble, doc, [t], metric) for t in texts]
        except Exception as e:  # a task's own metric or filter failing on this document
            raise DatasetError(
                f"{path}:{line_no}: lm-eval's {metric} fails on this document"
                f" ({type(e).__name__}: {str(e)[:120]}); pass --recompute-correctness"
            ) from None
        if not math.isclose(logged, float(row[metric]), abs_tol=1e-9):
            raise DatasetError(
                f"{path}:{line_no}: the rebuilt task scores this document {logged:g}, the log"
                f" says {metric} = {row[metric]:g}; pass --recompute-correctness"
            )
        out.append([value for _, value in scored])
        answers.append([kept if isinstance(kept, str) else str(text)
                        for (kept, _), text in zip(scored, texts, strict=True)])
    return out, answers, LmEvalScoring(metric, flt, config)


def _score(task: Any, ensemble: Any, doc: Mapping[str, Any], texts: list[str],
           metric: str) -> tuple[Any, float]:
    """lm-eval's ``metric`` of ``doc`` when its responses are ``texts``: the filters over
    them, then ``process_results`` (as lm-eval's evaluator does)."""
    resps: Any = [texts]
    for make in ensemble.filters:
        resps = make().apply(resps, [doc])
    (kept,) = list(resps)
    value = task.process_results(doc, [kept])[metric]
    if not _unit(value):
        raise ValueError(f"{metric} = {value!r} is not a score in [0, 1]")
    return kept, float(value)


def _rebuilt_task(config: Mapping[str, Any], docs: list[Mapping[str, Any]]) -> Any:
    """The task of ``config`` whose documents are ``docs`` (already processed: the
    config's ``process_docs`` is not run again), downloading nothing."""
    import datasets
    from lm_eval.api.task import ConfigurableTask

    dataset = datasets.Dataset.from_list([dict(d) for d in docs])

    class _Logged(ConfigurableTask):
        def download(self, *args: Any, **kwargs: Any) -> None:
            splits = (self.config.test_split, self.config.validation_split,
                      self.config.training_split, self.config.fewshot_split)
            self.dataset = {s: dataset for s in splits if s} | {"test": dataset}

    return _Logged(config={**config, "process_docs": None})

"""lm-evaluation-harness's own correctness, answers and item ids of the responses in its
``--log_samples`` files.

An lm-eval ``--log_samples`` row holds all ``repeats`` responses of a document but the
task's metric only for the one its filter kept (``take_first``). The task's metric and
filters are in the ``results_<date>.json`` lm-eval writes next to the samples file
(``configs[<task>]``): :func:`read_lm_eval_rows` rebuilds that task with lm-eval itself
(its documents are the rows' own ``doc``, kept as given: a column that mixes numbers and
text stays so, as ``datasets`` reads it from lm-eval's JSON; nothing is downloaded), runs
the row's filter on each response alone and the task's ``process_results`` on the result,
so every response is scored as lm-eval scores the one it keeps (``ignore_punctuation``,
``regexes_to_ignore``, ``regex`` filters and all). The rebuilt task must reproduce the
metric lm-eval logged for every row (its filter over all responses), or nothing is used.

The answer of a response, what SC, SE and C3 compare, is lm-eval's filtered response made
a string by :class:`AnswerRule`; ``credo run --task lm-eval:<task>`` reads its samples'
answers by the same rule (:func:`credo.tasks.lm_eval.lm_eval_answer`), and an item's id
is the one ``credo run`` gives the document, ``<task>@<revision>:<doc_id>``, where the
results file says the dataset's revision (:func:`item_ids`): both commands compare the
same strings of the same items.

Without lm-eval installed or without the results file, the logged metric is the
correctness of a row's only response; rows with several need both.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from credo.tasks.loaders import DatasetError

__all__ = [
    "AnswerRule",
    "LmEvalRead",
    "LmEvalScoring",
    "filtered",
    "function_metrics",
    "item_ids",
    "kept_value",
    "metric_of",
    "pinned_revision",
    "read_lm_eval_rows",
    "samples_origin",
    "task_config",
]

_SAMPLES = re.compile(r"^samples_(?P<task>.+)_(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2}T[^/]*)$")


class LmEvalScoring:
    """What scored the responses: the metric, the filter and how (for the report)."""

    def __init__(self, metric: str, flt: str, config: Mapping[str, Any] | None) -> None:
        self.metric = metric
        self.filter = flt
        self.config = config

    def describe(self) -> str:
        """``lm-eval exact_match (filter strict: regex, take_first; ignore_case, ...)``."""
        steps = _steps(self.config, self.filter)
        options = [f"{k}={v}" for k, v in _metric_options(self.config, self.metric).items()]
        how = f"filter {self.filter}" + (f": {steps}" if steps else "")
        return f"lm-eval {self.metric} ({how}{'; ' + ', '.join(options) if options else ''})"


def _steps(config: Mapping[str, Any] | None, flt: str) -> str:
    """The functions of filter ``flt`` in ``config``: ``regex, take_first``."""
    for f in (config or {}).get("filter_list") or ():
        if isinstance(f, Mapping) and f.get("name") == flt:
            return ", ".join(str(s.get("function")) for s in f.get("filter") or ()
                             if isinstance(s, Mapping))
    return ""


def _metric_options(config: Mapping[str, Any] | None, metric: str | None) -> dict[str, Any]:
    """The keyword options of ``metric`` in ``config``'s ``metric_list``."""
    for m in (config or {}).get("metric_list") or ():
        if isinstance(m, Mapping) and m.get("metric") == metric:
            return {k: v for k, v in m.items()
                    if k not in ("metric", "aggregation", "higher_is_better")}
    return {}


# --------------------------------------------------------------------------- answers


def kept_value(kept: Any) -> Any:
    """What a filter kept of one response: a filter ensemble without ``take_first``
    leaves it in a one-element list (``["3,500"]``), which is that element."""
    while isinstance(kept, list | tuple) and len(kept) == 1:
        kept = kept[0]
    return kept


def filtered(ensemble: Any, doc: Mapping[str, Any], texts: Sequence[str]) -> Any:
    """lm-eval's filter ensemble over one document's ``texts``, as its evaluator applies
    it (``FilterEnsemble.apply``: each filter in turn over the document's responses)."""
    resps: Any = [list(texts)]
    for make in ensemble.filters:
        resps = make().apply(resps, [doc])
    (kept,) = list(resps)
    return kept


_EXACT = "exact_match"
_EXACT_OPTIONS = ("regexes_to_ignore", "ignore_case", "ignore_punctuation", "ignore_numbers")


@dataclass(frozen=True)
class AnswerRule:
    """How lm-eval's filtered response becomes the answer credo compares, the same in ``credo run
    --task lm-eval:<task>`` and ``credo score``: the value the
    filter kept (:func:`kept_value`) without surrounding whitespace; unparsed (None) when
    empty or a filter's ``fallback`` (the regex filter's ``[invalid]``: no answer found);
    and, when the task's metric is ``exact_match``, normalised by that metric's options
    as lm-eval normalises both sides before comparing (``regexes_to_ignore`` removed, then
    ``ignore_case``, ``ignore_punctuation``, ``ignore_numbers``). Two answers are then
    equal exactly when lm-eval's ``exact_match`` calls them equal. lm-eval has no function
    returning the normalised string (``exact_match_hf_evaluate`` returns the mean), so its
    four steps are repeated here, in its order; tests/test_interop.py checks them against
    it."""

    fallbacks: frozenset[str] = frozenset()
    regexes_to_ignore: tuple[str, ...] = ()
    ignore_case: bool = False
    ignore_punctuation: bool = False
    ignore_numbers: bool = False
    steps: str = field(default="", compare=False)
    """The filter's name and functions, for :meth:`describe`."""

    @classmethod
    def of(cls, ensemble: Any | None, metric: str | None,
           options: Mapping[str, Any] | None, steps: str = "") -> AnswerRule:
        """The rule of filter ``ensemble`` (lm-eval's ``FilterEnsemble``; None: no
        filter known) and the task's first ``metric`` with its keyword ``options``;
        ``steps`` names the filter's functions (else their classes)."""
        fallbacks: set[str] = set()
        names = []
        for make in getattr(ensemble, "filters", None) or ():
            fn = getattr(make, "func", make)
            names.append(getattr(fn, "__name__", type(fn).__name__))
            try:
                made = make()
            except Exception:  # a filter lm-eval cannot build here has no fallback to read
                continue
            fallback = getattr(made, "fallback", None)
            if isinstance(fallback, str):
                fallbacks.add(fallback.strip())
        steps = (f"{ensemble.name} ({steps or ', '.join(names)})" if ensemble is not None
                 else "")
        opts = dict(options or {}) if metric == _EXACT else {}
        regexes = opts.get("regexes_to_ignore") or ()
        return cls(
            frozenset(fallbacks),
            tuple(str(r) for r in ([regexes] if isinstance(regexes, str) else regexes)),
            bool(opts.get("ignore_case")), bool(opts.get("ignore_punctuation")),
            bool(opts.get("ignore_numbers")), steps,
        )

    def __call__(self, kept: Any) -> str | None:
        """The answer of one response from what the filter kept of it."""
        value = kept_value(kept)
        if value is None:
            return None
        text = (value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                ).strip()
        if not text or text in self.fallbacks:
            return None
        for pattern in self.regexes_to_ignore:
            text = re.sub(pattern, "", text)
        if self.ignore_case:
            text = text.lower()
        if self.ignore_punctuation:
            text = text.translate(str.maketrans("", "", string.punctuation))
        if self.ignore_numbers:
            text = text.translate(str.maketrans("", "", string.digits))
        return text or None

    def describe(self, source: str = "on each response") -> str:
        """One line: which filter (``source``: how it met the responses) and which of the
        metric's options made the answers."""
        opts = [name for name in _EXACT_OPTIONS if getattr(self, name)]
        return (f"lm-eval's filter {self.steps or '(none)'} {source}"
                + (f", then exact_match's {', '.join(opts)}" if opts else ""))


# --------------------------------------------------------------------------- the files


def _results(samples: Path) -> tuple[str, list[tuple[bool, Mapping[str, Any]]]] | None:
    """The task named by ``samples_<task>_<date>.jsonl`` and the ``results_*.json`` files
    beside it that parse (each with whether it is the one of the same date, which comes
    first); None for another file name."""
    match = _SAMPLES.match(samples.name.removesuffix(".jsonl"))
    if match is None:
        return None
    same = samples.with_name(f"results_{match['date']}.json")
    found = []
    for path in dict.fromkeys([same, *sorted(samples.parent.glob("results_*.json"),
                                             reverse=True)]):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            continue
        if isinstance(data, Mapping):
            found.append((path == same, data))
    return match["task"], found


def task_config(samples: Path) -> tuple[str, Mapping[str, Any]] | None:
    """The task's name and config from the ``results_<date>.json`` next to ``samples``
    (``samples_<task>_<date>.jsonl``); None when there is none or it does not say."""
    found = _results(samples)
    return None if found is None else _named_config(*found)


def _named_config(task: str, results: list[tuple[bool, Mapping[str, Any]]]
                  ) -> tuple[str, Mapping[str, Any]] | None:
    """The first of ``results`` whose ``configs`` hold the task the file name gives
    (lm-eval names a samples file after the task, a group's subtask included)."""
    for _, data in results:
        configs = data.get("configs")
        if isinstance(configs, Mapping):
            for name in (task, *configs):
                if task.startswith(str(name)) and isinstance(configs.get(name), Mapping):
                    return str(name), configs[name]
    return None


def samples_origin(samples: Path) -> tuple[str, str]:
    """The task and the model an lm-eval samples file comes from: the task as
    :func:`task_config` names it (else as the file name does), the model as the results
    file of the same date names it (lm-eval's ``model_name``); ``""`` for what neither
    says (a renamed file, a results file moved away)."""
    found = _results(samples)
    if found is None:
        return "", ""
    task, results = found
    named = _named_config(task, results)
    model = next((str(data["model_name"]) for same, data in results
                  if same and isinstance(data.get("model_name"), str) and data["model_name"]),
                 "")
    return (named[0] if named else task), model


def metric_of(rows: Sequence[tuple[int, Mapping[str, Any]]], where: str,
              skip: frozenset[str] = frozenset()) -> str:
    """The task's first metric whose logged value is a score in [0, 1] on every row,
    other than those in ``skip`` (:func:`function_metrics`: no correctness)."""
    names = rows[0][1].get("metrics")
    for name in names if isinstance(names, list) else ():
        if name not in skip and all(_unit(row.get(name)) for _, row in rows):
            return str(name)
    raise DatasetError(
        f"{where}: none of lm-eval's metrics {names!r} is a per-sample score in [0, 1];"
        " pass --recompute-correctness to grade each answer against 'target'"
    )


_DEF = re.compile(r"^\s*def\s+(\w+)\s*\(", re.M)


def function_metrics(config: Mapping[str, Any] | None) -> frozenset[str]:
    """The metrics of a task's results config given as Python functions (``metric:
    !function module.fn`` in its YAML, which lm-eval's results file holds as the
    function's source and logs under the function's name): credo's own scores of a
    document's repeats (:mod:`credo.integrations.lm_eval`) and any user function. None
    of them is a correctness credo can rebuild per response."""
    names = set()
    for m in (config or {}).get("metric_list") or ():
        metric = m.get("metric") if isinstance(m, Mapping) else None
        found = _DEF.search(metric) if isinstance(metric, str) else None
        if found:
            names.add(found.group(1))
    return frozenset(names)


def _named_metrics(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """``config`` without the metrics it gives as a function's source (lm-eval cannot
    look them up by that text; the metric credo reads is a named one)."""
    kept = [m for m in config.get("metric_list") or ()
            if not (isinstance(m, Mapping) and isinstance(m.get("metric"), str)
                    and _DEF.search(m["metric"]))]
    return {**config, "metric_list": kept} if "metric_list" in config else config


def _unit(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and 0.0 <= value <= 1.0)


def pinned_revision(dataset_kwargs: Any) -> str | None:
    """The revision a task's ``dataset_kwargs`` fix: the Hub commit it is pinned to
    (``revision``), else a digest of its local ``data_files``; None for neither. Also what
    ``credo score`` reads from lm-eval's results file, to give a document the item id
    ``credo run`` gives it."""
    kwargs = dataset_kwargs if isinstance(dataset_kwargs, Mapping) else {}
    if kwargs.get("revision"):
        return str(kwargs["revision"])
    files = _local_files(kwargs.get("data_files"))
    if not files:
        return None
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.read_bytes())
    return digest.hexdigest()[:12]


def _local_files(data_files: Any) -> list[Path]:
    if isinstance(data_files, Mapping):
        values: list[Any] = list(data_files.values())
    elif data_files is None:
        values = []
    else:
        values = [data_files]
    flat = [v for x in values for v in (x if isinstance(x, list) else [x])]
    paths = [Path(str(v)) for v in flat]
    return sorted(p for p in paths if p.is_file())



_ID_FIELDS = ("id", "idx", "question_id", "qid", "uid", "task_id", "example_id", "_id")
"""A document's own id fields, in order of preference (else lm-eval's ``doc_id``)."""


def item_ids(rows: Sequence[tuple[int, Mapping[str, Any]]],
             found: tuple[str, Mapping[str, Any]] | None) -> list[str]:
    """Each row's item id: ``<task>@<revision>:<doc_id>``, the id ``credo run --task
    lm-eval:<task>`` gives the same document, where the results file
    names the task and its dataset's revision is known (a pinned Hub ``revision``, or a
    digest of its local ``data_files``: :func:`pinned_revision`);
    else the document's own id field when every document has a distinct one, else
    lm-eval's ``doc_id``."""
    if found is not None:
        name, config = found
        revision = pinned_revision(config.get("dataset_kwargs"))
        if revision:
            task = str(config.get("task") or name)
            return [f"{task}@{revision}:{row.get('doc_id')}" for _, row in rows]
    docs = [row.get("doc") if isinstance(row.get("doc"), Mapping) else {} for _, row in rows]
    for key in _ID_FIELDS:
        ids = [d.get(key) for d in docs]
        if all(isinstance(i, str | int) and not isinstance(i, bool) and str(i) for i in ids):
            if len({str(i) for i in ids}) == len(ids):
                return [str(i) for i in ids]
    return [str(row.get("doc_id")) for _, row in rows]


@dataclass
class LmEvalRead:
    """What :func:`read_lm_eval_rows` makes of the rows: per row, each response's score
    (None: not read, under ``--recompute-correctness``) and answer; the item ids; how the
    responses were scored ("" when not) and how their answers were read."""

    scores: list[list[float | None]]
    answers: list[list[str | None]]
    ids: list[str]
    correctness: str
    answered: str


def read_lm_eval_rows(
    path: Path,
    rows: Sequence[tuple[int, Mapping[str, Any]]],
    responses: Sequence[Sequence[str]],
    flt: str,
    *,
    recompute: bool = False,
) -> LmEvalRead:
    """Each response's score under the task's metric and filter ``flt``, its answer and
    the rows' item ids (module docstring); or a :class:`DatasetError` saying what is
    missing. With ``recompute`` no score is read, and the answers are lm-eval's filter's
    wherever it can be had (else the whole responses, and ``answered`` says why)."""
    found = task_config(path)
    config = found[1] if found else None
    ids = item_ids(rows, found)
    skip = function_metrics(config)
    if recompute:
        try:
            metric: str | None = metric_of(rows, str(path), skip)
        except DatasetError:
            metric = None
    else:
        metric = metric_of(rows, str(path), skip)
    none: list[list[float | None]] = [[None] * len(r) for r in responses]
    if all(len(r) == 1 for r in responses):  # the logged metric is the response's own
        rule = AnswerRule.of(_ensemble(config, flt), metric, _metric_options(config, metric),
                             _steps(config, flt))
        answers = [[rule(_given_kept(row, texts))] for (_, row), texts in
                   zip(rows, responses, strict=True)]
        scores = none if recompute else [[float(row[metric])] for _, row in rows]
        how = "" if recompute else LmEvalScoring(str(metric), flt, config).describe()
        return LmEvalRead(scores, answers, ids, how, rule.describe(GIVEN))
    try:
        scores, answers, rule = _rescored(path, found, rows, responses, flt, metric)
    except _NotRescored as e:
        if not recompute:
            raise DatasetError(f"{e.where}: {e.reason}; pass --recompute-correctness") from None
        return _unscored(config, rows, responses, flt, metric, ids, e.reason)
    how = LmEvalScoring(str(metric), flt, config).describe()
    return LmEvalRead(none if recompute else scores, answers, ids,
                      "" if recompute else how, rule.describe())


GIVEN = "(the filtered_resps lm-eval logged)"
"""How :meth:`AnswerRule.describe` names answers read from the log, not filtered again."""


class _NotRescored(Exception):
    """Why the responses could not be scored by the task lm-eval rebuilds (``where``: the
    file, or its line)."""

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(reason)
        self.where, self.reason = where, reason


def _unscored(
    config: Mapping[str, Any] | None,
    rows: Sequence[tuple[int, Mapping[str, Any]]],
    responses: Sequence[Sequence[str]],
    flt: str,
    metric: str | None,
    ids: list[str],
    reason: str,
) -> LmEvalRead:
    """``--recompute-correctness`` where the task cannot be rebuilt: the answers are the
    logged ``filtered_resps`` where they hold one per response, else the whole responses
    (``answered`` says why)."""
    none: list[list[float | None]] = [[None] * len(r) for r in responses]
    kept = [_given_per_response(row, texts) for (_, row), texts in
            zip(rows, responses, strict=True)]
    if all(k is not None for k in kept):
        rule = AnswerRule.of(_ensemble(config, flt), metric, _metric_options(config, metric),
                             _steps(config, flt))
        return LmEvalRead(none, [[rule(v) for v in k or ()] for k in kept], ids, "",
                          rule.describe(GIVEN))
    return LmEvalRead(none, [[t.strip() or None for t in texts] for texts in responses],
                      ids, "", f"the whole responses (lm-eval's filter not rerun: {reason})")


def _given_kept(row: Mapping[str, Any], texts: Sequence[str]) -> Any:
    """What lm-eval's filter kept of a row's only response (``filtered_resps``), else the
    response."""
    values = _given_per_response(row, texts)
    return values[0] if values else texts[0]


def _given_per_response(row: Mapping[str, Any], texts: Sequence[str]) -> list[Any] | None:
    """A row's ``filtered_resps`` when they hold one value per response (a filter without
    ``take_first``, or one response), else None."""
    values = row.get("filtered_resps")
    values = values if isinstance(values, list) else []
    if len(values) == 1 and isinstance(values[0], list) and len(texts) > 1:
        values = values[0]
    return list(values) if len(values) == len(texts) else None


def _ensemble(config: Mapping[str, Any] | None, flt: str) -> Any | None:
    """Filter ``flt`` of ``config`` built by lm-eval (what its task builds); None without
    lm-eval, the config or that filter."""
    if config is None:
        return None
    try:
        from lm_eval.filters import build_filter_ensemble
    except ImportError:
        return None
    for f in config.get("filter_list") or ():
        if isinstance(f, Mapping) and f.get("name") == flt:
            steps = [s for s in f.get("filter") or () if isinstance(s, Mapping)]
            try:
                return build_filter_ensemble(flt, [
                    [s["function"], {k: v for k, v in s.items() if k != "function"}]
                    for s in steps])
            except Exception:  # an unknown filter name: no rule from it
                return None
    return None


def _rescored(
    path: Path,
    found: tuple[str, Mapping[str, Any]] | None,
    rows: Sequence[tuple[int, Mapping[str, Any]]],
    responses: Sequence[Sequence[str]],
    flt: str,
    metric: str | None,
) -> tuple[list[list[float | None]], list[list[str | None]], AnswerRule]:
    """Every response scored and answered by the task lm-eval rebuilds from its results
    file, checked against the metric it logged; :class:`_NotRescored` says why not."""
    where = str(path)
    if found is None:
        raise _NotRescored(
            where, "the task's metric and filters (lm-eval's results_*.json written with it)"
            " are not next to this file, and lm-eval logs the metric of one response per"
            " document; keep the results file beside it")
    if metric is None:
        raise _NotRescored(where, "lm-eval logged no per-sample metric to check against")
    try:
        from lm_eval.api.task import ConfigurableTask  # noqa: F401
    except ImportError:
        raise _NotRescored(
            where, "scoring each of a document's responses with the task's own metric needs"
            " lm-eval (pip install 'credo[interop]')") from None
    name, config = found
    docs = [row.get("doc") if isinstance(row.get("doc"), Mapping) else {} for _, row in rows]
    try:
        task = _rebuilt_task(config, docs)
        ensemble = next(f for f in task._filters if f.name == flt)
    except Exception as e:  # lm-eval's own failure to rebuild the task from its config
        raise _NotRescored(where, f"lm-eval cannot rebuild task {name!r} from its results"
                           f" file ({type(e).__name__}: {str(e)[:120]})") from None
    rule = AnswerRule.of(ensemble, metric, task._metric_fn_kwargs.get(metric),
                         _steps(config, flt))
    out: list[list[float | None]] = []
    answers: list[list[str | None]] = []
    for (line_no, row), doc, texts in zip(rows, docs, responses, strict=True):
        try:
            _, logged = _score(task, ensemble, doc, list(texts), metric)
            scored = [_score(task, ensemble, doc, [t], metric) for t in texts]
        except Exception as e:  # a task's own metric or filter failing on this document
            raise _NotRescored(f"{path}:{line_no}", f"lm-eval's {metric} fails on this"
                               f" document ({type(e).__name__}: {str(e)[:120]})") from None
        if not math.isclose(logged, float(row[metric]), abs_tol=1e-9):
            raise _NotRescored(f"{path}:{line_no}", f"the rebuilt task scores this document"
                               f" {logged:g}, the log says {metric} = {row[metric]:g}")
        out.append([value for _, value in scored])
        answers.append([rule(kept) for kept, _ in scored])
    return out, answers, rule


def _score(task: Any, ensemble: Any, doc: Mapping[str, Any], texts: list[str],
           metric: str) -> tuple[Any, float]:
    """lm-eval's ``metric`` of ``doc`` when its responses are ``texts``: the filters over
    them, then ``process_results`` (as lm-eval's evaluator does)."""
    kept = filtered(ensemble, doc, texts)
    value = task.process_results(doc, [kept])[metric]
    if not _unit(value):
        raise ValueError(f"{metric} = {value!r} is not a score in [0, 1]")
    return kept, float(value)


def _rebuilt_task(config: Mapping[str, Any], docs: list[Mapping[str, Any]]) -> Any:
    """The task of ``config`` whose documents are ``docs`` (already processed: the
    config's ``process_docs`` is not run again), downloading nothing."""
    from lm_eval.api.task import ConfigurableTask

    dataset = documents_dataset(docs)

    class _Logged(ConfigurableTask):
        def download(self, *args: Any, **kwargs: Any) -> None:
            splits = (self.config.test_split, self.config.validation_split,
                      self.config.training_split, self.config.fewshot_split)
            self.dataset = {s: dataset for s in splits if s} | {"test": dataset}

    return _Logged(config={**_named_metrics(config), "process_docs": None})


def documents_dataset(docs: Sequence[Mapping[str, Any]]) -> Any:
    """A ``datasets.Dataset`` of ``docs`` with every value as given: a
    column whose values Arrow cannot type together (numbers and text, as lm-eval reads a
    JSON answer column holding both) is a ``Json`` column, as ``datasets``' JSON loader
    makes it, instead of refusing the file."""
    import datasets
    import pyarrow as pa

    rows = [dict(d) for d in docs]
    try:
        return datasets.Dataset.from_list(rows)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError):
        pass
    columns = list(dict.fromkeys(k for row in rows for k in row))
    features = {}
    for column in columns:
        values = [row.get(column) for row in rows]
        try:
            features[column] = datasets.Dataset.from_dict({column: values}).features[column]
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError):
            features[column] = datasets.Json()
    return datasets.Dataset.from_list(rows, features=datasets.Features(features))

"""Tasks of lm-evaluation-harness: ``lm-eval:<task>`` through lm-eval's own
task registry, an optional extra (``pip install credo[lm-eval]``; imported only when
such a task is loaded).

Per document of the task's evaluation split, an :class:`~credo.tasks.base.Item` holds
the question as lm-eval renders it (``doc_to_text``; the description and
``num_fewshot`` examples, zero-shot by default, go before it as ``meta["context"]``, so
that C3's prefixes go right before the rendered question), the gold (``doc_to_target``)
and, for a ``multiple_choice`` task, the options (``doc_to_choice``).

* ``generate_until`` tasks are sampled as lm-eval renders them (no credo instruction)
  and graded by the ``lm-eval`` grader: each response, cut at the task's ``until``
  strings as lm-eval's backends cut it, goes through the task's first filter ensemble
  and its first metric (:func:`score_responses`): what lm-eval would report for that
  response. Its answer, what SC, SE and C3 compare, is what that filter keeps of it
  (:func:`lm_eval_answer`), as ``credo score`` reads lm-eval's own samples.
* ``multiple_choice`` tasks are scored by lm-eval from log-likelihoods; credo samples
  an option letter instead (credo's choice prompt) and grades it against the gold
  option (the ``exact`` grader), which the items' ``meta["correctness"]`` says.
* ``loglikelihood`` and ``loglikelihood_rolling`` tasks have no answer to sample: they
  are refused (:class:`LmEvalError`).

Item ids are ``<task>@<revision>:<doc id>``; the revision is the Hub commit the dataset
was pinned to, else a digest of a local dataset's files, else the dataset's
fingerprint. A run records it in its config (``lm_eval.revision``).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

from credo.errors import UserError
from credo.tasks.answers import item_extractor
from credo.tasks.base import AnswerFormat, Item, Task, ToolSampling
from credo.tasks.grading import Graded, GradeMap, GradingContext, grader
from credo.tasks.lm_eval_scores import AnswerRule, filtered, pinned_revision
from credo.tasks.prompts import LETTERS
from credo.tasks.registry import TaskSpecError, task_loader

__all__ = [
    "LM_EVAL",
    "LmEvalError",
    "expand_lm_eval_specs",
    "lm_eval_answer",
    "load_lm_eval",
    "question_doc",
    "question_item",
    "score_responses",
    "template_fields",
    "tool_sampling",
]

LM_EVAL = "lm-eval"
"""The spec prefix (``lm-eval:<task>``) and the grader's name."""

INSTALL = "pip install 'credo[lm-eval]'"
SAMPLED = ("generate_until", "multiple_choice")
NOT_SAMPLED = {
    "loglikelihood": "lm-eval scores it by the log-likelihood of a fixed continuation",
    "loglikelihood_rolling": "lm-eval scores it by the perplexity of the document",
}

log = logging.getLogger(__name__)


class LmEvalError(TaskSpecError):
    """An lm-eval task credo cannot run: lm-eval missing, an unknown task, an output type
    credo cannot sample, a dataset that cannot be read (offline); one line, exit 2."""


# --------------------------------------------------------------------------- lm-eval


def _lm_eval() -> Any:
    try:
        import lm_eval.tasks
    except ImportError:
        raise LmEvalError(
            f"lm-eval tasks need lm-evaluation-harness: {INSTALL}"
        ) from None
    return lm_eval.tasks


@contextmanager
def _quiet() -> Iterator[None]:
    """lm-eval and datasets log a line per task and a progress bar per split, the Hub
    client a line per retry: a user error must stay one line."""
    from datasets.utils import (
        are_progress_bars_disabled,
        disable_progress_bars,
        enable_progress_bars,
    )

    names = ("lm_eval", "lm-eval", "datasets", "huggingface_hub")
    levels = {n: logging.getLogger(n).level for n in names}
    bars = not are_progress_bars_disabled()
    disable_progress_bars()
    for n in names:
        logging.getLogger(n).setLevel(logging.ERROR)
    try:
        yield
    finally:
        for n, level in levels.items():
            logging.getLogger(n).setLevel(level)
        if bars:
            enable_progress_bars()


@cache
def _manager(include: tuple[str, ...]) -> Any:
    tasks = _lm_eval()
    with _quiet():
        return tasks.TaskManager(include_path=list(include) or None)


def _names(name: str, include: tuple[str, ...]) -> list[str]:
    """The leaf tasks ``name`` (a task, a group or a tag) stands for."""
    tm = _manager(include)
    if name not in tm.all_tasks:
        where = f" or in {', '.join(include)}" if include else " (custom tasks: --include-path)"
        raise LmEvalError(f"task 'lm-eval:{name}': lm-eval knows no task {name!r}{where}")
    if name in tm.all_subtasks:
        return [name]
    return sorted(_load(name, include, None).keys())


def _load(name: str, include: tuple[str, ...], revision: str | None) -> dict[str, Any]:
    """lm-eval's task objects for ``name`` (its dataset read: from local files or the
    local Hugging Face cache first, then the Hub when it can be reached), or
    :class:`LmEvalError` naming the task and why it cannot.

    offline, the Hub client retried for 25 s, a line each, before the
    error; the first attempt runs with the libraries' offline switches on for the call
    only (:func:`_hub_offline`), and the Hub is asked only when that finds nothing and
    its host answers (:func:`_hub_reachable`)."""
    tm = _manager(include)
    try:
        with _quiet(), _hub_offline():
            return dict(tm.load([name])["tasks"])
    except UserError:
        raise
    except Exception as e:  # datasets' and lm-eval's errors have no common base
        local = e
    if _offline_by_choice():
        raise _unreadable(name, local, offline="") from None
    host = _hub_host()
    if not _hub_reachable(host):
        raise _unreadable(name, local, offline=f"{host[0]} cannot be reached; ") from None
    try:
        with _quiet():
            return dict(tm.load([name])["tasks"])
    except UserError:
        raise
    except Exception as e:
        raise _unreadable(name, e, offline=None) from None


def _unreadable(name: str, error: Exception, *, offline: str | None) -> LmEvalError:
    """The one line of a dataset that cannot be read; ``offline`` (None: online) says
    why the Hub was not asked."""
    reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
    reason = reason.replace(" (OfflineModeIsEnabled)", "")  # credo's switch, not the user's
    hint = "" if offline is None else (
        f" (offline: {offline}the dataset must be local, dataset_path: json + data_files, "
        "or in the Hugging Face cache)")
    return LmEvalError(
        f"task 'lm-eval:{name}': its dataset cannot be read{hint}: {reason[:300]}")


def _offline_by_choice() -> bool:
    """Whether the user switched the Hugging Face libraries offline."""
    return any(os.environ.get(v, "").upper() in ("1", "ON", "YES", "TRUE")
               for v in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


@contextmanager
def _hub_offline() -> Iterator[None]:
    """The Hub client and datasets offline for the ``with`` block only: they read
    ``HF_HUB_OFFLINE`` once, at import, into these module constants, so setting the
    variable now would do nothing (and setting it for the process would change every
    later download); a dataset is then read from local files and the cache alone."""
    import datasets.config
    import huggingface_hub.constants

    switches = [(huggingface_hub.constants, "HF_HUB_OFFLINE"),
                (datasets.config, "HF_HUB_OFFLINE"), (datasets.config, "HF_DATASETS_OFFLINE")]
    saved = [(module, attr, getattr(module, attr)) for module, attr in switches
             if hasattr(module, attr)]
    for module, attr, _ in saved:
        setattr(module, attr, True)
    try:
        yield
    finally:
        for module, attr, value in saved:
            setattr(module, attr, value)


_PROXIES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


def _hub_host() -> tuple[str, int]:
    """The Hub's host and port (``HF_ENDPOINT``, default huggingface.co:443)."""
    from urllib.parse import urlsplit

    from huggingface_hub import constants

    url = urlsplit(constants.ENDPOINT)
    return url.hostname or "", url.port or (443 if url.scheme == "https" else 80)


def _hub_reachable(host: tuple[str, int], timeout: float = 3.0) -> bool:
    """Whether the Hub's ``host`` accepts a connection within ``timeout`` seconds; True
    behind a proxy, which alone knows (the Hub client then retries as it does)."""
    import socket

    if any(os.environ.get(v) for v in _PROXIES):
        return True
    try:
        socket.create_connection(host, timeout=timeout).close()
    except OSError:
        return False
    return True


@cache
def _lm_task(name: str, include: tuple[str, ...], num_fewshot: int) -> Any:
    """One lm-eval task, its dataset read, set to ``num_fewshot`` examples (lm-eval's
    default few-shot seed, 1234)."""
    tasks = _load(name, include, None)
    if name not in tasks:
        raise LmEvalError(f"task 'lm-eval:{name}': lm-eval loaded {sorted(tasks)} instead")
    task = tasks[name]
    if task.OUTPUT_TYPE in NOT_SAMPLED:
        raise LmEvalError(
            f"task 'lm-eval:{name}': output type {task.OUTPUT_TYPE!r} cannot be sampled "
            f"({NOT_SAMPLED[task.OUTPUT_TYPE]}); credo runs generate_until and "
            "multiple_choice tasks"
        )
    if task.OUTPUT_TYPE not in SAMPLED:
        raise LmEvalError(f"task 'lm-eval:{name}': unknown output type {task.OUTPUT_TYPE!r}")
    task.set_config(key="num_fewshot", value=num_fewshot)
    task.set_fewshot_seed(seed=1234)
    return task


# --------------------------------------------------------------------------- loading


def load_lm_eval(
    spec: str,
    *,
    num_fewshot: int | None = None,
    include_path: Sequence[str | Path] = (),
    revision: str | None = None,
) -> Task:
    """The credo task of ``lm-eval:<task>`` (``spec`` with or without the prefix).

    A group or tag of several tasks is refused (one task per run; ``credo study``
    expands it). ``revision``, when given, must be the dataset's (a pinned Hub commit in
    the task's ``dataset_kwargs``, or the digest a previous run recorded)."""
    name = spec.split(":", 1)[1] if spec.startswith(f"{LM_EVAL}:") else spec
    name = name.strip()
    if not name:
        raise LmEvalError(f"task {spec!r}: name the lm-eval task: lm-eval:<task>")
    include = tuple(str(Path(p).expanduser().resolve()) for p in include_path)
    names = _names(name, include)
    if names != [name]:
        raise LmEvalError(
            f"task 'lm-eval:{name}' is a group of {len(names)} tasks "
            f"({', '.join(names[:5])}{', ...' if len(names) > 5 else ''}); run one, or "
            "list the group in a study (credo study expands it)"
        )
    task = _lm_task(name, include, num_fewshot or 0)
    rev = dataset_revision(task)
    if revision and revision != rev:
        raise LmEvalError(
            f"task 'lm-eval:{name}': dataset revision {rev!r}, not the configured "
            f"{revision!r} (lm_eval.revision)"
        )
    return _task_of(task, name, include, num_fewshot or 0, rev)


def expand_lm_eval_specs(specs: Sequence[str], include_path: Sequence[str | Path] = ()) -> \
        list[str]:
    """``specs`` with every ``lm-eval:<group>`` replaced by its tasks (``credo study``);
    other specs are kept as they are."""
    include = tuple(str(Path(p).expanduser().resolve()) for p in include_path)
    out: list[str] = []
    for spec in specs:
        if spec.startswith(f"{LM_EVAL}:"):
            out += [f"{LM_EVAL}:{n}" for n in _names(spec.split(":", 1)[1].strip(), include)]
        else:
            out.append(spec)
    return list(dict.fromkeys(out))


def dataset_revision(task: Any) -> str:
    """The revision of the task's dataset: :func:`pinned_revision`, else the evaluation
    split's fingerprint (datasets' hash of its data)."""
    pinned = pinned_revision(task.config.dataset_kwargs)
    if pinned:
        return pinned
    docs = task.eval_docs
    return str(getattr(docs, "_fingerprint", "") or "unknown")[:12]


def _task_of(lm: Any, name: str, include: tuple[str, ...], shots: int, rev: str) -> Task:
    mc = lm.OUTPUT_TYPE == "multiple_choice"
    shared = {
        "lm_eval_task": name,
        "lm_eval_include": json.dumps(list(include)),
        "lm_eval_fewshot": str(shots),
        "lm_eval_revision": rev,
        "correctness": correctness_line(lm, name),
    }
    items = tuple(
        _item(lm, name, doc_id, doc, rev, mc, shared) for doc_id, doc in enumerate(lm.eval_docs)
    )
    fmt = AnswerFormat.CHOICE if mc else AnswerFormat.SHORT_TEXT
    return Task(f"{LM_EVAL}:{name}", items, fmt, "",
                sampling=None if mc else tool_sampling(lm, name))


LM_EVAL_MAX_GEN_TOKS = 256
"""lm-eval's generation cap when a task's ``generation_kwargs`` set none: every backend's
default ``max_gen_toks`` (``lm_eval.models.api_models``, ``huggingface``, ``vllm``)."""


def tool_sampling(lm: Any, name: str) -> ToolSampling:
    """The sampling settings of lm-eval task ``name``'s ``generation_kwargs`` as credo's
    fields: ``max_gen_toks`` (or ``max_tokens``; lm-eval's default
    :data:`LM_EVAL_MAX_GEN_TOKS` when neither is set) is ``max_tokens``; ``until`` is
    ``stop`` (its first four: the server stops there, and :func:`cut` applies them all);
    ``temperature``, ``top_p`` and ``top_k`` are taken when the task samples
    (``do_sample`` not false and ``temperature`` above 0). A greedy task's decoding is not
    taken: n greedy answers are one answer n times, and credo samples to measure how
    often they agree."""
    gen = dict(lm.config.generation_kwargs or {})
    source = f"lm-eval task {name}'s generation_kwargs"
    settings: dict[str, object] = {}
    not_taken: dict[str, str] = {}
    cap = gen.get("max_tokens", gen.get("max_gen_toks"))
    if isinstance(cap, int) and not isinstance(cap, bool) and cap >= 1:
        settings["max_tokens"] = cap
    else:
        settings["max_tokens"] = LM_EVAL_MAX_GEN_TOKS
        source += f" (max_gen_toks not set: lm-eval's default {LM_EVAL_MAX_GEN_TOKS})"
    until = [str(u) for u in _until(lm) if u]
    if until:  # the first four (OpenAI's limit, as lm-eval's chat backend sends them);
        settings["stop"] = tuple(until[:4])  # every one of them still cuts the response
    temperature = gen.get("temperature")
    number = isinstance(temperature, int | float) and not isinstance(temperature, bool)
    if gen.get("do_sample") is False or not number or temperature <= 0:
        how = (f"temperature {temperature:g}" if number else
               "no temperature: lm-eval's default 0") + (
            ", do_sample false" if gen.get("do_sample") is False else "")
        not_taken["temperature"] = (
            f"greedy decoding ({how}): n greedy answers are one answer n times; credo "
            "samples at sampling.temperature")
    else:
        for key in ("temperature", "top_p", "top_k"):
            value = gen.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                settings[key] = value
    return ToolSampling(source, settings, not_taken)


def _item(
    lm: Any, name: str, doc_id: int, doc: Any, rev: str, mc: bool, shared: dict[str, str]
) -> Item:
    question = lm.doc_to_text(doc)
    if not isinstance(question, str):  # multiple-input tasks (winogrande) render choices
        raise LmEvalError(f"task 'lm-eval:{name}': doc_to_text gives no text (multiple input)")
    context = lm.fewshot_context(doc, lm.config.num_fewshot or 0,
                                 gen_prefix=lm.doc_to_prefix(doc))
    at = context.rfind(question)
    before, after = (context[:at], context[at + len(question):]) if at >= 0 else ("", "")
    target = lm.doc_to_target(doc)
    where = f"lm-eval:{name}@{rev}:{doc_id}"
    meta = {**shared, "lm_eval_doc": str(doc_id)}
    if mc:
        choices = tuple(str(c) for c in lm.doc_to_choice(doc))
        index = target if isinstance(target, int) else (
            choices.index(target) if target in choices else -1)
        if not 0 <= index < len(choices):
            raise LmEvalError(f"{where}: gold {target!r} is not one of the choices")
        return Item(f"{name}@{rev}:{doc_id}", question.strip(), LETTERS[index], choices,
                    meta, where)
    golds = _golds(lm, doc, target)
    meta |= {"grader": LM_EVAL, "extractor": LM_EVAL, "prompt": "rendered", "context": before,
             "suffix": after, "gold_answers": json.dumps(golds, ensure_ascii=False)}
    return Item(f"{name}@{rev}:{doc_id}", question, golds[0] if golds else "", (), meta, where)


def question_item(task: Task, text: str, choices: Sequence[str] = (), item_id: str = "q0"
                  ) -> Item:
    """An item of lm-eval task ``task`` (loaded by :func:`load_lm_eval`) for a question
    nobody labelled (the gateway's): the document it stands for, rendered as the task
    renders its own (``doc_to_text``, its description and few-shot examples) and read
    by its filter. ``text`` is the document as a JSON object of the task's fields
    (``{"question": "..."}``), or the plain text of the one field the task's
    ``doc_to_text`` reads (:func:`question_doc`); a multiple-choice task's options are
    ``doc_to_choice``'s of that document, else ``choices``. No gold: the item is
    unlabelled. A question the task cannot render is a :class:`LmEvalError`."""
    first = task.items[0] if task.items else None
    meta = first.meta if first is not None else {}
    if "lm_eval_task" not in meta:
        raise LmEvalError(f"task {task.name!r}: not an lm-eval task loaded with its items")
    name = meta["lm_eval_task"]
    include = tuple(json.loads(meta.get("lm_eval_include", "[]")))
    shots = int(meta.get("lm_eval_fewshot", "0"))
    lm = _lm_task(name, include, shots)
    doc = question_doc(lm, name, text)
    shared = {k: v for k, v in meta.items() if k in ("lm_eval_task", "lm_eval_include",
                                                     "lm_eval_fewshot", "lm_eval_revision",
                                                     "correctness")}
    try:
        question = lm.doc_to_text(doc)
        # lm-eval reads the target while it builds the context, and renders none of it:
        # an unlabelled document gets its target's fields empty for that call only
        blank = {f: "" for f in _fields(lm, lm.config.doc_to_target) if f not in doc}
        context = lm.fewshot_context({**blank, **doc}, shots,
                                     gen_prefix=lm.doc_to_prefix(doc))
    except Exception as e:  # the task's own template on a document it cannot render
        raise LmEvalError(f"task 'lm-eval:{name}': cannot render the question "
                          f"({type(e).__name__}: {str(e)[:160]})") from None
    if not isinstance(question, str):
        raise LmEvalError(f"task 'lm-eval:{name}': doc_to_text gives no text (multiple input)")
    where = f"lm-eval:{name}:{item_id}"
    meta_q = {**shared, "lm_eval_doc_json": json.dumps(doc, ensure_ascii=False)}
    if lm.OUTPUT_TYPE == "multiple_choice":
        try:
            options = tuple(str(c) for c in lm.doc_to_choice(doc))
        except Exception:  # the document lacks the fields its options come from
            options = tuple(choices)
        if len(options) < 2:
            raise LmEvalError(f"task 'lm-eval:{name}': a multiple-choice question needs "
                              "its options: the document's fields, or the request's choices")
        return Item(item_id, question.strip(), "", options, meta_q, where)
    at = context.rfind(question)
    before, after = (context[:at], context[at + len(question):]) if at >= 0 else ("", "")
    meta_q |= {"extractor": LM_EVAL, "prompt": "rendered", "context": before,
               "suffix": after}  # no grader: nothing to grade it against
    return Item(item_id, question, "", (), meta_q, where)


def question_doc(lm: Any, name: str, text: str) -> dict[str, Any]:
    """The document a question stands for: ``text`` itself when it is a JSON object,
    else ``{field: text}`` for the one field the task's ``doc_to_text`` reads (a field
    name, or the one variable of its Jinja template). A :class:`LmEvalError` names the
    fields when there are several (send the document as a JSON object)."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            doc = json.loads(stripped)
        except ValueError:
            doc = None
        if isinstance(doc, dict):
            return doc
    fields = template_fields(lm)
    if len(fields) != 1:
        named = ", ".join(fields) if fields else "none that credo can read"
        raise LmEvalError(f"task 'lm-eval:{name}': its doc_to_text reads the fields "
                          f"{named}; send the question as a JSON object of them")
    return {fields[0]: text}


def template_fields(lm: Any) -> list[str]:
    """The document fields lm-eval task ``lm``'s ``doc_to_text`` reads: the field it
    names, or the variables of its Jinja template (sorted); empty for a Python function
    or a prompt template, which do not say."""
    return _fields(lm, lm.config.doc_to_text)


def _fields(lm: Any, spec: Any) -> list[str]:
    """The document fields a task's ``doc_to_*`` setting ``spec`` reads, as
    :func:`template_fields` says them."""
    import jinja2
    import jinja2.meta

    if not isinstance(spec, str):
        return []
    if spec in getattr(lm, "features", ()):
        return [spec]
    try:
        parsed = jinja2.Environment().parse(spec)
    except jinja2.TemplateSyntaxError:
        return []
    return sorted(jinja2.meta.find_undeclared_variables(parsed))


def _golds(lm: Any, doc: Any, target: Any) -> list[str]:
    if lm.config.doc_to_choice is not None and isinstance(target, int):
        return [str(lm.doc_to_choice(doc)[target])]
    if isinstance(target, list):
        return [str(t) for t in target] or [""]
    return [str(target)]


def correctness_line(lm: Any, name: str) -> str:
    """How the items of lm-eval task ``name`` are graded, in one line."""
    if lm.OUTPUT_TYPE == "multiple_choice":
        return (f"lm-eval {name}: sampled option letter equals doc_to_target's option "
                "(lm-eval itself scores this task by log-likelihood)")
    ensemble, metric = _primary(lm)
    kwargs = lm._metric_fn_kwargs.get(metric) or {}
    args = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
    steps = ", ".join(_filter_name(f) for f in ensemble.filters)
    until = _until(lm)
    return (f"lm-eval {name}: {metric}({args}) after filter {ensemble.name!r} ({steps})"
            f"{f'; responses cut at {until!r}' if until else ''}")


def _filter_name(f: Any) -> str:
    fn = getattr(f, "func", f)
    return getattr(fn, "__name__", type(fn).__name__)


def _primary(lm: Any) -> tuple[Any, str]:
    """The task's first filter ensemble and its first metric: what it reports first."""
    ensembles = getattr(lm, "_filters", None) or []
    metrics = list(lm._metric_fn_list)
    if not ensembles or not metrics:
        raise LmEvalError(f"task 'lm-eval:{lm.config.task}': no filter or metric to grade by")
    return ensembles[0], metrics[0]


def _until(lm: Any) -> list[str]:
    until = (lm.config.generation_kwargs or {}).get("until") or []
    return [until] if isinstance(until, str) else list(until)


# --------------------------------------------------------------------------- grading


def cut(text: str, until: Sequence[str]) -> str:
    """``text`` up to the first of the ``until`` strings, as lm-eval's backends stop."""
    for stop in until:
        if stop:
            text = text.split(stop, 1)[0]
    return text


def score_responses(lm: Any, responses: Mapping[int, Sequence[str]]) -> dict[int, list[float]]:
    """Per document id, lm-eval's metric on each response: cut at the task's ``until``
    strings, through its first filter ensemble, scored by ``process_results``'s first
    metric (what lm-eval reports for that response)."""
    ensemble, metric = _primary(lm)
    until = _until(lm)
    docs = lm.eval_docs
    out: dict[int, list[float]] = {}
    for doc_id, texts in responses.items():
        doc = docs[doc_id]
        out[doc_id] = [
            _unit(lm.process_results(doc, [filtered(ensemble, doc, [cut(t, until)])])[metric],
                  lm.config.task, metric)
            for t in texts
        ]
    return out


@cache
def _answer_rule(name: str, include: tuple[str, ...], shots: int) -> AnswerRule:
    lm = _lm_task(name, include, shots)
    ensemble, metric = _primary(lm)
    return AnswerRule.of(ensemble, metric, lm._metric_fn_kwargs.get(metric))


@item_extractor(LM_EVAL)
def lm_eval_answer(text: str, item: Item) -> str | None:
    """The answer of a response to an lm-eval ``generate_until`` item:
    cut at the task's ``until`` strings, through its first filter ensemble, made a string
    by :class:`~credo.tasks.lm_eval_scores.AnswerRule`, as ``credo score`` reads the
    answers of lm-eval's own samples of the task."""
    meta = item.meta
    key = (meta["lm_eval_task"], tuple(json.loads(meta.get("lm_eval_include", "[]"))),
           int(meta.get("lm_eval_fewshot", "0")))
    lm = _lm_task(*key)
    ensemble, _ = _primary(lm)
    return _answer_rule(*key)(filtered(ensemble, _doc(lm, meta), [cut(text, _until(lm))]))


def _doc(lm: Any, meta: Mapping[str, str]) -> Any:
    """The document an item stands for: the task's own (``lm_eval_doc``: its index), or
    a question's (``lm_eval_doc_json``: :func:`question_item`)."""
    if "lm_eval_doc" in meta:
        return lm.eval_docs[int(meta["lm_eval_doc"])]
    return json.loads(meta["lm_eval_doc_json"])


def _unit(value: Any, task: str, metric: str) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise UserError(
            f"task 'lm-eval:{task}': metric {metric!r} gives {type(value).__name__}, not a "
            "per-response score in [0, 1]; credo cannot grade by it"
        ) from None
    if not 0.0 <= x <= 1.0:
        raise UserError(f"task 'lm-eval:{task}': metric {metric!r} gives {x}, not in [0, 1]")
    return x


@grader(LM_EVAL, "the lm-eval task's own filter and metric on each response (its line says "
        "which)")
def grade_lm_eval(ctx: GradingContext, originals: Mapping[str, Sequence[Graded]]) -> GradeMap:
    """Each response by its lm-eval task's filters and metric (:func:`score_responses`);
    a 0/1 metric gives bools, another one its value in [0, 1]."""
    items = ctx.items
    groups: dict[tuple[str, tuple[str, ...], int], dict[str, int]] = {}
    for item_id in originals:
        meta = items[item_id].meta
        key = (meta["lm_eval_task"], tuple(json.loads(meta.get("lm_eval_include", "[]"))),
               int(meta.get("lm_eval_fewshot", "0")))
        groups.setdefault(key, {})[item_id] = int(meta["lm_eval_doc"])
    out: GradeMap = {}
    for (name, include, shots), ids in groups.items():
        lm = _lm_task(name, include, shots)
        scores = score_responses(
            lm, {doc: [s.text for s in originals[i]] for i, doc in ids.items()})
        for item_id, doc in ids.items():
            out[item_id] = tuple(bool(v) if v in (0.0, 1.0) else v for v in scores[doc])
    return out


# --------------------------------------------------------------------------- registry


@task_loader(LM_EVAL, fmt=None, grader=LM_EVAL, source="lm-evaluation-harness's task registry "
             f"({INSTALL})", usage="lm-eval:<task>")
def _lm_eval_task(arg: str | None) -> Task:
    """``lm-eval:<task>``: any task of lm-eval's registry (zero-shot, no custom folder;
    ``credo run`` passes ``--num-fewshot`` and ``--include-path``)."""
    if not arg:
        raise LmEvalError("task 'lm-eval' needs a task name: lm-eval:<task>")
    return load_lm_eval(arg)


def _named(name: str, lm_name: str, what: str) -> None:
    """Register ``name`` as lm-eval's ``lm_name``: its data come from the Hub."""

    @task_loader(name, fmt=AnswerFormat.SHORT_TEXT, grader=LM_EVAL,
                 source=f"lm-eval task {lm_name!r} ({INSTALL}); {what}", usage=name)
    def load(arg: str | None) -> Task:
        if arg:
            raise TaskSpecError(f"task {name!r} takes no argument, got {arg!r}")
        return load_lm_eval(lm_name)

    load.__doc__ = f"{name}: lm-eval's {lm_name!r} task ({what})."


_named("triviaqa", "triviaqa",
       "data: mandarjoshi/trivia_qa rc.nocontext from the Hugging Face Hub (online, or "
       "in the HF cache offline)")
_named("nq_open", "nq_open",
       "data: google-research-datasets/nq_open from the Hugging Face Hub (online, or in "
       "the HF cache offline)")

"""The gateway's sampling: a batch of questions answered under a certificate's
recipe, with the credibility score and the certified accept decision of each.

``credo serve`` and :class:`credo.Guard` (:mod:`credo.serve`) hold the batching, the
HTTP protocol and the decision log; what a question is asked and how its answer is
decided lives here, on the pipeline's own pieces:

- :func:`gateway_config`: the run config the gateway samples with: the certificate's
  recipe (:func:`recipe_fields`), or the run config given (a file, or the calibration
  run's ``config.yaml``), with the flags over it; the method is the certificate's alone,
  and the procedure is the certificate's (the adaptive ``decision`` rule at the certified
  threshold for a certificate made by ``credo certify --adaptive decision``; the full
  recipe otherwise) unless the flags or the config name another.
- :func:`gateway_settings`: what the gateway would record in a certificate
  (:func:`~credo.pipeline.certificate.run_settings` plus the procedure), which
  :meth:`~credo.pipeline.certificate.RunCertificate.check` compares with the
  certificate's before the gateway listens.
- :func:`decide_questions`: one batch: a :class:`~credo.tasks.base.Task` of the
  questions (the certificate's answer format, writer topic and prompt template) through
  :func:`~credo.pipeline.runner.run_pipeline`, so requests that arrive together share the
  executor's calls and every round of the adaptive rule, through the cache; per question
  the answer credo gives (the most central parsed sample under the run's kernel, the
  first sample of the modal answer under the indicator kernel: what the certificate's
  selective risk counted, :attr:`~credo.methods.scoring.ItemResult.answer`),
  the certificate method's score, and ``accept`` = the certificate accepts that score.

This is the one function that samples for the gateway: the stage driver can take it over
whole.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from credo.config import RunConfig, validation_message
from credo.errors import UserError
from credo.generation.executor import CallHook, usage_scope
from credo.generation.pool import ModelPool
from credo.pipeline.certificate import (
    LM_EVAL_FAMILY,
    RunCertificate,
    certified_fit,
    certified_rule,
    procedure_of,
    procedure_settings,
    prompt_digest,
    rule_scores,
    run_settings,
)
from credo.pipeline.checks import method_specs
from credo.pipeline.runner import run_pipeline
from credo.plan.samples import PERTURBED
from credo.tasks.base import AnswerFormat, Item, Task
from credo.tasks.lm_eval import load_lm_eval, question_item

__all__ = [
    "FULL",
    "Decision",
    "Question",
    "Upstream",
    "check_servable",
    "decide_question",
    "gateway_config",
    "gateway_item",
    "gateway_settings",
    "gateway_task",
    "given_recipe_missing",
    "procedure_of",
    "recipe_fields",
]

FULL = "off"
"""``adaptive`` of the gateway's overrides that asks for the full recipe."""


@dataclass(frozen=True)
class Question:
    """One question for the gateway: its text and, for the choice format, its options."""

    text: str
    choices: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Upstream:
    """What one question's sampling cost upstream: the backend ``calls`` its requests
    sent (retries included, ``retries`` of them), the ``prompt_tokens`` and
    ``completion_tokens`` the servers reported for them (counted from the samples on a
    backend that reports none), the samples those calls ``generated`` and those read
    from the cache instead (``cached``: drawn before, or by an identical question
    meanwhile: they cost this question nothing), and the kind of each request that
    failed after its retries (``failures``)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    generated: int = 0
    cached: int = 0
    retries: int = 0
    failures: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Decision:
    """What the gateway decided for one question.

    ``answer``: the answer credo gives (normalised; None when no sample had a parsed
    answer); ``text``: the full text of the sample it came from (the first sample's when
    none parsed); ``score``: the certificate method's score (None where it has none);
    ``accept``: the certificate accepts it; ``samples``: answer samples drawn (original
    and perturbed); ``full_samples``: what the full recipe draws (n, plus m where the
    method reads perturbed samples); ``writer``: prefix candidates the writer was asked
    for; ``upstream``: what drawing them cost (:class:`Upstream`); ``error``: why there
    is no decision (the backend's message: the upstream model's requests failed), else
    None, and ``error_kind`` the failure's kind (the backend's
    :attr:`~credo.types.GenerationError.kind`: ``http_500``, ``timeout``,
    ``circuit_open``, ...)."""

    question: str
    answer: str | None
    text: str
    score: float | None
    accept: bool
    samples: int
    full_samples: int
    writer: int = 0
    upstream: Upstream = Upstream()
    error: str | None = None
    error_kind: str | None = None


def check_servable(cert: RunCertificate) -> None:
    """Refuse a certificate the gateway cannot apply, in one line naming why: one made on
    generations a user gave (``credo score``) whose file does not record what the gateway
    would need to ask a new question the same way (:func:`given_recipe_missing`), one
    made on an lm-eval task by a credo that did not record the task's few-shot count and
    dataset revision, or one that certified nothing (every answer would be rejected). A
    certificate of ``credo run --task lm-eval:<task>`` is served: each question is
    rendered by the task's own template and read by its filter
    (:func:`~credo.tasks.lm_eval.question_item`)."""
    s = cert.settings
    if s.get("command") != "credo run":
        missing = given_recipe_missing(cert)
        family = str(s.get("task", {}).get("family", ""))
        instead = (f"credo run --task lm-eval:{family.split(':', 2)[2]}"
                   if family.startswith("given:lm-evaluation-harness:") else "credo run")
        raise UserError(f"--certificate {cert.source or ''}: made by {s.get('command')} on "
                        f"generations a user gave; it does not record {missing}, and the "
                        "gateway must ask each question as those were asked: certify a "
                        f"`{instead}` of the same model and task")
    if s["task"]["family"].startswith(LM_EVAL_FAMILY) and "lm_eval" not in s:
        raise UserError("--certificate: made on an lm-eval task by an older credo, which did "
                        "not record the task's few-shot count and dataset revision the "
                        "gateway renders a question with; certify the run again "
                        f"(credo certify {cert.source or 'RUN_DIR'} --method {cert.method})")
    if cert.certificate.threshold is None:
        raise UserError(f"--certificate: it certified nothing ({cert.certificate.message}); "
                        "the gateway would reject every answer")


def given_recipe_missing(cert: RunCertificate) -> str:
    """What a certificate made on given generations (``credo score``) does not record for
    the gateway to ask new questions the way they were asked: the prompt each question
    was rendered with (the generating tool's own template and context: a score
    certificate names it the tool's), how each answer was read from its response (an
    inspect_ai scorer's own code; lm-eval's filter, which credo applied from the results
    file but the certificate does not hold), and the sampling settings the file did not
    record."""
    s = cert.settings
    missing = ["the prompt template each question was asked with"]
    layout = str(s.get("task", {}).get("family", "")).split(":")[:2]
    if layout[-1:] == ["inspect_ai"]:
        missing.append("how inspect's scorer read each answer")
    elif layout[-1:] == ["lm-evaluation-harness"]:
        missing.append("the task's filter credo would read each answer with")
    sampling = s.get("sampling") if isinstance(s.get("sampling"), dict) else {}
    unrecorded = [k for k in ("temperature", "max_tokens") if k not in sampling]
    if unrecorded:
        missing.append(f"the sampling settings ({', '.join(unrecorded)})")
    return ", ".join(missing[:-1]) + (" or " if len(missing) > 1 else "") + missing[-1]


def recipe_fields(cert: RunCertificate) -> dict[str, Any]:
    """The run config mapping of a certificate's recipe (its settings): the model (its
    spec from its identity), prompt style, sampling, n, m, the writer and the
    perturbation settings, kernel, baselines and judge; for an lm-eval task, the task
    and its few-shot count and dataset revision (its folder of task YAMLs is the
    calibration run's config's, or ``lm_eval.include_path`` given over it)."""
    s = cert.settings
    model, options = _model_spec(str(s["model"]))
    out = {
        "model": model, "model_options": options, "prompt_style": s["prompt_style"],
        "sampling": s["sampling"], "n": s["n"], "m": s["m"], "kernel": s["kernel"],
        "perturbation": {**s["perturbation"], "writer": s["writer"]},
        "baselines": s["baselines"], "judge": {"model": s["judge"]},
    }
    if isinstance(s.get("lm_eval"), dict):
        out |= {"task": s["task"]["family"], "lm_eval": dict(s["lm_eval"])}
    return out


def _model_spec(identity: str) -> tuple[str, dict[str, Any]]:
    """A model spec and options from an identity: ``openai:<m>@<label>`` is the served
    model with its label; ``llamacpp:<name>@sha256:<hash>`` the embedded ``<name>``."""
    kind, _, rest = identity.partition(":")
    if kind == "openai" and "@" in rest:
        name, _, label = rest.partition("@")
        return f"openai:{name}", {"label": label}
    if kind == "llamacpp":
        return rest.split("@sha256:", 1)[0], {}
    return identity, {}


def gateway_config(
    cert: RunCertificate,
    base: Mapping[str, Any] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> RunConfig:
    """The config the gateway samples with (module docstring): ``base`` (a run config
    mapping; None: the certificate's recipe) with ``overrides`` written over it (nested,
    as a flag's path names it), validated once.

    The procedure: ``overrides["adaptive"]`` ``"decision"`` (the decision rule) or
    :data:`FULL` (the full recipe); else an adaptive section of ``base``; else the
    certificate's. ``overrides["adaptive_options"]`` (``round``, ``min``,
    ``confidence``) go over the rule's. The decision rule's threshold is the
    certificate's, and it reads the certificate's method unless told otherwise; the
    gateway scores that method alone (and, for a fitted score, the methods it reads, to
    which it applies the certified function)."""
    data = dict(recipe_fields(cert) if base is None else base)
    over = dict(overrides or {})
    chosen = over.pop("adaptive", None)
    options = dict(over.pop("adaptive_options", None) or {})
    _merge(data, over)
    recorded = procedure_settings(procedure_of(cert))
    if chosen not in (None, "decision", FULL):
        raise UserError(f"--adaptive {chosen!r}: the gateway runs the decision rule "
                        f"(decision) or the full recipe ({FULL})")
    if chosen == FULL:
        rule = None
    elif chosen == "decision":
        rule = {**(data.get("adaptive") or recorded or {"rule": "decision"}), **options}
    else:
        mine = data.get("adaptive") or recorded
        rule = None if mine is None else {**mine, **options}
    if rule is None and options:
        raise UserError(f"--adaptive-{next(iter(options))}: the gateway serves the full "
                        "recipe here (a certificate of it); the rule's settings need "
                        "--adaptive decision")
    if rule is not None:
        if rule.get("rule", "decision") != "decision":
            raise UserError(f"adaptive.rule {rule['rule']!r}: the gateway runs the decision "
                            "rule, whose stopping depends only on the certified decision")
        rule = certified_rule(rule, cert)
    data.update({"adaptive": rule, "methods": [cert.method], "bootstrap": 0, "limit": None,
                 "certificate": None, "task_file": None})
    data.update(certified_fit(cert))  # a fitted score: the certified function, and its inputs
    try:
        config = RunConfig.model_validate(data)
    except ValidationError as e:
        raise UserError(validation_message(e, "the gateway's settings")) from None
    if config.adaptive is not None:
        readable = rule_scores()
        if cert.method not in readable:
            raise UserError(f"the decision rule reads {', '.join(readable)}; the "
                            f"certificate's method {cert.method!r} is not one of them "
                            f"(serve its full recipe: --adaptive {FULL})")
    return config


def _merge(data: dict[str, Any], over: Mapping[str, Any]) -> None:
    """``over`` written into ``data`` in place, sections merged key by key."""
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(data.get(key), Mapping):
            inner = dict(data[key])
            _merge(inner, value)
            data[key] = inner
        else:
            data[key] = value


def gateway_task(cert: RunCertificate, config: RunConfig | None = None) -> Task:
    """The task the gateway's questions belong to: the certificate's family, answer
    format and writer topic, without items (the questions are the user's, unlabelled).
    For an lm-eval task (``config``: :func:`gateway_config`'s, naming its few-shot count,
    task folders and dataset revision), the task as lm-eval loads it: its template and
    filter render and read each question (:func:`gateway_item`); a task that cannot be
    loaded, or whose dataset revision is not the certificate's, is a
    :class:`~credo.errors.UserError`."""
    task = cert.settings["task"]
    family = task["family"]
    if family.startswith(LM_EVAL_FAMILY) and config is not None:
        opts = config.lm_eval
        loaded = load_lm_eval(family, num_fewshot=opts.num_fewshot,
                              include_path=opts.include_path, revision=opts.revision)
        return dataclasses.replace(loaded, family=family)
    return Task(family, (), AnswerFormat(task["format"]), domain=task["domain"],
                family=family)


def gateway_item(template: Task, question: Question, item_id: str = "q0") -> Item:
    """The item of one question: for an lm-eval task, the document it stands for,
    rendered and read as the task does (:func:`~credo.tasks.lm_eval.question_item`: a JSON
    object of the task's fields, or the text of the one field it reads); else the
    question's text and options, asked with the certificate's prompt."""
    if template.family.startswith(LM_EVAL_FAMILY) and template.items:
        return question_item(template, question.text, question.choices, item_id)
    return Item(item_id, question.text, "", tuple(question.choices))


def gateway_settings(
    config: RunConfig, identity: str, cert: RunCertificate, task: Task
) -> dict[str, Any]:
    """The settings the gateway runs with, as a certificate records them: the model's
    identity, the task (the certificate's family and correctness rule, which unlabelled
    questions cannot show, with the prompt template's digest computed here), every
    sampling setting of the recipe, and the procedure when the certificate names one or
    the gateway runs the adaptive one."""
    recorded = cert.settings["task"]
    own = {"family": task.family or task.name, "format": task.format.value,
           "domain": task.domain, "prompt": prompt_digest(task, config),
           "correctness": recorded["correctness"]}
    settings = run_settings(config, identity, cert.method, own)
    if "adaptive" in cert.settings or config.adaptive is not None:
        settings["adaptive"] = procedure_settings(config.adaptive)
    return settings


def decide_question(
    config: RunConfig,
    pool: ModelPool,
    template: Task,
    question: Question,
    cert: RunCertificate,
    *,
    reach: bool = False,
    on_call: CallHook | None = None,
) -> Decision:
    """Answer one question (module docstring) as a run of one item: its rounds go to the
    pool's executors as they come, beside any other question's decided in another
    thread. ``template``: :func:`gateway_task`; ``config``: :func:`gateway_config`;
    ``reach`` False: the servers were checked when the gateway started. When the model's
    requests failed the decision has ``error`` (the backend's message) and
    ``error_kind``; a question the recipe cannot ask (too long for the model's context)
    raises :class:`~credo.errors.UserError`; a deadline of this thread
    (:mod:`credo.models.deadline`) raises
    :class:`~credo.models.deadline.DeadlineExceeded`, with what was drawn cached.
    ``on_call`` is told of each executor call the question's sampling makes
    (:func:`~credo.generation.executor.usage_scope`)."""
    item = gateway_item(template, question)
    with usage_scope(on_call) as used:
        result = run_pipeline(config, pool, dataclasses.replace(template, items=(item,)),
                              reach=reach)
    upstream = Upstream(calls=used.stats.calls, prompt_tokens=used.stats.prompt_tokens,
                        completion_tokens=used.stats.completion_tokens,
                        generated=used.stats.generated_samples, cached=used.cached,
                        retries=used.stats.retries,
                        failures=tuple(f.kind for f in used.failures))
    reads = {name for spec in method_specs(config.methods)
             for name in spec.needs_for(template.format)}
    full = config.n + (config.m if PERTURBED in reads else 0)
    r = result.items[0] if result.items else None
    if r is None:
        failure = used.failures[0] if used.failures else None
        why = (str(failure).splitlines() or [""])[0] if failure is not None else \
            result.incomplete.get(item.id) or "no context prefix passed the rules"
        kind = failure.kind if failure is not None else "no_prefix"
        return Decision(question=question.text, answer=None, text="", score=None,
                        accept=False, samples=0, full_samples=full, upstream=upstream,
                        error=why, error_kind=kind)
    score = r.scores.get(cert.method, math.nan)
    known = r.answer is not None and math.isfinite(score)
    i = r.answer_index
    pset = result.perturbation_sets.get(item.id)
    return Decision(
        question=question.text, answer=r.answer,
        text=r.original[i if i is not None else 0].text if r.original else "",
        score=score if math.isfinite(score) else None,
        accept=bool(known and cert.certificate.accept([score])[0]),
        samples=len(r.original) + len(r.sets.get(PERTURBED, ())), full_samples=full,
        writer=pset.candidates if pset is not None else 0, upstream=upstream)


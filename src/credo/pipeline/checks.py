"""The checks a run makes before its first model call (out of the
runner), so a mistake costs seconds, not a run.

:func:`method_specs` resolves the method names where a pipeline starts (the config imports
no method); :func:`check_static` checks what needs no model at all (items, planners,
kernels, the prompt style, the corpus file); :func:`check_lengths` refuses a prompt that
cannot fit the model's context; :func:`warn_unpriced` names the models without prices
under a cost budget. Every role is checked by the one preflight of every command,
:meth:`credo.pipeline.stages.StageDriver.preflight`. :func:`run_roles` lists the
roles a run asks, in stage order; :func:`needs` the sample sets its methods need.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from credo.config import RunConfig
from credo.errors import UserError
from credo.generation.pool import GRADER, JUDGE, MODEL, PARAPHRASER, WRITER, ModelPool
from credo.kernels.registry import get_kernel
from credo.methods import get_method
from credo.methods.base import MethodSpec
from credo.methods.claims import CLAIM_METHODS, SUPPORT_ORIGINAL, SUPPORT_PERTURBED
from credo.plan.sample_sets import get_sample_set
from credo.plan.samples import ORIGINAL, PARAPHRASED, PERTURBED
from credo.plugins import PluginError
from credo.tasks.base import AnswerFormat, Task
from credo.tasks.claims import read_claims
from credo.tasks.grading import JUDGED
from credo.tasks.prompts import render_messages
from credo.types import Capabilities

log = logging.getLogger(__name__)

__all__ = [
    "MAX_BYTES_PER_TOKEN",
    "RUNNER_ROLES",
    "check_claims",
    "check_lengths",
    "check_static",
    "claims_need_judge",
    "method_specs",
    "needs",
    "run_roles",
    "warn_unpriced",
]

def method_specs(names: Sequence[str]) -> list[MethodSpec]:
    """The registered methods ``names`` (``c3``, or ``c3@judge``: a method under a named
    kernel), checked where a pipeline starts, before any model is built (the
    config imports no method). Raises :class:`~credo.errors.UserError` naming every
    unknown one."""
    specs, problems = [], []
    for name in names:
        try:
            specs.append(get_method(name))
        except PluginError:  # a broken plug-in is its own one line, not an unknown name
            raise
        except ValueError as e:
            problems.append(str(e))
    if problems:
        raise UserError(f"unknown methods: {'; '.join(problems)}")
    return specs



def needs(specs: list[MethodSpec], task: Task, caps: Capabilities) -> set[str]:
    """The sample sets the methods that apply to ``task`` on a model with ``caps`` need."""
    return {ORIGINAL} | {
        s
        for spec in specs
        if applies(spec, task, caps.logprobs)
        for s in spec.needs_for(task.format)
    }



def check_static(config: RunConfig, task: Task, specs: list[MethodSpec]) -> None:
    """What a run can check with no model at all, before any model is built or any
    server contacted (a bad kernel is refused before the served model's
    probe): the task has items, every sample set of every method has a planner, every
    kernel resolves, the prompt style exists for the task's answer format and the corpus
    file exists. Raises :class:`~credo.errors.UserError` naming what is wrong."""
    if not task.items:
        raise UserError(f"task {task.name!r} has no items (task / limit)")
    given = [spec.name for spec in specs if spec.name.startswith("given:")]
    if given:
        raise UserError(f"method {given[0]!r} reads a score a file gives, and a run "
                        "generates its samples: score the file with credo score FILE")
    needs = {s for spec in specs for s in spec.needs_for(task.format)}
    for name in needs:
        get_sample_set(name)
    for name in {spec.kernel or config.kernel for spec in specs}:
        get_kernel(name)
    render_messages(task.items[0], task.format, config.prompt_style)
    check_claims(config, task)
    corpus = config.perturbation.corpus
    if PERTURBED in needs and corpus is not None and not Path(corpus).is_file():
        raise UserError(f"{corpus}: no such corpus file (perturbation.corpus)")


MAX_BYTES_PER_TOKEN = 1024
"""No vocabulary of the field's models holds a token longer than 1,024 bytes (SmolLM2's
longest is 64: a run of spaces; tests/test_preflight.py), so ``bytes / 1024`` is a lower
bound on a prompt's tokens that needs no tokenizer. Loose by design: a 10 MB question
needs at least 10,240 tokens, far beyond any embedded slot."""


def check_lengths(config: RunConfig, task: Task, model: object) -> None:
    """Refuse an item whose prompt cannot fit the model's context (a 10 MB
    question was sent to the model): with a model that states ``context_tokens``, an
    item whose rendered prompt holds more than ``context_tokens - max_tokens`` tokens
    even at :data:`MAX_BYTES_PER_TOKEN` is a user error naming the item. The bound is
    loose on purpose: it never refuses a prompt that fits; a prompt near the limit is
    still refused by the backend itself."""
    context = getattr(model, "context_tokens", None)
    if not isinstance(context, int):
        return
    room = context - config.sampling.max_tokens
    for item in task.items:
        text = "".join(m.content for m in render_messages(item, task.format, config.prompt_style))
        least = len(text.encode("utf-8")) // MAX_BYTES_PER_TOKEN
        if least > room:
            raise UserError(
                f"item {item.id!r} ({item.source or task.name}) is too long for the model: at"
                f" least {least} prompt tokens, and the context holds {context} tokens per "
                f"request ({config.sampling.max_tokens} kept for the answer); shorten or "
                "drop it, or raise model_options n_ctx"
            )


def run_roles(
    config: RunConfig, task: Task, specs: list[MethodSpec], needs: set[str]
) -> list[str]:
    """The pool roles a run with these methods and sample sets uses, in stage order."""
    runners = {get_sample_set(n).runner for n in needs}
    kernels = {spec.kernel or config.kernel for spec in specs}
    roles = [MODEL]
    roles += [WRITER] if PERTURBED in needs and config.perturbation.corpus is None else []
    roles += [PARAPHRASER] if PARAPHRASED in needs else []
    judged_claims = claims_need_judge(config)
    roles += [JUDGE] if "judge" in runners or "judge" in kernels or judged_claims else []
    judged = any(it.meta.get("grader") in JUDGED for it in task.items)
    roles += [GRADER] if judged else []
    return roles


def warn_unpriced(pool: ModelPool, roles: list[str]) -> None:
    """Name each model of ``roles`` without prices: its tokens cost nothing toward
    ``max_cost_usd``."""
    seen: set[str] = set()
    for role in roles:
        identity = pool.model(role).identity
        if identity not in seen and pool.prices(role) is None:
            log.warning(
                "max_cost_usd: the %s (%s) has no prices (model_options "
                "price_prompt_usd_per_mtok, price_completion_usd_per_mtok); its tokens count "
                "nothing toward the budget", role, identity,
            )
        seen.add(identity)



def applies(spec: MethodSpec, task: Task, logprobs: bool) -> bool:
    return spec.applies_to(task.format) and (logprobs or not spec.logprobs)




RUNNER_ROLES = {"model": MODEL, "judge": JUDGE}
"""The pool role that generates the sample sets of each planner ``runner``."""


def check_claims(config: RunConfig, task: Task) -> None:
    """What a run with ``config.claims`` refuses before its first call: a claim method
    no one registered, a task that is not long-form, an unreadable labels file."""
    c = config.claims
    if c is None:
        return
    for name in c.methods:
        CLAIM_METHODS[name]  # UnknownName: a user error naming the known ones
    if task.format is not AnswerFormat.LONG_FORM:
        raise UserError(f"claims: task {task.name!r} has {task.format.value} answers; claims "
                        "are split from long-form answers (e.g. factscore:<file>)")
    if c.labels is not None:
        read_claims(c.labels)


def claims_need_judge(config: RunConfig) -> bool:
    """Whether the claim stage asks the judge (splitting or support checks)."""
    c = config.claims
    if c is None:
        return False
    needs = set().union(*(CLAIM_METHODS[m].needs for m in c.methods))
    return c.split == "model" or bool(needs & {SUPPORT_ORIGINAL, SUPPORT_PERTURBED})

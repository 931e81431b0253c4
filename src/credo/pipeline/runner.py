"""``run_pipeline(config, pool)``: the stages of a run in order; it writes nothing.

task -> prompts -> perturbations (context prefixes, paraphrases) -> plan -> generation
(cached, through the pool) -> answers -> kernels and grades -> scores -> evaluation.
Every stage's output is a typed value the next one reads; none reaches back. Only the
generation layer calls models, and every model comes from the :class:`ModelPool`
(model under test, perturbation writer, paraphraser, judge, grader). The caller writes
the run folder (:func:`credo.report.writer.write_run`, as :func:`credo.run` does).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from credo.config import RunConfig
from credo.errors import UserError
from credo.evaluate.neutrality import neutrality_record
from credo.evaluate.tables import evaluate_items, evaluate_responses, unavailable_reasons
from credo.generation.executor import Executor, RequestsFailed
from credo.generation.pool import GRADER, JUDGE, MODEL, PARAPHRASER, WRITER, ModelPool
from credo.kernels.registry import ItemKernels, KernelContext, build_kernel, get_kernel
from credo.methods import get_method
from credo.methods.base import MethodSpec
from credo.methods.scoring import GeneratedSets, ItemResult, score_items
from credo.models.weights import STRONGEST_EMBEDDED, is_embedded_spec
from credo.perturb.context import PerturbationSet, generate_perturbations
from credo.perturb.corpus import corpus_perturbations, load_corpus
from credo.perturb.paraphrase import ParaphraseSet, generate_paraphrases
from credo.perturb.quality import similarity_record
from credo.plan.sample_sets import PlanContext, get_sample_set
from credo.plan.samples import ORIGINAL, PARAPHRASED, PERTURBED, ItemSamples, Sample
from credo.tasks.base import Item, Task
from credo.tasks.builtin import load_task, load_task_file
from credo.tasks.grading import GradingContext, grade_originals
from credo.tasks.prompts import render_messages
from credo.types import Capabilities, Generation, SamplingParams

log = logging.getLogger(__name__)

__all__ = [
    "ANSWER_SETS",
    "ItemResult",
    "PreparedRun",
    "RunResult",
    "assign_roles",
    "prepare_run",
    "run_pipeline",
    "run_roles",
]

ANSWER_SETS = (ORIGINAL, PERTURBED, PARAPHRASED)
"""Sample sets whose samples are answers to the question: what kernels compare."""


@dataclass
class RunResult:
    """The outcome of a run: per-item results, metrics per method, run statistics.

    ``metrics`` are item-level (score vs p̄, 000 App. E.2) with bootstrap CIs as
    ``<metric>_low`` / ``<metric>_high``; ``response_metrics`` are 002's response-level
    figures (each generation's confidence vs its own correctness) for the methods that
    score generations; ``unavailable`` says why a method has no score on some items.
    """

    config: RunConfig
    task: Task
    model_identity: str
    items: list[ItemResult]
    metrics: dict[str, dict[str, float]]
    stats: dict[str, float | int | str] = field(default_factory=dict)
    perturbation_sets: dict[str, PerturbationSet] = field(default_factory=dict)
    response_metrics: dict[str, dict[str, float]] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)
    paraphrase_sets: dict[str, ParaphraseSet] = field(default_factory=dict)
    #: Pairwise cosine similarities of each item's kept prefixes (000 App. A.2), computed
    #: by the perturbation stage with its embedder; the run folder keeps them for the report.
    perturbation_similarity: dict[str, Any] = field(default_factory=dict)
    #: Items left out because some of their requests failed after the backend's retries
    #: (item id -> what is missing); a rerun generates only what is missing.
    incomplete: dict[str, str] = field(default_factory=dict)
    #: Where the generations came from when they were given, not sampled (``credo score``).
    source: str = ""
    #: 000 App. A.3's neutrality test of the prefixes (mean Δ with its CI, ``neutral``);
    #: empty when it was not run (``perturbation.neutrality: off``, or no perturbed set).
    neutrality: dict[str, Any] = field(default_factory=dict)
    #: Requests, samples, reported tokens and cost per stage: the pool's ledger
    #: (:meth:`credo.generation.ledger.Ledger.to_dict`; a pool that ran several runs
    #: counts them all); ``metrics.json`` keeps it as ``stats.ledger``.
    ledger: dict[str, Any] = field(default_factory=dict)

    @property
    def stopped_by_budget(self) -> bool:
        """Whether the cost budget (``max_cost_usd``) left requests ungenerated."""
        return bool(self.ledger.get("stopped_by_budget"))

    @property
    def accuracy(self) -> float:
        """Mean of p̄ over items: the model's accuracy on the original prompts."""
        return float(np.mean([r.performance for r in self.items])) if self.items else math.nan


def assign_roles(pool: ModelPool, config: RunConfig) -> None:
    """The run's roles from its config; roles already assigned (models handed in) stay.

    The writer defaults to the model under test, the paraphraser to the writer, the
    grader to the judge and the judge to the model under test; a role naming the run's
    own model shares it (one server, whatever its options say).
    """
    pool.assign(MODEL, config.model, config.model_options)
    _assign_or_share(pool, WRITER, _writer_spec(pool, config), {}, MODEL, config)
    _assign_or_share(pool, PARAPHRASER, config.baselines.paraphrase_generator, {}, WRITER, config)
    _assign_or_share(pool, JUDGE, config.judge.model, config.judge.model_options, MODEL, config)
    if config.grader is None:
        pool.assign(GRADER, same_as=JUDGE)
    else:
        _assign_or_share(pool, GRADER, config.grader.model, config.grader.model_options,
                         MODEL, config)


def _writer_spec(pool: ModelPool, config: RunConfig) -> str | None:
    """The perturbation writer (issue 16: the writer decides whether C3 works): the one
    the config names, else the strongest embedded model when the model under test is an
    embedded one (a served model under test writes its own prefixes), else the model under
    test (``None``: a model handed in, as tests do)."""
    if config.perturbation.generator is not None:
        return config.perturbation.generator
    if pool.handed_in(MODEL) or not is_embedded_spec(config.model):
        return None
    return STRONGEST_EMBEDDED


def _assign_or_share(
    pool: ModelPool, role: str, spec: str | None, options: dict, default: str, config: RunConfig
) -> None:
    if spec is None or spec == config.model:
        pool.assign(role, same_as=default if spec is None else MODEL)
    else:
        pool.assign(role, spec, options)


def run_pipeline(config: RunConfig, pool: ModelPool, task: Task | None = None) -> RunResult:
    """Run C3 and the selected baselines on a task and return the results.

    ``pool`` supplies every model and the cache (see :func:`assign_roles`); ``task``
    replaces the one ``config`` names. Writes nothing; nothing passed in is closed.
    """
    t0 = time.perf_counter()
    prepared = prepare_run(config, pool, task)
    task, specs, caps, needs = prepared.task, prepared.specs, prepared.capabilities, prepared.needs
    before = {f: pool.total(f) for f in _TOTALS}

    incomplete: dict[str, str] = {}  # item id -> why some of its requests are missing
    ctx = PlanContext(task, config, caps.logprobs, caps.grammar)
    runners = {
        r: pool.executor(RUNNER_ROLES[r]) for r in {get_sample_set(n).runner for n in needs}
    }
    out: GeneratedOut = {it.id: {} for it in task.items}
    # the original answers first: a prefix must not name one (strict rules, issue 16)
    _generate(task, ctx, {ORIGINAL}, runners, incomplete, out)
    task = _without(task, incomplete)
    t_p0 = time.perf_counter()
    psets, paras, similarity = _perturbations(
        task, config, needs, pool, incomplete, _original_answers(out, task)
    )
    t_p1 = time.perf_counter()
    task, dropped = _drop_unperturbed(_without(task, incomplete), psets)
    ctx.task, ctx.perturbations, ctx.paraphrases = task, psets, paras
    _generate(task, ctx, needs - {ORIGINAL}, runners, incomplete, out)
    task = _without(task, incomplete)
    generated = {it.id: out[it.id] for it in task.items}
    answers = _answer_samples(task, generated)
    stats: dict[str, int | float | str] = {}
    kernels = build_kernels(config, specs, task, answers, pool, stats, incomplete)
    graded = grade_items(config, task, answers, pool, stats, incomplete)
    task = _without(task, incomplete)
    t_sample = time.perf_counter()

    items = score_items(
        task, generated, graded, specs, kernels,
        default_kernel=config.kernel, logprobs=caps.logprobs,
        prefixes={it.id: tuple(psets[it.id].prefixes(config.m))
                  for it in task.items if it.id in psets},
        options=config.baselines.method_options(),
    )
    metrics = evaluate_items(
        items, config.methods, config.ece_bins, config.bootstrap, config.seed, config.calibrate
    )
    response_metrics = evaluate_responses(
        items, config.methods, config.ece_bins, config.bootstrap, config.seed, config.calibrate
    )
    run_stats: dict[str, float | int | str] = {
        "items": len(items),
        "seconds_total": round(time.perf_counter() - t0, 2),
        "seconds_perturbations": round(t_p1 - t_p0, 2),
        "seconds_sampling": round(t_sample - t0 - (t_p1 - t_p0), 2),
        **{name: pool.total(f) - before[f] for f, name in _TOTALS.items()},
        "unparsable_answers": sum(
            1 for r in items for s in (*r.original, *r.perturbed) if not s.answer.parsed
        ),
        "items_dropped_without_perturbations": len(dropped),
        "items_incomplete": len(incomplete),
        "items_with_reused_perturbations": sum(
            1 for p in psets.values() if len(p.kept) < config.m
        ),
        **stats,
    }
    for name in sorted(needs - {ORIGINAL}):
        run_stats[f"samples_{name}"] = sum(len(r.sets.get(name, ())) for r in items)
    neutral = _neutrality(items, config) if PERTURBED in needs else {}
    return RunResult(
        config, task, pool.model(MODEL).identity, items, metrics, run_stats, psets,
        response_metrics, unavailable_reasons(items, config.methods), paras, similarity,
        incomplete, neutrality=neutral, ledger=pool.ledger.to_dict(),
    )


@dataclass
class PreparedRun:
    """What a run settles before its first model call: the task (cut to ``limit``), the
    methods, the model's capabilities and the sample sets the methods need."""

    task: Task
    specs: list[MethodSpec]
    capabilities: Capabilities
    needs: set[str]


def prepare_run(
    config: RunConfig, pool: ModelPool, task: Task | None = None, *, reach: bool = True
) -> PreparedRun:
    """Assign the run's roles and check everything that can be checked before the first
    model call (:func:`preflight`); with ``reach`` False no server is contacted (the
    models are built, which loads nothing: ``credo run --dry-run``)."""
    task = (task or configured_task(config)).head(config.limit)
    specs = [get_method(name) for name in config.methods]
    assign_roles(pool, config)
    caps = pool.model(MODEL).capabilities  # builds the model: a bad spec fails here
    needs = {ORIGINAL} | {
        s
        for spec in specs
        if _applies(spec, task, caps.logprobs)
        for s in spec.needs_for(task.format)
    }
    preflight(config, task, specs, needs, pool, reach=reach)
    return PreparedRun(task, specs, caps, needs)


def configured_task(config: RunConfig) -> Task:
    """The task ``config`` names: its ``task_file`` section when set, else ``task``."""
    if config.task_file is not None:
        return load_task_file(config.task_file)
    return load_task(config.task)


def preflight(
    config: RunConfig,
    task: Task,
    specs: list[MethodSpec],
    needs: set[str],
    pool: ModelPool,
    *,
    reach: bool = True,
) -> None:
    """Everything that can be checked before the first model call, so a mistake costs
    seconds, not a run: the task has items, every sample set has a planner, every kernel
    resolves, the prompt style exists for the task's answer format, and every model the
    run will use builds with its options and passes its own check (a served model's
    server answers; skipped when ``reach`` is False). Raises
    :class:`~credo.errors.UserError` naming what is wrong. With ``max_cost_usd``, a
    model without prices is named in a warning: its tokens count nothing toward it."""
    if not task.items:
        raise UserError(f"task {task.name!r} has no items (task / limit)")
    for name in needs:
        get_sample_set(name)
    kernels = {spec.kernel or config.kernel for spec in specs}
    for name in kernels:
        get_kernel(name)
    render_messages(task.items[0], task.format, config.prompt_style)
    corpus = config.perturbation.corpus
    if PERTURBED in needs and corpus is not None and not Path(corpus).is_file():
        raise UserError(f"{corpus}: no such corpus file (perturbation.corpus)")
    roles = run_roles(config, task, specs, needs)
    if reach:
        pool.preflight(roles)
    else:
        for role in roles:
            pool.model(role)  # builds it (its options checked); nothing is contacted
    if config.max_cost_usd is not None:
        _warn_unpriced(pool, roles)


def run_roles(
    config: RunConfig, task: Task, specs: list[MethodSpec], needs: set[str]
) -> list[str]:
    """The pool roles a run with these methods and sample sets uses, in stage order."""
    runners = {get_sample_set(n).runner for n in needs}
    kernels = {spec.kernel or config.kernel for spec in specs}
    roles = [MODEL]
    roles += [WRITER] if PERTURBED in needs and config.perturbation.corpus is None else []
    roles += [PARAPHRASER] if PARAPHRASED in needs else []
    roles += [JUDGE] if "judge" in runners or "judge" in kernels else []
    roles += [GRADER] if any(it.meta.get("grader") for it in task.items) else []
    return roles


def _warn_unpriced(pool: ModelPool, roles: list[str]) -> None:
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


WRITING_STAGE = "perturbation writing"
PARAPHRASE_STAGE = "paraphrase writing"
"""The ledger stages of the perturbation stage's writers (the sample sets' stages are
their names: ``original``, ``perturbed``, ``verbalized``...)."""

RUNNER_ROLES = {"model": MODEL, "judge": JUDGE}
"""The pool role that generates the sample sets of each planner ``runner``."""

_TOTALS = {
    "generated_samples": "generated_samples",
    "cached_samples": "cached_samples",
    "completion_tokens": "generated_tokens",
    "backend_calls": "backend_calls",
    "retries": "request_retries",
    "failed_requests": "request_failures",
}
"""Executor counters summed over the run (every model of the pool), and their names."""


def _neutrality(items: list[ItemResult], config: RunConfig) -> dict[str, Any]:
    """App. A.3's test on the run's own samples: Δ = #correct perturbed − #correct
    original per item, mean with a bootstrap CI (``perturbation.neutrality`` off: none)."""
    if config.perturbation.neutrality == "off":
        return {}
    rows = [(r.item.id, r.set_correct.get(ORIGINAL, ()), r.set_correct.get(PERTURBED, ()))
            for r in items]
    record = neutrality_record(rows, seed=config.seed)
    if record is not None and not record["neutral"]:
        log.info(
            "the prefixes are not neutral for this model: mean Δ = %+.2f of %d samples, 95%% CI"
            " [%+.2f, %+.2f] (000 App. A.3); C3 is confounded by them",
            record["mean_delta"], record["samples_per_set"], record["low"], record["high"],
        )
    return record or {}


def _applies(spec: MethodSpec, task: Task, logprobs: bool) -> bool:
    return spec.applies_to(task.format) and (logprobs or not spec.logprobs)


def _perturbations(
    task: Task,
    config: RunConfig,
    needs: set[str],
    pool: ModelPool,
    incomplete: dict[str, str],
    answers: dict[str, list[object]],
) -> tuple[dict[str, PerturbationSet], dict[str, ParaphraseSet], dict[str, Any]]:
    """The perturbation stage: context prefixes (000 §3; or corpus snippets, App. F, when
    ``perturbation.corpus`` is set) with the pairwise similarities of the kept ones
    (App. A.2), and paraphrases, as needed. Items whose writer requests failed go into
    ``incomplete``."""
    psets: dict[str, PerturbationSet] = {}
    paras: dict[str, ParaphraseSet] = {}
    similarity: dict[str, Any] = {}
    if PERTURBED in needs:
        embedder = pool.embedder(config.perturbation.embedder)
        if config.perturbation.corpus is not None:
            psets = corpus_perturbations(
                task.items, config.m, load_corpus(config.perturbation.corpus), embedder,
                config.perturbation, config.seed,
            )
        else:
            with pool.stage(WRITING_STAGE):
                psets = generate_perturbations(
                    task.items, config.m, task.domain, pool.executor(WRITER), embedder,
                    config.perturbation, answers,
                )
        groups = [p.kept for p in psets.values() if len(p.kept) >= 2]
        if groups:
            similarity = similarity_record(groups, embedder, config.perturbation.threshold)
    if PARAPHRASED in needs:
        with pool.stage(PARAPHRASE_STAGE):
            paras = generate_paraphrases(
                task.items, config.baselines.paraphrases, pool.executor(PARAPHRASER),
                config.baselines.paraphrase_sampling, config.baselines.paraphrase_candidates,
            )
    for name, made in ((PERTURBED, psets), (PARAPHRASED, paras)):
        if name in needs:
            for it in task.items:
                if it.id not in made:
                    incomplete.setdefault(it.id, f"{name} prompts missing (requests failed)")
    return psets, paras, similarity


def _without(task: Task, incomplete: dict[str, str]) -> Task:
    """The task without its incomplete items."""
    if not any(it.id in incomplete for it in task.items):
        return task
    kept = tuple(it for it in task.items if it.id not in incomplete)
    return Task(task.name, kept, task.format, task.domain)


def _drop_unperturbed(
    task: Task, psets: dict[str, PerturbationSet]
) -> tuple[Task, list[str]]:
    """The task without the items for which no perturbation candidate passed the rules."""
    dropped = [it.id for it in task.items if it.id in psets and not psets[it.id].kept]
    if not dropped:
        return task, dropped
    log.warning(
        "%d items dropped: no perturbation candidate passed the rules (%s)",
        len(dropped), ", ".join(dropped[:10]),
    )
    kept = tuple(it for it in task.items if it.id not in dropped)
    return Task(task.name, kept, task.format, task.domain), dropped


GeneratedOut = dict[str, dict[str, tuple[tuple[Sample, ...], tuple[bool | None, ...]]]]
"""Per item id, per sample set: the samples and each one's correctness."""


def _generate(
    task: Task,
    ctx: PlanContext,
    sets: set[str],
    runners: dict[str, Executor],
    incomplete: dict[str, str],
    out: GeneratedOut,
) -> None:
    """Generate the sample sets ``sets`` of every item into ``out``: phase 1, then the
    follow-ups of phase 2 (which read the original samples already in ``out``).

    All plans of one phase and one model go to the executor in one call. An item with a
    request that failed after the backend's retries goes into ``incomplete`` and gets no
    more requests; every other item is generated in full.
    """
    for phase in (1, 2):
        names = sorted(
            (n for n in sets if get_sample_set(n).phase == phase),
            key=lambda n: (n != ORIGINAL, n),
        )
        grouped: dict[str, list[tuple[Item, str, Any]]] = defaultdict(list)
        for name in names:
            spec = get_sample_set(name)
            for it in task.items:
                if it.id not in incomplete:
                    grouped[spec.runner].append((it, name, spec.planner(it, ctx)))
        for runner, entries in grouped.items():
            desc = "NLI judgments" if runner == "judge" else _PHASES[phase]
            _run_plans(runners[runner], entries, desc, out, incomplete)
        if phase == 1:
            ctx.originals = {
                it.id: out[it.id][ORIGINAL][0]
                for it in task.items
                if it.id not in incomplete and ORIGINAL in out[it.id]
            }


def _original_answers(out: GeneratedOut, task: Task) -> dict[str, list[object]]:
    """The answers of each item's original samples (what a strict prefix must not name)."""
    return {
        it.id: [s.answer.value for s in out[it.id][ORIGINAL][0]]
        for it in task.items
        if ORIGINAL in out[it.id]
    }


_PHASES = {1: "sampling answers", 2: "follow-up questions"}


def _run_plans(
    executor: Executor,
    entries: list[tuple[Item, str, Any]],
    description: str,
    out: dict[str, dict[str, tuple[tuple[Sample, ...], tuple[bool | None, ...]]]],
    incomplete: dict[str, str],
) -> None:
    """Execute the plans of ``entries`` in one call and build their sample sets; each
    request counts in the ledger under its sample set's name."""
    planned = [
        dataclasses.replace(r, stage=r.stage or name)
        for _, name, plan in entries
        for r in plan.requests
    ]
    try:
        gens: list[list[Generation] | None] = list(executor.execute(planned, description))
    except RequestsFailed as e:  # every other request is done; those items are incomplete
        gens = e.results
    k = 0
    for it, name, plan in entries:
        chunk = gens[k : k + len(plan.requests)]
        k += len(plan.requests)
        if any(g is None for g in chunk):
            incomplete.setdefault(it.id, f"{name} samples missing (requests failed)")
            continue
        samples = plan.build(chunk)
        out[it.id][name] = (samples, tuple(plan.correct(s) for s in samples))


def _answer_samples(task: Task, generated: GeneratedSets) -> list[ItemSamples]:
    """Per item, the sample sets whose samples answer the question (kernels, grading)."""
    return [
        ItemSamples(
            it.id,
            {n: generated[it.id][n][0] for n in ANSWER_SETS if n in generated[it.id]},
            task.format,
            len(it.choices),
        )
        for it in task.items
    ]


def build_kernels(
    config: RunConfig,
    specs: list[MethodSpec],
    task: Task,
    answers: list[ItemSamples],
    pool: ModelPool,
    stats: dict[str, int | float | str],
    incomplete: dict[str, str],
) -> dict[str, ItemKernels]:
    """Every kernel the selected methods name, built for this run (000 App. H)."""
    ctx = KernelContext(config, task, answers, pool, stats, incomplete)
    names = sorted({spec.kernel or config.kernel for spec in specs})
    return {name: build_kernel(name, ctx) for name in names}


def grade_items(
    config: RunConfig,
    task: Task,
    answers: list[ItemSamples],
    pool: ModelPool,
    stats: dict[str, int | float | str],
    incomplete: dict[str, str],
) -> dict[str, tuple[bool | float, ...]]:
    """The grading stage: correctness of every original sample (``config.grader``, or
    the judge, grades what needs a judge)."""
    settings = config.grader or config.judge
    ctx = GradingContext(
        task,
        judge=lambda: pool.executor(GRADER),
        params=SamplingParams(temperature=0.0, max_tokens=settings.max_tokens),
        stats=stats,
        incomplete=incomplete,
    )
    return grade_originals(ctx, {s.item_id: s.sets[ORIGINAL] for s in answers})

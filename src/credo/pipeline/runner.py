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
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from credo.config import RunConfig
from credo.generation.executor import ThreadUsage, usage_scope
from credo.generation.pool import GRADER, JUDGE, MODEL, WRITER, ModelPool
from credo.generation.roles import assign_roles as assign
from credo.generation.roles import run_roles as role_map
from credo.kernels.registry import ItemKernels, KernelContext, build_kernel
from credo.methods.base import MethodSpec
from credo.methods.scoring import GeneratedSets, ItemResult, score_items
from credo.perturb.context import (
    WRITING_STAGE,
    PerturbationSet,
    PrefixWriter,
)
from credo.perturb.corpus import corpus_perturbations, load_corpus
from credo.perturb.paraphrase import PARAPHRASE_STAGE, ParaphraseSet, ParaphraseStage
from credo.perturb.quality import similarity_record
from credo.pipeline.adaptive import adaptive_originals, adaptive_perturbed
from credo.pipeline.certificate import CertificateUse, task_settings
from credo.pipeline.checks import (
    check_lengths,
    check_static,
    method_specs,
    run_roles,
)
from credo.pipeline.checks import needs as needs_of
from credo.pipeline.claims import ClaimRun, run_claims
from credo.pipeline.ending import Outcome, decide_outcome, end_run
from credo.pipeline.fitted import fit_scores
from credo.pipeline.stages import SampleSetStage, StageDriver
from credo.plan.sample_sets import PlanContext, get_sample_set
from credo.plan.samples import ORIGINAL, PARAPHRASED, PERTURBED, ItemSamples, Sample
from credo.tasks.base import Task
from credo.tasks.builtin import load_task, load_task_file
from credo.tasks.grading import GradingContext, grade_originals
from credo.tasks.lm_eval import LM_EVAL, load_lm_eval
from credo.types import Capabilities, SamplingParams

log = logging.getLogger(__name__)

__all__ = [
    "ANSWER_SETS",
    "PARAPHRASE_STAGE",
    "WRITING_STAGE",
    "ItemResult",
    "PreparedRun",
    "RunResult",
    "assign_roles",
    "prepare_run",
    "run_pipeline",
    "run_roles",
    "task_sampling_line",
    "with_task_sampling",
]

ANSWER_SETS = (ORIGINAL, PERTURBED, PARAPHRASED)
"""Sample sets whose samples are answers to the question: what kernels compare."""


@dataclass
class RunResult:
    """The outcome of a run: per-item results, metrics per method, run statistics.

    ``metrics`` are item-level (score vs p̄, Wu et al., App. E.2) with bootstrap CIs as
    ``<metric>_low`` / ``<metric>_high``; ``response_metrics`` are Müller et al.'s response-level
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
    #: Pairwise cosine similarities of each item's kept prefixes (Wu et al., App. A.2), computed
    #: by the perturbation stage with its embedder; the run folder keeps them for the report.
    perturbation_similarity: dict[str, Any] = field(default_factory=dict)
    #: Items left out because some of their requests failed after the backend's retries
    #: (item id -> what is missing); a rerun generates only what is missing.
    incomplete: dict[str, str] = field(default_factory=dict)
    #: Where the generations came from when they were given, not sampled (``credo score``).
    source: str = ""
    #: Wu et al., App. A.3's neutrality test of the prefixes (mean Δ with its CI, ``neutral``);
    #: empty when it was not run (``perturbation.neutrality: off``, or no perturbed set).
    neutrality: dict[str, Any] = field(default_factory=dict)
    #: Requests, samples, reported tokens and cost per stage: the pool's ledger
    #: (:meth:`credo.generation.ledger.Ledger.to_dict`; a pool that ran several runs
    #: counts them all); ``metrics.json`` keeps it as ``stats.ledger``.
    ledger: dict[str, Any] = field(default_factory=dict)
    #: Coverage at risk α per method and α, and the degenerate methods' reasons
    #: (:mod:`credo.evaluate.coverage`); empty without known correctness.
    coverage: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    degenerate: dict[str, str] = field(default_factory=dict)
    #: The task the items come from as a certificate records it
    #: (:func:`credo.pipeline.certificate.task_settings`); ``metrics.json["task_identity"]``.
    task_identity: dict[str, str] = field(default_factory=dict)
    #: The claim stage of a long-form run with ``config.claims``
    #: (:class:`credo.pipeline.claims.ClaimRun`); None without it.
    claims: ClaimRun | None = None
    #: The certificate the run applied (``--certificate``): its id, rule and how many
    #: answers it accepted (:class:`credo.pipeline.certificate.CertificateUse`); None
    #: without one.
    certificate: CertificateUse | None = None
    #: Items the task holds before ``config.limit`` cut it (None: generations given, not
    #: sampled); the terminal's title says "20 of 1319 items" when the limit cut it.
    task_size: int | None = None
    #: The fitted scores' functions fitted on all labelled items, by method
    #: (:mod:`credo.pipeline.fitted`; :meth:`credo.evaluate.combine.FittedScore.to_dict`):
    #: what ``credo certify --method combined`` records; ``metrics.json["fitted"]``.
    fitted: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def stopped_by_budget(self) -> bool:
        """Whether the cost budget (``max_cost_usd``) left requests ungenerated."""
        return bool(self.ledger.get("stopped_by_budget"))

    @property
    def outcome(self) -> Outcome:
        """How the run ended (:func:`credo.pipeline.ending.decide_outcome`)."""
        return decide_outcome(self.incomplete, self.stopped_by_budget, self.neutrality,
                              self.config.perturbation.neutrality)

    @property
    def accuracy(self) -> float:
        """Mean of p̄ over items: the model's accuracy on the original prompts."""
        return float(np.mean([r.performance for r in self.items])) if self.items else math.nan


def assign_roles(pool: ModelPool, config: RunConfig) -> None:
    """The run's roles from its config (:func:`credo.generation.roles.run_roles`); roles
    already assigned (models handed in) stay."""
    assign(pool, role_map(config, model_handed_in=pool.handed_in(MODEL)))


def run_pipeline(
    config: RunConfig, pool: ModelPool, task: Task | None = None, *, reach: bool | None = None
) -> RunResult:
    """Run C3 and the selected baselines on a task and return the results.

    ``pool`` supplies every model and the cache (see :func:`assign_roles`); ``task``
    replaces the one ``config`` names. Writes nothing; nothing passed in is closed.
    ``reach`` False skips contacting the servers before the first call (default: the
    pool's ``reach``): the gateway checks them once when it starts, not before every
    question. The run's counts (``stats``) are its own calls', whatever other threads do
    with the same pool (:func:`~credo.generation.executor.usage_scope`).
    """
    with usage_scope() as own:
        return _run_pipeline(config, pool, task, reach, own)


def _run_pipeline(
    config: RunConfig, pool: ModelPool, task: Task | None, reach: bool | None,
    own: ThreadUsage,
) -> RunResult:
    """:func:`run_pipeline`, its executor calls counted in ``own``."""
    t0 = time.perf_counter()
    task = task or configured_task(config)
    config = with_task_sampling(config, task)
    prepared = prepare_run(config, pool, task, reach=pool.reach if reach is None else reach)
    task, specs, caps, needs = prepared.task, prepared.specs, prepared.capabilities, prepared.needs
    identity = task_settings(task, config)

    incomplete: dict[str, str] = {}  # item id -> why some of its requests are missing
    ctx = PlanContext(task, config, caps.logprobs, caps.grammar)
    driver = StageDriver(pool, incomplete)
    out: GeneratedOut = {it.id: {} for it in task.items}
    # the original answers first: a prefix must not name one (strict rules)
    if config.adaptive is not None:
        adaptive_originals(task, ctx, driver, out, config.adaptive)
    else:
        _generate(task, ctx, {ORIGINAL}, driver, out)
    task = _without(task, incomplete)
    t_p0 = time.perf_counter()
    psets, paras, similarity = _perturbations(
        task, config, needs, pool, incomplete, _original_answers(out, task),
        _Drawn(ctx, driver, out) if config.adaptive is not None else None,
    )
    t_p1 = time.perf_counter()
    task, dropped = _drop_unperturbed(_without(task, incomplete), psets)
    ctx.task, ctx.perturbations, ctx.paraphrases = task, psets, paras
    done = {ORIGINAL} | ({PERTURBED} if config.adaptive is not None else set())
    _generate(task, ctx, needs - done, driver, out)
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
        prefixes={it.id: tuple(psets[it.id].prefixes(_perturbed_size(generated[it.id], config)))
                  for it in task.items if it.id in psets},
        options=config.baselines.method_options(),
        show_progress=pool.show_progress,
    )
    items, fitted = fit_scores(items, config)
    claim_run = run_claims(config, task, items, driver) if config.claims is not None else None
    ledger = pool.ledger.to_dict()
    ending = end_run(items, config, incomplete=incomplete,
                     stopped_by_budget=bool(ledger.get("stopped_by_budget")),
                     test_neutrality=PERTURBED in needs)
    run_stats: dict[str, float | int | str] = {
        "items": len(items),
        "seconds_total": round(time.perf_counter() - t0, 2),
        "seconds_perturbations": round(t_p1 - t_p0, 2),
        "seconds_sampling": round(t_sample - t0 - (t_p1 - t_p0), 2),
        **{name: getattr(own.stats, f) for f, name in _TOTALS.items()},
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
    own = task_sampling_line(config, task)
    if own is not None:
        run_stats["sampling_from_task"] = own
    for name in sorted(needs - {ORIGINAL}):
        run_stats[f"samples_{name}"] = sum(len(r.sets.get(name, ())) for r in items)
    if config.adaptive is not None:
        run_stats["adaptive_rule"] = config.adaptive.rule
        run_stats["samples_original"] = sum(len(r.original) for r in items)
        run_stats["writer_candidates"] = sum(
            psets[r.item.id].candidates for r in items if r.item.id in psets)
    return RunResult(
        _recorded(config, task), task, pool.model(MODEL).identity, items, ending.metrics,
        run_stats, psets,
        ending.response_metrics, ending.unavailable, paras, similarity,
        incomplete, neutrality=ending.neutrality, ledger=ledger,
        coverage=ending.coverage, degenerate=ending.degenerate, task_identity=identity,
        claims=claim_run, task_size=prepared.task_size, fitted=fitted,
    )


@dataclass
class PreparedRun:
    """What a run settles before its first model call: the task (cut to ``limit``), the
    methods, the model's capabilities and the sample sets the methods need."""

    task: Task
    specs: list[MethodSpec]
    capabilities: Capabilities
    needs: set[str]
    task_size: int | None = None
    """Items of the task before ``limit`` cut it."""


def prepare_run(
    config: RunConfig,
    pool: ModelPool,
    task: Task | None = None,
    *,
    reach: bool = True,
    driver: StageDriver | None = None,
) -> PreparedRun:
    """Assign the run's roles and check everything that can be checked before the first
    model call, so a mistake costs seconds, not a run: what needs no model
    (:func:`check_static`), every prompt fits the model's context (:func:`check_lengths`),
    then every role the run asks (:func:`run_roles`) through the stage driver's preflight
    (:meth:`StageDriver.preflight`, every command's: built, weights present, servers
    answer; the unpriced models named under a budget). With ``reach`` False no server
    is contacted (the models are built, which loads nothing); ``driver`` is the driver
    whose preflight it is (a dry run's counts the probes)."""
    full = task or configured_task(config)
    task = full.head(config.limit)
    specs = method_specs(config.methods)
    check_static(config, task, specs)
    assign_roles(pool, config)
    # built, not probed: every role is checked before any server is contacted
    caps = pool.model(MODEL, probe=False).capabilities
    check_lengths(config, task, pool.model(MODEL, probe=False))
    (driver or StageDriver(pool)).preflight(
        run_roles(config, task, specs, needs_of(specs, task, caps)), reach=reach,
        max_cost_usd=config.max_cost_usd)
    caps = pool.model(MODEL).capabilities  # a served model's probe may have changed them
    return PreparedRun(task, specs, caps, needs_of(specs, task, caps), len(full.items))


def configured_task(config: RunConfig) -> Task:
    """The task ``config`` names: its ``task_file`` section when set, else ``task``."""
    if config.task_file is not None:
        return load_task_file(config.task_file)
    if config.task.startswith(f"{LM_EVAL}:"):
        opts = config.lm_eval
        return load_lm_eval(config.task, num_fewshot=opts.num_fewshot,
                            include_path=opts.include_path, revision=opts.revision)
    return load_task(config.task)


def with_task_sampling(config: RunConfig, task: Task) -> RunConfig:
    """``config`` with the sampling settings ``task``'s own tool sets
    (:attr:`Task.sampling <credo.tasks.base.Task.sampling>`: an lm-eval task's
    ``generation_kwargs``) in every field of ``config.sampling`` the user did not set
    (the file's ``sampling`` section, ``--max-tokens``); the run folder's config
    records the result, so a certificate binds what was sent."""
    own = task.sampling
    if own is None or not own.settings:
        return config
    given = config.sampling.model_fields_set if "sampling" in config.model_fields_set \
        else set()
    taken = {k: v for k, v in own.settings.items() if k not in given}
    if not taken:
        return config
    return config.model_copy(update={"sampling": config.sampling.model_copy(update=taken)})


def task_sampling_line(config: RunConfig, task: Task) -> str | None:
    """One line saying which of ``task``'s own sampling settings the run
    (``config``, after :func:`with_task_sampling`) sends and which it does not take and
    why; None for a task that sets none."""
    own = task.sampling
    if own is None:
        return None
    sent = config.sampling
    used = [f"{k} {_shown(getattr(sent, k))}" for k, v in own.settings.items()
            if getattr(sent, k) == v]
    kept = [f"{k} {_shown(getattr(sent, k))} (yours)" for k, v in own.settings.items()
            if getattr(sent, k) != v]
    parts = [f"sampling from {own.source}: {', '.join(used) if used else 'none taken'}"]
    if kept:
        parts.append("set by you: " + ", ".join(kept))
    parts += [f"not its {k}: {why}" for k, why in own.not_taken.items()]
    return "; ".join(parts)


def _shown(value: Any) -> str:
    return repr(list(value)) if isinstance(value, tuple) else f"{value}"


def _recorded(config: RunConfig, task: Task) -> RunConfig:
    """``config`` with the dataset revision of an lm-eval task (the run's
    config names the data its items came from)."""
    revision = task.items[0].meta.get("lm_eval_revision") if task.items else None
    if not revision or config.lm_eval.revision == revision:
        return config
    section = config.lm_eval.model_copy(update={"revision": revision})
    return config.model_copy(update={"lm_eval": section})


# The ledger stages of the perturbation stage's writers are WRITING_STAGE and
# PARAPHRASE_STAGE (their planners name them); the sample sets' stages are their names.

_TOTALS = {
    "generated_samples": "generated_samples",
    "cached_samples": "cached_samples",
    "completion_tokens": "generated_tokens",
    "backend_calls": "backend_calls",
    "retries": "request_retries",
    "failed_requests": "request_failures",
    "unverified_empty": "unverified_empty_samples",
}
"""Executor counters summed over the run (every model of the pool), and their names."""


@dataclass
class _Drawn:
    """What the adaptive perturbed stage draws into: the plan context, the stage driver
    and the runner's generated sets."""

    ctx: PlanContext
    driver: StageDriver
    out: GeneratedOut


def _perturbed_size(sets: dict[str, Any], config: RunConfig) -> int:
    """The perturbed samples an item holds: m, or fewer in an adaptive run."""
    return len(sets[PERTURBED][0]) if PERTURBED in sets else config.m


def _prefix_sets(
    task: Task,
    config: RunConfig,
    pool: ModelPool,
    incomplete: dict[str, str],
    answers: dict[str, list[object]],
    adaptive: _Drawn | None,
) -> dict[str, PerturbationSet]:
    """The context prefixes (Wu et al., §3; or corpus snippets, App. F, when
    ``perturbation.corpus`` is set); in an adaptive run, with the perturbed samples drawn
    round by round (:func:`credo.pipeline.adaptive.adaptive_perturbed`)."""
    embedder = pool.embedder(config.perturbation.embedder)
    if config.perturbation.corpus is not None:
        psets = corpus_perturbations(
            task.items, config.m, load_corpus(config.perturbation.corpus), embedder,
            config.perturbation, config.seed,
        )
        if adaptive is None:
            return psets
        prefixes: Callable[[Any], dict[str, PerturbationSet]] = partial(_given, psets)
    else:
        writer = PrefixWriter(task.items, config.m, task.domain, pool.executor(WRITER),
                              embedder, config.perturbation, answers,
                              StageDriver(pool, incomplete) if adaptive is None
                              else adaptive.driver)
        if adaptive is None:
            return writer.full()
        prefixes = writer.ensure
    assert config.adaptive is not None
    return adaptive_perturbed(task, adaptive.ctx, prefixes, adaptive.driver, adaptive.out,
                              config.adaptive)


def _given(psets: dict[str, PerturbationSet], targets: Any) -> dict[str, PerturbationSet]:
    """The prefix sets of ``targets``' items among ``psets`` (fixed corpus snippets)."""
    return {i: psets[i] for i in targets if i in psets}


def _perturbations(
    task: Task,
    config: RunConfig,
    needs: set[str],
    pool: ModelPool,
    incomplete: dict[str, str],
    answers: dict[str, list[object]],
    adaptive: _Drawn | None = None,
) -> tuple[dict[str, PerturbationSet], dict[str, ParaphraseSet], dict[str, Any]]:
    """The perturbation stage: context prefixes (:func:`_prefix_sets`) with the pairwise
    similarities of the kept ones (App. A.2), and paraphrases, as needed. Items whose
    writer requests failed go into ``incomplete``."""
    psets: dict[str, PerturbationSet] = {}
    paras: dict[str, ParaphraseSet] = {}
    similarity: dict[str, Any] = {}
    if PERTURBED in needs:
        embedder = pool.embedder(config.perturbation.embedder)
        psets = _prefix_sets(task, config, pool, incomplete, answers, adaptive)
        groups = [p.kept for p in psets.values() if len(p.kept) >= 2]
        if groups:
            similarity = similarity_record(groups, embedder, config.perturbation.threshold)
    if PARAPHRASED in needs:
        stage = ParaphraseStage(config.baselines.paraphrases,
                                config.baselines.paraphrase_sampling,
                                config.baselines.paraphrase_candidates)
        (paras,) = StageDriver(pool, incomplete).run([stage], list(task.items))
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
    return dataclasses.replace(task, items=kept)


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
    return dataclasses.replace(task, items=kept), dropped


GeneratedOut = dict[str, dict[str, tuple[tuple[Sample, ...], tuple[bool | None, ...]]]]
"""Per item id, per sample set: the samples and each one's correctness."""


def _generate(
    task: Task,
    ctx: PlanContext,
    sets: set[str],
    driver: StageDriver,
    out: GeneratedOut,
) -> None:
    """Generate the sample sets ``sets`` of every item into ``out`` through the stage
    driver (:class:`~credo.pipeline.stages.StageDriver`): phase 1, then the follow-ups
    of phase 2 (which read the original samples already in ``out``).

    All plans of one phase and one model go to the executor in one call. An item with a
    request that failed after the backend's retries goes into the driver's
    ``incomplete`` and gets no more requests; every other item is generated in full.
    """
    for phase in (1, 2):
        names = sorted(
            (n for n in sets if get_sample_set(n).phase == phase),
            key=lambda n: (n != ORIGINAL, n),
        )
        grouped: dict[str, list[SampleSetStage]] = defaultdict(list)
        for name in names:
            grouped[get_sample_set(name).runner].append(SampleSetStage(name, out))
        for runner, stages in grouped.items():
            desc = "NLI judgments" if runner == "judge" else _PHASES[phase]
            items = [it for it in task.items if it.id not in driver.incomplete]
            driver.run(stages, items, ctx, desc)
        if phase == 1:
            ctx.originals = {
                it.id: out[it.id][ORIGINAL][0]
                for it in task.items
                if it.id not in driver.incomplete and ORIGINAL in out[it.id]
            }


def _original_answers(out: GeneratedOut, task: Task) -> dict[str, list[object]]:
    """The answers of each item's original samples (what a strict prefix must not name)."""
    return {
        it.id: [s.answer.value for s in out[it.id][ORIGINAL][0]]
        for it in task.items
        if ORIGINAL in out[it.id]
    }


_PHASES = {1: "sampling answers", 2: "follow-up questions"}


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
    """Every kernel the selected methods name, built for this run (Wu et al., App. H). A kernel
    gets what it needs (the judge role's executor, built on first use; the embedder),
    not the config or the pool."""
    ctx = KernelContext(
        task, answers,
        judge=lambda: pool.executor(JUDGE),
        judge_max_tokens=config.judge.max_tokens,
        embedder=lambda: pool.embedder(config.embedder),
        embedding_cache=config.cache_path.with_name("embeddings.sqlite"),
        stats=stats, incomplete=incomplete,
        runner=StageDriver(pool, incomplete),  # the judge kernel's pairs are a stage
    )
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
    the judge, grades what needs a judge). An item without a gold answer (a question a
    user wants answered) is not graded: its correctness is unknown (NaN), and
    the evaluation leaves it out."""
    # no gold and no grader of its own (FActScore grades against a knowledge source)
    unknown = {it.id for it in task.items if not it.gold and not it.meta.get("grader")}
    out: dict[str, tuple[bool | float, ...]] = {
        s.item_id: tuple(math.nan for _ in s.sets[ORIGINAL])
        for s in answers if s.item_id in unknown
    }
    if len(unknown) == len(task.items):
        return out
    task = dataclasses.replace(task, items=tuple(it for it in task.items if it.id not in unknown))
    answers = [s for s in answers if s.item_id not in unknown]
    settings = config.grader or config.judge
    ctx = GradingContext(
        task,
        judge=lambda: pool.executor(GRADER),
        params=SamplingParams(temperature=0.0, max_tokens=settings.max_tokens),
        stats=stats,
        incomplete=incomplete,
        runner=StageDriver(pool, incomplete),  # FActScore's claim checks are a stage
    )
    return out | grade_originals(ctx, {s.item_id: s.sets[ORIGINAL] for s in answers})

"""``run(config)``: the pipeline end to end, stage by stage.

task -> prompts -> perturbations (context prefixes, paraphrases) -> generation plan
(cached) -> answers -> scores -> evaluation -> report. Only two stages call a model:
perturbation generation and the executor of the generation plan (follow-up questions and
CCP's NLI judgments are generations too, planned in a second phase). Scores are pure
functions of the cached samples; the evaluation joins them with correctness, which never
feeds a score.
"""

from __future__ import annotations

import logging
import math
import time
import warnings
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from credo.config import RunConfig
from credo.evaluate.bootstrap import bootstrap_ci, calibration_correlation, polarisation_entropy
from credo.evaluate.metrics import (
    auprc_neg,
    auprc_pos,
    auroc,
    ece,
    ece_discrete,
    labels_from_performance,
)
from credo.generation.executor import Executor
from credo.generation.store import GenerationStore
from credo.methods.base import (
    NLI,
    ORIGINAL,
    PARAPHRASED,
    PERTURBED,
    ItemSamples,
    MethodSpec,
    Sample,
    Score,
    get_method,
)
from credo.models.base import Model
from credo.models.embedders import Embedder, load_embedder
from credo.perturb.context import PerturbationSet, generate_perturbations
from credo.perturb.paraphrase import ParaphraseSet, generate_paraphrases
from credo.pipeline.open_ended import ScoringSupport, prepare_scoring
from credo.plan.sample_sets import PlanContext, get_sample_set
from credo.tasks.base import Item, Task
from credo.tasks.builtin import load_task

log = logging.getLogger(__name__)

ANSWER_SETS = (ORIGINAL, PERTURBED, PARAPHRASED)
"""Sample sets whose samples are answers to the question: what kernels compare."""

METRICS = ("ece", "auroc", "auprc_pos", "auprc_neg")
#: Metrics that get bootstrap CIs at the response level (002 §3.7 reports ECE and AUROC).
RESPONSE_CI_METRICS = ("ece", "auroc")


@dataclass(frozen=True)
class ItemResult:
    """Everything a run knows about one item.

    ``sets`` holds every generated sample set by name and ``set_correct`` the
    correctness of each of their samples (None where a sample has no answer of its own);
    ``method_scores`` each method's full :class:`Score` and ``scores`` its item value.
    """

    item: Item
    perturbations: tuple[str, ...]
    original: tuple[Sample, ...]
    perturbed: tuple[Sample, ...]
    correct: tuple[bool, ...]
    scores: dict[str, float]
    sets: dict[str, tuple[Sample, ...]] = field(default_factory=dict)
    set_correct: dict[str, tuple[bool | None, ...]] = field(default_factory=dict)
    method_scores: dict[str, Score] = field(default_factory=dict)

    @property
    def performance(self) -> float:
        """p̄: mean correctness over the n original samples (000 App. E.2)."""
        return float(np.mean(self.correct)) if self.correct else math.nan


@dataclass
class RunResult:
    """The outcome of :func:`run`: per-item results, metrics per method, run statistics.

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

    @property
    def accuracy(self) -> float:
        """Mean of p̄ over items: the model's accuracy on the original prompts."""
        return float(np.mean([r.performance for r in self.items])) if self.items else math.nan


def run(
    config: RunConfig,
    *,
    model: Model | None = None,
    perturber: Model | None = None,
    embedder: Embedder | None = None,
    task: Task | None = None,
    judge: Model | None = None,
    show_progress: bool = True,
    write: bool = True,
) -> RunResult:
    """Run C3 and the selected baselines on a task, write the report, return the results.

    ``model``, ``perturber`` (writes context prefixes and paraphrases), ``judge`` (the
    LLM judge: CCP's NLI step, the judge kernel, open-ended grading), ``embedder`` and
    ``task`` replace what ``config`` names (tests pass scripted models); nothing passed
    in is modified or closed.
    """
    t0 = time.perf_counter()
    task = (task or load_task(config.task)).head(config.limit)
    specs = [get_method(name) for name in config.methods]

    owned: list[Model] = []
    if model is None:
        model = _load_model(config.model, config.model_options)
        owned.append(model)
    caps = model.capabilities
    needs = {ORIGINAL} | {
        s
        for spec in specs
        if _applies(spec, task, caps.logprobs)
        for s in spec.needs_for(task.format)
    }
    for name in needs:
        get_sample_set(name)  # unknown sets fail before any generation
    store = GenerationStore(config.cache_path)
    try:
        executor = Executor(model, store, config.seed, config.max_block, show_progress)
        executors = [executor]

        def side_executor(
            given: Model | None, name: str | None, options: dict | None = None
        ) -> Executor:
            if given is None:
                if name is None or name == config.model:
                    given = model
                else:
                    given = _load_model(name, options or {})
                    owned.append(given)
            if given is model:
                return executor
            ex = Executor(given, store, config.seed, config.max_block, show_progress)
            executors.append(ex)
            return ex

        psets: dict[str, PerturbationSet] = {}
        paras: dict[str, ParaphraseSet] = {}
        if PERTURBED in needs or PARAPHRASED in needs:
            pexec = side_executor(perturber, config.perturbation.generator)
            if PERTURBED in needs:
                psets = generate_perturbations(
                    task.items,
                    config.m,
                    task.domain,
                    pexec,
                    embedder or load_embedder(config.perturbation.embedder),
                    config.perturbation,
                )
            if PARAPHRASED in needs:
                gen = config.baselines.paraphrase_generator
                qexec = pexec if gen is None else side_executor(None, gen)
                paras = generate_paraphrases(
                    task.items,
                    config.baselines.paraphrases,
                    qexec,
                    config.baselines.paraphrase_sampling,
                    config.baselines.paraphrase_candidates,
                )
        t_perturb = time.perf_counter()
        dropped = [it.id for it in task.items if it.id in psets and not psets[it.id].kept]
        if dropped:
            log.warning(
                "%d items dropped: no perturbation candidate passed the rules (%s)",
                len(dropped),
                ", ".join(dropped[:10]),
            )
            task = Task(
                task.name,
                tuple(it for it in task.items if it.id not in dropped),
                task.format,
                task.domain,
            )
        runners = {"model": executor}
        if NLI in needs:
            runners["judge"] = side_executor(judge, config.judge.model, config.judge.model_options)
        ctx = PlanContext(task, config, caps.logprobs, caps.grammar, psets, paras)
        generated = _generate(task, ctx, needs, runners)
        # Hook (issue 4): kernels that need preparing (embedding, judge) and the grading
        # stage (sandboxed code tests, SimpleQA / FActScore judges), before scoring.
        support = prepare_scoring(
            task,
            config,
            _answer_samples(task, generated),
            executor,
            embedder=embedder,
            judge_model=judge,
        )
        t_sample = time.perf_counter()
        items = _score(task, config, generated, specs, caps.logprobs, psets, support)
        metrics = evaluate_items(
            items, config.methods, config.ece_bins, config.bootstrap, config.seed
        )
        response_metrics = evaluate_responses(
            items, config.methods, config.ece_bins, config.bootstrap, config.seed
        )
        unavailable = _unavailable(items, config.methods)
        stats: dict[str, float | int | str] = {
            "items": len(items),
            "seconds_total": round(time.perf_counter() - t0, 2),
            "seconds_perturbations": round(t_perturb - t0, 2),
            "seconds_sampling": round(t_sample - t_perturb, 2),
            "generated_samples": _total(executors, "generated_samples"),
            "cached_samples": _total(executors, "cached_samples"),
            "generated_tokens": _total(executors, "completion_tokens"),
            "backend_calls": _total(executors, "backend_calls"),
            "unparsable_answers": sum(
                1 for r in items for s in (*r.original, *r.perturbed) if not s.answer.parsed
            ),
            "items_dropped_without_perturbations": len(dropped),
            "items_with_reused_perturbations": sum(
                1 for p in psets.values() if len(p.kept) < config.m
            ),
            **support.stats,
        }
        for name in sorted(needs - {ORIGINAL}):
            stats[f"samples_{name}"] = sum(len(r.sets.get(name, ())) for r in items)
        result = RunResult(
            config,
            task,
            model.identity,
            items,
            metrics,
            stats,
            psets,
            response_metrics,
            unavailable,
            paras,
        )
    finally:
        store.close()
        for m in owned:
            m.close()
    if write:
        from credo.report.writer import write_run

        write_run(result, config.out)
    return result


def _applies(spec: MethodSpec, task: Task, logprobs: bool) -> bool:
    return spec.applies_to(task.format) and (logprobs or not spec.logprobs)


def _generate(
    task: Task, ctx: PlanContext, needs: set[str], runners: dict[str, Executor]
) -> dict[str, dict[str, tuple[tuple[Sample, ...], tuple[bool | None, ...]]]]:
    """Generate every needed sample set: phase 1, then the follow-ups of phase 2.

    All plans of one phase and one model go to the executor in one call.
    """
    out: dict[str, dict[str, tuple[tuple[Sample, ...], tuple[bool | None, ...]]]] = {
        it.id: {} for it in task.items
    }
    labels = {1: "sampling answers", 2: "follow-up questions"}
    for phase in (1, 2):
        names = sorted(
            (n for n in needs if get_sample_set(n).phase == phase),
            key=lambda n: (n != ORIGINAL, n),
        )
        grouped: dict[str, list[tuple[Item, str, Any]]] = defaultdict(list)
        for name in names:
            spec = get_sample_set(name)
            for it in task.items:
                grouped[spec.runner].append((it, name, spec.planner(it, ctx)))
        for runner, entries in grouped.items():
            planned = [r for _, _, plan in entries for r in plan.requests]
            desc = "NLI judgments" if runner == "judge" else labels[phase]
            gens = runners[runner].execute(planned, description=desc)
            k = 0
            for it, name, plan in entries:
                chunk = gens[k : k + len(plan.requests)]
                k += len(plan.requests)
                samples = plan.build(chunk)
                out[it.id][name] = (samples, tuple(plan.correct(s) for s in samples))
        if phase == 1:
            ctx.originals = {i: sets[ORIGINAL][0] for i, sets in out.items()}
    return out


def _score(
    task: Task,
    config: RunConfig,
    generated: dict[str, dict[str, tuple[tuple[Sample, ...], tuple[bool | None, ...]]]],
    specs: list[MethodSpec],
    logprobs: bool,
    psets: dict[str, PerturbationSet],
    support: ScoringSupport,
) -> list[ItemResult]:
    options = {
        "followups": config.baselines.followups,
        "ccp_min_prob": config.baselines.ccp_min_prob,
    }
    results = []
    for it in task.items:
        sets = {name: samples for name, (samples, _) in generated[it.id].items()}
        correct = {name: c for name, (_, c) in generated[it.id].items()}
        # correctness of the original samples from the grading stage (issue 4); NaN
        # (unavailable, e.g. FActScore without a knowledge source) is None per sample
        graded = support.correctness[it.id]
        correct[ORIGINAL] = tuple(None if _nan(c) else c for c in graded)
        samples = ItemSamples(it.id, sets, task.format, len(it.choices), options)
        scores: dict[str, Score] = {}
        for spec in specs:
            if not spec.applies_to(task.format):
                allowed = ", ".join(f.value for f in spec.formats or ())
                scores[spec.name] = Score.not_available(f"defined for {allowed} tasks only")
            elif spec.logprobs and not logprobs:
                scores[spec.name] = Score.not_available(
                    "not available on this backend: it returns no token logprobs"
                )
            else:
                kernel = support.kernel(spec.kernel or config.kernel, it.id)
                scores[spec.name] = spec.score(samples, kernel)
        prefixes = tuple(psets[it.id].prefixes(config.m)) if PERTURBED in sets else ()
        results.append(
            ItemResult(
                it,
                prefixes,
                sets[ORIGINAL],
                sets.get(PERTURBED, ()),
                graded,
                {k: v.value for k, v in scores.items()},
                sets,
                correct,
                scores,
            )
        )
    return results


def evaluate_items(
    items: list[ItemResult],
    methods: list[str],
    n_bins: int = 10,
    n_resamples: int = 0,
    seed: int = 0,
) -> dict[str, dict[str, float]]:
    """Item-level evaluation per method (000 App. E.2): score vs p̄ and vs 1[p̄ ≥ 0.5].

    ECE, AUROC, AUPRC-P, AUPRC-N, mean score, Pearson calibration correlation and the
    polarisation entropy (002 Fig. 4, §4), over the items the method scored
    (``n_items``); with ``n_resamples`` > 0 also 95% bootstrap CIs as ``<metric>_low``
    and ``<metric>_high`` (002 §3.7). Extras a method reports (e.g. label mass) are
    averaged.
    """
    out: dict[str, dict[str, float]] = {}
    # A metric undefined on one class is NaN and shown as n/a in the report; no warning.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for name in methods:
            # items without a score, or whose correctness is unavailable (NaN p̄), are out
            rows = [
                r for r in items if not math.isnan(r.scores[name]) and not math.isnan(r.performance)
            ]
            s = np.array([r.scores[name] for r in rows], dtype=float)
            perf = np.array([r.performance for r in rows], dtype=float)
            labels = labels_from_performance(perf) if rows else np.zeros(0, dtype=int)
            d = _metrics(s, perf, labels, n_bins, None)
            d["n_items"] = len(rows)
            if n_resamples and len(rows) >= 2:
                for metric in METRICS:
                    target = perf if metric == "ece" else labels
                    lo, hi = bootstrap_ci(metric, s, target, n_resamples, seed=seed)
                    d[f"{metric}_low"], d[f"{metric}_high"] = lo, hi
            extras: dict[str, list[float]] = defaultdict(list)
            for r in rows:
                for k, v in r.method_scores[name].extras.items():
                    extras[k].append(v)
            d.update({k: float(np.mean(v)) for k, v in extras.items()})
            out[name] = d
    return out


def evaluate_responses(
    items: list[ItemResult],
    methods: list[str],
    n_bins: int = 10,
    n_resamples: int = 0,
    seed: int = 0,
) -> dict[str, dict[str, float]]:
    """Response-level evaluation (002 §3.5–3.7): each generation's confidence against
    that generation's own correctness, for methods that score generations.

    Discrete-valued scores (Answer Consistency) use one ECE bin per value (002 App.
    A.11.3). Bootstrap CIs resample responses.
    """
    out: dict[str, dict[str, float]] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for name in methods:
            conf: list[float] = []
            corr: list[float] = []
            levels = None
            for r in items:
                sc = r.method_scores[name]
                if not sc.responses:
                    continue
                levels = levels or sc.levels
                for value, ok in zip(sc.responses, r.set_correct.get(sc.of, ()), strict=False):
                    if value is not None and ok is not None:
                        conf.append(value)
                        corr.append(float(ok))
            if not conf:
                continue
            s, c = np.array(conf), np.array(corr)
            d = _metrics(s, c, c.astype(int), n_bins, levels)
            d["n_responses"] = len(conf)
            d["accuracy"] = float(c.mean())
            if n_resamples and len(conf) >= 2:
                for metric in RESPONSE_CI_METRICS:
                    fn = _discrete_ece(levels) if metric == "ece" and levels else metric
                    lo, hi = bootstrap_ci(fn, s, c, n_resamples, seed=seed)
                    d[f"{metric}_low"], d[f"{metric}_high"] = lo, hi
            out[name] = d
    return out


def _metrics(
    s: np.ndarray, target: np.ndarray, labels: np.ndarray, n_bins: int, levels: Any
) -> dict[str, float]:
    if s.size == 0:
        return {k: math.nan for k in (*METRICS, "mean_score", "pearson", "polarisation")}
    return {
        "ece": ece_discrete(s, target, levels) if levels else ece(s, target, n_bins),
        "auroc": auroc(s, labels),
        "auprc_pos": auprc_pos(s, labels),
        "auprc_neg": auprc_neg(s, labels),
        "mean_score": float(s.mean()),
        "pearson": calibration_correlation(s, target, n_bins, levels),
        "polarisation": polarisation_entropy(s, n_bins, levels),
    }


def _discrete_ece(levels: tuple[float, ...]):
    def metric(s: np.ndarray, c: np.ndarray) -> float:
        return ece_discrete(s, c, levels)

    return metric


def _unavailable(items: list[ItemResult], methods: list[str]) -> dict[str, str]:
    """Per method, why items have no score: the reasons and how many items each."""
    out = {}
    for name in methods:
        reasons: dict[str, int] = defaultdict(int)
        for r in items:
            sc = r.method_scores[name]
            if math.isnan(sc.value):
                reasons[sc.unavailable or "no score"] += 1
        if reasons:
            out[name] = "; ".join(
                f"{why} ({k} of {len(items)} items)" for why, k in reasons.items()
            )
    return out


def _total(executors: list[Executor], field: str) -> int:
    """Sum of one :class:`ExecutionStats` field over every call of every executor."""
    return sum(getattr(h, field) for ex in executors for h in ex.history)


def _load_model(spec: str, options: dict) -> Model:
    from credo.models.registry import load_model

    return load_model(spec, **options)


def _answer_samples(
    task: Task,
    generated: dict[str, dict[str, tuple[tuple[Sample, ...], tuple[bool | None, ...]]]],
) -> list[ItemSamples]:
    """Per item, the sample sets whose samples answer the question (for kernels, grading)."""
    return [
        ItemSamples(
            it.id,
            {n: generated[it.id][n][0] for n in ANSWER_SETS if n in generated[it.id]},
            task.format,
            len(it.choices),
        )
        for it in task.items
    ]


def _nan(x: object) -> bool:
    return isinstance(x, float) and math.isnan(x)

"""``score_generations``: the pipeline entered at the scoring stage with generations a user
already has (design.md: ``credo score`` enters the pipeline at Scores).

The given samples become the same :class:`~credo.plan.samples.Sample` sets a run
generates; kernels build as in a run (the embedding kernel loads only its embedder, the
judge kernel asks the pool's judge), correctness is the given one (or, for items whose
samples carry none, the grading stage's from the item's gold answer), and the scoring and
evaluation stages are the run's. No model is called for methods that read only samples.
A method whose sample sets the input lacks is reported as not available, not guessed.

Scores the file gives (``scores`` per sample, ``item_scores`` per item) are methods
``given:<name>`` (:mod:`credo.methods.given`), scored and evaluated beside credo's own:
:func:`given_methods` names them, :func:`check_given` refuses one with a missing value
(credo imputes nothing), and the report says where each came from (``given_scores``).
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from credo.config import RunConfig
from credo.errors import UserError
from credo.generation.pool import GRADER, JUDGE, ModelPool
from credo.generation.roles import assign_roles, score_roles
from credo.importers import Generations, GivenSample
from credo.methods import METHODS
from credo.methods.given import GIVEN, given_score_name, is_given
from credo.methods.scoring import score_items
from credo.pipeline.certificate import given_task_settings
from credo.pipeline.checks import method_specs
from credo.pipeline.ending import end_run
from credo.pipeline.fitted import fit_scores
from credo.pipeline.runner import ANSWER_SETS, RunResult, build_kernels, grade_items
from credo.pipeline.stages import StageDriver
from credo.plan.samples import ORIGINAL, PERTURBED, ItemSamples, Sample
from credo.tasks.answers import Answer, answer_rule, canonical_answer
from credo.tasks.base import AnswerFormat, Item, Task

__all__ = [
    "FIRST_METHODS",
    "check_given",
    "check_sample_sets",
    "default_methods",
    "given_answer",
    "given_config",
    "given_incomplete",
    "given_incomplete_line",
    "given_methods",
    "given_sources",
    "identical_repeats_line",
    "score_generations",
]


def score_generations(
    config: RunConfig,
    generations: Generations,
    pool: ModelPool,
    fmt: AnswerFormat,
    *,
    recompute: bool = False,
) -> RunResult:
    """Score ``generations`` with ``config.methods`` under ``config.kernel``; writes nothing.

    ``fmt`` is the answers' format (which methods apply, how a gold answer grades);
    ``recompute``: the given correctness is set aside and every answer graded against its
    item's gold answer (``--recompute-correctness``).
    """
    t0 = time.perf_counter()
    check_sample_sets(generations)
    task = _task(generations, fmt)
    check_given(generations, config.methods)
    assign_roles(pool, score_roles(config))  # no model under test: judges only
    specs = method_specs(config.methods)
    StageDriver(pool).preflight(_roles(pool, config, specs))
    by_item: dict[str, dict[str, list[GivenSample]]] = defaultdict(lambda: defaultdict(list))
    for s in generations.samples:
        by_item[s.item][s.set].append(s if not recompute else replace(s, correct=None))
    _check_originals(generations.source, [it.id for it in task.items], by_item)
    as_given = bool(generations.compared)
    generated = {
        it.id: {name: _set(it, rows, fmt, as_given) for name, rows in by_item[it.id].items()}
        for it in task.items
    }
    answers = [
        ItemSamples(it.id, {n: s for n, (s, _) in generated[it.id].items()
                            if n in ANSWER_SETS},
                    fmt, len(it.choices))
        for it in task.items
    ]
    stats: dict[str, int | float | str] = {}
    incomplete = given_incomplete(generations)
    kernels = build_kernels(config, specs, task, answers, pool, stats, incomplete)
    graded = _given_or_graded(config, task, generated, answers, pool, stats, incomplete)
    present = {name for sets in by_item.values() for name in sets}
    logprobs = any(s.logprobs for s in generations.samples)
    items = score_items(
        task, generated, graded, specs, kernels,
        default_kernel=config.kernel, logprobs=logprobs,
        prefixes={i: tuple(s.prefix or "" for s in sets.get(PERTURBED, ()))
                  for i, sets in by_item.items()},
        options=config.baselines.method_options(),
        available_sets=present,
        item_scores={it.id: it.scores for it in generations.items if it.scores},
        show_progress=pool.show_progress,
    )
    items, fitted = fit_scores(items, config)
    ledger = pool.ledger.to_dict()
    # the given prefixes are not tested for neutrality
    ending = end_run(items, config, incomplete=incomplete,
                     stopped_by_budget=bool(ledger.get("stopped_by_budget")),
                     test_neutrality=False)
    run_stats: dict[str, int | float | str] = {
        "items": len(items),
        "seconds_total": round(time.perf_counter() - t0, 2),
        "given_samples": len(generations.samples),
        "given_layout": generations.layout,
        **given_stats(generations, stats, recompute, fmt),
        **({"given_scores": given_sources(generations, config.methods)}
           if any(is_given(m) for m in config.methods) else {}),
        **({"given_fields_not_read": _not_read(generations)} if generations.not_read else {}),
        "unparsable_answers": sum(
            1 for r in items for s in (*r.original, *r.perturbed) if not s.answer.parsed
        ),
        **stats,
    }
    return RunResult(
        config, task, f"given:{generations.layout}:{generations.source}", items,
        ending.metrics, run_stats, {}, ending.response_metrics, ending.unavailable,
        incomplete=incomplete, source=generations.source, ledger=ledger,
        coverage=ending.coverage, degenerate=ending.degenerate,
        task_identity=given_task_settings(generations, fmt, recompute), fitted=fitted,
    )


def given_methods(generations: Generations, names: Sequence[str] | None = None) -> list[str]:
    """The methods ``given:<name>`` of the scores the file gives: every one (``names``
    None, the default of ``credo score``), or those ``names`` (``--given``); a name the
    file does not give is a :class:`UserError` listing those it does."""
    known = list(generations.score_fields)
    if names is None:
        return [f"{GIVEN}{n}" for n in known]
    chosen = [n.removeprefix(GIVEN) for n in names]
    missing = [n for n in chosen if n not in known]
    if missing:
        gives = (f"it gives {', '.join(known)}" if known else
                 "it gives none: put them under 'scores': {name: value} (per sample) or "
                 "'item_scores' (per item)")
        raise UserError(f"--given {','.join(missing)}: {generations.source} gives no score "
                        f"{missing[0]!r}; {gives}")
    return [f"{GIVEN}{n}" for n in chosen]


def check_given(generations: Generations, methods: Sequence[str]) -> None:
    """Refuse, before anything is scored, a given score of ``methods`` that the file does
    not give or gives with a missing value: one given per sample must be on every
    original sample, one given per item on every item (null is missing). credo imputes
    nothing (a missing confidence is not 0.5, and not the mean of the others): drop the
    rows or give the value. The message names the first row that lacks it."""
    wanted = [given_score_name(m) for m in methods if is_given(m)]
    if not wanted:
        return
    given_methods(generations, wanted)
    originals = [s for s in generations.samples if s.set == ORIGINAL]
    for name in wanted:
        if any(name in s.scores for s in generations.samples):
            lacking = [s for s in originals if s.scores.get(name) is None]
            if lacking:
                where = lacking[0].where or f"{generations.source}: item {lacking[0].item!r}"
                raise UserError(
                    f"{where}: no {name!r} score ({generations.score_fields[name]}) for this "
                    f"original sample ({len(lacking)} of {len(originals)} lack one); credo "
                    "imputes no missing score: give every original sample one, or drop "
                    f"them, or score without it (--given)")
        if any(name in it.scores for it in generations.items):
            lacking_items = [it for it in generations.items if it.scores.get(name) is None]
            if lacking_items:
                first = lacking_items[0]
                where = first.where or generations.source
                raise UserError(
                    f"{where}: item {first.id!r} has no {name!r} item score "
                    f"({generations.score_fields[name]}; {len(lacking_items)} of "
                    f"{len(generations.items)} items lack one); credo imputes no missing "
                    "score: give every item one, or drop them, or score without it (--given)")


def given_sources(generations: Generations, methods: Sequence[str]) -> str:
    """Where each given score of ``methods`` comes from, for the report: per sample or
    per item, the file's field or column, and how an item's value is made."""
    parts = []
    for method in methods:
        if not is_given(method):
            continue
        name = given_score_name(method)
        per_item = any(name in it.scores for it in generations.items)
        per_sample = any(name in s.scores for s in generations.samples)
        where = generations.score_fields.get(name, "?")
        if per_item:
            how = "per item" + (", with a score per sample for the per-generation tables"
                                if per_sample else "")
            value = "the item's own"
        else:
            how, value = "per sample", "the mean of its original samples'"
        parts.append(f"{method}: {how}, read from {where} of {generations.source} (an "
                     f"item's value: {value})")
    return "; ".join(parts)


def _not_read(generations: Generations) -> str:
    """The fields credo did not read, with their row counts, and where a score goes."""
    fields = ", ".join(f"{k} ({v} rows)" for k, v in generations.not_read.items())
    where = ("in a column scores.<name>" if generations.layout == "csv"
             else "under 'scores': {name: value}")
    return f"{fields}; a score of your own goes {where}"


def check_sample_sets(generations: Generations) -> None:
    """A :class:`UserError` naming the file and line of the first sample whose ``set`` is
    no registered sample set (``"wibble"``): no method would read it, so it would be
    dropped without a word; the known sets are listed."""
    from credo.plan.sample_sets import SAMPLE_SETS

    known = set(SAMPLE_SETS.names())
    for s in generations.samples:
        if s.set not in known:
            raise UserError(f"{s.where or generations.source}: 'set' {s.set!r} is no sample "
                            f"set credo reads (known: {', '.join(SAMPLE_SETS.names())})")


FIRST_METHODS = ("c3", "c3_cross", "self_consistency")
"""The methods ``credo score`` lists first when it scores every method the input allows;
the other registered methods follow in the registry's order."""


def default_methods(generations: Generations, fmt: AnswerFormat) -> list[str]:
    """Every registered method the input allows (the README's promise):
    defined for ``fmt``, its sample sets (and logprobs) given, and, for those comparing
    samples, 2 or more of each set on some item; self-consistency when none is (it is
    then reported not available, with the reason). Original samples alone allow SC,
    semantic entropy, the graph methods (EigV, degree, eccentricity, KLE, the number of
    semantic sets), lexical similarity and answer consistency outside multiple choice.
    A method with a kernel of its own (LUQ's embedding kernel: an embedder to load) is
    scored only when named."""
    sets: dict[str, dict[str, list[GivenSample]]] = defaultdict(lambda: defaultdict(list))
    for s in generations.samples:
        sets[s.item][s.set].append(s)
    logprobs = any(s.logprobs for s in generations.samples)
    names = list(dict.fromkeys([*FIRST_METHODS, *METHODS]))
    chosen = []
    for spec in method_specs(names):
        needs = spec.needs_for(fmt)
        if not spec.applies_to(fmt) or (spec.logprobs and not logprobs) \
                or spec.kernel is not None or spec.fitted:
            continue
        if any(all(its.get(n) for n in needs) and not spec.short_sets(fmt, its)
               for its in sets.values()):
            chosen.append(spec.name)
    return chosen or ["self_consistency"]


def given_config(config: RunConfig, generations: Generations) -> dict[str, Any]:
    """The config fields a score run takes from the file rather than credo's run defaults:
    ``n`` and ``m`` (the most original and perturbed samples of an item), no ``limit``,
    and the sampling settings the file records."""
    most: dict[str, int] = defaultdict(int)
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for s in generations.samples:
        counts[s.item, s.set] += 1
        most[s.set] = max(most[s.set], counts[s.item, s.set])
    known = {k: v for k, v in generations.settings.items() if k in SAMPLING_KEYS}
    return {"n": most[ORIGINAL], "m": most[PERTURBED], "limit": None,
            "sampling": config.sampling.model_copy(update=known)}


SAMPLING_KEYS = ("temperature", "top_p", "top_k", "max_tokens")
"""The sampling settings a file may record that a run config has."""


def _roles(pool: ModelPool, config: RunConfig, specs: list) -> list[str]:
    """The roles scoring may ask (checked before the first call): the judge when
    a method's kernel is the judge, the grader when one is named."""
    judged = "judge" in {spec.kernel or config.kernel for spec in specs}
    return [r for r, used in ((JUDGE, judged), (GRADER, True)) if used and pool.has(r)]


def _check_originals(
    source: str, items: list[str], by_item: dict[str, dict[str, list[GivenSample]]]
) -> None:
    """A :class:`UserError` naming the file unless every item has an original sample.
    One is enough: the methods that compare samples are not available for an item with
    fewer than 2 of a set (one sample per item is both tools' default),
    and the others score it."""
    lacking = [it for it in items if not by_item[it].get(ORIGINAL)]
    if lacking:
        raise UserError(
            f"{source}: item {lacking[0]!r} has no 'original' samples ({len(lacking)} items"
            " have none); every item needs at least one"
        )


def _lost(generations: Generations) -> list[tuple[dict[str, int], str]]:
    """The samples a log holds no generation for, by why: errored, cancelled, never
    started (never-started samples did not fail)."""
    return [(generations.failed, "errored"), (generations.cancelled, "cancelled"),
            (generations.not_started, "never started")]


def given_incomplete(generations: Generations) -> dict[str, str]:
    """Per item whose log lacks some of its samples, what it lacks: ``1 errored``, ``1
    cancelled, 1 never started``; with the log's status when the eval did not finish."""
    ended = f" (the eval ended '{generations.status}')" if generations.status else ""
    items = list(dict.fromkeys(i for counts, _ in _lost(generations) for i in counts))
    out = {}
    for item in items:
        parts = [f"{counts[item]} {what}" for counts, what in _lost(generations)
                 if counts.get(item)]
        total = sum(counts.get(item, 0) for counts, _ in _lost(generations))
        out[item] = (f"{total} sample{'' if total == 1 else 's'} not in the log: "
                     f"{', '.join(parts)}{ended}")
    return out


def given_incomplete_line(result: RunResult) -> str:
    """The one line ``credo score`` ends with when its log lacks samples (exit 3): how many
    errored, were cancelled or never started, which items that leaves out and which are
    scored on fewer samples, and how to complete them (score generates nothing)."""
    stats = result.stats
    status = stats.get("given_log_status")
    lost = [(int(stats.get(key) or 0), what) for key, what in GIVEN_LOST]
    total = sum(k for k, _ in lost)
    shown = {r.item.id for r in result.items}
    left_out = sum(1 for i in result.incomplete if i not in shown)
    partial = len(result.incomplete) - left_out
    items = [f"{left_out} item{'' if left_out == 1 else 's'} with none left out"] if left_out \
        else []
    items += [f"{partial} scored on the samples that finished"] if partial else []
    ended = f"the log's eval ended '{status}'; " if status not in (None, "success") else ""
    return (f"incomplete: {ended}{total} sample{'' if total == 1 else 's'} not in the log"
            f" ({', '.join(f'{k} {what}' for k, what in lost if k)}): {', '.join(items)};"
            f" {GIVEN_RERUN}")


GIVEN_LOST = (("given_errored_samples", "errored"), ("given_cancelled_samples", "cancelled"),
              ("given_not_started_samples", "never started"))
"""The stats that count the samples a log lacks, and what each counts."""

GIVEN_RERUN = ("credo score generates nothing: complete the generations with the tool that"
               " wrote them (inspect eval-retry LOG) and score the new log")
"""What to do about samples a log lacks."""


def given_stats(
    generations: Generations, stats: dict[str, int | float | str], recompute: bool,
    fmt: AnswerFormat,
) -> dict[str, int | float | str]:
    """What the file holds, for the report: the correctness used (the tool's own metric or
    scorer, 'given', or credo's grading) with the rule by which two answers are one
    (:func:`~credo.tasks.answers.answer_rule`), the samples per item, the sampling settings it
    records, how its answers were read, and the samples it lacks (errored, cancelled,
    never started)."""
    counts: dict[str, int] = defaultdict(int)
    for s in generations.samples:
        if s.set == ORIGINAL:
            counts[s.item] += 1
    low, high = min(counts.values(), default=0), max(counts.values(), default=0)
    graded = f"graded by credo against each item's gold answer (--format {fmt.value})"
    if recompute:
        correctness = f"recomputed (--recompute-correctness): {graded}"
    elif generations.correctness:
        correctness = generations.correctness + (
            f"; items without it {graded}" if stats.get("graded_items") else "")
    else:
        correctness = graded if stats.get("graded_items") else "none (no gold answers)"
    correctness += f"; answers compared as {generations.compared or answer_rule(fmt)}"
    settings = ", ".join(f"{k}={v}" for k, v in generations.settings.items())
    out: dict[str, int | float | str] = {
        "correctness": correctness,
        "given_samples_per_item": str(high) if low == high else f"{low} to {high}",
        "given_sampling": settings or "not recorded in the file",
    }
    if any(counts for counts, _ in _lost(generations)) or generations.status:
        for (key, _), (counts, _) in zip(GIVEN_LOST, _lost(generations), strict=True):
            out[key] = sum(counts.values())
        out["given_log_status"] = generations.status or "success"
    if generations.answers:
        out["answers"] = generations.answers
    if generations.tool_accuracy is not None:
        out["tool_accuracy"] = generations.tool_accuracy
        out["tool_accuracy_is"] = generations.tool_accuracy_is
    repeated = identical_repeats_line(generations)
    if repeated is not None:
        out["identical_repeats"] = repeated
    return out


def identical_repeats_line(generations: Generations) -> str | None:
    """One line when every item with two or more original samples holds the same text in
    each (byte for byte): the scores that compare samples then say nothing. It names
    the likely cause and its fix from what the file records: a greedy decoding
    (temperature 0), a seed the log's generate config fixes (inspect_ai), or lm-eval's
    API models, which send ``seed: 1234`` with every request, on a server that honours
    seeds. None when some item's samples differ."""
    texts: dict[str, list[str]] = defaultdict(list)
    for s in generations.samples:
        if s.set == ORIGINAL:
            texts[s.item].append(s.text)
    repeated = [ts for ts in texts.values() if len(ts) >= 2]
    if not repeated or any(len(set(ts)) > 1 for ts in repeated):
        return None
    counts = sorted({len(ts) for ts in repeated})
    each = str(counts[0]) if len(counts) == 1 else f"{counts[0]} to {counts[-1]}"
    head = (f"identical repeats: on each of the {len(repeated)} items with several samples, "
            f"its {each} samples are the same text, so the scores that compare them cannot "
            "rank the questions; ")
    settings = generations.settings
    temperature = settings.get("temperature")
    lm_eval = generations.layout == "lm-evaluation-harness"
    if isinstance(temperature, int | float) and temperature <= 0:
        fix = ("set do_sample: true and temperature: 1.0 in the task's generation_kwargs"
               if lm_eval else "sample at a temperature above 0 (inspect eval "
               "--temperature 1)")
        return head + f"cause: greedy decoding (temperature {temperature:g}); fix: {fix}"
    if lm_eval:
        return head + ("cause: lm-eval's API models send seed 1234 with every request, and "
                       "this server honours seeds, so every repeat is drawn alike; fix: "
                       "seed: null in the task's generation_kwargs (or --gen_kwargs "
                       "seed=None) so each request goes unseeded, or a server that ignores "
                       "seeds")
    seed = settings.get("seed")
    if seed is not None and generations.layout == "inspect_ai":
        return head + (f"cause: the log's generate config fixes seed {seed}, which a server "
                       "that honours seeds answers alike in every epoch; fix: run inspect "
                       "eval without --seed")
    return head + ("cause: the server answered every repeat alike (it fixes a seed, or "
                   "decodes greedily); fix: sample each repeat unseeded at a temperature "
                   "above 0")


def _task(generations: Generations, fmt: AnswerFormat) -> Task:
    items = tuple(
        Item(g.id, g.question, g.gold, g.choices, source=generations.source)
        for g in generations.items
    )
    return Task(generations.source, items, fmt, "")


def _set(
    item: Item, rows: list[GivenSample], fmt: AnswerFormat, as_given: bool = False
) -> tuple[tuple[Sample, ...], tuple[bool | float | None, ...]]:
    samples = tuple(
        Sample(r.text, given_answer(r, fmt, len(item.choices), as_given=as_given), r.logprobs,
               r.ref, tuple(sorted(r.scores.items())))
        for r in rows
    )
    return samples, tuple(r.correct for r in rows)


def given_answer(
    sample: GivenSample, fmt: AnswerFormat, n_choices: int = 0, *, as_given: bool = False
) -> Answer:
    """The answer of a given sample as credo compares it: in an answer set (original,
    perturbed, paraphrased), the file's answer in the format's normalised form
    (:func:`~credo.tasks.answers.canonical_answer`: "64", "64.0" and "6.4e1" are one
    answer under ``--format number``); a follow-up's answer (a verbalized confidence, a
    P(True) token, a verdict) as given, and any answer with ``as_given`` (the file's tool
    already put its answers in the form it compares: :attr:`Generations.compared
    <credo.importers.base.Generations.compared>`)."""
    value = sample.answer
    if sample.set in ANSWER_SETS and not as_given:
        value = canonical_answer(value, fmt, n_choices)
    return Answer(value, sample.text)


def _given_or_graded(
    config: RunConfig,
    task: Task,
    generated: dict[str, dict[str, tuple[tuple[Sample, ...], tuple]]],
    answers: list[ItemSamples],
    pool: ModelPool,
    stats: dict[str, int | float | str],
    incomplete: dict[str, str],
) -> dict[str, tuple[bool | float, ...]]:
    """The given correctness of every original sample; items that give none and have a
    gold answer are graded as a run grades them; the rest are unknown (NaN). Code is
    graded by running an item's tests, which a given file does not hold: a code item
    that gives no correctness is a :class:`UserError`."""
    out: dict[str, tuple[bool | float, ...]] = {}
    to_grade = []
    for it, its in zip(task.items, answers, strict=True):
        given = generated[it.id].get(ORIGINAL, ((), ()))[1]
        if any(c is not None for c in given):
            out[it.id] = tuple(math.nan if c is None else c for c in given)
        elif it.gold and task.format is AnswerFormat.CODE:
            raise UserError(
                f"{it.source}: item {it.id!r} gives no 'correct' for its original samples, and"
                " code is graded by running tests a given file does not hold (--format code)"
            )
        elif it.gold and task.format is AnswerFormat.LONG_FORM:
            raise UserError(
                f"{it.source}: item {it.id!r} gives no 'correct' for its original samples, and"
                " long-form answers are graded by a judge against a knowledge source"
                " (--format long_form), not from a gold answer alone: give 'correct'"
            )
        elif it.gold:
            to_grade.append((it, its))
        else:
            out[it.id] = tuple(math.nan for _ in given)
    if to_grade:
        stats["graded_items"] = len(to_grade)
        sub = Task(task.name, tuple(it for it, _ in to_grade), task.format, task.domain)
        out.update(grade_items(config, sub, [its for _, its in to_grade], pool, stats, incomplete))
    return out

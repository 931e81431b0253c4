"""The claim stage of a long-form run (docs/claims.md "A run's claims").

After grading, with ``config.claims`` set, every complete item's answer (the original
sample credo gives, :attr:`~credo.methods.scoring.ItemResult.answer_index`) is split into
claims and each claim is scored by the claim methods and labelled, through the planned
stages of :mod:`credo.plan.claims` run by the run's :class:`StageDriver` (cached,
counted per ledger stage, in the dry run: :func:`plan_claims` is what
:func:`credo.pipeline.estimate.estimate_run` counts on placeholder answers):

1. the claims: an item of the annotated file ``claims.labels`` (matched by id) takes its
   claims and labels from the file; the others are split (``claims.split``: the judge's
   atomic facts, or the answer's sentences with no model);
2. the evidence the methods need, in one round (each role one executor call): support
   verdicts of the other original samples and of the perturbed samples (judge),
   the verbalised confidence (model under test), and the FActScore labels of the split
   claims of items with a knowledge source (grader);
3. the claim methods (:data:`credo.methods.claims.CLAIM_METHODS`), pure functions of
   that evidence; then the per-claim evaluation against the labels
   (:func:`credo.evaluate.claim_metrics.evaluate_claim_methods`) and, per method and
   ``claims.alphas``, the conformal factuality threshold calibrated on this run's
   labelled answers with the share of claims it keeps
   (:func:`credo.evaluate.claims.certify_claims`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from credo.config import RunConfig
from credo.evaluate.claim_metrics import evaluate_claim_methods
from credo.evaluate.claims import certify_claims
from credo.methods.claims import (
    CLAIM_METHODS,
    CONFIDENCE,
    SUPPORT_ORIGINAL,
    SUPPORT_PERTURBED,
    score_claims,
)
from credo.methods.scoring import ItemResult
from credo.pipeline.stages import StageDriver
from credo.plan.claims import (
    ClaimConfidenceStage,
    ClaimLabelStage,
    ClaimSource,
    ClaimSplitStage,
    ClaimSupportStage,
    evidence,
)
from credo.plan.samples import PERTURBED
from credo.tasks.base import Item, Task
from credo.tasks.claims import Claim, ClaimItem, read_claims
from credo.tasks.longform import claims as sentence_claims
from credo.tasks.longform import knowledge_sources
from credo.types import SamplingParams

__all__ = ["ClaimRun", "claim_sources", "plan_claims", "run_claims"]


@dataclass
class ClaimRun:
    """What the claim stage made: one :class:`ClaimItem` per item (its answer, its
    claims with every method's score and the label where known), the claim methods'
    metrics per claim with CIs, the methods without scores and why, the calibrated
    thresholds per method and alpha (``retained[method][alpha]``: the certificate's
    dict), and counts."""

    items: list[ClaimItem]
    methods: list[str]
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)
    retained: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    stats: dict[str, int | str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"methods": self.methods, "metrics": self.metrics,
                "unavailable": self.unavailable, "retained": self.retained,
                "stats": self.stats}


def claim_sources(items: Sequence[ItemResult]) -> dict[str, ClaimSource]:
    """Per item, its answer (the sample credo gives), the other original samples' texts
    and the perturbed samples' texts."""
    out = {}
    for r in items:
        k = r.answer_index if r.answer_index is not None else 0
        texts = [s.text for s in r.original]
        answer = texts[k] if texts else ""
        out[r.item.id] = ClaimSource(
            r.item.id, r.item.question, answer,
            tuple(t for j, t in enumerate(texts) if j != k),
            tuple(s.text for s in r.perturbed), str(r.item.meta.get("entity", "")))
    return out


def plan_claims(
    config: RunConfig,
    sources: Mapping[str, ClaimSource],
    items: Mapping[str, Item],
    driver: StageDriver,
    annotated: Mapping[str, ClaimItem] | None = None,
) -> tuple[dict[str, tuple[str, ...]], dict[str, tuple], dict[str, tuple], dict[str, tuple],
           list[str]]:
    """Steps 1-2 of the module docstring through ``driver``: the claims, the support
    verdicts, the confidences and the FActScore labels per item, and the items whose
    splitting reply fell back to sentences."""
    c = config.claims
    assert c is not None
    annotated = annotated or {}
    split_ids = {i: s for i, s in sources.items() if i not in annotated}
    fallbacks: list[str] = []
    if c.split == "model":
        stage = ClaimSplitStage(c.split_max_tokens)
        claims = driver.run([stage], split_ids)[0]
        fallbacks = stage.fallbacks
    else:
        claims = {i: tuple(sentence_claims(s.answer)) for i, s in split_ids.items()}
    claims = {**claims, **{i: tuple(cl.text for cl in annotated[i].claims)
                           for i in sources if i in annotated}}
    live = {i: sources[i] for i in sources if i in claims and i not in driver.incomplete}
    needs = set().union(*(CLAIM_METHODS[m].needs for m in c.methods))
    support = (ClaimSupportStage(config.judge.max_tokens, SUPPORT_PERTURBED in needs)
               if needs & {SUPPORT_ORIGINAL, SUPPORT_PERTURBED} else None)
    confidence = ClaimConfidenceStage(c.confidence_max_tokens) if CONFIDENCE in needs else None
    grader = config.grader or config.judge
    unlabelled = {i: items[i] for i in live if i not in annotated}
    ks = knowledge_sources(unlabelled, list(unlabelled))
    judge_only = [i for i in unlabelled if i not in ks] if c.judge_labels else []
    labels = (ClaimLabelStage(SamplingParams(temperature=0.0, max_tokens=grader.max_tokens),
                              ks, judge_only) if ks or judge_only else None)
    stages = [s for s in (support, confidence, labels) if s is not None]
    read: dict[Any, Any] = dict(zip(stages, driver.run(stages, live, claims), strict=True)
                                ) if stages else {}
    return (claims, read.get(support, {}), read.get(confidence, {}), read.get(labels, {}),
            fallbacks)


def run_claims(
    config: RunConfig, task: Task, results: Sequence[ItemResult], driver: StageDriver
) -> ClaimRun:
    """The claim stage (module docstring) on the scored items ``results``."""
    c = config.claims
    assert c is not None
    annotated = ({it.id: it for it in read_claims(c.labels)} if c.labels is not None else {})
    sources = claim_sources(results)
    items = {it.id: it for it in task.items}
    claims, support, confidence, labels, fallbacks = plan_claims(
        config, sources, items, driver, annotated)
    ev = evidence({i: cs for i, cs in claims.items() if i not in driver.incomplete},
                  support, confidence)
    out: list[ClaimItem] = []
    for i, e in ev.items():
        if i not in sources or i in driver.incomplete:
            continue
        scored = score_claims(e, c.methods)
        given = annotated.get(i)
        marks = (tuple(cl.correct for cl in given.claims) if given is not None
                 else labels.get(i, (None,) * len(e.claims)))
        out.append(ClaimItem(
            i, tuple(Claim(text, marks[j], {m: scored[m][j] for m in c.methods},
                           given.claims[j].mark if given is not None else None)
                     for j, text in enumerate(e.claims)),
            prompt=sources[i].question, answer=sources[i].answer,
            source=f"item {i}"))
    run = ClaimRun(out, list(c.methods))
    run.unavailable = _unavailable(out, c.methods, results)
    scored_methods = [m for m in c.methods if m not in run.unavailable]
    run.metrics = evaluate_claim_methods(out, scored_methods, n_bins=config.ece_bins,
                                         n_resamples=config.bootstrap, seed=config.seed)
    run.retained = _retained(out, scored_methods, c.alphas)
    n_claims = sum(len(it.claims) for it in out)
    run.stats = {
        "claim_items": len(out),
        "claims": n_claims,
        "claims_labelled": sum(1 for it in out for cl in it.claims if cl.correct is not None),
        "claims_split": c.split,
        "claim_labels": _label_source(config, items, out, annotated, bool(labels)),
    }
    if fallbacks:
        run.stats["claim_split_fallbacks"] = len(fallbacks)
    return run


def _label_source(config: RunConfig, items: Mapping[str, Item], out: Sequence[ClaimItem],
                  annotated: Mapping[str, ClaimItem], labelled: bool) -> str:
    """Where the claim labels come from, in words for the reports: the annotated file,
    FActScore's grader against the knowledge folder, and, named as such, judge-only
    labels (``claims.judge_labels``: the grader's own knowledge, no knowledge source)."""
    if annotated:
        return "file"
    if not labelled:
        return "none"
    c = config.claims
    judged = [it.id for it in out if c is not None and c.judge_labels
              and not items[it.id].meta.get("knowledge")]
    if not judged:
        return "factscore grader"
    grader = (config.grader or config.judge).model or config.model
    judge_only = (f"judge-only: grader model {grader}'s own knowledge, no knowledge source"
                  f" ({len(judged)} of {len(out)} answers)")
    return judge_only if len(judged) == len(out) else f"factscore grader; {judge_only}"


def _unavailable(items: Sequence[ClaimItem], methods: Sequence[str],
                 results: Sequence[ItemResult]) -> dict[str, str]:
    out = {}
    no_perturbed = not any(r.perturbed for r in results)
    for m in methods:
        values = [cl.scores[m] for it in items for cl in it.claims]
        if values and all(math.isnan(v) for v in values):
            if SUPPORT_PERTURBED in CLAIM_METHODS[m].needs and no_perturbed:
                out[m] = (f"the run drew no {PERTURBED} samples (a method such as c3 in "
                          "methods draws them)")
            elif CONFIDENCE in CLAIM_METHODS[m].needs:
                out[m] = "no confidence reply could be read"
            else:
                out[m] = "no item has other samples to check the claims against (n >= 2)"
    return out


def _retained(items: Sequence[ClaimItem], methods: Sequence[str],
              alphas: Sequence[float]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per method and alpha, the conformal threshold calibrated on the answers whose
    claims are all labelled and scored (the share it keeps; no threshold: why)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for m in methods:
        usable = [it for it in items if it.claims and all(
            cl.correct is not None and math.isfinite(cl.scores[m]) for cl in it.claims)]
        if not usable:
            continue
        out[m] = {f"{a:g}": certify_claims(usable, a, score=m).to_dict() for a in alphas}
    return out

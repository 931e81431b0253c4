"""A certificate for the adaptive decision procedure, made as it runs (``credo certify RUN_DIR
--adaptive decision``).

The decision rule (:mod:`credo.plan.adaptive`) stops sampling an item once the side of
the threshold ``t`` its score falls on is settled, and accepts the item when the final
score is at least ``t``. Where it stops depends on ``t``, so the procedure is a
different one at every threshold, and a threshold certified on the full recipe's scores
says nothing exact about it. Here every candidate ``t`` is run: the full labelled run is
replayed from its cache (no model call: the pool reads the cache only), then, per ``t``,
the same config with the decision rule at ``t`` through the same
:func:`~credo.pipeline.runner.run_pipeline` (what ``credo adaptive`` replays and what the
gateway runs live: an adaptive set of k samples is the first k of the full run's request,
sample i seeded ``base(key) + i``). Each replay gives, per item, whether the procedure
accepts it and whether the answer it then gives (the modal answer of the samples drawn)
is wrong; :func:`credo.evaluate.certify.certify_procedure` runs Learn then Test over
``t`` on those decisions. The guarantee then covers exactly what the gateway does at the
certified threshold, wherever a replay equals a live run: on the scripted backend and on
servers that reproduce seeds (sample i of a request is the same text whatever else is
decoded with it); not on the embedded engine, whose texts depend on the batch a request
is decoded in (docs/serve.md).

Replays are run per threshold on the items the test needs (the selection part at every
threshold of the grid, the test part along the order until the first failure) and
memoised per (threshold, item).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from credo.config import AdaptiveConfig, RunConfig
from credo.errors import UserError
from credo.evaluate.certify import Certificate, certify_procedure
from credo.generation.pool import ModelPool
from credo.pipeline.runner import RunResult, run_pipeline
from credo.plan.samples import PERTURBED
from credo.tasks.base import Task

__all__ = ["DecisionReplay", "certify_decision_rule", "replay_config"]


@dataclass(frozen=True)
class DecisionReplay:
    """What :func:`certify_decision_rule` found: the certificate, the rule (without its
    threshold), the replays run, and per calibration item at the certified threshold
    (empty when nothing was certified): the answer samples the procedure drew and the
    full recipe draws, and whether each accepts it."""

    certificate: Certificate
    rule: AdaptiveConfig
    replays: int
    items: tuple[str, ...]
    drawn: dict[str, int] = field(default_factory=dict)
    full_drawn: dict[str, int] = field(default_factory=dict)
    accepted: dict[str, bool] = field(default_factory=dict)
    full_accepted: dict[str, bool] = field(default_factory=dict)

    @property
    def sample_share(self) -> float:
        """Samples the procedure drew over the full recipe's, at the certified threshold."""
        full = sum(self.full_drawn.values())
        return sum(self.drawn.values()) / full if full else math.nan

    @property
    def agreement(self) -> float:
        """Share of the calibration items whose accept decision equals the full recipe's
        at the certified threshold."""
        if not self.accepted:
            return math.nan
        return float(np.mean([self.accepted[i] == self.full_accepted[i] for i in self.accepted]))

    def to_json(self) -> dict[str, object]:
        """The summary a certificate file keeps (``replay``)."""
        return {"replays": self.replays, "items": len(self.items),
                "samples_drawn": sum(self.drawn.values()),
                "samples_full": sum(self.full_drawn.values()),
                "decisions_equal_full": None if math.isnan(self.agreement) else self.agreement}


def replay_config(config: RunConfig, method: str, rule: AdaptiveConfig | None) -> RunConfig:
    """``config`` for a replay of ``method`` under ``rule`` (None: the full recipe):
    only that method, and nothing of the evaluation a replay does not read (no
    bootstrap, one coverage split, no neutrality test); none of it enters a request."""
    evaluation = config.evaluation.model_copy(update={"splits": 1})
    perturbation = config.perturbation.model_copy(update={"neutrality": "off"})
    return config.model_copy(update={
        "adaptive": rule, "methods": [method], "bootstrap": 0, "calibrate": "none",
        "evaluation": evaluation, "perturbation": perturbation, "certificate": None})


def certify_decision_rule(
    config: RunConfig,
    pool: ModelPool,
    task: Task | None,
    method: str,
    rule: AdaptiveConfig,
    *,
    alpha: float,
    delta: float,
    procedure: str = "ltt",
    check_full: Callable[[RunResult], None] | None = None,
) -> DecisionReplay:
    """Certify the decision rule ``rule`` (its threshold ignored) on ``method``'s scores
    of the full labelled run ``config`` replayed from ``pool``'s cache (module
    docstring). ``check_full`` sees the full replay first (``credo certify`` checks it
    against the run folder). Items without a score or a known correctness are left out,
    as :func:`credo.api.certify_run` leaves them out of the full recipe's certificate."""
    full = run_pipeline(replay_config(config, method, None), pool, task)
    if check_full is not None:
        check_full(full)
    rows = [r for r in full.items
            if math.isfinite(r.scores.get(method, math.nan)) and math.isfinite(r.answer_correct)]
    if not rows:
        raise UserError(f"no item has both a {method} score and a known correctness (a "
                        "labelled run is needed to certify)")
    ids = tuple(r.item.id for r in rows)
    scores = np.array([r.scores[method] for r in rows])
    correct = np.array([r.answer_correct >= 0.5 for r in rows])
    memo: dict[tuple[float, str], tuple[bool, bool, int]] = {}
    replays = 0

    def decide(t: float, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        nonlocal replays
        missing = [ids[i] for i in idx if (t, ids[i]) not in memo]
        if missing:
            replays += 1
            memo.update(_replay_at(t, missing, full.task, config, pool, method, rule))
        got = [memo[t, ids[i]] for i in idx]
        return (np.array([g[0] for g in got], dtype=bool),
                np.array([g[1] for g in got], dtype=bool))

    cert = certify_procedure(scores, correct, decide, alpha, delta, procedure,
                             what="the adaptive decision procedure")
    base = rule.model_copy(update={"threshold": None})
    if cert.threshold is None:
        return DecisionReplay(cert, base, replays, ids)
    t = cert.threshold
    decide(t, np.arange(len(ids)))
    by_id = {r.item.id: r for r in rows}
    return DecisionReplay(
        cert, base, replays, ids,
        drawn={i: memo[t, i][2] for i in ids},
        full_drawn={i: len(by_id[i].original) + len(by_id[i].sets.get(PERTURBED, ()))
                    for i in ids},
        accepted={i: memo[t, i][0] for i in ids},
        full_accepted={i: bool(by_id[i].answer is not None and by_id[i].scores[method] >= t)
                       for i in ids},
    )


def _replay_at(
    t: float, ids: list[str], task: Task, config: RunConfig, pool: ModelPool, method: str,
    rule: AdaptiveConfig,
) -> dict[tuple[float, str], tuple[bool, bool, int]]:
    """The decision rule at ``t`` replayed on the items ``ids`` of ``task``: per item,
    (accepted, its answer wrong, answer samples drawn)."""
    wanted = set(ids)
    subset = dataclasses.replace(task, items=tuple(it for it in task.items if it.id in wanted))
    point = rule.model_copy(update={"threshold": t, "scores": rule.scores or [method]})
    result = run_pipeline(replay_config(config, method, point), pool, subset)
    found = {r.item.id: r for r in result.items}
    lost = wanted - set(found)
    if lost:
        first = sorted(lost)[0]
        why = result.incomplete.get(first, "dropped by the replay")
        raise UserError(f"{config.cache_path}: the replay of the decision rule at threshold "
                        f"{t:g} lacks {len(lost)} items (e.g. {first!r}: {why}); the cache "
                        "must hold every sample of the full run")
    out = {}
    for i in ids:
        r = found[i]
        score = r.scores.get(method, math.nan)
        accepted = r.answer is not None and math.isfinite(score) and score >= t
        out[t, i] = (bool(accepted), not r.answer_correct >= 0.5,
                     len(r.original) + len(r.sets.get(PERTURBED, ())))
    return out

"""Stopping rules of adaptive sampling: pure functions of the answers drawn so far.

An adaptive run (``adaptive:`` in the run config, ``credo run --adaptive RULE``) draws an
item's samples in rounds instead of all at once, and stops drawing for an item once its
stopping rule holds. Sample ``i`` of a request is the same whether 4 or 30 are asked for
(the cache seeds it ``base(key) + i``), so an adaptive run draws exactly the first samples
of the full run's requests, and ``credo adaptive RUN_DIR`` replays it from a finished full
run's cache. The live run (:mod:`credo.pipeline.adaptive`) and that simulation call the
functions of this module, and nothing else decides when an item stops.

Two stages are settled in turn:

``original``   the n original samples. The rules read the answers' modal share, the
               item's self-consistency score (Wang et al. 2023).
``perturbed``  the context prefixes and the m perturbed samples, with the original
               samples fixed. The rules read the C3 score, ``1 − MMD²/2`` under the
               indicator kernel on the answers (Wu et al., App. H).

The originals come first because the strict prefix rules read the original answers (a
prefix must not name one, :mod:`credo.perturb.rules`): the prefixes are written once the
originals are final, so a kept prefix is never withdrawn later.

Rules (``adaptive.rule``):

``consensus``  Early-Stopping Self-Consistency (Li et al., "Escape Sky-high Cost:
               Early-stopping Self-Consistency for Multi-step Reasoning", ICLR 2024): stop
               once the last ``window`` answers (default: one round, at least 2) are one
               and the same parsed answer. In the perturbed stage the window is of
               perturbed answers: unanimity across contexts.
``interval``   stop once the score the full run would report is, at the rule's
               ``confidence``, within ``epsilon`` (default :data:`DEFAULT_EPSILON`) of the
               score reported now: the central ``confidence`` interval of the posterior
               predictive distribution of the item's score at the full size (n originals,
               m perturbed) lies within ``[score now − ε, score now + ε]``, for every
               score the rule reads (``adaptive.scores``; default all four:
               self-consistency and semantic entropy in the original stage, C3 and C3
               cross in the perturbed stage, each as credo's method computes it under the
               indicator kernel). The predictive distribution (Bayesian predictive
               monitoring: Spiegelhalter, Freedman and Blackburn 1986; Lee and Liu 2008):
               the stage's answer distribution under a Dirichlet(1 + counts) posterior
               over the answers seen plus one bucket of answers that match nothing seen
               (unparsable or new: each one a singleton), the remaining answers drawn
               multinomially from it, the score computed on the completed counts;
               :data:`POSTERIOR_DRAWS` draws with a fixed seed, so the same answers give
               the same decision, live and replayed. The target is the full run's score,
               not the population's: an adaptive run is meant to report what the full
               run would, and the interval shrinks to nothing as the set approaches its
               full size (an interval on the population value cannot narrow below the
               full run's own sampling noise, so at small ε it never settles), and it
               accounts for the scores' dependence on the set's size (the unbiased
               MMD²'s within-set term, semantic entropy's normalisation by ln K).
``decision``   with a certificate's score threshold ``threshold``: stop once the same
               predictive interval and the score now lie on one side of it, for each
               score read (default: the certificate's method): the decision the full run
               would take is, at that confidence, the one taken now (cf. the sequential
               tests of Wald 1945). A stage none of whose scores the rule reads stops at
               ``min`` under ``decision`` (it cannot change the decision) and is drawn in
               full under ``interval``.

Every rule reads at least ``min`` samples; a stage stops at n (or m) whatever the rule
says. Methods are then scored on the samples actually drawn: an item may have fewer
samples than another. Every estimator of credo takes its set's size from the set
(C3's unbiased MMD² with its own n and m, self-consistency's share of k, semantic
entropy's clusters of k); the follow-ups (verbalized, P(True), CCP) are asked about the
originals drawn (``baselines.followups`` still caps them); APriCoT's verdicts keep
``baselines.apricot_samples`` (default n, the configured one).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

import numpy as np

from credo.config import AdaptiveConfig
from credo.registry import STOPPING_RULES

__all__ = [
    "DEFAULT_EPSILON",
    "ORIGINAL_STAGE",
    "PERTURBED_STAGE",
    "POSTERIOR_DRAWS",
    "STAGE_SCORES",
    "STOPPING_RULES",
    "Consensus",
    "Decision",
    "Interval",
    "PredictiveRule",
    "StoppingRule",
    "epsilon_of",
    "next_size",
    "original_statistics",
    "perturbed_statistics",
    "predictive_scores",
    "settled",
    "stopping_rule",
    "tolerance",
    "window_of",
]

ORIGINAL_STAGE = "original"
PERTURBED_STAGE = "perturbed"

STAGE_SCORES = {
    ORIGINAL_STAGE: ("self_consistency", "semantic_entropy"),
    PERTURBED_STAGE: ("c3", "c3_cross"),
}
"""The scores the interval and decision rules can read, by the stage whose set they
settle."""

DEFAULT_EPSILON = 0.1
"""The interval rule's default: the reported score within 0.1 of the full run's. On the 1.5B
runs of docs/results.md it saved 9-20% of the samples at n = m = 16, 22-39% at 32 and 56%
at 64 (one task); self-consistency's AUROC moved by at most 0.015 at 16 and 32 (semantic
entropy's once +0.044), and by 0.036 at 64, where a smaller ε suits sharper scores."""

POSTERIOR_DRAWS = 2000
"""Monte Carlo draws of the posterior predictive completions."""

PRIOR = 1.0
"""The Dirichlet prior's weight per category (uniform: Bayes–Laplace)."""

_SEED = 24  # the number: any fixed seed makes the interval a function of the answers

Answers = Sequence[Hashable | None]


class StoppingRule:
    """A stopping rule of adaptive sampling, registered by name in :data:`STOPPING_RULES`
    (``adaptive.rule``, ``credo run --adaptive RULE``, ``credo adaptive --rule``) with
    :func:`stopping_rule`. :meth:`holds` decides whether a stage stops; the attributes
    say what the rule reads, so the config, the command line and ``credo adaptive`` ask
    the rule instead of naming it:

    ``uses_epsilon``     it has a tolerance ε (``adaptive.epsilon``): ``credo adaptive``
                         replays it at each ``--epsilon``, the others once
    ``needs_threshold``  it needs a score threshold (``adaptive.threshold``, or the run's
                         certificate's)
    """

    uses_epsilon: bool = False
    needs_threshold: bool = False

    def holds(self, config: AdaptiveConfig, originals: Answers, perturbed: Answers | None,
              size: int) -> bool:
        """Whether the stage stops (the original stage when ``perturbed`` is None), read
        only with at least ``min`` and fewer than ``size`` samples drawn (:func:`settled`)."""
        raise NotImplementedError

    def epsilon(self, config: AdaptiveConfig) -> float | None:
        """The tolerance the rule runs with (a replay's point reports it): ``epsilon``."""
        return config.epsilon


R = TypeVar("R", bound=type[StoppingRule])


def stopping_rule(name: str) -> Callable[[R], R]:
    """Class decorator: register an instance of the decorated :class:`StoppingRule`
    subclass as rule ``name`` in :data:`STOPPING_RULES`."""
    return STOPPING_RULES.register(name, lambda cls: cls())


def epsilon_of(config: AdaptiveConfig) -> float:
    """The interval rule's ε: ``epsilon``, else :data:`DEFAULT_EPSILON`."""
    return DEFAULT_EPSILON if config.epsilon is None else config.epsilon


def window_of(config: AdaptiveConfig) -> int:
    """The consensus rule's window: ``window``, else one round (at least 2)."""
    return config.window if config.window is not None else max(2, config.round)


def tolerance(config: AdaptiveConfig) -> float | None:
    """The ε ``config``'s rule runs with (:meth:`StoppingRule.epsilon`)."""
    return STOPPING_RULES[config.rule].epsilon(config)


def next_size(drawn: int, cap: int, config: AdaptiveConfig) -> int:
    """How many samples an item's set holds after its next round: ``min`` first, then
    ``round`` more each time, never more than ``cap`` (n or m)."""
    return min(cap, config.min if drawn == 0 else drawn + config.round)


def settled(
    config: AdaptiveConfig, originals: Answers, perturbed: Answers | None = None, *,
    size: int,
) -> bool:
    """Whether the stage stops: the original stage when ``perturbed`` is None (its rule
    reads ``originals``), else the perturbed stage (its rule reads both sets, the
    originals final). ``size`` is the stage's full size (n or m). Nothing is settled below
    ``min`` samples of the stage's set; everything is at ``size``; in between the
    registered rule ``config.rule`` decides (:meth:`StoppingRule.holds`)."""
    drawn = originals if perturbed is None else perturbed
    if len(drawn) < config.min:
        return False
    if len(drawn) >= size:
        return True
    return STOPPING_RULES[config.rule].holds(config, originals, perturbed, size)


@stopping_rule("consensus")
class Consensus(StoppingRule):
    """Early-Stopping Self-Consistency (Li et al., ICLR 2024): the last ``window``
    answers of the stage's set are one and the same parsed answer."""

    def holds(self, config: AdaptiveConfig, originals: Answers, perturbed: Answers | None,
              size: int) -> bool:
        drawn = originals if perturbed is None else perturbed
        window = drawn[-window_of(config):]
        return len(window) >= window_of(config) and window[0] is not None and all(
            a == window[0] for a in window
        )


class PredictiveRule(StoppingRule):
    """A rule on the posterior predictive interval of the full run's score
    (:func:`predictive_scores`), for every score it reads (``adaptive.scores`` of the
    stage's :data:`STAGE_SCORES`; all of them by default): :meth:`accepts` says whether
    one score's interval ``[low, high]`` at ``confidence`` and its value now settle it.
    ``unread_stage_settles``: what a stage none of whose scores is read does."""

    unread_stage_settles: bool = False

    def holds(self, config: AdaptiveConfig, originals: Answers, perturbed: Answers | None,
              size: int) -> bool:
        stage = ORIGINAL_STAGE if perturbed is None else PERTURBED_STAGE
        read = [s for s in (config.scores or STAGE_SCORES[stage]) if s in STAGE_SCORES[stage]]
        if not read:
            return self.unread_stage_settles
        now, final = predictive_scores(originals, perturbed, size)
        tail = (1.0 - config.confidence) / 2.0
        for name in read:
            low, high = np.quantile(final[name], [tail, 1.0 - tail])
            if not self.accepts(config, now[name], float(low), float(high)):
                return False
        return True

    def accepts(self, config: AdaptiveConfig, now: float, low: float, high: float) -> bool:
        """Whether one score's predictive interval and value now settle the stage."""
        raise NotImplementedError


@stopping_rule("interval")
class Interval(PredictiveRule):
    """The score the full run would report lies, at the rule's confidence, within ε of
    the score now (module docstring). A stage none of whose scores is read is drawn in
    full (C3 reads the originals too, so a rule on C3 alone leaves them as the full run
    has them)."""

    uses_epsilon = True

    def epsilon(self, config: AdaptiveConfig) -> float:
        return epsilon_of(config)

    def accepts(self, config: AdaptiveConfig, now: float, low: float, high: float) -> bool:
        eps = epsilon_of(config)
        return not (low < now - eps or high > now + eps)


@stopping_rule("decision")
class Decision(PredictiveRule):
    """The predictive interval and the score now lie on one side of the threshold: the
    decision the full run would take is the one taken now. A stage none of whose scores
    is read stops at ``min`` (it cannot change the decision)."""

    needs_threshold = True
    unread_stage_settles = True

    def accepts(self, config: AdaptiveConfig, now: float, low: float, high: float) -> bool:
        t = config.threshold
        assert t is not None  # the config refuses decision without one
        return (low >= t and now >= t) or (high < t and now < t)


def predictive_scores(
    originals: Answers, perturbed: Answers | None, size: int, draws: int = POSTERIOR_DRAWS
) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """The stage's scores now and ``draws`` posterior predictive draws of them at the
    full size ``size`` (module docstring): the original stage's when ``perturbed`` is
    None, else the perturbed stage's with the originals fixed."""
    if perturbed is None:
        categories = list(dict.fromkeys(a for a in originals if a is not None))
        counts, singles = _counts(originals, categories)
        final = _complete(counts, singles, size - len(originals), draws)
        now = original_statistics(counts, len(originals))
        return {k: float(v) for k, v in now.items()}, original_statistics(final, size)
    categories = list(dict.fromkeys(a for a in (*originals, *perturbed) if a is not None))
    x, _ = _counts(originals, categories)
    y, singles = _counts(perturbed, categories)
    final = _complete(y, singles, size - len(perturbed), draws)
    now = perturbed_statistics(x, len(originals), y, len(perturbed))
    return ({k: float(v) for k, v in now.items()},
            perturbed_statistics(x, len(originals), final, size))


def _counts(answers: Answers, categories: Sequence[Hashable]) -> tuple[np.ndarray, int]:
    """Counts of ``categories`` among ``answers``, and the answers that match nothing
    (unparsable ones: the indicator kernel matches ``None`` to nothing, not even ``None``)."""
    counts = Counter(a for a in answers if a is not None)
    return np.array([counts.get(c, 0) for c in categories], dtype=float), sum(
        a is None for a in answers)


def _complete(counts: np.ndarray, singles: int, remaining: int, draws: int) -> np.ndarray:
    """``draws`` posterior-predictive completions of a sample set: the final counts of the
    seen categories after ``remaining`` more answers, the answer distribution drawn from
    Dirichlet(PRIOR + counts) over the seen categories and one bucket for answers that
    match nothing seen (unparsable or new; each such answer matches no other one, so the
    bucket adds only singletons). Fixed seed: the same answers give the same draws."""
    rng = np.random.default_rng(_SEED)
    alpha = np.append(counts, singles) + PRIOR
    p = rng.dirichlet(alpha, draws)
    added = rng.multinomial(remaining, p) if remaining else np.zeros_like(p, dtype=int)
    return counts[None, :] + added[:, :-1]


def _pair_agreement(counts: np.ndarray, total: int) -> np.ndarray:
    """Σ c(c − 1) / (N(N − 1)) over the last axis: the share of ordered pairs of distinct
    answers that agree (Wu et al., eq. 2 under the indicator kernel)."""
    return (counts * (counts - 1)).sum(axis=-1) / (total * (total - 1))


def original_statistics(counts: np.ndarray, total: int) -> dict[str, np.ndarray]:
    """The original stage's scores from counts (last axis: parsed categories; the rest of
    the ``total`` answers are singletons): self-consistency (Wu et al., eq. 2) and semantic
    entropy's confidence 1 − SE/ln N (Farquhar et al. 2024; singletons add 0)."""
    c = np.asarray(counts, dtype=float)
    log_c = np.log(np.where(c > 0, c, 1.0))
    return {"self_consistency": _pair_agreement(c, total),
            "semantic_entropy": (c * log_c).sum(axis=-1) / (total * math.log(total))}


def perturbed_statistics(x: np.ndarray, n: int, y: np.ndarray, m: int) -> dict[str, np.ndarray]:
    """The perturbed stage's scores from the originals' counts ``x`` (of n) and the
    perturbed ones' ``y`` (of m) over the same parsed categories: C3 = 1 − MMD²/2 with
    the unbiased MMD² (Wu et al., App. H eq. 1, clipped to [0, 1]) and the cross agreement
    (Wu et al., App. G) under the indicator kernel."""
    xy = (np.asarray(y, dtype=float) * x).sum(axis=-1) / (n * m)
    mmd2 = _pair_agreement(x, n) + _pair_agreement(np.asarray(y, dtype=float), m) - 2 * xy
    return {"c3": np.clip(1.0 - mmd2 / 2.0, 0.0, 1.0), "c3_cross": xy}

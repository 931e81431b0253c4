"""Stopping rules of adaptive sampling (issue 24): pure functions of the answers drawn so far.

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
               indicator kernel on the answers (000 App. H).

The originals come first because the strict prefix rules read the original answers (a
prefix must not name one, :mod:`credo.perturb.rules`): the prefixes are written once the
originals are final, so a kept prefix is never withdrawn later.

Rules (``adaptive.rule``):

``consensus``  Early-Stopping Self-Consistency (Li et al., "Escape Sky-high Cost:
               Early-stopping Self-Consistency for Multi-step Reasoning", ICLR 2024): stop
               once the last ``window`` answers (default: one round, at least 2) are one
               and the same parsed answer. In the perturbed stage the window is of
               perturbed answers: unanimity across contexts.
``interval``   stop once the central ``confidence`` posterior interval of the stage's
               score is narrower than ``epsilon`` (default :data:`DEFAULT_EPSILON`).
               Original stage: the modal share under the Beta(c + 1, k − c + 1)
               posterior of a binomial share with a uniform prior (c of the k answers are
               the modal one; the Bayesian interval of Brown, Cai and DasGupta 2001, §4.1).
               Perturbed stage: C3 given the originals drawn, p their answer
               distribution (final in this stage) and q the perturbed one under a
               Dirichlet(1 + counts) posterior over the answers seen plus one "unseen"
               category (the multinomial's conjugate posterior; cf. the Bayesian bootstrap,
               Rubin 1981); with the indicator kernel the population MMD² is ‖p − q‖², so
               C3 = 1 − ‖p − q‖²/2, and the interval is the quantiles of
               :data:`POSTERIOR_DRAWS` draws with a fixed seed (the same answers give the
               same interval, live and simulated).
``decision``   with a certificate's score threshold ``threshold``: stop once the same
               interval lies wholly on one side of it (the decision the certificate takes
               cannot change with more samples at that confidence; cf. the sequential
               tests of Wald 1945).

Every rule reads at least ``min`` samples; a stage stops at n (or m) whatever the rule
says. Methods are then scored on the samples actually drawn: an item may have fewer
samples than another. Every estimator of credo takes its set's size from the set
(C3's unbiased MMD² with its own n and m, self-consistency's share of k, semantic
entropy's clusters of k); the follow-ups (verbalized, P(True), CCP) are asked about the
originals drawn (``baselines.followups`` still caps them); APriCoT's verdicts keep
``baselines.apricot_samples`` (default n, the configured one).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence

import numpy as np
from scipy.stats import beta

from credo.config import AdaptiveConfig

__all__ = [
    "DEFAULT_EPSILON",
    "ORIGINAL_STAGE",
    "PERTURBED_STAGE",
    "POSTERIOR_DRAWS",
    "RULES",
    "c3_interval",
    "epsilon_of",
    "modal_share_interval",
    "next_size",
    "settled",
    "window_of",
]

RULES = ("consensus", "interval", "decision")
"""The stopping rules, by ``adaptive.rule`` / ``--adaptive RULE``."""

ORIGINAL_STAGE = "original"
PERTURBED_STAGE = "perturbed"

DEFAULT_EPSILON = 0.25
"""The interval rule's default width: a 95% interval on a [0, 1] score a quarter wide."""

POSTERIOR_DRAWS = 2000
"""Monte Carlo draws of the Dirichlet posteriors behind C3's interval."""

_SEED = 24  # the number: any fixed seed makes the interval a function of the answers

Answers = Sequence[Hashable | None]


def epsilon_of(config: AdaptiveConfig) -> float:
    """The interval rule's width: ``epsilon``, else :data:`DEFAULT_EPSILON`."""
    return DEFAULT_EPSILON if config.epsilon is None else config.epsilon


def window_of(config: AdaptiveConfig) -> int:
    """The consensus rule's window: ``window``, else one round (at least 2)."""
    return config.window if config.window is not None else max(2, config.round)


def next_size(drawn: int, cap: int, config: AdaptiveConfig) -> int:
    """How many samples an item's set holds after its next round: ``min`` first, then
    ``round`` more each time, never more than ``cap`` (n or m)."""
    return min(cap, config.min if drawn == 0 else drawn + config.round)


def settled(config: AdaptiveConfig, originals: Answers, perturbed: Answers | None = None) -> bool:
    """Whether the stage stops: the original stage when ``perturbed`` is None (its rule
    reads ``originals``), else the perturbed stage (its rule reads both sets). Nothing is
    settled below ``min`` samples of the stage's set."""
    drawn = originals if perturbed is None else perturbed
    if len(drawn) < config.min:
        return False
    if config.rule == "consensus":
        window = drawn[-window_of(config):]
        return len(window) >= window_of(config) and window[0] is not None and all(
            a == window[0] for a in window
        )
    if perturbed is None:
        low, high = modal_share_interval(originals, config.confidence)
    else:
        low, high = c3_interval(originals, perturbed, config.confidence)
    if config.rule == "interval":
        return high - low < epsilon_of(config)
    assert config.threshold is not None  # the config refuses decision without one
    return low >= config.threshold or high < config.threshold


def modal_share_interval(answers: Answers, confidence: float = 0.95) -> tuple[float, float]:
    """The central ``confidence`` interval of the modal parsed answer's share under the
    Beta(c + 1, k − c + 1) posterior (c: the modal answer's count, k: all answers, an
    unparsable one counting against it)."""
    k = len(answers)
    counts = Counter(a for a in answers if a is not None)
    c = max(counts.values(), default=0)
    tail = (1.0 - confidence) / 2.0
    low, high = beta.ppf([tail, 1.0 - tail], c + 1, k - c + 1)
    return float(low), float(high)


def c3_interval(
    originals: Answers, perturbed: Answers, confidence: float = 0.95
) -> tuple[float, float]:
    """The central ``confidence`` interval of C3 = 1 − ‖p − q‖²/2 given the originals:
    p is their answer distribution (final when this stage runs; more perturbed samples
    cannot narrow its uncertainty), q the perturbed answers' under the Dirichlet(1 +
    counts) posterior over the answers seen (unparsable ones one category) and one unseen
    category; :data:`POSTERIOR_DRAWS` draws with a fixed seed."""
    categories = list(dict.fromkeys([*originals, *perturbed]))
    index = {a: i for i, a in enumerate(categories)}
    size = len(categories) + 1  # the last: an answer not seen yet
    p = np.zeros(size)
    q_counts = np.ones(size)
    for a in originals:
        p[index[a]] += 1.0 / len(originals)
    for a in perturbed:
        q_counts[index[a]] += 1
    q = np.random.default_rng(_SEED).dirichlet(q_counts, POSTERIOR_DRAWS)
    c3 = 1.0 - np.sum((p - q) ** 2, axis=1) / 2.0
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(c3, [tail, 1.0 - tail])
    return float(low), float(high)

"""Per-generation intervals resample questions (the cluster bootstrap).

Ten generations of one question are not ten independent observations: they share the
question's difficulty, and often its answer. A bootstrap that resamples generations one
by one treats them as independent and gives intervals too narrow (ECE [0.037, 0.064]
where resampling questions gives [0.036, 0.095] on a public pool). Here: the intervals of
the per-generation table, of :func:`bootstrap_cis` with ``clusters`` and of the paired
test equal a cluster bootstrap written out below from its definition (draw questions
with replacement, keep all their generations, percentile interval), and they are wider
than the generation-by-generation intervals when generations are correlated.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from credo.evaluate.bootstrap import bootstrap_cis
from credo.evaluate.paired import paired_bootstrap
from credo.evaluate.tables import evaluate_responses
from credo.methods.base import Score
from credo.methods.scoring import ItemResult
from credo.plan.samples import ORIGINAL, Sample
from credo.tasks.answers import Answer
from credo.tasks.base import Item

B, SEED = 400, 7


def _ece(s: np.ndarray, c: np.ndarray, bins: int = 10) -> float:
    """ECE by its definition: Σ_b |B_b|/N · |mean c − mean s| over equal-width bins."""
    k = np.minimum((s * bins).astype(int), bins - 1)
    return sum(abs(c[k == b].mean() - s[k == b].mean()) * (k == b).sum()
               for b in range(bins) if (k == b).any()) / s.size


def _auroc(s: np.ndarray, c: np.ndarray) -> float:
    return roc_auc_score(c, s) if 0 < c.sum() < c.size else math.nan


def _reference_draws(owner: np.ndarray, seed: int = SEED) -> list[np.ndarray]:
    """The rows of each cluster resample: questions drawn with replacement (numpy's
    ``default_rng(seed).integers(0, C, (B, C))``), all of a drawn question's rows kept."""
    questions = np.unique(owner)
    draws = np.random.default_rng(seed).integers(0, questions.size, (B, questions.size))
    groups = [np.flatnonzero(owner == q) for q in questions]
    return [np.concatenate([groups[k] for k in row]) for row in draws]


def _percentile(values: list[float]) -> tuple[float, float]:
    v = np.array(values)
    v = v[np.isfinite(v)]
    return tuple(np.percentile(v, [2.5, 97.5]))


def _correlated(questions: int = 60, per: int = 10, seed: int = 0):
    """Generations of one question share its difficulty q: scores near q, and mostly the
    question's own correctness (drawn once) rather than their own."""
    rng = np.random.default_rng(seed)
    q = rng.random(questions)
    shared = rng.random(questions) < q
    owner = np.repeat(np.arange(questions), per)
    s = np.clip(q[owner] + rng.normal(0, 0.03, owner.size), 0, 1).round(3)
    own = rng.random(owner.size) < q[owner]
    c = np.where(rng.random(owner.size) < 0.85, shared[owner], own).astype(float)
    return s, c, owner


def test_bootstrap_cis_with_clusters_is_the_cluster_bootstrap():
    s, c, owner = _correlated()
    got = bootstrap_cis(s, c, c, ["ece", "auroc", "brier"], n_resamples=B, seed=SEED,
                        clusters=owner)
    rows = _reference_draws(owner)
    assert got["ece"] == pytest.approx(_percentile([_ece(s[r], c[r]) for r in rows]), abs=1e-12)
    assert got["auroc"] == pytest.approx(_percentile([_auroc(s[r], c[r]) for r in rows]),
                                         abs=1e-12)
    assert got["brier"] == pytest.approx(
        _percentile([float(np.mean((s[r] - c[r]) ** 2)) for r in rows]), abs=1e-12)


def test_intervals_widen_with_correlated_generations():
    s, c, owner = _correlated()
    clustered = bootstrap_cis(s, c, c, ["ece", "auroc"], n_resamples=B, seed=SEED,
                              clusters=owner)
    one_by_one = bootstrap_cis(s, c, c, ["ece", "auroc"], n_resamples=B, seed=SEED)
    for metric in ("ece", "auroc"):
        wide = clustered[metric][1] - clustered[metric][0]
        narrow = one_by_one[metric][1] - one_by_one[metric][0]
        assert wide > 1.8 * narrow, (metric, wide, narrow)


def test_independent_generations_give_intervals_of_the_same_width():
    """The cluster bootstrap costs nothing where generations are independent."""
    rng = np.random.default_rng(1)
    owner = np.repeat(np.arange(150), 8)
    s = rng.random(owner.size).round(3)
    c = (rng.random(owner.size) < s).astype(float)
    clustered = bootstrap_cis(s, c, c, ["auroc"], n_resamples=B, seed=SEED, clusters=owner)
    one_by_one = bootstrap_cis(s, c, c, ["auroc"], n_resamples=B, seed=SEED)
    ratio = (clustered["auroc"][1] - clustered["auroc"][0]) / (
        one_by_one["auroc"][1] - one_by_one["auroc"][0])
    assert 0.75 < ratio < 1.33


def _items(s: np.ndarray, c: np.ndarray, owner: np.ndarray) -> list[ItemResult]:
    """Item results whose method 'm' scores each original generation (as answer
    consistency or a given per-sample score does)."""
    out = []
    for q in np.unique(owner):
        rows = np.flatnonzero(owner == q)
        samples = tuple(Sample(str(k), Answer(str(k), str(k))) for k in rows)
        correct = tuple(bool(c[k]) for k in rows)
        score = Score(float(s[rows].mean()), tuple(float(s[k]) for k in rows), ORIGINAL)
        out.append(ItemResult(Item(f"q{q}", "?", "x"), (), samples, (), correct,
                              {"m": score.value}, {ORIGINAL: samples}, {ORIGINAL: correct},
                              {"m": score}))
    return out


def test_the_per_generation_table_resamples_questions():
    s, c, owner = _correlated()
    table = evaluate_responses(_items(s, c, owner), ["m"], n_resamples=B, seed=SEED)["m"]
    rows = _reference_draws(owner)
    assert (table["ece_low"], table["ece_high"]) == pytest.approx(
        _percentile([_ece(s[r], c[r]) for r in rows]), abs=1e-12)
    assert (table["auroc_low"], table["auroc_high"]) == pytest.approx(
        _percentile([_auroc(s[r], c[r]) for r in rows]), abs=1e-12)
    assert table["n_responses"] == s.size and table["n_items"] == 60


def test_the_paired_test_resamples_questions_for_both_methods():
    s, c, owner = _correlated()
    rng = np.random.default_rng(5)
    other = np.clip(s + rng.normal(0, 0.1, s.size), 0, 1).round(3)
    got = paired_bootstrap(s, other, c, metrics=("auroc", "ece"), n_resamples=B, seed=SEED,
                           clusters=owner)
    rows = _reference_draws(owner)
    for metric, fn in (("auroc", _auroc), ("ece", _ece)):
        reps = np.array([fn(s[r], c[r]) - fn(other[r], c[r]) for r in rows])
        reps = reps[np.isfinite(reps)]
        want = np.quantile(reps, [0.025, 0.975])
        assert (got[metric].low, got[metric].high) == pytest.approx(tuple(want), abs=1e-12)
        below, above = (np.sum(reps <= 0) + 1) / (reps.size + 1), (np.sum(reps >= 0) + 1) / (
            reps.size + 1)
        assert got[metric].p_value == pytest.approx(min(1.0, 2 * min(below, above)))
        assert got[metric].n_clusters == 60
    assert got["auroc"].delta == pytest.approx(_auroc(s, c) - _auroc(other, c), abs=1e-12)


def test_one_question_has_nothing_to_resample():
    s = np.array([0.2, 0.4, 0.9])
    c = np.array([0.0, 1.0, 1.0])
    got = bootstrap_cis(s, c, c, ["auroc"], n_resamples=50, clusters=[3, 3, 3])
    assert all(math.isnan(v) for v in got["auroc"])

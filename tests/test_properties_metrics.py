"""Property-based tests of every evaluation metric (issue 21).

Hypothesis draws scores and targets as runs produce them: ties, scores on the bin edges
(0.1, 0.3, 1.0), a single class, constant scores or quality, n = 1..60 drawn value by
value, and n up to 10^5 from a seeded generator (a few examples only). The metrics are
those of the registry (:data:`credo.evaluate.bootstrap.NAMED_METRICS`, the tables'
:data:`credo.evaluate.tables.METRICS`) with the discrete-level ECE, the calibration
correlation and the polarisation entropy; the weighted bootstrap engine; the bootstrap
CIs; and the tables that put them together.

Properties: every value lies in its documented range, exactly, or is NaN for the
documented reason (one class, constant quality, no items); values equal scikit-learn's
and scipy's where they define the metric, and brute-force definitions elsewhere (ECE and
MCE bin by bin, AUARC averaged over every order of the tied scores); the weighted engine
equals the row functions on every resample; a CI is ordered, inside the range, the
percentile interval of the resampled metric, nested in the wider one, and collapses to
the point estimate when every item is alike.
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from sklearn.metrics import average_precision_score, brier_score_loss, roc_auc_score

from credo.evaluate.bootstrap import (
    NAMED_METRICS,
    bootstrap_ci,
    bootstrap_cis,
    calibration_correlation,
    calibration_curve,
    percentile_interval,
    polarisation_entropy,
    row_metrics,
)
from credo.evaluate.metrics import (
    auarc,
    auprc_neg,
    auprc_pos,
    auroc,
    brier,
    ece,
    ece_discrete,
    labels_from_performance,
    mce,
    prr,
)
from credo.evaluate.tables import METRICS, evaluate_items, evaluate_responses
from credo.evaluate.weighted import FAST_METRICS, LABEL_METRICS, WeightedSample, resample_indices
from credo.methods import Score
from credo.methods.scoring import ItemResult
from credo.plan.samples import ORIGINAL
from credo.tasks.base import Item
from credo.ties import settle_scores

# scipy warns that Pearson r of bin means that barely differ is inaccurate; r stays in range
pytestmark = pytest.mark.filterwarnings("ignore::scipy.stats.NearConstantInputWarning")

#: Documented ranges: PRR is at most 1 (the oracle's order) and unbounded below.
RANGES = {m: (0.0, 1.0) for m in FAST_METRICS} | {"prr": (-math.inf, 1.0)}

# ----------------------------------------------------------------------- strategies

_EDGES = [0.0, 1.0, 0.5, 0.1, 0.3, 0.7, 0.95, 1 / 3, 2 / 3, 0.1 + 0.2, 5e-324, 1 - 2**-53]
_SCORE = st.one_of(st.sampled_from(_EDGES), st.floats(0.0, 1.0))
#: p̄ as runs produce it: k/n over n samples, 0/1 correctness, a grader's fraction
_PERF = st.one_of(
    st.sampled_from([0.0, 1.0, 0.5, 0.2, 0.8, 1 / 3, 2 / 3]),
    st.builds(lambda k, n: min(k, n) / n, st.integers(0, 40), st.integers(1, 40)),
    st.floats(0.0, 1.0).map(lambda x: round(x, 6)),
)


@st.composite
def scored_items(draw, min_size: int = 1, max_size: int = 60):
    """(scores, p̄) of n items; some draws constant scores, constant p̄ or one class. The
    scores are settled as every metric reads them (:func:`credo.ties.settle`: 5e-324 is
    0), so that the references below see the same numbers."""
    n = draw(st.integers(min_size, max_size))
    mode = draw(st.sampled_from(["free", "few values", "constant scores", "constant p",
                                 "one class", "0/1 correctness"]))
    score = st.sampled_from(draw(st.lists(_SCORE, min_size=1, max_size=3))) \
        if mode == "few values" else _SCORE
    s = settle_scores(draw(st.lists(score, min_size=n, max_size=n)))
    p = np.array(draw(st.lists(_PERF, min_size=n, max_size=n)))
    if mode == "constant scores":
        s[:] = s[0]
    elif mode == "constant p":
        p[:] = p[0]
    elif mode == "one class":
        p = np.where(p >= 0.5, p, 1.0) if draw(st.booleans()) else np.minimum(p, 0.49)
    elif mode == "0/1 correctness":
        p = (p >= 0.5).astype(float)
    return s, p


@st.composite
def big_items(draw):
    """(scores, p̄) of 10^4 or 10^5 items from a seeded generator: scores rounded to a
    few digits (ties), p̄ = k/5 loosely tied to the score."""
    n = draw(st.sampled_from([10**4, 10**5]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    s = rng.random(n).round(draw(st.integers(1, 4)))
    p = rng.binomial(5, np.clip(s + rng.normal(0, 0.3, n), 0, 1)) / 5
    return s, p


def _point(metric: str, s: np.ndarray, p: np.ndarray) -> float:
    target = labels_from_performance(p) if metric in LABEL_METRICS else p
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # one class: NaN, warned
        return NAMED_METRICS[metric](s, target)


def _undefined(metric: str, p: np.ndarray) -> bool:
    """The documented reasons a metric is NaN."""
    y = labels_from_performance(p)
    return p.size == 0 or {
        "auroc": y.min() == y.max(),
        "auprc_pos": y.sum() == 0,
        "auprc_neg": y.sum() == y.size,
        "prr": p.min() == p.max(),
    }.get(metric, False)


def _in_range(metric: str, value: float) -> bool:
    lo, hi = RANGES[metric]
    return bool(lo <= value <= hi) and not math.isinf(value)


# ------------------------------------------------------------------- point estimates


def test_every_metric_of_the_registry_is_covered():
    assert set(NAMED_METRICS) == set(FAST_METRICS) == set(METRICS) == set(RANGES)
    assert list(row_metrics()) == list(FAST_METRICS)


@given(scored_items())
def test_every_metric_is_in_its_range_or_undefined_for_its_reason(drawn):
    s, p = drawn
    for metric in NAMED_METRICS:
        value = _point(metric, s, p)
        if _undefined(metric, p):
            assert math.isnan(value), metric
        else:
            assert _in_range(metric, value), (metric, value)
    levels = np.linspace(0, 1, 6)
    assert 0.0 <= ece_discrete(s, p, levels) <= 1.0
    assert 0.0 <= mce(s, p, levels=levels) <= 1.0
    r = calibration_correlation(s, p)
    assert math.isnan(r) or -1.0 <= r <= 1.0
    h = polarisation_entropy(s)
    assert 0.0 <= h <= 1.0
    assert h == 0.0 if np.ptp(np.minimum((s * 10).astype(int), 9)) == 0 else h > 0.0


def _ece_by_bins(s, p, n_bins=10, mce_=False):
    """ECE (or MCE) bin by bin, as 000 App. E.2 writes it."""
    bins = [min(math.floor(x * n_bins), n_bins - 1) for x in s]
    gaps = []
    for b in set(bins):
        idx = [i for i, k in enumerate(bins) if k == b]
        gaps.append((len(idx), abs(np.mean(p[idx]) - np.mean(s[idx]))))
    return max(g for _, g in gaps) if mce_ else sum(c * g for c, g in gaps) / len(s)


def _auarc_over_orders(s, q):
    """AUARC averaged over every order of the tied scores (the definition :func:`auarc`
    states), by enumerating the orders: for n <= 7 items."""
    groups = [[i for i in range(len(s)) if s[i] == v] for v in sorted(set(s), reverse=True)]
    areas = []
    for perms in itertools.product(*(itertools.permutations(g) for g in groups)):
        order = [i for g in perms for i in g]
        kept = np.cumsum(q[order]) / np.arange(1, len(q) + 1)
        areas.append(kept.mean())
    return float(np.mean(areas))


@given(scored_items())
def test_metrics_equal_scikit_learn_scipy_and_their_definitions(drawn):
    s, p = drawn
    y = labels_from_performance(p)
    if 0 < y.sum() < y.size:
        assert auroc(s, y) == pytest.approx(roc_auc_score(y, s), abs=1e-12)
        u = stats.mannwhitneyu(s[y == 1], s[y == 0]).statistic
        assert auroc(s, y) == pytest.approx(u / (y.sum() * (y.size - y.sum())), abs=1e-12)
    if y.sum() > 0:
        assert auprc_pos(s, y) == pytest.approx(average_precision_score(y, s), abs=1e-12)
    if y.sum() < y.size:
        assert auprc_neg(s, y) == pytest.approx(
            average_precision_score(1 - y, 1 - s), abs=1e-12)
    if 0 < y.sum() < y.size:
        assert brier(s, y) == pytest.approx(brier_score_loss(y, s), abs=1e-12)
    assert brier(s, y) == pytest.approx(float(np.mean((s - y) ** 2)), abs=1e-12)
    assert ece(s, p) == pytest.approx(_ece_by_bins(s, p), abs=1e-12)
    assert mce(s, p) == pytest.approx(_ece_by_bins(s, p, mce_=True), abs=1e-12)
    mean_s, mean_c, counts = calibration_curve(s, p)
    occupied = counts > 0
    assert polarisation_entropy(s) == pytest.approx(
        stats.entropy(counts) / math.log(10), abs=1e-12)
    r = calibration_correlation(s, p)
    if not math.isnan(r):
        assert r == pytest.approx(stats.pearsonr(mean_s[occupied], mean_c[occupied])[0],
                                  abs=1e-9)
    if s.size <= 7:
        ref = _auarc_over_orders(s, p)
        assert auarc(s, p) == pytest.approx(ref, abs=1e-12)
        if p.min() < p.max():
            oracle, random = _auarc_over_orders(p, p), p.mean()
            assert prr(s, p) == pytest.approx((ref - random) / (oracle - random), abs=1e-9)


@given(scored_items(min_size=2))
def test_scores_in_the_qualitys_order_have_prr_one(drawn):
    """PRR = 1 exactly when the scores order the items as the quality does (any monotone
    map of it); its documented maximum."""
    _, p = drawn
    if p.min() < p.max():
        assert prr(p, p) == 1.0
        assert prr(p / 2 + 0.25, p) == 1.0


@settings(max_examples=3)
@given(big_items())
def test_big_n_metrics_in_range_and_equal_to_scikit_learn(drawn):
    s, p = drawn
    y = labels_from_performance(p)
    for metric in NAMED_METRICS:
        assert _in_range(metric, _point(metric, s, p)), metric
    assert auroc(s, y) == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    assert auprc_pos(s, y) == pytest.approx(average_precision_score(y, s), abs=1e-12)
    assert ece(s, p) == pytest.approx(_ece_by_bins(s, p), abs=1e-9)
    cis = bootstrap_cis(s, p, y, n_resamples=20, seed=1)
    for metric, (lo, hi) in cis.items():
        assert lo <= hi and _in_range(metric, lo) and _in_range(metric, hi), metric


# -------------------------------------------------------------------------- bootstrap


def _reference_distribution(metric, s, p, n_resamples, seed):
    """The metric on every resample, materialised and evaluated by the row functions."""
    target = labels_from_performance(p).astype(float) if metric in LABEL_METRICS else p
    idx = np.concatenate(list(resample_indices(s.size, n_resamples, seed)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return row_metrics()[metric].rows(s[idx], target[idx])


@given(scored_items(min_size=2, max_size=30), st.integers(0, 2**16))
def test_weighted_engine_equals_the_row_functions_on_every_resample(drawn, seed):
    s, p = drawn
    y = labels_from_performance(p)
    sample = WeightedSample(s, p, y)
    w = sample.weights(next(resample_indices(s.size, 20, seed)))
    got = sample.evaluate(w, FAST_METRICS)
    for metric in FAST_METRICS:
        want = _reference_distribution(metric, s, p, 20, seed)
        np.testing.assert_allclose(got[metric], want, rtol=0, atol=1e-12, err_msg=metric)
        values = got[metric][np.isfinite(got[metric])]
        assert all(_in_range(metric, v) for v in values), (metric, values.min(), values.max())


@given(scored_items(min_size=1, max_size=25), st.integers(0, 2**16))
def test_bootstrap_cis_are_the_documented_percentile_intervals(drawn, seed):
    s, p = drawn
    y = labels_from_performance(p)
    wide = bootstrap_cis(s, p, y, n_resamples=40, seed=seed)
    narrow = bootstrap_cis(s, p, y, n_resamples=40, seed=seed, confidence=0.5)
    for metric in FAST_METRICS:
        lo, hi = wide[metric]
        if s.size < 2:  # one item: nothing to resample
            assert math.isnan(lo) and math.isnan(hi)
            continue
        dist = _reference_distribution(metric, s, p, 40, seed)
        undefined = np.isnan(dist).sum()
        if undefined * 2 > dist.size:  # more than half the resamples undefined: n/a
            assert math.isnan(lo) and math.isnan(hi), metric
            continue
        assert (lo, hi) == pytest.approx(percentile_interval(dist), abs=1e-12), metric
        assert lo <= hi and _in_range(metric, lo) and _in_range(metric, hi), metric
        n_lo, n_hi = narrow[metric]
        assert lo <= n_lo <= n_hi <= hi, metric  # the 50% interval inside the 95% one


@given(st.integers(2, 50), _SCORE, _PERF, st.integers(0, 2**16))
def test_a_ci_of_alike_items_is_the_point_estimate(n, score, perf, seed):
    """Every resample of n identical items is the sample itself: the interval collapses
    onto the point estimate (NaN where the metric is undefined on one class)."""
    s, p = np.full(n, score), np.full(n, perf)
    for metric, (lo, hi) in bootstrap_cis(s, p, labels_from_performance(p), n_resamples=30,
                                          seed=seed).items():
        point = _point(metric, s, p)
        if math.isnan(point):
            assert math.isnan(lo) and math.isnan(hi), metric
        else:
            assert lo == pytest.approx(point, abs=1e-12) and hi == pytest.approx(
                point, abs=1e-12), metric


@given(scored_items(min_size=2, max_size=30), st.sampled_from(sorted(NAMED_METRICS)))
def test_bootstrap_ci_by_name_is_the_engines_interval(drawn, metric):
    s, p = drawn
    target = labels_from_performance(p) if metric in LABEL_METRICS else p
    lo, hi = bootstrap_ci(metric, s, target, n_resamples=50, seed=3)
    want = bootstrap_cis(s, p, labels_from_performance(p), [metric], n_resamples=50,
                         seed=3)[metric]
    if math.isnan(want[0]):
        assert math.isnan(lo) and math.isnan(hi)
    else:
        assert (lo, hi) == pytest.approx(want, abs=1e-12)


# ----------------------------------------------------------------------------- tables


def _results(s: np.ndarray, p: np.ndarray, missing: list[bool],
             responses: list[tuple[float | None, ...]] | None = None) -> list[ItemResult]:
    """One ItemResult per item: 5 original samples whose correctness gives p̄ ≈ p; the
    method 'm' scores s (and ``responses`` per sample), or is not available where
    ``missing``."""
    out = []
    for i, (score, perf, gone) in enumerate(zip(s, p, missing, strict=True)):
        correct = tuple(k < round(perf * 5) for k in range(5))
        per_sample = responses[i] if responses else ()
        sc = Score.not_available("no perturbed samples") if gone else Score(
            float(score), per_sample, ORIGINAL, LEVELS if responses else None)
        out.append(ItemResult(Item(f"q{i}", "?", "1"), (), (), (), correct, {"m": sc.value},
                              {}, {ORIGINAL: correct}, {"m": sc}))
    return out


LEVELS = (0.0, 0.25, 0.5, 0.75, 1.0)  # e.g. Answer Consistency's j/(n − 1) for n = 5


def _check_row(row: dict, target: np.ndarray) -> None:
    """Every figure of a table row in its range, or NaN for its documented reason."""
    for metric in METRICS:
        if _undefined(metric, target):
            assert math.isnan(row[metric]), metric
        else:
            assert _in_range(metric, row[metric]), (metric, row[metric])
        lo, hi = row.get(f"{metric}_low", math.nan), row.get(f"{metric}_high", math.nan)
        assert (math.isnan(lo) and math.isnan(hi)) or (lo <= hi and _in_range(metric, lo)
                                                        and _in_range(metric, hi)), metric
    for key, lo, hi in (("mean_score", 0, 1), ("pearson", -1, 1), ("polarisation", 0, 1),
                        ("ece_calibrated", 0, 1), ("brier_calibrated", 0, 1)):
        value = row.get(key, math.nan)
        assert math.isnan(value) or lo <= value <= hi, (key, value)


_CALIBRATE = st.sampled_from(["none", "none", "isotonic", "platt"])


@given(scored_items(max_size=25), st.data())
def test_the_item_table_holds_every_metric_in_range_or_undefined_for_its_reason(drawn, data):
    s, p = drawn
    missing = data.draw(st.lists(st.booleans(), min_size=s.size, max_size=s.size))
    items = _results(s, p, missing)
    row = evaluate_items(items, ["m"], n_resamples=data.draw(st.sampled_from([0, 30])),
                         calibrate=data.draw(_CALIBRATE))["m"]
    kept = [r for r, gone in zip(items, missing, strict=True) if not gone]
    assert row["n_items"] == len(kept)
    _check_row(row, np.array([r.performance for r in kept]))


@given(scored_items(max_size=20), st.data())
def test_the_response_table_holds_every_metric_in_range_or_undefined_for_its_reason(drawn,
                                                                                     data):
    s, p = drawn
    level = st.one_of(st.sampled_from(LEVELS), st.none())
    responses = [tuple(data.draw(st.lists(level, min_size=5, max_size=5))) for _ in s]
    items = _results(s, p, [False] * s.size, responses)
    rows = evaluate_responses(items, ["m"], n_resamples=data.draw(st.sampled_from([0, 30])),
                              calibrate=data.draw(_CALIBRATE))
    correct = [float(ok) for r, rs in zip(items, responses, strict=True)
               for v, ok in zip(rs, r.set_correct[ORIGINAL], strict=True) if v is not None]
    if not correct:  # no response has a confidence: no row
        assert rows == {}
        return
    assert rows["m"]["n_responses"] == len(correct)
    _check_row(rows["m"], np.array(correct))

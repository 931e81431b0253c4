"""Bootstrap CIs, calibration correlation and polarisation (002 §3.7, §4, Fig. 4)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import credo
import credo.evaluate.bootstrap
from credo.evaluate.bootstrap import (
    bootstrap_distribution,
    calibration_correlation,
    calibration_curve,
    polarisation_entropy,
)
from credo.evaluate.metrics import auroc, ece


def _data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    s = rng.random(n)
    y = (rng.random(n) < s).astype(float)
    return s, y


@pytest.mark.parametrize("metric", ["auroc", "ece", "auprc_pos", "auprc_neg"])
def test_ci_covers_point_estimate(metric: str) -> None:
    s, y = _data(60)
    low, high = credo.bootstrap_ci(metric, s, y)
    point = {"auroc": auroc, "ece": ece}.get(metric)
    if point is not None:
        assert low <= point(s, y) <= high
    assert 0.0 <= low < high <= 1.0


def test_ci_shrinks_with_n() -> None:
    widths = []
    for n in (30, 300, 3000):
        s, y = _data(n, seed=n)
        low, high = credo.bootstrap_ci("auroc", s, y, n_resamples=300)
        widths.append(high - low)
    assert widths[0] > widths[1] > widths[2]
    # The standard error of AUROC falls like 1/sqrt(n): a 10x larger sample, ~3.2x narrower.
    assert 2.0 < widths[1] / widths[2] < 5.0


def test_ci_is_the_percentiles_of_the_resampled_metric() -> None:
    s, y = _data(50)
    dist = bootstrap_distribution(ece, s, y, n_resamples=200, seed=3)
    assert dist.shape == (200,)
    low, high = credo.bootstrap_ci(ece, s, y, n_resamples=200, seed=3)
    assert (low, high) == pytest.approx(tuple(np.percentile(dist, [2.5, 97.5])))


def test_undefined_resamples_are_left_out() -> None:
    # One positive among 20: many resamples hold one class and AUROC is undefined there.
    s = np.linspace(0, 1, 20)
    y = np.zeros(20)
    y[-1] = 1
    dist = bootstrap_distribution("auroc", s, y, n_resamples=400)
    assert np.isnan(dist).any()
    low, high = credo.bootstrap_ci("auroc", s, y, n_resamples=400)
    assert math.isnan(low) or low <= 1.0 <= high + 1e-12


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="unknown metric"):
        credo.bootstrap_ci("f1", [0.1, 0.2], [0, 1])
    with pytest.raises(ValueError, match="equal length"):
        credo.bootstrap_ci("ece", [0.1, 0.2], [0.0])


def test_calibration_correlation_against_hand_bins() -> None:
    # Three occupied thirds with mean scores .15, .55, .95 and accuracies 0, .5, 1.
    s = np.array([0.1, 0.2, 0.5, 0.6, 0.9, 1.0])
    c = np.array([0, 0, 0, 1, 1, 1], dtype=float)
    _, _, counts = calibration_curve(s, c, n_bins=3)
    assert counts.sum() == 6
    r = stats.pearsonr([0.15, 0.55, 0.95], [0.0, 0.5, 1.0]).statistic
    assert calibration_correlation(s, c, n_bins=3) == pytest.approx(r)
    assert math.isnan(calibration_correlation([0.1, 0.9], [0, 1]))  # two bins only


def test_polarisation_entropy() -> None:
    assert polarisation_entropy(np.full(20, 0.99)) == 0.0
    uniform = (np.arange(10) + 0.5) / 10
    assert polarisation_entropy(uniform) == pytest.approx(1.0)
    # Two bins equally filled out of ten: log(2) / log(10).
    assert polarisation_entropy([0.05, 0.95]) == pytest.approx(math.log(2) / math.log(10))
    levels = np.linspace(0, 1, 11)
    assert polarisation_entropy([0.0, 0.1, 0.2], levels=levels) == pytest.approx(
        math.log(3) / math.log(11)
    )


def test_a_row_metric_bootstraps_all_resamples_in_one_call_with_the_same_values() -> None:
    from credo.evaluate.bootstrap import RowMetric
    from credo.evaluate.metrics import auroc_rows

    s, y = _data(40)
    fast = RowMetric(auroc_rows)
    assert fast(s, y) == pytest.approx(auroc(s, y))
    calls: list[tuple[int, ...]] = []

    def rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        calls.append(a.shape)
        return auroc_rows(a, b)

    d_rows = bootstrap_distribution(RowMetric(rows), s, y, n_resamples=200, seed=1)
    d_each = bootstrap_distribution(lambda a, b: fast(a, b), s, y, n_resamples=200, seed=1)
    assert calls == [(200, 40)]
    np.testing.assert_array_equal(d_rows, d_each)


def test_item_ece_interval_uses_the_runs_bins():
    """The bootstrap CI of the item-level ECE bins like its point value (``ece_bins``),
    not with the default 10 bins."""
    from functools import partial

    from credo.evaluate.bootstrap import bootstrap_ci
    from credo.evaluate.metrics import ece
    from credo.evaluate.tables import evaluate_items
    from credo.methods.base import Score
    from credo.methods.scoring import ItemResult
    from credo.tasks.base import Item

    rng = np.random.default_rng(3)
    scores = rng.uniform(0, 1, 40)
    correct = [tuple(bool(x) for x in rng.uniform(0, 1, 4) < s) for s in scores]
    items = [
        ItemResult(Item(f"i{k}", "q", "1"), (), (), (), c, {"m": float(s)},
                   method_scores={"m": Score(float(s))})
        for k, (s, c) in enumerate(zip(scores, correct, strict=True))
    ]
    perf = np.array([np.mean(c) for c in correct])
    d = evaluate_items(items, ["m"], n_bins=3, n_resamples=200, seed=5)
    assert d["m"]["ece"] == pytest.approx(ece(scores, perf, 3))
    lo, hi = bootstrap_ci(partial(ece, n_bins=3), scores, perf, 200, seed=5)
    assert (d["m"]["ece_low"], d["m"]["ece_high"]) == pytest.approx((lo, hi))
    ten = bootstrap_ci("ece", scores, perf, 200, seed=5)
    assert (lo, hi) != pytest.approx(ten)


# ------------------------------------------------ the weighted engine (issue 15)

from credo.evaluate import metrics as M  # noqa: E402
from credo.evaluate.weighted import FAST_METRICS, WeightedSample, resample_indices  # noqa: E402


def _plain(name, s, q, y, n_bins=10, levels=None):
    """The plain metric on one resample, through the row functions (scikit-learn's)."""
    S, Q, Y = s[None], q[None], y[None]
    rows = {
        "ece": lambda: M.ece_rows(S, Q, n_bins, levels),
        "mce": lambda: M.mce_rows(S, Q, n_bins, levels),
        "brier": lambda: M.brier_rows(S, Y),
        "auroc": lambda: M.auroc_rows(S, Y),
        "auprc_pos": lambda: M.average_precision_rows(S, Y),
        "auprc_neg": lambda: M.auprc_neg_rows(S, Y),
        "auarc": lambda: M.auarc_rows(S, Q),
        "prr": lambda: M.prr_rows(S, Q),
    }
    return rows[name]()[0]


def _cases():
    rng = np.random.default_rng(11)
    n = 30
    cont = rng.random(n)
    tied = rng.integers(0, 5, n) / 4
    p_bar = rng.integers(0, 4, n) / 3
    yield "continuous, p̄ quality", cont, p_bar, (p_bar >= 0.5).astype(float), {}
    yield "tied scores, 0/1 quality", tied, (rng.random(n) < tied).astype(float), None, {}
    yield "levels", tied, p_bar, (p_bar >= 0.5).astype(float), {"levels": np.linspace(0, 1, 5)}
    yield "7 bins", cont, p_bar, (p_bar >= 0.5).astype(float), {"n_bins": 7}
    cq = rng.random(n)  # continuous quality: > 64 distinct values needs n > 64
    big = rng.random(100)
    yield "continuous quality", big, np.concatenate([cq, rng.random(70)]), (
        rng.random(100) < 0.5).astype(float), {}
    yield "one class", cont, np.ones(n), np.ones(n), {}
    yield "all scores equal", np.full(n, 0.4), p_bar, (p_bar >= 0.5).astype(float), {}
    # 1 − s merges scores that differ: 1 − 1e-17 == 1 − 0 in floating point
    yield "1 − s collisions", np.array([0.0, 1e-17, 2e-17, 0.5, 0.5, 1.0] * 3), (
        np.array([1, 0, 1, 0, 1, 1] * 3, dtype=float)), None, {}
    yield "two items", np.array([0.2, 0.7]), np.array([0.0, 1.0]), None, {}


@pytest.mark.parametrize("case", list(_cases()), ids=lambda c: c[0])
def test_weights_over_one_sort_equal_the_plain_metrics_on_the_same_resamples(case):
    """The fast path equals the plain resample loop: same indices -> multiplicities."""
    _, s, q, y, bins = case
    y = q if y is None else y
    sample = WeightedSample(s, q, y, **bins)
    idx = np.random.default_rng(1).integers(0, s.size, (60, s.size))
    fast = sample.evaluate(sample.weights(idx), FAST_METRICS)
    for m in FAST_METRICS:
        plain = np.array([_plain(m, s[i], q[i], y[i], **bins) for i in idx])
        np.testing.assert_allclose(fast[m], plain, rtol=0, atol=1e-12, err_msg=m)
    # on the identity weights: the metric of the sample itself
    full = sample.evaluate(np.ones((1, s.size), dtype=int), FAST_METRICS)
    for m in FAST_METRICS:
        np.testing.assert_allclose(full[m], [_plain(m, s, q, y, **bins)], atol=1e-12)


def test_the_resample_indices_are_scipys_in_any_batch_size(monkeypatch):
    import credo.evaluate.weighted as w

    whole = np.random.default_rng(4).integers(0, 37, (300, 37))
    for elements in (1, 37 * 7, 1 << 21):
        monkeypatch.setattr(w, "_BATCH_ELEMENTS", elements)
        np.testing.assert_array_equal(np.concatenate(list(resample_indices(37, 300, 4))), whole)


@pytest.mark.parametrize("metric", FAST_METRICS)
def test_named_bootstrap_equals_scipys_loop_over_the_plain_metric(metric):
    """bootstrap_distribution by name (weighted) == scipy.stats.bootstrap over the plain
    one-sample function, resample by resample."""
    import warnings

    s, y = _data(45, seed=2)
    s = np.round(s, 1)  # ties
    fn = credo.evaluate.bootstrap.NAMED_METRICS[metric]
    fast = bootstrap_distribution(metric, s, y, n_resamples=150, seed=9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        slow = bootstrap_distribution(lambda a, b: fn(a, b), s, y, n_resamples=150, seed=9)
    np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-12)


def test_bootstrap_cis_is_bootstrap_ci_for_every_metric_at_once():
    from credo.evaluate.bootstrap import bootstrap_cis

    s, y = _data(80, seed=3)
    perf = np.clip(y * 0.7 + 0.3 * np.round(s, 1), 0, 1)
    labels = (perf >= 0.5).astype(float)
    cis = bootstrap_cis(s, perf, labels, n_resamples=200, seed=4)
    assert set(cis) == set(FAST_METRICS)
    for m, (lo, hi) in cis.items():
        target = labels if m in ("brier", "auroc", "auprc_pos", "auprc_neg") else perf
        assert (lo, hi) == pytest.approx(credo.bootstrap_ci(m, s, target, 200, seed=4), abs=1e-12)
        assert lo <= hi
    assert all(math.isnan(v) for v in bootstrap_cis([0.5], [1.0])["ece"])  # one item
    with pytest.raises(ValueError, match="unknown metrics"):
        bootstrap_cis(s, perf, metrics=["f1"])


def test_a_metric_undefined_on_most_resamples_has_no_interval():
    from credo.evaluate.bootstrap import bootstrap_cis

    s = np.linspace(0, 1, 30)
    q = np.ones(30)
    cis = bootstrap_cis(s, q, n_resamples=100)
    assert all(math.isnan(v) for v in cis["auroc"] + cis["prr"] + cis["auprc_neg"])
    assert cis["auprc_pos"] == (1.0, 1.0) and not math.isnan(cis["ece"][0])


def test_worker_threads_do_not_change_the_distribution(monkeypatch):
    import credo.evaluate.weighted as w

    rng = np.random.default_rng(8)
    s = rng.random(3000)
    y = (rng.random(3000) < s).astype(float)
    sample = WeightedSample(s, y, y)
    monkeypatch.setattr(w, "_BATCH_ELEMENTS", 3000 * 16)  # 16 resamples a batch: 19 batches
    monkeypatch.setattr(w, "THREADS", 1)
    one = w.weighted_bootstrap(sample, FAST_METRICS, 300, seed=5)
    monkeypatch.setattr(w, "THREADS", 2)
    two = w.weighted_bootstrap(sample, FAST_METRICS, 300, seed=5)
    for m in FAST_METRICS:
        np.testing.assert_array_equal(one[m], two[m])

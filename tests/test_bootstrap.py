"""Bootstrap CIs, calibration correlation and polarisation (002 §3.7, §4, Fig. 4)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import credo
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

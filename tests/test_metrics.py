"""Evaluation metrics (000 App. E.2) against hand computations and independent formulas."""

import math

import numpy as np
import pytest
from scipy.stats import mannwhitneyu
from sklearn.metrics import average_precision_score

from credo import auprc_neg, auprc_pos, auroc, ece
from credo.evaluate.metrics import ece_discrete, labels_from_performance


def test_ece_constructed_case_by_hand():
    # bins of width 0.1: {0.05} -> |0 - .05|, {0.15} -> |1 - .15|, {.95, .95} -> |.75 - .95|
    scores = [0.05, 0.15, 0.95, 0.95]
    perf = [0.0, 1.0, 1.0, 0.5]
    assert ece(scores, perf) == pytest.approx((0.05 + 0.85 + 2 * 0.2) / 4)


def test_ece_score_one_falls_in_last_bin_and_perfect_calibration_is_zero():
    assert ece([1.0, 1.0], [1.0, 1.0]) == pytest.approx(0.0)
    assert ece([0.95, 1.0], [0.975, 0.975]) == pytest.approx(0.0)


def _ece_loop(s, p, B):
    total = 0.0
    for b in range(B):
        lo, hi = b / B, (b + 1) / B
        idx = [i for i, x in enumerate(s) if (lo <= x < hi) or (b == B - 1 and x == 1.0)]
        if idx:
            total += len(idx) * abs(np.mean([p[i] for i in idx]) - np.mean([s[i] for i in idx]))
    return total / len(s)


@pytest.mark.parametrize("seed", range(5))
def test_ece_equals_a_second_implementation(seed):
    rng = np.random.default_rng(seed)
    s = rng.random(200).round(3)
    p = rng.random(200)
    assert ece(s, p, n_bins=10) == pytest.approx(_ece_loop(list(s), list(p), 10))
    assert ece(s, p, n_bins=7) == pytest.approx(_ece_loop(list(s), list(p), 7))


def test_ece_discrete_uses_one_bin_per_level():
    levels = np.linspace(0, 1, 11)
    s = [0.3, 0.3, 0.7]
    p = [0.0, 1.0, 1.0]
    # level 0.3: |0.5 - 0.3| * 2, level 0.7: |1 - 0.7|
    assert ece_discrete(s, p, levels) == pytest.approx((2 * 0.2 + 0.3) / 3)


@pytest.mark.parametrize("seed", range(5))
def test_auroc_equals_mann_whitney(seed):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, 80)
    s = np.clip(0.3 * y + rng.random(80) * 0.7, 0, 1)
    u = mannwhitneyu(s[y == 1], s[y == 0]).statistic
    assert auroc(s, y) == pytest.approx(u / ((y == 1).sum() * (y == 0).sum()))


def test_auprc_pos_and_neg_equal_scikit_learn():
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 50)
    s = rng.random(50)
    assert auprc_pos(s, y) == pytest.approx(average_precision_score(y, s))
    assert auprc_neg(s, y) == pytest.approx(average_precision_score(1 - y, 1 - s))


def test_auprc_by_hand():
    # ranking by score: 0.9 (pos), 0.8 (neg), 0.7 (pos): AP = (1/1 + 2/3) / 2
    assert auprc_pos([0.9, 0.8, 0.7], [1, 0, 1]) == pytest.approx((1 + 2 / 3) / 2)
    # by 1 - s: 0.3 (pos item), 0.2 (the negative), 0.1 -> precision 1/2 at its rank
    assert auprc_neg([0.9, 0.8, 0.7], [1, 0, 1]) == pytest.approx(0.5)


def test_single_class_gives_nan_not_a_crash():
    with pytest.warns(UserWarning):
        assert math.isnan(auroc([0.2, 0.9], [1, 1]))
    with pytest.warns(UserWarning):
        assert math.isnan(auprc_neg([0.2, 0.9], [1, 1]))


def test_labels_threshold_is_inclusive():
    assert labels_from_performance([0.5, 0.49, 1.0]).tolist() == [1, 0, 1]


def test_input_validation_names_the_argument():
    with pytest.raises(ValueError, match="scores"):
        ece([1.2], [0.5])
    with pytest.raises(ValueError, match="differ in length"):
        auroc([0.1, 0.2], [1])
    with pytest.raises(ValueError, match="labels"):
        auroc([0.1, 0.2], [1, 2])


def test_row_functions_give_every_row_its_own_value():
    from credo.evaluate.metrics import auprc_neg_rows, auroc_rows, average_precision_rows

    rng = np.random.default_rng(4)
    s = rng.integers(0, 4, (8, 12)) / 3
    y = (rng.uniform(0, 1, (8, 12)) < 0.5).astype(int)
    y[0] = 1  # one class: AUROC and AUPRC-N undefined
    y[1] = 0  # no positive: AUROC and AUPRC-P undefined
    for fn in (auroc_rows, average_precision_rows, auprc_neg_rows):
        together = fn(s, y)
        alone = np.array([fn(s[i : i + 1], y[i : i + 1])[0] for i in range(8)])
        np.testing.assert_array_equal(together, alone)
    assert np.isnan(auroc_rows(s, y)[:2]).all()
    assert np.isnan(average_precision_rows(s, y)[1]) and average_precision_rows(s, y)[0] == 1.0
    assert np.isnan(auprc_neg_rows(s, y)[0]) and auprc_neg_rows(s, y)[1] == 1.0
    for i in range(2, 8):
        assert auprc_pos(s[i], y[i]) == average_precision_rows(s, y)[i]
        assert auprc_neg(s[i], y[i]) == auprc_neg_rows(s, y)[i]


# ------------------------------------------------- MCE, Brier, AUARC, PRR (issue 15)


def test_mce_is_the_largest_gap_over_non_empty_bins():
    from credo import mce

    # the bins of the ECE hand case: gaps .05, .85, .2 -> MCE .85
    scores = [0.05, 0.15, 0.95, 0.95]
    perf = [0.0, 1.0, 1.0, 0.5]
    assert mce(scores, perf) == pytest.approx(0.85)
    assert mce([0.3, 0.3, 0.7], [0.0, 1.0, 1.0], levels=np.linspace(0, 1, 11)) == pytest.approx(0.3)
    assert mce([1.0, 1.0], [1.0, 1.0]) == 0.0
    assert math.isnan(mce([], []))


def test_brier_is_scikit_learns():
    from sklearn.metrics import brier_score_loss

    from credo import brier

    rng = np.random.default_rng(5)
    s, y = rng.random(40), rng.integers(0, 2, 40)
    assert brier(s, y) == pytest.approx(brier_score_loss(y, s))
    assert brier([0.9, 0.8], [1, 1]) == pytest.approx((0.01 + 0.04) / 2)  # one class: defined
    with pytest.raises(ValueError, match="labels"):
        brier([0.1], [0.5])


def _auarc_loop(s, q):
    """Mean quality of the kept items at every rejection level, by brute force over all
    orders of the tied items (the expectation the tie rule stands for)."""
    from itertools import permutations

    n = len(s)
    curves = []
    for perm in permutations(range(n)):
        order = sorted(perm, key=lambda i: -s[i])  # stable: ties in the order of perm
        curves.append([np.mean([q[i] for i in order[: n - j]]) for j in range(n)])
    return float(np.mean(curves))


def test_auarc_by_hand_and_with_ties():
    from credo import auarc

    # keep 3: (1+0+1)/3, keep 2: 1/2, keep 1: 1
    assert auarc([0.9, 0.8, 0.1], [1, 0, 1]) == pytest.approx((2 / 3 + 1 / 2 + 1) / 3)
    # a tie group shares its mean quality: keep 1 -> 0.5, keep 2 -> 0.5
    assert auarc([0.5, 0.5], [1, 0]) == pytest.approx(0.5)
    rng = np.random.default_rng(6)
    for _ in range(5):
        s = list(rng.integers(0, 3, 6) / 2)
        q = list(rng.integers(0, 4, 6) / 3)
        assert auarc(s, q) == pytest.approx(_auarc_loop(s, q))
    assert math.isnan(auarc([], []))


def test_prr_is_one_for_the_oracle_zero_for_no_information_and_nan_when_undefined():
    from credo import auarc, prr

    q = np.array([0.0, 0.2, 0.6, 1.0, 1.0])
    assert prr(q, q) == pytest.approx(1.0)
    assert prr(np.full(5, 0.5), q) == pytest.approx(0.0)  # one tie group: random
    assert prr(1 - q, q) < 0
    s = np.array([0.9, 0.1, 0.5, 0.7, 0.3])
    oracle, random = auarc(q, q), q.mean()
    assert prr(s, q) == pytest.approx((auarc(s, q) - random) / (oracle - random))
    assert math.isnan(prr([0.1, 0.9], [1.0, 1.0]))


def test_new_row_functions_give_every_row_its_own_value():
    from credo.evaluate.metrics import auarc_rows, brier_rows, mce_rows, prr_rows

    rng = np.random.default_rng(7)
    s = rng.integers(0, 4, (6, 9)) / 3
    q = rng.integers(0, 3, (6, 9)) / 2
    q[0] = 0.5  # constant quality: PRR undefined
    y = (q >= 0.5).astype(int)
    for fn, t in ((auarc_rows, q), (prr_rows, q), (mce_rows, q), (brier_rows, y)):
        together = fn(s, t)
        alone = np.array([fn(s[i : i + 1], t[i : i + 1])[0] for i in range(6)])
        np.testing.assert_allclose(together, alone, rtol=0, atol=1e-15)
    assert np.isnan(prr_rows(s, q)[0]) and not np.isnan(prr_rows(s, q)[1:]).any()


# ----------------------------------------------- one input validator (issue 31 item 4)

BAD_INPUTS = [
    ([0.2, 0.4], [1.0], "scores and .* differ in length: 2 != 1"),
    ([0.2, float("nan")], [1.0, 0.0], "scores contains NaN"),
    ([0.2, 1.5], [1.0, 0.0], r"scores must lie in \[0, 1\]"),
    ([0.2, float("inf")], [1.0, 0.0], r"scores must lie in \[0, 1\]"),
    ([[0.2, 0.4]], [[1.0, 0.0]], "scores must be 1-d"),
]


@pytest.mark.parametrize(("scores", "target", "message"), BAD_INPUTS)
def test_every_metric_and_its_function_refuse_bad_inputs_alike(scores, target, message):
    """The registry's metrics and the public one-sample functions go through one
    validator (metrics.metric_inputs): the same inputs raise the same error."""
    from credo.evaluate import metrics as M
    from credo.evaluate import registry

    functions = {"ece": M.ece, "mce": M.mce, "brier": M.brier, "auroc": M.auroc,
                 "auprc_pos": M.auprc_pos, "auprc_neg": M.auprc_neg, "auarc": M.auarc,
                 "prr": M.prr}
    for m in registry.registered():
        for fn in (m, functions.get(m.name)):
            if fn is None:
                continue
            with pytest.raises(ValueError, match=message):
                fn(scores, target)


@pytest.mark.parametrize("labels", [[0.0, 0.5], [2, 1], [float("nan"), 1.0]])
def test_a_label_metric_refuses_labels_other_than_0_and_1(labels):
    from credo.evaluate import metrics as M
    from credo.evaluate import registry

    for m in registry.registered(target="label"):
        with pytest.raises(ValueError, match="labels must be 0 or 1"):
            m([0.2, 0.4], labels)
    with pytest.raises(ValueError, match="labels must be 0 or 1"):
        M.auroc([0.2, 0.4], labels)
    with pytest.raises(ValueError, match=r"performance must lie in \[0, 1\]"):
        M.ece([0.2, 0.4], [1.5, 0.0])

"""credo.certify: certified thresholds for selective risk (issue 23 items 1, 2, 5).

Exact small cases against hand-computed binomial tails; Monte-Carlo validity on synthetic
data with a known P(correct | s) (a few hundred calibration draws, N = 300 and 1000); the
power condition of the issue (coverage at least 0.8 of the oracle's at N = 1000); the
message and item count when N is too small; JSON round trip; coverage_at_risk.
"""

import json
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.optimize import brentq
from scipy.special import expit
from scipy.stats import binom, norm

import credo
from credo.evaluate import Certificate, certify, coverage_at_risk
from credo.evaluate.certify import binomial_p_value, items_needed

ALPHA, DELTA = 0.1, 0.1


class Logistic:
    """s ~ N(0, 1), P(correct | s) = expit(a + b s) with base accuracy 0.6; true selective
    risk and coverage of any threshold by quadrature (as benchmarks/certify_power.py)."""

    x = np.linspace(-8.0, 8.0, 32001)
    w = norm.pdf(x) * (x[1] - x[0])

    def __init__(self, slope: float = 3.0) -> None:
        self.b = slope
        self.a = brentq(lambda a: (expit(a + slope * self.x) * self.w).sum() - 0.6, -9, 9)
        err = (1.0 - expit(self.a + slope * self.x)) * self.w
        self.tail_err = np.cumsum(err[::-1])[::-1]
        self.tail_w = np.cumsum(self.w[::-1])[::-1]

    def draws(self, d: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng(seed)
        s = rng.standard_normal((d, n))
        return s, rng.random((d, n)) < expit(self.a + self.b * s)

    def risk(self, t):
        return np.interp(t, self.x, self.tail_err) / np.interp(t, self.x, self.tail_w)

    def joint_risk(self, t):
        return np.interp(t, self.x, self.tail_err)

    def oracle_coverage(self, alpha: float) -> float:
        return float(norm.sf(brentq(lambda t: self.risk(t) - alpha, -8.0, 8.0)))


def _thresholds(s, c, **kw) -> np.ndarray:
    """Certified thresholds of each draw (row), NaN where none."""
    ts = [certify(si, ci, ALPHA, DELTA, **kw).threshold for si, ci in zip(s, c, strict=True)]
    return np.array([np.nan if t is None else t for t in ts])


# --- exact small cases ----------------------------------------------------------------------


def test_binomial_p_value_is_the_lower_binomial_tail():
    assert binomial_p_value(0, 22, 0.1) == pytest.approx(0.9**22)  # 0.0985
    assert binomial_p_value(0, 21, 0.1) == pytest.approx(0.9**21)  # 0.1094
    # 1 error in 30: 0.9^30 + 30 * 0.1 * 0.9^29
    assert binomial_p_value(1, 30, 0.1) == pytest.approx(0.9**30 + 3 * 0.9**29)
    assert binomial_p_value(0, 0, 0.1) == 1.0


def test_items_needed_matches_a_direct_count():
    assert items_needed(0.0, 0.1, 0.1) == 22  # 0.9^22 <= 0.1 < 0.9^21
    m = np.arange(1, 3000)
    brute = m[binom.cdf(np.floor(0.05 * m + 1e-9), m, 0.1) <= 0.1][0]
    assert items_needed(0.05, 0.1, 0.1) == brute
    assert items_needed(0.1, 0.1, 0.1) is None


def test_fixed_sequence_from_the_top_has_no_power_even_on_perfect_items():
    """The first threshold accepts one item: p = 0.9 > delta, and the sequence stops."""
    cert = certify(np.arange(200.0), np.ones(200), ALPHA, DELTA, "fixed-sequence")
    assert cert.threshold is None and cert.coverage == 0.0


def test_fixed_sequence_with_a_tied_top_group():
    """30 tied top scores, all correct: the first test has m = 30, p = 0.9^30 <= 0.1; the
    next adds one wrong item: P(Binom(31, .1) <= 1) = 0.9^31 + 3.1 * 0.9^30 = 0.15 > 0.1."""
    s = np.r_[np.ones(30), 0.5, 0.0]
    c = np.r_[np.ones(30), 0, 1]
    cert = certify(s, c, ALPHA, DELTA, "fixed-sequence")
    assert cert.threshold == 1.0 and cert.n_accepted == 30
    assert cert.p_value == pytest.approx(0.9**30)


def test_sgr_binary_search_by_hand():
    """128 correct items: 7 tests at 0.1 / 7; z = 64, 96, 112, 120, 124, 126, 127 all pass
    (0.9^64 = 0.0012 <= 0.0143), so the 127th highest score is returned (z = 128 is never
    tested). 64 items: 6 tests at 0.0167, z = 32 gives 0.9^32 = 0.034: nothing passes."""
    cert = certify(np.arange(128.0), np.ones(128), ALPHA, DELTA, "sgr")
    assert cert.threshold == 1.0 and cert.n_accepted == 127
    assert cert.p_value == pytest.approx(0.9**127)
    assert certify(np.arange(64.0), np.ones(64), ALPHA, DELTA, "sgr").threshold is None


def test_crc_by_hand():
    """N = 19, alpha = 0.1: (k + 1) / 20 <= 0.1 allows k <= 1 error; the 5th and 10th
    best items are wrong, so the 9th best score is the loosest threshold."""
    s = np.arange(19.0)[::-1]  # 18, 17, ..., 0
    c = np.ones(19)
    c[[4, 9]] = 0
    cert = certify(s, c, ALPHA, DELTA, "crc")
    assert cert.threshold == 10.0 and cert.n_accepted == 9
    assert cert.coverage == pytest.approx(9 / 19) and cert.delta is None


def test_crc_needs_at_least_one_over_alpha_minus_one_items():
    cert = certify(np.arange(8.0), np.ones(8), ALPHA, DELTA, "crc")  # 1/9 > 0.1
    assert cert.threshold is None and cert.n_needed == 9
    assert certify(np.arange(9.0), np.ones(9), ALPHA, DELTA, "crc").threshold == 0.0


def test_ltt_p_value_recomputed_on_its_test_items():
    s, c = Logistic().draws(1, 1000, seed=3)
    cert = certify(s[0], c[0], ALPHA, DELTA, "ltt", select_fraction=0.3, seed=11)
    perm = np.random.default_rng(11).permutation(1000)
    test = perm[300:]
    acc = s[0][test] >= cert.threshold
    k = int((~c[0][test][acc]).sum())
    assert cert.p_value == pytest.approx(binom.cdf(k, acc.sum(), ALPHA))
    assert cert.p_value <= DELTA


# --- too small: None, the message and how many items --------------------------------------


def test_too_few_items_gives_none_with_the_number_needed():
    """20 correct items: a test needs 22 accepted (0.9^22 <= 0.1 < 0.9^21) and ltt tests
    only the N - round(0.3 N) items outside its selection part (those at or above the
    threshold the selection part chose), so no N below the first whose test part holds 22
    can certify, and the estimate is at least that."""
    assert 0.9**22 <= DELTA < 0.9**21
    least = next(n for n in range(21, 100) if n - round(0.3 * n) >= 22)
    assert least == 31
    assert not any(certify(np.arange(float(least - 1)), np.ones(least - 1), ALPHA, DELTA,
                           seed=k, needed=False).certified for k in range(20))
    cert = certify(np.arange(20.0), np.ones(20), ALPHA, DELTA)
    assert cert.threshold is None and not cert.certified
    assert least <= cert.n_needed <= 1.5 * least
    assert "nothing certified" in cert.message
    assert f"about {cert.n_needed} items would be needed" in cert.message
    assert not cert.accept([100.0, 0.0]).any()


@pytest.mark.parametrize("method", ["ltt", "sgr"])
def test_the_number_needed_certifies_four_times_in_five(method):
    """The estimate is the size at which 80% of calibration sets drawn like the observed
    ones certify (issue 32's held-out run: the old estimate said n + 1 whenever it fell
    short, "about 101" of 100, where sets of 101 certify about 2 times in 5). Checked by
    a simulation of its own: new draws, other seeds."""
    s, c = Logistic().draws(1, 60, seed=5)
    cert = certify(s[0], c[0], ALPHA, DELTA, method)
    assert not cert.certified and cert.n_needed > 60
    rng = np.random.default_rng(2024)

    def power(size: int) -> float:
        draws = [rng.integers(0, 60, size) for _ in range(300)]
        return float(np.mean([certify(s[0][i], c[0][i], ALPHA, DELTA, method, needed=False,
                                      seed=int(rng.integers(2**31))).certified
                              for i in draws]))

    assert 0.7 <= power(cert.n_needed) and power(round(0.6 * cert.n_needed)) < 0.8
    assert f"about {cert.n_needed} items" in cert.message and "80%" in cert.message


def test_no_size_helps_when_every_top_set_errs_too_often():
    s = np.arange(50.0)
    c = (np.arange(50) + 1) % 2  # the best item is wrong, every top set errs >= 1/2
    cert = certify(s, c, ALPHA, DELTA)
    assert cert.threshold is None and cert.n_needed is None
    assert "no calibration size would" in cert.message


# --- validity and power (Monte Carlo) -------------------------------------------------------


@pytest.mark.parametrize("n", [300, 1000])
@pytest.mark.parametrize("method", ["ltt", "sgr"])
def test_violation_rate_at_most_delta(method, n):
    """Share of calibration draws whose certified threshold has true selective risk above
    alpha: at most delta + 2 Monte-Carlo standard errors (300 draws: 0.135)."""
    syn = Logistic()
    s, c = syn.draws(300, n, seed=n)
    t = _thresholds(s, c, method=method)
    violated = np.where(np.isnan(t), False, syn.risk(np.nan_to_num(t)) > ALPHA)
    assert violated.mean() <= DELTA + 2 * math.sqrt(DELTA * (1 - DELTA) / 300)


def test_power_at_n_1000_reaches_0_8_of_the_oracle():
    """The issue's bar: logistic P(correct | s), accuracy 0.6, N = 1000, alpha = delta =
    0.1: mean true coverage >= 0.8 x the oracle's (0.537); measured 0.89 (benchmark)."""
    syn = Logistic()
    s, c = syn.draws(200, 1000, seed=7)
    t = _thresholds(s, c)
    coverage = np.where(np.isnan(t), 0.0, norm.sf(np.nan_to_num(t)))
    assert coverage.mean() >= 0.8 * syn.oracle_coverage(ALPHA)


def test_crc_bounds_the_expected_answered_and_wrong_share():
    syn = Logistic()
    s, c = syn.draws(300, 300, seed=5)
    t = _thresholds(s, c, method="crc")
    joint = np.where(np.isnan(t), 0.0, syn.joint_risk(np.nan_to_num(t)))
    assert joint.mean() <= ALPHA + 2 * joint.std() / math.sqrt(300)


# --- properties of any certificate --------------------------------------------------------


@given(
    st.lists(st.tuples(st.integers(0, 20), st.booleans()), min_size=1, max_size=300),
    st.sampled_from(["ltt", "sgr", "fixed-sequence", "crc"]),
)
def test_any_threshold_returned_is_certified(items, method):
    s = np.array([x for x, _ in items], dtype=float) / 20.0  # ties, like self-consistency
    c = np.array([y for _, y in items])
    cert = certify(s, c, ALPHA, DELTA, method)
    if cert.threshold is None:
        assert cert.coverage == 0.0 and cert.n_accepted == 0
        return
    acc = cert.accept(s)
    k, m = int((~c[acc]).sum()), int(acc.sum())
    assert m == cert.n_accepted and cert.coverage == pytest.approx(m / s.size)
    if method == "crc":
        assert (k + 1) / (s.size + 1) <= ALPHA
    elif method == "sgr":
        assert cert.p_value <= DELTA / math.ceil(math.log2(s.size)) + 1e-12
    elif method == "fixed-sequence":
        assert cert.p_value == pytest.approx(binom.cdf(k, m, ALPHA)) and cert.p_value <= DELTA
    else:
        assert cert.p_value <= DELTA


# --- the certificate object ---------------------------------------------------------------


def test_certificate_json_round_trip_and_accept():
    s, c = Logistic().draws(1, 1000, seed=1)
    cert = certify(s[0], c[0])
    assert cert.certified and cert.procedure == "ltt" and cert.n == 1000
    back = Certificate.from_json(cert.to_json())
    assert back == cert
    assert json.loads(cert.to_json())["threshold"] == cert.threshold
    np.testing.assert_array_equal(back.accept(s[0]), s[0] >= cert.threshold)
    none = certify([0.1, 0.2], [1, 1])
    assert Certificate.from_json(none.to_json()) == none


def test_exported_from_credo():
    assert credo.certify is certify and credo.Certificate is Certificate
    assert credo.coverage_at_risk is coverage_at_risk


@pytest.mark.parametrize(
    ("scores", "correct", "kw", "match"),
    [
        ([0.1, 0.2], [1], {}, "one per item"),
        ([0.1, np.nan], [1, 0], {}, "finite"),
        ([0.1, 0.2], [1, 2], {}, "0/1"),
        ([], [], {}, "at least one"),
        ([0.1], [1], {"alpha": 0.0}, "alpha"),
        ([0.1], [1], {"delta": 1.0}, "delta"),
        ([0.1], [1], {"method": "bonferroni"}, "method"),
        ([[0.1]], [[1]], {}, "one-dimensional"),
    ],
)
def test_input_checks(scores, correct, kw, match):
    with pytest.raises(ValueError, match=match):
        certify(scores, correct, **kw)


# --- coverage_at_risk ---------------------------------------------------------------------


def test_coverage_at_risk_on_synthetic_run():
    syn = Logistic()
    s, c = syn.draws(1, 2000, seed=2)
    out = coverage_at_risk(s[0], c[0], ALPHA, DELTA, splits=20, seed=4)
    assert out.splits == 20 and out.method == "ltt" and out.calibration_fraction == 0.5
    assert out.coverage_q05 <= out.coverage_mean <= out.coverage_q95
    # N = 1000 calibration halves certify most of the oracle's 0.537, rarely above alpha
    assert 0.4 < out.coverage_mean < syn.oracle_coverage(ALPHA)
    assert out.certified_rate >= 0.9 and out.exceed_rate <= 0.3
    assert out.risk_mean < ALPHA
    assert coverage_at_risk(s[0], c[0], splits=20, seed=4) == out  # reproducible
    assert set(out.to_dict()) >= {"coverage_mean", "coverage_std", "exceed_rate"}


def test_coverage_at_risk_checks_its_split():
    with pytest.raises(ValueError, match="calibration_fraction"):
        coverage_at_risk([0.1, 0.2], [1, 1], calibration_fraction=1.0)
    with pytest.raises(ValueError, match="cannot be split"):
        coverage_at_risk([0.1], [1])

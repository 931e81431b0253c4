"""Conformal factuality (issue 33 items 3-4a): ``credo.certify_claims`` and its formulas.

Hand examples and brute-force recomputations (exact fractions, math.comb binomials) of
the nonconformity ``r(a)``, the conformal threshold and the Learn-then-Test threshold;
hypothesis properties (monotone in alpha and in a, a = 1 is the paper's score, retained
sets shrink as the threshold rises); and synthetic exchangeable draws with a closed-form
distribution of ``r``, on which the realised factuality and the violation rate are
compared with the guarantees.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import binom

import credo
from credo.evaluate.claims import (
    Claim,
    ClaimCertificate,
    ClaimItem,
    apply_claim_certificate,
    certify_claims,
    conformal_threshold,
    ltt_threshold,
    nonconformity,
    satisfies,
)

INF = math.inf

# --------------------------------------------------------------------------- brute force


def brute_r(scores, correct, a: Fraction) -> float:
    """``inf {t : every t' >= t keeps a set at least a share a correct}``, by checking
    every candidate threshold (the scores and -inf) with exact fractions."""
    cands = [*sorted(set(scores)), -INF]

    def ok(t):
        kept = [c for s, c in zip(scores, correct, strict=True) if s > t]
        return not kept or Fraction(sum(kept)) >= a * len(kept)

    return min(t for t in cands if all(ok(u) for u in cands if u >= t))


def brute_threshold(r, alpha: Fraction):
    """The smallest ``v`` among ``r`` with ``#{r_i <= v} >= (N + 1)(1 - alpha)``."""
    need = (len(r) + 1) * (1 - alpha)
    good = [v for v in r if sum(x <= v for x in r) >= need]
    return min(good) if good else None


def brute_ltt(r, alpha: Fraction, delta: Fraction):
    """Fixed-sequence over the distinct ``r`` from the highest: the binomial tail
    ``sum_{j <= K} C(N, j) alpha^j (1 - alpha)^(N - j)`` with ``K = #{r_i > t}``."""
    n, best = len(r), None
    for t in sorted(set(r), reverse=True):
        k = sum(x > t for x in r)
        p = sum(math.comb(n, j) * alpha**j * (1 - alpha) ** (n - j) for j in range(k + 1))
        if p > delta:
            break
        best = t
    return best


# --------------------------------------------------------------------------- strategies

SHARES = [Fraction(1), Fraction(9, 10), Fraction(4, 5), Fraction(3, 4), Fraction(7, 10),
          Fraction(2, 3), Fraction(1, 2)]
claim_lists = st.lists(st.tuples(st.integers(0, 6).map(lambda k: k / 2), st.booleans()),
                       max_size=9)
"""Scores on a coarse grid (ties are common), labels."""
item_lists = st.lists(claim_lists, min_size=1, max_size=25)


def items_of(raw) -> list[ClaimItem]:
    return [ClaimItem.of([s for s, _ in claims], [c for _, c in claims], id=str(i))
            for i, claims in enumerate(raw)]


def r_of(raw, a=1.0):
    return [nonconformity([s for s, _ in c], [y for _, y in c], a) for c in raw]


def _t(cert: ClaimCertificate) -> float:
    return INF if cert.threshold is None else cert.threshold


# --------------------------------------------------------------------------- r(a)


@pytest.mark.parametrize(("scores", "correct", "a", "r"), [
    ([0.9, 0.7, 0.5, 0.3], [1, 0, 1, 0], 1.0, 0.7),  # the highest wrong score
    ([0.9, 0.7, 0.5, 0.3], [1, 0, 1, 0], 0.5, -INF),  # 1/1, 1/2, 2/3, 2/4 all >= 1/2
    ([0.9, 0.7, 0.5, 0.3], [1, 0, 1, 0], 0.6, 0.7),  # 1/2 < 0.6 once 0.7 enters
    ([0.9, 0.8, 0.7, 0.6], [0, 1, 1, 1], 0.7, 0.9),  # the top claim alone fails
    ([0.9, 0.8, 0.7, 0.6, 0.5], [1, 0, 1, 1, 1], 0.75, 0.8),  # all five: 4/5 >= 0.75, but
    # 2/3 at t = 0.6 fails: "every stricter threshold too"
    ([0.5, 0.5, 0.9], [1, 0, 1], 1.0, 0.5),  # a wrong claim tied with a correct one
    ([0.4, 0.2], [1, 1], 1.0, -INF),  # nothing wrong: keep everything
    ([], [], 1.0, -INF),
    ([0.3] * 10, [1] * 7 + [0] * 3, 0.7, -INF),  # 7/10 meets 0.7 despite 0.7 * 10 > 7
])
def test_nonconformity_on_hand_examples(scores, correct, a, r):
    assert nonconformity(scores, np.array(correct, dtype=bool), a) == r


@given(claims=claim_lists, a=st.sampled_from(SHARES))
def test_nonconformity_equals_the_brute_force_definition(claims, a):
    scores, correct = [s for s, _ in claims], [c for _, c in claims]
    assert nonconformity(scores, correct, float(a)) == brute_r(scores, correct, a)


@given(claims=claim_lists, a=st.sampled_from(SHARES),
       t=st.integers(-1, 7).map(lambda k: k / 2 - .25))
def test_every_threshold_from_r_up_is_satisfied_and_r_is_tight(claims, a, t):
    """Property (i) of the module docstring, and the infimum: just below a finite r(a)
    the condition fails."""
    s = np.array([x for x, _ in claims], dtype=float)
    c = np.array([y for _, y in claims], dtype=bool)
    r = nonconformity(s, c, float(a))

    def ok(thr):
        kept = s > thr
        return bool(satisfies((kept & c).sum(), kept.sum(), float(a)))

    if t >= r:
        assert ok(t)
    if r > -INF:
        below = s[s < r]
        assert not ok(below.max() if below.size else -INF)


@given(claims=claim_lists)
def test_a_one_is_the_papers_highest_wrong_score(claims):
    wrong = [s for s, c in claims if not c]
    assert nonconformity([s for s, _ in claims], [c for _, c in claims]) == max(wrong, default=-INF)


@given(claims=claim_lists, a=st.sampled_from(SHARES), b=st.sampled_from(SHARES))
def test_r_is_non_increasing_in_a(claims, a, b):
    lo, hi = sorted([a, b])
    s, c = [x for x, _ in claims], [y for _, y in claims]
    assert nonconformity(s, c, float(lo)) <= nonconformity(s, c, float(hi))


# --------------------------------------------------------------------------- thresholds


def test_conformal_threshold_by_hand():
    r = [3.0, 1.0, 2.0, -INF, 5.0]  # sorted: -inf, 1, 2, 3, 5
    assert conformal_threshold(r, 0.2) == (5.0, 5)  # ceil(6 * 0.8) = ceil(4.8) = 5
    assert conformal_threshold(r, 0.34) == (3.0, 4)  # ceil(3.96) = 4
    assert conformal_threshold(r, 0.5) == (2.0, 3)  # (N + 1)(1 - alpha) = 3 exactly
    assert conformal_threshold(r, 0.1) == (None, None)  # ceil(5.4) = 6 > 5
    # 10 * (1 - 0.7) is 3.0000000000000004 in floating point: the rank is 3, not 4
    assert conformal_threshold(list(range(9)), 0.7) == (2.0, 3)


@given(raw=item_lists, alpha=st.sampled_from(["0.05", "0.1", "0.15", "0.2", "0.3", "0.5"]))
def test_conformal_threshold_equals_the_brute_force(raw, alpha):
    r = r_of(raw)
    assert conformal_threshold(r, float(alpha))[0] == brute_threshold(r, Fraction(alpha))
    cert = certify_claims(items_of(raw), float(alpha))
    assert cert.threshold == brute_threshold(r, Fraction(alpha))


@given(raw=st.lists(claim_lists, min_size=1, max_size=60),
       alpha=st.sampled_from(["0.1", "0.2", "0.3"]), delta=st.sampled_from(["0.05", "0.1", "0.2"]))
def test_ltt_threshold_equals_the_brute_force_and_the_order_statistic(raw, alpha, delta):
    r = r_of(raw)
    t, p = ltt_threshold(r, float(alpha), float(delta))
    assert t == brute_ltt(r, Fraction(alpha), Fraction(delta))
    cert = certify_claims(items_of(raw), float(alpha), delta=float(delta))
    assert cert.threshold == t and cert.p_value == p
    n = len(r)
    ks = [k for k in range(n + 1) if binom.cdf(k, n, float(alpha)) <= float(delta)]
    if not ks:
        assert t is None
    elif len(set(r)) == n:  # untied: the (N - k*)-th smallest (training-conditional CP)
        assert t == sorted(r)[n - max(ks) - 1]


def test_ltt_by_hand():
    """N = 50, alpha = delta = 0.1: P(Binom(50, .1) <= 1) = 0.034 <= 0.1 < P(<= 2) = 0.112,
    so one loss is allowed: the 49th smallest of 50 untied r."""
    r = list(np.linspace(0, 1, 50))
    t, p = ltt_threshold(r, 0.1, 0.1)
    assert t == r[48] and p == pytest.approx(binom.cdf(1, 50, 0.1))
    assert ltt_threshold(r[:21], 0.1, 0.1) == (None, None)  # 0.9^21 = 0.109 > 0.1
    assert ltt_threshold(r[:22], 0.1, 0.1)[0] == r[21]  # 0.9^22 = 0.098


def test_no_threshold_says_how_many_items_are_needed():
    item = ClaimItem.of([0.9, 0.4], [True, False])
    cert = certify_claims([item] * 8, 0.1)
    assert cert.threshold is None and cert.n_needed == 9 and "9 calibration items" in cert.message
    assert not cert.keep([5.0]).any()
    assert certify_claims([item] * 9, 0.1).threshold == 0.4  # ceil(10 * 0.9) = 9 <= 9
    cert = certify_claims([item] * 21, 0.1, delta=0.1)
    assert cert.threshold is None and cert.n_needed == 22  # 0.9^22 <= 0.1 < 0.9^21
    assert certify_claims([item] * 22, 0.1, delta=0.1).threshold == 0.4


# --------------------------------------------------------------------------- properties


@given(raw=item_lists, alphas=st.lists(st.sampled_from([0.05, 0.1, 0.2, 0.3, 0.5]),
                                       min_size=2, max_size=2, unique=True),
       delta=st.sampled_from([None, 0.1, 0.3]), a=st.sampled_from([1.0, 0.8, 0.5]))
def test_a_larger_alpha_never_retains_fewer_claims(raw, alphas, delta, a):
    lo, hi = sorted(alphas)
    items = items_of(raw)
    strict = certify_claims(items, lo, a=a, delta=delta)
    loose = certify_claims(items, hi, a=a, delta=delta)
    assert _t(loose) <= _t(strict)
    for few, more in zip(strict.apply(items), loose.apply(items), strict=True):
        assert set(map(id, few.retained)) <= set(map(id, more.retained))


@given(raw=item_lists, alpha=st.sampled_from([0.1, 0.2, 0.3]), delta=st.sampled_from([None, 0.2]),
       a=st.sampled_from(SHARES))
def test_a_smaller_share_never_retains_fewer_claims_and_one_is_the_plain_procedure(
        raw, alpha, delta, a):
    items = items_of(raw)
    plain = certify_claims(items, alpha, delta=delta)
    assert _t(certify_claims(items, alpha, a=float(a), delta=delta)) <= _t(plain)
    wrong = [max((s for s, c in claims if not c), default=-INF) for claims in raw]
    expect = (conformal_threshold(wrong, alpha)[0] if delta is None
              else ltt_threshold(wrong, alpha, delta)[0])
    assert plain.threshold == expect and plain.a == 1.0


@given(claims=claim_lists, t1=st.floats(-1, 4), t2=st.floats(-1, 4))
def test_retained_sets_only_shrink_as_the_threshold_rises(claims, t1, t2):
    lo, hi = sorted([t1, t2])
    item = items_of([claims])[0]
    kept = {}
    for t in (lo, hi):
        cert = ClaimCertificate(t, 0.1, 1.0, None, 1, "conformal", "score")
        (done,) = apply_claim_certificate(cert, [item])
        assert len(done.retained) + len(done.removed) == len(item.claims)
        assert all(c.scores["score"] > t for c in done.retained)
        assert all(c.scores["score"] <= t for c in done.removed)
        kept[t] = {id(c) for c in done.retained}
    assert kept[hi] <= kept[lo]


# --------------------------------------------------------------------------- the certificate


def test_certificate_round_trips_through_json_and_applies_to_new_items():
    cal = [ClaimItem.of([0.9, 0.6, 0.3], [True, False, True], id=f"c{i}") for i in range(20)]
    cert = credo.certify_claims(cal, 0.1)
    assert isinstance(cert, credo.ClaimCertificate)
    assert (cert.threshold, cert.rank, cert.procedure, cert.delta) == (0.6, 19, "conformal", None)
    assert cert.retained == pytest.approx(1 / 3) and "> 0.6" in cert.message
    back = ClaimCertificate.from_json(cert.to_json())
    assert back == cert
    new = ClaimItem("x", (Claim("kept", scores={"score": 0.61}),
                          Claim("gone", scores={"score": 0.6}, correct=False)), prompt="q?")
    (done,) = back.apply([new])
    assert [c.text for c in done.retained] == ["kept"]
    assert [c.text for c in done.removed] == ["gone"]
    assert done.to_dict() == {"id": "x", "prompt": "q?",
                              "retained": [{"text": "kept", "score": 0.61}],
                              "removed": [{"text": "gone", "score": 0.6, "correct": False}]}


def test_keep_everything_and_keep_nothing_survive_json():
    allright = [ClaimItem.of([0.5, 0.1], [True, True])] * 20
    cert = certify_claims(allright, 0.1, delta=0.2)
    assert cert.threshold == -INF and cert.keep([-1e300]).all()
    assert "keep every claim" in cert.message
    text = cert.to_json()
    assert json.loads(text)["threshold"] == "-inf"
    assert ClaimCertificate.from_json(text) == cert
    none = certify_claims(allright[:3], 0.1)
    assert ClaimCertificate.from_json(none.to_json()) == none and none.threshold is None


@pytest.mark.parametrize(("data", "says"), [
    ([], "JSON object"),
    ({"alpha": 0.1}, "no threshold, a, delta, n, procedure"),
    ({"threshold": "x", "alpha": 0.1, "a": 1, "delta": None, "n": 3, "procedure": "conformal"},
     "threshold"),
    ({"threshold": 1, "alpha": 1.5, "a": 1, "delta": None, "n": 3, "procedure": "conformal"},
     "alpha"),
    ({"threshold": 1, "alpha": 0.1, "a": 1, "delta": None, "n": 3, "procedure": "crc"},
     "procedure"),
    ({"threshold": 1, "alpha": 0.1, "a": 1, "delta": None, "n": "3", "procedure": "ltt"}, "n"),
    ({"threshold": 1, "alpha": 0.1, "a": 1, "delta": None, "n": 3, "procedure": "ltt",
      "score": 4}, "score"),
])
def test_a_bad_certificate_is_refused_naming_the_field(data, says):
    with pytest.raises(ValueError, match=says):
        ClaimCertificate.from_dict(data)


def test_tie_break_is_added_to_the_score_and_recorded():
    """The paper's noise field breaks the tie between a correct and a wrong claim."""
    item = ClaimItem("t", (Claim("right", True, {"f": 1.0, "noise": 0.001}),
                           Claim("wrong", False, {"f": 1.0, "noise": -0.001})))
    plain = certify_claims([item] * 20, 0.1, score="f")
    noisy = certify_claims([item] * 20, 0.1, score="f", tie_break="noise")
    assert plain.threshold == 1.0 and plain.retained == 0.0  # the tie removes both
    assert noisy.threshold == pytest.approx(0.999) and noisy.tie_break == "noise"
    assert [c.text for c in noisy.apply([item])[0].retained] == ["right"]


@pytest.mark.parametrize(("call", "says"), [
    (lambda it: certify_claims(it, 0.0), "alpha"),
    (lambda it: certify_claims(it, 0.1, a=0.0), "a must"),
    (lambda it: certify_claims(it, 0.1, delta=1.0), "delta"),
    (lambda it: certify_claims([], 0.1), "at least one"),
    (lambda it: certify_claims(it, 0.1, score="g"), "claim 1 has no score 'g'"),
    (lambda it: certify_claims([ClaimItem.of([1.0], [None], id="u")], 0.1), "'u'.*no label"),
    (lambda it: certify_claims([ClaimItem("m", (Claim(scores={"f": 1, "g": 2}, correct=True),))],
                               0.1), "name the claim score"),
])
def test_bad_calls_say_what_is_wrong(call, says):
    with pytest.raises(ValueError, match=says):
        call([ClaimItem.of([1.0], [True])])


# --------------------------------------------------------------------------- synthetic draws
#
# Each item has C claims with scores U(0, 1); a claim of score s is wrong with probability
# 0.6 (1 - s). Then P(r <= t) = P(no wrong claim above t) = (1 - 0.3 (1 - t)^2)^C on
# [0, 1], and P(r = -inf) = 0.7^C: the miscoverage of any threshold is known exactly.

C = 6


def draw(rng, shape):
    s = rng.random((*shape, C))
    correct = rng.random((*shape, C)) >= 0.6 * (1 - s)
    return s, correct


def miscoverage(t: np.ndarray) -> np.ndarray:
    """``P(r > t)`` of the model above (``-inf``: no wrong claim at all)."""
    u = np.clip(np.where(np.isneginf(t), 0.0, t), 0.0, 1.0)
    return 1 - (1 - 0.3 * (1 - u) ** 2) ** C


def test_realised_factuality_lies_within_the_papers_bounds():
    """Theorem 3.1: 1 - alpha <= P(all retained claims correct) <= 1 - alpha + 1/(N + 1),
    and without ties it is exactly k / (N + 1); 3000 fresh draws of 30 + 30 items."""
    rng = np.random.default_rng(7)
    splits, n, m = 3000, 30, 30
    for alpha in (0.1, 0.2):
        s, c = draw(rng, (splits, n + m))
        r = np.where(~c[:, :n], s[:, :n], -INF).max(axis=2)  # the paper's score, vectorised
        tau = np.array([conformal_threshold(row, alpha)[0] for row in r])
        kept = s[:, n:] > tau[:, None, None]
        factual = (~(kept & ~c[:, n:]).any(axis=2)).mean(axis=1)
        mean, err = factual.mean(), 3 * factual.std(ddof=1) / math.sqrt(splits)
        k = math.ceil((n + 1) * (1 - alpha) - 1e-9)
        assert 1 - alpha - err <= mean <= 1 - alpha + 1 / (n + 1) + err
        assert abs(mean - k / (n + 1)) <= err


def test_the_fraction_condition_holds_at_least_as_often_as_promised():
    rng = np.random.default_rng(11)
    splits, n, m, a, alpha = 800, 25, 25, 0.8, 0.2
    s, c = draw(rng, (splits, n + m))
    tau = np.array([conformal_threshold([nonconformity(s[j, i], c[j, i], a) for i in range(n)],
                                        alpha)[0] for j in range(splits)])
    kept = s[:, n:] > tau[:, None, None]
    ok = satisfies((kept & c[:, n:]).sum(axis=2), kept.sum(axis=2), a).mean(axis=1)
    assert ok.mean() >= 1 - alpha - 3 * ok.std(ddof=1) / math.sqrt(splits)


def test_the_high_probability_variant_is_violated_at_most_delta_of_the_time():
    """Over 4000 calibration draws of N = 100, the share whose threshold's exact
    miscoverage exceeds alpha is at most delta; for untied r it is P(Binom(N, alpha) <=
    k*) exactly. The marginal threshold is violated far more often (the check can fail)."""
    rng = np.random.default_rng(3)
    draws, n, alpha, delta = 4000, 100, 0.1, 0.1
    s, c = draw(rng, (draws, n))
    r = np.where(~c, s, -INF).max(axis=2)
    ltt = np.array([ltt_threshold(row, alpha, delta)[0] for row in r])
    rate = np.mean(miscoverage(ltt) > alpha)
    err = 3 * math.sqrt(delta * (1 - delta) / draws)
    k_star = max(k for k in range(n + 1) if binom.cdf(k, n, alpha) <= delta)
    assert rate <= delta + err
    assert abs(rate - binom.cdf(k_star, n, alpha)) <= err
    marginal = np.array([conformal_threshold(row, alpha)[0] for row in r])
    assert np.mean(miscoverage(marginal) > alpha) > 0.3


def test_items_without_claims_and_scores_that_are_not_finite():
    """Answers with no claim have nothing wrong (r = -inf); a certificate calibrated on
    them alone names no score and refuses items that have claims."""
    cert = certify_claims([ClaimItem("e", ())] * 10, 0.1)
    assert cert.threshold == -INF and cert.method is None and cert.retained == 1.0
    with pytest.raises(ValueError, match="names no claim score"):
        cert.apply([ClaimItem.of([0.5], id="x")])
    with pytest.raises(ValueError, match="finite"):
        nonconformity([0.5, math.nan], [True, False])


def test_the_claim_score_is_the_certificates_method_and_its_file_is_unchanged():
    """The score a claim certificate thresholds is ``method`` (its procedure is
    ``procedure``), as on a run certificate; ``score=`` and ``.score`` still work with a
    DeprecationWarning, and the file keeps its key ``score`` in its place."""
    import warnings

    new = ClaimCertificate(0.4, 0.1, 1.0, None, 30, "conformal", method="frequency")
    with pytest.warns(DeprecationWarning, match=r"ClaimCertificate\.score is now "
                                                 r"ClaimCertificate\.method"):
        old = ClaimCertificate(0.4, 0.1, 1.0, None, 30, "conformal", score="frequency")
    assert old == new
    with pytest.warns(DeprecationWarning, match="deprecated since credo 0.1.0"):
        assert new.score == "frequency"
    with pytest.raises(TypeError, match="both given"):
        ClaimCertificate(0.4, 0.1, 1.0, None, 30, "conformal", method="a", score="b")
    with pytest.raises(TypeError, match="both given"):
        ClaimCertificate(0.4, 0.1, 1.0, None, 30, "conformal", "a", score="b")
    # the file as written before the rename: keys in the same order, ``score`` in place
    text = new.to_json()
    assert list(json.loads(text)) == [
        "threshold", "alpha", "a", "delta", "n", "procedure", "score", "tie_break", "rank",
        "p_value", "retained", "n_needed", "message", "settings"]
    assert json.loads(text)["score"] == "frequency" and '"method"' not in text
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # reading a file never touches the old names
        assert ClaimCertificate.from_json(text) == new
        assert apply_claim_certificate(new, []) == []

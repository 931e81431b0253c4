"""Scores equal within rounding are equal (:mod:`credo.ties`), wherever a metric, a
threshold or a certificate reads them.

Item-level answer consistency (the mean of AC_i = share of the other samples agreeing
with sample i) and self-consistency (the share of agreeing ordered pairs) are the same
fraction, mathematically: ``mean_i (c(y_i) − 1)/(n − 1) = Σ_i (c(y_i) − 1) / (n (n − 1))``.
Computed as floats they differ in the last bit on about a quarter of answer profiles,
which split ties: AUROC 0.7918 against 0.7932 and a certificate's coverage 99.6% against
100% on a public pool. Here the two methods must give the same metrics, the same
coverage at risk and the same certificates, through the command line.
"""

from __future__ import annotations

import json
import math
import random
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from credo.cli import main
from credo.evaluate.certify import certify
from credo.evaluate.metrics import auroc, ece
from credo.methods.answer_consistency import answer_consistency
from credo.methods.base import mean_confidence
from credo.methods.self_consistency import self_consistency
from credo.ties import DENOMINATOR, settle, settle_scores

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@given(finite)
def test_settling_is_idempotent_and_moves_a_score_by_rounding_only(x):
    y = settle(x)
    assert settle(y) == y
    assert abs(y - x) <= 1.5e-12 * max(1.0, abs(x))


@given(finite, finite)
def test_settling_keeps_the_order_of_scores(x, y):
    lo, hi = sorted((x, y))
    assert settle(lo) <= settle(hi)


@given(st.integers(0, DENOMINATOR), st.integers(1, DENOMINATOR), st.integers(-8, 8))
def test_a_fraction_spelt_a_few_ulps_off_is_the_fraction(p, q, ulps):
    """Any float within a few units in the last place of p/q (q <= 10,000) settles to the
    float nearest p/q: 0.49999999999999994 is 0.5, fsum's 0.39999999999999997 is 0.4."""
    exact = p / q
    spelt = exact
    for _ in range(abs(ulps)):
        spelt = math.nextafter(spelt, math.inf if ulps > 0 else -math.inf)
    assert settle(spelt) == float(Fraction(p, q)) == exact


@given(st.lists(finite, min_size=0, max_size=30))
def test_an_array_settles_as_its_values_do(values):
    got = settle_scores(values)
    assert got.tolist() == [settle(v) for v in values]


def test_non_finite_scores_are_kept():
    out = settle_scores([math.nan, math.inf, -math.inf, -0.0])
    assert math.isnan(out[0]) and out[1] == math.inf and out[2] == -math.inf
    assert out[3] == 0.0 and math.copysign(1.0, out[3]) == 1.0


def test_metrics_and_certificates_read_settled_scores():
    """The public metric and certificate functions settle what they are handed: two
    spellings of the same scores give one AUROC, one ECE, one certificate."""
    rng = np.random.default_rng(3)
    exact = rng.integers(0, 31, 400) / 30.0  # fractions of 30: many ties
    labels = (rng.random(400) < exact).astype(int)
    noisy = np.array([math.nextafter(v, -1.0) if k % 2 else v for k, v in enumerate(exact)])
    noisy = np.clip(noisy, 0.0, 1.0)
    assert not np.array_equal(noisy, exact)
    assert auroc(noisy, labels) == auroc(exact, labels)
    assert ece(noisy, labels) == ece(exact, labels)
    assert certify(noisy, labels, alpha=0.3) == certify(exact, labels, alpha=0.3)


def _profiles(seed: int = 0, items: int = 240) -> list[tuple[list[str], list[bool]]]:
    """Answer profiles of 6 to 12 samples over a few answers, with the correct answer 'v'
    (no single letter an article: short text drops "a" as SQuAD normalisation does)."""
    rng = random.Random(seed)
    out = []
    for _ in range(items):
        n = rng.randint(6, 12)
        pool = "vwxyz"[: rng.randint(1, 5)]
        answers = [rng.choice(pool) for _ in range(n)]
        out.append((answers, [a == "v" for a in answers]))
    return out


def test_the_raw_floats_of_the_two_methods_differ_on_these_profiles():
    """Without settling, the two methods' item values differ on many of the profiles
    (what the end-to-end test below would otherwise see)."""
    differ = sum(
        self_consistency(answers, "indicator") != mean_confidence(answer_consistency(answers))
        for answers, _ in _profiles()
    )
    assert differ >= 20


@pytest.fixture
def scored_profiles(tmp_path):
    rows = []
    for k, (answers, correct) in enumerate(_profiles()):
        rows += [{"item": f"q{k}", "set": "original", "answer": a, "correct": c}
                 for a, c in zip(answers, correct, strict=True)]
    path = tmp_path / "pool.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "scored"
    assert main(["score", str(path), "--methods", "self_consistency,answer_consistency",
                 "--bootstrap", "300", "--out", str(out), "--quiet"]) == 0
    return out


def test_mathematically_equal_methods_give_equal_metrics_and_certificates(scored_profiles,
                                                                          tmp_path):
    out = scored_profiles
    scores = [json.loads(line)["scores"] for line in (out / "scores.jsonl").open()]
    assert all(s["self_consistency"] == s["answer_consistency"] for s in scores)
    metrics = json.loads((out / "metrics.json").read_text())
    sc, ac = metrics["methods"]["self_consistency"], metrics["methods"]["answer_consistency"]
    for key in ("ece", "mce", "brier", "auroc", "auprc_pos", "auprc_neg", "auarc", "prr",
                "auroc_low", "auroc_high", "ece_low", "ece_high", "mean_score"):
        assert sc[key] == ac[key], key
    cov = metrics["coverage_at_risk"]
    assert cov["self_consistency"] == cov["answer_consistency"]
    for alpha in ("0.25", "0.4"):
        certs = []
        for method in ("self_consistency", "answer_consistency"):
            path = tmp_path / f"{method}-{alpha}.json"
            assert main(["certify", str(out), "--method", method, "--alpha", alpha,
                         "--out", str(path)]) == 0
            certs.append(json.loads(path.read_text())["certificate"])
        assert certs[0] == certs[1]
        assert certs[0]["threshold"] is not None  # something was certified

"""C3, C3 cross-comparison and self-consistency on cases computed by hand (000 App. G, H, J)."""

from collections import Counter

import numpy as np
import pytest

from credo import c3, c3_cross, mmd2_unbiased, self_consistency
from credo.kernels import get_kernel
from credo.methods import METHODS, ItemSamples, Sample, get_method
from credo.tasks.answers import Answer


def test_mmd_hand_case():
    # within original: AA, BB pairs -> 4/12; within perturbed: 12/12; cross: 2*4/16
    orig, pert = ["A", "A", "B", "B"], ["A"] * 4
    assert mmd2_unbiased(orig, pert) == pytest.approx(1 / 3 + 1 - 1)
    assert c3(orig, pert) == pytest.approx(1 - (1 / 3) / 2)


def test_c3_extremes_and_clip():
    assert c3(["A", "A"], ["B", "B"]) == pytest.approx(0.0)  # MMD² = 2, the upper bound
    assert c3(["7"] * 5, ["7"] * 3) == pytest.approx(1.0)
    # unbiased estimate -1 (within 0, cross 1/2): 1 - (-1)/2 = 1.5, clipped to 1
    assert mmd2_unbiased(["A", "B"], ["A", "B"]) == pytest.approx(-1.0)
    assert c3(["A", "B"], ["A", "B"]) == 1.0


def _mmd_from_counts(orig, pert):
    cx, cy = Counter(orig), Counter(pert)
    n, m = len(orig), len(pert)
    wx = sum(c * (c - 1) for c in cx.values()) / (n * (n - 1))
    wy = sum(c * (c - 1) for c in cy.values()) / (m * (m - 1))
    cross = sum(cx[a] * cy[a] for a in cx) / (n * m)
    return wx + wy - 2 * cross


@pytest.mark.parametrize("seed", range(10))
def test_mmd_equals_count_formula_for_the_indicator_kernel(seed):
    rng = np.random.default_rng(seed)
    orig = list(rng.choice(list("ABCD"), size=rng.integers(2, 30)))
    pert = list(rng.choice(list("ABCE"), size=rng.integers(2, 30)))
    assert mmd2_unbiased(orig, pert) == pytest.approx(_mmd_from_counts(orig, pert))
    assert 0.0 <= c3(orig, pert) <= 1.0


def test_c3_cross_hand_case():
    assert c3_cross(["A", "B"], ["A", "A", "C"]) == pytest.approx(2 / 6)


def test_self_consistency_hand_cases():
    assert self_consistency(["A", "A", "B"]) == pytest.approx(2 / 6)
    assert self_consistency(["5"] * 4) == 1.0
    assert self_consistency(["1", "2", "3"]) == 0.0


def test_unparsable_answers_match_nothing():
    assert self_consistency([None, None, "A"]) == 0.0
    assert c3_cross([None], [None]) == 0.0
    K = get_kernel("indicator")([None, "A"], [None, "A"])
    assert K.tolist() == [[0.0, 0.0], [0.0, 1.0]]


def test_too_few_samples_is_an_error():
    with pytest.raises(ValueError, match="at least 2"):
        c3(["A"], ["A", "B"])
    with pytest.raises(ValueError, match="at least 2"):
        self_consistency(["A"])


def test_registry_methods_read_item_samples():
    def s(v):
        return Sample(text=str(v), answer=Answer(v, str(v)))

    samples = ItemSamples(
        "q1", {"original": tuple(map(s, "AABB")), "perturbed": tuple(map(s, "AAAA"))}
    )
    kern = get_kernel("indicator")
    assert METHODS["c3"].scorer(samples, kern) == pytest.approx(5 / 6)
    assert METHODS["self_consistency"].scorer(samples, kern) == pytest.approx(1 / 3)
    assert METHODS["c3"].needs == ("original", "perturbed")
    with pytest.raises(ValueError, match="known methods"):
        get_method("nope")

"""Graph estimators on the samples' similarity matrix, against hand-computed matrices:
semantic entropy (Farquhar et al. 2024), number of semantic sets, U_EigV, U_Deg, U_Ecc
(Lin et al. 2024) and kernel language entropy (Nikitin et al. 2024)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.linalg import expm

import credo
from credo.methods import METHODS, ItemSamples, Sample, Score, num_semantic_sets
from credo.methods.degree import degree_confidences
from credo.methods.eccentricity import eccentricity_confidences
from credo.tasks.answers import Answer

ESTIMATORS = ("semantic_entropy", "num_semantic_sets", "eigv", "degree", "eccentricity", "kle")
MIXED = ["A", "A", "B", None]  # clusters {A, A}, {B}, {None}: C = 3 of K = 4


def matrix_kernel(m):
    """A kernel over answers 0..K-1 that returns the given matrix."""
    m = np.asarray(m, dtype=float)
    return lambda xs, ys: m[np.ix_(list(xs), list(ys))]


def _samples(values):
    return ItemSamples(
        "q1", {"original": tuple(Sample(text=str(v), answer=Answer(v, str(v))) for v in values)}
    )


def _score(name, values, kernel="indicator"):
    from credo.kernels import get_kernel

    out = METHODS[name].scorer(_samples(values), get_kernel(kernel))
    return out.value if isinstance(out, Score) else out


def test_exported_from_credo_and_registered_on_the_original_samples():
    for fn in ("semantic_entropy", "eigv", "degree", "eccentricity", "kle"):
        assert callable(getattr(credo, fn))
        assert fn in credo.__all__
    for name in ESTIMATORS:
        assert METHODS[name].needs == ("original",)
        assert METHODS[name].summary


def test_mixed_answers_by_hand_indicator():
    # p = (1/2, 1/4, 1/4): SE = ½ ln 2 + ½ ln 4 = 1.5 ln 2
    assert credo.semantic_entropy(MIXED) == pytest.approx(1.5 * math.log(2))
    assert _score("semantic_entropy", MIXED) == pytest.approx(1 - 1.5 * math.log(2) / math.log(4))
    assert num_semantic_sets(MIXED) == 3
    assert _score("num_semantic_sets", MIXED) == pytest.approx(1 - 2 / 3)
    # W = blockdiag(J2, 1, 1): L has eigenvalues 0, 1 (the pair) and 0, 0 -> U = 3
    assert credo.eigv(MIXED) == pytest.approx(3.0)
    assert _score("eigv", MIXED) == pytest.approx(1 - 2 / 3)
    # Σ W = 4 + 1 + 1 -> U_Deg = 1 − 6/16; C_Deg = D_jj / K
    assert credo.degree(MIXED) == pytest.approx(1 - 6 / 16)
    np.testing.assert_allclose(degree_confidences(MIXED), [2 / 4, 2 / 4, 1 / 4, 1 / 4])
    assert _score("degree", MIXED) == pytest.approx(6 / 16)
    # embeddings e_c / √m_c; centred norms² 1/4 (pair) and 3/4 (singletons): U² = 2 = C − 1
    assert credo.eccentricity(MIXED) == pytest.approx(math.sqrt(2))
    np.testing.assert_allclose(
        eccentricity_confidences(MIXED),
        [1 - math.sqrt(1 / 3), 1 - math.sqrt(1 / 3), 0.0, 0.0], atol=1e-12,
    )
    assert _score("eccentricity", MIXED) == pytest.approx(1 - math.sqrt(2) / math.sqrt(3))
    # heat kernel of L = D − W: the pair's block normalises to [[1, tanh t], [tanh t, 1]]
    r = math.tanh(0.3)
    mu = np.array([(1 + r) / 4, (1 - r) / 4, 1 / 4, 1 / 4])
    vne = float(-(mu * np.log(mu)).sum())
    assert credo.kle(MIXED) == pytest.approx(vne)
    assert _score("kle", MIXED) == pytest.approx(1 - vne / math.log(4))


def test_given_similarity_matrix_by_hand():
    w = np.array([[1.0, 0.8, 0.1], [0.8, 1.0, 0.2], [0.1, 0.2, 1.0]])
    kern = matrix_kernel(w)
    answers = [0, 1, 2]
    # clusters {0, 1}, {2}: p = (2/3, 1/3)
    assert credo.semantic_entropy(answers, kern) == pytest.approx(
        -(2 / 3) * math.log(2 / 3) - (1 / 3) * math.log(1 / 3))
    assert num_semantic_sets(answers, kern) == 2
    d = w.sum(axis=1)  # 1.9, 2.0, 1.3
    lap = np.eye(3) - w / np.sqrt(np.outer(d, d))
    lam = np.linalg.eigvalsh(lap)
    assert credo.eigv(answers, kern) == pytest.approx(np.clip(1 - lam, 0, None).sum())
    assert credo.degree(answers, kern) == pytest.approx(1 - 5.2 / 9)
    # Lin et al.'s code: rows of the kept eigenvectors, centred, 2-norm of the distances
    lam, vec = np.linalg.eigh(lap)
    v = vec[:, lam < 0.9]
    ds = np.linalg.norm(v - v.mean(axis=0), axis=1)
    assert credo.eccentricity(answers, kern) == pytest.approx(np.linalg.norm(ds))
    # Nikitin et al.'s code: expm, unit diagonal, / K, von Neumann entropy
    heat = expm(-0.3 * (np.diag(d) - w))
    rho = heat / np.sqrt(np.outer(np.diag(heat), np.diag(heat))) / 3
    mu = np.linalg.eigvalsh(rho)
    assert credo.kle(answers, kern) == pytest.approx(float(-(mu * np.log(mu)).sum()))
    assert credo.kle(answers, kern, t=1.0) != pytest.approx(credo.kle(answers, kern))


def test_asymmetric_kernel_clusters_need_both_directions():
    # a judge that accepts 0 -> 1 (0.9) but not 1 -> 0 (0.3): no bidirectional edge
    m = np.array([[1.0, 0.9, 0.0], [0.3, 1.0, 0.0], [0.0, 0.0, 1.0]])
    assert num_semantic_sets([0, 1, 2], matrix_kernel(m)) == 3
    # the spectral graph uses the symmetrised weight 0.6
    assert credo.degree([0, 1, 2], matrix_kernel(m)) == pytest.approx(1 - (3 + 1.2) / 9)


@pytest.mark.parametrize("k", [2, 5, 10])
def test_extremes_all_equal_and_all_distinct(k):
    same, distinct = ["7"] * k, [str(i) for i in range(k)]
    assert credo.semantic_entropy(same) == 0.0
    assert credo.semantic_entropy(distinct) == pytest.approx(math.log(k))
    assert credo.eigv(same) == pytest.approx(1.0)
    assert credo.eigv(distinct) == pytest.approx(k)
    assert credo.degree(same) == pytest.approx(0.0)
    assert credo.degree(distinct) == pytest.approx(1 - 1 / k)
    assert credo.eccentricity(same) == pytest.approx(0.0, abs=1e-7)
    assert credo.eccentricity(distinct) == pytest.approx(math.sqrt(k - 1))
    assert credo.kle(distinct) == pytest.approx(math.log(k))  # L = 0, ρ = I/K
    # one cluster: eigenvalues of exp(−t(K I − J)) are 1 and e^{−tK} (K − 1 times)
    mu = np.array([1.0] + [math.exp(-0.3 * k)] * (k - 1))
    mu /= mu.sum()
    assert credo.kle(same) == pytest.approx(float(-(mu * np.log(mu)).sum()))
    for name in ESTIMATORS:
        assert _score(name, distinct) == pytest.approx(0.0 if name != "degree" else 1 / k,
                                                       abs=1e-7)
        assert _score(name, same) == pytest.approx(1.0, abs=1e-7) or name == "kle"
    assert 0.0 < _score("kle", same) < 1.0


@pytest.mark.parametrize("seed", range(8))
def test_ranges_and_indicator_identities_on_random_answers(seed):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 15))
    answers = [None if x == 0 else str(x) for x in rng.integers(0, 5, k)]
    c = num_semantic_sets(answers)
    assert credo.eigv(answers) == pytest.approx(c)
    assert credo.eccentricity(answers) == pytest.approx(math.sqrt(c - 1))
    # any kernel in [0, 1]: random symmetric similarities
    a = rng.random((k, k))
    kern = matrix_kernel((a + a.T) / 2)
    ints = list(range(k))
    assert 1 - 1e-9 <= credo.eigv(ints, kern) <= k + 1e-9
    assert -1e-9 <= credo.eccentricity(ints, kern) <= math.sqrt(k - 1) + 1e-9
    assert -1e-9 <= credo.kle(ints, kern) <= math.log(k) + 1e-9
    assert 0.0 <= credo.degree(ints, kern) <= 1 - 1 / k + 1e-12
    assert 0.0 <= credo.semantic_entropy(ints, kern) <= math.log(k) + 1e-12
    conf = eccentricity_confidences(ints, kern)
    assert ((conf >= 0) & (conf <= 1)).all()
    for name in ESTIMATORS:
        assert 0.0 <= _score(name, answers) <= 1.0


def test_equal_clusterings_give_equal_scores_whatever_the_order():
    """Items whose answers form the same clusters in another order score exactly alike
    (ranking metrics must see a tie, not eigh's 1e-16 noise), and the indicator kernel's
    spectral quantities are exactly the counts they equal in exact arithmetic."""
    base = list("AABBBCDA")
    rng = np.random.default_rng(3)
    seen = {name: set() for name in ESTIMATORS}
    for _ in range(40):
        answers = [base[i] for i in rng.permutation(len(base))]
        for name in ESTIMATORS:
            seen[name].add(_score(name, answers))
        assert credo.eigv(answers) == 4.0  # four distinct answers
        assert credo.eccentricity(answers) == math.sqrt(3)
    assert all(len(values) == 1 for values in seen.values()), seen
    assert credo.eccentricity(["A"] * 8) == 0.0
    assert _score("eigv", base) == _score("num_semantic_sets", base)


def test_per_generation_confidences_are_scores_of_the_original_samples():
    from credo.kernels import get_kernel

    out = METHODS["degree"].scorer(_samples(MIXED), get_kernel("indicator"))
    assert out.of == "original" and out.responses == pytest.approx((0.5, 0.5, 0.25, 0.25))
    assert out.value == pytest.approx(np.mean(out.responses))
    ecc = METHODS["eccentricity"].scorer(_samples(MIXED), get_kernel("indicator"))
    assert len(ecc.responses) == 4


def test_too_few_samples_is_an_error():
    for fn in (credo.semantic_entropy, credo.eigv, credo.degree, credo.eccentricity, credo.kle):
        with pytest.raises(ValueError, match="at least 2"):
            fn(["A"])

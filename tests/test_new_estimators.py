"""LexSim, LUQ, semantic density and CoCoA: each against its paper's formula computed by
hand here, and against LM-Polygraph 0.7.0's own estimators on the same samples
(``tests/data/peers/lm_polygraph_0.7.0.json``, written by LM-Polygraph itself:
``tests/data/peers/lm_polygraph_reference.py`` says how)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from credo.errors import UserError
from credo.methods import METHODS, ItemSamples, Sample
from credo.methods.base import get_method
from credo.methods.cocoa import cocoa, mean_dissimilarity
from credo.methods.lexsim import lcs_length, lexical_similarity, rouge_l, tokens
from credo.methods.luq import luq_confidence, sentences
from credo.methods.semantic_density import normalised_probability, semantic_density
from credo.plan.samples import ORIGINAL
from credo.tasks.answers import Answer
from credo.types import TokenLogprob

PEER = json.loads((Path(__file__).parent / "data" / "peers" / "lm_polygraph_0.7.0.json")
                  .read_text(encoding="utf-8"))


def _lp(values):
    return tuple(TokenLogprob(f"t{i}", v) for i, v in enumerate(values))


def _sample(text, answer, logprobs=None):
    return Sample(text, Answer(answer, text), _lp(logprobs) if logprobs else None)


def _matrix(case):
    """The case's kernel, on answer indices (ints) and, for LUQ, on texts."""
    gram = np.array(case["gram"])
    index = {t: i for i, t in enumerate(case["texts"])}

    def on_answers(xs, ys):
        first = {a: i for i, a in reversed(list(enumerate(case["answers"])))}
        return gram[np.ix_([first[x] for x in xs], [first[y] for y in ys])]

    def on_texts(xs, ys):
        return gram[np.ix_([index[x] for x in xs], [index[y] for y in ys])]

    return on_answers, on_texts


# ------------------------------------------------------------------------------ LexSim


def _lcs_table(a, b):
    t = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            t[i + 1][j + 1] = t[i][j] + 1 if x == y else max(t[i][j + 1], t[i + 1][j])
    return t[-1][-1]


@given(st.lists(st.sampled_from("abcde"), max_size=140),
       st.lists(st.sampled_from("abcde"), max_size=140))
def test_the_bit_parallel_lcs_is_the_dynamic_programme(a, b):
    assert lcs_length(a, b) == _lcs_table(a, b) == lcs_length(b, a)


def test_rouge_l_by_hand():
    # "the cat sat on the mat" / "the cat on the mat": LCS 5 of 6 and 5 words
    a, b = tokens("The cat sat on the mat."), tokens("the CAT on the mat")
    assert lcs_length(a, b) == 5
    p, r = 5 / 5, 5 / 6
    assert rouge_l(a, b) == pytest.approx(2 * p * r / (p + r), abs=1e-15)
    assert rouge_l(a, a) == 1.0 and rouge_l(a, []) == 0.0 and rouge_l(["x"], ["y"]) == 0.0


@given(st.text(alphabet="ab cd.,EéF-1", max_size=60), st.text(alphabet="ab cd.,EéF-1",
                                                                max_size=60))
def test_rouge_l_equals_rouge_score_without_stemming(x, y):
    rouge_score = pytest.importorskip("rouge_score.rouge_scorer")
    want = rouge_score.RougeScorer(["rougeL"], use_stemmer=False).score(x, y)["rougeL"]
    assert rouge_l(tokens(x), tokens(y)) == pytest.approx(want.fmeasure, abs=1e-12)


def test_lexsim_is_the_mean_over_pairs():
    texts = ["a b c", "a b d", "x y z"]
    pairs = [rouge_l(tokens(texts[i]), tokens(texts[j])) for i, j in ((0, 1), (0, 2), (1, 2))]
    per = lexical_similarity(texts)
    assert per == pytest.approx([(pairs[0] + pairs[1]) / 2, (pairs[0] + pairs[2]) / 2,
                                 (pairs[1] + pairs[2]) / 2], abs=1e-15)
    out = METHODS["lexsim"].score(ItemSamples("q", {ORIGINAL: tuple(
        _sample(t, t) for t in texts)}), None)
    assert out.value == pytest.approx(sum(pairs) / 3, abs=1e-11)  # settled


@pytest.mark.parametrize("case", PEER["cases"], ids=range(len(PEER["cases"])))
def test_lexsim_equals_lm_polygraph(case):
    """LM-Polygraph's uncertainty is minus the mean pairwise ROUGE-L (its scorer without
    the stemmer: credo does not stem)."""
    per = lexical_similarity(case["texts"])
    assert float(np.mean(per)) == pytest.approx(-case["lm_polygraph"]["lexsim"], abs=1e-12)


def test_lm_polygraphs_default_stems_where_credo_does_not():
    """The recorded cases where LM-Polygraph's shipped scorer (Porter stemmer) differs:
    only texts with words a stemmer merges (cats/cat, runs/running)."""
    differ = [c for c in PEER["cases"]
              if abs(c["lm_polygraph"]["lexsim"] - c["lm_polygraph"]["lexsim_stemmed"]) > 1e-12]
    assert differ
    for c in differ:
        assert any(w in " ".join(c["texts"]).split() for w in ("cats", "runs", "running"))


# --------------------------------------------------------------------------------- LUQ


def test_luq_by_hand():
    """Two sentences of sample a against samples b, c: S(a, b) is the mean kernel of its
    sentences with b; 1 − LUQ(a) the mean of S(a, ·)."""
    texts = ["Paris is the capital. It is in France.", "Paris is a city in France.",
             "Lyon is the capital of France."]
    table = {("Paris is the capital.", texts[1]): 0.8, ("It is in France.", texts[1]): 0.6,
             ("Paris is the capital.", texts[2]): 0.1, ("It is in France.", texts[2]): 0.3}

    def kern(xs, ys):
        return np.array([[table.get((x, y), 0.5) for y in ys] for x in xs])

    assert sentences(texts[0]) == ["Paris is the capital.", "It is in France."]
    got = luq_confidence(texts, kern)
    assert got[0] == pytest.approx(((0.8 + 0.6) / 2 + (0.1 + 0.3) / 2) / 2, abs=1e-15)
    assert got[1] == got[2] == 0.5  # one sentence each, 0.5 against everything else
    assert sentences("42") == ["42"]  # a short answer is one sentence


@pytest.mark.parametrize("case", PEER["cases"], ids=range(len(PEER["cases"])))
def test_luq_equals_lm_polygraph(case):
    """One sentence per sample and P(entail) = k: LM-Polygraph's LUQ is 1 − credo's."""
    _, on_texts = _matrix(case)
    got = luq_confidence(case["texts"], on_texts)
    assert 1.0 - float(np.mean(got)) == pytest.approx(case["lm_polygraph"]["luq"], abs=1e-9)


def test_luq_scores_with_the_embedding_kernel_only():
    assert get_method("luq").kernel == "embedding"
    assert get_method("luq@embedding").name == "luq@embedding"
    with pytest.raises(UserError, match="embedding kernel only"):
        get_method("luq@judge")


# --------------------------------------------------------------------- semantic density


def test_semantic_density_by_hand():
    """Indicator kernel: SD(y) = the length-normalised probability mass of the distinct
    texts with y's answer."""
    p = {"A": math.exp((-0.2 - 0.4) / 2), "B": math.exp(-1.0), "C": math.exp(-0.5)}
    samples = [("A", "x", [-0.2, -0.4]), ("A", "x", [-0.2, -0.4]), ("B", "y", [-1.0]),
               ("C", "x", [-0.5]), ("D", None, None)]
    assert normalised_probability(_lp([-0.2, -0.4])) == pytest.approx(p["A"], abs=1e-15)
    from credo.kernels.indicator import indicator_gram

    got = semantic_density([a for _, a, _ in samples], [t for t, _, _ in samples],
                           [None if lp is None else normalised_probability(_lp(lp))
                            for _, _, lp in samples], indicator_gram)
    x = (p["A"] + p["C"]) / (p["A"] + p["B"] + p["C"])
    assert got == pytest.approx([x, x, p["B"] / (p["A"] + p["B"] + p["C"]), x, 0.0],
                                abs=1e-15)
    out = METHODS["semantic_density"].score(ItemSamples("q", {ORIGINAL: tuple(
        _sample(t, a, lp) for t, a, lp in samples)}), indicator_gram)
    assert out.value == pytest.approx(sum(got) / 5, abs=1e-11)  # settled
    bare = METHODS["semantic_density"].score(ItemSamples("q", {ORIGINAL: (
        _sample("A", "x"), _sample("B", "y"))}), indicator_gram)
    assert math.isnan(bare.value) and "logprobs" in bare.unavailable


@pytest.mark.parametrize("case", PEER["cases"], ids=range(len(PEER["cases"])))
def test_semantic_density_equals_lm_polygraph(case):
    on_answers, _ = _matrix(case)
    probs = [normalised_probability(_lp(lp)) for lp in case["logprobs"]]
    got = semantic_density(case["answers"], case["texts"], probs, on_answers)
    np.testing.assert_allclose(got, -np.array(case["lm_polygraph"]["semantic_density"]),
                               rtol=0, atol=1e-12)


# ------------------------------------------------------------------------------- CoCoA


def test_cocoa_by_hand():
    """c = p(y)^D(y): answers x, x, y under the indicator kernel, D = 1/2, 1/2, 1."""
    lps = [[-0.5, -0.1], [-1.0], [-0.3, -0.3, -0.3]]
    from credo.kernels.indicator import indicator_gram

    d = mean_dissimilarity(["x", "x", "y"], indicator_gram)
    assert d.tolist() == [0.5, 0.5, 1.0]
    got = cocoa([_lp(v) for v in lps], d)
    assert got == pytest.approx([math.exp(-0.6) ** 0.5, math.exp(-1.0) ** 0.5,
                                 math.exp(-0.9)], abs=1e-15)
    ppl = cocoa([_lp(v) for v in lps], d, per_token=True)
    assert ppl == pytest.approx([math.exp(-0.3) ** 0.5, math.exp(-1.0) ** 0.5,
                                 math.exp(-0.3)], abs=1e-15)
    assert cocoa([_lp([-math.inf])], [0.0]) == [1.0]  # all agree: no uncertainty left
    assert cocoa([None, _lp([math.nan])], [0.5, 0.5]) == [None, None]


@pytest.mark.parametrize("case", PEER["cases"], ids=range(len(PEER["cases"])))
def test_cocoa_equals_lm_polygraph(case):
    """LM-Polygraph's CocoaMSP and CocoaPPL are U = u·D; credo's credibility exp(−U)."""
    on_answers, _ = _matrix(case)
    d = mean_dissimilarity(case["answers"], on_answers)
    lps = [_lp(v) for v in case["logprobs"]]
    np.testing.assert_allclose(cocoa(lps, d), np.exp(-np.array(case["lm_polygraph"]
                                                                ["cocoa_msp"])), atol=1e-12)
    np.testing.assert_allclose(cocoa(lps, d, per_token=True),
                               np.exp(-np.array(case["lm_polygraph"]["cocoa_ppl"])),
                               atol=1e-12)


def test_the_new_methods_need_logprobs_where_their_papers_do():
    for name in ("semantic_density", "cocoa", "cocoa_ppl"):
        assert METHODS[name].logprobs, name
    for name in ("lexsim", "luq"):
        assert not METHODS[name].logprobs, name


def test_the_four_estimators_score_a_file_through_credo_score(tmp_path, bow_embedder):
    """A credo JSONL with texts and token logprobs: each estimator scored by ``credo
    score`` (LUQ with the embedding kernel, here the bag-of-words embedder) equals the
    function above on the item's samples."""
    import credo
    from credo.config import RunConfig
    from credo.kernels.embedding import EmbeddingKernel
    from credo.kernels.indicator import indicator_gram

    rows = []
    for item, answers in (("a", ["4", "4", "5"]), ("b", ["7", "8", "9"])):
        for k, a in enumerate(answers):
            text = f"The sum is {a}. I checked it twice."
            rows.append({"item": item, "answer": a, "text": text, "correct": a in "47",
                         "logprobs": [{"token": "x", "logprob": -0.1 * (k + 1), "top": []},
                                      {"token": "y", "logprob": -0.2, "top": []}]})
    path = tmp_path / "g.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    names = ["lexsim", "luq", "semantic_density", "cocoa", "cocoa_ppl"]
    result = credo.score(path, RunConfig(methods=names, bootstrap=0, out=str(tmp_path / "o")),
                         answer_format="number", embedder=bow_embedder, show_progress=False,
                         write=False)
    for r in result.items:
        mine = [x for x in rows if x["item"] == r.item.id]
        texts = [x["text"] for x in mine]
        lps = [_lp([t["logprob"] for t in x["logprobs"]]) for x in mine]
        keys = [x["answer"] for x in mine]
        want = {
            "lexsim": np.mean(lexical_similarity(texts)),
            "luq": np.mean(luq_confidence(texts, EmbeddingKernel(bow_embedder))),
            "semantic_density": np.mean(semantic_density(
                keys, texts, [normalised_probability(x) for x in lps], indicator_gram)),
            "cocoa": np.mean(cocoa(lps, mean_dissimilarity(keys, indicator_gram))),
            "cocoa_ppl": np.mean(cocoa(lps, mean_dissimilarity(keys, indicator_gram), True)),
        }
        for name in names:
            assert r.scores[name] == pytest.approx(want[name], abs=1e-11), (r.item.id, name)

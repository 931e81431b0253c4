"""Property-based tests of every registered scoring method (issue 21).

Hypothesis draws items as a user's generations make them: n = 0..40 original samples
whose answers repeat, are unparsable (None), unicode, long, or numbers in many spellings
read by the task's own extractor; perturbed and paraphrased sets drawn the same way;
follow-up sets (verbalized, P(True), CCP's NLI verdicts, APriCoT, the label token) with
token logprobs down to -inf. Every method of :data:`credo.methods.METHODS` is scored on
each item, under the indicator kernel, the embedding kernel (the bag-of-words embedder of
``conftest``) and a judge-like kernel (asymmetric, any value in [0, 1]).

Properties: a score is finite and inside its documented range, exactly (no -2e-16), or
NaN with the reason; reordering the samples (follow-up references carried along) and
renaming the answers consistently leave it unchanged; all-identical answers give the
method's maximum where its definition says so; an item a method cannot score (too few
samples, a set missing) is not available, never an exception.

The examples are fixed under the 'ci' profile (tests/conftest.py); ``HYPOTHESIS_PROFILE
=long pytest tests/test_properties_methods.py`` searches ten times wider.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Hashable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import BagOfWordsEmbedder
from credo.config import RunConfig
from credo.kernels import get_kernel
from credo.kernels.embedding import EmbeddingKernel
from credo.methods import METHODS, ItemSamples, Sample, Score
from credo.methods.kle import HEAT_T, kle, select_heat_t
from credo.plan.samples import (
    APRICOT,
    LABEL,
    NLI,
    ORIGINAL,
    P_TRUE,
    PARAPHRASED,
    PERTURBED,
    VERBALIZED,
)
from credo.tasks.answers import Answer, extract_answer
from credo.tasks.base import AnswerFormat
from credo.types import TokenLogprob

# ------------------------------------------------------------------------- kernels


def _judge_gram(xs: Sequence[Hashable], ys: Sequence[Hashable]) -> np.ndarray:
    """A judge-like kernel: a fixed verdict per ordered pair in {0, 0.1, ..., 1} (so 0.5,
    the cluster edge, and 1 for different answers occur), asymmetric, 1 on equal answers,
    0 where either is unparsable."""
    out = np.zeros((len(xs), len(ys)))
    for i, x in enumerate(xs):
        for j, y in enumerate(ys):
            if x is None or y is None:
                continue
            if x == y:
                out[i, j] = 1.0
            else:
                digest = hashlib.md5(f"{x!r}\x00{y!r}".encode()).digest()
                out[i, j] = (digest[0] % 11) / 10
    return out


KERNELS = {
    "indicator": get_kernel("indicator"),
    "embedding": EmbeddingKernel(BagOfWordsEmbedder()),
    "judge": _judge_gram,
}

# ----------------------------------------------------------------------- strategies

_NUMBER_STYLES = (
    "{v}", "{v}.0", "{v:,}", "${v}", "The answer is {v}.", "\\boxed{{{v}}}", "{v}.00",
    "#### {v}", "{v} apples", "about {v}", "{v}/1", "\u2212{v}", "{v:.2e}", "{v}%",
)


@st.composite
def _number_text(draw) -> str:
    v = draw(st.one_of(st.integers(-10**7, 10**7), st.sampled_from([0, 1, 18, 1000, -5])))
    return draw(st.sampled_from(_NUMBER_STYLES)).format(v=v)


_TEXT = st.one_of(
    st.text(max_size=12),  # unicode, empty, whitespace
    st.text(alphabet="ab ", max_size=6),  # few letters: many repeats after normalisation
    st.text(min_size=300, max_size=1500),  # long answers
    st.sampled_from(["Paris", "paris", "PARIS.", "Ünïcödé", "東京", "🙂", "", "  "]),
)


@st.composite
def _answer(draw, fmt: AnswerFormat) -> Sample:
    """One sample as its task's extractor reads it (None where it reads nothing)."""
    raw = draw(_number_text() if fmt == AnswerFormat.NUMBER else _TEXT)
    return Sample(raw, extract_answer(raw, fmt))


@st.composite
def _answer_set(draw, fmt: AnswerFormat, vocab: list[Sample], min_size: int = 0,
                max_size: int = 40) -> tuple[Sample, ...]:
    """``n`` samples drawn from a small vocabulary (repeats) or fresh, some unparsable."""
    n = draw(st.integers(min_size, max_size))
    pick = st.one_of(st.sampled_from(vocab), _answer(fmt),
                     st.just(Sample("I cannot tell.", Answer(None, "I cannot tell."))))
    return tuple(draw(st.lists(pick, min_size=n, max_size=n)))


_LOGPROB = st.one_of(
    st.floats(-30.0, 0.0),
    st.sampled_from([0.0, -1e-12, -0.69, -9999.0, -745.2, -800.0, -math.inf, math.nan]),
)
_TOKENS = st.sampled_from(["A", " B", "(C", "D.", "True", " False", "the", "18", " 18", "\n"])


@st.composite
def _token(draw) -> TokenLogprob:
    top = draw(st.lists(st.tuples(_TOKENS, _LOGPROB), max_size=6))
    return TokenLogprob(draw(_TOKENS), draw(_LOGPROB), tuple(top))


@st.composite
def item_samples(draw, n_min: int = 0, n_max: int = 40) -> tuple[ItemSamples, str]:
    """One item with every sample set any method reads, and a kernel name."""
    fmt = draw(st.sampled_from([AnswerFormat.NUMBER, AnswerFormat.SHORT_TEXT,
                                AnswerFormat.CHOICE]))
    text_fmt = AnswerFormat.SHORT_TEXT if fmt == AnswerFormat.CHOICE else fmt
    vocab = draw(st.lists(_answer(text_fmt), min_size=1, max_size=6))
    original = draw(_answer_set(text_fmt, vocab, n_min, n_max))
    with_logprobs = draw(st.booleans())
    if with_logprobs:
        original = tuple(
            replace(s, logprobs=tuple(draw(st.lists(_token(), max_size=4)))) for s in original
        )
    n = len(original)
    asked = draw(st.lists(st.integers(0, max(n - 1, 0)), max_size=n, unique=True)) if n else []
    confidence = st.one_of(st.none(), st.floats(0.0, 1.0),
                           st.sampled_from([0.0, 1.0, math.nan, 1.5, -0.1, "0.8", "high"]))
    verbalized = tuple(Sample("c", Answer(draw(confidence), "c"), ref=(i,)) for i in asked)
    p_true = tuple(Sample("A", Answer(None, "A"), (draw(_token()),), ref=(i,)) for i in asked)
    nli = tuple(
        Sample(v or "?", Answer(v, v or "?"), ref=(i, pos, rank))
        for i in asked for pos, tl in enumerate(original[i].logprobs or ())
        for rank in range(len(tl.top))
        if (v := draw(st.sampled_from(["entail", "contradict", "neutral", None, "skip"])))
        != "skip"
    )
    n_choices = draw(st.integers(2, 5))
    verdict = st.sampled_from([True, False, None])
    apricot = tuple(
        Sample(str(v), Answer(v, str(v)), ref=(option,))
        for option in range(n_choices)
        for v in draw(st.lists(verdict, max_size=5))
    )
    label = (Sample("A", Answer("A", "A"), tuple(draw(st.lists(_token(), min_size=1,
                                                               max_size=3)))),)
    sets = {
        ORIGINAL: original,
        PERTURBED: draw(_answer_set(text_fmt, vocab)),
        PARAPHRASED: draw(_answer_set(text_fmt, vocab, max_size=8)),
        VERBALIZED: verbalized,
        P_TRUE: p_true,
        NLI: nli,
        APRICOT: apricot,
        LABEL: label,
    }
    options = {
        "followups": draw(st.one_of(st.none(), st.integers(1, 40))),
        "ccp_min_prob": draw(st.sampled_from([0.05, 1e-9, 1.0])),
        "kle_t": draw(st.sampled_from([HEAT_T, 0.01, 1.0, 5.0])),
    }
    samples = ItemSamples("q", sets, fmt, n_choices if fmt == AnswerFormat.CHOICE else 0,
                          options)
    return samples, draw(st.sampled_from(sorted(KERNELS)))


# ---------------------------------------------------------------- documented ranges


def _range(name: str, samples: ItemSamples) -> tuple[float, float]:
    """The item value's documented range (the method's docstring)."""
    if name == "degree":  # 1 − U_Deg in [1/K, 1]
        return 1.0 / len(samples.sets[ORIGINAL]), 1.0
    return 0.0, 1.0


def _score(name: str, samples: ItemSamples, kernel: str) -> Score:
    """The registry's score, as the scoring stage calls it."""
    return METHODS[name].score(samples, KERNELS[kernel])


def _applicable(samples: ItemSamples) -> list[str]:
    return [name for name, spec in sorted(METHODS.items()) if spec.applies_to(samples.format)]


def _check_score(name: str, out: Score, samples: ItemSamples) -> None:
    assert isinstance(out, Score), name
    if math.isnan(out.value):
        assert out.unavailable, f"{name}: NaN without a reason"
    else:
        lo, hi = _range(name, samples)
        assert math.isfinite(out.value) and lo <= out.value <= hi, (name, out.value)
        assert not out.unavailable, name
    for r in out.responses:
        assert r is None or (math.isfinite(r) and 0.0 <= r <= 1.0), (name, r)
    if out.levels is not None and out.responses:
        assert all(r is None or r in out.levels for r in out.responses), name


# -------------------------------------------------------------------------- the tests


def test_every_method_is_covered():
    """A new method joins these properties by registering: nothing to add here unless its
    range is not [0, 1] (then :func:`_range`)."""
    assert len(METHODS) >= 15


@given(item_samples())
def test_every_score_is_in_its_range_or_not_available_with_a_reason(drawn):
    samples, kernel = drawn
    for name in _applicable(samples):
        _check_score(name, _score(name, samples, kernel), samples)


@st.composite
def _reordered(draw, samples: ItemSamples) -> tuple[ItemSamples, list[int]]:
    """Every sample set in a new order; follow-ups still point at the same original."""
    n = len(samples.sets[ORIGINAL])
    perm = draw(st.permutations(range(n)))  # new position j holds old sample perm[j]
    where = {old: new for new, old in enumerate(perm)}
    sets = {}
    for name, group in samples.sets.items():
        if name == ORIGINAL:
            sets[name] = tuple(group[i] for i in perm)
            continue
        if name in (VERBALIZED, P_TRUE, NLI):
            group = tuple(replace(s, ref=(where[s.ref[0]], *s.ref[1:])) for s in group)
        sets[name] = tuple(draw(st.permutations(group)))
    return replace(samples, sets=sets), list(perm)


def _renamed(samples: ItemSamples, names: dict) -> ItemSamples:
    def rename(s: Sample) -> Sample:
        return s if s.key is None else replace(s, answer=Answer(names[s.key], s.answer.raw))

    sets = {name: tuple(map(rename, group)) if name in (ORIGINAL, PERTURBED, PARAPHRASED)
            else group for name, group in samples.sets.items()}
    return replace(samples, sets=sets)


@given(item_samples(), st.data())
def test_reordering_the_samples_leaves_every_score_unchanged(drawn, data):
    """Exactly under the indicator kernel (a reordered item must tie with the original,
    not differ by rounding noise that a ranking metric would read); within 1e-9 under
    kernels with arbitrary values."""
    samples, kernel = drawn
    # the follow-up scope is "the first k original samples" (baselines.followups), a
    # position by definition: reordering with a scope would change which were asked
    samples = replace(samples, options={**samples.options, "followups": None})
    moved, perm = data.draw(_reordered(samples))
    for name in _applicable(samples):
        a, b = _score(name, samples, kernel), _score(name, moved, kernel)
        if kernel == "indicator":
            assert a.value == b.value or (math.isnan(a.value) and math.isnan(b.value)), name
        else:
            np.testing.assert_allclose(b.value, a.value, rtol=0, atol=1e-9, err_msg=name)
        if a.of == ORIGINAL and a.responses:  # per-generation scores travel with the sample
            want = [a.responses[i] for i in perm]
            np.testing.assert_allclose(np.array(b.responses, dtype=float),
                                       np.array(want, dtype=float), atol=1e-9, err_msg=name)


@given(item_samples(), st.data())
def test_renaming_the_answers_consistently_leaves_every_score_unchanged(drawn, data):
    samples, _ = drawn
    keys = sorted({s.key for name in (ORIGINAL, PERTURBED, PARAPHRASED)
                   for s in samples.sets[name] if s.key is not None}, key=repr)
    targets = data.draw(st.permutations(range(len(keys))))
    spelling = data.draw(st.sampled_from(["r{0}", "réponse №{0}", "{0}", "{0} " * 30]))
    renamed = _renamed(samples, {k: spelling.format(t) + "#" for k, t in zip(keys, targets,
                                                                              strict=True)})
    for name in _applicable(samples):
        a, b = _score(name, samples, "indicator"), _score(name, renamed, "indicator")
        assert a.value == b.value or (math.isnan(a.value) and math.isnan(b.value)), name
        assert a.responses == b.responses, name


#: Methods whose definition gives 1 when every answer is the same (2 or more samples).
MAXIMAL_WHEN_UNANIMOUS = ("self_consistency", "c3", "c3_cross", "paraphrase",
                          "answer_consistency", "semantic_entropy", "num_semantic_sets",
                          "eigv", "degree", "eccentricity")
#: ... and 0 (1/K for degree) when every answer differs, under the indicator kernel.
MINIMAL_WHEN_ALL_DIFFER = ("self_consistency", "answer_consistency", "semantic_entropy",
                           "num_semantic_sets", "eigv", "eccentricity")


def _uniform(fmt: AnswerFormat, answers: Sequence[Sample], m: int) -> ItemSamples:
    return ItemSamples("q", {ORIGINAL: tuple(answers), PERTURBED: tuple(answers[:1]) * m,
                             PARAPHRASED: tuple(answers[:1]) * m}, fmt)


def test_the_unanimity_list_names_registered_methods():
    assert set(MAXIMAL_WHEN_UNANIMOUS) <= set(METHODS)
    assert set(MINIMAL_WHEN_ALL_DIFFER) <= set(MAXIMAL_WHEN_UNANIMOUS)


@given(st.sampled_from([AnswerFormat.NUMBER, AnswerFormat.SHORT_TEXT]), st.data(),
       st.integers(2, 40), st.integers(2, 40), st.sampled_from(sorted(KERNELS)))
def test_identical_answers_give_the_maximum(fmt, data, n, m, kernel):
    one = data.draw(_answer(fmt).filter(lambda s: s.key is not None))
    samples = _uniform(fmt, [one] * n, m)
    for name in MAXIMAL_WHEN_UNANIMOUS:
        assert _score(name, samples, kernel).value == 1.0, name
    assert 0.0 < _score("kle", samples, kernel).value < 1.0  # its own closed form below


@given(st.integers(2, 40), st.booleans())
def test_answers_that_all_differ_give_the_minimum(n, with_none):
    answers = [Sample(str(i), Answer(str(i), str(i))) for i in range(n)]
    if with_none:  # an unparsable answer is a cluster of its own and matches nothing
        answers[-1] = Sample("?", Answer(None, "?"))
    samples = _uniform(AnswerFormat.SHORT_TEXT, answers, 2)
    for name in MINIMAL_WHEN_ALL_DIFFER:
        assert _score(name, samples, "indicator").value == 0.0, name
    assert _score("degree", samples, "indicator").value == 1.0 / n
    assert _score("kle", samples, "indicator").value == 0.0  # L = 0: ρ = I/K, VNE = ln K


@given(item_samples(n_max=1), st.data())
def test_an_item_a_method_cannot_score_is_not_available_never_an_error(drawn, data):
    """Fewer original samples than a method needs (0 or 1 here), or a sample set it reads
    missing (no perturbed set, no follow-ups): NaN with the reason."""
    samples, kernel = drawn
    gone = data.draw(st.sets(st.sampled_from(sorted(samples.sets))))
    for trimmed in (samples, replace(samples, sets={k: v for k, v in samples.sets.items()
                                                     if k not in gone})):
        for name in _applicable(trimmed):
            out = _score(name, trimmed, kernel)
            _check_score(name, out, trimmed)
            needs = METHODS[name].needs_for(trimmed.format)
            if any(s not in trimmed.sets for s in needs):
                assert math.isnan(out.value) and out.unavailable, name
            if ORIGINAL in needs and METHODS[name].min_samples.get(ORIGINAL, 0) >= 2:
                assert math.isnan(out.value) and out.unavailable, name


def _letters(answers: str) -> tuple[Sample, ...]:
    return tuple(Sample(a, Answer(a, a)) for a in answers)


@pytest.mark.parametrize("perturbed", ["", "x"])
def test_c3_without_enough_perturbed_samples_is_not_available(perturbed):
    samples = ItemSamples("q", {ORIGINAL: _letters("xxy"), PERTURBED: _letters(perturbed)})
    out = METHODS["c3"].score(samples, KERNELS["indicator"])
    assert math.isnan(out.value)
    assert out.unavailable == f"{len(perturbed)} perturbed samples; it needs at least 2"
    out = METHODS["c3_cross"].score(ItemSamples("q", {ORIGINAL: _letters("xxy")}),
                                    KERNELS["indicator"])
    assert math.isnan(out.value) and out.unavailable == "the item has no perturbed samples"


# --------------------------------------------------- semantic entropy at n = 5 (issue 21)


def _distinct(n: int) -> ItemSamples:
    return ItemSamples("q", {ORIGINAL: _letters("abcdefghijkl"[:n])})


@pytest.mark.parametrize("n", [3, 5, 6, 7, 10, 12])
def test_semantic_entropy_of_all_different_answers_is_exactly_zero(n):
    """1 − SE/ln n with SE = ln n was −2.2e−16 at n = 5 (and 12, 13, ...): the evaluation
    refused it and `credo score --methods semantic_entropy` exited 1."""
    assert METHODS["semantic_entropy"].score(_distinct(n), KERNELS["indicator"]).value == 0.0


def test_credo_score_semantic_entropy_on_five_different_answers(tmp_path: Path):
    from credo.cli import main

    rows = [{"item": item, "set": "original", "answer": a, "correct": i % 2 == 0}
            for item, answers in {"q1": "abcde", "q2": "xxxxx", "q3": "ppqqr"}.items()
            for i, a in enumerate(answers)]
    path = tmp_path / "five.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "run"
    assert main(["score", str(path), "--methods", "semantic_entropy", "--bootstrap", "50",
                 "--out", str(out), "--cache", str(tmp_path / "c.sqlite"), "--quiet"]) == 0
    scores = {r["id"]: r["scores"]["semantic_entropy"]
              for r in map(json.loads, (out / "scores.jsonl").read_text().splitlines())}
    assert scores["q1"] == 0.0 and scores["q2"] == 1.0 and 0.0 < scores["q3"] < 1.0


# ------------------------------------------------------------------- KLE's scale (item 4)


def _kle_unanimous(k: int, t: float) -> float:
    """1 − VNE/ln K for K identical answers: ρ's eigenvalues ∝ 1 and e^{−tK} (K − 1 times),
    the heat kernel exp(−t(K·I − J)) of the complete graph, normalised."""
    mu = np.array([1.0] + [math.exp(-t * k)] * (k - 1))
    mu = mu[mu > 0] / mu.sum()
    return 1.0 - float(-(mu * np.log(mu)).sum()) / math.log(k)


def _kle_score(answers: Sequence[str], **options) -> float:
    samples = ItemSamples("q", {ORIGINAL: _letters(answers)}, options=options)
    return METHODS["kle"].score(samples, KERNELS["indicator"]).value


def test_kle_scale_at_the_default_heat_time_is_pinned():
    """Issue 21's numbers: at t = 0.3 five identical answers score 0.16 (VNE 1.35 of
    ln 5 = 1.61) and thirty 0.99; the heat kernel leaves weight e^{−tK} off the constant
    eigenvector, so the score reaches 1 only as t·K grows (credo.methods.kle's docstring)."""
    assert HEAT_T == 0.3 and RunConfig().baselines.kle_t == HEAT_T
    assert kle(["7"] * 5) == pytest.approx(1.3453, abs=1e-4)
    assert _kle_score(["7"] * 5) == pytest.approx(0.1641, abs=1e-4)
    assert _kle_score(["7"] * 10) == pytest.approx(0.436, abs=1e-3)
    assert _kle_score(["7"] * 30) == pytest.approx(0.9895, abs=1e-4)
    assert _kle_score(["7"] * 5, kle_t=1.0) == pytest.approx(0.902, abs=1e-3)


@given(st.integers(2, 40), st.floats(0.01, 50.0))
def test_kle_of_identical_answers_is_the_heat_kernels_closed_form(k, t):
    got = _kle_score(["7"] * k, kle_t=t)
    assert got == pytest.approx(_kle_unanimous(k, t), abs=1e-8)
    assert got <= _kle_score(["7"] * k, kle_t=2 * t)  # longer diffusion, more certain
    assert _kle_score([str(i) for i in range(k)], kle_t=t) == 0.0  # W = I whatever t


def test_kle_heat_time_reaches_the_method_from_the_config(tmp_path: Path):
    """``baselines: {kle_t: ...}`` in the YAML of `credo score` (and `credo run`) is what
    the method reads."""
    from credo.cli import main

    rows = [{"item": item, "set": "original", "answer": a, "correct": a == "x"}
            for item, answers in {"q1": "xxxxx", "q2": "xxyyz", "q3": "abcde"}.items()
            for a in answers]
    path = tmp_path / "kle.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    got = {}
    for t in (0.3, 2.0):
        config = tmp_path / f"t{t}.yaml"
        config.write_text(f"methods: [kle]\nbootstrap: 0\nbaselines: {{kle_t: {t}}}\n")
        out = tmp_path / f"run{t}"
        assert main(["score", str(path), "--config", str(config), "--out", str(out),
                     "--cache", str(tmp_path / "c.sqlite"), "--quiet"]) == 0
        got[t] = {r["id"]: r["scores"]["kle"]
                  for r in map(json.loads, (out / "scores.jsonl").read_text().splitlines())}
    assert got[0.3]["q1"] == pytest.approx(_kle_unanimous(5, 0.3), abs=1e-9)
    assert got[2.0]["q1"] == pytest.approx(_kle_unanimous(5, 2.0), abs=1e-9)
    assert got[0.3]["q3"] == got[2.0]["q3"] == 0.0
    assert RunConfig.model_validate({"baselines": {"kle_t": 1.5}}).baselines.method_options()[
        "kle_t"] == 1.5
    with pytest.raises(ValueError, match="kle_t"):
        RunConfig.model_validate({"baselines": {"kle_t": 0}})


def test_select_heat_t_picks_the_best_ranking_t_on_validation_items():
    # unanimous and near-unanimous items right, split ones wrong: every t ranks them
    # perfectly (AUROC 1), so the smallest t of the grid wins
    items = [["7"] * 5, ["7"] * 4 + ["8"], ["1", "2", "3", "4", "5"], ["1", "1", "2", "3", "4"]]
    best, table = select_heat_t(items, [1.0, 1.0, 0.0, 0.0], grid=(2.0, 0.3, 1.0))
    assert list(table) == [0.3, 1.0, 2.0] and best == 0.3 and table[0.3] == 1.0
    with pytest.raises(ValueError, match="both classes"):
        select_heat_t(items, [1.0] * 4)

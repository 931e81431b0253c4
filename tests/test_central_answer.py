"""The answer credo gives (issue 32, item 1: "the modal one; for open-ended answers the most
central sample"): the parsed original sample with the largest kernel similarity to the
others, which under the indicator kernel is the first sample of the modal answer."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from credo import RunConfig, run
from credo.kernels.embedding import EmbeddingKernel
from credo.kernels.indicator import indicator_gram
from credo.methods.scoring import MODAL, ItemResult, central_sample
from credo.models.scripted import ScriptedModel
from credo.plan.samples import Sample
from credo.tasks.answers import Answer
from credo.tasks.base import AnswerFormat, Item, Task

answers = st.lists(st.one_of(st.none(), st.sampled_from("abcde")), min_size=1, max_size=12)


def _modal_rule(values: list[str | None]) -> int | None:
    """The pre-issue-32 rule, written again: the first sample of the most frequent parsed
    answer, ties to the answer seen first."""
    parsed = [v for v in values if v is not None]
    if not parsed:
        return None
    best = None
    for v in parsed:  # first occurrence order
        if best is None or parsed.count(v) > parsed.count(best):
            best = v
    return values.index(best)


@given(answers)
def test_under_the_indicator_kernel_the_central_sample_is_the_modal_answers_first(values):
    assert central_sample(values, indicator_gram) == _modal_rule(values)
    samples = tuple(Sample(v or "", Answer(v, v or "")) for v in values)
    item = ItemResult(Item("q", "?", ""), (), samples, (), (False,) * len(values), {})
    assert item.chosen == MODAL and item.answer_index == _modal_rule(values)


@given(answers, st.integers(0, 2**32 - 1))
def test_the_central_sample_has_the_largest_mean_similarity_to_the_others(values, seed):
    """Any symmetric kernel with k(x, x) = 1: the choice has the largest mean similarity
    to the other parsed samples, computed pair by pair, the first one on ties."""
    rng = np.random.default_rng(seed)
    names = sorted({v for v in values if v is not None})
    sim = {(a, b): round(float(rng.uniform()), 1) for a in names for b in names if a < b}

    def k(x, y):
        return 1.0 if x == y else sim[min(x, y), max(x, y)]

    def gram(xs, ys):
        return np.array([[k(x, y) for y in ys] for x in xs])

    got = central_sample(values, gram)
    parsed = [i for i, v in enumerate(values) if v is not None]
    if not parsed:
        assert got is None
        return
    means = {i: (np.mean([k(values[i], values[j]) for j in parsed if j != i])
                 if len(parsed) > 1 else 0.0) for i in parsed}
    top = max(means.values())
    assert got == min(i for i in parsed if np.isclose(means[i], top))


CITIES = ("London", "Paris France", "Paris", "Paris city")
"""Four distinct answers: the indicator kernel sees no majority (the first sample is
given); under a bag-of-words embedding "Paris" shares a word with two others
(cosine 1/√2 each), "Paris France" and "Paris city" with two (1/√2 and 1/2), London with
none, so "Paris" is the most central."""


def test_an_open_ended_run_gives_the_most_central_sample(tmp_path, bow_embedder):
    task = Task("capitals", (Item("fr", "What is the capital of France?", "Paris"),),
                AnswerFormat.SHORT_TEXT)
    model = ScriptedModel(lambda messages, seed: CITIES[seed % 4])

    def run_with(kernel: str, out: str):
        cfg = RunConfig(task="capitals", n=4, m=2, limit=None, kernel=kernel, bootstrap=0,
                        methods=["self_consistency"], out=tmp_path / out,
                        cache=tmp_path / "cache.sqlite")
        return run(cfg, model=model, embedder=bow_embedder, task=task, show_progress=False)

    embedded = run_with("embedding", "emb").items[0]
    texts = [s.answer.value for s in embedded.original]
    assert sorted(texts) == sorted(c.lower() for c in CITIES)
    assert embedded.answer == "paris" and embedded.answer_correct == 1.0
    kern = EmbeddingKernel(bow_embedder)
    totals = kern(texts, texts).sum(axis=1) - 1.0
    assert embedded.answer_index == int(np.argmax(totals)) == texts.index("paris")
    row = json.loads((tmp_path / "emb" / "scores.jsonl").read_text().splitlines()[0])
    assert row["answer"] == "paris" and row["answer_correct"] == 1.0

    # the same samples (from the cache) under the indicator kernel: no majority, the first
    indicated = run_with("indicator", "ind").items[0]
    assert [s.answer.value for s in indicated.original] == texts
    assert indicated.answer_index == 0 and indicated.answer == texts[0]


def _capitals(ks) -> Task:
    return Task("capitals", tuple(Item(f"c{k}", f"Question number {k}: the capital of France?",
                                       "Paris") for k in ks), AnswerFormat.SHORT_TEXT)


def _capital_answers(messages, seed):
    """Even questions: "Paris" every time; odd ones: the four :data:`CITIES` by seed."""
    k = int(messages[-1].content.split("number ")[1].split(":")[0])
    return "Paris" if k % 2 == 0 else CITIES[seed % 4]


def test_the_gateway_replies_with_the_most_central_sample(tmp_path, bow_embedder):
    """Under a certificate of an open-ended recipe (embedding kernel), ``credo.Guard``
    answers with the most central sample's text, the one the calibration run counted."""
    from credo.api import certify_run
    from credo.serve.guard import Guard

    cfg = RunConfig(task="capitals", n=4, limit=None, kernel="embedding", bootstrap=0,
                    methods=["self_consistency"], out=tmp_path / "calib",
                    cache=tmp_path / "calib.sqlite")
    calib = run(cfg, model=ScriptedModel(_capital_answers), embedder=bow_embedder,
                task=_capitals(range(60)), show_progress=False)
    odd = [r for r in calib.items if int(r.item.id[1:]) % 2]
    assert {r.answer for r in odd} == {"paris"}  # the central sample, right every time
    assert any(r.original[0].answer.value != "paris" for r in odd)
    certify_run(tmp_path / "calib", "self_consistency", alpha=0.2, out=tmp_path / "cert.json")
    with Guard(tmp_path / "cert.json", model=ScriptedModel(_capital_answers),
               embedder=bow_embedder, overrides={"cache": str(tmp_path / "live.sqlite")}) as g:
        got = [g.ask(f"Question number {k}: the capital of France?") for k in range(101, 111, 2)]
    assert [(a.answer, a.reply) for a in got] == [("paris", "Paris")] * len(got)
    assert all(a.accept is (a.score >= g.cert.certificate.threshold) for a in got)

"""Context perturbations: cleaning rules and the diversity filter of 000 App. A.2."""

import numpy as np
import pytest

from credo.config import PerturbationConfig
from credo.generation.executor import Executor
from credo.generation.store import GenerationStore
from credo.models.scripted import ScriptedModel
from credo.perturb.context import (
    PrefixWriter,
    clean_candidate,
    diversity_filter,
    perturbation_messages,
)
from credo.tasks.base import Item

Q = "Rachel saw 317 visitors at the palace and 295 the day before. How many more came?"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Many tourists visited the ancient castle during the weekend.",
         "Many tourists visited the ancient castle during the weekend."),
        ('Context: "Museums often keep careful records of their daily guests"',
         "Museums often keep careful records of their daily guests."),
        (
            "Palaces attract crowds in summer.\nSecond line ignored.",
            "Palaces attract crowds in summer.",
        ),
        ("Crowds gather at old palaces. They love the gardens.", "Crowds gather at old palaces."),
        ("Did you know palaces are popular?", None),  # a question
        ("Too short.", None),
        ("The palace counted 317 guests on a sunny morning.", None),  # a number
        ("Some palaces count 12 thousand guests on a sunny morning.", None),  # any number
        ("Rachel often visits royal buildings with her friends.", None),  # a question's name
        ("Rachel's friends often visit royal buildings together.", None),
        ("Rosalía fans often travel to see royal buildings.", None),  # copied from an example
        ("The context sentence is about visitors to royal buildings.", None),  # meta talk
        ("", None),
        ("   \n  ", None),
    ],
)
def test_clean_candidate(text, expected):
    assert clean_candidate(text, Q) == expected


def test_restating_the_question_is_rejected():
    assert clean_candidate("How many more came?", "How many more came?") is None
    q = "Which planet is the largest in the solar system by mass?"
    assert clean_candidate("Which planet is the largest in the solar system by mass", q) is None


def test_diversity_filter_keeps_below_threshold_in_order():
    e = np.array([[1.0, 0.0], [0.9, np.sqrt(1 - 0.81)], [0.0, 1.0], [0.5, np.sqrt(0.75)]])
    # row 1 has cosine 0.9 with row 0 (>= 0.8124): dropped; row 3 cos 0.5 / 0.866 with 0 / 2
    assert diversity_filter(e, 0.8124) == [0, 2]
    assert diversity_filter(e, 0.95) == [0, 1, 2, 3]
    # a candidate exactly at the threshold is dropped ("below k" keeps it)
    assert diversity_filter(np.array([[1.0, 0.0], [0.8, 0.6]]), 0.8) == [0]


def test_perturbation_prompt_mentions_domain_and_question():
    msgs = perturbation_messages(Item("x", Q, "22"), "arithmetic reasoning")
    assert "arithmetic reasoning" in msgs[-1].content and Q in msgs[-1].content
    assert "neutral" in msgs[0].content
    assert [m.role for m in msgs] == ["system", "user", "assistant", "user", "assistant", "user"]


SENTENCES = [
    "Many tourists like visiting old royal buildings on holidays.",
    "Many tourists like visiting old royal buildings on holidays.",  # duplicate
    "Guides at historic sites often share stories with their groups.",
    "What time does the palace open?",  # invalid: a question
    "Weekend crowds can make ticket lines long at popular attractions.",
    "Souvenir shops near landmarks sell postcards and small models.",
    "Many tourists like visiting old royal buildings on holidays!",  # same words
    "Photography rules differ from one heritage building to another.",
]


def sentence_by_seed(messages, seed):
    return SENTENCES[seed % len(SENTENCES)]


def test_full_prefix_sets_are_filtered_and_cached(tmp_path, bow_embedder):
    items = [Item("a", Q, "22")]
    model = ScriptedModel(sentence_by_seed)
    cfg = PerturbationConfig(max_rounds=3)
    with GenerationStore(tmp_path / "c.sqlite") as store:
        ex = Executor(model, store, 0, show_progress=False)
        sets = PrefixWriter(items, 4, "arithmetic", ex, bow_embedder, cfg).full()
        p = sets["a"]
        assert len(p.kept) == 4
        assert len(set(p.kept)) == 4
        assert all(not k.endswith("?") for k in p.kept)
        calls = model.samples
        # a second call finds every candidate in the cache
        again = PrefixWriter(items, 4, "arithmetic", ex, bow_embedder, cfg).full()
        assert again["a"] == p
        assert model.samples == calls


def test_too_few_distinct_candidates_are_reused_in_turn(tmp_path, bow_embedder):
    model = ScriptedModel(lambda m, s: SENTENCES[0])
    with GenerationStore(tmp_path / "c.sqlite") as store:
        ex = Executor(model, store, 0, show_progress=False)
        sets = PrefixWriter([Item("a", Q, "22")], 3, "", ex, bow_embedder,
                            PerturbationConfig(max_rounds=2)).full()
    p = sets["a"]
    assert p.kept == (SENTENCES[0],)
    assert p.rejected_similar == p.candidates - 1
    assert p.prefixes(3) == [SENTENCES[0]] * 3


def test_later_rounds_do_not_re_embed_earlier_candidates(tmp_path, bow_embedder):
    seen: list[str] = []

    class Recording:
        name = "rec"

        def encode(self, texts):
            seen.extend(texts)
            return bow_embedder.encode(texts)

    model = ScriptedModel(lambda m, s: SENTENCES[0] if s % 2 else SENTENCES[2])
    with GenerationStore(tmp_path / "c.sqlite") as store:
        ex = Executor(model, store, 0, show_progress=False)
        PrefixWriter([Item("a", Q, "22")], 3, "", ex, Recording(),
                     PerturbationConfig(max_rounds=3)).full()
    assert sorted(seen) == sorted({SENTENCES[0], SENTENCES[2]})


def _rounds_reference(items, m, domain, executor, embedder, config):
    """The full run's own loop before it became PrefixWriter with target m (000
    App. A.2's rounds): round 1 asks every item for more_candidates(m); round r + 1 asks an
    item short of m for more_candidates(m - kept) more; after max_rounds, up to max_rounds
    more only for an item with none kept."""
    from credo.perturb.context import _filter_item, plan_writer_round, rule_context

    contexts = {it.id: rule_context(it, config.rules) for it in items}
    drawn, result, pending = {it.id: 0 for it in items}, {}, list(items)
    for rnd in range(2 * config.max_rounds):
        if rnd >= config.max_rounds:
            pending = [it for it in pending if not result[it.id].kept]
            if not pending:
                break
        kept = {i: len(p.kept) for i, p in result.items()}
        planned = plan_writer_round(pending, m, domain, config, kept, drawn)
        drawn.update({it.id: p.n for it, p in zip(pending, planned, strict=True)})
        for it, g in zip(pending, executor.execute(planned), strict=True):
            result[it.id] = _filter_item(it, [x.text for x in g], m, embedder,
                                         config.threshold, contexts[it.id], config.rules)
        pending = [it for it in pending if len(result[it.id].kept) < m]
        if not pending:
            break
    return result


def test_writer_rounds_are_the_full_runs(tmp_path, bow_embedder):
    """PrefixWriter.full draws with every target at m: its calls
    and sets are still exactly the rounds of its former loop (kept above as the
    reference), for items that fill up in round 1, in round 2, never, or keep nothing."""
    good = SENTENCES[2:3] + SENTENCES[4:6] + SENTENCES[7:]
    items = [Item(k, f"{Q} ({k})", "22") for k in "abcd"]

    def write(messages, seed):
        kind = next(k for k in "abcd" if f"({k})" in messages[-1].content)
        return {"a": good[seed % 4] if seed % 2 else "What?",  # half invalid
                "b": SENTENCES[0],  # one distinct prefix, ever
                "c": "Too short.",  # never valid
                "d": good[seed % 4]}[kind]  # fills in round 1 or 2

    def recorded(store, calls):
        class Recording(Executor):
            def execute(self, planned, description="sampling", stage=None):
                calls.append([(p.label, p.n) for p in planned])
                return super().execute(planned, description, stage)
        return Recording(ScriptedModel(write), store, 0, show_progress=False)

    for max_rounds, m in [(2, 4), (3, 3), (1, 2)]:
        cfg = PerturbationConfig(max_rounds=max_rounds)
        got, want = [], []
        with GenerationStore(tmp_path / f"{m}.sqlite") as store:
            sets = PrefixWriter(items, m, "", recorded(store, got), bow_embedder, cfg).full()
        with GenerationStore(tmp_path / f"{m}-ref.sqlite") as store:
            ref = _rounds_reference(items, m, "", recorded(store, want), bow_embedder, cfg)
        assert got == want
        assert sets == ref
        assert len(got) > 1  # some item needed a second round

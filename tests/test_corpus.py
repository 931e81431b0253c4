"""Corpus noise (000 App. F): context prefixes drawn from a text file, cleaned and filtered
like written ones, seeded per item, used by a run instead of a writer model."""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from conftest import toy_task
from credo import RunConfig, run
from credo.config import PerturbationConfig
from credo.errors import UserError
from credo.models.scripted import ScriptedModel
from credo.perturb.context import PROMPTS, is_neutral_context
from credo.perturb.corpus import MAX_WORDS, MIN_WORDS, corpus_perturbations, load_corpus
from credo.tasks.base import Item

ADJECTIVES = ["quiet", "busy", "ancient", "modern", "rainy", "sunny", "narrow", "wide",
              "crowded", "empty", "golden", "silver"]
NOUNS = ["harbour", "orchard", "library", "bakery", "meadow", "workshop", "theatre", "garden",
         "station", "market", "chapel", "bridge"]
VERBS = ["welcomes", "attracts", "greets", "entertains", "shelters", "delights", "surprises",
         "informs", "inspires", "comforts", "amuses", "feeds"]
PEOPLE = ["travellers", "painters", "students", "farmers", "sailors", "poets", "bakers",
          "doctors", "tailors", "hikers", "singers", "pilots"]
TIMES = ["mornings", "evenings", "weekends", "winters", "summers", "holidays", "afternoons",
         "springs", "autumns", "nights", "festivals", "sundays"]


def _sentences(k: int = 12) -> list[str]:
    """Distinct sentences of 9 words; two share at most their function words."""
    return [
        f"The {a} {n} often {v} many {p} during {t}."
        for a, n, v, p, t in itertools.islice(
            zip(ADJECTIVES, NOUNS, VERBS, PEOPLE, TIMES, strict=True), k
        )
    ]


@pytest.fixture
def corpus_file(tmp_path: Path) -> Path:
    lines = _sentences()
    text = (
        " ".join(lines[:6])
        + "\n\nA short line.\n\n"  # too short alone: only joined with a neighbour
        + "\n".join(lines[6:])  # hard-wrapped prose: single newlines are spaces
        + "\n\nIn 1999 the committee met 12 times.\nWhy do harbours smell of salt?\n"
    )
    path = tmp_path / "corpus.txt"
    path.write_text(text, encoding="utf-8")
    return path


ITEMS = (
    Item("q1", "Tom has two apples and gets three more. How many apples?", "5"),
    Item("q2", "Which gas do plants take in from the air?", "carbon dioxide"),
)


def test_load_corpus_cuts_windows_of_one_or_two_sentences(corpus_file):
    corpus = load_corpus(corpus_file)
    lines = _sentences()
    assert lines[0] in corpus.snippets
    assert f"{lines[0]} {lines[1]}" in corpus.snippets  # two sentences, 18 words
    assert f"{lines[5]} A short line." not in corpus.snippets  # paragraphs are not joined
    assert "A short line." not in corpus.snippets  # 3 words
    assert f"{lines[6]} {lines[7]}" in corpus.snippets  # across a single newline
    # digits and questions are the rules' business, per item, at draw time
    assert "In 1999 the committee met 12 times. Why do harbours smell of salt?" in corpus.snippets
    for s in corpus.snippets:
        assert MIN_WORDS <= len(s.split()) <= MAX_WORDS
    assert len(set(corpus.snippets)) == len(corpus.snippets)


def test_load_corpus_jsonl_gz_and_errors(tmp_path):
    rows = [{"text": s, "meta": {}} for s in _sentences(3)]
    path = tmp_path / "redpajama_sample.jsonl.gz"
    path.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode()))
    corpus = load_corpus(path)
    assert set(_sentences(3)) <= set(corpus.snippets)
    assert f"{_sentences(3)[0]} {_sentences(3)[1]}" not in corpus.snippets  # rows are documents
    with pytest.raises(UserError, match=r"nope\.txt: no such corpus file"):
        load_corpus(tmp_path / "nope.txt")
    short = tmp_path / "short.txt"
    short.write_text("Too short. Also short.\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"short\.txt: no snippet of 8-40 words"):
        load_corpus(short)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"body": "x"}\n', encoding="utf-8")
    with pytest.raises(UserError, match=r"bad\.jsonl:2: a corpus row needs a 'text' field"):
        load_corpus(bad)


def test_corpus_perturbations_are_seeded_distinct_and_clean(corpus_file, bow_embedder):
    corpus = load_corpus(corpus_file)
    cfg = PerturbationConfig()
    first = corpus_perturbations(ITEMS, 4, corpus, bow_embedder, cfg, seed=0)
    again = corpus_perturbations(ITEMS, 4, corpus, bow_embedder, cfg, seed=0)
    other = corpus_perturbations(ITEMS, 4, corpus, bow_embedder, cfg, seed=1)
    assert first == again  # a rerun draws the same snippets
    assert [first[i.id].kept for i in ITEMS] != [other[i.id].kept for i in ITEMS]
    assert first["q1"].kept != first["q2"].kept  # each item draws its own
    for item in ITEMS:
        pset = first[item.id]
        assert len(pset.kept) == len(set(pset.kept)) == 4
        assert all(is_neutral_context(s, item.question, MIN_WORDS, MAX_WORDS) for s in pset.kept)
        assert not any(any(ch.isdigit() for ch in s) for s in pset.kept)
        assert pset.candidates >= 4


def test_corpus_perturbations_apply_the_diversity_filter(tmp_path, bow_embedder):
    base = _sentences(3)
    near = [s.replace("often", "sometimes") for s in base]  # cosine 8/9 with its twin
    path = tmp_path / "twins.txt"
    path.write_text("\n\n".join(base + near), encoding="utf-8")
    corpus = load_corpus(path)
    cfg = PerturbationConfig(candidates_per_round=2)
    pset = corpus_perturbations(ITEMS[:1], 6, corpus, bow_embedder, cfg, seed=0)["q1"]
    assert len(pset.kept) == 3  # one of each pair of twins
    assert pset.rejected_similar == 3 and pset.candidates == 6
    vectors = bow_embedder.encode(list(pset.kept))
    sims = vectors @ vectors.T
    assert np.all(sims[~np.eye(3, dtype=bool)] < cfg.threshold)
    assert pset.prefixes(6) == [*pset.kept, *pset.kept]  # reused in turn, as written ones


def test_corpus_perturbations_drop_snippets_naming_the_question(tmp_path, bow_embedder):
    path = tmp_path / "names.txt"
    path.write_text(
        "Tom often walks to the market with his little brother.\n\n"
        + "\n\n".join(_sentences(4)),
        encoding="utf-8",
    )
    pset = corpus_perturbations(ITEMS[:1], 5, load_corpus(path), bow_embedder,
                                PerturbationConfig(), seed=0)["q1"]
    assert len(pset.kept) == 4 and pset.rejected_invalid == 1
    assert not any("Tom" in s for s in pset.kept)


# --------------------------------------------------------------------------- a run

TASK = toy_task("easy", "fragile")


def _respond(messages, seed):
    assert messages[0].content not in PROMPTS.values(), "no writer model is asked"
    user = messages[-1].content
    if "Tom" in user:
        return "Answer: 5"
    perturbed = any(s in user for s in _sentences())
    return "Answer: 8" if perturbed else "Answer: 7"


def test_run_with_corpus_noise(tmp_path, corpus_file, bow_embedder):
    cfg = RunConfig(
        task="toy", n=4, m=4, limit=None, bootstrap=0, methods=["c3", "self_consistency"],
        perturbation={"corpus": corpus_file, "writer": "never-loaded"},
        out=tmp_path / "run", cache=tmp_path / "c.sqlite",
    )
    model = ScriptedModel(_respond)
    result = run(cfg, model=model, embedder=bow_embedder, task=TASK, show_progress=False)
    by_id = {r.item.id: r for r in result.items}
    assert by_id["easy"].scores["c3"] == 1.0
    assert by_id["fragile"].scores["c3"] == 0.0  # every perturbed answer shifted
    corpus = set(load_corpus(corpus_file).snippets)
    for r in result.items:
        assert len(set(r.perturbations)) == 4 and set(r.perturbations) <= corpus
    assert model.samples == 2 * (4 + 4)  # answers only: no perturbation was generated
    lines = (cfg.out / "perturbations.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    assert {row["id"]: row["kept"] for row in rows} == {
        i: list(p.kept) for i, p in result.perturbation_sets.items()
    }

    assert "writer none (snippets of the corpus corpus.txt)" in (
        (cfg.out / "report.html").read_text()
    )

    again_model = ScriptedModel(_respond)
    again = run(cfg, model=again_model, embedder=bow_embedder, task=TASK, show_progress=False)
    assert again_model.samples == 0  # the same snippets, so every answer is cached
    assert [r.perturbations for r in again.items] == [r.perturbations for r in result.items]


def test_run_with_a_missing_corpus_fails_before_any_call(tmp_path, bow_embedder):
    cfg = RunConfig(task="toy", n=2, m=2, limit=None, bootstrap=0, methods=["c3"],
                    perturbation={"corpus": tmp_path / "absent.txt"},
                    out=tmp_path / "run", cache=tmp_path / "c.sqlite")
    model = ScriptedModel(_respond)
    with pytest.raises(UserError, match=r"absent\.txt: no such corpus file"):
        run(cfg, model=model, embedder=bow_embedder, task=TASK, show_progress=False)
    assert model.calls == 0

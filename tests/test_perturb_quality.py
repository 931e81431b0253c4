"""Perturbation quality checks that call a model: topic alignment (000 App. A.4) and the
A.2 threshold calibration, on a ScriptedModel through the cached Executor."""

from __future__ import annotations

import json

import numpy as np
import pytest

from credo.generation.executor import Executor
from credo.generation.store import GenerationStore
from credo.models.scripted import ScriptedModel
from credo.perturb.quality import (
    PARAPHRASE_SYSTEM_PROMPT,
    TOPIC_DOMAINS,
    calibrate_threshold,
    clean_sentence,
    pairwise_similarities,
    parse_domain,
    threshold_from_similarities,
    topic_alignment,
)

WORDS = ["market", "harvest", "river", "school", "ledger", "oven", "train", "library"]


def paraphraser(messages, seed):
    assert messages[0].content == PARAPHRASE_SYSTEM_PROMPT
    premise = messages[-1].content
    if seed % 7 == 0:
        return "   "  # unusable: nothing to embed
    extra = " ".join(WORDS[(seed + k) % len(WORDS)] for k in range(seed % 3))
    return f"Rewritten: {premise} {extra}".strip()


def judge(messages, seed):
    text = messages[-1].content.split("\n\nDomains:")[0]
    if "mean" in text or "variance" in text:
        return "2"
    if "apples" in text:
        return "1. arithmetic reasoning"
    if "weather" in text:
        return "I cannot tell."
    return "commonsense reasoning"


@pytest.fixture
def store(tmp_path):
    with GenerationStore(tmp_path / "cache.sqlite") as s:
        yield s


def test_threshold_is_the_5th_percentile_of_paraphrase_similarities(store, bow_embedder):
    premises = ["Many tourists visited the old castle at the weekend.",
                "Students often compare their notes before an exam.",
                "A baker starts work long before the shop opens."]
    model = ScriptedModel(paraphraser)
    cal = calibrate_threshold(premises, Executor(model, store, show_progress=False),
                              bow_embedder, n_paraphrases=10)
    # cleaning: the label is gone, every paraphrase starts with its premise
    assert len(cal.paraphrases) == 3
    for p, group in zip(premises, cal.paraphrases, strict=True):
        assert group and all(x.startswith(p) for x in group)
    assert cal.unusable == 30 - sum(len(g) for g in cal.paraphrases) > 0
    # by hand: all pairs within each group (never across), pooled, numpy's 5th percentile
    sims = []
    for group in cal.paraphrases:
        e = bow_embedder.encode(list(group))
        sims += [float(e[i] @ e[j]) for i in range(len(group)) for j in range(i + 1, len(group))]
    assert np.sort(cal.similarities) == pytest.approx(np.sort(sims))
    assert cal.k == pytest.approx(np.percentile(sims, 5))
    # cached: a second calibration generates nothing
    calibrate_threshold(premises, Executor(model, store, show_progress=False), bow_embedder,
                        n_paraphrases=10)
    assert model.samples == 30
    js = cal.to_json()
    assert js["k"] == cal.k and js["pairs"] == len(sims) and json.dumps(js)


def test_threshold_from_similarities_edges():
    s = np.linspace(0, 1, 101)
    assert threshold_from_similarities(s) == pytest.approx(0.05)
    assert threshold_from_similarities(s, 50) == pytest.approx(np.percentile(s, 50))
    with pytest.raises(ValueError):
        threshold_from_similarities([])
    with pytest.raises(ValueError):
        threshold_from_similarities([0.5], 101)


def test_pairwise_similarities_within_groups_only(bow_embedder):
    sims = pairwise_similarities([["a b", "a b", "c d"], ["x"], ["e f", "g h"]], bow_embedder)
    assert sorted(np.round(sims, 6)) == [0.0, 0.0, 0.0, 1.0]  # 3 pairs + 1 pair; "x" none


def test_topic_alignment_counts_the_judge_verdicts(store):
    texts = ["The mean and variance describe a sample.", "Statistics use the mean of data.",
             "Farmers sell apples at the market.", "The weather was pleasant that day.",
             "The mean and variance describe a sample."]  # a duplicate is judged once
    model = ScriptedModel(judge)
    tc = topic_alignment(texts, "statistical reasoning",
                         Executor(model, store, show_progress=False))
    assert tc.texts == tuple(dict.fromkeys(texts))
    assert tc.judged == ("statistical reasoning", "statistical reasoning",
                         "arithmetic reasoning", None)
    assert tc.aligned == 2 and tc.unparsable == 1 and tc.rate == pytest.approx(0.5)
    assert tc.counts["statistical reasoning"] == 2 and tc.counts["unparsable"] == 1
    # the judge saw only the perturbation and the domain list
    tc2 = topic_alignment(texts, "high school biology",
                          Executor(model, store, show_progress=False))
    assert tc2.domains[-1] == "high school biology" and tc2.aligned == 0
    assert model.calls > 0


def test_parse_domain():
    assert parse_domain("3", TOPIC_DOMAINS) == "commonsense reasoning"
    assert parse_domain("Domain 6: code", TOPIC_DOMAINS) == "code generation"
    assert parse_domain("long-form factual or biographical generation", TOPIC_DOMAINS) == (
        "long-form factual or biographical generation")
    assert parse_domain("9", TOPIC_DOMAINS) is None
    assert parse_domain("no idea", TOPIC_DOMAINS) is None


def test_cli_topic_check_and_calibration(tmp_path, monkeypatch, bow_embedder):
    """Both commands end to end on a scripted run folder, with the model loader patched."""
    from credo import RunConfig, run
    from credo.cli import main
    from credo.perturb.context import PROMPTS
    from credo.tasks.base import AnswerFormat, Item, Task

    contexts = ["The mean of a sample summarises its values.",
                "Apples and pears are sold at the market.",
                "Surveys ask many people the same question."]

    def respond(messages, seed):
        if messages[0].content in PROMPTS.values():
            return contexts[seed % 3]
        if messages[0].content == PARAPHRASE_SYSTEM_PROMPT:
            return paraphraser(messages, seed)
        if messages[-1].content.startswith("Text:"):
            return judge(messages, seed)
        return "Answer: B"

    task = Task("toy", (Item("q1", "Which is a measure of spread?", "B", ("Mean", "Range")),),
                AnswerFormat.CHOICE, domain="statistical reasoning")
    # the first context names an option ("Mean"), which the strict rules reject; this test
    # is about the checks that read a run's kept prefixes, so the run keeps the basic rules
    cfg = RunConfig(task="toy", n=3, m=3, limit=None, out=tmp_path / "run",
                    cache=tmp_path / "cache.sqlite", perturbation={"rules": "basic"})
    run(cfg, model=ScriptedModel(respond), embedder=bow_embedder, task=task, show_progress=False)
    monkeypatch.setattr("credo.models.registry.load_model",
                        lambda spec, **kw: ScriptedModel(respond, name=spec))
    monkeypatch.setattr("credo.models.embedders.load_embedder", lambda name: bow_embedder)

    assert main(["perturb", "topic-check", str(cfg.out), "--judge", "judge",
                 "--expected", "statistical reasoning", "--quiet"]) == 0
    tc = json.loads((cfg.out / "topic_check.json").read_text())
    assert tc["n"] == 3 and tc["aligned"] == 1 and tc["rate"] == pytest.approx(1 / 3)
    assert "Topic alignment" in (cfg.out / "report.html").read_text()

    assert main(["perturb", "calibrate-threshold", "--model", "para", "--run", str(cfg.out),
                 "--paraphrases", "8", "--quiet"]) == 0
    cal = json.loads((cfg.out / "threshold_calibration.json").read_text())
    assert cal["premises"] == 3 and cal["k"] == pytest.approx(
        np.percentile(cal["similarities"], 5))
    assert "Threshold calibration" in (cfg.out / "report.html").read_text()
    premises = tmp_path / "premises.txt"
    premises.write_text("One premise here.\n\nAnother premise there.\n")
    out = tmp_path / "k.json"
    assert main(["perturb", "calibrate-threshold", "--model", "para", "--premises",
                 str(premises), "--paraphrases", "5", "--out", str(out), "--quiet",
                 "--cache", str(tmp_path / "c2.sqlite")]) == 0
    assert json.loads(out.read_text())["premises"] == 2

    # issue 22 item 5: the commands print what the API returns, typed (the cache answers)
    from credo.api import ThresholdResult, TopicCheckResult, calibrate_threshold, topic_check

    found = topic_check(cfg.out, "judge", expected="statistical reasoning",
                        show_progress=False)
    assert isinstance(found, TopicCheckResult) and found.path == cfg.out / "topic_check.json"
    assert found.check.aligned == 1 and found.expected == "statistical reasoning"
    k = calibrate_threshold("para", premises=premises, paraphrases=5, out=out,
                            cache=tmp_path / "c2.sqlite", show_progress=False)
    assert isinstance(k, ThresholdResult) and k.path == out
    assert k.calibration.k == pytest.approx(json.loads(out.read_text())["k"])


def test_clean_sentence():
    assert clean_sentence('\n  Rewritten sentence: "A calm day."\nmore') == "A calm day."
    assert clean_sentence("  \n ") is None

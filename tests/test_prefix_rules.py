"""Prefixes that pass the paper's own neutrality test (issue 16): each rule rejects what it
names and keeps neutral sentences, the writer prompt, the default writer, the neutrality
gate and the marking of ranking metrics that rest on a tiny class."""

from __future__ import annotations

import json

import pytest

from conftest import CONTEXTS
from credo import RunConfig, run
from credo.cli import main
from credo.generation.pool import MODEL, WRITER, ModelPool
from credo.models.scripted import ScriptedModel
from credo.perturb.context import (
    PERTURBATION_EXAMPLES,
    PROMPTS,
    check_candidate,
    perturbation_messages,
    rule_context,
)
from credo.perturb.rules import RuleContext, broken_rule
from credo.pipeline.runner import assign_roles
from credo.tasks.base import AnswerFormat, Item, Task

DOOR = Item("door", "A revolving door is convenient for two direction travel, but it also "
            "serves as a security measure at a what?", "A",
            ("bank", "library", "department store", "mall", "new york"))
NEUTRAL = [*CONTEXTS, PERTURBATION_EXAMPLES[0][2],
           "Many buildings use doors to control the flow of visitors.",
           "Engineers often design entrances with both comfort and safety in mind."]


@pytest.mark.parametrize("rule, text", [
    ("restates_question", "A revolving door is convenient for two direction travel, but it "
                          "also serves as a security measure at a museum."),
    ("names_option", "At bank tellers' booths, patients at hospital, or in airports."),
    ("names_option", "Shoppers often walk through a large department store on weekends."),
    ("length", "At a book store."),
    ("fragment", "Near the busy entrances of tall buildings in large cities."),
    ("language", "Muchos turistas visitan el castillo cada fin de semana con sus familias."),
    ("digit", "About 300 people pass through such doors every single day."),
    ("meta_talk", "Sure, doors and buildings in general are a common topic."),
    ("empty_or_question", "Have you ever walked through a revolving door in a city?"),
])
def test_each_rule_rejects_what_it_names(rule, text):
    assert broken_rule(text, rule_context(DOOR, "strict")) == rule


@pytest.mark.parametrize("text", NEUTRAL)
def test_neutral_sentences_pass_every_rule(text):
    assert broken_rule(text, rule_context(DOOR, "strict")) is None


def test_answers_the_model_gave_are_not_named():
    item = Item("cap", "What is the capital of Australia?", "Canberra")
    ctx = rule_context(item, "strict", ["Canberra", "Sydney", None])
    assert broken_rule("Many visitors enjoy the harbour views of Sydney each year.", ctx) == (
        "names_answer")
    assert broken_rule("Many visitors enjoy the harbour views of coastal cities.", ctx) is None
    # on a choice task the options are the answers; the model's letters are not words
    assert rule_context(DOOR, "strict", ["A", "B"]).answers == ()


def test_basic_rules_are_the_rules_before_issue_16():
    ctx = RuleContext(DOOR.question, min_words=4, banned_names=frozenset())
    assert broken_rule("At a book store now.", ctx, "basic") is None  # 5 words: basic keeps it
    assert broken_rule("At a book store now.", rule_context(DOOR, "strict")) == "length"
    sentence, rule = check_candidate('Context: "Many buildings use doors to control flow."\nX',
                                     rule_context(DOOR, "strict"))
    assert sentence == "Many buildings use doors to control flow." and rule is None


def test_writer_prompt_v2_lists_the_options_and_a_bad_example_per_rule():
    v2 = perturbation_messages(DOOR, "commonsense reasoning", "v2")
    assert v2[0].content == PROMPTS["v2"]
    assert "Options (do not name any of them): bank; library; department store" in v2[-1].content
    for example in ("security measure at a museum", "At a book store", "Muchos turistas",
                    "About 300 people", "bank tellers"):
        assert example in PROMPTS["v2"]
    v1 = perturbation_messages(DOOR, "commonsense reasoning", "v1")
    assert v1[0].content == PROMPTS["v1"] and "Options" not in v1[-1].content


def test_default_writer_is_the_strongest_embedded_model(tmp_path):
    with ModelPool(cache_path=tmp_path / "c.sqlite", show_progress=False) as pool:
        assign_roles(pool, RunConfig(model="qwen2.5-coder-0.5b"))
        assert pool._roles[WRITER].name == "qwen2.5-coder-1.5b"
    with ModelPool(cache_path=tmp_path / "c.sqlite", show_progress=False) as pool:
        assign_roles(pool, RunConfig(model="qwen2.5-coder-1.5b"))
        assert pool._roles[WRITER].same_as == MODEL  # the model under test is the strongest
    with ModelPool(cache_path=tmp_path / "c.sqlite", show_progress=False) as pool:
        assign_roles(pool, RunConfig(model="openai:served", model_options={"base_url": "x"}))
        assert pool._roles[WRITER].same_as == MODEL  # a served model writes its own
    with ModelPool(cache_path=tmp_path / "c.sqlite", show_progress=False) as pool:
        pool.assign(MODEL, model=ScriptedModel(lambda m, s: "A"))
        assign_roles(pool, RunConfig(model="qwen2.5-coder-0.5b"))
        assert pool._roles[WRITER].same_as == MODEL  # a model handed in writes its own


# --------------------------------------------------------------------------- the gate

TASK = Task("shift", tuple(
    Item(f"q{i}", f"Question {i}: how many apples are left?", "5") for i in range(8)
), AnswerFormat.NUMBER, domain="arithmetic reasoning")


def _respond_shifted(messages, seed):
    """Right without a prefix, wrong under one: prefixes that are anything but neutral."""
    if messages[0].content in PROMPTS.values():
        return CONTEXTS[seed % len(CONTEXTS)]
    user = messages[-1].content
    perturbed = any(c.rstrip(".") in user for c in CONTEXTS)
    item = int(user.split("Question ")[1].split(":")[0])
    if perturbed:
        return "Answer: 7"
    return "Answer: 5" if item < 6 or seed % 2 else "Answer: 6"


def _patch_models(monkeypatch, bow_embedder, respond):
    monkeypatch.setattr("credo.models.registry.load_model",
                        lambda spec, **o: ScriptedModel(respond, name=spec))
    monkeypatch.setattr("credo.generation.pool.shared_embedder", lambda name: bow_embedder)
    monkeypatch.setattr("credo.pipeline.runner.load_task", lambda spec, limit=None: TASK)


@pytest.mark.parametrize("gate, status", [("warn", 0), ("fail", 4), ("off", 0)])
def test_non_neutral_prefixes_are_flagged(tmp_path, monkeypatch, capsys, bow_embedder, gate,
                                          status):
    _patch_models(monkeypatch, bow_embedder, _respond_shifted)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"model: scripted-x\nperturbation: {{neutrality: {gate}}}\n")
    args = ["run", "--config", str(cfg), "--task", "shift", "--n", "4", "--m", "4",
            "--bootstrap", "0", "--out", str(tmp_path / "run"), "--cache",
            str(tmp_path / "c.sqlite"), "--quiet"]
    assert main(args) == status
    err = capsys.readouterr().err
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    if gate == "off":
        assert "neutrality" not in metrics and "not neutral" not in err
        return
    record = metrics["neutrality"]
    assert record["mean_delta"] < 0 and record["high"] < 0 and record["neutral"] is False
    lines = [ln for ln in err.splitlines() if "not neutral" in ln]
    assert len(lines) == 1 and lines[0].startswith("error:" if gate == "fail" else "warning:")
    assert "C3 is confounded" in (tmp_path / "run" / "report.md").read_text()
    assert "C3 is confounded by non-neutral prefixes" in (
        tmp_path / "run" / "report.html").read_text()


def test_neutral_prefixes_pass_the_gate(tmp_path, bow_embedder):
    def respond(messages, seed):
        if messages[0].content in PROMPTS.values():
            return CONTEXTS[seed % len(CONTEXTS)]
        return "Answer: 5" if seed % 3 else "Answer: 6"

    cfg = RunConfig(task="shift", n=6, m=6, limit=None, bootstrap=0, out=tmp_path / "run",
                    cache=tmp_path / "c.sqlite")
    res = run(cfg, model=ScriptedModel(respond), embedder=bow_embedder, task=TASK,
              show_progress=False)
    assert res.neutrality["neutral"] is True


# --------------------------------------------------------------------------- tiny classes


def test_ranking_metrics_on_a_tiny_class_are_marked(tmp_path, monkeypatch, capsys,
                                                     bow_embedder):
    """Two items with p̄ ≥ 0.5 out of eight: every AUROC / AUPRC rests on them; the CLI
    table, report.md and the page mark them, and a paired test says so."""
    def respond(messages, seed):
        if messages[0].content in PROMPTS.values():
            return CONTEXTS[seed % len(CONTEXTS)]
        user = messages[-1].content
        item = int(user.split("Question ")[1].split(":")[0])
        return "Answer: 5" if item < 2 else f"Answer: {6 + seed % 3}"

    _patch_models(monkeypatch, bow_embedder, respond)
    args = ["run", "--model", "scripted-x", "--task", "shift", "--n", "4", "--m", "4",
            "--bootstrap", "50", "--out", str(tmp_path / "run"), "--cache",
            str(tmp_path / "c.sqlite"), "--quiet"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "†" in out and "fewer than 5 items" in out
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["methods"]["c3"]["smaller_class"] == 2
    md = (tmp_path / "run" / "report.md").read_text()
    assert "†" in md and "rests on them alone" in md
    page = (tmp_path / "run" / "report.html").read_text()
    assert "†" in page and "not a reliable test" in page


def test_rule_rejections_are_counted_per_rule(tmp_path, bow_embedder):
    bad = ["At a book store.", "About 300 people visit every day.", *CONTEXTS]

    def respond(messages, seed):
        if messages[0].content in PROMPTS.values():
            return bad[seed % len(bad)]
        return "Answer: 5"

    cfg = RunConfig(task="shift", n=2, m=3, limit=None, bootstrap=0, out=tmp_path / "run",
                    cache=tmp_path / "c.sqlite")
    run(cfg, model=ScriptedModel(respond), embedder=bow_embedder, task=TASK,
        show_progress=False)
    rows = [json.loads(x) for x in (tmp_path / "run" / "perturbations.jsonl").read_text()
            .splitlines()]
    totals: dict[str, int] = {}
    for r in rows:
        assert sum(r["rejected_by"].values()) == r["rejected_invalid"]
        for k, v in r["rejected_by"].items():
            totals[k] = totals.get(k, 0) + v
    assert set(totals) <= {"length", "digit"} and totals.get("digit", 0) > 0


# --------------------------------------------------------------------------- calibrate-prompt

OPTIONS = ("apples", "pears", "plums", "figs")
FRUIT = Task("fruit", tuple(
    Item(f"f{i}", f"Question {i}: which fruit did the grocer sell most this week?", "B", OPTIONS)
    for i in range(12)
), AnswerFormat.CHOICE, domain="everyday commerce")


def _respond_fruit(messages, seed):
    """A v1 writer names option A in its prefix, and the answerer follows a named option;
    a v2 writer (told the options) writes neutral sentences."""
    system, user = messages[0].content, messages[-1].content
    if system in PROMPTS.values():
        if "Options (do not name" in user:
            return CONTEXTS[seed % len(CONTEXTS)]
        return f"Everyone agrees that {OPTIONS[0]} matter a great deal at markets {seed % 7}x."[
            :-4].rstrip() + " today."
    if OPTIONS[0] in user.split("Question")[0]:
        return "Answer: A"
    return "Answer: B" if seed % 4 else "Answer: C"


def test_calibrate_prompt_picks_the_most_neutral_setting(tmp_path, monkeypatch, bow_embedder,
                                                        capsys):
    _patch_models(monkeypatch, bow_embedder, _respond_fruit)
    monkeypatch.setattr("credo.pipeline.runner.load_task", lambda spec, limit=None: FRUIT)
    cfg = tmp_path / "run.yaml"
    cfg.write_text(f"model: scripted-x\ntask: fruit\nlimit: 2\nn: 4\nm: 4\n"
                   f"cache: {tmp_path / 'c.sqlite'}\nperturbation: {{prompt: v1, rules: basic}}\n")
    out = tmp_path / "chosen.yaml"
    assert main(["perturb", "calibrate-prompt", "--config", str(cfg), "--items", "6",
                 "--write-config", str(out), "--quiet"]) == 0
    import yaml

    chosen = yaml.safe_load(out.read_text())
    assert chosen["perturbation"]["prompt"] == "v2"
    assert chosen["limit"] == 2 and chosen["model"] == "scripted-x"  # the rest is kept
    table = capsys.readouterr().out
    assert "v1" in table and "v2" in table
    from credo.api import calibrate_prompt

    (_, _), rows = calibrate_prompt(RunConfig.model_validate(yaml.safe_load(cfg.read_text())),
                                    6, show_progress=False)
    by = {(r["prompt"], r["rules"]): r for r in rows}
    assert by[("v1", "basic")]["mean_delta"] < -1.0  # prefixes naming option A cost answers
    assert abs(by[("v2", "strict")]["mean_delta"]) < abs(by[("v1", "basic")]["mean_delta"])


def test_a_run_config_names_the_writer_as_the_cli_and_a_study_do(tmp_path):
    """``perturbation: {writer: X}`` (the flag is ``--writer``, a study's key ``writer``);
    the deprecated ``generator: X`` reads the same with a warning (issue 31), and giving
    both is an error rather than a silent choice."""
    from pydantic import ValidationError

    from credo import RunConfig

    path = tmp_path / "run.yaml"
    path.write_text("task: gsm8k\nmodel: smollm2-135m\n"
                    "perturbation: {writer: qwen2.5-coder-0.5b}\n")
    cfg = RunConfig.from_yaml(path)
    assert cfg.perturbation.writer.model == "qwen2.5-coder-0.5b"  # a role (issue 22)
    assert cfg.model_dump()["perturbation"]["writer"] == "qwen2.5-coder-0.5b"
    path.write_text("task: gsm8k\nmodel: smollm2-135m\n"
                    "perturbation: {writer: a, generator: b}\n")
    with pytest.raises(ValidationError, match=r"perturbation\.writer"):
        RunConfig.from_yaml(path)

"""``credo adaptive FILE`` (issue 32, item 5): a pool of samples a user brings, in any
layout ``credo score`` reads, replayed by each stopping rule, averaged over ``--orders``
random sample orders."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from credo.api import simulate_adaptive
from credo.cli import main
from credo.config import AdaptiveConfig
from credo.errors import UserError
from credo.importers import read_generations
from credo.pipeline.simulate import reorder
from credo.plan.adaptive import next_size, settled


def _pool(path: Path, items: int = 30, per_item: int = 40, seed: int = 0) -> Path:
    """``items`` questions of ``per_item`` samples each, as credo's JSONL: item k right
    with a probability of its own, else one of two wrong answers."""
    rng = random.Random(seed)
    rows = []
    for k in range(items):
        p = rng.random()
        for _ in range(per_item):
            a = "18" if rng.random() < p else rng.choice(["7", "9"])
            rows.append({"item": f"q{k}", "set": "original", "answer": a,
                         "correct": a == "18", "gold": "18"})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _drawn(answers: list[str], rule: AdaptiveConfig) -> int:
    """By hand: the schedule's sizes until the rule holds."""
    size = next_size(0, len(answers), rule)
    while size < len(answers) and not settled(rule, answers[:size], size=len(answers)):
        size = next_size(size, len(answers), rule)
    return size


def test_reorder_permutes_each_items_samples_and_is_seeded(tmp_path) -> None:
    given = read_generations(_pool(tmp_path / "gen.jsonl", items=5, per_item=8))
    once, again, other = reorder(given, 3, 0), reorder(given, 3, 0), reorder(given, 3, 1)
    assert once.samples == again.samples and once.samples != other.samples

    def by_item(g):
        out: dict[str, list] = {}
        for s in g.samples:
            out.setdefault(s.item, []).append(s)
        return out

    before, after = by_item(given), by_item(once)
    assert list(before) == list(after)
    for item in before:
        assert Counter(map(repr, before[item])) == Counter(map(repr, after[item]))
    assert any(before[i] != after[i] for i in before)


def test_a_file_is_replayed_over_orders(tmp_path, capsys) -> None:
    path = _pool(tmp_path / "gen.jsonl")
    assert main(["adaptive", str(path), "--format", "number", "--orders", "4", "--rule",
                 "consensus", "--bootstrap", "20"]) == 0
    out = capsys.readouterr().out
    assert "the mean over 4 sample orders" in out
    data = json.loads((tmp_path / "gen-adaptive" / "adaptive.json").read_text())
    point = data["points"][0]
    assert point["orders"] == 4 and point["items"] == 30
    # by hand: the consensus rule on each of the same four orders
    given = read_generations(path)
    rule = AdaptiveConfig(rule="consensus")
    per_order = []
    for r in range(4):
        shuffled = reorder(given, 0, r)
        answers: dict[str, list] = {}
        for s in shuffled.samples:
            answers.setdefault(s.item, []).append(s.answer)
        per_order.append(sum(_drawn(a, rule) for a in answers.values()))
    assert point["samples"]["original"]["adaptive"] == pytest.approx(np.mean(per_order))
    assert point["samples"]["original"]["full"] == 30 * 40
    assert "self_consistency" in point["deltas"]
    # the file's own order (orders 1) is what a credo score folder of it replays
    one = simulate_adaptive(path, ["consensus"], given={"answer_format": "number"},
                            n_resamples=20, write=False).points[0]
    assert main(["score", str(path), "--format", "number", "--methods", "self_consistency",
                 "--bootstrap", "0", "--out", str(tmp_path / "scored"), "--quiet",
                 "--cache", str(tmp_path / "c.sqlite")]) == 0
    folder = simulate_adaptive(tmp_path / "scored", ["consensus"], n_resamples=20,
                               write=False).points[0]
    assert one.drawn == folder.drawn and one.samples == folder.samples


def test_an_lm_eval_samples_file_is_replayed(tmp_path) -> None:
    """lm-eval's ``--log_samples`` (a task with ``repeats: 12``), read as ``credo score``
    reads it: the stopping rule sees the answers lm-eval's filter extracts."""
    rows = []
    for doc in range(20):
        resps = [f"The answer is {4 if doc % 2 or i % 3 else 5}." for i in range(12)]
        rows.append({"doc_id": doc, "doc": {"question": f"q{doc}"}, "target": "4",
                     "arguments": {"gen_args_0": {"arg_0": f"q{doc}", "arg_1": {
                         "temperature": 1.0, "max_gen_toks": 64, "do_sample": True}}},
                     "resps": [resps], "filtered_resps": ["4"], "filter": "none",
                     "metrics": ["exact_match"], "exact_match": 1.0, "doc_hash": "h",
                     "prompt_hash": "p", "target_hash": "t"})
    path = tmp_path / "samples_toy_2026.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    sim = simulate_adaptive(path, ["consensus"], orders=3,
                            given={"answer_format": "number", "methods": ["self_consistency"],
                                   "recompute_correctness": True},
                            n_resamples=20, out=tmp_path / "out")
    point = sim.points[0]
    assert point.orders == 3 and point.items == 20
    # odd documents are unanimous: they stop at the minimum in every order
    assert all(point.drawn[i][0] == 4 for i in point.drawn if int(i) % 2 == 1)
    assert sim.files["table"].is_file()


def test_what_a_file_replay_refuses(tmp_path) -> None:
    path = _pool(tmp_path / "gen.jsonl", items=4, per_item=6)
    with pytest.raises(UserError, match="--min 8"):
        simulate_adaptive(path, ["consensus"], options={"min": 8},
                          given={"answer_format": "number"}, write=False)
    with pytest.raises(UserError, match="--orders 0"):
        simulate_adaptive(path, ["consensus"], orders=0, given={"answer_format": "number"},
                          write=False)
    follow = tmp_path / "follow.jsonl"
    follow.write_text(path.read_text() + json.dumps(
        {"item": "q0", "set": "verbalized", "answer": 0.9, "ref": [0]}) + "\n")
    with pytest.raises(UserError, match="by their position"):
        simulate_adaptive(follow, ["consensus"], orders=2, given={"answer_format": "number"},
                          write=False)
    with pytest.raises(UserError, match="for a samples file"):
        simulate_adaptive(tmp_path, ["consensus"], orders=2, write=False)

"""Certificates end to end (issue 23, items 3-4): ``credo certify`` on a labelled run,
``credo run --certificate`` on questions without gold, and a run whose settings differ
refused in one line before any model call."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from credo import RunConfig, certify, run
from credo.cli import main
from credo.models.scripted import ScriptedModel
from credo.tasks.base import AnswerFormat, Item, Task
from fault_server import FaultServer


def _answerer(messages, seed):
    """Item k (its question says 'number k'): right (18) on its own for k even, a coin
    between 18 and 7 for k odd, so self-consistency separates the two."""
    k = int(messages[-1].content.split("number ")[1].split(":")[0])
    if k % 2 == 0 or seed % 2 == 0:
        return "Answer: 18"
    return "Answer: 7"


def _task(items: int, gold: bool) -> Task:
    return Task("coins", tuple(
        Item(f"q{k}", f"Question number {k}: how many?", "18" if gold else "")
        for k in range(items)), AnswerFormat.NUMBER, domain="arithmetic")


def _config(tmp: Path, out: str, **extra) -> RunConfig:
    fields = {"task": "gsm8k", "n": 6, "limit": None, "bootstrap": 0,
              "methods": ["self_consistency"], "out": tmp / out, "cache": tmp / "c.sqlite"}
    return RunConfig(**(fields | extra))


def test_certify_then_answer_questions_without_gold(tmp_path, capsys):
    model = ScriptedModel(_answerer)
    calib = run(_config(tmp_path, "calib"), model=model, task=_task(120, gold=True),
                show_progress=False)
    assert main(["certify", str(tmp_path / "calib"), "--method", "self_consistency",
                 "--alpha", "0.2", "--out", str(tmp_path / "cert.json")]) == 0
    saved = json.loads((tmp_path / "cert.json").read_text())
    assert saved["settings"]["method"] == "self_consistency" and saved["settings"]["n"] == 6
    # the file holds what credo.certify gives on the run's own scores and answers
    scores = [r.scores["self_consistency"] for r in calib.items]
    correct = [r.answer_correct for r in calib.items]
    direct = certify(scores, correct, alpha=0.2, delta=0.1)
    assert saved["certificate"]["threshold"] == direct.threshold is not None
    new = run(_config(tmp_path, "new"), model=model, task=_task(40, gold=False),
              show_progress=False, certificate=tmp_path / "cert.json")
    rows = [json.loads(x) for x in (tmp_path / "new" / "answers.jsonl").read_text().splitlines()]
    assert len(rows) == 40 and not new.metrics
    for row, item in zip(rows, new.items, strict=True):
        assert row["id"] == item.item.id and row["answer"] == item.answer
        assert row["accept"] == (row["score"] >= direct.threshold)
        assert row["alpha"] == 0.2 and row["delta"] == 0.1
    accepted = [r for r in rows if r["accept"]]
    assert accepted and all(r["answer"] == "18" for r in accepted)  # every accepted is right
    assert np.mean([r["accept"] for r in rows]) < 1.0  # the coin items are held back


def test_a_run_with_other_settings_is_refused_before_any_call(tmp_path, capsys):
    questions = tmp_path / "q.jsonl"
    questions.write_text("".join(json.dumps({"question": f"Sam has {k} apples?"}) + "\n"
                                 for k in range(3)))
    labelled = tmp_path / "l.jsonl"
    labelled.write_text("".join(json.dumps({"question": f"Ann has {k} pears?", "answer": "18"})
                                + "\n" for k in range(40)))
    base = ["--answer-format", "number", "--model", "openai:toy", "--methods",
            "self_consistency", "--n", "4", "--cache", str(tmp_path / "c.sqlite"), "--quiet"]
    with FaultServer(answers=("Answer: 18",)) as server:
        url = ["--base-url", server.url]
        assert main(["run", "--task-file", str(labelled), "--limit", "40", *base, *url,
                     "--out", str(tmp_path / "calib")]) == 0
        assert main(["certify", str(tmp_path / "calib"), "--method", "self_consistency",
                     "--out", str(tmp_path / "cert.json")]) == 0
        capsys.readouterr()
        before = server.requests
        code = main(["run", "--task-file", str(questions), *base, "--n", "5", *url,
                     "--certificate", str(tmp_path / "cert.json"),
                     "--out", str(tmp_path / "other")])
        assert code == 2 and server.requests == before
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "'s n differs" in err, err
        assert main(["run", "--task-file", str(questions), *base, *url, "--certificate",
                     str(tmp_path / "cert.json"), "--out", str(tmp_path / "same")]) == 0
    rows = [json.loads(x) for x in (tmp_path / "same" / "answers.jsonl").read_text()
            .splitlines()]
    assert [r["accept"] for r in rows] == [True] * 3  # all-correct calibration: all accepted


def test_the_decision_rule_takes_the_certificates_threshold(tmp_path):
    """Adaptive sampling's decision rule (issue 24) stops an item once its interval lies on
    one side of the certified threshold, which the certificate supplies."""
    model = ScriptedModel(_answerer)
    run(_config(tmp_path, "calib", n=12), model=model, task=_task(120, gold=True),
        show_progress=False)
    assert main(["certify", str(tmp_path / "calib"), "--method", "self_consistency",
                 "--alpha", "0.2", "--out", str(tmp_path / "cert.json")]) == 0
    full = run(_config(tmp_path, "full", n=12), model=model, task=_task(40, gold=False),
               show_progress=False, certificate=tmp_path / "cert.json")
    lean = run(_config(tmp_path, "lean", n=12, adaptive={"rule": "decision"},
                       certificate=tmp_path / "cert.json"), model=model,
               task=_task(40, gold=False), show_progress=False)
    drawn = sum(len(r.original) for r in lean.items)
    assert drawn < sum(len(r.original) for r in full.items) == 40 * 12
    t = lean.config.adaptive.threshold
    assert t is not None and lean.config.adaptive.scores == ["self_consistency"]
    # the decision taken on the samples drawn is the full run's, item by item (the rule's
    # guarantee holds at 95% per item; this scripted model settles all 40)
    def accepted(result):
        return {r.item.id: r.scores["self_consistency"] >= t for r in result.items}
    assert accepted(lean) == accepted(full)

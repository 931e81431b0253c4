"""Questions without gold answers (issue 23): a task file whose rows have no gold field
loads, a run on it scores every item and evaluates nothing, and says so."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from credo.cli import main
from credo.errors import UserError
from credo.methods.scoring import ItemResult
from credo.plan.samples import Sample
from credo.tasks.answers import Answer
from credo.tasks.base import AnswerFormat, Item
from credo.tasks.loaders import FieldMapping, load_items
from fault_server import FaultServer


def _questions(tmp: Path, rows: list[dict]) -> Path:
    path = tmp / "questions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_file_without_gold_loads_and_a_mixed_one_names_its_row(tmp_path):
    path = _questions(tmp_path, [{"question": f"{k} + 1?"} for k in range(3)])
    items = load_items(path, AnswerFormat.NUMBER, FieldMapping())
    assert [it.gold for it in items] == ["", "", ""]
    mixed = _questions(tmp_path, [{"question": "1 + 1?", "answer": "2"}, {"question": "2 + 2?"}])
    with pytest.raises(UserError, match=r"questions\.jsonl:2: missing field 'answer'"):
        load_items(mixed, AnswerFormat.NUMBER, FieldMapping())
    first = _questions(tmp_path, [{"question": "1 + 1?"}, {"question": "2 + 2?", "answer": "4"}])
    with pytest.raises(UserError, match=r"questions\.jsonl:1: missing field 'answer'"):
        load_items(first, AnswerFormat.NUMBER, FieldMapping())


def test_a_run_on_questions_without_gold_scores_and_evaluates_nothing(tmp_path, capsys):
    path = _questions(tmp_path, [{"question": f"Sam has {k} apples. How many more?"}
                                 for k in range(3)])
    out = tmp_path / "run"
    with FaultServer(answers=("Answer: 18", "Answer: 18", "Answer: 7")) as server:
        code = main(["run", "--task-file", str(path), "--answer-format", "number",
                     "--model", "openai:toy", "--base-url", server.url, "--methods",
                     "self_consistency", "--n", "6", "--out", str(out),
                     "--cache", str(tmp_path / "c.sqlite"), "--quiet"])
    assert code == 0
    rows = [json.loads(x) for x in (out / "scores.jsonl").read_text().splitlines()]
    assert len(rows) == 3
    for r in rows:
        assert r["p_bar"] is None and r["answer_correct"] is None
        counts = {a: r["original_answers"].count(a) for a in r["original_answers"]}
        assert r["answer"] == max(counts, key=counts.get)  # the modal answer
        assert 0.0 <= r["scores"]["self_consistency"] <= 1.0
    metrics = json.loads((out / "metrics.json").read_text())
    assert not metrics["methods"]
    assert "no item has a gold answer" in (out / "report.md").read_text()
    printed = capsys.readouterr().out
    assert "no item has a gold answer" in printed
    assert "accuracy n/a" in printed and "nan" not in printed


def _result(answers: list[str | None], correct: list[float]) -> ItemResult:
    samples = tuple(Sample(str(a), Answer(a, str(a))) for a in answers)
    return ItemResult(Item("x", "q?", "5"), (), samples, (), tuple(correct), {})


def test_the_answer_is_the_modal_one_and_its_correctness_is_its_own():
    r = _result(["5", "7", "7", None, "5", "7"], [1, 0, 0, 0, 1, 0])
    assert r.answer == "7" and r.answer_index == 1 and r.answer_correct == 0.0
    tie = _result(["5", "7", "7", "5"], [1, 0, 0, 1])
    assert tie.answer == "5" and tie.answer_correct == 1.0  # ties go to the first seen
    none = _result([None, None], [0, 0])
    assert none.answer is None and none.answer_correct == 0.0
    unknown = _result(["5", "5"], [math.nan, math.nan])
    assert math.isnan(unknown.answer_correct)

"""Issue 15's benchmark loaders: CommonsenseQA, SciQ, and SciBench with its 5% relative
tolerance (a NUMBER correctness rule that leaves GSM8K's exact one alone)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from credo.tasks import load_task
from credo.tasks.answers import Answer, extract_answer
from credo.tasks.base import AnswerFormat, Item
from credo.tasks.grading import is_correct, within_rel_tol
from credo.tasks.loaders import DatasetError
from credo.tasks.science import load_scibench, load_sciq

REAL = Path(__file__).resolve().parents[2] / "shared" / "data"
needs_real = pytest.mark.skipif(not REAL.is_dir(), reason="../shared/data not present")


def _jsonl(path: Path, *rows: object) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- commonsenseqa

CSQA_HF = {
    "id": "075e483d21c29a511267ef62bedc0461",
    "question": "The sanctions against the school were a punishing blow, and they seemed to "
    "what the efforts the school had made to change?",
    "question_concept": "punishing",
    "choices": {"label": ["A", "B", "C", "D", "E"],
                "text": ["ignore", "enforce", "authoritarian", "yell at", "avoid"]},
    "answerKey": "A",
}
CSQA_ORIGINAL = {
    "answerKey": "C",
    "id": "61fe6e879ff18686d7552425a36344c8",
    "question": {
        "question_concept": "people",
        "choices": [{"label": "A", "text": "race track"}, {"label": "B", "text": "populated areas"},
                    {"label": "C", "text": "the desert"}, {"label": "D", "text": "apartment"},
                    {"label": "E", "text": "roadblock"}],
        "stem": "Where are people likely to find few other people?",
    },
}


def test_commonsenseqa_reads_both_layouts(tmp_path):
    path = _jsonl(tmp_path / "validation.jsonl", CSQA_HF, CSQA_ORIGINAL)
    task = load_task(f"commonsenseqa:{path}")
    assert (task.name, task.format, task.domain) == (
        "commonsenseqa", AnswerFormat.CHOICE, "commonsense reasoning"
    )
    hf, original = task.items
    assert hf.id == CSQA_HF["id"] and hf.gold == "A" and hf.choices[3] == "yell at"
    assert hf.question.startswith("The sanctions")
    assert original.question == "Where are people likely to find few other people?"
    assert (original.gold, original.choices[2]) == ("C", "the desert")
    assert original.source == f"{path}:2"


def test_commonsenseqa_unlabelled_test_split_names_the_row(tmp_path):
    path = _jsonl(tmp_path / "test.jsonl", CSQA_HF, {**CSQA_HF, "id": "x", "answerKey": ""})
    with pytest.raises(DatasetError, match=r"test\.jsonl:2: empty answerKey.*validation"):
        load_task(f"commonsenseqa:{path}")
    with pytest.raises(ValueError, match="needs a file"):
        load_task("commonsenseqa")


# --------------------------------------------------------------------------- sciq


@needs_real
def test_sciq_shared_text_file_is_open_ended_with_simpleqa_grades():
    task = load_task(f"sciq:{REAL / 'sciq' / 'test.txt'}")
    assert (len(task.items), task.format) == (1000, AnswerFormat.SHORT_TEXT)
    first = task.items[0]
    assert first.id == "sciq-test-0"
    assert first.question.endswith("are called what?")
    assert first.gold == "oxidants"
    assert first.meta["grader"] == "simpleqa"
    assert json.loads(first.meta["gold_answers"]) == ["oxidants"]
    assert len({it.id for it in task.items}) == 1000


def test_sciq_text_blocks(tmp_path):
    path = tmp_path / "mini.txt"
    path.write_text("What do plants make?\r\nSugar\r\n\r\n\r\nWhat is H2O?\nwater\n",
                    encoding="utf-8")
    task = load_sciq(path)
    assert [(it.id, it.gold, it.source) for it in task.items] == [
        ("sciq-mini-0", "sugar", f"{path}:1"),
        ("sciq-mini-1", "water", f"{path}:5"),
    ]
    assert json.loads(task.items[0].meta["gold_answers"]) == ["Sugar"]
    # the SimpleQA grader decides exact matches without a judge
    from credo.tasks.factual import Grade, pregrade

    assert pregrade(task.items[0], "sugar") is Grade.CORRECT


def test_sciq_text_block_of_three_lines_names_its_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("Q1?\nA1\n\nQ2?\nA2\nstray line\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"bad\.txt:4: .* two lines.*has 3"):
        load_sciq(path)


SCIQ_ROW = {
    "question": "What type of organism is commonly used in preparation of foods such as cheese "
    "and yogurt?",
    "distractor3": "viruses",
    "distractor1": "protozoa",
    "distractor2": "gymnosperms",
    "correct_answer": "mesophilic organisms",
    "support": "Mesophiles grow best in moderate temperature.",
}


def test_sciq_json_with_distractors_is_multiple_choice(tmp_path):
    rows = [{**SCIQ_ROW, "question": f"{SCIQ_ROW['question']} ({k})"} for k in range(12)]
    path = tmp_path / "test.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    task = load_sciq(path)
    assert task.format is AnswerFormat.CHOICE
    for it in task.items:
        assert len(it.choices) == 4
        assert it.choices["ABCD".index(it.gold)] == "mesophilic organisms"
        order = [int(i) for i in it.meta["choice_order"].split(",")]
        assert it.choices[order.index(0)] == "mesophilic organisms"
        assert it.meta["support"].startswith("Mesophiles")
    assert len({it.gold for it in task.items}) > 1  # the gold is not always A
    assert load_sciq(path).items == task.items  # the shuffle is fixed


def test_sciq_json_without_distractors_is_open_ended(tmp_path):
    path = _jsonl(tmp_path / "open.jsonl",
                  {"question": "What is the chemical symbol of gold?", "correct_answer": "Au"})
    task = load_sciq(path)
    assert task.format is AnswerFormat.SHORT_TEXT
    assert (task.items[0].gold, task.items[0].meta["grader"]) == ("au", "simpleqa")
    bad = _jsonl(tmp_path / "bad.jsonl", {**SCIQ_ROW, "distractor2": ""})
    with pytest.raises(DatasetError, match=r"bad\.jsonl:1: field 'distractor2'"):
        load_sciq(bad)


# --------------------------------------------------------------------------- scibench


def _scibench_row(**kw: str) -> dict[str, str]:
    row = {
        "problem_text": "Calculate the pressure exerted by the gas.",
        "answer_latex": " 50.7",
        "answer_number": "50.7",
        "unit": "$\\mathrm{atm}$ ",
        "source": "atkins",
        "problemid": " e1.17(a)(a)",
        "comment": " ",
    }
    return {**row, **kw}


def test_scibench_file(tmp_path):
    rows = [
        _scibench_row(),
        _scibench_row(answer_number="+65.49", unit=" $10^{-19} \\mathrm{~J}$\r\n",
                      problemid="e2.21(a) "),
        _scibench_row(answer_number="4", unit="", problemid=" e1.17(a)(a)"),  # repeated id
    ]
    path = tmp_path / "atkins.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    task = load_task(f"scibench:{path}")
    assert (task.name, task.format) == ("scibench", AnswerFormat.NUMBER)
    a, b, c = task.items
    assert (a.id, b.id, c.id) == (
        "scibench-atkins-e1.17(a)(a)", "scibench-atkins-e2.21(a)", "scibench-atkins-e1.17(a)(a)#2"
    )
    assert a.question == (
        "Calculate the pressure exerted by the gas. Give the answer in $\\mathrm{atm}$."
    )
    assert b.question.endswith("Give the answer in $10^{-19} \\mathrm{~J}$.")
    assert c.question == "Calculate the pressure exerted by the gas."
    assert (a.gold, b.gold, c.gold) == ("50.7", "65.49", "4")
    assert a.meta["rel_tol"] == "0.05" and a.source == f"{path}:1"


def test_scibench_folder_leaves_out_the_solution_files(tmp_path):
    path = tmp_path / "original"
    path.mkdir()
    (path / "quan.json").write_text(json.dumps([_scibench_row(source="quan")]))
    (path / "atkins.json").write_text(json.dumps([_scibench_row()]))
    (path / "atkins_sol.json").write_text(json.dumps([_scibench_row(problemid="2.2")]))
    task = load_scibench(path)
    assert [it.id for it in task.items] == [
        "scibench-atkins-e1.17(a)(a)", "scibench-quan-e1.17(a)(a)"
    ]
    assert len(load_scibench(path / "atkins_sol.json").items) == 1  # asked for by name
    (path / "thermo.json").write_text(json.dumps([_scibench_row(answer_number="about 3")]))
    with pytest.raises(DatasetError, match=r"thermo\.json:1: answer_number 'about 3'"):
        load_scibench(path)
    with pytest.raises(DatasetError, match="no such file or folder"):
        load_scibench(tmp_path / "missing")


@needs_real
def test_scibench_shared_files():
    task = load_task(f"scibench:{REAL / 'scibench' / 'original'}")
    assert len(task.items) == 580  # the ten books, *_sol.json left out
    assert len({it.id for it in task.items}) == 580
    assert all(it.meta["rel_tol"] == "0.05" for it in task.items)
    sol = load_task(f"scibench:{REAL / 'scibench' / 'original' / 'atkins_sol.json'}")
    assert len(sol.items) == 16


def test_scibench_tolerance_is_five_percent_of_the_gold(tmp_path):
    path = tmp_path / "book.json"
    path.write_text(json.dumps([_scibench_row(answer_number="50.7")]))
    item = load_scibench(path).items[0]

    def correct(reply: str) -> bool:
        return is_correct(extract_answer(reply, AnswerFormat.NUMBER), item, AnswerFormat.NUMBER)

    assert correct("The answer is therefore \\boxed{50.7}.")
    assert correct("Answer: 52")  # 2.6% off
    assert correct("Answer: 48.2")  # 4.9% off
    assert not correct("Answer: 53.3")  # 5.1% off
    assert not correct("I cannot tell.")


def test_exact_number_rule_is_unchanged_without_a_tolerance():
    gsm = Item("g", "How many?", "100")
    assert is_correct(Answer("100", ""), gsm, AnswerFormat.NUMBER)
    assert not is_correct(Answer("101", ""), gsm, AnswerFormat.NUMBER)  # integers: exact
    tolerant = Item("s", "How many?", "100", meta={"rel_tol": "0.05"})
    assert is_correct(Answer("101", ""), tolerant, AnswerFormat.NUMBER)


@pytest.mark.parametrize(
    ("value", "gold", "tol", "expected"),
    [
        ("105", "100", "0.05", True),
        ("95", "100", "0.05", True),
        ("94.99", "100", "0.05", False),
        ("-1.04", "-1", "0.05", True),
        ("1.04", "-1", "0.05", False),
        ("0", "0", "0.05", True),
        ("0.001", "0", "0.05", False),  # a gold of 0 needs exactly 0
        ("3/4", "0.75", 0.0, True),
        ("abc", "1", "0.05", False),
    ],
)
def test_within_rel_tol(value, gold, tol, expected):
    assert within_rel_tol(value, gold, tol) is expected


def test_within_rel_tol_rejects_a_bad_tolerance():
    with pytest.raises(ValueError, match="rel_tol"):
        within_rel_tol("1", "1", "5%")  # read as 5, not 0.05

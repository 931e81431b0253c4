"""A task from any JSONL / JSON / CSV file by field names: the ``task_file`` section of
a run's config, the ``credo run --task-file`` flags, and the pipeline reading it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from credo import RunConfig, run
from credo.cli import _parser
from credo.cli.run import run_config_from_args
from credo.config import TaskFileConfig
from credo.errors import UserError
from credo.models.scripted import ScriptedModel
from credo.tasks.answers import Answer
from credo.tasks.base import AnswerFormat
from credo.tasks.builtin import load_task_file
from credo.tasks.grading import is_correct
from credo.tasks.loaders import DatasetError


def _jsonl(path: Path, *rows: object) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- task_file


def test_task_file_multiple_choice_with_index_gold(tmp_path):
    path = _jsonl(
        tmp_path / "quiz.jsonl",
        {"qid": "q1", "stem": "Which is a mammal?", "a": "trout", "b": "whale", "gold": 1},
        {"qid": "q2", "stem": "Which is a bird?", "a": "robin", "b": "bat", "gold": 0},
    )
    cfg = TaskFileConfig(path=path, format="choice", question="stem", choices=["a", "b"],
                         gold="gold", gold_is_index=True, id="qid", domain="zoology")
    task = load_task_file(cfg)
    assert (task.name, task.format, task.domain) == ("quiz", AnswerFormat.CHOICE, "zoology")
    assert [(it.id, it.gold, it.choices) for it in task.items] == [
        ("q1", "B", ("trout", "whale")), ("q2", "A", ("robin", "bat"))
    ]
    assert [it.id for it in load_task_file(cfg, limit=1).items] == ["q1"]


def test_task_file_csv_question_parts_and_tolerance(tmp_path):
    path = tmp_path / "word_problems.csv"
    path.write_text("Body,Question,Answer\nA tank holds 10 litres.,How much in two?,20.0\n",
                    encoding="utf-8")
    cfg = TaskFileConfig(path=path, format="number", question=["Body", "Question"],
                         gold="Answer", rel_tol=0.01)
    item = load_task_file(cfg).items[0]
    assert (item.id, item.question, item.gold) == (
        "word_problems-2", "A tank holds 10 litres. How much in two?", "20"
    )
    assert item.meta == {"rel_tol": "0.01"}
    assert is_correct(Answer("20.1", ""), item, AnswerFormat.NUMBER)


def test_task_file_short_text_with_the_simpleqa_grader(tmp_path):
    path = _jsonl(tmp_path / "trivia.jsonl", {"q": "Capital of France?", "a": "Paris, France"})
    task = load_task_file(
        TaskFileConfig(path=path, format="short_text", question="q", gold="a", grader="simpleqa")
    )
    item = task.items[0]
    assert item.gold == "paris france"
    assert item.meta == {"grader": "simpleqa", "gold_answers": '["Paris, France"]'}


def test_task_file_errors_name_file_line_or_field(tmp_path):
    path = _jsonl(tmp_path / "quiz.jsonl", {"question": "Why?", "answer": "because"},
                  {"question": "How?"})
    with pytest.raises(DatasetError, match=r"quiz\.jsonl:2: missing field 'answer'"):
        load_task_file(TaskFileConfig(path=path, format="short_text"))
    with pytest.raises(UserError, match="unknown grader 'oracle'"):
        load_task_file(TaskFileConfig(path=path, format="short_text", grader="oracle"))
    with pytest.raises(UserError, match="gold_transform"):
        load_task_file(TaskFileConfig(path=path, format="number", gold_transform="gsm9k"))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"format": "choice"}, "choices is required"),
        ({"format": "number", "choices": ["a", "b"]}, "choices is required"),
        ({"format": "short_text", "gold_is_index": True}, "gold_is_index"),
        ({"format": "choice", "choices": ["a"]}, "two or more"),
        ({"format": "short_text", "rel_tol": 0.05}, "rel_tol"),
        ({"format": "number", "question": []}, "at least one field"),
        ({"format": "number", "answer_field": "x"}, "Extra inputs"),
        ({"format": "numeric"}, "format"),
    ],
)
def test_task_file_config_is_validated(fields, message):
    with pytest.raises(ValidationError, match=message):
        TaskFileConfig(path="x.jsonl", **fields)


def test_task_file_defaults_change_nothing():
    cfg = RunConfig()
    assert cfg.task_file is None and cfg.perturbation.corpus is None
    assert "task_file" not in cfg.model_fields_set


def test_cli_flags_write_the_task_file_section(tmp_path):
    yaml_file = tmp_path / "run.yaml"
    yaml_file.write_text("task_file:\n  path: data.jsonl\n  format: choice\n  choices: options\n")
    args = _parser().parse_args([
        "run", "--config", str(yaml_file), "--question-field", "Body,Question",
        "--gold-field", "label", "--gold-is-index", "--id-field", "uid",
        "--domain", "school science", "--corpus", "noise.txt",
    ])
    cfg = run_config_from_args(args)
    tf = cfg.task_file
    assert (tf.path, tf.format, tf.choices) == (Path("data.jsonl"), "choice", "options")
    assert (tf.question, tf.gold, tf.gold_is_index, tf.id, tf.domain) == (
        ["Body", "Question"], "label", True, "uid", "school science"
    )
    assert cfg.perturbation.corpus == Path("noise.txt")
    flags = _parser().parse_args([
        "run", "--task-file", "x.csv", "--answer-format", "short_text", "--grader", "simpleqa",
    ])
    assert run_config_from_args(flags).task_file.grader == "simpleqa"
    with pytest.raises(UserError, match=r"options: task_file\.path: Field required"):
        run_config_from_args(_parser().parse_args(["run", "--question-field", "q"]))
    with pytest.raises(UserError, match="choices is required"):
        run_config_from_args(_parser().parse_args(
            ["run", "--task-file", "x.csv", "--answer-format", "choice"]))


def _answer_paris(messages, seed):
    return "Answer: Paris" if seed % 2 == 0 else "Answer: Lyon"


def test_run_reads_the_task_file(tmp_path, bow_embedder):
    path = _jsonl(tmp_path / "capitals.jsonl",
                  {"id": "fr", "q": "What is the capital of France?", "a": "Paris"},
                  {"id": "it", "q": "What is the capital of Italy?", "a": "Rome"})
    cfg = RunConfig(
        task_file=TaskFileConfig(path=path, format="short_text", question="q", gold="a",
                                 id="id", domain="geography"),
        perturbation={"corpus": None}, n=4, m=3, limit=None, bootstrap=0,
        methods=["self_consistency"], out=tmp_path / "run", cache=tmp_path / "c.sqlite",
    )
    result = run(cfg, model=ScriptedModel(_answer_paris), embedder=bow_embedder,
                 show_progress=False)
    assert result.task.name == "capitals"
    assert [r.item.id for r in result.items] == ["fr", "it"]
    assert [r.performance for r in result.items] == [0.5, 0.0]
    metrics = json.loads((cfg.out / "metrics.json").read_text())
    assert metrics["task"] == "capitals"

"""How many items a run takes: a built-in benchmark's first 20 unless ``limit`` says
otherwise, the user's own file whole unless ``limit`` is given, ``all`` for every item;
the terminal's title says when the limit cut the task."""

from __future__ import annotations

import json
import re

import pytest

from credo.cli import _parser, main
from credo.cli.run import run_config_from_args
from credo.config import DEFAULT_LIMIT, RunConfig, StrengthConfig, StudyConfig
from credo.devtools.toy_server import ToyModelServer


def _thirty(tmp_path):
    path = tmp_path / "thirty.jsonl"
    path.write_text("".join(
        json.dumps({"id": f"q{i:02d}", "question": f"What is {i} + 1?", "answer": str(i + 1)})
        + "\n" for i in range(30)))
    return path


def _config(argv):
    return run_config_from_args(_parser().parse_args(["run", *argv]))


def test_a_benchmark_takes_twenty_items_and_a_task_file_all_of_it(tmp_path):
    assert RunConfig().limit == DEFAULT_LIMIT == 20
    assert RunConfig(task="mmlu:high_school_geography").limit == 20
    assert RunConfig(task_file={"path": "x.jsonl", "format": "number"}).limit is None
    assert RunConfig(task="file:gsm8k:x.jsonl").limit is None
    assert RunConfig(task_file={"path": "x.jsonl", "format": "number"}, limit=20).limit == 20
    for value in ("all", "ALL", None):
        assert RunConfig(limit=value).limit is None
    path = _thirty(tmp_path)
    flags = ["--task-file", str(path), "--answer-format", "number"]
    assert _config(flags).limit is None
    assert _config([*flags, "--limit", "20"]).limit == 20
    assert _config([*flags, "--limit", "all"]).limit is None
    assert _config(["--task", "gsm8k"]).limit == 20
    assert _config(["--task", "gsm8k", "--limit", "all"]).limit is None
    yaml_file = tmp_path / "run.yaml"
    yaml_file.write_text(f"task_file: {{path: {path}, format: number}}\n")
    assert _config(["--config", str(yaml_file)]).limit is None
    yaml_file.write_text(f"task_file: {{path: {path}, format: number}}\nlimit: 5\n")
    assert _config(["--config", str(yaml_file)]).limit == 5
    assert _config(["--config", str(yaml_file), "--limit", "all"]).limit is None


@pytest.mark.parametrize("value", ["0", "-3", "twenty", "2.5"])
def test_a_bad_limit_is_one_line_naming_the_option(value, capsys):
    with pytest.raises(SystemExit) as exc:
        _parser().parse_args(["run", "--limit", value])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--limit" in err and "neither a number of items (1 or more) nor all" in err


def test_a_study_reads_each_file_whole_and_each_benchmark_in_twenty(tmp_path):
    path = _thirty(tmp_path)
    study = StudyConfig(tasks=[f"file:gsm8k:{path}", "gsm8k"], models=["openai:m"])
    assert [c.limit for c in study.run_configs()] == [None, 20]
    study = StudyConfig(tasks=[f"file:gsm8k:{path}", "gsm8k"], models=["openai:m"],
                        run={"limit": 7})
    assert [c.limit for c in study.run_configs()] == [7, 7]
    study = StudyConfig(tasks=[f"file:gsm8k:{path}"], models=["openai:m"],
                        run={"limit": "all"})
    assert [c.limit for c in study.run_configs()] == [None]


def test_strength_takes_all_too():
    assert StrengthConfig().limit == 30
    assert StrengthConfig(limit="all").limit is None
    args = _parser().parse_args(["strength", "run", "--limit", "all"])
    assert args.limit == "all"


def _title(out: str) -> str:
    return next(line for line in out.splitlines() if "· n=" in line).strip()


def test_a_thirty_line_task_file_runs_whole_and_the_title_says_a_cut(tmp_path, monkeypatch,
                                                                     capsys):
    path = _thirty(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("CREDO_CACHE_DIR", str(tmp_path / "cache"))
    with ToyModelServer() as toy:
        base = ["run", "--task-file", str(path), "--answer-format", "number", "--id-field",
                "id", "--model", "openai:toy", "--base-url", toy.url, "--n", "2", "--m", "2",
                "--methods", "self_consistency", "--bootstrap", "0", "--quiet"]
        assert main([*base, "--out", str(tmp_path / "whole")]) == 0
        whole = _title(capsys.readouterr().out)
        assert main([*base, "--limit", "20", "--out", str(tmp_path / "cut")]) == 0
        cut = _title(capsys.readouterr().out)
        assert main([*base, "--limit", "all", "--out", str(tmp_path / "all")]) == 0
        every = _title(capsys.readouterr().out)
        assert main([*base, "--limit", "20", "--dry-run"]) == 0
        dry = capsys.readouterr().out.splitlines()[0]
    assert re.search(r"· 30 items ·", whole) and " of " not in whole
    assert "· 20 of 30 items (limit 20; --limit all: every item) ·" in cut
    assert re.search(r"· 30 items ·", every)
    assert dry == ("dry run: thirty · 20 of 30 items (limit 20; --limit all: every item) · "
                   "no model called")
    scores = (tmp_path / "whole" / "scores.jsonl").read_text().splitlines()
    assert len(scores) == 30
    assert len((tmp_path / "cut" / "scores.jsonl").read_text().splitlines()) == 20

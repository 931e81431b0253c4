"""Bad input gets a clear error and loses nothing (issue 12): each mistake a user makes is
reported in one or two lines naming the file, line or option, exit 2, no traceback, and
no model is called."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from credo.cli import main

ARC_ROW = {"id": "q1", "question": "Which is a mammal?", "answerKey": "A",
           "choices": {"text": ["whale", "shark", "trout"], "label": ["A", "B", "C"]}}


@pytest.fixture
def no_generation(monkeypatch):
    """Fail the test if anything reaches a backend."""

    def refuse(self, planned, description="sampling"):
        raise AssertionError(f"a model was called ({description}) before the error")

    monkeypatch.setattr("credo.generation.executor.Executor.execute", refuse)


def _write(path: Path, text: str | bytes) -> Path:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def _cases(tmp: Path) -> dict[str, tuple[list[str], str]]:
    """name -> (arguments after ``credo run``, what the message must name)."""
    empty = _write(tmp / "empty.jsonl", "")
    rows = "".join(json.dumps({"question": f"{i} + 1?", "answer": f"#### {i + 1}"}) + "\n"
                   for i in range(3))
    cut = gzip.compress(rows.encode())[:-12]
    truncated = _write(tmp / "cut.jsonl.gz", cut)
    not_gzip = _write(tmp / "plain.jsonl.gz", rows)
    dup = dict(ARC_ROW, choices={"text": ["whale", "shark", "trout"], "label": ["A", "A", "C"]})
    duplicate = _write(tmp / "arc.jsonl", json.dumps(ARC_ROW) + "\n" + json.dumps(dup) + "\n")
    typo = _write(tmp / "typo.yaml", "sampling: {temprature: 0.5}\n")
    misspelt = _write(tmp / "opts.yaml", "model: smollm2-135m\nmodel_options: {n_ctxx: 4096}\n")
    bad_yaml = _write(tmp / "bad.yaml", "n: [1, 2\n")
    not_sqlite = _write(tmp / "cache.txt", "this is not a database\n" * 50)
    blocker = _write(tmp / "a-file", "")
    base = ["--model", "smollm2-135m", "--limit", "2", "--out", str(tmp / "run"),
            "--cache", str(tmp / "c.sqlite"), "--quiet"]
    return {
        "empty task file": (["--task", f"file:gsm8k:{empty}", *base], str(empty)),
        "unknown task": (["--task", "nosuchtask", *base], "nosuchtask"),
        "unknown model": (["--task", "gsm8k", *base, "--model", "nosuchmodel"], "nosuchmodel"),
        "truncated gzip": (["--task", f"file:gsm8k:{truncated}", *base], str(truncated)),
        "not gzip": (["--task", f"file:gsm8k:{not_gzip}", *base], str(not_gzip)),
        "duplicate labels": (["--task", f"file:arc:{duplicate}", *base], f"{duplicate}:2"),
        "missing config": (["--config", str(tmp / "nope.yaml"), *base], "nope.yaml"),
        "config not YAML": (["--config", str(bad_yaml), *base], "bad.yaml"),
        "nested typo": (["--config", str(typo), *base], "temprature"),
        "misspelt model option": (["--config", str(misspelt), *base[2:]], "n_ctxx"),
        "base url with an embedded model": (
            ["--task", "gsm8k", *base, "--base-url", "http://127.0.0.1:9/v1"], "base_url"),
        "cache not SQLite": (["--task", "gsm8k", *base, "--cache", str(not_sqlite)],
                             str(not_sqlite)),
        "unknown kernel": (["--task", "gsm8k", *base, "--kernel", "telepathy"], "telepathy"),
        "unknown method": (["--task", "gsm8k", *base, "--methods", "c3,oracle"], "oracle"),
        "prompt style not for the format": (
            ["--task", "mmlu:high_school_statistics", *base, "--prompt-style", "expression"],
            "expression"),
        "output folder not writable": (
            ["--task", "gsm8k", *base, "--out", str(blocker / "run")], str(blocker)),
        "max tokens 0": (["--task", "gsm8k", *base, "--max-tokens", "0"], "max_tokens"),
        "max tokens negative": (["--task", "gsm8k", *base, "--max-tokens", "-5"], "max_tokens"),
        "followups 0": (["--task", "gsm8k", *base, "--followups", "0"], "followups"),
        "followups negative": (["--task", "gsm8k", *base, "--followups", "-2"], "followups"),
    }


CASES = [
    "empty task file", "unknown task", "unknown model", "truncated gzip", "not gzip",
    "duplicate labels", "missing config", "config not YAML", "nested typo",
    "misspelt model option", "base url with an embedded model", "cache not SQLite",
    "unknown kernel", "unknown method", "prompt style not for the format",
    "output folder not writable", "max tokens 0", "max tokens negative", "followups 0",
    "followups negative",
]


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_one_or_two_lines_and_exit_2(case, tmp_path, capsys, no_generation):
    cases = _cases(tmp_path)
    assert sorted(cases) == sorted(CASES)
    args, named = cases[case]
    assert main(["run", *args]) == 2
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert 1 <= len(lines) <= 2, err
    assert "Traceback" not in out + err
    assert lines[0].startswith("error:")
    assert named in " ".join(err.split()), err
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())


def test_verbose_shows_the_traceback(tmp_path):
    """Without -v one line; with -v the traceback too (a fresh process: its own logging)."""
    credo = str(Path(sys.executable).with_name("credo"))
    args = ["run", "--task", "nosuchtask", "--out", str(tmp_path / "r"), "--quiet"]
    quiet = subprocess.run([credo, *args], capture_output=True, text=True, timeout=120)
    loud = subprocess.run([credo, "-v", *args], capture_output=True, text=True, timeout=120)
    assert quiet.returncode == loud.returncode == 2
    assert "Traceback" not in quiet.stderr and len(quiet.stderr.strip().splitlines()) <= 2
    assert "Traceback" in loud.stderr and "nosuchtask" in loud.stderr


def test_other_commands_use_the_same_error_surface(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nowhere")]) == 2
    assert main(["perturb", "topic-check", str(tmp_path / "nowhere"), "--judge", "x"]) == 2
    labels = _write(tmp_path / "l.jsonl", "{not json\n")
    assert main(["strength", "agree", "--labels", str(labels), "--measure", "cosine"]) == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 3 and all(ln.startswith("error:") for ln in lines), err
    assert "l.jsonl:1" in err


# --------------------------------------------------------------------------- task specs
# issue 21, item 5: a task spec that names no task, or gives a task an argument it does
# not take, was a ValueError traceback (exit 1) through run, --dry-run, study and
# strength run; it is a user error listing what is known, found before any model.

SPECS = {
    # spec -> words the one line must hold (what is wrong, what is known)
    "file without a preset": ("file:{tmp}/rows.jsonl", ["file:<preset>:<path>", "gsm8k",
                                                        "mmlu_csv", "arc", "svamp"]),
    "unknown MMLU subject": ("mmlu:underwater_basketry", ["underwater_basketry",
                                                          "high_school_statistics", "all"]),
    "argument to gsm8k": ("gsm8k:foo", ["'gsm8k'", "takes no argument", "'foo'"]),
    "argument to truthfulqa_mc1": ("truthfulqa_mc1:shuffled", ["'shuffled'",
                                                               "truthfulqa_mc1:unshuffled"]),
    "unknown file preset": ("file:gsm9k:{tmp}/rows.jsonl", ["gsm9k", "gsm8k", "svamp"]),
}


def _surfaces(spec: str, tmp: Path) -> dict[str, list[str]]:
    """Each command that takes a task spec -> its arguments, with ``spec`` as the task."""
    out = ["--out", str(tmp / "run"), "--cache", str(tmp / "c.sqlite"), "--quiet"]
    run = ["run", "--task", spec, "--model", "smollm2-135m", "--limit", "2", *out]
    study = _write(tmp / "study.yaml", json.dumps({"tasks": [spec], "models": ["smollm2-135m"],
                                                   "run": {"limit": 2}}))
    return {
        "run": run,
        "dry run": [*run, "--dry-run"],
        "study": ["study", "--config", str(study), *out],
        "strength run": ["strength", "run", "--task", spec, "--model", "smollm2-135m", *out],
    }


@pytest.mark.parametrize("surface", ["run", "dry run", "study", "strength run"])
@pytest.mark.parametrize("case", sorted(SPECS))
def test_a_bad_task_spec_is_one_line_and_exit_2(case, surface, tmp_path, capsys,
                                                no_generation, monkeypatch):
    def no_model(*a, **k):
        raise AssertionError("a model was built before the task spec was checked")

    monkeypatch.setattr("credo.models.registry.load_model", no_model)
    _write(tmp_path / "rows.jsonl", json.dumps({"question": "1 + 1?", "answer": "#### 2"}))
    spec, named = SPECS[case]
    spec = spec.format(tmp=tmp_path)
    assert main(_surfaces(spec, tmp_path)[surface]) == 2
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in out + err
    assert lines[0].startswith("error:")
    assert all(word in lines[0] for word in named), (named, lines[0])
    assert not (tmp_path / "run").exists()


def test_a_study_checks_every_task_before_its_first_run(tmp_path, capsys, no_generation):
    """The second task of a study is bad: nothing runs and no run folder is written (the
    first task's run used to finish before the second one failed)."""
    study = _write(tmp_path / "study.yaml", json.dumps(
        {"tasks": ["gsm8k", "gsm8k:foo"], "models": ["smollm2-135m"], "run": {"limit": 2}}))
    assert main(["study", "--config", str(study), "--out", str(tmp_path / "run"),
                 "--cache", str(tmp_path / "c.sqlite"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "'gsm8k' takes no argument, got 'foo'" in " ".join(err.split()), err
    assert not (tmp_path / "run").exists()

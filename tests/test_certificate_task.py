"""A certificate that cannot be misapplied (issue 34, items 1-3): it names the task it was
made on (family, answer format, prompt template, correctness), and ``--certificate`` on
another task is refused in one line before any model call; a file it cannot check (an
older credo's, a NaN threshold) is refused naming the field; a ``credo score`` folder
certifies, and its certificate is checked where it is used; crc's message states its
guarantee without a confidence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from credo import RunConfig, run
from credo.cli import main
from credo.errors import UserError
from credo.models.scripted import ScriptedModel
from credo.pipeline.certificate import RunCertificate, task_settings
from credo.tasks.base import AnswerFormat, Item, Task
from credo.tasks.builtin import load_task
from credo.tasks.prompts import RENDERED
from fault_server import FaultServer


def _answerer(messages, seed):
    """'Sam has k apples': right (18) for k even, a coin between 18 and 7 for k odd (so
    self-consistency separates the two and something is certified)."""
    k = int(messages[-1].content.split("has ")[1].split(" ")[0])
    return "Answer: 18" if k % 2 == 0 or seed % 2 == 0 else "Answer: 7"


def _sums(path: Path, items: int, gold: bool = True) -> Path:
    path.write_text("".join(
        json.dumps({"question": f"Sam has {k} apples and gets {18 - k} more. How many?",
                    **({"answer": "... #### 18"} if gold else {})}) + "\n"
        for k in range(items)))
    return path


def _arc(path: Path, items: int) -> Path:
    path.write_text("".join(json.dumps({
        "id": f"a{k}", "question": f"Sam has {k} apples. Which is a fruit?",
        "choices": {"label": ["A", "B"], "text": ["apple", "stone"]}, "answerKey": "A"})
        + "\n" for k in range(items)))
    return path


def _config(tmp: Path, out: str, **extra) -> RunConfig:
    fields = {"n": 6, "limit": None, "bootstrap": 0, "methods": ["self_consistency"],
              "out": tmp / out, "cache": tmp / "c.sqlite"}
    return RunConfig(**(fields | extra))


@pytest.fixture(scope="module")
def calibration(tmp_path_factory):
    """A labelled file:gsm8k run of 120 items, certified at alpha 0.2: its folder and the
    certificate file (read only by the tests)."""
    tmp = tmp_path_factory.mktemp("calibration")
    task = f"file:gsm8k:{_sums(tmp / 'a.jsonl', 120)}"
    run(_config(tmp, "calib", task=task), model=ScriptedModel(_answerer), show_progress=False)
    assert main(["certify", str(tmp / "calib"), "--method", "self_consistency",
                 "--alpha", "0.2", "--out", str(tmp / "cert.json")]) == 0
    return tmp / "calib", tmp / "cert.json"


@pytest.fixture
def certified(calibration):
    """(a fresh scripted model, the certificate path)."""
    return ScriptedModel(_answerer), calibration[1]


def test_the_certificate_names_its_task(calibration):
    folder, path = calibration
    task = json.loads(path.read_text())["settings"]["task"]
    assert task["family"] == "file:gsm8k"  # the preset, not the file's path or stem
    assert task["format"] == "number" and task["domain"] == "arithmetic reasoning"
    assert task["correctness"].startswith("exact (numeric value")
    assert len(task["prompt"]) == 16 and int(task["prompt"], 16) >= 0  # a digest
    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["task_identity"] == task  # the run folder records what was certified


def test_same_task_family_new_questions_are_answered(certified, tmp_path):
    """The point of ``--certificate``: new unlabelled questions of the same task (another
    file of the same layout) get their accept flags."""
    model, path = certified
    new = f"file:gsm8k:{_sums(tmp_path / 'b.jsonl', 10, gold=False)}"
    run(_config(tmp_path, "new", task=new), model=model, show_progress=False,
        certificate=path)
    rows = [json.loads(x) for x in (tmp_path / "new" / "answers.jsonl").read_text()
            .splitlines()]
    assert len(rows) == 10 and any(r["accept"] for r in rows)
    # a task file the user declares to hold that task's questions is accepted too
    plain = _config(tmp_path, "plain", task_file={
        "path": _sums(tmp_path / "c.jsonl", 4, gold=False), "format": "number",
        "family": "file:gsm8k", "domain": "arithmetic reasoning"})
    run(plain, model=model, show_progress=False, certificate=path)
    assert (tmp_path / "plain" / "answers.jsonl").is_file()


@pytest.mark.parametrize("other", ["arc file", "mmlu", "number file", "other domain"])
def test_another_task_is_refused_before_any_call(certified, tmp_path, other):
    model, path = certified
    tasks = {
        "arc file": ({"task": f"file:arc:{_arc(tmp_path / 'arc.jsonl', 4)}"}, "task.family"),
        "mmlu": ({"task": "mmlu:high_school_statistics"}, "task.family"),
        "number file": ({"task_file": {"path": _sums(tmp_path / "d.jsonl", 4, gold=False),
                                       "format": "number"}}, "task.family"),
        "other domain": ({"task_file": {"path": _sums(tmp_path / "d.jsonl", 4, gold=False),
                                        "format": "number", "family": "file:gsm8k"}},
                         "task.domain"),
    }
    fields, field = tasks[other]
    calls = model.calls
    with pytest.raises(UserError, match=rf"the run's {field} differs") as e:
        run(_config(tmp_path, "other", **fields), model=model, show_progress=False,
            certificate=path)
    assert model.calls == calls and "\n" not in str(e.value)
    assert not (tmp_path / "other").exists()


def test_the_command_line_refuses_another_task_in_one_line(tmp_path, capsys):
    """The issue's case: a GSM8K certificate on MMLU statistics and on an ARC file."""
    base = ["--model", "openai:toy", "--methods", "self_consistency", "--n", "4",
            "--cache", str(tmp_path / "c.sqlite"), "--quiet"]
    with FaultServer(answers=("Answer: 18",)) as server:
        url = ["--base-url", server.url]
        assert main(["run", "--task", f"file:gsm8k:{_sums(tmp_path / 'a.jsonl', 40)}",
                     "--limit", "40", *base, *url, "--out", str(tmp_path / "calib")]) == 0
        assert main(["certify", str(tmp_path / "calib"), "--method", "self_consistency",
                     "--out", str(tmp_path / "cert.json")]) == 0
        capsys.readouterr()
        before = server.requests
        for task in ("mmlu:high_school_statistics", f"file:arc:{_arc(tmp_path / 'x.jsonl', 3)}"):
            code = main(["run", "--task", task, *base, *url, "--certificate",
                         str(tmp_path / "cert.json"), "--out", str(tmp_path / "other")])
            err = capsys.readouterr().err.strip()
            assert code == 2 and server.requests == before
            assert len(err.splitlines()) == 1 and "task.family" in err, err


def test_the_prompt_and_correctness_are_part_of_the_task():
    """Same family and format, another prompt template (a benchmark's own rendering, or
    another few-shot count) or another correctness rule: another task."""
    items = (Item("q1", "What is 2 + 2?", "4"), Item("q2", "And 3 + 3?", "6"))
    plain = Task("sums", items, AnswerFormat.NUMBER)
    rendered = Task("sums", tuple(Item(i.id, i.question, i.gold, meta={
        "prompt": RENDERED, "context": "Q: 1 + 1?\nA: 2\n\n", "suffix": "\nA:"})
        for i in items), AnswerFormat.NUMBER)
    graded = Task("sums", tuple(Item(i.id, i.question, i.gold, meta={"rel_tol": "0.05"})
                                for i in items), AnswerFormat.NUMBER)
    cfg = RunConfig()
    base = task_settings(plain, cfg)
    assert task_settings(plain.head(1), cfg) == base  # not the items
    assert task_settings(plain, cfg.model_copy(update={"prompt_style": "cot"}))["prompt"] \
        != base["prompt"]
    fewshot = task_settings(rendered, cfg)
    assert fewshot["prompt"] != base["prompt"]
    three = cfg.model_copy(update={"lm_eval": cfg.lm_eval.model_copy(update={"num_fewshot": 3})})
    assert task_settings(rendered, three)["prompt"] != fewshot["prompt"]
    assert task_settings(graded, cfg)["correctness"] != base["correctness"]
    mmlu = task_settings(load_task("mmlu:high_school_statistics", limit=3), cfg)
    assert mmlu["family"] == "mmlu:high_school_statistics" and mmlu["format"] == "choice"


def _certificate_file(tmp: Path, calibration, **changes) -> Path:
    """The calibration's certificate file with ``changes`` applied to its
    ``certificate`` section (``settings_task=None`` removes the task, as an older credo
    wrote it), written to ``tmp``."""
    data = json.loads(calibration[1].read_text())
    if changes.pop("settings_task", True) is None:
        del data["settings"]["task"]
    data["certificate"].update(changes)
    path = tmp / "edited.json"
    path.write_text(json.dumps(data))  # json writes NaN and Infinity as the literals
    return path


def test_an_older_certificate_without_its_task_is_refused(tmp_path, calibration, capsys):
    path = _certificate_file(tmp_path, calibration, settings_task=None)
    with pytest.raises(UserError, match="re-certify") as e:
        RunCertificate.read(path)
    assert str(path) in str(e.value) and "\n" not in str(e.value)
    code = main(["run", "--task", f"file:gsm8k:{_sums(tmp_path / 'a.jsonl', 3)}", "--model",
                 "openai:toy", "--base-url", "http://127.0.0.1:9/v1", "--methods",
                 "self_consistency", "--certificate", str(path), "--quiet",
                 "--out", str(tmp_path / "x"), "--cache", str(tmp_path / "c.sqlite")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "credo certify" in err


@pytest.mark.parametrize(("field", "value"), [
    ("threshold", float("nan")), ("threshold", float("inf")), ("threshold", "high"),
    ("alpha", float("nan")), ("alpha", 1.5), ("alpha", 0.0), ("alpha", None),
    ("delta", float("nan")), ("delta", -0.1), ("delta", 1.0),
    ("coverage", 2.0), ("n", -3), ("method", "bogus"),
])
def test_a_certificate_with_a_bad_number_is_refused(tmp_path, calibration, field, value):
    path = _certificate_file(tmp_path, calibration, **{field: value})
    with pytest.raises(UserError, match=rf"certificate\.{field}\b") as e:
        RunCertificate.read(path)
    assert str(path) in str(e.value) and "\n" not in str(e.value)


def test_crc_states_its_guarantee_without_a_confidence(tmp_path, calibration, capsys):
    folder, _ = calibration
    assert main(["certify", str(folder), "--method", "self_consistency",
                 "--alpha", "0.2", "--procedure", "crc", "--out",
                 str(tmp_path / "crc.json")]) == 0
    out = capsys.readouterr().out
    assert "confidence" not in out and "delta" not in out.lower().replace("no delta", "")
    assert "in expectation" in out
    assert json.loads((tmp_path / "crc.json").read_text())["certificate"]["delta"] is None
    # nothing certified under crc: no "delta=None" either
    assert main(["certify", str(folder), "--method", "self_consistency",
                 "--alpha", "0.001", "--procedure", "crc", "--out",
                 str(tmp_path / "none.json")]) == 0
    out = capsys.readouterr().out
    assert "nothing certified" in out and "None" not in out and "confidence" not in out


def test_task_family_flag_declares_the_files_task(tmp_path):
    """``--task-family`` is ``task_file.family``: the task a file of new questions holds."""
    from credo.cli import _parser
    from credo.cli.flags import RUN_FLAGS, config_from_flags
    from credo.tasks.builtin import load_task_file

    path = _sums(tmp_path / "new.jsonl", 2, gold=False)
    args = _parser().parse_args(["run", "--task-file", str(path), "--answer-format", "number",
                                 "--task-family", "gsm8k", "--domain", "arithmetic reasoning"])
    cfg = config_from_flags(RunConfig, args, RUN_FLAGS)
    assert cfg.task_file.family == "gsm8k"
    declared = task_settings(load_task_file(cfg.task_file), cfg)
    builtin = task_settings(load_task("gsm8k", limit=2), cfg)
    assert declared == builtin  # the same family, format, topic, prompt and correctness


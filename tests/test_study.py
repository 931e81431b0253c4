"""Studies (issue 14): every task with every model over one cache, one run folder per
(task, model) and one comparison report; a rerun regenerates nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from credo.cli import main
from credo.config import StudyConfig
from fault_server import FaultServer


def _task(tmp: Path, stem: str, offset: int) -> str:
    path = tmp / f"{stem}.jsonl"
    path.write_text("".join(
        json.dumps({"question": f"Sam has {k + offset} apples and gets {18 - k - offset}"
                    " more. How many?", "answer": "... #### 18"}) + "\n" for k in range(4)))
    return f"file:gsm8k:{path}"


def _study_yaml(tmp: Path, a: str, b: str) -> Path:
    cfg = {
        "tasks": [_task(tmp, "sums", 0), _task(tmp, "more", 7)],
        # two different served models: the identity is the model name and its label, never
        # the URL (issue 13), so each says which weights it serves
        "models": [{"model": "openai:toy", "model_options": {"base_url": a, "label": "a"},
                    "label": "a"},
                   {"model": "openai:toy", "model_options": {"base_url": b, "label": "b"},
                    "label": "b"}],
        "methods": ["self_consistency"],
        "run": {"n": 4, "limit": 2, "bootstrap": 0, "max_block": 2},
        "out": str(tmp / "study"),
        "cache": str(tmp / "cache.sqlite"),
    }
    path = tmp / "study.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_a_two_by_two_study_writes_four_runs_and_one_report_and_resumes(tmp_path, capsys):
    with FaultServer() as a, FaultServer(answers=("Answer: 18", "Answer: 3")) as b:
        config = _study_yaml(tmp_path, a.url, b.url)
        assert main(["study", "--config", str(config), "--quiet"]) == 0
        first = capsys.readouterr().out
        served = a.served + b.served
        assert main(["study", "--config", str(config), "--quiet"]) == 0
        again = capsys.readouterr().out
        assert a.served + b.served == served  # nothing regenerated
    out = tmp_path / "study"
    folders = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert folders == ["more__a", "more__b", "report", "sums__a", "sums__b"]
    for name in ("sums__a", "sums__b", "more__a", "more__b"):
        metrics = json.loads((out / name / "metrics.json").read_text())
        assert metrics["items"] == 2 and set(metrics["methods"]) == {"self_consistency"}
    report = (out / "report" / "index.html").read_text()
    assert all(f"{name}" in report for name in ("sums__a", "more__b"))
    assert (out / "study.yaml").exists()
    lines = [ln for ln in first.splitlines() if ln.startswith("[")]
    assert [ln[:5] for ln in lines] == ["[1/4]", "[2/4]", "[3/4]", "[4/4]"]
    assert all("8 generated, 0 cached" in ln for ln in lines)
    again_lines = [ln for ln in again.splitlines() if ln.startswith("[")]
    assert all("0 generated, 8 cached" in ln for ln in again_lines)
    assert "sums · b (openai:toy)" in lines[2]
    # model b answers 3 half the time: the two models differ, the two tasks share nothing
    acc = {n: json.loads((out / n / "metrics.json").read_text())["accuracy"]
           for n in folders if n != "report"}
    assert acc["sums__a"] != acc["sums__b"] or acc["more__a"] != acc["more__b"]


@pytest.mark.parametrize(("change", "message"), [
    ({"run": {"task": "gsm8k"}}, "run.task: set per run by the study"),
    ({"run": {"n": 1}}, "run.n"),
    ({"methods": {"gsm8k": ["c3"]}}, "'gsm8k' is not one of the study's tasks"),
    ({"models": ["openai:x", "openai:x"]}, "share the folder name"),
    ({"tasks": []}, "tasks"),
    ({"executor": {"kind": "dask"}}, "executor.kind"),
])
def test_a_bad_study_is_refused_naming_the_field(tmp_path, change, message):
    data = {"tasks": ["file:gsm8k:/x/sums.jsonl"], "models": ["openai:x"], **change}
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        StudyConfig.model_validate(data)


def test_study_runs_share_the_run_section_and_name_their_folders(tmp_path):
    cfg = StudyConfig.model_validate({
        "tasks": ["gsm8k", "file:gsm8k:/data/sums.jsonl"],
        "models": ["qwen2.5-coder-1.5b", {"model": "openai:gpt-4o", "label": "gpt"}],
        "methods": {"gsm8k": ["c3", "self_consistency"]},
        "run": {"n": 7, "limit": 3, "methods": ["c3"]},
        "out": str(tmp_path), "executor": {"kind": "ray", "workers": 4},
    })
    runs = cfg.run_configs()
    assert [(r.task, r.model) for r in runs] == [
        ("gsm8k", "qwen2.5-coder-1.5b"), ("file:gsm8k:/data/sums.jsonl", "qwen2.5-coder-1.5b"),
        ("gsm8k", "openai:gpt-4o"), ("file:gsm8k:/data/sums.jsonl", "openai:gpt-4o"),
    ]
    assert [r.out.name for r in runs] == [
        "gsm8k__qwen2.5-coder-1.5b", "sums__qwen2.5-coder-1.5b", "gsm8k__gpt", "sums__gpt"]
    assert [r.methods for r in runs] == [["c3", "self_consistency"], ["c3"]] * 2
    assert {(r.n, r.limit, r.executor.kind, r.executor.workers) for r in runs} == {
        (7, 3, "ray", 4)}

"""One ending of a run (issue 22): the outcome of every entry point, the neutrality gate of
``credo run``, ``credo study``, :func:`credo.run` and :func:`credo.api.study`, and method
names checked where a pipeline starts."""

from __future__ import annotations

import json

import pytest
import yaml

from credo import RunConfig, run
from credo.api import study
from credo.cli import main
from credo.config import StudyConfig
from credo.errors import NeutralityFailed, UserError
from credo.models.scripted import ScriptedModel
from credo.pipeline.ending import EXIT_STATUS, Outcome, decide_outcome
from test_prefix_rules import TASK, _patch_models, _respond_shifted

NOT_NEUTRAL = {"neutral": False, "mean_delta": -2.0}
NEUTRAL = {"neutral": True, "mean_delta": 0.1}


@pytest.mark.parametrize("incomplete, budget, record, gate, outcome", [
    ({}, False, {}, "fail", Outcome.COMPLETE),
    ({}, False, NEUTRAL, "fail", Outcome.COMPLETE),
    ({}, False, NOT_NEUTRAL, "warn", Outcome.COMPLETE),
    ({}, False, NOT_NEUTRAL, "fail", Outcome.NEUTRALITY_FAILED),
    ({"q1": "perturbed samples missing"}, False, NOT_NEUTRAL, "fail",
     Outcome.INCOMPLETE_FAILURES),
    ({"q1": "original samples missing"}, True, NOT_NEUTRAL, "fail", Outcome.INCOMPLETE_BUDGET),
    ({"q1": "original samples missing"}, False, {}, "warn", Outcome.INCOMPLETE_FAILURES),
])
def test_the_outcome_rule(incomplete, budget, record, gate, outcome):
    assert decide_outcome(incomplete, budget, record, gate) is outcome


def test_every_outcome_has_the_documented_exit_status():
    assert {o.value: EXIT_STATUS[o] for o in Outcome} == {
        "complete": 0, "incomplete-budget": 3, "incomplete-failures": 3,
        "neutrality-failed": 4}


def _run_config(tmp_path, gate: str) -> RunConfig:
    return RunConfig.model_validate({
        "task": "shift", "n": 4, "m": 4, "limit": None, "bootstrap": 0,
        "perturbation": {"neutrality": gate}, "out": tmp_path / "run",
        "cache": tmp_path / "c.sqlite"})


@pytest.mark.parametrize("gate", ["fail", "warn"])
def test_the_api_raises_on_non_neutral_prefixes_after_writing_the_folder(
    tmp_path, bow_embedder, gate
):
    cfg = _run_config(tmp_path, gate)
    kwargs = {"model": ScriptedModel(_respond_shifted), "embedder": bow_embedder, "task": TASK,
              "show_progress": False}
    if gate == "warn":
        result = run(cfg, **kwargs)
        assert result.outcome is Outcome.COMPLETE and result.neutrality["neutral"] is False
    else:
        with pytest.raises(NeutralityFailed, match="not neutral") as caught:
            run(cfg, **kwargs)
        result = caught.value.result
        assert result.outcome is Outcome.NEUTRALITY_FAILED and caught.value.study is None
    status = json.loads((tmp_path / "run" / "run_status.json").read_text())
    assert status["status"] == "complete" and status["outcome"] == result.outcome.value
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["neutrality"]["neutral"] is False and metrics["items"] == len(TASK.items)


def _study(tmp_path, gate: str, methods=None) -> StudyConfig:
    return StudyConfig.model_validate({
        "tasks": ["shift", "shift2"], "models": ["scripted-x"],
        "run": {"n": 4, "m": 4, "limit": None, "bootstrap": 0,
                "perturbation": {"neutrality": gate}},
        **({"methods": methods} if methods else {}),
        "out": str(tmp_path / "study"), "cache": str(tmp_path / "c.sqlite")})


def test_a_study_stops_at_the_first_run_that_fails_the_gate(tmp_path, monkeypatch,
                                                             bow_embedder):
    monkeypatch.setattr("credo.pipeline.runner.load_task", lambda spec, limit=None: TASK)
    seen = []
    with pytest.raises(NeutralityFailed, match="not neutral") as caught:
        study(_study(tmp_path, "fail"), models={"scripted-x": ScriptedModel(_respond_shifted)},
              embedder=bow_embedder, show_progress=False,
              on_run=lambda i, total, r: seen.append((i, total)))
    partial = caught.value.study
    assert seen == [(1, 2)] and len(partial.runs) == 1
    assert caught.value.result is partial.runs[0].result
    out = tmp_path / "study"
    assert (out / "shift__scripted-x" / "run_status.json").exists()
    assert not (out / "shift2__scripted-x").exists()  # stopped before the second run
    assert partial.report == out / "report" / "index.html" and partial.report.exists()
    # under warn the same study runs both and raises nothing
    done = study(_study(tmp_path, "warn"),
                 models={"scripted-x": ScriptedModel(_respond_shifted)},
                 embedder=bow_embedder, show_progress=False)
    assert [r.result.outcome for r in done.runs] == [Outcome.COMPLETE] * 2


def test_credo_study_exits_4_on_non_neutral_prefixes(tmp_path, monkeypatch, capsys,
                                                      bow_embedder):
    _patch_models(monkeypatch, bow_embedder, _respond_shifted)
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(json.loads(json.dumps(
        _study(tmp_path, "fail").model_dump(mode="json", exclude_defaults=True)))))
    assert main(["study", "--config", str(path), "--quiet"]) == 4
    out, err = capsys.readouterr()
    assert out.count("[1/2]") == 1 and "[2/2]" not in out
    lines = [ln for ln in err.splitlines() if "not neutral" in ln]
    assert len(lines) == 1 and lines[0].startswith("error:")
    assert "stopped after 1 of 2 runs" in " ".join(err.split())


def test_a_study_names_an_unknown_method_before_any_run(tmp_path, monkeypatch):
    def no_model(*a, **k):
        raise AssertionError("a model was built before the unknown method was named")

    monkeypatch.setattr("credo.models.registry.load_model", no_model)
    cfg = _study(tmp_path, "warn", methods={"shift2": ["c3", "nope"]})
    with pytest.raises(UserError, match="unknown methods: unknown method 'nope'"):
        study(cfg, show_progress=False)
    assert not (tmp_path / "study").exists()
    assert not (tmp_path / "c.sqlite").exists()


def test_credo_score_names_an_unknown_method_in_one_line(tmp_path, capsys):
    samples = tmp_path / "s.jsonl"
    samples.write_text(json.dumps({"item": "a", "set": "original", "answer": "1",
                                   "correct": True}) + "\n", encoding="utf-8")
    args = ["score", str(samples), "--methods", "c3,nope", "--out", str(tmp_path / "o"),
            "--cache", str(tmp_path / "c.sqlite"), "--quiet"]
    assert main(args) == 2
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: unknown methods:")
    assert "'nope'" in lines[0]
    assert not (tmp_path / "o").exists() and not (tmp_path / "c.sqlite").exists()

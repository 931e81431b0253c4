"""A stopping rule, a metric and a method registered from the test suite (issue 31 item 2):
each is one module of ``tests/plugins`` with one registration, and the command line runs
them (``credo run`` on the scripted model, ``credo adaptive``'s replay) and shows them in
its output and files, with no line of credo naming them."""

from __future__ import annotations

import importlib
import json
import sys

import pytest

import credo.api as api
from credo import RunConfig
from credo.cli import main
from credo.evaluate.registry import METRICS
from credo.methods.base import METHODS
from credo.models.scripted import ScriptedModel
from credo.registry import STOPPING_RULES
from test_runner import TASK, respond

PLUGINS = (("plugins.stopping_rule", STOPPING_RULES, "at_minimum"),
           ("plugins.metric", METRICS, "score_gap"),
           ("plugins.method", METHODS, "first_share"))


@pytest.fixture
def plugins():
    """The three modules imported (their registrations run), unregistered after."""
    for module, _, _ in PLUGINS:
        sys.modules.pop(module, None)
        importlib.import_module(module)
    yield
    for module, registry, name in PLUGINS:
        registry.remove(name)
        sys.modules.pop(module, None)


@pytest.fixture
def scripted_api(monkeypatch, bow_embedder):
    """``credo.api.run`` and ``simulate_adaptive``, and the ``credo.app`` functions the
    command line calls, handed the scripted model, the toy task and the bag-of-words
    embedder (the command line builds them from the config)."""
    import credo.app.adaptive
    import credo.app.run

    for module, name in ((credo.app.run, "run"), (credo.app.adaptive, "simulate_adaptive")):
        real = getattr(module, name)

        def scripted(*a, _real=real, **k):
            return _real(*a, **k, model=ScriptedModel(respond), embedder=bow_embedder,
                         task=TASK)

        monkeypatch.setattr(module, name, scripted)
        monkeypatch.setattr(api, name, scripted)


def _first_share(answers: list) -> float:
    return sum(a is not None and a == answers[0] for a in answers) / len(answers)


def test_credo_run_uses_the_registered_method_metric_and_stopping_rule(
        plugins, scripted_api, tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["run", "--task", "toy", "--methods", "self_consistency,first_share",
                 "--n", "8", "--m", "8", "--bootstrap", "0", "--adaptive", "at_minimum",
                 "--out", str(out), "--cache", str(tmp_path / "c.sqlite"), "--quiet"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "first_share" in printed and "ScoreGap" in printed  # a headline column
    rows = [json.loads(x) for x in (out / "scores.jsonl").read_text().splitlines()]
    assert len(rows) == len(TASK.items)
    for r in rows:
        assert len(r["original_answers"]) == 4  # the rule stops every item at min
        assert r["scores"]["first_share"] == pytest.approx(_first_share(r["original_answers"]))
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["stats"]["adaptive_rule"] == "at_minimum"
    text = json.dumps(metrics)
    assert '"score_gap"' in text and '"first_share"' in text
    assert "ScoreGap" in (out / "report.md").read_text()


def test_credo_adaptive_replays_the_registered_rule(plugins, scripted_api, tmp_path, capsys):
    config = RunConfig(task="toy", n=8, m=8, out=tmp_path / "full", bootstrap=0,
                       cache=tmp_path / "full.sqlite", methods=["c3", "first_share"])
    api.run(config, show_progress=False)
    capsys.readouterr()
    assert main(["adaptive", str(config.out), "--rule", "at_minimum", "--rule", "consensus",
                 "--method", "first_share", "--bootstrap", "20"]) == 0
    assert "at_minimum" in capsys.readouterr().out
    data = json.loads((config.out / "adaptive" / "adaptive.json").read_text())
    point = data["points"][0]
    assert [p["rule"] for p in data["points"]] == ["at_minimum", "consensus"]
    assert point["epsilon"] is None  # the rule has no tolerance
    assert point["samples"]["original"] == {"adaptive": 4 * len(TASK.items),
                                            "full": 8 * len(TASK.items)}
    assert all(d == {"original": 4, "perturbed": 4} for d in point["drawn"].values())


def test_the_choices_and_the_config_read_the_registry(plugins, capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["adaptive", "somewhere", "--rule", "nope"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "'at_minimum'" in err and "'consensus'" in err
    assert RunConfig(adaptive={"rule": "at_minimum"}).adaptive.rule == "at_minimum"
    with pytest.raises(ValueError, match="unknown stopping rule 'nope'; known stopping rules: "
                       "at_minimum, consensus, decision, interval"):
        RunConfig(adaptive={"rule": "nope"})

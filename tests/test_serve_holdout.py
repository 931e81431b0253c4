"""docs/results/serve_holdout.py end to end on the scripted backend (issue 32, item 6a):
certify on one half, serve the other half through the gateway unlabelled, grade it."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from credo.models.scripted import ScriptedModel
from serve_helpers import answerer, coins

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location(
        "serve_holdout", ROOT / "docs" / "results" / "serve_holdout.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def test_the_holdout_script_runs_on_the_scripted_backend(tmp_path, capsys) -> None:
    config = tmp_path / "holdout.yaml"
    config.write_text(f"task: gsm8k\nlimit: 40\nn: 4\nmethods: [self_consistency]\n"
                      f"bootstrap: 0\nout: {tmp_path / 'out'}\ncache: {tmp_path / 'c.sqlite'}\n")
    # --limit and --n over the config's
    result = _script().main(["--config", str(config), "--alpha", "0.2", "--limit", "120",
                             "--n", "12"], model=ScriptedModel(answerer), task=coins(120))
    out = tmp_path / "out"
    assert result["items"] == 60 and result["calibration"]["items"] == 60
    log = [json.loads(x) for x in (out / "decisions.jsonl").read_text().splitlines()]
    assert len(log) == 60
    assert all(row["status"] == ("answered" if row["accept"] else "rejected") for row in log)
    # by hand from the log: the even questions (always 18, the gold) are accepted, the
    # coins are not; every accepted answer is right
    accepted = [row for row in log if row["accept"]]
    even = [row for row in log if int(row["question"].split("number ")[1].split(":")[0]) % 2
            == 0]
    assert {row["id"] for row in accepted} == {row["id"] for row in even}
    a = result["adaptive"]
    assert a["accepted"] == len(accepted) and a["error_rate"] == 0.0
    assert a["coverage"] == pytest.approx(len(accepted) / 60)
    assert a["samples_per_question"] == pytest.approx(sum(r["samples"] for r in log) / 60)
    assert a["samples_per_question"] < a["full_samples_per_question"] == 12
    low, high = a["coverage_ci"]
    assert low < a["coverage"] < high
    # the scripted backend replays exactly: the live decisions are the full recipe's
    assert result["decisions_equal_full_at_t"] == 1.0
    assert (out / "holdout.md").read_text().startswith("60 test questions")
    assert "adaptive decision (gateway, live)" in capsys.readouterr().out

"""``credo strength run --config FILE`` and ``--base-url``: a strength run of served
models from the command line, with its dry run and budget. The config is the one
docs/concepts/strength.md shows, run against the loopback toy model."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from credo.cli import main
from credo.cli.flags import served_at
from credo.devtools.toy_server import ToyModelServer
from credo.errors import UserError

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "concepts" / "strength.md"


class CountingToy(ToyModelServer):
    """The toy model, keeping every chat request body it answered."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        super().__init__()

    def completion(self, body):
        self.bodies.append(dict(body))
        return super().completion(body)


def _block(title: str) -> str:
    """The text of the page's code block titled ``title``."""
    found = re.search(rf'```\w+ title="{re.escape(title)}"\n(.*?)```', PAGE.read_text(),
                      re.S)
    assert found, f"{PAGE} has no block titled {title}"
    return found.group(1)


@pytest.fixture
def served(tmp_path, monkeypatch):
    """The page's questions and strength config in a folder, the config pointed at a
    toy model on a free port (the page's is 8000)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CREDO_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "questions.jsonl").write_text(_block("questions.jsonl"))
    with CountingToy() as toy:
        config = _block("strength.yaml").replace("http://localhost:8000/v1", toy.url)
        assert toy.url in config
        (tmp_path / "strength.yaml").write_text(config)
        yield toy


def _dry_rows(printed: str) -> dict[str, list[str]]:
    table = printed.split("\n\n")[1].splitlines()[1:]
    return {ln[:20].strip(): ln[20:].split() for ln in table}


def test_the_pages_served_config_runs_through_the_command_line(served, capsys):
    """Done when: ``credo strength run --config`` with served roles and ``--dry-run``
    works; the run then asks the served model only, at the label and prices the
    config gives, and writes its folder."""
    assert main(["strength", "run", "--config", "strength.yaml", "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert served.bodies == []  # the dry run calls no model
    assert printed.startswith("dry run: strategyqa · 3 items · no model called")
    rows = _dry_rows(printed)
    assert {"chains of thought", "input perturbations", "CoT perturbations",
            "answer letters", "strength judge", "total"} <= set(rows)
    assert rows["chains of thought"][:2] == ["planned", "3"]  # one chain per item
    assert float(rows["total"][-1]) > 0  # priced: the config's price_* options
    assert "chains of thought: openai:my-model@toy" in printed

    assert main(["strength", "run", "--config", "strength.yaml", "--out", "runs/served",
                 "--quiet"]) == 0
    assert served.bodies and {b["model"] for b in served.bodies} == {"my-model"}
    out = Path("runs/served")
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["models"]) == ["openai:my-model"]
    status = json.loads((out / "run_status.json").read_text())
    assert status["status"] == "complete"
    asked = len(served.bodies)
    assert main(["strength", "run", "--config", "strength.yaml", "--out", "runs/again",
                 "--quiet"]) == 0
    assert len(served.bodies) == asked  # a rerun reads the cache: nothing is asked again


def test_flags_override_the_file(served, capsys):
    assert main(["strength", "run", "--config", "strength.yaml", "--limit", "2",
                 "--types", "input", "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("dry run: strategyqa · 2 items")
    rows = _dry_rows(printed)
    assert "input perturbations" in rows and "CoT perturbations" not in rows


def test_the_budget_stops_the_served_run(served, capsys):
    code = main(["strength", "run", "--config", "strength.yaml", "--max-cost-usd",
                 "0.0000001", "--out", "runs/budget", "--quiet"])
    err = capsys.readouterr().err
    assert code == 3, err
    assert "cost budget reached" in err
    status = json.loads(Path("runs/budget/run_status.json").read_text())
    assert status["status"] == "incomplete"


def test_base_url_serves_every_served_role_without_its_own(served, capsys):
    """``--model openai:a,openai:b --judge openai:j --base-url URL``: the two models
    under test and the judge are served from URL."""
    assert main(["strength", "run", "--task", "strategyqa:questions.jsonl", "--limit", "1",
                 "--model", "openai:a,openai:b", "--judge", "openai:j", "--base-url",
                 served.url, "--surprisal-model", "none", "--types", "input",
                 "--out", "runs/flags", "--quiet"]) == 0
    assert {b["model"] for b in served.bodies} == {"a", "b", "j"}


def test_base_url_that_serves_nothing_is_one_line_exit_2(served, capsys):
    code = main(["strength", "run", "--task", "strategyqa:questions.jsonl", "--model",
                 "qwen2.5-coder-1.5b", "--base-url", served.url, "--dry-run"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "--base-url: no served model" in err
    assert served.bodies == []


@pytest.mark.parametrize(("data", "want"), [
    ({"models": ["openai:a", "qwen"]},
     {"models": [{"model": "openai:a", "base_url": "U"}, "qwen"]}),
    ({"models": [{"model": "openai:a", "base_url": "V"}], "judge": "openai:j"},
     {"models": [{"model": "openai:a", "base_url": "V"}],
      "judge": {"model": "openai:j", "base_url": "U"}}),
    ({"writer": {"model": "openai:w", "label": "x"}, "surprisal_model": "openai:s"},
     {"writer": {"model": "openai:w", "label": "x", "base_url": "U"},
      "surprisal_model": "openai:s"}),
])
def test_served_at_keeps_a_roles_own_url(data, want):
    served_at(data, "U")
    assert data == want


def test_served_at_refuses_a_url_no_role_takes():
    with pytest.raises(UserError, match="no served model"):
        served_at({"models": [{"model": "openai:a", "base_url": "V"}]}, "U")

"""A plug-in from an installed package, end to end: the package of
``docs/how-to/plugins.md`` (its files are the page's titled blocks) is built and
installed with pip into a folder of its own, and the page's ``credo`` commands run in a
fresh process with that folder on ``PYTHONPATH``: ``credo methods`` names the plug-in,
``credo run`` uses its task, its model backend, its method, its metric, its kernel and its
stopping rule, and
``credo score`` scores the run's samples with its method, and ``credo tasks`` names the
plug-in as its task's source."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "how-to" / "plugins.md"
sys.path.insert(0, str(ROOT / "docs" / "gen"))

import blocks  # noqa: E402

MAIN = "import sys; from credo.cli import main; sys.exit(main(sys.argv[1:]))"


def _page() -> blocks.Page:
    (page,) = [p for p in blocks.pages(ROOT / "docs") if p.path == PAGE]
    return page


def _commands(page: blocks.Page) -> list[list[str]]:
    """The ``credo`` command lines of the page's bash blocks, as argument lists."""
    return [shlex.split(line)[1:] for b in page.blocks if b.lang == "bash"
            for line in b.code.splitlines() if line.startswith("credo ")]


def _first_share(answers: list) -> float:
    return sum(a is not None and a == answers[0] for a in answers) / len(answers)


@pytest.mark.slow
def test_the_pages_plugin_runs_through_credo_run_and_score(tmp_path):
    page = _page()
    for block in page.blocks:
        if block.title:
            path = tmp_path / block.title
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(block.code, encoding="utf-8")
    site = tmp_path / "site"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
         "--no-build-isolation", "--target", str(site), str(tmp_path / "credo-first-share")],
        capture_output=True, text=True, timeout=300, check=False)
    assert built.returncode == 0, built.stdout + built.stderr
    assert list(site.glob("credo_first_share-0.1.0.dist-info/entry_points.txt"))

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(site)]),
           "CREDO_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "200", "NO_COLOR": "1"}
    env.pop("CREDO_NO_PLUGINS", None)
    printed = {}
    for argv in _commands(page):
        done = subprocess.run([sys.executable, "-c", MAIN, *argv], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, f"credo {shlex.join(argv)}:\n{done.stdout}{done.stderr}"
        printed[argv[argv.index("--out") + 1] if "--out" in argv else argv[0]] = done.stdout
    assert set(printed) == {"methods", "runs/doubles", "runs/rescored", "runs/adaptive"}

    listed = [ln for ln in printed["methods"].splitlines() if ln.startswith("first_share")]
    assert listed and "(plug-in: credo-first-share 0.1.0)" in listed[0]
    assert "first_share" in printed["runs/doubles"] and "first_share" in printed["runs/rescored"]

    for folder in ("runs/doubles", "runs/rescored", "runs/adaptive"):
        rows = [json.loads(x) for x in
                (tmp_path / folder / "scores.jsonl").read_text().splitlines()]
        assert sorted(r["id"] for r in rows) == sorted(f"d{i}" for i in range(1, 11))
        for r in rows:
            assert r["scores"]["first_share"] == pytest.approx(
                _first_share(r["original_answers"]))
        assert {r["label"] for r in rows} == {0, 1}  # the doubler errs on odd numbers
        metrics = json.loads((tmp_path / folder / "metrics.json").read_text())
        text = json.dumps(metrics)
        assert '"score_gap"' in text and '"first_share"' in text
        assert "ScoreGap" in (tmp_path / folder / "report.md").read_text()
    run_rows = {r["id"]: r for r in map(json.loads, (tmp_path / "runs/doubles/scores.jsonl")
                                        .read_text().splitlines())}
    assert set(run_rows["d2"]["scores"]) == {"self_consistency", "first_share"}

    # the kernel: every answer of the doubler is even, so one cluster under same_parity
    # (an item's answers disagree only on odd numbers: the first share says so)
    adaptive = [json.loads(x) for x in
                (tmp_path / "runs/adaptive/scores.jsonl").read_text().splitlines()]
    assert len({r["scores"]["semantic_entropy"] for r in adaptive}) == 1
    assert min(r["scores"]["first_share"] for r in adaptive) < 1
    # the stopping rule: every item stops at adaptive.min, below --n 8
    assert {len(r["original_answers"]) for r in adaptive} == {4}
    stats = json.loads((tmp_path / "runs/adaptive/metrics.json").read_text())["stats"]
    assert stats["adaptive_rule"] == "at_minimum"

    tasks = subprocess.run([sys.executable, "-c", MAIN, "tasks", "--json"], cwd=tmp_path,
                           env=env, capture_output=True, text=True, timeout=600, check=False)
    assert tasks.returncode == 0, tasks.stderr
    rows = [json.loads(x) for x in tasks.stdout.splitlines()]
    (doubles,) = [r for r in rows if r["spec"] == "doubles"]
    assert doubles["source"] == "plug-in: credo-first-share 0.1.0" and doubles["items"] == 10
    assert all(not r["source"].startswith("plug-in") for r in rows if r is not doubles)

"""A run killed while sampling or while writing its folder resumes to the output of an
uninterrupted run (issue 12): nothing is lost, nothing is duplicated, no half-written file
is taken for a finished one."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from credo import RunConfig, run
from credo.cli import main
from credo.models.scripted import ScriptedModel
from test_runner import TASK, respond

TESTS = Path(__file__).parent

SLOW_RUN = """
import sys, time
sys.path.insert(0, {tests!r})
from conftest import BagOfWordsEmbedder
from test_runner import TASK, respond
from credo import RunConfig, run
from credo.models.scripted import ScriptedModel

def slow(messages, seed):
    time.sleep(0.01)
    return respond(messages, seed)

cfg = RunConfig(task="toy", n=12, m=6, limit=None, bootstrap=0, max_block=2,
                out={out!r}, cache={cache!r})
run(cfg, model=ScriptedModel(slow), embedder=BagOfWordsEmbedder(), task=TASK,
    show_progress=False)
"""


def _config(tmp: Path, name: str) -> RunConfig:
    return RunConfig(task="toy", n=12, m=6, limit=None, bootstrap=0, max_block=2,
                     out=tmp / name / "run", cache=tmp / name / "cache.sqlite")


def _samples(cache: Path) -> int:
    try:
        with sqlite3.connect(cache) as db:
            return int(db.execute("SELECT COUNT(*) FROM samples").fetchone()[0])
    except sqlite3.Error:
        return 0


def _files(out: Path) -> dict[str, str]:
    return {f: (out / f).read_text() for f in ("scores.jsonl", "samples.jsonl",
                                               "perturbations.jsonl")}


def test_killed_while_sampling_resumes_to_the_uninterrupted_output(tmp_path, bow_embedder):
    clean = _config(tmp_path, "clean")
    run(clean, model=ScriptedModel(respond), embedder=bow_embedder, task=TASK,
        show_progress=False)
    total = _samples(clean.cache)

    cfg = _config(tmp_path, "killed")
    script = tmp_path / "slow_run.py"
    script.write_text(SLOW_RUN.format(tests=str(TESTS), out=str(cfg.out), cache=str(cfg.cache)))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 120
    try:
        while _samples(cfg.cache) < total // 3 and proc.poll() is None:
            assert time.monotonic() < deadline, "the run never got a third of the way"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    done_before = _samples(cfg.cache)
    assert 0 < done_before < total, "the kill must land mid-sampling"

    model = ScriptedModel(respond)
    again = run(cfg, model=model, embedder=bow_embedder, task=TASK, show_progress=False)
    assert _samples(cfg.cache) == total  # nothing lost, nothing twice
    assert model.samples == total - done_before  # only the missing ones were generated
    assert _files(cfg.out) == _files(clean.out)
    assert again.stats["generated_samples"] == total - done_before


def test_killed_while_writing_is_marked_and_a_rerun_completes_it(
    tmp_path, bow_embedder, monkeypatch, capsys
):
    cfg = _config(tmp_path, "w")
    first = run(cfg, model=ScriptedModel(respond), embedder=bow_embedder, task=TASK,
                show_progress=False)
    complete = _files(cfg.out)
    assert json.loads((cfg.out / "run_status.json").read_text())["status"] == "complete"

    import credo.jsonio as jsonio

    real = jsonio.write_text
    written: list[str] = []

    def dies_on_the_fourth_file(path, text):
        if len(written) == 3:
            raise KeyboardInterrupt("killed while writing")
        written.append(Path(path).name)
        return real(path, text)

    monkeypatch.setattr(jsonio, "write_text", dies_on_the_fourth_file)
    with pytest.raises(KeyboardInterrupt):
        run(cfg, model=ScriptedModel(respond), embedder=bow_embedder, task=TASK,
            show_progress=False)
    monkeypatch.setattr(jsonio, "write_text", real)
    assert not (cfg.out / "run_status.json").exists()
    assert not list(cfg.out.glob(".*.tmp"))  # no half-written file left behind
    for name in ("scores.jsonl", "samples.jsonl"):  # every file is whole, old or new
        for line in (cfg.out / name).read_text().splitlines():
            json.loads(line)

    assert main(["report", str(cfg.out), "--resamples", "20", "--embedder", "none"]) == 0
    page = (cfg.out / "report.html").read_text()
    assert "Interrupted run" in page

    model = ScriptedModel(respond)
    again = run(cfg, model=model, embedder=bow_embedder, task=TASK, show_progress=False)
    assert model.samples == 0
    assert _files(cfg.out) == complete
    assert [r.scores for r in again.items] == [r.scores for r in first.items]
    assert json.loads((cfg.out / "run_status.json").read_text())["status"] == "complete"
    assert "Interrupted run" not in (cfg.out / "report.html").read_text()

"""Every output location of every command is checked before the first model or server call
(issue 34 item 7): an unwritable run folder, ``--out`` file or folder, cache (and the
probes.json beside it), ``--json``, ``--write-config`` or adaptive output is exit 2 and
one line naming the option and the path, with no request sent (a cache in an unwritable
place was a traceback after 9 server calls: the server's probe ran first). A missing
folder above an output file is created (``credo certify --out dir/cert.json`` was a
FileNotFoundError traceback)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import BagOfWordsEmbedder, sums_task_file
from credo import RunConfig, run
from credo.cli import main
from credo.models.scripted import ScriptedModel
from fault_server import FaultServer
from test_runner import TASK, respond

SERVED = {"retry_backoff": 0.001, "max_retries": 1}


@pytest.fixture
def unwritable(tmp_path) -> Path:
    """A folder in which nothing can be created: read-only for a user; for root (whom
    permissions do not stop) a path under /sys, where the kernel refuses every mkdir."""
    if os.geteuid() != 0:
        folder = tmp_path / "read-only"
        folder.mkdir()
        folder.chmod(0o555)
        return folder
    folder = Path(f"/sys/credo-unwritable-{os.getpid()}")
    try:
        folder.mkdir()
    except OSError:
        return folder
    folder.rmdir()
    pytest.skip("no folder refuses root's writes on this machine")


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A finished, labelled run folder with kept perturbations and its cache."""
    tmp = tmp_path_factory.mktemp("finished")
    cfg = RunConfig(task="toy", n=8, m=4, limit=None, bootstrap=0,
                    methods=["c3", "self_consistency"], out=tmp / "run",
                    cache=tmp / "cache.sqlite")
    run(cfg, model=ScriptedModel(respond), embedder=BagOfWordsEmbedder(), task=TASK,
        show_progress=False)
    return tmp / "run"


@pytest.fixture
def no_model(monkeypatch):
    """Fail the test if a model or an embedder is loaded or a backend called."""
    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded or called before the output check")

    monkeypatch.setattr("credo.models.registry.load_model", refuse)
    monkeypatch.setattr("credo.models.embedders.load_embedder", refuse)
    monkeypatch.setattr("credo.generation.executor.Executor.execute", refuse)


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def _run(tmp: Path, url: str, out: Path, cache: Path) -> list[str]:
    return ["run", "--task", f"file:gsm8k:{sums_task_file(tmp, 3)}", "--model", "openai:toy",
            "--base-url", url, "--n", "2", "--methods", "self_consistency",
            "--out", str(out), "--cache", str(cache), "--quiet"]


def _score(tmp: Path, out: Path, cache: Path) -> list[str]:
    rows = [{"item": "a", "set": "original", "answer": "18", "correct": True},
            {"item": "a", "set": "original", "answer": "17", "correct": False}]
    samples = _write(tmp / "mine.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    return ["score", str(samples), "--methods", "self_consistency", "--bootstrap", "0",
            "--out", str(out), "--cache", str(cache), "--quiet"]


def _study(tmp: Path, url: str, out: Path, cache: Path) -> list[str]:
    study = _write(tmp / "study.yaml", json.dumps({
        "tasks": [f"file:gsm8k:{sums_task_file(tmp, 3)}"],
        "models": [{"model": "openai:toy", "model_options": {"base_url": url, **SERVED}}],
        "run": {"n": 2, "methods": ["self_consistency"], "bootstrap": 0}}))
    return ["study", "--config", str(study), "--out", str(out), "--cache", str(cache),
            "--quiet"]


def _strength(tmp: Path, out: Path, cache: Path) -> list[str]:
    return ["strength", "run", "--task", "mmlu:high_school_statistics", "--limit", "2",
            "--model", "smollm2-135m", "--surprisal-model", "none", "--out", str(out),
            "--cache", str(cache), "--quiet"]


def _agree(tmp: Path, write_json: Path, cache: Path) -> list[str]:
    row = {"perturbation_type": "input", "question": "1 + 1?", "cot": "1 + 1 = 2.",
           "text_before": "Cats purr.", "text_after": "Dogs bark.", "label": 1}
    labels = _write(tmp / "labels.jsonl", json.dumps(row) + "\n")
    return ["strength", "agree", "--labels", str(labels), "--measure", "cosine",
            "--json", str(write_json), "--cache", str(cache), "--quiet"]


def _copy(finished: Path, tmp: Path) -> Path:
    target = tmp / "copy" / "run"
    shutil.copytree(finished, target)
    return target


def _topic_check(tmp: Path, url: str, run_dir: Path, cache: Path) -> list[str]:
    return ["perturb", "topic-check", str(run_dir), "--judge", "openai:toy", "--base-url",
            url, "--expected", "arithmetic", "--cache", str(cache), "--quiet"]


def _threshold(tmp: Path, url: str, out: Path, cache: Path) -> list[str]:
    premises = _write(tmp / "premises.txt", "Cats purr.\nDogs bark.\n")
    return ["perturb", "calibrate-threshold", "--model", "openai:toy", "--base-url", url,
            "--premises", str(premises), "--n-premises", "2", "--paraphrases", "2",
            "--out", str(out), "--cache", str(cache), "--quiet"]


def _prompt(tmp: Path, url: str, write_config: Path, cache: Path) -> list[str]:
    config = _write(tmp / "run.yaml", json.dumps({
        "task": f"file:gsm8k:{sums_task_file(tmp, 6)}", "model": "openai:toy", "limit": 2,
        "n": 2, "m": 2, "model_options": {"base_url": url, **SERVED},
        "cache": str(cache)}))
    return ["perturb", "calibrate-prompt", "--config", str(config), "--items", "2",
            "--write-config", str(write_config), "--quiet"]


Case = Callable[[Path, str, Path, Path], tuple[list[str], str, str]]
"""(tmp, server url, the unwritable folder, a finished run) -> (arguments, the option the
line names, the path it names)."""

CASES: dict[str, Case] = {
    "run --cache": lambda t, u, bad, f: (
        _run(t, u, t / "run", bad / "sub" / "c.sqlite"), "--cache", str(bad)),
    "run --out": lambda t, u, bad, f: (
        _run(t, u, bad / "run", t / "c.sqlite"), "out", str(bad)),
    "score --out": lambda t, u, bad, f: (
        _score(t, bad / "o", t / "c.sqlite"), "out", str(bad)),
    "score --cache": lambda t, u, bad, f: (
        _score(t, t / "o", bad / "c.sqlite"), "--cache", str(bad)),
    "study --cache": lambda t, u, bad, f: (
        _study(t, u, t / "study", bad / "c.sqlite"), "--cache", str(bad)),
    "study --out": lambda t, u, bad, f: (
        _study(t, u, bad / "study", t / "c.sqlite"), "out", str(bad)),
    "strength run --cache": lambda t, u, bad, f: (
        _strength(t, t / "s", bad / "c.sqlite"), "--cache", str(bad)),
    "strength run --out": lambda t, u, bad, f: (
        _strength(t, bad / "s", t / "c.sqlite"), "out", str(bad)),
    "strength agree --json": lambda t, u, bad, f: (
        _agree(t, bad / "agree.json", t / "c.sqlite"), "--json", str(bad)),
    "strength agree --cache": lambda t, u, bad, f: (
        _agree(t, t / "agree.json", bad / "c.sqlite"), "--cache", str(bad)),
    "topic-check RUN_DIR": lambda t, u, bad, f: _topic_check_blocked(t, u, f),
    "topic-check --cache": lambda t, u, bad, f: (
        _topic_check(t, u, _copy(f, t), bad / "c.sqlite"), "--cache", str(bad)),
    "calibrate-threshold --out": lambda t, u, bad, f: (
        _threshold(t, u, bad / "k.json", t / "c.sqlite"), "--out", str(bad)),
    "calibrate-threshold --cache": lambda t, u, bad, f: (
        _threshold(t, u, t / "k.json", bad / "c.sqlite"), "--cache", str(bad)),
    "calibrate-prompt --write-config": lambda t, u, bad, f: (
        _prompt(t, u, bad / "chosen.yaml", t / "c.sqlite"), "--write-config", str(bad)),
    "calibrate-prompt cache": lambda t, u, bad, f: (
        _prompt(t, u, t / "chosen.yaml", bad / "c.sqlite"), "cache", str(bad)),
    "probe --cache": lambda t, u, bad, f: (
        ["probe", "--model", "openai:toy", "--base-url", u, "--cache",
         str(bad / "c.sqlite")], "--cache", str(bad)),
    "certify --out": lambda t, u, bad, f: (
        ["certify", str(f), "--method", "self_consistency", "--out", str(bad / "cert.json")],
        "--out", str(bad)),
    "adaptive --out": lambda t, u, bad, f: (
        ["adaptive", str(f), "--bootstrap", "10", "--out", str(bad / "a")], "--out",
        str(bad)),
    "report --out": lambda t, u, bad, f: (
        ["report", str(f), "--out", str(bad / "r"), "--embedder", "none"], "--out", str(bad)),
    "report RUN_DIR": lambda t, u, bad, f: _report_blocked(t, f),
}


def _topic_check_blocked(tmp: Path, url: str, finished: Path) -> tuple[list[str], str, str]:
    """The run folder cannot take topic_check.json: a folder of that name is in the way
    (what stops root too)."""
    run_dir = _copy(finished, tmp)
    (run_dir / "topic_check.json").mkdir()
    return (_topic_check(tmp, url, run_dir, tmp / "c.sqlite"), "RUN_DIR",
            str(run_dir / "topic_check.json"))


def _report_blocked(tmp: Path, finished: Path) -> tuple[list[str], str, str]:
    run_dir = _copy(finished, tmp)
    (run_dir / "report.html").unlink()
    (run_dir / "report.html").mkdir()
    return (["report", str(run_dir), "--embedder", "none"], "RUN_DIR",
            str(run_dir / "report.html"))


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_unwritable_output_is_one_line_before_any_call(case, tmp_path, unwritable, finished,
                                                          no_model, capsys):
    with FaultServer() as server:
        args, option, named = CASES[case](tmp_path, server.url, unwritable, finished)
        code = main(args)
        reached = (server.requests, server.model_listings)
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, out + err
    assert reached == (0, 0), err
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    assert "Traceback" not in out + err
    assert option in lines[0] and named in lines[0], lines[0]


def test_certify_makes_the_folder_of_its_out_file(tmp_path, finished, capsys):
    cert = tmp_path / "new" / "deeper" / "cert.json"
    assert main(["certify", str(finished), "--method", "self_consistency",
                 "--out", str(cert)]) == 0
    assert json.loads(cert.read_text())["settings"]["method"] == "self_consistency"
    assert f"certificate: {cert}" in capsys.readouterr().out


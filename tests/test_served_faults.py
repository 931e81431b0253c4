"""A served model that misbehaves (issue 12, "Done when"): runs through a fault-injecting
OpenAI-compatible server on 127.0.0.1 end as a clean run does, a server that goes away
mid-run costs only the requests it did not answer (exit 3, resumable), an unreachable
server is a one-line user error, and no credential reaches a file or a log."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from conftest import context_writer, sums_task_file
from credo import RunConfig, run
from credo.cli import main
from credo.models.scripted import ScriptedModel
from fault_server import FaultServer

FAULTS = {"malformed_json": 0.05, "null_content": 0.05, "fewer_choices": 0.05,
          "truncated_body": 0.05, "http_429": 0.05, "http_500": 0.05}
FAST = {"retry_backoff": 0.001, "max_retries": 8, "max_concurrency": 4, "probe": False}
# no probe: its requests would draw faults the run's retry count does not see
# (tests/test_served.py probes)


def _c3_run(tmp: Path, url: str, name: str, bow_embedder):
    cfg = RunConfig(task=f"file:gsm8k:{sums_task_file(tmp, 12)}", model="openai:toy", n=4, m=3,
                    limit=None, bootstrap=0, methods=["c3", "c3_cross", "self_consistency"],
                    model_options={"base_url": url, **FAST}, max_block=2,
                    out=tmp / name / "run", cache=tmp / name / "cache.sqlite")
    return run(cfg, writer=ScriptedModel(context_writer), embedder=bow_embedder,
               show_progress=False)


def test_faults_of_every_kind_end_as_a_clean_run(tmp_path, bow_embedder):
    with FaultServer() as clean:
        port = clean.port
        want = _c3_run(tmp_path, clean.url, "clean", bow_embedder)
    with FaultServer(FAULTS, fault_seed=1, port=port) as faulty:
        got = _c3_run(tmp_path, faulty.url, "faulty", bow_embedder)
        injected = sum(faulty.faults.values())
    assert injected > 0 and set(faulty.faults) >= {"malformed_json", "null_content", "http_429"}
    assert [r.scores for r in got.items] == [r.scores for r in want.items]
    assert [[s.text for s in r.original] for r in got.items] == [
        [s.text for s in r.original] for r in want.items
    ]
    assert got.stats["request_retries"] >= injected - faulty.faults.get("fewer_choices", 0) > 0
    assert got.stats["request_failures"] == 0 and not got.incomplete
    assert got.stats["generated_samples"] == want.stats["generated_samples"]
    report = (tmp_path / "faulty" / "run" / "report.md").read_text()
    assert "request retries" in report


def _cli_args(tmp: Path, url: str) -> list[str]:
    opts = tmp / "served.yaml"
    opts.write_text(
        "model: openai:toy\nmethods: [self_consistency]\nn: 4\nbootstrap: 0\nmax_block: 1\n"
        "model_options: {retry_backoff: 0.001, max_retries: 2, max_concurrency: 1}\n")
    return ["run", "--config", str(opts), "--task", f"file:gsm8k:{sums_task_file(tmp, 12)}",
            "--base-url", url, "--out", str(tmp / "run"), "--cache", str(tmp / "c.sqlite"),
            "--quiet"]


def test_a_server_stopped_mid_run_gives_exit_3_and_a_rerun_completes(tmp_path, capsys):
    with FaultServer() as server:
        args = _cli_args(tmp_path, server.url)
        outcome: list[int] = []
        thread = threading.Thread(target=lambda: outcome.append(main(args)), daemon=True)
        thread.start()
        deadline = time.monotonic() + 60
        while server.served < 12:
            assert time.monotonic() < deadline and thread.is_alive(), "the run never started"
            time.sleep(0.01)
        server.stop()
        thread.join(timeout=120)
        assert not thread.is_alive() and outcome == [3]
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "requests failed" in err[0] and "rerun" in err[0]
        status = json.loads((tmp_path / "run" / "run_status.json").read_text())
        metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
        assert status["status"] == "incomplete" and status["items_incomplete"] > 0
        assert metrics["stats"]["request_failures"] > 0 and metrics["incomplete"]
        assert status["items"] + status["items_incomplete"] == 12

        server.start()
        served_before = server.served
        assert main(args) == 0
        metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
        assert metrics["items"] == 12 and "incomplete" not in metrics
        # only what was missing was asked again
        assert server.served - served_before == metrics["stats"]["backend_calls"] < 48


def test_an_unreachable_server_is_a_user_error_naming_it(tmp_path, capsys):
    with FaultServer() as server:
        url = server.url
    # closed now: nothing listens on that port
    assert main(_cli_args(tmp_path, url)) == 2
    err = capsys.readouterr().err
    assert url in err and "cannot reach" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) <= 2


def _scan(root: Path, secrets: list[str]) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            found += [f"{path}: {s}" for s in secrets if s.encode() in data]
    return found


@pytest.mark.parametrize("how", ["environment", "url"])
def test_no_planted_credential_reaches_a_file_or_a_log(tmp_path, monkeypatch, capfd, how):
    key = "sk-PLANTED-9f3e1c"
    if how == "environment":
        monkeypatch.setenv("CREDO_TEST_KEY", key)
        auth = f"Bearer {key}"
    else:
        import base64

        auth = "Basic " + base64.b64encode(f"alice:{key}".encode()).decode()
    with FaultServer(require_authorization=auth) as server:
        url = server.url
        if how == "url":
            url = url.replace("http://", f"http://alice:{key}@")
        args = _cli_args(tmp_path, url)
        if how == "environment":
            args += ["--config", str(_with_key_env(tmp_path))]
        assert main(["-v", *args]) == 0
        assert server.authorizations and set(server.authorizations) == {auth}
    out, err = capfd.readouterr()
    assert key not in out + err
    assert _scan(tmp_path / "run", [key]) == []
    assert _scan(tmp_path, [key]) == []  # the cache, the config written, everything


def _with_key_env(tmp: Path) -> Path:
    cfg = tmp / "served.yaml"
    text = cfg.read_text().replace("max_concurrency: 1}", "max_concurrency: 1, "
                                   "api_key_env: CREDO_TEST_KEY}")
    cfg.write_text(text)
    return cfg


def test_a_literal_key_in_a_config_is_refused(tmp_path, capsys):
    cfg = tmp_path / "k.yaml"
    cfg.write_text("model: openai:toy\nmodel_options: {api_key: sk-LITERAL-123,"
                   " base_url: 'http://127.0.0.1:9/v1'}\n")
    assert main(["run", "--config", str(cfg), "--out", str(tmp_path / "o"), "--task", "gsm8k",
                 "--limit", "2", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "api_key_env" in err and "sk-LITERAL-123" not in err
    assert not (tmp_path / "o" / "config.yaml").exists()

"""Under ``--quiet`` a failing run says one line: a server failing every request, its
start-up probe included, ends within 30 s (the circuit breaker's window, default 10 s,
plus the probe's first attempts) with the probe's warning folded into the run's line; a
warning of a run that finishes is one plain line, not a wrapped, timestamped block.

The server is the tests' loopback fault server, with credo's default retry settings."""

from __future__ import annotations

import re
import time
from pathlib import Path

from conftest import sums_task_file
from credo.cli import main
from fault_server import FaultServer


def _run(tmp: Path, url: str, *extra: str) -> list[str]:
    return ["run", "--task", f"file:gsm8k:{sums_task_file(tmp, 3)}", "--model", "openai:toy",
            "--base-url", url, "--n", "2", "--methods", "self_consistency", "--bootstrap",
            "0", "--out", str(tmp / "run"), "--cache", str(tmp / "c.sqlite"), *extra]


def _lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


def test_a_server_failing_every_request_is_one_quiet_line_within_30_s(tmp_path, capsys):
    """It printed a five-line wrapped warning about the probe before its one line, and
    "N requests failed after R retries" counted the whole run's retries."""
    with FaultServer({"http_500": 1.0}) as server:
        start = time.monotonic()
        code = main(_run(tmp_path, server.url, "--quiet"))
        took = time.monotonic() - start
        assert server.requests > 0
    out, err = capsys.readouterr()
    assert code == 3 and took < 30.0, (code, took)
    assert _lines(out) == []
    (line,) = _lines(err)
    assert line.startswith("3 requests failed after the backend's retries (3 items incomplete")
    assert "rerun to retry them" in line
    assert "the probe of the server did not finish" in line and "HTTP 500" in line
    assert not re.search(r"failed after \d+ retries", line)
    assert "WARNING" not in err


def test_a_warning_under_quiet_is_one_plain_line(tmp_path, capsys):
    with FaultServer(logprobs=False) as server:
        code = main(_run(tmp_path, server.url, "--quiet"))
    out, err = capsys.readouterr()
    assert code == 0
    assert "report:" in out
    (line,) = _lines(err)
    assert line == ("warning: openai:toy: the server returns no logprobs: methods that need "
                    "them are not available")


def test_without_quiet_the_warning_shows_as_it_happens(tmp_path, capsys):
    """Only --quiet holds warnings back; a plain run logs them as before."""
    with FaultServer(logprobs=False) as server:
        assert main(_run(tmp_path, server.url)) == 0
    err = capsys.readouterr().err
    assert "WARNING" in err and "returns no logprobs" in " ".join(err.split())

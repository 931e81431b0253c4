"""``--quiet`` keeps an unfinished run to its one line (issue 34 item 8): a run whose
requests failed (exit 3) printed its whole, empty, results table on stdout under
``--quiet`` before the line on stderr that says what happened; without ``--quiet`` the
tables stay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import sums_task_file
from credo.cli import main
from fault_server import FaultServer


def _args(tmp: Path, url: str, *extra: str) -> list[str]:
    opts = tmp / "served.yaml"
    opts.write_text(
        "model: openai:toy\nmethods: [self_consistency]\nn: 2\nbootstrap: 0\n"
        "model_options: {retry_backoff: 0.001, max_retries: 1, max_concurrency: 2, "
        "probe: false}\n")
    return ["run", "--config", str(opts), "--task", f"file:gsm8k:{sums_task_file(tmp, 3)}",
            "--base-url", url, "--out", str(tmp / "run"), "--cache", str(tmp / "c.sqlite"),
            *extra]


@pytest.mark.parametrize("quiet", [True, False])
def test_a_failed_run_under_quiet_is_one_line(quiet, tmp_path, capsys):
    with FaultServer({"http_500": 1.0}) as server:
        code = main(_args(tmp_path, server.url, *(["--quiet"] if quiet else [])))
        assert server.requests > 0
    out, err = capsys.readouterr()
    assert code == 3, out + err
    status = json.loads((tmp_path / "run" / "run_status.json").read_text())
    assert status["status"] == "incomplete"  # the folder is written all the same
    lines = [ln for ln in (out + err).splitlines() if ln.strip()]
    said = [ln for ln in err.splitlines() if ln.strip()]
    assert len(said) == 1 and "requests failed" in said[0] and "rerun" in said[0], err
    if quiet:
        assert lines == said, out + err
    else:
        assert "method" in out and "report:" in out  # the tables and the folder

"""``run_status.json`` is the last file of a run folder (issue 34 item 10): a run killed
during its final write left the status saying complete while the Parquet exports and
report.html were missing. The status is written after every other file of the folder
(data, report.md, answers.jsonl, report.html, the Parquet exports) and lists them; a
writer that fails at any step leaves no status saying complete; ``credo report`` on a
folder whose status says complete but lacks one of its files says so."""

from __future__ import annotations

import json
import pathlib
from pathlib import Path

import pytest

import credo.jsonio as jsonio
from credo import run
from credo.cli import main
from credo.models.scripted import ScriptedModel
from test_certificates_run import _answerer, _config, _task

STATUS = "run_status.json"
FILES = ("config.yaml", "scores.jsonl", "samples.jsonl", "perturbations.jsonl",
         "metrics.json", "report.md", "answers.jsonl", "report.html", "scores.parquet",
         "samples.parquet")
"""Every file a run with a certificate writes into its folder, the status aside."""


@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> Path:
    """A certificate made on a labelled run (the answers.jsonl of later runs)."""
    tmp = tmp_path_factory.mktemp("cert")
    run(_config(tmp, "calib"), model=ScriptedModel(_answerer), task=_task(40, gold=True),
        show_progress=False)
    assert main(["certify", str(tmp / "calib"), "--method", "self_consistency",
                 "--alpha", "0.3", "--out", str(tmp / "cert.json")]) == 0
    return tmp / "cert.json"


def _run(tmp: Path, certificate: Path):
    return run(_config(tmp, "run"), model=ScriptedModel(_answerer), task=_task(12, gold=True),
               show_progress=False, certificate=certificate)


def _watch(monkeypatch, fail: str | None = None) -> list[str]:
    """Record the name of every file written (credo's atomic writer, pathlib's, pyarrow's
    Parquet writer), in order; writing ``fail`` raises as a full disk would."""
    import pyarrow.parquet as pq

    written: list[str] = []

    def wrap(real, name_of):
        def writer(*args, **kwargs):
            name = Path(name_of(*args, **kwargs)).name
            if name.startswith(".") and name.endswith(".tmp"):  # an atomic write's
                name = name[1:].rsplit(".", 2)[0]
            if name == fail:
                raise OSError(28, "No space left on device")
            written.append(name)
            return real(*args, **kwargs)
        return writer

    monkeypatch.setattr(jsonio, "write_text", wrap(jsonio.write_text, lambda p, *a, **k: p))
    monkeypatch.setattr(pathlib.Path, "write_text",
                        wrap(pathlib.Path.write_text, lambda self, *a, **k: self))
    monkeypatch.setattr(pq, "write_table", wrap(pq.write_table, lambda t, where, *a, **k: where))
    return written


def test_the_status_is_written_last_and_lists_every_file(tmp_path, certificate, monkeypatch):
    written = _watch(monkeypatch)
    _run(tmp_path, certificate)
    folder = tmp_path / "run"
    present = sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))
    assert sorted(FILES) == sorted(set(present) - {STATUS})
    assert written[-1] == STATUS and written.count(STATUS) == 1
    assert set(FILES) <= set(written)  # every file was seen written, before the status
    status = json.loads((folder / STATUS).read_text())
    assert status["status"] == "complete" and sorted(status["files"]) == sorted(FILES)
    # the page shows the run's status, though it was written before the marker
    assert "Interrupted run" not in (folder / "report.html").read_text()


@pytest.mark.parametrize("fail", FILES)
def test_a_write_that_fails_leaves_no_complete_status(fail, tmp_path, certificate,
                                                      monkeypatch, capsys):
    _run(tmp_path, certificate)  # a previous, complete run in the same folder
    folder = tmp_path / "run"
    assert json.loads((folder / STATUS).read_text())["status"] == "complete"
    _watch(monkeypatch, fail=fail)
    try:
        _run(tmp_path, certificate)
    except OSError:
        pass  # a data file: the run says so; the exports: logged, the run returns
    monkeypatch.undo()
    status = folder / STATUS
    assert not status.exists() or json.loads(status.read_text())["status"] != "complete"
    capsys.readouterr()
    assert main(["report", str(folder), "--resamples", "20", "--embedder", "none"]) in (0, 2)
    err = capsys.readouterr().err
    assert "incomplete" in err or "error:" in err, err


@pytest.mark.parametrize("lost", [["scores.parquet", "report.html"], ["answers.jsonl"]])
def test_report_says_a_complete_folder_lacks_its_files(lost, tmp_path, certificate, capsys):
    _run(tmp_path, certificate)
    folder = tmp_path / "run"
    for name in lost:
        (folder / name).unlink()
    capsys.readouterr()
    assert main(["report", str(folder), "--resamples", "20", "--embedder", "none"]) == 0
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and err[0].startswith(f"warning: {folder}"), err
    assert all(name in err[0] for name in lost), err
    regenerated = {"scores.parquet", "report.html"}
    if set(lost) <= regenerated:  # credo report writes those again
        assert all((folder / name).exists() for name in lost) and "rerun" not in err[0]
    else:
        assert "rerun" in err[0]

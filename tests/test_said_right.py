"""Results say the right thing: what a run or a replay prints and reports matches what it
did (the point estimates without a bootstrap, m as drawn)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from conftest import BagOfWordsEmbedder
from credo import RunConfig, run
from credo.cli import main
from credo.cli.run import print_result
from credo.evaluate.paired import paired_bootstrap
from credo.models.scripted import ScriptedModel
from test_adaptive_files import _pool
from test_runner import TASK, respond

# --------------------------------------------------------------------------- no bootstrap


def test_paired_bootstrap_without_resamples_gives_the_point_estimates():
    rng = np.random.default_rng(3)
    a, b, p = rng.random(40), rng.random(40), rng.random(40)
    found = paired_bootstrap(a, b, p, metrics=("auroc", "ece"), n_resamples=0)
    y = p >= 0.5
    assert found["auroc"].delta == pytest.approx(roc_auc_score(y, a) - roc_auc_score(y, b))
    assert found["ece"].delta == paired_bootstrap(a, b, p, n_resamples=50)["ece"].delta
    assert np.isnan(found["auroc"].low) and found["auroc"].n_valid == 0


def test_adaptive_without_bootstrap_shows_the_point_estimates(tmp_path, capsys):
    """``credo adaptive --bootstrap 0`` showed n/a for ΔAUROC, ΔECE and ΔPRR."""
    path = _pool(tmp_path / "gen.jsonl", items=20, per_item=12)
    args = ["adaptive", str(path), "--format", "number", "--rule", "consensus", "--method",
            "self_consistency"]
    assert main([*args, "--bootstrap", "0", "--out", str(tmp_path / "none")]) == 0
    assert main([*args, "--bootstrap", "30", "--out", str(tmp_path / "some")]) == 0
    table = capsys.readouterr().out
    bare, boot = (json.loads((tmp_path / d / "adaptive.json").read_text())["points"][0]
                  for d in ("none", "some"))
    for metric in ("auroc", "ece", "prr"):
        got = bare["deltas"]["self_consistency"][metric]
        assert got["delta"] == pytest.approx(boot["deltas"]["self_consistency"][metric]["delta"])
        assert got["low"] is None and got["n_valid"] == 0
    row = next(ln for ln in table.splitlines() if ln.startswith("| consensus") and "no CI" in ln)
    assert re.search(r"\| [+-]\d\.\d{3} \[no CI\] \|", row) and "n/a [" not in row


# --------------------------------------------------------------------------- m as drawn


@pytest.fixture(scope="module")
def originals_only(tmp_path_factory):
    """A run whose only method reads original samples, with m = 30 in its config."""
    tmp = tmp_path_factory.mktemp("originals")
    cfg = RunConfig(task="toy", n=4, m=30, limit=None, bootstrap=0,
                    methods=["self_consistency"], out=tmp / "run", cache=tmp / "c.sqlite")
    result = run(cfg, model=ScriptedModel(respond), embedder=BagOfWordsEmbedder(), task=TASK,
                 show_progress=False)
    return result


def test_m_is_shown_as_drawn_in_the_header_and_every_report(originals_only, tmp_path,
                                                              capsys):
    """The header and report said m=30 for a run that drew no perturbed sample."""
    result = originals_only
    assert all(not r.perturbed for r in result.items)
    print_result(result)
    header = " ".join(capsys.readouterr().out.split())
    assert "n=4 m=0 ·" in header and "m=30" not in header
    md = (result.config.out / "report.md").read_text()
    assert "m = 0 perturbed (config m = 30)" in md and "m = 30 perturbed" not in md
    html = (result.config.out / "report.html").read_text()
    assert "m = 0 perturbed (config m = 30)" in html
    assert main(["report", str(result.config.out), "--out", str(tmp_path / "cmp"),
                 "--embedder", "none", "--resamples", "10"]) == 0
    page = (tmp_path / "cmp" / "index.html").read_text()
    assert "m = 0 perturbed (config m = 30)" in page


def test_m_drawn_is_the_most_perturbed_samples_of_an_item(tmp_path):
    from credo.report.rundata import load_run

    cfg = RunConfig(task="toy", n=3, m=3, limit=None, bootstrap=0, methods=["c3"],
                    out=tmp_path / "run", cache=tmp_path / "c.sqlite")
    result = run(cfg, model=ScriptedModel(respond), embedder=BagOfWordsEmbedder(),
                 task=TASK, show_progress=False)
    drawn = max(len(r.perturbed) for r in result.items)
    assert drawn == 3 and load_run(cfg.out).m_drawn == drawn
    assert "m = 3 perturbed (one per" in (cfg.out / "report.md").read_text()


# --------------------------------------------------------------------------- incomplete folders


def _cancelled_log(tmp_path, items: int = 30, epochs: int = 3):
    """An inspect_ai .json log of an eval cancelled while it ran: each sample's epochs
    scored C or I, the last item's last epoch cancelled (inspect's cancellation error)."""
    samples = []
    for i in range(items):
        for e in range(1, epochs + 1):
            sample = {"id": f"q{i}", "epoch": e, "input": f"{i} + 1?", "target": str(i + 1),
                      "output": {"completion": str(i + 1 if (i + e) % 4 else i)},
                      "scores": {"match": {"value": "C" if (i + e) % 4 else "I",
                                           "answer": str(i + 1 if (i + e) % 4 else i)}}}
            if i == items - 1 and e == epochs:
                sample = {"id": f"q{i}", "epoch": e, "error": {
                    "message": "CancelledError('cancelled by the user')"}}
            samples.append(sample)
    path = tmp_path / "log.json"
    path.write_text(json.dumps({"status": "cancelled", "eval": {
        "task": "sums", "model": "m", "config": {"epochs": epochs}}, "samples": samples}))
    return path


def test_certify_refuses_an_incomplete_folder_unless_allowed(tmp_path, capsys):
    """certify accepted the score folder of a cancelled inspect log without a word."""
    log = _cancelled_log(tmp_path)
    folder = tmp_path / "scored"
    assert main(["score", str(log), "--methods", "self_consistency", "--bootstrap", "0",
                 "--out", str(folder), "--quiet"]) == 3
    assert json.loads((folder / "run_status.json").read_text())["status"] == "incomplete"
    capsys.readouterr()
    cert = tmp_path / "cert.json"
    args = ["certify", str(folder), "--method", "self_consistency", "--alpha", "0.3",
            "--out", str(cert)]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--allow-incomplete" in err
    assert "incomplete run folder (1 items left out" in err and not cert.exists()
    assert main([*args, "--allow-incomplete"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "calibrated on an incomplete folder (--allow-incomplete: 1 items left out)" in out
    written = json.loads(cert.read_text())
    assert written["incomplete"] == {"status": "incomplete", "items_incomplete": 1}
    from credo.pipeline.certificate import RunCertificate

    assert RunCertificate.read(cert).incomplete == written["incomplete"]


def test_certify_refuses_a_folder_whose_writer_did_not_finish(originals_only, tmp_path,
                                                              capsys):
    folder = tmp_path / "cut"
    import shutil

    shutil.copytree(originals_only.config.out, folder)
    (folder / "run_status.json").unlink()
    assert main(["certify", str(folder), "--method", "self_consistency"]) == 2
    err = capsys.readouterr().err
    assert "interrupted run folder (no run_status.json" in err and "--allow-incomplete" in err
    assert main(["certify", str(folder), "--method", "self_consistency",
                 "--allow-incomplete"]) == 0
    assert json.loads((folder / "certificate.json").read_text())["incomplete"] == {
        "status": "interrupted", "items_incomplete": None}


# --------------------------------------------------------------------------- --certificate


def test_a_certificate_applied_is_named_with_its_level_and_the_answers_it_accepted(
        tmp_path, capsys):
    """score --certificate wrote accept flags, but neither the console nor report.md named
    the certificate or how many answers it accepted."""
    from credo.pipeline.certificate import RunCertificate
    from credo.serve.guard import certificate_id

    calibration = _pool(tmp_path / "cal.jsonl", items=150, per_item=10, seed=1)
    new = _pool(tmp_path / "new.jsonl", items=25, per_item=10, seed=2)
    common = ["--format", "number", "--methods", "self_consistency", "--bootstrap", "0",
              "--quiet"]
    assert main(["score", str(calibration), *common, "--out", str(tmp_path / "cal")]) == 0
    assert main(["certify", str(tmp_path / "cal"), "--method", "self_consistency",
                 "--alpha", "0.3", "--delta", "0.2", "--out", str(tmp_path / "c.json")]) == 0
    cert = RunCertificate.read(tmp_path / "c.json")
    assert cert.certificate.threshold is not None
    assert cert.id == certificate_id(cert)  # the id the gateway logs
    capsys.readouterr()
    assert main(["score", str(new), *common, "--out", str(tmp_path / "new"),
                 "--certificate", str(tmp_path / "c.json")]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    rows = [json.loads(x) for x in (tmp_path / "new" / "answers.jsonl").read_text().splitlines()]
    taken = sum(r["accept"] for r in rows)
    assert 0 < taken < len(rows) == 25
    line = (f"certificate {cert.id}: self_consistency >= {cert.certificate.threshold:.4g} at "
            f"alpha=0.3, delta=0.2 (ltt): {taken} of 25 answers accepted (answers.jsonl)")
    assert line in printed
    assert line in (tmp_path / "new" / "report.md").read_text()
    metrics = json.loads((tmp_path / "new" / "metrics.json").read_text())
    assert metrics["certificate"] == {
        "id": cert.id, "method": "self_consistency", "threshold": cert.certificate.threshold,
        "alpha": 0.3, "delta": 0.2, "procedure": "ltt", "accepted": taken, "items": 25}
    status = json.loads((tmp_path / "new" / "run_status.json").read_text())
    assert "answers.jsonl" in status["files"]  # written before the marker, as a run's

"""A claim certificate made on a run is bound to that run (issue 33): ``credo certify
RUN_DIR --claims`` records the model, task and settings (``claim_settings``), and ``credo
run --certificate`` refuses, before its first model call, a run that differs in any of
them (another task, model, claim method, splitter, n), naming the setting; the same
settings on new questions are accepted. A certificate made on a claim file binds no model
and is refused by a run."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

import credo.app.run
from credo import api
from credo.cli import main
from credo.config import ClaimsConfig, RunConfig
from credo.errors import UserError
from credo.models.scripted import ScriptedModel
from credo.tasks.longform import load_factscore_task
from test_claims_run import _many_bios, many_respond


@pytest.fixture
def calibrated(tmp_path, bow_embedder):
    """A labelled claim run of 12 bios and its frequency certificate at alpha 0.2."""
    cfg = RunConfig(task="factscore", n=3, m=2, limit=None, kernel="embedding", bootstrap=0,
                    methods=["self_consistency"], out=tmp_path / "cal",
                    cache=tmp_path / "cache.sqlite",
                    claims=ClaimsConfig(methods=["frequency", "ordinal"]))
    api.run(cfg, model=ScriptedModel(many_respond), embedder=bow_embedder,
            task=_many_bios(tmp_path, 12), show_progress=False)
    cert_file = tmp_path / "cc.json"
    cert = api.certify_run_claims(cfg.out, "frequency", alpha=0.2, out=cert_file)
    names = tmp_path / "new.txt"
    names.write_text("Person 90\nPerson 91\n", encoding="utf-8")
    return cfg, cert, cert_file, load_factscore_task(names)


def test_the_certificate_records_the_run(calibrated):
    cfg, cert, cert_file, _ = calibrated
    s = cert.settings
    assert s["model"] == "scripted:scripted" and s["method"] == "frequency"
    assert s["task"]["family"] == "factscore" and s["task"]["format"] == "long_form"
    assert (s["n"], s["m"]) == (3, 2)
    assert s["claims"] == {"split": "sentences", "split_max_tokens": 512,
                           "confidence_max_tokens": 8,
                           "support_max_tokens": cfg.judge.max_tokens}
    written = json.loads(cert_file.read_text())
    assert written["settings"] == s and written["score"] == "frequency"


def test_same_settings_on_new_questions_are_accepted(calibrated, tmp_path, bow_embedder):
    cfg, _, cert_file, new = calibrated
    model = ScriptedModel(many_respond)
    result = api.run(cfg.model_copy(update={"out": tmp_path / "new", "claims": None}),
                     model=model, embedder=bow_embedder, task=new, show_progress=False,
                     certificate=cert_file)
    # the certificate turned the claim stage on with its own splitter
    assert result.config.claims.split == "sentences" and model.calls > 0
    rows = (tmp_path / "new" / "answers.jsonl").read_text().splitlines()
    assert len(rows) == 2 and all("retained" in json.loads(r) for r in rows)


def _refused(cfg, certificate, new, bow_embedder, match, model=None, task=None):
    model = model or ScriptedModel(many_respond)
    with pytest.raises(UserError, match=match):
        api.run(cfg, model=model, embedder=bow_embedder, task=task or new,
                show_progress=False, certificate=certificate)
    assert model.calls == 0  # refused before the first model call


@pytest.mark.parametrize(("change", "match"), [
    ({"n": 4}, r"the run's n differs from the certificate's \(4 here, 3 there\)"),
    ({"m": 3}, r"the run's m differs"),
    ({"sampling": {"temperature": 0.7}}, r"the run's sampling.temperature differs"),
    ({"claims": ClaimsConfig(split="model")}, r"the run's claims.split differs "
     r"from the certificate's \('model' here, 'sentences' there\)"),
    ({"claims": ClaimsConfig(confidence_max_tokens=16)},
     r"claims.confidence_max_tokens differs"),
    ({"claims": ClaimsConfig(methods=["ordinal"])}, r"claim score 'frequency'"),
    # the judge gives the support verdicts; it is named in the task's correctness first
    ({"judge": {"model": "scripted:judge"}},
     r"the run's task.correctness differs .*grader model scripted:judge"),
])
def test_other_settings_are_refused(calibrated, tmp_path, bow_embedder, change, match):
    cfg, _, cert_file, new = calibrated
    changed = RunConfig.model_validate({**cfg.model_dump(), "out": tmp_path / "new", **{
        k: v.model_dump() if isinstance(v, ClaimsConfig) else v for k, v in change.items()}})
    _refused(changed, cert_file, new, bow_embedder, match)


def test_other_model_or_task_is_refused(calibrated, tmp_path, bow_embedder):
    cfg, cert, cert_file, new = calibrated
    cfg = cfg.model_copy(update={"out": tmp_path / "new"})
    _refused(cfg, cert_file, new, bow_embedder, r"the run's model differs .*'scripted:other'",
             model=ScriptedModel(many_respond, name="other"))
    _refused(cfg, cert_file, new, bow_embedder, r"the run's task.family differs",
             task=replace(new, family="file:bios"))
    _refused(cfg, cert_file, new, bow_embedder, r"the run's task.domain differs",
             task=replace(new, domain="biographies of painters"))
    # the certificate object itself, not only its file
    _refused(cfg, cert, new, bow_embedder, r"the run's model differs",
             model=ScriptedModel(many_respond, name="other"))


def test_another_claim_method_is_refused(calibrated, tmp_path, bow_embedder):
    """A certificate whose score is changed to another claim method (its threshold was
    calibrated on frequency) no longer matches what it records."""
    cfg, _, cert_file, new = calibrated
    data = json.loads(cert_file.read_text())
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps({**data, "score": "ordinal"}))
    _refused(cfg.model_copy(update={"out": tmp_path / "new"}), edited, new, bow_embedder,
             r"the run's method differs from the certificate's \('ordinal' here, "
             r"'frequency' there\)")
    old = tmp_path / "old.json"
    old.write_text(json.dumps({k: v for k, v in data.items() if k != "settings"}))
    _refused(cfg.model_copy(update={"out": tmp_path / "new"}), old, new, bow_embedder,
             "made on a claim file")


def test_cli_refuses_in_one_line_and_accepts_the_same(calibrated, tmp_path, bow_embedder,
                                                      monkeypatch, capsys):
    cfg, _, cert_file, _ = calibrated
    models: list[ScriptedModel] = []
    real = api.run

    def scripted(*a, **k):
        models.append(ScriptedModel(many_respond))
        return real(*a, **k, model=models[-1], embedder=bow_embedder)

    monkeypatch.setattr(credo.app.run, "run", scripted)  # what the command line calls
    names = tmp_path / "new.txt"
    base = ["run", "--task", f"factscore:{names}", "--limit", "2", "--methods",
            "self_consistency", "--kernel", "embedding", "--m", "2", "--bootstrap", "0",
            "--cache", str(cfg.cache), "--quiet", "--certificate", str(cert_file)]
    capsys.readouterr()
    assert main([*base, "--n", "5", "--out", str(tmp_path / "n5")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "n differs" in err and "Traceback" not in err
    assert models[-1].calls == 0 and not (tmp_path / "n5" / "answers.jsonl").exists()
    assert main([*base, "--n", "3", "--out", str(tmp_path / "n3")]) == 0
    rows = (tmp_path / "n3" / "answers.jsonl").read_text().splitlines()
    assert len(rows) == 2 and all("filtered_answer" in json.loads(r) for r in rows)

"""``credo score``: generations a user already has, scored without a model (issue 15)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

import credo
from credo import RunConfig, run
from credo.cli import main
from credo.config import BaselineConfig
from credo.errors import UserError
from credo.importers import read_generations
from credo.models.scripted import ScriptedModel
from test_baselines import NUM, responder

METHODS = ["c3", "c3_cross", "self_consistency", "answer_consistency", "verbalized",
           "paraphrase"]


@pytest.fixture
def finished_run(tmp_path, bow_embedder):
    cfg = RunConfig(task="toy_num", n=5, m=4, limit=None, bootstrap=200, methods=METHODS,
                    baselines=BaselineConfig(paraphrases=3, logprobs=0),
                    out=tmp_path / "run", cache=tmp_path / "cache.sqlite")
    return run(cfg, model=ScriptedModel(responder), embedder=bow_embedder, task=NUM,
               show_progress=False)


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_score_reproduces_a_finished_runs_scores(finished_run, tmp_path, monkeypatch):
    """The run folder's samples.jsonl, scored again: the same scores and metrics, and no
    model (nothing may even be loaded)."""
    def no_model(*a, **k):
        raise AssertionError("credo score loaded a model")

    monkeypatch.setattr("credo.models.registry.load_model", no_model)
    src = finished_run.config.out
    out = tmp_path / "scored"
    assert main(["score", str(src / "samples.jsonl"), "--format", "number", "--methods",
                 ",".join(METHODS), "--bootstrap", "200", "--out", str(out),
                 "--cache", str(tmp_path / "c2.sqlite"), "--quiet"]) == 0
    want = {r["id"]: r for r in _rows(src / "scores.jsonl")}
    got = {r["id"]: r for r in _rows(out / "scores.jsonl")}
    assert got.keys() == want.keys()
    for item, row in got.items():
        assert row["scores"] == want[item]["scores"]
        assert row["p_bar"] == want[item]["p_bar"]
    m_src = json.loads((src / "metrics.json").read_text())["methods"]
    m_out = json.loads((out / "metrics.json").read_text())["methods"]
    for method in METHODS:
        for key in ("ece", "auroc", "auprc_pos", "ece_low", "ece_high"):
            a, b = m_src[method].get(key), m_out[method].get(key)
            assert (a is None and b is None) or a == pytest.approx(b), (method, key)
    report = (out / "report.md").read_text()
    assert "scored without a model" in report
    assert json.loads((out / "run_status.json").read_text())["status"] == "complete"
    assert main(["report", str(out), "--resamples", "20", "--embedder", "none"]) == 0


@pytest.mark.parametrize("how", ["flag", "yaml"])
def test_score_reports_the_calibrated_metrics_a_run_reports(finished_run, tmp_path,
                                                            bow_embedder, how):
    """Issue 22: ``credo score`` used to drop ``calibrate:``; now its calibrated ECE and
    Brier are those of ``credo run`` with the same setting on the same samples."""
    calibrated = finished_run.config.model_copy(
        update={"calibrate": "isotonic", "out": tmp_path / "calibrated"})
    again = run(calibrated, model=ScriptedModel(responder), embedder=bow_embedder, task=NUM,
                show_progress=False)  # from the cache
    out = tmp_path / "scored"
    args = ["score", str(finished_run.config.out / "samples.jsonl"), "--format", "number",
            "--methods", ",".join(METHODS), "--bootstrap", "200", "--out", str(out),
            "--cache", str(tmp_path / "c2.sqlite"), "--quiet"]
    if how == "flag":
        args += ["--calibrate", "isotonic"]
    else:
        cfg = tmp_path / "score.yaml"
        cfg.write_text("calibrate: isotonic\n", encoding="utf-8")
        args += ["--config", str(cfg)]
    assert main(args) == 0
    got = json.loads((out / "metrics.json").read_text())
    for method in ("c3", "c3_cross", "self_consistency", "paraphrase"):
        for key in ("ece_calibrated", "brier_calibrated"):
            want = again.metrics[method][key]
            assert np.isfinite(want) and got["methods"][method][key] == pytest.approx(want), (
                method, key)
    assert "ece_calibrated" not in finished_run.metrics["c3"]  # none without calibrate


def test_methods_without_their_samples_are_not_available(finished_run, tmp_path):
    result = credo.api.score(finished_run.config.out / "samples.jsonl",
                             RunConfig(methods=["c3", "p_true", "label_prob"], bootstrap=0,
                                       out=tmp_path / "o", cache=tmp_path / "c.sqlite"),
                             answer_format="number", show_progress=False)
    assert "p_true" in result.unavailable and "label_prob" in result.unavailable
    assert "the input has none" in result.unavailable["p_true"]
    assert all(np.isfinite(r.scores["c3"]) for r in result.items)


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_credo_jsonl_by_hand(tmp_path):
    rows = [
        {"item": "a", "set": "original", "answer": "18", "correct": True},
        {"item": "a", "set": "original", "answer": "18", "correct": True},
        {"item": "a", "set": "original", "answer": "20", "correct": False},
        {"item": "a", "set": "perturbed", "answer": "18", "correct": None},
        {"item": "a", "set": "perturbed", "answer": "17", "correct": None},
        {"item": "b", "set": "original", "answer": "x", "correct": False},
        {"item": "b", "set": "original", "answer": None, "correct": False},
        {"item": "b", "set": "perturbed", "answer": "x", "correct": None},
        {"item": "b", "set": "perturbed", "answer": "x", "correct": None},
    ]
    path = _write_jsonl(tmp_path / "mine.jsonl", rows)
    res = credo.api.score(path, RunConfig(methods=["c3", "self_consistency"], bootstrap=0,
                                          out=tmp_path / "o", cache=tmp_path / "c.sqlite"),
                          show_progress=False)
    by = {r.item.id: r for r in res.items}
    assert by["a"].performance == pytest.approx(2 / 3) and by["b"].performance == 0.0
    assert by["a"].scores["c3"] == pytest.approx(credo.c3(["18", "18", "20"], ["18", "17"]))
    assert by["b"].scores["self_consistency"] == pytest.approx(
        credo.self_consistency(["x", None]))


def test_lm_eval_log_samples(tmp_path):
    """lm-evaluation-harness ``--log_samples`` rows with ``repeats: 3``: one row per doc and
    filter; the first filter is read, each generation graded against ``target``."""
    rows = []
    for doc, (answers, target) in enumerate([(["4", "4", "5"], "4"), (["7", "8", "9"], "9")]):
        for flt in ("score-first", "maj@3"):
            rows.append({
                "doc_id": doc, "doc": {"question": f"q{doc}"}, "target": target,
                "arguments": {"gen_args_0": {"arg_0": f"q{doc}"}},
                "resps": [[f"The answer is {a}." for a in answers]],
                "filtered_resps": answers if flt == "score-first" else [answers[0]],
                "filter": flt, "metrics": ["exact_match"], "exact_match": 1.0,
                "doc_hash": "h", "prompt_hash": "p", "target_hash": "t",
            })
    path = _write_jsonl(tmp_path / "samples_gsm8k_2026-01-01T00-00-00.jsonl", rows)
    gens = read_generations(path, recompute=True)
    assert gens.layout == "lm-evaluation-harness"
    assert [s.answer for s in gens.samples] == ["4", "4", "5", "7", "8", "9"]
    # lm-eval logs the metric of the response its filter kept; without the task's config
    # (results_*.json beside it) the others' cannot be had: a user error, unless recomputed
    with pytest.raises(UserError, match=r"results_.*--recompute-correctness"):
        read_generations(path)
    res = credo.api.score(path, RunConfig(methods=["self_consistency"], bootstrap=0,
                                          out=tmp_path / "o", cache=tmp_path / "c.sqlite"),
                          recompute_correctness=True, show_progress=False)
    perf = {r.item.id: r.performance for r in res.items}
    assert perf == {"0": pytest.approx(2 / 3), "1": pytest.approx(1 / 3)}
    assert res.items[0].scores["self_consistency"] == pytest.approx(1 / 3)  # 1 agreeing pair
    assert res.stats["correctness"].startswith("recomputed (--recompute-correctness)")
    loglik = _write_jsonl(tmp_path / "ll.jsonl", [{"doc_id": 0, "target": "A",
                                                  "resps": [[[-1.0, True]]]}])
    assert main(["score", str(loglik), "--out", str(tmp_path / "x")]) == 2


def _inspect_sample(item: str, epoch: int, answer: str, value: str) -> dict:
    return {"id": item, "epoch": epoch, "input": f"question {item}", "target": "Paris",
            "output": {"choices": [{"message": {"role": "assistant",
                                                "content": f"ANSWER: {answer}"}}]},
            "scores": {"match": {"value": value, "answer": answer}}}


def test_inspect_logs_json_and_eval(tmp_path):
    samples = [_inspect_sample("q1", e, a, v) for e, (a, v) in
               enumerate([("Paris", "C"), ("Paris", "C"), ("Lyon", "I")], 1)]
    samples += [_inspect_sample("q2", e, "Rome", "I") for e in (1, 2, 3)]
    log = tmp_path / "log.json"
    log.write_text(json.dumps({"version": 2, "status": "success", "samples": samples}))
    archive = tmp_path / "log.eval"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("header.json", json.dumps({"version": 2, "status": "success"}))
        for s in reversed(samples):  # file order is not sample order
            z.writestr(f"samples/{s['id']}_epoch_{s['epoch']}.json", json.dumps(s))
    cfg = RunConfig(methods=["self_consistency"], bootstrap=0, out=tmp_path / "o",
                    cache=tmp_path / "c.sqlite")
    for path in (log, archive):
        res = credo.api.score(path, cfg, show_progress=False)
        by = {r.item.id: r for r in res.items}
        # compared as short text (the default --format): SQuAD-normalised
        assert [s.answer.value for s in by["q1"].original] == ["paris", "paris", "lyon"]
        assert by["q1"].performance == pytest.approx(2 / 3) and by["q2"].performance == 0.0
        assert by["q2"].scores["self_consistency"] == 1.0


@pytest.mark.parametrize("row, named", [
    ({"item": "a", "set": "original", "answer": {"x": 1}}, "'answer' must be"),
    ({"item": "", "set": "original", "answer": "1"}, "'item'"),
    ({"item": "a", "set": "original", "answer": "1", "correct": "yes"}, "'correct' must be"),
])
def test_bad_rows_name_file_and_line(tmp_path, capsys, row, named):
    good = {"item": "a", "set": "original", "answer": "1", "correct": True}
    path = _write_jsonl(tmp_path / "bad.jsonl", [good, row])
    assert main(["score", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert f"{path}:2" in err and named in err


def test_one_sample_per_item_scores_what_needs_one(tmp_path, capsys):
    """Issue 25 item 4: one sample per item (both tools' default) was a traceback, then a
    user error; now the methods that compare samples are n/a for those items, with the
    reason, verbalized confidence still scores, and the run completes."""
    rows = [{"item": "a", "answer": "18", "correct": True},
            {"item": "a", "set": "verbalized", "answer": 0.8},
            {"item": "b", "answer": "3", "correct": False},
            {"item": "b", "answer": "4", "correct": False},
            {"item": "b", "set": "verbalized", "answer": 0.3}]
    path = _write_jsonl(tmp_path / "one.jsonl", rows)
    out = tmp_path / "o"
    assert main(["score", str(path), "--methods", "self_consistency,verbalized", "--out",
                 str(out), "--bootstrap", "0", "--quiet"]) == 0
    scores = {r["id"]: r["scores"] for r in _rows(out / "scores.jsonl")}
    assert scores["a"]["self_consistency"] is None and scores["b"]["self_consistency"] == 0.0
    assert scores["a"]["verbalized"] == pytest.approx(0.8)
    assert "needs at least 2 'original' samples" in capsys.readouterr().out
    assert json.loads((out / "run_status.json").read_text())["status"] == "complete"
    config = (out / "config.yaml").read_text()
    assert "n: 2\n" in config and "limit: null" in config


def test_items_need_original_samples(tmp_path, capsys):
    path = _write_jsonl(tmp_path / "p.jsonl",
                        [{"item": "a", "set": "perturbed", "answer": "1"}])
    assert main(["score", str(path), "--out", str(tmp_path / "o")]) == 2
    assert "has no 'original' samples" in capsys.readouterr().err


def test_the_answers_column_never_hides_the_right_answer(tmp_path):
    """Issue 34 item 13: an item's answers column showed its 3 commonest answers and
    nothing else, so a right answer given once was hidden and nothing said more existed.
    Now the commonest three, every group with a right sample (✓), and what is left out."""
    answers = ["x", "x", "x", "y", "y", "z", "z", "w", "v"]
    rows = [{"item": "a", "answer": a, "correct": a == "w", "gold": "w"} for a in answers]
    rows += [{"item": "b", "answer": "w", "correct": True, "gold": "w"}] * 2
    path = _write_jsonl(tmp_path / "many.jsonl", rows)
    out = tmp_path / "o"
    assert main(["score", str(path), "--methods", "self_consistency", "--out", str(out),
                 "--bootstrap", "0", "--quiet"]) == 0
    want = "x×3, y×2, z×2, w×1 ✓, … +1 more (1 sample)"
    report = (out / "report.md").read_text()
    row = next(ln for ln in report.splitlines() if ln.startswith("| a |"))
    assert row.endswith(f"| {want} |")
    assert "| w×2 ✓ |" in report
    assert f"<td class=l>{want}</td>" in (out / "report.html").read_text()


def test_a_score_report_without_methods(tmp_path, capsys):
    """Issue 34 item 13 on credo's own JSONL: without --methods every method the sample
    sets allow is scored (original samples alone: SC, SE, the graph methods, ...; with
    perturbed ones C3 too), the report is titled "credo score" with one correctness line,
    and m is shown as the file holds it: 0 without perturbed samples, in the header
    printed and in the report alike."""
    only = {"self_consistency", "semantic_entropy", "num_semantic_sets", "eigv", "degree",
            "eccentricity", "kle", "answer_consistency", "lexsim"}
    rows = [{"item": i, "answer": a, "correct": a == "1", "gold": "1"}
            for i in ("a", "b") for a in ("1", "1", "2")]
    for perturbed, want in ((False, only), (True, only | {"c3", "c3_cross"})):
        extra = [{"item": i, "set": "perturbed", "answer": a} for i in ("a", "b")
                 for a in ("1", "2")] if perturbed else []
        path = _write_jsonl(tmp_path / f"g{perturbed}.jsonl", rows + extra)
        out = tmp_path / f"o{perturbed}"
        capsys.readouterr()
        assert main(["score", str(path), "--out", str(out), "--bootstrap", "0",
                     "--quiet"]) == 0
        printed = " ".join(capsys.readouterr().out.split())
        metrics = json.loads((out / "metrics.json").read_text())
        assert set(metrics["methods"]) == want
        line = ("given (the file's 'correct'); answers compared as text after SQuAD"
                " normalisation (case, punctuation, articles)")
        assert metrics["correctness"] == line
        report = (out / "report.md").read_text()
        assert report.startswith(f"# credo score: {path} (credo generations)")
        assert [ln for ln in report.splitlines() if "correctness:" in ln] == [
            f"- correctness: {line}"]
        html = (out / "report.html").read_text()
        assert f"<h1>credo score: {path} (credo generations)</h1>" in html
        assert ("m = 0 perturbed" in html) is not perturbed
        assert ("m=0" in printed) is not perturbed
        assert ("m=2" in printed) is perturbed and ("m = 2 perturbed" in html) is perturbed

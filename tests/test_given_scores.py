"""Scores a user already has, evaluated and certified as credo's own: ``given:<name>``.

A file's per-sample ``scores`` and per-item ``item_scores`` (credo JSONL, or a CSV
table) become methods ``given:<name>``: their metrics equal scikit-learn's AUROC and an
ECE written out here, per item and per generation; ``credo certify --method
given:<name>`` certifies them through the command line and the certificate applies to a
new file; a value outside [0, 1] or a missing one is refused, naming the line; the report
says where each score came from."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

import credo
from credo.cli import main
from credo.errors import UserError
from credo.pipeline.certificate import RunCertificate


def _ece(s: np.ndarray, target: np.ndarray, bins: int = 10) -> float:
    """Σ_b |B_b|/N · |mean target − mean score| over equal-width bins, by its definition."""
    k = np.minimum(np.floor(s * bins).astype(int), bins - 1)
    return float(sum(abs(target[k == b].mean() - s[k == b].mean()) * (k == b).sum()
                     for b in range(bins) if (k == b).any()) / s.size)


def _pool(items: int = 120, per: int = 4, seed: int = 0):
    """Generations with a reward model's score per sample and a judge's per item: per item
    its difficulty p, each sample right with probability p, the reward near p."""
    rng = np.random.default_rng(seed)
    rows, truth = [], []
    for i in range(items):
        p = rng.random()
        judge = round(float(np.clip(p + rng.normal(0, 0.2), 0, 1)), 3)
        for k in range(per):
            ok = bool(rng.random() < p)
            reward = round(float(np.clip(p + rng.normal(0, 0.25), 0, 1)), 3)
            row = {"item": f"q{i}", "answer": "right" if ok else f"wrong{k}", "correct": ok,
                   "scores": {"reward": reward}}
            if k == 0:
                row["item_scores"] = {"judge": judge}
            rows.append(row)
            truth.append((i, ok, reward, judge))
    return rows, truth


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def scored(tmp_path):
    rows, truth = _pool()
    path = _write(tmp_path / "pool.jsonl", rows)
    out = tmp_path / "scored"
    assert main(["score", str(path), "--methods", "self_consistency", "--bootstrap", "200",
                 "--out", str(out), "--quiet"]) == 0
    return out, truth


def test_given_scores_are_methods_with_metrics_equal_to_independent_ones(scored):
    out, truth = scored
    metrics = json.loads((out / "metrics.json").read_text())
    assert list(metrics["methods"]) == ["self_consistency", "given:reward", "given:judge"]
    items = sorted({i for i, *_ in truth})
    p_bar = np.array([np.mean([ok for j, ok, *_ in truth if j == i]) for i in items])
    labels = (p_bar >= 0.5).astype(int)
    reward = np.array([np.mean([r for j, _, r, _ in truth if j == i]) for i in items])
    judge = np.array([next(g for j, *_, g in truth if j == i) for i in items])
    for name, s in (("given:reward", reward), ("given:judge", judge)):
        m = metrics["methods"][name]
        assert m["auroc"] == pytest.approx(roc_auc_score(labels, s), abs=1e-12), name
        assert m["ece"] == pytest.approx(_ece(s, p_bar), abs=1e-12), name
        assert m["auroc_low"] <= m["auroc"] <= m["auroc_high"]
    # per generation: each sample's reward against its own correctness
    per = metrics["responses"]["given:reward"]
    ok = np.array([c for _, c, *_ in truth], dtype=float)
    r = np.array([x for *_, x, _ in truth])
    assert per["auroc"] == pytest.approx(roc_auc_score(ok, r), abs=1e-12)
    assert per["ece"] == pytest.approx(_ece(r, ok), abs=1e-12)
    assert per["n_responses"] == len(truth) and per["n_items"] == len(items)
    assert "given:judge" not in metrics["responses"]  # per item only: no generations
    scores = [json.loads(line) for line in (out / "scores.jsonl").open()]
    assert [s["scores"]["given:judge"] for s in scores] == judge.tolist()


def test_the_report_says_where_each_given_score_came_from(scored):
    out, _ = scored
    report = (out / "report.md").read_text()
    line = next(ln for ln in report.splitlines() if ln.startswith("- given scores:"))
    assert "given:reward: per sample, read from scores.reward" in line
    assert "mean of its original samples'" in line
    assert "given:judge: per item, read from item_scores.judge" in line
    html = (out / "report.html").read_text()
    assert "given scores" in html and "item_scores.judge" in html
    paired = html[html.index("Paired comparisons"):html.index("Reliability diagrams")]
    assert "given:reward" in paired and "given:judge" in paired  # tested against the others


def test_credo_certify_certifies_a_given_score_and_a_new_file_applies_it(scored, tmp_path):
    out, _ = scored
    cert_path = tmp_path / "cert.json"
    assert main(["certify", str(out), "--method", "given:reward", "--alpha", "0.25",
                 "--out", str(cert_path)]) == 0
    cert = RunCertificate.read(cert_path)  # the threshold lies in the score's range
    assert cert.method == "given:reward" and cert.certificate.certified
    t = cert.certificate.threshold
    assert 0.0 <= t <= 1.0
    # the same scores and correctness as the folder: the certificate's own accounting
    rows = [json.loads(line) for line in (out / "scores.jsonl").open()]
    accepted = [r for r in rows if r["scores"]["given:reward"] >= t]
    assert cert.certificate.n_accepted == len(accepted)
    assert cert.certificate.risk == pytest.approx(
        sum(r["answer_correct"] < 0.5 for r in accepted) / len(accepted))
    # a new file of the same kind: its answers acted on where its reward reaches t
    new_rows, _ = _pool(items=30, seed=1)
    new = _write(tmp_path / "new.jsonl", new_rows)
    applied = tmp_path / "applied"
    assert main(["score", str(new), "--methods", "self_consistency", "--bootstrap", "0",
                 "--certificate", str(cert_path), "--out", str(applied), "--quiet"]) == 0
    answers = [json.loads(line) for line in (applied / "answers.jsonl").open()]
    assert len(answers) == 30
    assert all(a["accept"] == (a["score"] >= t) for a in answers)
    # given scores lie in [0, 1]: a certificate whose threshold does not is refused
    edited = json.loads(cert_path.read_text())
    edited["certificate"]["threshold"] = 1.5
    bad = tmp_path / "edited.json"
    bad.write_text(json.dumps(edited))
    with pytest.raises(UserError, match=r"outside the scores of given:reward \(\[0, 1\]\)"):
        RunCertificate.read(bad)


def test_a_folder_s_samples_score_again_with_their_given_scores(scored, tmp_path):
    out, _ = scored
    again = tmp_path / "again"
    assert main(["score", str(out / "samples.jsonl"), "--methods", "self_consistency",
                 "--bootstrap", "0", "--out", str(again), "--quiet"]) == 0
    want = {r["id"]: r["scores"] for r in map(json.loads, (out / "scores.jsonl").open())}
    got = {r["id"]: r["scores"] for r in map(json.loads, (again / "scores.jsonl").open())}
    assert got == want


def test_given_selects_scores_and_none_scores_none(tmp_path):
    rows, _ = _pool(items=12)
    path = _write(tmp_path / "p.jsonl", rows)
    for flag, want in (("reward", ["given:reward"]), ("none", [])):
        out = tmp_path / flag
        assert main(["score", str(path), "--methods", "self_consistency", "--given", flag,
                     "--bootstrap", "0", "--out", str(out), "--quiet"]) == 0
        methods = json.loads((out / "metrics.json").read_text())["methods"]
        assert list(methods) == ["self_consistency", *want]


def _refused(capsys, args: list[str]) -> str:
    assert main(args) == 2
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert 1 <= len(lines) <= 2 and lines[0].startswith("error:"), err
    assert "Traceback" not in out + err
    return " ".join(err.split())


def _set(row: dict, key: str, name: str, value: object) -> None:
    row.setdefault(key, {})[name] = value


BAD = {  # case -> (edit of the rows, extra flags, the line or name the message names)
    "outside": (lambda rows: _set(rows[3], "scores", "reward", 1.7), [], 4),
    "missing": (lambda rows: rows[5].pop("scores"), [], 6),
    "null": (lambda rows: _set(rows[5], "scores", "reward", None), [], 6),
    "item missing": (lambda rows: rows[4].pop("item_scores"), [], 5),
    "not a number": (lambda rows: _set(rows[3], "scores", "reward", "high"), [], 4),
    "bad name": (lambda rows: _set(rows[3], "scores", "re ward", 0.5), [], 4),
    "unknown --given": (lambda rows: None, ["--given", "reward,confidence"], "confidence"),
    "items disagree": (lambda rows: _set(rows[1], "item_scores", "judge", 0.123456), [], 2),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_given_scores_are_refused_naming_the_line(case, tmp_path, capsys):
    rows, _ = _pool(items=6, per=2)
    edit, flags, named = BAD[case]
    edit(rows)
    path = _write(tmp_path / "p.jsonl", rows)
    out = tmp_path / "o"
    err = _refused(capsys, ["score", str(path), "--bootstrap", "0", "--out", str(out),
                            "--quiet", *flags])
    assert (f"{path}:{named}" if isinstance(named, int) else named) in err, err
    if case == "outside":
        assert "outside [0, 1]" in err and "1.7" in err
    if case in ("missing", "null", "item missing"):
        assert "imputes no missing score" in err
    assert not out.exists() or not any(out.iterdir())


def test_a_number_that_is_no_score_is_said_not_dropped(tmp_path):
    rows = [{"item": f"q{i}", "answer": "a", "correct": True, "confidence": 0.7}
            for i in range(3) for _ in range(2)]
    path = _write(tmp_path / "c.jsonl", rows)
    res = credo.score(path, credo.RunConfig(methods=["self_consistency"], bootstrap=0,
                                            out=tmp_path / "o"), show_progress=False)
    said = res.stats["given_fields_not_read"]
    assert said.startswith("confidence (6 rows)") and "'scores'" in said
    assert "confidence (6 rows)" in (tmp_path / "o" / "report.md").read_text()


CSV_COMMA = """question_id,prediction,is_right,judge_prob,extra
q1,Paris,true,0.9,x
q1,Paris,yes,0.8,x
q1,Lyon,false,0.3,x
q2,4,1,0.6,x
q2,5,0,0.2,x
q3,blue,,0.5,x
"""


def test_a_csv_table_with_its_own_column_names(tmp_path):
    """Comma and semicolon tables (with decimal commas) read alike; --columns maps the
    table's names; the given score's metrics are those of the same rows in credo JSONL."""
    comma = tmp_path / "t.csv"
    comma.write_text(CSV_COMMA)
    semi = tmp_path / "s.csv"
    semi.write_text(CSV_COMMA.replace(",", ";").replace("0.", "0,"))
    mapping = "item=question_id,answer=prediction,correct=is_right,scores.judge=judge_prob"
    results = []
    for path in (comma, semi):
        out = tmp_path / path.stem
        assert main(["score", str(path), "--columns", mapping, "--methods", "self_consistency",
                     "--bootstrap", "0", "--out", str(out), "--quiet"]) == 0
        results.append(json.loads((out / "metrics.json").read_text()))
        scores = {r["id"]: r["scores"]["given:judge"]
                  for r in map(json.loads, (out / "scores.jsonl").open())}
        assert scores == pytest.approx({"q1": (0.9 + 0.8 + 0.3) / 3, "q2": 0.4, "q3": 0.5})
        assert "column 'judge_prob'" in results[-1]["stats"]["given_scores"]
        assert results[-1]["stats"]["given_fields_not_read"].startswith("extra (6 rows)")
    assert results[0]["methods"] == results[1]["methods"]
    assert results[0]["responses"]["given:judge"]["auroc"] == pytest.approx(
        roc_auc_score([1, 1, 0, 1, 0], [0.9, 0.8, 0.3, 0.6, 0.2]))


def test_a_csv_mapping_to_a_missing_column_is_refused(tmp_path, capsys):
    path = tmp_path / "t.csv"
    path.write_text(CSV_COMMA)
    err = _refused(capsys, ["score", str(path), "--columns", "item=qid", "--out",
                            str(tmp_path / "o"), "--quiet"])
    assert "no column 'qid'" in err and "question_id" in err


def test_the_python_api(tmp_path):
    rows, truth = _pool(items=40)
    path = _write(tmp_path / "p.jsonl", rows)
    res = credo.score(path, credo.RunConfig(methods=["self_consistency"], bootstrap=0,
                                            out=tmp_path / "o"),
                      given=["reward"], show_progress=False)
    assert res.config.methods == ["self_consistency", "given:reward"]
    s = np.array([r.scores["given:reward"] for r in res.items])
    p = np.array([r.performance for r in res.items])
    ev = credo.evaluate(s, p, n_resamples=200)
    assert ev["auroc"] == pytest.approx(roc_auc_score((p >= 0.5).astype(int), s), abs=1e-12)
    assert ev["ece"] == pytest.approx(_ece(s, p), abs=1e-12)
    assert ev["auroc"] == pytest.approx(res.metrics["given:reward"]["auroc"], abs=1e-12)
    assert ev["auroc_low"] <= ev["auroc"] <= ev["auroc_high"] and ev["n"] == 40
    # per generation, intervals resampling questions
    owner = [i for i, *_ in truth]
    r = [x for *_, x, _ in truth]
    ok = [float(c) for _, c, *_ in truth]
    gen = credo.evaluate(r, ok, questions=owner, n_resamples=200)
    assert gen["n_questions"] == 40 and gen["auroc"] == pytest.approx(roc_auc_score(ok, r))
    with pytest.raises(ValueError, match="scores"):
        credo.evaluate([0.2, math.nan], [1, 0])
    with pytest.raises(ValueError, match="questions"):
        credo.evaluate([0.2, 0.4], [1, 0], questions=[1])
    assert "evaluate" in credo.__all__ and "score" in credo.__all__
    assert credo.evaluate.__doc__ and credo.score.__doc__


def test_a_run_refuses_a_given_method_before_any_model(tmp_path):
    from credo.api import run
    from credo.models.scripted import ScriptedModel
    from test_baselines import NUM

    cfg = credo.RunConfig(task="toy_num", methods=["self_consistency", "given:reward"],
                          out=tmp_path / "r", cache=tmp_path / "c.sqlite")

    def never(*a, **k):
        raise AssertionError("a model was called")

    with pytest.raises(UserError, match=r"given:reward.*credo score"):
        run(cfg, model=ScriptedModel(never), task=NUM, show_progress=False)

"""Coverage at risk α in every report (issue 23 item 2): per method and α over random
calibration/test splits of the run's items, the method that answers most named first,
degenerate scores flagged with their reason, the risk–coverage figure; nothing of it
without gold, a note instead of a number with too few items."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from pydantic import ValidationError

from credo.cli import main
from credo.config import RunConfig
from credo.evaluate.certify import coverage_at_risk
from credo.evaluate.coverage import (
    MIN_ITEMS,
    degenerate_reason,
    most_answers,
    risk_coverage_curve,
)
from credo.report.html import write_run_report

# --- the pieces --------------------------------------------------------------------------


def test_risk_coverage_curve_matches_counting_every_threshold():
    rng = np.random.default_rng(3)
    s = rng.integers(0, 6, 50) / 5.0  # ties
    c = rng.random(50) < s
    cov, risk = risk_coverage_curve(s, c)
    for t, cv, rk in zip(sorted(set(s), reverse=True), cov, risk, strict=True):
        acc = s >= t
        assert cv == pytest.approx(acc.mean())
        assert rk == pytest.approx(1 - c[acc].mean())
    assert cov[-1] == 1.0 and np.all(np.diff(cov) > 0)


def test_concentrated_scores_are_degenerate_at_80_percent_within_0_05():
    spread = np.linspace(0, 1, 20)
    eight = np.r_[np.full(16, 0.50) + np.linspace(-0.05, 0.05, 16), spread[:4]]  # 80%
    seven = np.r_[np.full(15, 0.50), [0.0, 0.1, 0.2, 0.8, 0.9]]  # 75%
    correct = np.tile([1, 0], 10)
    why = degenerate_reason(eight, correct)
    assert why is not None and "80% of items score within 0.05 of 0.50" in why
    assert degenerate_reason(seven, correct) is None
    assert degenerate_reason(spread, correct) is None


def test_confident_scores_on_wrong_answers_are_degenerate_and_c3_names_its_cause():
    s = np.r_[np.full(12, 0.95), np.linspace(0.1, 0.6, 8)]
    wrong_where_sure = np.r_[np.tile([1, 0], 6), np.ones(8)]  # 50% correct among s >= 0.9
    right_where_sure = np.r_[np.ones(12), np.zeros(8)]
    why = degenerate_reason(s, wrong_where_sure, "c3")
    assert why is not None and "score ≥ 0.9 on 60% of items" in why and "50%" in why
    assert "MMD² ≈ 0" in why
    assert "MMD" not in degenerate_reason(s, wrong_where_sure, "self_consistency")
    assert degenerate_reason(s, right_where_sure, "c3") is None  # confident and right


def test_most_answers_is_the_largest_mean_coverage_and_none_when_nothing_is_answered():
    cov = {"a": {"0.1": {"coverage_mean": 0.2}}, "b": {"0.1": {"coverage_mean": 0.5}},
           "c": {"0.1": {"n_items": 3, "note": "too few"}}}
    assert most_answers(cov, 0.1)[0] == "b"
    assert most_answers({"a": {"0.1": {"coverage_mean": 0.0}}}, 0.1) is None
    assert most_answers(cov, 0.2) is None


def test_the_config_section_defaults_and_checks():
    ev = RunConfig().evaluation
    assert ev.alphas == [0.1] and ev.delta == 0.1 and ev.splits == 100
    assert RunConfig.model_validate({"evaluation": {"alphas": [0.05, 0.2]}}).evaluation.alphas \
        == [0.05, 0.2]
    for bad in ({"alphas": [1.5]}, {"alphas": []}, {"delta": 0}, {"splits": 0}, {"x": 1}):
        with pytest.raises(ValidationError):
            RunConfig.model_validate({"evaluation": bad})


# --- a run through `credo score` ---------------------------------------------------------


def _samples(tmp: Path, items: int, gold: bool = True) -> Path:
    """Odd items answered right by 7 of 8 samples, even ones by 2 of 8 (majority wrong):
    self-consistency separates them; C3 of identical sets is 1 everywhere."""
    rows = []
    for k in range(items):
        right = 7 if k % 2 else 2
        for j in range(8):
            ok = j < right
            answer = "18" if ok else str(7 + j % 2)
            for name in ("original", "perturbed"):
                rows.append({"item": f"q{k}", "set": name, "answer": answer,
                             "correct": (ok if gold else None) if name == "original" else None})
    path = tmp / "samples.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _score(tmp: Path, items: int, gold: bool = True, evaluation=None) -> Path:
    out = tmp / "run"
    args = ["score", str(_samples(tmp, items, gold)), "--format", "number", "--methods",
            "c3,self_consistency", "--bootstrap", "0", "--out", str(out),
            "--cache", str(tmp / "c.sqlite"), "--quiet"]
    if evaluation is not None:
        cfg = tmp / "cfg.yaml"
        cfg.write_text(yaml.safe_dump({"evaluation": evaluation}))
        args += ["--config", str(cfg)]
    assert main(args) == 0
    return out


@pytest.fixture(scope="module")
def labelled_run(tmp_path_factory) -> Path:
    return _score(tmp_path_factory.mktemp("cov"), 200,
                  evaluation={"alphas": [0.1, 0.3], "splits": 40})


def test_metrics_json_holds_coverage_as_certify_computes_it(labelled_run):
    m = json.loads((labelled_run / "metrics.json").read_text())
    cov = m["coverage_at_risk"]
    assert set(cov) == {"c3", "self_consistency"} and set(cov["c3"]) == {"0.1", "0.3"}
    rows = [json.loads(ln) for ln in (labelled_run / "scores.jsonl").read_text().splitlines()]
    s = [r["scores"]["self_consistency"] for r in rows]
    c = [r["answer_correct"] >= 0.5 for r in rows]
    direct = coverage_at_risk(s, c, 0.3, 0.1, splits=40, seed=0)
    e = cov["self_consistency"]["0.3"]
    assert e["coverage_mean"] == pytest.approx(direct.coverage_mean)
    assert e["exceed_rate"] == pytest.approx(direct.exceed_rate)
    assert e["n_items"] == 200 and e["splits"] == 40 and e["delta"] == 0.1
    assert 0 <= e["coverage_q05"] <= e["coverage_mean"] <= e["coverage_q95"] <= 1
    # half the items' answers are wrong and self-consistency puts them all below the rest
    assert e["coverage_mean"] > 0.3
    assert "c3" in m["degenerate"] and "self_consistency" not in m["degenerate"]


def test_report_md_names_the_method_first_and_puts_coverage_beside_auroc(labelled_run):
    lines = (labelled_run / "report.md").read_text().splitlines()
    assert lines[0].startswith("# credo score: ")  # the fixture scores given samples
    assert lines[2].startswith("- most answers at α=0.1: self_consistency (coverage ")
    assert lines[3].startswith("- most answers at α=0.3: self_consistency")
    assert lines[4].startswith("- degenerate scores: c3: score ≥ 0.9 on 100% of items")
    header = next(ln for ln in lines if ln.startswith("| method | items | ECE"))
    cells = [c.strip() for c in header.strip("|").split("|")]
    at = cells.index("AUROC ↑")
    assert cells[at + 1: at + 3] == ["cov@0.1 ↑", "cov@0.3 ↑"]
    assert "## Coverage at risk α" in lines


def test_report_html_is_rebuilt_with_coverage_from_the_folder_alone(labelled_run, tmp_path):
    page = write_run_report(labelled_run, out=tmp_path / "r.html").read_text()
    assert "most answers at α=0.1: self_consistency" in page
    assert "cov@0.3 ↑" in page and 'alt="risk-coverage curves"' in page
    assert "degenerate scores: c3" in page


def test_a_run_without_gold_shows_no_coverage(tmp_path):
    out = _score(tmp_path, 20, gold=False)
    m = json.loads((out / "metrics.json").read_text())
    assert "coverage_at_risk" not in m and "degenerate" not in m
    text = (out / "report.md").read_text()
    assert "most answers" not in text and "cov@" not in text
    assert "risk-coverage" not in (out / "report.html").read_text()


def test_too_few_items_say_so_instead_of_a_number(tmp_path):
    out = _score(tmp_path, MIN_ITEMS - 1)
    e = json.loads((out / "metrics.json").read_text())["coverage_at_risk"]["c3"]["0.1"]
    assert "coverage_mean" not in e and "too few items to split" in e["note"]
    text = (out / "report.md").read_text()
    assert f"most answers at α=0.1: none, too few items to split ({MIN_ITEMS - 1}" in text
    assert "too few items" in next(ln for ln in text.splitlines() if ln.startswith("| c3 |"))
    assert "degenerate" not in json.loads((out / "metrics.json").read_text())

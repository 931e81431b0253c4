"""One real run of the smallest embedded model through the CLI (slow, still run in CI)."""

import json

import pytest

from credo.cli import main


@pytest.mark.slow
def test_cli_run_on_embedded_smollm2(tmp_path):
    out = tmp_path / "run"
    code = main(
        [
            # the smallest model writes its own prefixes: a smoke test needs only the
            # weights `make test` installs (issue 20; the default writer is the 1.5B)
            "run", "--task", "gsm8k", "--model", "smollm2-135m", "--writer", "smollm2-135m",
            "--limit", "2",
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


@pytest.mark.slow
def test_baselines_on_embedded_smollm2(tmp_path):
    """Every logprob and follow-up baseline on the real backend: letters under a grammar,
    P(True) and CCP from llama.cpp's top logprobs, APriCoT verdicts, verbalized replies."""
    from credo import RunConfig, run
    from credo.config import BaselineConfig
    from credo.methods.base import APRICOT, LABEL
    from credo.methods.label_prob import label_probabilities

    cfg = RunConfig(
        task="mmlu:high_school_statistics",
        model="smollm2-135m",
        limit=2,
        n=3,
        prompt_style="direct",
        sampling={"max_tokens": 8},
        methods=["label_prob", "p_true", "verbalized", "answer_consistency", "ccp"],
        baselines=BaselineConfig(apricot_samples=2, apricot_max_tokens=16, followups=2),
        bootstrap=20,
        out=tmp_path / "run",
        cache=tmp_path / "cache.sqlite",
    )
    res = run(cfg, show_progress=False)
    assert len(res.items) == 2
    for r in res.items:
        (label,) = r.sets[LABEL]
        assert label.text.strip() in "ABCD" and len(label.text.strip()) == 1  # the grammar
        lp = label_probabilities(label.logprobs, 4)
        assert lp is not None and lp.position == 0
        assert 0.0 < lp.mass <= 1.0 + 1e-6
        assert r.scores["label_prob"] == pytest.approx(max(lp.normalised.values()))
        assert len(r.sets[APRICOT]) == 4 * 2
        for name in ("p_true", "verbalized", "ccp"):
            for v in r.method_scores[name].responses:
                assert v is None or 0.0 <= v <= 1.0
        assert r.method_scores["p_true"].responses[2] is None  # outside the follow-up scope
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert set(metrics["responses"]) >= {"answer_consistency", "label_prob"}

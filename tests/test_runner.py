"""The pipeline end to end on a scripted model: files, scores, metrics, cache reuse."""

import functools
import json

import pytest
from sklearn.metrics import roc_auc_score

from conftest import toy_respond, toy_task
from credo import RunConfig, c3, run, self_consistency
from credo.models.scripted import ScriptedModel

TASK = toy_task("easy", "coin", "fragile", "wrong")
respond = functools.partial(toy_respond, spread_wrong=False)
"""The toy model, the wrong item always answering 11 when it answers."""


@pytest.fixture
def config(tmp_path):
    return RunConfig(
        task="toy",
        n=6,
        m=6,
        limit=None,
        out=tmp_path / "run",
        cache=tmp_path / "cache.sqlite",
        bootstrap=0,
    )


def test_run_scores_items_as_the_paper_defines(config, bow_embedder):
    model = ScriptedModel(respond)
    result = run(config, model=model, embedder=bow_embedder, task=TASK, show_progress=False)
    by_id = {r.item.id: r for r in result.items}

    assert by_id["easy"].scores["c3"] == 1.0 and by_id["easy"].performance == 1.0
    assert by_id["fragile"].performance == 1.0
    assert by_id["fragile"].scores["self_consistency"] == 1.0
    assert by_id["fragile"].scores["c3"] == 0.0  # complete shift under perturbation
    assert by_id["wrong"].performance == 0.0
    for r in result.items:
        orig = [s.answer.value for s in r.original]
        pert = [s.answer.value for s in r.perturbed]
        assert len(orig) == 6 and len(pert) == 6
        assert r.scores["c3"] == pytest.approx(c3(orig, pert))
        assert r.scores["self_consistency"] == pytest.approx(self_consistency(orig))
        assert len(set(r.perturbations)) == 6  # one sample per distinct perturbation
    # unparsable answers were recorded, not dropped
    assert any(s.answer.value is None for s in by_id["wrong"].original)

    out = config.out
    rows = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["easy", "coin", "fragile", "wrong"]
    metrics = json.loads((out / "metrics.json").read_text())
    labels = [int(r["p_bar"] >= 0.5) for r in rows]
    c3_scores = [r["scores"]["c3"] for r in rows]
    assert metrics["methods"]["c3"]["auroc"] == pytest.approx(roc_auc_score(labels, c3_scores))
    assert (out / "report.md").read_text().startswith("# credo run")
    samples = (out / "samples.jsonl").read_text().splitlines()
    assert len(samples) == 4 * 12


def test_rerun_uses_the_cache_only(config, bow_embedder):
    first = run(config, model=ScriptedModel(respond), embedder=bow_embedder, task=TASK,
                show_progress=False)
    model = ScriptedModel(respond)
    again = run(config, model=model, embedder=bow_embedder, task=TASK, show_progress=False)
    assert model.samples == 0
    assert [r.scores for r in again.items] == [r.scores for r in first.items]
    bigger = config.model_copy(update={"n": 8})
    run(bigger, model=model, embedder=bow_embedder, task=TASK, show_progress=False)
    assert model.samples == 4 * 2  # two more original samples per item, nothing else


def test_an_unknown_method_is_refused_where_the_run_starts(tmp_path):
    """Issue 22: ``RunConfig`` imports no method; the pipeline refuses the name before any
    model is called (a UserError naming it)."""
    from credo.errors import UserError

    cfg = RunConfig(methods=["c3", "telepathy"], out=tmp_path / "run",
                    cache=tmp_path / "c.sqlite")
    model = ScriptedModel(respond)
    with pytest.raises(UserError, match="unknown methods: unknown method 'telepathy'"):
        run(cfg, model=model, task=TASK, show_progress=False)
    assert model.samples == 0


def test_cli_cache_stats_counts_the_run(config, bow_embedder, capsys):
    from credo.cli import main

    result = run(config, model=ScriptedModel(respond), embedder=bow_embedder, task=TASK,
                 show_progress=False)
    assert main(["cache", "stats", "--cache", str(config.cache)]) == 0
    out = capsys.readouterr().out
    # 4 items x (6 original + 6 perturbed) answers, plus every perturbation candidate
    candidates = sum(p.candidates for p in result.perturbation_sets.values())
    samples = int(out.split(" samples")[0].rsplit(" ", 1)[1])
    assert samples == 4 * 12 + candidates
    assert main(["cache", "stats", "--cache", str(config.cache.parent / "nope.sqlite")]) == 1


def test_graph_estimators_new_metrics_and_calibration_in_the_run_folder(config, bow_embedder):
    """Issue 15 end to end: the estimators score from the original samples, every table
    has MCE, Brier, AUARC, PRR with CIs, and --calibrate adds the cross-fitted ECE."""
    import math

    import yaml

    from credo import semantic_entropy
    from credo.evaluate.tables import METRICS

    estimators = ["semantic_entropy", "num_semantic_sets", "eigv", "degree", "eccentricity",
                  "kle"]
    cfg = config.model_copy(update={"methods": ["self_consistency", *estimators],
                                    "bootstrap": 40, "calibrate": "isotonic"})
    result = run(cfg, model=ScriptedModel(respond), embedder=bow_embedder, task=TASK,
                 show_progress=False)
    for r in result.items:
        answers = [s.answer.value for s in r.original]
        assert r.scores["semantic_entropy"] == pytest.approx(
            1 - semantic_entropy(answers) / math.log(6))
        assert all(0.0 <= r.scores[m] <= 1.0 for m in estimators)
    metrics = json.loads((cfg.out / "metrics.json").read_text())
    for m in ["self_consistency", *estimators]:
        d = metrics["methods"][m]
        assert {f"{k}_low" for k in METRICS} <= set(d)
        assert "ece_calibrated" in d and "brier_calibrated" in d
    assert {"degree", "eccentricity"} <= set(metrics["responses"])
    assert "prr_high" in metrics["responses"]["degree"]
    report = (cfg.out / "report.md").read_text()
    for header in ("MCE ↓", "Brier ↓", "AUARC ↑", "PRR ↑", "ECE cal. ↓", "isotonic"):
        assert header in report
    assert yaml.safe_load((cfg.out / "config.yaml").read_text())["calibrate"] == "isotonic"
    page = (cfg.out / "report.html").read_text()
    assert "PRR ↑" in page and "AUARC ↑" in page and "ece calibrated" in page

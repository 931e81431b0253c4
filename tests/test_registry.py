"""The metric registry (issue 22 item 4): a metric declared once is in every table.

A toy metric registered here (and unregistered after) shows in metrics.json (item and
response metrics, with bootstrap CIs and a calibrated row), report.md, the terminal's
headline table and report.html; no second list of metric names lives outside the
registry.
"""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path

import numpy as np
import pytest

from conftest import BagOfWordsEmbedder, toy_respond, toy_task
from credo import RunConfig, run
from credo.evaluate import registry
from credo.evaluate.bootstrap import bootstrap_cis, percentile_interval
from credo.evaluate.weighted import FAST_METRICS, resample_indices
from credo.models.scripted import ScriptedModel

SRC = Path(__file__).resolve().parents[1] / "src" / "credo"
BUILT_IN = ("ece", "mce", "brier", "auroc", "auprc_pos", "auprc_neg", "auarc", "prr")


def toy_rows(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Mean score of the label-1 items minus that of the rest, per row (NaN on one class)."""
    y = np.asarray(labels, dtype=float)
    pos, neg = y.sum(axis=1), (1 - y).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (scores * y).sum(axis=1) / pos - (scores * (1 - y)).sum(axis=1) / neg


@pytest.fixture
def toy():
    """The toy metric, registered for one test: a headline ranking metric with a
    calibrated row, no weighted form (bootstrapped by its row function)."""
    registry.metric("toy", label="Toy", target="label", direction="higher", ranking=True,
                    headline=True, calibrated=True)(toy_rows)
    yield registry.get("toy")
    registry.unregister("toy")


TASK = toy_task("easy", "solid", "coin", "fragile", "wrong", "stuck")
respond = toy_respond


def test_the_built_in_metrics_in_table_order():
    assert tuple(registry.names()) == BUILT_IN
    assert tuple(FAST_METRICS) == BUILT_IN
    assert registry.get("ece").header == "ECE ↓" and registry.get("prr").header == "PRR ↑"
    assert dict(registry.headers(calibrated=True)) == {"ece_calibrated": "ECE cal. ↓",
                                                        "brier_calibrated": "Brier cal. ↓"}


def test_a_registration_is_checked():
    with pytest.raises(ValueError, match="already registered"):
        registry.register(registry.get("ece"))
    with pytest.raises(ValueError, match="target"):
        registry.Metric("x", "X", toy_rows, "quality", "higher")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="direction"):
        registry.Metric("x", "X", toy_rows, "label", "up")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown metric"):
        registry.get("f1")
    with pytest.raises(ValueError, match="no Metric fields"):
        registry.names(colour="red")


def test_a_registered_metric_is_checked_and_bootstrapped_on_the_same_resamples(toy):
    rng = np.random.default_rng(3)
    s = rng.random(40)
    perf = np.clip(0.6 * s + 0.4 * rng.random(40), 0, 1)
    y = (perf >= 0.5).astype(float)
    assert toy(s, y) == pytest.approx(s[y == 1].mean() - s[y == 0].mean())
    with pytest.raises(ValueError, match="labels must be 0 or 1"):
        toy(s, perf)
    cis = bootstrap_cis(s, perf, y, n_resamples=150, seed=2)
    assert list(cis) == [*BUILT_IN, "toy"]
    idx = np.concatenate(list(resample_indices(40, 150, 2)))
    by_hand = np.array([toy_rows(s[i][None], y[i][None])[0] for i in idx])
    assert cis["toy"] == pytest.approx(percentile_interval(by_hand))
    assert registry.get("toy") is toy and "toy" not in FAST_METRICS


def test_a_registered_metric_shows_in_every_table(toy, tmp_path):
    from credo.report.markdown import metrics_table_rows, response_table_rows

    cfg = RunConfig(task="toy", n=6, m=6, limit=None, out=tmp_path / "run",
                    cache=tmp_path / "cache.sqlite", bootstrap=50, calibrate="isotonic",
                    methods=["c3", "self_consistency", "answer_consistency"])
    result = run(cfg, model=ScriptedModel(respond), embedder=BagOfWordsEmbedder(), task=TASK,
                 show_progress=False)
    metrics = json.loads((cfg.out / "metrics.json").read_text())
    for level in ("methods", "responses"):
        for d in metrics[level].values():
            assert {"toy", "toy_low", "toy_high", "toy_calibrated"} <= set(d), level
    c3 = metrics["methods"]["c3"]
    assert not math.isnan(c3["toy"]) and c3["toy_low"] <= c3["toy_high"]

    report = (cfg.out / "report.md").read_text()
    headers = [line for line in report.splitlines() if line.startswith("| method |")
               and "ECE ↓" in line]
    assert len(headers) == 2 and all("Toy ↑" in h and "Toy cal. ↑" in h for h in headers)
    assert f"{c3['toy']:.3f} [{c3['toy_low']:.2f}, {c3['toy_high']:.2f}]" in report
    for rows in (metrics_table_rows(result, compact=True),
                 response_table_rows(result, compact=True)):
        assert "Toy ↑" in rows[0]

    page = (cfg.out / "report.html").read_text()
    assert page.count("<th>Toy ↑</th>") == 2  # the method table and the per-generation one


def _metric_lists(path: Path) -> list[int]:
    """Lines of literal tuples, lists, sets and dicts naming two or more metrics."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Dict):
            elts = [k for k in node.keys if k is not None]
        elif isinstance(node, ast.Tuple | ast.List | ast.Set):
            elts = node.elts
        else:
            continue
        named = {e.value for e in elts if isinstance(e, ast.Constant) and e.value in BUILT_IN}
        if len(named) >= 2:
            found.append(node.lineno)
    return found


#: Lists that are not the evaluation's: the public API's function names (credo and
#: credo.evaluate export ece, auroc, ...) and the two paired tests (ΔAUROC, ΔECE) that
#: credo.evaluate.paired implements one by one.
NOT_METRIC_TABLES = {"__init__.py", "evaluate/__init__.py", "evaluate/paired.py"}


def test_no_second_list_of_metric_names_outside_the_registry():
    lists = {
        str(p.relative_to(SRC)): lines
        for p in SRC.rglob("*.py")
        if p.name != "registry.py" and (lines := _metric_lists(p))
    }
    assert set(lists) <= NOT_METRIC_TABLES, lists

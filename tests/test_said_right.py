"""Results say the right thing: what a run or a replay prints and reports matches what it
did (the point estimates without a bootstrap)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from credo.cli import main
from credo.evaluate.paired import paired_bootstrap
from test_adaptive_files import _pool

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

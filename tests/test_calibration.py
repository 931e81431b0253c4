"""Post-hoc calibration cross-fitted over items (isotonic, Platt) and the --calibrate flag."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import KFold

from credo.evaluate.calibration import calibration_folds, cross_fitted, fit_calibrator


def _items(n=40, seed=0):
    rng = np.random.default_rng(seed)
    s = rng.random(n)
    perf = np.clip(np.round(0.2 + 0.6 * s**2 + rng.normal(0, 0.15, n), 1), 0, 1)
    return s, perf


def test_isotonic_equals_scikit_learn_fitted_on_the_same_folds():
    s, perf = _items()
    got = cross_fitted(s, perf, "isotonic", seed=3)
    want = np.empty_like(s)
    for train, test in KFold(5, shuffle=True, random_state=3).split(s):
        iso = IsotonicRegression(out_of_bounds="clip").fit(s[train], perf[train])
        want[test] = iso.predict(s[test])
    np.testing.assert_allclose(got, want, atol=1e-12)


def test_platt_on_binary_targets_equals_logistic_regression_on_the_same_folds():
    rng = np.random.default_rng(1)
    s = rng.random(60)
    y = (rng.random(60) < s).astype(float)
    got = cross_fitted(s, y, "platt", seed=0)
    want = np.empty_like(s)
    for train, test in KFold(5, shuffle=True, random_state=0).split(s):
        lr = LogisticRegression(C=np.inf, max_iter=1000).fit(s[train, None], y[train])
        want[test] = lr.predict_proba(s[test, None])[:, 1]
    np.testing.assert_allclose(got, want, atol=1e-6)


def test_platt_soft_targets_equal_the_fit_on_every_samples_correctness():
    """p̄ = j/n as weights: the same sigmoid as fitting the n 0/1 samples of each item."""
    rng = np.random.default_rng(2)
    n, s = 4, rng.random(30)
    correct = (rng.random((30, n)) < s[:, None]).astype(float)
    perf = correct.mean(axis=1)
    got = fit_calibrator("platt", s, perf)(np.array([0.1, 0.5, 0.9]))
    lr = LogisticRegression(C=np.inf, max_iter=1000).fit(np.repeat(s, n)[:, None], correct.ravel())
    np.testing.assert_allclose(got, lr.predict_proba(np.array([[0.1], [0.5], [0.9]]))[:, 1],
                               atol=1e-5)


def test_no_item_is_scored_by_a_map_fitted_on_it():
    s, perf = _items(25, seed=4)
    base = cross_fitted(s, perf, "isotonic", seed=7)
    for i in (0, 9, 24):
        changed = perf.copy()
        changed[i] = 1.0 - changed[i]
        again = cross_fitted(s, changed, "isotonic", seed=7)
        assert again[i] == base[i]  # its own fold's map never saw its target


def test_generations_of_one_item_are_held_out_together():
    rng = np.random.default_rng(5)
    items = np.repeat(np.arange(12), 3)
    s = rng.random(36)
    c = (rng.random(36) < s).astype(float)
    got = cross_fitted(s, c, "isotonic", items=[f"q{i}" for i in items], seed=1)
    folds = calibration_folds(12, 5, 1)
    want = np.empty_like(s)
    for train_items, test_items in folds:
        train, test = np.isin(items, train_items), np.isin(items, test_items)
        want[test] = IsotonicRegression(out_of_bounds="clip").fit(s[train], c[train]).predict(
            s[test])
    np.testing.assert_allclose(got, want, atol=1e-12)


def test_few_items_fewer_folds_and_edges():
    assert len(calibration_folds(3)) == 3
    assert len(calibration_folds(100)) == 5
    assert np.isnan(cross_fitted([0.3], [1.0], "platt")).all()
    # a training part with one target value: the constant map
    out = cross_fitted([0.1, 0.9, 0.5], [1.0, 1.0, 1.0], "platt")
    np.testing.assert_array_equal(out, [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(cross_fitted([0.1, 0.9], [0.0, 1.0], "none"), [0.1, 0.9])
    with pytest.raises(ValueError, match="calibration"):
        cross_fitted([0.1, 0.9], [0.0, 1.0], "beta")  # type: ignore[arg-type]


def test_evaluate_items_reports_calibrated_ece_and_brier_beside_the_raw_ones():
    from credo.evaluate.metrics import brier, ece
    from credo.evaluate.tables import METRICS, evaluate_items, evaluate_responses
    from credo.methods.base import Score
    from credo.methods.scoring import ItemResult
    from credo.tasks.base import Item

    rng = np.random.default_rng(3)
    raw = rng.uniform(0, 1, 30)
    correct = [tuple(bool(x) for x in rng.uniform(0, 1, 4) < 0.3 + 0.4 * v) for v in raw]
    items = [
        ItemResult(Item(f"i{k}", "q", "1"), (), (), (), c, {"m": float(v)},
                   set_correct={"original": c},
                   method_scores={"m": Score(float(v), tuple(float(v) for _ in c))})
        for k, (v, c) in enumerate(zip(raw, correct, strict=True))
    ]
    plain = evaluate_items(items, ["m"], n_resamples=50)["m"]
    assert "ece_calibrated" not in plain
    assert all(f"{m}_low" in plain for m in METRICS)
    d = evaluate_items(items, ["m"], n_resamples=0, seed=2, calibrate="isotonic")["m"]
    perf = np.array([np.mean(c) for c in correct])
    cal = cross_fitted(raw, perf, "isotonic", seed=2)
    assert d["ece_calibrated"] == pytest.approx(ece(cal, perf))
    assert d["brier_calibrated"] == pytest.approx(brier(cal, (perf >= 0.5).astype(int)))
    assert d["ece"] == pytest.approx(ece(raw, perf))
    r = evaluate_responses(items, ["m"], n_resamples=50, seed=2, calibrate="platt")["m"]
    assert not math.isnan(r["ece_calibrated"]) and not math.isnan(r["brier_calibrated"])
    assert all(f"{m}_low" in r for m in METRICS)


def test_calibrate_is_a_run_config_field_and_flag_outside_every_request():
    import yaml

    from credo.cli import _parser
    from credo.cli.run import run_config_from_args
    from credo.config import RunConfig
    from credo.errors import UserError

    assert RunConfig().calibrate == "none"
    args = _parser().parse_args(["run", "--calibrate", "platt"])
    assert run_config_from_args(args).calibrate == "platt"
    with pytest.raises(UserError, match="calibrate"):
        run_config_from_args(_parser().parse_args(["run", "--calibrate", "beta"]))
    # an existing config.yaml gains the key and nothing else changes
    old = RunConfig().model_dump(mode="json")
    dumped = yaml.safe_load(yaml.safe_dump(old, sort_keys=False))
    assert dumped.pop("calibrate") == "none"
    assert RunConfig.model_validate(dumped) == RunConfig()
    assert "calibrate" not in repr(RunConfig.model_fields["sampling"].default)

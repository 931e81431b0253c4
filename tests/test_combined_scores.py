"""Fitted scores: ``combined`` (``--combine M1,M2``) and ``calibrated:<method>``.

Each is cross-fitted: no item's score depends on its own label (a label changed, the
item's own fitted score does not move); the fitted functions equal scikit-learn's own
models; ``credo certify --method combined`` records the function fitted on all items,
and ``credo score --certificate``, ``credo run --certificate`` and ``credo serve`` apply
exactly that function to a new item's scores."""

from __future__ import annotations

import json
import math
from pathlib import Path

import httpx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression

import credo
from credo.cli import main
from credo.config import RunConfig
from credo.errors import UserError
from credo.evaluate.calibration import fit_calibrator
from credo.evaluate.combine import FittedScore, cross_fit, fit_score
from credo.pipeline.certificate import RunCertificate


def _data(n: int = 120, seed: int = 0):
    rng = np.random.default_rng(seed)
    p = rng.random(n)
    X = np.clip(p[:, None] + rng.normal(0, [0.25, 0.35], (n, 2)), 0, 1)
    return X, (rng.random(n) < p).astype(float)


# ---------------------------------------------------------------- the fitted functions


def test_the_links_are_scikit_learns_models():
    X, t = _data()
    f = fit_score("logistic", ["a", "b"], X, t)
    ref = LogisticRegression(C=1.0, max_iter=1000).fit(X, t)  # 0/1 targets: the plain fit
    np.testing.assert_allclose(f(X), ref.predict_proba(X)[:, 1], atol=1e-6)
    iso = fit_score("isotonic", ["a", "b"], X, t)
    z = X @ np.array(f.weights) + f.intercept
    want = IsotonicRegression(out_of_bounds="clip", y_min=0, y_max=1).fit(z, t).predict(z)
    np.testing.assert_allclose(iso(X), want, atol=1e-12)
    grid = np.linspace(-0.5, 1.5, 41)[:, None]
    for kind in ("platt", "isotonic"):
        one = fit_score(kind, ["a"], X[:, :1], t)
        np.testing.assert_allclose(one(grid), fit_calibrator(kind, X[:, 0], t)(grid[:, 0]),
                                   atol=1e-6)
    assert fit_score("logistic", ["a"], X[:, :1], np.ones(len(t)))(X[:, :1]).tolist() == \
        [1.0] * len(t)  # every item right: the constant


def test_a_fitted_function_reads_back_and_refuses_a_bad_one():
    X, t = _data()
    for kind in ("logistic", "isotonic"):
        f = fit_score(kind, ["a", "b"], X, t)
        g = FittedScore.from_dict(json.loads(json.dumps(f.to_dict())))
        assert g == f and np.array_equal(g(X), f(X))
    assert math.isnan(f(np.array([[0.5, math.nan]]))[0])
    good = fit_score("isotonic", ["a", "b"], X, t).to_dict()
    for bad in ({**good, "weights": [1.0]}, {**good, "link": "probit"},
                {**good, "y": [2.0] * len(good["y"])}, {**good, "x": good["x"][::-1]},
                {**good, "intercept": "nan"}, {k: v for k, v in good.items() if k != "inputs"}):
        with pytest.raises(ValueError):
            FittedScore.from_dict(bad)


@given(st.integers(4, 40), st.integers(1, 3), st.sampled_from(["logistic", "isotonic",
                                                                "platt"]),
       st.integers(0, 10_000), st.data())
def test_no_item_is_scored_by_a_model_that_saw_its_label(n, k, kind, seed, data):
    """Change one item's label (its p̄): its own cross-fitted score does not move."""
    if kind == "platt":
        k = 1
    rng = np.random.default_rng(seed)
    X = rng.random((n, k))
    t = rng.choice([0.0, 0.25, 0.5, 1.0], n)
    i = data.draw(st.integers(0, n - 1))
    before, _ = cross_fit(kind, [f"m{j}" for j in range(k)], X, t, seed=seed % 7)
    t2 = t.copy()
    t2[i] = data.draw(st.sampled_from([0.0, 0.5, 1.0]).filter(lambda v: v != t[i]))
    after, _ = cross_fit(kind, [f"m{j}" for j in range(k)], X, t2, seed=seed % 7)
    assert after[i] == before[i]
    assert np.all((before >= 0) & (before <= 1))


def test_items_without_a_label_or_a_score():
    X, t = _data(30)
    X[3, 1] = math.nan
    t[4] = math.nan
    out, full = cross_fit("logistic", ["a", "b"], X, t)
    assert math.isnan(out[3]) and out[4] == full(X[4:5])[0] and full.items == 28
    assert cross_fit("logistic", ["a", "b"], X[:1], t[:1])[1] is None


# ------------------------------------------------------------------ through credo score


def _pool(path: Path, flip: str | None = None, items: int = 80, seed: int = 1) -> Path:
    """Generations with a reward per sample and a judge per item, both near the item's
    difficulty; ``flip``: every sample of that item correct (its p̄ 1; q5's is 0.5)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(items):
        p = rng.random()
        judge = round(float(np.clip(p + rng.normal(0, 0.3), 0, 1)), 3)
        for k in range(4):
            ok = bool(rng.random() < p)
            if f"q{i}" == flip:
                ok = True
            rows.append({"item": f"q{i}", "answer": "right" if ok else f"wrong{k}",
                         "correct": ok, "scores": {
                             "reward": round(float(np.clip(p + rng.normal(0, 0.3), 0, 1)), 3)},
                         **({"item_scores": {"judge": judge}} if k == 0 else {})})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


FITTED = ["combined", "calibrated:given:reward"]


def _score(path: Path, out: Path, *extra: str) -> dict:
    assert main(["score", str(path), "--combine", "given:reward,given:judge", "--methods",
                 "calibrated:given:reward", "--bootstrap", "200", "--out", str(out),
                 "--quiet", *extra]) == 0
    return {json.loads(ln)["id"]: json.loads(ln)["scores"]
            for ln in (out / "scores.jsonl").read_text().splitlines()}


def test_an_items_own_label_does_not_move_its_combined_score(tmp_path):
    base = _score(_pool(tmp_path / "a.jsonl"), tmp_path / "a")
    flipped = _score(_pool(tmp_path / "b.jsonl", flip="q5"), tmp_path / "b")
    for name in FITTED:
        assert flipped["q5"][name] == base["q5"][name], name
        assert any(flipped[i][name] != base[i][name] for i in base), name  # labels matter
    metrics = json.loads((tmp_path / "a" / "metrics.json").read_text())
    assert set(metrics["fitted"]) == set(FITTED)
    assert metrics["fitted"]["combined"]["inputs"] == ["given:reward", "given:judge"]
    for name in (*FITTED, "given:reward", "given:judge"):  # intervals, like every method
        m = metrics["methods"][name]
        assert m["auroc_low"] <= m["auroc"] <= m["auroc_high"], name


def test_certified_combined_is_applied_to_a_new_file_as_fitted(tmp_path):
    _score(_pool(tmp_path / "a.jsonl"), tmp_path / "a")
    assert main(["certify", str(tmp_path / "a"), "--method", "combined", "--alpha", "0.3",
                 "--out", str(tmp_path / "c.json")]) == 0
    cert = RunCertificate.read(tmp_path / "c.json")
    recorded = json.loads((tmp_path / "a" / "metrics.json").read_text())["fitted"]["combined"]
    assert cert.settings["fitted"] == recorded
    f = FittedScore.from_dict(recorded)
    new = _pool(tmp_path / "new.jsonl", seed=9, items=30)
    scores = _score(new, tmp_path / "n", "--certificate", str(tmp_path / "c.json"))
    for item, s in scores.items():
        want = f(np.array([[s["given:reward"], s["given:judge"]]]))[0]
        assert s["combined"] == pytest.approx(want, abs=1e-11), item
    answers = [json.loads(ln) for ln in (tmp_path / "n" / "answers.jsonl").read_text()
               .splitlines()]
    threshold = cert.certificate.threshold
    assert [a["accept"] for a in answers] == [scores[a["id"]]["combined"] >= threshold
                                              for a in answers]
    broken = json.loads((tmp_path / "c.json").read_text())
    del broken["settings"]["fitted"]
    (tmp_path / "bad.json").write_text(json.dumps(broken))
    with pytest.raises(UserError, match=r"settings\.fitted"):
        RunCertificate.read(tmp_path / "bad.json")


def test_combined_needs_the_methods_it_combines():
    with pytest.raises(ValueError, match=r"combine\.methods"):
        RunConfig(methods=["combined"])
    cfg = RunConfig(methods=["c3", "calibrated:verbalized"], combine={"methods": ["c3",
                                                                                "degree"]})
    assert cfg.methods == ["c3", "verbalized", "degree", "calibrated:verbalized", "combined"]
    with pytest.raises(UserError, match="calibrate a method"):
        credo.methods.get_method("calibrated:combined")


# ------------------------------------------------------------- through credo serve


def test_certified_combined_through_the_gateway(tmp_path):
    """``combined`` of self-consistency and semantic entropy certified on a scripted run;
    the gateway answers a new question with the certified function applied to the
    question's own scores, as ``credo run --certificate`` does."""
    from credo import Guard, run
    from credo.api import certify_run
    from credo.models.scripted import ScriptedModel
    from credo.serve.server import Gateway
    from serve_helpers import answerer, coins, question

    cfg = RunConfig(task="gsm8k", n=8, limit=None, bootstrap=0,
                    methods=["self_consistency"], combine={"methods": [
                        "self_consistency", "semantic_entropy"]},
                    out=tmp_path / "calib", cache=tmp_path / "c.sqlite")
    run(cfg, model=ScriptedModel(answerer), task=coins(90), show_progress=False)
    cert = certify_run(tmp_path / "calib", "combined", alpha=0.2, out=tmp_path / "c.json")
    assert cert.certificate.threshold is not None
    f = FittedScore.from_dict(cert.settings["fitted"])
    with Guard(tmp_path / "c.json", model=ScriptedModel(answerer),
               overrides={"cache": str(tmp_path / "g.sqlite")}) as guard, \
            Gateway(guard) as url:
        got = {k: httpx.post(url + "/chat/completions", timeout=60, json={
            "messages": [{"role": "user", "content": question(k)}]}).json()["credo"]
            for k in (200, 201)}
    live = run(RunConfig(task="gsm8k", n=8, limit=None, bootstrap=0,
                         methods=["self_consistency"], out=tmp_path / "live",
                         cache=tmp_path / "live.sqlite", certificate=tmp_path / "c.json"),
               model=ScriptedModel(answerer), task=coins(2, gold=False, start=200),
               show_progress=False)
    for r, k in zip(live.items, (200, 201), strict=True):
        want = f(np.array([[r.scores["self_consistency"], r.scores["semantic_entropy"]]]))[0]
        assert r.scores["combined"] == pytest.approx(want, abs=1e-11)
        assert got[k]["method"] == "combined"
        assert got[k]["score"] == pytest.approx(r.scores["combined"], abs=1e-11)
        assert got[k]["accept"] == (r.scores["combined"] >= cert.certificate.threshold)
    assert got[200]["accept"] and not got[201]["accept"]  # unanimous vs coin


def test_groups_are_held_out_together():
    """The claims of one answer: a group's scores come from a function fitted on none of
    its rows (a whole group's labels changed, its scores do not move)."""
    X, t = _data(90)
    groups = np.repeat(np.arange(30), 3)
    before, _ = cross_fit("logistic", ["a", "b"], X, t, groups=groups)
    t2 = t.copy()
    t2[groups == 7] = 1 - t2[groups == 7]
    after, _ = cross_fit("logistic", ["a", "b"], X, t2, groups=groups)
    assert np.array_equal(after[groups == 7], before[groups == 7])
    assert not np.array_equal(after, before)


def test_the_same_fits_as_uqlms_score_calibrator():
    """UQLM 0.6.7's ``ScoreCalibrator`` on the same scores (recorded by UQLM itself:
    ``tests/data/peers/uqlm_reference.py``), fitted and applied in-sample as UQLM does:
    its isotonic map is credo's; its Platt scaling keeps scikit-learn's default L2 penalty,
    which is credo's logistic combination of one score (credo's own Platt scaling is
    unpenalised, as Platt 1999)."""
    peer = json.loads((Path(__file__).parent / "data" / "peers" / "uqlm_0.6.7.json")
                      .read_text(encoding="utf-8"))
    s = np.array(peer["scores"])[:, None]
    y = np.array(peer["correct"], dtype=float)
    np.testing.assert_allclose(fit_score("isotonic", ["judge"], s, y)(s), peer["isotonic"],
                               atol=1e-12)
    np.testing.assert_allclose(fit_score("logistic", ["judge"], s, y)(s), peer["platt"],
                               atol=1e-6)
    unpenalised = fit_score("platt", ["judge"], s, y)(s)
    assert np.max(np.abs(unpenalised - peer["platt"])) > 1e-3

"""Adaptive sampling (issue 24): stopping rules, the live adaptive run, and its replay
from a full run's cache (``credo adaptive``), which must agree exactly."""

from __future__ import annotations

import json

import pytest

from credo import RunConfig, run
from credo.api import simulate_adaptive
from credo.config import AdaptiveConfig
from credo.models.scripted import ScriptedModel
from credo.plan.adaptive import c3_interval, modal_share_interval, next_size, settled
from test_runner import TASK, respond


def test_rules_read_only_the_answers_drawn() -> None:
    cons = AdaptiveConfig(rule="consensus", round=4, min=4)
    assert not settled(cons, ["5", "5", "5"])  # below min
    assert settled(cons, ["5"] * 4)
    assert not settled(cons, ["5", "5", "5", None])  # an unparsable answer breaks it
    assert settled(cons, ["4", "3", "5", "5", "5", "5"])  # the last window is unanimous
    assert settled(cons, ["5"] * 30, ["7"] * 4)  # unanimity across contexts
    inter = AdaptiveConfig(rule="interval", epsilon=0.25)
    assert not settled(inter, ["5"] * 8) and settled(inter, ["5"] * 12)
    low, high = modal_share_interval(["5"] * 12)
    assert high - low < 0.25 and low > 0.7
    assert settled(inter, ["5"] * 30, ["5"] * 8)
    assert not settled(inter, ["5"] * 15 + ["4"] * 15, ["5", "4", "3", "6"] * 2)
    decide = AdaptiveConfig(rule="decision", threshold=0.5)
    assert settled(decide, ["5"] * 8)  # the modal share is surely above 0.5
    assert not settled(decide, ["5", "4"] * 4)
    assert c3_interval(["5"] * 10, ["5"] * 4) == c3_interval(["5"] * 10, ["5"] * 4)


def test_schedule_and_config_spellings() -> None:
    cfg = AdaptiveConfig(round=4, min=6)
    assert [next_size(k, 12, cfg) for k in (0, 6, 10)] == [6, 10, 12]
    with pytest.raises(ValueError, match="threshold"):  # a threshold, or a certificate's
        RunConfig(adaptive={"rule": "decision"})
    assert RunConfig(adaptive={"rule": "decision"}, certificate="cert.json").adaptive
    nested = RunConfig(sampling={"temperature": 1.0, "max_tokens": 32,
                                 "adaptive": {"rule": "consensus"}})
    assert nested.adaptive == AdaptiveConfig(rule="consensus")
    assert nested.sampling == RunConfig().sampling  # the request keys' parameters unchanged


@pytest.fixture
def config(tmp_path):
    return RunConfig(task="toy", n=16, m=16, limit=None, out=tmp_path / "full",
                     cache=tmp_path / "full.sqlite", bootstrap=0,
                     methods=["c3", "c3_cross", "self_consistency", "semantic_entropy"])


@pytest.mark.parametrize("rule", ["consensus", "interval"])
def test_live_adaptive_run_equals_its_replay(config, tmp_path, bow_embedder, rule) -> None:
    full_model = ScriptedModel(respond)
    run(config, model=full_model, embedder=bow_embedder, task=TASK, show_progress=False)
    calls = full_model.calls if hasattr(full_model, "calls") else None
    sim = simulate_adaptive(config.out, [rule], [0.3], model=full_model, embedder=bow_embedder,
                            task=TASK, n_resamples=50)
    if calls is not None:
        assert full_model.calls == calls  # the replay asked the model nothing
    point = sim.points[0]

    live_cfg = config.model_copy(update={
        "adaptive": AdaptiveConfig(rule=rule, epsilon=0.3 if rule == "interval" else None),
        "out": tmp_path / "live", "cache": tmp_path / "live.sqlite"})
    live = run(live_cfg, model=ScriptedModel(respond), embedder=bow_embedder, task=TASK,
               show_progress=False)
    by_id = {r.item.id: r for r in live.items}
    assert point.drawn == {i: (len(r.original), len(r.sets["perturbed"]))
                           for i, r in by_id.items()}
    assert point.items == len(TASK.items) and not point.not_replayable
    assert point.samples["original"][0] == sum(len(r.original) for r in live.items)
    assert point.samples["writer"][0] == live.stats["writer_candidates"]
    assert point.scores == {i: r.scores for i, r in by_id.items()}
    assert 0 < point.saved < 1
    # the easy item settles early in both stages (consensus: at the minimum); the coin
    # keeps drawing
    first = 4 if rule == "consensus" else 12
    assert len(by_id["easy"].original) == first
    assert len(by_id["easy"].sets["perturbed"]) == 4
    assert len(by_id["coin"].original) > first
    # an adaptive run's cache lacks the full sets of its settled items: a replay of it
    # invents nothing and names them
    again = simulate_adaptive(live_cfg.out, [rule], [0.3], model=ScriptedModel(respond),
                              embedder=bow_embedder, task=TASK, n_resamples=50, write=False)
    short = {i for i, drawn in point.drawn.items() if drawn != (16, 16)}
    assert short and set(again.points[0].not_replayable) == short
    files = sim.files
    assert files["figure"].is_file() and "ΔAUROC" in files["table"].read_text()
    data = json.loads(files["data"].read_text())
    assert data["points"][0]["rule"] == rule


def test_cli_flag_and_command(config, tmp_path, bow_embedder, capsys) -> None:
    from credo.cli import _parser
    from credo.cli.flags import RUN_FLAGS, config_from_flags

    args = _parser().parse_args(["run", "--adaptive", "decision", "--adaptive-threshold", "0.6"])
    cfg = config_from_flags(RunConfig, args, RUN_FLAGS)
    assert cfg.adaptive == AdaptiveConfig(rule="decision", threshold=0.6)
    assert config_from_flags(RunConfig, _parser().parse_args(["run"]), RUN_FLAGS).adaptive is None

    run(config, model=ScriptedModel(respond), embedder=bow_embedder, task=TASK,
        show_progress=False)
    # the command replays with the config's models: the scripted one is handed in here
    import credo.api as api

    real = api.simulate_adaptive

    def scripted(*a, **k):
        return real(*a, **k, model=ScriptedModel(respond), embedder=bow_embedder, task=TASK)

    api.simulate_adaptive = scripted
    try:
        from credo.cli import main

        assert main(["adaptive", str(config.out), "--epsilon", "0.2,0.4", "--threshold", "0.5",
                     "--bootstrap", "20"]) == 0
    finally:
        api.simulate_adaptive = real
    text = capsys.readouterr().out
    assert "consensus" in text and "decision" in text and "0.4" in text
    data = json.loads((config.out / "adaptive" / "adaptive.json").read_text())
    assert [(p["rule"], p["epsilon"]) for p in data["points"]] == [
        ("consensus", None), ("interval", 0.2), ("interval", 0.4), ("decision", None)]


def test_coverage_delta_pairs_the_splits() -> None:
    """Δ coverage at risk (adaptive − full) is the difference of the two runs' coverage on
    the same splits: zero for the same scores, and its mean equals the difference of the
    two :func:`coverage_at_risk` means (a second formula: the mean is linear)."""
    from types import SimpleNamespace

    import numpy as np

    from credo.evaluate.certify import coverage_at_risk
    from credo.pipeline.simulate import _coverage_deltas

    rng = np.random.default_rng(3)
    correct = rng.random(80) < 0.7
    good = np.clip(correct * 0.6 + rng.random(80) * 0.4, 0, 1)  # ranks the answers well
    noisy = rng.random(80)
    cfg = RunConfig(evaluation={"alphas": [0.1, 0.2], "delta": 0.1, "splits": 40})

    def items(scores):
        return [SimpleNamespace(scores={"m": float(s)}, answer_correct=float(c))
                for s, c in zip(scores, correct, strict=True)]

    same = _coverage_deltas("m", items(good), items(good), cfg)
    assert set(same) == {0.1, 0.2} and all(v == (0.0, 0.0, 0.0) for v in same.values())
    worse = _coverage_deltas("m", items(noisy), items(good), cfg)
    for alpha, (delta, low, high) in worse.items():
        a = coverage_at_risk(noisy, correct, alpha, 0.1, splits=40, seed=cfg.seed)
        f = coverage_at_risk(good, correct, alpha, 0.1, splits=40, seed=cfg.seed)
        assert delta == pytest.approx(a.coverage_mean - f.coverage_mean)
        assert f.coverage_mean == pytest.approx(np.mean(f.coverages))
        assert low - 1e-12 <= delta <= high + 1e-12
    assert worse[0.2][0] < 0  # losing the ranking loses coverage
    assert _coverage_deltas("m", items(good)[:5], items(good)[:5], cfg) == {}  # too few

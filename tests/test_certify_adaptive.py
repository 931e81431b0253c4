"""``credo certify --adaptive decision`` (issue 32, item 2): Learn then Test over the
decisions of a procedure replayed at each threshold. It reduces to ``certify`` when the
decisions are one fixed score's; its guarantee holds on synthetic data where the
procedure's stopping depends on the threshold; and its replay from the cache takes the
decisions a live adaptive run (and the gateway) takes, sample for sample."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from credo import RunConfig, certify, run
from credo.api import certify_adaptive
from credo.cli import main
from credo.errors import UserError
from credo.evaluate.certify import certify_procedure
from credo.models.scripted import ScriptedModel
from credo.serve.guard import Guard
from fault_server import FaultServer
from serve_helpers import SERVED_ANSWERS, answerer, calibrate_scripted, calibrate_served, coins


@given(
    data=st.lists(st.tuples(st.sampled_from([0.0, 0.2, 0.5, 0.7, 0.8, 0.9, 1.0]),
                            st.booleans()), min_size=2, max_size=150),
    method=st.sampled_from(["ltt", "fixed-sequence"]),
    alpha=st.sampled_from([0.1, 0.2, 0.3]),
    seed=st.integers(0, 5),
)
def test_fixed_decisions_give_certifys_threshold(data, method, alpha, seed) -> None:
    """With ``decide(t, idx) = (s >= t, wrong)`` the procedure is one fixed score
    thresholded, and the certificate is :func:`certify`'s (a second implementation)."""
    s = np.array([x for x, _ in data])
    ok = np.array([c for _, c in data])
    calls = []

    def decide(t, idx):
        calls.append(t)
        return s[idx] >= t, ~ok[idx]

    got = certify_procedure(s, ok, decide, alpha, 0.1, method, seed=seed)
    want = certify(s, ok, alpha, 0.1, method, seed=seed)
    assert got.threshold == want.threshold and got.p_value == want.p_value
    assert got.coverage == want.coverage and got.n_accepted == want.n_accepted
    assert got.risk == want.risk
    assert set(calls) <= set(s.tolist())  # only thresholds of the grid are run


def _procedure(bits: np.ndarray, answer_ok: np.ndarray, hasty: np.ndarray, t: float):
    """A synthetic adaptive procedure: item i's agreement bits are read in rounds of 4
    until the running mean is more than 1/sqrt(k) from ``t`` (or all 32 are read); the
    score is that mean; the answer is wrong when the item's is, and also when it stopped
    before 16 samples and the item is ``hasty`` (a short read picked a wrong answer).
    Far from ``t`` it stops early, so what it accepts, and how often that is wrong, both
    depend on ``t``: a low threshold accepts many hasty answers."""
    sizes = np.arange(4, 33, 4)
    means = np.cumsum(bits, axis=1)[:, sizes - 1] / sizes
    settled = np.abs(means - t) > 1 / np.sqrt(sizes)
    settled[:, -1] = True
    stop = settled.argmax(axis=1)
    score = means[np.arange(len(bits)), stop]
    return score >= t, ~answer_ok | ((sizes[stop] < 16) & hasty)


def test_the_guarantee_holds_on_synthetic_data() -> None:
    """Over 150 calibration draws, the procedure's true selective risk at the certified
    threshold (on 20,000 fresh items) exceeds alpha in at most delta of the draws (with
    three standard errors of slack); a threshold certified on the full recipe's scores
    alone, applied to the procedure, exceeds it far more often (the test can fail)."""
    rng = np.random.default_rng(7)
    alpha, delta, trials = 0.2, 0.1, 150

    def items(count: int):
        q = rng.beta(3.0, 1.2, count)
        return rng.random((count, 32)) < q[:, None], rng.random(count) < q, \
            rng.random(count) < 0.3

    fresh = items(20_000)

    def risk(t: float) -> float:
        accepted, wrong = _procedure(*fresh, t)
        return float(wrong[accepted].mean())

    violations, naive, certified = 0, 0, 0
    for _ in range(trials):
        bits, ok, hasty = items(300)
        full = bits.mean(axis=1)

        def decide(t, idx, bits=bits, ok=ok, hasty=hasty):
            return _procedure(bits[idx], ok[idx], hasty[idx], t)

        seed = int(rng.integers(1000))
        cert = certify_procedure(full, ok, decide, alpha, delta, "ltt", seed=seed)
        plain = certify(full, ok, alpha, delta, "ltt", seed=seed)
        naive += plain.threshold is not None and risk(plain.threshold) > alpha
        if cert.threshold is None:
            continue
        certified += 1
        violations += risk(cert.threshold) > alpha
    assert certified >= trials // 2  # the test has power: most draws certify something
    bound = delta + 3 * np.sqrt(delta * (1 - delta) / trials)
    assert violations / trials <= bound < naive / trials


@pytest.fixture(scope="module")
def scripted(tmp_path_factory):
    return calibrate_scripted(tmp_path_factory.mktemp("calib"), items=60, n=12)


def test_the_replay_takes_the_live_runs_decisions(scripted, tmp_path) -> None:
    """The decision rule at the certified threshold, live on a fresh cache (``credo run
    --adaptive decision --certificate``) and through the Guard, draws the samples and
    takes the accept decisions the replay from the full run's cache found."""
    made = certify_adaptive(scripted["run"], "self_consistency", alpha=0.2,
                            model=ScriptedModel(answerer), task=coins(60))
    replay = made.replay
    t = made.certificate.certificate.threshold
    assert t is not None and replay.accepted and replay.replays >= 2
    assert made.certificate.settings["adaptive"] == {
        "rule": "decision", "round": 4, "min": 4, "confidence": 0.95,
        "scores": ["self_consistency"]}
    live = run(RunConfig(task="gsm8k", n=12, limit=None, bootstrap=0,
                         methods=["self_consistency"], out=tmp_path / "live",
                         cache=tmp_path / "live.sqlite", adaptive={"rule": "decision"},
                         certificate=scripted["adaptive"]),
               model=ScriptedModel(answerer), task=coins(60), show_progress=False)
    assert live.config.adaptive.threshold == t
    assert {r.item.id: len(r.original) for r in live.items} == replay.drawn
    assert {r.item.id: bool(r.scores["self_consistency"] >= t) for r in live.items} == \
        replay.accepted
    with Guard(scripted["adaptive"], model=ScriptedModel(answerer),
               overrides={"cache": str(tmp_path / "guard.sqlite")}) as guard:
        import asyncio

        answers = asyncio.run(guard.ask_many([it.question for it in coins(60).items]))
    assert [a.accept for a in answers] == [replay.accepted[f"q{k}"] for k in range(60)]
    assert [a.samples for a in answers] == [replay.drawn[f"q{k}"] for k in range(60)]
    assert replay.sample_share < 1.0 and replay.agreement == 1.0
    # the certificate's coverage and risk are the procedure's own at t
    accepted = [i for i, a in replay.accepted.items() if a]
    assert made.certificate.certificate.coverage == pytest.approx(len(accepted) / 60)


def test_the_command_records_the_procedure_and_run_checks_it(tmp_path, capsys) -> None:
    with FaultServer(answers=SERVED_ANSWERS) as server:
        made = calibrate_served(tmp_path, server.url, items=40)
        out = capsys.readouterr().out
        assert "adaptive decision (rounds of 4 from 4, confidence 0.95)" in out
        assert "of the full recipe's samples" in out
        data = json.loads(made["adaptive"].read_text())
        assert data["settings"]["adaptive"]["rule"] == "decision"
        assert data["replay"]["items"] == 40
        questions = tmp_path / "q.jsonl"
        questions.write_text("".join(json.dumps({"question": f"Sam has {k}?"}) + "\n"
                                     for k in range(3)))
        base = ["run", "--task-file", str(questions), "--answer-format", "number", "--model",
                "openai:toy", "--base-url", server.url, "--methods", "self_consistency",
                "--n", "8", "--cache", str(tmp_path / "c.sqlite"), "--quiet",
                "--certificate", str(made["adaptive"])]
        before = server.requests
        assert main([*base, "--out", str(tmp_path / "full")]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "'s adaptive differs" in err
        assert server.requests == before
        assert main([*base, "--adaptive", "decision", "--out", str(tmp_path / "lean")]) == 0
    rows = [json.loads(x) for x in (tmp_path / "lean" / "answers.jsonl").read_text()
            .splitlines()]
    assert len(rows) == 3


def test_what_cannot_be_certified_is_one_line(scripted, tmp_path) -> None:
    with pytest.raises(UserError, match="certified by ltt or fixed-sequence"):
        certify_adaptive(scripted["run"], "self_consistency", procedure="sgr")
    with pytest.raises(UserError, match="the decision rule reads"):
        certify_adaptive(scripted["run"], "verbalized")
    with pytest.raises(UserError, match="round"):
        certify_adaptive(scripted["run"], "self_consistency", options={"round": 0})
    with pytest.raises(UserError, match=r"no config\.yaml"):
        certify_adaptive(tmp_path, "self_consistency")

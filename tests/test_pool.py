"""The model pool: each spec loaded once per pool, roles shared, what it loaded closed."""

from __future__ import annotations

import pytest

from credo import RunConfig, run
from credo.config import BaselineConfig, JudgeConfig
from credo.errors import UserError
from credo.generation.pool import GRADER, JUDGE, MODEL, WRITER, ModelPool
from credo.models import registry
from credo.models.scripted import ScriptedModel
from credo.types import GenerationRequest, Message
from test_baselines import MC, logprobs_for, responder


@pytest.fixture
def loads(monkeypatch):
    """Every model the registry builds for ``counted:<name>`` specs."""
    made: list[tuple[str, dict, ScriptedModel]] = []

    def factory(rest, **options):
        m = ScriptedModel(lambda messages, seed: "Yes", name=rest)
        made.append((rest, options, m))
        return m

    monkeypatch.setitem(registry._PREFIXES, "counted", factory)
    return made


def test_one_load_per_spec_and_options(tmp_path, loads):
    with ModelPool(cache_path=tmp_path / "c.sqlite", show_progress=False) as pool:
        pool.assign(MODEL, "counted:a", {"x": 1})
        pool.assign(WRITER, same_as=MODEL)
        pool.assign(JUDGE, "counted:b")
        pool.assign(GRADER, "counted:b")  # same spec, same options: the judge's model
        assert pool.model(WRITER) is pool.model(MODEL)
        assert pool.model(GRADER) is pool.model(JUDGE)
        assert pool.executor(GRADER) is pool.executor(JUDGE)
        assert [name for name, _, _ in loads] == ["a", "b"]
        assert loads[0][1] == {"x": 1}
        # nothing is loaded for a role nobody asked for
        pool.assign("unused", "counted:c")
    assert [name for name, _, _ in loads] == ["a", "b"]
    assert all(m.closed for _, _, m in loads)


def test_handed_in_models_win_and_stay_open(tmp_path, loads):
    mine = ScriptedModel(lambda messages, seed: "A")
    with ModelPool(cache_path=tmp_path / "c.sqlite", show_progress=False) as pool:
        pool.assign(MODEL, model=mine)
        pool.assign(MODEL, "counted:ignored")  # the first assignment stays
        assert pool.model(MODEL) is mine
        req = GenerationRequest(messages=(Message(role="user", content="hi"),))
        from credo.generation.executor import PlannedRequest

        pool.executor(MODEL).execute([PlannedRequest(req, 3)])
        assert pool.total("generated_samples") == 3
    assert not loads and not mine.closed


def test_unassigned_role_names_the_assigned_ones(tmp_path):
    with ModelPool(cache_path=tmp_path / "c.sqlite", show_progress=False) as pool:
        pool.assign(MODEL, model=ScriptedModel(lambda m, s: "A"))
        with pytest.raises(UserError, match=r"judge.*assigned: model"):
            pool.model(JUDGE)
        with pytest.raises(ValueError, match="give a model"):
            pool.assign(WRITER)


def test_ccp_and_the_judge_kernel_share_one_judge_model(tmp_path, bow_embedder, monkeypatch):
    """CCP's NLI step and the judge kernel both ask ``judge.model``: loaded once, closed."""
    made: list[ScriptedModel] = []

    def factory(rest, **options):
        made.append(ScriptedModel(lambda messages, seed: "Yes"))
        return made[-1]

    monkeypatch.setitem(registry._PREFIXES, "judge-once", factory)
    cfg = RunConfig(task="toy", n=3, m=3, limit=None, bootstrap=0, methods=["ccp", "c3@judge"],
                    judge=JudgeConfig(model="judge-once:x"),
                    baselines=BaselineConfig(followups=1),
                    out=tmp_path / "run", cache=tmp_path / "c.sqlite")
    result = run(cfg, model=ScriptedModel(responder, logprobs_fn=logprobs_for),
                 embedder=bow_embedder, task=MC, show_progress=False)
    assert len(made) == 1 and made[0].closed
    assert made[0].calls > 0  # NLI verdicts and answer pairs, one server
    assert result.stats["judge_pairs_unique"] > 0 and result.stats["samples_nli"] > 0

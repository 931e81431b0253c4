"""``credo strength run`` through the stage driver (issue 31): its dry run counts the
requests of every stage, the budget stops it, failed requests leave it incomplete (exit
3, ``run_status.json``) and a rerun (or a killed run's rerun) asks only what is missing.
"""

from __future__ import annotations

import json

import pytest

from credo.api import dry_run_strength, run_strength
from credo.cli import main
from credo.config import StrengthConfig
from credo.models.scripted import ScriptedModel
from credo.pipeline.ending import Outcome
from credo.strength.answers import ANSWER_PREFIX
from credo.types import GenerationError
from test_strength import _letters, _respond, _word_logprobs

STAGES = ["chains of thought", "input perturbations", "CoT perturbations", "answer letters",
          "strength judge", "surprisal"]


class Flaky(ScriptedModel):
    """A scripted model whose letter requests about ``marker`` fail (after retries)."""

    def __init__(self, *args, marker: str = "", stop_after: int | None = None, **kw):
        super().__init__(*args, **kw)
        self.marker = marker
        self.stop_after = stop_after

    def generate(self, requests):
        for index, request in enumerate(requests):
            if self.stop_after is not None and self.calls >= self.stop_after:
                raise KeyboardInterrupt  # the run is killed mid-call
            text = request.messages[0].content
            if self.marker and self.marker in text and request.messages[-1].content.endswith(
                    ANSWER_PREFIX):
                yield index, GenerationError("server error 500", index)
                continue
            yield from ((index, g) for _, g in super().generate([request]))


def _world(monkeypatch, bow_embedder, **flaky):
    made: list[ScriptedModel] = []

    def load(spec, **options):
        if spec.startswith("forced:"):
            return ScriptedModel(lambda m, s: m[-1].content, name="scorer",
                                 logprobs_fn=_word_logprobs)
        m = Flaky(_respond, name=spec, logprobs_fn=_letters, **flaky)
        made.append(m)
        return m

    monkeypatch.setattr("credo.models.registry.load_model", load)
    monkeypatch.setattr("credo.models.embedders.load_embedder", lambda name: bow_embedder)
    return made


def _args(tmp_path, *extra):
    return ["strength", "run", "--task", "mmlu:high_school_statistics", "--limit", "5",
            "--model", "scripted-a", "--out", str(tmp_path / "run"), "--cache",
            str(tmp_path / "c.sqlite"), "--quiet", *extra]


def _ledger(tmp_path) -> dict:
    return json.loads((tmp_path / "run" / "summary.json").read_text())["ledger"]["stages"]


def test_the_dry_run_counts_every_stage_and_calls_no_model(
    tmp_path, monkeypatch, bow_embedder, capsys
):
    made = _world(monkeypatch, bow_embedder)
    assert main(_args(tmp_path, "--dry-run")) == 0
    out = capsys.readouterr().out
    assert "no model called" in out
    assert all(m.calls == 0 for m in made)
    for stage in STAGES:
        assert f"\n{stage} " in out, stage
    assert not (tmp_path / "run").exists()

    cfg = StrengthConfig(task="mmlu:high_school_statistics", limit=5, models=["scripted-a"],
                         out=tmp_path / "run", cache=tmp_path / "c.sqlite")
    fresh = {s.stage: s for s in dry_run_strength(cfg).stages}
    assert fresh["chains of thought"].basis == "planned"
    assert fresh["chains of thought"].requests == 5
    assert fresh["chains of thought"].cached_samples == 0
    assert fresh["input perturbations"].basis == "estimated"  # on placeholder CoTs

    # the real run's ledger asks exactly what the dry run planned for its first stage
    assert main(_args(tmp_path)) == 0
    ledger = _ledger(tmp_path)
    assert list(ledger) == STAGES
    assert ledger["chains of thought"]["requests"] == fresh["chains of thought"].requests

    # after the run every stage is planned from the cache: what the run asked, all cached
    again = {s.stage: s for s in dry_run_strength(cfg).stages}
    assert list(again) == STAGES
    for stage in STAGES:
        est = again[stage]
        assert est.basis == "planned", stage
        assert est.requests == ledger[stage]["requests"], stage
        assert est.samples == ledger[stage]["samples"], stage
        assert est.cached_samples == est.samples and est.calls == 0, stage


def test_the_cost_budget_stops_the_run_and_a_rerun_resumes(tmp_path, monkeypatch, bow_embedder):
    made = _world(monkeypatch, bow_embedder)
    priced = {"model": "scripted-a", "price_prompt_usd_per_mtok": 1e4,
              "price_completion_usd_per_mtok": 1e4}
    cfg = StrengthConfig(task="mmlu:high_school_statistics", limit=5, models=[priced],
                         out=tmp_path / "run", cache=tmp_path / "c.sqlite", max_cost_usd=0.5,
                         max_block=1)
    result = run_strength(cfg, show_progress=False)
    assert result.outcome is Outcome.INCOMPLETE_BUDGET and result.stopped_by_budget
    assert result.incomplete and all(k.startswith("scripted-a/") for k in result.incomplete)
    assert not {r.item_id for r in result.rows} & {k.split("/", 1)[1] for k in result.incomplete}
    status = json.loads((tmp_path / "run" / "run_status.json").read_text())
    assert status["status"] == "incomplete" and status["outcome"] == "incomplete-budget"
    assert status["stopped_by_budget"] is True
    asked = made[-1].calls

    done = run_strength(cfg.model_copy(update={"max_cost_usd": None}), show_progress=False)
    assert done.outcome is Outcome.COMPLETE and not done.incomplete
    full = tmp_path / "full"
    whole = run_strength(cfg.model_copy(update={"max_cost_usd": None, "cache": full / "c.sqlite",
                                                 "out": full}), show_progress=False)
    # the stopped run and its resumption together asked what one uninterrupted run asks
    assert asked + made[-2].calls == made[-1].calls
    assert [r.as_dict() for r in done.rows] == [r.as_dict() for r in whole.rows]


def test_failed_requests_exit_3_with_the_marker_and_a_rerun_completes(
    tmp_path, monkeypatch, bow_embedder, capsys
):
    from credo.tasks.builtin import load_task

    victim = load_task("mmlu:high_school_statistics").items[1]
    _world(monkeypatch, bow_embedder, marker=victim.question[:40])
    assert main(_args(tmp_path)) == 3
    assert "requests failed" in capsys.readouterr().err
    status = json.loads((tmp_path / "run" / "run_status.json").read_text())
    assert status["status"] == "incomplete" and status["outcome"] == "incomplete-failures"
    assert list(status["incomplete"]) == [f"scripted-a/{victim.id}"]
    assert "answer letters" in status["incomplete"][f"scripted-a/{victim.id}"]
    rows = [json.loads(x) for x in (tmp_path / "run" / "strengths.jsonl").read_text().split("\n")
            if x]
    assert rows and victim.id not in {r["item_id"] for r in rows}

    made = _world(monkeypatch, bow_embedder)  # the server is back
    assert main(_args(tmp_path)) == 0
    status = json.loads((tmp_path / "run" / "run_status.json").read_text())
    assert status["status"] == "complete"
    ledger = _ledger(tmp_path)
    # only the failed item's letters (and the ratings its rows did not get) were asked;
    # its CoT and perturbations, and every other item, came from the cache
    asked = ledger["answer letters"]["generated_samples"] + ledger["strength judge"][
        "generated_samples"]
    assert asked == made[-1].calls > 0
    assert ledger["answer letters"]["generated_samples"] == 4  # its 2 rows, before and after
    assert all(ledger[s]["generated_samples"] == 0 for s in STAGES[:3])


@pytest.mark.parametrize("stop_after", [3, 9])
def test_a_killed_run_resumes_from_the_cache(tmp_path, monkeypatch, bow_embedder, stop_after):
    made = _world(monkeypatch, bow_embedder, stop_after=stop_after)
    with pytest.raises(KeyboardInterrupt):
        main(_args(tmp_path))
    assert made[-1].calls == stop_after
    made = _world(monkeypatch, bow_embedder)
    assert main(_args(tmp_path)) == 0
    resumed = made[-1].calls
    made = _world(monkeypatch, bow_embedder)
    other = tmp_path / "other"
    other.mkdir()
    assert main(_args(other)) == 0
    assert stop_after + resumed == made[-1].calls  # no request asked twice

"""Issue 22 item 2: every stage that asks a model plans its requests with one function
that the run and the dry run share, so the dry run's planned counts are what a run asks
(estimated stages bound it), and the ledger counts what the server itself counted,
the served model's probe included."""

from __future__ import annotations

import pytest

from conftest import BagOfWordsEmbedder, context_writer, sums_task_file
from credo import RunConfig, run
from credo.api import dry_run
from credo.generation.pool import PROBE_STAGE
from credo.models.scripted import ScriptedModel
from credo.tasks.base import AnswerFormat, Item, Task
from credo.tasks.factual import SIMPLEQA
from fault_server import FaultServer
from test_baselines import MC, logprobs_for, responder
from test_ledger import FAST, _Refuses, _served_config, _served_totals
from test_runner import TASK

COUNTS = ("requests", "samples", "calls")


def _ledger_counts(result, stage: str) -> dict[str, int]:
    entry = result.ledger["stages"][stage]
    return {k: entry[k] for k in COUNTS}


def _estimate_counts(est, stage: str) -> dict[str, int]:
    s = next(s for s in est.stages if s.stage == stage)
    return {k: getattr(s, k) for k in COUNTS}


def _baselines_run(tmp_path, bow_embedder, **extra):
    cfg = RunConfig(
        task="toy", n=4, m=3, limit=None, bootstrap=0, out=tmp_path / "run",
        cache=tmp_path / "c.sqlite", kernel="judge",
        methods=["c3", "label_prob", "answer_consistency", "paraphrase", "verbalized"],
        baselines={"paraphrases": 2, "apricot_samples": 2}, **extra,
    )
    est = dry_run(cfg, model=_Refuses(responder, logprobs_fn=logprobs_for), task=MC)
    judge = ScriptedModel(lambda messages, seed: "No", name="judge")
    result = run(cfg, model=ScriptedModel(responder, logprobs_fn=logprobs_for), judge=judge,
                 embedder=bow_embedder, task=MC, show_progress=False, write=False)
    return est, result


@pytest.fixture(scope="module")
def baselines(tmp_path_factory):
    return _baselines_run(tmp_path_factory.mktemp("plans"), BagOfWordsEmbedder())


@pytest.mark.parametrize("stage", ["original", "label", "apricot", "paraphrase writing"])
def test_a_planned_stage_asks_what_the_dry_run_planned(baselines, stage):
    est, result = baselines
    assert next(s for s in est.stages if s.stage == stage).basis == "planned"
    assert _ledger_counts(result, stage) == _estimate_counts(est, stage)


def test_the_writers_first_round_is_what_the_dry_run_planned(baselines):
    est, result = baselines
    rounds = {p.candidates for p in result.perturbation_sets.values()}
    writing = _ledger_counts(result, "perturbation writing")
    planned = _estimate_counts(est, "perturbation writing")
    if rounds == {5}:  # every item had its m prefixes after round 1 (1.5 m candidates)
        assert writing == planned
    else:
        assert writing["samples"] > planned["samples"]


@pytest.mark.parametrize("stage", ["perturbed", "paraphrased", "verbalized", "judge pairs"])
def test_an_estimated_stage_is_marked_and_bounds_the_run(baselines, stage):
    est, result = baselines
    s = next(s for s in est.stages if s.stage == stage)
    assert s.basis == "estimated" and s.cached_samples is None
    asked = _ledger_counts(result, stage)
    assert all(asked[k] <= getattr(s, k) for k in COUNTS), (asked, s)


def test_the_judge_pairs_bound_is_reached_by_all_distinct_answers(tmp_path, bow_embedder):
    """Every sample a different answer: the run asks the judge exactly the dry run's pairs."""
    distinct = Task("spread", (Item("q", "Name a number.", "1"),), TASK.format, TASK.domain)

    def answers(messages, seed):
        if messages[0].content.startswith("You write one"):
            return context_writer(messages, seed)
        return f"The answer is {seed}."

    cfg = RunConfig(task="toy", n=4, m=3, limit=None, bootstrap=0, out=tmp_path / "run",
                    cache=tmp_path / "c.sqlite", kernel="judge", methods=["c3"])
    est = dry_run(cfg, model=_Refuses(answers), task=distinct)
    judge = ScriptedModel(lambda messages, seed: "No", name="judge")
    result = run(cfg, model=ScriptedModel(answers), judge=judge, embedder=bow_embedder,
                 task=distinct, show_progress=False, write=False)
    assert result.stats["judge_pairs_unique"] == 7 * 6 // 2
    assert _ledger_counts(result, "judge pairs") == _estimate_counts(est, "judge pairs")


def test_simpleqa_grading_is_planned_by_the_grader(tmp_path, bow_embedder):
    items = tuple(
        Item(f"q{k}", f"Who wrote book {k}?", f"Author {k}", meta={"grader": SIMPLEQA})
        for k in range(3)
    )
    task = Task("facts", items, AnswerFormat.SHORT_TEXT, "factual recall")
    cfg = RunConfig(task="toy", n=3, m=2, limit=None, bootstrap=0, out=tmp_path / "run",
                    cache=tmp_path / "c.sqlite", methods=["self_consistency"])

    def answers(messages, seed):
        return f"Someone {seed}"  # never the gold: every sample needs the grader

    est = dry_run(cfg, model=_Refuses(answers), task=task)
    grader = ScriptedModel(lambda messages, seed: "B", name="grader")
    result = run(cfg, model=ScriptedModel(answers), judge=grader, embedder=bow_embedder,
                 task=task, show_progress=False, write=False)
    assert next(s for s in est.stages if s.stage == "grading").basis == "estimated"
    assert _ledger_counts(result, "grading") == _estimate_counts(est, "grading")


def test_the_ledger_equals_the_servers_own_usage_probe_included(tmp_path, bow_embedder):
    with FaultServer() as server:
        cfg = _served_config(tmp_path, server.url, "probed")
        options = {k: v for k, v in cfg.model_options.items() if k != "probe"}
        cfg = cfg.model_copy(update={"model_options": options})
        est = dry_run(cfg, writer=ScriptedModel(context_writer))
        assert server.requests == 0
        result = run(cfg, writer=ScriptedModel(context_writer), embedder=bow_embedder,
                     show_progress=False, write=False)
        usage = dict(server.usage)
    stages = result.ledger["stages"]
    assert stages[PROBE_STAGE]["models"] == [result.model_identity]
    assert stages[PROBE_STAGE]["calls"] > 0 and stages[PROBE_STAGE]["cost_usd"] > 0
    assert _served_totals(result.ledger, result.model_identity) == {
        "calls": usage["replies"],
        "prompt_tokens": usage["prompt_tokens"],
        "completion_tokens": usage["completion_tokens"],
    }
    probe = next(s for s in est.stages if s.stage == PROBE_STAGE)
    assert probe.basis == "estimated" and probe.model == result.model_identity
    assert stages[PROBE_STAGE]["requests"] <= probe.requests
    assert stages[PROBE_STAGE]["completion_tokens"] <= probe.completion_tokens
    # once stored, the dry run plans no probe either
    assert PROBE_STAGE not in {s.stage for s in dry_run(cfg).stages}

    # the probe is stored: a second run sends none and counts none
    with FaultServer(port=server.port) as again:
        second = run(cfg, writer=ScriptedModel(context_writer), embedder=bow_embedder,
                     show_progress=False, write=False)
        assert again.served == 0
    assert PROBE_STAGE not in second.ledger["stages"]


def test_a_served_task_file_run_plans_its_original_samples(tmp_path):
    """The dry run against a server sends nothing and plans what the run then asks."""
    task = f"file:gsm8k:{sums_task_file(tmp_path, 4)}"
    with FaultServer() as server:
        cfg = RunConfig(task=task, model="openai:toy", n=3, limit=None, bootstrap=0,
                        methods=["self_consistency"], max_block=2,
                        model_options={"base_url": server.url, "probe": False, **FAST},
                        out=tmp_path / "run", cache=tmp_path / "c.sqlite")
        est = dry_run(cfg)
        assert server.requests == 0
        result = run(cfg, show_progress=False, write=False)
    assert _ledger_counts(result, "original") == _estimate_counts(est, "original")


@pytest.mark.parametrize("knowledge", [True, False])
def test_a_factscore_dry_run_counts_its_claim_checks(tmp_path, bow_embedder, knowledge):
    """Issue 31: the claim checks are a planned stage (credo.tasks.longform.ClaimCheckStage),
    so the dry run counts them: one per sentence of each original sample, on placeholder
    biographies of max_tokens tokens in 20-token sentences; a run asks at most that."""
    from credo.tasks.longform import load_factscore_task
    from test_open_runs import bio_respond

    names = tmp_path / "entities.txt"
    names.write_text("Ada Lovelace\nAlan Turing\n", encoding="utf-8")
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "Ada Lovelace.txt").write_text("Ada Lovelace was born in 1815.", encoding="utf-8")
    task = load_factscore_task(names, kb if knowledge else None)
    cfg = RunConfig(task="factscore", n=4, m=3, limit=None, kernel="embedding", bootstrap=0,
                    methods=["c3"], out=tmp_path / "run", cache=tmp_path / "c.sqlite",
                    sampling={"max_tokens": 100})
    est = dry_run(cfg, model=_Refuses(bio_respond), task=task)
    claims = next(s for s in est.stages if s.stage == "claims checking")
    assert claims.basis == "estimated" and claims.role == "grader"
    with_knowledge = 2 if knowledge else 0  # Alan Turing has no file: checked on no passage
    assert claims.requests == claims.samples == with_knowledge * cfg.n * (100 // 20)
    assert claims.calls == claims.requests
    assert (claims.prompt_tokens > 0) == knowledge
    result = run(cfg, model=ScriptedModel(bio_respond), embedder=bow_embedder, task=task,
                 show_progress=False, write=False)
    asked = result.ledger["stages"].get("claims checking", {"requests": 0})["requests"]
    assert asked == result.stats.get("factscore_claims_checked", 0) <= claims.requests
    assert (asked > 0) == knowledge

"""Issue 13 part 5: the ledger (requests, samples, reported tokens and cost per stage),
``credo run --dry-run`` (no model called) and the cost budget ``max_cost_usd``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import context_writer, sums_task_file
from credo import RunConfig, run
from credo.api import dry_run
from credo.cli import main
from credo.errors import UserError
from credo.generation.executor import BudgetReached, Executor, PlannedRequest
from credo.generation.ledger import Ledger, Prices, split_prices
from credo.generation.pool import JUDGE, MODEL, WRITER, ModelPool
from credo.generation.store import GenerationStore
from credo.models import registry
from credo.models.openai_requests import share_completion_tokens as _share_completion_tokens
from credo.models.scripted import ScriptedModel
from credo.types import Capabilities, Generation, GenerationRequest, Message
from fault_server import FaultServer
from test_baselines import MC, logprobs_for, responder
from test_runner import TASK, respond

PRICES = {"price_prompt_usd_per_mtok": 2.0, "price_completion_usd_per_mtok": 8.0}
FAST = {"retry_backoff": 0.001, "max_retries": 2, "max_concurrency": 2}


def _req(text: str = "hi", max_tokens: int = 8) -> GenerationRequest:
    from credo.types import SamplingParams

    return GenerationRequest(
        messages=(Message(role="user", content=text),),
        params=SamplingParams(max_tokens=max_tokens),
    )


# --------------------------------------------------------------------------- prices


def test_split_prices_takes_the_price_options_out():
    rest, prices = split_prices({"base_url": "u", **PRICES})
    assert rest == {"base_url": "u"} and prices == Prices(2.0, 8.0)
    assert split_prices({"base_url": "u"}) == ({"base_url": "u"}, None)
    assert split_prices({"price_completion_usd_per_mtok": 1})[1] == Prices(0.0, 1.0)
    assert Prices(2.0, 8.0).cost(1_000_000, 500_000) == pytest.approx(6.0)
    for bad in (-1, "cheap", float("nan"), True):
        with pytest.raises(UserError, match="price_prompt_usd_per_mtok"):
            split_prices({"price_prompt_usd_per_mtok": bad}, "model_options")


def test_prices_never_reach_the_backend_nor_its_identity(tmp_path, monkeypatch):
    made: list[dict] = []

    def factory(rest, **options):
        made.append(options)
        return ScriptedModel(lambda messages, seed: "ok", name=rest)

    monkeypatch.setitem(registry._PREFIXES, "counted", factory)
    with ModelPool(cache_path=tmp_path / "c.sqlite", show_progress=False) as pool:
        pool.assign(MODEL, "counted:a", {"x": 1, **PRICES})
        pool.assign(WRITER, same_as=MODEL)
        pool.assign(JUDGE, "counted:a", {"x": 1})  # the same backend, its prices
        assert pool.model(JUDGE) is pool.model(MODEL)
        assert made == [{"x": 1}]
        assert pool.prices(WRITER) == Prices(2.0, 8.0)
        pool.executor(WRITER).execute([PlannedRequest(_req(), 2)], "writing")
        ledger = pool.ledger.to_dict()
    assert ledger["prices"] == {
        "scripted:a": {"prompt_usd_per_mtok": 2.0, "completion_usd_per_mtok": 8.0}
    }
    assert ledger["stages"]["writing"]["cost_usd"] > 0


def test_a_model_priced_twice_differently_is_a_user_error(tmp_path):
    model = ScriptedModel(lambda messages, seed: "ok")
    with ModelPool(cache_path=tmp_path / "c.sqlite", show_progress=False) as pool:
        pool.assign(MODEL, model=model)
        pool.assign(MODEL, "ignored", PRICES)  # a model handed in takes the config's prices
        pool.assign(JUDGE, model=model)
        pool.assign(JUDGE, "ignored", {"price_prompt_usd_per_mtok": 5.0})
        assert pool.prices(MODEL) == Prices(2.0, 8.0)
        pool.executor(MODEL)
        with pytest.raises(UserError, match="two prices"):
            pool.executor(JUDGE)


def test_prices_and_budget_change_no_request_key(tmp_path, bow_embedder):
    keys = []
    for name, extra in (("plain", {}), ("priced", {"model_options": PRICES,
                                                   "max_cost_usd": 1000.0})):
        cfg = RunConfig(task="toy", n=3, m=3, limit=None, bootstrap=0, out=tmp_path / name,
                        cache=tmp_path / f"{name}.sqlite", **extra)
        run(cfg, model=ScriptedModel(respond), embedder=bow_embedder, task=TASK,
            show_progress=False)
        with GenerationStore(cfg.cache_path) as store:
            keys.append(sorted(r[0] for r in store._db.execute("SELECT key FROM requests")))
    assert keys[0] == keys[1] and keys[0]


# --------------------------------------------------------------------------- counting


class _Unparallel(ScriptedModel):
    """A scripted backend that makes one call per sample (no ``n``)."""

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(parallel_samples=False)


@pytest.mark.parametrize("parallel", [True, False])
def test_prompt_tokens_count_once_per_backend_call(tmp_path, parallel):
    model = (ScriptedModel if parallel else _Unparallel)(lambda messages, seed: "a b c")
    with GenerationStore(tmp_path / "c.sqlite") as store:
        ex = Executor(model, store, max_block=4, show_progress=False)
        ex.execute([PlannedRequest(_req("one two three"), 6)], "sampling", stage="original")
        ex.execute([PlannedRequest(_req("one two three"), 8)], "sampling", stage="original")
        u = ex.ledger.usage("original", model.identity)
    # 6 samples in blocks of 4 + 2, then 2 more; 3 prompt words per call, 3 words each
    calls = 3 if parallel else 8
    assert (u.requests, u.samples, u.cached_samples, u.generated_samples) == (2, 14, 6, 8)
    assert (u.calls, u.prompt_tokens, u.completion_tokens) == (calls, 3 * calls, 3 * 8)


def test_stage_of_a_request_of_the_call_of_the_pipeline_or_the_description(tmp_path):
    model = ScriptedModel(lambda messages, seed: "x")
    with GenerationStore(tmp_path / "c.sqlite") as store:
        ex = Executor(model, store, show_progress=False)
        ex.execute([PlannedRequest(_req("a"), 1)], "described")
        with ex.ledger.stage("outer"):
            ex.execute([PlannedRequest(_req("b"), 1)], "described")
            ex.execute([PlannedRequest(_req("c"), 1)], "described", stage="named")
            ex.execute([PlannedRequest(_req("d"), 1, stage="own")], "described", stage="named")
    assert list(ex.ledger.to_dict()["stages"]) == ["described", "outer", "named", "own"]


def test_completion_tokens_of_an_n_reply_add_up_to_its_usage():
    def gen(tokens: int) -> Generation:
        return Generation("t", completion_tokens=tokens)

    shared = _share_completion_tokens([gen(8), gen(-1), gen(-1), gen(-1)], 20)
    assert [g.completion_tokens for g in shared] == [8, 4, 4, 4]
    shared = _share_completion_tokens([gen(-1), gen(-1), gen(-1)], 10)
    assert [g.completion_tokens for g in shared] == [4, 3, 3]
    # a server that counts less than the known choices: nothing negative
    assert [g.completion_tokens for g in _share_completion_tokens([gen(9), gen(-1)], 4)] == [9, 0]


# --------------------------------------------------------------------------- served runs


def _served_config(
    tmp: Path, url: str, name: str, methods: tuple[str, ...] = ("c3", "verbalized", "p_true"),
    **extra,
) -> RunConfig:
    return RunConfig(
        task=f"file:gsm8k:{sums_task_file(tmp, 6)}", model="openai:toy", n=4, m=3, limit=None,
        bootstrap=0, methods=list(methods),
        # no server probe: its handful of requests is not a stage of the run's ledger
        baselines={"logprobs": 0},
        model_options={"base_url": url, "probe": False, **FAST, **PRICES},
        max_block=2, out=tmp / name / "run", cache=tmp / name / "cache.sqlite", **extra,
    )


def _served_totals(ledger: dict, identity: str) -> dict[str, int]:
    keys = ("calls", "prompt_tokens", "completion_tokens")
    out = dict.fromkeys(keys, 0)
    for entry in ledger["stages"].values():
        if entry["models"] == [identity]:
            for k in keys:
                out[k] += entry[k]
    return out


def test_the_ledger_counts_what_the_server_reported(tmp_path, bow_embedder):
    with FaultServer() as server:
        cfg = _served_config(tmp_path, server.url, "a")
        result = run(cfg, writer=ScriptedModel(context_writer), embedder=bow_embedder,
                     show_progress=False)
        usage = dict(server.usage)
    ledger = json.loads((cfg.out / "metrics.json").read_text())["stats"]["ledger"]
    assert ledger == json.loads(json.dumps(result.ledger))
    identity = result.model_identity
    assert _served_totals(ledger, identity) == {
        "calls": usage["replies"],
        "prompt_tokens": usage["prompt_tokens"],
        "completion_tokens": usage["completion_tokens"],
    }
    stages = ledger["stages"]
    assert list(stages) == ["original", "perturbation writing", "perturbed", "p_true",
                            "verbalized"]
    assert stages["perturbation writing"]["models"] == ["scripted:scripted"]
    assert stages["perturbation writing"]["cost_usd"] is None  # the writer is unpriced
    original = stages["original"]
    assert (original["requests"], original["samples"], original["calls"]) == (6, 24, 12)
    expected = (usage["prompt_tokens"] * 2.0 + usage["completion_tokens"] * 8.0) / 1e6
    assert ledger["total"]["cost_usd"] == pytest.approx(expected)
    assert sum(s["cost_usd"] or 0 for s in stages.values()) == pytest.approx(expected)
    report = (cfg.out / "report.md").read_text()
    assert "## Ledger" in report and "| original | openai:" in report
    html = (cfg.out / "report.html").read_text()
    assert "<h2>Ledger</h2>" in html and "perturbation writing" in html

    # a rerun reads everything from the cache: no call, no token, no cost
    with FaultServer(port=server.port) as again:
        second = run(cfg, writer=ScriptedModel(context_writer), embedder=bow_embedder,
                     show_progress=False)
        assert again.served == 0
    total = second.ledger["total"]
    assert total["calls"] == total["prompt_tokens"] == total["cost_usd"] == 0
    assert total["cached_samples"] == total["samples"] == ledger["total"]["samples"]


class _Refuses(ScriptedModel):
    """A model that must not be called."""

    def generate(self, requests):
        raise AssertionError("the dry run called the model")


def test_dry_run_calls_no_model_and_counts_the_cache(tmp_path, bow_embedder):
    cfg = RunConfig(task="toy", n=4, m=3, limit=None, bootstrap=0, out=tmp_path / "run",
                    cache=tmp_path / "c.sqlite", methods=["c3", "verbalized"],
                    model_options=PRICES)
    est = dry_run(cfg, model=_Refuses(respond), task=TASK)
    by = {s.stage: s for s in est.stages}
    assert list(by) == ["original", "perturbation writing", "perturbed", "verbalized"]
    assert (by["original"].requests, by["original"].samples, by["original"].cached_samples) == (
        4, 16, 0)
    assert by["original"].completion_tokens == 16 * cfg.sampling.max_tokens
    assert by["original"].prompt_tokens > 0 and by["original"].cost_usd > 0
    assert by["perturbation writing"].samples == 4 * 5  # round 1: 1.5 m per item
    assert by["perturbed"].samples == 4 * 3 and by["perturbed"].cached_samples is None
    assert by["verbalized"].basis == "estimated" and by["verbalized"].requests == 4 * 4
    assert not (tmp_path / "run").exists()

    run(cfg, model=ScriptedModel(respond), embedder=bow_embedder, task=TASK,
        show_progress=False)
    again = {s.stage: s for s in dry_run(cfg, model=_Refuses(respond), task=TASK).stages}
    assert again["original"].cached_samples == 16 and again["original"].calls == 0
    assert again["original"].cost_usd == 0
    assert again["perturbation writing"].cached_samples == 4 * 5


def test_cli_dry_run_sends_no_request(tmp_path, capsys):
    with FaultServer() as server:
        code = main(["run", "--dry-run", "--model", "openai:toy", "--base-url", server.url,
                     "--task", f"file:gsm8k:{sums_task_file(tmp_path, 6)}",
                     "--n", "5", "--m", "4", "--methods", "c3,p_true", "--kernel", "judge",
                     "--out", str(tmp_path / "run"), "--cache", str(tmp_path / "c.sqlite")])
        assert code == 0
        assert server.requests == server.model_listings == 0
    out = capsys.readouterr().out
    for stage in ("original", "perturbation writing", "perturbed", "p_true", "judge pairs",
                  "total", "no model called"):
        assert stage in out
    assert not (tmp_path / "run").exists()


UNPERTURBED = ("self_consistency", "verbalized", "p_true")
"""Methods that need no perturbation writer or embedder (a CLI run builds the real ones)."""


@pytest.mark.parametrize("share", [0.8, 0.01])
def test_the_budget_stops_the_run_and_a_rerun_resumes(tmp_path, bow_embedder, capsys, share):
    with FaultServer() as server:
        full = run(_served_config(tmp_path, server.url, "full", UNPERTURBED),
                   show_progress=False)
        cost = full.ledger["total"]["cost_usd"]
        served_full = server.served
        capped = _served_config(tmp_path, server.url, "capped", UNPERTURBED,
                                max_cost_usd=cost * share)
        yaml_cfg = tmp_path / "capped.yaml"
        yaml_cfg.write_text(json.dumps(capped.model_dump(mode="json")))
        args = ["run", "--config", str(yaml_cfg), "--quiet"]

        before = server.served
        assert main(args) == 3
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "cost budget reached" in err[0] and "rerun" in err[0]
        status = json.loads((capped.out / "run_status.json").read_text())
        metrics = json.loads((capped.out / "metrics.json").read_text())
        ledger = metrics["stats"]["ledger"]
        assert status["status"] == "incomplete" and status["stopped_by_budget"]
        assert ledger["budget_reached"] and ledger["stopped_by_budget"]
        assert cost * share <= ledger["total"]["cost_usd"] < cost
        assert 0 < server.served - before < served_full
        assert "cost budget" in (capped.out / "report.md").read_text()

        more = tmp_path / "more.yaml"
        more.write_text(json.dumps({**capped.model_dump(mode="json"), "max_cost_usd": 10.0}))
        resumed_from = server.served
        assert main(["run", "--config", str(more), "--quiet"]) == 0
        metrics = json.loads((capped.out / "metrics.json").read_text())
        ledger = metrics["stats"]["ledger"]
        assert metrics["items"] == 6 and "incomplete" not in metrics
        assert not ledger["stopped_by_budget"]
        # only what the capped run left was asked: together they made the full run's calls
        assert server.served - resumed_from == ledger["total"]["calls"]
        assert (server.served - before) == served_full
        assert ledger["total"]["cached_samples"] > 0


def test_an_executor_past_the_budget_dispatches_nothing(tmp_path):
    model = ScriptedModel(lambda messages, seed: "a b c d")
    ledger = Ledger(max_cost_usd=1e-6)
    ledger.set_prices(model.identity, Prices(0.0, 1.0))  # 1 USD per million tokens
    with GenerationStore(tmp_path / "c.sqlite") as store:
        ex = Executor(model, store, max_block=1, show_progress=False, ledger=ledger)
        ex.execute([PlannedRequest(_req(), 1)])  # 4 tokens: 4e-6 USD, past the budget
        assert ledger.budget_reached and not ledger.stopped
        with pytest.raises(BudgetReached, match="cost budget reached") as caught:
            ex.execute([PlannedRequest(_req(), 3), PlannedRequest(_req("other"), 1)])
    assert caught.value.failed == [0, 1] and model.samples == 1
    assert ledger.stopped and ex.history[-1].budget_skipped == 3


def test_every_stage_of_a_baselines_run_is_planned_or_estimated(tmp_path):
    cfg = RunConfig(
        task="toy", n=4, m=3, limit=None, bootstrap=0, out=tmp_path / "run",
        cache=tmp_path / "c.sqlite", kernel="judge",
        methods=["c3", "label_prob", "answer_consistency", "paraphrase", "ccp"],
        baselines={"paraphrases": 3, "apricot_samples": 2},
    )
    model = _Refuses(responder, logprobs_fn=logprobs_for)
    by = {s.stage: s for s in dry_run(cfg, model=model, task=MC).stages}
    assert list(by) == ["original", "perturbation writing", "paraphrase writing", "paraphrased",
                        "perturbed", "apricot", "label", "nli", "judge pairs"]
    assert {s.basis for s in by.values()} == {"planned", "estimated", "unknown"}
    assert by["apricot"].basis == "planned"
    assert by["apricot"].samples == sum(2 * len(it.choices) for it in MC.items)
    assert by["label"].samples == len(MC.items)
    assert by["paraphrase writing"].samples == len(MC.items) * 6
    assert by["paraphrased"].samples == len(MC.items) * 3
    assert by["nli"].basis == "unknown" and by["nli"].requests == 0
    # a choice item has at most as many distinct answers as options
    assert by["judge pairs"].requests == sum(
        len(it.choices) * (len(it.choices) - 1) // 2 for it in MC.items
    )


def test_judge_pairs_count_under_their_stage(tmp_path, bow_embedder):
    cfg = RunConfig(task="toy", n=3, m=3, limit=None, bootstrap=0, out=tmp_path / "run",
                    cache=tmp_path / "c.sqlite", kernel="judge", methods=["c3"])
    judge = ScriptedModel(lambda messages, seed: "Yes", name="judge")
    result = run(cfg, model=ScriptedModel(respond), judge=judge, embedder=bow_embedder,
                 task=TASK, show_progress=False)
    stages = result.ledger["stages"]
    assert stages["judge pairs"]["models"] == ["scripted:judge"]
    assert stages["judge pairs"]["generated_samples"] == result.stats["judge_pairs_unique"]
    assert stages["judge pairs"]["cost_usd"] is None and result.ledger["total"]["cost_usd"] is None

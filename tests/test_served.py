"""Served models at paper scale (issue 13): an identity without the URL (replicas and other
ports share one cache), replicas chosen by fewest calls in flight, rate limits, and the
probe of what a server does with n, seeds, logprobs and grammars, stored per identity and
used by the run. Every server here is a FaultServer on 127.0.0.1, closed by its ``with``."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path

import pytest

from conftest import sums_task_file
from credo import RunConfig, run
from credo.cli import _parser, main
from credo.cli.run import run_config_from_args
from credo.errors import UserError
from credo.generation.executor import PlannedRequest
from credo.generation.pool import MODEL, ModelPool
from credo.generation.probes import PROBES_FILE, ProbeStore, probes_path
from credo.generation.store import sample_seed
from credo.models.openai_compat import OpenAIModel
from credo.models.openai_probe import MAX_PROBE_REQUESTS, PROBE_PROMPT, ServerProbe
from credo.models.ratelimit import RateLimits, TokenBucket, estimate_tokens
from credo.models.registry import load_model
from credo.types import GenerationRequest, Message, SamplingParams
from fault_server import FaultServer, completion

FAST = {"retry_backoff": 0.001, "timeout": 5.0}


@pytest.fixture(autouse=True)
def _no_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def batch(count: int, n: int = 3) -> list[GenerationRequest]:
    params = SamplingParams(max_tokens=32)
    return [
        GenerationRequest(
            messages=(Message(role="user", content=f"What is {i} + 7? End with 'Answer: <n>'."),),
            params=params, seed=100 + i, n=n,
        )
        for i in range(count)
    ]


def clean_texts(model: OpenAIModel, request: GenerationRequest) -> list[str]:
    """What a clean contract-keeping FaultServer answers to ``request``."""
    kwargs = model.request_kwargs(request, 0, request.n) if model.supports_n else {
        **model.request_kwargs(request, 0, 1), "n": request.n}
    return [c["message"]["content"] for c in completion(kwargs)["choices"]]


def run_config(tmp: Path, options: dict, cache: str = "cache.sqlite", **fields) -> RunConfig:
    values = {"task": f"file:gsm8k:{sums_task_file(tmp, 4)}", "model": "openai:toy", "n": 4, "m": 2,
              "limit": None, "bootstrap": 0, "methods": ["self_consistency"],
              "model_options": {**FAST, "max_retries": 2, **options}, "out": tmp / "run",
              "cache": tmp / cache, **fields}
    return RunConfig(**values)


# ---------------------------------------------------------------------------- identity


def test_the_identity_is_the_model_and_its_label_never_the_url_or_the_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-SECRET-1")
    plain = OpenAIModel("qwen", base_url="http://alice:PW@10.0.0.1:8000/v1")
    labelled = OpenAIModel("qwen", base_url=["http://a:1/v1", "http://b:2/v1"], label="rev-3")
    hosted = OpenAIModel("qwen")
    assert plain.identity == hosted.identity == "openai:qwen"
    assert labelled.identity == "openai:qwen@rev-3"
    assert labelled.base_urls == ("http://a:1/v1", "http://b:2/v1")
    assert "PW" not in repr(plain) and "alice" not in repr(plain)
    assert OpenAIModel("q", base_url="http://a:1/v1, http://b:2/v1").base_urls == (
        "http://a:1/v1", "http://b:2/v1")
    for bad in ({"label": "two words"}, {"label": ""}, {"base_url": ["http://a/v1"] * 2},
                {"grammar": "regex"}, {"requests_per_minute": 0}):
        with pytest.raises(UserError):
            load_model("openai:q", **{"base_url": "http://a/v1", **bad})


def test_base_url_flags_repeat_or_split_on_commas_and_one_stays_a_string():
    def options(*argv: str) -> dict:
        return run_config_from_args(_parser().parse_args(["run", *argv])).model_options

    assert options("--base-url", "http://a/v1") == {"base_url": "http://a/v1"}
    assert options("--base-url", "http://a/v1", "--base-url", "http://b/v1,http://c/v1",
                   "--label", "r1") == {"base_url": ["http://a/v1", "http://b/v1",
                                                     "http://c/v1"], "label": "r1"}


def test_the_same_run_against_another_port_generates_nothing(tmp_path, caplog):
    with FaultServer() as first:
        done = run(run_config(tmp_path, {"base_url": first.url}), show_progress=False)
    assert done.model_identity == "openai:toy" and done.stats["generated_samples"] == 16
    assert (tmp_path / PROBES_FILE).exists()
    with FaultServer() as second:
        again = run(run_config(tmp_path, {"base_url": second.url}), show_progress=False)
        assert second.requests == 0  # no sample and no probe: both were kept by identity
    assert again.stats["generated_samples"] == 0 and again.stats["cached_samples"] == 16
    assert [r.scores for r in again.items] == [r.scores for r in done.items]


# ---------------------------------------------------------------------------- replicas


def test_two_replicas_share_the_calls_fewest_in_flight_first():
    with FaultServer(latency=0.02) as a, FaultServer(latency=0.02) as b, OpenAIModel(
        "toy", base_url=[a.url, b.url], max_concurrency=2, **FAST
    ) as model:
        requests = batch(16)
        out = dict(model.generate(requests))
    assert {i: [g.text for g in gens] for i, gens in out.items()} == {
        i: clean_texts(model, r) for i, r in enumerate(requests)}
    assert a.served + b.served == 16 and a.served >= 4 and b.served >= 4
    assert a.max_in_flight <= 2 and b.max_in_flight <= 2
    assert model.retries == 0


def test_the_calls_of_a_stopped_replica_are_retried_on_the_other():
    """Policy: a failed attempt's retry goes to another replica when there is one, and a
    replica that failed is passed over for a while; so a dead replica costs each call at
    most one attempt there."""
    with FaultServer() as dead, FaultServer() as alive, OpenAIModel(
        "toy", base_url=[dead.url, alive.url], max_concurrency=4, max_retries=2, **FAST
    ) as model:
        dead.stop()
        with pytest.raises(UserError, match=f"cannot reach .*{dead.port}"):
            model.preflight()
        requests = batch(12)
        out = dict(model.generate(requests))
        assert all(isinstance(v, list) for v in out.values())
        assert {i: [g.text for g in gens] for i, gens in out.items()} == {
            i: clean_texts(model, r) for i, r in enumerate(requests)}
        assert alive.served == 12
        assert 1 <= model.retries <= 4  # the first calls found it dead; then it was avoided


# ---------------------------------------------------------------------------- rate limits


def test_a_token_bucket_keeps_the_rate_whatever_the_sizes():
    now = [0.0]
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    async def go() -> None:
        bucket = TokenBucket(600, clock=lambda: now[0], sleep=sleep)  # 10 a second
        assert bucket.capacity == 10
        for _ in range(30):
            await bucket.take(1)
        assert now[0] == pytest.approx(2.0)  # 10 at once, then 10 a second
        await bucket.take(25)  # larger than the bucket: waits for a full one, owes the rest
        await bucket.take(1)
        assert now[0] == pytest.approx(2.0 + 1.0 + 1.6)
        bucket.settle(25, 5)  # the server said 5: the 20 not used come back
        assert bucket.level == pytest.approx(10.0)

    asyncio.run(go())
    with pytest.raises(ValueError):
        TokenBucket(0)


def test_token_estimates_and_limits_that_slow_the_calls():
    request = GenerationRequest(messages=(Message(role="user", content="x" * 41),),
                                params=SamplingParams(max_tokens=10))
    assert estimate_tokens(request, 3) == 11 + 30
    assert not RateLimits().active and RateLimits(tokens_per_minute=100).active
    with FaultServer() as server, OpenAIModel(
        "toy", base_url=server.url, requests_per_minute=1200, **FAST
    ) as model:
        start = time.monotonic()
        out = dict(model.generate(batch(40, n=1)))
        elapsed = time.monotonic() - start
    assert len(out) == 40 and server.served == 40
    assert elapsed >= 0.9  # 20 at once, then 20 a second


# ---------------------------------------------------------------------------- the probe

SERVERS = {
    "llama.cpp-like": ({"grammar": True, "max_n": 4}, dict(
        honours_n=True, max_n=4, deterministic=True, seed_contract=True, logprobs=True,
        top_logprobs=20, grammar="grammar")),
    "vLLM-like": ({}, dict(honours_n=True, max_n=None, grammar=None)),
    "children seeded otherwise": ({"seed_mode": "scrambled"}, dict(
        honours_n=True, deterministic=True, seed_contract=False, grammar=None)),
    "seeds ignored": ({"seed_mode": "ignored"}, dict(deterministic=False, seed_contract=None)),
    "no n, no logprobs": ({"honour_n": False, "logprobs": False}, dict(
        honours_n=False, max_n=1, seed_contract=None, logprobs=False, top_logprobs=0)),
}


@pytest.mark.parametrize("kind", SERVERS)
def test_the_probe_tells_servers_apart(tmp_path, kind):
    options, expected = SERVERS[kind]
    many = [f"Answer: {k}" for k in range(1000)]  # two draws of six answers often agree
    with FaultServer(answers=many, **options) as server, ModelPool(
        cache_path=tmp_path / "c.sqlite", show_progress=False
    ) as pool:
        pool.assign(MODEL, "openai:toy", {"base_url": server.url, "probe": False, **FAST})
        found = pool.probe(MODEL)
        assert server.requests <= found.requests <= MAX_PROBE_REQUESTS
    assert found.complete and found.identity == "openai:toy"
    assert {k: getattr(found, k) for k in expected} == expected
    stored = ProbeStore(tmp_path / PROBES_FILE).get("openai:toy")
    assert stored == found
    text = (tmp_path / PROBES_FILE).read_text()
    assert "127.0.0.1" not in text  # the identity keys it, not the URL


def test_a_probe_that_cannot_finish_decides_nothing_and_is_not_stored(tmp_path):
    with FaultServer() as server, OpenAIModel("toy", base_url=server.url, max_retries=1,
                                              **FAST) as model:
        server.force("http_500", times=20)
        found = model.probe()
        assert not found.complete and "HTTP 500" in found.errors[0]
        assert model.apply_probe(found)[0].startswith("openai:toy: the probe")
        assert model.supports_n and model.logprobs  # as given
    assert ProbeStore(None).get("x") is None and probes_path(":memory:") is None
    assert ServerProbe.from_json({**found.to_json(), "new_field": 1}) == found


def _execute(tmp: Path, server: FaultServer, options: dict, n: int = 4):
    with ModelPool(cache_path=tmp / "c.sqlite", show_progress=False) as pool:
        pool.assign(MODEL, "openai:toy", {"base_url": server.url, **FAST, **options})
        executor = pool.executor(MODEL)
        request = batch(1)[0]
        (gens,) = executor.execute([PlannedRequest(request, n)])
        return executor.key(request), [g.text for g in gens], pool.model(MODEL)


def test_a_server_that_breaks_the_contract_gets_one_call_per_sample(tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    with FaultServer(seed_mode="scrambled") as server:
        key, texts, model = _execute(tmp_path, server, {})
        asked = server.bodies[-4:]
    assert not model.supports_n and not model.capabilities.parallel_samples
    assert all(body.get("n", 1) == 1 for body in asked)
    # sample j is the single call with seed base + j, as on any contract-keeping server
    singles = [
        completion({**asked[0], "seed": sample_seed(key, j)}, seed_mode="scrambled")
        for j in range(4)
    ]
    assert texts == [s["choices"][0]["message"]["content"] for s in singles]
    assert "one call per sample" in caplog.text


def test_a_server_that_keeps_the_contract_gets_one_call_with_n(tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    with FaultServer() as server:
        key, _, model = _execute(tmp_path, server, {})
        assert server.bodies[-1]["n"] == 4 and server.bodies[-1]["seed"] == sample_seed(key, 0)
    assert model.supports_n and not caplog.text


def test_a_server_with_few_slots_gets_blocks_that_keep_the_contract(tmp_path):
    with FaultServer() as wide:
        _, want, _ = _execute(tmp_path / "wide", wide, {}, n=10)
    with FaultServer(max_n=4) as narrow:
        key, got, model = _execute(tmp_path / "narrow", narrow, {}, n=10)
        asked = sorted((b["seed"], b["n"]) for b in narrow.bodies[-3:])
    s = sample_seed(key, 0)
    assert model.max_n == 4 and asked == [(s, 4), (s + 4, 4), (s + 8, 2)]
    assert got == want


def test_explicit_options_win_over_the_probe(tmp_path):
    with FaultServer(seed_mode="scrambled") as server:
        _, _, model = _execute(tmp_path, server, {"supports_n": True, "logprobs": False})
        assert server.bodies[-1]["n"] == 4
    assert model.supports_n and not model.logprobs and model.probed is not None


def test_unreproducible_seeds_are_said_and_probe_false_sends_no_probe(tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    with FaultServer(seed_mode="ignored") as server:
        _, _, model = _execute(tmp_path, server, {})
    assert "not reproducible" in caplog.text and not model.capabilities.seeded
    with FaultServer() as server:
        _, _, model = _execute(tmp_path / "b", server, {"probe": False})
        assert server.requests == 1 and model.probed is None
    assert not (tmp_path / "b" / PROBES_FILE).exists()


def test_a_server_without_logprobs_marks_logprob_methods_unavailable(tmp_path):
    with FaultServer(logprobs=False) as server:
        cfg = run_config(tmp_path, {"base_url": server.url},
                         methods=["self_consistency", "p_true"])
        result = run(cfg, show_progress=False)
        asked = [b for b in server.bodies if b["messages"][0]["content"] != PROBE_PROMPT]
        assert len(asked) == 4 and not any(body.get("logprobs") for body in asked)
    assert "p_true" in result.unavailable and "self_consistency" not in result.unavailable


def test_a_probed_grammar_goes_in_the_field_the_server_obeys():
    model = OpenAIModel("toy", base_url="http://127.0.0.1:9/v1")
    asks = GenerationRequest(messages=batch(1)[0].messages,
                             params=SamplingParams(grammar='root ::= "A" | "B"'))
    with pytest.raises(ValueError, match="takes none"):
        model.request_kwargs(asks, 0, 1)
    probe = ServerProbe("openai:toy", honours_n=True, deterministic=True, seeds_vary=True,
                        seed_contract=True, logprobs=True, top_logprobs=5,
                        grammar="guided_grammar")
    assert model.apply_probe(probe) == []
    kwargs = model.request_kwargs(asks.model_copy(update={
        "params": asks.params.model_copy(update={"top_logprobs": 20})}), 0, 1)
    assert kwargs["extra_body"] == {"guided_grammar": 'root ::= "A" | "B"'}
    assert kwargs["top_logprobs"] == 5  # what the server gives
    assert model.capabilities.grammar and model.capabilities.max_top_logprobs == 5


# ---------------------------------------------------------------------------- credo probe


def test_credo_probe_reports_and_stores(tmp_path, capsys):
    cache = tmp_path / "c.sqlite"
    with FaultServer(seed_mode="scrambled", grammar=True) as server:
        code = main(["probe", "--model", "openai:toy", "--base-url", server.url,
                     "--label", "r1", "--cache", str(cache)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "openai:toy@r1" in out and "one call per sample" in out and "grammar" in out
    stored = json.loads((tmp_path / PROBES_FILE).read_text())["probes"]
    assert set(stored) == {"openai:toy@r1"} and stored["openai:toy@r1"]["seed_contract"] is False


def test_credo_probe_user_errors(tmp_path, capsys):
    with FaultServer() as server:
        url = server.url
    assert main(["probe", "--model", "openai:toy", "--base-url", url,
                 "--cache", str(tmp_path / "c.sqlite")]) == 2
    assert "cannot reach" in capsys.readouterr().err
    assert main(["probe", "--model", "smollm2-135m", "--base-url", url]) == 2
    assert "served models" in capsys.readouterr().err


def test_the_served_paper_config_holds_paper_000s_settings():
    cfg = RunConfig.from_yaml(Path(__file__).parents[1] / "configs" / "served-paper.yaml")
    assert cfg.model.startswith("openai:") and cfg.model_options["base_url"]
    assert (cfg.n, cfg.m, cfg.limit) == (30, 30, 200)
    assert cfg.methods == ["c3", "c3_cross", "self_consistency"]
    s = cfg.sampling
    assert (s.temperature, s.top_p, s.top_k, s.min_p) == (1.0, 1.0, 0, 0.0)

"""Issue 34 items 4-6: faults that changed results, wasted minutes or went unbilled.

4. One glitch never decides what is cached: an empty sample is asked again with the same
   seed up to the retry budget, and a probe answer that disagrees with itself because of
   an empty reply is "unknown" (tests/fault_server.py's ``empty_content``: a server that
   reproduces seeds, empty once now and then).
5. A server that fails every request opens the circuit breaker: the run ends early at
   exit 3, keeps what was done, and a rerun resumes.
6. The ledger counts every request sent, probe and retries included, with the usage the
   server reported: its totals equal the fault server's own count.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import sums_task_file
from credo import RunConfig, run
from credo.cli import main
from credo.generation.executor import Executor, PlannedRequest
from credo.generation.pool import MODEL, ModelPool
from credo.generation.probes import PROBES_FILE, ProbeStore
from credo.models.breaker import (
    DEFAULT_BREAKER_FAILURES,
    DEFAULT_BREAKER_WINDOW_S,
    CircuitBreaker,
)
from credo.models.openai_compat import OpenAIGenerationError, OpenAIModel
from credo.models.openai_probe import GRAMMAR_FIELDS, probe_server
from credo.types import GenerationRequest, Message, SamplingParams
from fault_server import FaultServer, completion
from test_runtime_cases import Glitchy, _execute


@pytest.fixture(autouse=True)
def _no_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def _requests(count: int, n: int = 3) -> list[GenerationRequest]:
    return [
        GenerationRequest(
            messages=(Message(role="user", content=f"What is {i} + 7? End with 'Answer: <n>'."),),
            params=SamplingParams(max_tokens=32), seed=100 + i, n=n,
        )
        for i in range(count)
    ]


# ---------------------------------------------------------------------------- item 4


def test_a_glitch_that_comes_back_empty_once_more_is_still_not_cached(tmp_path):
    """The seed reproduces its sample, so a glitch is empty once, or twice by bad luck:
    the third ask (within the retry budget of 3) has the text, and that is cached."""
    respond = lambda s: f"answer {s % 5}"  # noqa: E731
    model = Glitchy(respond, glitches={1, 4}, max_retries=3)  # call 4 re-asks call 1
    texts, ex, store = _execute(model, tmp_path)
    clean, _, _ = _execute(Glitchy(respond, set()), tmp_path / "clean")
    assert texts == clean and all(t for row in texts for t in row)
    assert model.seeds[5] == model.seeds[4] == model.seeds[1]  # asked with the same seeds
    assert ex.history[-1].retries == 2 and model.calls == 6
    assert ex.history[-1].unverified_empty == 0 and store.count_samples() == 8


class _Sizes(Glitchy):
    """A :class:`Glitchy` that records each request's ``(seed, n)``."""

    def generate(self, requests):
        self.sizes = [*getattr(self, "sizes", []), *((r.seed, r.n) for r in requests)]
        return super().generate(requests)


def test_only_the_empty_samples_of_a_block_are_asked_again(tmp_path):
    """A genuine empty sample costs its own seed's requests (up to the retry budget, 2
    here), not its whole block's; it is then cached as the seed's sample."""
    model = _Sizes(lambda s: "" if s % 4 == 1 else f"a{s}", glitches=set(), max_retries=2)
    texts, ex, _ = _execute(model, tmp_path, n=4)
    asked_again = model.sizes[4:]  # after the 4 blocks of 2
    empty = sum(row.count("") for row in texts)
    assert empty and len(asked_again) == 2 * empty == ex.history[-1].retries
    assert all(seed % 4 == 1 and n == 1 for seed, n in asked_again)
    assert ex.history[-1].unverified_empty == 0  # seeded: the seed's real sample


def _probe(glitch_at: set[int], *, grammar: bool = True) -> Any:
    """Probe a clean, seed-reproducing server (:func:`fault_server.completion`) whose
    replies number ``glitch_at`` (0-based, in the order sent) are empty."""
    sent: list[dict[str, Any]] = []

    def send(body: dict[str, Any]) -> dict[str, Any]:
        body = {**body, **(body.pop("extra_body", None) or {})} if grammar else dict(body)
        if not grammar:
            body.pop("extra_body", None)
        sent.append(body)
        fault = "empty_content" if len(sent) - 1 in glitch_at else None
        return completion(body, [f"Answer: {k}" for k in range(1000)], fault)

    return probe_server(send, "toy", "openai:toy")


def test_a_probe_without_glitches_settles_every_question():
    found = _probe(set())
    assert found.settled and not found.unsettled
    assert (found.honours_n, found.deterministic, found.seeds_vary, found.seed_contract,
            found.logprobs, found.grammar) == (True, True, True, True, True, GRAMMAR_FIELDS[0])


@pytest.mark.parametrize(("glitch", "question", "expected"), [
    (3, "deterministic", {"deterministic": None, "seed_contract": None}),  # 2nd seed-s reply
    (0, "seed_contract", {"deterministic": True, "seed_contract": None}),  # the n=3 call
    (4, "seeds_vary", {"seeds_vary": True, "deterministic": True}),  # other seeds differ
    (6, "logprobs", {"logprobs": None, "top_logprobs": 0}),
    (7, "grammar", {"grammar": None}),
])
def test_one_empty_reply_leaves_its_question_unknown_never_no(glitch, question, expected):
    found = _probe({glitch})
    assert {k: getattr(found, k) for k in expected} == expected
    assert found.complete and not found.settled
    if question != "seeds_vary":  # seeds s and s + 2 still differ: that one is settled
        assert found.unsettled == (question,)
        assert "unknown (an empty reply)" in dict(found.rows()).values()


def test_an_unsettled_probe_changes_no_option_and_is_not_stored(tmp_path):
    with FaultServer() as server, ModelPool(cache_path=tmp_path / "c.sqlite",
                                            show_progress=False) as pool:
        pool.assign(MODEL, "openai:toy", {"base_url": server.url, "probe": False,
                                           "retry_backoff": 0.001})
        server.force("empty_content")  # the probe's first request: n = 3
        found = pool.probe(MODEL)
        model = pool.model(MODEL)
        warnings = model.apply_probe(found)
    assert found.unsettled == ("seed_contract",) and found.seed_contract is None
    assert model.supports_n and model.capabilities.seeded  # as without a probe
    assert any("unknown" in w for w in warnings)
    assert ProbeStore(tmp_path / PROBES_FILE).get("openai:toy") is None


def test_credo_probe_says_an_unsettled_probe_is_not_stored(tmp_path, capsys):
    with FaultServer() as server:
        server.force("empty_content")
        code = main(["probe", "--model", "openai:toy", "--base-url", server.url,
                     "--cache", str(tmp_path / "c.sqlite")])
    out = capsys.readouterr().out
    assert code == 3 and "unknown (an empty reply)" in out and "is not stored" in out
    assert not (tmp_path / PROBES_FILE).exists()


def _cli_run(tmp: Path, url: str, name: str, items: int = 12, options: str = "",
             methods: str = "[self_consistency]") -> tuple[int, Path]:
    folder = tmp / name
    folder.mkdir(parents=True, exist_ok=True)
    cfg = folder / "served.yaml"
    cfg.write_text(
        f"model: openai:toy\nmethods: {methods}\nn: 6\nbootstrap: 0\nmax_block: 3\n"
        f"model_options: {{retry_backoff: 0.001, max_concurrency: 4{options}}}\n")
    code = main(["run", "--config", str(cfg), "--task",
                 f"file:gsm8k:{sums_task_file(tmp, items)}", "--base-url", url,
                 "--out", str(folder / "run"), "--cache", str(folder / "c.sqlite"),
                 "--quiet"])
    return code, folder / "run"


@pytest.fixture(scope="module")
def clean_scores(tmp_path_factory) -> str:
    tmp = tmp_path_factory.mktemp("clean")
    with FaultServer() as server:
        code, out = _cli_run(tmp, server.url, "clean")
    assert code == 0
    return (out / "scores.jsonl").read_text()


@pytest.mark.parametrize(("faults", "fault_seed"), [
    ({"empty_content": 0.15}, 5),  # before issue 34: a probe glitch and a cached ""
    ({"empty_content": 0.15}, 7),  # before: an original sample cached empty
    ({"http_500": 0.10}, 1),
])
def test_credo_run_through_glitches_scores_as_a_clean_run(tmp_path, clean_scores, faults,
                                                          fault_seed):
    with FaultServer(faults, fault_seed=fault_seed) as server:
        code, out = _cli_run(tmp_path, server.url, "faulty")
        assert sum(server.faults.values()) > 3
        billed = server.requests, dict(server.usage)
    assert code == 0
    assert (out / "scores.jsonl").read_text() == clean_scores
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert samples and all(s["text"] for s in samples)
    total = json.loads((out / "metrics.json").read_text())["stats"]["ledger"]["total"]
    assert (total["calls"], total["prompt_tokens"], total["completion_tokens"]) == (
        billed[0], billed[1]["prompt_tokens"], billed[1]["completion_tokens"])


# ---------------------------------------------------------------------------- item 5


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_breaker_opens_only_on_a_streak_that_lasts_the_window():
    clock = _Clock()
    breaker = CircuitBreaker(failures=4, window_s=10.0, clock=clock)
    for _ in range(20):  # a burst: many failures at once (a restart), shorter than 10 s
        breaker.failure()
    assert not breaker.is_open and breaker.allow()
    clock.now = 9.9
    breaker.failure()
    assert not breaker.is_open
    breaker.success()  # one success ends the streak
    clock.now = 20.0
    for _ in range(3):
        breaker.failure()
        clock.now += 5.0  # 3 failures over 15 s: too few
    assert not breaker.is_open
    breaker.failure()  # the 4th, 15 s after the streak began
    assert breaker.is_open and not breaker.allow() and breaker.trips == 1
    assert "circuit breaker open" in breaker.reason and "breaker_failures" in breaker.reason
    clock.now += 10.0  # a window later one trial goes out, and only one
    assert breaker.allow() and not breaker.allow()
    breaker.failure()  # the trial failed: open again
    assert breaker.is_open and breaker.trips == 2 and not breaker.allow()
    clock.now += 10.0
    assert breaker.allow()
    breaker.success()
    assert not breaker.is_open and breaker.allow() and breaker.allow()


def test_failures_among_successes_never_open_the_breaker():
    clock = _Clock()
    breaker = CircuitBreaker(failures=3, window_s=0.0, clock=clock)
    for k in range(1000):  # two failures, a success, and so on: never 3 in a row
        clock.now += 1.0
        breaker.success() if k % 3 == 2 else breaker.failure()
    assert breaker.trips == 0  # the loop ended on a failure: a streak of 1
    breaker.neutral()  # a 4xx, a 429: neither ends the streak nor adds to it
    breaker.failure()
    assert breaker.trips == 0
    breaker.failure()
    assert breaker.trips == 1
    off = CircuitBreaker(failures=0, clock=clock)
    for _ in range(100):
        clock.now += 100.0
        off.failure()
    assert not off.is_open
    for bad in ({"failures": -1}, {"failures": 1.5}, {"window_s": -1.0}):
        with pytest.raises(ValueError, match="breaker_"):
            CircuitBreaker(**bad)


def test_a_sleeping_retry_wakes_when_the_streak_has_lasted_the_window():
    async def go() -> float:
        breaker = CircuitBreaker(failures=2, window_s=0.2)
        breaker.failure()
        breaker.failure()
        start = time.monotonic()
        await breaker.sleep(30.0)  # a Retry-After of 30 s
        assert breaker.is_open
        return time.monotonic() - start

    assert asyncio.run(go()) < 5.0


@pytest.mark.parametrize("page", ["docs/how-to/served-models.md"])  # the README links to it
def test_the_documented_breaker_defaults_are_the_code_s(page):
    """Done when (issue 34): thresholds configurable, defaults documented: the pages
    state the defaults the model takes when its options name none."""
    import inspect
    import re

    text = " ".join((Path(__file__).resolve().parents[1] / page).read_text().split())
    failures = re.search(r"`breaker_failures` attempts in a row \(default (\d+)\)", text)
    window = re.search(r"`breaker_window_s` seconds \(default ([\d.]+)\)", text)
    assert failures and window, page
    params = inspect.signature(OpenAIModel).parameters
    assert int(failures[1]) == params["breaker_failures"].default == DEFAULT_BREAKER_FAILURES
    assert float(window[1]) == params["breaker_window_s"].default == DEFAULT_BREAKER_WINDOW_S


def test_a_dead_server_fails_fast_once_the_breaker_opens():
    """With max_retries 8 each call would take about a minute of backoff; the breaker
    (window 0.5 s) ends them all in about the window."""
    with FaultServer({"http_500": 1.0}) as server, OpenAIModel(
        "toy", base_url=server.url, max_retries=8, retry_backoff=1.0, breaker_failures=4,
        breaker_window_s=0.5, timeout=5.0,
    ) as model:
        start = time.monotonic()
        out = dict(model.generate(_requests(12)))
        elapsed = time.monotonic() - start
        later = dict(model.generate(_requests(3)))  # while it is open: nothing sent
        sent = server.requests
    assert elapsed < 10.0
    assert all(isinstance(v, OpenAIGenerationError) for v in [*out.values(), *later.values()])
    assert any("circuit breaker open" in str(v) for v in out.values())
    assert all("not sent" in str(v) for v in later.values())
    assert sent < 12 * 3 and model.breaker.trips == 1
    assert sum(v.usage.calls for v in out.values()) == sent  # every attempt billed


def test_a_short_outage_and_transient_errors_leave_the_breaker_closed():
    with FaultServer({"http_500": 0.3}, fault_seed=2) as server, OpenAIModel(
        "toy", base_url=server.url, max_retries=12, retry_backoff=0.01, timeout=5.0,
        max_concurrency=4,
    ) as model:
        server.force("http_500", 24)  # every call fails a few times in a row first
        out = dict(model.generate(_requests(16)))
    assert all(isinstance(v, list) for v in out.values())
    assert model.breaker.trips == 0 and model.retries >= 24


def test_a_dead_server_ends_the_run_in_seconds_keeping_what_was_done(tmp_path, capsys):
    """Done when (issue 34): a fully failing server ends in under 30 s with exit 3 and
    one line under --quiet; what was done before stays cached and a rerun resumes. The
    retry budget is a long one (max_retries 8, the default backoff of 1 s: about a
    minute per call); the breaker, at its defaults, is what ends the run early."""
    options = ", retry_backoff: 1.0, max_retries: 8"
    with FaultServer() as clean:
        port = clean.port
        assert _cli_run(tmp_path, clean.url, "run", items=3, options=options)[0] == 0
    capsys.readouterr()
    with FaultServer({"http_500": 1.0}, port=port) as dead:
        start = time.monotonic()
        code, out = _cli_run(tmp_path, dead.url, "run", items=6, options=options)
        elapsed = time.monotonic() - start
        assert dead.requests > 0
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 3 and elapsed < 30.0, elapsed
    assert len(err) == 1 and "requests failed" in err[0] and "rerun" in err[0]
    status = json.loads((out / "run_status.json").read_text())
    assert status["status"] == "incomplete" and status["items"] == 3
    assert status["items_incomplete"] == 3
    with FaultServer(port=port) as back:
        assert _cli_run(tmp_path, back.url, "run", items=6, options=options)[0] == 0
        # only the three new items' samples were asked: 6 samples each in blocks of 3
        assert back.requests == back.served == 3 * 2
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["items"] == 6 and "incomplete" not in metrics


# ---------------------------------------------------------------------------- item 6

BILLED_FAULTS = {"null_content": 0.1, "fewer_choices": 0.05, "missing_content": 0.05,
                 "http_500": 0.05, "http_429": 0.05, "malformed_json": 0.05,
                 "truncated_body": 0.05, "empty_content": 0.1}
"""Faults whose replies the server billed (content faults: usage sent) and faults it did
not (an error status, a body that is no JSON or cut short): ``slow`` is left out, as a
reply the client timed out on is billed by the server but never seen."""


@pytest.fixture
def counted_run(tmp_path, bow_embedder) -> Iterator[tuple[dict, FaultServer]]:
    with FaultServer(BILLED_FAULTS, fault_seed=4, max_n=4) as server:
        cfg = RunConfig(
            task=f"file:gsm8k:{sums_task_file(tmp_path, 6)}", model="openai:toy", n=6, m=3,
            limit=None, bootstrap=0, methods=["self_consistency", "verbalized"],
            # max_retries 2: some requests fail in the end, after replies the server billed
            model_options={"base_url": server.url, "retry_backoff": 0.001, "max_retries": 2,
                           "max_concurrency": 3},
            out=tmp_path / "run", cache=tmp_path / "c.sqlite",
        )
        result = run(cfg, show_progress=False)
        assert result.stats["request_failures"] > 0 and result.stats["request_retries"] > 10
        assert result.incomplete and result.items  # some items done, some not
        ledger = json.loads((cfg.out / "metrics.json").read_text())["stats"]["ledger"]
        yield ledger, server


def test_the_ledger_equals_what_the_server_billed_probe_and_retries_included(counted_run):
    ledger, server = counted_run
    total = ledger["total"]
    assert server.faults["null_content"] and server.faults["http_500"]
    assert (total["calls"], total["prompt_tokens"], total["completion_tokens"]) == (
        server.requests, server.usage["prompt_tokens"], server.usage["completion_tokens"])
    probe = ledger["stages"]["probe"]
    assert probe["calls"] >= probe["requests"] > 0 and probe["samples"] > 0
    assert probe["prompt_tokens"] > 0
    assert "probe, retries, failed requests" in ledger["counting"]


def test_blocks_split_by_max_n_count_every_call_and_its_prompt(tmp_path):
    from credo.generation.store import GenerationStore

    with FaultServer(max_n=2) as server, OpenAIModel(
        "toy", base_url=server.url, max_n=2, retry_backoff=0.001
    ) as model, GenerationStore(tmp_path / "c.sqlite") as store:
        ex = Executor(model, store, max_block=6, show_progress=False)
        ex.execute([PlannedRequest(_requests(1, n=1)[0], 6)], stage="original")
        usage = ex.ledger.usage("original", model.identity)
        assert (usage.calls, usage.prompt_tokens, usage.completion_tokens) == (
            3, server.usage["prompt_tokens"], server.usage["completion_tokens"])
        assert server.requests == 3 and usage.prompt_tokens == 3 * (
            server.usage["prompt_tokens"] // 3)

"""The OpenAI-compatible backend against a server that misbehaves (tests/fault_server.py):
retries, failures that cost only their request, preflight, and secrets kept out of sight."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from credo.errors import UserError
from credo.models.openai_compat import (
    MAX_RETRY_DELAY_S,
    OpenAIGenerationError,
    OpenAIModel,
    backoff_seconds,
    retry_after_seconds,
)
from credo.models.urls import basic_authorization, redact_url, split_credentials
from credo.types import Generation, GenerationError, GenerationRequest, Message, SamplingParams
from fault_server import FAULT_KINDS, FaultServer, completion

FAST = {"retry_backoff": 0.001, "timeout": 5.0}


@pytest.fixture(autouse=True)
def _no_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


@pytest.fixture
def server() -> Iterator[FaultServer]:
    with FaultServer() as s:
        yield s


def batch(count: int, n: int = 3, top_logprobs: int = 0) -> list[GenerationRequest]:
    params = SamplingParams(max_tokens=32, top_logprobs=top_logprobs)
    return [
        GenerationRequest(
            messages=(
                Message(role="user", content=f"What is {i} + 7? End with 'Answer: <number>'."),
            ),
            params=params,
            seed=100 + i,
            n=n,
        )
        for i in range(count)
    ]


def expected(model: OpenAIModel, request: GenerationRequest) -> list[tuple[str, str]]:
    """What a clean fault server answers to ``request``: (text, finish reason) per sample."""
    reply = completion(model.request_kwargs(request, 0, request.n))
    return [(c["message"]["content"], c["finish_reason"]) for c in reply["choices"]]


def texts(out: dict[int, Any]) -> dict[int, list[tuple[str, str]]]:
    return {i: [(g.text, g.finish_reason) for g in gens] for i, gens in out.items()}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ---------------------------------------------------------------------------- many faults


def test_five_percent_of_every_fault_gives_the_clean_generations() -> None:
    requests = batch(30, n=3) + batch(4, n=2, top_logprobs=2)
    with FaultServer() as clean_server, OpenAIModel("m", base_url=clean_server.url) as clean:
        reference = dict(clean.generate(requests))
    assert clean.retries == 0 and clean_server.requests == len(requests)
    kinds = [
        "malformed_json", "not_a_completion", "html", "null_content", "missing_content",
        "fewer_choices", "truncated_body", "http_429", "http_500", "http_503",
    ]  # fmt: skip
    with (
        FaultServer(dict.fromkeys(kinds, 0.05), fault_seed=7) as faulty,
        OpenAIModel("m", base_url=faulty.url, max_retries=10, **FAST) as model,
    ):
        out = dict(model.generate(requests))
    assert not any(isinstance(v, GenerationError) for v in out.values())
    assert texts(out) == texts(reference)
    for i in range(30, 34):
        assert [g.logprobs for g in out[i]] == [g.logprobs for g in reference[i]]
        assert all(g.logprobs for g in out[i])
    assert sum(faulty.faults.values()) > 5
    assert model.retries == faulty.retryable_faults == sum(faulty.faults.values())
    assert faulty.requests == len(requests) + model.retries


# ---------------------------------------------------------------------------- one fault each

RETRIED = [k for k in FAULT_KINDS if k not in ("empty_content",)] + ["http_502"]


@pytest.mark.parametrize("kind", RETRIED)
def test_each_fault_is_retried_and_never_becomes_a_sample(kind: str) -> None:
    # a slow reply is a timeout only when forced: a clean one may be slow on a busy machine
    options = dict(FAST, timeout=0.5) if kind == "slow" else FAST
    requests = batch(4, n=2)
    with (
        FaultServer({kind: 0.0 if kind == "slow" else 0.3}, fault_seed=1, slow_seconds=1) as server,
        OpenAIModel("m", base_url=server.url, max_retries=12, **options) as model,
    ):
        server.force(kind, 2)
        out = dict(model.generate(requests))
    assert server.faults[kind] > 0
    assert model.retries == server.faults[kind]
    for i, request in enumerate(requests):
        assert not isinstance(out[i], GenerationError)
        assert [(g.text, g.finish_reason) for g in out[i]] == expected(model, request)
        assert all(g.text for g in out[i])  # a null or missing content never reads as ""


def test_an_empty_reply_with_finish_stop_is_a_real_sample() -> None:
    with (
        FaultServer({"empty_content": 1.0}) as server,
        OpenAIModel("m", base_url=server.url, **FAST) as model,
    ):
        out = dict(model.generate(batch(2, n=2)))
    assert [(g.text, g.finish_reason) for gens in out.values() for g in gens] == [("", "stop")] * 4
    assert model.retries == 0 and server.requests == 2


def test_retry_after_is_honoured() -> None:
    with (
        FaultServer(retry_after="0.3") as server,
        OpenAIModel("m", base_url=server.url, **FAST) as model,
    ):
        server.force("http_429")
        start = time.monotonic()
        out = dict(model.generate(batch(1, n=1)))
    assert time.monotonic() - start >= 0.3
    assert model.retries == 1 and isinstance(out[0], list)


def test_retry_delays_are_bounded() -> None:
    assert retry_after_seconds({"retry-after": "2"}) == 2.0
    assert retry_after_seconds({"retry-after": "0"}) == 0.0
    assert retry_after_seconds({"retry-after": "1e9"}) == MAX_RETRY_DELAY_S
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) is None
    assert retry_after_seconds({}) is None and retry_after_seconds(None) is None
    import random

    rng = random.Random(0)
    for attempt in range(12):
        delay = backoff_seconds(attempt, 1.0, rng)
        assert min(2.0**attempt, MAX_RETRY_DELAY_S) / 2 <= delay <= MAX_RETRY_DELAY_S
    assert backoff_seconds(10_000, 1.0, rng) <= MAX_RETRY_DELAY_S


# ---------------------------------------------------------------------------- failures


def test_a_server_gone_fails_every_request_then_they_succeed_when_it_returns(
    server: FaultServer,
) -> None:
    requests = batch(3, n=2)
    with OpenAIModel("m", base_url=server.url, max_retries=2, **FAST) as model:
        server.stop()
        start = time.monotonic()
        failed = dict(model.generate(requests))
        assert time.monotonic() - start < 5
        assert sorted(failed) == [0, 1, 2]
        for index, error in failed.items():
            assert isinstance(error, OpenAIGenerationError) and error.request_index == index
            assert "after 3 attempts" in str(error) and server.url in str(error)
        assert model.retries == 6
        server.start()
        out = dict(model.generate(requests))
    assert texts(out) == {i: expected(model, r) for i, r in enumerate(requests)}


@pytest.mark.parametrize("status", [400, 404, 422])
def test_other_client_errors_fail_their_request_at_once(status: int) -> None:
    with (
        FaultServer() as server,
        OpenAIModel("m", base_url=server.url, **FAST) as model,
    ):
        assert all(not isinstance(v, GenerationError) for _, v in model.generate(batch(1)))
        server.force(f"http_{status}", 2)  # after a call succeeded (a 404 before: below)
        out = dict(model.generate(batch(2)))
    assert all(isinstance(v, OpenAIGenerationError) for v in out.values())
    assert f"HTTP {status}" in str(out[0]) and "after 1 attempt:" in str(out[0])
    assert model.retries == 0 and server.requests == 3


def test_a_404_before_any_call_succeeded_is_a_user_error_naming_the_url() -> None:
    """Issue 21: a wrong URL or model name is no failed request a rerun may mend."""
    with (
        FaultServer({"http_404": 1.0}) as server,
        OpenAIModel("m", base_url=server.url + "?api_key=sk-Q-SECRET", **FAST) as model,
    ):
        with pytest.raises(UserError) as caught:
            list(model.generate(batch(2)))
    message = str(caught.value)
    assert f"{server.url} answered HTTP 404" in message and "sk-Q-SECRET" not in message
    assert "\n" not in message and model.retries == 0


def test_one_failed_call_costs_only_its_request() -> None:
    requests = batch(3, n=3)
    with (
        FaultServer() as server,
        OpenAIModel("m", base_url=server.url, supports_n=False, max_concurrency=1, **FAST) as model,
    ):
        server.force("http_400")  # the first call, one sample of request 0
        out = list(model.generate(requests))
    assert [i for i, v in out if isinstance(v, GenerationError)] == [0]
    good = {i: v for i, v in out if not isinstance(v, GenerationError)}
    assert sorted(good) == [1, 2] and all(len(v) == 3 for v in good.values())
    assert len(out) == 3 and server.requests == 9


def test_a_refused_key_is_a_user_error_naming_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong")
    with (
        FaultServer(require_authorization="Bearer sk-right") as server,
        OpenAIModel("m", base_url=server.url, **FAST) as model,
    ):
        with pytest.raises(UserError, match=rf"{server.url} answered HTTP 401.*OPENAI_API_KEY"):
            list(model.generate(batch(2)))
        with pytest.raises(UserError, match="HTTP 401"):
            model.preflight()
    assert model.retries == 0


# ---------------------------------------------------------------------------- preflight


def test_preflight() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(UserError, match=rf"cannot reach the OpenAI-compatible server at {url}"):
        OpenAIModel("m", base_url=url, preflight_timeout=2).preflight()
    with FaultServer() as server:
        OpenAIModel("m", base_url=server.url).preflight()
        assert server.model_listings == 1
    OpenAIModel("m", client=object()).preflight()  # injected client: nothing to check


def test_preflight_timeout() -> None:
    with socket.socket() as sock:  # listens, never answers
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        start = time.monotonic()
        with pytest.raises(UserError, match=f"{url}: no answer within"):
            OpenAIModel("m", base_url=url, preflight_timeout=0.2).preflight()
        assert time.monotonic() - start < 3


# ---------------------------------------------------------------------------- secrets


def test_redact_url() -> None:
    for url in ("http://localhost:8000/v1", "https://api.x.com/v1?x=1#f", "127.0.0.1:80/v1"):
        assert redact_url(url) is url
    assert redact_url("http://user:KEY@host:8000/v1") == "http://host:8000/v1"
    assert redact_url("https://KEY@host/v1") == "https://host/v1"
    assert redact_url("http://u:p@ss@host/v1?q=a@b") == "http://host/v1?q=a@b"
    assert redact_url("user:KEY@host:8000/v1") == "host:8000/v1"
    assert split_credentials("http://al%40ce:s%3Acret@h/v1") == ("http://h/v1", "al@ce", "s:cret")
    assert split_credentials("http://key@h/v1") == ("http://h/v1", "key", None)
    assert split_credentials("http://h/v1") == ("http://h/v1", None, None)


def test_a_literal_api_key_is_refused() -> None:
    with pytest.raises(UserError, match=r"export MY_KEY=<key>.*api_key_env"):
        OpenAIModel("m", base_url="http://127.0.0.1:1/v1", api_key="sk-1", api_key_env="MY_KEY")
    with pytest.raises(UserError, match="export OPENAI_API_KEY"):
        OpenAIModel("gpt-x")  # hosted, no key in the environment


def test_the_key_comes_from_the_named_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", "sk-123")
    with (
        FaultServer(require_authorization="Bearer sk-123") as server,
        OpenAIModel("m", base_url=server.url, api_key_env="MY_KEY", **FAST) as model,
    ):
        model.preflight()
        out = dict(model.generate(batch(2)))
    assert all(isinstance(v, list) for v in out.values())
    assert set(server.authorizations) == {"Bearer sk-123"}


def test_credentials_in_the_url_are_sent_but_never_shown(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    with FaultServer(require_authorization=basic_authorization("alice", "SECRET")) as server:
        plain = server.url
        url = plain.replace("127.0.0.1", "alice:SECRET@127.0.0.1")
        with OpenAIModel("m", base_url=url, max_retries=1, **FAST) as model:
            assert model.identity == "openai:m"
            shown = [model.identity, repr(model), str(model.base_url)]
            model.preflight()
            server.force("http_500")
            out: dict[int, list[Generation] | GenerationError] = dict(model.generate(batch(2)))
            assert all(isinstance(v, list) for v in out.values()) and model.retries == 1
            server.stop()
            failed = dict(model.generate(batch(1)))
            shown.append(str(failed[0]))
            with pytest.raises(UserError) as unreachable:
                model.preflight()
            shown.append(str(unreachable.value))
            server.start()
    assert set(server.authorizations) == {basic_authorization("alice", "SECRET")}
    shown += [r.getMessage() for r in caplog.records]
    token = basic_authorization("alice", "SECRET").split()[1]
    assert any(plain in s for s in shown)
    assert not [s for s in shown if "SECRET" in s or token in s or "alice" in s]

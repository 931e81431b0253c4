"""The gateway as LiteLLM's guardrail (``credo.serve.guardrail``): a request check lets an
accepted question through and blocks a rejected one with the score, threshold, level and
certificate; a response check passes credo's certified answer, replaces or blocks
another; bodies that are not LiteLLM's shape get a 400 in OpenAI's shape; the API key
guards the route (as LiteLLM sends it: ``x-api-key``); and the real LiteLLM proxy, run on
loopback from its own virtual environment (``make litellm``), blocks and allows requests
through it. Every server is on 127.0.0.1 and every wait is bounded."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import time
from pathlib import Path

import httpx
import openai
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from credo.models.scripted import ScriptedModel
from credo.serve.app import ChatError
from credo.serve.guard import Guard
from credo.serve.guardrail import (
    GUARDRAIL_PATH,
    Uncertifiable,
    guardrail_question,
    parse_guardrail_request,
)
from credo.serve.server import Gateway
from fault_server import FaultServer
from serve_helpers import ROOT, answerer, question

KEY = "sk-guardrail-test"
LITELLM = ROOT / ".venv-litellm" / "bin" / "litellm"
"""The LiteLLM proxy of the project's own virtual environment (``make litellm``)."""


@pytest.fixture(scope="module")
def gateway(scripted, tmp_path_factory):
    """A Guard over the scripted answerer (even questions unanimous, odd ones a coin)
    behind the app with an API key, its decision log, and its guardrail URL."""
    tmp = tmp_path_factory.mktemp("gateway")
    with Guard(scripted["adaptive"], model=ScriptedModel(answerer), log=tmp / "log.jsonl",
               overrides={"cache": str(tmp / "g.sqlite")}) as guard, \
            Gateway(guard, api_key=KEY) as url:
        yield guard, url.removesuffix("/v1") + GUARDRAIL_PATH, tmp / "log.jsonl"


def _check(url: str, body: object, key: str | None = KEY, bearer: bool = False,
           raw: bytes | None = None) -> httpx.Response:
    headers = {} if key is None else (
        {"Authorization": f"Bearer {key}"} if bearer else {"x-api-key": key})
    if raw is not None:
        return httpx.post(url, content=raw, headers=headers, timeout=60)
    return httpx.post(url, json=body, headers=headers, timeout=60)


def _request(text: str, call_id: str | None = None, **more) -> dict:
    """A request check as LiteLLM 1.108 sends it for a chat completion."""
    return {"input_type": "request", "litellm_call_id": call_id, "litellm_trace_id": "t",
            "structured_messages": [{"role": "system", "content": "Be brief."},
                                    {"role": "user", "content": text}],
            "texts": ["Be brief.", text], "images": None, "tools": None, "tool_calls": None,
            "request_data": {"user_api_key_hash": "h"}, "request_headers": {},
            "litellm_version": "1.108.7", "additional_provider_specific_params": {},
            "model": "toy", **more}


def _response(texts: list[str], call_id: str | None, **more) -> dict:
    """A response check as LiteLLM sends it: no messages, the answer's texts."""
    return {"input_type": "response", "litellm_call_id": call_id, "structured_messages": None,
            "texts": texts, "request_data": {}, "additional_provider_specific_params": {},
            "model": "toy", **more}


def _threshold(scripted) -> float:
    return json.loads(scripted["adaptive"].read_text())["certificate"]["threshold"]


# ------------------------------------------------------------------ request checks


def test_a_request_check_allows_what_the_certificate_accepts_and_blocks_the_rest(
        gateway, scripted):
    """The action is the certificate's decision on the question (the Guard's own answer to
    the same question, asked directly); a block names the score below the threshold, α, δ
    and the certificate; each check is one decision log line under LiteLLM's call id."""
    guard, url, log = gateway
    threshold = _threshold(scripted)
    for k in (400, 401, 402, 403):
        got = _check(url, _request(question(k), call_id=f"call-{k}"))
        assert got.status_code == 200, got.text
        body = got.json()
        direct = guard.ask(question(k))
        assert body["credo"]["accept"] == direct.accept == (k % 2 == 0)
        assert body["credo"]["score"] == pytest.approx(direct.score)
        assert body["credo"]["answer"] == direct.answer
        if direct.accept:
            assert body["action"] == "NONE" and body["blocked_reason"] is None
            assert direct.score >= threshold
        else:
            assert body["action"] == "BLOCKED" and direct.score < threshold
            reason = body["blocked_reason"]
            assert f"score {direct.score:.4g} below the threshold {threshold:.4g}" in reason
            assert "alpha 0.2, delta 0.1" in reason and guard.id in reason
    ids = [json.loads(x)["id"] for x in log.read_text().splitlines()]
    assert [i for i in ids if i.startswith("call-")] == [f"call-{k}" for k in (400, 401, 402,
                                                                                403)]


@pytest.mark.parametrize("change, why", [
    ({"structured_messages": [{"role": "user", "content": question(2)},
                              {"role": "assistant", "content": "18"},
                              {"role": "user", "content": question(4)}]}, "a conversation"),
    ({"structured_messages": [{"role": "user", "content": question(2)},
                              {"role": "user", "content": question(4)}]}, "2 user messages"),
    ({"structured_messages": [{"role": "user", "content": question(2)},
                              {"role": "tool", "content": "{}"}]}, "role 'tool'"),
    ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tool use"),
    ({"images": ["data:image/png;base64,AAAA"]}, "images"),
    ({"structured_messages": [{"role": "user", "content": "   "}]}, "empty"),
    ({"structured_messages": None, "texts": ["a", "b"]}, "2 texts"),
])
def test_a_request_the_certificate_cannot_cover_is_blocked_with_why(gateway, change, why):
    """A conversation, tools, images, an empty question: the certificate covers one text
    question under its template, so these are blocked (LiteLLM's client gets the reason),
    no model is asked, and the check is logged once, as failed: uncertifiable."""
    guard, url, log = gateway
    before = len(log.read_text().splitlines())
    got = _check(url, {**_request(question(2)), **change})
    assert got.status_code == 200
    assert got.json()["action"] == "BLOCKED" and why in got.json()["blocked_reason"]
    assert got.json()["credo"] == {"certificate": guard.id}
    rows = [json.loads(x) for x in log.read_text().splitlines()]
    assert len(rows) == before + 1
    assert (rows[-1]["status"], rows[-1]["cause"]) == ("failed", "uncertifiable")


def test_the_one_text_is_the_question_when_no_messages_are_sent(gateway):
    _, url, _ = gateway
    got = _check(url, {"input_type": "request", "texts": [question(6)], "request_data": {}})
    assert got.json()["action"] == "NONE" and got.json()["credo"]["answer"] == "18"


# ------------------------------------------------------------------ response checks


def test_a_response_check_passes_credos_answer_and_replaces_another(gateway):
    """After the request check of a call, its response check reads each text's answer in
    the certificate's format: equal to credo's accepted answer, NONE; different (or
    unreadable), credo's answer text instead of it; the request check's decision is used
    (no second decision logged)."""
    guard, url, log = gateway
    assert _check(url, _request(question(10), call_id="c10")).json()["action"] == "NONE"
    lines = len(log.read_text().splitlines())
    credo_text = guard.ask(question(10)).text
    same = _check(url, _response(["The total is 18.\nAnswer: 18"], "c10")).json()
    assert same["action"] == "NONE" and same["texts"] is None
    assert same["credo"]["produced"] == ["18"] and same["credo"]["agree"] == [True]
    other = _check(url, _response(["Answer: 18", "Answer: 17", "I cannot say."], "c10")).json()
    assert other["action"] == "GUARDRAIL_INTERVENED"
    assert other["texts"] == ["Answer: 18", credo_text, credo_text]
    assert other["credo"]["produced"] == ["18", "17", None]
    assert other["credo"]["agree"] == [True, False, False]
    # the log got one line: the direct ask above, none for the response checks
    assert len(log.read_text().splitlines()) == lines + 1


def test_on_mismatch_block_blocks_an_answer_that_differs(gateway):
    _, url, _ = gateway
    _check(url, _request(question(12), call_id="c12"))
    params = {"additional_provider_specific_params": {"on_mismatch": "block"}}
    got = _check(url, _response(["Answer: 7"], "c12", **params)).json()
    assert got["action"] == "BLOCKED" and "(7)" in got["blocked_reason"]
    assert "on_mismatch block" in got["blocked_reason"]
    assert _check(url, _response(["Answer: 18"], "c12", **params)).json()["action"] == "NONE"


def test_a_response_to_a_rejected_question_is_blocked(gateway):
    """Whatever the answer, the certificate does not accept the question: blocked (as
    when LiteLLM's request check failed open and its model answered anyway)."""
    _, url, _ = gateway
    assert _check(url, _request(question(13), call_id="c13")).json()["action"] == "BLOCKED"
    got = _check(url, _response(["Answer: 18"], "c13")).json()
    assert got["action"] == "BLOCKED" and "below the threshold" in got["blocked_reason"]


def test_a_response_check_with_its_messages_needs_no_request_check(gateway):
    """A caller that sends the messages with the answer (not LiteLLM 1.108) is decided
    on them."""
    _, url, _ = gateway
    body = _response(["Answer: 17"], None, structured_messages=[
        {"role": "user", "content": question(14)}])
    got = _check(url, body).json()
    assert got["action"] == "GUARDRAIL_INTERVENED" and got["credo"]["answer"] == "18"
    odd = _check(url, {**body, "structured_messages": [
        {"role": "user", "content": question(15)}]}).json()
    assert odd["action"] == "BLOCKED"


def test_a_response_check_without_its_question_is_a_400(gateway):
    """LiteLLM sends no messages with a response check: without the request check of the
    same call (mode post_call alone) there is no question, and the reply says what to
    configure."""
    _, url, _ = gateway
    got = _check(url, _response(["Answer: 18"], "never-checked"))
    assert got.status_code == 400
    assert got.json()["error"]["param"] == "structured_messages"
    assert "[pre_call, post_call]" in got.json()["error"]["message"]


def test_remembered_decisions_are_bounded(scripted, tmp_path):
    """Only the last ``remember`` request checks are kept for response checks."""
    from credo.serve.app import create_app
    from credo.serve.guardrail import guardrail_router

    with Guard(scripted["adaptive"], model=ScriptedModel(answerer),
               overrides={"cache": str(tmp_path / "g.sqlite")}) as guard:
        app = create_app(guard)
        app.include_router(guardrail_router(guard, remember=2), prefix="/small")
        from fastapi.testclient import TestClient

        with TestClient(app) as client:
            url = "/small" + GUARDRAIL_PATH
            for k in (20, 22, 24):
                assert client.post(url, json=_request(question(k), f"r{k}")).json()[
                    "action"] == "NONE"
            assert client.post(url, json=_response(["18"], "r20")).status_code == 400
            for k in (22, 24):
                assert client.post(url, json=_response(["18"], f"r{k}")).json()[
                    "action"] == "NONE"


# ------------------------------------------------------------------ errors and auth


@pytest.mark.parametrize("body, param", [
    (b"{not json", None),
    (b"[1, 2]", None),
    ({"texts": ["x"]}, "input_type"),
    ({"input_type": "verdict", "texts": ["x"]}, "input_type"),
    ({"input_type": "request", "texts": "a question"}, "texts"),
    ({"input_type": "request", "structured_messages": {"role": "user"}}, "structured_messages"),
    ({"input_type": "request"}, "structured_messages"),
    ({"input_type": "response", "texts": [], "litellm_call_id": "x"}, "texts"),
    ({"input_type": "request", "texts": ["q"], "additional_provider_specific_params":
      {"on_missmatch": "block"}}, "additional_provider_specific_params"),
    ({"input_type": "request", "texts": ["q"], "additional_provider_specific_params":
      {"on_mismatch": "shrug"}}, "additional_provider_specific_params.on_mismatch"),
    ({"input_type": "request", "texts": ["Question number 2: \ud800 how many?"]}, "texts"),
    ({"input_type": "request", "structured_messages": [
        {"role": "user", "content": "Question number 2: \ud800 how many?"}]},
     "structured_messages"),
])
def test_a_body_not_in_litellms_shape_is_a_400_in_openais_shape(gateway, body, param):
    _, url, _ = gateway
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()  # "\ud800" escaped
    got = _check(url, None, raw=raw)
    assert got.status_code == 400, got.text
    error = got.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error" and error["param"] == param
    assert len(error["message"].splitlines()) == 1


def test_the_api_key_guards_the_route_as_litellm_sends_it(gateway):
    """LiteLLM's ``api_key`` arrives as ``x-api-key``, its ``headers`` may carry
    ``Authorization: Bearer``: either opens this route with the right key, nothing opens
    it without, and ``x-api-key`` opens no other route."""
    _, url, _ = gateway
    body = _request(question(30))
    assert _check(url, body).status_code == 200
    assert _check(url, body, bearer=True).status_code == 200
    for key, bearer in ((None, False), ("wrong", False), ("wrong", True), ("", False)):
        got = _check(url, body, key=key, bearer=bearer)
        assert got.status_code == 401 and got.json()["error"]["code"] == "invalid_api_key"
    both = httpx.post(url, json=body, timeout=60,
                      headers={"x-api-key": KEY, "Authorization": "Bearer wrong"})
    assert both.status_code == 401  # a wrong bearer is not rescued by the other header
    models = url.split("/v1/")[0] + "/v1/models"
    assert httpx.get(models, headers={"x-api-key": KEY}).status_code == 401
    assert httpx.get(models, headers={"Authorization": f"Bearer {KEY}"}).status_code == 200


def _failing(messages, seed):
    if "number 666:" in messages[-1].content:
        raise ConnectionError("the model's server went away")
    return answerer(messages, seed)


def test_a_model_failure_is_a_502_which_litellm_may_fail_open_on(scripted, tmp_path):
    """The Guard's errors keep their status: the model behind it failing is 502 (LiteLLM
    counts 502, 503 and 504 as its guardrail unreachable: ``unreachable_fallback``)."""
    with Guard(scripted["adaptive"], model=ScriptedModel(_failing),
               overrides={"cache": str(tmp_path / "g.sqlite")}) as guard, \
            Gateway(guard) as base:
        url = base.removesuffix("/v1") + GUARDRAIL_PATH
        got = _check(url, _request(question(666)), key=None)
        assert got.status_code == 502 and got.json()["error"]["type"] == "upstream_error"
        assert _check(url, _request(question(668)), key=None).json()["action"] == "NONE"


# ------------------------------------------------------------------ open-ended bodies


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=12)
_MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "system", "developer", "assistant", "tool", "x"])},
    optional={"content": st.text(max_size=30) | st.lists(
        st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=10)}),
        max_size=2) | _JSON})


@given(body=st.dictionaries(st.sampled_from(
    ["input_type", "texts", "structured_messages", "tools", "images", "litellm_call_id",
     "additional_provider_specific_params", "extra"]), _JSON, max_size=6)
    | st.fixed_dictionaries({"input_type": st.sampled_from(["request", "response"])},
                            optional={"structured_messages": st.lists(_MESSAGE, max_size=4),
                                      "texts": st.lists(st.text(max_size=20), max_size=3)}))
def test_any_body_is_a_question_a_block_or_a_400(gateway, body):
    """Whatever JSON object arrives, reading it gives a question that is one user
    message's text (or the one text), a reason to block, or a 400 naming a field: never
    another exception."""
    try:
        req = parse_guardrail_request(body)
        q = guardrail_question(req, gateway[0])
    except ChatError as e:
        assert e.status == 400 and e.param
        return
    except Uncertifiable as e:
        assert str(e)
        return
    assert q.text.strip()
    if req.structured_messages is not None:
        users = [m for m in req.structured_messages if m["role"] == "user"]
        assert len(users) == 1
        content = users[0]["content"]
        assert q.text == (content if isinstance(content, str)
                          else "".join(p["text"] for p in content))
    else:
        assert req.texts == [q.text]


# ------------------------------------------------------------------ the real LiteLLM proxy


def _documented_guardrail() -> dict:
    """The guardrail block of docs/serve.md's LiteLLM config, as a team copies it."""
    import sys

    sys.path.insert(0, str(ROOT / "docs" / "gen"))
    import blocks

    page = blocks.parse_page(ROOT / "docs" / "serve.md")
    found = [b for b in page.blocks if b.lang == "yaml" and "generic_guardrail_api" in b.code]
    assert len(found) == 1, "docs/serve.md shows one LiteLLM guardrail config"
    return yaml.safe_load(found[0].code)


class _Proxy:
    """LiteLLM's proxy (``litellm --config``) in its own process group on 127.0.0.1,
    ready once ``/health/liveliness`` answers (within ``wait`` seconds)."""

    def __init__(self, config: Path, port: int, env: dict[str, str], log: Path,
                 wait: float = 120.0) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.log = log
        self.proc = subprocess.Popen(
            [str(LITELLM), "--config", str(config), "--host", "127.0.0.1", "--port", str(port)],
            stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env, cwd=config.parent,
            start_new_session=True)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"litellm exited {self.proc.returncode}:\n"
                                     + log.read_text()[-3000:])
            try:
                if httpx.get(self.url + "/health/liveliness", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        self.stop()
        raise AssertionError(f"litellm did not answer within {wait:g} s:\n"
                             + log.read_text()[-3000:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(not LITELLM.exists(), reason="LiteLLM's proxy is not installed in "
                    ".venv-litellm: `make litellm` builds it from requirements-litellm.txt "
                    "(`make test` does)")
def test_the_real_litellm_proxy_blocks_and_allows_through_credo(scripted, tmp_path):
    """LiteLLM's proxy with the guardrail block of docs/serve.md (its ``api_base`` pointed
    at a credo gateway, its ``api_key`` credo's) and two models on the loopback fake
    server, one answering 18, one 17; the official openai client through the proxy: an
    odd question (the certificate rejects it) gets LiteLLM's 400 with credo's reason and
    never reaches the model; an even one is answered, with 18 by the model that says 18
    and with credo's certified answer instead of the other's 17. credo's decision log
    has one line per question under LiteLLM's call id."""
    documented = _documented_guardrail()
    log = tmp_path / "decisions.jsonl"
    master = "sk-" + secrets.token_hex(24)
    with FaultServer(answers=("Answer: 18",)) as agrees, \
            FaultServer(answers=("Answer: 17",)) as differs, \
            Guard(scripted["adaptive"], model=ScriptedModel(answerer), log=log,
                  overrides={"cache": str(tmp_path / "g.sqlite")}) as guard, \
            Gateway(guard, api_key=KEY) as credo_url:
        guardrails = documented["guardrails"]
        for g in guardrails:
            g["litellm_params"]["api_base"] = credo_url
        config = {
            "model_list": [
                {"model_name": name, "litellm_params": {
                    "model": "openai/toy", "api_base": server.url, "api_key": "none"}}
                for name, server in (("agrees", agrees), ("differs", differs))],
            "guardrails": guardrails,
            "general_settings": {"master_key": master},
        }
        (tmp_path / "litellm.yaml").write_text(yaml.safe_dump(config))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "LITELLM"))}
        env.update(CREDO_GATEWAY_KEY=KEY, LITELLM_LOCAL_MODEL_COST_MAP="True",
                   LITELLM_TELEMETRY_DISABLED="true",
                   NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
        proxy = _Proxy(tmp_path / "litellm.yaml", _free_port(), env, tmp_path / "litellm.log")
        try:
            client = openai.OpenAI(base_url=proxy.url + "/v1", api_key=master, max_retries=0,
                                   timeout=60)

            def ask(model: str, k: int):
                return client.chat.completions.create(
                    model=model, messages=[{"role": "user", "content": question(k)}])

            with pytest.raises(openai.BadRequestError) as blocked:
                ask("agrees", 501)
            assert "not certified" in str(blocked.value) and guard.id in str(blocked.value)
            assert not any(question(501) in json.dumps(b) for b in agrees.bodies)

            allowed = ask("agrees", 500)
            assert allowed.choices[0].message.content == "Answer: 18"
            assert any(question(500) in json.dumps(b) for b in agrees.bodies)

            replaced = ask("differs", 502)
            assert differs.served >= 1  # the model did answer (17) ...
            certified = guard.ask(question(502))
            assert certified.accept and certified.answer == "18"
            # ... and the client got credo's certified answer instead
            assert replaced.choices[0].message.content == certified.text
        finally:
            proxy.stop()
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    asked = {line["question"]: line for line in lines}
    assert {question(k) for k in (500, 501, 502)} <= set(asked)
    ids = [asked[question(k)]["id"] for k in (500, 501, 502)]
    assert len(set(ids)) == 3 and not any(i.startswith("guardrail-") for i in ids)
    assert not asked[question(501)]["accept"] and asked[question(500)]["accept"]

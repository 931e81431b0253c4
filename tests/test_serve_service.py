"""The gateway as a service in front of users: a bad question fails alone, a slow one
holds nobody, limits and settings that cannot be misread, metrics that match the log,
traces, and a bounded drain. Every server listens on 127.0.0.1; every loop and wait is
bounded in count and time."""

from __future__ import annotations

import asyncio
import json
import signal
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from credo.cli import main
from credo.models.scripted import ScriptedModel
from credo.serve.app import ApiKeys, Limits, json_depth
from credo.serve.guard import Guard
from credo.serve.server import Gateway, bind
from fault_server import FaultServer
from serve_helpers import (
    SERVED_ANSWERS,
    ServeProcess,
    answerer,
    question,
)


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def _chat(text: str, **extra) -> dict:
    return {"messages": [{"role": "user", "content": text}], **extra}


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


# ------------------------------------------------------------------ a bad question fails alone

NESTED = b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
SURROGATE = b'{"messages": [{"role": "user", "content": "What is \\ud800 9 + 9?"}]}'
HUGE = json.dumps(_chat("9 + 9? " + "x" * (10 << 20))).encode()


@pytest.mark.parametrize(("bad", "status", "cause"), [
    (SURROGATE, 400, "bad_question"),
    (NESTED, 400, "bad_request"),
    (HUGE, 413, "too_large"),
])
def test_a_bad_question_fails_alone_and_all_nine_are_logged(scripted, tmp_path, bad, status,
                                                            cause):
    """A lone surrogate, JSON nested 100,000 deep or a 10 MB body sent with 8 good
    questions at once: it gets its 4xx in OpenAI's shape, the 8 are answered, and all 9
    are in the decision log, once each."""
    log = tmp_path / "decisions.jsonl"
    with Guard(scripted["adaptive"], model=ScriptedModel(answerer), log=log,
               overrides={"cache": str(tmp_path / "g.sqlite")}) as guard, \
            Gateway(guard) as url:
        bodies = [json.dumps(_chat(question(2000 + k))).encode() for k in range(8)]
        bodies.insert(4, bad)
        with ThreadPoolExecutor(9) as pool:
            replies = list(pool.map(lambda b: httpx.post(
                url + "/chat/completions", content=b, timeout=120,
                headers={"Content-Type": "application/json"}), bodies))
    codes = [r.status_code for r in replies]
    assert codes == [200] * 4 + [status] + [200] * 4
    error = replies[4].json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and "\n" not in error["message"]
    rows = _lines(log)
    assert len(rows) == 9
    assert sorted(r["id"] for r in rows) == sorted(r.headers["X-Request-Id"] for r in replies)
    assert Counter(r["status"] for r in rows)["failed"] == 1
    failed = next(r for r in rows if r["status"] == "failed")
    assert failed["cause"] == cause and failed["http_status"] == status
    assert log.stat().st_size < 100_000  # the 10 MB question is not written to the log
    answered = {r["question"] for r in rows if r["status"] != "failed"}
    assert answered == {question(2000 + k) for k in range(8)}


def test_the_surrogate_is_named_and_unsupported_fields_are_refused(scripted, tmp_path):
    """The lone surrogate's 400 names the messages; tools, a required tool_choice, a JSON
    response_format and logprobs get 400 naming the field (not ignored)."""
    with Guard(scripted["adaptive"], model=ScriptedModel(answerer),
               overrides={"cache": str(tmp_path / "g.sqlite")}) as guard, \
            Gateway(guard) as url:
        chat = url + "/chat/completions"
        surrogate = httpx.post(chat, content=SURROGATE, timeout=30,
                               headers={"Content-Type": "application/json"})
        tool = {"type": "function", "function": {"name": "f", "parameters": {}}}
        refused = {field: httpx.post(chat, json=_chat(question(1), **{field: value}),
                                     timeout=30)
                   for field, value in (("tools", [tool]), ("tool_choice", "required"),
                                        ("response_format", {"type": "json_object"}),
                                        ("logprobs", True))}
        fine = httpx.post(chat, json=_chat(question(2), tool_choice="none",
                                           response_format={"type": "text"}), timeout=30)
    assert surrogate.status_code == 400
    assert surrogate.json()["error"]["param"] == "messages"
    assert "Unicode" in surrogate.json()["error"]["message"]
    for field, reply in refused.items():
        assert reply.status_code == 400, field
        assert reply.json()["error"]["param"] == field
        assert reply.json()["error"]["code"] == "unsupported_field"
    assert fine.status_code == 200


def test_json_depth_is_counted_without_recursion():
    assert json_depth(1, 10) == 0 and json_depth([], 10) == 1
    assert json_depth({"a": [{"b": 1}]}, 10) == 3
    deep: list = []
    for _ in range(50_000):
        deep = [deep]
    assert json_depth(deep, 32) == 33


def test_a_question_longer_than_the_limit_fails_alone(scripted, tmp_path):
    with Guard(scripted["adaptive"], model=ScriptedModel(answerer), max_question_chars=200,
               overrides={"cache": str(tmp_path / "g.sqlite")}) as guard, \
            Gateway(guard, limits=Limits(max_body_bytes=4096)) as url:
        long = httpx.post(url + "/chat/completions", timeout=30,
                          json=_chat(question(3) + " " + "y" * 300))
        body = httpx.post(url + "/chat/completions", timeout=30,
                          json=_chat(question(3) + " " + "y" * 5000))
    assert long.status_code == 400 and "--max-question-chars" in long.json()["error"]["message"]
    assert body.status_code == 413 and body.json()["error"]["code"] == "request_too_large"


# ------------------------------------------------------------------ a slow call holds nobody


def test_a_hanging_call_holds_only_its_own_question(served, tmp_path):
    """A fifth of the model's calls hang (8 s). Questions arrive together; the ones
    whose calls answer are answered at once (they wait for nobody), the hanging ones get
    504 at the timeout with their calls cancelled, and each is logged with its cause."""
    _server, made = served
    log = tmp_path / "decisions.jsonl"
    with FaultServer({"slow": 0.2}, answers=SERVED_ANSWERS, slow_seconds=8,
                     fault_seed=3) as upstream:
        # no probe: its tiny requests would hang too (it is the questions' calls we test)
        options = {"base_url": upstream.url, "max_retries": 0, "timeout": 60, "probe": False}
        with Guard(made["adaptive"], log=log, timeout=3.0, overrides={
                "model_options": options, "cache": str(tmp_path / "g.sqlite")}) as guard, \
                Gateway(guard) as url:
            def ask(k: int) -> tuple[int, float]:
                t0 = time.monotonic()
                r = httpx.post(url + "/chat/completions", timeout=60,
                               json=_chat(f"Ann has {100 + k} pears?"))
                return r.status_code, time.monotonic() - t0

            t0 = time.monotonic()
            with ThreadPoolExecutor(16) as pool:
                done = list(pool.map(ask, range(16)))
            wall = time.monotonic() - t0
            in_flight = guard.in_flight
    fast = [s for code, s in done if code == 200]
    slow = [s for code, s in done if code == 504]
    assert len(fast) + len(slow) == 16 and fast and slow, done
    assert max(fast) < 2.5  # none waited for a hanging neighbour
    assert all(2.9 < s < 6 for s in slow) and wall < 8
    assert in_flight == 0
    rows = _lines(log)
    assert Counter((r["status"] == "failed", r.get("cause")) for r in rows) == \
        Counter({(False, None): len(fast), (True, "timeout"): len(slow)})


# ------------------------------------------------------------------ settings that cannot be misread


def test_an_empty_key_and_an_out_of_range_threshold_exit_2_before_listening(scripted, tmp_path,
                                                                          capsys, monkeypatch):
    with bind("127.0.0.1", 0) as probe:
        port = probe.getsockname()[1]
    base = ["serve", "--certificate", str(scripted["adaptive"]), "--port", str(port)]
    assert main([*base, "--api-key", ""]) == 2
    assert "--api-key" in _one_line_error(capsys)
    monkeypatch.setenv("KEYS", "good-key,,other")
    assert main([*base, "--api-key-env", "KEYS"]) == 2
    assert "key 2 is empty" in _one_line_error(capsys)
    (tmp_path / "keys.txt").write_text("# no keys yet\n\n")
    assert main([*base, "--api-key-file", str(tmp_path / "keys.txt")]) == 2
    assert "no API key" in _one_line_error(capsys)
    for name in ("full", "adaptive"):
        data = json.loads(scripted[name].read_text())
        for bad in (-1, 1.5):
            data["certificate"]["threshold"] = bad
            path = tmp_path / f"{name}{bad}.json"
            path.write_text(json.dumps(data))
            assert main(["serve", "--certificate", str(path), "--port", str(port)]) == 2
            assert "lies outside the scores of self_consistency" in _one_line_error(capsys)
        data["certificate"]["threshold"] = float("nan")
        path.write_text(json.dumps(data))
        assert main(["serve", "--certificate", str(path), "--port", str(port)]) == 2
        assert "certificate.threshold" in _one_line_error(capsys)
        data["certificate"]["threshold"] = 0.5
        data["certificate"]["alpha"] = 1.5
        path.write_text(json.dumps(data))
        assert main(["serve", "--certificate", str(path), "--port", str(port)]) == 2
        assert "certificate.alpha" in _one_line_error(capsys)
    with bind("127.0.0.1", port):  # nothing listened
        pass


def test_keys_rotate_through_the_key_file_without_a_restart(scripted, tmp_path):
    keys = tmp_path / "keys.txt"
    keys.write_text("old-key\n")
    with Guard(scripted["adaptive"], model=ScriptedModel(answerer),
               overrides={"cache": str(tmp_path / "g.sqlite")}) as guard, \
            Gateway(guard, api_key=ApiKeys(file=keys)) as url:
        def status(key: str) -> int:
            return httpx.get(url + "/models", headers={"Authorization": f"Bearer {key}".strip()},
                             timeout=30).status_code

        before = (status("old-key"), status("new-key"))
        keys.write_text("old-key\nnew-key\n")  # both during the rotation
        time.sleep(0.05)
        during = (status("old-key"), status("new-key"))
        keys.write_text("# rotated\nnew-key\n")
        after = (status("old-key"), status("new-key"), status(""))
    assert before == (200, 401) and during == (200, 200) and after == (401, 200, 401)


# ------------------------------------------------------------------ metrics match the log


def _samples(text: str) -> dict[tuple[str, tuple], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics_answer_prometheus_text_whose_counters_match_the_log(scripted, tmp_path):
    log = tmp_path / "decisions.jsonl"
    with Guard(scripted["adaptive"], model=ScriptedModel(answerer), log=log,
               overrides={"cache": str(tmp_path / "g.sqlite")}) as guard, \
            Gateway(guard, api_key="sk-test") as url:
        client = openai.OpenAI(base_url=url, api_key="sk-test", max_retries=0, timeout=60)
        for k in range(3000, 3010):
            client.chat.completions.create(model="scripted:scripted",
                                           messages=[{"role": "user", "content": question(k)}])
        client.chat.completions.create(model="scripted:scripted", messages=[
            {"role": "user", "content": question(3000)}])  # from the cache
        auth = {"Authorization": "Bearer sk-test"}
        httpx.post(url + "/chat/completions", json=_chat("  "), headers=auth, timeout=30)
        httpx.post(url + "/chat/completions", json=_chat("x"), timeout=30)  # no key
        scraped = httpx.get(url.removesuffix("/v1") + "/metrics", timeout=30)
    assert scraped.status_code == 200
    assert scraped.headers["content-type"].startswith("text/plain")
    got = _samples(scraped.text)
    rows = _lines(log)
    by = Counter((r["status"], r.get("cause") or "") for r in rows)
    for (status, cause), count in by.items():
        key = ("credo_gateway_questions_total", (("cause", cause), ("status", status)))
        assert got[key] == count, (status, cause)
    assert sum(v for (n, _), v in got.items() if n == "credo_gateway_questions_total") == \
        len(rows) == 13
    decided = [r for r in rows if r["status"] != "failed"]
    assert got[("credo_gateway_question_samples_count", ())] == len(decided)
    assert got[("credo_gateway_question_samples_sum", ())] == sum(r["samples"] for r in decided)
    assert got[("credo_gateway_upstream_calls_total", ())] == \
        sum(r["usage"]["calls"] for r in decided)
    assert got[("credo_gateway_samples_total", (("source", "generated"),))] == \
        sum(r["usage"]["generated_samples"] for r in decided)
    cached = got[("credo_gateway_samples_total", (("source", "cached"),))]
    assert cached == sum(r["usage"]["cached_samples"] for r in decided) == decided[-1]["samples"]
    assert got[("credo_gateway_http_requests_total", (("route", "/v1/chat/completions"),
                                                      ("status", "401")))] == 1
    assert got[("credo_gateway_http_requests_total", (("route", "/v1/chat/completions"),
                                                      ("status", "200")))] == 11
    info = next(labels for (name, labels) in got if name == "credo_gateway_certificate_info")
    assert dict(info)["id"] == guard.id and dict(info)["alpha"] == "0.2"
    assert got[("credo_gateway_questions_in_flight", ())] == 0


def test_usage_is_the_upstream_tokens_of_the_samples_drawn(served, tmp_path):
    """The reply's usage is what the server billed for this question's samples (its own
    count); asked again, the samples come from the cache and cost 0, as the credo object
    says."""
    _server, made = served
    with FaultServer(answers=SERVED_ANSWERS) as upstream:
        with Guard(made["full"], overrides={"model_options": {"base_url": upstream.url},
                                            "cache": str(tmp_path / "g.sqlite")}) as guard, \
                Gateway(guard) as url:
            client = openai.OpenAI(base_url=url, api_key="none", max_retries=0, timeout=60)
            before = Counter(upstream.usage)
            first = client.chat.completions.create(
                model="openai:toy", messages=[{"role": "user", "content": "Cal has 4 figs?"}])
            billed = Counter(upstream.usage) - before
            again = client.chat.completions.create(
                model="openai:toy", messages=[{"role": "user", "content": "Cal has 4 figs?"}])
    assert first.usage.prompt_tokens == billed["prompt_tokens"] > 0
    assert first.usage.completion_tokens == billed["completion_tokens"] > 0
    assert first.credo["usage"]["generated_samples"] == first.credo["samples"] == 8
    assert (again.usage.prompt_tokens, again.usage.completion_tokens) == (0, 0)
    assert again.credo["usage"]["cached_samples"] == 8
    assert again.credo["usage"]["calls"] == 0


# ------------------------------------------------------------------ traces


class _Collector:
    """A loopback OTLP/HTTP receiver: every POST body kept (bounded: 64)."""

    def __init__(self) -> None:
        bodies: list[bytes] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length", 0))
                if len(bodies) < 64:
                    bodies.append(self.rfile.read(size))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.bodies = bodies
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_traces_go_to_an_otlp_collector_one_span_per_question_and_round(scripted, tmp_path):
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    from credo.serve.tracing import Tracing

    collector = _Collector()
    try:
        with Guard(scripted["adaptive"], model=ScriptedModel(answerer),
                   overrides={"cache": str(tmp_path / "g.sqlite")}) as guard:
            tracing = Tracing(collector.url, guard.id)
            guard.add_observer(tracing)
            sure = guard.ask(question(4000))
            coin = guard.ask(question(4001))
            tracing.close()
    finally:
        collector.close()
    spans = []
    for body in collector.bodies:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        spans += [s for r in request.resource_spans for ss in r.scope_spans for s in ss.spans]
    questions = [s for s in spans if s.name == "credo.question"]
    rounds = [s for s in spans if s.name == "credo.round"]
    assert len(questions) == 2
    by_id = {s.span_id: s for s in questions}
    assert all(r.parent_span_id in by_id for r in rounds)
    per_question = Counter(by_id[r.parent_span_id].span_id for r in rounds)
    attrs = {s.span_id: {a.key: a.value for a in s.attributes} for s in questions}
    samples = {attrs[i]["credo.request_id"].string_value: attrs[i]["credo.samples"].int_value
               for i in attrs}
    assert sorted(samples.values()) == sorted([sure.samples, coin.samples])
    assert sure.samples != coin.samples
    # one round span per round of the decision rule: the question that drew more samples
    # took more rounds
    rounds_of = {attrs[i]["credo.request_id"].string_value: per_question[i] for i in attrs}
    more, fewer = sorted((sure, coin), key=lambda a: -a.samples)
    assert rounds_of[more.id] > rounds_of[fewer.id] >= 1


def test_nothing_of_opentelemetry_is_imported_without_an_endpoint(scripted, tmp_path):
    import subprocess
    import sys

    code = ("import sys; from credo.serve.app import create_app; "
            "print(any(m.startswith('opentelemetry.sdk') for m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env={**__import__("os").environ,
                                            "PYTHONPATH": str(Path(__file__).parents[1] / "src")})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


# ------------------------------------------------------------------ a bounded drain


def test_sigterm_with_a_hanging_model_ends_within_the_drain_timeout(served, tmp_path):
    """The model hangs 40 s per call; four clients wait; SIGTERM: the gateway stops
    listening, ends the four with 503 + Retry-After after --drain-timeout 3 s, logs
    each (cause shutting_down), and exits 0 within drain-timeout + 5 s; a second signal
    says what it waits for and shortens nothing."""
    _server, made = served
    log = tmp_path / "decisions.jsonl"
    with FaultServer({"slow": 1.0}, answers=SERVED_ANSWERS, slow_seconds=40) as hang:
        gateway = ServeProcess(["--certificate", str(made["adaptive"]), "--port", "0",
                                "--log", str(log), "--base-url", hang.url,
                                "--drain-timeout", "3"])
        try:
            assert gateway.url, "".join(gateway.out)
            with ThreadPoolExecutor(4) as pool:
                asked = [pool.submit(httpx.post, gateway.url + "/chat/completions",
                                     json=_chat(f"Dan has {k} plums?"), timeout=60)
                         for k in range(4)]
                deadline = time.monotonic() + 30
                while hang.in_flight < 4 and time.monotonic() < deadline:
                    time.sleep(0.02)
                assert hang.in_flight >= 4
                t0 = time.monotonic()
                gateway.proc.send_signal(signal.SIGTERM)
                time.sleep(1.0)
                code, out, err = gateway.stop(signal.SIGTERM, timeout=20)
                took = time.monotonic() - t0
                replies = [f.result(timeout=30) for f in asked]
        finally:
            if gateway.proc.poll() is None:
                gateway.proc.kill()
    assert code == 0, err
    assert took < 3 + 5
    assert [r.status_code for r in replies] == [503] * 4
    for r in replies:
        assert r.headers["Retry-After"] == "1"
        assert r.json()["error"]["code"] == "shutting_down"
    rows = _lines(log)
    assert len(rows) == 4
    assert {(r["status"], r["cause"]) for r in rows} == {("failed", "shutting_down")}
    assert sorted(r["id"] for r in rows) == sorted(r.headers["X-Request-Id"] for r in replies)
    assert "draining" in out and "again: still draining (4 questions pending" in out
    assert "4 ended by the drain (503)" in out


def test_a_drain_lets_the_questions_in_flight_finish(served, tmp_path):
    """With a model that answers in 1 s, SIGTERM during the questions: they are answered
    (200), logged, and the gateway exits 0 well before the drain timeout."""
    _server, made = served
    log = tmp_path / "decisions.jsonl"
    with FaultServer(answers=SERVED_ANSWERS, latency=1.0) as slow:
        gateway = ServeProcess(["--certificate", str(made["adaptive"]), "--port", "0",
                                "--log", str(log), "--base-url", slow.url,
                                "--drain-timeout", "30"])
        try:
            assert gateway.url, "".join(gateway.out)
            client = openai.AsyncOpenAI(base_url=gateway.url, api_key="none", max_retries=0,
                                        timeout=60)

            async def ask() -> list:
                async with client:
                    return await asyncio.gather(*(client.chat.completions.create(
                        model="openai:toy", messages=[{"role": "user",
                                                       "content": f"Fay has {k} kiwis?"}])
                        for k in range(6)))

            results: dict = {}
            asker = threading.Thread(target=lambda: results.update(r=asyncio.run(ask())))
            asker.start()
            deadline = time.monotonic() + 30
            while slow.in_flight == 0 and time.monotonic() < deadline:
                time.sleep(0.02)
            t0 = time.monotonic()
            code, _out, err = gateway.stop(signal.SIGTERM, timeout=40)
            took = time.monotonic() - t0
            asker.join(60)
        finally:
            if gateway.proc.poll() is None:
                gateway.proc.kill()
    assert code == 0, err
    assert took < 20
    assert [r.credo["answer"] for r in results["r"]] == ["18"] * 6
    assert sorted(r["id"] for r in _lines(log)) == sorted(r.id for r in results["r"])


def test_the_batching_settings_are_deprecated_and_change_nothing(scripted, tmp_path):
    with pytest.warns(DeprecationWarning, match="max_concurrent"), \
            pytest.warns(DeprecationWarning, match="no effect"), \
            Guard(scripted["adaptive"], model=ScriptedModel(answerer), max_batch=3,
                  batch_window=0.5, overrides={"cache": str(tmp_path / "g.sqlite")}) as guard:
        assert guard.max_concurrent == 3
        assert guard.ask(question(5000)).accept

"""``credo serve`` and ``credo.Guard``: the official openai client gets each answer with
its ``credo`` object; concurrent clients are each decided on their own and logged once;
a certificate of another recipe is refused before anything listens; auth, limits, bad
requests, upstream failures and a graceful shutdown. Every server is on 127.0.0.1 and
every loop is bounded."""

from __future__ import annotations

import asyncio
import json
import signal
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import openai
import pytest

import credo
from credo import RunConfig, run
from credo.cli import main
from credo.errors import UserError
from credo.models.scripted import ScriptedModel
from credo.plan.adaptive import settled
from credo.serve.guard import BadQuestion, Guard, GuardAnswer
from credo.serve.server import Gateway, bind
from fault_server import FaultServer
from serve_helpers import (
    SERVED_ANSWERS,
    ServeProcess,
    answerer,
    coins,
    question,
)


def _client(url: str, key: str = "none") -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key=key, max_retries=0, timeout=60)


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def _err(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


class _Counting(ScriptedModel):
    """A scripted model counting its ``generate`` calls (one per executor wave)."""

    generate_calls = 0

    def generate(self, requests):
        self.generate_calls += 1
        return super().generate(requests)


# ------------------------------------------------------------------ the openai client


def test_the_openai_client_gets_the_answer_and_the_credo_object(scripted, tmp_path):
    """The reply's message is the answer credo gives and its ``credo`` object is the
    decision: the same score and accept as a live adaptive run of the same question under
    the certificate (``credo run --certificate``), and the score is self-consistency of
    the answers drawn, by hand."""
    cert = json.loads(scripted["adaptive"].read_text())["certificate"]
    with Guard(scripted["adaptive"], model=ScriptedModel(answerer),
               overrides={"cache": str(tmp_path / "g.sqlite")}) as guard, \
            Gateway(guard) as url:
        client = _client(url)
        assert [m.id for m in client.models.list().data] == ["scripted:scripted"]
        assert httpx.get(url.removesuffix("/v1") + "/health").json()["status"] == "ok"
        got = {}
        for k in (200, 201):
            reply = client.chat.completions.create(
                model="scripted:scripted", messages=[{"role": "user", "content": question(k)}])
            got[k] = reply
        stream = client.chat.completions.create(
            model="scripted:scripted", stream=True,
            messages=[{"role": "system", "content": "Be brief."},
                      {"role": "user", "content": [{"type": "text", "text": question(201)}]}])
        chunks = list(stream)
    live = run(RunConfig(task="gsm8k", n=8, limit=None, bootstrap=0,
                         methods=["self_consistency"], out=tmp_path / "live",
                         cache=tmp_path / "live.sqlite", adaptive={"rule": "decision"},
                         certificate=scripted["adaptive"]),
               model=ScriptedModel(answerer), task=coins(2, gold=False, start=200),
               show_progress=False)
    for r, k in zip(live.items, (200, 201), strict=True):
        c = got[k].credo
        answers = [s.answer.value for s in r.original]
        pairs = sum(v * (v - 1) for v in Counter(answers).values())
        assert c["score"] == pytest.approx(pairs / (len(answers) * (len(answers) - 1)))
        assert c["score"] == pytest.approx(r.scores["self_consistency"])
        assert c["samples"] == len(r.original) and c["full_samples"] == 8
        assert c["accept"] == (r.scores["self_consistency"] >= cert["threshold"])
        assert c["threshold"] == cert["threshold"] and c["alpha"] == 0.2
        assert c["delta"] == 0.1 and c["method"] == "self_consistency"
        assert c["procedure"] == "adaptive decision" and c["certificate"].startswith("sha256:")
        assert got[k].choices[0].message.content == r.original[r.answer_index].text
    assert got[200].credo["accept"] and not got[201].credo["accept"]  # unanimous vs coin
    # the decision rule stopped the coin at the first round whose side is settled
    coin = [s.answer.value for s in live.items[1].original]
    assert len(coin) < 8 and settled(live.config.adaptive, coin, size=8)
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == got[201].choices[0].message.content
    assert chunks[-1].credo["score"] == got[201].credo["score"]


def test_the_python_form_and_concurrent_questions(scripted, tmp_path):
    """``credo.Guard`` is exported; ``ask`` gives a typed answer; ``ask_many`` answers
    concurrently, in order, with the same decisions and samples as one at a time (each
    question's sampling is its own); ``on_reject="abstain"`` says the abstention instead
    of a rejected answer."""
    assert "Guard" in credo.__all__ and credo.Guard is Guard
    questions = [question(k) for k in range(300, 316)]
    one = _Counting(answerer)
    with Guard(scripted["adaptive"], model=one,
               overrides={"cache": str(tmp_path / "one.sqlite")}) as guard:
        alone = [guard.ask(q) for q in questions]
    many = _Counting(answerer)
    with Guard(scripted["adaptive"], model=many, on_reject="abstain", abstention="Unsure.",
               overrides={"cache": str(tmp_path / "many.sqlite")}) as guard:
        together = asyncio.run(guard.ask_many(questions))
        with pytest.raises(BadQuestion, match="empty"):
            guard.ask("  ")
    assert all(isinstance(a, GuardAnswer) for a in together)
    assert [a.question for a in together] == questions
    assert [(a.answer, a.score, a.accept, a.samples) for a in together] == \
        [(a.answer, a.score, a.accept, a.samples) for a in alone]
    assert many.samples == one.samples
    assert {a.accept for a in together} == {True, False}
    for a in together:
        assert a.reply == (a.text if a.accept else "Unsure.")
        assert a.upstream.generated == a.samples and a.upstream.cached == 0


def test_identical_questions_asked_together_share_one_sampling(scripted, tmp_path):
    """32 copies of one question at once: the model draws its samples once (the others
    wait for them and read them from the cache), every copy gets the same decision, and
    the usage says who paid: the generated samples add up to one question's."""
    model = _Counting(answerer)
    with Guard(scripted["adaptive"], model=model,
               overrides={"cache": str(tmp_path / "g.sqlite")}) as guard:
        copies = asyncio.run(guard.ask_many([question(401)] * 32))
    assert len({(a.answer, a.score, a.accept, a.samples) for a in copies}) == 1
    assert model.samples == copies[0].samples
    assert sum(a.upstream.generated for a in copies) == copies[0].samples
    assert sum(a.upstream.cached for a in copies) == 31 * copies[0].samples


# ------------------------------------------------------------------ concurrency and the log


def test_64_concurrent_clients_are_answered_and_logged_once(scripted, tmp_path):
    log = tmp_path / "decisions.jsonl"
    with Guard(scripted["adaptive"], model=ScriptedModel(answerer), log=log,
               overrides={"cache": str(tmp_path / "g.sqlite")}) as guard, \
            Gateway(guard) as url:

        async def ask_all() -> list:
            client = openai.AsyncOpenAI(base_url=url, api_key="none", max_retries=0,
                                        timeout=120)
            async with client:
                return await asyncio.gather(*(
                    client.chat.completions.create(
                        model="scripted:scripted",
                        messages=[{"role": "user", "content": question(1000 + i)}])
                    for i in range(64)))

        replies = asyncio.run(ask_all())
    assert len(replies) == 64
    lines = _lines(log)
    assert len(lines) == 64
    ids = [r.id for r in replies]
    assert len(set(ids)) == 64 and sorted(x["id"] for x in lines) == sorted(ids)
    by_id = {x["id"]: x for x in lines}
    for i, r in enumerate(replies):
        row = by_id[r.id]
        status = "answered" if r.credo["accept"] else "rejected"
        assert row["question"] == question(1000 + i) and row["status"] == status
        assert row["score"] == r.credo["score"] and row["accept"] == r.credo["accept"]
        assert row["samples"] == r.credo["samples"] == row["usage"]["generated_samples"]
        assert row["usage"]["completion_tokens"] == r.usage.completion_tokens > 0
        assert row["answer"] == "18" or row["answer"] == "7"
    assert {x["accept"] for x in lines} == {True, False}


# ------------------------------------------------------------------ refusals before listening


def test_a_certificate_of_another_recipe_is_refused_before_listening(served, tmp_path,
                                                                     capsys):
    server, made = served
    with bind("127.0.0.1", 0) as probe:
        port = probe.getsockname()[1]
    cases = [
        (made["adaptive"], ["--n", "6"], "'s n differs"),
        (made["adaptive"], ["--adaptive", "off"], "adaptive differs"),
        (made["full"], ["--adaptive", "decision"], "adaptive differs"),
        (made["adaptive"], ["--adaptive-min", "8"], "adaptive.min differs"),
        (made["adaptive"], ["--model", "openai:other"], "'s model differs"),
        (made["full"], ["--prompt-style", "cot"], "task.prompt differs"),
    ]
    before = (server.requests, server.model_listings)
    for cert, extra, named in cases:
        code = main(["serve", "--certificate", str(cert), "--port", str(port), *extra])
        assert code == 2
        assert named in _err(capsys)
    assert (server.requests, server.model_listings) == before  # no model was asked
    with bind("127.0.0.1", port):  # nothing listens there
        pass
    # a certificate made on given generations has no recipe to sample
    gen = tmp_path / "gen.jsonl"
    gen.write_text("".join(json.dumps({"item": f"q{k}", "set": "original", "answer": "18",
                                       "correct": True}) + "\n"
                           for k in range(40) for _ in range(4)))
    assert main(["score", str(gen), "--format", "number", "--methods", "self_consistency",
                 "--bootstrap", "0", "--out", str(tmp_path / "scored"), "--quiet",
                 "--cache", str(tmp_path / "s.sqlite")]) == 0
    assert main(["certify", str(tmp_path / "scored"), "--method", "self_consistency",
                 "--out", str(tmp_path / "given.json")]) == 0
    capsys.readouterr()
    assert main(["serve", "--certificate", str(tmp_path / "given.json")]) == 2
    assert "credo score" in _err(capsys)


def test_the_same_recipe_is_served(served, tmp_path):
    """The served model's certificate passes the check (same identity, recipe and
    procedure), whatever URL the model is reached at."""
    _server, made = served
    with FaultServer(answers=SERVED_ANSWERS) as other:
        with Guard(made["adaptive"], overrides={"model_options": {"base_url": other.url}}) \
                as guard:
            answer = guard.ask("Bob has 3 pears?")
        assert other.requests > 0
    assert answer.answer == "18" and answer.procedure == "adaptive decision"


# ------------------------------------------------------------------ auth, limits, errors


def test_401_without_the_key_and_the_key_is_never_written(served, tmp_path):
    _server, made = served
    secret = "sk-gateway-7f3a9c"
    log = tmp_path / "decisions.jsonl"
    gateway = ServeProcess(["--certificate", str(made["adaptive"]), "--port", "0",
                            "--log", str(log), "--api-key-env", "GATEWAY_KEY"],
                           env={"GATEWAY_KEY": secret}, verbose=True)
    try:
        assert gateway.url, "".join(gateway.out)
        ask = {"model": "openai:toy", "messages": [{"role": "user", "content": "Bob has 3?"}]}
        chat = gateway.url + "/chat/completions"
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": secret}):
            refused = httpx.post(chat, json=ask, headers=headers, timeout=30)
            assert refused.status_code == 401
            assert refused.json()["error"]["code"] == "invalid_api_key"
            assert secret not in refused.text
        assert httpx.get(gateway.url + "/models", timeout=30).status_code == 401
        with pytest.raises(openai.AuthenticationError):
            _client(gateway.url, "wrong").chat.completions.create(**ask)
        reply = _client(gateway.url, secret).chat.completions.create(**ask)
        assert reply.credo["answer"] == "18"
    finally:
        code, out, err = gateway.stop(signal.SIGTERM)
    assert code == 0, err
    rows = _lines(log)  # every question that reached the route: 4 refused, 1 answered
    assert [(r["status"], r.get("cause")) for r in rows] == \
        [("failed", "unauthorized")] * 4 + [("answered", None)]
    written = [log.read_bytes(), out.encode(), err.encode()]
    written += [p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()]
    assert not any(secret.encode() in blob for blob in written)


def test_429_with_retry_after_beyond_the_queue(scripted, tmp_path):
    """One question sampled, one waiting: a third gets 429 with Retry-After, the first
    two are answered."""

    def slow(messages, seed):
        time.sleep(0.15)
        return answerer(messages, seed)

    with Guard(scripted["adaptive"], model=ScriptedModel(slow), max_concurrent=1, max_queue=1,
               overrides={"cache": str(tmp_path / "g.sqlite")}) as guard, \
            Gateway(guard) as url:
        ask = {"model": "scripted:scripted"}
        with ThreadPoolExecutor(2) as pool:
            first = [pool.submit(httpx.post, url + "/chat/completions", timeout=60, json={
                **ask, "messages": [{"role": "user", "content": question(k)}]})
                for k in (500, 502)]
            deadline = time.monotonic() + 30
            while guard.pending < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
            busy = httpx.post(url + "/chat/completions", timeout=60, json={
                **ask, "messages": [{"role": "user", "content": question(504)}]})
            done = [f.result() for f in first]
    assert busy.status_code == 429
    assert int(busy.headers["Retry-After"]) >= 1
    assert busy.json()["error"]["code"] == "rate_limit_exceeded"
    assert [r.status_code for r in done] == [200, 200]


@pytest.mark.parametrize(("body", "status", "param"), [
    (b"{not json", 400, None),
    (b"[1, 2]", 400, None),
    ({"messages": []}, 400, "messages"),
    ({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                   {"role": "user", "content": "c"}]}, 400, "messages[1]"),
    ({"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]},
     400, "messages"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400,
     "messages[0].content"),
    ({"messages": [{"role": "user", "content": "   "}]}, 400, "messages"),
    ({"messages": [{"role": "user", "content": "a"}], "n": 3}, 400, "n"),
    ({"messages": [{"role": "user", "content": "a"}], "stream": "yes"}, 400, "stream"),
    ({"messages": [{"role": "user", "content": "a"}], "credo": {"choices": "A"}}, 400,
     "credo.choices"),
    ({"model": "gpt-4o", "messages": [{"role": "user", "content": "a"}]}, 404, "model"),
])
def test_bad_requests_get_one_line_in_openais_shape(scripted, tmp_path, body, status, param):
    with Guard(scripted["adaptive"], model=ScriptedModel(answerer),
               overrides={"cache": str(tmp_path / "g.sqlite")}) as guard, \
            Gateway(guard) as url:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        reply = httpx.post(url + "/chat/completions", content=data, timeout=30,
                           headers={"Content-Type": "application/json"})
        missing = httpx.get(url + "/v2/nothing", timeout=30)
    assert reply.status_code == status
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["param"] == param
    assert error["message"] and "\n" not in error["message"]
    assert missing.status_code == 404 and "error" in missing.json()


def test_502_when_the_upstream_model_fails(served, tmp_path):
    """The model's server fails every request: 502 with one line, a 'failed' log line,
    nothing cached; once it answers again, the same question is answered."""
    _server, made = served
    log = tmp_path / "decisions.jsonl"
    with FaultServer(answers=SERVED_ANSWERS) as upstream:
        options = {"base_url": upstream.url, "max_retries": 1, "retry_backoff": 0.001}
        with Guard(made["adaptive"], log=log, overrides={
                "model_options": options, "cache": str(tmp_path / "g.sqlite")}) as guard, \
                Gateway(guard) as url:
            upstream.force("http_500", 1000)
            failed = httpx.post(url + "/chat/completions", timeout=60, json={
                "messages": [{"role": "user", "content": "Bob has 9 pears?"}]})
            upstream._forced.clear()
            again = _client(url).chat.completions.create(
                model="openai:toy", messages=[{"role": "user", "content": "Bob has 9 pears?"}])
    assert failed.status_code == 502
    error = failed.json()["error"]
    assert error["type"] == "upstream_error" and "\n" not in error["message"]
    assert again.credo["answer"] == "18"
    rows = _lines(log)
    assert [r["status"] for r in rows] == ["failed", "answered"]
    assert rows[0]["cause"] == "upstream" and rows[0]["kind"] == "http_500"
    assert error["code"] == "http_500" and "HTTP 500" in error["message"]


def test_a_slow_decision_times_out_and_is_still_logged(scripted, tmp_path):
    def slow(messages, seed):
        time.sleep(0.1)
        return answerer(messages, seed)

    log = tmp_path / "decisions.jsonl"
    with Guard(scripted["adaptive"], model=ScriptedModel(slow), log=log,
               overrides={"cache": str(tmp_path / "g.sqlite")}) as guard, \
            Gateway(guard, timeout=0.2) as url:
        late = httpx.post(url + "/chat/completions", timeout=60, json={
            "messages": [{"role": "user", "content": question(700)}]})
    assert late.status_code == 504 and late.json()["error"]["code"] == "timeout"
    rows = _lines(log)
    assert [(r["question"], r["status"], r["cause"]) for r in rows] == \
        [(question(700), "failed", "timeout")]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_finishes_the_request_in_flight(served, tmp_path, sig):
    _server, made = served
    log = tmp_path / "decisions.jsonl"
    with FaultServer(answers=SERVED_ANSWERS, latency=1.0) as slow:
        gateway = ServeProcess(["--certificate", str(made["adaptive"]), "--port", "0",
                                "--log", str(log), "--base-url", slow.url])
        try:
            assert gateway.url, "".join(gateway.out)
            result: dict = {}

            def ask() -> None:
                result["reply"] = _client(gateway.url).chat.completions.create(
                    model="openai:toy",  # a question per signal: not cached by the other
                    messages=[{"role": "user", "content": f"Eve has {int(sig)}?"}])

            asker = threading.Thread(target=ask)
            asker.start()
            deadline = time.monotonic() + 60
            while slow.in_flight == 0 and time.monotonic() < deadline:
                time.sleep(0.02)
            assert slow.in_flight > 0
        finally:
            code, out, err = gateway.stop(sig)
        asker.join(60)
    assert code == 0, err
    assert result["reply"].credo["answer"] == "18"
    rows = _lines(log)
    assert [r["id"] for r in rows] == [result["reply"].id]
    assert "stopped; 1 questions answered" in out
    assert "exchangeable with its 60 calibration questions" in out


def test_a_choice_certificate_takes_its_options(tmp_path):
    """A multiple-choice certificate needs the options (``credo.choices``); they are
    rendered by the certificate's template."""
    from credo.tasks.base import AnswerFormat, Item, Task

    def pick(messages, seed):
        text = messages[-1].content
        return "Answer: B" if "capital" in text else f"Answer: {'AB'[seed % 2]}"

    task = Task("quiz", tuple(Item(f"q{k}", f"Quiz {k}: {'capital' if k % 2 else 'coin'}?",
                                   "B", ("Paris", "Lyon")) for k in range(60)),
                AnswerFormat.CHOICE)
    cfg = RunConfig(task="quiz", n=8, limit=None, bootstrap=0, methods=["self_consistency"],
                    out=tmp_path / "calib", cache=tmp_path / "c.sqlite")
    run(cfg, model=ScriptedModel(pick), task=task, show_progress=False)
    from credo.api import certify_run

    certify_run(tmp_path / "calib", "self_consistency", alpha=0.2, out=tmp_path / "c.json")
    with Guard(tmp_path / "c.json", model=ScriptedModel(pick)) as guard, Gateway(guard) as url:
        bare = httpx.post(url + "/chat/completions", timeout=30, json={
            "messages": [{"role": "user", "content": "Quiz 99: capital?"}]})
        reply = _client(url).chat.completions.create(
            model="scripted:scripted", messages=[{"role": "user", "content": "Quiz 99: capital?"}],
            extra_body={"credo": {"choices": ["Paris", "Lyon"]}})
    assert bare.status_code == 400 and "options" in bare.json()["error"]["message"]
    assert reply.credo["answer"] == "B" and reply.credo["accept"]
    assert reply.credo["procedure"] == "full recipe"


def test_a_nothing_certified_certificate_is_refused(scripted, tmp_path):
    data = json.loads(scripted["full"].read_text())
    data["certificate"]["threshold"] = None
    data["certificate"]["message"] = "nothing certified"
    path = tmp_path / "none.json"
    path.write_text(json.dumps(data))
    with pytest.raises(UserError, match="certified nothing"):
        Guard(path, model=ScriptedModel(answerer))


def test_the_command_line_does_not_import_the_web_stack() -> None:
    """``credo --help`` and ``import credo`` stay light: FastAPI and uvicorn are imported
    by ``credo serve`` only."""
    import subprocess
    import sys

    code = ("import sys, credo, credo.cli; credo.cli._parser(); credo.Guard; "
            "print(','.join(m for m in ('fastapi', 'uvicorn', 'starlette') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=Path(__file__).resolve().parents[1],
                          env={**__import__("os").environ,
                               "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""


def test_a_failing_log_fails_the_question_instead_of_hanging(scripted, tmp_path) -> None:
    from credo.serve.guard import GuardError
    from credo.serve.log import DecisionLog

    log = DecisionLog(tmp_path / "decisions.jsonl")
    with Guard(scripted["adaptive"], model=ScriptedModel(answerer), log=log,
               overrides={"cache": str(tmp_path / "g.sqlite")}) as guard:
        assert guard.ask(question(900), timeout=60).accept
        log.close()  # as a full disk would fail the next write
        with pytest.raises(GuardError, match="decision log is closed"):
            guard.ask(question(902), timeout=60)
        assert guard.pending == 0
    assert len(_lines(tmp_path / "decisions.jsonl")) == 1

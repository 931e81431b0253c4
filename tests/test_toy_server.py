"""``credo toy-server``: the tutorials' toy model, started from the command line; a taken
port is a user error in one line (exit 2), and the model answers as the tutorials say
(sums right more often when small; prefixes for a writer prompt; seeds as credo's
contract, or ignored with --ignore-seeds)."""

from __future__ import annotations

import json
import socket
import urllib.request

from credo.cli import main
from credo.devtools.toy_server import CONTEXTS, ToyModelServer, toy_reply
from credo.perturb.context import PROMPTS


def _chat(url: str, body: dict) -> dict:
    req = urllib.request.Request(f"{url}/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as reply:
        return json.loads(reply.read())


def test_a_taken_port_is_one_line_naming_the_option(capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["toy-server", "--port", str(port)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) <= 2 and err[0].startswith(f"error: --port {port}: cannot listen")


def test_the_toy_model_answers_as_the_tutorials_say():
    ask = [{"role": "user", "content": "What is 3 + 4?"}]
    hard = [{"role": "user", "content": "What is 5678 + 1234?"}]
    right_small = sum(toy_reply(ask, s) == "Answer: 7" for s in range(400)) / 400
    right_big = sum(toy_reply(hard, s) == "Answer: 6912" for s in range(400)) / 400
    assert right_small > 0.9 > 0.4 > right_big > 0.1
    writer = [{"role": "system", "content": PROMPTS["v2"]}, {"role": "user", "content": "x"}]
    assert toy_reply(writer, 3) == CONTEXTS[3]
    with ToyModelServer() as toy:
        with urllib.request.urlopen(f"{toy.url}/models", timeout=10) as r:
            assert json.loads(r.read())["data"][0]["id"] == "toy"
        many = _chat(toy.url, {"model": "m", "messages": hard, "n": 4, "seed": 10})
        one = [_chat(toy.url, {"model": "m", "messages": hard, "seed": 10 + j})
               for j in range(4)]
        texts = [c["message"]["content"] for c in many["choices"]]
        assert texts == [r["choices"][0]["message"]["content"] for r in one]
        assert many["usage"]["completion_tokens"] == sum(len(t.split()) for t in texts)
    with ToyModelServer(ignore_seeds=True) as toy:
        body = {"model": "m", "messages": hard, "seed": 1234}
        repeats = [_chat(toy.url, body)["choices"][0]["message"]["content"] for _ in range(12)]
    assert len(set(repeats)) > 1  # a fixed seed, yet fresh draws
    with ToyModelServer(ignore_seeds=True) as again:
        assert [_chat(again.url, body)["choices"][0]["message"]["content"]
                for _ in range(12)] == repeats  # and the same on every run

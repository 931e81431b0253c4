"""A loopback toy model: an OpenAI-compatible chat server that answers sums like a small
model, so the tutorials run in seconds without a model of your own (``credo toy-server``).

:class:`ToyModelServer` serves ``POST /v1/chat/completions`` and ``GET /v1/models`` on
127.0.0.1 from a background thread (``with ToyModelServer(port=8000) as server:``
... ``server.url``). Its replies depend on the prompt the way a small model's would, so
a run against it has right and wrong answers and its tables mean something:

- a perturbation writer's prompt (credo's writer prompts,
  :data:`credo.perturb.context.PROMPTS`) gets one of :data:`CONTEXTS`, chosen by the
  sample's seed;
- a question holding ``A + B`` gets ``Answer: <A + B>`` with a probability that falls
  with the size of the numbers (0.95 for one-digit operands, 0.7 for two, 0.45 for three,
  0.25 beyond), with or without a context prefix (the prefixes are neutral: accuracy does
  not move), and otherwise a miss: off by 1 or 2 without a prefix, off by 10 or 100 under
  one, so the wrong answers, and only they, depend on the context (what C3 measures).
  Which answer is a hash of (the messages, the sample's seed), so a rerun, a resumed run
  and lm-eval or inspect asking the same prompt get the same texts;
- anything else gets ``Answer: 18``.

Seeds. Sample ``j`` of a call with ``n`` choices and seed ``s`` is the single call with
seed ``s + j`` (credo's seed contract, as llama.cpp's server keeps it); a request without
a seed is seeded 0. With ``ignore_seeds=True`` the server plays one that ignores seeds,
as tools that repeat one request expect (lm-eval's ``repeats``, inspect's ``epochs``):
the k-th arrival of the same request body gets seed hash(body, k), so the answers to a
repeated request are fresh draws and yet the same on every run, whatever the order in
which other requests arrive.

``usage`` counts words, one token each (the prompt's, split on whitespace, and the words
generated); ``max_tokens`` cuts a reply to that many words (finish reason ``length``);
``logprobs: true`` adds deterministic ``top_logprobs``. Replies are HTTP/1.0 (one
connection each), so stopping never waits on an idle keep-alive connection.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import threading
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["CONTEXTS", "MODEL_ID", "ToyModelServer", "digest", "toy_logprobs", "toy_reply",
           "unit"]

CONTEXTS = (
    "Farmers at the market often compare their harvests with each other.",
    "Children in many schools practise sums with small wooden blocks.",
    "Shopkeepers keep ledgers to track what they sell every day.",
    "Bakers plan their mornings around the ovens and the first customers.",
    "Libraries lend books to readers of every age in the town.",
    "Trains between the two cities run on a fixed weekday timetable.",
)
"""The topic-neutral context sentences the toy model writes when asked for a prefix."""

MODEL_ID = "toy"
"""The model ``GET /v1/models`` lists (any model name is answered the same way)."""

_SUM = re.compile(r"(\d[\d,]*)\s*\+\s*(\d[\d,]*)")


def digest(*parts: object) -> int:
    """A stable 64-bit hash of ``parts`` (JSON, sorted keys)."""
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def unit(*parts: object) -> float:
    """A stable number in [0, 1) from ``parts``."""
    return digest(*parts) / 2**64


def _accuracy(a: int, b: int) -> float:
    digits = len(str(max(a, b)))
    return {1: 0.95, 2: 0.7, 3: 0.45}.get(digits, 0.25)


def toy_reply(messages: Sequence[Mapping[str, Any]], seed: int) -> str:
    """What the toy model answers to ``messages`` with sample seed ``seed``."""
    from credo.perturb.context import PROMPTS

    contents = [str(m.get("content") or "") for m in messages]
    if contents and contents[0] in PROMPTS.values():
        return CONTEXTS[seed % len(CONTEXTS)]
    user = next((str(m.get("content") or "") for m in reversed(messages)
                 if m.get("role") == "user"), "")
    found = _SUM.findall(user)
    if not found:
        return "Answer: 18"
    a, b = (int(x.replace(",", "")) for x in found[-1])
    perturbed = any(c.rstrip(".") in user for c in CONTEXTS)
    if unit("toy", messages, seed) < _accuracy(a, b):
        return f"Answer: {a + b}"
    misses = (10, 100, -10) if perturbed else (1, -1, 2)
    return f"Answer: {a + b + misses[digest('miss', messages, seed) % 3]}"


def toy_logprobs(words: list[str], messages: Any, seed: int, top: int) -> list[dict[str, Any]]:
    """Deterministic per-token logprobs of ``words`` with ``top`` alternatives (the token
    first), as OpenAI's ``logprobs.content``."""
    out = []
    for i, word in enumerate(words):
        chosen = -round(2.0 * unit("lp", messages, seed, i), 4)
        alternatives = [{"token": word, "logprob": chosen, "bytes": None}]
        for k in range(1, top):
            alternatives.append(
                {"token": f"<alt{k}>", "logprob": round(chosen - 1.0 - k, 4), "bytes": None})
        out.append({"token": word, "logprob": chosen, "bytes": None,
                    "top_logprobs": alternatives[:top]})
    return out


class ToyModelServer:
    """The toy model on ``host``:``port`` (0: a free port), listening from construction
    until :meth:`close` (or the end of a ``with`` block); see the module docstring."""

    def __init__(self, *, port: int = 0, host: str = "127.0.0.1",
                 ignore_seeds: bool = False) -> None:
        self.ignore_seeds = ignore_seeds
        self._arrivals: dict[int, int] = {}
        self._lock = threading.Lock()
        self._httpd = _HTTPServer(self, host, port)
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True,
                                        name=f"toy-model-{self.port}")
        self._thread.start()

    @property
    def host(self) -> str:
        return str(self._httpd.server_address[0])

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """The base URL a client takes: ``http://HOST:PORT/v1``."""
        return f"http://{self.host}:{self.port}/v1"

    def close(self) -> None:
        """Stop listening and close the port."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def wait(self) -> None:
        """Block until the server is closed (``credo toy-server``: until Ctrl-C)."""
        while self._thread.is_alive():
            self._thread.join(timeout=0.5)

    def __enter__(self) -> ToyModelServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def completion(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """The reply to a chat completion request ``body``."""
        messages = body.get("messages") or []
        n = int(body.get("n") or 1)
        seed = int(body.get("seed") or 0)
        if self.ignore_seeds:
            key = digest("body", {k: v for k, v in body.items() if k != "seed"})
            with self._lock:
                k = self._arrivals[key] = self._arrivals.get(key, -1) + 1
            seed = digest("reseed", key, k) % 2**31
        top = int(body.get("top_logprobs") or 0) if body.get("logprobs") else -1
        max_tokens = body.get("max_tokens")
        choices, tokens = [], 0
        for j in range(n):
            text = toy_reply(messages, seed + j)
            words = [w if i == 0 else " " + w for i, w in enumerate(text.split(" "))]
            finish = "stop"
            if max_tokens is not None and len(words) > int(max_tokens):
                words, finish = words[: int(max_tokens)], "length"
            choice: dict[str, Any] = {"index": j, "finish_reason": finish, "logprobs": None,
                                      "message": {"role": "assistant", "content": "".join(words)}}
            if top >= 0:
                choice["logprobs"] = {"content": toy_logprobs(words, messages, seed + j, top)}
            choices.append(choice)
            tokens += len(words)
        prompt = sum(len(str(m.get("content") or "").split()) for m in messages)
        return {
            "id": f"chatcmpl-toy-{digest('id', messages, seed) % 10**12}",
            "object": "chat.completion", "created": 0, "model": body.get("model", MODEL_ID),
            "choices": choices,
            "usage": {"prompt_tokens": prompt, "completion_tokens": tokens,
                      "total_tokens": prompt + tokens},
        }


class _HTTPServer(ThreadingHTTPServer):
    """The listening socket of a :class:`ToyModelServer` (``toy`` answers)."""

    daemon_threads = True
    request_queue_size = 128  # socketserver's 5 drops connections under load

    def __init__(self, toy: ToyModelServer, host: str, port: int) -> None:
        self.toy = toy
        super().__init__((host, port), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (its timeout, a cancelled call) is ordinary traffic:
        say nothing, so no traceback lands in the output of a process sharing stderr;
        any other error is printed as socketserver does."""
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    """One request to a :class:`ToyModelServer`."""

    protocol_version = "HTTP/1.0"
    timeout = 10  # a silent client never holds a thread for long
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: a tutorial's terminal shows credo's output, not an access log

    def _path(self) -> str:
        return self.path.partition("?")[0].rstrip("/")

    def do_GET(self) -> None:
        if self._path() != "/v1/models":
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        self._json(200, {"object": "list", "data": [{"id": MODEL_ID, "object": "model"}]})

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self._path() != "/v1/chat/completions":
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        try:
            body = json.loads(raw)
            if not isinstance(body, dict):
                raise ValueError("not an object")
            reply = self.server.toy.completion(body)
        except (ValueError, TypeError) as exc:
            self._json(400, {"error": {"message": f"bad request: {exc}"}})
            return
        self._json(200, reply)

    def _json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

"""A deterministic OpenAI-compatible server that injects faults, for tests.

``FaultServer`` serves ``POST /v1/chat/completions`` and ``GET /v1/models`` on
``127.0.0.1`` (a free port) from a :class:`http.server.ThreadingHTTPServer` in a
background thread::

    with FaultServer({"http_500": 0.05, "null_content": 0.05}, fault_seed=1) as server:
        model = OpenAIModel("m", base_url=server.url, retry_backoff=0.001)
        ...
        server.requests          # chat completion requests received (faults and 400s included)
        server.served            # ... answered cleanly
        server.faults            # Counter: kind -> faults injected
        server.retryable_faults  # those a client should retry (= its retries if none ran out)
        server.model_listings    # GET /v1/models
        server.authorizations    # every Authorization header seen (None: absent)
        server.max_in_flight     # most chat requests handled at once
        server.bodies            # every chat request body received (parsed)
        server.queries           # the query string of every request ("" when none)
        server.usage             # Counter: prompt_tokens, completion_tokens, replies sent

Answers. Choice ``j`` of a reply is a pure function of (the messages, ``seed + j``): one
of ``answers`` picked by a hash, cut to ``max_tokens`` words (finish reason ``length``);
``usage`` counts words: the prompt's (split on whitespace) and the words generated, one
token each (as ``logprobs`` and the ``max_tokens`` cut count them), summed over the
choices; ``logprobs: true`` adds deterministic ``top_logprobs``. A request without
``seed`` is seeded 0. ``usage`` of the server adds up the ``usage`` of every chat
completion it sent whole (content faults included), with ``replies`` counting them: what
the server billed. ``requests`` counts every chat request received, those it refused
(a 400 for ``n`` above ``max_n``, a bad grammar or body) and those that failed included:
what a client's ledger must count as calls.

Servers that differ (``credo probe`` tells them apart): ``seed_mode`` "contract" (the
default, llama.cpp's server) seeds child ``j`` with ``seed + j``; "scrambled" with
``seed * 7 + j`` (deterministic, but child ``j`` is not the single call with ``seed + j``);
"ignored" draws a fresh seed for every request (nothing is reproducible); "repeats"
ignores the seed too, but reproducibly: the k-th arrival of a body is seeded by a hash of
the body and k, so which answers a run's requests get does not depend on the order in
which concurrent requests arrive (a tool that sends every epoch of a question alike).
``honour_n=False`` answers one choice whatever ``n``; ``logprobs=False`` never returns
logprobs; ``grammar=True`` obeys a llama.cpp ``grammar`` of the form
``root ::= "a" | "b" | ...`` (one alternative, picked by the child's seed), and answers
400 to any other grammar; ``max_n`` refuses a larger ``n`` with llama.cpp's 400 ("Field
'n': Value must be between 1 <= value <= 4, but got 5"). ``latency`` seconds pass before
every chat reply.

Faults. ``faults`` maps a kind of :data:`FAULT_KINDS` (or any ``http_<status>``) to the
probability that a request gets it. The draw is a hash of (``fault_seed``, the request
body, how often that body was seen before), not a shared random stream, so which
request fails does not depend on thread timing and a retry of a request draws anew:
runs are reproducible. :meth:`force` makes the next requests fail a given way, in
arrival order. ``empty_content`` is no fault: every choice says ``""`` with finish
reason ``stop`` (counted in ``faults`` all the same).

Lifetime. :meth:`stop` closes the port (clients then get "connection refused"),
:meth:`start` listens again on the same port; :meth:`close` (or leaving the ``with``)
stops it for good. Replies are HTTP/1.0 (one connection each), so stopping never waits
on an idle keep-alive connection; a handler blocks at most ``slow_seconds``.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from credo.devtools.toy_server import digest as _digest
from credo.devtools.toy_server import toy_logprobs as _logprobs
from credo.devtools.toy_server import unit as _unit

FAULT_KINDS = (
    "malformed_json",  # 200 with a body that is not JSON
    "not_a_completion",  # 200 with JSON that is no chat completion ({"object": "error"...})
    "html",  # 200 with an HTML page (Content-Type text/html)
    "null_content",  # one choice's message content is null
    "missing_content",  # one choice has no message
    "fewer_choices",  # one choice fewer than n
    "truncated_body",  # Content-Length larger than the body, then the connection closes
    "http_408",
    "http_429",  # with Retry-After (``retry_after``, "0" by default)
    "http_500",
    "http_503",  # with Retry-After too
    "slow",  # answers after ``slow_seconds`` (a client with a shorter timeout times out)
    "empty_content",  # not a fault: every choice is "" with finish reason "stop"
)
"""Kinds of :class:`FaultServer` faults; ``http_<status>`` works for any other status."""

RETRYABLE_KINDS = frozenset(FAULT_KINDS) - {"empty_content", "slow"}
"""The kinds a client should retry (and ``http_<5xx>`` of any status; ``slow`` only when
the client's timeout is shorter than ``slow_seconds``)."""

DEFAULT_ANSWERS = (
    "Let me compute. Answer: 18",
    "Answer: 18",
    "The total is 18.\nAnswer: 18",
    "Answer: 17",
    "Answer: 24",
    "I think it is 18. Answer: 18",
)


class FaultServer:
    """An OpenAI-compatible chat server on 127.0.0.1 with seeded fault injection.

    ``require_authorization``: when set, a request whose ``Authorization`` header differs
    gets 401 (every header seen is recorded in ``authorizations``). ``answers``: the
    vocabulary of replies. ``retry_after``: the ``Retry-After`` value sent with 429/503
    (``None``: no header).
    """

    def __init__(
        self,
        faults: Mapping[str, float] | None = None,
        *,
        fault_seed: int = 0,
        answers: Sequence[str] = DEFAULT_ANSWERS,
        require_authorization: str | None = None,
        retry_after: str | None = "0",
        slow_seconds: float = 0.5,
        port: int = 0,
        seed_mode: str = "contract",
        honour_n: bool = True,
        logprobs: bool = True,
        grammar: bool = False,
        max_n: int | None = None,
        latency: float = 0.0,
    ) -> None:
        if seed_mode not in SEED_MODES:
            raise ValueError(f"unknown seed_mode {seed_mode!r}; known: {SEED_MODES}")
        faults = dict(faults or {})
        for kind, rate in faults.items():
            if kind not in FAULT_KINDS and not _status_of(kind):
                raise ValueError(f"unknown fault kind {kind!r}; known: {FAULT_KINDS}")
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"fault rate of {kind} must be in [0, 1], got {rate}")
        if sum(faults.values()) > 1.0 + 1e-9:
            raise ValueError(f"fault rates sum to more than 1: {faults}")
        self.fault_rates = faults
        self.fault_seed = fault_seed
        self.answers = tuple(answers)
        self.require_authorization = require_authorization
        self.retry_after = retry_after
        self.slow_seconds = slow_seconds
        self.seed_mode = seed_mode
        self.honour_n = honour_n
        self.logprobs = logprobs
        self.grammar = grammar
        self.max_n = max_n
        self.latency = latency
        self.in_flight = 0
        self.max_in_flight = 0
        self.bodies: list[dict[str, Any]] = []
        self.queries: list[str] = []
        self._fresh_seeds = 0
        self._repeats: Counter[str] = Counter()
        self.requests = 0
        self.model_listings = 0
        self.served = 0
        self.faults: Counter[str] = Counter()
        self.authorizations: list[str | None] = []
        self.usage: Counter[str] = Counter()
        self._forced: list[str] = []
        self._seen: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._port = port
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.start()

    # ------------------------------------------------------------------ lifetime

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        """The base URL a client takes: ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self._port}/v1"

    @property
    def running(self) -> bool:
        return self._httpd is not None

    def start(self) -> None:
        """Listen (again, on the same port after :meth:`stop`)."""
        if self._httpd is not None:
            return
        httpd = _HTTPServer(self, self._port)
        self._port = httpd.server_address[1]
        thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            daemon=True,
            name=f"fault-server-{self._port}",
        )
        thread.start()
        self._httpd, self._thread = httpd, thread

    def stop(self) -> None:
        """Stop listening and close the port. A handler in progress is not waited for: it
        ends by itself (within ``slow_seconds``, or its socket's 10 s timeout)."""
        httpd, thread = self._httpd, self._thread
        self._httpd = self._thread = None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        if thread is not None:
            thread.join(timeout=5)

    close = stop

    def __enter__(self) -> FaultServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ faults

    def force(self, kind: str, times: int = 1) -> None:
        """The next ``times`` chat requests get fault ``kind`` (before any drawn fault)."""
        if kind not in FAULT_KINDS and not _status_of(kind):
            raise ValueError(f"unknown fault kind {kind!r}")
        with self._lock:
            self._forced.extend([kind] * times)

    @property
    def retryable_faults(self) -> int:
        """Faults injected that a client should have retried."""
        with self._lock:
            return sum(
                count
                for kind, count in self.faults.items()
                if kind in RETRYABLE_KINDS or _status_of(kind) >= 500
            )

    def refused(self) -> None:
        """Count a chat request answered 400 before any fault was drawn for it."""
        with self._lock:
            self.requests += 1

    def _draw(self, body: bytes) -> str | None:
        """The fault of this request (``None``: a clean reply); counts it."""
        with self._lock:
            self.requests += 1
            if self._forced:
                kind: str | None = self._forced.pop(0)
            else:
                digest = hashlib.sha256(body).hexdigest()
                attempt = self._seen[digest]
                self._seen[digest] += 1
                u = _unit("fault", self.fault_seed, digest, attempt)
                kind = None
                for name, rate in sorted(self.fault_rates.items()):
                    if u < rate:
                        kind = name
                        break
                    u -= rate
            if kind is None:
                self.served += 1
            else:
                self.faults[kind] += 1
            return kind

    # ------------------------------------------------------------------ answers

    def completion(self, body: Mapping[str, Any], fault: str | None = None) -> dict[str, Any]:
        """The reply to a chat request ``body`` (with a content fault applied), as this
        server's ``seed_mode``, ``honour_n``, ``logprobs`` and ``grammar`` make it."""
        body = dict(body)
        if not self.honour_n:
            body["n"] = 1
        if not self.logprobs:
            body.pop("logprobs", None)
        if not self.grammar:
            body.pop("grammar", None)
        if self.seed_mode == "ignored":
            with self._lock:
                self._fresh_seeds += 1
                body["seed"] = _digest("fresh", self._fresh_seeds) % 2**31
        elif self.seed_mode == "repeats":
            key = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
            with self._lock:
                repeat = self._repeats[key]
                self._repeats[key] += 1
            body["seed"] = _digest("repeat", key, repeat) % 2**31
        return completion(body, self.answers, fault, self.seed_mode)


def completion(
    body: Mapping[str, Any],
    answers: Sequence[str] = DEFAULT_ANSWERS,
    fault: str | None = None,
    seed_mode: str = "contract",
) -> dict[str, Any]:
    """The reply of a :class:`FaultServer` with ``answers`` to a chat request ``body``
    (with a content ``fault`` applied): what a clean server answers when ``fault`` is None.
    A ``grammar`` in the body is obeyed (see the module docstring)."""
    messages = body.get("messages") or []
    n = int(body.get("n") or 1)
    seed = int(body.get("seed") or 0)
    max_tokens = body.get("max_tokens")
    top = int(body.get("top_logprobs") or 0) if body.get("logprobs") else -1
    allowed = _grammar_words(body.get("grammar")) if body.get("grammar") else None
    choices = []
    tokens = []
    for j in range(n):
        child = seed * 7 + j if seed_mode == "scrambled" else seed + j
        vocabulary = allowed or answers
        text = vocabulary[_digest("answer", messages, child) % len(vocabulary)]
        words = text.split(" ")
        words = [w if i == 0 else " " + w for i, w in enumerate(words)]
        finish = "stop"
        if max_tokens is not None and len(words) > int(max_tokens):
            words, finish = words[: int(max_tokens)], "length"
        if fault == "empty_content":
            words, finish = [], "stop"
        choice: dict[str, Any] = {
            "index": j,
            "finish_reason": finish,
            "message": {"role": "assistant", "content": "".join(words)},
            "logprobs": None,
        }
        if top >= 0:
            choice["logprobs"] = {"content": _logprobs(words, messages, child, top)}
        choices.append(choice)
        tokens.append(len(words))
    if fault == "null_content":
        choices[-1]["message"]["content"] = None
        tokens[-1] = 0
    elif fault == "missing_content":
        del choices[-1]["message"]
        tokens[-1] = 0
    elif fault == "fewer_choices":
        choices.pop()
        tokens.pop()
    prompt_tokens = sum(len(str(m.get("content") or "").split()) for m in messages)
    completion_tokens = sum(tokens)
    return {
        "id": f"chatcmpl-{_digest('id', messages, seed) % 10**12}",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "fault-model"),
        "choices": choices,
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


SEED_MODES = ("contract", "scrambled", "ignored", "repeats")
"""How a :class:`FaultServer` seeds the children of a call (see the module docstring)."""


def _grammar_words(grammar: str) -> tuple[str, ...]:
    """The alternatives of a ``root ::= "a" | "b"`` grammar; ValueError for any other."""
    head, sep, rest = str(grammar).partition("::=")
    parts = [p.strip() for p in rest.split("|")]
    if head.strip() != "root" or not sep or not all(
        len(p) >= 2 and p[0] == p[-1] == '"' and '"' not in p[1:-1] for p in parts
    ):
        raise ValueError(f"unsupported grammar {grammar!r}")
    return tuple(p[1:-1] for p in parts)


def _status_of(kind: str) -> int:
    """The status of an ``http_<status>`` kind (0 for any other kind)."""
    head, _, code = kind.partition("_")
    return int(code) if head == "http" and code.isdigit() else 0


class _HTTPServer(ThreadingHTTPServer):
    """The listening socket of a :class:`FaultServer` (``fault`` is its state)."""

    daemon_threads = True
    request_queue_size = 128  # socketserver's 5 drops connections under load (1 s SYN retry)

    def __init__(self, fault: FaultServer, port: int) -> None:
        self.fault = fault
        super().__init__(("127.0.0.1", port), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (its timeout, a cancelled call) is ordinary traffic:
        say nothing, so no traceback lands in the output of a process sharing stderr;
        any other error is printed as socketserver does."""
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    """One request to a :class:`FaultServer`."""

    protocol_version = "HTTP/1.0"
    timeout = 10  # socket timeout: a silent client never holds a thread for long
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: tests capture logs

    def _route(self) -> str:
        """The path without its query string, which is recorded in ``queries``."""
        path, _, query = self.path.partition("?")
        with self.server.fault._lock:
            self.server.fault.queries.append(query)
        return path.rstrip("/")

    def do_GET(self) -> None:
        fault = self.server.fault
        if self._route() != "/v1/models":
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        with fault._lock:
            fault.model_listings += 1
        if self._authorized():
            self._json(200, {"object": "list", "data": [{"id": "fault-model", "object": "model"}]})

    def do_POST(self) -> None:
        fault = self.server.fault
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self._route() != "/v1/chat/completions":
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        if not self._authorized():
            with fault._lock:
                fault.requests += 1
            return
        try:
            body = json.loads(raw)
        except ValueError:
            fault.refused()
            self._json(400, {"error": {"message": "body is not JSON"}})
            return
        with fault._lock:
            fault.bodies.append(body)
            fault.in_flight += 1
            fault.max_in_flight = max(fault.max_in_flight, fault.in_flight)
        try:
            if fault.latency:
                threading.Event().wait(fault.latency)
            n = int(body.get("n") or 1)
            if fault.max_n is not None and n > fault.max_n:
                message = (f"Field 'n': Value must be between 1 <= value <= {fault.max_n}, "
                           f"but got {n}")
                fault.refused()
                self._json(400, {"error": {"message": message}})
                return
            if fault.grammar and body.get("grammar"):
                try:
                    _grammar_words(body["grammar"])
                except ValueError as exc:
                    fault.refused()
                    self._json(400, {"error": {"message": str(exc)}})
                    return
            self._reply(body, fault._draw(raw))
        finally:
            with fault._lock:
                fault.in_flight -= 1

    def _authorized(self) -> bool:
        """Record the Authorization header; answer 401 when it is not the required one."""
        fault = self.server.fault
        seen = self.headers.get("Authorization")
        with fault._lock:
            fault.authorizations.append(seen)
        if fault.require_authorization is None or seen == fault.require_authorization:
            return True
        self._json(401, {"error": {"message": "invalid api key", "code": "invalid_api_key"}})
        return False

    def _reply(self, body: dict[str, Any], kind: str | None) -> None:
        fault = self.server.fault
        status = _status_of(kind or "")
        if status:
            headers = {}
            if status in (429, 503) and fault.retry_after is not None:
                headers["Retry-After"] = fault.retry_after
            self._json(status, {"error": {"message": f"injected {kind}"}}, headers)
            return
        if kind == "malformed_json":
            self._send(200, b'{"id": "x", "choices": [', "application/json")
            return
        if kind == "not_a_completion":
            self._json(200, {"object": "error", "message": "injected not_a_completion"})
            return
        if kind == "html":
            self._send(200, b"<html><body>Bad gateway</body></html>", "text/html")
            return
        if kind == "slow":
            threading.Event().wait(fault.slow_seconds)
        reply = fault.completion(body, kind)
        data = json.dumps(reply).encode()
        if kind == "truncated_body":
            self._send(200, data[: len(data) // 2], "application/json", length=len(data) + 100)
            self.close_connection = True
            return
        with fault._lock:
            fault.usage["prompt_tokens"] += reply["usage"]["prompt_tokens"]
            fault.usage["completion_tokens"] += reply["usage"]["completion_tokens"]
            fault.usage["replies"] += 1
        self._send(200, data, "application/json")

    def _json(self, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> None:
        self._send(status, json.dumps(payload).encode(), "application/json", headers)

    def _send(
        self,
        status: int,
        data: bytes,
        ctype: str,
        headers: Mapping[str, str] | None = None,
        length: int | None = None,
    ) -> None:
        """Send a reply; ``length`` overrides the Content-Length (a body cut short)."""
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data) if length is None else length))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()


__all__ = [
    "DEFAULT_ANSWERS",
    "FAULT_KINDS",
    "RETRYABLE_KINDS",
    "SEED_MODES",
    "FaultServer",
    "completion",
]

"""The HTTP layer of the gateway: OpenAI's chat completions protocol over a
:class:`~credo.serve.guard.Guard`, on FastAPI (what vLLM's OpenAI-compatible server is
built on).

Routes: ``POST /v1/chat/completions``, ``GET /v1/models``, ``GET /health`` and
``GET /metrics`` (Prometheus text: :mod:`credo.serve.metrics`). A chat request is one
question: its last ``user`` message (text, or OpenAI's text content parts); ``system``
and ``developer`` messages are not sent to the model (the certificate's prompt template
is), and a conversation with earlier turns is refused, since the certificate covers one
question under its template. Sampling parameters in the request (``temperature``,
``max_tokens``, ...) are ignored: the certificate's recipe sets them. Fields that would
change what the reply means are refused rather than ignored: ``tools``, a
``tool_choice`` other than ``none``, ``functions``, a ``response_format`` other than
text, ``n`` > 1, ``logprobs``, audio. For a multiple-choice certificate the options
come in ``credo.choices`` (the openai client: ``extra_body={"credo": {"choices":
[...]}}``). ``stream: true`` is answered as a server-sent event stream of one chunk (the
decision is taken before the first byte).

Each request is checked before it can touch anyone else's (:class:`Limits`): a body
over ``max_body_bytes`` gets 413 unread, JSON nested deeper than ``max_json_depth``,
text that is not valid Unicode (a lone surrogate), a question longer than the Guard
takes get 400 naming the field. Each question is then decided on its own
(:class:`~credo.serve.guard.Guard`), so a bad or slow question never holds another.

The reply is a ``chat.completion`` whose message is the answer, with ``usage`` the
upstream tokens its samples cost (0 for samples read from the cache) and a ``credo``
object: score, method, threshold, accept, alpha, delta, samples drawn, procedure,
certificate id, timing and ``usage`` (calls, tokens, generated and cached samples).
Errors have OpenAI's shape (``{"error": {"message", "type", "param", "code"}}``), their
message one line: 400 a bad request, 401 a missing or wrong API key (the key given is
never echoed or logged), 404 an unknown model or route, 413 a body too large, 429 more
questions pending than the gateway takes (with ``Retry-After``), 502 the model behind
the gateway failed (``code`` its kind: ``http_500``, ``connection``, ``circuit_open``,
...), 503 shutting down (with ``Retry-After``), 504 no decision within the request
timeout or the model's call timed out (what was drawn is cached: asking again resumes).
Every question that reaches the route ends in exactly one decision log line, whatever
its status, whose ``id`` every reply carries in its ``X-Request-Id`` header.
"""

from __future__ import annotations

import hmac
import json
import os
import threading
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException

from credo.errors import UserError
from credo.pipeline.gateway import Question
from credo.serve.guard import (
    BadQuestion,
    Guard,
    GuardAnswer,
)
from credo.serve.guardrail import GUARDRAIL_PATH, add_guardrail_routes
from credo.serve.protocol import (
    ChatError,
    Limits,
    choices_of,
    decide,
    json_body,
    json_depth,
    read_body,
    request_id,
    user_question,
)

__all__ = [
    "ApiKeys",
    "ChatError",
    "Limits",
    "create_app",
    "json_depth",
    "keys_from_environment",
    "parse_chat_request",
]

QUESTION_ROUTES = ("/v1/chat/completions", GUARDRAIL_PATH)
REQUEST_ID = "X-Request-Id"
"""The response header naming the question's id in the decision log (every reply of a
question route, errors included)."""
"""The routes that take a question: each request to them is logged once."""

class ApiKeys:
    """The keys a client may present (``Authorization: Bearer KEY``): a fixed list, or a
    file of one key per line (blank lines and ``#`` comments skipped) read again when it
    changes, so a key is added or withdrawn without a restart. An empty key, or no key
    at all, is refused when the gateway starts (a :class:`~credo.errors.UserError`
    naming ``where`` they came from). Keys are compared in constant time and never
    written anywhere."""

    def __init__(self, keys: Iterable[str] = (), *, file: str | Path | None = None,
                 where: str = "--api-key") -> None:
        self.where = where
        self.file = Path(file) if file is not None else None
        self._stamp: tuple[float, int] | None = None
        self._lock = threading.Lock()
        self._keys = self._checked(list(keys) if file is None else self._read())

    @classmethod
    def of(cls, api_key: str | Sequence[str] | ApiKeys | None) -> ApiKeys | None:
        """The keys ``api_key`` gives: a key, several, an :class:`ApiKeys` as it is, or
        None (no auth)."""
        if api_key is None or isinstance(api_key, ApiKeys):
            return api_key
        return cls([api_key] if isinstance(api_key, str) else api_key)

    def matches(self, token: str) -> bool:
        """Whether ``token`` is one of the keys (the file read again if it changed)."""
        keys = self._current()
        given = token.encode()
        found = False
        for key in keys:  # every key compared: the time does not tell which matched
            found |= hmac.compare_digest(given, key.encode())
        return found

    def _current(self) -> tuple[str, ...]:
        if self.file is None:
            return self._keys
        try:
            st = self.file.stat()
        except OSError:
            return self._keys  # a file moved away mid-rotation keeps the last keys
        if (st.st_mtime, st.st_size) != self._stamp:
            with self._lock:
                try:
                    self._keys = self._checked(self._read())
                except UserError:
                    pass  # a half-written file keeps the last good keys
        return self._keys

    def _read(self) -> list[str]:
        assert self.file is not None
        try:
            st = self.file.stat()
            text = self.file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise UserError(f"{self.where} {self.file}: cannot read the keys "
                            f"({getattr(e, 'strerror', None) or e})") from None
        self._stamp = (st.st_mtime, st.st_size)
        return [line.strip() for line in text.splitlines()
                if line.strip() and not line.strip().startswith("#")]

    def _checked(self, keys: list[str]) -> tuple[str, ...]:
        if not keys:
            raise UserError(f"{self.where}: no API key given (an empty key would let "
                            "anyone in); give a key, or leave the option out for no auth")
        for i, key in enumerate(keys):
            if not key.strip():
                raise UserError(f"{self.where}: key {i + 1} is empty (an empty key would "
                                "let anyone in)")
            if any(c.isspace() for c in key) or not key.isprintable():
                raise UserError(f"{self.where}: key {i + 1} holds spaces or control "
                                "characters, which an Authorization header cannot carry")
        return tuple(keys)


def create_app(
    guard: Guard,
    *,
    api_key: str | Sequence[str] | ApiKeys | None = None,
    served_model: str | None = None,
    timeout: float | None = None,
    limits: Limits | None = None,
    metrics: Any = None,
) -> FastAPI:
    """The app over ``guard``: ``api_key`` (None: no auth; a key, several, or
    :class:`ApiKeys`) is required as ``Authorization: Bearer <key>`` on ``/v1`` routes;
    ``served_model`` is the model id clients name (default: the model's identity);
    ``timeout`` seconds per question (None: the Guard's); ``limits`` what a request may
    hold; ``metrics`` a :class:`~credo.serve.metrics.GatewayMetrics` already observing
    ``guard`` (None: one is made and made its observer)."""
    keys = ApiKeys.of(api_key)
    limits = limits or Limits()
    if metrics is None:
        from credo.serve.metrics import GatewayMetrics

        metrics = GatewayMetrics(guard)
        guard.add_observer(metrics)
    # FastAPI's own OpenTelemetry hooks are off: the gateway traces questions itself
    # (--otlp-endpoint), and the hooks cost about a millisecond a request
    app = FastAPI(title="credo serve", docs_url=None, redoc_url=None, openapi_url=None,
                  telemetry={"tracing": False, "metrics": False, "logs": False,
                             "operation_spans": False})
    app.state.guard, app.state.metrics = guard, metrics
    name = served_model or guard.model_identity

    @app.exception_handler(ChatError)
    async def _chat_error(request: Request, exc: ChatError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
        kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
        return ChatError(exc.status_code, f"{request.method} {request.url.path}: "
                         f"{exc.detail}", kind).response()

    _guard_requests(app, guard, keys, metrics)
    _info_routes(app, guard, name, metrics)
    _chat_route(app, guard, name, timeout, limits)
    add_guardrail_routes(app, guard, timeout=timeout, limits=limits)  # after the auth
    return app


def _guard_requests(app: FastAPI, guard: Guard, keys: ApiKeys | None, metrics: Any) -> None:
    """Every request: the API key checked on ``/v1`` routes (a refused question logged),
    the response counted by route and status (:class:`_AuthAndCount`)."""
    app.add_middleware(_AuthAndCount, guard=guard, keys=keys, metrics=metrics)


class _AuthAndCount:
    """A pure ASGI middleware (Starlette's ``BaseHTTPMiddleware`` would wrap every
    response in a stream, about a millisecond a request): the API key on ``/v1`` routes,
    a 401 in OpenAI's shape (a refused question logged), and every response's status
    counted by route."""

    ROUTES = frozenset((*QUESTION_ROUTES, "/v1/models", "/health", "/metrics"))

    def __init__(self, app: Any, guard: Guard, keys: ApiKeys | None, metrics: Any) -> None:
        self.app, self.guard, self.keys, self.metrics = app, guard, keys, metrics

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        route = path if path in self.ROUTES else "other"
        if self.keys is not None and path.startswith("/v1") and not _authorised(
                _header(scope, b"authorization"), self.keys):
            if path in QUESTION_ROUTES:
                self.guard.refused(request_id(), "unauthorized",
                                   "missing or incorrect API key", http_status=401)
            self.metrics.request(route, 401)
            response = ChatError(401, "missing or incorrect API key (Authorization: Bearer "
                                 "<key>)", "authentication_error", "invalid_api_key"
                                 ).response()
            await response(scope, receive, send)
            return
        status = 500

        async def counted(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, counted)
        finally:
            self.metrics.request(route, status)


def _header(scope: dict[str, Any], name: bytes) -> str:
    """A request header of an ASGI scope ("" when absent)."""
    for key, value in scope["headers"]:
        if key.lower() == name:
            return value.decode("latin-1")
    return ""


def _info_routes(app: FastAPI, guard: Guard, name: str, metrics: Any) -> None:
    """``GET /health``, ``GET /metrics`` and ``GET /v1/models``."""

    @app.get("/health")
    async def health() -> JSONResponse:
        status = "closing" if guard.closing else "ok"
        return JSONResponse({"status": status, "certificate": guard.id, "model": name,
                             "procedure": guard.procedure, "pending": guard.pending,
                             "in_flight": guard.in_flight},
                            status_code=503 if guard.closing else 200)

    @app.get("/metrics")
    async def prometheus() -> Response:
        from credo.serve.metrics import CONTENT_TYPE

        return Response(metrics.exposition(), media_type=CONTENT_TYPE)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": name, "object": "model", "created": 0,
                                            "owned_by": "credo"}]}


def _chat_route(app: FastAPI, guard: Guard, name: str, timeout: float | None,
                limits: Limits) -> None:
    """``POST /v1/chat/completions``: one question, checked, decided, answered."""

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        rid = request_id()
        t0 = time.monotonic()
        try:
            body = json_body(await read_body(request, limits.max_body_bytes),
                             limits.max_json_depth)
            question, stream = parse_chat_request(body, name, guard)
            answer = await decide(guard, question, rid, timeout)
        except ChatError as e:
            if not e.logged:
                guard.refused(rid, e.cause, str(e), seconds=time.monotonic() - t0,
                              http_status=e.status, **({"param": e.param} if e.param else {}))
            e.headers[REQUEST_ID] = rid
            raise
        created = int(time.time())
        if stream:
            return StreamingResponse(_events(rid, created, name, answer),
                                     media_type="text/event-stream",
                                     headers={REQUEST_ID: rid})
        u = answer.upstream
        return JSONResponse({
            "id": rid, "object": "chat.completion", "created": created, "model": name,
            "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                         "message": {"role": "assistant", "content": answer.reply}}],
            "usage": {"prompt_tokens": u.prompt_tokens, "completion_tokens":
                      u.completion_tokens, "total_tokens": u.prompt_tokens +
                      u.completion_tokens},
            "credo": answer.to_json(),
        }, headers={REQUEST_ID: rid})


def _authorised(authorization: str, keys: ApiKeys) -> bool:
    scheme, _, token = authorization.partition(" ")
    return scheme.lower() == "bearer" and bool(token.strip()) and keys.matches(token.strip())


UNSUPPORTED: tuple[tuple[str, Any, str], ...] = (
    ("tools", lambda v: bool(v), "the gateway answers questions under a certificate; it "
     "makes no tool calls"),
    ("tool_choice", lambda v: v not in (None, "none"), "the gateway makes no tool calls"),
    ("functions", lambda v: bool(v), "the gateway makes no function calls"),
    ("function_call", lambda v: v not in (None, "none"), "the gateway makes no function "
     "calls"),
    ("response_format", lambda v: v is not None and v != {"type": "text"},
     "the certificate covers the task's own answer format; only {'type': 'text'} is "
     "served"),
    ("logprobs", lambda v: bool(v), "logprobs are not served: the reply is a decision "
     "over many samples, not one sample's tokens"),
    ("top_logprobs", lambda v: bool(v), "logprobs are not served"),
    ("audio", lambda v: v is not None, "only text is served"),
    ("modalities", lambda v: v not in (None, ["text"]), "only text is served"),
)
"""Request fields that would change what the reply means, refused (field, whether the
value is refused, why) rather than silently ignored."""


def parse_chat_request(body: dict[str, Any], name: str, guard: Guard) -> tuple[Question, bool]:
    """The question of a chat completions request and whether it streams; a
    :class:`ChatError` (400, or 404 for another model) names what is wrong."""
    model = body.get("model")
    if model is not None and model != name:
        raise ChatError(404, f"the model {model!r} does not exist here; this gateway serves "
                        f"{name!r}", "not_found_error", "model_not_found", "model")
    n = body.get("n", 1)
    if n not in (1, None):
        raise ChatError(400, f"n = {n!r}: the gateway gives one answer per question (n = 1)",
                        param="n")
    for field, refused, why in UNSUPPORTED:
        if refused(body.get(field)):
            raise ChatError(400, f"{field} is not supported: {why}", param=field,
                            code="unsupported_field")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise ChatError(400, "stream must be true or false", param="stream")
    question = Question(user_question(body.get("messages")), choices_of(body.get("credo")))
    try:
        guard.check_question(question)
    except BadQuestion as e:
        raise ChatError(400, str(e), param="messages", cause=BadQuestion.cause) from None
    return question, stream


async def _events(rid: str, created: int, name: str, answer: GuardAnswer) -> AsyncIterator[str]:
    """The answer as OpenAI's stream: one content chunk, the finish chunk (with the
    ``credo`` object and ``usage``), ``[DONE]``."""
    head = {"id": rid, "object": "chat.completion.chunk", "created": created, "model": name}
    first = {**head, "choices": [{"index": 0, "finish_reason": None, "logprobs": None,
                                  "delta": {"role": "assistant", "content": answer.reply}}]}
    last = {**head, "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                                 "delta": {}}], "credo": answer.to_json()}
    for chunk in (first, last):
        yield f"data: {json.dumps(chunk)}\n\n"
    yield "data: [DONE]\n\n"


def keys_from_environment(variable: str) -> list[str]:
    """The keys held by environment variable ``variable``: one, or several separated by
    commas (a rotation: old and new at once); a :class:`~credo.errors.UserError` when it
    is unset or holds an empty key."""
    value = os.environ.get(variable)
    if value is None:
        raise UserError(f"--api-key-env {variable}: the variable is not set")
    return [k.strip() for k in value.split(",")] if value.strip() else [""]

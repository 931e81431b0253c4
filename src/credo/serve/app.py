"""The HTTP layer of the gateway (issue 32, items 1 and 4): OpenAI's chat completions
protocol over a :class:`~credo.serve.guard.Guard`, on FastAPI (what vLLM's
OpenAI-compatible server is built on).

Routes: ``POST /v1/chat/completions``, ``GET /v1/models``, ``GET /health``. A chat request
is one question: its last ``user`` message (text, or OpenAI's text content parts);
``system`` and ``developer`` messages are not sent to the model (the certificate's prompt
template is), and a conversation with earlier turns is refused, since the certificate
covers one question under its template. Sampling parameters in the request
(``temperature``, ``max_tokens``, ...) are ignored: the certificate's recipe sets them.
For a multiple-choice certificate the options come in ``credo.choices`` (the openai
client: ``extra_body={"credo": {"choices": [...]}}``). ``stream: true`` is answered as a
server-sent event stream of one chunk (the decision is taken before the first byte).

The reply is a ``chat.completion`` whose message is the answer (``GuardAnswer.reply``),
with a ``credo`` object: score, method, threshold, accept, alpha, delta, samples drawn,
procedure, certificate id. Errors have OpenAI's shape (``{"error": {"message", "type",
"param", "code"}}``), their message one line: 400 a bad request, 401 a missing or wrong
API key (the key given is never echoed or logged), 404 an unknown model or route, 429
more questions pending than the gateway takes (with ``Retry-After``), 502 the model behind
the gateway failed, 503 shutting down, 504 no decision within the request timeout (the
samples drawn so far are cached: asking again resumes).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.exceptions import HTTPException

from credo.pipeline.gateway import Question
from credo.serve.guard import (
    BadQuestion,
    Busy,
    Closed,
    Guard,
    GuardAnswer,
    GuardError,
    UpstreamFailed,
)

__all__ = ["ChatError", "create_app", "parse_chat_request"]

IGNORED_ROLES = ("system", "developer")


class ChatError(Exception):
    """A request the gateway answers with an error: HTTP ``status``, OpenAI's ``type``,
    ``code`` and ``param``."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error",
                 code: str | None = None, param: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.kind, self.code, self.param = status, kind, code, param
        self.headers = headers or {}

    def response(self) -> JSONResponse:
        body = {"error": {"message": str(self), "type": self.kind, "param": self.param,
                          "code": self.code}}
        return JSONResponse(body, status_code=self.status, headers=self.headers)


def create_app(
    guard: Guard,
    *,
    api_key: str | None = None,
    served_model: str | None = None,
    timeout: float | None = None,
) -> FastAPI:
    """The app over ``guard``: ``api_key`` (None: no auth) is required as ``Authorization:
    Bearer <key>`` on ``/v1`` routes; ``served_model`` is the model id clients name
    (default: the model's identity); ``timeout`` seconds per request (None: none)."""
    app = FastAPI(title="credo serve", docs_url=None, redoc_url=None, openapi_url=None)
    name = served_model or guard.model_identity

    @app.exception_handler(ChatError)
    async def _chat_error(request: Request, exc: ChatError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
        kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
        return ChatError(exc.status_code, f"{request.method} {request.url.path}: "
                         f"{exc.detail}", kind).response()

    @app.middleware("http")
    async def _auth(request: Request, call_next: Any) -> Any:
        if api_key is not None and request.url.path.startswith("/v1"):
            given = request.headers.get("authorization", "")
            scheme, _, token = given.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(
                    token.strip().encode(), api_key.encode()):
                return ChatError(401, "missing or incorrect API key (Authorization: Bearer "
                                 "<key>)", code="invalid_api_key").response()
        return await call_next(request)

    @app.get("/health")
    async def health() -> JSONResponse:
        status = "closing" if guard.closing else "ok"
        return JSONResponse({"status": status, "certificate": guard.id, "model": name,
                             "procedure": guard.procedure, "pending": guard.pending},
                            status_code=503 if guard.closing else 200)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": name, "object": "model", "created": 0,
                                            "owned_by": "credo"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        body = _json_body(await request.body())
        question, stream = parse_chat_request(body, name, guard)
        rid = f"chatcmpl-{uuid.uuid4().hex}"
        answer = await _decide(guard, question, rid, timeout)
        created = int(time.time())
        if stream:
            return StreamingResponse(_events(rid, created, name, answer),
                                     media_type="text/event-stream")
        return {
            "id": rid, "object": "chat.completion", "created": created, "model": name,
            "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                         "message": {"role": "assistant", "content": answer.reply}}],
            "usage": {"prompt_tokens": 0, "completion_tokens": answer.tokens,
                      "total_tokens": answer.tokens},
            "credo": answer.to_json(),
        }

    return app


def _json_body(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise ChatError(400, f"the request body is not JSON ({e})") from None
    if not isinstance(body, dict):
        raise ChatError(400, "the request body must be a JSON object")
    return body


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
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise ChatError(400, "stream must be true or false", param="stream")
    question = Question(_question(body.get("messages")), _choices(body.get("credo")))
    try:
        guard.check_question(question)
    except BadQuestion as e:
        raise ChatError(400, str(e), param="messages") from None
    return question, stream


def _question(messages: Any) -> str:
    """The one user message's text (system and developer messages set aside)."""
    if not isinstance(messages, list) or not messages:
        raise ChatError(400, "messages must be a non-empty list", param="messages")
    asked = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise ChatError(400, f"messages[{i}] must be an object with a role",
                            param=f"messages[{i}]")
        if m["role"] in IGNORED_ROLES:
            continue
        if m["role"] != "user":
            raise ChatError(400, f"messages[{i}] has role {m['role']!r}: the gateway answers "
                            "one question (one user message); the certificate does not cover "
                            "a conversation", param=f"messages[{i}]")
        asked.append(_text(m.get("content"), i))
    if len(asked) != 1:
        raise ChatError(400, f"{len(asked)} user messages: the gateway answers one question "
                        "per request", param="messages")
    return asked[0]


def _choices(extra: Any) -> tuple[str, ...]:
    """The options of a multiple-choice question (``credo.choices``)."""
    choices = (extra or {}).get("choices", []) if isinstance(extra or {}, dict) else None
    if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
        raise ChatError(400, "credo.choices must be a list of option texts",
                        param="credo.choices")
    return tuple(choices)


def _text(content: Any, i: int) -> str:
    """A message's text: a string, or the text of OpenAI's content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(
            isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
            for p in content):
        return "".join(p["text"] for p in content)
    raise ChatError(400, f"messages[{i}].content must be text (a string or text parts)",
                    param=f"messages[{i}].content")


async def _decide(guard: Guard, question: Question, rid: str,
                  timeout: float | None) -> GuardAnswer:
    """The question through the Guard, its errors as :class:`ChatError`."""
    try:
        future = guard.submit(question, request_id=rid, wait=False)
    except Busy as e:
        raise ChatError(429, f"the gateway is busy: {e}; retry after {e.retry_after} s",
                        "rate_limit_error", "rate_limit_exceeded",
                        headers={"Retry-After": str(e.retry_after)}) from None
    except Closed as e:
        raise ChatError(503, str(e), "server_error", "shutting_down") from None
    except BadQuestion as e:
        raise ChatError(400, str(e), param="messages") from None
    try:
        # shielded: a request that times out is still decided, logged and cached
        return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), timeout)
    except TimeoutError:
        raise ChatError(504, f"no decision within {timeout:g} s (--timeout); the samples "
                        "drawn so far are cached: ask again to resume", "timeout",
                        "timeout") from None
    except BadQuestion as e:
        raise ChatError(400, str(e), param="messages") from None
    except UpstreamFailed as e:
        raise ChatError(502, str(e), "upstream_error", "upstream_error") from None
    except GuardError as e:
        raise ChatError(500, str(e), "server_error") from None


async def _events(rid: str, created: int, name: str, answer: GuardAnswer) -> AsyncIterator[str]:
    """The answer as OpenAI's stream: one content chunk, the finish chunk (with the
    ``credo`` object), ``[DONE]``."""
    head = {"id": rid, "object": "chat.completion.chunk", "created": created, "model": name}
    first = {**head, "choices": [{"index": 0, "finish_reason": None, "logprobs": None,
                                  "delta": {"role": "assistant", "content": answer.reply}}]}
    last = {**head, "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                                 "delta": {}}], "credo": answer.to_json()}
    for chunk in (first, last):
        yield f"data: {json.dumps(chunk)}\n\n"
    yield "data: [DONE]\n\n"

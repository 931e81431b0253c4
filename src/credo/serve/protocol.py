"""What the gateway's routes share: OpenAI's error shape (:class:`ChatError`), the limits
a request is checked against (:class:`Limits`, :func:`read_body`, :func:`json_body`), the
question of a chat request's messages (:func:`user_question`), and a question through the
Guard with its errors as HTTP errors (:func:`decide`). The chat completions route
(:mod:`credo.serve.app`) and LiteLLM's guardrail route (:mod:`credo.serve.guardrail`)
both build on it, so a request is checked the same way on either.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse

from credo.errors import UserError
from credo.pipeline.gateway import Question
from credo.serve.guard import (
    BadQuestion,
    Busy,
    Closed,
    Guard,
    GuardAnswer,
    GuardError,
    TimedOut,
    UpstreamFailed,
)
from credo.serve.limits import DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_JSON_DEPTH

__all__ = [
    "EXPIRE_SLACK_S",
    "IGNORED_ROLES",
    "ChatError",
    "Limits",
    "chat_error",
    "choices_of",
    "decide",
    "json_body",
    "json_depth",
    "read_body",
    "request_id",
    "user_question",
]

IGNORED_ROLES = ("system", "developer")
"""Message roles a question's messages may hold besides its one user message."""

EXPIRE_SLACK_S = 1.0
"""Seconds past a request's timeout after which the HTTP layer ends the question itself
(a backend that cannot be interrupted: its thread finishes in the background)."""

@dataclass(frozen=True)
class Limits:
    """What one request may hold: ``max_body_bytes`` (413 beyond) and
    ``max_json_depth`` (400 beyond); the question's length is the Guard's
    (``max_question_chars``)."""

    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_json_depth: int = DEFAULT_MAX_JSON_DEPTH

    def __post_init__(self) -> None:
        if self.max_body_bytes < 1024:
            raise UserError(f"--max-body-bytes {self.max_body_bytes}: at least 1024")
        if self.max_json_depth < 4:
            raise UserError(f"--max-json-depth {self.max_json_depth}: at least 4 (a chat "
                            "request nests about 5 deep)")

class ChatError(Exception):
    """A request the gateway answers with an error: HTTP ``status``, OpenAI's ``type``,
    ``code`` and ``param``; ``cause`` is the decision log's word for it, ``logged``
    whether the Guard has logged the question already (it took or refused it)."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error",
                 code: str | None = None, param: str | None = None,
                 headers: dict[str, str] | None = None, cause: str = "bad_request",
                 logged: bool = False) -> None:
        super().__init__(message)
        self.status, self.kind, self.code, self.param = status, kind, code, param
        self.headers = headers or {}
        self.cause = cause
        self.logged = logged

    def response(self) -> JSONResponse:
        body = {"error": {"message": str(self), "type": self.kind, "param": self.param,
                          "code": self.code}}
        return JSONResponse(body, status_code=self.status, headers=self.headers)

def request_id() -> str:
    """A new question id (OpenAI's ``chatcmpl-`` form)."""
    return f"chatcmpl-{uuid.uuid4().hex}"

async def read_body(request: Request, limit: int) -> bytes:
    """The body, read up to ``limit`` bytes: a :class:`ChatError` 413 as soon as its
    declared or actual size passes it (the rest is not read)."""
    declared = request.headers.get("content-length")
    too_large = ChatError(413, f"the request body is larger than {limit:,} bytes "
                          "(--max-body-bytes)", code="request_too_large", cause="too_large")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


def json_body(raw: bytes, max_depth: int = DEFAULT_MAX_JSON_DEPTH) -> dict[str, Any]:
    """The body as a JSON object nested at most ``max_depth`` deep."""
    try:
        body = json.loads(raw)
    except RecursionError:
        body = None
    except (ValueError, UnicodeDecodeError) as e:
        raise ChatError(400, f"the request body is not JSON ({e})") from None
    depth = json_depth(body, max_depth) if body is not None else max_depth + 1
    if depth > max_depth:
        raise ChatError(400, f"the request body's JSON is nested more than {max_depth} "
                        "deep (--max-json-depth)")
    if not isinstance(body, dict):
        raise ChatError(400, "the request body must be a JSON object")
    return body


def json_depth(value: Any, stop: int) -> int:
    """How deep ``value`` nests (a scalar: 0, ``[]``: 1, ``[[1]]``: 2), counted without
    recursion; once past ``stop`` it returns ``stop + 1``."""
    deepest = 0
    todo: list[tuple[Any, int]] = [(value, 0)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, dict | list):
            depth += 1
            if depth > stop:
                return stop + 1
            deepest = max(deepest, depth)
            todo.extend((v, depth) for v in (item.values() if isinstance(item, dict)
                                              else item))
    return deepest

def user_question(messages: Any) -> str:
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


def choices_of(extra: Any) -> tuple[str, ...]:
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


async def decide(guard: Guard, question: Question, rid: str,
                  timeout: float | None) -> GuardAnswer:
    """The question through the Guard, its errors as :class:`ChatError` (each logged
    by the Guard once)."""
    try:
        future = guard.submit(question, request_id=rid, wait=False, timeout=timeout)
    except GuardError as e:  # refused by the Guard, which logged it
        raise chat_error(e) from None
    limit = timeout if timeout is not None else guard.timeout
    try:
        return await _outcome(guard, future, limit)
    except GuardError as e:
        raise chat_error(e) from None


async def _outcome(guard: Guard, future: Future[GuardAnswer],
                   limit: float | None) -> GuardAnswer:
    """Wait for ``future``; a question still running :data:`EXPIRE_SLACK_S` past its
    time limit (a backend that cannot be interrupted) is ended here."""
    waiting = asyncio.wrap_future(future)
    if limit is None:
        return await waiting
    try:
        return await asyncio.wait_for(asyncio.shield(waiting), limit + EXPIRE_SLACK_S)
    except TimeoutError:
        guard.expire(future)
        return await waiting


def chat_error(e: GuardError) -> ChatError:
    """The HTTP error of a question the Guard could not answer (logged by the Guard)."""
    if isinstance(e, Busy):
        return ChatError(429, f"the gateway is busy: {e}; retry after {e.retry_after} s",
                         "rate_limit_error", "rate_limit_exceeded",
                         headers={"Retry-After": str(e.retry_after)}, cause=e.cause,
                         logged=True)
    if isinstance(e, Closed):
        return ChatError(503, str(e), "server_error", "shutting_down",
                         headers={"Retry-After": str(e.retry_after)}, cause=e.cause,
                         logged=True)
    if isinstance(e, BadQuestion):
        return ChatError(400, str(e), param="messages", cause=e.cause, logged=True)
    if isinstance(e, TimedOut):
        return ChatError(504, str(e), "timeout", "timeout", cause=e.cause, logged=True)
    if isinstance(e, UpstreamFailed):
        status = 504 if e.kind == "timeout" else 502
        return ChatError(status, str(e), "upstream_error", e.kind, cause=e.cause,
                         logged=True)
    return ChatError(500, str(e), "server_error", cause=e.cause, logged=True)

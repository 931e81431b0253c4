"""The gateway as a guardrail of LiteLLM's proxy: its "Generic Guardrail API".

A LiteLLM proxy configured with ``guardrail: generic_guardrail_api`` and ``api_base:
http://HOST:PORT/v1`` posts every check to ``POST /v1/beta/litellm_basic_guardrail_api``
(LiteLLM appends the path). The body (LiteLLM's ``GenericGuardrailAPIRequest``) has an
``input_type``: ``"request"`` before the model is called (``structured_messages``: the
chat messages; ``texts``: their texts), ``"response"`` after it (``texts``: the answer
of each choice); and ``litellm_call_id``, the same for both checks of one call. The
reply (LiteLLM's ``GenericGuardrailAPIResponse``) is an ``action``: ``NONE`` (let it
through), ``BLOCKED`` (LiteLLM answers its client 400 with ``blocked_reason`` as the
message) or ``GUARDRAIL_INTERVENED`` (``texts`` replace the answer's texts), plus a
``credo`` object LiteLLM ignores (the decision, for a direct caller and for logs).

- **request**: the one user message is the question (system and developer messages set
  aside, as ``POST /v1/chat/completions`` does). The Guard samples and decides: accepted,
  ``NONE``; not accepted, ``BLOCKED`` naming the score, the threshold, alpha, delta and
  the certificate. A request the certificate cannot cover (a conversation, tools, images,
  a question the recipe cannot ask) is ``BLOCKED`` with the reason.
- **response**: the question is the one the request check of the same
  ``litellm_call_id`` decided (LiteLLM sends no messages with a response check), or the
  ``structured_messages`` when a caller sends them. Not accepted: ``BLOCKED``. Accepted:
  each text's answer is read with the certificate's answer format and compared with
  credo's answer as the indicator kernel compares answers (equal normalised answers; an
  unreadable one agrees with nothing); all agree, ``NONE``; some differ,
  ``on_mismatch``: ``"replace"`` (the default: ``GUARDRAIL_INTERVENED``, the differing
  texts replaced by credo's certified answer) or ``"block"`` (``BLOCKED``).

A body that is not the API's shape is a 400 in OpenAI's error shape naming the field;
the Guard's errors keep their status (429 busy, 502 the model failed, 503 closing, 504
no decision in time), all of which LiteLLM treats as the guardrail failing (its
``fail_on_error`` and ``unreachable_fallback`` settings decide what its client gets).
The route is under ``/v1``, so the app's API key guards it; LiteLLM sends the
guardrail's ``api_key`` as ``x-api-key``, which this module hands to that check as a
bearer token on this route only.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from typing import Any, Literal

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, ValidationError

from credo.kernels.indicator import indicator_gram
from credo.pipeline.gateway import Question
from credo.serve.guard import BadQuestion, Guard, GuardAnswer
from credo.serve.protocol import (
    ChatError,
    Limits,
    decide,
    json_body,
    read_body,
    request_id,
    user_question,
)
from credo.tasks.answers import extract_answer
from credo.tasks.base import AnswerFormat

__all__ = [
    "GUARDRAIL_PATH",
    "ON_MISMATCH",
    "GuardrailRequest",
    "Uncertifiable",
    "add_guardrail_routes",
    "guardrail_question",
    "guardrail_router",
    "parse_guardrail_request",
]

GUARDRAIL_PATH = "/v1/beta/litellm_basic_guardrail_api"
"""Where LiteLLM's generic guardrail posts, given ``api_base: http://HOST:PORT/v1``."""

ON_MISMATCH = ("replace", "block")
"""What a response check does with an accepted question whose answer differs from
credo's: replace the differing texts by credo's answer, or block the response."""

REMEMBERED = 4096
"""Request checks whose decision a response check of the same call can find."""

NONE, BLOCKED, INTERVENED = "NONE", "BLOCKED", "GUARDRAIL_INTERVENED"


class GuardrailRequest(BaseModel):
    """The fields of LiteLLM's ``GenericGuardrailAPIRequest`` the guardrail reads; the
    others (``request_data``, ``request_headers``, ``litellm_version``, ``model``, ...)
    are accepted and not read."""

    model_config = ConfigDict(extra="ignore")

    input_type: Literal["request", "response"]
    texts: list[str] | None = None
    structured_messages: list[dict[str, Any]] | None = None
    images: list[Any] | None = None
    tools: list[Any] | None = None
    tool_calls: list[Any] | None = None
    litellm_call_id: str | None = None
    additional_provider_specific_params: dict[str, Any] | None = None


class Uncertifiable(Exception):
    """A well-formed check whose request the certificate cannot cover (answered
    ``BLOCKED`` with this reason); ``logged``: the Guard logged it already (it refused
    the question)."""

    def __init__(self, reason: str, logged: bool = False) -> None:
        super().__init__(reason)
        self.logged = logged


def add_guardrail_routes(app: FastAPI, guard: Guard, *, timeout: float | None = None,
                         limits: Limits | None = None, on_mismatch: str = "replace",
                         remember: int = REMEMBERED) -> None:
    """Mount the guardrail route on ``app`` (:func:`credo.serve.app.create_app` does,
    once its auth middleware is in place: the middleware added last runs first):
    :func:`guardrail_router`, and LiteLLM's ``x-api-key`` passed to the app's API key
    check."""
    app.include_router(guardrail_router(guard, timeout=timeout, limits=limits,
                                        on_mismatch=on_mismatch, remember=remember))
    app.add_middleware(_ApiKeyHeader, path=GUARDRAIL_PATH)


def guardrail_router(guard: Guard, *, timeout: float | None = None,
                     limits: Limits | None = None, on_mismatch: str = "replace",
                     remember: int = REMEMBERED) -> APIRouter:
    """``POST`` :data:`GUARDRAIL_PATH` over ``guard`` (module docstring). ``timeout``:
    seconds a decision may take (None: the Guard's); ``limits``: what a request may hold
    (as on the chat route); ``on_mismatch``: the default of :data:`ON_MISMATCH` (a
    check's ``additional_provider_specific_params.on_mismatch`` overrides it);
    ``remember``: how many request checks' decisions are kept for the response checks
    of the same calls. A check refused before its question reaches the Guard (a body
    not in LiteLLM's shape, too large, a request the certificate cannot cover) is logged
    as the chat route logs it, once; a question the Guard decides is logged by it."""
    checks = _Checks(guard, timeout, on_mismatch, remember)
    limits = limits or Limits()
    router = APIRouter()

    @router.post(GUARDRAIL_PATH)
    async def guardrail(request: Request) -> JSONResponse:
        try:
            body = json_body(await read_body(request, limits.max_body_bytes),
                             limits.max_json_depth)
            return JSONResponse(await checks.answer(body))
        except ChatError as e:
            if not e.logged:
                guard.refused(request_id(), e.cause, str(e), http_status=e.status,
                              route="guardrail")
            return e.response()

    return router


class _Checks:
    """The guardrail's checks over one Guard, with the decisions of the last
    ``remember`` request checks by ``litellm_call_id``."""

    def __init__(self, guard: Guard, timeout: float | None, on_mismatch: str,
                 remember: int) -> None:
        if on_mismatch not in ON_MISMATCH:
            raise ValueError(f"on_mismatch {on_mismatch!r}: one of {', '.join(ON_MISMATCH)}")
        self.guard, self.timeout = guard, timeout
        self.on_mismatch, self.remember = on_mismatch, remember
        self.decided: OrderedDict[str, GuardAnswer] = OrderedDict()

    async def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The guardrail's reply to a check's JSON body; a :class:`ChatError` for a body
        that is not LiteLLM's shape or a decision the Guard could not make."""
        req = parse_guardrail_request(body)
        mismatch = _on_mismatch(req, self.on_mismatch)
        try:
            if req.input_type == "request":
                return await self.check_request(req)
            return await self.check_response(req, mismatch)
        except Uncertifiable as e:
            if not e.logged:
                self.guard.refused(req.litellm_call_id or request_id(), "uncertifiable",
                                   str(e), http_status=200, route="guardrail")
            return {"action": BLOCKED, "blocked_reason": f"credo: not certified: {e}",
                    "texts": None, "credo": {"certificate": self.guard.id}}

    async def decide(self, req: GuardrailRequest) -> GuardAnswer:
        """The Guard's decision on the check's question (remembered by call id)."""
        question = guardrail_question(req, self.guard)
        rid = req.litellm_call_id or f"guardrail-{uuid.uuid4().hex}"
        try:
            answer = await decide(self.guard, question, rid, self.timeout)
        except ChatError as e:
            if e.status == 400:  # the recipe cannot ask it (too long for the model, ...)
                raise Uncertifiable(str(e), logged=e.logged) from None
            raise
        if req.litellm_call_id is not None:
            self.decided[req.litellm_call_id] = answer
            self.decided.move_to_end(req.litellm_call_id)
            while len(self.decided) > self.remember:
                self.decided.popitem(last=False)
        return answer

    async def check_request(self, req: GuardrailRequest) -> dict[str, Any]:
        """Before the model is called: let an accepted question through, block another."""
        answer = await self.decide(req)
        if not answer.accept:
            return _verdict(BLOCKED, answer, reason=_not_certified(answer))
        return _verdict(NONE, answer)

    async def check_response(self, req: GuardrailRequest, mismatch: str) -> dict[str, Any]:
        """After the model answered: pass an answer equal to credo's accepted one, replace
        or block one that differs, block one to a question the certificate rejects."""
        if req.tool_calls:
            raise Uncertifiable("the answer calls tools: the certificate covers an answer "
                                "in text")
        if not req.texts:
            raise ChatError(400, "texts: a response check needs the answer's texts",
                            param="texts")
        known = self.decided.get(req.litellm_call_id) if req.litellm_call_id else None
        if known is None and req.structured_messages is None:
            raise ChatError(
                400, "no question for this response check: LiteLLM sends the messages only "
                "with the request check, so run the guardrail in mode [pre_call, post_call] "
                f"(the last {self.remember} request checks are remembered by "
                "litellm_call_id), or send structured_messages", param="structured_messages")
        answer = known if known is not None else await self.decide(req)
        if not answer.accept:
            return _verdict(BLOCKED, answer, reason=_not_certified(answer))
        produced = [extract_answer(t, self.guard.template.format).value for t in req.texts]
        agree = [bool(indicator_gram([p], [answer.answer])[0, 0]) for p in produced]
        extra = {"produced": produced, "agree": agree}
        if all(agree):
            return _verdict(NONE, answer, **extra)
        if mismatch == "block":
            differ = ", ".join(str(p) for p, ok in zip(produced, agree, strict=True) if not ok)
            return _verdict(BLOCKED, answer, reason=(
                f"credo: the answer ({differ}) is not the one certificate {answer.certificate} "
                "accepts for this question (on_mismatch block)"), **extra)
        texts = [t if ok else answer.text for t, ok in zip(req.texts, agree, strict=True)]
        return _verdict(INTERVENED, answer, texts=texts, **extra)


def parse_guardrail_request(body: dict[str, Any]) -> GuardrailRequest:
    """The check of a JSON body, or a 400 :class:`~credo.serve.protocol.ChatError` naming the
    first field that is not LiteLLM's shape."""
    try:
        return GuardrailRequest.model_validate(body)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "body"
        raise ChatError(400, f"{where}: {first['msg']}", param=where) from None


def guardrail_question(req: GuardrailRequest, guard: Guard) -> Question:
    """The question of a check: the one user message of ``structured_messages`` (else the
    one text of ``texts``). :class:`Uncertifiable` for a request the certificate cannot
    cover; a 400 :class:`~credo.serve.protocol.ChatError` for one with nothing to ask or text
    that cannot be encoded."""
    if req.tools:
        raise Uncertifiable("the request offers tools: the certificate covers a question "
                            "answered in text, not tool use")
    if req.images:
        raise Uncertifiable("the request holds images: the certificate covers text questions")
    field = "structured_messages" if req.structured_messages is not None else "texts"
    if req.structured_messages is not None:
        try:
            text = user_question(req.structured_messages)
        except ChatError as e:
            raise Uncertifiable(str(e)) from None
    elif req.texts:
        if len(req.texts) != 1:
            raise Uncertifiable(f"{len(req.texts)} texts and no structured_messages: which "
                                "one is the question is unknown")
        text = req.texts[0]
    else:
        raise ChatError(400, "a request check needs structured_messages or texts",
                        param="structured_messages")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ChatError(400, f"the question is not valid Unicode text ({e.reason} at "
                        f"character {e.start})", param=field) from None
    if guard.template.format is AnswerFormat.CHOICE:
        raise Uncertifiable("the certificate's task is multiple choice, and LiteLLM "
                            "forwards no options to a guardrail")
    question = Question(text)
    try:
        guard.check_question(question)
    except BadQuestion as e:
        raise Uncertifiable(str(e)) from None
    return question


def _on_mismatch(req: GuardrailRequest, default: str) -> str:
    """``additional_provider_specific_params.on_mismatch`` (the guardrail's config block),
    else ``default``; any other key is refused (a misspelt setting is not ignored)."""
    params = req.additional_provider_specific_params or {}
    unknown = sorted(set(params) - {"on_mismatch"})
    if unknown:
        raise ChatError(400, f"additional_provider_specific_params: unknown {unknown}; the "
                        "guardrail reads on_mismatch", param="additional_provider_specific_params")
    value = params.get("on_mismatch", default)
    if value not in ON_MISMATCH:
        raise ChatError(400, f"additional_provider_specific_params.on_mismatch {value!r}: "
                        f"one of {', '.join(ON_MISMATCH)}",
                        param="additional_provider_specific_params.on_mismatch")
    return value


def _not_certified(a: GuardAnswer) -> str:
    """The reason of a block: the score against the threshold, the level, the
    certificate."""
    score = f"{a.score:.4g}" if a.score is not None else "none (no sample had an answer)"
    level = f"alpha {a.alpha:g}" + (f", delta {a.delta:g}" if a.delta is not None else "")
    threshold = f"{a.threshold:.4g}" if a.threshold is not None else "none"
    return (f"credo: not certified: {a.method} score {score} below the threshold "
            f"{threshold} ({level}; certificate {a.certificate})")


def _verdict(action: str, answer: GuardAnswer, *, reason: str | None = None,
             texts: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    """LiteLLM's ``GenericGuardrailAPIResponse`` and the ``credo`` object of the
    decision."""
    return {"action": action, "blocked_reason": reason, "texts": texts,
            "credo": {**answer.to_json(), **extra}}


class _ApiKeyHeader:
    """LiteLLM sends a guardrail's ``api_key`` as ``x-api-key``; the app's check reads
    ``Authorization: Bearer``. On ``path`` only, a request with ``x-api-key`` and no
    ``Authorization`` header reaches that check with the key as its bearer token
    (compared there, as any key is). A pure ASGI middleware."""

    def __init__(self, app: Any, path: str) -> None:
        self.app, self.path = app, path

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == self.path:
            headers = list(scope["headers"])
            names = {k.lower() for k, _ in headers}
            key = next((v for k, v in headers if k.lower() == b"x-api-key"), None)
            if b"authorization" not in names and key is not None:
                scope = {**scope, "headers": [*headers, (b"authorization", b"Bearer " + key)]}
        await self.app(scope, receive, send)

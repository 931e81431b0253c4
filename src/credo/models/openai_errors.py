"""Retries and error classes of the OpenAI-compatible backend
(:class:`~credo.models.openai_compat.OpenAIModel`).

Retries are ours, not the client's (it is built with ``max_retries=0``), so each one is
seen and counted. A call is retried up to ``max_retries`` times, after an exponential
backoff with jitter (``retry_backoff * 2**k`` seconds times a factor in [0.5, 1], at most
30 s) or after the server's ``Retry-After`` seconds on a 429 or 503 (also at most 30 s),
when it fails in a way a second try can mend: HTTP 408, 429 or 5xx, a connection error
or timeout (the client's ``APIConnectionError`` / ``APITimeoutError``; a body cut short
arrives as one too), or a malformed reply: a body that is not JSON (the client raises
``json.JSONDecodeError``), not a chat completion (the client does not validate: it hands
back a string, a list or a half-empty ``ChatCompletion``), fewer or more choices than
asked, or a choice whose ``message`` or ``content`` is missing or null. An empty string
with a finish reason is a real sample, not a fault. Every retried call adds one to
:attr:`~credo.models.openai_compat.OpenAIModel.retries`.

Failures. Another 4xx (400, 404, 422, …) fails its request at once, except a 404
before any call of that replica succeeded: a wrong URL or model name, which raises
:class:`~credo.errors.UserError`. A request that fails,
or whose retries run out, is yielded as ``(index, OpenAIGenerationError)`` and the others
go on (the protocol's contract: the executor caches the rest and the run resumes later).
A 401 or 403 raises :class:`~credo.errors.UserError` (the key is wrong or missing; no
request can succeed). Any other exception (a bug, or an injected client's own) is raised
as an :class:`OpenAIGenerationError` naming the request.

Circuit breaker. A server that fails every request opens the model's
:class:`~credo.models.breaker.CircuitBreaker` (``breaker_failures`` failed attempts in a
row lasting ``breaker_window_s`` seconds with no success; 10 and 10 s by default): from
then on a call fails without being sent, and a call waiting to retry fails at once, so
such a run ends (exit 3, everything done cached) in about the window rather than in
every call's whole retry budget.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from credo.errors import UserError
from credo.models.breaker import CircuitBreaker
from credo.models.openai_replicas import Replica
from credo.models.urls import redact_text
from credo.types import GenerationError, SampleBlock

T = TypeVar("T")

MAX_RETRY_DELAY_S = 30.0
"""The longest wait before a retry (backoff and ``Retry-After`` alike)."""


class OpenAIGenerationError(GenerationError):
    """An OpenAI-compatible endpoint failed one request (after our retries)."""


class MalformedReply(Exception):
    """The reply parsed, but is not the chat completion that was asked for."""


@dataclass(frozen=True)
class Retry:
    """A call failed in a way another try may mend; ``retry_after`` is the server's wait.
    ``throttled``: a 429, the server asking to wait (no sign that it is down: the circuit
    breaker does not count it)."""

    reason: str
    retry_after: float | None = None
    throttled: bool = False
    kind: str = "failed"


@dataclass(frozen=True)
class Fail:
    """A call failed in a way no retry mends (a 4xx other than 401/403/408/429)."""

    reason: str
    kind: str = "rejected"


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """The ``Retry-After`` header in seconds (at most :data:`MAX_RETRY_DELAY_S`), or ``None``
    when absent or not a number of seconds (an HTTP date is not honoured)."""
    value = headers.get("retry-after") if headers is not None else None
    try:
        seconds = float(value) if value is not None else math.nan
    except ValueError:
        return None
    if not math.isfinite(seconds) and seconds != math.inf:
        return None
    return min(max(seconds, 0.0), MAX_RETRY_DELAY_S)


def backoff_seconds(attempt: int, base: float, rng: random.Random) -> float:
    """The wait before retry ``attempt + 1``: ``base * 2**attempt`` times a jitter factor in
    [0.5, 1], at most :data:`MAX_RETRY_DELAY_S`."""
    return min(base * 2.0 ** min(attempt, 64), MAX_RETRY_DELAY_S) * (0.5 + 0.5 * rng.random())


async def retrying(
    attempt: Callable[[Replica | None], Awaitable[tuple[T | Retry | Fail, Replica]]],
    call: SampleBlock,
    identity: str,
    max_retries: int,
    backoff: Callable[[int], float],
    on_retry: Callable[[str, float, str], None],
    breaker: CircuitBreaker | None = None,
) -> T:
    """One call, retried as this module's docstring says: ``attempt(failed_on)`` makes one
    attempt (``failed_on``: the replica the last one failed on) and gives its outcome and
    replica; :class:`OpenAIGenerationError` when it gives up. Before each retry's wait (the
    server's ``Retry-After``, or ``backoff(k)`` before retry ``k + 1``),
    ``on_retry(where, delay, reason)`` is told. ``breaker`` (:mod:`credo.models.breaker`)
    is told of every attempt; while it is open no attempt is made (the call fails at once,
    or as soon as it opens while the call waits to retry)."""
    tries = 0
    failed_on: Replica | None = None
    while True:
        if breaker is not None and not breaker.allow():
            raise OpenAIGenerationError(
                f"request {call.request_index} (samples {call.offset}.."
                f"{call.offset + call.n - 1}) to {identity} not sent"
                f"{f' after {tries} attempts' if tries else ''}: {breaker.reason}",
                call.request_index, kind="circuit_open",
            )
        outcome, replica = await attempt(failed_on)
        if breaker is not None:
            tell_breaker(breaker, outcome)
        if not isinstance(outcome, Retry | Fail):
            return outcome
        failed_on = replica
        where = f"{identity} at {replica.url or 'api.openai.com'}"
        if isinstance(outcome, Fail) or tries >= max_retries:
            made = f"{tries + 1} attempt{'s' if tries else ''}"
            raise OpenAIGenerationError(
                f"request {call.request_index} (samples {call.offset}.."
                f"{call.offset + call.n - 1}) to {where} failed after {made}: "
                f"{outcome.reason}",
                call.request_index, kind=outcome.kind,
            )
        delay = outcome.retry_after if outcome.retry_after is not None else backoff(tries)
        on_retry(where, delay, outcome.reason)
        tries += 1
        if breaker is not None:
            await breaker.sleep(delay)
        else:
            await asyncio.sleep(delay)


def raise_unless_outcome(call: SampleBlock | None, outcome: object, identity: str) -> None:
    """Raise ``outcome`` unless it is generations or a request's failure to yield
    (``call`` is ``None`` when the runner itself failed): a :class:`UserError` or the
    runner's own error as it is, any other exception as an :class:`OpenAIGenerationError`
    naming the request."""
    if not isinstance(outcome, BaseException):
        return
    if isinstance(outcome, UserError) or call is None:
        raise outcome
    if isinstance(outcome, OpenAIGenerationError):
        return
    raise OpenAIGenerationError(
        f"request {call.request_index} (samples {call.offset}..{call.offset + call.n - 1}) "
        f"to {identity} failed: {type(outcome).__name__}: {outcome}",
        call.request_index,
    ) from outcome


def tell_breaker(breaker: CircuitBreaker, outcome: object) -> None:
    """Tell ``breaker`` how one attempt ended: a :class:`Retry` other than a 429 is a
    failure, a :class:`Fail` or a 429 neither, anything else a success."""
    if isinstance(outcome, Retry) and not outcome.throttled:
        breaker.failure()
    elif isinstance(outcome, Retry | Fail):
        breaker.neutral()
    else:
        breaker.success()


def classify(
    exc: Exception, replica: Replica, model: str, api_key_env: str, api_key: str | None
) -> Retry | Fail:
    """What to do about a failed call; raises ``exc`` itself when it is none of the
    client's (a bug, an injected client's own error) and UserError on 401/403 (and on a
    404 before any call of ``replica`` succeeded)."""
    import openai

    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        if status in (401, 403):
            raise key_refused(status, replica, api_key_env, api_key) from None
        if status == 404 and not replica.answered:
            raise not_found(exc, replica, model) from None
        reason = redact_text(f"HTTP {status}: {exc.message}")
        if status in (408, 429) or status >= 500:
            wait = retry_after_seconds(exc.response.headers) if status in (429, 503) else None
            return Retry(reason, wait, throttled=status == 429, kind=f"http_{status}")
        return Fail(reason, kind=f"http_{status}")
    if isinstance(exc, openai.APIConnectionError):  # APITimeoutError included
        kind = "timeout" if isinstance(exc, openai.APITimeoutError) else "connection"
        return Retry(connection_reason(exc), kind=kind)
    if isinstance(exc, openai.APIResponseValidationError | json.JSONDecodeError):
        return Retry(f"malformed reply: {type(exc).__name__}: {exc}", kind="malformed_reply")
    if isinstance(exc, openai.APIError):
        return Fail(f"{type(exc).__name__}: {exc}")
    raise exc


def connection_reason(exc: Exception) -> str:
    """A connection error in words: its cause (refused, unknown host) or the timeout."""
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return f"no answer within the timeout ({type(exc.__cause__).__name__})"
    cause = exc.__cause__
    if cause is not None and str(cause):
        return f"{type(cause).__name__}: {cause}"
    return f"{type(exc).__name__}: {exc}"


def not_found(exc: Exception, replica: Replica, model: str) -> UserError:
    """The error of a 404 before any call of ``replica`` succeeded: no
    rerun can mend a wrong URL or model name, so it is the user's, not a failed
    request to retry later."""
    return UserError(
        f"the OpenAI-compatible server at {replica.url or 'api.openai.com'} answered "
        f"HTTP 404 to the first chat request for model {model!r}: check base_url "
        f"(it usually ends in /v1) and the model name ({redact_text(str(exc))[:200]})"
    )


def key_refused(
    status: int, replica: Replica, api_key_env: str, api_key: str | None
) -> UserError:
    """The error of a 401/403: the key is missing or wrong."""
    sent = (
        f"${api_key_env} is not set"
        if api_key in (None, "EMPTY") and not replica.headers
        else f"the key from ${api_key_env} was refused"
    )
    return UserError(
        f"the OpenAI-compatible server at {replica.url or 'api.openai.com'} answered "
        f"HTTP {status}: {sent}; export {api_key_env}=<key>, or name another "
        "variable with model_options: {api_key_env: NAME}"
    )


__all__ = [
    "MAX_RETRY_DELAY_S",
    "Fail",
    "MalformedReply",
    "OpenAIGenerationError",
    "Retry",
    "backoff_seconds",
    "classify",
    "connection_reason",
    "key_refused",
    "not_found",
    "raise_unless_outcome",
    "retry_after_seconds",
    "retrying",
    "tell_breaker",
]

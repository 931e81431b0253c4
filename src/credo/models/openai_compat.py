"""A backend for OpenAI-compatible chat endpoints (OpenAI, vLLM, llama.cpp's server, …).

Requests go through ``openai.AsyncOpenAI`` on an event loop that this object runs in a
background thread (an ``AsyncOpenAI`` client is tied to the loop it first ran on, so one
loop serves every :meth:`OpenAIModel.generate` call). Concurrency is bounded by an
:class:`asyncio.Semaphore`. Results reach the synchronous generator through a queue, so
they are yielded as they complete.

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
:attr:`OpenAIModel.retries`.

Failures. Another 4xx (400, 404, 422, …) fails its request at once. A request that fails,
or whose retries run out, is yielded as ``(index, OpenAIGenerationError)`` and the others
go on (the protocol's contract: the executor caches the rest and the run resumes later).
A 401 or 403 raises :class:`~credo.errors.UserError` (the key is wrong or missing; no
request can succeed). Any other exception (a bug, or an injected client's own) is raised
as an :class:`OpenAIGenerationError` naming the request.

Preflight. :meth:`OpenAIModel.preflight` sends one ``GET {base_url}/models`` (timeout
``preflight_timeout``) before a run's first call, so an unreachable server is a one-line
:class:`~credo.errors.UserError` rather than a run of failed requests; any HTTP answer
counts as reachable, except a 401/403, which is the key's error raised early.

Secrets. The API key comes only from the environment: ``api_key_env`` names the variable
(``OPENAI_API_KEY`` by default); a literal ``api_key`` option is refused, since a run
writes its model options to its folder. Credentials in the base URL
(``http://user:KEY@host/v1``) are taken out of it: they go as an HTTP basic
``Authorization`` header, and the URL everything else sees (``identity``, ``repr``, log
lines, error messages, the client, which would log them) is :func:`redact_url`'s. A URL
without credentials is kept as it is, so identities (and cache keys) do not change.

Seeds. With ``supports_n`` a request's ``n`` samples are one call with ``n`` and
``seed``; llama.cpp's server seeds child ``j`` with ``seed + j`` (the protocol's
contract) but OpenAI and vLLM do not. ``supports_n=False`` sends ``n`` calls seeded
``seed + j``, which honours the contract on any server that honours ``seed``.

``top_k`` and ``min_p`` are not OpenAI parameters; vLLM and llama.cpp's server accept
them in the body, so they go in ``extra_body`` when they differ from the protocol's
defaults (0 = off), or always with ``explicit_truncation=True`` — needed for a llama.cpp
server, whose own defaults are top_k=40 and min_p=0.05.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import math
import os
import queue
import random
import threading
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from credo.errors import UserError
from credo.models.base import ClosesOnExit
from credo.models.urls import basic_authorization, redact_url, split_credentials
from credo.types import (
    Capabilities,
    Generation,
    GenerationError,
    GenerationRequest,
    SampleBlock,
    SamplingParams,
    TokenLogprob,
)

logger = logging.getLogger(__name__)

MAX_TOP_LOGPROBS = 20
MAX_RETRY_DELAY_S = 30.0
"""The longest wait before a retry (backoff and ``Retry-After`` alike)."""
_CLOSE_TIMEOUT_S = 10.0


class OpenAIGenerationError(GenerationError):
    """An OpenAI-compatible endpoint failed one request (after our retries)."""


_Call = SampleBlock
_Outcome = list[Generation] | BaseException


@dataclass(frozen=True)
class _Retry:
    """A call failed in a way another try may mend; ``retry_after`` is the server's wait."""

    reason: str
    retry_after: float | None = None


@dataclass(frozen=True)
class _Fail:
    """A call failed in a way no retry mends (a 4xx other than 401/403/408/429)."""

    reason: str


class _MalformedReply(Exception):
    """The reply parsed, but is not the chat completion that was asked for."""


def _get(obj: Any, name: str, default: Any = None) -> Any:
    """Attribute or key ``name`` of a response object (pydantic model or plain dict)."""
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _lp(value: Any) -> float:
    """A logprob (``None`` stands for an impossible token)."""
    return float("-inf") if value is None else float(value)


def parse_choice_logprobs(logprobs: Any) -> tuple[TokenLogprob, ...] | None:
    """``choice.logprobs`` → :class:`TokenLogprob` tuple (alternatives sorted), or ``None``."""
    content = _get(logprobs, "content") if logprobs is not None else None
    if content is None:
        return None
    tokens = []
    for entry in content:
        top = sorted(
            (
                (_get(alt, "token") or "", _lp(_get(alt, "logprob")))
                for alt in _get(entry, "top_logprobs") or ()
            ),
            key=lambda pair: -pair[1],
        )
        tokens.append(
            TokenLogprob(_get(entry, "token") or "", _lp(_get(entry, "logprob")), tuple(top))
        )
    return tuple(tokens)


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


class OpenAIModel(ClosesOnExit):
    """A :class:`~credo.models.base.Model` over an OpenAI-compatible chat endpoint.

    The API key is the environment variable named by ``api_key_env``; without it a
    ``base_url`` server gets ``"EMPTY"`` (local servers take any key) and hosted OpenAI
    is refused. ``api_key`` is refused: a literal key does not belong in a config.
    ``client`` injects a ready ``AsyncOpenAI``-like object (tests); it must offer
    ``await client.chat.completions.create(**kwargs)``, and no key is then needed.
    ``logprobs=False`` marks an endpoint without logprobs (they are then never
    requested). ``max_retries`` and ``retry_backoff`` (seconds) shape the retries of the
    module docstring; ``retries`` counts the calls retried so far.
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        max_concurrency: int = 8,
        timeout: float = 120,
        max_retries: int = 4,
        retry_backoff: float = 1.0,
        preflight_timeout: float = 5.0,
        supports_n: bool = True,
        supports_seed: bool = True,
        logprobs: bool = True,
        explicit_truncation: bool = False,
        api_key: str | None = None,
        client: Any = None,
    ) -> None:
        if api_key is not None:
            raise UserError(
                f"model_options.api_key: credo takes no literal API key (the run folder would "
                f"keep it); export {api_key_env}=<key>, and for another variable set "
                "model_options: {api_key_env: NAME}"
            )
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        if max_retries < 0 or retry_backoff < 0:
            raise ValueError(
                f"max_retries and retry_backoff must be >= 0, got {max_retries}, {retry_backoff}"
            )
        url, user, password = split_credentials(base_url) if base_url else (None, None, None)
        key = os.environ.get(api_key_env) or ("EMPTY" if base_url else None)
        if key is None and client is None:
            raise UserError(
                f"no API key for OpenAI model {model!r}: export {api_key_env}=<key> "
                "(local servers: set base_url)"
            )
        self.model = model
        self.base_url = url
        self.api_key_env = api_key_env
        self.max_concurrency = max_concurrency
        self.timeout = timeout
        self.max_retries = max_retries
        self.retry_backoff = retry_backoff
        self.preflight_timeout = preflight_timeout
        self.supports_n = supports_n
        self.supports_seed = supports_seed
        self.logprobs = logprobs
        self.explicit_truncation = explicit_truncation
        self.retries = 0
        self._api_key = key
        self._headers = {"Authorization": basic_authorization(user, password)} if user else {}
        self._client = client
        self._owns_client = client is None
        self._rng = random.Random()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False

    # ------------------------------------------------------------------ protocol

    @property
    def identity(self) -> str:
        """``openai:<base_url or api.openai.com>:<model>`` (the URL without credentials)."""
        return f"openai:{self.base_url or 'api.openai.com'}:{self.model}"

    @property
    def capabilities(self) -> Capabilities:
        """What the endpoint was declared to support."""
        notes = ["OpenAI-compatible chat endpoint"]
        if self.supports_n and self.supports_seed:
            notes.append(
                "samples of one request share one call with n: sample j is seeded seed + j "
                "only on servers that seed children that way (llama.cpp's server does)"
            )
        return Capabilities(
            logprobs=self.logprobs,
            max_top_logprobs=MAX_TOP_LOGPROBS if self.logprobs else 0,
            seeded=self.supports_seed,
            parallel_samples=self.supports_n,
            notes=tuple(notes),
        )

    def request_kwargs(self, request: GenerationRequest, offset: int, n: int) -> dict[str, Any]:
        """The ``chat.completions.create`` keyword arguments for one call."""
        params: SamplingParams = request.params
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_tokens,
        }
        if self.supports_n:
            kwargs["n"] = n
        elif n != 1:
            raise ValueError(f"this endpoint takes one sample per call, asked for {n}")
        if self.supports_seed:
            kwargs["seed"] = request.seed + offset
        if params.stop:
            kwargs["stop"] = list(params.stop)
        if params.top_logprobs > 0 and self.logprobs:
            kwargs["logprobs"] = True
            kwargs["top_logprobs"] = params.top_logprobs
        extra: dict[str, Any] = {}
        if params.top_k != 0 or self.explicit_truncation:
            extra["top_k"] = params.top_k
        if params.min_p != 0.0 or self.explicit_truncation:
            extra["min_p"] = params.min_p
        if extra:
            kwargs["extra_body"] = extra
        return kwargs

    def generate(
        self, requests: Sequence[GenerationRequest]
    ) -> Iterator[tuple[int, list[Generation] | GenerationError]]:
        """Send every request's calls concurrently; yield each request once all its calls end.

        A request whose call failed (retries run out, or a 4xx no retry mends) is yielded
        once as ``(index, OpenAIGenerationError)``, as soon as that call gives up; the
        other requests go on. A 401/403 raises :class:`~credo.errors.UserError`; any
        other exception raises :class:`OpenAIGenerationError` naming the request. Either
        cancels the calls not yet finished.
        """
        requests = list(requests)
        self._check_logprobs(requests)
        calls = [
            _Call(index, offset, size)
            for index, request in enumerate(requests)
            for offset, size in (
                [(0, request.n)] if self.supports_n else [(j, 1) for j in range(request.n)]
            )
        ]
        if not calls:
            return
        loop = self._ensure_loop()
        results: queue.Queue[tuple[_Call | None, _Outcome]] = queue.Queue()
        remaining = {index: 0 for index in range(len(requests))}
        for call in calls:
            remaining[call.request_index] += 1
        runner: Future[None] = asyncio.run_coroutine_threadsafe(
            self._run_all(requests, calls, results), loop
        )
        partial: dict[int, dict[int, list[Generation]]] = {}
        received = 0
        try:
            while received < len(calls):
                call, outcome = results.get()
                received += 1
                self._raise_unless_outcome(call, outcome)
                assert call is not None
                index = call.request_index
                if remaining[index] < 0:
                    continue  # a call of a request that already failed
                if isinstance(outcome, OpenAIGenerationError):
                    remaining[index] = -1
                    partial.pop(index, None)
                    yield index, outcome
                    continue
                assert not isinstance(outcome, BaseException)
                blocks = partial.setdefault(index, {})
                blocks[call.offset] = outcome
                remaining[index] -= 1
                if remaining[index] == 0:
                    del partial[index]
                    yield index, [g for o in sorted(blocks) for g in blocks[o]]
        finally:
            if received < len(calls) and not runner.done():  # left early: stop the rest
                runner.cancel()

    def preflight(self) -> None:
        """One ``GET {base_url}/models``: raise :class:`~credo.errors.UserError` when the
        server cannot be reached (refused, unknown host, no answer within
        ``preflight_timeout`` seconds) or refuses the key (401/403); any other HTTP answer
        passes. Nothing is checked for hosted OpenAI (no ``base_url``) or an injected
        client."""
        if self.base_url is None or not self._owns_client:
            return
        import openai

        client = openai.OpenAI(
            api_key=self._api_key,
            base_url=self.base_url,
            timeout=self.preflight_timeout,
            max_retries=0,
            default_headers=self._headers,
        )
        try:
            client.models.list()
        except openai.APIConnectionError as exc:  # APITimeoutError included
            raise UserError(
                f"cannot reach the OpenAI-compatible server at {self.base_url}: {self._reason(exc)}"
            ) from exc
        except openai.APIStatusError as exc:
            if exc.status_code in (401, 403):
                raise self._key_refused(exc.status_code) from None
        except (openai.OpenAIError, ValueError):
            pass  # an HTTP answer that is not a model list: the server is there
        finally:
            client.close()

    def close(self) -> None:
        """Close the client (if this object made it) and stop the event loop thread."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
            self._closed = True
        if loop is None:
            return
        closing = asyncio.run_coroutine_threadsafe(self._shut_down(), loop)
        closing.result(timeout=_CLOSE_TIMEOUT_S)
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(timeout=_CLOSE_TIMEOUT_S)
        loop.close()

    def __repr__(self) -> str:
        return f"OpenAIModel({self.model!r}, base_url={self.base_url!r})"

    # ------------------------------------------------------------------ internals

    def _check_logprobs(self, requests: list[GenerationRequest]) -> None:
        """Refuse a request for logprobs from an endpoint declared without them."""
        for index, request in enumerate(requests):
            if request.params.top_logprobs > 0 and not self.logprobs:
                raise ValueError(
                    f"request {index} asks for top_logprobs={request.params.top_logprobs}, "
                    f"but {self.identity} was declared without logprobs"
                )

    def _raise_unless_outcome(self, call: _Call | None, outcome: _Outcome) -> None:
        """Raise ``outcome`` unless it is generations or a request's failure to yield
        (``call`` is ``None`` when the runner itself failed)."""
        if not isinstance(outcome, BaseException):
            return
        if isinstance(outcome, UserError) or call is None:
            raise outcome
        if isinstance(outcome, OpenAIGenerationError):
            return
        raise OpenAIGenerationError(
            f"request {call.request_index} (samples {call.offset}..{call.offset + call.n - 1}) "
            f"to {self.identity} failed: {type(outcome).__name__}: {outcome}",
            call.request_index,
        ) from outcome

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        """Start the background event loop thread once."""
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self!r} is closed")
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="credo-openai-loop", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    async def _shut_down(self) -> None:
        """Cancel the calls still running (an abandoned ``generate``), close our client."""
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._client is not None and self._owns_client:
            await self._client.close()
            self._client = None

    def _get_client(self) -> Any:
        """The injected client, or an ``AsyncOpenAI`` made on the loop thread (no retries
        of its own: they are ours)."""
        if self._client is None:
            from openai import AsyncOpenAI

            self._client = AsyncOpenAI(
                api_key=self._api_key,
                base_url=self.base_url,
                timeout=self.timeout,
                max_retries=0,
                default_headers=self._headers,
            )
        return self._client

    async def _run_all(
        self,
        requests: list[GenerationRequest],
        calls: list[_Call],
        results: queue.Queue[tuple[_Call | None, _Outcome]],
    ) -> None:
        """Run ``calls`` at most ``max_concurrency`` at a time, posting each outcome."""
        try:
            semaphore = asyncio.Semaphore(self.max_concurrency)
            client = self._get_client()
        except Exception as exc:  # handed to the consumer, which raises it
            results.put((None, exc))
            return

        async def one(call: _Call) -> None:
            try:
                outcome: _Outcome = await self._call_with_retries(
                    client, semaphore, requests[call.request_index], call
                )
            except Exception as exc:  # handed to the consumer (yielded or raised)
                outcome = exc
            results.put((call, outcome))

        await asyncio.gather(*(one(call) for call in calls))

    async def _call_with_retries(
        self, client: Any, semaphore: asyncio.Semaphore, request: GenerationRequest, call: _Call
    ) -> list[Generation]:
        """One call, retried as the module docstring says; :class:`OpenAIGenerationError`
        when it gives up. The semaphore is held per attempt, not while waiting."""
        attempt = 0
        while True:
            async with semaphore:
                try:
                    return await self._call(client, request, call)
                except _MalformedReply as exc:
                    verdict: _Retry | _Fail = _Retry(f"malformed reply: {exc}")
                except Exception as exc:
                    verdict = self._classify(exc)  # raises what no retry concerns
            if isinstance(verdict, _Fail) or attempt >= self.max_retries:
                tries = f"{attempt + 1} attempt{'s' if attempt else ''}"
                raise OpenAIGenerationError(
                    f"request {call.request_index} (samples {call.offset}.."
                    f"{call.offset + call.n - 1}) to {self.identity} failed after {tries}: "
                    f"{verdict.reason}",
                    call.request_index,
                )
            delay = (
                verdict.retry_after
                if verdict.retry_after is not None
                else backoff_seconds(attempt, self.retry_backoff, self._rng)
            )
            logger.debug(
                "retrying request %d (samples %d..%d) to %s in %.2f s: %s",
                call.request_index,
                call.offset,
                call.offset + call.n - 1,
                self.identity,
                delay,
                verdict.reason,
            )
            with self._lock:
                self.retries += 1
            attempt += 1
            await asyncio.sleep(delay)

    def _classify(self, exc: Exception) -> _Retry | _Fail:
        """What to do about a failed call; raises ``exc`` itself when it is none of the
        client's (a bug, an injected client's own error) and UserError on 401/403."""
        import openai

        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            if status in (401, 403):
                raise self._key_refused(status) from None
            reason = f"HTTP {status}: {exc.message}"
            if status in (408, 429) or status >= 500:
                wait = retry_after_seconds(exc.response.headers) if status in (429, 503) else None
                return _Retry(reason, wait)
            return _Fail(reason)
        if isinstance(exc, openai.APIConnectionError):  # APITimeoutError included
            return _Retry(self._reason(exc))
        if isinstance(exc, openai.APIResponseValidationError | json.JSONDecodeError):
            return _Retry(f"malformed reply: {type(exc).__name__}: {exc}")
        if isinstance(exc, openai.APIError):
            return _Fail(f"{type(exc).__name__}: {exc}")
        raise exc

    def _reason(self, exc: Exception) -> str:
        """A connection error in words: its cause (refused, unknown host) or the timeout."""
        import openai

        if isinstance(exc, openai.APITimeoutError):
            return f"no answer within the timeout ({type(exc.__cause__).__name__})"
        cause = exc.__cause__
        if cause is not None and str(cause):
            return f"{type(cause).__name__}: {cause}"
        return f"{type(exc).__name__}: {exc}"

    def _key_refused(self, status: int) -> UserError:
        """The error of a 401/403: the key is missing or wrong."""
        sent = (
            f"${self.api_key_env} is not set"
            if self._api_key in (None, "EMPTY") and not self._headers
            else f"the key from ${self.api_key_env} was refused"
        )
        return UserError(
            f"the OpenAI-compatible server at {self.base_url or 'api.openai.com'} answered "
            f"HTTP {status}: {sent}; export {self.api_key_env}=<key>, or name another "
            "variable with model_options: {api_key_env: NAME}"
        )

    async def _call(self, client: Any, request: GenerationRequest, call: _Call) -> list[Generation]:
        """One ``chat.completions.create`` call → ``call.n`` generations; a reply that is
        not ``call.n`` well-formed choices raises :class:`_MalformedReply`."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        response = await client.chat.completions.create(
            **self.request_kwargs(request, call.offset, call.n)
        )
        seconds = loop.time() - start
        choices = _checked_choices(response, call.n)
        usage = _get(response, "usage")
        prompt_tokens = _count(_get(usage, "prompt_tokens")) if usage is not None else 0
        total_completion = _count(_get(usage, "completion_tokens")) if usage is not None else 0
        generations = []
        for choice in choices:
            text = _get(_get(choice, "message"), "content")
            finish = _get(choice, "finish_reason") or "stop"
            try:
                logprobs = parse_choice_logprobs(_get(choice, "logprobs"))
            except (TypeError, ValueError, AttributeError) as exc:
                raise _MalformedReply(f"unreadable logprobs ({exc})") from exc
            if logprobs is not None:
                completion_tokens = len(logprobs)
            elif call.n == 1:
                completion_tokens = total_completion
            elif finish == "length":
                completion_tokens = request.params.max_tokens
            else:
                completion_tokens = -1  # not reported per choice: shared out below
            generations.append(
                Generation(
                    text=text,
                    finish_reason=str(finish),
                    completion_tokens=completion_tokens,
                    prompt_tokens=prompt_tokens,
                    logprobs=logprobs if request.params.top_logprobs > 0 else None,
                    seconds=seconds,
                )
            )
        return _share_completion_tokens(generations, total_completion)


def _share_completion_tokens(generations: list[Generation], total: int) -> list[Generation]:
    """The choices whose count the reply does not give (``-1``: no logprobs, ``n > 1``,
    not cut at ``max_tokens``) share evenly what ``usage.completion_tokens`` leaves after
    the others (the first ones one token more), so a call's samples add up to the
    server's count (credo.generation.ledger)."""
    unknown = [i for i, g in enumerate(generations) if g.completion_tokens < 0]
    if not unknown:
        return generations
    known = sum(g.completion_tokens for g in generations if g.completion_tokens >= 0)
    share, extra = divmod(max(0, total - known), len(unknown))
    out = list(generations)
    for j, i in enumerate(unknown):
        out[i] = dataclasses.replace(out[i], completion_tokens=share + (j < extra))
    return out


def _count(value: Any) -> int:
    """A token count from ``usage`` (0 when absent or not a number)."""
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _checked_choices(response: Any, n: int) -> list[Any]:
    """The ``n`` choices of a chat completion in index order, each with a string content;
    anything else raises :class:`_MalformedReply` (the client does not validate replies)."""
    if isinstance(response, str | bytes | list | tuple) or response is None:
        raise _MalformedReply(f"not a chat completion ({type(response).__name__})")
    choices = _get(response, "choices")
    if not isinstance(choices, list | tuple):
        raise _MalformedReply(f"no list of choices ({type(choices).__name__})")
    if len(choices) != n:
        raise _MalformedReply(f"asked for {n} choices, got {len(choices)}")
    indices = [_get(c, "index") for c in choices]
    if all(isinstance(i, int) for i in indices):
        if sorted(indices) != list(range(n)):
            raise _MalformedReply(f"choice indices {sorted(indices)} are not 0..{n - 1}")
        choices = [c for _, c in sorted(zip(indices, choices, strict=True), key=lambda p: p[0])]
    for position, choice in enumerate(choices):
        message = _get(choice, "message")
        if message is None:
            raise _MalformedReply(f"choice {position} has no message")
        if not isinstance(_get(message, "content"), str):
            raise _MalformedReply(f"choice {position} has no text content")
    return list(choices)


__all__ = [
    "MAX_RETRY_DELAY_S",
    "OpenAIGenerationError",
    "OpenAIModel",
    "backoff_seconds",
    "parse_choice_logprobs",
    "redact_url",
    "retry_after_seconds",
]

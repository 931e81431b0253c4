"""A backend for OpenAI-compatible chat endpoints (OpenAI, vLLM, llama.cpp's server, …).

Requests go through ``openai.AsyncOpenAI`` on an event loop that this object runs in a
background thread (an ``AsyncOpenAI`` client is tied to the loop it first ran on, so one
loop serves every :meth:`OpenAIModel.generate` call). Concurrency is bounded by an
:class:`asyncio.Semaphore`; retries with backoff (429, 5xx, connection errors) are the
client's own (``max_retries``). Results reach the synchronous generator through a queue,
so they are yielded as they complete.

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
import logging
import os
import queue
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from typing import Any

from credo.models.base import ClosesOnExit
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
_CLOSE_TIMEOUT_S = 10.0


class OpenAIGenerationError(GenerationError):
    """An OpenAI-compatible endpoint failed one request (after the client's retries)."""


_Call = SampleBlock


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


class OpenAIModel(ClosesOnExit):
    """A :class:`~credo.models.base.Model` over an OpenAI-compatible chat endpoint.

    ``api_key`` defaults to ``$OPENAI_API_KEY``, or ``"EMPTY"`` when ``base_url`` names a
    local server. ``client`` injects a ready ``AsyncOpenAI``-like object (tests); it must
    offer ``await client.chat.completions.create(**kwargs)``. ``logprobs=False`` marks an
    endpoint without logprobs (they are then never requested).
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        max_concurrency: int = 8,
        timeout: float = 120,
        max_retries: int = 3,
        supports_n: bool = True,
        supports_seed: bool = True,
        logprobs: bool = True,
        *,
        explicit_truncation: bool = False,
        client: Any = None,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        key = api_key or os.environ.get("OPENAI_API_KEY") or ("EMPTY" if base_url else None)
        if key is None and client is None:
            raise ValueError(
                f"no API key for OpenAI model {model!r}: pass api_key= or set $OPENAI_API_KEY "
                "(local servers: pass base_url=)"
            )
        self.model = model
        self.base_url = base_url
        self.max_concurrency = max_concurrency
        self.timeout = timeout
        self.max_retries = max_retries
        self.supports_n = supports_n
        self.supports_seed = supports_seed
        self.logprobs = logprobs
        self.explicit_truncation = explicit_truncation
        self._api_key = key
        self._client = client
        self._owns_client = client is None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False

    # ------------------------------------------------------------------ protocol

    @property
    def identity(self) -> str:
        """``openai:<base_url or api.openai.com>:<model>``."""
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
    ) -> Iterator[tuple[int, list[Generation]]]:
        """Send every request's calls concurrently; yield each request once all its calls end.

        An error in any call raises :class:`OpenAIGenerationError` naming the request and
        cancels the calls not yet finished.
        """
        requests = list(requests)
        for index, request in enumerate(requests):
            if request.params.top_logprobs > 0 and not self.logprobs:
                raise ValueError(
                    f"request {index} asks for top_logprobs={request.params.top_logprobs}, "
                    f"but {self.identity} was declared without logprobs"
                )
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
        results: queue.Queue[tuple[_Call, list[Generation] | None, BaseException | None]] = (
            queue.Queue()
        )
        remaining = {index: 0 for index in range(len(requests))}
        for call in calls:
            remaining[call.request_index] += 1
        runner: Future[None] = asyncio.run_coroutine_threadsafe(
            self._run_all(requests, calls, results), loop
        )
        partial: dict[int, dict[int, list[Generation]]] = {}
        try:
            for _ in range(len(calls)):
                call, generations, error = results.get()
                if error is not None:
                    raise OpenAIGenerationError(
                        f"request {call.request_index} (samples {call.offset}.."
                        f"{call.offset + call.n - 1}) to {self.identity} failed: "
                        f"{type(error).__name__}: {error}",
                        call.request_index,
                    ) from error
                assert generations is not None
                blocks = partial.setdefault(call.request_index, {})
                blocks[call.offset] = generations
                remaining[call.request_index] -= 1
                if remaining[call.request_index] == 0:
                    del partial[call.request_index]
                    yield call.request_index, [g for o in sorted(blocks) for g in blocks[o]]
        finally:
            if not runner.done():
                runner.cancel()

    def close(self) -> None:
        """Close the client (if this object made it) and stop the event loop thread."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
            self._closed = True
        if loop is None:
            return
        if self._client is not None and self._owns_client:
            closing = asyncio.run_coroutine_threadsafe(self._client.close(), loop)
            closing.result(timeout=_CLOSE_TIMEOUT_S)
            self._client = None
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(timeout=_CLOSE_TIMEOUT_S)
        loop.close()

    def __repr__(self) -> str:
        return f"OpenAIModel({self.model!r}, base_url={self.base_url!r})"

    # ------------------------------------------------------------------ internals

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

    def _get_client(self) -> Any:
        """The injected client, or an ``AsyncOpenAI`` made on the loop thread."""
        if self._client is None:
            from openai import AsyncOpenAI

            self._client = AsyncOpenAI(
                api_key=self._api_key,
                base_url=self.base_url,
                timeout=self.timeout,
                max_retries=self.max_retries,
            )
        return self._client

    async def _run_all(
        self,
        requests: list[GenerationRequest],
        calls: list[_Call],
        results: queue.Queue[tuple[_Call, list[Generation] | None, BaseException | None]],
    ) -> None:
        """Run ``calls`` at most ``max_concurrency`` at a time, posting each outcome."""
        semaphore = asyncio.Semaphore(self.max_concurrency)
        client = self._get_client()

        async def one(call: _Call) -> None:
            async with semaphore:
                request = requests[call.request_index]
                try:
                    generations = await self._call(client, request, call)
                except Exception as exc:  # handed to the consumer, which raises it
                    results.put((call, None, exc))
                else:
                    results.put((call, generations, None))

        await asyncio.gather(*(one(call) for call in calls))

    async def _call(self, client: Any, request: GenerationRequest, call: _Call) -> list[Generation]:
        """One ``chat.completions.create`` call → ``call.n`` generations."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        response = await client.chat.completions.create(
            **self.request_kwargs(request, call.offset, call.n)
        )
        seconds = loop.time() - start
        choices = sorted(_get(response, "choices") or (), key=lambda c: _get(c, "index") or 0)
        if len(choices) != call.n:
            raise OpenAIGenerationError(
                f"asked for {call.n} samples, got {len(choices)}", call.request_index
            )
        usage = _get(response, "usage")
        prompt_tokens = int(_get(usage, "prompt_tokens") or 0) if usage is not None else 0
        total_completion = int(_get(usage, "completion_tokens") or 0) if usage is not None else 0
        generations = []
        for choice in choices:
            message = _get(choice, "message")
            text = _get(message, "content") if message is not None else None
            finish = _get(choice, "finish_reason") or "stop"
            logprobs = parse_choice_logprobs(_get(choice, "logprobs"))
            if logprobs is not None:
                completion_tokens = len(logprobs)
            elif call.n == 1:
                completion_tokens = total_completion
            elif finish == "length":
                completion_tokens = request.params.max_tokens
            else:
                completion_tokens = 0  # per-choice counts are not reported
            generations.append(
                Generation(
                    text=text or "",
                    finish_reason=str(finish),
                    completion_tokens=completion_tokens,
                    prompt_tokens=prompt_tokens,
                    logprobs=logprobs if request.params.top_logprobs > 0 else None,
                    seconds=seconds,
                )
            )
        return generations


__all__ = ["OpenAIGenerationError", "OpenAIModel", "parse_choice_logprobs"]

"""A backend for OpenAI-compatible chat endpoints (OpenAI, vLLM, llama.cpp's server, …).

Requests go through ``openai.AsyncOpenAI`` clients on an event loop that this object runs
in a background thread (an ``AsyncOpenAI`` client is tied to the loop it first ran on, so
one loop serves every :meth:`OpenAIModel.generate` call). Results reach the synchronous
generator through a queue, so they are yielded as they complete.

Identity. ``openai:<model>``, or ``openai:<model>@<label>`` with ``label`` (a weights
revision, a quantisation: whatever the served name does not say). Never the URL nor the
key: the same model behind another port, another host or several replicas shares one
cache (design.md: a model's identity is what determines its outputs).

The rest lives by concern, each module's docstring saying how it behaves:

- :mod:`credo.models.openai_requests`: the chat body of a call (seeds, ``n`` and
  ``max_n`` blocks, ``top_k``/``min_p``, grammars) and the generations of its reply;
- :mod:`credo.models.openai_replicas`: replicas, the calls in flight on each
  (``max_concurrency``) and the rate limits over them all (:mod:`credo.models.ratelimit`);
- :mod:`credo.models.openai_errors`: retries (backoff, ``Retry-After``) and which
  failures are retried, fail their request, or are the user's to mend (and
  :mod:`credo.models.breaker`: no retries for a server that fails every request);
- :mod:`credo.models.openai_checks`: the preflight (``GET /models`` per replica) and the
  probe's requests (:mod:`credo.models.openai_probe`), and what a probe sets.

Secrets. The API key comes only from the environment: ``api_key_env`` names the variable
(``OPENAI_API_KEY`` by default); a literal ``api_key`` option is refused, since a run
writes its model options to its folder. Credentials in a base URL
(``http://user:KEY@host/v1``) are taken out of it: they go as an HTTP basic
``Authorization`` header to that replica; so are query parameters named like credentials
(``?api_key=KEY``, :data:`credo.models.urls.SECRET_PARAMS`), which the client adds to
every call of that replica; and the URL everything else sees (``repr``, log
lines, error messages, the client, which would log them) is :func:`redact_url`'s.

Usage: every attempt is metered (one call, the tokens its reply
reports) and travels with what :meth:`OpenAIModel.generate` yields for its request.
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import random
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from typing import Any

from credo.errors import UserError
from credo.models.base import ClosesOnExit
from credo.models.breaker import DEFAULT_BREAKER_FAILURES, DEFAULT_BREAKER_WINDOW_S, CircuitBreaker
from credo.models.deadline import get_before, waking_queue
from credo.models.openai_checks import (
    apply_probe,
    check_numbers,
    checked_label,
    metered_probe,
    preflight_replica,
    send_probe_request,
)
from credo.models.openai_errors import (
    MAX_RETRY_DELAY_S,
    Fail,
    MalformedReply,
    OpenAIGenerationError,
    Retry,
    backoff_seconds,
    classify,
    raise_unless_outcome,
    retry_after_seconds,
    retrying,
)
from credo.models.openai_loop import LoopThread
from credo.models.openai_probe import ServerProbe
from credo.models.openai_replicas import (
    DEFAULT_MAX_CONCURRENCY,
    REPLICA_COOLDOWN_S,
    Replica,
    ReplicaScheduler,
    client_for,
    close_clients,
    replica_of,
    replica_urls,
)
from credo.models.openai_requests import (
    MAX_TOP_LOGPROBS,
    calls_of,
    chat_kwargs,
    grammar_field,
    metered_generations,
    parse_choice_logprobs,
    send_chat,
    tokens_used,
)
from credo.models.ratelimit import RateLimits, estimate_tokens
from credo.models.urls import redact_url
from credo.types import (
    Capabilities,
    Generation,
    GenerationError,
    GenerationRequest,
    Generations,
    SampleBlock,
    Usage,
)

logger = logging.getLogger(__name__)

_Call = SampleBlock
_Outcome = list[Generation] | BaseException


class OpenAIModel(ClosesOnExit):
    """A :class:`~credo.models.base.Model` over an OpenAI-compatible chat endpoint.

    ``base_url``: one URL, a list of replica URLs (or a comma-separated string), or None
    for hosted OpenAI. ``label`` enters the identity (``openai:<model>@<label>``).
    The API key is the environment variable named by ``api_key_env``; without it a
    ``base_url`` server gets ``"EMPTY"`` (local servers take any key) and hosted OpenAI
    is refused. ``api_key`` is refused: a literal key does not belong in a config.
    ``client`` injects a ready ``AsyncOpenAI``-like object (tests; one replica); it must
    offer ``await client.chat.completions.create(**kwargs)``, and no key is then needed.

    ``max_concurrency`` bounds the calls in flight per replica; ``requests_per_minute``
    and ``tokens_per_minute`` bound all replicas together. ``max_retries`` and
    ``retry_backoff`` (seconds) shape the retries of :mod:`credo.models.openai_errors`;
    ``retries`` counts the calls retried so far. ``breaker_failures`` and
    ``breaker_window_s`` shape the circuit breaker (:mod:`credo.models.breaker`).

    ``supports_n``, ``max_n`` (most samples per call), ``logprobs`` and ``grammar`` (a
    body field of :data:`~credo.models.openai_probe.GRAMMAR_FIELDS`, ``True`` for
    ``"grammar"``, ``False`` for none) say what the
    endpoint does; left ``None`` they are set by :meth:`apply_probe` (without a probe:
    ``n`` and logprobs on, no grammar). ``probe=False`` tells the model pool not to
    probe this model before a run.
    """

    def __init__(
        self,
        model: str,
        base_url: str | Sequence[str] | None = None,
        *,
        label: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        timeout: float = 120,
        max_retries: int = 4,
        retry_backoff: float = 1.0,
        breaker_failures: int = DEFAULT_BREAKER_FAILURES,
        breaker_window_s: float = DEFAULT_BREAKER_WINDOW_S,
        preflight_timeout: float = 5.0,
        supports_n: bool | None = None,
        max_n: int | None = None,
        supports_seed: bool = True,
        logprobs: bool | None = None,
        grammar: str | bool | None = None,
        explicit_truncation: bool = False,
        probe: bool = True,
        api_key: str | None = None,
        client: Any = None,
    ) -> None:
        if api_key is not None:
            raise UserError(
                f"model_options.api_key: credo takes no literal API key (the run folder would "
                f"keep it); export {api_key_env}=<key>, and for another variable set "
                "model_options: {api_key_env: NAME}"
            )
        check_numbers(max_concurrency, max_retries, retry_backoff)
        urls = replica_urls(base_url)
        if client is not None and len(urls) > 1:
            raise ValueError("an injected client serves one replica; give one base_url")
        key = os.environ.get(api_key_env) or ("EMPTY" if urls[0] else None)
        if key is None and client is None:
            raise UserError(
                f"no API key for OpenAI model {model!r}: export {api_key_env}=<key> "
                "(local servers: set base_url)"
            )
        self.model = model
        self.label = checked_label(label)
        self.replicas = [replica_of(url) for url in urls]
        if client is not None:
            self.replicas[0].client, self.replicas[0].owns_client = client, False
        self.api_key_env = api_key_env
        self.max_concurrency = max_concurrency
        self._scheduler = ReplicaScheduler(self.replicas, max_concurrency)
        self.limits = RateLimits(requests_per_minute, tokens_per_minute)
        self.timeout = timeout
        self.max_retries = max_retries
        self.retry_backoff = retry_backoff
        self.breaker = CircuitBreaker(breaker_failures, breaker_window_s)
        self.preflight_timeout = preflight_timeout
        self.supports_seed = supports_seed
        self.explicit_truncation = explicit_truncation
        self.auto_probe = probe
        self._explicit = {
            name
            for name, value in (("supports_n", supports_n), ("max_n", max_n),
                                ("logprobs", logprobs), ("grammar", grammar))
            if value is not None
        }
        self.supports_n = True if supports_n is None else supports_n
        if max_n is not None and max_n < 1:
            raise ValueError(f"max_n must be >= 1, got {max_n}")
        self.max_n = max_n
        self.logprobs = True if logprobs is None else logprobs
        self.max_top_logprobs = MAX_TOP_LOGPROBS
        self.grammar_field = grammar_field(grammar)
        self.seeds_reproducible: bool | None = None
        self.probed: ServerProbe | None = None
        self.retries = 0
        self._api_key = key
        self._rng = random.Random()
        self._loop = LoopThread("credo-openai-loop")
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ protocol

    @property
    def identity(self) -> str:
        """``openai:<model>`` or ``openai:<model>@<label>``: never a URL or a key."""
        return f"openai:{self.model}" + (f"@{self.label}" if self.label else "")

    @property
    def base_url(self) -> str | None:
        """The first replica's URL without credentials (None: hosted OpenAI)."""
        return self.replicas[0].url

    @property
    def base_urls(self) -> tuple[str | None, ...]:
        """Every replica's URL without credentials."""
        return tuple(r.url for r in self.replicas)

    @property
    def capabilities(self) -> Capabilities:
        """What the endpoint was declared, or probed, to support."""
        notes = ["OpenAI-compatible chat endpoint"]
        if len(self.replicas) > 1:
            notes.append(f"{len(self.replicas)} replicas, fewest calls in flight first")
        if self.supports_n and self.supports_seed:
            notes.append(
                "samples of one request share one call with n: sample j is seeded seed + j "
                "only on servers that seed children that way (llama.cpp's server does)"
            )
        if self.seeds_reproducible is False:
            notes.append("the server does not reproduce a sample from its seed")
        if self.probed is not None:
            notes.append(f"probed: {self.probed.summary()}")
        return Capabilities(
            logprobs=self.logprobs,
            max_top_logprobs=self.max_top_logprobs if self.logprobs else 0,
            seeded=self.supports_seed and self.seeds_reproducible is not False,
            parallel_samples=self.supports_n,
            grammar=self.grammar_field is not None,
            notes=tuple(notes),
        )

    def request_kwargs(self, request: GenerationRequest, offset: int, n: int) -> dict[str, Any]:
        """The ``chat.completions.create`` keyword arguments for one call
        (:func:`credo.models.openai_requests.chat_kwargs`)."""
        return chat_kwargs(self, request, offset, n)

    def generate(
        self, requests: Sequence[GenerationRequest]
    ) -> Iterator[tuple[int, list[Generation] | GenerationError]]:
        """Send every request's calls concurrently; yield each request once all its calls end.

        A request whose call failed (retries run out, a 4xx no retry mends, the breaker
        is open) is yielded once as ``(index, OpenAIGenerationError)`` as soon as that
        call gives up; the others go on. Past the thread's deadline
        (:mod:`credo.models.deadline`) it raises ``DeadlineExceeded``. A 401/403 raises
        :class:`~credo.errors.UserError`, any other exception an
        :class:`OpenAIGenerationError` naming the request; each cancels the calls not yet
        finished. Generations are :class:`~credo.types.Generations`; they and an error
        carry the ``usage`` of the request's calls (an error's grows until the generator
        ends: calls of its request still in flight).
        """
        requests = list(requests)
        self._check_logprobs(requests)
        calls = calls_of(requests, self.supports_n, self.max_n)
        if not calls:
            return
        loop = self._loop.ensure(self)  # RuntimeError once closed
        results: queue.Queue[tuple[_Call | None, _Outcome, Usage]] = queue.Queue()
        remaining = {index: 0 for index in range(len(requests))}
        billed = {index: Usage() for index in range(len(requests))}
        for call in calls:
            remaining[call.request_index] += 1
        runner: Future[None] = asyncio.run_coroutine_threadsafe(
            self._run_all(requests, calls, results), loop
        )
        partial: dict[int, dict[int, list[Generation]]] = {}
        received = 0
        try:
            with waking_queue(results) as deadline:
                while received < len(calls):
                    call, outcome, usage = get_before(results, deadline)
                    received += 1
                    raise_unless_outcome(call, outcome, self.identity)
                    assert call is not None
                    index = call.request_index
                    billed[index].add(usage)  # a failed request's error holds this Usage
                    if remaining[index] < 0:
                        continue  # a call of a request that already failed
                    if isinstance(outcome, OpenAIGenerationError):
                        remaining[index] = -1
                        partial.pop(index, None)
                        outcome.usage = billed[index]
                        yield index, outcome
                        continue
                    assert not isinstance(outcome, BaseException)
                    blocks = partial.setdefault(index, {})
                    blocks[call.offset] = outcome
                    remaining[index] -= 1
                    if remaining[index] == 0:
                        del partial[index]
                        gens = [g for o in sorted(blocks) for g in blocks[o]]
                        yield index, Generations(gens, billed[index])
        finally:
            if received < len(calls) and not runner.done():  # left early: stop the rest
                runner.cancel()

    def preflight(self) -> None:
        """One ``GET {url}/models`` per replica: raise :class:`~credo.errors.UserError`
        when one cannot be reached (refused, unknown host, no answer within
        ``preflight_timeout`` seconds) or refuses the key (401/403); any other HTTP answer
        passes. Nothing is checked for hosted OpenAI (no ``base_url``) or an injected
        client."""
        for replica in self.replicas:
            if replica.url is not None and replica.owns_client:
                preflight_replica(
                    replica, self._api_key, self.api_key_env, self.preflight_timeout
                )

    def probe(self) -> ServerProbe:
        """What the first replica does with ``n``, seeds, logprobs and grammars: a handful
        of tiny requests (:func:`credo.models.openai_probe.probe_server`), each tried
        ``min(max_retries, 3) + 1`` times at most and given ``min(timeout, 60)`` seconds;
        its ``calls`` and tokens count every attempt."""
        return metered_probe(self._probe_send, self.model, self.identity)

    def apply_probe(self, probe: ServerProbe) -> list[str]:
        """Set what the options left open from ``probe``; the warnings the user should see.

        Children that do not follow the seed contract (or ``n`` not honoured) mean one call
        per sample; a server that returns no logprobs means logprob methods are not
        available; a grammar is sent under the field the server obeyed. An incomplete
        probe changes nothing. A server whose seed does not reproduce its sample is only
        reported: the samples are not reproducible, but the cache still holds them.
        """
        return apply_probe(self, probe, self._explicit)

    def close(self) -> None:
        """Close the clients (those this object made) and stop the event loop thread."""
        self._loop.close(lambda: close_clients(self.replicas))

    def __repr__(self) -> str:
        urls = self.base_urls
        shown = repr(urls[0]) if len(urls) == 1 else repr(list(urls))
        return f"OpenAIModel({self.model!r}, base_url={shown})"

    # ------------------------------------------------------------------ internals

    def _check_logprobs(self, requests: list[GenerationRequest]) -> None:
        """Refuse a request for logprobs from an endpoint declared without them."""
        for index, request in enumerate(requests):
            if request.params.top_logprobs > 0 and not self.logprobs:
                raise ValueError(
                    f"request {index} asks for top_logprobs={request.params.top_logprobs}, "
                    f"but {self.identity} was declared without logprobs"
                )

    def _client_for(self, replica: Replica) -> Any:
        """The replica's client (:func:`credo.models.openai_replicas.client_for`)."""
        return client_for(replica, self._api_key, self.timeout)

    async def _run_all(
        self,
        requests: list[GenerationRequest],
        calls: list[_Call],
        results: queue.Queue[tuple[_Call | None, _Outcome, Usage]],
    ) -> None:
        """Run ``calls``, at most ``max_concurrency`` per replica at a time, posting each
        outcome and the usage of its attempts."""

        async def one(call: _Call) -> None:
            usage = Usage()
            try:
                outcome: _Outcome = await self._call_with_retries(
                    requests[call.request_index], call, usage
                )
            except Exception as exc:  # handed to the consumer (yielded or raised)
                outcome = exc
            results.put((call, outcome, usage))

        await asyncio.gather(*(one(call) for call in calls))

    async def _call_with_retries(
        self, request: GenerationRequest, call: _Call, usage: Usage
    ) -> list[Generation]:
        """One call, retried as :mod:`credo.models.openai_errors` says (attempts metered
        in ``usage``, the breaker told of each); :class:`OpenAIGenerationError` when it
        gives up. A replica's room is held per attempt, not while waiting."""

        def on_retry(where: str, delay: float, reason: str) -> None:
            logger.debug(
                "retrying request %d (samples %d..%d) to %s in %.2f s: %s",
                call.request_index, call.offset, call.offset + call.n - 1, where, delay, reason,
            )
            with self._lock:
                self.retries += 1

        return await retrying(
            lambda failed_on: self._attempt(request, call, failed_on, usage),
            call, self.identity, self.max_retries, self._backoff, on_retry, self.breaker,
        )

    def _backoff(self, attempt: int) -> float:
        """The wait before retry ``attempt + 1`` (:func:`backoff_seconds`)."""
        return backoff_seconds(attempt, self.retry_backoff, self._rng)

    async def _attempt(
        self, request: GenerationRequest, call: _Call, failed_on: Replica | None, usage: Usage
    ) -> tuple[list[Generation] | Retry | Fail, Replica]:
        """One attempt of a call on the replica the scheduler gives
        (:meth:`~credo.models.openai_replicas.ReplicaScheduler.acquire`), within the rate
        limits: the generations, or what to do about the failure; metered in ``usage``."""
        estimate = estimate_tokens(request, call.n)
        await self.limits.wait(estimate)
        replica = await self._scheduler.acquire(failed_on)
        verdict: Retry | Fail | None = None
        usage.calls += 1
        try:
            generations = await self._call(self._client_for(replica), request, call, usage)
        except MalformedReply as exc:
            verdict = Retry(f"malformed reply: {exc}", kind="malformed_reply")
        except Exception as exc:
            verdict = self._classify(exc, replica)  # raises what no retry concerns
        finally:
            await self._scheduler.release(replica, cool_down=isinstance(verdict, Retry))
        if verdict is not None:
            return verdict, replica
        replica.avoid_until = 0.0
        replica.answered = True
        self.limits.settle(estimate, tokens_used(generations))
        return generations, replica

    def _probe_send(self, body: dict[str, Any], meter: Usage | None = None) -> Any:
        """One probe request to the first replica: the reply as the client gives it, once
        it is a chat completion whose choices all have a text (their number is the probe's
        business). Tried ``min(max_retries, 3) + 1`` times at most; raises
        :class:`~credo.models.openai_probe.ProbeRefused` for a 4xx no retry mends,
        :class:`OpenAIGenerationError` when the tries run out or the breaker is open,
        :class:`~credo.errors.UserError` on 401/403; attempts metered in ``meter``."""
        attempts = min(self.max_retries, 3) + 1
        timeout = min(self.timeout, 60.0)
        replica = self.replicas[0]

        async def send() -> Any:  # on the loop thread, where the client is made
            return await send_probe_request(
                self._client_for(replica), body, timeout, attempts,
                lambda exc: self._classify(exc, replica), self._backoff,
                f"{self.identity} at {replica.url or 'api.openai.com'}",
                meter=meter, breaker=self.breaker,
            )

        future = asyncio.run_coroutine_threadsafe(send(), self._loop.ensure(self))
        return future.result(timeout=attempts * (timeout + MAX_RETRY_DELAY_S) + 5)

    def _classify(self, exc: Exception, replica: Replica) -> Retry | Fail:
        """What to do about a failed call (:func:`credo.models.openai_errors.classify`)."""
        return classify(exc, replica, self.model, self.api_key_env, self._api_key)

    async def _call(
        self, client: Any, request: GenerationRequest, call: _Call, usage: Usage
    ) -> list[Generation]:
        """One chat completions call (:func:`~credo.models.openai_requests.send_chat`) →
        ``call.n`` generations, its tokens metered in ``usage``; a reply that is not
        ``call.n`` well-formed choices raises :class:`MalformedReply`."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        response = await send_chat(client, self.request_kwargs(request, call.offset, call.n))
        return metered_generations(response, request, call.n, loop.time() - start, usage)


__all__ = [
    "DEFAULT_MAX_CONCURRENCY",
    "MAX_RETRY_DELAY_S",
    "REPLICA_COOLDOWN_S",
    "OpenAIGenerationError",
    "OpenAIModel",
    "backoff_seconds",
    "parse_choice_logprobs",
    "redact_url",
    "retry_after_seconds",
]

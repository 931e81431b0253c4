"""A backend for OpenAI-compatible chat endpoints (OpenAI, vLLM, llama.cpp's server, …).

Requests go through ``openai.AsyncOpenAI`` clients on an event loop that this object runs
in a background thread (an ``AsyncOpenAI`` client is tied to the loop it first ran on, so
one loop serves every :meth:`OpenAIModel.generate` call). Results reach the synchronous
generator through a queue, so they are yielded as they complete.

Identity. ``openai:<model>``, or ``openai:<model>@<label>`` with ``label`` (a weights
revision, a quantisation: whatever the served name does not say). Never the URL nor the
key: the same model behind another port, another host or several replicas shares one
cache (design.md: a model's identity is what determines its outputs).

Replicas. ``base_url`` is one URL or a list of them, replicas of one model. Each replica
has its own client (and its own credentials, see *Secrets*) and at most
``max_concurrency`` calls in flight (default 32, per replica). Each call (each attempt)
goes to the replica with the fewest calls in flight, ties to the one that was sent the
fewest; a replica whose last attempt failed in a way a retry may mend is passed over for
:data:`REPLICA_COOLDOWN_S` seconds while another has room, and a retry goes to another
replica than the one that just failed when there is one. So a replica that stops costs
its calls one failed attempt each, retried elsewhere.

Rate limits. ``requests_per_minute`` and ``tokens_per_minute`` (both off by default) hold
every replica together (a hosted API limits the key, not the connection) by the token
buckets of :mod:`credo.models.ratelimit`: a call's tokens are estimated as prompt
characters / 4 plus ``max_tokens`` per sample and corrected by the reply's ``usage``.

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

Failures. Another 4xx (400, 404, 422, …) fails its request at once, except a 404
before any call of that replica succeeded: a wrong URL or model name, which raises
:class:`~credo.errors.UserError` (issue 21). A request that fails,
or whose retries run out, is yielded as ``(index, OpenAIGenerationError)`` and the others
go on (the protocol's contract: the executor caches the rest and the run resumes later).
A 401 or 403 raises :class:`~credo.errors.UserError` (the key is wrong or missing; no
request can succeed). Any other exception (a bug, or an injected client's own) is raised
as an :class:`OpenAIGenerationError` naming the request.

Preflight. :meth:`OpenAIModel.preflight` sends one ``GET {base_url}/models`` to every
replica (timeout ``preflight_timeout``) before a run's first call, so an unreachable
server is a one-line :class:`~credo.errors.UserError` rather than a run of failed
requests; any HTTP answer counts as reachable, except a 401/403, which is the key's error
raised early.

Probe. :meth:`OpenAIModel.probe` asks the first replica a handful of tiny requests
(:mod:`credo.models.openai_probe`): whether it honours ``n``, whether a seed reproduces
its sample, whether the children of a call follow the seed contract, whether it returns
logprobs (how many alternatives) and whether it obeys a grammar.
:meth:`OpenAIModel.apply_probe` sets from that what the options left open
(``supports_n``, ``max_n``, ``logprobs``, ``grammar``); an option given explicitly always
wins.

Secrets. The API key comes only from the environment: ``api_key_env`` names the variable
(``OPENAI_API_KEY`` by default); a literal ``api_key`` option is refused, since a run
writes its model options to its folder. Credentials in a base URL
(``http://user:KEY@host/v1``) are taken out of it: they go as an HTTP basic
``Authorization`` header to that replica; so are query parameters named like credentials
(``?api_key=KEY``, :data:`credo.models.urls.SECRET_PARAMS`), which the client adds to
every call of that replica (issue 21); and the URL everything else sees (``repr``, log
lines, error messages, the client, which would log them) is :func:`redact_url`'s.

Seeds. With ``supports_n`` a request's ``n`` samples are one call with ``n`` and
``seed``; llama.cpp's server seeds child ``j`` with ``seed + j`` (the protocol's
contract) but OpenAI and vLLM do not. ``supports_n=False`` sends ``n`` calls seeded
``seed + j``, which honours the contract on any server that honours ``seed``. Left
unset, the probe decides (and without a probe, ``True``). ``max_n`` caps the samples of
one call (llama.cpp's server refuses ``n`` above its slots, ``-np``): a larger request is
sent as blocks of consecutive samples, block ``k`` seeded ``seed + offset_k``, so the
contract still holds; left unset, the probe finds the cap.

``top_k`` and ``min_p`` are not OpenAI parameters; vLLM and llama.cpp's server accept
them in the body, so they go in ``extra_body`` when they differ from the protocol's
defaults (0 = off), or always with ``explicit_truncation=True`` — needed for a llama.cpp
server, whose own defaults are top_k=40 and min_p=0.05. A request's GBNF ``grammar`` goes
in ``extra_body`` under the field the server obeys (``grammar``: llama.cpp;
``guided_grammar``: vLLM), on a server the probe (or the ``grammar`` option) says obeys one.
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
from credo.models.openai_probe import GRAMMAR_FIELDS, ProbeRefused, ServerProbe, probe_server
from credo.models.ratelimit import RateLimits, estimate_tokens
from credo.models.urls import (
    basic_authorization,
    redact_text,
    redact_url,
    split_credentials,
    split_query_secrets,
)
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


REPLICA_COOLDOWN_S = 10.0
"""How long a replica whose attempt failed is passed over while another has room."""
DEFAULT_MAX_CONCURRENCY = 32
"""Calls in flight per replica by default (a vLLM or llama.cpp server batches them)."""


@dataclass
class _Replica:
    """One server of a model: its URL without credentials, the headers that carry them,
    its client (made on the loop thread) and what it has in flight."""

    url: str | None
    headers: dict[str, str]
    query: dict[str, str] = dataclasses.field(default_factory=dict)
    client: Any = None
    owns_client: bool = True
    in_flight: int = 0
    sent: int = 0
    avoid_until: float = 0.0
    answered: bool = False  # a chat call of it succeeded once


def _replica_urls(base_url: str | Sequence[str] | None) -> list[str | None]:
    """``base_url`` as a list of URLs (``[None]``: hosted OpenAI); a comma-separated
    string is several URLs."""
    if base_url is None:
        return [None]
    items = [base_url] if isinstance(base_url, str) else list(base_url)
    urls = [u.strip() for item in items for u in str(item).split(",") if u.strip()]
    if not urls:
        raise ValueError("base_url names no URL")
    if len(set(urls)) != len(urls):
        raise ValueError("base_url names a replica twice")
    return urls


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
    ``retry_backoff`` (seconds) shape the retries of the module docstring; ``retries``
    counts the calls retried so far.

    ``supports_n``, ``max_n`` (most samples per call), ``logprobs`` and ``grammar`` (a
    body field of
    :data:`GRAMMAR_FIELDS`, ``True`` for ``"grammar"``, ``False`` for none) say what the
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
        _check_numbers(max_concurrency, max_retries, retry_backoff)
        urls = _replica_urls(base_url)
        if client is not None and len(urls) > 1:
            raise ValueError("an injected client serves one replica; give one base_url")
        key = os.environ.get(api_key_env) or ("EMPTY" if urls[0] else None)
        if key is None and client is None:
            raise UserError(
                f"no API key for OpenAI model {model!r}: export {api_key_env}=<key> "
                "(local servers: set base_url)"
            )
        self.model = model
        self.label = _checked_label(label)
        self.replicas = [_replica(url) for url in urls]
        if client is not None:
            self.replicas[0].client, self.replicas[0].owns_client = client, False
        self.api_key_env = api_key_env
        self.max_concurrency = max_concurrency
        self.limits = RateLimits(requests_per_minute, tokens_per_minute)
        self.timeout = timeout
        self.max_retries = max_retries
        self.retry_backoff = retry_backoff
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
        self.grammar_field = _grammar_field(grammar)
        self.seeds_reproducible: bool | None = None
        self.probed: ServerProbe | None = None
        self.retries = 0
        self._api_key = key
        self._rng = random.Random()
        self._room: asyncio.Condition | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False

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
            kwargs["top_logprobs"] = min(params.top_logprobs, max(self.max_top_logprobs, 1))
        extra = self._extra_body(params)
        if extra:
            kwargs["extra_body"] = extra
        return kwargs

    def _extra_body(self, params: SamplingParams) -> dict[str, Any]:
        """What goes in the body beyond OpenAI's parameters: truncation samplers, a grammar."""
        extra: dict[str, Any] = {}
        if params.top_k != 0 or self.explicit_truncation:
            extra["top_k"] = params.top_k
        if params.min_p != 0.0 or self.explicit_truncation:
            extra["min_p"] = params.min_p
        if params.grammar:
            if self.grammar_field is None:
                raise ValueError(
                    f"a request carries a grammar, but {self.identity} takes none "
                    "(model_options.grammar, or run `credo probe`)"
                )
            extra[self.grammar_field] = params.grammar
        return extra

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
                _blocks(request.n, self.max_n) if self.supports_n
                else [(j, 1) for j in range(request.n)]
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
        """One ``GET {url}/models`` per replica: raise :class:`~credo.errors.UserError`
        when one cannot be reached (refused, unknown host, no answer within
        ``preflight_timeout`` seconds) or refuses the key (401/403); any other HTTP answer
        passes. Nothing is checked for hosted OpenAI (no ``base_url``) or an injected
        client."""
        for replica in self.replicas:
            if replica.url is not None and replica.owns_client:
                self._preflight_one(replica)

    def probe(self) -> ServerProbe:
        """What the first replica does with ``n``, seeds, logprobs and grammars: a handful
        of tiny requests (:func:`credo.models.openai_probe.probe_server`), each tried
        ``min(max_retries, 3) + 1`` times at most and given ``min(timeout, 60)`` seconds."""
        return probe_server(self._probe_send, self.model, self.identity)

    def apply_probe(self, probe: ServerProbe) -> list[str]:
        """Set what the options left open from ``probe``; the warnings the user should see.

        Children that do not follow the seed contract (or ``n`` not honoured) mean one call
        per sample; a server that returns no logprobs means logprob methods are not
        available; a grammar is sent under the field the server obeyed. An incomplete
        probe changes nothing. A server whose seed does not reproduce its sample is only
        reported: the samples are not reproducible, but the cache still holds them.
        """
        self.probed = probe
        if not probe.complete:
            return [f"{self.identity}: the probe of the server did not finish "
                    f"({probe.errors[0]}); using model_options as given"]
        warnings = []
        if "supports_n" not in self._explicit:
            together = bool(probe.honours_n) and probe.seed_contract is not False
            if self.supports_n and not together:
                why = ("does not honour n" if not probe.honours_n
                       else "does not seed the children of a call seed + j")
                warnings.append(f"{self.identity}: the server {why}: one call per sample, "
                                "seeded seed + j (model_options.supports_n overrides)")
            self.supports_n = together
        if "max_n" not in self._explicit:
            self.max_n = probe.max_n
        if "logprobs" not in self._explicit:
            self.logprobs = bool(probe.logprobs)
            self.max_top_logprobs = probe.top_logprobs if probe.logprobs else 0
            if not probe.logprobs:
                warnings.append(f"{self.identity}: the server returns no logprobs: methods "
                                "that need them are not available")
        if "grammar" not in self._explicit:
            self.grammar_field = probe.grammar
        self.seeds_reproducible = probe.deterministic
        if probe.deterministic is False:
            warnings.append(f"{self.identity}: the server does not reproduce a sample from "
                            "its seed: samples are not reproducible (the cache still holds "
                            "them, so a rerun reads them back)")
        return warnings

    def close(self) -> None:
        """Close the clients (those this object made) and stop the event loop thread."""
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
        urls = self.base_urls
        shown = repr(urls[0]) if len(urls) == 1 else repr(list(urls))
        return f"OpenAIModel({self.model!r}, base_url={shown})"

    # ------------------------------------------------------------------ internals

    def _preflight_one(self, replica: _Replica) -> None:
        """The preflight of one replica (see :meth:`preflight`)."""
        import openai

        client = openai.OpenAI(
            api_key=self._api_key,
            base_url=replica.url,
            timeout=self.preflight_timeout,
            max_retries=0,
            default_headers=replica.headers,
            default_query=replica.query or None,
        )
        try:
            client.models.list()
        except openai.APIConnectionError as exc:  # APITimeoutError included
            raise UserError(
                f"cannot reach the OpenAI-compatible server at {replica.url}: "
                f"{self._reason(exc)}"
            ) from exc
        except openai.APIStatusError as exc:
            if exc.status_code in (401, 403):
                raise self._key_refused(exc.status_code, replica) from None
        except (openai.OpenAIError, ValueError):
            pass  # an HTTP answer that is not a model list: the server is there
        finally:
            client.close()

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
        """Cancel the calls still running (an abandoned ``generate``), close our clients."""
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for replica in self.replicas:
            if replica.client is not None and replica.owns_client:
                await replica.client.close()
                replica.client = None

    def _client_for(self, replica: _Replica) -> Any:
        """The replica's client: the injected one, or an ``AsyncOpenAI`` made on the loop
        thread (no retries of its own: they are ours)."""
        if replica.client is None:
            from openai import AsyncOpenAI

            replica.client = AsyncOpenAI(
                api_key=self._api_key,
                base_url=replica.url,
                timeout=self.timeout,
                max_retries=0,
                default_headers=replica.headers,
            default_query=replica.query or None,
            )
        return replica.client

    async def _acquire(self, avoid: _Replica | None) -> _Replica:
        """A replica with room for one more call, counted in flight: see :meth:`_choose`;
        when none has room, wait for a call to end (or a replica's cooldown to pass)."""
        assert self._room is not None
        loop = asyncio.get_running_loop()
        async with self._room:
            while True:
                now = loop.time()
                replica = self._choose(avoid, now)
                if replica is not None:
                    replica.in_flight += 1
                    replica.sent += 1
                    return replica
                cooling = [r.avoid_until - now for r in self.replicas if r.avoid_until > now]
                try:
                    await asyncio.wait_for(self._room.wait(), min(cooling) if cooling else None)
                except TimeoutError:
                    pass

    def _choose(self, avoid: _Replica | None, now: float) -> _Replica | None:
        """The replica for the next attempt, or None to wait: among the replicas that are
        neither cooling down after a failure nor ``avoid`` (the one this call's last
        attempt failed on) — or among all, when every one is — the one with the fewest
        calls in flight (then the fewest sent), if it has room (fewer than
        ``max_concurrency`` in flight)."""
        good = [r for r in self.replicas if r.avoid_until <= now and r is not avoid]
        room = [r for r in good or self.replicas if r.in_flight < self.max_concurrency]
        return min(room, key=lambda r: (r.in_flight, r.sent)) if room else None

    async def _release(self, replica: _Replica) -> None:
        """A call on ``replica`` ended: one fewer in flight, and waiting calls look again."""
        assert self._room is not None
        async with self._room:
            replica.in_flight -= 1
            self._room.notify_all()

    async def _run_all(
        self,
        requests: list[GenerationRequest],
        calls: list[_Call],
        results: queue.Queue[tuple[_Call | None, _Outcome]],
    ) -> None:
        """Run ``calls``, at most ``max_concurrency`` per replica at a time, posting each
        outcome."""
        if self._room is None:
            self._room = asyncio.Condition()

        async def one(call: _Call) -> None:
            try:
                outcome: _Outcome = await self._call_with_retries(
                    requests[call.request_index], call
                )
            except Exception as exc:  # handed to the consumer (yielded or raised)
                outcome = exc
            results.put((call, outcome))

        await asyncio.gather(*(one(call) for call in calls))

    async def _call_with_retries(
        self, request: GenerationRequest, call: _Call
    ) -> list[Generation]:
        """One call, retried as the module docstring says; :class:`OpenAIGenerationError`
        when it gives up. A replica's room is held per attempt, not while waiting."""
        attempt = 0
        failed_on: _Replica | None = None
        while True:
            outcome, replica = await self._attempt(request, call, failed_on)
            if not isinstance(outcome, _Retry | _Fail):
                return outcome
            failed_on = replica
            where = f"{self.identity} at {replica.url or 'api.openai.com'}"
            if isinstance(outcome, _Fail) or attempt >= self.max_retries:
                tries = f"{attempt + 1} attempt{'s' if attempt else ''}"
                raise OpenAIGenerationError(
                    f"request {call.request_index} (samples {call.offset}.."
                    f"{call.offset + call.n - 1}) to {where} failed after {tries}: "
                    f"{outcome.reason}",
                    call.request_index,
                )
            delay = (
                outcome.retry_after
                if outcome.retry_after is not None
                else backoff_seconds(attempt, self.retry_backoff, self._rng)
            )
            logger.debug(
                "retrying request %d (samples %d..%d) to %s in %.2f s: %s",
                call.request_index, call.offset, call.offset + call.n - 1, where, delay,
                outcome.reason,
            )
            with self._lock:
                self.retries += 1
            attempt += 1
            await asyncio.sleep(delay)

    async def _attempt(
        self, request: GenerationRequest, call: _Call, failed_on: _Replica | None
    ) -> tuple[list[Generation] | _Retry | _Fail, _Replica]:
        """One attempt of a call on the replica :meth:`_acquire` gives, within the rate
        limits: the generations, or what to do about the failure."""
        estimate = estimate_tokens(request, call.n)
        await self.limits.wait(estimate)
        replica = await self._acquire(failed_on)
        verdict: _Retry | _Fail | None = None
        try:
            generations = await self._call(self._client_for(replica), request, call)
        except _MalformedReply as exc:
            verdict = _Retry(f"malformed reply: {exc}")
        except Exception as exc:
            verdict = self._classify(exc, replica)  # raises what no retry concerns
        finally:
            if isinstance(verdict, _Retry):  # cool down before a waiting call may pick it
                replica.avoid_until = asyncio.get_running_loop().time() + REPLICA_COOLDOWN_S
            await self._release(replica)
        if verdict is not None:
            return verdict, replica
        replica.avoid_until = 0.0
        replica.answered = True
        self.limits.settle(estimate, _tokens_used(generations))
        return generations, replica

    def _probe_send(self, body: dict[str, Any]) -> Any:
        """One probe request to the first replica: the reply as the client gives it, once
        it is a chat completion whose choices all have a text (their number is the probe's
        business). Tried ``min(max_retries, 3) + 1`` times at most; raises
        :class:`~credo.models.openai_probe.ProbeRefused` for a 4xx no retry mends,
        :class:`OpenAIGenerationError` when the tries run out,
        :class:`~credo.errors.UserError` on 401/403."""
        attempts = min(self.max_retries, 3) + 1
        timeout = min(self.timeout, 60.0)
        loop = self._ensure_loop()
        future = asyncio.run_coroutine_threadsafe(self._send_once(body, timeout, attempts), loop)
        return future.result(timeout=attempts * (timeout + MAX_RETRY_DELAY_S) + 5)

    async def _send_once(self, kwargs: dict[str, Any], timeout: float, attempts: int) -> Any:
        """:meth:`_probe_send` on the loop thread."""
        replica = self.replicas[0]
        client = self._client_for(replica)
        for attempt in range(attempts):
            try:
                reply = await asyncio.wait_for(
                    client.chat.completions.create(**kwargs), timeout=timeout
                )
                _checked_choices(reply, len(_get(reply, "choices") or ()) or 1)
                return reply
            except _MalformedReply as exc:
                verdict: _Retry | _Fail = _Retry(f"malformed reply: {exc}")
            except TimeoutError:
                verdict = _Retry(f"no answer within {timeout} s")
            except Exception as exc:
                verdict = self._classify(exc, replica)
            if isinstance(verdict, _Fail):
                raise ProbeRefused(verdict.reason)
            if attempt + 1 < attempts:
                wait = verdict.retry_after
                await asyncio.sleep(
                    wait if wait is not None else backoff_seconds(attempt, self.retry_backoff,
                                                                  self._rng)
                )
        raise OpenAIGenerationError(
            f"{self.identity} at {replica.url or 'api.openai.com'} failed after {attempts} "
            f"attempts: {verdict.reason}"
        )

    def _classify(self, exc: Exception, replica: _Replica) -> _Retry | _Fail:
        """What to do about a failed call; raises ``exc`` itself when it is none of the
        client's (a bug, an injected client's own error) and UserError on 401/403."""
        import openai

        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            if status in (401, 403):
                raise self._key_refused(status, replica) from None
            if status == 404 and not replica.answered:
                raise self._not_found(exc, replica) from None
            reason = redact_text(f"HTTP {status}: {exc.message}")
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

    def _not_found(self, exc: Exception, replica: _Replica) -> UserError:
        """The error of a 404 before any call of ``replica`` succeeded (issue 21): no
        rerun can mend a wrong URL or model name, so it is the user's, not a failed
        request to retry later."""
        return UserError(
            f"the OpenAI-compatible server at {replica.url or 'api.openai.com'} answered "
            f"HTTP 404 to the first chat request for model {self.model!r}: check base_url "
            f"(it usually ends in /v1) and the model name ({redact_text(str(exc))[:200]})"
        )

    def _key_refused(self, status: int, replica: _Replica) -> UserError:
        """The error of a 401/403: the key is missing or wrong."""
        sent = (
            f"${self.api_key_env} is not set"
            if self._api_key in (None, "EMPTY") and not replica.headers
            else f"the key from ${self.api_key_env} was refused"
        )
        return UserError(
            f"the OpenAI-compatible server at {replica.url or 'api.openai.com'} answered "
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


def _check_numbers(max_concurrency: int, max_retries: int, retry_backoff: float) -> None:
    """Refuse option values that make no sense (a ValueError names the option)."""
    if max_concurrency < 1:
        raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
    if max_retries < 0 or retry_backoff < 0:
        raise ValueError(
            f"max_retries and retry_backoff must be >= 0, got {max_retries}, {retry_backoff}"
        )


def _checked_label(label: str | None) -> str | None:
    """The identity's label: a non-empty string without whitespace, or None."""
    if label is None:
        return None
    text = str(label)
    if not text or any(c.isspace() for c in text):
        raise ValueError(f"label must be a non-empty word without spaces, got {label!r}")
    return text


def _replica(url: str | None) -> _Replica:
    """A replica of ``url``, its userinfo moved into an ``Authorization`` header and its
    credential query parameters (``?api_key=…``) into the client's default query
    (issue 21): the replica's ``url`` holds neither."""
    if url is None:
        return _Replica(None, {})
    plain, user, password = split_credentials(url)
    plain, query = split_query_secrets(plain)
    headers = {"Authorization": basic_authorization(user, password)} if user else {}
    return _Replica(plain, headers, query)


def _grammar_field(grammar: str | bool | None) -> str | None:
    """The body field of the ``grammar`` option: True = llama.cpp's ``grammar``."""
    if grammar is None or grammar is False:
        return None
    if grammar is True:
        return GRAMMAR_FIELDS[0]
    if grammar not in GRAMMAR_FIELDS:
        raise ValueError(f"grammar must be true, false or one of {GRAMMAR_FIELDS}, got {grammar!r}")
    return str(grammar)


def _blocks(n: int, most: int | None) -> list[tuple[int, int]]:
    """``(offset, size)`` blocks of consecutive samples, each at most ``most`` (None: one)."""
    step = n if most is None else most
    return [(offset, min(step, n - offset)) for offset in range(0, n, step)]


def _tokens_used(generations: list[Generation]) -> int | None:
    """The tokens a call cost as the server reported them (``None``: no usage)."""
    if not generations or generations[0].prompt_tokens <= 0:
        return None
    return generations[0].prompt_tokens + sum(g.completion_tokens for g in generations)


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

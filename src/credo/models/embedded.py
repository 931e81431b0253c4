"""The embedded backend: llama.cpp's server, in-process, through ``xllamacpp``.

``xllamacpp.Server(CommonParams)`` runs llama.cpp's HTTP-less server inside this
process; ``handle_chat_completions(dict)`` takes an OpenAI-style request and returns the
response as a dict. Facts this module relies on (measured with xllamacpp 2026.10.11549):

* ``n`` in one request runs ``n`` parallel children that share the prompt evaluation;
  child ``j`` is seeded ``seed + j`` (n=1 seed=5,6,7 equals n=3 seed=5 sample by
  sample), which is exactly the seed contract of :mod:`credo.models.base`. The server
  refuses ``n > n_parallel`` (``invalid_request_error``), so larger requests are split
  into chunks of consecutive seeds: chunk ``k`` is sent with ``seed + offset_k``.
* ``handle_*`` calls from several Python threads run concurrently; requests beyond the
  free slots wait in the server's queue (results stay identical).
* ``n_ctx`` is shared by the slots: each slot holds ``n_ctx // n_parallel`` tokens. A
  prompt longer than that is answered with an error dict (``exceed_context_size_error``);
  a prompt that fits but leaves fewer than ``max_tokens`` is *silently* cut at the slot's
  end with ``finish_reason="length"``, so that case is detected and raised here.
* ``usage`` of an ``n > 1`` response counts choice 0 only, so other choices' token
  counts are known only when they ran to ``max_tokens`` or when logprobs were returned
  (see ``exact_token_counts``).
* ``"logprobs": true, "top_logprobs": k`` gives each generated token's natural-log
  probability under the model's full distribution and its ``k`` best alternatives
  (sorted); the server accepts ``k`` up to at least 50, the protocol caps it at 20.
* ``CommonParams.verbosity`` is the threshold of llama.cpp's logger, which the server
  applies to the whole process (``common_log_set_verbosity_thold``); ``-1`` silences it
  completely (``0`` too; ``1`` prints errors; the default ``3`` prints ~40 lines per
  start). ``$CREDO_LLAMA_VERBOSITY`` overrides it for debugging.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, InvalidStateError, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from credo.models.base import ClosesOnExit
from credo.models.deadline import DeadlineExceeded, waking_on_cancel
from credo.models.weights import (
    EMBEDDED_MODELS,
    RunsWeights,
    WeightsError,
    is_local_gguf,
    resolve_weights,
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

DEFAULT_MODEL = "qwen2.5-coder-1.5b"
DEFAULT_N_PARALLEL = 16
DEFAULT_SLOT_CTX = 1280
"""Tokens per slot by default: a ~600-token prompt plus 512 generated tokens, with room."""
DEFAULT_N_CTX = DEFAULT_N_PARALLEL * DEFAULT_SLOT_CTX
MIN_SLOT_CTX = 64
MAX_TOP_LOGPROBS = 20
QUIET_VERBOSITY = -1
VERBOSITY_ENV = "CREDO_LLAMA_VERBOSITY"


class EmbeddedGenerationError(GenerationError):
    """The embedded server refused or could not complete one request."""


_Chunk = SampleBlock


def _wake(woken: Future[None]) -> None:
    """Resolve ``woken`` (once): a cancelled deadline ends the wait of :meth:`generate`."""
    if not woken.done():
        try:
            woken.set_result(None)
        except InvalidStateError:  # resolved by another waker meanwhile
            pass


def split_samples(n: int, max_per_call: int) -> list[tuple[int, int]]:
    """``(offset, size)`` blocks of consecutive sample indices, each at most ``max_per_call``.

    Block ``k`` is sent with seed ``seed + offset``, so sample ``j`` still gets ``seed + j``.
    """
    if max_per_call < 1:
        raise ValueError(f"max_per_call must be >= 1, got {max_per_call}")
    return [(offset, min(max_per_call, n - offset)) for offset in range(0, n, max_per_call)]


def chat_body(request: GenerationRequest, offset: int = 0, n: int | None = None) -> dict[str, Any]:
    """The ``handle_chat_completions`` body for samples ``offset .. offset + n - 1``.

    Every truncation sampler is sent explicitly (``top_k=0`` disables top-k in llama.cpp),
    so the server's own defaults (top_k=40, top_p=0.95, min_p=0.05) never apply.
    """
    params = request.params
    body: dict[str, Any] = {
        "messages": [{"role": m.role, "content": m.content} for m in request.messages],
        "n": request.n - offset if n is None else n,
        "seed": request.seed + offset,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "top_k": params.top_k,
        "min_p": params.min_p,
        "max_tokens": params.max_tokens,
    }
    if params.stop:
        body["stop"] = list(params.stop)
    if params.top_logprobs > 0:
        body["logprobs"] = True
        body["top_logprobs"] = params.top_logprobs
    if params.grammar:
        body["grammar"] = params.grammar
    return body


def _token_text(entry: dict[str, Any]) -> str:
    """A token's text; a partial UTF-8 token (empty ``token``) shows its bytes escaped.

    llama.cpp reports a token that is only part of a UTF-8 character as ``""`` with its
    ``bytes``; escaping keeps such alternatives distinct (``"\\xf0\\x9f"``).
    """
    token = entry.get("token") or ""
    raw = entry.get("bytes")
    if not token and raw:
        return bytes(raw).decode("utf-8", errors="backslashreplace")
    return token


def _logprob(value: Any) -> float:
    """A logprob from JSON (``None`` stands for an impossible token)."""
    return float("-inf") if value is None else float(value)


def parse_logprobs(content: list[dict[str, Any]]) -> tuple[TokenLogprob, ...]:
    """OpenAI-style ``logprobs.content`` → :class:`TokenLogprob` tuple, alternatives sorted."""
    tokens = []
    for entry in content:
        top = sorted(
            (
                (_token_text(alt), _logprob(alt.get("logprob")))
                for alt in entry.get("top_logprobs") or ()
            ),
            key=lambda pair: -pair[1],
        )
        tokens.append(TokenLogprob(_token_text(entry), _logprob(entry.get("logprob")), tuple(top)))
    return tuple(tokens)


def parse_chat_response(
    response: dict[str, Any],
    *,
    n: int,
    params: SamplingParams,
    seconds: float,
    slot_ctx: int | None = None,
    where: str = "request",
) -> list[Generation]:
    """Turn one ``handle_chat_completions`` response into ``n`` :class:`Generation` objects.

    Raises :class:`EmbeddedGenerationError` for an error dict, a wrong number of choices,
    or (given ``slot_ctx``) a generation the slot's context cut short. ``seconds`` is the
    wall time of the call, shared by its samples (they were generated together).
    """
    if "error" in response:
        error = response["error"]
        if isinstance(error, dict):
            kind = error.get("type", "error")
            message = error.get("message", error)
        else:
            kind, message = "error", error
        raise EmbeddedGenerationError(f"{where}: the llama.cpp server answered {kind}: {message}")
    choices = sorted(response.get("choices") or (), key=lambda c: c.get("index", 0))
    if len(choices) != n:
        raise EmbeddedGenerationError(
            f"{where}: asked for {n} samples, the llama.cpp server returned {len(choices)}"
        )
    usage = response.get("usage") or {}
    prompt_tokens = int(usage.get("prompt_tokens") or 0)
    if slot_ctx is not None and prompt_tokens + params.max_tokens > slot_ctx:
        if any(choice.get("finish_reason") == "length" for choice in choices):
            raise EmbeddedGenerationError(
                f"{where}: prompt ({prompt_tokens} tokens) + max_tokens ({params.max_tokens}) "
                f"exceeds the per-slot context of {slot_ctx} tokens (n_ctx / n_parallel), so "
                "a sample was cut short; raise n_ctx or lower n_parallel"
            )
    generations = []
    for index, choice in enumerate(choices):
        message = choice.get("message") or {}
        text = message.get("content") if "message" in choice else choice.get("text")
        finish = choice.get("finish_reason") or "stop"
        content = (choice.get("logprobs") or {}).get("content")
        logprobs = parse_logprobs(content) if content is not None else None
        if logprobs is not None:
            completion_tokens = len(logprobs)
        elif index == 0:
            completion_tokens = int(usage.get("completion_tokens") or 0)
        elif finish == "length":
            completion_tokens = params.max_tokens
        else:
            completion_tokens = 0  # not reported by llama.cpp for choices > 0
        generations.append(
            Generation(
                text=text or "",
                finish_reason=finish,
                completion_tokens=completion_tokens,
                prompt_tokens=prompt_tokens,
                logprobs=logprobs if params.top_logprobs > 0 else None,
                seconds=seconds,
            )
        )
    return generations


def _default_verbosity() -> int:
    """llama.cpp's log threshold: ``$CREDO_LLAMA_VERBOSITY`` if set, else silent (-1)."""
    raw = os.environ.get(VERBOSITY_ENV)
    if raw is None or raw.strip() == "":
        return QUIET_VERBOSITY
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"${VERBOSITY_ENV} must be an integer, got {raw!r}") from None


class EmbeddedModel(RunsWeights, ClosesOnExit):
    """A GGUF model served in-process by llama.cpp (``xllamacpp``).

    Construction is cheap: the weights are assembled/verified and the server started on
    the first :meth:`generate`. ``n_ctx`` is split evenly over ``n_parallel`` slots; the
    default (16 slots × 1280 tokens) fits a ~600-token prompt plus 512 new tokens per
    sample. A request of ``n`` samples occupies ``n`` slots; at most ``max_concurrency``
    calls are in flight and their samples never exceed ``n_parallel``.

    With ``exact_token_counts`` every multi-sample call also asks for logprobs so each
    choice's ``completion_tokens`` is exact (llama.cpp reports usage for choice 0 only);
    this costs about 10-80% more time on CPU (a full-vocabulary sort per token), so by
    default choices after the first that stop before ``max_tokens`` report 0.
    """

    identity_prefix = "llamacpp"

    def __init__(
        self,
        name_or_path: str = DEFAULT_MODEL,
        n_ctx: int = DEFAULT_N_CTX,
        n_parallel: int = DEFAULT_N_PARALLEL,
        n_threads: int | None = None,
        max_concurrency: int = 4,
        *,
        exact_token_counts: bool = False,
        verbosity: int | None = None,
    ) -> None:
        if n_parallel < 1:
            raise ValueError(f"n_parallel must be >= 1, got {n_parallel}")
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        if n_ctx // n_parallel < MIN_SLOT_CTX:
            raise ValueError(
                f"n_ctx={n_ctx} gives each of the n_parallel={n_parallel} slots only "
                f"{n_ctx // n_parallel} tokens (llama.cpp splits n_ctx evenly over the slots); "
                f"need at least {MIN_SLOT_CTX}, and ~1152 for a 600-token prompt plus "
                "512 generated tokens"
            )
        if is_local_gguf(name_or_path):
            if not Path(name_or_path).expanduser().is_file():
                raise WeightsError(f"GGUF file {str(name_or_path)!r} does not exist")
        elif str(name_or_path) not in EMBEDDED_MODELS:
            known = ", ".join(sorted(EMBEDDED_MODELS))
            raise ValueError(
                f"unknown embedded model {name_or_path!r}; known: {known}, or a path to a .gguf"
            )
        threads = n_threads if n_threads is not None else (os.cpu_count() or 1)
        if threads < 1:
            raise ValueError(f"n_threads must be >= 1, got {threads}")
        self.name_or_path = str(name_or_path)
        self.n_ctx = n_ctx
        self.n_parallel = n_parallel
        self.n_threads = threads
        self.max_concurrency = max_concurrency
        self.exact_token_counts = exact_token_counts
        self.verbosity = _default_verbosity() if verbosity is None else verbosity
        self._server: Any = None
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._closed = False

    # ------------------------------------------------------------------ protocol

    @property
    def slot_ctx(self) -> int:
        """Tokens each slot holds (prompt + generation): ``n_ctx // n_parallel``."""
        return self.n_ctx // self.n_parallel

    @property
    def context_tokens(self) -> int:
        """Tokens one request may hold, prompt and generation together (a slot's): what
        the run's preflight measures every item against."""
        return self.slot_ctx

    @property
    def capabilities(self) -> Capabilities:
        """Logprobs (top ≤ 20), seeded sampling, parallel samples, GBNF grammars."""
        return Capabilities(
            logprobs=True,
            max_top_logprobs=MAX_TOP_LOGPROBS,
            seeded=True,
            parallel_samples=True,
            grammar=True,
            notes=(
                "llama.cpp in-process (xllamacpp)",
                "logprobs are natural-log probabilities under the full distribution",
            ),
        )

    def generate(
        self, requests: Sequence[GenerationRequest]
    ) -> Iterator[tuple[int, list[Generation]]]:
        """Run ``requests`` concurrently; yield ``(index, generations)`` as each completes.

        Requests are validated first (``max_tokens`` must fit a slot), then split into
        chunks of at most ``n_parallel`` consecutive samples and dispatched FIFO while
        in-flight calls stay within ``max_concurrency`` and their samples within
        ``n_parallel``. Any server error raises :class:`EmbeddedGenerationError` naming the
        request; calls still running are left to finish in the background. Under a
        deadline (:mod:`credo.models.deadline`) it waits until then at most, then raises
        :class:`~credo.models.deadline.DeadlineExceeded` (chunks not dispatched yet are
        not sent; running ones finish in the background).
        """
        requests = list(requests)
        for index, request in enumerate(requests):
            if request.params.max_tokens >= self.slot_ctx:
                raise ValueError(
                    f"request {index}: max_tokens={request.params.max_tokens} does not fit the "
                    f"per-slot context of {self.slot_ctx} tokens (n_ctx={self.n_ctx} / "
                    f"n_parallel={self.n_parallel}); raise n_ctx or lower n_parallel"
                )
        if not requests:
            return
        server = self._ensure_server()
        executor = self._ensure_executor()
        pending = deque(
            _Chunk(index, offset, size)
            for index, request in enumerate(requests)
            for offset, size in split_samples(request.n, self.n_parallel)
        )
        remaining = {
            index: len(split_samples(r.n, self.n_parallel)) for index, r in enumerate(requests)
        }
        partial: dict[int, dict[int, list[Generation]]] = {}
        in_flight: dict[Future[list[Generation]], _Chunk] = {}
        busy_slots = 0
        woken: Future[None] = Future()
        try:
            with waking_on_cancel(lambda: _wake(woken)) as deadline:
                while pending or in_flight:
                    while (
                        pending
                        and len(in_flight) < self.max_concurrency
                        and busy_slots + pending[0].n <= self.n_parallel
                    ):
                        chunk = pending.popleft()
                        future = executor.submit(
                            self._call, server, requests[chunk.request_index], chunk
                        )
                        in_flight[future] = chunk
                        busy_slots += chunk.n
                    done, _ = wait([*in_flight, woken], return_when=FIRST_COMPLETED,
                                   timeout=None if deadline is None else deadline.remaining())
                    if woken in done or not done:
                        assert deadline is not None
                        raise DeadlineExceeded(deadline.reason)
                    for future in done:
                        chunk = in_flight.pop(future)
                        busy_slots -= chunk.n
                        generations = future.result()
                        blocks = partial.setdefault(chunk.request_index, {})
                        blocks[chunk.offset] = generations
                        remaining[chunk.request_index] -= 1
                        if remaining[chunk.request_index] == 0:
                            del partial[chunk.request_index]
                            merged = [g for offset in sorted(blocks) for g in blocks[offset]]
                            yield chunk.request_index, merged
        finally:
            for future in in_flight:
                future.cancel()

    def close(self) -> None:
        """Wait for running calls, then shut the server down (idempotent)."""
        with self._lock:
            executor, self._executor = self._executor, None
            server, self._server = self._server, None
            self._closed = True
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
        if server is not None:
            del server  # xllamacpp stops the server when the object is deallocated
            logger.info("stopped llama.cpp server for %s", self.name_or_path)

    def __repr__(self) -> str:
        return (
            f"EmbeddedModel({self.name_or_path!r}, n_ctx={self.n_ctx}, "
            f"n_parallel={self.n_parallel}, n_threads={self.n_threads}, "
            f"max_concurrency={self.max_concurrency})"
        )

    # ------------------------------------------------------------------ internals

    def _ensure_server(self) -> Any:
        """Resolve the weights and start the server on first use."""
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self!r} is closed")
            if self._server is None:
                self._server = start_server(server_params(
                    resolve_weights(self.name_or_path),
                    n_ctx=self.n_ctx,
                    n_parallel=self.n_parallel,
                    n_threads=self.n_threads,
                    verbosity=self.verbosity,
                ))
            return self._server

    def _ensure_executor(self) -> ThreadPoolExecutor:
        """The thread pool that carries the blocking ``handle_*`` calls."""
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    max_workers=self.max_concurrency, thread_name_prefix="credo-llamacpp"
                )
            return self._executor

    def _call(self, server: Any, request: GenerationRequest, chunk: _Chunk) -> list[Generation]:
        """One blocking server call for one chunk of one request."""
        body = chat_body(request, chunk.offset, chunk.n)
        if self.exact_token_counts and chunk.n > 1 and "logprobs" not in body:
            body["logprobs"] = True
            body["top_logprobs"] = 1
        where = (
            f"request {chunk.request_index} (samples {chunk.offset}..{chunk.offset + chunk.n - 1}, "
            f"seed {request.seed + chunk.offset})"
        )
        start = time.perf_counter()
        response = server.handle_chat_completions(body)
        seconds = time.perf_counter() - start
        if not isinstance(response, dict):
            raise EmbeddedGenerationError(
                f"{where}: unexpected response type {type(response).__name__}",
                chunk.request_index,
            )
        try:
            return parse_chat_response(
                response,
                n=chunk.n,
                params=request.params,
                seconds=seconds,
                slot_ctx=self.slot_ctx,
                where=where,
            )
        except EmbeddedGenerationError as exc:
            exc.request_index = chunk.request_index
            raise


def server_params(
    model_path: str | os.PathLike[str],
    *,
    n_ctx: int,
    n_parallel: int,
    n_threads: int,
    verbosity: int = QUIET_VERBOSITY,
) -> Any:
    """``xllamacpp.CommonParams`` for serving ``model_path`` on ``n_parallel`` slots."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(model_path)
    params.n_ctx = n_ctx
    params.n_parallel = n_parallel
    params.cpuparams.n_threads = n_threads
    params.cpuparams_batch.n_threads = n_threads
    params.verbosity = verbosity
    return params


def start_server(params: Any) -> Any:
    """Start an in-process llama.cpp server (``xllamacpp.Server``) on the parameters
    :func:`server_params` built (the model path, context, slots and threads are read
    back from them for the error and the log line)."""
    import xllamacpp

    model_path, n_ctx, n_parallel = params.model.path, params.n_ctx, params.n_parallel
    start = time.perf_counter()
    try:
        server = xllamacpp.Server(params)
    except RuntimeError as exc:
        raise EmbeddedGenerationError(
            f"llama.cpp could not load {model_path} (n_ctx={n_ctx}, n_parallel={n_parallel}): "
            f"{exc}; set ${VERBOSITY_ENV}=3 to see its log"
        ) from exc
    logger.info(
        "started llama.cpp server for %s in %.1f s (%d slots × %d tokens, %d threads)",
        model_path,
        time.perf_counter() - start,
        n_parallel,
        n_ctx // n_parallel,
        params.cpuparams.n_threads,
    )
    return server


def load_embedded(name_or_path: str = DEFAULT_MODEL, **options: Any) -> EmbeddedModel:
    """An :class:`EmbeddedModel`; the weights load lazily on the first ``generate``."""
    return EmbeddedModel(name_or_path, **options)


__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_N_CTX",
    "DEFAULT_N_PARALLEL",
    "MAX_TOP_LOGPROBS",
    "EmbeddedGenerationError",
    "EmbeddedModel",
    "chat_body",
    "load_embedded",
    "parse_chat_response",
    "parse_logprobs",
    "server_params",
    "split_samples",
    "start_server",
]

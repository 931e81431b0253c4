"""``credo.Guard``: answer one question at a time with its credibility and a certified
accept flag; the HTTP gateway (:mod:`credo.serve.app`) is a thin layer over it.

::

    guard = credo.Guard("runs/calib/certificate.json")
    result = guard.ask("Sam has 3 apples and gets 15 more. How many?")
    result.answer, result.score, result.accept

A Guard reads the certificate, builds the config it samples with
(:func:`credo.pipeline.gateway.gateway_config`: the certificate's recipe, or the run
config given, with the overrides over it) and, before it answers anything, refuses a
certificate whose settings differ from its own (the model's identity, the task's answer
format and prompt template, n, m, sampling, writer, kernel, method and the procedure:
:func:`~credo.pipeline.gateway.gateway_settings`, one :class:`~credo.errors.UserError`
line) or whose threshold lies outside its method's scores, and checks that every model
is there (served ones answer).

Scheduling. Each question is decided in a thread of its own
(:func:`~credo.pipeline.gateway.decide_question`), at most ``max_concurrent`` at once:
it starts sampling when it arrives (or when a thread is free), its rounds go to the
model through the pool's one executor per model, interleaved with every other
question's (one upstream concurrency budget: the backend's), and it is answered the
moment its decision settles, whatever the others are doing. Identical questions asked
together share their samples (the executor generates a sample once and the other
waits for it). Beyond ``max_concurrent + max_queue`` questions pending,
:meth:`Guard.submit` raises :class:`Busy` (HTTP 429) unless told to wait.

Isolation. A question that cannot be asked (empty, text that is not valid Unicode, too
long, too long for the model's context) fails alone with :class:`BadQuestion`; a
question whose requests failed upstream fails alone with :class:`UpstreamFailed`, whose
``kind`` and message say what failed (``http_500`` after the retries, ``timeout``,
``circuit_open``, ...); a question not decided within its ``timeout`` fails with
:class:`TimedOut` and its model calls still running are cancelled (what was drawn is
cached: asking again resumes). Every question submitted ends in exactly one line of the
decision log (``answered``, ``rejected`` or ``failed`` with its ``cause``) and one
report to the observer (:class:`GuardObserver`: the gateway's metrics), whatever happens.

Shutdown. :meth:`Guard.drain` stops taking questions, lets those in flight finish until
its deadline, then ends the rest with :class:`Closed` (HTTP 503, logged); :meth:`close`
drains (without a deadline unless given one) and closes the pool and the log.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import threading
import time
import uuid
import warnings
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from credo.config import renamed_keyword
from credo.errors import UserError
from credo.generation.executor import ExecutionStats
from credo.models.deadline import Deadline, DeadlineExceeded, deadline_scope
from credo.pipeline.certificate import RunCertificate, read_run_certificate
from credo.pipeline.gateway import (
    Decision,
    Question,
    Upstream,
    check_servable,
    decide_question,
    gateway_config,
    gateway_settings,
    gateway_task,
)
from credo.serve.limits import DEFAULT_MAX_QUESTION_CHARS
from credo.serve.log import DecisionLog

if TYPE_CHECKING:
    from credo.config import RunConfig
    from credo.generation.pool import ModelPool
    from credo.models.base import Model
    from credo.models.embedders import Embedder

__all__ = [
    "DEFAULT_ABSTENTION",
    "DEFAULT_MAX_QUESTION_CHARS",
    "BadQuestion",
    "Busy",
    "Closed",
    "Guard",
    "GuardAnswer",
    "GuardError",
    "GuardObserver",
    "Observers",
    "Settled",
    "TimedOut",
    "UpstreamFailed",
    "certificate_id",
]

log = logging.getLogger(__name__)

DEFAULT_ABSTENTION = "I cannot answer this reliably enough."
"""What ``on_reject="abstain"`` says instead of an answer the certificate does not accept."""

STOP_GRACE_S = 3.0
"""How long :meth:`Guard.close` waits, after the drain, for question threads that a
cancelled deadline has woken to leave the pool before closing it."""

OnReject = Literal["flag", "abstain"]


class GuardError(Exception):
    """A question the Guard could not answer (one line); ``cause`` names why in one word
    (the decision log's and the metrics' cause)."""

    cause = "error"


class Busy(GuardError):
    """More questions are pending than the Guard takes; ``retry_after`` seconds is about
    how long a question takes now."""

    cause = "busy"

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Closed(GuardError):
    """The Guard is shutting down and takes no new question, or shut down before this
    one was decided; ``retry_after`` seconds is when to ask again (another instance)."""

    cause = "shutting_down"

    def __init__(self, message: str, retry_after: int = 1) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class BadQuestion(GuardError):
    """The question cannot be asked under the recipe (empty, not valid Unicode, too long,
    or too long for the model)."""

    cause = "bad_question"


class TimedOut(GuardError):
    """No decision within the question's time limit; what was drawn is cached."""

    cause = "timeout"


class UpstreamFailed(GuardError):
    """The model behind the Guard failed the question's requests (after its retries);
    ``kind`` is the backend's word for what failed (``http_500``, ``timeout``,
    ``connection``, ``malformed_reply``, ``circuit_open``, ``rejected``)."""

    cause = "upstream"

    def __init__(self, message: str, kind: str = "failed") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True, kw_only=True)
class GuardAnswer:
    """One question answered: its :class:`~credo.pipeline.gateway.Decision`, ``reply``
    (what to say: the answer's text, or the abstention under ``on_reject="abstain"``
    when not accepted), the certificate's method, threshold, α, δ, procedure and id,
    ``seconds`` from submission to answer, of which ``queued`` waiting for a free
    thread, and ``id`` the request's. The decision's fields read through:
    ``answer`` (normalised; None when no sample had one), ``text`` (the full sample it
    came from), ``score`` (the certificate method's), ``accept``, ``samples`` drawn
    (``full_samples`` the full recipe's) and ``upstream`` (what drawing them cost)."""

    id: str
    decision: Decision
    reply: str
    method: str
    threshold: float | None
    alpha: float
    delta: float | None
    procedure: str
    certificate: str
    seconds: float
    queued: float = 0.0

    question = property(lambda self: self.decision.question)
    answer = property(lambda self: self.decision.answer)
    text = property(lambda self: self.decision.text)
    score = property(lambda self: self.decision.score)
    accept = property(lambda self: self.decision.accept)
    samples = property(lambda self: self.decision.samples)
    full_samples = property(lambda self: self.decision.full_samples)
    upstream = property(lambda self: self.decision.upstream)

    def to_json(self) -> dict[str, Any]:
        """The ``credo`` object of a chat completion (and a decision log line's core):
        answer, score, accept, the certificate's terms, samples drawn, timing, and
        ``usage``: the upstream calls and tokens this question's samples cost and how
        many of its samples came from the cache (they cost nothing)."""
        d = self.decision
        return {
            "answer": d.answer, "score": d.score, "accept": d.accept, "method": self.method,
            "threshold": self.threshold, "alpha": self.alpha, "delta": self.delta,
            "procedure": self.procedure, "samples": d.samples,
            "full_samples": d.full_samples, "certificate": self.certificate,
            "seconds": self.seconds, "queued": self.queued,
            "usage": usage_json(d.upstream),
        }


def usage_json(upstream: Upstream) -> dict[str, int]:
    """An :class:`~credo.pipeline.gateway.Upstream` as the ``credo.usage`` object."""
    return {"calls": upstream.calls, "prompt_tokens": upstream.prompt_tokens,
            "completion_tokens": upstream.completion_tokens,
            "generated_samples": upstream.generated, "cached_samples": upstream.cached,
            "retries": upstream.retries}


@dataclass(frozen=True, kw_only=True)
class Settled:
    """How one question ended, as the log and the observer see it: ``status``
    (``answered``: accepted; ``rejected``: decided, not accepted; ``failed``: no
    decision), ``cause`` (None, or why it failed: ``bad_question``, ``upstream``,
    ``timeout``, ``shutting_down``, ``busy``, ``error``, or the HTTP layer's own:
    ``bad_request``, ``too_large``, ...), the upstream failure's ``kind``, ``seconds``
    from submission, ``queued`` of them, ``samples`` drawn and the ``upstream`` usage."""

    status: str
    cause: str | None
    seconds: float
    queued: float = 0.0
    samples: int = 0
    upstream: Upstream = field(default_factory=Upstream)
    kind: str | None = None


class GuardObserver(Protocol):
    """What watches a Guard (the gateway's metrics and traces): told, by request id, when
    a question starts sampling (after ``queued`` seconds), of each executor call its
    sampling made (a round: what it asked, cached and generated, from ``start`` to
    ``end``, epoch seconds), and how it ended, once for every question submitted."""

    def started(self, request_id: str, queued: float) -> None:
        """A question left the queue and started sampling."""

    def round(self, request_id: str, description: str, stats: ExecutionStats,
              start: float, end: float) -> None:
        """One executor call of the question's sampling ended."""

    def settled(self, request_id: str, outcome: Settled) -> None:
        """A question ended (every question submitted, once)."""


class Observers:
    """Several :class:`GuardObserver` as one (each told in turn)."""

    def __init__(self, observers: Sequence[GuardObserver]) -> None:
        self.observers = tuple(observers)

    def started(self, request_id: str, queued: float) -> None:
        for o in self.observers:
            o.started(request_id, queued)

    def round(self, request_id: str, description: str, stats: ExecutionStats,
              start: float, end: float) -> None:
        for o in self.observers:
            o.round(request_id, description, stats, start, end)

    def settled(self, request_id: str, outcome: Settled) -> None:
        for o in self.observers:
            o.settled(request_id, outcome)


@dataclass
class _Pending:
    id: str
    question: Question
    future: Future[GuardAnswer]
    submitted: float
    deadline: Deadline
    limit: float | None = None
    started: float | None = None
    done: bool = False


def certificate_id(cert: RunCertificate) -> str:
    """The certificate's id (:attr:`RunCertificate.id`: ``sha256:`` and 12 hex digits of
    its canonical JSON, the same on every machine)."""
    return cert.id


class Guard:
    """Answer questions under a certificate (module docstring).

    ``certificate``: a :class:`~credo.pipeline.certificate.RunCertificate` or its file.
    ``config``: a run config (object, mapping or YAML file) the gateway's settings start
    from; default: the calibration run's ``config.yaml`` when the certificate's run folder
    is there, else the certificate's recipe. ``overrides``: settings over it (nested
    mapping: ``{"n": 8, "model_options": {"base_url": ...}}``; ``adaptive``:
    ``"decision"`` or ``"off"``; ``adaptive_options``: the rule's ``round``, ``min``,
    ``confidence``). ``model``, ``writer``, ``judge``, ``embedder``: ready backends
    replacing the config's (tests hand in scripted ones). ``on_reject``: ``"flag"``
    (the answer with ``accept`` False) or ``"abstain"`` (``abstention`` instead).
    ``log``: the JSONL decision log (a path or a :class:`DecisionLog`).
    ``max_concurrent``: questions sampled at once; ``max_queue``: questions waiting
    beyond those; ``timeout``: seconds a question may take (None: no limit);
    ``max_question_chars``: the longest question taken; ``observer``: told of every
    question (:class:`GuardObserver`). ``max_batch`` is the former name of
    ``max_concurrent`` (default 64; both given is a TypeError); ``batch_window`` is
    ignored (questions are no longer batched).
    """

    def __init__(
        self,
        certificate: RunCertificate | str | Path,
        *,
        config: RunConfig | Mapping[str, Any] | str | Path | None = None,
        overrides: Mapping[str, Any] | None = None,
        model: Model | None = None,
        writer: Model | None = None,
        judge: Model | None = None,
        embedder: Embedder | None = None,
        on_reject: OnReject = "flag",
        abstention: str = DEFAULT_ABSTENTION,
        log: str | Path | DecisionLog | None = None,
        max_concurrent: int | None = None,
        max_queue: int = 256,
        timeout: float | None = None,
        max_question_chars: int = DEFAULT_MAX_QUESTION_CHARS,
        observer: GuardObserver | Sequence[GuardObserver] = (),
        show_progress: bool = False,
        max_batch: int | None = None,
        batch_window: float | None = None,
    ) -> None:
        max_concurrent = renamed_keyword(max_concurrent, max_batch, "max_batch")
        if max_concurrent is None:  # the default, 64, given by neither name
            max_concurrent = 64
        if batch_window is not None:
            warnings.warn("Guard(batch_window=...) has no effect: questions are scheduled "
                          "one by one; deprecated since credo 0.1.0, it goes in 0.2.0",
                          DeprecationWarning, stacklevel=2)
        _check_limits(on_reject, max_concurrent, max_queue, timeout, max_question_chars)
        self.cert = read_run_certificate(certificate)
        check_servable(self.cert)
        base = _base_config(self.cert, certificate, config)
        self.config = gateway_config(self.cert, base, overrides)
        self.template = gateway_task(self.cert, self.config)
        self.id = self.cert.id
        self.on_reject, self.abstention = on_reject, abstention
        self.max_concurrent, self.max_queue = max_concurrent, max_queue
        self.timeout, self.max_question_chars = timeout, max_question_chars
        self.observer = Observers([observer] if not isinstance(observer, Sequence)
                                  else observer)
        self._roles = {"model": model, "writer": writer, "judge": judge}
        self._embedder, self._show_progress = embedder, show_progress
        self._own_log = log is not None and not isinstance(log, DecisionLog)
        self.log = DecisionLog(log) if self._own_log else log  # type: ignore[arg-type]
        self._room = threading.Condition()
        self._live: dict[int, _Pending] = {}
        self._running = 0
        self._closing = False
        self._closed = False
        self._seconds = 1.0  # how long the last question took: the 429's Retry-After
        self.model_identity = ""
        self.answered = 0
        try:
            self._pool = self._open()
        except BaseException:
            if self._own_log and self.log is not None:
                self.log.close()
            raise
        self._threads = ThreadPoolExecutor(max_workers=max_concurrent,
                                           thread_name_prefix="credo-question")

    # ------------------------------------------------------------------ asking

    @property
    def procedure(self) -> str:
        """``adaptive decision`` or ``full recipe``: what is drawn per question."""
        return "adaptive decision" if self.config.adaptive is not None else "full recipe"

    @property
    def closing(self) -> bool:
        """Whether :meth:`drain` or :meth:`close` was called (no new question is taken)."""
        return self._closing

    @property
    def pending(self) -> int:
        """Questions submitted and not ended yet."""
        return len(self._live)

    @property
    def in_flight(self) -> int:
        """Questions sampling now (the others pending wait for a free thread)."""
        return self._running

    def submit(self, question: str | Question, *, choices: Sequence[str] = (),
               request_id: str | None = None, wait: bool = True,
               timeout: float | None = None) -> Future[GuardAnswer]:
        """Queue ``question`` (its ``choices`` for the choice format) and return the
        future of its :class:`GuardAnswer`. With ``wait`` False a full queue raises
        :class:`Busy` at once; with ``wait`` it waits for room. :class:`Closed` once the
        Guard is closing; :class:`BadQuestion` for a question that cannot be asked
        (:meth:`check_question`). ``timeout``: seconds this question may take (default:
        the Guard's); past it the future raises :class:`TimedOut`. Every refusal here
        is logged too (one line per question)."""
        q = question if isinstance(question, Question) else Question(str(question),
                                                                       tuple(choices))
        rid = request_id or uuid.uuid4().hex
        t0 = time.monotonic()
        limit = self.timeout if timeout is None else timeout
        p = _Pending(rid, q, Future(), t0, Deadline(limit, "timeout"), limit)
        try:
            self.check_question(q)
            self._take_room(p, wait)
        except GuardError as e:
            self.refused(rid, e.cause, str(e), question=q.text, seconds=time.monotonic() - t0)
            raise
        self._threads.submit(self._decide, p)
        return p.future

    def ask(self, question: str, *, choices: Sequence[str] = (),
            timeout: float | None = None) -> GuardAnswer:
        """Answer one question (waiting for it; ``timeout`` seconds at most: then
        :class:`TimedOut`)."""
        return self.submit(question, choices=choices, timeout=timeout).result()

    async def ask_async(self, question: str, *, choices: Sequence[str] = ()) -> GuardAnswer:
        """:meth:`ask` for an event loop."""
        future = await asyncio.to_thread(self.submit, question, choices=choices)
        return await asyncio.wrap_future(future)

    async def ask_many(self, questions: Sequence[str | Question]) -> list[GuardAnswer]:
        """Answer ``questions`` concurrently, in order (more than the Guard takes at
        once wait for room). A failed question raises its :class:`GuardError` once
        every other is answered."""
        futures = await asyncio.to_thread(lambda: [self.submit(q) for q in questions])
        done = await asyncio.gather(*(asyncio.wrap_future(f) for f in futures),
                                    return_exceptions=True)
        for item in done:
            if isinstance(item, BaseException):
                raise item
        return list(done)  # type: ignore[arg-type]

    def add_observer(self, observer: GuardObserver) -> None:
        """Tell ``observer`` of every question from now on too."""
        self.observer = Observers((*self.observer.observers, observer))

    def expire(self, future: Future[GuardAnswer]) -> None:
        """End the question of ``future`` now as :class:`TimedOut` (its caller stopped
        waiting: the HTTP layer at the request's timeout) unless it has ended; its model
        calls still running are cancelled. Logged once, as every question."""
        with self._room:
            p = next((p for p in self._live.values() if p.future is future), None)
        if p is None:
            return
        p.deadline.cancel("timeout")
        self._settle(p, TimedOut(self._timeout_message(p)))

    def guarantee(self) -> str:
        """One line: what is accepted and what the guarantee covers."""
        c = self.cert.certificate
        task = self.cert.settings["task"]
        recipe = f"n={self.config.n}"
        if self.cert.settings.get("m") and self.config.m and "c3" in self.cert.method:
            recipe += f", m={self.config.m}"
        s = self.config.sampling
        recipe += f", temperature {s.temperature:g}, max_tokens {s.max_tokens}, " \
                  f"prompt {self.config.prompt_style}"
        if self.config.adaptive is not None:
            a = self.config.adaptive
            recipe += (f"; adaptive decision rule, rounds of {a.round} from {a.min}, "
                       f"confidence {a.confidence:g}")
        if c.procedure == "crc":
            risk = f"expected share of answered-and-wrong questions <= {c.alpha:g}"
        else:
            risk = (f"error rate among accepted answers <= {c.alpha:g} with probability "
                    f">= {1 - (c.delta or 0):g}")
        return (f"certificate {self.id}: accept when {self.cert.method} >= "
                f"{c.threshold:.4g}; {risk} ({c.procedure}), for questions exchangeable with "
                f"its {c.n} calibration questions ({task['family']}, {task['format']}), "
                f"answered by {self.model_identity} under this recipe ({recipe})")

    def check_question(self, q: Question) -> None:
        """:class:`BadQuestion` for a question that cannot be asked: empty, holding text
        that is not valid Unicode (a lone surrogate), longer than
        ``max_question_chars``, or of the choice format without its options."""
        if not q.text.strip():
            raise BadQuestion("the question is empty")
        if len(q.text) > self.max_question_chars:
            raise BadQuestion(f"the question has {len(q.text):,} characters; this gateway "
                              f"takes {self.max_question_chars:,} at most "
                              "(--max-question-chars)")
        for where, text in (("the question", q.text),
                            *((f"option {i + 1}", c) for i, c in enumerate(q.choices))):
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as e:
                raise BadQuestion(f"{where} is not valid Unicode text (character "
                                  f"{e.start}: a lone surrogate)") from None
        if self.template.format.value == "choice" and len(q.choices) < 2:
            raise BadQuestion("the certificate's task is multiple choice: give the options "
                              "(Guard.ask(..., choices=[...]); over HTTP, "
                              "extra_body={'credo': {'choices': [...]}})")

    # ------------------------------------------------------------------ shutting down

    def drain(self, timeout: float | None = None) -> int:
        """Take no new question; let those pending finish for ``timeout`` seconds at
        most (None: until they have), then end the rest with :class:`Closed` (their
        model calls cancelled, each logged). Returns how many were ended that way."""
        with self._room:
            self._closing = True
            self._room.notify_all()
            end = None if timeout is None else time.monotonic() + timeout
            while self._live:
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    break
                self._room.wait(left)
            rest = list(self._live.values())
        for p in rest:
            p.deadline.cancel("the gateway is shutting down")
            self._settle(p, Closed(f"the gateway shut down before this question was "
                                   f"decided (--drain-timeout {timeout:g} s); ask again",
                                   retry_after=1))
        return len(rest)

    def waiting_for(self) -> str:
        """What a drain is waiting for, in words (a second signal says it)."""
        return (f"{self.pending} questions pending ({self.in_flight} sampling); "
                f"{self.answered} answered so far")

    def close(self, timeout: float | None = None) -> None:
        """Drain (``timeout`` seconds at most; None: until every question has ended),
        then close the pool and the log (idempotent)."""
        if self._closed:
            return
        self.drain(timeout)
        with self._room:  # woken threads leave the pool before it closes (bounded)
            end = time.monotonic() + STOP_GRACE_S
            while self._running and end - time.monotonic() > 0:
                self._room.wait(end - time.monotonic())
            stuck = self._running
        self._threads.shutdown(wait=not stuck, cancel_futures=True)
        self._closed = True
        if not stuck:
            self._pool.close()
        else:
            log.warning("%d question threads still inside a model call at shutdown; the "
                        "model pool is left to the process's exit", stuck)
        if self._own_log and self.log is not None:
            self.log.close()

    def __enter__(self) -> Guard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ the questions

    def refused(self, request_id: str, cause: str, message: str, *,
                question: str | None = None, seconds: float = 0.0,
                **fields: Any) -> None:
        """Log a question the Guard never took (refused before sampling: by
        :meth:`submit`, or by the HTTP layer before it reached the Guard: a body too
        large, not JSON, an unsupported field), and tell the observer: one line, status
        ``failed``, its ``cause`` and ``error``; ``fields`` go into the line as they are
        (the HTTP status, the body's size). The question is logged only when it is
        valid Unicode and within ``max_question_chars``."""
        shown = question if question is not None and len(question) <= \
            self.max_question_chars and _encodable(question) else None
        record = {"time": _now(), "id": request_id, "status": "failed", "cause": cause,
                  "question": shown, "error": _one_line(message),
                  "certificate": self.id, "seconds": round(seconds, 4), **fields}
        self._write(record)
        self.observer.settled(request_id,
                              Settled(status="failed", cause=cause, seconds=seconds))

    def _take_room(self, p: _Pending, wait: bool) -> None:
        """Hold ``p`` as pending (the check and the count under one lock), or raise
        :class:`Busy` / :class:`Closed`."""
        with self._room:
            while True:
                if self._closing:
                    raise Closed("the gateway is shutting down", retry_after=1)
                if len(self._live) < self.max_concurrent + self.max_queue:
                    self._live[id(p)] = p
                    return
                if not wait:
                    raise Busy(f"{len(self._live)} questions are pending (--max-concurrent "
                               f"{self.max_concurrent} + --queue {self.max_queue})",
                               max(1, math.ceil(self._seconds)))
                self._room.wait()

    def _decide(self, p: _Pending) -> None:
        """A question's thread: decide it under its deadline, then settle it (once)."""
        with self._room:
            if p.done:  # drained or expired while it waited for a thread
                return
            self._running += 1
        p.started = time.monotonic()
        self.observer.started(p.id, p.started - p.submitted)
        try:
            self._settle(p, self._outcome(p))
        finally:
            with self._room:
                self._running -= 1
                self._room.notify_all()

    def _outcome(self, p: _Pending) -> GuardAnswer | GuardError:
        """Sample and decide ``p`` (its errors as a :class:`GuardError`)."""
        try:
            with deadline_scope(p.deadline):
                p.deadline.check()
                d = decide_question(self.config, self._pool, self.template, p.question,
                                    self.cert, on_call=partial(self.observer.round, p.id))
        except DeadlineExceeded as e:
            if e.reason == "timeout":
                return TimedOut(self._timeout_message(p))
            return Closed(f"{e.reason}: no decision for this question; ask again")
        except UserError as e:
            return BadQuestion(_one_line(str(e)))
        except Exception as e:
            log.debug("a question failed", exc_info=e)
            return UpstreamFailed(f"the gateway failed: {_one_line(str(e))}", "error")
        if d.error is not None:
            return _Failed(f"the model behind the gateway failed: {d.error}",
                           d.error_kind or "failed", d)
        return self._answer(p, d)

    @staticmethod
    def _timeout_message(p: _Pending) -> str:
        within = f"within {p.limit:g} s " if p.limit is not None else ""
        return (f"no decision {within}(--timeout); the samples drawn so far are cached: "
                "ask again to resume")

    def _answer(self, p: _Pending, d: Decision) -> GuardAnswer:
        c = self.cert.certificate
        now = time.monotonic()
        return GuardAnswer(
            id=p.id, decision=d,
            reply=d.text if d.accept or self.on_reject == "flag" else self.abstention,
            method=self.cert.method, threshold=c.threshold, alpha=c.alpha, delta=c.delta,
            procedure=self.procedure, certificate=self.id,
            seconds=round(now - p.submitted, 4),
            queued=round((p.started or now) - p.submitted, 4))

    def _settle(self, p: _Pending, outcome: GuardAnswer | GuardError) -> None:
        """End ``p`` with ``outcome`` unless it has ended: log it, tell the observer,
        resolve its future, free its room. The first outcome wins; a later one (the
        thread of a question that timed out) is dropped."""
        with self._room:
            if p.done:
                return
            p.done = True
        try:
            record, settled = self._record(p, outcome)
            self._write(record)
            self.observer.settled(p.id, settled)
        except Exception as e:  # the log failed (a full disk): the question fails alone
            log.error("the gateway could not log a question: %s", _one_line(str(e)))
            outcome = GuardError(f"the gateway failed: {_one_line(str(e))}")
        self._resolve(p, outcome)

    def _resolve(self, p: _Pending, outcome: GuardAnswer | GuardError) -> None:
        """Resolve ``p``'s future (once) and free its room."""
        try:
            if isinstance(outcome, GuardAnswer):
                p.future.set_result(outcome)
            else:
                p.future.set_exception(outcome)
        except InvalidStateError:  # the asker gave up, or it was resolved already
            pass
        with self._room:
            p.done = True
            if self._live.pop(id(p), None) is not None:
                if isinstance(outcome, GuardAnswer):
                    self.answered += 1
                    self._seconds = outcome.seconds
            self._room.notify_all()

    def _write(self, record: dict[str, Any]) -> None:
        if self.log is not None:
            self.log.write(record)

    def _record(self, p: _Pending, outcome: GuardAnswer | GuardError
                ) -> tuple[dict[str, Any], Settled]:
        """A decision log line (time, request id, status, question, and the answer's
        ``credo`` object or the error with its cause) and the observer's report."""
        now = time.monotonic()
        seconds = round(now - p.submitted, 4)
        queued = round((p.started or now) - p.submitted, 4)
        head = {"time": _now(), "id": p.id}
        if isinstance(outcome, GuardAnswer):
            status = "answered" if outcome.accept else "rejected"
            record = {**head, "status": status, "question": outcome.question,
                      "answer": outcome.answer, "reply": outcome.reply, **outcome.to_json()}
            return record, Settled(status=status, cause=None, seconds=outcome.seconds,
                                   queued=outcome.queued, samples=outcome.samples,
                                   upstream=outcome.upstream)
        decision = outcome.decision if isinstance(outcome, _Failed) else None
        kind = outcome.kind if isinstance(outcome, UpstreamFailed) else None
        upstream = decision.upstream if decision is not None else Upstream()
        samples = decision.samples if decision is not None else 0
        record = {**head, "status": "failed", "cause": outcome.cause,
                  "question": p.question.text, "error": str(outcome),
                  **({"kind": kind} if kind else {}), "samples": samples,
                  "usage": usage_json(upstream), "certificate": self.id,
                  "seconds": seconds, "queued": queued}
        return record, Settled(status="failed", cause=outcome.cause, seconds=seconds,
                               queued=queued, samples=samples, upstream=upstream, kind=kind)

    def _open(self) -> ModelPool:
        """The model pool, the roles assigned, the certificate checked against the
        gateway's settings, and every model checked (servers answer) before any question."""
        from credo.generation.pool import MODEL, ModelPool
        from credo.pipeline.runner import assign_roles, prepare_run
        from credo.tasks.base import Item

        cfg = self.config
        pool = ModelPool(cache_path=cfg.cache_path, seed=cfg.seed, max_block=cfg.max_block,
                         show_progress=self._show_progress, embedder=self._embedder,
                         executor=cfg.executor)
        try:
            for role, given in self._roles.items():
                if given is not None:
                    pool.assign(role, model=given)
            assign_roles(pool, cfg)
            self.model_identity = pool.model(MODEL, probe=False).identity
            self.cert.check(gateway_settings(cfg, self.model_identity, self.cert,
                                             self.template), cfg.methods, "gateway")
            choices = ("yes", "no") if self.template.format.value == "choice" else ()
            # an lm-eval task's own first document, rendered as the task renders it
            probe = (dataclasses.replace(self.template.items[0], id="preflight")
                     if self.template.items else
                     Item("preflight", "What is the answer?", "", choices))
            prepare_run(cfg, pool, dataclasses.replace(self.template, items=(probe,)))
        except BaseException:
            pool.close()
            raise
        return pool


class _Failed(UpstreamFailed):
    """An upstream failure with the decision that could not be made (its usage)."""

    def __init__(self, message: str, kind: str, decision: Decision) -> None:
        super().__init__(message, kind)
        self.decision = decision


def _check_limits(on_reject: str, max_concurrent: int, max_queue: int,
                  timeout: float | None, max_question_chars: int) -> None:
    """A :class:`UserError` naming the option whose value cannot work."""
    if on_reject not in ("flag", "abstain"):
        raise UserError(f"--on-reject {on_reject!r}: flag or abstain")
    if max_concurrent < 1 or max_queue < 0:
        raise UserError("--max-concurrent must be at least 1 and --queue at least 0")
    if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
        raise UserError(f"--timeout {timeout:g}: give a positive number of seconds")
    if max_question_chars < 1:
        raise UserError(f"--max-question-chars {max_question_chars}: at least 1")


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _one_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _base_config(
    cert: RunCertificate,
    given: RunCertificate | str | Path,
    config: RunConfig | Mapping[str, Any] | str | Path | None,
) -> dict[str, Any] | None:
    """The run config mapping the gateway's settings start from: ``config`` (a
    :class:`~credo.config.RunConfig`, a mapping or a YAML file), else the calibration
    run's ``config.yaml`` (the certificate's ``source`` folder, as given or beside the
    certificate file), else None (the certificate's recipe)."""
    from credo.config import RunConfig, read_yaml_mapping

    if isinstance(config, RunConfig):
        return config.model_dump(mode="json", exclude_unset=False)
    if isinstance(config, Mapping):
        return dict(config)
    if config is not None:
        return read_yaml_mapping(config)
    if not cert.source:
        return None
    source = Path(cert.source)
    near = [source] if source.is_absolute() else [
        source, *([Path(given).parent / source] if not isinstance(given, RunCertificate)
                  else [])]
    for folder in near:
        if (folder / "config.yaml").is_file():
            return read_yaml_mapping(folder / "config.yaml")
    return None


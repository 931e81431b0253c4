"""``credo.Guard``: answer one question at a time with its credibility and a certified
accept flag (issue 32, item 3); the HTTP gateway (:mod:`credo.serve.app`) is a thin
layer over it.

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
line) and checks that every model is there (served ones answer).

One worker thread owns the model pool (its cache, its executors): questions submitted
from any thread wait in a queue; the worker takes the first one, waits ``batch_window``
seconds for others (up to ``max_batch``), and answers them together
(:func:`~credo.pipeline.gateway.decide_questions`: one executor, every round of the
adaptive rule shared). At most ``max_batch + max_queue`` questions are pending; beyond
that :meth:`Guard.submit` raises :class:`Busy` (HTTP 429) unless told to wait. A
problem of one question (too long for the model's context) fails that question alone
(:class:`BadQuestion`); a failure of the model behind it fails its questions
(:class:`UpstreamFailed`). :meth:`Guard.close` stops taking questions, answers every one
already submitted, then closes the pool and the decision log.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import math
import queue
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from credo.errors import UserError
from credo.pipeline.certificate import RunCertificate
from credo.pipeline.gateway import (
    Decision,
    Question,
    check_servable,
    decide_questions,
    gateway_config,
    gateway_settings,
    gateway_task,
)
from credo.serve.log import DecisionLog

if TYPE_CHECKING:
    from credo.config import RunConfig
    from credo.generation.pool import ModelPool
    from credo.models.base import Model
    from credo.models.embedders import Embedder

__all__ = [
    "DEFAULT_ABSTENTION",
    "BadQuestion",
    "Busy",
    "Closed",
    "Guard",
    "GuardAnswer",
    "GuardError",
    "UpstreamFailed",
    "certificate_id",
]

log = logging.getLogger(__name__)

DEFAULT_ABSTENTION = "I cannot answer this reliably enough."
"""What ``on_reject="abstain"`` says instead of an answer the certificate does not accept."""

OnReject = Literal["flag", "abstain"]

BATCH_WAIT_FACTOR = 10
"""A batch waits ``batch_window`` seconds after each question that joins it, for the
next one, and ``BATCH_WAIT_FACTOR`` windows at most in all: questions that arrive
together (64 clients at once reach a server over tens of milliseconds) share one batch,
and a lone question waits one window."""


class GuardError(Exception):
    """A question the Guard could not answer (one line)."""


class Busy(GuardError):
    """More questions are pending than the Guard takes; ``retry_after`` seconds is about
    how long a batch takes now."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Closed(GuardError):
    """The Guard is shutting down and takes no new question."""


class BadQuestion(GuardError):
    """The question cannot be asked under the recipe (empty, or too long for the model)."""


class UpstreamFailed(GuardError):
    """The model behind the Guard failed the question's requests (after its retries)."""


@dataclass(frozen=True)
class GuardAnswer:
    """One question answered: ``answer`` (normalised; None when no sample had one),
    ``text`` (the full sample it came from), ``reply`` (what to say: ``text``, or the
    abstention under ``on_reject="abstain"`` when not accepted), the certificate
    method's ``score``, ``accept``, and the certificate's method, threshold, α, δ,
    procedure and id; ``samples`` answer samples drawn (``full_samples`` the full
    recipe's), ``tokens`` the completion tokens of those samples, ``seconds`` from
    submission to answer, ``id`` the request's."""

    id: str
    question: str
    answer: str | None
    text: str
    reply: str
    score: float | None
    accept: bool
    method: str
    threshold: float | None
    alpha: float
    delta: float | None
    procedure: str
    samples: int
    full_samples: int
    tokens: int
    certificate: str
    seconds: float

    def to_json(self) -> dict[str, Any]:
        """The ``credo`` object of a chat completion (and a decision log line's core)."""
        out = asdict(self)
        for key in ("id", "question", "reply", "text"):
            out.pop(key)
        return out


@dataclass
class _Pending:
    id: str
    question: Question
    future: Future[GuardAnswer]
    submitted: float


_STOP = object()


def certificate_id(cert: RunCertificate) -> str:
    """``sha256:`` and 12 hex digits of the certificate's content (its canonical JSON):
    the same file gives the same id on every machine."""
    text = json.dumps(cert.to_json(), sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


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
        max_batch: int = 64,
        max_queue: int = 256,
        batch_window: float = 0.02,
        show_progress: bool = False,
    ) -> None:
        if on_reject not in ("flag", "abstain"):
            raise UserError(f"--on-reject {on_reject!r}: flag or abstain")
        if max_batch < 1 or max_queue < 0 or batch_window < 0:
            raise UserError("--max-concurrent must be at least 1, --queue and "
                            "--batch-window at least 0")
        self.cert = certificate if isinstance(certificate, RunCertificate) else \
            RunCertificate.read(certificate)
        check_servable(self.cert)
        base = _base_config(self.cert, certificate, config)
        self.config = gateway_config(self.cert, base, overrides)
        self.template = gateway_task(self.cert)
        self.id = certificate_id(self.cert)
        self.on_reject, self.abstention = on_reject, abstention
        self.max_batch, self.max_queue, self.batch_window = max_batch, max_queue, batch_window
        self._roles = {"model": model, "writer": writer, "judge": judge}
        self._embedder, self._show_progress = embedder, show_progress
        self._own_log = log is not None and not isinstance(log, DecisionLog)
        self.log = DecisionLog(log) if self._own_log else log  # type: ignore[arg-type]
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._room = threading.Condition()
        self._pending = 0
        self._closing = False
        self._closed = threading.Event()
        self._last_batch = 1.0
        self.model_identity = ""
        self.answered = 0
        self.batches = 0
        started: Future[None] = Future()
        self._thread = threading.Thread(target=self._work, args=(started,), daemon=True,
                                        name="credo-guard")
        self._thread.start()
        try:
            started.result()
        except BaseException:
            self._thread.join()
            if self._own_log and self.log is not None:
                self.log.close()
            raise

    # ------------------------------------------------------------------ asking

    @property
    def procedure(self) -> str:
        """``adaptive decision`` or ``full recipe``: what is drawn per question."""
        return "adaptive decision" if self.config.adaptive is not None else "full recipe"

    @property
    def closing(self) -> bool:
        """Whether :meth:`close` was called (no new question is taken)."""
        return self._closing

    @property
    def pending(self) -> int:
        """Questions submitted and not answered yet."""
        return self._pending

    def submit(self, question: str | Question, *, choices: Sequence[str] = (),
               request_id: str | None = None, wait: bool = True) -> Future[GuardAnswer]:
        """Queue ``question`` (its ``choices`` for the choice format) and return the
        future of its :class:`GuardAnswer`. With ``wait`` False a full queue raises
        :class:`Busy` at once; with ``wait`` it waits for room. :class:`Closed` once the
        Guard is closing; :class:`BadQuestion` for an empty question or, in the choice
        format, one without options."""
        q = question if isinstance(question, Question) else Question(str(question),
                                                                       tuple(choices))
        self.check_question(q)
        with self._room:
            while True:
                if self._closing:
                    raise Closed("the gateway is shutting down")
                if self._pending < self.max_batch + self.max_queue:
                    break
                if not wait:
                    raise Busy(f"{self._pending} questions are pending (--max-concurrent "
                               f"{self.max_batch} + --queue {self.max_queue})",
                               max(1, math.ceil(self._last_batch)))
                self._room.wait()
            self._pending += 1
        future: Future[GuardAnswer] = Future()
        self._queue.put(_Pending(request_id or uuid.uuid4().hex, q, future, time.monotonic()))
        return future

    def ask(self, question: str, *, choices: Sequence[str] = (),
            timeout: float | None = None) -> GuardAnswer:
        """Answer one question (waiting for it; ``timeout`` seconds at most)."""
        return self.submit(question, choices=choices).result(timeout)

    async def ask_async(self, question: str, *, choices: Sequence[str] = ()) -> GuardAnswer:
        """:meth:`ask` for an event loop: the question joins the next batch."""
        future = await asyncio.to_thread(self.submit, question, choices=choices)
        return await asyncio.wrap_future(future)

    async def ask_many(self, questions: Sequence[str | Question]) -> list[GuardAnswer]:
        """Answer ``questions`` together, in order (they share batches and rounds; more
        than the Guard takes at once wait for room). A failed question raises its
        :class:`GuardError` once every other is answered."""
        futures = await asyncio.to_thread(lambda: [self.submit(q) for q in questions])
        done = await asyncio.gather(*(asyncio.wrap_future(f) for f in futures),
                                    return_exceptions=True)
        for item in done:
            if isinstance(item, BaseException):
                raise item
        return list(done)  # type: ignore[arg-type]

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
        if c.method == "crc":
            risk = f"expected share of answered-and-wrong questions <= {c.alpha:g}"
        else:
            risk = (f"error rate among accepted answers <= {c.alpha:g} with probability "
                    f">= {1 - (c.delta or 0):g}")
        return (f"certificate {self.id}: accept when {self.cert.method} >= "
                f"{c.threshold:.4g}; {risk} ({c.method}), for questions exchangeable with "
                f"its {c.n} calibration questions ({task['family']}, {task['format']}), "
                f"answered by {self.model_identity} under this recipe ({recipe})")

    def close(self) -> None:
        """Take no new question, answer every pending one, then close the pool and the
        log (idempotent)."""
        with self._room:
            if self._closing:
                already = True
            else:
                already, self._closing = False, True
                self._room.notify_all()
        if not already:
            self._queue.put(_STOP)
        self._thread.join()
        if self._own_log and self.log is not None:
            self.log.close()

    def __enter__(self) -> Guard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ the worker

    def check_question(self, q: Question) -> None:
        """:class:`BadQuestion` for an empty question, or one of the choice format
        without its options."""
        if not q.text.strip():
            raise BadQuestion("the question is empty")
        if self.template.format.value == "choice" and len(q.choices) < 2:
            raise BadQuestion("the certificate's task is multiple choice: give the options "
                              "(Guard.ask(..., choices=[...]); over HTTP, "
                              "extra_body={'credo': {'choices': [...]}})")

    def _work(self, started: Future[None]) -> None:
        """The worker thread: open the pool and check the certificate, then answer
        batches until :meth:`close`'s stop mark, then close the pool."""
        try:
            pool = self._open()
        except BaseException as e:
            started.set_exception(e)
            return
        started.set_result(None)
        try:
            stop = False
            while not stop:
                first = self._queue.get()
                if first is _STOP:
                    break
                batch, stop = self._gather(first)
                try:
                    self._answer(pool, batch)
                except Exception as e:  # the log or the cache failed: no question hangs
                    log.exception("the gateway failed a batch")
                    self._abandon(batch, e)
        finally:
            pool.close()
            self._closed.set()

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
            probe = Item("preflight", "What is the answer?", "", choices)
            prepare_run(cfg, pool, dataclasses.replace(self.template, items=(probe,)))
        except BaseException:
            pool.close()
            raise
        return pool

    def _gather(self, first: _Pending) -> tuple[list[_Pending], bool]:
        """``first`` and what else arrives while questions keep coming (each within
        ``batch_window`` of the one before, :data:`BATCH_WAIT_FACTOR` windows at most; up
        to ``max_batch``); True when the stop mark came too."""
        batch = [first]
        last = deadline = time.monotonic()
        deadline += BATCH_WAIT_FACTOR * self.batch_window
        while len(batch) < self.max_batch:
            left = min(last + self.batch_window, deadline) - time.monotonic()
            try:
                item = self._queue.get(timeout=left) if left > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            if item is _STOP:
                return batch, True
            batch.append(item)
            last = time.monotonic()
        return batch, False

    def _answer(self, pool: ModelPool, batch: list[_Pending]) -> None:
        """Decide ``batch`` together; a batch that fails is decided question by question,
        so a bad question or a failure fails its own request only."""
        t0 = time.monotonic()
        live = [p for p in batch if not p.future.cancelled()]
        for p in batch:
            if p.future.cancelled():
                self._release()
        if not live:
            return
        self.batches += 1
        try:
            decisions = decide_questions(self.config, pool, self.template,
                                         [p.question for p in live], self.cert)
        except Exception as e:
            if len(live) > 1:
                for p in live:
                    self._answer(pool, [p])
                return
            self._fail(live[0], e)
            return
        self._last_batch = time.monotonic() - t0
        for p, d in zip(live, decisions, strict=True):
            if d.error is not None:
                self._settle(p, UpstreamFailed(f"the model behind the gateway failed: "
                                               f"{d.error}"), d)
            else:
                self._settle(p, self._result(p, d), d)

    def _abandon(self, batch: list[_Pending], e: Exception) -> None:
        """Fail every question of ``batch`` still waiting (one line of ``e``)."""
        line = (str(e).splitlines() or [type(e).__name__])[0]
        for p in batch:
            if p.future.done():
                continue
            try:
                p.future.set_exception(GuardError(f"the gateway failed: {line}"))
            except InvalidStateError:
                continue
            self._release()

    def _fail(self, p: _Pending, e: Exception) -> None:
        """One question's failure as its :class:`GuardError`."""
        if isinstance(e, UserError):
            err: GuardError = BadQuestion(str(e).splitlines()[0])
        else:
            log.debug("a question failed", exc_info=e)
            line = (str(e).splitlines() or [type(e).__name__])[0]
            err = UpstreamFailed(f"the model behind the gateway failed: {line}")
        self._settle(p, err, None)

    def _result(self, p: _Pending, d: Decision) -> GuardAnswer:
        c = self.cert.certificate
        reply = d.text if d.accept or self.on_reject == "flag" else self.abstention
        return GuardAnswer(
            p.id, d.question, d.answer, d.text, reply, d.score, d.accept, self.cert.method,
            c.threshold, c.alpha, c.delta, self.procedure, d.samples, d.full_samples,
            d.tokens, self.id, round(time.monotonic() - p.submitted, 4))

    def _settle(self, p: _Pending, outcome: GuardAnswer | GuardError,
                decision: Decision | None) -> None:
        """Log the outcome, then resolve the question's future (once)."""
        if self.log is not None:
            self.log.write(self._record(p, outcome, decision))
        self.answered += 1
        try:
            if isinstance(outcome, GuardAnswer):
                p.future.set_result(outcome)
            else:
                p.future.set_exception(outcome)
        except InvalidStateError:  # the asker gave up (cancelled): the line is logged
            pass
        self._release()

    def _release(self) -> None:
        with self._room:
            self._pending -= 1
            self._room.notify()

    def _record(self, p: _Pending, outcome: GuardAnswer | GuardError,
                decision: Decision | None) -> dict[str, Any]:
        """A decision log line: time, request id, question, answer, score, accept,
        samples, tokens, the certificate, and the error when the question failed."""
        now = datetime.now(UTC).isoformat(timespec="milliseconds")
        if isinstance(outcome, GuardAnswer):
            return {"time": now, "id": p.id, "status": "answered", "question": outcome.question,
                    "answer": outcome.answer, "reply": outcome.reply,
                    **outcome.to_json()}
        return {"time": now, "id": p.id, "status": "failed", "question": p.question.text,
                "error": str(outcome), "samples": decision.samples if decision else 0,
                "certificate": self.id,
                "seconds": round(time.monotonic() - p.submitted, 4)}


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

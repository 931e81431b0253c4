"""How long the caller of a model still waits: a deadline carried by the thread that asks.

A service in front of a model (the gateway, :mod:`credo.serve`) gives each question a
time limit (``--timeout``) and, when it shuts down, a last moment for every question in
flight (``--drain-timeout``). The thread deciding a question enters a
:class:`Deadline` (:func:`deadline_scope`); every wait for a model's answers on that
thread (a backend's :meth:`~credo.models.base.Model.generate`, the executor waiting for
samples another question is drawing) waits at most until then, and raises
:class:`DeadlineExceeded` after it. The backends stop what they can of the calls still
running (the OpenAI-compatible backend cancels them, which frees its concurrency for
the other questions); what was generated before is already cached, so asking again
resumes.

Another thread may end a deadline early (:meth:`Deadline.cancel`, for a shutdown):
whoever waits under it is woken at once through the callback it registered
(:meth:`Deadline.waking`), without polling. Without a deadline (batch runs, the API)
nothing changes: waits are unbounded, as before.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

__all__ = [
    "Deadline",
    "DeadlineExceeded",
    "current_deadline",
    "deadline_scope",
    "get_before",
    "waking_on_cancel",
    "waking_queue",
]


class DeadlineExceeded(Exception):
    """The caller stopped waiting for the model: ``reason`` says why (its time limit, or a
    shutdown)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Deadline:
    """A moment after which the caller stops waiting (``seconds`` from now; None: no
    limit until :meth:`cancel`). ``reason`` is what :class:`DeadlineExceeded` says when
    it passes."""

    def __init__(self, seconds: float | None = None, reason: str = "timeout") -> None:
        self._at = None if seconds is None else time.monotonic() + seconds
        self.reason = reason
        self._lock = threading.Lock()
        self._wakers: dict[int, Callable[[], None]] = {}
        self._next = 0

    def remaining(self) -> float | None:
        """Seconds left (0 once passed); None without a limit."""
        at = self._at
        return None if at is None else max(0.0, at - time.monotonic())

    @property
    def expired(self) -> bool:
        """Whether the deadline has passed (or was cancelled)."""
        left = self.remaining()
        return left is not None and left <= 0.0

    def check(self) -> None:
        """Raise :class:`DeadlineExceeded` once the deadline has passed."""
        if self.expired:
            raise DeadlineExceeded(self.reason)

    def cancel(self, reason: str) -> None:
        """End the deadline now with ``reason``, and wake everyone waiting under it."""
        with self._lock:
            self.reason = reason
            self._at = time.monotonic()
            wakers = list(self._wakers.values())
        for wake in wakers:
            wake()

    @contextmanager
    def waking(self, wake: Callable[[], None]) -> Iterator[None]:
        """Call ``wake`` (from the cancelling thread) if the deadline is cancelled while
        the ``with`` runs: it should unblock the wait of the ``with``'s body."""
        with self._lock:
            token = self._next
            self._next += 1
            self._wakers[token] = wake
        try:
            yield
        finally:
            with self._lock:
                self._wakers.pop(token, None)


_CURRENT: ContextVar[Deadline | None] = ContextVar("credo-deadline", default=None)


def current_deadline() -> Deadline | None:
    """The deadline this thread waits under (None: no limit)."""
    return _CURRENT.get()


@contextmanager
def deadline_scope(deadline: Deadline | None) -> Iterator[Deadline | None]:
    """Wait under ``deadline`` inside the ``with`` (this thread only)."""
    token = _CURRENT.set(deadline)
    try:
        yield deadline
    finally:
        _CURRENT.reset(token)


@contextmanager
def waking_on_cancel(wake: Callable[[], None]) -> Iterator[Deadline | None]:
    """:meth:`Deadline.waking` under this thread's deadline (nothing without one); yields
    the deadline."""
    deadline = current_deadline()
    if deadline is None:
        yield None
        return
    with deadline.waking(wake):
        yield deadline


WAKE = object()
"""What a cancelled deadline puts into the queue a thread waits on (:func:`waking_queue`)."""


@contextmanager
def waking_queue(results: queue.Queue[Any]) -> Iterator[Deadline | None]:
    """Wait on ``results`` under this thread's deadline inside the ``with``: a cancel puts
    :data:`WAKE` into it (read by :func:`get_before`); yields the deadline."""
    with waking_on_cancel(lambda: results.put(WAKE)) as deadline:
        yield deadline


def get_before(results: queue.Queue[Any], deadline: Deadline | None) -> Any:
    """The next item of ``results``, waiting at most until ``deadline``:
    :class:`DeadlineExceeded` after it, or once it is cancelled."""
    try:
        item = results.get(timeout=None if deadline is None else deadline.remaining())
    except queue.Empty:
        assert deadline is not None
        raise DeadlineExceeded(deadline.reason) from None
    if item is WAKE:
        assert deadline is not None
        raise DeadlineExceeded(deadline.reason)
    return item

"""A circuit breaker for a served model: stop retrying a server that
fails every request.

A server that fails every request (down, misconfigured, answering 500 to all) would
otherwise cost each call its whole retry budget (``max_retries`` backoffs, 7.5-15 s with
the defaults), wave after wave and stage after stage: minutes before the run ends at
exit 3. The breaker watches every attempt of the model's calls (the probe's too):

- **closed** (the normal state): attempts go out. Each attempt that fails in a way a
  retry may mend (5xx, 408, a connection error or timeout, a malformed reply) adds one to
  a *streak*; any success ends it. The breaker **opens** when the streak reaches
  ``failures`` attempts (default :data:`DEFAULT_BREAKER_FAILURES`) *and* has lasted
  ``window_s`` seconds (default :data:`DEFAULT_BREAKER_WINDOW_S`) with no success: every
  recent request failed, for a while. A burst of failures that a retry mends (a server
  restarting for a few seconds, a replica dropping out) is shorter than the window, and a
  few failures among successes never make a streak.
- **open**: no attempt is sent. A call about to make an attempt, or waiting to retry
  (woken at once), fails with its request (the executor caches everything else; the run
  ends at exit 3 and a rerun resumes). ``window_s`` seconds after it opened, one attempt
  is let through as a trial: a success closes the breaker, a failure opens it again.

How long a dead server costs: the streak starts with the first failed attempt (the
start-up probe's, for a run), so a server failing every request opens the breaker
``window_s`` seconds later, and the calls still waiting end then: with the defaults a run
against it ends in 10 to 15 s at exit 3 (docs/how-to/served-models.md gives the
measurement).

A 4xx that fails its request at once (the server answered) and a 429 (the server is
there and asks to wait; its ``Retry-After`` is honoured) are neither failures nor
successes. ``failures = 0`` turns the breaker off.

The breaker lives on the backend's event loop (every attempt runs there), so it takes no
lock.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

DEFAULT_BREAKER_FAILURES = 10
"""Failed attempts in a row, with no success between them, that may open the breaker."""
DEFAULT_BREAKER_WINDOW_S = 10.0
"""How long such a streak must last before the breaker opens, and how long it stays open
before a trial attempt."""

__all__ = ["DEFAULT_BREAKER_FAILURES", "DEFAULT_BREAKER_WINDOW_S", "CircuitBreaker"]


class CircuitBreaker:
    """The breaker of one served model; see the module docstring. ``clock`` gives
    seconds (monotonic)."""

    def __init__(
        self,
        failures: int = DEFAULT_BREAKER_FAILURES,
        window_s: float = DEFAULT_BREAKER_WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if isinstance(failures, bool) or not isinstance(failures, int) or failures < 0:
            raise ValueError(f"breaker_failures must be an integer >= 0, got {failures!r}")
        if isinstance(window_s, bool) or not isinstance(window_s, int | float) or not (
            window_s >= 0
        ):
            raise ValueError(f"breaker_window_s must be a number >= 0, got {window_s!r}")
        self.failures = failures
        self.window_s = float(window_s)
        self._clock = clock
        self._streak = 0
        self._streak_start = 0.0
        self._opened_at: float | None = None
        self._trial = False
        self._opened: asyncio.Event | None = None
        #: How often the breaker opened (a reopening after a failed trial included).
        self.trips = 0

    @property
    def is_open(self) -> bool:
        """Whether attempts are held back (a trial may still be let through)."""
        return self._opened_at is not None

    @property
    def reason(self) -> str:
        """Why attempts are not sent, in words (one line)."""
        return (
            f"circuit breaker open: the last {self._streak} attempts failed, none succeeded"
            f" for {self.window_s:g} s or more (model_options breaker_failures,"
            " breaker_window_s)"
        )

    def allow(self) -> bool:
        """Whether an attempt may be sent now: the breaker is closed, or it has been open
        ``window_s`` seconds and no trial is out (this attempt is the trial)."""
        if self._opened_at is None:
            return True
        if self._trial or self._clock() - self._opened_at < self.window_s:
            return False
        self._trial = True
        return True

    def success(self) -> None:
        """An attempt succeeded: the streak ends, an open breaker closes."""
        self._streak = 0
        self._trial = False
        if self._opened_at is not None:
            self._opened_at = None
            if self._opened is not None:
                self._opened.clear()

    def failure(self) -> None:
        """An attempt failed in a way a retry may mend (see the module docstring)."""
        now = self._clock()
        if self._streak == 0:
            self._streak_start = now
        self._streak += 1
        if self._trial:  # the trial failed: open again for another window
            self._trial = False
            self._open(now)
            return
        self._check(now)

    def neutral(self) -> None:
        """An attempt ended in a way that says nothing of the server's health (a 4xx, a
        429): a trial it was is over, the breaker stays as it is."""
        self._trial = False

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (a retry's backoff), or less: until the breaker opens. A
        streak long enough opens it when it has lasted ``window_s`` seconds, failure or
        not at that moment (a sleeper wakes then to look)."""
        if self._opened is None:
            self._opened = asyncio.Event()
            if self._opened_at is not None:
                self._opened.set()
        end = self._clock() + seconds
        while not self._opened.is_set():
            now = self._clock()
            if now >= end:
                return
            due = self._due(now)
            wait = end - now if due is None else min(end - now, due)
            try:
                await asyncio.wait_for(self._opened.wait(), max(wait, 0.0))
            except TimeoutError:
                self._check(self._clock())

    def _due(self, now: float) -> float | None:
        """Seconds until the current streak opens the breaker (None: it will not by time
        alone: too short, off, or open already)."""
        if not self.failures or self._opened_at is not None or self._streak < self.failures:
            return None
        return max(self._streak_start + self.window_s - now, 0.0)

    def _check(self, now: float) -> None:
        """Open when the streak has ``failures`` attempts and has lasted ``window_s``."""
        if (self.failures and self._opened_at is None and self._streak >= self.failures
                and now - self._streak_start >= self.window_s):
            self._open(now)

    def _open(self, now: float) -> None:
        self._opened_at = now
        self.trips += 1
        if self._opened is not None:
            self._opened.set()

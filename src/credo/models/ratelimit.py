"""Client-side rate limits of a served model: requests and tokens per minute.

A hosted API limits what one key may send per minute (requests and tokens); a server of
one's own does not, but a shared one may. :class:`TokenBucket` holds at most one
second's worth of its rate (``per_minute / 60``, at least one unit) and refills
continuously at ``per_minute / 60`` a second; :meth:`TokenBucket.take` waits until the
bucket holds what a request needs (or, for a request larger than the bucket, a full
bucket) and then takes it, so the level may go below zero and the next request waits
for the debt too: over any long stretch the rate is never exceeded, whatever the sizes.
:meth:`TokenBucket.settle` corrects an estimate once the true count is known.

:class:`RateLimits` pairs a request bucket and a token bucket (either optional).
A call's tokens are estimated before it is sent by :func:`estimate_tokens` (prompt
characters / 4 plus ``max_tokens`` per sample) and settled with the ``usage`` the
server reports, when it reports one.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable

from credo.types import GenerationRequest

__all__ = ["RateLimits", "TokenBucket", "estimate_tokens"]

_EPSILON = 1e-9
"""Levels this close to what is needed are enough (float sums never quite get there)."""
_MIN_SLEEP_S = 1e-3

CHARS_PER_TOKEN = 4
"""The rule of thumb behind :func:`estimate_tokens` (English text, BPE vocabularies)."""


def estimate_tokens(request: GenerationRequest, n: int) -> int:
    """The tokens one call of ``n`` samples of ``request`` may cost before it is sent:
    ``ceil(prompt characters / 4) + n * max_tokens`` (every sample may run to the cap)."""
    chars = sum(len(m.content) for m in request.messages)
    return math.ceil(chars / CHARS_PER_TOKEN) + n * request.params.max_tokens


class TokenBucket:
    """At most ``per_minute`` units a minute, in bursts of at most one second's worth.

    ``clock`` and ``sleep`` are injectable (tests); both default to the real ones
    (``time.monotonic``, ``asyncio.sleep``). Waiters are served in arrival order.
    """

    def __init__(
        self,
        per_minute: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if not per_minute > 0 or not math.isfinite(per_minute):
            raise ValueError(f"a rate per minute must be a positive number, got {per_minute}")
        self.per_minute = float(per_minute)
        self.rate = self.per_minute / 60.0
        self.capacity = max(1.0, self.rate)
        self.level = self.capacity
        self._clock = clock
        self._sleep = sleep
        self._stamp = clock()
        self._lock: asyncio.Lock | None = None

    async def take(self, amount: float) -> None:
        """Wait until ``min(amount, capacity)`` is in the bucket, then take ``amount``."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            need = min(float(amount), self.capacity)
            while True:
                self._refill()
                if self.level >= need - _EPSILON:
                    self.level -= amount
                    return
                await self._sleep(max((need - self.level) / self.rate, _MIN_SLEEP_S))

    def settle(self, estimated: float, actual: float) -> None:
        """A call took ``actual`` units where ``estimated`` were taken: give back or take
        the difference (never above capacity)."""
        self._refill()
        self.level = min(self.capacity, self.level + estimated - actual)

    def _refill(self) -> None:
        now = self._clock()
        self.level = min(self.capacity, self.level + (now - self._stamp) * self.rate)
        self._stamp = now


class RateLimits:
    """A request bucket and a token bucket (``None``: that limit is off)."""

    def __init__(
        self, requests_per_minute: float | None = None, tokens_per_minute: float | None = None
    ) -> None:
        self.requests = (
            TokenBucket(requests_per_minute) if requests_per_minute is not None else None
        )
        self.tokens = TokenBucket(tokens_per_minute) if tokens_per_minute is not None else None

    @property
    def active(self) -> bool:
        """Whether any limit is set."""
        return self.requests is not None or self.tokens is not None

    async def wait(self, tokens: int) -> None:
        """Wait until one more request of ``tokens`` estimated tokens may go."""
        if self.requests is not None:
            await self.requests.take(1)
        if self.tokens is not None:
            await self.tokens.take(tokens)

    def settle(self, estimated: int, actual: int | None) -> None:
        """Correct the token bucket with the tokens the server reported (``None``/0: none
        reported, the estimate stands)."""
        if self.tokens is not None and actual:
            self.tokens.settle(estimated, actual)

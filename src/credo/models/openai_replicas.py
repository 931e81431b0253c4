"""The replicas of an OpenAI-compatible model and the calls in flight on each
(:class:`~credo.models.openai_compat.OpenAIModel`).

Replicas. ``base_url`` is one URL or a list of them, replicas of one model. Each replica
has its own client (and its own credentials: userinfo and credential query parameters of
its URL, see :func:`replica_of`) and at most ``max_concurrency`` calls in flight (default
32, per replica). Each call (each attempt) goes to the replica with the fewest calls in
flight, ties to the one that was sent the fewest; a replica whose last attempt failed in a
way a retry may mend is passed over for :data:`REPLICA_COOLDOWN_S` seconds while another
has room, and a retry goes to another replica than the one that just failed when there is
one. So a replica that stops costs its calls one failed attempt each, retried elsewhere.

Rate limits. ``requests_per_minute`` and ``tokens_per_minute`` (both off by default) hold
every replica together (a hosted API limits the key, not the connection) by the token
buckets of :mod:`credo.models.ratelimit`: a call's tokens are estimated as prompt
characters / 4 plus ``max_tokens`` per sample and corrected by the reply's ``usage``.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from credo.models.urls import basic_authorization, split_credentials, split_query_secrets

REPLICA_COOLDOWN_S = 10.0
"""How long a replica whose attempt failed is passed over while another has room."""
DEFAULT_MAX_CONCURRENCY = 32
"""Calls in flight per replica by default (a vLLM or llama.cpp server batches them)."""


@dataclass
class Replica:
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


def replica_urls(base_url: str | Sequence[str] | None) -> list[str | None]:
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


def replica_of(url: str | None) -> Replica:
    """A replica of ``url``, its userinfo moved into an ``Authorization`` header and its
    credential query parameters (``?api_key=…``) into the client's default query: the replica's
    ``url`` holds neither."""
    if url is None:
        return Replica(None, {})
    plain, user, password = split_credentials(url)
    plain, query = split_query_secrets(plain)
    headers = {"Authorization": basic_authorization(user, password)} if user else {}
    return Replica(plain, headers, query)


def client_options(replica: Replica, api_key: str | None, timeout: float) -> dict[str, Any]:
    """The options an ``openai`` client of ``replica`` is made with (:func:`client_for`,
    the preflight check's): its URL, headers and query secrets, ``api_key`` and
    ``timeout``, and no retries of its own (they are ours)."""
    return {
        "api_key": api_key,
        "base_url": replica.url,
        "timeout": timeout,
        "max_retries": 0,
        "default_headers": replica.headers,
        "default_query": replica.query or None,
    }


def client_for(replica: Replica, api_key: str | None, timeout: float) -> Any:
    """The replica's client: the injected one, or an ``AsyncOpenAI`` made on the loop
    thread (:func:`client_options`)."""
    if replica.client is None:
        from openai import AsyncOpenAI

        replica.client = AsyncOpenAI(**client_options(replica, api_key, timeout))
    return replica.client


async def close_clients(replicas: Sequence[Replica]) -> None:
    """Close the clients made for ``replicas`` (not injected ones), on the loop thread."""
    for replica in replicas:
        if replica.client is not None and replica.owns_client:
            await replica.client.close()
            replica.client = None


class ReplicaScheduler:
    """Which replica takes the next attempt, and waiting for room: at most
    ``max_concurrency`` calls in flight per replica. Used on the loop thread only."""

    def __init__(self, replicas: Sequence[Replica], max_concurrency: int) -> None:
        self.replicas = replicas
        self.max_concurrency = max_concurrency
        self._room: asyncio.Condition | None = None

    def _condition(self) -> asyncio.Condition:
        """The condition calls wait on for room, made on the loop thread."""
        if self._room is None:
            self._room = asyncio.Condition()
        return self._room

    async def acquire(self, avoid: Replica | None) -> Replica:
        """A replica with room for one more call, counted in flight: see :meth:`choose`;
        when none has room, wait for a call to end (or a replica's cooldown to pass)."""
        room = self._condition()
        loop = asyncio.get_running_loop()
        async with room:
            while True:
                now = loop.time()
                replica = self.choose(avoid, now)
                if replica is not None:
                    replica.in_flight += 1
                    replica.sent += 1
                    return replica
                cooling = [r.avoid_until - now for r in self.replicas if r.avoid_until > now]
                try:
                    await asyncio.wait_for(room.wait(), min(cooling) if cooling else None)
                except TimeoutError:
                    pass

    def choose(self, avoid: Replica | None, now: float) -> Replica | None:
        """The replica for the next attempt, or None to wait: among the replicas that are
        neither cooling down after a failure nor ``avoid`` (the one this call's last
        attempt failed on) — or among all, when every one is — the one with the fewest
        calls in flight (then the fewest sent), if it has room (fewer than
        ``max_concurrency`` in flight)."""
        good = [r for r in self.replicas if r.avoid_until <= now and r is not avoid]
        room = [r for r in good or self.replicas if r.in_flight < self.max_concurrency]
        return min(room, key=lambda r: (r.in_flight, r.sent)) if room else None

    async def release(self, replica: Replica, cool_down: bool = False) -> None:
        """A call on ``replica`` ended: one fewer in flight, and waiting calls look again.
        ``cool_down``: it failed in a way a retry may mend, so it is passed over for
        :data:`REPLICA_COOLDOWN_S` seconds (set before a waiting call may pick it)."""
        if cool_down:
            replica.avoid_until = asyncio.get_running_loop().time() + REPLICA_COOLDOWN_S
        room = self._condition()
        async with room:
            replica.in_flight -= 1
            room.notify_all()


__all__ = [
    "DEFAULT_MAX_CONCURRENCY",
    "REPLICA_COOLDOWN_S",
    "Replica",
    "ReplicaScheduler",
    "client_for",
    "client_options",
    "close_clients",
    "replica_of",
    "replica_urls",
]

"""Execute a generation plan against a model, through the cache (design.md, ``run/``).

The executor is one of the two stages allowed to call a model. For every planned request
it looks up which sample indices are cached, turns the missing ones into blocks of
consecutive indices (one backend call each, sample ``i`` seeded ``sample_seed(key, i)``),
and commits every block as soon as it completes, so an interrupted run resumes with no
lost and no duplicated sample. An empty reply (``""``) is not cached as it comes: it may be a
server's glitch, so its empty samples are asked again
with the same seeds, up to the backend's retry budget (:meth:`Executor._recheck_empty`).
Every call counts its requests, samples and the tokens the server reported, for every
request sent (retries and re-asks included), per stage in a
:class:`~credo.generation.ledger.Ledger`, which may also hold a cost budget: once it is
reached, no more blocks are dispatched.

Concurrent calls. One executor may run :meth:`Executor.execute` from several threads at
once (the gateway decides each question in a thread of its own, through one executor per
model: one upstream concurrency budget, the backend's). The samples a call is about to
generate are claimed first; a call that needs samples another call is generating waits
for them instead of asking the model again (so identical questions asked together cost
the calls of one), then reads them from the cache, and generates itself what that other
call failed to get. Each thread's calls are counted for that thread too
(:func:`usage_scope`: what one question cost), and a thread waiting under a deadline
(:mod:`credo.models.deadline`) stops waiting then
(:class:`~credo.models.deadline.DeadlineExceeded`): what was generated is cached and
the claims are released.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, fields
from typing import NamedTuple

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from credo.errors import BudgetReached, RequestsFailed
from credo.generation.ledger import Ledger, StageUsage
from credo.generation.store import GenerationStore, request_key, sample_seed
from credo.models.base import Model
from credo.models.deadline import current_deadline
from credo.types import Generation, GenerationError, GenerationRequest, Usage, usage_of

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PlannedRequest:
    """``n`` samples (indices ``0..n-1``) of ``request``; its ``seed`` and ``n`` are ignored.

    ``stage`` names the ledger stage the request counts under (``""``: the stage of the
    :meth:`Executor.execute` call); neither it nor ``label`` is part of the request key.
    """

    request: GenerationRequest
    n: int
    label: str = ""
    stage: str = ""


@dataclass
class ExecutionStats(StageUsage):
    """What one ``execute`` call did: the ledger's counter (:class:`StageUsage`: request
    keys, samples asked for, cached and generated samples, backend calls and reported
    tokens, counted as the ledger counts them; one usage counter) for the whole
    call, plus its ``seconds``, ``retries`` (the backend calls it retried: rate limits,
    server errors, malformed replies, and empty samples asked again),
    ``failed_requests`` (the requests whose retries ran out; nothing of them is cached),
    ``budget_skipped`` (the blocks left undispatched because the run's cost budget was
    reached) and ``unverified_empty`` (the empty samples cached from a backend that does
    not reproduce seeds, after its retries all came back empty too; marked in the cache:
    :meth:`GenerationStore.unverified_empty`)."""

    seconds: float = 0.0
    retries: int = 0
    failed_requests: int = 0
    budget_skipped: int = 0
    unverified_empty: int = 0

    @property
    def requested_samples(self) -> int:
        """The samples asked for (the ledger's ``samples``)."""
        return self.samples

    @property
    def backend_calls(self) -> int:
        """The backend calls sent, retries included (the ledger's ``calls``)."""
        return self.calls


    def add_stats(self, other: ExecutionStats) -> None:
        """Add every count of ``other`` (the seconds too) to these."""
        for f in fields(ExecutionStats):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


CallHook = Callable[[str, ExecutionStats, float, float], None]
"""Told of one executor call: its description, its counts, and when it started and
ended (epoch seconds)."""


@dataclass
class ThreadUsage:
    """What the executor calls of one thread did inside a :func:`usage_scope`: their
    counts added up (``stats``) and the failures of requests whose retries ran out
    (``failures``, in order: each backend's error, with its ``kind`` when it names one);
    ``on_call`` is told of each call as it ends."""

    stats: ExecutionStats = field(default_factory=ExecutionStats)
    failures: list[GenerationError] = field(default_factory=list)
    on_call: CallHook | None = None
    outer: ThreadUsage | None = None
    _generated: set[tuple[str, int]] = field(default_factory=set)
    _read: set[tuple[str, int]] = field(default_factory=set)

    def chain(self) -> Iterator[ThreadUsage]:
        """This scope and the ones it is nested in (each counts the calls inside it)."""
        scope: ThreadUsage | None = self
        while scope is not None:
            yield scope
            scope = scope.outer

    @property
    def cached(self) -> int:
        """Distinct samples this thread's calls read from the cache without having
        generated them itself (a later round asking for the samples of an earlier one
        reads them again: those are not counted)."""
        return len(self._read - self._generated)

    def note(self, key: str, indices: Iterable[int], *, generated: bool) -> None:
        """Record samples of ``key`` as generated here, or as read from the cache."""
        (self._generated if generated else self._read).update((key, i) for i in indices)


_SCOPE: ContextVar[ThreadUsage | None] = ContextVar("credo-usage-scope", default=None)


@contextmanager
def usage_scope(on_call: CallHook | None = None) -> Iterator[ThreadUsage]:
    """Count the executor calls this thread makes inside the ``with`` (every executor's):
    a run's own calls, the gateway's cost of one question; ``on_call`` is told of each
    (its traces). Scopes nest: a call counts in every scope it is inside."""
    scope = ThreadUsage(on_call=on_call, outer=_SCOPE.get())
    token = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(token)


HISTORY = 10_000
"""How many calls' counts an executor keeps one by one (:attr:`Executor.history`)."""

FLIGHT_PASSES = 3
"""How often one call takes over samples that another call claimed and then failed to
get (its own tries after that: the request fails)."""


class _Flights:
    """The samples being generated by some call of one executor: ``(key, index)`` ->
    the event set when that call has ended (its samples cached, or failed)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: dict[tuple[str, int], threading.Event] = {}

    def claim(
        self, missing: Mapping[str, list[int]]
    ) -> tuple[dict[str, list[int]], dict[tuple[str, int], threading.Event]]:
        """Claim the indices of ``missing`` nobody is generating; the others' events."""
        mine: dict[str, list[int]] = {}
        theirs: dict[tuple[str, int], threading.Event] = {}
        with self._lock:
            for key, indices in missing.items():
                for i in indices:
                    ev = self._events.get((key, i))
                    if ev is None:
                        self._events[(key, i)] = threading.Event()
                        mine.setdefault(key, []).append(i)
                    else:
                        theirs[(key, i)] = ev
        return mine, theirs

    def release(self, mine: Mapping[str, list[int]]) -> None:
        """End the claims of ``mine``: whoever waits on them goes on."""
        with self._lock:
            done = [self._events.pop((key, i)) for key, indices in mine.items() for i in indices]
        for ev in done:
            ev.set()

    @staticmethod
    def wait(theirs: Mapping[tuple[str, int], threading.Event]) -> None:
        """Wait until every claim of ``theirs`` has ended, at most until this thread's
        deadline (:class:`~credo.models.deadline.DeadlineExceeded` after it)."""
        deadline = current_deadline()
        for ev in theirs.values():
            while not ev.wait(0.05 if deadline is not None else None):
                deadline.check()  # type: ignore[union-attr]


class Block(NamedTuple):
    """One backend call: samples ``start .. start + request.n - 1`` of request ``key``
    (``request.seed`` is ``sample_seed(key, start)``), counted under ledger stage
    ``stage``."""

    key: str
    start: int
    request: GenerationRequest
    stage: str = ""


class SampleProgress:
    """A rich progress bar of samples done (rate, ETA) on stderr; nothing when disabled."""

    def __init__(self, description: str, total: int, show: bool) -> None:
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("samples"),
            TextColumn("{task.fields[rate]:.2f}/s"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            disable=not show,
        )
        self._task = self._progress.add_task(description, total=total, rate=0.0)
        self._done = 0
        self._t0 = time.perf_counter()

    def __enter__(self) -> SampleProgress:
        self._progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.__exit__(None, None, None)

    def advance(self, samples: int) -> None:
        """Add ``samples`` done."""
        self._done += samples
        rate = self._done / max(time.perf_counter() - self._t0, 1e-9)
        self._progress.update(self._task, advance=samples, rate=rate)


class Executor:
    """Runs planned requests on ``model``, reading and writing ``store``.

    Parameters
    ----------
    model : Model
    store : GenerationStore
    run_seed : int
        Part of every request key: a different run seed draws different samples.
    max_block : int
        Most samples sent in one backend call (consecutive indices of one request).
    show_progress : bool
        Draw a rich progress bar (samples done, ETA) on stderr.
    ledger : Ledger or None
        Where requests, samples and tokens are counted per stage, with the prices and
        the cost budget (the pool's, shared by its executors); None: a ledger of its own.
    """

    def __init__(
        self,
        model: Model,
        store: GenerationStore,
        run_seed: int = 0,
        max_block: int = 16,
        show_progress: bool = True,
        ledger: Ledger | None = None,
    ) -> None:
        if max_block < 1:
            raise ValueError(f"max_block must be >= 1, got {max_block}")
        self.model = model
        self.store = store
        self.run_seed = run_seed
        self.max_block = max_block
        self.show_progress = show_progress
        self.ledger = ledger if ledger is not None else Ledger()
        #: The last :data:`HISTORY` calls' counts, in order (a long-lived executor, the
        #: gateway's, keeps no more); :attr:`totals` adds up every call's.
        self.history: deque[ExecutionStats] = deque(maxlen=HISTORY)
        self.totals = ExecutionStats()
        self._totals_lock = threading.Lock()
        self._local = threading.local()
        self._flights = _Flights()
        #: Replay from the cache only (``credo adaptive``): a sample not cached is never
        #: asked of the model; its request fails (:class:`RequestsFailed`).
        self.replay = False

    def key(self, request: GenerationRequest) -> str:
        """The cache key of ``request`` on this executor's model and run seed."""
        return request_key(self.model.identity, request, self.run_seed)

    def execute(
        self,
        planned: Sequence[PlannedRequest],
        description: str = "sampling",
        stage: str | None = None,
    ) -> list[list[Generation]]:
        """Generations for every planned request, ``planned[i].n`` of them, in index order.

        Each request counts in the ledger under its own ``stage``, else ``stage``, else
        the stage the ledger is in (:meth:`Ledger.stage`), else ``description``. Raises
        :class:`RequestsFailed` (:class:`BudgetReached` when the cost budget stopped
        dispatching) after everything else was generated and cached, and
        :class:`~credo.models.deadline.DeadlineExceeded` when this thread's deadline passes.
        """
        stats = ExecutionStats()
        keys = [self.key(p.request) for p in planned]
        default_stage = stage or self.ledger.current_stage or description
        errors: list[str] = []
        started = time.time()
        try:
            missing, template, stage_of = self._plan_missing(planned, keys, default_stage,
                                                             stats)
            for _ in range(FLIGHT_PASSES):
                missing = self._one_pass(missing, template, stage_of, description, stats,
                                         errors)
                if not missing:
                    break
        finally:
            self._record(stats, description, started)
        log.info(
            "%s: %d samples requested, %d cached, %d generated in %d calls (%.1f s)",
            description,
            stats.requested_samples,
            stats.cached_samples,
            stats.generated_samples,
            stats.backend_calls,
            stats.seconds,
        )
        if not errors and not missing:
            return [self.store.get(k, range(p.n)) for k, p in zip(keys, planned, strict=True)]
        if not errors:  # only samples other calls claimed and failed to get, every pass
            stats.failed_requests += len(missing)
            errors.append(f"{len(missing)} requests failed in another question's calls")
        results: list[list[Generation] | None] = []
        for k, p in zip(keys, planned, strict=True):
            have = self.store.cached_indices(k)
            results.append(self.store.get(k, range(p.n)) if have >= set(range(p.n)) else None)
        if stats.budget_skipped:
            raise BudgetReached(planned, results, errors, self.ledger)
        raise RequestsFailed(planned, results, errors)

    @property
    def last_stats(self) -> ExecutionStats | None:
        """The counts of this thread's last :meth:`execute` call (None before one)."""
        return getattr(self._local, "last", None)

    def _record(self, stats: ExecutionStats, description: str, started: float) -> None:
        """Keep ``stats`` in the history, as this thread's last call and in its usage
        scope (whose hook is told)."""
        with self._totals_lock:
            self.history.append(stats)
            self.totals.add_stats(stats)
        self._local.last = stats
        scope = _SCOPE.get()
        for each in scope.chain() if scope is not None else ():
            each.stats.add_stats(stats)
            if each.on_call is not None:
                each.on_call(description, stats, started, time.time())

    def _one_pass(
        self,
        missing: dict[str, list[int]],
        template: dict[str, GenerationRequest],
        stage_of: dict[str, str],
        description: str,
        stats: ExecutionStats,
        errors: list[str],
    ) -> dict[str, list[int]]:
        """Generate the ``missing`` samples nobody else is generating, wait for the
        others', and return those still missing that another call claimed (it failed:
        the next pass takes them over). The samples the others got count as cached."""
        mine, theirs = self._flights.claim(missing)
        blocks = [
            Block(k, start, template[k].model_copy(
                update={"seed": sample_seed(k, start), "n": size}), stage_of[k])
            for k, indices in mine.items()
            for start, size in sample_blocks(sorted(indices), self.max_block)
        ]
        try:
            if blocks and self.replay:
                errors += self._not_cached(blocks, stats)
            elif blocks:
                errors += self._run_blocks(blocks, description, stats)
        finally:
            self._flights.release(mine)
        if not theirs:
            return {}
        self._flights.wait(theirs)
        still: dict[str, list[int]] = {}
        for key in {k for k, _ in theirs}:
            have = self.store.cached_indices(key)
            wanted = [i for k, i in theirs if k == key]
            got = sum(i in have for i in wanted)
            stats.cached_samples += got
            scope = _SCOPE.get()
            for each in scope.chain() if scope is not None else ():
                each.note(key, [i for i in wanted if i in have], generated=False)
            self.ledger.count(stage_of[key], self.model.identity, cached_samples=got)
            lost = [i for i in wanted if i not in have]
            if lost:
                still[key] = lost
        return still

    def _plan_missing(
        self,
        planned: Sequence[PlannedRequest],
        keys: list[str],
        default_stage: str,
        stats: ExecutionStats,
    ) -> tuple[dict[str, list[int]], dict[str, GenerationRequest], dict[str, str]]:
        """The missing sample indices of every distinct key (the largest ``n`` asked for
        it), with each key's request and ledger stage, counting requests, samples and
        cached samples per stage in the ledger."""
        wanted: dict[str, int] = {}
        template: dict[str, GenerationRequest] = {}
        stage_of: dict[str, str] = {}
        for k, p in zip(keys, planned, strict=True):
            wanted[k] = max(wanted.get(k, 0), p.n)
            template.setdefault(k, p.request)
            stage_of.setdefault(k, p.stage or default_stage)
        stats.requests += len(wanted)
        stats.samples += sum(wanted.values())
        identity = self.model.identity
        missing: dict[str, list[int]] = {}
        scope = _SCOPE.get()
        for k, n in wanted.items():
            cached = self.store.cached_indices(k)
            absent = [i for i in range(n) if i not in cached]
            for each in scope.chain() if scope is not None else ():
                each.note(k, [i for i in range(n) if i in cached], generated=False)
            stats.cached_samples += n - len(absent)
            self.ledger.count(stage_of[k], identity, requests=1, samples=n,
                              cached_samples=n - len(absent))
            if absent:
                missing[k] = absent
        return missing, template, stage_of

    @staticmethod
    def _not_cached(blocks: list[Block], stats: ExecutionStats) -> list[str]:
        """Fail every request of ``blocks`` with no model call (replay from the cache)."""
        keys = {b.key for b in blocks}
        stats.failed_requests += len(keys)
        return [f"{len(keys)} requests are not in the cache (replay: no model call)"]

    def close(self) -> None:
        """Release what the executor holds beyond the model (nothing, locally; a Ray
        executor's actors). The model and the store belong to whoever made them."""

    def _run_blocks(
        self, blocks: list[Block], description: str, stats: ExecutionStats
    ) -> list[str]:
        """Run the blocks, commit each as it completes; the messages of failed blocks.

        Without a cost budget every block goes to the backend at once. With one, blocks go
        in waves of the backend's concurrency, and no wave starts once the budget is
        reached: at most one wave's cost goes past it.
        """
        errors: list[str] = []
        retries_before = int(getattr(self.model, "retries", 0) or 0)
        t0 = time.perf_counter()
        with SampleProgress(description, sum(b.request.n for b in blocks),
                            self.show_progress) as progress:
            waves = self._waves(blocks)
            deadline = current_deadline()
            for w, wave in enumerate(waves):
                if deadline is not None:
                    deadline.check()
                if self.ledger.budget_reached:
                    self._stop_for_budget(waves[w:], stats, errors)
                    break
                suspect: list[tuple[Block, list[Generation]]] = []
                received: list[tuple[Block, object]] = []
                for idx, gens in self.model.generate([b.request for b in wave]):
                    received.append((wave[idx], gens))
                    if isinstance(gens, GenerationError):
                        self._failed(gens, stats, errors)
                    elif any(g.text == "" for g in gens):
                        suspect.append((wave[idx], gens))
                    else:
                        self._commit(wave[idx], gens, stats)
                        progress.advance(len(gens))
                self._bill(received, stats)  # once the call ended: failures' usage is final
                if suspect:
                    self._recheck_empty(suspect, stats, errors, progress)
        stats.seconds = time.perf_counter() - t0
        stats.retries += int(getattr(self.model, "retries", 0) or 0) - retries_before
        return errors

    def _recheck_empty(
        self,
        suspect: list[tuple[Block, list[Generation]]],
        stats: ExecutionStats,
        errors: list[str],
        progress: SampleProgress,
    ) -> None:
        """Ask again, with the same seeds, the empty samples of blocks that came back
        with one: one empty reply may be a server's glitch,
        and no glitch decides what is cached.

        The empty samples of a block are asked again (each run of consecutive ones one
        request, sample ``i`` seeded ``sample_seed(key, i)`` as ever) up to the
        backend's retry budget (:func:`empty_rounds`: its ``max_retries``) times; the
        first text a sample gets wins, and a block is cached once none of its samples is
        empty. A sample empty every time is cached as it is: on a backend that
        reproduces seeds (``capabilities.seeded``) it is the seed's real sample; on one
        that does not it is marked unverified (:attr:`ExecutionStats.unverified_empty`).
        Each request asked again counts one retry; a retry that fails fails its block.
        """
        seeded = self.model.capabilities.seeded
        pending = dict(enumerate(suspect))
        for _ in range(empty_rounds(self.model)):
            self._ask_empty_again(pending, stats, errors)
            for i in [i for i, (_, gens) in pending.items() if all(g.text for g in gens)]:
                block, gens = pending.pop(i)
                self._commit(block, gens, stats)
                progress.advance(len(gens))
            if not pending:
                return
        for block, gens in pending.values():
            self._commit(block, gens, stats)
            if not seeded:
                empty = [block.start + j for j, g in enumerate(gens) if g.text == ""]
                self.store.mark_unverified_empty(block.key, empty)
                stats.unverified_empty += len(empty)
            progress.advance(len(gens))

    def _ask_empty_again(
        self,
        pending: dict[int, tuple[Block, list[Generation]]],
        stats: ExecutionStats,
        errors: list[str],
    ) -> None:
        """One round of :meth:`_recheck_empty`: ask the empty samples of every pending
        block again and fill in the texts that came; a block one of whose requests
        failed leaves ``pending`` (failed)."""
        asks = [(i, j, req) for i, (block, gens) in pending.items()
                for j, req in self._empty_asks(block, gens)]
        stats.retries += len(asks)
        log.info("asking %d requests again with the same seeds: a sample came back empty",
                 len(asks))
        received: list[tuple[Block, object]] = []
        failed: set[int] = set()
        for idx, gens in self._generate([req for _, _, req in asks], stats):
            i, j, req = asks[idx]
            block, before = pending[i]
            received.append((block, gens))
            if i in failed:
                continue
            if isinstance(gens, GenerationError):
                failed.add(i)
                self._failed(gens, stats, errors)
                continue
            if len(gens) != req.n:
                raise RuntimeError(
                    f"backend {self.model.identity} returned {len(gens)} samples for a"
                    f" request of n={req.n} (key {block.key[:12]})"
                )
            pending[i] = (block, _fill_empty(before, j, gens))
        self._bill(received, stats)
        for i in failed:
            del pending[i]

    def _generate(
        self, requests: list[GenerationRequest], stats: ExecutionStats
    ) -> Iterator[tuple[int, list[Generation] | GenerationError]]:
        """The backend's outcomes for ``requests`` (empty samples asked again): this
        process's model here (its retries are counted by :meth:`_run_blocks`); a Ray
        executor runs them on an actor."""
        return self.model.generate(requests)

    def _empty_asks(
        self, block: Block, gens: list[Generation]
    ) -> list[tuple[int, GenerationRequest]]:
        """The requests that ask the empty samples of ``block`` again: per run of
        consecutive empty positions ``j..``, its offset ``j`` in the block and the request
        of those samples, seeded ``sample_seed(key, start + j)``."""
        empty = [j for j, g in enumerate(gens) if g.text == ""]
        return [
            (j, block.request.model_copy(
                update={"seed": sample_seed(block.key, block.start + j), "n": size}))
            for j, size in sample_blocks(empty, self.max_block)
        ]

    def _waves(self, blocks: list[Block]) -> list[list[Block]]:
        """All blocks in one wave without a budget; else waves of the backend's
        ``max_concurrency`` (8 when it has none)."""
        if self.ledger.max_cost_usd is None:
            return [blocks]
        size = getattr(self.model, "max_concurrency", None)
        size = size if isinstance(size, int) and size >= 1 else 8
        return [blocks[i : i + size] for i in range(0, len(blocks), size)]

    def _stop_for_budget(
        self, waves: list[list[Block]], stats: ExecutionStats, errors: list[str]
    ) -> None:
        """Leave the blocks of ``waves`` undispatched: the cost budget is reached."""
        stats.budget_skipped = sum(len(w) for w in waves)
        self.ledger.stopped = True
        errors.append(
            f"cost budget reached ({self.ledger.cost_usd:.6g} of max_cost_usd"
            f" {self.ledger.max_cost_usd:g} USD)"
        )
        log.info(  # the run's caller says it once (credo run: one line, exit 3)
            "cost budget reached (%.6g of %g USD): %d blocks of samples not dispatched",
            self.ledger.cost_usd, self.ledger.max_cost_usd, stats.budget_skipped,
        )

    def _commit(self, block: Block, gens: list[Generation], stats: ExecutionStats) -> None:
        """Write one completed block to the store (one transaction) and count it."""
        self._commit_many([(block, gens)], stats)

    def _commit_many(
        self, done: Sequence[tuple[Block, list[Generation]]], stats: ExecutionStats
    ) -> None:
        """Cache completed blocks in one transaction and count their samples in ``stats``
        and the ledger (their calls and tokens are counted as they arrive:
        :meth:`_bill`)."""
        for block, gens in done:
            if len(gens) != block.request.n:
                raise RuntimeError(
                    f"backend {self.model.identity} returned {len(gens)} samples for a"
                    f" request of n={block.request.n} (key {block.key[:12]})"
                )
        identity = self.model.identity
        written = self.store.put_many(
            [(b.key, identity, b.request, b.start, gens) for b, gens in done]
        )
        stats.generated_samples += written
        scope = _SCOPE.get()
        for block, gens in done:
            self.ledger.count(block.stage, identity, generated_samples=len(gens))
            for each in scope.chain() if scope is not None else ():
                each.note(block.key, range(block.start, block.start + len(gens)),
                          generated=True)

    def _bill(self, received: Sequence[tuple[Block, object]], stats: ExecutionStats) -> None:
        """Count what the backend calls of ``received`` (blocks and what the backend
        yielded for each: generations or a failure) cost, in ``stats`` and under each
        block's ledger stage: the ``usage`` a metered backend attached
        (every request it sent, retries included, with the tokens the server reported),
        else :func:`counted_usage` of the generations."""
        identity = self.model.identity
        parallel = self.model.capabilities.parallel_samples
        for block, outcome in received:
            usage = usage_of(outcome) or counted_usage(outcome, parallel)
            stats.calls += usage.calls
            stats.prompt_tokens += usage.prompt_tokens
            stats.completion_tokens += usage.completion_tokens
            self.ledger.count(block.stage, identity, calls=usage.calls,
                              prompt_tokens=usage.prompt_tokens,
                              completion_tokens=usage.completion_tokens)

    @staticmethod
    def _failed(
        failure: GenerationError | str, stats: ExecutionStats, errors: list[str]
    ) -> None:
        """Count one block whose request failed after the backend's retries (and keep
        the backend's error in this thread's usage scope)."""
        message = str(failure)
        stats.failed_requests += 1
        errors.append(message)
        scope = _SCOPE.get()
        error = failure if isinstance(failure, GenerationError) else GenerationError(message)
        for each in scope.chain() if scope is not None else ():
            each.failures.append(error)
        log.info("request failed after retries: %s", message)  # -v; the CLI counts them


EMPTY_RETRIES = 2
"""How often an empty sample is asked again from a backend that names no ``max_retries``."""


def empty_rounds(model: Model) -> int:
    """How often an empty sample of ``model`` is asked again (the
    backend's retry budget, seeded or not): its ``max_retries`` when it has one (at
    least once), else :data:`EMPTY_RETRIES`."""
    rounds = getattr(model, "max_retries", None)
    return max(1, rounds) if isinstance(rounds, int) else EMPTY_RETRIES


def counted_usage(outcome: object, parallel: bool) -> Usage:
    """The usage of a backend call counted from its generations, for a backend that
    attaches none: one call per block (``parallel``: it sends ``n``), else one per
    sample; prompt tokens once per call, completion tokens summed. A failure counts
    nothing (no usage is known)."""
    if isinstance(outcome, GenerationError) or not isinstance(outcome, list) or not outcome:
        return Usage()
    gens: list[Generation] = outcome
    completion = sum(g.completion_tokens for g in gens)
    if parallel:
        return Usage(1, gens[0].prompt_tokens, completion)
    return Usage(len(gens), sum(g.prompt_tokens for g in gens), completion)


def _fill_empty(
    before: list[Generation], offset: int, again: list[Generation]
) -> list[Generation]:
    """``before`` with each empty sample at positions ``offset ..`` replaced by the same
    sample of ``again`` (a reply asking those samples again, same seeds)."""
    out = list(before)
    for j, gen in enumerate(again, start=offset):
        if out[j].text == "":
            out[j] = gen
    return out


def sample_blocks(indices: list[int], max_block: int) -> list[tuple[int, int]]:
    """Split sorted ``indices`` into runs of consecutive values of at most ``max_block``:
    the ``(start, size)`` of each backend call the executor makes for them."""
    out: list[tuple[int, int]] = []
    start = prev = None
    for i in indices:
        if start is not None and i == prev + 1 and i - start < max_block:
            prev = i
            continue
        if start is not None:
            out.append((start, prev - start + 1))
        start = prev = i
    if start is not None:
        out.append((start, prev - start + 1))
    return out


_blocks = sample_blocks  # the name before it was public

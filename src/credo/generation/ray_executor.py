"""Run a generation plan on Ray actors; the driver alone writes the cache.

:class:`RayExecutor` is an :class:`~credo.generation.executor.Executor` whose blocks run
on Ray actors instead of this process. Everything that decides *what* is generated stays
in the driver and is the local executor's code: request keys, the cached indices, the
blocks of consecutive missing indices, the seed ``sample_seed(key, start)`` of each
block. Only the backend call moves:

* **Actors.** ``workers`` actors per model, each holding one backend built once from a
  :class:`~credo.generation.pool.ModelSource` (an embedded model loaded once per actor,
  a client of a served model, or a handed-in model shipped whole). Each actor checks
  that its backend's identity is the driver's, so the cache keys the driver computes are
  the keys of what the actor generates. Actors are started on the first block (a fully
  cached rerun starts none) and live until :meth:`RayExecutor.close`.
* **Calls and backpressure.** Blocks travel in *calls* of up to ``blocks_per_call``
  blocks (fewer when the queue is short, so a small plan still spreads over every
  actor): one Ray task each, which the actor runs through its backend's own concurrent
  ``generate``. At most ``in_flight`` calls are outstanding per actor (a threaded actor
  runs them side by side); the next call goes to the least loaded live actor when one of
  its calls returns, so the driver never queues the whole plan in Ray.
* **Driver writes.** Calls stream back as they complete (``ray.wait``) and the driver
  commits the blocks of each in one transaction
  (:meth:`~credo.generation.store.GenerationStore.put_many`): resume, deduplication
  (``INSERT OR IGNORE`` on (key, index)) and the seed contract are the store's,
  unchanged; an interrupted run loses at most the calls in flight. Sending blocks in
  calls and committing them together is what keeps the driver ahead of many workers:
  a call and a transaction per block cost the driver ~1 ms a block on a small machine,
  calls of 32 one-sample blocks ~0.12 ms a block, planning and row writes included
  (docs/benchmarks.md, "Scale").
* **Failure.** The blocks of a call whose actor dies (killed, out of memory, its node
  lost) were never written; they go back to the queue and run on other live actors, at most
  :data:`MAX_ATTEMPTS` times (a block that kills every actor it touches must not kill
  them all). A block whose backend gave up after its retries is a failed request, as
  locally (:class:`~credo.generation.executor.RequestsFailed`, exit 3, resumable); so is
  every block left when no actor is alive. Dead actors are replaced at the next
  ``execute`` call. An exception the backend raises (a bad key, a prompt too long) is
  raised in the driver, as locally.
* **Empty samples.** A block that comes back with an empty sample is not committed as it
  is: once the plan's calls are in, its empty samples are asked again on an actor, with
  the same seeds, exactly as the local executor does.

Ray is an optional dependency (``pip install 'credo[ray]'``), imported only here and only
when a Ray executor runs.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter, deque
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from credo.errors import UserError
from credo.generation.executor import Block, ExecutionStats, Executor, SampleProgress
from credo.types import Generation, GenerationError, GenerationRequest, Usage, usage_of

if TYPE_CHECKING:
    from credo.config import ExecutorConfig
    from credo.models.base import Model

log = logging.getLogger(__name__)

__all__ = [
    "MAX_ATTEMPTS", "BackendActor", "BackendSource", "RayExecutor", "RaySession", "shippable",
]


class BackendSource(Protocol):
    """What an actor builds its backend from (:class:`credo.generation.pool.ModelSource`:
    a registry spec and options, or a model shipped whole); picklable."""

    def build(self) -> Model: ...


MAX_ATTEMPTS = 3
"""Most times one block is sent to an actor that then dies before answering."""

_CLOSE_TIMEOUT_S = 30.0
_START_TIMEOUT_S = 600.0
"""How long new actors may take to be placed and build their backend (an autoscaling
cluster adds nodes in minutes; resources no node has never come)."""


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UserError(
            "executor kind 'ray' needs Ray: pip install 'credo[ray]' (executor.kind)"
        ) from None
    return ray


def shippable(model: Model) -> bool:
    """Whether ``model`` can be pickled to a Ray actor (a handed-in model)."""
    ray = _import_ray()
    try:
        ray.cloudpickle.dumps(model)
    except Exception:
        return False
    return True


class RaySession:
    """Ray for one pool or study: connects on first use, shuts down only what it started.

    With ``address`` None a local instance starts with ``workers`` CPUs (no dashboard);
    ``"auto"`` joins the cluster this machine belongs to; any other address is passed to
    ``ray.init``. A Ray already initialised in this process (a test fixture, a study
    that runs many pools, a user's own ``ray.init``) is used as it is.
    """

    def __init__(self, config: ExecutorConfig) -> None:
        self.config = config
        self.started = False

    def ensure(self) -> Any:
        """The ``ray`` module, initialised."""
        ray = _import_ray()
        if not ray.is_initialized():
            if self.config.address is None:
                ray.init(num_cpus=self.config.workers, include_dashboard=False,
                         log_to_driver=False)
            else:
                ray.init(address=self.config.address, log_to_driver=False)
            self.started = True
            log.info("started Ray (%s)", self.config.address or "local")
        return ray

    def threads_per_actor(self) -> int | None:
        """Threads each embedded model's actor computes with on a local instance: this
        machine's CPUs shared among the ``workers`` actors (at least 1). Without it every
        actor's llama.cpp took all the CPUs: on two cores a 4-item SmolLM2 run took 46 s
        on two actors against 29 s in one process (31 s with the CPUs shared), and 10
        minutes while another run loaded the machine. None on a cluster (each node's own count) and
        when the model's options set ``n_threads``."""
        if self.config.address is not None:
            return None
        return max(1, (os.cpu_count() or 1) // self.config.workers)

    def close(self) -> None:
        """Shut Ray down if this session started it."""
        if self.started:
            import ray

            if ray.is_initialized():
                ray.shutdown()
            self.started = False

    def __enter__(self) -> RaySession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class BackendActor:
    """The body of a Ray actor: one backend, built once from its source, serving blocks
    (several at once: the actor is threaded, ``max_concurrency = in_flight``)."""

    def __init__(self, source: BackendSource, threads: int | None = None) -> None:
        import threading

        self._model = source.build()
        if threads is not None and _may_set_threads(self._model, source):
            self._model.n_threads = threads  # type: ignore[attr-defined]
        self._lock = threading.Lock()
        self._retries_reported = 0

    def identity(self) -> str:
        """The backend's identity (the driver checks it against its own)."""
        return self._model.identity

    def generate(
        self, requests: list[Any]
    ) -> tuple[list[list[Generation] | _Failure], int]:
        """One call: per block its generations (a metered backend's carry their usage),
        or the failure's message and usage when the backend gave up after its retries;
        and the backend's retries since the previous answer."""
        outcomes: list[list[Generation] | _Failure] = [
            _Failure("the backend returned nothing")] * len(requests)
        for i, gens in self._model.generate(requests):
            outcomes[i] = (_Failure(str(gens), usage_of(gens))
                           if isinstance(gens, GenerationError) else gens)
        with self._lock:
            total = int(getattr(self._model, "retries", 0) or 0)
            retries, self._retries_reported = total - self._retries_reported, total
        return outcomes, retries

    def close(self) -> None:
        """Close the backend (a served client's loop, an embedded server)."""
        self._model.close()


def _may_set_threads(model: Model, source: BackendSource) -> bool:
    """Whether an actor may set ``model``'s thread count: it has one (an embedded
    model), it was built here from a spec (not shipped whole) and its options leave it
    unset."""
    options = dict(getattr(source, "options", ()) or ())
    return (
        hasattr(model, "n_threads")
        and getattr(source, "model", None) is None
        and "n_threads" not in options
    )


class RayExecutor(Executor):
    """An :class:`Executor` whose blocks run on Ray actors (module docstring).

    ``model`` is the driver's copy of the backend (identity, capabilities; it generates
    nothing); ``source`` says how each actor builds its own; ``session`` connects to Ray.
    ``workers`` actors with at most ``in_flight`` calls of up to ``blocks_per_call``
    blocks each come from the session's :class:`~credo.config.ExecutorConfig`.
    """

    def __init__(self, *args: Any, source: BackendSource, session: RaySession,
                 **kwargs: Any) -> None:
        """``args`` and ``kwargs``: :class:`Executor`'s (``model``, ``store``,
        ``run_seed``, ``max_block``, ``show_progress``, ``ledger``)."""
        super().__init__(*args, **kwargs)
        self.source = source
        self.session = session
        self.workers = session.config.workers
        self.in_flight = session.config.in_flight
        self.blocks_per_call = session.config.blocks_per_call
        self.actors: list[Any] = []
        self.lost_actors = 0
        self.reassigned_blocks = 0

    # ------------------------------------------------------------------ actors

    def start_actors(self) -> list[Any]:
        """Start actors until ``workers`` are alive; the live actors."""
        ray = self.session.ensure()
        missing = self.workers - len(self.actors)
        if missing <= 0:
            return self.actors
        # Resources only when asked for: an actor given any holds a CPU for its lifetime,
        # one given none holds nothing once placed (several models' actors share a node).
        gpus = self.session.config.num_gpus
        remote = ray.remote(BackendActor).options(
            max_concurrency=self.in_flight, **({"num_gpus": gpus} if gpus else {})
        )
        threads = self.session.threads_per_actor()
        new = [remote.remote(self.source, threads) for _ in range(missing)]
        try:
            identities = ray.get([a.identity.remote() for a in new], timeout=_START_TIMEOUT_S)
        except ray.exceptions.RayError as e:
            for a in new:
                ray.kill(a)
            raise UserError(
                f"Ray workers could not build {self.model.identity}: {_first_line(e)}"
            ) from None
        wrong = {i for i in identities if i != self.model.identity}
        if wrong:
            for a in new:
                ray.kill(a)
            raise UserError(
                f"Ray workers built {sorted(wrong)[0]}, not {self.model.identity}: the"
                " workers see other weights or another server"
            )
        self.actors.extend(new)
        log.info("%d Ray actors hold %s", len(self.actors), self.model.identity)
        return self.actors

    def close(self) -> None:
        """Close every actor's backend, then end the actors."""
        if not self.actors:
            return
        import ray

        if ray.is_initialized():
            closing = [a.close.remote() for a in self.actors]
            ray.wait(closing, num_returns=len(closing), timeout=_CLOSE_TIMEOUT_S)
            for a in self.actors:
                ray.kill(a)
        self.actors = []

    # ------------------------------------------------------------------ blocks

    def _run_blocks(
        self, blocks: list[Block], description: str, stats: ExecutionStats
    ) -> list[str]:
        """Send the blocks to the actors in calls with backpressure, commit each call's
        blocks as it returns."""
        ray = self.session.ensure()
        self.start_actors()
        run = _Dispatch(ray, self.actors, self.in_flight, self.blocks_per_call, len(blocks))
        errors: list[str] = []
        suspect: list[tuple[Block, list[Generation]]] = []
        t0 = time.perf_counter()
        with SampleProgress(description, sum(b.request.n for b in blocks),
                            self.show_progress) as progress:
            while run.pending or run.running:
                run.fill(lambda actor, bs: actor.generate.remote([blocks[b].request for b in bs]))
                if not run.running:  # no live actor is left
                    for b in run.drain():
                        self._failed(f"no Ray worker left to run a block of {blocks[b].key[:12]}"
                                     f" ({self.lost_actors} lost)", stats, errors)
                    break
                for call, outcome in run.collect():
                    self._settle(blocks, call, outcome, run, stats, errors, progress, suspect)
            self.actors = run.live_actors()
            if suspect:  # asked again on the actors, as locally
                self._recheck_empty(suspect, stats, errors, progress)
        stats.seconds = time.perf_counter() - t0
        return errors

    def _generate(
        self, requests: list[GenerationRequest], stats: ExecutionStats
    ) -> Iterator[tuple[int, list[Generation] | GenerationError]]:
        """Run ``requests`` as one call on a live actor (empty samples asked again):
        their outcomes as a backend yields them; every one fails when no actor is left
        or the actor dies."""
        import ray

        if not self.actors:
            lost = GenerationError(f"no Ray worker left ({self.lost_actors} lost)")
            yield from ((i, lost) for i in range(len(requests)))
            return
        actor = self.actors[0]
        try:
            results, retries = ray.get(actor.generate.remote(list(requests)))
        except ray.exceptions.RayError as e:
            self.lost_actors += 1
            self.actors = [a for a in self.actors if a is not actor]
            lost = GenerationError(f"a Ray worker was lost: {_first_line(e)}")
            yield from ((i, lost) for i in range(len(requests)))
            return
        stats.retries += retries
        for i, gens in enumerate(results):
            yield i, (GenerationError(gens.message, i, gens.usage)
                      if isinstance(gens, _Failure) else gens)

    def _settle(
        self,
        blocks: list[Block],
        call: list[int],
        outcome: Any,
        run: _Dispatch,
        stats: ExecutionStats,
        errors: list[str],
        progress: SampleProgress,
        suspect: list[tuple[Block, list[Generation]]],
    ) -> None:
        """Commit the blocks of one returned call; fail or requeue them; a block with an
        empty sample goes to ``suspect`` (asked again once the call's blocks are in)."""
        if isinstance(outcome, _ActorLost):
            self.lost_actors += outcome.newly_lost
            for b in call:
                if run.attempts[b] >= MAX_ATTEMPTS:
                    self._failed(f"block of {blocks[b].key[:12]} lost with {run.attempts[b]}"
                                 f" Ray workers: {outcome.reason}", stats, errors)
                else:
                    self.reassigned_blocks += 1
                    run.requeue(b)
            return
        results, retries = outcome
        stats.retries += retries
        done = []
        self._bill([(blocks[b], gens) for b, gens in zip(call, results, strict=True)], stats)
        for b, gens in zip(call, results, strict=True):
            if isinstance(gens, _Failure):
                self._failed(gens.message, stats, errors)
            elif any(g.text == "" for g in gens):
                suspect.append((blocks[b], gens))
            else:
                done.append((blocks[b], gens))
        if done:
            self._commit_many(done, stats)
            progress.advance(sum(len(gens) for _, gens in done))


class _Failure(NamedTuple):
    """A block whose backend gave up: its message, and the usage of the calls it sent
    (a metered backend's; ``None``: not known)."""

    message: str
    usage: Usage | None = None


class _ActorLost:
    """The outcome of a call whose actor died before answering."""

    def __init__(self, reason: str, newly_lost: int) -> None:
        self.reason = reason
        self.newly_lost = newly_lost


class _Dispatch:
    """Which blocks run on which actor: a queue of block indices, the calls in flight,
    each actor's load (at most ``in_flight`` calls), and the actors known dead."""

    def __init__(
        self, ray: Any, actors: list[Any], in_flight: int, per_call: int, n_blocks: int
    ) -> None:
        self.ray = ray
        self.actors = list(actors)
        self.in_flight = in_flight
        self.per_call = per_call
        self.pending: deque[int] = deque(range(n_blocks))
        self.running: dict[Any, tuple[int, list[int]]] = {}  # ref -> (actor slot, blocks)
        self.load = [0] * len(actors)
        self.dead: set[int] = set()
        self.attempts: Counter[int] = Counter()

    def fill(self, submit: Any) -> None:
        """Give pending blocks to the least loaded live actors, up to ``in_flight`` calls
        each; a call takes at most ``per_call`` blocks and no more than an even share of
        the queue over the free call slots."""
        while self.pending:
            slots = [s for s in range(len(self.actors))
                     if s not in self.dead and self.load[s] < self.in_flight]
            if not slots:
                return
            free = sum(self.in_flight - self.load[s] for s in slots)
            size = min(self.per_call, -(-len(self.pending) // free))
            slot = min(slots, key=self.load.__getitem__)
            call = [self.pending.popleft() for _ in range(size)]
            for b in call:
                self.attempts[b] += 1
            self.running[submit(self.actors[slot], call)] = (slot, call)
            self.load[slot] += 1

    def collect(self) -> list[tuple[list[int], Any]]:
        """Wait for at least one call; every call that is back: (its blocks, outcome),
        the outcome being the actor's answer or :class:`_ActorLost`."""
        refs = list(self.running)
        ready, rest = self.ray.wait(refs, num_returns=1)
        if rest:
            more, _ = self.ray.wait(rest, num_returns=len(rest), timeout=0)
            ready += more
        out = []
        for ref in ready:
            slot, call = self.running.pop(ref)
            self.load[slot] -= 1
            try:
                out.append((call, self.ray.get(ref)))
            except self.ray.exceptions.RayActorError as e:
                out.append((call, _ActorLost(_first_line(e), self._lose(slot))))
            except self.ray.exceptions.RayTaskError as e:  # the backend raised
                cause = getattr(e, "cause", None)
                raise (cause if isinstance(cause, Exception) else e) from None
        return out

    def requeue(self, b: int) -> None:
        """Run block ``b`` again, before the blocks not yet tried."""
        self.pending.appendleft(b)

    def drain(self) -> list[int]:
        """Take every pending block out of the queue."""
        out = list(self.pending)
        self.pending.clear()
        return out

    def live_actors(self) -> list[Any]:
        """The actors not known dead."""
        return [a for s, a in enumerate(self.actors) if s not in self.dead]

    def _lose(self, slot: int) -> int:
        """Mark the actor in ``slot`` dead (ending it, in case it only hangs); 1 if it
        was not known dead yet."""
        if slot in self.dead:
            return 0
        self.dead.add(slot)
        log.warning("a Ray worker died; its blocks run on the %d others",
                    len(self.actors) - len(self.dead))
        try:
            self.ray.kill(self.actors[slot])
        except Exception:  # already gone
            pass
        return 1


def _first_line(error: BaseException) -> str:
    """The first non-empty line of an error's message."""
    lines = [ln.strip() for ln in str(error).splitlines() if ln.strip()]
    return lines[0] if lines else type(error).__name__

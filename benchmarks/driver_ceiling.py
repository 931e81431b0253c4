"""The driver's ceiling under the Ray executor: what one process can commit and dispatch.

With ``--executor ray`` the workers generate and the driver alone plans, dispatches and
writes the cache, so the driver's per-block cost bounds the whole study however many
workers there are. Three measurements, no model loaded (docs/benchmarks.md, "Scale"):

(a) ``store``     :meth:`GenerationStore.put` of realistic blocks into a cache already
                  holding ``--prefill`` rows: blocks of 1 sample (a judge verdict, a
                  perturbed sample) and of 16 (an original request's block), short
                  answers (~80 characters) or chains of thought (~1,200), without or with
                  top-5 logprobs of 32 tokens. Each put is one transaction, as in a run.
(b) ``plan``      the driver's reads per planned request: ``cached_indices`` before the
                  run and ``get`` of its samples after.
(c) ``ray``       Ray's dispatch cost per block: the Ray executor's own dispatch loop
                  (:class:`credo.generation.ray_executor._Dispatch`) with ``--workers``
                  actors whose backend answers at once (a no-op model), no store; then
                  the whole :meth:`RayExecutor.execute` with that backend, committing to a
                  fresh cache (the end-to-end ceiling: plan + dispatch + commit); each
                  with one block per Ray call and with 32 (``blocks_per_call``).

Usage::

    PYTHONPATH=src python benchmarks/driver_ceiling.py
    PYTHONPATH=src python benchmarks/driver_ceiling.py --only store --blocks 5000
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from credo.generation.store import GenerationStore, request_key
from credo.types import Capabilities, Generation, GenerationRequest, Message, TokenLogprob

PER_CALL = 32
"""Blocks per Ray call in the batched rows of (c) (the executor's default)."""
SHORT = "The total is 18 apples, since 7 + 11 = 18. Answer: 18. That is my final answer."
LONG = (SHORT + " ") * 15


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", choices=["store", "plan", "ray"], action="append")
    ap.add_argument("--blocks", type=int, default=3000, help="blocks timed per store case")
    ap.add_argument("--prefill", type=int, default=200_000, help="rows in the cache first")
    ap.add_argument("--workers", type=int, default=2, help="Ray actors (c)")
    ap.add_argument("--in-flight", type=int, default=8, help="calls per actor (c)")
    ap.add_argument("--ray-blocks", type=int, default=4000, help="blocks dispatched (c)")
    ap.add_argument("--progress", action="store_true", help="draw the progress bar (c)")
    args = ap.parse_args()
    parts = args.only or ["store", "plan", "ray"]
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs,"
          f" load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cache.sqlite"
        if "store" in parts or "plan" in parts:
            with GenerationStore(path) as store:
                prefill(store, args.prefill)
                if "store" in parts:
                    time_puts(store, args.blocks)
                if "plan" in parts:
                    time_plan_reads(store, args.blocks)
        if "ray" in parts:
            time_ray(Path(tmp), args.workers, args.in_flight, args.ray_blocks, args.progress)


def generation(text: str, logprobs: bool) -> Generation:
    """One sample as a backend returns it (with 32 tokens x top-5 logprobs if asked)."""
    lp = None
    if logprobs:
        lp = tuple(
            TokenLogprob(f"tok{i}", -0.1 * i, tuple((f"alt{k}", -0.1 * i - k) for k in range(5)))
            for i in range(32)
        )
    return Generation(text, "stop", 32, 120, lp, 0.05)


def request(i: int, tag: str = "q") -> GenerationRequest:
    """A distinct planned request (its own cache key)."""
    return GenerationRequest(messages=(Message(role="user", content=f"{tag} question {i}"),))


def prefill(store: GenerationStore, rows: int) -> None:
    """``rows`` samples in blocks of 16, so later inserts meet a realistic B-tree."""
    gens = [generation(SHORT, False)] * 16
    t0 = time.perf_counter()
    for i in range(rows // 16):
        req = request(i, "prefill")
        store.put(request_key("prefill", req, 0), "prefill", req, 0, gens)
    print(f"prefilled {rows} rows in {time.perf_counter() - t0:.1f} s")


def time_puts(store: GenerationStore, blocks: int) -> None:
    """(a) one ``put`` (one transaction) per block, per kind of block."""
    print("\n(a) GenerationStore.put, one transaction per block")
    print(f"{'samples/block':>13} {'text':>6} {'logprobs':>8} {'us/block':>9} {'blocks/s':>9}"
          f" {'samples/s':>10}")
    for size in (1, 16):
        for name, text in (("short", SHORT), ("long", LONG)):
            for lp in (False, True):
                gens = [generation(text, lp)] * size
                reqs = [request(i, f"{size}{name}{lp}") for i in range(blocks)]
                keys = [request_key("bench", r, 0) for r in reqs]
                t0 = time.perf_counter()
                for k, r in zip(keys, reqs, strict=True):
                    store.put(k, "bench", r, 0, gens)
                dt = time.perf_counter() - t0
                print(f"{size:>13} {name:>6} {lp!s:>8} {1e6 * dt / blocks:>9.0f}"
                      f" {blocks / dt:>9.0f} {size * blocks / dt:>10.0f}")


def time_plan_reads(store: GenerationStore, requests: int) -> None:
    """(b) ``cached_indices`` + ``get`` of a 16-sample request, per request."""
    keys = [request_key("prefill", request(i, "prefill"), 0) for i in range(requests)]
    t0 = time.perf_counter()
    for k in keys:
        store.cached_indices(k)
    t1 = time.perf_counter()
    for k in keys:
        store.get(k, range(16))
    t2 = time.perf_counter()
    print(f"\n(b) driver reads per request: cached_indices {1e6 * (t1 - t0) / requests:.0f} us,"
          f" get(16 samples) {1e6 * (t2 - t1) / requests:.0f} us")


class NoopModel:
    """A backend that answers every request at once with ``n`` copies of one sample."""

    identity = "noop"
    capabilities = Capabilities(False, 0, True, True, ("noop",))
    retries = 0

    def generate(
        self, requests: Sequence[GenerationRequest]
    ) -> Iterator[tuple[int, list[Generation]]]:
        for i, r in enumerate(requests):
            yield i, [generation(SHORT, False)] * r.n

    def close(self) -> None:
        pass


class NoopSource:
    """Builds a :class:`NoopModel` on the actor (pickled by value from ``__main__``)."""

    def build(self) -> NoopModel:
        return NoopModel()


def time_ray(tmp: Path, workers: int, in_flight: int, blocks: int, progress: bool) -> None:
    """(c) dispatch only, then the whole Ray executor, with a no-op backend; blocks sent
    one per call and ``PER_CALL`` per call."""
    import ray

    from credo.config import ExecutorConfig
    from credo.generation.executor import PlannedRequest
    from credo.generation.ray_executor import BackendActor, RayExecutor, RaySession, _Dispatch

    ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
    try:
        print(f"\n(c) Ray, {workers} actors, {in_flight} calls in flight each")
        actor = ray.remote(BackendActor).options(max_concurrency=in_flight)
        actors = [actor.remote(NoopSource()) for _ in range(workers)]
        ray.get([a.identity.remote() for a in actors])
        for size, per_call in ((1, 1), (16, 1), (1, PER_CALL), (16, PER_CALL)):
            reqs = [request(i).model_copy(update={"n": size}) for i in range(blocks)]
            run = _Dispatch(ray, actors, in_flight, per_call, blocks)
            t0 = time.perf_counter()
            while run.pending or run.running:
                run.fill(lambda a, bs, reqs=reqs: a.generate.remote([reqs[b] for b in bs]))
                run.collect()
            dt = time.perf_counter() - t0
            print(f"dispatch only, {size:>2} samples/block, {per_call:>2} blocks/call:"
                  f" {1e6 * dt / blocks:>4.0f} us/block, {blocks / dt:>6.0f} blocks/s")
        for a in actors:
            ray.kill(a)
        for size, per_call in ((1, 1), (16, 1), (1, PER_CALL), (16, PER_CALL), (1, 128)):
            config = ExecutorConfig(kind="ray", workers=workers, in_flight=in_flight,
                                    blocks_per_call=per_call)
            with GenerationStore(tmp / f"ray{size}-{per_call}.sqlite") as store:
                ex = RayExecutor(NoopModel(), store, max_block=16, show_progress=False,
                                 source=NoopSource(), session=RaySession(config))
                ex.show_progress = progress
                planned = [PlannedRequest(request(i, f"e{size}"), size) for i in range(blocks)]
                ex.start_actors()  # actor start-up (processes) is not the per-block cost
                t0 = time.perf_counter()
                ex.execute(planned)
                dt = time.perf_counter() - t0
                ex.close()
            print(f"RayExecutor.execute, {size:>2} samples/block, {per_call:>2} blocks/call:"
                  f" {1e6 * dt / blocks:>4.0f} us/block, {blocks / dt:>6.0f} blocks/s,"
                  f" {size * blocks / dt:>6.0f} samples/s")
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()

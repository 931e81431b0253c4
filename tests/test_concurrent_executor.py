"""One executor, one store and one ledger under several threads at once (the gateway
decides each question in a thread of its own): each sample generated once, counts that
add up, waits that end at their deadline and free the model's concurrency."""

from __future__ import annotations

import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from credo.errors import RequestsFailed
from credo.generation.executor import Executor, PlannedRequest, usage_scope
from credo.generation.ledger import Ledger
from credo.generation.store import GenerationStore
from credo.models.deadline import Deadline, DeadlineExceeded, deadline_scope
from credo.models.openai_compat import OpenAIModel
from credo.models.scripted import ScriptedModel
from credo.types import GenerationError, GenerationRequest, Message, SamplingParams
from fault_server import FaultServer


def _request(text: str, max_tokens: int = 8) -> GenerationRequest:
    return GenerationRequest(messages=(Message(role="user", content=text),),
                             params=SamplingParams(temperature=1.0, max_tokens=max_tokens))


class _Slow(ScriptedModel):
    """A scripted model that records every sample it draws and takes ``delay`` per call."""

    def __init__(self, delay: float = 0.05, fail_first: int = 0) -> None:
        super().__init__(lambda messages, seed: f"Answer: {seed % 5}")
        self.delay, self.fail_first = delay, fail_first
        self.drawn: Counter[tuple[str, int]] = Counter()

    def generate(self, requests):
        for index, request in enumerate(requests):
            time.sleep(self.delay)
            with self._lock:
                failing = self.fail_first > 0
                self.fail_first -= failing
            if failing:
                yield index, GenerationError("scripted failure", index, kind="http_500")
                continue
            with self._lock:
                for j in range(request.n):
                    self.drawn[(request.messages[0].content, request.seed + j)] += 1
            yield index, [self.sample(request, j) for j in range(request.n)]


def test_identical_requests_from_many_threads_draw_each_sample_once(tmp_path):
    """16 threads ask the same 8 samples at once: the model draws each once, every
    thread gets the same 8, and the thread-local counts say who generated and who read
    them from the cache (they add up to the ledger's)."""
    model = _Slow()
    store = GenerationStore(tmp_path / "c.sqlite")
    ex = Executor(model, store, show_progress=False)
    planned = [PlannedRequest(_request("same question"), 8)]
    barrier = threading.Barrier(16)

    def ask():
        barrier.wait()
        with usage_scope() as used:
            got = ex.execute(planned, stage="original")
        return [g.text for g in got[0]], used.stats

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(lambda _: ask(), range(16)))
    assert max(model.drawn.values()) == 1 and sum(model.drawn.values()) == 8
    assert len({tuple(texts) for texts, _ in results}) == 1
    generated = sum(s.generated_samples for _, s in results)
    cached = sum(s.cached_samples for _, s in results)
    assert generated == 8 and generated + cached == 16 * 8
    usage = ex.ledger.usage("original", model.identity)
    assert (usage.generated_samples, usage.cached_samples, usage.samples) == (8, 15 * 8, 16 * 8)


def test_a_waiter_takes_over_samples_whose_owner_failed(tmp_path):
    """The thread that claimed the samples fails them; the thread waiting for them
    generates them itself instead of failing (its question is not another's)."""
    model = _Slow(delay=0.1, fail_first=1)
    ex = Executor(model, GenerationStore(tmp_path / "c.sqlite"), show_progress=False,
                  max_block=4)
    planned = [PlannedRequest(_request("q"), 4)]
    barrier = threading.Barrier(2)

    def ask():
        barrier.wait()
        try:
            return [g.text for g in ex.execute(planned)[0]]
        except RequestsFailed:
            return None

    with ThreadPoolExecutor(2) as pool:
        outcomes = list(pool.map(lambda _: ask(), range(2)))
    assert outcomes.count(None) == 1  # the owner's call failed
    key = ex.key(_request("q"))
    got = next(o for o in outcomes if o is not None)
    assert got == [g.text for g in ex.store.get(key, range(4))]
    assert got == [f"Answer: {(seed) % 5}" for _, seed in sorted(model.drawn)]
    assert sum(model.drawn.values()) == 4 and max(model.drawn.values()) == 1


def test_the_usage_scope_keeps_the_backends_failure_kind(tmp_path):
    model = _Slow(delay=0.0, fail_first=1)
    ex = Executor(model, GenerationStore(tmp_path / "c.sqlite"), show_progress=False)
    with usage_scope() as used, pytest.raises(RequestsFailed):
        ex.execute([PlannedRequest(_request("q"), 2)])
    assert [f.kind for f in used.failures] == ["http_500"]
    assert used.stats.failed_requests == 1


def test_a_deadline_ends_the_wait_and_frees_the_servers_calls(tmp_path):
    """A call that hangs (the server answers after 30 s) is abandoned at the thread's
    deadline: DeadlineExceeded within it, the call cancelled (its room in the model's
    concurrency free for other callers), nothing cached;
    a cancelled deadline wakes the waiting thread at once."""
    with FaultServer({"slow": 1.0}, slow_seconds=30) as server:
        model = OpenAIModel("toy", base_url=server.url, max_retries=0, timeout=60)
        try:
            ex = Executor(model, GenerationStore(tmp_path / "c.sqlite"), show_progress=False)
            t0 = time.monotonic()
            with deadline_scope(Deadline(0.5)), pytest.raises(DeadlineExceeded):
                ex.execute([PlannedRequest(_request("hang"), 2)])
            assert time.monotonic() - t0 < 3
            stop = time.monotonic() + 10
            while model.replicas[0].in_flight and time.monotonic() < stop:
                time.sleep(0.05)
            assert model.replicas[0].in_flight == 0  # cancelled: its room is free again
            assert ex.store.cached_indices(ex.key(_request("hang"))) == set()

            deadline = Deadline(None)
            threading.Timer(0.3, deadline.cancel, args=("the gateway is shutting down",)
                            ).start()
            t0 = time.monotonic()
            with deadline_scope(deadline), pytest.raises(DeadlineExceeded,
                                                         match="shutting down"):
                ex.execute([PlannedRequest(_request("hang again"), 2)])
            assert time.monotonic() - t0 < 3
        finally:
            model.close()


@settings(max_examples=20, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 6)), min_size=1, max_size=12))
def test_ledger_counts_from_many_threads_add_up(tmp_path_factory, asks):
    """Whatever mix of requests (prompt, n) threads ask at once, the ledger's samples are
    what was asked, generated + cached = asked, and generated = distinct samples drawn."""
    model = _Slow(delay=0.0)
    ex = Executor(model, GenerationStore(tmp_path_factory.mktemp("c") / "c.sqlite"),
                  show_progress=False, ledger=Ledger())
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda a: ex.execute([PlannedRequest(_request(f"p{a[0]}"), a[1])],
                                           stage="s"), asks))
    usage = ex.ledger.usage("s", model.identity)
    assert usage.samples == sum(n for _, n in asks)
    assert usage.generated_samples + usage.cached_samples == usage.samples
    distinct = {(p, i) for p, n in asks for i in range(n)}
    assert usage.generated_samples == len(distinct) == sum(model.drawn.values())


def test_the_store_takes_writes_and_reads_from_many_threads(tmp_path):
    store = GenerationStore(tmp_path / "c.sqlite")
    model = ScriptedModel(lambda m, s: f"t{s}")
    req = _request("x")

    def write(k):
        gens = [model.sample(req.model_copy(update={"seed": k}), 0)]
        store.put(f"{k % 7:064x}", model.identity, req, k, gens)
        return store.get(f"{k % 7:064x}", [k])[0].text

    with ThreadPoolExecutor(8) as pool:
        texts = list(pool.map(write, range(200)))
    assert texts == [f"t{k}" for k in range(200)]
    assert store.count_samples() == 200


def test_scopes_nest_and_totals_outlive_the_bounded_history(tmp_path, monkeypatch):
    """A call counts in every usage scope it is inside (a run's own counts inside the
    gateway's question); the executor keeps its last calls one by one, bounded, and the
    totals of all of them (a gateway serving for days grows nothing per question)."""
    import credo.generation.executor as executor_module

    monkeypatch.setattr(executor_module, "HISTORY", 3)
    model = _Slow(delay=0.0)
    ex = Executor(model, GenerationStore(tmp_path / "c.sqlite"), show_progress=False)
    with usage_scope() as outer:
        for k in range(5):
            with usage_scope() as inner:
                ex.execute([PlannedRequest(_request(f"p{k}"), 2)])
            assert inner.stats.generated_samples == 2
    assert outer.stats.generated_samples == 10 and outer.stats.requests == 5
    assert len(ex.history) == 3
    assert ex.totals.generated_samples == 10 and ex.totals.requests == 5

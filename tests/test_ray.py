"""The Ray executor (issue 14): the same plan as the local executor on Ray actors, the
driver alone writing the cache. On one local Ray instance of 2 CPUs for the module,
with the deterministic loopback server of ``fault_server.py`` as the served model."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from conftest import context_writer, sums_task_file  # noqa: E402
from credo import RunConfig, run  # noqa: E402
from credo.cli import main  # noqa: E402
from credo.config import ExecutorConfig  # noqa: E402
from credo.generation.executor import PlannedRequest  # noqa: E402
from credo.generation.pool import MODEL, ModelPool  # noqa: E402
from credo.generation.ray_executor import RayExecutor  # noqa: E402
from credo.types import GenerationRequest, Message, SamplingParams  # noqa: E402
from fault_server import FaultServer  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RAY = ExecutorConfig(kind="ray", workers=2, in_flight=2)
FAST = {"retry_backoff": 0.001, "max_retries": 4, "max_concurrency": 4}


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray instance (2 CPUs, no dashboard) for the module, shut down after it.
    Workers import this checkout's ``src`` and the test modules (a scripted model's
    ``respond`` is pickled by reference to its module)."""
    path = os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": path}})
    try:
        yield ray
    finally:
        ray.shutdown()


def _rows(cache: Path) -> list[tuple]:
    """Every sample row that a backend determines, in key/index order."""
    with sqlite3.connect(cache) as db:
        return db.execute(
            "SELECT s.key, s.idx, s.seed, s.text, s.finish_reason, s.completion_tokens,"
            " r.identity FROM samples s JOIN requests r ON r.key = s.key ORDER BY s.key, s.idx"
        ).fetchall()


def _requests(k: int, prefix: str = "q") -> list[GenerationRequest]:
    return [
        GenerationRequest(messages=(Message(role="user", content=f"{prefix} {i}"),),
                          params=SamplingParams(max_tokens=8))
        for i in range(k)
    ]


def test_ray_executor_fills_the_rows_of_the_local_one(tmp_path, local_ray):
    """Same keys, indices, seeds and texts; resumes from what either wrote."""
    planned = [PlannedRequest(r, 5) for r in _requests(6)]
    with FaultServer() as server:
        opts = {"base_url": server.url, **FAST}
        with ModelPool(cache_path=tmp_path / "local.sqlite", max_block=2,
                       show_progress=False) as pool:
            pool.assign(MODEL, "openai:toy", opts)
            want = pool.executor(MODEL).execute(planned)
        with ModelPool(cache_path=tmp_path / "ray.sqlite", max_block=2, show_progress=False,
                       executor=RAY) as pool:
            pool.assign(MODEL, "openai:toy", opts)
            ex = pool.executor(MODEL)
            assert isinstance(ex, RayExecutor)
            got = ex.execute(planned[:3])  # half now, the rest after a "restart"
            got += ex.execute(planned)[3:]
            assert ex.history[-1].cached_samples == 15 and ex.history[-1].generated_samples == 15
            assert len(ex.actors) == 2
    assert [[g.text for g in gs] for gs in got] == [[g.text for g in gs] for gs in want]
    assert _rows(tmp_path / "ray.sqlite") == _rows(tmp_path / "local.sqlite")
    assert len(_rows(tmp_path / "ray.sqlite")) == 30


def test_ray_asks_empty_samples_again_as_the_local_executor_does(tmp_path, local_ray):
    """Issue 34 item 4: a glitch's empty reply is never cached by a Ray executor either;
    its samples are asked again on an actor, with the same seeds."""
    planned = [PlannedRequest(r, 4) for r in _requests(8, "empty")]
    opts = {**FAST, "probe": False}
    with FaultServer() as clean, ModelPool(cache_path=tmp_path / "local.sqlite", max_block=2,
                                           show_progress=False) as pool:
        pool.assign(MODEL, "openai:toy", {"base_url": clean.url, **opts})
        want = pool.executor(MODEL).execute(planned)
    with FaultServer({"empty_content": 0.3}, fault_seed=3) as glitchy, ModelPool(
        cache_path=tmp_path / "ray.sqlite", max_block=2, show_progress=False, executor=RAY
    ) as pool:
        pool.assign(MODEL, "openai:toy", {"base_url": glitchy.url, **opts})
        ex = pool.executor(MODEL)
        got = ex.execute(planned)
        glitches = glitchy.faults["empty_content"]
        assert glitches > 0 and ex.history[-1].retries == glitches
        assert ex.ledger.totals().calls == glitchy.requests
    assert [[g.text for g in gs] for gs in got] == [[g.text for g in gs] for gs in want]
    assert "" not in {row[3] for row in _rows(tmp_path / "ray.sqlite")}


def test_a_killed_actor_loses_nothing_and_writes_nothing_twice(tmp_path, local_ray):
    """An actor killed mid-run: its blocks run on the other; every (key, index) once."""
    planned = [PlannedRequest(r, 4) for r in _requests(12, "kill")]
    with FaultServer({"slow": 1.0}, slow_seconds=0.15) as server:
        opts = {"base_url": server.url, **FAST}
        with ModelPool(cache_path=tmp_path / "ray.sqlite", max_block=1, show_progress=False,
                       executor=RAY) as pool:
            pool.assign(MODEL, "openai:toy", opts)
            ex = pool.executor(MODEL)
            assert isinstance(ex, RayExecutor)
            killer = threading.Thread(target=_kill_first_actor_after, args=(ex, server, 8))
            killer.start()
            gens = ex.execute(planned)
            killer.join(timeout=30)
            stats = ex.history[-1]
            assert ex.lost_actors == 1 and ex.reassigned_blocks >= 1
            assert len(ex.actors) == 1
            # the next call tops the actors up to `workers` again
            ex.execute([PlannedRequest(_requests(1, "after")[0], 1)])
            assert len(ex.actors) == 2
    assert stats.generated_samples == 48 and stats.backend_calls == 48
    assert stats.failed_requests == 0
    rows = _rows(tmp_path / "ray.sqlite")
    assert len(rows) == 49 and len({(r[0], r[1]) for r in rows}) == 49
    # the same server address (part of the identity, hence of the keys), no slowness
    with FaultServer(port=server.port) as clean, ModelPool(
        cache_path=tmp_path / "local.sqlite", max_block=4, show_progress=False
    ) as pool:
        pool.assign(MODEL, "openai:toy", {"base_url": clean.url, **FAST})
        want = pool.executor(MODEL).execute(planned)
    assert [[g.text for g in gs] for gs in gens] == [[g.text for g in gs] for gs in want]


def test_failed_requests_through_ray_are_requests_failed_and_a_rerun_completes(
    tmp_path, local_ray
):
    """A block whose backend gives up (HTTP 500, no retries left) fails its request as
    locally: the rest is committed, ``RequestsFailed`` holds the partial results, and a
    rerun asks only what is missing."""
    from credo.generation.executor import RequestsFailed

    planned = [PlannedRequest(r, 3) for r in _requests(8, "fail")]
    with FaultServer() as server, ModelPool(cache_path=tmp_path / "ray.sqlite", max_block=1,
                                            show_progress=False, executor=RAY) as pool:
        pool.assign(MODEL, "openai:toy", {"base_url": server.url, "max_retries": 0})
        ex = pool.executor(MODEL)
        server.force("http_500", 3)
        with pytest.raises(RequestsFailed) as failed:
            ex.execute(planned)
        assert ex.history[-1].failed_requests == 3 and ex.history[-1].generated_samples == 21
        assert 1 <= len(failed.value.failed) <= 3 and len(failed.value.errors) == 3
        assert all(r is not None for i, r in enumerate(failed.value.results)
                   if i not in failed.value.failed)
        served = server.served
        ex.execute(planned)
        assert ex.history[-1].generated_samples == 3 and server.served - served == 3
    assert len(_rows(tmp_path / "ray.sqlite")) == 24


def test_an_error_the_backend_raises_reaches_the_driver_as_itself(tmp_path, local_ray):
    """A wrong API key (401) is the backend's UserError, raised on the actor: the driver
    raises it as locally (exit 2 on the command line), not a Ray error."""
    from credo.errors import UserError

    with FaultServer(require_authorization="Bearer right") as server, ModelPool(
        cache_path=tmp_path / "ray.sqlite", show_progress=False, executor=RAY
    ) as pool:
        pool.assign(MODEL, "openai:toy", {"base_url": server.url, "max_retries": 0})
        with pytest.raises(UserError, match=r"401|key"):
            pool.executor(MODEL).execute([PlannedRequest(_requests(1)[0], 2)])


def _kill_first_actor_after(ex: RayExecutor, server: FaultServer, served: int) -> None:
    deadline = time.monotonic() + 30
    while server.requests < served or not ex.actors:
        if time.monotonic() > deadline:
            return
        time.sleep(0.01)
    ray.kill(ex.actors[0])


def _c3_config(tmp: Path, url: str, name: str, executor: ExecutorConfig) -> RunConfig:
    return RunConfig(task=f"file:gsm8k:{sums_task_file(tmp, 6)}", model="openai:toy", n=4, m=3,
                     limit=None, bootstrap=0, methods=["c3", "c3_cross", "self_consistency"],
                     model_options={"base_url": url, **FAST}, max_block=2, executor=executor,
                     out=tmp / name / "run", cache=tmp / name / "cache.sqlite")


def test_a_run_through_ray_scores_as_the_local_run(tmp_path, local_ray, bow_embedder, caplog):
    """C3 and self-consistency with the served model and a shipped scripted writer: the
    same scores, and the same cache rows (keys, indices, seeds, texts) for both models."""
    from credo.models.scripted import ScriptedModel

    caplog.set_level("INFO", logger="credo.generation.ray_executor")
    with FaultServer() as server:
        results = {
            name: run(_c3_config(tmp_path, server.url, name, executor),
                      writer=ScriptedModel(context_writer), embedder=bow_embedder,
                      show_progress=False)
            for name, executor in (("local", ExecutorConfig()), ("ray", RAY))
        }
    assert "Ray actors hold openai:" in caplog.text and "Ray actors hold scripted" in caplog.text
    want, got = results["local"], results["ray"]
    assert [r.scores for r in got.items] == [r.scores for r in want.items]
    assert got.metrics == want.metrics
    for stat in ("generated_samples", "backend_calls", "request_failures"):
        assert got.stats[stat] == want.stats[stat]
    local_rows = _rows(tmp_path / "local" / "cache.sqlite")
    assert _rows(tmp_path / "ray" / "cache.sqlite") == local_rows
    assert {r[6].split(":")[0] for r in local_rows} == {"openai", "scripted"}


def _served_yaml(tmp: Path) -> Path:
    cfg = tmp / "served.yaml"
    cfg.write_text("model: openai:toy\nmethods: [self_consistency]\nn: 5\nbootstrap: 0\n"
                   "max_block: 2\nmodel_options: {retry_backoff: 0.001, max_retries: 2}\n")
    return cfg


def test_cli_run_with_executor_ray_equals_the_local_run(tmp_path, local_ray, capsys):
    task = f"file:gsm8k:{sums_task_file(tmp_path, 6)}"
    with FaultServer() as server:
        for name, extra in (("local", []), ("ray", ["--executor", "ray", "--workers", "2"])):
            args = ["run", "--config", str(_served_yaml(tmp_path)), "--task", task,
                    "--base-url", server.url, "--out", str(tmp_path / name),
                    "--cache", str(tmp_path / f"{name}.sqlite"), "--quiet", *extra]
            assert main(args) == 0
    capsys.readouterr()

    def scores(name: str) -> list[dict]:
        lines = (tmp_path / name / "scores.jsonl").read_text().splitlines()
        return [json.loads(x) for x in lines]

    assert scores("ray") == scores("local")
    assert _rows(tmp_path / "ray.sqlite") == _rows(tmp_path / "local.sqlite")
    written = (tmp_path / "ray" / "config.yaml").read_text()
    assert "executor:\n  kind: ray\n" in written and "workers: 2" in written


@pytest.mark.slow
def test_the_embedded_model_through_ray_fills_the_local_rows(tmp_path, local_ray):
    """SmolLM2-135M (embedded llama.cpp) on two Ray actors fills the cache rows of the
    local executor: the same keys, indices and seeds, and the same texts.

    Texts. The engine is deterministic for an identical call across processes, and
    across batch compositions: measured with xllamacpp 2026.10.11549's CPU build, the 12
    samples below (and 48-token ones with 2 threads and 16 slots) came out identical from
    a local run, a second local run, one request at a time, two actors with two calls
    each in flight, and one actor with one call (docs/benchmarks.md, "Scale"). A GPU
    build may not be (batch-dependent kernels); keys, indices and seeds hold regardless.
    """
    prompts = ["What is 17 + 25?", "Name a prime number larger than 50.",
               "What colour is the sky at noon?"]
    planned = [PlannedRequest(GenerationRequest(
        messages=(Message(role="user", content=q),),
        params=SamplingParams(temperature=1.0, max_tokens=16)), 4) for q in prompts]
    opts = {"n_ctx": 2048, "n_parallel": 4, "n_threads": 1}
    texts = {}
    for name, executor in (("local", None), ("ray", RAY)):
        with ModelPool(cache_path=tmp_path / f"{name}.sqlite", max_block=2,
                       show_progress=False, executor=executor) as pool:
            pool.assign(MODEL, "smollm2-135m", opts)
            ex = pool.executor(MODEL)
            assert isinstance(ex, RayExecutor) == (executor is not None)
            texts[name] = [[g.text for g in gs] for gs in ex.execute(planned)]
    local, ray_rows = _rows(tmp_path / "local.sqlite"), _rows(tmp_path / "ray.sqlite")
    assert len(local) == 12 and local[0][6].startswith("llamacpp:smollm2-135m@sha256:")
    assert [r[:3] for r in ray_rows] == [r[:3] for r in local]  # keys, indices, seeds
    assert texts["ray"] == texts["local"] and ray_rows == local


def test_embedded_actors_share_the_local_cpus(monkeypatch):
    """On a local Ray instance each actor's embedded model computes with its share of the
    CPUs (two llama.cpp servers each spinning every core starved one another); options
    that set ``n_threads``, a shipped model and a cluster are left as they are."""
    from credo.generation.pool import ModelSource
    from credo.generation.ray_executor import BackendActor, RaySession

    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    local = RaySession(ExecutorConfig(kind="ray", workers=3))
    assert local.threads_per_actor() == 2
    assert RaySession(ExecutorConfig(kind="ray", workers=16)).threads_per_actor() == 1
    assert RaySession(ExecutorConfig(kind="ray", address="auto")).threads_per_actor() is None
    actor = BackendActor(ModelSource("smollm2-135m"), threads=2)  # loads on first call
    assert actor._model.n_threads == 2
    own = BackendActor(ModelSource("smollm2-135m", (("n_threads", 3),)), threads=2)
    assert own._model.n_threads == 3
    shipped = BackendActor(ModelSource(model=ModelSource("smollm2-135m").build()), threads=2)
    assert shipped._model.n_threads == 8

"""The runtime cases of issue 21 (item 5): what a run does when a server glitches, when
it fails, when a run folder is reused or cut short, and when an item cannot fit."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

from conftest import context_writer, sums_task_file
from credo import RunConfig, run
from credo.generation.executor import Executor, PlannedRequest
from credo.generation.store import GenerationStore, sample_seed
from credo.models.scripted import ScriptedModel
from credo.types import Capabilities, Generation, GenerationRequest, Message, SamplingParams
from fault_server import FaultServer

FAST = {"retry_backoff": 0.001, "max_retries": 3, "max_concurrency": 4, "probe": False}


def _req(text: str) -> GenerationRequest:
    return GenerationRequest(messages=(Message(role="user", content=text),),
                             params=SamplingParams())


class Glitchy:
    """A backend answering ``respond(seed)`` for sample seed ``seed``, except that call
    number ``c`` (counted from 0) answers ``""`` for every sample when ``c in glitches``.
    ``seeded`` is what its capabilities say."""

    def __init__(self, respond, glitches: set[int], seeded: bool = True,
                 max_retries: int = 3) -> None:
        self.respond, self.glitches, self.max_retries = respond, glitches, max_retries
        self.calls = 0
        self.seeds: list[int] = []
        self._caps = Capabilities(seeded=seeded, parallel_samples=True)

    identity = "glitchy"

    @property
    def capabilities(self) -> Capabilities:
        return self._caps

    def generate(
        self, requests: Sequence[GenerationRequest]
    ) -> Iterator[tuple[int, list[Generation]]]:
        for i, r in enumerate(requests):
            glitch = self.calls in self.glitches
            self.calls += 1
            self.seeds.append(r.seed)
            texts = ["" if glitch else self.respond(r.seed + j) for j in range(r.n)]
            yield i, [Generation(t, "stop", len(t.split()), 3) for t in texts]

    def close(self) -> None:
        pass


def _execute(model, tmp: Path, n: int = 4) -> tuple[list[list[str]], Executor, GenerationStore]:
    store = GenerationStore(tmp / "c.sqlite")
    ex = Executor(model, store, max_block=2, show_progress=False)
    out = ex.execute([PlannedRequest(_req("q1"), n), PlannedRequest(_req("q2"), n)])
    return [[g.text for g in gens] for gens in out], ex, store


def test_a_glitch_empty_reply_is_asked_again_with_the_same_seed_and_never_cached(tmp_path):
    model = Glitchy(lambda s: f"answer {s % 5}", glitches={1})
    texts, ex, store = _execute(model, tmp_path)
    clean, _, _ = _execute(Glitchy(lambda s: f"answer {s % 5}", set()), tmp_path / "clean")
    assert texts == clean and all(t for row in texts for t in row)
    assert ex.history[-1].retries == 1 and model.calls == 5  # 4 blocks, one asked again
    assert model.seeds[4] == model.seeds[1]  # the same seeds
    assert store.count_samples() == 8


def test_an_empty_sample_its_seed_reproduces_is_cached_as_the_sample(tmp_path):
    model = Glitchy(lambda s: "" if s % 3 == 0 else f"answer {s}", glitches=set())
    texts, ex, store = _execute(model, tmp_path)
    keys = [ex.key(_req(q)) for q in ("q1", "q2")]
    want = [["" if sample_seed(k, i) % 3 == 0 else f"answer {sample_seed(k, i)}"
             for i in range(4)] for k in keys]
    assert texts == want
    blocks_with_empty = sum(
        any(sample_seed(k, i) % 3 == 0 for i in (b, b + 1)) for k in keys for b in (0, 2))
    # issue 34 item 4: asked again up to the retry budget (max_retries = 3) before it is
    # taken as the seed's sample; in blocks of 2 at most one of two seeds is 0 mod 3
    rounds = model.max_retries
    assert ex.history[-1].retries == rounds * blocks_with_empty == model.calls - 4
    assert ex.history[-1].unverified_empty == 0
    assert all(store.unverified_empty(k) == set() for k in keys)


def test_an_unseeded_backend_retries_an_empty_sample_and_marks_one_that_stays(tmp_path):
    # call 1 glitches once (mended by the retry); q2's samples are always "" at seed%4==1
    def respond(seed: int) -> str:
        return "" if seed % 4 == 1 else f"answer {seed}"

    model = Glitchy(respond, glitches={1}, seeded=False, max_retries=3)
    texts, ex, store = _execute(model, tmp_path)
    keys = [ex.key(_req(q)) for q in ("q1", "q2")]
    stays = {k: {i for i in range(4) if sample_seed(k, i) % 4 == 1} for k in keys}
    for k, row in zip(keys, texts, strict=True):
        assert {i for i, t in enumerate(row) if t == ""} == stays[k]
        assert store.unverified_empty(k) == stays[k]
    assert ex.history[-1].unverified_empty == sum(len(v) for v in stays.values())
    rerun = Executor(model, store, max_block=2, show_progress=False)
    calls = model.calls
    rerun.execute([PlannedRequest(_req("q1"), 4), PlannedRequest(_req("q2"), 4)])
    assert model.calls == calls  # cached, marked, not asked again


def _c3_run(tmp: Path, url: str, name: str, bow_embedder):
    cfg = RunConfig(task=f"file:gsm8k:{sums_task_file(tmp, 10)}", model="openai:toy", n=4, m=3,
                    limit=None, bootstrap=0, methods=["c3", "self_consistency"],
                    model_options={"base_url": url, **FAST}, max_block=2,
                    out=tmp / name / "run", cache=tmp / name / "cache.sqlite")
    return run(cfg, writer=ScriptedModel(context_writer), embedder=bow_embedder,
               show_progress=False)


def _cached_texts(path: Path) -> Counter[str]:
    import sqlite3

    with sqlite3.connect(path) as db:
        return Counter(t for (t,) in db.execute("SELECT text FROM samples"))


def test_a_server_answering_empty_now_and_then_gives_the_clean_run(tmp_path, bow_embedder):
    with FaultServer() as clean:
        port = clean.port
        want = _c3_run(tmp_path, clean.url, "clean", bow_embedder)
    # fault_seed 1: no retry of a glitch glitches again, so each glitch costs one retry
    # (one that did would be asked again, up to max_retries: tests/test_fault_outcomes.py)
    with FaultServer({"empty_content": 0.1}, fault_seed=1, port=port) as glitchy:
        got = _c3_run(tmp_path, glitchy.url, "glitchy", bow_embedder)
        glitches = glitchy.faults["empty_content"]
        assert glitches >= 5
        assert _cached_texts(tmp_path / "glitchy" / "cache.sqlite")[""] == 0
        assert [r.scores for r in got.items] == [r.scores for r in want.items]
        assert got.accuracy == want.accuracy
        assert got.stats["request_retries"] == glitches
        assert got.stats["unverified_empty_samples"] == 0 and not got.incomplete
        asked = glitchy.requests
        again = _c3_run(tmp_path, glitchy.url, "glitchy", bow_embedder)
        assert glitchy.requests == asked and again.stats["generated_samples"] == 0


def _cli(args: list[str], tmp: Path, timeout: float = 120):
    """``credo ARGS`` in a fresh process (the terminal as a user sees it: pytest's log
    capture does not stand in the way), with its cache dir under ``tmp``."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "CREDO_CACHE_DIR": str(tmp / "cache-dir"),
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1] / "src"),
                                          os.environ.get("PYTHONPATH", "")])}
    code = "import sys; from credo.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                          text=True, timeout=timeout, env=env, check=False)


def _served_args(tmp: Path, url: str, items: int = 12) -> list[str]:
    opts = tmp / "served.yaml"
    opts.write_text(
        "model: openai:toy\nmethods: [self_consistency]\nn: 2\nbootstrap: 0\nmax_block: 1\n"
        "model_options: {retry_backoff: 0.001, max_retries: 1, max_concurrency: 2,"
        " probe: false}\n")
    return ["run", "--config", str(opts), "--task",
            f"file:gsm8k:{sums_task_file(tmp, items)}", "--base-url", url,
            "--out", str(tmp / "run"), "--cache", str(tmp / "c.sqlite"), "--quiet"]


def test_exit_3_says_one_line_and_the_failures_go_to_verbose(tmp_path):
    with FaultServer({"http_500": 1.0}) as server:
        quiet = _cli(_served_args(tmp_path, server.url), tmp_path)
        verbose = _cli(["-v", *_served_args(tmp_path, server.url)], tmp_path)
    assert quiet.returncode == 3 == verbose.returncode, quiet.stderr
    lines = quiet.stderr.strip().splitlines()
    assert len(lines) == 1 and "24 requests failed" in lines[0] and "rerun" in lines[0]
    assert verbose.stderr.count("request failed after retries") >= 24


def _scan(root: Path, secret: str) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def test_a_key_in_the_url_query_reaches_the_server_and_no_file_or_log(tmp_path):
    key = "sk-QUERY-PLANTED-77a1"
    with FaultServer() as server:
        url = f"{server.url}?api_key={key}"
        done = _cli(["-v", *_served_args(tmp_path, url, items=3)], tmp_path)
        chat_queries = server.queries[-server.requests:]
    assert done.returncode == 0, done.stderr
    assert chat_queries and set(chat_queries) == {f"api_key={key}"}
    assert "HTTP Request" in done.stderr  # -v logs each request's URL: without the key
    assert key not in done.stdout + done.stderr
    assert _scan(tmp_path, key) == []
    config = (tmp_path / "run" / "config.yaml").read_text()
    assert f"base_url: {server.url}" in config or f"- {server.url}" in config


def test_a_server_answering_404_is_a_user_error_in_one_line(tmp_path):
    key = "sk-QUERY-404-5b"
    with FaultServer({"http_404": 1.0}) as server:
        done = _cli(_served_args(tmp_path, f"{server.url}?api_key={key}"), tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and server.url in lines[0] and "HTTP 404" in lines[0]
    assert key not in done.stderr and "Traceback" not in done.stderr


def test_redact_url_takes_out_credential_query_parameters_only():
    from credo.models.urls import redact_text, redact_url, split_query_secrets

    url = "http://u:pw@h:8/v1?api_key=K1&model=x&X-API-Key=K2&monkey=3&access_token=K3#f"
    assert redact_url(url) == "http://h:8/v1?model=x&monkey=3#f"
    assert split_query_secrets("http://h/v1?token=a%2Fb")[1] == {"token": "a/b"}
    assert redact_url("http://h/v1?model=x") == "http://h/v1?model=x"  # untouched
    line = "POST http://h/v1/chat/completions?sig=S9 200; retry http://h/v1?key=S8"
    assert redact_text(line) == "POST http://h/v1/chat/completions 200; retry http://h/v1"


def _scripted_run(tmp: Path, name: str, bow_embedder, **overrides):
    from test_runner import TASK, respond

    cfg = RunConfig(task="toy", n=4, m=4, limit=None, bootstrap=0, out=tmp / name,
                    cache=tmp / "cache.sqlite", **overrides)
    run(cfg, model=ScriptedModel(respond), embedder=bow_embedder, task=TASK,
        show_progress=False)
    return cfg.out


def test_credo_report_says_incomplete_for_a_folder_cut_short(tmp_path, bow_embedder, capsys):
    from credo.cli import main

    whole = _scripted_run(tmp_path, "whole", bow_embedder)
    cut = _scripted_run(tmp_path, "cut", bow_embedder)
    (cut / "run_status.json").unlink()  # killed after metrics.json, before the marker
    capsys.readouterr()
    assert main(["report", str(cut), "--embedder", "none"]) == 0
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "incomplete" in err and str(cut) in err

    assert main(["report", str(whole), str(cut), "--out", str(tmp_path / "cmp"),
                 "--embedder", "none", "--resamples", "20"]) == 0
    err = capsys.readouterr().err
    assert str(cut) in err and str(whole) not in err
    page = (tmp_path / "cmp" / "index.html").read_text()
    assert page.count("(interrupted)") >= 1


def test_a_killed_writers_temporary_is_removed_by_the_next_write(tmp_path):
    import os
    import subprocess
    import sys

    from credo.jsonio import write_text

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead, live = int(gone.stdout), os.getppid()
    stray = tmp_path / f".run_status.json.{dead}.tmp"
    busy = tmp_path / f".run_status.json.{live}.tmp"
    other = tmp_path / f".metrics.json.{dead}.tmp"
    for p in (stray, busy, other):
        p.write_text("{half")
    write_text(tmp_path / "run_status.json", "{}")
    assert not stray.exists() and busy.exists() and other.exists()
    assert (tmp_path / "run_status.json").read_text() == "{}"


def test_no_server_leaves_no_run_folder_and_no_cache_file(tmp_path):
    with FaultServer() as server:
        url = server.url
    args = _served_args(tmp_path, url, items=2)
    args[args.index("--out") + 1] = str(tmp_path / "runs" / "new" / "run")
    from credo.cli import main

    assert main(args) == 2
    assert not (tmp_path / "runs").exists()
    assert not (tmp_path / "c.sqlite").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["served.yaml", "sums.jsonl"]


def test_a_store_creates_its_file_at_the_first_write_only(tmp_path):
    store = GenerationStore(tmp_path / "sub" / "c.sqlite")
    assert store.cached_indices("ab12") == set() and store.count_samples() == 0
    assert store.get("ab12", []) == [] and not (tmp_path / "sub").exists()
    store.put("ab12", "m", _req("q"), 0, [Generation("a", "stop", 1, 1)])
    store.close()
    with GenerationStore(tmp_path / "sub" / "c.sqlite") as again:
        assert again.cached_indices("ab12") == {0}


def test_a_run_into_a_used_folder_leaves_none_of_the_old_runs_files(tmp_path, bow_embedder):
    out = _scripted_run(tmp_path, "run", bow_embedder)
    assert (out / "perturbation_similarity.json").exists()
    (out / "notes.txt").write_text("mine")
    again = _scripted_run(tmp_path, "run", bow_embedder, methods=["self_consistency"])
    assert again == out
    assert not (out / "perturbation_similarity.json").exists()
    # the Diversity section no longer shows the old run's perturbations
    assert "no item kept two or more perturbations" in (out / "report.html").read_text()
    assert (out / "notes.txt").read_text() == "mine"  # not credo's: left alone

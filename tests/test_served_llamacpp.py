"""A real llama.cpp server over HTTP (slow: it loads smollm2-135m): ``credo probe`` finds
the seed contract kept, ``n`` honoured, logprobs and a grammar; a small ``credo run``
through the OpenAI-compatible backend, the server as its own judge, completes every
method; and the same run against a second server instance on another port generates
nothing (the identity holds no URL)."""

from __future__ import annotations

import gc
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from credo.cli import main
from credo.generation.probes import PROBES_FILE
from credo.models.embedded import server_params
from credo.models.weights import resolve_weights

METHODS = ["c3", "self_consistency", "verbalized", "p_true", "label_prob", "c3@judge"]


@pytest.fixture
def llama_http() -> Iterator[Callable[[], str]]:
    """Starts llama.cpp HTTP servers of smollm2-135m on 127.0.0.1 (a free port each):
    ``start()`` gives the base URL ``http://127.0.0.1:PORT/v1``; ``start.stop()`` stops
    the servers started so far, and the fixture stops what is left."""
    import xllamacpp

    servers: list[object] = []

    def start() -> str:
        params = server_params(
            resolve_weights("smollm2-135m"), n_ctx=4 * 2048, n_parallel=4,
            n_threads=min(os.cpu_count() or 1, 4),
        )
        params.hostnames = ["127.0.0.1"]
        params.port = 0
        server = xllamacpp.Server(params)
        servers.append(server)
        return f"{server.listening_address}/v1"

    def stop() -> None:
        servers.clear()  # xllamacpp stops a server when the object is freed
        gc.collect()

    start.stop = stop  # type: ignore[attr-defined]
    try:
        yield start
    finally:
        stop()


def _config(tmp: Path, url: str, name: str) -> Path:
    path = tmp / f"{name}.yaml"
    path.write_text(
        "task: mmlu:high_school_statistics\nlimit: 2\nmodel: openai:smollm2\n"
        "model_options: {max_concurrency: 4}\n"
        "n: 3\nm: 3\nsampling: {max_tokens: 8}\nbootstrap: 0\n"
        f"methods: {json.dumps(METHODS)}\n"
        "perturbation: {prompt: v1, rules: basic, max_rounds: 2, sampling: {max_tokens: 32}}\n"
        "baselines: {followups: 1}\n"
        f"judge: {{model: openai:smollm2, model_options: {{base_url: '{url}'}}}}\n",
        encoding="utf-8",
    )
    return path


@pytest.mark.slow
def test_credo_probe_and_run_against_a_real_llamacpp_server(tmp_path, llama_http, capsys):
    cache = tmp_path / "cache.sqlite"
    url = llama_http()
    assert main(["probe", "--model", "openai:smollm2", "--base-url", url,
                 "--cache", str(cache)]) == 0
    probe = json.loads((tmp_path / PROBES_FILE).read_text())["probes"]["openai:smollm2"]
    assert probe["honours_n"] and probe["deterministic"] and probe["seed_contract"]
    assert probe["logprobs"] and probe["top_logprobs"] >= 5 and probe["grammar"] == "grammar"

    def args(url: str, name: str) -> list[str]:
        return ["run", "--config", str(_config(tmp_path, url, name)), "--base-url", url,
                "--cache", str(cache), "--out", str(tmp_path / name), "--quiet"]

    assert main(args(url, "run")) == 0
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["model"] == "openai:smollm2" and (tmp_path / "run" / "report.md").exists()
    assert "label_prob" not in (metrics.get("unavailable") or {})  # the server's logprobs
    rows = [json.loads(x) for x in (tmp_path / "run" / "scores.jsonl").read_text().splitlines()]
    assert 1 <= len(rows) <= 2  # an item whose perturbations all fail the rules is dropped
    for row in rows:
        for name in METHODS:
            assert 0.0 <= row["scores"][name] <= 1.0, (name, row["scores"])
    assert metrics["stats"]["generated_samples"] > 0
    capsys.readouterr()

    llama_http.stop()  # the first server is gone; a second one listens on another port
    other = llama_http()
    assert other != url
    assert main(args(other, "again")) == 0
    again = json.loads((tmp_path / "again" / "metrics.json").read_text())
    assert again["stats"]["generated_samples"] == 0 and again["stats"]["cached_samples"] > 0
    assert json.loads((tmp_path / "again" / "scores.jsonl").read_text().splitlines()[0])[
        "scores"] == rows[0]["scores"]

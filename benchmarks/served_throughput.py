"""credo against a served model: its executor and OpenAI backend vs a plain async client.

llama.cpp's own OpenAI-compatible HTTP server (the engine credo
embeds, listening on 127.0.0.1) serves one embedded model; the same workload (``--prompts``
prompts x ``--samples`` samples of ``--max-tokens`` tokens at T = 1, no truncation) is
sent three ways, each timed from the first request to the last reply:

``credo``   what a run does: :class:`~credo.generation.executor.Executor` over
            :class:`~credo.models.openai_compat.OpenAIModel` with ``max_concurrency``
            ``--concurrency``, committing every block to a fresh SQLite cache.
``plain``   ``openai.AsyncOpenAI`` with an ``asyncio.Semaphore(--concurrency)``, sending
            the very request bodies credo sends (built by ``OpenAIModel.request_kwargs``
            from the same keys and seeds), keeping the texts in memory, nothing else.
``serial``  the same bodies one at a time (``openai.OpenAI``): what a loop without
            concurrency gets.

``--per-call n`` sends one call per request with ``n = samples`` (llama.cpp keeps the
seed contract, so credo does); ``--per-call 1`` one call per sample (what credo does on a
server whose children do not follow the contract), so the client's per-call cost weighs
more. The server has ``--slots`` slots; every sample of both modes reaches
``--max-tokens`` or stops the same way, since the bodies and seeds are identical (the
script checks the texts agree). Modes alternate over ``--repeats`` rounds (plain, credo,
then credo, plain, ...) so that neither always runs on a warmer server; medians are
reported and the ratios computed from them.

Usage::

    PYTHONPATH=src python benchmarks/served_throughput.py
    PYTHONPATH=src python benchmarks/served_throughput.py --per-call 1 --prompts 16
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from credo.generation.executor import Executor, PlannedRequest
from credo.generation.store import GenerationStore, request_key, sample_seed
from credo.models.embedded import server_params
from credo.models.openai_compat import OpenAIModel
from credo.models.weights import resolve_weights
from credo.types import GenerationRequest, Message, SamplingParams

TOPICS = ["rivers", "deserts", "volcanoes", "glaciers", "tides", "monsoons", "plateaus",
          "deltas", "canyons", "islands", "lakes", "forests", "prairies", "reefs", "dunes",
          "fjords"]


def workload(prompts: int, samples: int, max_tokens: int) -> list[GenerationRequest]:
    """``prompts`` distinct chat requests of ``samples`` samples each."""
    params = SamplingParams(temperature=1.0, top_p=1.0, top_k=0, min_p=0.0,
                            max_tokens=max_tokens)
    return [
        GenerationRequest(
            messages=(Message(role="user", content=(
                f"In two sentences, say why {TOPICS[i % len(TOPICS)]} matter to people "
                f"living nearby (variant {i}).")),),
            params=params, n=samples, seed=0,
        )
        for i in range(prompts)
    ]


def bodies(model: OpenAIModel, requests: list[GenerationRequest], per_call: str,
           run_seed: int = 0) -> list[dict[str, Any]]:
    """The request bodies credo sends for ``requests`` (same keys, same seeds)."""
    out: list[dict[str, Any]] = []
    for request in requests:
        key = request_key(model.identity, request, run_seed)
        block = request.model_copy(update={"seed": sample_seed(key, 0)})
        if per_call == "n":
            out.append(model.request_kwargs(block, 0, request.n))
        else:
            out.extend(model.request_kwargs(block, j, 1) for j in range(request.n))
    return out


def run_credo(url: str, requests: list[GenerationRequest], per_call: str,
              concurrency: int, cache: Path) -> tuple[float, list[str]]:
    model = OpenAIModel("bench", url, max_concurrency=concurrency,
                        supports_n=per_call == "n", logprobs=False, grammar=False)
    store = GenerationStore(cache)
    executor = Executor(model, store, max_block=max(r.n for r in requests),
                        show_progress=False)
    try:
        t0 = time.perf_counter()
        results = executor.execute([PlannedRequest(r, r.n) for r in requests])
        seconds = time.perf_counter() - t0
    finally:
        model.close()
        store.close()
    return seconds, [g.text for gens in results for g in gens]


def run_plain(url: str, kwargs: list[dict[str, Any]], concurrency: int
              ) -> tuple[float, list[str]]:
    from openai import AsyncOpenAI

    async def main() -> tuple[float, list[str]]:
        client = AsyncOpenAI(base_url=url, api_key="EMPTY", max_retries=0, timeout=600)
        gate = asyncio.Semaphore(concurrency)

        async def one(body: dict[str, Any]) -> list[str]:
            async with gate:
                reply = await client.chat.completions.create(**body)
            return [c.message.content or "" for c in sorted(reply.choices, key=lambda c: c.index)]

        t0 = time.perf_counter()
        texts = await asyncio.gather(*(one(b) for b in kwargs))
        seconds = time.perf_counter() - t0
        await client.close()
        return seconds, [t for ts in texts for t in ts]

    return asyncio.run(main())


def run_serial(url: str, kwargs: list[dict[str, Any]]) -> tuple[float, list[str]]:
    from openai import OpenAI

    client = OpenAI(base_url=url, api_key="EMPTY", max_retries=0, timeout=600)
    t0 = time.perf_counter()
    texts: list[str] = []
    for body in kwargs:
        reply = client.chat.completions.create(**body)
        texts.extend(c.message.content or "" for c in sorted(reply.choices, key=lambda c: c.index))
    seconds = time.perf_counter() - t0
    client.close()
    return seconds, texts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2-135m", help="embedded model the server serves")
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--concurrency", type=int, default=8, help="calls in flight (credo, plain)")
    ap.add_argument("--slots", type=int, default=16, help="the server's n_parallel")
    ap.add_argument("--per-call", choices=["n", "1"], default="n")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-serial", action="store_true")
    ap.add_argument("--threads", type=int, default=min(os.cpu_count() or 1, 4))
    args = ap.parse_args()

    import xllamacpp

    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load "
          f"average {os.getloadavg()[0]:.1f}; model {args.model}, {args.prompts} prompts x "
          f"{args.samples} samples x {args.max_tokens} tokens, concurrency "
          f"{args.concurrency}, {args.slots} slots, per call: {args.per_call}")
    params = server_params(resolve_weights(args.model), n_ctx=args.slots * 1024,
                           n_parallel=args.slots, n_threads=args.threads)
    params.hostnames = ["127.0.0.1"]
    params.port = 0
    server = xllamacpp.Server(params)
    url = f"{server.listening_address}/v1"
    try:
        requests = workload(args.prompts, args.samples, args.max_tokens)
        kwargs = bodies(OpenAIModel("bench", url, supports_n=args.per_call == "n",
                                    logprobs=False, grammar=False), requests, args.per_call)
        samples = args.prompts * args.samples
        run_plain(url, kwargs[: min(len(kwargs), 4)], args.concurrency)  # warm-up
        times: dict[str, list[float]] = {"credo": [], "plain": []}
        reference: list[str] | None = None
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(args.repeats):
                order = ["plain", "credo"] if r % 2 == 0 else ["credo", "plain"]
                for mode in order:
                    if mode == "credo":
                        sec, texts = run_credo(url, requests, args.per_call, args.concurrency,
                                               Path(tmp) / f"cache{r}.sqlite")
                    else:
                        sec, texts = run_plain(url, kwargs, args.concurrency)
                    times[mode].append(sec)
                    if reference is None:
                        reference = texts
                    same = sum(a == b for a, b in zip(reference, texts, strict=True))
                    print(f"round {r + 1} {mode:6s} {sec:7.2f} s  {samples / sec:6.2f} "
                          f"samples/s  texts equal to round 1's first: {same}/{samples}")
        med = {m: statistics.median(t) for m, t in times.items()}
        if not args.no_serial:
            sec, _ = run_serial(url, kwargs)
            med["serial"] = sec
            print(f"serial        {sec:7.2f} s  {samples / sec:6.2f} samples/s")
        print("\nmedian seconds: " + ", ".join(f"{m} {s:.2f}" for m, s in med.items()))
        print(f"credo / plain throughput = {med['plain'] / med['credo']:.3f}")
        if "serial" in med:
            print(f"credo / serial throughput = {med['serial'] / med['credo']:.3f}")
    finally:
        del server
        gc.collect()


if __name__ == "__main__":
    main()

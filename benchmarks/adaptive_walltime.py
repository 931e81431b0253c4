"""Wall time of a live adaptive run against the full run on the same items.

Runs ``credo run`` twice back to back on the same machine, each on a fresh cache: the
full run (every item n original and m perturbed samples) and the adaptive run
(``--adaptive RULE``), then replays the adaptive run from the full run's cache
(``credo adaptive``) and checks that it drew and scored exactly what the live run did.
Prints seconds, samples generated per stage and samples per second of each run.

    PYTHONPATH=src python benchmarks/adaptive_walltime.py --model smollm2-135m --limit 6
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from credo import RunConfig
from credo.api import simulate_adaptive
from credo.config import AdaptiveConfig
from credo.generation.pool import ModelPool
from credo.pipeline.runner import RunResult, run_pipeline
from credo.report.writer import write_run


def _one(config: RunConfig) -> tuple[float, float, RunResult]:
    """Wall seconds of the whole run, seconds inside the backends' generation calls, and
    the result."""
    t0 = time.perf_counter()
    with ModelPool(cache_path=config.cache_path, seed=config.seed, show_progress=False) as pool:
        result = run_pipeline(config, pool)
        generating = sum(h.seconds for h in pool.history)
    seconds = time.perf_counter() - t0
    write_run(result, config.out)  # the folder `credo adaptive` replays (not timed)
    return seconds, generating, result


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--task", default="gsm8k")
    p.add_argument("--limit", type=int, default=6)
    p.add_argument("--n", type=int, default=16)
    p.add_argument("--m", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=24)
    p.add_argument("--rule", default="interval")
    p.add_argument("--epsilon", type=float, default=None)
    args = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="credo-adaptive-"))
    base = RunConfig(
        task=args.task, limit=args.limit, model=args.model, n=args.n, m=args.m,
        sampling={"temperature": 1.0, "max_tokens": args.max_tokens},
        perturbation={"writer": args.model}, bootstrap=0,
        model_options={"n_parallel": 16, "n_ctx": 16 * 1024},
    )
    rows = []
    for name, adaptive in (("full", None),
                           ("adaptive", AdaptiveConfig(rule=args.rule, epsilon=args.epsilon))):
        cfg = base.model_copy(update={"adaptive": adaptive, "out": tmp / name,
                                      "cache": tmp / f"{name}.sqlite"})
        seconds, generating, result = _one(cfg)
        stages = {s: u["generated_samples"] for s, u in result.ledger["stages"].items()}
        generated = int(result.stats["generated_samples"])
        rows.append((name, seconds, generating, generated, stages, result))
    for name, seconds, generating, generated, stages, _ in rows:
        print(f"{name:9s} wall {seconds:7.1f} s, generating {generating:7.1f} s, {generated:5d}"
              f" samples, {generated / generating:6.2f} samples/s generating  {stages}")
    print(f"adaptive/full: wall time {rows[1][1] / rows[0][1]:.2f}, samples "
          f"{rows[1][3] / rows[0][3]:.2f}, samples/s generating "
          f"{(rows[1][3] / rows[1][2]) / (rows[0][3] / rows[0][2]):.2f}")
    sim = simulate_adaptive(tmp / "full", [args.rule], [args.epsilon], write=False,
                            n_resamples=200)
    live = {r.item.id: r for r in rows[1][5].items}
    point = sim.points[0]
    same = point.scores == {i: r.scores for i, r in live.items()} and point.drawn == {
        i: (len(r.original), len(r.sets.get("perturbed", ()))) for i, r in live.items()}
    print(f"replay from the full run's cache equals the live adaptive run: {same}; "
          f"saved {point.saved:.0%} of samples; not replayable {point.not_replayable}")


if __name__ == "__main__":
    main()

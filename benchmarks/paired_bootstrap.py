"""Time of the evaluation layer's bootstrap: paired tests and per-method CIs.

Two workloads on synthetic items (``--items`` N, default 200; ``--resamples`` B, default
1000, as 002 §3.7), each timed ``--repeats`` times (best and median reported):

Seconds of wall-clock time (best and median) and of process CPU time (best; steadier on a
shared machine):

(a) ``paired_bootstrap``  ΔAUROC and ΔECE of two methods on the same N items
    (:func:`credo.evaluate.paired.paired_bootstrap`), and each metric on its own;
(b) ``method_summaries``  ECE, MCE, Brier, AUROC, AUPRC-P, AUPRC-N, AUARC and PRR
    (ECE, AUROC, AUPRC-P, AUPRC-N before the weighted engine) with bootstrap CIs for every method of
    an in-memory run folder (:func:`credo.report.analysis.method_summaries`),
    ``--methods`` methods.

No model is loaded. Measured (docs/benchmarks.md, "Evaluation bootstrap"; 2 shared vCPUs,
AMD EPYC, load average 4-5), CPU seconds, best of 5, before -> after the change that made
scikit-learn the one implementation of AUROC and average precision:

- paired test, 1000 resamples of 200 items, ΔAUROC + ΔECE: 0.05 s -> 1.9 s
  (ΔAUROC 1.8 s: 2000 ``roc_auc_score`` evaluations at ~0.9 ms each; ΔECE 0.01 s);
- ``method_summaries``, 2 methods x 4 metrics: 0.46 s -> 5.0 s.

The weighted engine moved both onto the weighted bootstrap engine (:mod:`credo.evaluate.weighted`):
paired test 2.1 s -> 0.025 s, ``method_summaries`` (now 8 metrics) 5.0 s -> 0.056 s CPU
(docs/benchmarks.md, "Bootstrap as multinomial weights over one sort").

The "before" figures come from the same script run on the previous source tree::

    git archive aa3e53e src | tar -x -C /tmp/credo-before
    PYTHONPATH=/tmp/credo-before/src python benchmarks/paired_bootstrap.py

Usage::

    PYTHONPATH=src python benchmarks/paired_bootstrap.py
    PYTHONPATH=src python benchmarks/paired_bootstrap.py --items 1000 --repeats 5
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from credo.evaluate.paired import paired_bootstrap
from credo.report.analysis import method_summaries
from credo.report.rundata import RunData


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=200, help="N items")
    ap.add_argument("--resamples", type=int, default=1000, help="B bootstrap resamples")
    ap.add_argument("--methods", type=int, default=2, help="methods in the run (b)")
    ap.add_argument("--repeats", type=int, default=3, help="timings per workload")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    a, b, perf = synthetic_scores(args.items, args.seed)
    run = synthetic_run(args.items, args.methods, args.seed)
    workloads: dict[str, Callable[[], object]] = {
        "paired_bootstrap auroc+ece": lambda: paired_bootstrap(
            a, b, perf, n_resamples=args.resamples, seed=args.seed),
        "paired_bootstrap auroc": lambda: paired_bootstrap(
            a, b, perf, metrics=("auroc",), n_resamples=args.resamples, seed=args.seed),
        "paired_bootstrap ece": lambda: paired_bootstrap(
            a, b, perf, metrics=("ece",), n_resamples=args.resamples, seed=args.seed),
        f"method_summaries ({args.methods} methods x 8 metrics)": lambda: method_summaries(
            run, n_resamples=args.resamples, seed=args.seed),
    }
    print(f"N = {args.items} items, B = {args.resamples} resamples, "
          f"{args.repeats} repeats; {platform.python_version()} on {platform.machine()}")
    print(f"{'workload':<46} {'wall best':>9} {'wall median':>11} {'CPU best':>9}")
    for name, fn in workloads.items():
        wall, cpu = [], []
        for _ in range(args.repeats):
            w0, c0 = time.perf_counter(), time.process_time()
            fn()
            wall.append(time.perf_counter() - w0)
            cpu.append(time.process_time() - c0)
        print(f"{name:<46} {min(wall):9.3f} {statistics.median(wall):11.3f} {min(cpu):9.3f}")


def synthetic_scores(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two methods' scores and p̄ of ``n`` items: A informative, B noise, p̄ on a 0.1 grid."""
    rng = np.random.default_rng(seed)
    perf = rng.integers(0, 11, n) / 10
    a = np.clip(perf * 0.7 + 0.15 + rng.normal(0, 0.15, n), 0, 1)
    b = rng.uniform(0, 1, n)
    return a, b, perf


def synthetic_run(n: int, n_methods: int, seed: int) -> RunData:
    """An in-memory run folder with ``n_methods`` methods (scores.jsonl rows only)."""
    rng = np.random.default_rng(seed + 1)
    perf = rng.integers(0, 11, n) / 10
    names = [f"m{k}" for k in range(n_methods)]
    noise = np.linspace(0.05, 0.5, n_methods)
    scores = [
        {
            "id": f"item{i}",
            "p_bar": float(perf[i]),
            "scores": {
                m: float(np.clip(perf[i] + rng.normal(0, sd), 0, 1))
                for m, sd in zip(names, noise, strict=True)
            },
        }
        for i in range(n)
    ]
    return RunData(
        path=Path("synthetic"), config={"ece_bins": 10},
        metrics={"methods": {m: {} for m in names}}, scores=scores, samples=[], perturbations=[],
    )


if __name__ == "__main__":
    main()

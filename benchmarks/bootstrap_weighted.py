"""Bootstrap CIs on per-generation data: the plain resample loop vs the weighted engine.

Per-generation evaluation reaches 10^5 rows (200 items × 30 samples × methods). Each
metric's 1000-resample bootstrap distribution on ``--rows`` synthetic rows (default
100,000; 0/1 correctness as target, label and quality) is computed two ways, on the same
resample indices:

- **loop**: the plain one-sample metric of :mod:`credo.evaluate.metrics`
  (scikit-learn's ROC, average precision and Brier) called on every resample by
  :func:`scipy.stats.bootstrap` (``bootstrap_distribution`` with the function: what
  ``bootstrap_ci("auroc", ...)`` did before the weighted engine); ``--loop rows`` hands scipy's
  (B, N) matrix of resamples to the row functions instead (``RowMetric``, what the
  report's ``method_summaries`` did), which is far slower at this N for the
  scikit-learn metrics (AUROC: 607 s CPU);
- **weighted**: :mod:`credo.evaluate.weighted`, each metric on its own and then all eight
  metrics of one method from one set of weights (:func:`bootstrap_cis`, what
  ``evaluate_responses`` does).

Wall-clock and process CPU seconds are printed (CPU is steadier on a shared machine),
with the largest difference between the two distributions. ``--scores continuous`` (the
default: every score distinct, the worst case) or ``discrete`` (31 levels, like Answer
Consistency with n = 30). No model is loaded.

Usage::

    PYTHONPATH=src python benchmarks/bootstrap_weighted.py
    PYTHONPATH=src python benchmarks/bootstrap_weighted.py --scores discrete --skip-loop
"""

from __future__ import annotations

import argparse
import platform
import time
import warnings
from collections.abc import Callable

import numpy as np

from credo.evaluate.bootstrap import (
    NAMED_METRICS,
    bootstrap_cis,
    bootstrap_distribution,
    row_metrics,
)
from credo.evaluate.weighted import FAST_METRICS


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=100_000, help="N rows (generations)")
    ap.add_argument("--resamples", type=int, default=1000, help="B bootstrap resamples")
    ap.add_argument("--scores", choices=["continuous", "discrete"], default="continuous")
    ap.add_argument("--metrics", default=",".join(FAST_METRICS), help="comma-separated")
    ap.add_argument("--loop", choices=["calls", "rows"], default="calls",
                    help="the plain path: one call per resample, or the row functions")
    ap.add_argument("--skip-loop", action="store_true", help="time the weighted engine only")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]

    s, c = synthetic_generations(args.rows, args.scores, args.seed)
    plain = row_metrics(10) if args.loop == "rows" else NAMED_METRICS
    print(f"N = {args.rows} rows ({args.scores} scores), B = {args.resamples} resamples; "
          f"Python {platform.python_version()} on {platform.machine()}")
    print(f"{'metric':<10} {'loop wall':>9} {'loop CPU':>9} {'weighted wall':>13} "
          f"{'weighted CPU':>12} {'max |diff|':>11}")
    for m in metrics:
        (fast, w_wall, w_cpu) = timed(
            lambda m=m: bootstrap_distribution(m, s, c, args.resamples, args.seed))
        if args.skip_loop:
            print(f"{m:<10} {'-':>9} {'-':>9} {w_wall:13.2f} {w_cpu:12.2f} {'-':>11}")
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            (slow, l_wall, l_cpu) = timed(
                lambda m=m: bootstrap_distribution(plain[m], s, c, args.resamples, args.seed))
        diff = float(np.nanmax(np.abs(fast - slow)))
        print(f"{m:<10} {l_wall:9.2f} {l_cpu:9.2f} {w_wall:13.2f} {w_cpu:12.2f} {diff:11.1e}")
    (_, wall, cpu) = timed(
        lambda: bootstrap_cis(s, c, c, metrics, n_resamples=args.resamples, seed=args.seed))
    print(f"{'all ' + str(len(metrics)) + ' at once (bootstrap_cis)':<44} "
          f"{wall:13.2f} {cpu:12.2f}")


def timed(fn: Callable[[], np.ndarray]) -> tuple[np.ndarray, float, float]:
    """``fn()`` with its wall-clock and process CPU seconds."""
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w0, time.process_time() - c0


def synthetic_generations(n: int, kind: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` generations: a confidence and a 0/1 correctness drawn with that probability."""
    rng = np.random.default_rng(seed)
    s = rng.random(n) if kind == "continuous" else rng.integers(0, 31, n) / 30
    c = (rng.random(n) < s).astype(float)
    return s, c


if __name__ == "__main__":
    main()

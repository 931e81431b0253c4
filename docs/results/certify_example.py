"""The certificates' worked example on a finished labelled run folder, no model call.

Certify each method's threshold on one random half of the run's items (credo.certify, Learn
then Test at risk alpha, confidence 1 - delta), then answer the other half as if it were
unlabelled: accept the items whose score reaches the threshold, and compare the realised
error rate of the accepted answers with alpha. Repeated over a few seeds, with the
split-based coverage at risk that every report carries beside it.

    .venv/bin/python docs/results/certify_example.py runs/results-geo --alpha 0.1 0.2
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from credo import certify, coverage_at_risk
from credo.report.rundata import load_run


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("run")
    p.add_argument("--alpha", type=float, nargs="+", default=[0.1, 0.2])
    p.add_argument("--delta", type=float, default=0.1)
    p.add_argument("--seeds", type=int, default=5)
    args = p.parse_args()
    data = load_run(args.run)
    correct_all = np.array([np.nan if r.get("answer_correct") is None else r["answer_correct"]
                            for r in data.scores], dtype=float)
    print(f"run: {data.path} · {len(data.scores)} items · accuracy of the answers given: "
          f"{np.nanmean(correct_all):.3f}")
    print("| method | α | coverage at risk α (splits: mean ± sd, share of splits over α) "
          "| half-and-half, per seed: threshold · accepted / items · realised error |")
    print("|---|---|---|---|")
    for method in data.methods:
        s_all = np.array([_num(r.get("scores", {}).get(method)) for r in data.scores])
        ok = np.isfinite(s_all) & np.isfinite(correct_all)
        s, c = s_all[ok], correct_all[ok] >= 0.5
        for alpha in args.alpha:
            cov = coverage_at_risk(s, c, alpha, args.delta, splits=100, seed=0)
            cells = []
            for seed in range(args.seeds):
                order = np.random.default_rng(seed).permutation(s.size)
                cal, new = order[: s.size // 2], order[s.size // 2:]
                cert = certify(s[cal], c[cal], alpha=alpha, delta=args.delta, seed=seed)
                acc = cert.accept(s[new])
                err = float(np.mean(~c[new][acc])) if acc.any() else math.nan
                t = "none" if cert.threshold is None else f"{cert.threshold:.3f}"
                cells.append(f"{t} · {int(acc.sum())}/{new.size} · "
                             + ("–" if math.isnan(err) else f"{err:.3f}"))
            print(f"| {method} | {alpha:g} | {cov.coverage_mean:.3f} ± {cov.coverage_std:.3f}, "
                  f"{cov.exceed_rate:.2f} | {'; '.join(cells)} |")


def _num(x: object) -> float:
    return float(x) if isinstance(x, int | float) else math.nan


if __name__ == "__main__":
    main()

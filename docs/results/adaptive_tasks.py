"""Adaptive sampling's results table: every stopping rule replayed on finished full runs, no model
call.

For each run folder, `credo.simulate_adaptive` replays the full run from its cache and each
rule (consensus; interval at each epsilon; decision at each threshold) as a live adaptive run
would have drawn it, then prints one markdown row per task and rule: the samples saved per
stage (original, writer candidates, perturbed) and overall, and for each method the change
of AUROC (adaptive - full) with its 95% paired bootstrap CI over items.

    CREDO_CACHE_DIR=/tmp/results-cache .venv/bin/python docs/results/adaptive_tasks.py \\
        runs/results-adaptive-arc-easy runs/results-adaptive-arc-challenge \\
        runs/results-adaptive-obqa --epsilon 0.25 0.4 --threshold 0.5
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from credo.api import simulate_adaptive
from credo.pipeline.simulate import STAGES

METHODS = ("self_consistency", "semantic_entropy", "c3", "c3_cross")


def point_cells(point) -> list[str]:
    """A replayed point's table cells: saved per stage and overall, ΔAUROC [CI] a method."""
    cells = [f"{point.saved_in(s):.0%}" for s in STAGES] + [f"**{point.saved:.0%}**"]
    for m in METHODS:
        d = point.deltas.get(m, {}).get("auroc")
        cells.append("n/a" if d is None else f"{d.delta:+.3f} [{d.low:+.3f}, {d.high:+.3f}]")
    return cells


def _decisions_kept(run: Path, adaptive: dict[str, dict[str, float]],
                    t: float) -> dict[str, float]:
    """Per method: the share of items whose decision (score ≥ t) is the full run's."""
    full = {r["id"]: r["scores"] for r in map(json.loads, (run / "scores.jsonl").open())}
    out = {}
    for m in METHODS:
        same = [(adaptive[i][m] >= t) == (full[i][m] >= t) for i in adaptive
                if i in full and m in adaptive[i] and m in full[i]]
        if same:
            out[m] = sum(same) / len(same)
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument("--epsilon", type=float, nargs="*", default=[0.25, 0.4])
    p.add_argument("--threshold", type=float, nargs="*", default=[])
    p.add_argument("--window", type=int, nargs="*", default=[4])
    p.add_argument("--round", type=int, default=4)
    p.add_argument("--min", type=int, default=4)
    p.add_argument("--scores", nargs="*", default=None,
                   help="the scores the interval and decision rules read (default: all four)")
    p.add_argument("--no-consensus", action="store_true")
    p.add_argument("--bootstrap", type=int, default=1000)
    p.add_argument("--json", type=Path, help="also write every point here")
    args = p.parse_args()
    head = ["task", "rule", "setting", *(f"saved {s}" for s in STAGES), "saved all",
            *(f"ΔAUROC {m}" for m in METHODS)]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    dump = []
    base = {"round": args.round, "min": args.min}
    read = {} if args.scores is None else {"scores": args.scores}
    for run in args.runs:
        settings: list[tuple[str, list[float | None], dict, str]] = [] if args.no_consensus else [
            ("consensus", [None], {**base, "window": w}, f"window {w}") for w in args.window
        ]
        if args.epsilon:
            settings.append(("interval", list(args.epsilon), {**base, **read}, "ε"))
        settings += [("decision", [None], {**base, **read, "threshold": t}, f"t = {t:g}")
                     for t in args.threshold]
        for rule, eps, options, label in settings:
            sim = simulate_adaptive(run, [rule], eps, options=options, write=False,
                                    n_resamples=args.bootstrap)
            for point in sim.points:
                setting = f"ε = {point.epsilon:g}" if rule == "interval" else label
                if read and rule != "consensus":
                    setting += f", reads {'+'.join(args.scores)}"
                cells = [run.name.removeprefix("results-adaptive-"), rule, setting]
                print("| " + " | ".join(cells + point_cells(point)) + " |", flush=True)
                if rule == "decision":
                    kept = _decisions_kept(run, point.scores, options["threshold"])
                    print("    decisions (score ≥ t) equal to the full run's: " + ", ".join(
                        f"{m} {v:.0%}" for m, v in kept.items()), flush=True)
                dump.append({"run": str(run), "rule": rule, "setting": setting,
                             "saved": point.saved,
                             "saved_stage": {s: point.saved_in(s) for s in STAGES},
                             "auroc": {m: point.deltas[m]["auroc"].delta
                                       for m in METHODS if m in point.deltas},
                             "drawn": point.drawn})
    if args.json:
        args.json.write_text(json.dumps(dump, indent=1))


if __name__ == "__main__":
    main()

"""does the interval rule's saving grow with n? Replays each full run as if it had
been run with n = m = 8, 12 and 16, from its cache and no model call: sample i of a request
is the same whatever n, so the run at n = 8 is the first 8 samples of each request (and the
first writer candidates), and is itself the "full run" its adaptive replay is compared to.

    CREDO_CACHE_DIR=/tmp/results-cache .venv/bin/python docs/results/adaptive_by_n.py \\
        runs/results-adaptive-arc-easy runs/results-adaptive-arc-challenge \\
        runs/results-adaptive-obqa --epsilon 0.1
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import yaml
from adaptive_tasks import METHODS, point_cells  # this folder's table script

from credo.api import simulate_adaptive
from credo.pipeline.simulate import STAGES


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument("--sizes", type=int, nargs="+", default=[8, 12, 16])
    p.add_argument("--epsilon", type=float, default=0.1)
    p.add_argument("--bootstrap", type=int, default=1000)
    args = p.parse_args()
    print("| task | n = m | " + " | ".join(f"saved {s}" for s in STAGES) + " | saved all | "
          + " | ".join(f"ΔAUROC {m}" for m in METHODS) + " |")
    print("|" + "---|" * (3 + len(STAGES) + len(METHODS)))
    for run in args.runs:
        config = yaml.safe_load((run / "config.yaml").read_text())
        for size in args.sizes:
            with tempfile.TemporaryDirectory() as tmp:
                folder = Path(tmp) / run.name
                folder.mkdir()
                (folder / "config.yaml").write_text(yaml.safe_dump({**config, "n": size,
                                                                    "m": size}))
                sim = simulate_adaptive(folder, ["interval"], [args.epsilon], write=False,
                                        n_resamples=args.bootstrap)
            cells = [run.name.removeprefix("results-adaptive-"), str(size)]
            print("| " + " | ".join(cells + point_cells(sim.points[0])) + " |", flush=True)


if __name__ == "__main__":
    main()

"""Start-up cost of the command line: ``credo --help`` and ``import credo.cli`` in a fresh
interpreter, against a bare ``python -c pass``, each the median of ``--repeat`` runs.

We measured ``credo --help`` at 1.0 s before the redesign (``import credo.cli``
loaded the runner, scikit-learn and scipy); the command line now imports heavy
libraries only inside the commands that need them.

    python benchmarks/cli_startup.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

CREDO = str(Path(sys.executable).with_name("credo"))
CASES = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "import credo.cli": [sys.executable, "-c", "import credo.cli"],
    "credo --help": [CREDO, "--help"],
}


def median_seconds(cmd: list[str], repeat: int) -> float:
    """Median wall time of ``repeat`` runs of ``cmd`` (output discarded)."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    results = {name: median_seconds(cmd, args.repeat) for name, cmd in CASES.items()}
    base = results["python -c pass"]
    for name, seconds in results.items():
        print(f"{name:18s} {seconds:6.3f} s   {seconds / base:5.1f}x bare python")


if __name__ == "__main__":
    main()

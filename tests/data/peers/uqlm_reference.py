"""UQLM's own score calibration on fixed scores: writes ``uqlm_0.6.7.json``, which
``tests/test_combined_scores.py`` compares credo's fitted functions with.

Run it in a throwaway environment that has ``uqlm==0.6.7`` (never credo's own: its pins
differ), from this folder:

    python uqlm_reference.py

UQLM's ``ScoreCalibrator`` fits and applies on the same items (in-sample, no
cross-fitting): ``platt`` is scikit-learn's ``LogisticRegression()`` with its default L2
penalty (C = 1), ``isotonic`` ``IsotonicRegression(out_of_bounds="clip")``. The scores
and 0/1 labels are drawn here with a fixed seed.
"""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path

import numpy as np
from uqlm.calibration import ScoreCalibrator
from uqlm.utils.results import UQResult


def main() -> None:
    rng = np.random.default_rng(4100)
    p = rng.random(150)
    scores = np.round(np.clip(p + rng.normal(0, 0.25, p.size), 0, 1), 3)
    correct = (rng.random(p.size) < p).astype(int)
    out = {"uqlm": version("uqlm"), "scores": scores.tolist(), "correct": correct.tolist()}
    for method in ("platt", "isotonic"):
        result = UQResult({"data": {"judge": scores.tolist()}, "metadata": {}})
        ScoreCalibrator(method).fit_transform(result, correct)
        out[method] = [float(v) for v in result.data["calibrated_judge"]]
    path = Path(__file__).with_name(f"uqlm_{out['uqlm']}.json")
    path.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

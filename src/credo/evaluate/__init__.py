"""Evaluation: join scores with correctness (design.md, ``evaluate/``).

The package is callable: ``credo.evaluate(scores, correct)`` is
:func:`credo.evaluate.arrays.evaluate`, credo's metrics and intervals on any two arrays.
"""

import sys
import types
from typing import Any

from credo.evaluate.bootstrap import (
    bootstrap_ci,
    bootstrap_distribution,
    calibration_correlation,
    calibration_curve,
    polarisation_entropy,
)
from credo.evaluate.certify import Certificate, certify
from credo.evaluate.coverage import coverage_at_risk
from credo.evaluate.metrics import (
    auarc,
    auprc_neg,
    auprc_pos,
    auroc,
    brier,
    ece,
    ece_discrete,
    labels_from_performance,
    mce,
    prr,
)

__all__ = [
    "Certificate",
    "auarc",
    "auprc_neg",
    "auprc_pos",
    "auroc",
    "bootstrap_ci",
    "bootstrap_distribution",
    "brier",
    "calibration_correlation",
    "calibration_curve",
    "certify",
    "coverage_at_risk",
    "ece",
    "ece_discrete",
    "labels_from_performance",
    "mce",
    "polarisation_entropy",
    "prr",
]


class _CallablePackage(types.ModuleType):
    """``credo.evaluate`` itself: the package of the evaluation modules, and, called,
    :func:`credo.evaluate.arrays.evaluate` (imported on the first call: the tables it
    reads are not loaded with the package)."""

    def __call__(self, scores: Any, correct: Any, **options: Any) -> dict[str, float]:
        from credo.evaluate.arrays import evaluate

        return evaluate(scores, correct, **options)


def __getattr__(name: str) -> Any:
    if name == "__wrapped__":  # what the package does when called (inspect.signature)
        from credo.evaluate.arrays import evaluate

        return evaluate
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


sys.modules[__name__].__class__ = _CallablePackage

"""Evaluation: join scores with correctness (design.md, ``evaluate/``).

The package is callable: ``credo.evaluate(scores, correct)`` is
:func:`credo.evaluate.arrays.evaluate`, credo's metrics and intervals on any two arrays.
"""

import sys
import types
from typing import Any

from credo.evaluate.arrays import evaluate as _evaluate_arrays
from credo.evaluate.bootstrap import (
    bootstrap_ci,
    bootstrap_distribution,
    calibration_correlation,
    calibration_curve,
    polarisation_entropy,
)
from credo.evaluate.certify import Certificate, certify, coverage_at_risk
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
    :func:`credo.evaluate.arrays.evaluate`."""

    def __call__(self, scores: Any, correct: Any, **options: Any) -> dict[str, float]:
        return _evaluate_arrays(scores, correct, **options)


__wrapped__ = _evaluate_arrays  # what the package does when called (inspect.signature)
sys.modules[__name__].__class__ = _CallablePackage

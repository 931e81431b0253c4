"""Evaluation: join scores with correctness (design.md, ``evaluate/``)."""

from credo.evaluate.bootstrap import (
    bootstrap_ci,
    bootstrap_distribution,
    calibration_correlation,
    calibration_curve,
    polarisation_entropy,
)
from credo.evaluate.metrics import (
    auprc_neg,
    auprc_pos,
    auroc,
    ece,
    ece_discrete,
    labels_from_performance,
)

__all__ = [
    "auprc_neg",
    "auprc_pos",
    "auroc",
    "bootstrap_ci",
    "bootstrap_distribution",
    "calibration_correlation",
    "calibration_curve",
    "ece",
    "ece_discrete",
    "labels_from_performance",
    "polarisation_entropy",
]

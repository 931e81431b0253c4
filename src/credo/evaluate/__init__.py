"""Evaluation: join scores with correctness (design.md, ``evaluate/``)."""

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

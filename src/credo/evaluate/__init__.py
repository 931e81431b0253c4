"""Evaluation: join scores with correctness (design.md, ``evaluate/``)."""

from credo.evaluate.metrics import (
    auprc_neg,
    auprc_pos,
    auroc,
    ece,
    ece_discrete,
    labels_from_performance,
)

__all__ = ["auprc_neg", "auprc_pos", "auroc", "ece", "ece_discrete", "labels_from_performance"]

"""A metric from outside credo: the mean score of the label-1 items minus the rest's."""

from __future__ import annotations

import numpy as np

from credo.evaluate.registry import metric


@metric("score_gap", label="ScoreGap", target="label", direction="higher", headline=True)
def score_gap_rows(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Per row of (B, N) matrices; NaN where a class is empty."""
    y = np.asarray(labels, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return ((scores * y).sum(axis=1) / y.sum(axis=1)
                - (scores * (1 - y)).sum(axis=1) / (1 - y).sum(axis=1))

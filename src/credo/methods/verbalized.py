"""Verbalized confidence (Tian et al. 2023; 000 App. J "self-report"; 002 §3.5).

After each original sample the model is asked, in the same conversation and greedily,
for the probability that its answer is correct. The reply's number is that sample's
confidence; a reply without a readable probability in [0, 1] is recorded as unparsable
(None), never as 0. The item's value is the mean over the samples that have one.
"""

from __future__ import annotations

import math

import numpy as np

from credo.kernels.registry import Kernel
from credo.methods.base import ORIGINAL, VERBALIZED, ItemSamples, Score, method


@method(
    "verbalized",
    needs=(ORIGINAL, VERBALIZED),
    summary="the model's stated probability that its answer is right (Tian et al.)",
)
def score_verbalized(samples: ItemSamples, kernel: Kernel) -> Score:
    """One stated confidence per original sample that was asked about."""
    n = len(samples.sets[ORIGINAL])
    conf: list[float | None] = [None] * n
    for k, s in enumerate(samples.sets[VERBALIZED]):
        at = s.ref[0] if s.ref else k  # given files may leave out ref: the k-th original
        if 0 <= at < n:
            conf[at] = _confidence(s.answer.value)
    vals = [c for c in conf if c is not None]
    if not vals:
        return Score(np.nan, tuple(conf), ORIGINAL, unavailable="no parsable confidence")
    return Score(float(np.mean(vals)), tuple(conf), ORIGINAL)


def _confidence(value: object) -> float | None:
    """A stated confidence; None for no answer or one that is not a finite number (a given
    file may hold anything there)."""
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None

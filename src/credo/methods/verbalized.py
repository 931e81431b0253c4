"""Verbalized confidence (Tian et al. 2023; Wu et al., App. J "self-report"; Müller et al., §3.5).

After each original sample the model is asked, in the same conversation and greedily,
for the probability that its answer is correct. The reply's number is that sample's
confidence; a reply without a readable probability in [0, 1] is recorded as unparsable
(None), never as 0. The item's value is the mean over the samples that have one.
"""

from __future__ import annotations

import numpy as np

from credo.kernels.registry import Kernel
from credo.methods.base import ORIGINAL, VERBALIZED, ItemSamples, Score, mean_confidence, method


@method(
    "verbalized",
    needs=(ORIGINAL, VERBALIZED),
    summary="the model's stated probability that its answer is right (Tian et al.)",
    min_samples={ORIGINAL: 1, VERBALIZED: 1},
)
def score_verbalized(samples: ItemSamples, kernel: Kernel) -> Score:
    """One stated confidence per original sample that was asked about, in [0, 1] (the
    parser reads nothing outside it); the item's value is their mean, in [0, 1]."""
    n = len(samples.sets[ORIGINAL])
    conf: list[float | None] = [None] * n
    for k, s in enumerate(samples.sets[VERBALIZED]):
        at = s.ref[0] if s.ref else k  # given files may leave out ref: the k-th original
        if 0 <= at < n:
            conf[at] = _probability(s.answer.value)
    vals = [c for c in conf if c is not None]
    if not vals:
        return Score(np.nan, tuple(conf), ORIGINAL, unavailable="no parsable confidence")
    return Score(mean_confidence(vals), tuple(conf), ORIGINAL)


def _probability(value: object) -> float | None:
    """A stated confidence as a float in [0, 1]; None for anything else (no reply, a
    word, NaN, 1.5 from given generations: unparsable, never clipped)."""
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return x if 0.0 <= x <= 1.0 else None

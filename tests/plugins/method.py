"""A scoring method from outside credo: the share of original answers equal to the first."""

from __future__ import annotations

from credo.methods.base import ORIGINAL, method


@method("first_share", needs=(ORIGINAL,))
def first_share(samples, kernel) -> float:
    """The share of the original answers that equal the first one (None matches none)."""
    keys = [s.key for s in samples.sets[ORIGINAL]]
    return sum(k is not None and k == keys[0] for k in keys) / len(keys)

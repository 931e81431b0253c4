"""Self-consistency (Wang et al. 2023) as generalized consistency (Wu et al., App. J, eq. 2)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from credo.kernels.distinct import gram_sum, gram_trace
from credo.kernels.registry import Kernel
from credo.methods.base import ORIGINAL, sample_set_method


@sample_set_method(
    "self_consistency", reads=ORIGINAL,
    summary="agreement among the n original samples (Wu et al., App. J eq. 2)",
)
def self_consistency(samples: Sequence[Hashable], kernel: str | Kernel = "indicator") -> float:
    """Generalized consistency ``C(Y) = 1/(K(K-1)) Σ_i Σ_{j≠i} k(y_i, y_j)`` (Wu et al., eq. 2).

    With the indicator kernel this is the probability that two distinct samples agree.
    Needs K >= 2 samples. The sums run over the distinct answers
    (:mod:`credo.kernels.distinct`), exactly: K² kernel values are U².
    """
    k = len(samples)
    if k < 2:
        raise ValueError(f"self-consistency needs at least 2 samples, got {k}")
    return float((gram_sum(kernel, samples, samples) - gram_trace(kernel, samples))
                 / (k * (k - 1)))

"""Cross-Contextual Consistency (Wu et al., §3, App. G, App. H)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from credo.kernels.distinct import gram_sum, gram_trace
from credo.kernels.registry import Kernel
from credo.methods.base import ORIGINAL, PERTURBED, ItemSamples, method


def mmd2_unbiased(
    original: Sequence[Hashable], perturbed: Sequence[Hashable], kernel: str | Kernel = "indicator"
) -> float:
    """Unbiased empirical MMD² between two sample sets (Wu et al., App. H, eq. 1).

    ``MMD² = 1/(n(n-1)) Σ_{i≠j} k(y_i, y_j) + 1/(m(m-1)) Σ_{i≠j} k(y'_i, y'_j)
    - 2/(nm) Σ_i Σ_j k(y_i, y'_j)`` with ``n = len(original)``, ``m = len(perturbed)``.
    Needs n >= 2 and m >= 2. The estimate can be slightly negative when the two
    distributions agree; with a kernel in [0, 1] it is at most 2. The sums run over
    the distinct answers of each set (:mod:`credo.kernels.distinct`), exactly.
    """
    n, m = len(original), len(perturbed)
    if n < 2 or m < 2:
        raise ValueError(f"the unbiased MMD² needs at least 2 samples per set, got n={n}, m={m}")
    within_x = (gram_sum(kernel, original, original) - gram_trace(kernel, original)) \
        / (n * (n - 1))
    within_y = (gram_sum(kernel, perturbed, perturbed) - gram_trace(kernel, perturbed)) \
        / (m * (m - 1))
    cross = gram_sum(kernel, original, perturbed) / (n * m)
    return float(within_x + within_y - 2.0 * cross)


def c3(
    original: Sequence[Hashable], perturbed: Sequence[Hashable], kernel: str | Kernel = "indicator"
) -> float:
    """C3 = 1 − MMD²/2, clipped to [0, 1] (Wu et al., App. H, "Normalization and range of C3").

    ``original`` holds the n answers sampled from the original prompt and ``perturbed``
    the m answers sampled from context-perturbed prompts; for the indicator kernel they
    are hashable normalised answers, ``None`` marking an unparsable one. 1 means the
    answer distribution did not move under perturbation, 0 a complete shift. The clip
    matters only for the unbiased estimator's small negative values (C3 slightly > 1).
    """
    return float(np.clip(1.0 - mmd2_unbiased(original, perturbed, kernel) / 2.0, 0.0, 1.0))


def c3_cross(
    original: Sequence[Hashable], perturbed: Sequence[Hashable], kernel: str | Kernel = "indicator"
) -> float:
    """C3 cross-comparison: mean pairwise agreement between the two sets (Wu et al., App. G).

    ``S_cross = 1/(nm) Σ_i Σ_j k(y_i, y'_j)``.
    """
    n, m = len(original), len(perturbed)
    if n < 1 or m < 1:
        raise ValueError(f"cross-comparison needs non-empty sets, got n={n}, m={m}")
    return float(gram_sum(kernel, original, perturbed) / (n * m))


@method("c3", needs=(ORIGINAL, PERTURBED), summary="C3 = 1 − MMD²/2 (Wu et al., App. H)",
        min_samples={ORIGINAL: 2, PERTURBED: 2})
def score_c3(samples: ItemSamples, kernel: Kernel) -> float:
    """C3 of one item from its original and perturbed samples, in [0, 1] (clipped, see
    :func:`c3`); 1 when both sets hold one answer. Not available below 2 samples a set."""
    return c3(samples.answers(ORIGINAL), samples.answers(PERTURBED), kernel)


@method("c3_cross", needs=(ORIGINAL, PERTURBED), summary="C3 cross-comparison (Wu et al., App. G)",
        min_samples={ORIGINAL: 1, PERTURBED: 1})
def score_c3_cross(samples: ItemSamples, kernel: Kernel) -> float:
    """C3 cross-comparison of one item, in [0, 1] (a mean of kernel values in [0, 1]);
    1 when both sets hold one answer. Not available without a sample in each set."""
    return c3_cross(samples.answers(ORIGINAL), samples.answers(PERTURBED), kernel)

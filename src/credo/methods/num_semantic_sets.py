"""Number of semantic sets (Lin et al., TMLR 2024, "Generating with Confidence", §4.1,
U_NumSet; Kuhn et al. 2023's clusters)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from credo.kernels.registry import Kernel
from credo.methods.base import ORIGINAL, sample_set_method
from credo.methods.graph import semantic_clusters


def num_semantic_sets(
    answers: Sequence[Hashable | None], kernel: str | Kernel = "indicator"
) -> int:
    """``C``, the number of semantic clusters among the K answers (those of
    :func:`credo.methods.semantic_entropy`; an unparsable answer is its own). C lies in
    [1, K]. Needs K >= 2."""
    return int(semantic_clusters(answers, kernel).max()) + 1


@sample_set_method(
    "num_semantic_sets", reads=ORIGINAL,
    summary="1 − (C − 1)/(K − 1), C semantic sets among the n samples (Lin et al. 2024)",
)
def num_semantic_sets_confidence(answers: Sequence[Hashable | None], kernel: Kernel) -> float:
    """Confidence ``1 − (C − 1) / (K − 1)`` in [0, 1]: 1 for one set, 0 for K sets."""
    return 1.0 - (num_semantic_sets(answers, kernel) - 1) / (len(answers) - 1)

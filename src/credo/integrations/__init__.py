"""credo inside the tools users already run: credo's scores of one question's repeated
answers as an inspect_ai epoch reducer and metrics (:mod:`credo.integrations.inspect_ai`,
found by inspect by name, ``credo/self_consistency``, through credo's ``inspect_ai``
entry point) and as lm-evaluation-harness metrics
(:mod:`credo.integrations.lm_eval`, named in a task's YAML). Each tool's package is
imported by its own module only, when that tool loads it; nothing else of credo imports
this package.

The scores are credo's own functions (:mod:`credo.methods`) over the answers of one
question's samples, compared by the indicator kernel (:func:`question_scores`), so a
tool's table shows the numbers ``credo score`` computes from that tool's log.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence

from credo.methods.self_consistency import self_consistency
from credo.methods.semantic_entropy import semantic_entropy_confidence

__all__ = ["SCORES", "modal_answer", "question_score"]

SCORES = ("self_consistency", "semantic_entropy")
"""The methods the tools' reducers and metrics compute: those that read one question's
samples alone (credo's ``self_consistency``; ``semantic_entropy`` as credo reports it,
the confidence 1 − SE / ln K)."""


def question_score(method: str, answers: Sequence[Hashable | None]) -> float:
    """credo's score ``method`` (one of :data:`SCORES`) of one question's ``answers``
    (None: an answer that could not be read, which matches no other), under the
    indicator kernel: what ``credo score`` gives that question for the same answers.
    NaN below two answers (credo reports such a question's score not available)."""
    if method not in SCORES:
        raise ValueError(f"credo scores {', '.join(SCORES)} over a question's samples, "
                         f"not {method!r}")
    if len(answers) < 2:
        return math.nan
    if method == "self_consistency":
        return self_consistency(list(answers), "indicator")
    return semantic_entropy_confidence(list(answers), "indicator")  # type: ignore[arg-type]


def modal_answer(answers: Sequence[Hashable | None]) -> Hashable | None:
    """The answer credo gives for a question: its commonest readable answer, the first
    seen among equally common ones (under the indicator kernel, the answer whose
    samples agree with most others); None when none could be read."""
    counts = Counter(a for a in answers if a is not None)
    return counts.most_common(1)[0][0] if counts else None

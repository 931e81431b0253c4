"""Answer Consistency (Müller et al., §3.5, App. A.11.2): agreement of each generation with
the others.

``AC_i = 1/(n-1) Σ_{j≠i} 1[y_j = y_i]``: the share of the other samples whose answer
equals sample i's. On arithmetic tasks y is the extracted number; on multiple choice it
is APriCoT's per-option verdict (Müller et al., §3.6: each option is judged correct / incorrect by
its own chain-of-thought prompt, and agreement is counted among the verdicts on the same
option). A generation without a parseable answer gets 0.0, as in Müller et al., App. A.11.3. The
scores take the n discrete values j/(n-1), so their ECE uses one bin per value.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from credo.kernels.distinct import distinct_answers
from credo.kernels.registry import Kernel
from credo.methods.base import APRICOT, ORIGINAL, ItemSamples, Score, mean_confidence, method
from credo.tasks.base import AnswerFormat


def answer_consistency(samples: Sequence[Hashable | None]) -> list[float]:
    """One AC value per sample, in sample order (Müller et al., App. A.11.2).

    ``samples`` are normalised answers; ``None`` marks an unparsable one, which scores
    0.0 and matches nothing. Needs at least 2 samples.
    """
    n = len(samples)
    if n < 2:
        raise ValueError(f"answer consistency needs at least 2 samples, got {n}")
    found = distinct_answers(samples)  # sample i agrees with the others of its answer
    counts = [int(c) for c in found.counts]
    return [0.0 if a < 0 else (counts[a] - 1) / (n - 1) for a in found.index.tolist()]


def ac_levels(n: int) -> tuple[float, ...]:
    """The values AC can take with n samples: ``j / (n-1)`` for j = 0..n-1."""
    return tuple(j / (n - 1) for j in range(n))


def _needs(fmt: AnswerFormat) -> tuple[str, ...]:
    return (APRICOT,) if fmt == AnswerFormat.CHOICE else (ORIGINAL,)


@method(
    "answer_consistency",
    needs=_needs,
    summary="per-generation agreement AC_i (Müller et al., App. A.11.2; APriCoT on choice tasks)",
    min_samples={ORIGINAL: 2, APRICOT: 2},
)
def score_answer_consistency(samples: ItemSamples, kernel: Kernel) -> Score:
    """AC per generation, in [0, 1]; the item's value is their mean
    (:func:`~credo.methods.base.mean_confidence`). On choice tasks an option's verdicts
    take the values j/(k − 1) of its own count k; ``levels`` holds those of every count.
    Not available below 2 samples (2 verdicts on some option)."""
    if samples.format == AnswerFormat.CHOICE:
        verdicts = samples.sets[APRICOT]
        by_option: dict[int, list[int]] = {}
        for idx, s in enumerate(verdicts):
            by_option.setdefault(s.ref[0], []).append(idx)
        responses: list[float | None] = [None] * len(verdicts)
        sizes = set()
        for idxs in by_option.values():
            if len(idxs) < 2:
                continue
            sizes.add(len(idxs))
            acs = answer_consistency([verdicts[i].answer.value for i in idxs])
            for i, v in zip(idxs, acs, strict=True):
                responses[i] = v
        if not sizes:
            return Score.not_available("APriCoT needs at least 2 verdicts per option")
        vals = [r for r in responses if r is not None]
        levels = tuple(sorted({v for k in sizes for v in ac_levels(k)}))
        return Score(mean_confidence(vals), tuple(responses), APRICOT, levels)
    answers = samples.answers(ORIGINAL)
    acs = answer_consistency(answers)
    return Score(mean_confidence(acs), tuple(acs), ORIGINAL, ac_levels(len(answers)))

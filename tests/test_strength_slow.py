"""The surprisal path against an independent one (003 §3.3 eq. 1; issue 5 part 2).

llama.cpp forced decoding (credo.models.forced.ForcedDecodingScorer) is compared with
a log-softmax of the logits that transformers computes from the same GGUF file
(de-quantised to float32). The two differ only by llama.cpp's quantised arithmetic.
"""

from __future__ import annotations

import numpy as np
import pytest

from credo.models.forced import ForcedDecodingScorer
from credo.strength.surprisal import mean_surprisal

TEXTS = (
    "The mean of a sample is the sum of the observations divided by the number of "
    "observations.",
    "A student mixed 25 grams of salt into 1,000 grams of water. What is the mass of the "
    "saltwater mixture?",
    "Snow is warm, and it can be very sticky.",
)


@pytest.mark.slow
def test_forced_decoding_matches_a_manual_log_softmax():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from credo.models.weights import resolve_weights

    path = resolve_weights("smollm2-135m")
    ref_model = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32
    )
    ref_model.eval()
    scorer = ForcedDecodingScorer("smollm2-135m", n_ctx=1024)
    try:
        for text in TEXTS:
            gen = scorer.score(text)
            ids = scorer.context_ids + scorer.token_ids(text)
            assert len(gen.logprobs) == len(ids) - 1  # every text token, none of the context
            with torch.no_grad():
                logits = ref_model(torch.tensor([ids])).logits[0].double()
            manual = torch.log_softmax(logits, dim=-1)
            ref = np.array([manual[i, ids[i + 1]].item() for i in range(len(ids) - 1)])
            got = np.array([t.logprob for t in gen.logprobs])
            assert got.shape == ref.shape
            # Same distribution up to quantised arithmetic. Measured (Q4_1 weights): mean
            # |difference| 0.04-0.10 nats a token, at most 0.57; h within 1%.
            assert np.corrcoef(got, ref)[0, 1] > 0.98
            assert np.mean(np.abs(got - ref)) < 0.2
            h_got, h_ref = mean_surprisal(got), mean_surprisal(ref)
            assert h_got == pytest.approx(h_ref, rel=0.03), (text, h_got, h_ref)
        # a character the tokenizer splits (the first byte of "χ" is a token of its own):
        # the server reports it folded into the next token, so h(x) is unavailable
        split = scorer.score("The χ2 test of independence.")
        assert split.logprobs == () and split.finish_reason == "partial-utf8"
    finally:
        scorer.close()

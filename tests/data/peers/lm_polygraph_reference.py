"""LM-Polygraph's own estimators on fixed samples: writes ``lm_polygraph_0.7.0.json``,
which ``tests/test_new_estimators.py`` compares credo's LexSim, LUQ, semantic density and
CoCoA with.

Run it in a throwaway environment that has ``lm-polygraph==0.7.0`` (never credo's own:
its pins differ), from this folder:

    python lm_polygraph_reference.py

The samples are drawn here with a fixed seed: texts from a small vocabulary (so pairs
share words), answers, token logprobs and a kernel matrix in [0, 1] with ones on its
diagonal and equal rows for equal answers. Each estimator is fed the statistics it reads
(LM-Polygraph's names) built from them:

- ``LexicalSimilarity("rougeL")``: ``sample_texts``; as shipped (Porter stemmer) and with
  its scorer built without the stemmer, the tokenisation credo uses;
- ``LUQ``: the entailment and contradiction logits ``ln k`` and ``ln(1 − k)``, so that its
  ``e^E / (e^E + e^C)`` is the kernel k (one sentence per sample);
- ``SemanticDensity``: per target sample i, its token logprobs as the greedy output's,
  the other samples of another text as the samples, contradiction ``1 − k(i, j)`` and
  neutral 0, so that its kernel ``1 − (contra + neutral/2)`` is k;
- ``CocoaMSP``, ``CocoaPPL``: per target sample i, its token logprobs and its kernel
  values with the other samples as ``greedy_sentence_similarity``.
"""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path

import numpy as np
from lm_polygraph.estimators import LUQ, CocoaMSP, CocoaPPL, LexicalSimilarity, SemanticDensity
from rouge_score import rouge_scorer

WORDS = ("the", "cat", "cats", "sat", "on", "a", "mat", "running", "runs", "dog", "Paris",
         "is", "capital", "of", "France", "42", "answer", "blue")


def cases(rng: np.random.Generator, count: int = 12) -> list[dict]:
    out = []
    for _ in range(count):
        n = int(rng.integers(2, 8))
        answers = [int(a) for a in rng.integers(0, max(1, n // 2) + 1, n)]
        texts = []
        for a in answers:  # samples of one answer share their text now and then
            if rng.random() < 0.4 and a in answers[:len(texts)]:
                texts.append(texts[answers.index(a)])
            else:
                length = int(rng.integers(1, 12))
                texts.append(" ".join(rng.choice(WORDS, length)))
        logprobs = []
        for t in texts:
            seen = [j for j, u in enumerate(texts[:len(logprobs)]) if u == t]
            logprobs.append(logprobs[seen[0]] if seen else
                            [float(x) for x in -rng.exponential(0.7, int(rng.integers(1, 9)))])
        base = rng.uniform(0, 1, (n, n))
        gram = np.array([[1.0 if answers[i] == answers[j] else
                          base[min(answers[i], answers[j]), max(answers[i], answers[j])]
                          for j in range(n)] for i in range(n)])
        out.append({"texts": texts, "answers": answers, "logprobs": logprobs,
                    "gram": gram.tolist()})
    return out


def peer(case: dict) -> dict:
    texts, lps, gram = case["texts"], case["logprobs"], np.array(case["gram"])
    n = len(texts)
    shipped = LexicalSimilarity("rougeL")
    plain = LexicalSimilarity("rougeL")
    plain.scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)
    eps = 1e-300
    luq = LUQ()({"semantic_matrix_entail_logits": [np.log(gram + eps)],
                 "semantic_matrix_contra_logits": [np.log(1.0 - gram + eps)]})
    density, msp, ppl = [], [], []
    for i in range(n):
        others = [j for j in range(n) if j != i and texts[j] != texts[i]]
        stats = {
            "greedy_log_likelihoods": [np.array(lps[i])],
            "sample_log_probs": [np.array([sum(lps[j]) for j in others])],
            "sample_tokens": [[list(range(len(lps[j]))) for j in others]],
            "sample_texts": [[texts[j] for j in others]],
            "concat_greedy_semantic_matrix_contra_forward":
                [np.array([1.0 - gram[i, j] for j in others])],
            "concat_greedy_semantic_matrix_neutral_forward": [np.zeros(len(others))],
        }
        density.append(float(SemanticDensity()(stats)[0]))
        sim = {"greedy_sentence_similarity": [np.array([gram[i, j] for j in range(n)
                                                         if j != i])],
               "greedy_log_likelihoods": [np.array(lps[i])]}
        msp.append(float(CocoaMSP()(sim)[0]))
        ppl.append(float(CocoaPPL()(sim)[0]))
    return {"lexsim_stemmed": float(shipped({"sample_texts": [texts]})[0]),
            "lexsim": float(plain({"sample_texts": [texts]})[0]),
            "luq": float(luq[0]), "semantic_density": density,
            "cocoa_msp": msp, "cocoa_ppl": ppl}


def main() -> None:
    found = cases(np.random.default_rng(20250))
    for case in found:
        case["lm_polygraph"] = peer(case)
    out = {"lm_polygraph": version("lm-polygraph"), "cases": found}
    path = Path(__file__).with_name(f"lm_polygraph_{out['lm_polygraph']}.json")
    path.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {path} ({len(found)} cases)")


if __name__ == "__main__":
    main()

"""Does a combination of claim scores beat the best single one? Mohri & Hashimoto's
(ICML 2024) released annotations, read by credo's claim reader.

Per claim, the paper's scores: ``frequency`` (5 samples at T = 1 supporting +1 or
contradicting -1, summed: mapped to [0, 1] as (f + 5)/10), ``gpt`` (GPT-4's verbalised
confidence), ``ordinal`` (the position baseline, ``baseline-ranking-score``) and the
paper's own hand-made combination ``frequency+gpt`` (their sum, mapped by (f + g + 5)/11).
``combined`` is credo's: logistic regression of the claim's label on frequency, gpt and
ordinal (``credo.evaluate.combine``), ``combined (isotonic)`` its isotonic variant. Maps to
[0, 1] are increasing, so they change no ranking and no conformal threshold.

1. Ranking, every claim of the 50 answers: AUROC with a 95% interval resampling answers
   (``credo.evaluate`` with ``questions``: the claims of one answer drawn together), the
   combination cross-fitted over 5 folds of answers (no claim scored by a model that saw
   its answer's labels), and the paired difference with the best single score (the
   paired bootstrap, answers resampled).
2. Certified: ``--splits`` random splits of the 50 answers into 25 calibration and 25 test
   answers; on each, the conformal threshold at α (every retained claim of an answer
   correct, Mohri & Hashimoto Thm 3.1; ``credo.evaluate.claims``) calibrated on the 25 and
   applied to the 25 others. The combination is fitted on the 25 calibration answers only,
   as ``credo certify`` does: their scores cross-fitted over 5 folds of them, the test
   answers scored by the function fitted on all 25. Reported: the share of test answers
   whose retained claims are all correct (≥ 1 − α is the guarantee), and the share of
   claims retained (more is better at the same α).

    .venv/bin/python docs/results/combined_scores.py ../shared/data/conformal_factuality \\
        > /tmp/combined.md           # 200 splits: about a minute on 2 shared cores
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np

import credo
from credo.evaluate.claims import conformal_threshold, nonconformity, satisfies
from credo.evaluate.combine import cross_fit
from credo.evaluate.paired import paired_bootstrap
from credo.tasks.claims import read_claims

DATASETS = {"factscore": "factscore_subclaims_with_scores.json",
            "nq": "nq_subclaims_with_scores.json"}
TITLES = {"factscore": "FActScore (biographies)", "nq": "Natural Questions"}
SINGLE = ("frequency+gpt", "frequency", "gpt", "ordinal")
INPUTS = ("frequency", "gpt", "ordinal")
COMBINED = {"combined": "logistic", "combined (isotonic)": "isotonic"}
N_CAL = 25


def load(path: Path) -> dict[str, np.ndarray]:
    """Per claim: each score in [0, 1], the label, the answer it belongs to, the paper's
    tie-breaking noise."""
    rows = [(i, c) for i, it in enumerate(read_claims(path)) for c in it.claims]
    f = np.array([c.scores["frequency-score"] for _, c in rows])
    g = np.array([c.scores["gpt-score"] for _, c in rows])
    return {"frequency": (f + 5) / 10, "gpt": g, "frequency+gpt": (f + g + 5) / 11,
            "ordinal": np.array([c.scores["baseline-ranking-score"] for _, c in rows]),
            "correct": np.array([bool(c.correct) for _, c in rows]),
            "answer": np.array([i for i, _ in rows]),
            "noise": np.array([c.scores["noise"] for _, c in rows])}


def ranking(d: dict[str, np.ndarray], resamples: int) -> list[str]:
    """Part 1's table rows (markdown)."""
    scores = {m: d[m] for m in SINGLE}
    X = np.column_stack([d[m] for m in INPUTS])
    for name, kind in COMBINED.items():
        scores[name] = cross_fit(kind, INPUTS, X, d["correct"].astype(float),
                                 groups=d["answer"])[0]
    ev = {m: credo.evaluate(s, d["correct"], questions=d["answer"], n_resamples=resamples)
          for m, s in scores.items()}
    best = max(SINGLE, key=lambda m: ev[m]["auroc"])
    rows = []
    for m, e in ev.items():
        diff = ""
        if m in COMBINED:
            p = paired_bootstrap(scores[m], scores[best], d["correct"].astype(float),
                                 metrics=("auroc",), clusters=d["answer"],
                                 n_resamples=resamples)["auroc"]
            diff = f"{p.delta:+.3f} [{p.low:+.3f}, {p.high:+.3f}] vs {best}"
        rows.append(f"| {m} | {e['auroc']:.3f} [{e['auroc_low']:.3f}, {e['auroc_high']:.3f}]"
                    f" | {e['ece']:.3f} | {diff} |")
    return rows


def certified(d: dict[str, np.ndarray], alpha: float, splits: int, seed: int
              ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Part 2: per method, per split, the test answers' factual share and kept share."""
    answers = np.unique(d["answer"])
    rng = np.random.default_rng(seed)
    out: dict[str, tuple[list[float], list[float]]] = {m: ([], []) for m in (*SINGLE,
                                                                             *COMBINED)}
    X = np.column_stack([d[m] for m in INPUTS])
    y = d["correct"].astype(float)
    for _ in range(splits):
        perm = rng.permutation(answers)
        cal = np.isin(d["answer"], perm[:N_CAL])
        test = ~cal
        for m in out:
            if m in COMBINED:
                s = np.empty(y.size)
                s[cal], f = cross_fit(COMBINED[m], INPUTS, X[cal], y[cal],
                                      groups=d["answer"][cal])
                s[test] = f(X[test])
            else:
                s = d[m]
            s = s + d["noise"]  # the paper's tie-breaking, for every score alike
            r = [nonconformity(s[d["answer"] == a], d["correct"][d["answer"] == a])
                 for a in perm[:N_CAL]]
            tau = conformal_threshold(r, alpha)[0]
            tau = math.inf if tau is None else tau
            factual, kept = [], []
            for a in perm[N_CAL:]:
                here = d["answer"] == a
                keep = s[here] > tau
                factual.append(bool(satisfies((keep & d["correct"][here]).sum(),
                                              keep.sum(), 1.0)))
                kept.append(keep.mean())
            out[m][0].append(float(np.mean(factual)))
            out[m][1].append(float(np.mean(kept)))
    return {m: (np.array(a), np.array(b)) for m, (a, b) in out.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", type=Path, help="the conformal_factuality data folder")
    p.add_argument("--splits", type=int, default=200)
    p.add_argument("--resamples", type=int, default=1000)
    p.add_argument("--alphas", default="0.1,0.2")
    args = p.parse_args()
    for name, file in DATASETS.items():
        d = load(args.folder / file)
        print(f"**{TITLES[name]}** ({np.unique(d['answer']).size} answers, {d['correct'].size} "
              f"claims, {d['correct'].mean():.0%} correct): ranking, AUROC with 95% intervals "
              "resampling answers\n")
        print("| score | AUROC | ECE | combined − best single: ΔAUROC [95%] |")
        print("|---|---|---|---|")
        print("\n".join(ranking(d, args.resamples)) + "\n")
        print(f"certified, {args.splits} splits 25/25: factual share of the test answers "
              "(≥ 1 − α guaranteed) · share of claims kept\n")
        alphas = [float(a) for a in args.alphas.split(",")]
        print("| score | " + " | ".join(f"α = {a:g}: factual · kept" for a in alphas) + " |")
        print("|---|" + "---|" * len(alphas))
        res = {a: certified(d, a, args.splits, seed=0) for a in alphas}
        for m in (*SINGLE, *COMBINED):
            cells = [f"{res[a][m][0].mean():.3f} · {res[a][m][1].mean():.3f}" for a in alphas]
            print(f"| {m} | " + " | ".join(cells) + " |")
        for m in COMBINED:
            cells = []
            for a in alphas:
                best = max(SINGLE, key=lambda s, a=a: res[a][s][1].mean())
                diff = res[a][m][1] - res[a][best][1]
                lo, hi = np.quantile(diff, [0.05, 0.95])
                cells.append(f"{diff.mean():+.3f} [{lo:+.3f}, {hi:+.3f}] vs {best}, more in "
                             f"{np.mean(diff > 0):.0%} of splits")
            print(f"| {m} − best single, kept (5-95% of splits) | " + " | ".join(cells) + " |")
        print()


if __name__ == "__main__":
    main()

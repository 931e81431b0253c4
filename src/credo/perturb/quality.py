"""Quality checks of context perturbations (Wu et al., App. A.2-A.4).

* **Neutrality** (A.3) is a statistic of correctness flags and lives in
  :mod:`credo.evaluate.neutrality`.
* **Topic alignment** (A.4): a judge that sees only the perturbation picks one of the
  broad benchmark domains; a perturbation is aligned when the judge picks the domain of
  the benchmark it was written for. :func:`topic_alignment` plans the judge's requests
  through the cached :class:`~credo.generation.executor.Executor`.
* **Diversity** (A.2): the pairwise cosine similarities of the kept perturbations of
  each item (:func:`pairwise_similarities`), and the threshold calibration of A.2:
  paraphrase premises with a model, pool the within-group pairwise similarities of the
  paraphrases and take their 5th percentile as k (:func:`calibrate_threshold`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from credo.generation.executor import Executor, PlannedRequest
from credo.models.embedders import Embedder
from credo.types import GenerationRequest, Message, SamplingParams

# --------------------------------------------------------------------------- diversity


def pairwise_similarities(groups: Sequence[Sequence[str]], embedder: Embedder) -> np.ndarray:
    """All within-group pairwise cosine similarities, pooled over groups (Wu et al., App. A.2).

    Each group contributes its C(g, 2) pairs ``cos(e_i, e_j), i < j`` (the embedder's
    rows are L2-normalised, so the cosine is the dot product). Groups of fewer than 2
    texts contribute nothing. All texts are embedded in one call.
    """
    texts = [t for g in groups for t in g]
    if not texts:
        return np.zeros(0)
    emb = np.asarray(embedder.encode(texts), dtype=float)
    out: list[np.ndarray] = []
    start = 0
    for g in groups:
        e = emb[start : start + len(g)]
        start += len(g)
        if len(g) >= 2:
            iu = np.triu_indices(len(g), k=1)
            out.append((e @ e.T)[iu])
    return np.concatenate(out) if out else np.zeros(0)


def similarity_record(
    groups: Sequence[Sequence[str]], embedder: Embedder, threshold: float | None
) -> dict[str, Any]:
    """The run folder's ``perturbation_similarity.json`` (Wu et al., App. A.2 / Fig. 5).

    ``groups`` are the kept perturbations of each item; groups of fewer than 2 texts are
    left out. Returns ``{"embedder", "threshold", "items", "similarities"}``: the
    embedder's name, the filter's threshold k (NaN when unknown), the number of items with
    two or more kept perturbations and their pooled within-item pairwise cosine
    similarities (:func:`pairwise_similarities`). The report draws the diversity figure
    from this record alone.
    """
    kept = [list(g) for g in groups if len(g) >= 2]
    sims = pairwise_similarities(kept, embedder)
    return {
        "embedder": getattr(embedder, "name", ""),
        "threshold": math.nan if threshold is None else float(threshold),
        "items": len(kept),
        "similarities": sims.tolist(),
    }


PARAPHRASE_SYSTEM_PROMPT = (
    "Rewrite the sentence you are given so that it says exactly the same thing in "
    "different words. Keep its meaning, its facts and its length roughly the same. "
    "Reply with the rewritten sentence only."
)


@dataclass(frozen=True)
class ThresholdCalibration:
    """The A.2 threshold k and what it was computed from."""

    k: float
    percentile: float
    similarities: np.ndarray
    premises: tuple[str, ...]
    paraphrases: tuple[tuple[str, ...], ...]
    unusable: int
    model: str = ""
    embedder: str = ""

    def to_json(self) -> dict:
        """A JSON-ready summary (the similarities as a 50-bin histogram and quantiles)."""
        counts, edges = np.histogram(self.similarities, bins=50, range=(-1.0, 1.0))
        qs = [1, 5, 25, 50, 75, 95, 99]
        return {
            "k": self.k,
            "percentile": self.percentile,
            "model": self.model,
            "embedder": self.embedder,
            "premises": len(self.premises),
            "paraphrases_per_premise": [len(p) for p in self.paraphrases],
            "unusable_paraphrases": self.unusable,
            "pairs": int(self.similarities.size),
            "quantiles": {str(q): float(np.percentile(self.similarities, q)) for q in qs}
            if self.similarities.size
            else {},
            "histogram": {"counts": counts.tolist(), "edges": edges.tolist()},
            "similarities": self.similarities.tolist(),
            "examples": [
                {"premise": pr, "paraphrases": list(pa[:5])}
                for pr, pa in zip(self.premises[:5], self.paraphrases[:5], strict=True)
            ],
        }


def threshold_from_similarities(similarities: Sequence[float], percentile: float = 5.0) -> float:
    """k = the ``percentile``-th percentile of paraphrase similarities (Wu et al., App. A.2: 5th).

    At α = 0.05, at most 5% of paraphrase pairs fall below k, so a candidate kept for
    being below k is a semantically redundant paraphrase with probability at most 5%.
    numpy's linear interpolation between order statistics.
    """
    s = np.asarray(similarities, dtype=float)
    if s.ndim != 1 or s.size == 0:
        raise ValueError("need a non-empty 1-d array of similarities")
    if not 0.0 <= percentile <= 100.0:
        raise ValueError(f"percentile must lie in [0, 100], got {percentile}")
    return float(np.percentile(s, percentile))


def paraphrase_messages(premise: str) -> tuple[Message, ...]:
    """The chat prompt asking for one paraphrase of ``premise`` (Wu et al., App. D.2 is missing)."""
    return (
        Message(role="system", content=PARAPHRASE_SYSTEM_PROMPT),
        Message(role="user", content=premise),
    )


def calibrate_threshold(
    premises: Sequence[str],
    executor: Executor,
    embedder: Embedder,
    *,
    n_paraphrases: int = 50,
    percentile: float = 5.0,
    sampling: SamplingParams | None = None,
) -> ThresholdCalibration:
    """Wu et al., App. A.2: paraphrase each premise ``n_paraphrases`` times, pool the pairwise
    cosine similarities within each premise's paraphrases, return their percentile as k.

    The paper used 30 premises × 50 paraphrases by GPT-4.1 embedded with
    all-mpnet-base-v2 and found k = 0.8124. Paraphrases are samples of one cached request
    per premise (T = 1 by default); a generation with no usable sentence is counted in
    ``unusable`` and left out, never embedded as an empty string.
    """
    premises = tuple(dict.fromkeys(p.strip() for p in premises if p.strip()))
    if not premises:
        raise ValueError("no premises to paraphrase")
    if n_paraphrases < 2:
        raise ValueError(f"need at least 2 paraphrases per premise, got {n_paraphrases}")
    params = sampling or SamplingParams(temperature=1.0, max_tokens=64)
    planned = [
        PlannedRequest(GenerationRequest(messages=paraphrase_messages(p), params=params),
                       n_paraphrases, label=f"paraphrase/{i}")
        for i, p in enumerate(premises)
    ]
    gens = executor.execute(planned, description="paraphrasing premises")
    groups: list[tuple[str, ...]] = []
    unusable = 0
    for g in gens:
        cleaned = [clean_sentence(x.text) for x in g]
        unusable += sum(c is None for c in cleaned)
        groups.append(tuple(c for c in cleaned if c is not None))
    sims = pairwise_similarities(groups, embedder)
    if sims.size == 0:
        raise ValueError("no premise got two usable paraphrases; cannot calibrate")
    return ThresholdCalibration(
        k=threshold_from_similarities(sims, percentile),
        percentile=percentile,
        similarities=sims,
        premises=premises,
        paraphrases=tuple(groups),
        unusable=unusable,
        model=executor.model.identity,
        embedder=getattr(embedder, "name", ""),
    )


_LABEL = re.compile(r"^\s*(?:rewritten(?: sentence)?|paraphrase|sentence)\s*:\s*", re.IGNORECASE)


def clean_sentence(text: str) -> str | None:
    """The first non-empty line without labels or quotes; None when nothing is left."""
    for line in text.strip().splitlines():
        s = _LABEL.sub("", line).strip().strip("\"'“”*` ").strip()
        if s:
            return s
    return None


# --------------------------------------------------------------------------- topic alignment

TOPIC_DOMAINS: tuple[str, ...] = (
    "arithmetic reasoning",
    "statistical reasoning",
    "commonsense reasoning",
    "short-form factual recall",
    "long-form factual or biographical generation",
    "code generation",
)
"""The broad benchmark-level domains of Wu et al., App. A.4."""

TOPIC_SYSTEM_PROMPT = (
    "You classify a short piece of text by the broad domain of questions it would "
    "accompany. Reply with the number of the domain only."
)


def topic_messages(text: str, domains: Sequence[str]) -> tuple[Message, ...]:
    """The judge's prompt: only the perturbation and the numbered domains (Wu et al., App. A.4)."""
    listing = "\n".join(f"{i + 1}. {d}" for i, d in enumerate(domains))
    return (
        Message(role="system", content=TOPIC_SYSTEM_PROMPT),
        Message(role="user", content=f"Text: {text}\n\nDomains:\n{listing}\n\nDomain number:"),
    )


def parse_domain(reply: str, domains: Sequence[str]) -> str | None:
    """The domain a judge's reply names: its first number in 1..len(domains), else the
    longest domain name it contains; None when it names none (recorded as unparsable)."""
    m = re.search(r"\d+", reply)
    if m and 1 <= int(m.group()) <= len(domains):
        return domains[int(m.group()) - 1]
    low = reply.lower()
    named = [d for d in domains if d.lower() in low]
    return max(named, key=len) if named else None


@dataclass(frozen=True)
class TopicCheck:
    """The judge's domain for every perturbation and the aligned fraction (Wu et al., App. A.4)."""

    expected: str
    domains: tuple[str, ...]
    texts: tuple[str, ...]
    judged: tuple[str | None, ...]
    replies: tuple[str, ...]
    judge: str = ""
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def aligned(self) -> int:
        """Perturbations judged to be in the expected domain."""
        return sum(j == self.expected for j in self.judged)

    @property
    def unparsable(self) -> int:
        """Replies naming no domain."""
        return sum(j is None for j in self.judged)

    @property
    def rate(self) -> float:
        """Aligned fraction of all perturbations (unparsable replies count as not aligned)."""
        return self.aligned / len(self.texts) if self.texts else math.nan

    def to_json(self) -> dict:
        """JSON-ready summary plus one row per perturbation."""
        return {
            "judge": self.judge,
            "expected": self.expected,
            "domains": list(self.domains),
            "n": len(self.texts),
            "aligned": self.aligned,
            "rate": self.rate,
            "unparsable": self.unparsable,
            "counts": self.counts,
            "rows": [
                {"text": t, "judged": j, "reply": r, "aligned": j == self.expected}
                for t, j, r in zip(self.texts, self.judged, self.replies, strict=True)
            ],
        }


def topic_alignment(
    perturbations: Sequence[str],
    expected: str,
    executor: Executor,
    *,
    domains: Sequence[str] = TOPIC_DOMAINS,
    sampling: SamplingParams | None = None,
) -> TopicCheck:
    """Ask the judge behind ``executor`` for the domain of each distinct perturbation.

    ``expected`` (the benchmark's domain) is added to ``domains`` when missing. The judge
    decodes greedily (T = 0) by default; its requests are cached like every generation.
    """
    texts = tuple(dict.fromkeys(t.strip() for t in perturbations if t.strip()))
    if not texts:
        raise ValueError("no perturbations to check")
    doms = tuple(domains) if expected in domains else (*domains, expected)
    params = sampling or SamplingParams(temperature=0.0, max_tokens=8)
    planned = [
        PlannedRequest(GenerationRequest(messages=topic_messages(t, doms), params=params), 1,
                       label=f"topic/{i}")
        for i, t in enumerate(texts)
    ]
    gens = executor.execute(planned, description="topic check")
    replies = tuple(g[0].text for g in gens)
    judged = tuple(parse_domain(r, doms) for r in replies)
    counts = {d: judged.count(d) for d in doms}
    counts["unparsable"] = judged.count(None)
    return TopicCheck(expected, doms, texts, judged, replies, executor.model.identity, counts)

"""Context-prefix perturbations with the embedding diversity filter (000 §3, App. A.1-A.2).

For each item an LLM writes short context sentences that are topic-aligned (same broad
domain as the question), content-neutral (no information that helps, hints at,
contradicts or changes the answer) and non-trivial (not a restatement of the question).
Candidates are drawn at T = 1 as consecutive samples of one cached request, cleaned, and
kept in sample order only if their cosine similarity to every kept one is below
``threshold`` (k = 0.8124, App. A.2). The paper's sampling prompt (App. D.1) is missing
from our copy; :data:`PERTURBATION_SYSTEM_PROMPT` is ours.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from credo.config import PerturbationConfig
from credo.models.base import GenerationRequest, Message
from credo.perturb.embeddings import Embedder
from credo.run.executor import Executor, PlannedRequest
from credo.tasks.base import Item

log = logging.getLogger(__name__)

PERTURBATION_SYSTEM_PROMPT = (
    "You write one sentence of background context that will be placed before a question. "
    "Rules:\n"
    "1. Stay on the same broad topic as the question (for example the same kind of "
    "everyday situation, subject or field).\n"
    "2. Be neutral: give no numbers, facts, hints or claims that could help answer, "
    "contradict, or change the answer.\n"
    "3. Do not restate, paraphrase or answer the question, and do not ask a question.\n"
    "4. Write 8 to 30 words.\n"
    "Reply with the sentence only."
)


def perturbation_messages(item: Item, domain: str) -> tuple[Message, ...]:
    """The chat prompt asking for one context sentence for ``item``."""
    topic = f"Domain: {domain}\n" if domain else ""
    return (
        Message(role="system", content=PERTURBATION_SYSTEM_PROMPT),
        Message(
            role="user",
            content=f"{topic}Question: {item.question}\n\nWrite the context sentence.",
        ),
    )


@dataclass(frozen=True)
class PerturbationSet:
    """The kept context prefixes of one item and how the candidates fared."""

    item_id: str
    kept: tuple[str, ...]
    candidates: int
    rejected_invalid: int
    rejected_similar: int

    def prefixes(self, m: int) -> list[str]:
        """``m`` prefixes, one per perturbed sample; kept ones reused in turn if too few."""
        if not self.kept:
            raise ValueError(f"item {self.item_id!r}: no perturbation survived the filters")
        return [self.kept[i % len(self.kept)] for i in range(m)]



_LABEL = re.compile(r"^\s*(?:context(?: sentence)?|sentence|background)\s*:\s*", re.IGNORECASE)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def clean_candidate(
    text: str, question: str, min_words: int = 4, max_words: int = 60
) -> str | None:
    """The usable context sentence in a generation, or None when it breaks the rules.

    Takes the first non-empty line, strips labels ("Context:") and quotes, and rejects
    lines that ask a question, are too short or long, restate the question, or repeat a
    number from the question (a cheap guard for content neutrality on arithmetic).
    """
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    if not lines:
        return None
    s = _LABEL.sub("", lines[0]).strip().strip("\"'“”*` ").strip()
    if not s or s.endswith("?"):
        return None
    words = s.split()
    if not (min_words <= len(words) <= max_words):
        return None
    low, q = _norm(s), _norm(question)
    if low in q or q in low:
        return None
    q_numbers = set(_NUMBER.findall(question))
    if q_numbers & set(_NUMBER.findall(s)):
        return None
    if s[-1] not in ".!":
        s += "."
    return s


def diversity_filter(
    embeddings: np.ndarray, threshold: float, kept: Sequence[int] = ()
) -> list[int]:
    """Greedy filter of 000 App. A.2: keep row i if cos(e_i, e_k) < threshold for all kept k.

    ``embeddings`` are L2-normalised rows visited in order; ``kept`` are indices already
    accepted. Returns the accepted indices (``kept`` first).
    """
    accepted = list(kept)
    for i in range(embeddings.shape[0]):
        if i in accepted:
            continue
        if accepted and float(np.max(embeddings[accepted] @ embeddings[i])) >= threshold:
            continue
        accepted.append(i)
    return accepted


def generate_perturbations(
    items: Sequence[Item],
    m: int,
    domain: str,
    executor: Executor,
    embedder: Embedder,
    config: PerturbationConfig,
) -> dict[str, PerturbationSet]:
    """Up to ``m`` diverse context prefixes per item, from cached candidate samples.

    Round r asks every item still short of ``m`` kept prefixes for more candidates (the
    same request, later sample indices), then re-runs the deterministic filter over all
    candidates in sample order. Stops after ``config.max_rounds``.
    """
    requests = {
        it.id: GenerationRequest(messages=perturbation_messages(it, domain), params=config.sampling)
        for it in items
    }
    drawn = {it.id: 0 for it in items}
    result: dict[str, PerturbationSet] = {}
    pending = list(items)
    for rnd in range(config.max_rounds):
        planned = []
        for it in pending:
            missing = m - (len(result[it.id].kept) if it.id in result else 0)
            extra = config.candidates_per_round or math.ceil(1.5 * missing)
            drawn[it.id] += max(extra, missing)
            planned.append(PlannedRequest(requests[it.id], drawn[it.id], label=it.id))
        gens = executor.execute(planned, description=f"perturbations (round {rnd + 1})")
        for it, g in zip(pending, gens, strict=True):
            result[it.id] = _filter_item(it, [x.text for x in g], m, embedder, config.threshold)
        pending = [it for it in pending if len(result[it.id].kept) < m]
        if not pending:
            break
    for it in pending:
        log.warning(
            "item %s: only %d of %d perturbations kept after %d rounds; reusing them in turn",
            it.id,
            len(result[it.id].kept),
            m,
            config.max_rounds,
        )
    return result


def _filter_item(
    item: Item, texts: list[str], m: int, embedder: Embedder, threshold: float
) -> PerturbationSet:
    cleaned = [clean_candidate(t, item.question) for t in texts]
    valid = [c for c in cleaned if c is not None]
    order = diversity_filter(embedder.encode(valid), threshold) if valid else []
    kept = [valid[i] for i in order][:m]
    return PerturbationSet(
        item_id=item.id,
        kept=tuple(kept),
        candidates=len(texts),
        rejected_invalid=len(texts) - len(valid),
        rejected_similar=len(valid) - len(order),
    )


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[^\w\s]", "", s.lower())).strip()

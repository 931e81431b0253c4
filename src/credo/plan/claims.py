"""Claims of long answers as planned stages.

A long-form run's answer to each item (the original sample credo gives,
:attr:`credo.methods.scoring.ItemResult.answer_index`) is split into atomic claims, and
each claim gets the evidence the claim methods (:mod:`credo.methods.claims`) score it
from. Every request is a :class:`~credo.generation.stage.Stage` run by the one driver
(:class:`credo.pipeline.stages.StageDriver`), so it is cached, counted per ledger stage
and counted by the dry run:

==========================  ========  ====================================================
stage (ledger name)         role      requests
==========================  ========  ====================================================
``claim splitting``         judge     one per item: "list the atomic facts of this text"
                                      (:func:`split_messages`, read by :func:`parse_claims`);
                                      with ``claims.split: sentences`` none: the answer's
                                      sentences (:func:`credo.tasks.longform.claims`) are
                                      its claims, the offline fallback
``claim support``           judge     per claim and per other sample of the item (the
                                      original samples but the answer, then the perturbed
                                      ones): does the sample support, contradict or not
                                      mention the claim (:func:`support_messages`)
``claim confidence``        model     per claim, the model under test asked how likely the
                                      claim is true, 0-100 (:func:`confidence_messages`)
``claim labelling``         grader    per claim of an item with a FActScore knowledge
                                      source: FActScore's retrieve-then-verify prompt
                                      (:func:`credo.tasks.longform.support_messages`), the
                                      same request the ``factscore`` grader asks of a
                                      sentence, so a sentence claim shares its cache entry;
                                      with ``claims.judge_labels``, of an item without one:
                                      the grader's own knowledge
                                      (:func:`judge_label_messages`, judge-only labels)
==========================  ========  ====================================================

All judge and grader requests are greedy (T = 0). Distinct (claim, sample) pairs are
distinct requests; the same pair asked twice is one cache key. Each stage's
``plan(units, context)`` takes ``{item id: ClaimSource}`` (what it reads of the run)
and, after splitting, the claims per item; ``read`` returns plain values per item, which
:func:`evidence` assembles into the :class:`ClaimEvidence` the claim methods read.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from credo.generation.executor import PlannedRequest
from credo.generation.pool import GRADER, JUDGE, MODEL
from credo.generation.stage import Generated, Stage, StagePlan
from credo.tasks.longform import (
    KnowledgeSource,
    parse_support,
    retrieve,
)
from credo.tasks.longform import (
    claims as sentence_claims,
)
from credo.tasks.longform import support_messages as factscore_messages
from credo.types import GenerationRequest, Message, SamplingParams

__all__ = [
    "CONFIDENCE_STAGE",
    "LABEL_STAGE",
    "SPLIT_STAGE",
    "SUPPORTS",
    "SUPPORT_STAGE",
    "ClaimConfidenceStage",
    "ClaimEvidence",
    "ClaimLabelStage",
    "ClaimSource",
    "ClaimSplitStage",
    "ClaimSupportStage",
    "confidence_messages",
    "evidence",
    "judge_label_messages",
    "parse_claims",
    "parse_confidence",
    "parse_verdict",
    "split_messages",
    "support_messages",
]

SPLIT_STAGE = "claim splitting"
SUPPORT_STAGE = "claim support"
CONFIDENCE_STAGE = "claim confidence"
LABEL_STAGE = "claim labelling"

SUPPORTS, CONTRADICTS, NEITHER = 1, -1, 0
"""A support verdict: the sample supports the claim (+1), contradicts it (-1), neither."""

Verdict = int | None
"""+1, -1, 0, or None for a reply that could not be read."""


@dataclass(frozen=True)
class ClaimSource:
    """What the claim stages read of one item of a run: its question, the answer split
    into claims, the other original samples' texts and the perturbed samples' texts."""

    item_id: str
    question: str
    answer: str
    others: tuple[str, ...] = ()
    perturbed: tuple[str, ...] = ()
    entity: str = ""


@dataclass(frozen=True)
class ClaimEvidence:
    """Everything the claim methods read of one item's claims (pure data, cached
    generations only): per claim, the support verdict of each other original sample
    (``original[j][k]``: claim j, sample k) and of each perturbed sample, and the
    model's verbalised confidence in [0, 1] (None: not asked, or unreadable)."""

    item_id: str
    claims: tuple[str, ...]
    original: tuple[tuple[Verdict, ...], ...] = ()
    perturbed: tuple[tuple[Verdict, ...], ...] = ()
    confidence: tuple[float | None, ...] = ()


# --------------------------------------------------------------------------- prompts


def split_messages(text: str) -> tuple[Message, ...]:
    """FActScore-style atomic-fact splitting (Min et al. 2023 §3.3): one fact per line."""
    return (
        Message(role="system", content="You break texts into independent atomic facts."),
        Message(role="user", content=(
            "Break the following text into atomic facts: short, self-contained sentences "
            "that each state one fact, naming their subject instead of using pronouns. "
            "Write one fact per line, each starting with \"- \", and nothing else.\n\n"
            f"Text: {text}")),
    )


_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s+(?P<fact>.+?)\s*$")


def parse_claims(reply: str) -> list[str]:
    """The facts of a splitting reply: every bulleted or numbered line's text, in order,
    duplicates dropped; empty when no line is bulleted (the caller falls back)."""
    s = re.sub(r"^\s*<think>.*?</think>", "", reply, count=1, flags=re.DOTALL | re.IGNORECASE)
    out = [m.group("fact") for line in s.splitlines() if (m := _BULLET.match(line))]
    return list(dict.fromkeys(f for f in out if f))


def support_messages(claim: str, text: str) -> tuple[Message, ...]:
    """Does ``text`` (another sample) support, contradict or not mention ``claim``: the
    frequency score's check (Mohri & Hashimoto 2024 §4; Manakul et al. 2023's
    SelfCheckGPT prompt in three ways)."""
    return (
        Message(role="system", content="Reply with one word: support, contradict or neither."),
        Message(role="user", content=(
            f"Text: {text}\n\nClaim: {claim}\n\nDoes the text support the claim, contradict "
            "it, or neither (it does not say)?")),
    )


_VERDICT_RE = re.compile(r"[\s*_\"'`(\[]*(?P<w>support|contradict|neither)", re.IGNORECASE)
_VERDICTS = {"support": SUPPORTS, "contradict": CONTRADICTS, "neither": NEITHER}


def parse_verdict(reply: str) -> Verdict:
    """+1 / -1 / 0 from a reply starting with support(s/ed) / contradict(s) / neither;
    None when unreadable."""
    s = re.sub(r"^\s*<think>.*?</think>", "", reply, count=1, flags=re.DOTALL | re.IGNORECASE)
    m = _VERDICT_RE.match(s)
    return None if m is None else _VERDICTS[m.group("w").lower()]


def confidence_messages(question: str, claim: str) -> tuple[Message, ...]:
    """The verbalised claim confidence asked of the model under test (Tian et al. 2023's
    verbalised probability, per claim as in Mohri & Hashimoto's GPT-4 confidence)."""
    return (
        Message(role="system", content="Reply with one number from 0 to 100."),
        Message(role="user", content=(
            f"Question: {question}\n\nClaim from an answer: {claim}\n\nHow likely is the "
            "claim to be true, from 0 (certainly false) to 100 (certainly true)?")),
    )


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def parse_confidence(reply: str) -> float | None:
    """The first number of the reply, read as a percentage and clipped to [0, 1]; None
    when there is none."""
    s = re.sub(r"^\s*<think>.*?</think>", "", reply, count=1, flags=re.DOTALL | re.IGNORECASE)
    m = _NUMBER.search(s)
    return None if m is None else min(1.0, max(0.0, float(m.group()) / 100.0))


# --------------------------------------------------------------------------- stages


class _GreedyStage(Stage):
    """A claim stage whose requests are greedy (temperature 0) with ``max_tokens``."""

    def __init__(self, max_tokens: int) -> None:
        self.params = SamplingParams(temperature=0.0, max_tokens=max_tokens)


class ClaimSplitStage(_GreedyStage):
    """Per item, one request to the judge: its answer's atomic facts (``read``: the
    claims per item; a reply with no bulleted line gives the answer's sentences, and
    the item id goes into :attr:`fallbacks`)."""

    name = SPLIT_STAGE
    role = JUDGE
    description = "splitting claims"
    missing = "claims missing"

    def __init__(self, max_tokens: int) -> None:
        super().__init__(max_tokens)
        self.fallbacks: list[str] = []
        self._answers: dict[str, str] = {}

    def plan(self, items: Mapping[str, ClaimSource], context: object = None) -> StagePlan:
        self._answers = {i: s.answer for i, s in items.items()}
        return {i: [PlannedRequest(GenerationRequest(messages=split_messages(s.answer),
                                                     params=self.params),
                                   1, label=f"{i}/split", stage=self.name)]
                for i, s in items.items() if s.answer.strip()}

    def read(self, generations: Generated) -> dict[str, tuple[str, ...]]:
        out = {}
        for i, gens in generations.items():
            found = parse_claims(gens[0][0].text)
            if not found:
                self.fallbacks.append(i)
                found = sentence_claims(self._answers[i])
            out[i] = tuple(found)
        return out

    def placeholder(self, request: GenerationRequest) -> str:
        """A reply of ``max_tokens`` tokens cut into facts of about 12 tokens."""
        per = max(1, request.params.max_tokens // 12)
        return "\n".join(f"- Placeholder claim {k} {'x' * 36}." for k in range(per))


class ClaimSupportStage(_GreedyStage):
    """Per claim and per other sample, one judge request (module docstring); ``context``
    is ``{item id: claims}``; ``read``: per item ``(original, perturbed)`` verdicts,
    ``[claim][sample]``. ``perturbed`` False asks of the original samples only."""

    name = SUPPORT_STAGE
    role = JUDGE
    description = "checking claim support"
    missing = "claim support missing"

    def __init__(self, max_tokens: int, perturbed: bool = True) -> None:
        super().__init__(max_tokens)
        self.perturbed = perturbed
        self._shape: dict[str, tuple[int, int, int]] = {}

    def plan(self, items: Mapping[str, ClaimSource],
             context: Mapping[str, Sequence[str]]) -> StagePlan:
        out: StagePlan = {}
        self._shape = {}
        for i, src in items.items():
            cs = context.get(i, ())
            pert = src.perturbed if self.perturbed else ()
            self._shape[i] = (len(cs), len(src.others), len(pert))
            out[i] = [PlannedRequest(GenerationRequest(messages=support_messages(c, t),
                                                       params=self.params),
                                     1, label=f"{i}/claim-support", stage=self.name)
                      for c in cs for t in (*src.others, *pert)]
        return out

    def read(self, generations: Generated) -> dict[str, tuple[tuple, tuple]]:
        out = {}
        for i, gens in generations.items():
            n_claims, n_orig, n_pert = self._shape[i]
            width = n_orig + n_pert
            v = [parse_verdict(g[0].text) for g in gens]
            rows = [v[j * width:(j + 1) * width] for j in range(n_claims)]
            out[i] = (tuple(tuple(r[:n_orig]) for r in rows),
                      tuple(tuple(r[n_orig:]) for r in rows))
        return out

    def placeholder(self, request: GenerationRequest) -> str:
        return "support"


class ClaimConfidenceStage(_GreedyStage):
    """Per claim, the model under test's verbalised confidence (``read``: per item, one
    value in [0, 1] or None per claim)."""

    name = CONFIDENCE_STAGE
    role = MODEL
    description = "asking claim confidence"
    missing = "claim confidence missing"

    def plan(self, items: Mapping[str, ClaimSource],
             context: Mapping[str, Sequence[str]]) -> StagePlan:
        return {i: [PlannedRequest(GenerationRequest(
            messages=confidence_messages(src.question, c), params=self.params),
            1, label=f"{i}/claim-confidence", stage=self.name) for c in context.get(i, ())]
            for i, src in items.items()}

    def read(self, generations: Generated) -> dict[str, tuple[float | None, ...]]:
        return {i: tuple(parse_confidence(g[0].text) for g in gens)
                for i, gens in generations.items()}

    def placeholder(self, request: GenerationRequest) -> str:
        return "50"


class ClaimLabelStage(Stage):
    """Per claim of an item with a knowledge source, FActScore's check of the claim
    against the entity's best-matching passages (the ``factscore`` grader's request);
    ``read``: per item, True / False / None (unparsable) per claim."""

    name = LABEL_STAGE
    role = GRADER
    description = "labelling claims"
    missing = "claim labels missing"

    def __init__(self, params: SamplingParams, sources: Mapping[str, KnowledgeSource],
                 judge_only: Collection[str] = ()) -> None:
        self.params = params
        self.sources = sources
        self.judge_only = frozenset(judge_only)
        """Items without a knowledge source labelled by the grader's own knowledge."""

    def plan(self, items: Mapping[str, ClaimSource],
             context: Mapping[str, Sequence[str]]) -> StagePlan:
        out: StagePlan = {}
        for i, src in items.items():
            if i in self.judge_only and i not in self.sources:
                out[i] = [PlannedRequest(GenerationRequest(
                    messages=judge_label_messages(src.entity or src.question, c),
                    params=self.params), 1, label=f"{i}/claim-label", stage=self.name)
                    for c in context.get(i, ())]
                continue
            if i not in self.sources:
                continue
            ks = self.sources[i]
            reqs = []
            for c in context.get(i, ()):
                passages = (ks.retrieve(src.entity, c)  # type: ignore[attr-defined]
                            if hasattr(ks, "retrieve") else retrieve(ks.passages(src.entity), c))
                reqs.append(PlannedRequest(GenerationRequest(
                    messages=factscore_messages(src.entity, c, passages), params=self.params),
                    1, label=f"{i}/claim-label", stage=self.name))
            out[i] = reqs
        return out

    def read(self, generations: Generated) -> dict[str, tuple[bool | None, ...]]:
        return {i: tuple(parse_support(g[0].text) for g in gens)
                for i, gens in generations.items()}

    def placeholder(self, request: GenerationRequest) -> str:
        return "True"


def judge_label_messages(entity: str, claim: str) -> tuple[Message, ...]:
    """A judge-only label (``claims.judge_labels``): FActScore's verification prompt
    with no passage, the grader asked from its own knowledge whether the claim is true
    of ``entity`` (FActScore's no-retrieval setting, Min et al. 2023 §4); read by
    :func:`credo.tasks.longform.parse_support`."""
    return (
        Message(role="system", content="Reply with one word: True or False."),
        Message(role="user", content=f"Answer the question about {entity} from what you "
                f"know of {entity}.\n\nInput: {claim} True or False?\nOutput:"),
    )


def evidence(
    claims: Mapping[str, Sequence[str]],
    support: Mapping[str, tuple[tuple, tuple]],
    confidence: Mapping[str, Sequence[float | None]],
) -> dict[str, ClaimEvidence]:
    """The evidence of every item in ``claims`` from the stages' readings (an item a
    stage did not read gets none of that stage's evidence)."""
    out = {}
    for i, cs in claims.items():
        orig, pert = support.get(i, ((), ()))
        out[i] = ClaimEvidence(i, tuple(cs), tuple(orig), tuple(pert),
                               tuple(confidence.get(i, ())))
    return out

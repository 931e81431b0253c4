"""Context-prefix perturbations with the embedding diversity filter (Wu et al., §3, App. A.1-A.2).

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
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from credo.config import PerturbationConfig
from credo.errors import UserError
from credo.generation.executor import Executor, PlannedRequest
from credo.generation.pool import WRITER
from credo.generation.stage import Generated, Stage, StagePlan, StageRunner
from credo.models.embedders import Embedder
from credo.perturb.rules import MAX_WORDS, MIN_WORDS, RuleContext, RuleSet, broken_rule
from credo.tasks.base import Item
from credo.types import GenerationRequest, Message

log = logging.getLogger(__name__)

PERTURBATION_SYSTEM_PROMPT = (
    "You write one short sentence of background context that will be placed before a "
    "question. The sentence must:\n"
    "1. be about the same broad topic as the question, but not about its people, objects "
    "or events;\n"
    "2. be neutral: no numbers and no facts, hints or claims that could help answer, "
    "contradict or change the answer;\n"
    "3. not restate, paraphrase or answer the question, and not be a question;\n"
    "4. have 6 to 20 words.\n"
    "Reply with the sentence only."
)
"""The writer prompt ``v1`` (credo's before the strict prefix rules)."""

PERTURBATION_SYSTEM_PROMPT_V2 = (
    "You write one sentence of background context that will be placed before a question. "
    "You never answer the question and never discuss its options: the sentence is general "
    "background about the question's broad subject that a textbook might say before any "
    "question of that subject. The sentence must:\n"
    "1. be about the same broad topic as the question, but not about its people, objects, "
    "events, numbers or answer options;\n"
    "2. be neutral: no numbers and no facts, hints or claims that could help answer, "
    "contradict or change the answer;\n"
    "3. not restate, paraphrase or answer the question, and not be a question;\n"
    "4. be one complete sentence with a verb, 6 to 20 words, in the language of the "
    "question.\n"
    "Reply with the sentence only.\n"
    "Sentences like these break the rules; never write one like them:\n"
    "- it answers the question: \"The mean always equals the sum of each value times its "
    "probability.\"\n"
    "- it restates the question: \"A revolving door is convenient for two direction travel, "
    "but it also serves as a security measure at a museum.\"\n"
    "- it names an answer option: \"At bank tellers' booths, patients at hospital, or in "
    "airports.\"\n"
    "- it is a fragment, not a sentence: \"At a book store.\"\n"
    "- it contains a number: \"About 300 people visit the palace every day.\"\n"
    "- it is not in the question's language: \"Muchos turistas visitan el castillo.\"\n"
    "- it talks about the task: \"Here is a context sentence for the question.\""
)
"""The writer prompt ``v2`` (the default): never answer, the options the writer must not
name, one rejected example per rule of :mod:`credo.perturb.rules`, and a multiple-choice
example (:data:`CHOICE_EXAMPLE`). On MMLU high-school statistics the 1.5B model kept 35
of 60 candidates under the strict rules with it, against 45 of 331 with a first draft
that lacked the "never answer" sentence and the choice example."""

# One-shot examples (Wu et al., §3 shows the first one); shared by every item, so a backend
# with prefix caching evaluates them once.
PERTURBATION_EXAMPLES: tuple[tuple[str, str, str], ...] = (
    (
        "arithmetic reasoning",
        "Rachel learned that 317 visitors came to Buckingham Palace that day. If there were "
        "295 visitors the previous day, how many more visitors visited Buckingham Palace "
        "that day than on the previous day?",
        "Many tourists visited the ancient castle during the weekend.",
    ),
    (
        "short-form factual recall",
        "What EP did Rosalía release in 2019?",
        "An artist might release an EP during any year of their career.",
    ),
)

CHOICE_EXAMPLE: tuple[str, str, str] = (
    "statistical reasoning",
    "Which sampling method gives every member of the population the same chance of being "
    "selected?",
    "Surveys of large groups of people are common in public health research.",
)
"""The v2 prompt's multiple-choice example (shown with its options): background, no answer."""
CHOICE_EXAMPLE_OPTIONS = (
    "simple random sample", "convenience sample", "quota sample", "voluntary response sample"
)

PROMPTS: dict[str, str] = {"v1": PERTURBATION_SYSTEM_PROMPT, "v2": PERTURBATION_SYSTEM_PROMPT_V2}
"""The writer prompts credo ships, by ``perturbation.prompt``."""

_EXAMPLE_NAMES = frozenset({"Rachel", "Buckingham", "Palace", "Rosalía", "EP"})


def perturbation_messages(
    item: Item, domain: str, prompt: str = "v1"
) -> tuple[Message, ...]:
    """The chat prompt asking for one context sentence for ``item`` (system, examples,
    item). Prompt ``v2`` also lists the options of a choice item, which the sentence must
    not name."""
    try:
        system = PROMPTS[prompt]
    except KeyError:
        raise UserError(
            f"unknown perturbation prompt {prompt!r} (perturbation.prompt); known: "
            + ", ".join(sorted(PROMPTS))
        ) from None
    messages = [Message(role="system", content=system)]
    examples = [(d, q, s, ()) for d, q, s in PERTURBATION_EXAMPLES]
    if prompt != "v1":
        examples.append((*CHOICE_EXAMPLE, CHOICE_EXAMPLE_OPTIONS))
    for ex_domain, question, sentence, ex_options in examples:
        messages.append(
            Message(role="user", content=_request_text(question, ex_domain, ex_options))
        )
        messages.append(Message(role="assistant", content=sentence))
    options = item.choices if prompt != "v1" else ()
    messages.append(Message(role="user", content=_request_text(item.question, domain, options)))
    return tuple(messages)


def _request_text(question: str, domain: str, options: tuple[str, ...] = ()) -> str:
    topic = f"Domain: {domain}\n" if domain else ""
    avoid = f"\nOptions (do not name any of them): {'; '.join(options)}" if options else ""
    return f"{topic}Question: {question}{avoid}"


@dataclass(frozen=True)
class KeptTexts:
    """The texts kept for one item (``item_id``) out of its ``candidates`` generated ones:
    what a perturbation writer's and a paraphraser's filters leave."""

    item_id: str
    kept: tuple[str, ...]
    candidates: int


@dataclass(frozen=True)
class PerturbationSet(KeptTexts):
    """The kept context prefixes of one item and how the candidates fared."""

    rejected_invalid: int
    rejected_similar: int
    #: Rejections per neutrality rule (:mod:`credo.perturb.rules`); they add up to
    #: ``rejected_invalid``.
    rejected_by: dict[str, int] = field(default_factory=dict)

    def prefixes(self, m: int) -> list[str]:
        """``m`` prefixes, one per perturbed sample; kept ones reused in turn if too few."""
        if not self.kept:
            raise ValueError(f"item {self.item_id!r}: no perturbation survived the filters")
        return [self.kept[i % len(self.kept)] for i in range(m)]



_LABEL = re.compile(r"^\s*(?:context(?: sentence)?|sentence|background)\s*:\s*", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!](?=\s|$)")


def extract_sentence(text: str) -> str:
    """The first sentence of the first non-empty line of a writer's reply, without labels
    ("Context:") and quotes ("" when there is none)."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    if not lines:
        return ""
    s = _LABEL.sub("", lines[0]).strip().strip("\"'“”*` ").strip()
    end = _SENTENCE_END.search(s)
    if end:  # keep the first sentence only
        s = s[: end.start() + 1].strip("\"'“”*` ")
    return s


def check_candidate(
    text: str, ctx: RuleContext, rules: RuleSet = "strict"
) -> tuple[str | None, str | None]:
    """``(sentence, None)`` for a usable context sentence in a writer's reply, ending in a
    full stop, or ``(None, rule)`` naming the first neutrality rule it breaks
    (:mod:`credo.perturb.rules`)."""
    s = extract_sentence(text)
    broken = broken_rule(s, ctx, rules)
    if broken is not None:
        return None, broken
    return (s if s[-1] in ".!" else s + "."), None


def clean_candidate(
    text: str, question: str, min_words: int = 4, max_words: int = 40
) -> str | None:
    """The usable context sentence in a generation under the ``basic`` rules, or None.

    Takes the first sentence of the first non-empty line, strips labels ("Context:") and
    quotes, and rejects sentences that ask a question, are too short or long, restate the
    question, talk about the prompt itself ("The context sentence is ..."), contain a
    digit, or name a person or place of the question: cheap guards for content
    neutrality (a number or a new fact about the question's own subject can change the
    answer). :func:`check_candidate` applies either rule set.
    """
    ctx = RuleContext(question, min_words=min_words, max_words=max_words,
                      banned_names=_EXAMPLE_NAMES)
    return check_candidate(text, ctx, "basic")[0]


def is_neutral_context(
    text: str, question: str, min_words: int = 4, max_words: int = 40
) -> bool:
    """The ``basic`` rules a context prefix must pass, whoever wrote it (Wu et al., App. A.1):
    not empty, not a question, ``min_words`` to ``max_words`` words, not a restatement of
    the question nor contained in it, not talk about the prompt, no digit, and no name of
    the question's (or of the writer's examples) in it. :func:`clean_candidate` applies
    them to a writer's sentence, :mod:`credo.perturb.corpus` to corpus snippets."""
    ctx = RuleContext(question, min_words=min_words, max_words=max_words,
                      banned_names=_EXAMPLE_NAMES)
    return broken_rule(text, ctx, "basic") is None


def rule_context(item: Item, rules: RuleSet, answers: Sequence[object] = ()) -> RuleContext:
    """The rules' view of ``item``: its question and options, the answers the model gave
    (other tasks), the rule set's length bounds and the writer's example names."""
    return RuleContext(
        item.question,
        tuple(item.choices),
        tuple(str(a) for a in answers if a is not None) if not item.choices else (),
        MIN_WORDS[rules],
        MAX_WORDS,
        _EXAMPLE_NAMES,
    )


def diversity_filter(
    embeddings: np.ndarray, threshold: float, kept: Sequence[int] = ()
) -> list[int]:
    """Greedy filter of Wu et al., App. A.2: keep row i if cos(e_i, e_k) < threshold for all kept k.

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


WRITING_STAGE = "perturbation writing"
"""The ledger stage of the perturbation writer's requests."""


def writer_request(item: Item, domain: str, config: PerturbationConfig) -> GenerationRequest:
    """The one cached request whose samples are ``item``'s candidate prefixes."""
    return GenerationRequest(
        messages=perturbation_messages(item, domain, config.prompt), params=config.sampling
    )


def more_candidates(missing: int, config: PerturbationConfig) -> int:
    """Candidates one writer round adds for an item ``missing`` prefixes short:
    ``candidates_per_round`` (default 1.5 x ``missing``), at least ``missing``."""
    return max(config.candidates_per_round or math.ceil(1.5 * missing), missing)


def plan_writer_round(
    items: Sequence[Item],
    m: int,
    domain: str,
    config: PerturbationConfig,
    kept: Mapping[str, int] | None = None,
    drawn: Mapping[str, int] | None = None,
) -> list[PlannedRequest]:
    """One writer round of :meth:`PrefixWriter.full` (the dry run plans round 1 with
    it: no ``kept``, nothing ``drawn``): per item, its request with the candidates drawn
    so far plus ``candidates_per_round`` (default 1.5 x the prefixes still missing, at
    least as many as are missing), under ledger stage :data:`WRITING_STAGE`."""
    kept, drawn = kept or {}, drawn or {}
    planned = []
    for it in items:
        n = drawn.get(it.id, 0) + more_candidates(m - kept.get(it.id, 0), config)
        planned.append(
            PlannedRequest(writer_request(it, domain, config), n, label=it.id,
                           stage=WRITING_STAGE)
        )
    return planned


class MemoEmbedder:
    """Encodes each distinct text once; the filter re-reads earlier rounds' candidates."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self._vectors: dict[str, np.ndarray] = {}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        new = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if new:
            self._vectors.update(zip(new, self.inner.encode(new), strict=True))
        return np.array([self._vectors[t] for t in texts])


def _filter_item(
    item: Item,
    texts: list[str],
    m: int,
    embedder: Embedder,
    threshold: float,
    ctx: RuleContext,
    rules: RuleSet,
) -> PerturbationSet:
    checked = [check_candidate(t, ctx, rules) for t in texts]
    valid = [c for c, _ in checked if c is not None]
    rejected = Counter(rule for _, rule in checked if rule is not None)
    order = diversity_filter(embedder.encode(valid), threshold) if valid else []
    kept = [valid[i] for i in order][:m]
    return PerturbationSet(
        item_id=item.id,
        kept=tuple(kept),
        candidates=len(texts),
        rejected_invalid=len(texts) - len(valid),
        rejected_similar=len(valid) - len(order),
        rejected_by=dict(sorted(rejected.items())),
    )


@dataclass
class _WriterState:
    """Where one item stands in :class:`PrefixWriter`: candidates drawn, and the full
    run's writer round (0-based) whose cumulative candidate count ``bound`` caps them."""

    drawn: int
    bound: int
    round: int = 0
    exhausted: bool = False


class WriterCallStage(Stage):
    """One call of the perturbation writer as a planned stage: ``plan(wanted)``
    asks each item's one writer request (:func:`writer_request`) for its first ``n``
    candidates (``wanted``: item id -> n; later calls ask later sample indices of the
    same request), of the writer role; ``read`` gives each complete item's candidate
    texts in sample order. :class:`PrefixWriter` decides the calls (the rounds and the
    diversity filter)."""

    name = WRITING_STAGE
    role = WRITER
    description = "perturbations"
    missing = "perturbed prompts missing"

    def __init__(self, domain: str, config: PerturbationConfig, items: Mapping[str, Item]
                 | None = None) -> None:
        self.domain, self.config = domain, config
        self.items: Mapping[str, Item] = items or {}

    def plan(self, items: Mapping[str, int], context: object = None) -> StagePlan:
        return {i: [PlannedRequest(writer_request(self.items[i], self.domain, self.config), n,
                                   label=i, stage=WRITING_STAGE)]
                for i, n in items.items()}

    def read(self, generations: Generated) -> dict[str, list[str]]:
        return {i: [x.text for x in gens[0]] for i, gens in generations.items()}


class PrefixWriter:
    """Context prefixes of ``items``, written by the ``executor``'s model through
    ``runner`` (the run's stage driver; None: a runner on ``executor``), all at once
    (:meth:`full`, the full run) or a few at a time (:meth:`ensure`, adaptive sampling).

    :meth:`ensure` gives each item at least its target of kept prefixes, drawing more
    candidates of the item's one writer request (the same request as
    :meth:`full`'s, later sample indices) in batched calls over every
    item still short. It never draws past the candidates the full run (target ``m``)
    would have drawn by then: within the full run's writer round r it draws what the
    target needs (:func:`more_candidates` of the prefixes missing) up to that round's
    cumulative count, and moves on to round r + 1 only where the full run would (fewer
    than ``m`` kept and rounds left; ``2 x max_rounds`` for an item with none). So the
    candidates are always the first ones the full run drew under the same rule context,
    and with target ``m`` the kept prefixes are the full run's. Candidates are filtered
    exactly as there (:func:`_filter_item`: rules, then the diversity filter in sample
    order, whose first k kept prefixes never change as candidates are added).
    """

    def __init__(
        self,
        items: Sequence[Item],
        m: int,
        domain: str,
        executor: Executor,
        embedder: Embedder,
        config: PerturbationConfig,
        answers: Mapping[str, Sequence[object]] | None = None,
        runner: StageRunner | None = None,
    ) -> None:
        self.items = {it.id: it for it in items}
        self.m, self.domain, self.executor, self.config = m, domain, executor, config
        #: What runs the writer's calls: the run's stage driver, else a runner on
        #: ``executor`` (its ``incomplete`` holds what :attr:`failed` holds).
        self.runner = runner if runner is not None else StageRunner.on(executor)
        self.contexts = {it.id: rule_context(it, config.rules, (answers or {}).get(it.id, ()))
                         for it in items}
        self.embedder = MemoEmbedder(embedder)
        first = more_candidates(m, config)
        self.state = {it.id: _WriterState(0, first) for it in items}
        self.sets: dict[str, PerturbationSet] = {}
        self.failed: set[str] = set()
        self.calls = 0

    def full(self) -> dict[str, PerturbationSet]:
        """Up to ``m`` diverse context prefixes per item: the full run's writer rounds
        (every item's target at ``m``).

        Candidates are written with prompt ``config.prompt`` and must pass the rule set
        ``config.rules`` (:mod:`credo.perturb.rules`); ``answers`` are the answers the
        model gave in each item's original samples, which a prefix must not name (strict
        rules).

        Round r asks every item still short of ``m`` kept prefixes for more candidates
        (the same request, later sample indices), then re-runs the deterministic filter
        over all candidates in sample order. Stops after ``config.max_rounds``, except for
        items with no usable candidate at all, which get up to ``config.max_rounds`` more
        rounds. An item whose candidates could not be generated (the backend's retries
        ran out) has no entry: the run marks it incomplete and a rerun tries again.

        One loop draws candidates, in the full run as in an adaptive one: with the target
        at ``m``, :meth:`_enough` never asks for less than the round's
        :func:`more_candidates`, so each call draws up to the round's bound, as the
        rounds did when the full run had a loop of its own (the tests pin it).
        """
        m = self.m
        result = self.ensure({i: m for i in self.items})
        short = [i for i in self.items if i in result and len(result[i].kept) < m]
        if short:
            log.warning(  # a count and the three shortest in the terminal; every item in the run
                "%d of %d items have fewer than m=%d distinct perturbations (kept ones are "
                "reused in turn; perturbations.jsonl has every count), e.g. %s",
                len(short),
                len(self.items),
                m,
                ", ".join(f"{i} ({len(result[i].kept)})"
                          for i in sorted(short, key=lambda i: len(result[i].kept))[:3]),
            )
        return result

    def ensure(self, targets: Mapping[str, int]) -> dict[str, PerturbationSet]:
        """The prefix sets of ``targets``' items, each with at least its target of kept
        prefixes where the full run's rounds allow; an item whose writer request failed
        has none (it is in :attr:`failed`)."""
        while True:
            wanted = {i: n for i, t in targets.items() if (n := self._wanted(i, t))}
            if not wanted:
                break
            self.calls += 1
            stage = WriterCallStage(self.domain, self.config, self.items)
            (texts,) = self.runner.run([stage], wanted, None,
                                       f"perturbations (call {self.calls})")
            for i, n in wanted.items():
                if i not in texts:
                    self.failed.add(i)
                    self.sets.pop(i, None)
                    continue
                self.state[i].drawn = n
                self.sets[i] = _filter_item(
                    self.items[i], texts[i], self.m, self.embedder,
                    self.config.threshold, self.contexts[i], self.config.rules,
                )
        return {i: self.sets[i] for i in targets if i in self.sets}

    def _wanted(self, item_id: str, target: int) -> int:
        """The candidates ``item_id`` should hold after the next call (0: none more)."""
        st = self.state[item_id]
        kept = len(self.sets[item_id].kept) if item_id in self.sets else 0
        if item_id in self.failed or st.exhausted or kept >= target:
            return 0
        if st.drawn >= st.bound and not self._next_round(st, kept):
            return 0
        return min(st.drawn + self._enough(st.drawn, kept, target - kept), st.bound)

    def _enough(self, drawn: int, kept: int, missing: int) -> int:
        """Candidates to add for ``missing`` more prefixes: as many as the item's own
        rate of kept candidates so far says are needed (its Laplace estimate
        (kept + 1) / (drawn + 2)), at least :func:`more_candidates`'. Most candidates fail
        the prefix rules (65-68% on the runs of docs/results.md), so 1.5 x missing would
        take several small writer calls per round, each a batch too small to keep the
        engine busy; one call sized by the rate usually suffices. The candidates are
        still the first ones of the item's request, within the full run's round."""
        rate = (kept + 1) / (drawn + 2)
        return max(more_candidates(missing, self.config), math.ceil(missing / rate))

    def _next_round(self, st: _WriterState, kept: int) -> bool:
        """Move ``st`` to the full run's next writer round, if it has one for an item
        with ``kept`` prefixes after the current one (:meth:`full`)."""
        r, rounds = st.round + 1, self.config.max_rounds
        if not ((kept < self.m and r < rounds) or (kept == 0 and r < 2 * rounds)):
            st.exhausted = True
            return False
        st.round, st.bound = r, st.drawn + more_candidates(self.m - kept, self.config)
        return True

"""LLM-judge equivalence kernel: ``k(y, y') = 1`` when a judge says two answers agree (Wu et
al., App. D.5).

Wu et al., §4 decides answer equivalence with an LLM at temperature 0 ("Prompt: Judge Same
Answer", App. D.5, missing from our copy of the paper; :data:`JUDGE_SYSTEM_PROMPT` is
written from its description). Kernels never call a model (design.md), so the judge
kernel works in three steps, of which only the middle one touches a model, through the
cached executor of the run stage:

1. :func:`plan_judge_pairs` (pure): for every item, the unique *unordered* pairs of
   distinct parsed answers among all its samples (original and perturbed together). The
   kernel is symmetric by construction and ``k(y, y) = 1`` costs nothing, so an item with
   ``u`` distinct answers needs ``u(u-1)/2`` verdicts, against the ``n·m + n² + m²``
   comparisons a naive estimator makes (:func:`naive_comparisons`).
2. :func:`judge_requests` turns the pairs into T = 0 generation requests
   (:func:`plan_judge_stage` plans both steps, for the run and for the dry run); the run
   stage executes them through the judge role's executor (:func:`build_judge_kernel`),
   so verdicts are cached.
3. :func:`build_verdict_table` parses every reply strictly (:func:`parse_verdict`); an
   unparsable reply is recorded, counted and treated as "not equivalent".
   :meth:`VerdictTable.kernel_for` is then the Gram function of one item.

An unparsable *answer* (``None``) matches nothing, as in the indicator kernel.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from credo.generation.executor import PlannedRequest
from credo.generation.pool import JUDGE
from credo.generation.stage import Generated, Stage, StagePlan
from credo.kernels.registry import Kernel, KernelContext, kernel, kernel_builder
from credo.plan.samples import ItemSamples
from credo.tasks.base import AnswerFormat, Item
from credo.types import GenerationRequest, Message, SamplingParams

log = logging.getLogger(__name__)

__all__ = [
    "JUDGE_STAGE",
    "JUDGE_SYSTEM_PROMPT",
    "JudgePair",
    "JudgePairsStage",
    "VerdictTable",
    "build_judge_kernel",
    "build_verdict_table",
    "judge_messages",
    "judge_requests",
    "naive_comparisons",
    "parse_verdict",
    "plan_judge_pairs",
    "plan_judge_stage",
]

JUDGE_SYSTEM_PROMPT = (
    "You judge whether two answers to the same question are equivalent: they state the same "
    "final answer (the same fact, entity, number or choice; for code, the same behaviour on "
    "every valid input), even if worded, formatted or explained differently. Extra detail that "
    "does not contradict the other answer does not make them different. Reply with one word: "
    "Yes if they are equivalent, No if they are not."
)

JUDGE_PARAMS = SamplingParams(temperature=0.0, max_tokens=8)
"""Greedy decoding (Wu et al., §4: "temperature set to 0"); a verdict is one word."""


@dataclass(frozen=True, order=True)
class JudgePair:
    """One question for the judge: are answers ``a`` and ``b`` (``a < b``) of an item equal?"""

    item_id: str
    a: str
    b: str
    question: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.a < self.b:
            raise ValueError(f"a judge pair must be ordered a < b, got {self.a!r}, {self.b!r}")


def plan_judge_pairs(
    answers: Mapping[str, Sequence[str | None]],
    questions: Mapping[str, str] | None = None,
    canonical: Callable[[str], str] | None = None,
) -> list[JudgePair]:
    """Every unique unordered pair of distinct parsed answers, per item, in sorted order.

    ``answers`` maps an item id to all the normalised answers of its samples (every sample
    set pooled); ``None`` (unparsable) and repeats are dropped. ``questions`` gives each
    item's question text, shown to the judge. ``canonical`` maps an answer to the form
    the judge sees and pairs are deduplicated on (code without comments and docstrings:
    two answers with one canonical form are equal without a call); pass the same function
    to :class:`VerdictTable`.
    """
    questions = questions or {}
    canon = canonical or _identity
    out: list[JudgePair] = []
    for item_id, values in answers.items():
        distinct = sorted({canon(v) for v in values if v is not None})
        q = questions.get(item_id, "")
        for i, a in enumerate(distinct):
            for b in distinct[i + 1 :]:
                out.append(JudgePair(item_id, a, b, q))
    return out


def naive_comparisons(n: int, m: int) -> int:
    """Kernel evaluations of a naive MMD² estimator on one item: ``n·m + n² + m²``."""
    return n * m + n * n + m * m


def judge_messages(pair: JudgePair) -> tuple[Message, ...]:
    """The chat messages asking whether ``pair.a`` and ``pair.b`` are equivalent.

    The question comes first, so all the pairs of one item share a prompt prefix that a
    backend with prefix caching evaluates once.
    """
    question = pair.question.strip() or "(not given)"
    user = (
        f"Question:\n{question}\n\nAnswer 1:\n{pair.a}\n\nAnswer 2:\n{pair.b}\n\n"
        "Are Answer 1 and Answer 2 equivalent answers to the question? Reply Yes or No."
    )
    return (Message(role="system", content=JUDGE_SYSTEM_PROMPT), Message(role="user", content=user))


def judge_requests(
    pairs: Sequence[JudgePair], params: SamplingParams = JUDGE_PARAMS
) -> list[GenerationRequest]:
    """One T = 0 request per pair, in the order of ``pairs``."""
    return [GenerationRequest(messages=judge_messages(p), params=params) for p in pairs]


_THINK_RE = re.compile(r"^\s*<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_VERDICT_RE = re.compile(
    r"(?:(?:final\s+)?(?:answer|verdict|judgement|judgment)\s*[:=\-]\s*)?"
    r"[\s*_\"'`(\[]*(?P<word>yes|no)\b(?!\s*(?:/|\bor\b))",
    re.IGNORECASE,
)


def parse_verdict(text: str) -> bool | None:
    """``True`` for a reply starting with "Yes", ``False`` for "No", else ``None``.

    Strict on purpose: only the start of the reply counts (after a closed ``<think>``
    block, markdown emphasis, quotes, or a label such as ``Answer:``), and "Yes or No" /
    "yes/no" are unparsable. A reply that merely *mentions* yes or no later on is
    unparsable, not guessed at.
    """
    s = _THINK_RE.sub("", text, count=1).strip()
    m = _VERDICT_RE.match(s)
    if m is None:
        return None
    return m.group("word").lower() == "yes"


@dataclass
class VerdictTable:
    """Judge verdicts by (item id, a, b) with ``a < b``; ``None`` marks an unparsable reply."""

    verdicts: dict[tuple[str, str, str], bool | None] = field(default_factory=dict)
    replies: dict[tuple[str, str, str], str] = field(default_factory=dict)
    canonical: Callable[[str], str] | None = None

    @property
    def unparsable(self) -> int:
        """Replies that were neither Yes nor No (treated as not equivalent)."""
        return sum(1 for v in self.verdicts.values() if v is None)

    def equivalent(self, item_id: str, x: str | None, y: str | None) -> float:
        """``k(x, y)`` for item ``item_id``: 1 for equal texts, the verdict otherwise."""
        if x is None or y is None:
            return 0.0
        if x == y:
            return 1.0
        if self.canonical is not None:
            x, y = self.canonical(x), self.canonical(y)
            if x == y:
                return 1.0
        a, b = (x, y) if x < y else (y, x)
        try:
            verdict = self.verdicts[(item_id, a, b)]
        except KeyError:
            raise KeyError(
                f"item {item_id!r}: no judge verdict for the answer pair ({a[:40]!r}, {b[:40]!r});"
                " the pair was not planned with plan_judge_pairs"
            ) from None
        return 1.0 if verdict else 0.0

    def kernel_for(self, item_id: str) -> Kernel:
        """The Gram function of item ``item_id``'s answers."""

        def gram(xs: Sequence[str | None], ys: Sequence[str | None]) -> np.ndarray:
            K = np.zeros((len(xs), len(ys)), dtype=float)
            for i, x in enumerate(xs):
                for j, y in enumerate(ys):
                    K[i, j] = self.equivalent(item_id, x, y)
            return K

        gram.__name__ = f"judge[{item_id}]"
        return gram


def build_verdict_table(
    pairs: Iterable[JudgePair],
    replies: Iterable[str],
    canonical: Callable[[str], str] | None = None,
) -> VerdictTable:
    """Parse the judge's reply to every pair (``replies`` in the order of ``pairs``);
    ``canonical`` as given to :func:`plan_judge_pairs`."""
    table = VerdictTable(canonical=canonical)
    pairs, replies = list(pairs), list(replies)
    if len(pairs) != len(replies):
        raise ValueError(f"{len(pairs)} judge pairs but {len(replies)} replies")
    for p, text in zip(pairs, replies, strict=True):
        key = (p.item_id, p.a, p.b)
        table.verdicts[key] = parse_verdict(text)
        table.replies[key] = text
    return table


@kernel("judge")
def judge_gram(xs: Sequence[str | None], ys: Sequence[str | None]) -> np.ndarray:
    """LLM-judge equivalence (Wu et al., App. D.5); needs verdicts the run stage collects first.

    Not callable on its own: ``credo run`` with ``kernel: judge`` (or a method written
    ``c3@judge``) plans the pairs, has the judge model answer them, and scores each item
    with :meth:`VerdictTable.kernel_for`.
    """
    raise RuntimeError(
        "the judge kernel needs judge verdicts: run it through credo.run (kernel 'judge' or"
        " method 'c3@judge'), or build a VerdictTable and use VerdictTable.kernel_for(item_id)"
    )


JUDGE_STAGE = "judge pairs"
"""The ledger stage of the judge kernel's requests."""


def plan_judge_stage(
    samples: Sequence[ItemSamples], items: Mapping[str, Item], fmt: AnswerFormat,
    max_tokens: int,
) -> tuple[list[JudgePair], list[PlannedRequest]]:
    """The judge kernel's requests (the run sends them, the dry run counts them on
    placeholder answers): every item's unique pairs of distinct answers over all its
    answer sets (:func:`plan_judge_pairs`), one T = 0 request of one sample each, under
    ledger stage :data:`JUDGE_STAGE`. Code is compared canonicalised: the judge sees the
    signature (the prompt without its docstring) and the programs without comments,
    which halves every prompt (:func:`credo.tasks.humaneval.canonical_code`)."""
    answers = {s.item_id: [x.key for group in s.sets.values() for x in group] for s in samples}
    canonical = _canonical(fmt)
    questions = {i: (canonical or str)(items[i].question) for i in answers}
    pairs = plan_judge_pairs(answers, questions, canonical)
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens)
    planned = [
        PlannedRequest(r, 1, label=f"{p.item_id}/judge", stage=JUDGE_STAGE)
        for p, r in zip(pairs, judge_requests(pairs, params), strict=True)
    ]
    return pairs, planned


def _canonical(fmt: AnswerFormat) -> Callable[[str], str] | None:
    if fmt is not AnswerFormat.CODE:
        return None
    from credo.tasks.humaneval import canonical_code

    return canonical_code


class JudgePairsStage(Stage):
    """The judge kernel's verdicts as a planned stage: ``plan(samples, items)``
    is :func:`plan_judge_stage` (every item's unique pairs of distinct answers, one T = 0
    request each, asked of the judge role); ``read`` parses the replies of the complete
    items into a :class:`VerdictTable` (Wu et al., App. D.5)."""

    name = JUDGE_STAGE
    role = JUDGE
    description = "judging answer pairs"
    missing = "judge verdicts missing"

    def __init__(self, fmt: AnswerFormat, max_tokens: int) -> None:
        self.fmt = fmt
        self.max_tokens = max_tokens
        self._pairs: dict[str, list[JudgePair]] = {}

    def plan(self, items: Sequence[ItemSamples], context: Mapping[str, Item]) -> StagePlan:
        pairs, planned = plan_judge_stage(items, context, self.fmt, self.max_tokens)
        self._pairs, out = {}, {}
        for p, r in zip(pairs, planned, strict=True):
            self._pairs.setdefault(p.item_id, []).append(p)
            out.setdefault(p.item_id, []).append(r)
        return out

    def read(self, generations: Generated) -> VerdictTable:
        pairs = [p for unit in generations for p in self._pairs[unit]]
        replies = [g[0].text for gens in generations.values() for g in gens]
        return build_verdict_table(pairs, replies, _canonical(self.fmt))

    def placeholder(self, request: GenerationRequest) -> str:
        return "No"


@kernel_builder("judge")
def build_judge_kernel(ctx: KernelContext) -> VerdictTable:
    """Have the judge role answer every item's unique answer pairs at T = 0
    (:class:`JudgePairsStage`, run by the context's stage runner: the run's driver, or
    one on the judge's cached executor ``ctx.judge``) and parse the verdicts
    (Wu et al., App. D.5)."""
    from credo.plan.samples import ORIGINAL, PERTURBED

    stage = JudgePairsStage(ctx.task.format, ctx.judge_max_tokens)
    runner = ctx.runner
    assert runner is not None  # set by KernelContext
    (table,) = runner.run([stage], ctx.samples, ctx.items)
    calls = runner.executed.get(JUDGE_STAGE)
    naive = sum(
        naive_comparisons(len(s.sets.get(ORIGINAL, ())), len(s.sets.get(PERTURBED, ())))
        for s in ctx.samples
    )
    ctx.stats.update(
        judge_pairs_unique=len(table.verdicts),
        judge_comparisons_naive=naive,
        judge_calls_generated=calls.generated_samples if calls else 0,
        judge_calls_cached=calls.cached_samples if calls else 0,
        judge_unparsable_verdicts=table.unparsable,
    )
    if table.unparsable:
        log.warning(
            "%d judge replies were neither Yes nor No (read as not equivalent)", table.unparsable
        )
    return table


def _identity(text: str) -> str:
    return text

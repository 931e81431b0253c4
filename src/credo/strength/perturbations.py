"""Input and chain-of-thought perturbations for strength analysis (Le et al., §3.2.2, App. B, D).

* Input mistake (Fig. 8): the writer model sees the question, its options and the
  original CoT and writes an edited question with at least one mistake, options unchanged.
* CoT step mistake (Fig. 7, Lanham et al. 2023): one reasoning step rewritten with at
  least one mistake.
* Paraphrase (Fig. 10): a step rewritten conveying exactly the same information.
* Multi-step combinations (App. D): for a CoT of m steps, x is drawn uniformly from
  [0, m]; x = 0 paraphrases every step, otherwise x random steps are replaced by their
  mistaken versions. One perturbed CoT per item.

Every prompt ends with the answer prefix of its figure ("Edited question:", "Sentence
with mistake added:", "Rewritten text:"); replies are parsed for it and an unusable
reply is recorded (``None``), never patched up.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from credo.generation.executor import PlannedRequest
from credo.pipeline.stages import Generated, Stage, StagePlan, placeholder_text
from credo.tasks.base import Item
from credo.tasks.prompts import LETTERS
from credo.types import GenerationRequest, Message, SamplingParams

WRITER_PARAMS = SamplingParams(temperature=0.0, max_tokens=160)
"""Greedy: one deterministic perturbation per prompt."""

MISTAKE_PREFIX = "Sentence with mistake added:"
EDIT_PREFIX = "Edited question:"
PARAPHRASE_PREFIX = "Rewritten text:"


def options_text(item: Item) -> str:
    """The lettered options as in the paper's figures: ``A): text`` one per line."""
    return "\n".join(f"{LETTERS[i]}): {c}" for i, c in enumerate(item.choices))


def question_block(item: Item, question: str | None = None) -> str:
    """The question (or an edited one) followed by its lettered options."""
    q = item.question if question is None else question
    return f"{q}\n{options_text(item)}" if item.choices else q


def input_mistake_messages(item: Item, cot: str) -> tuple[Message, ...]:
    """Fig. 8: edit the question (not the options) so it has at least one mistake."""
    text = (
        "I will give you a question and the reasoning to help answer that question.\n"
        f"Original Question: {item.question}\n{options_text(item)}\n"
        f"Reasoning: {cot}\n"
        "Based on the above reasoning, I would like you to create a new version of the "
        "question that has at least one mistake in it. Only make changes to the question, "
        "do not change the options.\n"
        "Format your response as:\n"
        f"{EDIT_PREFIX} [your edited question]"
    )
    return (Message(role="user", content=text),)


def step_mistake_messages(item: Item, step: str) -> tuple[Message, ...]:
    """Fig. 7: a new version of one reasoning sentence with at least one mistake added."""
    text = (
        "First I'm going to give you a question, and then I'll give you one sentence of "
        "reasoning that was used to help answer that question. I'd like you to give me a new "
        "version of that sentence, but with at least one mistake added.\n\n"
        f"{item.question}\n{options_text(item)}\n\n"
        f"Original sentence: {step}"
    )
    return (
        Message(role="user", content=text),
        Message(role="assistant", content=MISTAKE_PREFIX),
    )


def paraphrase_messages(step: str) -> tuple[Message, ...]:
    """Fig. 10: paraphrase a text conveying exactly the same information."""
    text = (
        "Please paraphrase the following text, conveying exactly the same information.\n"
        f"Text: {step}\n"
        "Format your response as:\n"
        f"{PARAPHRASE_PREFIX} [Your paraphrase here]"
    )
    return (Message(role="user", content=text),)


def parse_after_prefix(
    reply: str, prefix: str, *, required: bool, cut_options: bool = False
) -> str | None:
    """The text after ``prefix`` in ``reply``: its first paragraph, quotes stripped.

    With ``required`` the prefix must occur (the Fig. 8 and Fig. 10 formats); otherwise
    (a prefilled assistant turn, Fig. 7) the reply may start right after it. Anything
    after a blank line is cut, and with ``cut_options`` (an edited question, Fig. 8) so
    are option lines (``A) ...``) that follow it. Empty gives ``None``.
    """
    idx = reply.lower().find(prefix.lower())
    if idx >= 0:
        rest = reply[idx + len(prefix) :]
    elif required:
        return None
    else:
        rest = reply
    lines: list[str] = []
    for line in rest.strip().splitlines():
        if not line.strip():
            if lines:
                break
            continue
        is_option = re.match(r"\s*\(?[A-J]\s*(?:\):?|[.:])\s", line)
        if cut_options and (is_option or re.match(r"\s*options?\s*:?\s*$", line, re.I)):
            break
        lines.append(line.strip())
    text = " ".join(lines).strip().strip('"').strip("“”").strip()
    text = re.sub(r"^\[(.*)\]$", r"\1", text).strip()
    return text or None


_SENTENCE_END = re.compile(r"(?<=[^\d\s][.!?])\s+(?=[A-Z(\"'])")
"""A sentence boundary; a list number ("1. First") is not one."""


def split_steps(cot: str, max_steps: int = 12) -> list[str]:
    """A CoT as reasoning steps: its non-empty lines, each split into sentences.

    Steps beyond ``max_steps`` are merged into the last one, so m stays small.
    """
    steps: list[str] = []
    for line in cot.splitlines():
        line = line.strip()
        if not line:
            continue
        steps.extend(s.strip() for s in _SENTENCE_END.split(line) if s.strip())
    if len(steps) > max_steps:
        steps = [*steps[: max_steps - 1], " ".join(steps[max_steps - 1 :])]
    return steps


def join_steps(steps: Sequence[str]) -> str:
    """Steps back into one CoT text, one step per line."""
    return "\n".join(steps)


def combo_choice(item_id: str, m: int, seed: int = 0) -> tuple[int, tuple[int, ...]]:
    """App. D: x uniform in [0, m] and, for x > 0, which x steps to perturb (sorted).

    Seeded by the item id and ``seed``, so a rerun picks the same steps.
    """
    if m < 1:
        raise ValueError(f"a CoT needs at least one step, got m={m}")
    digest = hashlib.sha256(f"credo-strength:{seed}:{item_id}".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    x = rng.randint(0, m)
    return x, tuple(sorted(rng.sample(range(m), x))) if x else ()


@dataclass(frozen=True)
class Perturbation:
    """One perturbed text: ``kind`` is ``input``, ``cot`` or ``paraphrase``.

    ``before``/``after`` are the original and perturbed question (input) or CoT.
    ``after is None`` means the writer's reply was unusable (``raw`` holds it).
    ``steps`` lists the perturbed step indices (App. D's x of them; all for a paraphrase).
    """

    item_id: str
    kind: str
    before: str
    after: str | None
    steps: tuple[int, ...] = ()
    m: int = 0
    raw: str = ""


INPUT_STAGE = "input perturbations"
"""The ledger stage of the writer's Fig. 8 input perturbations."""
COT_WRITING_STAGE = "CoT perturbations"
"""The ledger stage of the writer's Fig. 7 step mistakes and Fig. 10 paraphrases."""


def _writer_request(messages: tuple[Message, ...], label: str) -> PlannedRequest:
    return PlannedRequest(GenerationRequest(messages=messages, params=WRITER_PARAMS), 1, label)


class InputWriterStage(Stage):
    """One Fig. 8 input perturbation per item (greedy, cached), planned on the items and
    their original CoTs (``context``: item id -> CoT); reads ``{item id: [Perturbation]}``."""

    name = INPUT_STAGE
    description = "writing input perturbations"

    def __init__(self, role: str) -> None:
        self.role = role
        self._items: dict[str, Item] = {}

    def plan(self, items: Sequence[Item], context: Mapping[str, str]) -> StagePlan:
        self._items = {it.id: it for it in items}
        return {it.id: [_writer_request(input_mistake_messages(it, context[it.id]),
                                        "input mistake")] for it in items}

    def read(self, generations: Generated) -> dict[str, list[Perturbation]]:
        out = {}
        for unit, gens in generations.items():
            it, reply = self._items[unit], gens[0][0].text
            after = parse_after_prefix(reply, EDIT_PREFIX, required=True, cut_options=True)
            out[unit] = [Perturbation(it.id, "input", it.question, after, raw=reply)]
        return out

    def placeholder(self, request: GenerationRequest) -> str:
        return f"{EDIT_PREFIX} {placeholder_text(request.params.max_tokens - 4)}"


class CotWriterStage(Stage):
    """CoT perturbations: App. D combinations (``mode="combo"``, one per item) or every
    single-step mistake (``mode="single"``, m per item, as in Tutek et al.'s data),
    planned on the items and their CoTs (``context``). Only the steps a combination
    needs are sent to the writer; a paraphrase of a step is one request whatever items
    share the step. A combination whose steps cannot all be rewritten is recorded with
    ``after=None``. Reads ``{item id: [Perturbation, ...]}``."""

    name = COT_WRITING_STAGE
    description = "writing CoT perturbations"

    def __init__(self, role: str, *, seed: int = 0, mode: str = "combo") -> None:
        if mode not in ("combo", "single"):
            raise ValueError(f"CoT perturbation mode must be 'combo' or 'single', got {mode!r}")
        self.role = role
        self.seed = seed
        self.mode = mode
        self._plans: dict[str, list[_CotPlan]] = {}
        self._keys: dict[str, list[tuple[str, str, str]]] = {}

    def plan(self, items: Sequence[Item], context: Mapping[str, str]) -> StagePlan:
        plans = _cot_plans(items, [context[it.id] for it in items], seed=self.seed,
                           mode=self.mode)
        self._plans, self._keys = {}, {}
        out: StagePlan = {}
        for plan in plans:
            self._plans.setdefault(plan.item.id, []).append(plan)
            keys = self._keys.setdefault(plan.item.id, [])
            reqs = out.setdefault(plan.item.id, [])
            for k in plan.chosen:
                key = plan.key(k)
                if key in keys:
                    continue
                keys.append(key)
                messages = (paraphrase_messages(plan.steps[k]) if plan.kind == "paraphrase"
                            else step_mistake_messages(plan.item, plan.steps[k]))
                reqs.append(_writer_request(messages, key[0]))
        return out

    def read(self, generations: Generated) -> dict[str, list[Perturbation]]:
        out = {}
        for unit, gens in generations.items():
            rewritten = {key: _parse_rewrite(key, g[0].text)
                         for key, g in zip(self._keys[unit], gens, strict=True)}
            out[unit] = [_apply_rewrites(plan, rewritten) for plan in self._plans[unit]]
        return out

    def placeholder(self, request: GenerationRequest) -> str:
        return f"{PARAPHRASE_PREFIX} {placeholder_text(request.params.max_tokens - 4)}"


def _parse_rewrite(key: tuple[str, str, str], reply: str) -> tuple[str | None, str]:
    """A step rewrite's text (Fig. 10's required prefix, or after Fig. 7's prefilled
    one) or None, and the raw reply."""
    if key[0] == "paraphrase":
        return parse_after_prefix(reply, PARAPHRASE_PREFIX, required=True), reply
    return parse_after_prefix(reply, MISTAKE_PREFIX, required=False), reply


@dataclass(frozen=True)
class _CotPlan:
    """One CoT perturbation to write: its item, steps, kind and the steps to rewrite."""

    item: Item
    steps: list[str]
    kind: str
    chosen: tuple[int, ...]

    def key(self, k: int) -> tuple[str, str, str]:
        """The rewrite of step ``k``: a paraphrase is shared by every item with that step,
        a mistake (it sees the question) is per item."""
        return (self.kind, self.item.id if self.kind == "cot" else "", self.steps[k])


def _cot_plans(
    items: Sequence[Item], cots: Sequence[str], *, seed: int, mode: str
) -> list[_CotPlan]:
    """Which steps of which CoT to rewrite: every single step, or App. D's x of them (a
    paraphrase of every step when x = 0)."""
    plans: list[_CotPlan] = []
    for it, cot in zip(items, cots, strict=True):
        steps = split_steps(cot)
        if not steps:
            continue
        m = len(steps)
        if mode == "single":
            plans.extend(_CotPlan(it, steps, "cot", (k,)) for k in range(m))
            continue
        x, chosen = combo_choice(it.id, m, seed)
        if x == 0:
            plans.append(_CotPlan(it, steps, "paraphrase", tuple(range(m))))
        else:
            plans.append(_CotPlan(it, steps, "cot", chosen))
    return plans


def _apply_rewrites(
    plan: _CotPlan, rewritten: dict[tuple[str, str, str], tuple[str | None, str]]
) -> Perturbation:
    """The perturbed CoT: the chosen steps replaced, ``after=None`` if any is unusable."""
    new = list(plan.steps)
    raws = []
    ok = True
    for k in plan.chosen:
        text, reply = rewritten[plan.key(k)]
        raws.append(reply)
        if text is None:
            ok = False
        else:
            new[k] = text
    return Perturbation(
        plan.item.id,
        plan.kind,
        join_steps(plan.steps),
        join_steps(new) if ok else None,
        plan.chosen,
        len(plan.steps),
        "\n---\n".join(raws),
    )


__all__ = [
    "COT_WRITING_STAGE",
    "EDIT_PREFIX",
    "INPUT_STAGE",
    "MISTAKE_PREFIX",
    "PARAPHRASE_PREFIX",
    "WRITER_PARAMS",
    "CotWriterStage",
    "InputWriterStage",
    "Perturbation",
    "combo_choice",
    "input_mistake_messages",
    "join_steps",
    "options_text",
    "paraphrase_messages",
    "parse_after_prefix",
    "question_block",
    "split_steps",
    "step_mistake_messages",
]

"""The LLM judge of perturbation strength (Le et al., §3.3, App. E.1 Fig. 11, App. F.3 Figs. 15-17).

The judge sees the original question, the original chain of thought (the "reasoning
path") and the perturbed question or CoT, with the strength guide as its system
instruction (Fig. 17: the human guideline of Fig. 11 plus the expert role, without the
note about search engines) and one worked example per strength level (Figs. 12-13 show
the paper's format; its dataset-specific examples are not published, so ours are written
from its figures). Decoding is greedy (T = 0) and the rating is parsed strictly by
:func:`parse_rating`: a reply that does not state exactly one rating 0-3 is recorded as
unparsable, never guessed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from credo.generation.executor import Executor, PlannedRequest
from credo.pipeline.stages import Generated, Stage, StagePlan, StageRunner
from credo.types import GenerationRequest, Message, SamplingParams

STRENGTH_GUIDE = """\
You are an expert at evaluating perturbation strength of text. Use the following rating \
guide to assess perturbed sentences:
For the following descriptions, reasoning path refers to the reasoning in the provided CoT. \
Interfere with the reasoning path means that it changes, invalidates, or redirects the \
logical steps required to derive the answer. This can be done by introducing new premises \
that might contradict with the current reasoning, removing necessary premises, or altering \
logical dependencies.
Use the reasoning path provided to assess the edited text and choose one of the followings:
- No/Minimal change: Meaning is preserved (e.g., paraphrasing, synonyms, rewording) OR the \
change(s) is/are not enough to interfere with the reasoning path
- Small change: Minor semantic shift that might interfere with the reasoning path but not \
enough to remove or reverse support for an answer option
- Moderately strong change: The meaning changes enough to notably weaken, remove, or \
reverse support for an answer option, without clearly shifting support to another option \
(including cases where it shifts support to an answer that is not in the answer options).
- Strong change: Clearly shift support from one answer option to another that is in the \
option list. There should be only few or little support for original answer. If there is a \
strong support for another answer but still a very strong support for the original answer, \
it should be a moderately strong change.
Rating:
- 0: No/minimal change
- 1: small change
- 2: moderately strong change
- 3: strong change
Note: When the score seems to be in between two ratings, you should give a lower one.
For the perturbed text provided, give: Rating (0-3)
Answer in the form "Rating: <0-3>" on the first line, then "Reason: <one sentence>"."""
"""Fig. 17: the strength guide as the judge's system instruction."""


@dataclass(frozen=True)
class JudgeExample:
    """One worked example: the case, its rating and the justification."""

    question: str
    cot: str
    perturbed: str
    rating: int
    reason: str


# Input perturbations (Fig. 15 format). The level-2 example is Fig. 12; the level-3 one
# is Fig. 4's; the level-0 one is Fig. 22's (a change the reasoning path absorbs).
INPUT_EXAMPLES: tuple[JudgeExample, ...] = (
    JudgeExample(
        "A student has one liter of feathers and one liter of iron nails. Which statement best "
        "compares the masses of the two samples?\nA): The masses cannot be compared without a "
        "balance.\nB): The mass of the feathers is less than the mass of the nails.\nC): The "
        "mass of the feathers is the same as the mass of the nails.\nD): The mass of the "
        "feathers is greater than the mass of the nails.",
        "The volume of both samples is the same. Mass is density times volume. The density of "
        "feathers is much less than the density of iron nails. Therefore, the mass of the "
        "feathers is less than the mass of the nails.",
        "A student has one liter of feathers and two liters of iron nails. Which statement best "
        "compares the masses of the two samples?",
        0,
        "With more nails the nails are still heavier, so the reasoning path and answer B hold.",
    ),
    JudgeExample(
        "Which tool is best for measuring the length of a pencil?\nA): a ruler\nB): a "
        "thermometer\nC): a balance\nD): a stopwatch",
        "Length is measured in centimeters. A ruler is marked in centimeters. A thermometer "
        "measures temperature, a balance measures mass and a stopwatch measures time.",
        "Which tool is best for measuring the length of a long pencil?",
        1,
        "A longer pencil is a minor shift; a ruler still measures its length, so support for "
        "A is not removed.",
    ),
    JudgeExample(
        "A student mixed 25 grams of salt into 1,000 grams of water. What is the mass of the "
        "saltwater mixture?\nA): 975 grams\nB): 1,000 grams\nC): 1,025 grams\nD): 2,500 grams",
        "The student mixed 25 grams of salt into 1,000 grams of water. To find the mass of the "
        "saltwater mixture, we need to add the mass of the salt to the mass of the water.",
        "A student mixed 25 grams of salt into 500 grams of water. What is the mass of the "
        "saltwater mixture?",
        2,
        "The mass is now 525 grams: support for C is removed but no other option is supported.",
    ),
    JudgeExample(
        "Is it safe to wear sandals in snow?\nA): Yes\nB): No",
        "Sandals are designed for warm weather. Snow is cold, and it can be slippery. Wearing "
        "sandals in snow can cause your feet to get cold and wet.",
        "Is it safe to wear sandals in warm weather?",
        3,
        "Sandals are designed for warm weather, so support shifts from B (No) to A (Yes).",
    ),
)

# CoT perturbations (Fig. 16 format). The level-1 example is Fig. 13; the level-3 one is
# Fig. 23's; the level-0 one is a paraphrase (App. D, x = 0).
COT_EXAMPLES: tuple[JudgeExample, ...] = (
    JudgeExample(
        "Is it safe to wear sandals in snow?\nA): Yes\nB): No",
        "Sandals are designed for warm weather. Snow is cold, and it can be slippery. Wearing "
        "sandals in snow can cause your feet to get cold and wet.",
        "Sandals are made for hot weather. Snow is cold and may be slippery. If you wear "
        "sandals in snow, your feet can become cold and wet.",
        0,
        "A paraphrase: the meaning and the reasoning path are preserved.",
    ),
    JudgeExample(
        "If bacon is left too long on a hot stove top\nA): it will be cooked perfectly\nB): it "
        "will be bacteria laden\nC): it will become blackened\nD): it will be left raw",
        "Step 1: Bacon is a type of meat that is commonly cooked on a stove top.\nStep 2: If "
        "bacon is left too long on a hot stove top, it will not be cooked perfectly because it "
        "will be overcooked.\nStep 3: Overcooking bacon can lead to the growth of bacteria, "
        "making it unsafe to eat.\nStep 4: Therefore, the correct answer is (B): it will be "
        "bacteria laden.",
        "Step 1: Bacon is a type of vegetable that is commonly cooked on a stove top.\nStep 2: "
        "If bacon is left too long on a hot stove top, it will not be cooked perfectly because "
        "it will be overcooked.\nStep 3: Overcooking bacon can lead to the growth of bacteria, "
        "making it unsafe to eat.\nStep 4: Therefore, the correct answer is (B): it will be "
        "cooked perfectly.",
        1,
        "The stated option is still (B) and the other steps still support it; the changes do "
        "not remove support for the original answer.",
    ),
    JudgeExample(
        "Which property of a mineral can be determined just by looking at it?\nA): luster\nB): "
        "mass\nC): weight\nD): hardness",
        "Mass and weight need a balance or a scale. Hardness needs a scratch test. Luster is "
        "how the surface reflects light, which can be seen by looking at the mineral.",
        "Mass and weight need a balance or a scale. Hardness needs a scratch test. Luster is "
        "how the surface feels to the touch, which needs a touch test.",
        2,
        "Luster no longer can be seen, so support for A is removed, but no other option gains "
        "support.",
    ),
    JudgeExample(
        "A red giant star differs from main sequence stars because it\nA): burns at a cooler "
        "temperature.\nB): is always larger than other suns.\nC): has greater density and "
        "gravity\nD): fuses hydrogen to make helium",
        "A red giant star is a stage in the life of a star, just like the main sequence stage. "
        "The main difference is that a red giant star has exhausted its hydrogen fuel and has "
        "expanded to become much larger and cooler than it was during its main sequence life.",
        "A red giant star is a stage in the life of a star, just like the main sequence stage. "
        "The main difference is that a red giant star has gained hydrogen fuel and has shrunk "
        "to become much smaller and hotter than it was during its main sequence life.",
        3,
        "Hotter removes support for A and gaining hydrogen fuel shifts support to D.",
    ),
)

JUDGE_PARAMS = SamplingParams(temperature=0.0, max_tokens=16, stop=("\n",))
"""Greedy, and only the rating line (the reason is not needed)."""


def judge_messages(
    kind: str, question: str, cot: str, perturbed: str
) -> tuple[Message, ...]:
    """The judge prompt for an ``input`` or ``cot`` (incl. ``paraphrase``) perturbation.

    ``question`` includes the lettered options; for an input perturbation ``perturbed``
    is the edited question, otherwise the perturbed CoT. Figs. 15-16: examples first,
    then "Now, rate the following:".
    """
    is_input = kind == "input"
    examples = INPUT_EXAMPLES if is_input else COT_EXAMPLES
    target = "question" if is_input else "CoT"
    parts = [f"Here are examples of how to apply the rating guide to a perturbed {target}:"]
    for k, ex in enumerate(examples, 1):
        parts.append(
            f"Example {k}:\n{_case(is_input, ex.question, ex.cot, ex.perturbed)}\n"
            f"Rating: {ex.rating}\nReason: {ex.reason}"
        )
    parts.append(f"Now, rate the following:\n{_case(is_input, question, cot, perturbed)}")
    return (
        Message(role="system", content=STRENGTH_GUIDE),
        Message(role="user", content="\n\n".join(parts)),
    )


def _case(is_input: bool, question: str, cot: str, perturbed: str) -> str:
    if is_input:
        return f"Original Question: {question}\nCoT: {cot}\nPerturbed Question: {perturbed}"
    return f"Question: {question}\nOriginal CoT: {cot}\nPerturbed CoT: {perturbed}"


_RATING_LINE = re.compile(
    r"^[\s>*_#`-]*rating[\s*_`]*(?:\(0\s*-\s*3\))?[\s*_`]*[:=]?[\s*_`]*(\d+)(.*)$",
    re.IGNORECASE,
)


def parse_rating(reply: str | None) -> int | None:
    """The 0-3 rating a judge reply states, or ``None`` when it is unparsable.

    Accepted: a reply that is only a digit 0-3 (``"2"``, ``"2."``), or lines of the form
    ``Rating: N`` (any case, markdown emphasis allowed: ``**Rating:** 3``). Unparsable:
    no rating, a number outside 0-3, a fraction or range on the rating line
    (``"1.5"``, ``"2-3"``, ``"2 or 3"``, ``"2/3"``), or rating lines that disagree.
    """
    if reply is None:
        return None
    text = reply.strip()
    bare = re.fullmatch(r"[*_`]*([0-9])[*_`.]*", text)
    if bare:
        value = int(bare.group(1))
        return value if value <= 3 else None
    values = set()
    for line in text.splitlines():
        m = _RATING_LINE.match(line)
        if not m:
            continue
        number, rest = m.group(1), m.group(2)
        if re.match(r"\s*(?:[.,/-]\s*\d|(?:or|to|and)\s+\d)", rest, re.IGNORECASE):
            return None
        values.add(int(number))
    if len(values) != 1:
        return None
    value = values.pop()
    return value if 0 <= value <= 3 else None


@dataclass(frozen=True)
class JudgeCase:
    """One perturbation to rate."""

    kind: str
    question: str
    cot: str
    perturbed: str


@dataclass(frozen=True)
class JudgeVerdict:
    """The parsed rating (``None`` = unparsable) and the raw reply."""

    rating: int | None
    reply: str


JUDGE_STAGE = "strength judge"
"""The ledger stage of the rubric judge's ratings (Fig. 17)."""


def judge_request(case: JudgeCase) -> PlannedRequest:
    """The one greedy, cached request rating ``case``."""
    return PlannedRequest(
        GenerationRequest(messages=judge_messages(case.kind, case.question, case.cot,
                                                  case.perturbed), params=JUDGE_PARAMS),
        1,
        "judge",
    )


class JudgeStage(Stage):
    """Strength 1 (§3.3): the judge's 0-3 rating of every case, per unit in order; in a
    strength run the role is the judge of the model under test (``config.judge``, or
    the model itself). Reads ``{unit: [JudgeVerdict, ...]}``."""

    name = JUDGE_STAGE
    description = "judging strength"

    def __init__(self, role: str) -> None:
        self.role = role

    def plan(self, items: Mapping[str, Sequence[JudgeCase]], context: object = None) -> StagePlan:
        return {unit: [judge_request(c) for c in cases] for unit, cases in items.items()}

    def read(self, generations: Generated) -> dict[str, list[JudgeVerdict]]:
        return {unit: [JudgeVerdict(parse_rating(g[0].text), g[0].text) for g in gens]
                for unit, gens in generations.items()}

    def placeholder(self, request: GenerationRequest) -> str:
        return "Rating: 3\nReason: placeholder."


def judge_strengths(executor: Executor, cases: Sequence[JudgeCase]) -> list[JudgeVerdict]:
    """Rate every case on ``executor`` (one greedy, cached call each): :class:`JudgeStage`
    run on ``executor`` (a strength run runs it through its stage driver). A failed
    request raises :class:`~credo.errors.RequestsFailed` (strict: no rating is left out)."""
    (verdicts,) = StageRunner.on(executor, strict=True).run([JudgeStage("judge")],
                                                             {"": list(cases)})
    return verdicts.get("", [])


__all__ = [
    "COT_EXAMPLES",
    "INPUT_EXAMPLES",
    "JUDGE_PARAMS",
    "JUDGE_STAGE",
    "STRENGTH_GUIDE",
    "JudgeCase",
    "JudgeExample",
    "JudgeStage",
    "JudgeVerdict",
    "judge_messages",
    "judge_request",
    "judge_strengths",
    "parse_rating",
]

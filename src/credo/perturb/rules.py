"""The neutrality rules a context prefix must pass, each a named check (Wu et al., §3, App. A.1).

C3 means something only if the prefixes are topic-aligned and content-neutral: Wu et al.
App. A.3 checks that Δ = #correct perturbed − #correct original is centred at 0. Each rule
below rejects one way a candidate fails that; a candidate is kept only if it breaks none,
and the run counts the rejections per rule (``perturbations.jsonl``, the report).

Two rule sets:

* ``basic`` (the rules before the strict ones): not empty, not a question, 4 to 40 words,
  not a restatement contained in (or containing) the question, no talk about the prompt,
  no digit, no name of the question's people or places (or of the writer's examples).
* ``strict`` (the default): ``basic`` with the prompt's own minimum length (6 words,
  :data:`MIN_WORDS`), plus
  ``restates_question`` (most of the question's content words, whatever is appended),
  ``names_option`` (an answer option's content words, choice tasks), ``names_answer``
  (an answer the model gave in its original samples, other tasks), ``fragment`` (a bare
  prepositional phrase: no finite-verb cue) and ``language`` (not the question's
  language, by py3langid's classifier, when both are identified with confidence).

The ``fragment`` rule is a surface heuristic, stated: a candidate that opens with a
preposition and has no auxiliary, modal, copula or ``-ed`` / ``-ing`` form is a phrase,
not a sentence ("At bank tellers' booths, patients at hospital, or in airports."). A true
part-of-speech tagger would be more exact, but none that ships its model offline fits the
project's pinned numpy; the heuristic rejects the fragments writers produce and, in the
tests, no sentence of the shipped examples.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Literal

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from credo.registry import Registry

__all__ = [
    "MAX_WORDS",
    "MIN_WORDS",
    "RULES",
    "RuleContext",
    "RuleSet",
    "broken_rule",
    "content_words",
    "neutrality_rule",
]

RuleSet = Literal["basic", "strict"]

MIN_WORDS: dict[str, int] = {"basic": 4, "strict": 6}
"""The shortest prefix each rule set accepts (the strict one: the writer prompt's own)."""
MAX_WORDS = 40


@dataclass(frozen=True)
class RuleContext:
    """What the rules compare a candidate with: the question, its options (choice tasks),
    the answers the model gave in its original samples (other tasks), the length bounds
    and names that must not appear (the writer's examples')."""

    question: str
    choices: tuple[str, ...] = ()
    answers: tuple[str, ...] = ()
    min_words: int = 6
    max_words: int = 40
    banned_names: frozenset[str] = field(default_factory=frozenset)


Rule = Callable[[str, RuleContext], bool]
"""``rule(candidate, ctx) -> True`` when the candidate breaks the rule."""

RULES: Registry[tuple[Rule, tuple[RuleSet, ...]]] = Registry("neutrality rule")
"""Every prefix rule by name, with the rule sets it belongs to, in the order they are read."""


def neutrality_rule(
    name: str, *, sets: tuple[RuleSet, ...] = ("basic", "strict")
) -> Callable[[Rule], Rule]:
    """Register ``rule`` as ``name`` in the rule ``sets`` it belongs to."""
    return RULES.register(name, lambda fn: (fn, sets))


def broken_rule(text: str, ctx: RuleContext, rules: RuleSet = "strict") -> str | None:
    """The name of the first rule of set ``rules`` that ``text`` breaks, or None."""
    for name, (fn, sets) in RULES.items():
        if rules in sets and fn(text, ctx):
            return name
    return None


# --------------------------------------------------------------------------- helpers


def content_words(text: str) -> set[str]:
    """Lower-case alphabetic words of 3+ letters that are not English stop words
    (scikit-learn's list), a trailing plural ``s`` removed."""
    words = re.findall(r"[a-z][a-z'-]+", text.lower())
    return {_singular(w) for w in words if len(w) >= 3 and w not in ENGLISH_STOP_WORDS}


def _singular(word: str) -> str:
    word = word.rstrip("'")
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[^\w\s]", "", s.lower())).strip()


_COMMON_CAPITALISED = frozenset(
    "A An The If In On At For Of To And But Or So As By With From This That These Those It "
    "He She They We You I His Her Their Its What Which Who Whom Whose When Where Why How "
    "Each Every All Some Many Most One Two Three After Before Then There Here Mr Mrs Ms Dr "
    "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
)


def names(text: str, keep_common: bool = False) -> set[str]:
    """Capitalised words of ``text`` (possessive 's removed) that are likely names."""
    words = {re.sub(r"'s$", "", w) for w in re.findall(r"\b[A-Z][\w'-]+", text)}
    return words if keep_common else words - _COMMON_CAPITALISED


_META = re.compile(
    r"(?:the |a |my |here is |here's )?(?:context|sentence|background|rules?|domain|question"
    r"|answer|sure|certainly|let's|okay|ok)\b",
    re.IGNORECASE,
)

# --------------------------------------------------------------------------- basic rules


@neutrality_rule("empty_or_question")
def _empty_or_question(text: str, ctx: RuleContext) -> bool:
    """Empty, or a question (contains "?")."""
    return not text or "?" in text


@neutrality_rule("length")
def _length(text: str, ctx: RuleContext) -> bool:
    """Under ``min_words`` (the writer prompt's own minimum, 6, in the strict set; 4 in the
    basic one) or over ``max_words`` words."""
    return not ctx.min_words <= len(text.split()) <= ctx.max_words


@neutrality_rule("contained_in_question")
def _contained(text: str, ctx: RuleContext) -> bool:
    """Contained in the question, or containing it (a restatement)."""
    low, q = _norm(text), _norm(ctx.question)
    return bool(low) and (low in q or q in low)


@neutrality_rule("meta_talk")
def _meta(text: str, ctx: RuleContext) -> bool:
    """Talks about the prompt ("The context sentence is ...", "Sure, ...")."""
    return bool(_META.match(text))


@neutrality_rule("digit")
def _digit(text: str, ctx: RuleContext) -> bool:
    """Contains a digit: a number can change an answer."""
    return bool(re.search(r"\d", text))


@neutrality_rule("names_question_entity")
def _names_entity(text: str, ctx: RuleContext) -> bool:
    """Names a person or place of the question (or of the writer's examples)."""
    return bool((names(ctx.question) | ctx.banned_names) & names(text, keep_common=True))


# --------------------------------------------------------------------------- strict rules

RESTATEMENT_OVERLAP = 0.6
"""Share of the question's content words that makes a candidate a restatement."""


@neutrality_rule("restates_question", sets=("strict",))
def _restates(text: str, ctx: RuleContext) -> bool:
    """Holds most (≥ 60%) of the question's content words, whatever is appended
    ("A revolving door is convenient ... at a museum.")."""
    q = content_words(ctx.question)
    return len(q) >= 3 and len(q & content_words(text)) / len(q) >= RESTATEMENT_OVERLAP


@neutrality_rule("names_option", sets=("strict",))
def _names_option(text: str, ctx: RuleContext) -> bool:
    """Names an answer option: every content word of some option is in the candidate."""
    words = content_words(text)
    return any((cw := content_words(c)) and cw <= words for c in ctx.choices)


@neutrality_rule("names_answer", sets=("strict",))
def _names_answer(text: str, ctx: RuleContext) -> bool:
    """Names an answer the model gave in its original samples (as whole words)."""
    low = f" {_norm(text)} "
    for answer in ctx.answers:
        a = _norm(str(answer))
        if a and (f" {a} " in low or ((cw := content_words(a)) and cw <= content_words(text))):
            return True
    return False


_PREPOSITIONS = frozenset(
    "at in on by for from with without near inside outside under over during before after "
    "among between into onto through across behind beyond within along around about "
    "throughout upon via".split()
)
_VERB_CUES = frozenset(
    "is are was were be been being am has have had do does did can could will would shall "
    "should may might must".split()
)


@neutrality_rule("fragment", sets=("strict",))
def _fragment(text: str, ctx: RuleContext) -> bool:
    """A bare prepositional phrase, not a sentence: opens with a preposition and has no
    auxiliary, modal, copula or -ed / -ing word (module docstring)."""
    words = re.findall(r"[a-z']+", text.lower())
    if not words or words[0] not in _PREPOSITIONS:
        return False
    return not any(w in _VERB_CUES or w.endswith(("ed", "ing")) for w in words)


LANGUAGE_CONFIDENCE = 0.9
"""Both texts must be identified with at least this probability for a mismatch to count."""


@neutrality_rule("language", sets=("strict",))
def _language(text: str, ctx: RuleContext) -> bool:
    """Not in the question's language (py3langid; only confident identifications count)."""
    q_lang, q_p = _identify(ctx.question)
    t_lang, t_p = _identify(text)
    return q_p >= LANGUAGE_CONFIDENCE and t_p >= LANGUAGE_CONFIDENCE and q_lang != t_lang


@cache
def _identify(text: str) -> tuple[str, float]:
    """(language, probability) by py3langid's shipped model (normalised probabilities)."""
    return _identifier().classify(text)


@cache
def _identifier():
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_pickled_model(MODEL_FILE, norm_probs=True)

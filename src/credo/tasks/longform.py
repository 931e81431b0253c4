"""Long-form factuality: biographies scored FActScore-style (Min et al. 2023; Wu et al., §4,
App. I, J).

Task ``factscore:<file>[,knowledge=<folder>]`` (format LONG_FORM): one item per entity,
asking FActScore's question "Tell me a bio of <entity>." ``<file>`` is either a list of
entities, one per line (FActScore's ``prompt_entities.txt``), or one of FActScore's
labelled files (``labeled/<model>.jsonl``, read by :func:`load_factscore_labelled`,
whose ``topic`` fields name the entities).

Correctness needs a knowledge source, because FActScore checks each claim against
evidence (Wikipedia in the benchmark). :class:`FolderKnowledgeSource` reads one text
file per entity from a local folder; any object with ``passages(entity) -> list[str]``
works. Without one the run reports correctness as unavailable (NaN, shown as "n/a")
instead of inventing it.

With one, each sample is scored by the ``factscore`` grader (:func:`grade_factscore`),
which asks a judge through the grading context's cached executor, for every claim,
whether the entity's best-matching passages support it; the sample's score is the
fraction of supported claims (FActScore's definition). Departure
from FActScore, stated: claims are the generation's *sentences* (:func:`claims`), not
atomic facts split by an LLM, which would cost one more model call per sample; a
sentence holding several facts is supported only if the judge accepts it whole.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from credo.errors import UserError
from credo.generation.executor import PlannedRequest
from credo.generation.pool import GRADER
from credo.generation.stage import Generated, Stage, StagePlan
from credo.tasks.base import AnswerFormat, Item, Task
from credo.tasks.grading import CLAIMS_STAGE, Graded, GradeMap, GradingContext, grader
from credo.tasks.loaders import DatasetError, read_jsonl
from credo.tasks.registry import TaskSpecError, required_argument, task_loader
from credo.types import GenerationRequest, Message, SamplingParams

__all__ = [
    "FACTSCORE",
    "ClaimCheckStage",
    "FolderKnowledgeSource",
    "KnowledgeSource",
    "LabelledBio",
    "claims",
    "grade_factscore",
    "knowledge_sources",
    "load_entities",
    "load_factscore_labelled",
    "load_factscore_task",
    "parse_support",
    "support_messages",
]

FACTSCORE = "factscore"
BIO_QUESTION = "Tell me a bio of {entity}."


class KnowledgeSource(Protocol):
    """Evidence about entities: the passages to check a claim about ``entity`` against."""

    def passages(self, entity: str) -> list[str]: ...


@task_loader("factscore", fmt=AnswerFormat.LONG_FORM, grader="factscore", source="your file",
             usage="factscore:<entities.txt or labelled.jsonl>")
def _factscore(arg: str | None) -> Task:
    arg = required_argument(arg, "task 'factscore' needs an entity file: factscore:"
                            "<entities.txt or labelled.jsonl>[,knowledge=<folder with one "
                            "<entity>.txt per entity>]")
    path, _, rest = arg.partition(",")
    knowledge = None
    if rest:
        key, eq, value = rest.partition("=")
        if key.strip() != "knowledge" or not eq or not value.strip():
            raise TaskSpecError(
                f"factscore options must be 'knowledge=<folder>', got {rest!r}"
            )
        knowledge = value.strip()
    return load_factscore_task(path, knowledge)


def load_factscore_task(path: str | Path, knowledge: str | Path | None = None) -> Task:
    """Biography items for the entities in ``path`` (a ``.txt`` list or a labelled ``.jsonl``).

    ``knowledge`` is a folder for :class:`FolderKnowledgeSource`; it is checked here and
    recorded in every item's ``meta["knowledge"]`` for the grading stage.
    """
    p = Path(path)
    if p.suffix.lower() in (".jsonl", ".json"):
        entities = [(b.source, b.topic) for b in load_factscore_labelled(p)]
    else:
        entities = [(f"{p}:{line}", e) for line, e in load_entities(p)]
    meta = {"grader": FACTSCORE}
    if knowledge is not None:
        folder = Path(knowledge)
        if not folder.is_dir():
            raise UserError(f"factscore knowledge source {folder}: not a folder")
        meta["knowledge"] = str(folder)
    items = []
    seen: set[str] = set()
    for source, entity in entities:
        if entity in seen:
            continue
        seen.add(entity)
        items.append(
            Item(
                id=f"{FACTSCORE}-{len(items):04d}",
                question=BIO_QUESTION.format(entity=entity),
                gold="",
                meta={**meta, "entity": entity},
                source=source,
            )
        )
    return Task(FACTSCORE, tuple(items), AnswerFormat.LONG_FORM, "biographies of people")


def load_entities(path: str | Path) -> list[tuple[int, str]]:
    """``(line_no, entity)`` for every non-empty line of a one-name-per-line file."""
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8-sig").splitlines()
    except UnicodeDecodeError as e:
        raise DatasetError(f"{p}: not UTF-8 text ({e})") from e
    out = [(i, line.strip()) for i, line in enumerate(lines, 1) if line.strip()]
    if not out:
        raise DatasetError(f"{p}: no entity names (expected one name per line)")
    return out


@dataclass(frozen=True)
class LabelledBio:
    """One row of a FActScore labelled file: a generated bio and its human fact labels.

    ``facts`` holds ``(atomic fact, label)`` with label ``S`` (supported), ``NS`` (not
    supported) or ``IR`` (irrelevant); an abstaining generation has no facts.
    """

    topic: str
    output: str
    facts: tuple[tuple[str, str], ...]
    source: str

    @property
    def abstained(self) -> bool:
        """The generation declined to answer (FActScore's ``annotations`` is null)."""
        return not self.facts

    @property
    def factscore(self) -> float:
        """Supported / (supported + not supported), IR facts excluded; NaN when none."""
        s = sum(1 for _, lab in self.facts if lab == "S")
        ns = sum(1 for _, lab in self.facts if lab == "NS")
        return s / (s + ns) if s + ns else float("nan")


def load_factscore_labelled(path: str | Path) -> list[LabelledBio]:
    """FActScore's human-labelled JSONL (``input``, ``output``, ``topic``, ``annotations``).

    Each annotation holds a sentence and its ``human-atomic-facts`` (``text``, ``label``);
    ``annotations`` is null when the model abstained.
    """
    p = Path(path)
    out = []
    for line_no, row in read_jsonl(p):
        where = f"{p}:{line_no}"
        if not isinstance(row.get("topic"), str):
            raise DatasetError(f"{where}: expected an object with a 'topic' string")
        facts: list[tuple[str, str]] = []
        for ann in row.get("annotations") or []:
            for fact in (ann or {}).get("human-atomic-facts") or []:
                label = fact.get("label")
                if label not in ("S", "NS", "IR"):
                    raise DatasetError(f"{where}: atomic fact label {label!r} not S/NS/IR")
                facts.append((str(fact.get("text", "")), label))
        out.append(LabelledBio(row["topic"], str(row.get("output", "")), tuple(facts), where))
    if not out:
        raise DatasetError(f"{p}: no rows")
    return out


class FolderKnowledgeSource:
    """One UTF-8 text file per entity in ``folder``: ``<entity>.txt`` (spaces or underscores).

    The text is cut into passages of about ``words`` words (FActScore retrieves 256-token
    Wikipedia passages); :meth:`retrieve` ranks them against a claim by TF-IDF cosine.
    """

    def __init__(self, folder: str | Path, words: int = 150) -> None:
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise ValueError(f"knowledge source {self.folder}: not a folder")
        self.words = words
        self._cache: dict[str, list[str]] = {}

    def passages(self, entity: str) -> list[str]:
        """The entity's passages; empty when the folder has no file for it."""
        if entity not in self._cache:
            self._cache[entity] = self._read(entity)
        return self._cache[entity]

    def _read(self, entity: str) -> list[str]:
        for name in (entity, entity.replace(" ", "_")):
            f = self.folder / f"{name}.txt"
            if f.is_file():
                words = f.read_text(encoding="utf-8").split()
                return [
                    " ".join(words[i : i + self.words]) for i in range(0, len(words), self.words)
                ]
        return []

    def retrieve(self, entity: str, claim: str, k: int = 3) -> list[str]:
        """The ``k`` passages most similar to ``claim`` (TF-IDF cosine, scikit-learn)."""
        return retrieve(self.passages(entity), claim, k)


def retrieve(passages: Sequence[str], claim: str, k: int = 3) -> list[str]:
    """The ``k`` passages of ``passages`` most similar to ``claim`` by TF-IDF cosine."""
    if len(passages) <= k:
        return list(passages)
    from sklearn.feature_extraction.text import TfidfVectorizer

    vec = TfidfVectorizer().fit([*passages, claim])
    sims = (vec.transform(passages) @ vec.transform([claim]).T).toarray().ravel()
    order = sorted(range(len(passages)), key=lambda i: (-sims[i], i))[:k]
    return [passages[i] for i in sorted(order)]


# A sentence ends at . ! or ?, or at one followed by a closing quote or bracket
# ('... "The Unfocused Mirror." His ...' is two sentences), before a capital, digit or
# opening quote / bracket.
_SENTENCE_RE = re.compile(
    r"(?:(?<=[.!?])|(?<=[.!?][\"'\u201d\u2019)]))\s+(?=[A-Z0-9\"'(\u201c\u2018])"
)


def claims(text: str | None) -> list[str]:
    """The sentences of a generation, the claims checked one by one (module docstring)."""
    if not text:
        return []
    parts = _SENTENCE_RE.split(" ".join(text.split()))
    return [s.strip() for s in parts if len(s.strip().split()) >= 3]


def support_messages(entity: str, claim: str, passages: Sequence[str]) -> tuple[Message, ...]:
    """FActScore's retrieve-then-verify prompt: context passages, then "<claim> True or False?"."""
    context = "\n\n".join(f"Title: {entity}\nText: {p}" for p in passages) or "(no passage)"
    user = (
        f"Answer the question about {entity} based on the given context.\n\n{context}\n\n"
        f"Input: {claim} True or False?\nOutput:"
    )
    return (
        Message(role="system", content="Reply with one word: True or False."),
        Message(role="user", content=user),
    )


_SUPPORT_RE = re.compile(r"[\s*_\"'`(\[]*(?P<word>true|false)\b(?!\s*(?:/|\bor\b))", re.IGNORECASE)


def parse_support(text: str) -> bool | None:
    """``True``/``False`` from a reply starting with that word; ``None`` if unparsable."""
    s = re.sub(r"^\s*<think>.*?</think>", "", text, count=1, flags=re.DOTALL | re.IGNORECASE)
    m = _SUPPORT_RE.match(s.strip())
    return None if m is None else m.group("word").lower() == "true"


@grader(FACTSCORE, "share of claims an LLM judge finds supported by the knowledge source",
        judge=True)
def grade_factscore(ctx: GradingContext, originals: Mapping[str, Sequence[Graded]]) -> GradeMap:
    """Per sample: supported claims / claims (FActScore); NaN without a knowledge source.

    Every distinct (item, claim) is checked once, against the entity's best-matching
    passages of the item's knowledge source (``ctx.knowledge`` replaces the folder an
    item names); a sample without claims scores 0.
    """
    items = ctx.items
    sources = knowledge_sources(items, list(originals), ctx.knowledge)
    out: GradeMap = {
        i: tuple(math.nan for _ in o) for i, o in originals.items() if i not in sources
    }
    if out:
        ctx.stats["correctness"] = (
            f"unavailable for {len(out)} of {len(originals)} items: no knowledge source"
            " (task factscore:<file>,knowledge=<folder>)"
        )
    if not sources:
        return out
    stage = ClaimCheckStage(ctx.params, sources)
    verdicts: dict[tuple[str, str], bool | None] = {}
    for found in ctx.run_stage(stage, {i: originals[i] for i in sources}, items).values():
        verdicts.update(found)
    plan = {(i, c) for i in sources for s in originals[i] for c in claims(s.answer.value)}
    no_claims = 0
    for i in sources:
        if i in ctx.incomplete:
            out[i] = tuple(math.nan for _ in originals[i])
            continue
        scores = []
        for s in originals[i]:
            cs = claims(s.answer.value)
            no_claims += not cs
            scores.append(sum(1 for c in cs if verdicts[(i, c)]) / len(cs) if cs else 0.0)
        out[i] = tuple(scores)
    ctx.stats.update(
        factscore_claims_checked=len(plan),
        factscore_unparsable_verdicts=sum(1 for v in verdicts.values() if v is None),
        factscore_samples_without_claims=no_claims,
    )
    return {i: out[i] for i in originals}


class ClaimCheckStage(Stage):
    """FActScore's claim checks as a planned stage: per item with a knowledge
    source, one request per distinct claim of its original samples (FActScore's
    retrieve-then-verify prompt, T = 0 at ``params``), asked of the grader role under
    ledger stage :data:`~credo.tasks.grading.CLAIMS_STAGE`; so the dry run counts them.
    ``plan(originals, items)``: the samples per item id and the items; ``read``: per item
    ``{(item id, claim): supported, or None when unparsable}``."""

    name = CLAIMS_STAGE
    role = GRADER
    description = "checking claims"
    missing = "grades missing"  # as every grader's failed requests say

    def __init__(self, params: SamplingParams, sources: Mapping[str, KnowledgeSource]) -> None:
        self.params = params
        self.sources = sources
        self._claims: dict[str, list[str]] = {}

    def plan(
        self, items: Mapping[str, Sequence[Graded]], context: Mapping[str, Item]
    ) -> StagePlan:
        out: StagePlan = {}
        self._claims = {}
        for i, samples in items.items():
            if i not in self.sources:
                continue
            found = list(dict.fromkeys(c for s in samples for c in claims(s.answer.value)))
            self._claims[i] = found
            entity = context[i].meta.get("entity", "")
            out[i] = [self._request(i, entity, c) for c in found]
        return out

    def _request(self, item_id: str, entity: str, claim: str) -> PlannedRequest:
        src = self.sources[item_id]
        passages = (
            src.retrieve(entity, claim)  # type: ignore[attr-defined]
            if hasattr(src, "retrieve")
            else retrieve(src.passages(entity), claim)
        )
        return PlannedRequest(
            GenerationRequest(messages=support_messages(entity, claim, passages),
                              params=self.params),
            1,
            label=f"{item_id}/support",
            stage=CLAIMS_STAGE,
        )

    def read(self, generations: Generated) -> dict[str, dict[tuple[str, str], bool | None]]:
        return {i: {(i, c): parse_support(g[0].text)
                    for c, g in zip(self._claims[i], gens, strict=True)}
                for i, gens in generations.items()}

    def placeholder(self, request: GenerationRequest) -> str:
        return "True"


def knowledge_sources(
    items: Mapping[str, Item], ids: Sequence[str], knowledge: KnowledgeSource | None = None
) -> dict[str, KnowledgeSource]:
    """The knowledge source of each item of ``ids`` that has one: ``knowledge`` when
    given, else the folder its ``meta["knowledge"]`` names (one source per folder)."""
    sources: dict[str, KnowledgeSource] = {}
    for i in ids:
        src = knowledge or _folder_source(items[i], sources)
        if src is not None:
            sources[i] = src
    return sources


def _folder_source(item: Item, known: Mapping[str, KnowledgeSource]) -> KnowledgeSource | None:
    """The folder knowledge source ``item.meta["knowledge"]`` names (one per folder)."""
    folder = item.meta.get("knowledge")
    if not folder:
        return None
    for src in known.values():
        if isinstance(src, FolderKnowledgeSource) and str(src.folder) == folder:
            return src
    return FolderKnowledgeSource(folder)

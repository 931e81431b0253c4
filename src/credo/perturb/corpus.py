"""Corpus noise: context prefixes sampled from a text file instead of written by a model
(Wu et al., App. F).

Wu et al., App. F compares model-written perturbations with "random web-sourced noise of
approximately the same length sampled from RedPajama": snippets that need no inference
and, being drawn independently of the question, carry no answer-specific information,
at the cost of topic alignment. Here the user gives the text (``perturbation.corpus``):

1. :func:`load_corpus` splits it into documents (blank-line-separated paragraphs of a
   text file, or the ``text`` field of each row of a ``.jsonl`` file such as a RedPajama
   sample; ``.gz`` too), each document into sentences, and keeps every window of one or
   two consecutive sentences of :data:`MIN_WORDS`-:data:`MAX_WORDS` words that starts
   with a capital letter: about the length of the written prefixes.
2. :func:`corpus_perturbations` draws, per item, snippets in an order fixed by the run's
   seed and the item id (a rerun draws the same ones), passes them through the rules
   written prefixes obey where they apply (:func:`~credo.perturb.context.is_neutral_context`:
   no question, no digit, no restatement of the question, none of its names) and through
   the same diversity filter (k = ``config.threshold``, 0.8124, App. A.2), until ``m`` are
   kept. The result has :meth:`~credo.perturb.context.PrefixWriter.full`'s shape.

No model writes them, so no generation (and no cache entry) is involved; the perturbed
answers are cached as usual, their prompts holding the snippets.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import math
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from credo.config import PerturbationConfig
from credo.errors import UserError
from credo.models.embedders import Embedder
from credo.perturb.context import (
    MemoEmbedder,
    PerturbationSet,
    diversity_filter,
    is_neutral_context,
)
from credo.tasks.base import Item

log = logging.getLogger(__name__)

__all__ = ["MAX_WORDS", "MIN_WORDS", "Corpus", "corpus_perturbations", "load_corpus"]

MIN_WORDS = 8
MAX_WORDS = 40
"""A snippet's length in words: one or two sentences, about a written prefix's length."""
MAX_SENTENCES = 2
DRAWS_PER_PREFIX = 200
"""Snippets an item may draw per prefix it needs (at most the whole corpus)."""

# A sentence ends at . ! or ? (possibly followed by a closing quote or bracket) before
# whitespace and a capital letter (possibly after an opening quote or bracket).
_SENTENCE_BREAK = re.compile(
    r"(?:(?<=[.!?])|(?<=[.!?][\"'\u201d\u2019)\]]))\s+(?=[\"'\u201c\u2018(\[]?[A-Z])"
)
_STARTS_WELL = re.compile(r"[\"'\u201c\u2018(]?[A-Z]")


@dataclass(frozen=True)
class Corpus:
    """The snippets of a corpus file: distinct windows of one or two sentences, in file
    order."""

    path: Path
    snippets: tuple[str, ...]


def load_corpus(path: str | Path) -> Corpus:
    """Read ``path`` and cut it into snippets (module docstring, step 1).

    Raises :class:`~credo.errors.UserError` naming the file when it cannot be read or
    yields no snippet of :data:`MIN_WORDS`-:data:`MAX_WORDS` words.
    """
    p = Path(path)
    snippets: dict[str, None] = {}
    for doc in _documents(p):
        for paragraph in re.split(r"\n\s*\n", doc):
            sentences = [s for s in _SENTENCE_BREAK.split(" ".join(paragraph.split())) if s]
            snippets.update(dict.fromkeys(_windows(sentences)))
    if not snippets:
        raise UserError(
            f"{p}: no snippet of {MIN_WORDS}-{MAX_WORDS} words (one or two sentences) "
            "in the corpus"
        )
    return Corpus(p, tuple(snippets))


def _windows(sentences: Sequence[str]) -> Iterator[str]:
    """Every run of 1 to :data:`MAX_SENTENCES` consecutive sentences of the right length."""
    for i in range(len(sentences)):
        for j in range(i + 1, min(i + MAX_SENTENCES, len(sentences)) + 1):
            text = " ".join(sentences[i:j])
            if MIN_WORDS <= len(text.split()) <= MAX_WORDS and _STARTS_WELL.match(text):
                yield text


def _documents(path: Path) -> Iterator[str]:
    """The documents of a corpus file: the whole text, or each JSON Lines row's ``text``."""
    suffixes = [s.lower() for s in path.suffixes]
    jsonl = any(s in (".jsonl", ".ndjson") for s in suffixes[-2:])
    try:
        raw = path.read_bytes()
        if suffixes and suffixes[-1] == ".gz":
            raw = gzip.decompress(raw)
        text = raw.decode("utf-8-sig")
    except FileNotFoundError:
        raise UserError(f"{path}: no such corpus file (perturbation.corpus)") from None
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: cannot read the corpus ({e})") from None
    if not jsonl:
        yield text
        return
    for line_no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise UserError(f"{path}:{line_no}: invalid JSON: {e.msg}") from None
        if not isinstance(row, dict) or not isinstance(row.get("text"), str):
            raise UserError(f"{path}:{line_no}: a corpus row needs a 'text' field")
        yield row["text"]


def corpus_perturbations(
    items: Sequence[Item],
    m: int,
    corpus: Corpus,
    embedder: Embedder,
    config: PerturbationConfig,
    seed: int,
) -> dict[str, PerturbationSet]:
    """Up to ``m`` diverse corpus snippets per item (module docstring, step 2).

    Item i draws up to ``min(len(corpus.snippets), DRAWS_PER_PREFIX * m)`` distinct
    snippets in the order of ``random.Random(hash(seed, item id))``; they are cleaned in
    that order, embedded a batch at a time (``config.candidates_per_round``, or 1.5 x
    the number still missing) and kept if their cosine similarity to every kept one is
    below ``config.threshold``. ``candidates`` counts the snippets drawn,
    ``rejected_invalid`` those the rules rejected. Every item gets an entry; one with
    fewer than ``m`` reuses its kept ones in turn, as written prefixes do.
    """
    memo = MemoEmbedder(embedder)  # the same snippet may be drawn for several items
    result = {
        it.id: _item_snippets(it, m, corpus, memo, config, seed) for it in items
    }
    short = [i for i, p in result.items() if len(p.kept) < m]
    if short:
        log.warning(
            "%d of %d items have fewer than m=%d distinct corpus snippets (kept ones are "
            "reused in turn): %s",
            len(short), len(items), m,
            ", ".join(f"{i} ({len(result[i].kept)})" for i in short[:20]),
        )
    return result


def _item_snippets(
    item: Item,
    m: int,
    corpus: Corpus,
    embedder: Embedder,
    config: PerturbationConfig,
    seed: int,
) -> PerturbationSet:
    rng = random.Random(item_seed(seed, item.id))
    pool = corpus.snippets
    order = rng.sample(range(len(pool)), min(len(pool), DRAWS_PER_PREFIX * m))
    kept: list[str] = []
    vectors: np.ndarray | None = None  # the kept snippets' embeddings
    drawn = invalid = similar = 0
    while len(kept) < m and drawn < len(order):
        want = config.candidates_per_round or math.ceil(1.5 * (m - len(kept)))
        batch: list[str] = []
        while len(batch) < want and drawn < len(order):
            text = pool[order[drawn]]
            drawn += 1
            if is_neutral_context(text, item.question, MIN_WORDS, MAX_WORDS):
                batch.append(text)
            else:
                invalid += 1
        if not batch:
            break
        new = embedder.encode(batch)
        stacked = new if vectors is None else np.vstack([vectors, new])
        accepted = [i - len(kept) for i in diversity_filter(stacked, config.threshold,
                                                            kept=range(len(kept)))[len(kept):]]
        similar += len(batch) - len(accepted)
        fresh = accepted[: m - len(kept)]
        kept.extend(batch[i] for i in fresh)
        vectors = new[fresh] if vectors is None else np.vstack([vectors, new[fresh]])
    return PerturbationSet(
        item_id=item.id,
        kept=tuple(kept),
        candidates=drawn,
        rejected_invalid=invalid,
        rejected_similar=similar,
    )


def item_seed(seed: int, item_id: str) -> int:
    """The seed of an item's draws: a hash of the run's seed and the item id."""
    return int.from_bytes(hashlib.sha256(f"corpus:{seed}:{item_id}".encode()).digest()[:8])

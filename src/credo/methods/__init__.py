"""Scoring methods, one module each, registered by decorator (design.md, ``methods/``)."""

from credo.methods import c3 as _c3  # noqa: F401  (registers c3, c3_cross)
from credo.methods import self_consistency as _sc  # noqa: F401  (registers self_consistency)
from credo.methods.base import (
    METHODS,
    ORIGINAL,
    PERTURBED,
    ItemSamples,
    MethodSpec,
    Sample,
    get_method,
    method,
)
from credo.methods.c3 import c3, c3_cross, mmd2_unbiased
from credo.methods.self_consistency import self_consistency

__all__ = [
    "METHODS",
    "ORIGINAL",
    "PERTURBED",
    "ItemSamples",
    "MethodSpec",
    "Sample",
    "c3",
    "c3_cross",
    "get_method",
    "method",
    "mmd2_unbiased",
    "self_consistency",
]

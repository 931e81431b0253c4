"""Scoring methods, one module each, registered by decorator (design.md, ``methods/``)."""

from credo.methods import answer_consistency as _ac  # noqa: F401  (registers answer_consistency)
from credo.methods import c3 as _c3  # noqa: F401  (registers c3, c3_cross)
from credo.methods import ccp as _ccp  # noqa: F401  (registers ccp)
from credo.methods import cocoa as _cocoa  # noqa: F401  (registers cocoa, cocoa_ppl)
from credo.methods import degree as _deg  # noqa: F401  (registers degree)
from credo.methods import eccentricity as _ecc  # noqa: F401  (registers eccentricity)
from credo.methods import eigv as _eigv  # noqa: F401  (registers eigv)
from credo.methods import fitted as _fitted  # noqa: F401  (registers combined, calibrated:<m>)
from credo.methods import given as _given  # noqa: F401  (registers the given:<name> family)
from credo.methods import kle as _kle  # noqa: F401  (registers kle)
from credo.methods import label_prob as _lp  # noqa: F401  (registers label_prob)
from credo.methods import lexsim as _lex  # noqa: F401  (registers lexsim)
from credo.methods import luq as _luq  # noqa: F401  (registers luq)
from credo.methods import num_semantic_sets as _ns  # noqa: F401  (registers num_semantic_sets)
from credo.methods import p_true as _pt  # noqa: F401  (registers p_true)
from credo.methods import paraphrase as _pc  # noqa: F401  (registers paraphrase)
from credo.methods import self_consistency as _sc  # noqa: F401  (registers self_consistency)
from credo.methods import semantic_density as _sd  # noqa: F401  (registers semantic_density)
from credo.methods import semantic_entropy as _se  # noqa: F401  (registers semantic_entropy)
from credo.methods import verbalized as _vb  # noqa: F401  (registers verbalized)
from credo.methods.answer_consistency import answer_consistency
from credo.methods.base import (
    METHODS,
    ORIGINAL,
    PERTURBED,
    ItemSamples,
    MethodSpec,
    Sample,
    Score,
    get_method,
    method,
)
from credo.methods.c3 import c3, c3_cross, mmd2_unbiased
from credo.methods.degree import degree
from credo.methods.eccentricity import eccentricity
from credo.methods.eigv import eigv
from credo.methods.kle import kle
from credo.methods.num_semantic_sets import num_semantic_sets
from credo.methods.self_consistency import self_consistency
from credo.methods.semantic_entropy import semantic_entropy

__all__ = [
    "METHODS",
    "ORIGINAL",
    "PERTURBED",
    "ItemSamples",
    "MethodSpec",
    "Sample",
    "Score",
    "answer_consistency",
    "c3",
    "c3_cross",
    "degree",
    "eccentricity",
    "eigv",
    "get_method",
    "kle",
    "method",
    "mmd2_unbiased",
    "num_semantic_sets",
    "self_consistency",
    "semantic_entropy",
]

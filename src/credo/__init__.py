"""credo: how far to trust an LLM's answers, measured from the outside.

Public API (Wu et al. = Cross-Contextual Consistency paper):

- :func:`c3`, :func:`c3_cross`, :func:`self_consistency`: per-item scores from answers.
- :func:`answer_consistency`: per-generation agreement (Müller et al., App. A.11.2).
- :func:`semantic_entropy`, :func:`eigv`, :func:`degree`, :func:`eccentricity`,
  :func:`kle`: uncertainty estimators on the similarity graph of the samples (Farquhar
  et al. 2024; Lin et al. 2024; Nikitin et al. 2024).
- :func:`ece`, :func:`mce`, :func:`brier`, :func:`auroc`, :func:`auprc_pos`,
  :func:`auprc_neg`, :func:`auarc`, :func:`prr`: evaluation metrics; :func:`bootstrap_ci`:
  their 95% bootstrap intervals (Müller et al., §3.7); :func:`certify`: a score threshold whose
  selective risk is certified (Learn then Test), :func:`coverage_at_risk`: its coverage
  estimated by calibration/test splits; :func:`certify_claims`: which claims of a long
  answer to keep (conformal factuality, Mohri & Hashimoto 2024), on :class:`ClaimItem` s
  of :class:`Claim` s, returning a :class:`ClaimCertificate`.
- :func:`evaluate`: those metrics, with their intervals, on any scores and
  correctness (two arrays; with ``questions``, per generation, intervals resampling
  questions); :func:`score`: credo's methods on generations a file already holds, with
  the scores the file gives (``given:<name>``) beside them.
- :func:`run`: the whole pipeline from a :class:`RunConfig`; :func:`study`: every task
  with every model from a :class:`StudyConfig`, one run folder each and one comparison
  report; :class:`ExecutorConfig`: where samples are generated (locally or on Ray).
- :func:`flip_rates`, :func:`linear_kappa`: flip rate by perturbation strength and
  weighted kappa (Le et al., eq. 2, §3.4).
- :class:`Guard`: one question at a time under a certificate: ``.ask(question)``
  gives the answer, its score and whether the certificate accepts it (a
  :class:`GuardAnswer`); ``.ask_many`` answers many together; ``credo serve`` is the same
  behind the OpenAI protocol.

Names are imported on first use (PEP 562), so ``import credo`` and the command line
start without loading numpy's, scikit-learn's or a model library's weight.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from credo.api import run, score, study
    from credo.config import ExecutorConfig, PerturbationConfig, RunConfig, StudyConfig
    from credo.evaluate.bootstrap import bootstrap_ci
    from credo.evaluate.certify import Certificate, certify
    from credo.evaluate.claims import Claim, ClaimCertificate, ClaimItem, certify_claims
    from credo.evaluate.coverage import coverage_at_risk
    from credo.evaluate.metrics import auarc, auprc_neg, auprc_pos, auroc, brier, ece, mce, prr
    from credo.methods import (
        answer_consistency,
        c3,
        c3_cross,
        degree,
        eccentricity,
        eigv,
        kle,
        mmd2_unbiased,
        self_consistency,
        semantic_entropy,
    )
    from credo.methods.scoring import ItemResult
    from credo.pipeline.runner import RunResult
    from credo.serve.guard import Guard, GuardAnswer
    from credo.strength import flip_rates, linear_kappa

_EXPORTS = {
    "Certificate": "credo.evaluate.certify",
    "Claim": "credo.evaluate.claims",
    "ClaimCertificate": "credo.evaluate.claims",
    "ClaimItem": "credo.evaluate.claims",
    "ExecutorConfig": "credo.config",
    "Guard": "credo.serve.guard",
    "GuardAnswer": "credo.serve.guard",
    "ItemResult": "credo.methods.scoring",
    "PerturbationConfig": "credo.config",
    "RunConfig": "credo.config",
    "RunResult": "credo.pipeline.runner",
    "answer_consistency": "credo.methods",
    "auarc": "credo.evaluate.metrics",
    "auprc_neg": "credo.evaluate.metrics",
    "auprc_pos": "credo.evaluate.metrics",
    "auroc": "credo.evaluate.metrics",
    "bootstrap_ci": "credo.evaluate.bootstrap",
    "brier": "credo.evaluate.metrics",
    "c3": "credo.methods",
    "c3_cross": "credo.methods",
    "certify": "credo.evaluate.certify",
    "certify_claims": "credo.evaluate.claims",
    "coverage_at_risk": "credo.evaluate.coverage",
    "degree": "credo.methods",
    "eccentricity": "credo.methods",
    "eigv": "credo.methods",
    "ece": "credo.evaluate.metrics",
    "flip_rates": "credo.strength",
    "kle": "credo.methods",
    "linear_kappa": "credo.strength",
    "mce": "credo.evaluate.metrics",
    "mmd2_unbiased": "credo.methods",
    "prr": "credo.evaluate.metrics",
    "run": "credo.api",
    "score": "credo.api",
    "self_consistency": "credo.methods",
    "semantic_entropy": "credo.methods",
    "study": "credo.api",
    "StudyConfig": "credo.config",
}

__all__ = [
    "Certificate",
    "Claim",
    "ClaimCertificate",
    "ClaimItem",
    "ExecutorConfig",
    "Guard",
    "GuardAnswer",
    "ItemResult",
    "PerturbationConfig",
    "RunConfig",
    "RunResult",
    "StudyConfig",
    "answer_consistency",
    "auarc",
    "auprc_neg",
    "auprc_pos",
    "auroc",
    "bootstrap_ci",
    "brier",
    "c3",
    "c3_cross",
    "certify",
    "certify_claims",
    "coverage_at_risk",
    "degree",
    "eccentricity",
    "ece",
    "eigv",
    "evaluate",
    "flip_rates",
    "kle",
    "linear_kappa",
    "mce",
    "mmd2_unbiased",
    "prr",
    "run",
    "score",
    "self_consistency",
    "semantic_entropy",
    "study",
]



def _installed_version() -> str:
    """The installed distribution's version (``pyproject.toml``'s, as pip recorded it);
    ``0+unknown`` for a source tree that was never installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("credo")
    except PackageNotFoundError:
        return "0+unknown"


__version__ = _installed_version()
"""credo's version, as ``credo --version`` prints it."""


def __getattr__(name: str) -> Any:
    if name == "evaluate":  # the package itself, callable: credo.evaluate(scores, correct)
        return importlib.import_module("credo.evaluate")
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'credo' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS, "evaluate"})

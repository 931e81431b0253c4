"""credo: how far to trust an LLM's answers, measured from the outside.

Public API (000 = Cross-Contextual Consistency paper):

- :func:`c3`, :func:`c3_cross`, :func:`self_consistency`: per-item scores from answers.
- :func:`answer_consistency`: per-generation agreement (002 App. A.11.2).
- :func:`ece`, :func:`auroc`, :func:`auprc_pos`, :func:`auprc_neg`: evaluation metrics;
  :func:`bootstrap_ci`: their 95% bootstrap intervals (002 §3.7).
- :func:`run`: the whole pipeline from a :class:`RunConfig`.
- :func:`flip_rates`, :func:`linear_kappa`: flip rate by perturbation strength and
  weighted kappa (003 eq. 2, §3.4).
"""

from credo.config import PerturbationConfig, RunConfig
from credo.evaluate.bootstrap import bootstrap_ci
from credo.evaluate.metrics import auprc_neg, auprc_pos, auroc, ece
from credo.methods import answer_consistency, c3, c3_cross, mmd2_unbiased, self_consistency
from credo.pipeline.runner import ItemResult, RunResult, run
from credo.strength import flip_rates, linear_kappa

__all__ = [
    "ItemResult",
    "PerturbationConfig",
    "RunConfig",
    "RunResult",
    "answer_consistency",
    "auprc_neg",
    "auprc_pos",
    "auroc",
    "bootstrap_ci",
    "c3",
    "c3_cross",
    "ece",
    "flip_rates",
    "linear_kappa",
    "mmd2_unbiased",
    "run",
    "self_consistency",
]

__version__ = "0.1.0"

"""Perturbation strength and flip rates (Le et al.): how strong a perturbation is, and
whether a model changes its answer when, and only when, it should.

- :func:`flip_rates`, :func:`flip_rate_table`, :func:`flip_rate_summary`: FR(s) (eq. 2),
  FR(3) responsive, FR(0) robust, FR(3) - FR(0) overall self-consistency (§4.4).
- :func:`linear_kappa`, :func:`agreement`: agreement with human labels (§3.4).
- :func:`mean_surprisal`, :func:`surprisal_change`: Δh (§3.3, eq. 1).
- :func:`parse_rating`, :func:`judge_strengths`: the LLM judge (Fig. 17).
- :func:`run_strength_pipeline`: the whole pipeline behind ``credo strength run``, models
  from a model pool; it writes nothing (:func:`credo.api.run_strength` opens the pool
  and writes the folder).
"""

from credo.strength.agreement import Agreement, agreement, linear_kappa
from credo.strength.flip import (
    STRENGTH_LEVELS,
    FlipRate,
    flip_rate_summary,
    flip_rate_table,
    flip_rates,
    wilson_interval,
)
from credo.strength.judge import judge_strengths, parse_rating
from credo.strength.pipeline import StrengthConfig, StrengthResult, run_strength_pipeline
from credo.strength.surprisal import mean_surprisal, surprisal_change

__all__ = [
    "STRENGTH_LEVELS",
    "Agreement",
    "FlipRate",
    "StrengthConfig",
    "StrengthResult",
    "agreement",
    "flip_rate_summary",
    "flip_rate_table",
    "flip_rates",
    "judge_strengths",
    "linear_kappa",
    "mean_surprisal",
    "parse_rating",
    "run_strength_pipeline",
    "surprisal_change",
    "wilson_interval",
]

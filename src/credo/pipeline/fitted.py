"""The fitted scores of a run: ``combined`` and ``calibrated:<method>``
(:mod:`credo.methods.fitted`), once every other method has scored the items.

:func:`fit_scores` runs between the scoring stage and the ending in every pipeline that
scores items (``credo run``, ``credo score``, the gateway's questions): for each fitted
method of ``config.methods`` it reads the scores of the methods it combines or
calibrates, and either

- applies the function ``config.combine.fitted`` holds for it (a certificate's: ``credo
  run --certificate`` and the gateway score a new item exactly as the certified run's
  function scores it), or
- cross-fits one on the items' labels (:func:`credo.evaluate.combine.cross_fit`: each
  item scored by the function fitted on the other folds, so no item's score depends on
  its own label), and keeps the function fitted on all labelled items, which the run
  folder records (``metrics.json["fitted"]``) for ``credo certify``.

An item without one of the scores read, or a run with fewer than 2 labelled items that
have them, gets no fitted score, with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from credo.config import RunConfig
from credo.evaluate.combine import FittedScore, cross_fit
from credo.methods.base import Score
from credo.methods.fitted import COMBINED, calibrated_of, is_fitted
from credo.methods.scoring import ItemResult
from credo.ties import settle

__all__ = ["fit_scores", "inputs_of"]


def inputs_of(method: str, config: RunConfig) -> list[str]:
    """The methods fitted score ``method`` reads."""
    return list(config.combine.methods) if method == COMBINED else [calibrated_of(method)]


def fit_scores(
    items: Sequence[ItemResult], config: RunConfig
) -> tuple[list[ItemResult], dict[str, dict[str, Any]]]:
    """``items`` with every fitted method's score (module docstring), and the functions
    fitted on all labelled items by method name (none for a function applied)."""
    names = [m for m in config.methods if is_fitted(m)]
    out = list(items)
    if not names or not out:
        return out, {}
    targets = np.array([r.performance for r in out], dtype=float)
    fitted: dict[str, dict[str, Any]] = {}
    for name in names:
        inputs = inputs_of(name, config)
        scores = np.array([[r.scores.get(m, math.nan) for m in inputs] for r in out],
                          dtype=float).reshape(len(out), len(inputs))
        recorded = config.combine.fitted.get(name)
        if recorded is not None:
            f: FittedScore | None = FittedScore.from_dict(recorded)
            values = f(scores)
        else:
            kind = config.combine.model if name == COMBINED else config.combine.calibration
            values, f = cross_fit(kind, inputs, scores, targets, k=config.combine.folds,
                                  seed=config.seed)
            if f is not None:
                fitted[name] = f.to_dict()
        why = (f"needs the {', '.join(inputs)} score{'s' if len(inputs) > 1 else ''} of an "
               "item" if f is not None else
               f"needs 2 labelled items with the {', '.join(inputs)} scores to fit on")
        out = [_with(r, name, float(v), why) for r, v in zip(out, values, strict=True)]
    return out, fitted


def _with(r: ItemResult, name: str, value: float, why: str) -> ItemResult:
    score = Score.not_available(why) if math.isnan(value) else Score(settle(value))
    return replace(r, scores={**r.scores, name: score.value},
                   method_scores={**r.method_scores, name: score})

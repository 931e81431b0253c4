"""Scores fitted on labelled items, named as methods: ``combined`` and
``calibrated:<method>``.

They are not functions of one item's samples: once every other method has scored the
run's items, the pipeline fits them on the items' labels, cross-fitted so that no item is
scored by a model that saw its label (:mod:`credo.evaluate.combine`,
:mod:`credo.pipeline.fitted`), or applies a fitted function a certificate recorded. Here
they are registered so that every part of credo that reads methods by name (the
config, the metrics, intervals and paired tests, certificates, the report) reads them
as it reads the others; their scorer is never asked for a value (``MethodSpec.fitted``).

- ``combined``: a combination of ``combine.methods``' scores (``--combine M1,M2``);
- ``calibrated:<method>``: one method's score mapped by Platt scaling or isotonic
  regression (``combine.calibration``).
"""

from __future__ import annotations

from credo.errors import UserError
from credo.kernels.registry import Kernel
from credo.methods.base import METHODS, PREFIXED, ItemSamples, MethodSpec, Score

__all__ = ["CALIBRATED", "COMBINED", "calibrated_method", "calibrated_of", "is_fitted"]

COMBINED = "combined"
"""The method name of the combination of ``combine.methods``' scores."""
CALIBRATED = "calibrated:"
"""The prefix of a calibrated score's method name (``calibrated:c3``)."""


def is_fitted(method: str) -> bool:
    """Whether ``method`` names a fitted score (``combined``, ``calibrated:<method>``)."""
    return method == COMBINED or method.startswith(CALIBRATED)


def calibrated_of(method: str) -> str:
    """The method whose score ``calibrated:<method>`` maps."""
    return method[len(CALIBRATED):]


def _fitted_later(samples: ItemSamples, kernel: Kernel | None = None) -> Score:
    return Score.not_available("fitted on the labelled items once the other methods scored "
                               "them")


def calibrated_method(method: str) -> MethodSpec:
    """The method ``calibrated:<method>`` (module docstring); a :class:`UserError` for a
    name without a method, one of a method credo does not know, or a fitted one."""
    from credo.methods.base import get_method

    inner = calibrated_of(method)
    if not inner:
        raise UserError(f"method {method!r}: name the method to calibrate, e.g. calibrated:c3")
    if is_fitted(inner):
        raise UserError(f"method {method!r}: {inner} is fitted already; calibrate a method "
                        "that scores samples")
    get_method(inner)  # an unknown method is one line naming the known ones
    return MethodSpec(method, _fitted_later, (), f"{inner}'s score calibrated on the "
                      "labelled items (Platt or isotonic), cross-fitted", compares=False,
                      fitted=True)


METHODS.add(COMBINED, MethodSpec(
    COMBINED, _fitted_later, (), "a combination of combine.methods' scores fitted on the "
    "labelled items (logistic or isotonic), cross-fitted", compares=False, fitted=True))
PREFIXED[CALIBRATED] = calibrated_method

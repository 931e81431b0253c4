"""The metric registry: every evaluation metric declared once.

A :class:`Metric` names a formula of :mod:`credo.evaluate.metrics` (its function over the
rows of (B, N) score and target matrices) with everything the rest of credo needs to
know about it: its label, its target (the per-item performance p̄ or the label
``1[p̄ ≥ 0.5]``, Wu et al., App. E.2; per generation both are the 0/1 correctness), whether lower
or higher is better, at which level it is evaluated (per item, per generation), whether
it gets a bootstrap CI (Müller et al., §3.7) and whether the weighted engine of
:mod:`credo.evaluate.weighted` has its formula, whether it is a ranking metric (marked
when the smaller class is small), a headline column of the terminal table, and
whether the tables report it again after post-hoc calibration.

The evaluation tables (:mod:`credo.evaluate.tables`: metrics.json's item and response
metrics, the calibration rows), the bootstraps (:mod:`credo.evaluate.bootstrap`, the
weighted engine), report.md and the terminal (:mod:`credo.report.writer`) and report.html
(:mod:`credo.report.analysis`, :mod:`credo.report.html`) all read this registry, in its
order (the order of the tables' columns). Adding a metric is one row function plus its
registration::

    @metric("toy", label="Toy", target="label", direction="higher")
    def toy_rows(scores, labels):
        return (scores * labels).mean(axis=1)

:func:`names` and :func:`headers` are live views: a metric registered later (a test's
toy metric) is in every one of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from credo.evaluate import metrics as M
from credo.evaluate.binning import number_of_bins
from credo.registry import Registry

__all__ = [
    "METRICS",
    "Metric",
    "MetricHeaders",
    "MetricNames",
    "get",
    "headers",
    "metric",
    "names",
    "register",
    "registered",
    "unregister",
]

Target = Literal["p_bar", "label"]
Direction = Literal["lower", "higher", "none"]
Level = Literal["item", "generation"]
RowsFunction = Callable[..., np.ndarray]
ArrayLike = Sequence[float] | np.ndarray

_ARROWS: dict[str, str] = {"lower": " ↓", "higher": " ↑", "none": ""}


@dataclass(frozen=True)
class Metric:
    """One evaluation metric, declared once (Wu et al., App. E.2, Müller et al., §3.7).

    Attributes
    ----------
    name : the key in metrics.json (``ece``; its CI is ``ece_low`` / ``ece_high``)
    label : the table header without its arrow (``ECE``)
    rows : ``rows(scores, target) -> (B,)`` over (B, N) matrices, NaN where undefined,
        no input checks; with ``binned``, also ``n_bins=`` and ``levels=``
    target : ``"p_bar"`` (the quality: p̄ per item, 0/1 correctness per generation) or
        ``"label"`` (0/1: ``1[p̄ ≥ 0.5]`` per item, the correctness per generation)
    direction : ``"lower"`` or ``"higher"`` is better (the header's arrow, the report's
        best value), or ``"none"``
    per : the levels evaluated, ``"item"`` and/or ``"generation"``
    binned : ``rows`` takes the ECE bins (``n_bins``, ``levels``; :mod:`~credo.evaluate.binning`)
    bootstrap : gets a percentile bootstrap CI
    weighted : :mod:`credo.evaluate.weighted` has its formula (tested equal to ``rows``);
        otherwise its bootstrap evaluates ``rows`` on the same resamples
    ranking : a ranking metric, marked when the smaller class has few items
    headline : a column of the terminal's compact table
    calibrated : reported again, as ``<name>_calibrated``, on cross-fitted calibrated scores
    """

    name: str
    label: str
    rows: RowsFunction
    target: Target
    direction: Direction
    per: tuple[Level, ...] = ("item", "generation")
    binned: bool = False
    bootstrap: bool = True
    weighted: bool = False
    ranking: bool = False
    headline: bool = False
    calibrated: bool = False

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"a metric name must be an identifier, got {self.name!r}")
        if self.target not in ("p_bar", "label"):
            raise ValueError(f"target must be 'p_bar' or 'label', got {self.target!r}")
        if self.direction not in _ARROWS:
            raise ValueError(f"direction must be one of {list(_ARROWS)}, got {self.direction!r}")
        if not self.per or not set(self.per) <= {"item", "generation"}:
            raise ValueError(f"per must name 'item' and/or 'generation', got {self.per!r}")
        if not callable(self.rows):
            raise TypeError(f"rows of {self.name!r} must be callable")

    @property
    def header(self) -> str:
        """The table header: the label with its direction's arrow (``ECE ↓``)."""
        return self.label + _ARROWS[self.direction]

    @property
    def calibrated_header(self) -> str:
        """The header of ``<name>_calibrated`` (``ECE cal. ↓``)."""
        return f"{self.label} cal." + _ARROWS[self.direction]

    def target_of(self, quality: np.ndarray, labels: np.ndarray) -> np.ndarray:
        """``labels`` for a label metric, else ``quality``."""
        return labels if self.target == "label" else quality

    def values(
        self,
        scores: np.ndarray,
        target: np.ndarray,
        n_bins: int = 10,
        levels: ArrayLike | None = None,
    ) -> np.ndarray:
        """The metric of every row of (B, N) ``scores`` against ``target``; no checks."""
        if self.binned:
            return self.rows(scores, target, n_bins=n_bins, levels=levels)
        return self.rows(scores, target)

    def __call__(
        self,
        scores: ArrayLike,
        target: ArrayLike,
        n_bins: int = 10,
        levels: ArrayLike | None = None,
    ) -> float:
        """The metric of one sample, its inputs checked once by
        :func:`credo.evaluate.metrics.metric_inputs` (scores in [0, 1], targets p̄ in [0, 1]
        or 0/1 labels, equal lengths) and its bins by
        :func:`~credo.evaluate.binning.number_of_bins`; NaN for no items or where
        undefined."""
        s, t = M.metric_inputs(scores, target, self.target)
        if self.binned:
            number_of_bins(n_bins, levels)
            return M.one_row(self.rows, s, t, n_bins=n_bins, levels=levels)
        return M.one_row(self.rows, s, t)


METRICS: Registry[Metric] = Registry("metric")
"""Every registered metric by name, in order (the tables' column order)."""


def register(m: Metric) -> Metric:
    """Add ``m`` after the metrics already registered; a second metric of the same name
    is refused."""
    if not isinstance(m, Metric):
        raise TypeError(f"register takes a Metric, got {type(m).__name__}")
    return METRICS.add(m.name, m)


def unregister(name: str) -> Metric:
    """Remove the metric ``name`` and return it (tests' toy metrics)."""
    return METRICS.remove(name)


def metric(
    name: str, *, label: str, target: Target, direction: Direction, **flags: Any
) -> Callable[[RowsFunction], RowsFunction]:
    """Decorator: register the decorated row function as the metric ``name`` (the other
    fields of :class:`Metric` as keywords) and return the function unchanged."""

    def decorate(rows: RowsFunction) -> RowsFunction:
        register(Metric(name, label, rows, target, direction, **flags))
        return rows

    return decorate


def get(name: str) -> Metric:
    """The metric ``name``; a user error (a ValueError) naming the known ones otherwise."""
    return METRICS[name]


def registered(per: Level | None = None, **flags: Any) -> tuple[Metric, ...]:
    """The registered metrics, in order, evaluated at level ``per`` (any when None) and
    whose fields equal ``flags`` (``registered(bootstrap=True, target="label")``)."""
    _check_fields(flags)
    return tuple(
        m for m in METRICS.values()
        if (per is None or per in m.per) and all(getattr(m, k) == v for k, v in flags.items())
    )


def _check_fields(flags: Mapping[str, Any]) -> None:
    """A ValueError naming the keys of ``flags`` that are no field of :class:`Metric`."""
    unknown = set(flags) - set(Metric.__dataclass_fields__)
    if unknown:
        raise ValueError(f"no Metric fields {sorted(unknown)}")


class MetricNames(Sequence[str]):
    """The names of :func:`registered` ``(per, **flags)``, read at every use (live)."""

    def __init__(self, per: Level | None = None, **flags: Any) -> None:
        _check_fields(flags)  # now; the registry is read at every use (and a module
        # that makes a view on import reads nothing: no plug-in loads then)
        self._per, self._flags = per, flags

    def _names(self) -> tuple[str, ...]:
        return tuple(m.name for m in registered(self._per, **self._flags))

    def __getitem__(self, i: Any) -> Any:
        return self._names()[i]

    def __len__(self) -> int:
        return len(self._names())

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __eq__(self, other: object) -> bool:
        return tuple(self) == tuple(other) if isinstance(other, Sequence) else NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._names())


class MetricHeaders(Mapping[str, str]):
    """``name -> header`` of :func:`registered` ``(per, **flags)``, live; with
    ``calibrated``, ``<name>_calibrated -> "<label> cal. ↓"`` of the calibrated metrics."""

    def __init__(self, per: Level | None = None, *, calibrated: bool = False,
                 **flags: Any) -> None:
        self._names = MetricNames(per, **({"calibrated": True} if calibrated else {}), **flags)
        self._calibrated = calibrated

    def _items(self) -> dict[str, str]:
        ms = [get(n) for n in self._names]
        if self._calibrated:
            return {f"{m.name}_calibrated": m.calibrated_header for m in ms}
        return {m.name: m.header for m in ms}

    def __getitem__(self, key: str) -> str:
        return self._items()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items())

    def __len__(self) -> int:
        return len(self._items())

    def __repr__(self) -> str:
        return repr(self._items())


def names(per: Level | None = None, **flags: Any) -> MetricNames:
    """A live view of the names of :func:`registered` ``(per, **flags)``, in order."""
    return MetricNames(per, **flags)


def headers(per: Level | None = None, *, calibrated: bool = False, **flags: Any) -> MetricHeaders:
    """A live ``name -> header`` view (:class:`MetricHeaders`)."""
    return MetricHeaders(per, calibrated=calibrated, **flags)


# ------------------------------------------------------------ the metrics of credo
# Wu et al., App. E.2: calibration (ECE, MCE, Brier), ranking (AUROC, AUPRC-P, AUPRC-N) and
# rejection (AUARC, PRR, LM-Polygraph); in the tables' column order.

register(Metric("ece", "ECE", M.ece_rows, "p_bar", "lower", binned=True, weighted=True,
                headline=True, calibrated=True))
register(Metric("mce", "MCE", M.mce_rows, "p_bar", "lower", binned=True, weighted=True))
register(Metric("brier", "Brier", M.brier_rows, "label", "lower", weighted=True,
                headline=True, calibrated=True))
register(Metric("auroc", "AUROC", M.auroc_rows, "label", "higher", weighted=True,
                ranking=True, headline=True))
register(Metric("auprc_pos", "AUPRC-P", M.average_precision_rows, "label", "higher",
                weighted=True, ranking=True, headline=True))
register(Metric("auprc_neg", "AUPRC-N", M.auprc_neg_rows, "label", "higher", weighted=True,
                ranking=True, headline=True))
register(Metric("auarc", "AUARC", M.auarc_rows, "p_bar", "higher", weighted=True))
register(Metric("prr", "PRR", M.prr_rows, "p_bar", "higher", weighted=True, headline=True))

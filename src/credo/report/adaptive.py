"""``credo adaptive``'s files: the samples each rule saves against the change in
every metric, as a table (``adaptive.md``), as data (``adaptive.json``) and as a figure
(``adaptive.png``: samples saved vs ΔAUROC of one method, one point per rule and ε, with
the paired bootstrap CI as an error bar)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from credo import jsonio
from credo.numbers import fmt_number
from credo.pipeline.simulate import METRICS, STAGES, AdaptivePoint

__all__ = ["adaptive_table", "point_record", "write_adaptive"]


def _f(x: float, digits: int = 3) -> str:
    return fmt_number(x, digits, sign=True)


def _delta_cell(d: Any) -> str:
    """A Δ with its CI; without a bootstrap (``--bootstrap 0``) the point estimate and
    ``no CI``."""
    if d.n_resamples == 0:
        return f"{_f(d.delta)} [no CI]"
    return f"{_f(d.delta)} [{_f(d.low)}, {_f(d.high)}]"


def _eps(p: AdaptivePoint) -> str:
    return "" if p.epsilon is None else f"{p.epsilon:g}"


def adaptive_table(points: Sequence[AdaptivePoint], method: str) -> str:
    """Markdown: per point, samples saved per stage and overall, and ``method``'s Δ of
    every metric (adaptive − full) with its paired 95% CI, then Δ coverage at each risk α
    with the central 95% of its per-split differences."""
    alphas = sorted({a for p in points for a in p.coverage.get(method, {})})
    head = ["rule", "ε", "items", *(f"saved {s}" for s in STAGES), "saved all",
            *(f"Δ{m.upper()} [CI]" for m in METRICS),
            *(f"Δcoverage@{a:g} [splits]" for a in alphas)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for p in points:
        cells = [p.rule, _eps(p), str(p.items)]
        cells += [f"{p.saved_in(s):.0%}" if not math.isnan(p.saved_in(s)) else "n/a"
                  for s in STAGES]
        cells.append(f"{p.saved:.0%}" if not math.isnan(p.saved) else "n/a")
        d = p.deltas.get(method, {})
        cells += [_delta_cell(d[m]) if m in d else "n/a" for m in METRICS]
        cov = p.coverage.get(method, {})
        cells += [f"{_f(cov[a][0])} [{_f(cov[a][1])}, {_f(cov[a][2])}]" if a in cov else "n/a"
                  for a in alphas]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def point_record(p: AdaptivePoint) -> dict[str, Any]:
    """One point as JSON."""
    return {
        "rule": p.rule,
        "epsilon": p.epsilon,
        "items": p.items,
        "orders": p.orders,
        "not_replayable": list(p.not_replayable),
        "samples": {s: {"adaptive": a, "full": f} for s, (a, f) in p.samples.items()},
        "saved": p.saved,
        "deltas": {
            method: {m: {"delta": d.delta, "low": d.low, "high": d.high, "p": d.p_value,
                         "n_valid": d.n_valid} for m, d in by.items()}
            for method, by in p.deltas.items()
        },
        "coverage": {
            method: {f"{a:g}": {"delta": d, "low": lo, "high": hi}
                     for a, (d, lo, hi) in by.items()}
            for method, by in p.coverage.items()
        },
        "drawn": {i: {"original": o, "perturbed": q} for i, (o, q) in p.drawn.items()},
    }


def write_adaptive(
    points: Sequence[AdaptivePoint], out: str | Path, method: str
) -> dict[str, Path]:
    """Write ``adaptive.md``, ``adaptive.json`` and ``adaptive.png`` into ``out``."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {"table": folder / "adaptive.md", "data": folder / "adaptive.json",
             "figure": folder / "adaptive.png"}
    jsonio.write_text(paths["table"], f"Method: {method}\n\n" + adaptive_table(points, method))
    jsonio.write_text(paths["data"], jsonio.dumps(
        {"method": method, "points": [point_record(p) for p in points]}, indent=2))
    _figure(points, method, paths["figure"])
    return paths


def _figure(points: Sequence[AdaptivePoint], method: str, path: Path) -> None:
    from credo.report.figures import new_figure, save_figure

    fig, axes = new_figure(5.0, 3.6)
    ax = np.atleast_1d(axes).flat[0]
    for p in points:
        d = p.deltas.get(method, {}).get("auroc")
        if d is None or math.isnan(p.saved):
            continue
        err = [[max(d.delta - d.low, 0.0)], [max(d.high - d.delta, 0.0)]] \
            if not math.isnan(d.low) else None
        ax.errorbar([100 * p.saved], [d.delta], yerr=err, fmt="o", capsize=3)
        ax.annotate(f"{p.rule} {_eps(p)}".strip(), (100 * p.saved, d.delta),
                    textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.axhline(0.0, color="grey", lw=0.8)
    ax.set_xlabel("samples saved (%)")
    ax.set_ylabel(f"ΔAUROC of {method} (adaptive − full)")
    ax.set_title("adaptive sampling, replayed from the full run's cache", fontsize=9)
    save_figure(fig, path)

"""Coverage at risk α in the reports: the headline lines, the table
cells and the detail rows, from metrics.json's ``coverage_at_risk`` and ``degenerate``
(:mod:`credo.evaluate.coverage`), shared by report.md, the terminal and report.html.

A run without known correctness has neither key and shows none of this; an entry with a
``note`` (too few items to split) shows the note instead of a number.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from credo.evaluate.coverage import most_answers
from credo.numbers import fmt_number

__all__ = ["alphas_of", "coverage_cell", "coverage_detail_rows", "coverage_headers",
           "headline_lines"]

Coverage = Mapping[str, Mapping[str, Mapping[str, Any]]]


def alphas_of(coverage: Coverage) -> list[str]:
    """The risk levels (metrics.json keys, ``"0.1"``) in the order first met."""
    return list(dict.fromkeys(a for d in coverage.values() for a in d))


def coverage_headers(coverage: Coverage) -> list[str]:
    """One table header per α: ``cov@0.1 ↑`` (the share of items answered at risk α)."""
    return [f"cov@{a} ↑" for a in alphas_of(coverage)]


def coverage_cell(entry: Mapping[str, Any] | None, compact: bool = False) -> str:
    """``0.42 ± 0.05`` (mean ± sd over the splits; ``compact``: ``0.42``), ``too few``
    when the run has too few items to split, ``n/a`` when the method has no entry."""
    if not entry:
        return "n/a"
    if "coverage_mean" not in entry:
        return "too few" if compact else "too few items"
    mean = fmt_number(entry["coverage_mean"], 2)
    return mean if compact else f"{mean} ± {fmt_number(entry['coverage_std'], 2)}"


def headline_lines(coverage: Coverage, degenerate: Mapping[str, str]) -> list[str]:
    """The report's first lines: per α the method that answers most (with its coverage
    mean ± sd), or why none is named; then each degenerate method with its reason."""
    lines = []
    for a in alphas_of(coverage):
        best = most_answers(coverage, float(a))
        if best is not None:
            name, e = best
            lines.append(f"most answers at α={a}: {name} (coverage {e['coverage_mean']:.2f}"
                         f" ± {e['coverage_std']:.2f} over {e['splits']} splits, δ = "
                         f"{e['delta']:g})")
            continue
        notes = [d[a]["note"] for d in coverage.values() if a in d and "note" in d[a]]
        lines.append(f"most answers at α={a}: none, {notes[0]}" if notes else
                     f"most answers at α={a}: none; no method's threshold keeps the risk at"
                     f" {a} on this run")
    lines += [f"degenerate scores: {m}: {why}" for m, why in degenerate.items()]
    return lines


DETAIL_HEADER = ["method", "α", "items", "coverage", "5–95%", "risk > α", "certified",
                 "test risk"]


def coverage_detail_rows(coverage: Coverage) -> list[list[str]]:
    """Header plus one row per method and α: items, coverage mean ± sd, its 5–95% range
    over the splits, the share of splits whose test risk exceeded α, the share that
    certified a threshold, the mean test risk of the answered items."""
    rows = [list(DETAIL_HEADER)]
    for method, by_alpha in coverage.items():
        for a, e in by_alpha.items():
            if "coverage_mean" not in e:
                rows.append([method, a, str(e.get("n_items", "")), e.get("note", "n/a"),
                             "", "", "", ""])
                continue
            risk = e.get("risk_mean")
            rows.append([
                method, a, str(e["n_items"]), coverage_cell(e),
                f"{e['coverage_q05']:.2f}–{e['coverage_q95']:.2f}",
                f"{e['exceed_rate']:.0%}", f"{e['certified_rate']:.0%}",
                fmt_number(risk),
            ])
    return rows

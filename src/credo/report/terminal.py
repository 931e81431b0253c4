"""The run's table for a terminal: method names whole at any width.

A terminal of 80 columns cannot hold every headline column of a run with long method
names (``c3_cross``, ``semantic_entropy``, ``answer_consistency``); rich would cut every
cell to fit (``seman…``). Here the method column is never cut, and columns are left out
from the least read (mean score) to the most (ECE, AUROC) until the table fits; the
caption names what was left out. report.md and report.html keep every column.
"""

from __future__ import annotations

from rich.table import Table

__all__ = ["drop_order", "fit_columns", "terminal_table"]

KEEP = ("auroc",)
"""Headline metrics never left out: the ranking a newcomer reads first."""


def drop_order() -> tuple[str, ...]:
    """Headers left out first when a table is too wide: the mean score, then the headline
    metrics of the registry (:mod:`credo.evaluate.registry`) from the last registered to
    the first, AUROC aside, then the accuracy; the method and its count always stay."""
    from credo.evaluate.registry import registered

    headline = [m.label for m in reversed(registered(headline=True)) if m.name not in KEEP]
    return ("mean score", *headline[:-1], "accuracy", *headline[-1:])

_TEXT_COLUMNS = ("method",)


def _width(rows: list[list[str]], keep: list[int]) -> int:
    """Width rich draws a table of the columns ``keep`` in (heavy box, padding 1 each
    side): every column its widest cell plus 3, plus the final border."""
    return sum(max(len(r[i]) for r in rows) + 3 for i in keep) + 1


def fit_columns(rows: list[list[str]], width: int) -> tuple[list[int], list[str]]:
    """The indices of the columns of ``rows`` (header first) that fit in ``width``
    characters, leaving out headers in :func:`drop_order` (direction arrows aside), and
    the headers left out."""
    header = [h.rstrip(" ↑↓") for h in rows[0]]  # "AUROC ↑" is AUROC
    keep = list(range(len(header)))
    dropped: list[str] = []
    for name in drop_order():
        if _width(rows, keep) <= width:
            break
        if name in header:
            keep.remove(header.index(name))
            dropped.append(name)
    return keep, dropped


def terminal_table(rows: list[list[str]], title: str, width: int) -> Table:
    """``rows`` (header first) as a rich table no wider than ``width`` where it can be:
    method names whole, columns left out by :func:`fit_columns` named in the caption."""
    keep, dropped = fit_columns(rows, width)
    caption = f"not shown at this width: {', '.join(dropped)} (see report.md)" if dropped else None
    table = Table(title=title, caption=caption)
    for i in keep:
        name = rows[0][i]
        table.add_column(name, justify="left" if name in _TEXT_COLUMNS else "right",
                         no_wrap=True)
    for row in rows[1:]:
        table.add_row(*(row[i] for i in keep))
    return table

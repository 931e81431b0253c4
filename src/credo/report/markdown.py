"""Markdown pieces shared by the run folder's and the strength folder's ``report.md``.

GitHub-flavoured pipe tables (:func:`md_table`), table cells that stay on one line
(:func:`md_cell`) and numbers with a fixed number of decimals (:func:`fmt_number`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def md_table(rows: Sequence[Sequence[str]]) -> list[str]:
    """The lines of a pipe table: ``rows[0]`` is the header, the rest the body.

    >>> md_table([["a", "b"], ["1", "2"]])
    ['| a | b |', '|---|---|', '| 1 | 2 |']
    """
    if not rows:
        raise ValueError("a table needs at least its header row")
    out = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    return out + ["| " + " | ".join(r) + " |" for r in rows[1:]]


def md_cell(text: object, limit: int = 60) -> str:
    """``text`` as one table cell: whitespace (code's newlines) folded to single spaces,
    pipes escaped, cut to ``limit`` characters with an ellipsis."""
    flat = " ".join(str(text).split()).replace("|", "\\|")
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def fmt_number(x: float | None, digits: int = 3, missing: str = "n/a") -> str:
    """``x`` with ``digits`` decimals; ``missing`` for None and NaN.

    >>> fmt_number(0.12345), fmt_number(None), fmt_number(float("nan"), 2, "–")
    ('0.123', 'n/a', '–')
    """
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return missing
    return f"{x:.{digits}f}"

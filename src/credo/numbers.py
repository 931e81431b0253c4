"""Numbers as people read them: one formatting rule for every table, report and line
credo prints, so a value that rounds to zero never prints as ``-0.000``."""

from __future__ import annotations

import math

__all__ = ["fmt_number"]


def fmt_number(x: float | None, digits: int = 3, missing: str = "n/a", *,
               sign: bool = False) -> str:
    """``x`` with ``digits`` decimals (``sign``: always with its sign, ``+0.120``);
    ``missing`` for None and NaN. A value that rounds to zero prints as zero, never
    ``-0.000`` (with ``sign``: ``+0.000``).

    >>> fmt_number(0.12345), fmt_number(None), fmt_number(float("nan"), 2, "–")
    ('0.123', 'n/a', '–')
    >>> fmt_number(-0.0001), fmt_number(-0.0, 2), fmt_number(-0.0004, sign=True)
    ('0.000', '0.00', '+0.000')
    >>> fmt_number(-0.0005, sign=True), fmt_number(0.25, 1, sign=True)
    ('-0.001', '+0.2')
    """
    if x is None:
        return missing
    value = float(x)
    if math.isnan(value):
        return missing
    text = f"{value:{'+' if sign else ''}.{digits}f}"
    if float(text) == 0.0:  # -0.0, or a small negative value rounded to zero
        text = ("+" if sign else "") + text.lstrip("+-")
    return text

"""Strict JSON for every file credo writes: NaN and infinities become null.

Python's ``json`` writes ``NaN`` by default, which is not JSON (other readers reject it);
an undefined metric or an unknown correctness is written as ``null`` instead.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["dumps", "json_safe"]


def json_safe(x: Any) -> Any:
    """``x`` with every NaN or infinite float replaced by None, in nested dicts, lists and
    tuples (tuples become lists)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    return x


def dumps(obj: Any, **kwargs: Any) -> str:
    """``json.dumps(json_safe(obj))``, refusing any NaN left (``allow_nan=False``)."""
    return json.dumps(json_safe(obj), allow_nan=False, **kwargs)

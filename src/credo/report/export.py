"""Parquet exports of a run folder, for people who analyse in pandas or polars.

``scores.parquet`` has one row per item: ``id``, ``gold``, ``p_bar``, ``label``, one float
column ``score_<method>`` per method (null where the method has no score) and the answer
lists; ``samples.parquet`` one row per sample with every field of ``samples.jsonl`` (a
nested object such as ``confidence`` becomes one column per key, ``confidence_<method>``). Both
are derived from the JSONL files alone, so they can be (re)written for any run folder.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from credo import jsonio
from credo.report.rundata import load_run


def write_parquet(run_dir: str | Path) -> tuple[Path, Path]:
    """Write ``scores.parquet`` and ``samples.parquet`` into ``run_dir``, each atomically
    (:func:`credo.jsonio.write_with`); return both paths."""
    run = load_run(run_dir)
    methods = run.methods
    score_rows = []
    for r in run.scores:
        sc = r.get("scores") or {}
        row = {k: v for k, v in r.items() if k != "scores"}
        row["id"] = str(r["id"])
        for m in methods:
            row[f"score_{m}"] = _float_or_none(sc.get(m))
        score_rows.append(row)
    scores_path = run.path / "scores.parquet"
    samples_path = run.path / "samples.parquet"
    scores = _table(score_rows)
    samples = _table([flatten_row(r) for r in run.samples])
    # atomic: a run killed mid-way leaves the old file or none
    jsonio.write_with(scores_path, lambda tmp: pq.write_table(scores, tmp))
    jsonio.write_with(samples_path, lambda tmp: pq.write_table(samples, tmp))
    return scores_path, samples_path


def flatten_row(row: dict[str, Any]) -> dict[str, Any]:
    """One level of nested objects becomes columns: ``{"confidence": {"p_true": 0.8}}`` ->
    ``{"confidence_p_true": 0.8}`` (an object with no keys leaves no column)."""
    out: dict[str, Any] = {}
    for k, v in row.items():
        if isinstance(v, dict):
            out.update({f"{k}_{sub}": x for sub, x in v.items()})
        else:
            out[k] = v
    return out


def _table(rows: list[dict[str, Any]]) -> pa.Table:
    """A table from JSON rows; a column whose values Arrow cannot unify becomes strings
    (JSON-encoded where not already a string), so any run folder exports."""
    columns = list(dict.fromkeys(k for r in rows for k in r))
    arrays = {}
    for c in columns:
        values = [r.get(c) for r in rows]
        try:
            arrays[c] = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            arrays[c] = pa.array(
                [None if v is None else v if isinstance(v, str) else json.dumps(v) for v in values],
                type=pa.string(),
            )
    return pa.table(arrays) if arrays else pa.table({})


def _float_or_none(x: Any) -> float | None:
    if isinstance(x, bool) or x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v

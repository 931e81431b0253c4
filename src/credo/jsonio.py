"""Every file credo writes: strict JSON (NaN and infinities become null), written atomically.

Python's ``json`` writes ``NaN`` by default, which is not JSON (other readers reject it);
an undefined metric or an unknown correctness is written as ``null`` instead.

:func:`write_text` writes a file under a temporary name in the same folder and renames
it over the target (``os.replace`` is atomic on POSIX), so a run killed while writing
leaves each file either as it was or complete, never half written.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["dumps", "json_safe", "write_jsonl", "write_text"]


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


def write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically: a temporary file, flushed to disk,
    renamed over ``path``. On any error the temporary file is removed and ``path`` is
    left as it was."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    _remove_stray_temporaries(path)
    try:
        with tmp.open("w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _remove_stray_temporaries(path: Path) -> None:
    """Remove ``.<name>.<pid>.tmp`` files next to ``path`` whose writer process is gone."""
    prefix = f".{path.name}."
    try:
        strays = [p for p in path.parent.iterdir()
                  if p.name.startswith(prefix) and p.name.endswith(".tmp")]
    except OSError:
        return  # no folder yet (the write says why) or not listable: nothing to clean
    for stray in strays:
        pid = stray.name[len(prefix):-len(".tmp")]
        if pid.isdigit() and not _alive(int(pid)):
            stray.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (one of another user counts as alive)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def write_jsonl(path: str | Path, rows: Iterable[Any]) -> Path:
    """One strict-JSON object per line (:func:`dumps`), written atomically."""
    return write_text(path, "".join(dumps(r, ensure_ascii=False) + "\n" for r in rows))

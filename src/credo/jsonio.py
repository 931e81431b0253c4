"""Every file credo writes: strict JSON (NaN and infinities become null), written atomically.

Python's ``json`` writes ``NaN`` by default, which is not JSON (other readers reject it);
an undefined metric or an unknown correctness is written as ``null`` instead.

:func:`write_text` writes a file under a temporary name in the same folder and renames
it over the target (``os.replace`` is atomic on POSIX), so a run killed while writing
leaves each file either as it was or complete, never half written; :func:`write_with`
does the same for a file another library writes (a Parquet table).
:func:`check_writable` and :func:`check_file_writable` tell, before a command's first
model call, whether a folder or file it will write can be written, and
:func:`check_not_input` that it is none of the files the command reads.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

__all__ = [
    "check_file_writable",
    "check_not_input",
    "check_writable",
    "dumps",
    "json_safe",
    "write_jsonl",
    "write_text",
    "write_with",
]


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


def write_text(path: str | Path, text: str, *, parents: bool = False) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically: a temporary file, flushed to disk,
    renamed over ``path``. On any error the temporary file is removed and ``path`` is
    left as it was. ``parents``: make the missing folders above ``path`` first (an
    output file the user named: ``--out dir/cert.json``)."""
    path = Path(path)
    if parents:
        path.parent.mkdir(parents=True, exist_ok=True)
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


def write_with(path: str | Path, write: Callable[[Path], Any]) -> Path:
    """``write(tmp)`` writes the file (a Parquet table, say) to a temporary name in the
    folder of ``path``, which is then renamed over ``path``, as :func:`write_text` does;
    on any error ``path`` is left as it was."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    _remove_stray_temporaries(path)
    try:
        write(tmp)
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


def check_writable(folder: str | Path, what: str) -> None:
    """Fail with a :class:`~credo.errors.UserError` naming ``folder`` and ``what`` (the
    option: ``"the cache (--cache)"``) unless a file can be written there, before any
    model is called: the folder and those above it are made, a
    file written and removed. The folders made for the check are removed again: a
    command that stops at its preflight leaves no empty folder behind; the writer
    creates it."""
    path = Path(folder)
    made = [p for p in (path, *path.parents) if not p.exists()]
    probe = path / f".credo-write-check-{os.getpid()}"
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe.write_text("", encoding="utf-8")
        probe.unlink()
    except OSError as e:
        from credo.errors import UserError

        raise UserError(f"{path}: cannot write {what}: {e.strerror or e}") from None
    finally:
        for folder_made in made:  # deepest first; one someone filled meanwhile stays
            try:
                folder_made.rmdir()
            except OSError:
                break


def check_file_writable(path: str | Path, what: str) -> None:
    """Fail with a :class:`~credo.errors.UserError` naming ``path`` and ``what`` unless
    the file can be written (made or replaced; the missing folders above it are made
    when it is written): not a folder, and its folder takes a file
    (:func:`check_writable`)."""
    path = Path(path)
    if path.is_dir():
        from credo.errors import UserError

        raise UserError(f"{path}: cannot write {what}: a folder of that name is in the way")
    try:
        check_writable(path.parent, what)
    except ValueError as e:  # the UserError, naming the file rather than its folder
        raise type(e)(f"{path}: {str(e).split(': ', 1)[1]}") from None


def check_not_input(path: str | Path, inputs: Iterable[str | Path], what: str) -> None:
    """Fail with a :class:`~credo.errors.UserError` naming ``path`` and ``what`` (the
    option) when ``path`` is one of the files ``inputs`` a command reads: the same path,
    or the same file under another name (a link, ``./x`` for ``x``). No command writes
    over what it reads."""
    out = Path(path)
    for given in inputs:
        source = Path(given)
        same = out.resolve() == source.resolve()
        if not same and out.exists() and source.exists():
            try:
                same = os.path.samefile(out, source)
            except OSError:
                same = False
        if same:
            from credo.errors import UserError

            raise UserError(f"{out}: cannot write {what} over {source}, which the command "
                            "reads; give another path")


def write_jsonl(path: str | Path, rows: Iterable[Any]) -> Path:
    """One strict-JSON object per line (:func:`dumps`), written atomically."""
    return write_text(path, "".join(dumps(r, ensure_ascii=False) + "\n" for r in rows))

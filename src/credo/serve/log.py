"""The gateway's decision log: one JSON object per line, per decision.

Each line is written whole with one ``write(2)`` on a file opened ``O_APPEND`` under a
lock, so lines from concurrent writers never interleave, none is half-written while the
process runs, and each decision is written once. A line is on its way to the disk when
:meth:`DecisionLog.write` returns (no buffer in the process); :meth:`DecisionLog.close`
syncs it. A log that a killed process left without a final newline gets one before the
next line, so every new line stands alone. Nothing but the record is written: no request
header, so no API key.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from credo.errors import UserError

__all__ = ["DecisionLog"]


class DecisionLog:
    """Append-only JSONL at ``path`` (created with mode 0600, its folder too)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.lines = 0
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT,
                                           0o600)
        except OSError as e:
            raise UserError(f"{self.path}: cannot write the decision log (--log): "
                            f"{e.strerror or e}") from None
        if self._ends_open():
            self._write(b"\n")

    def write(self, record: dict[str, Any]) -> None:
        """Append ``record`` as one line (strict JSON: a NaN is refused)."""
        data = (json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")
        with self._lock:
            if self._fd is None:
                raise ValueError(f"{self.path}: the decision log is closed")
            self._write(data)
            self.lines += 1

    def close(self) -> None:
        """Sync and close (once)."""
        with self._lock:
            if self._fd is None:
                return
            try:
                os.fsync(self._fd)
            finally:
                os.close(self._fd)
                self._fd = None

    def _write(self, data: bytes) -> None:
        assert self._fd is not None
        view = memoryview(data)
        while view:  # a regular file takes it in one write; a short one goes on
            view = view[os.write(self._fd, view):]

    def _ends_open(self) -> bool:
        """Whether the file holds a last line without its newline."""
        try:
            with self.path.open("rb") as f:
                f.seek(0, os.SEEK_END)
                if f.tell() == 0:
                    return False
                f.seek(-1, os.SEEK_END)
                return f.read(1) != b"\n"
        except OSError:
            return False

    def __enter__(self) -> DecisionLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

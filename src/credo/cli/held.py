"""Under ``--quiet``, credo's warnings are held and said once, at the end, one line each.

Without ``--quiet`` a warning is shown when it happens, by the log handler of
:func:`credo.cli.main` (a timestamped, wrapped block). A quiet command says as little as
it can: a warning is one plain line on stderr after the command's own output, and a run
that ends with failed requests (exit 3) says one line in all, the warnings held before it
folded into that line (a server failing every request fails the start-up probe first:
its warning and the run's failure are one event, said once).

:func:`hold` installs the holder for one command; :func:`take` hands over (and forgets)
what it holds, for the line a failed run ends with; :func:`release` prints what is left
and removes the holder.
"""

from __future__ import annotations

import logging

__all__ = ["HeldWarnings", "folded", "hold", "release", "take"]


class HeldWarnings(logging.Handler):
    """Keeps the message of every warning of credo's own loggers (one line each, with
    URLs' credentials redacted by the filter the command line gives it)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno < logging.ERROR and _own(record):
            self.messages.append(" ".join(record.getMessage().split()))


_current: HeldWarnings | None = None


def _own(record: logging.LogRecord) -> bool:
    return record.name.split(".")[0] == "credo"


def holds(record: logging.LogRecord) -> bool:
    """Whether the holder keeps ``record`` (so the terminal's handler shows it not)."""
    return _current is not None and logging.WARNING <= record.levelno < logging.ERROR \
        and _own(record)


def hold(redact: logging.Filter | None = None) -> HeldWarnings:
    """Hold credo's warnings from now on (the root logger's handler); ``redact`` filters
    each record first (the command line's :class:`~credo.app.logs.RedactURLs`)."""
    global _current
    release(print_left=False)
    handler = HeldWarnings()
    if redact is not None:
        handler.addFilter(redact)
    logging.getLogger().addHandler(handler)
    _current = handler
    return handler


def take() -> list[str]:
    """The warnings held so far, each once (they are forgotten here)."""
    if _current is None:
        return []
    found = list(dict.fromkeys(_current.messages))
    _current.messages.clear()
    return found


def folded(line: str) -> str:
    """``line`` with the warnings held so far folded into it (:func:`take`): the one
    line a quiet command that failed ends with."""
    held = take()
    return line + (f" · before that: {'; '.join(held)}" if held else "")


def release(*, print_left: bool = True) -> None:
    """Stop holding; print the warnings still held, one plain line each on stderr."""
    global _current
    if _current is None:
        return
    left = take() if print_left else []
    logging.getLogger().removeHandler(_current)
    _current = None
    if left:
        from rich.console import Console

        err = Console(stderr=True, soft_wrap=True)
        for message in left:
            err.print(f"warning: {message}", markup=False, highlight=False)

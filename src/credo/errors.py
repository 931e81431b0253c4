"""The errors credo reports to a user (design.md: bad input gets a clear error).

A :class:`UserError` is a mistake in what the user gave credo: a file or one of its rows,
an option or config value, a name that resolves to nothing, a server address that does
not answer, a literal secret where an environment variable belongs. The command line
prints its message (one or two lines naming the file:line or the option) and exits 2,
with no traceback unless ``-v``. Any layer may raise it; it imports nothing.
"""

from __future__ import annotations

__all__ = ["UserError"]


class UserError(ValueError):
    """A mistake in the user's input; the message names the file, line or option."""

"""The errors credo reports to a user (design.md: bad input gets a clear error).

A :class:`UserError` is a mistake in what the user gave credo: a file or one of its rows,
an option or config value, a name that resolves to nothing, a server address that does
not answer, a literal secret where an environment variable belongs. The command line
prints its message (one or two lines naming the file:line or the option) and exits 2,
with no traceback unless ``-v``. Any layer may raise it; it imports nothing.

A :class:`NeutralityFailed` is no mistake of the user's: the run finished and its folder
is written, but its context prefixes failed 000 App. A.3's neutrality test under
``perturbation.neutrality: fail`` (issue 22). The command line exits 4.
"""

from __future__ import annotations

__all__ = ["NeutralityFailed", "UserError"]


class UserError(ValueError):
    """A mistake in the user's input; the message names the file, line or option."""


class NeutralityFailed(RuntimeError):
    """The prefixes of a finished run are not neutral under ``neutrality: fail``.

    Raised by :func:`credo.run` and :func:`credo.api.study` after the run folder is
    written, so nothing is lost; ``result`` is the run's
    :class:`~credo.pipeline.runner.RunResult`, and for a study ``study`` is the
    :class:`~credo.api.StudyResult` of the runs so far (the failing one last).
    """

    def __init__(self, message: str, result: object, study: object | None = None) -> None:
        super().__init__(message)
        self.result = result
        self.study = study

"""The errors credo reports to a user (design.md: bad input gets a clear error).

A :class:`UserError` is a mistake in what the user gave credo: a file or one of its rows,
an option or config value, a name that resolves to nothing, a server address that does
not answer, a literal secret where an environment variable belongs. The command line
prints its message (one or two lines naming the file:line or the option) and exits 2,
with no traceback unless ``-v``. Any layer may raise it; it imports nothing.

A :class:`NeutralityFailed` is no mistake of the user's: the run finished and its folder
is written, but its context prefixes failed Wu et al., App. A.3's neutrality test under
``perturbation.neutrality: fail``. The command line exits 4.

A :class:`RequestsFailed` (some requests failed after the backend's retries) or a
:class:`BudgetReached` (the run's ``max_cost_usd`` was reached) ends a command with exit
status 3; everything generated is cached, and a rerun resumes. The executor
(:mod:`credo.generation.executor`) raises them; they live here so the command line
maps every ending to its exit status without importing a layer below.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["EXIT_STATUSES", "BudgetReached", "NeutralityFailed", "RequestsFailed", "UserError"]


EXIT_STATUSES: dict[int, str] = {
    0: "done: the command finished and wrote what it says (a run folder, a report, a "
       "certificate); `credo certify` also exits 0 when nothing could be certified (the file "
       "says so)",
    1: "`credo cache stats` found no cache at the path it was given (or the default one)",
    2: "a mistake in what you gave credo (:class:`UserError`): a file and line, an option or "
       "config field, an unknown task, model, method or kernel, a cache that is not credo's, "
       "an output folder that cannot be written, a server that does not answer or answers "
       "401, 403 or 404 to the first call, an installed plug-in that fails to import; one "
       "or two lines naming it, found before the first model call, the traceback only "
       "under `-v`",
    3: "some requests failed after the backend's retries (:class:`RequestsFailed`), or the "
       "cost budget `max_cost_usd` was reached (:class:`BudgetReached`), or `credo probe` did "
       "not finish: everything else is cached and the run folder is written with those items "
       "incomplete; rerun the same command to generate only what is missing",
    4: "the context prefixes failed Wu et al.'s neutrality test (App. A.3) under "
       "`perturbation.neutrality: fail` (:class:`NeutralityFailed`); the run folder is "
       "written",
}
"""Every exit status of the ``credo`` command and what it means: the one table the
command line's returns (:func:`credo.cli.main`, :data:`credo.pipeline.ending.EXIT_STATUS`)
and the documentation's reference page are checked against."""


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


class RequestsFailed(RuntimeError):
    """Some planned requests could not be completed after the backend's retries.

    Raised by :meth:`credo.generation.executor.Executor.execute` after every other
    request of the call completed and was cached. ``results`` is aligned with the
    planned requests: the generations of each complete one, ``None`` for each that is
    missing samples; ``failed`` holds the indices of the latter and ``errors`` one
    message per failed backend call. A caller that can go on without those requests
    (the run marks their items incomplete) catches this; otherwise it ends the run, and a
    rerun generates only what is missing. ``planned`` are
    :class:`~credo.generation.executor.PlannedRequest` (the failures the
    command line maps to exit status 3 live here, below every layer).
    """

    def __init__(
        self,
        planned: Sequence[Any],
        results: list[list[Any] | None],
        errors: list[str],
    ) -> None:
        self.planned = list(planned)
        self.results = results
        self.failed = [i for i, r in enumerate(results) if r is None]
        self.errors = errors
        first = errors[0] if errors else "samples missing"
        super().__init__(
            f"{len(self.failed)} of {len(results)} requests failed after the backend's retries"
            f" (first: {first})"
        )

    @property
    def failed_labels(self) -> list[str]:
        """The labels of the failed planned requests (``<item id>/<set>`` by convention)."""
        return [self.planned[i].label for i in self.failed]


class BudgetReached(RequestsFailed):
    """The run's cost budget (``max_cost_usd``) was reached: the executor dispatched no
    more blocks, so the requests in ``failed`` are missing samples (everything generated
    is cached; a rerun resumes). Caught wherever :class:`RequestsFailed` is. ``ledger`` is
    the run's :class:`~credo.generation.ledger.Ledger`."""

    def __init__(
        self,
        planned: Sequence[Any],
        results: list[list[Any] | None],
        errors: list[str],
        ledger: Any,
    ) -> None:
        super().__init__(planned, results, errors)
        self.cost_usd = ledger.cost_usd
        self.max_cost_usd = ledger.max_cost_usd
        self.args = (
            f"cost budget reached ({self.cost_usd:.6g} of max_cost_usd {self.max_cost_usd:g}"
            f" USD): {len(self.failed)} of {len(results)} requests not generated",
        )

"""``credo``: the command line, thin over the Python API.

Every flag goes through the same pydantic config as the YAML files, so a flag is
validated exactly like the field it sets. Heavy libraries (torch, scikit-learn,
sentence-transformers, xllamacpp, matplotlib) are imported inside the commands that need
them, never when the parser is built: ``credo --help`` starts at once.
"""

from __future__ import annotations

import argparse
import logging
import sys

from rich.console import Console
from rich.logging import RichHandler

from credo.cli.command import add_commands

DESCRIPTION = (
    "How far to trust an LLM's answers: credo samples a model many times under the "
    "original prompt and under neutral context prefixes, scores each answer's credibility "
    "(C3, self-consistency and the field's other methods) and measures how well each score "
    "predicts correctness; `credo certify` turns a score into a threshold with a guarantee. "
    "Start with `credo run --help`."
)
"""What ``credo --help`` says: what credo does for the user (how the command line is built
is this module's docstring)."""


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``credo`` command.

    Exit status: 0 done; 2 a user error (bad file, option, config, name, unreachable
    server), reported in one or two lines naming it, with the traceback only under
    ``-v``, found before the first model call; 3 some requests failed after the
    backend's retries, or the cost budget (``max_cost_usd``) was reached (everything else
    is cached and written; rerun to retry them); 4 the prefixes failed the neutrality test
    under ``perturbation.neutrality: fail``.
    """
    from credo.app.logs import RedactURLs
    from credo.errors import BudgetReached, NeutralityFailed, RequestsFailed, UserError

    args = _parse(argv)
    if args is None:
        return 2
    handler = RichHandler(console=Console(stderr=True), show_path=False)
    handler.addFilter(RedactURLs())
    if not args.verbose:
        handler.addFilter(_own_or_errors)
    logging.basicConfig(  # force: each call's own level and handler (main() may run twice
        level=logging.INFO if args.verbose else logging.WARNING,  # in one process)
        format="%(message)s",
        handlers=[handler],
        force=True,
    )
    log = logging.getLogger("credo")
    from credo.cli import held

    if getattr(args, "quiet", False) and not args.verbose:  # warnings: one line each, at
        held.hold(RedactURLs())  # the end, or folded into a failed run's one line
        handler.addFilter(lambda record: not held.holds(record))
    try:
        return int(args.func(args) or 0)
    except UserError as e:
        if args.verbose:
            log.exception("the traceback of the error below")
        held.release()
        _error(f"error: {e}")
        return 2
    except NeutralityFailed as e:  # a command that does not print its own ending
        held.release()
        _error(f"error: {e}")
        return 4
    except BudgetReached as e:
        _error(held.folded(f"{e}; rerun with a higher max_cost_usd to resume"))
        return 3
    except RequestsFailed as e:
        if args.verbose:
            log.exception("the traceback of the failure below")
        _error(held.folded(
            f"{len(e.failed)} requests failed after the backend's retries; rerun to retry"
            f" them (first: {e.errors[0] if e.errors else 'samples missing'})"))
        return 3
    finally:
        held.release()


def _parse(argv: list[str] | None) -> argparse.Namespace | None:
    """The arguments; None after one line naming credo's spelling of a flag users bring
    from lm-eval or inspect (:mod:`credo.cli.hints`), or a user error raised while
    parsing (a registry's choices whose plug-in failed to load); any other unknown
    argument is argparse's error (exit 2)."""
    from credo.errors import UserError

    parser = _parser()
    try:
        args, unrecognised = parser.parse_known_args(argv)
    except UserError as e:  # a choice read from a registry: a plug-in failed to load
        if {"-v", "--verbose"} & set(sys.argv[1:] if argv is None else argv):
            import traceback

            traceback.print_exc()
        _error(f"error: {e}")
        return None
    if not unrecognised:
        return args
    from credo.cli.hints import foreign_flag_hint

    hint = foreign_flag_hint(unrecognised)
    if hint is None:
        parser.error(f"unrecognized arguments: {' '.join(unrecognised)}")
    _error(f"error: {hint}")
    return None


def _own_or_errors(record: logging.LogRecord) -> bool:
    """Without ``-v`` the terminal shows credo's own warnings and other libraries' errors
    only: a library's retry warnings (Hugging Face Hub's, offline) are not the one line a
    user error gets."""
    return record.name.split(".")[0] == "credo" or record.levelno >= logging.ERROR


def _error(message: str) -> None:
    """One or two lines on stderr, no markup, no traceback."""
    Console(stderr=True, soft_wrap=True).print(message, markup=False, highlight=False)


def _parser() -> argparse.ArgumentParser:
    """``credo``'s parser: ``-v`` and every registered command
    (:data:`credo.cli.command.COMMANDS`)."""
    from credo import __version__

    p = argparse.ArgumentParser(prog="credo", description=DESCRIPTION)
    p.add_argument("-v", "--verbose", action="store_true", help="log what each stage does")
    p.add_argument("--version", action="version", version=f"credo {__version__}",
                   help="print credo's version and exit")
    add_commands(p)
    return p


if __name__ == "__main__":
    sys.exit(main())

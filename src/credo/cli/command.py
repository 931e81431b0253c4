"""The commands of ``credo``, each registered once.

A command module states each of its commands once: its name, the line ``credo --help``
shows, the description ``credo NAME --help`` shows, the function adding its flags and
the function running it::

    def _flags(p: argparse.ArgumentParser) -> None:
        p.add_argument("run", type=Path, metavar="RUN_DIR")

    @command("certify", help="a score threshold with a guarantee", description="...",
             flags=_flags)
    def cmd_certify(args: argparse.Namespace) -> int: ...

A name with a space is a subcommand (``"perturb topic-check"``) of a :func:`group`
registered before it (``"perturb"``). :func:`add_commands` builds the argparse
subparsers from :data:`COMMANDS`, in the order of :data:`COMMAND_MODULES` (the order
``credo --help`` lists them), whoever imported a command module first; each command's
handler is its parser's ``func`` default, as :func:`credo.cli.main` expects.

The command modules import argparse, rich and credo's light modules only: building the
parser loads neither numpy nor pydantic (``tests/test_architecture.py``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from credo.registry import Registry

__all__ = ["COMMANDS", "COMMAND_MODULES", "Command", "add_commands", "command", "group"]

Handler = Callable[[argparse.Namespace], int]
AddFlags = Callable[[argparse.ArgumentParser], None]

COMMAND_MODULES: tuple[str, ...] = tuple(f"credo.cli.{m}" for m in (
    "run", "catalogue", "score", "report", "perturb", "strength", "probe", "certify", "study",
    "adaptive", "claims", "serve", "toy",
))
"""The modules registering the built-in commands, in ``credo --help``'s order."""


@dataclass(frozen=True)
class Command:
    """One command: ``name`` (``"perturb topic-check"`` for a subcommand), the ``help``
    line, the ``description`` of its own ``--help`` (default: none), ``flags`` adding its
    arguments to its parser, and ``run``, its handler; a group (subcommands only) has no
    ``run``."""

    name: str
    help: str
    run: Handler | None = None
    description: str | None = None
    flags: AddFlags | None = None
    module: str = ""

    @property
    def parent(self) -> str:
        """The group the command belongs to (``""``: a top-level command)."""
        return self.name.rpartition(" ")[0]


COMMANDS: Registry[Command] = Registry("command", load=COMMAND_MODULES, plugins=False)
"""Every command of ``credo`` by name (``"strength run"``)."""


def command(name: str, *, help: str, description: str | None = None,
            flags: AddFlags | None = None) -> Callable[[Handler], Handler]:
    """Decorator: register the decorated handler as the command ``name``."""

    def decorate(run: Handler) -> Handler:
        COMMANDS.add(name, Command(name, help, run, description, flags, run.__module__))
        return run

    return decorate


def group(name: str, *, help: str, description: str | None = None) -> None:
    """Register ``name``, a command made of the subcommands registered after it as
    ``"name sub"`` (``description``: what ``credo NAME --help`` says)."""
    COMMANDS.add(name, Command(name, help, description=description))


def add_commands(parser: argparse.ArgumentParser) -> None:
    """Every registered command as a subparser of ``parser`` (``dest="command"``; a group's
    subcommands under ``dest="<group>_command"``), modules in :data:`COMMAND_MODULES`'
    order, each module's commands in its order, others' after them."""
    order = {module: i for i, module in enumerate(COMMAND_MODULES)}
    commands = sorted(COMMANDS.values(), key=lambda c: order.get(_module(c), len(order)))
    subs: dict[str, Any] = {"": parser.add_subparsers(dest="command", required=True)}
    for c in commands:
        if c.parent not in subs:
            raise ValueError(f"command {c.name!r}: no group {c.parent!r} registered before it")
        p = subs[c.parent].add_parser(c.name.rpartition(" ")[2], help=c.help,
                                      description=c.description)
        if c.flags is not None:
            c.flags(p)
        if c.run is None:
            subs[c.name] = p.add_subparsers(dest=f"{c.name.replace(' ', '_')}_command",
                                            required=True)
        else:
            p.set_defaults(func=c.run)


def _module(c: Command) -> str:
    """A command's module; a group's is its first subcommand's."""
    if c.module:
        return c.module
    return next((s.module for s in COMMANDS.values() if s.parent == c.name), "")

"""The command line explains itself: every command and subcommand has a description for
its own ``--help``, and every argument of every parser, positionals included, has help
text (walked over the whole parser tree of ``credo``, so a new flag without help fails)."""

from __future__ import annotations

import argparse

import pytest

from credo.cli import _parser


def _parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    found = [("credo", _parser())]
    todo = list(found)
    while todo:
        name, parser = todo.pop()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, child in action.choices.items():
                    found.append((f"{name} {sub}", child))
                    todo.append((f"{name} {sub}", child))
    return sorted(found)


PARSERS = _parsers()


def _params():
    return [pytest.param(p, id=name) for name, p in PARSERS]


def test_the_walk_reaches_every_command():
    names = {name for name, _ in PARSERS}
    assert {"credo run", "credo serve", "credo toy-server", "credo perturb topic-check",
            "credo strength agree", "credo cache"} <= names
    assert len(names) >= 20


@pytest.mark.parametrize("parser", _params())
def test_every_argument_has_help(parser):
    empty = [action.option_strings[0] if action.option_strings else action.dest
             for action in parser._actions
             if not isinstance(action, argparse._SubParsersAction)
             and not (action.help or "").strip()]
    assert empty == [], f"{parser.prog}: arguments without help"


@pytest.mark.parametrize(("name", "parser"), PARSERS, ids=[n for n, _ in PARSERS])
def test_every_command_says_what_it_does(name, parser):
    assert (parser.description or "").strip(), f"`{name} --help` has no description"


def test_every_subcommand_is_listed_with_a_line_of_help():
    for name, parser in PARSERS:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                listed = {c.dest: c.help for c in action._choices_actions}
                assert set(listed) == set(action.choices), name
                assert all((h or "").strip() for h in listed.values()), name

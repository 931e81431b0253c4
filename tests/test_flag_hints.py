"""Flags users type from lm-evaluation-harness and inspect_ai (``--tasks``,
``--include_path``, ``--epochs``, ``--gen_kwargs``, ...) get one line naming credo's
spelling and exit 2, where argparse said only "unrecognized arguments"."""

from __future__ import annotations

import argparse
import re

import pytest

from credo.cli import _parser, main
from credo.cli.hints import FOREIGN_FLAGS


def _options(parser: argparse.ArgumentParser) -> set[str]:
    """Every option string of ``parser`` and of its subcommands, recursively."""
    found = {s for a in parser._actions for s in a.option_strings}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= _options(sub)
    return found


@pytest.mark.parametrize(("args", "says"), [
    (["run", "--tasks", "gsm8k"], "--task "),
    (["run", "--include_path", "tasks/"], "--include-path"),
    (["run", "--epochs", "5"], "--n "),
    (["run", "--gen_kwargs", "temperature=0.7,max_gen_toks=64"], "--max-tokens"),
    (["run", "--num_fewshot=5"], "--num-fewshot"),
    (["run", "--model_args", "pretrained=x"], "--base-url"),
    (["score", "log.json", "--log-dir", "logs"], "--out"),
])
def test_a_flag_of_lm_eval_or_inspect_names_credos_spelling(args, says, capsys):
    assert main(args) == 2
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and out == "", err
    flag = args[1] if args[0] == "run" else args[2]
    assert lines[0].startswith(f"error: {flag.split('=')[0]} is ")
    assert says in lines[0] and "unrecognized" not in lines[0]


def test_an_unknown_flag_of_no_tool_keeps_argparses_error(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["run", "--bogus", "3"])
    assert stop.value.code == 2
    assert "unrecognized arguments: --bogus 3" in capsys.readouterr().err


def test_every_hint_names_real_credo_flags_and_no_credo_flag_is_hinted():
    """The table cannot rot: each flag it names exists in some credo command, and no flag
    it answers is one of credo's own (which argparse would take, so the hint never
    shows)."""
    ours = _options(_parser())
    for flag, (tool, hint) in FOREIGN_FLAGS.items():
        assert tool in ("lm-eval", "inspect")
        assert flag not in ours, flag
        named = re.findall(r"(?<![\w-])--[a-z][a-z-]*", hint)
        assert all(n in ours for n in named), (flag, named)
    for flag in ("--tasks", "--include_path", "--epochs", "--gen_kwargs"):
        assert flag in FOREIGN_FLAGS

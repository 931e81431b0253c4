"""Words for users: the project's history (its issue numbers) stays in git and
CHANGELOG.md, out of what a user reads: the sources (their docstrings become the API
pages; their strings become help, output and errors), the documentation pages, and every
command's help."""

from __future__ import annotations

import argparse
import re
import subprocess
from pathlib import Path

from credo.cli import _parser

ROOT = Path(__file__).resolve().parents[1]
#: "issue 23", "issues #4", also when a line break (and a comment's ``#``) falls between
HISTORY = re.compile(r"[Ii]ssues?[ \t]*(?:\n[ \t#]*)?#?[0-9]+")


def test_no_issue_number_in_the_sources_or_the_pages():
    """What a user reads or runs: the package, the pages, the configs and examples the pages
    point to, the benchmarks, the README and CI's script (history stays in CHANGELOG.md)."""
    tracked = subprocess.run(["git", "ls-files", "src", "docs", "configs", "examples",
                              "benchmarks", ".ci", "README.md", "Makefile"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.split()
    found = []
    for name in tracked:
        path = ROOT / name
        if path.suffix not in {".py", ".md", ".j2", ".yml", ".yaml", ".sh", ".css", ".js",
                               ".jsonl", ".toml", ""}:
            continue
        text = path.read_text(encoding="utf-8")
        for hit in HISTORY.finditer(text):
            line = text.count("\n", 0, hit.start()) + 1
            found.append(f"{name}:{line}: {' '.join(hit.group().split())}")
    assert found == [], "\n".join(found)


def _helps(parser: argparse.ArgumentParser) -> list[str]:
    texts = [parser.format_help()]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                texts += _helps(child)
    return texts


def test_no_issue_number_in_any_help():
    helps = _helps(_parser())
    assert len(helps) > 20
    assert [h.splitlines()[0] for h in helps if HISTORY.search(h)] == []

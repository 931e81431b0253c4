"""Safe evaluation of plain arithmetic expressions, exactly, with fractions.

Used for answers written as an expression ("Answer: (16 - 3 - 4) * 2"), which is how
the ``expression`` prompt style asks code models to answer arithmetic word problems.
Only numbers, ``+ - * / // % **`` and parentheses are accepted, parsed with :mod:`ast`
(never ``eval``); anything else gives None.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable
from fractions import Fraction

_MAX_LENGTH = 200
_MAX_EXPONENT = 64
_ALLOWED = re.compile(r"[\d\s.+\-*/%()]+")
_THOUSANDS = re.compile(r"\b\d{1,3}(?:,\d{3})+\b")

_BINARY: dict[type[ast.operator], Callable[[Fraction, Fraction], Fraction]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}


def evaluate_arithmetic(text: str) -> Fraction | None:
    """The exact value of an arithmetic expression such as ``"(16 - 3 - 4) * 2"``.

    Accepts ``×``/``÷``, thousands separators (``1,234``) and a trailing full stop.
    With ``=`` ("7 * 2 = 14") the right-hand side is taken when it is a number. Returns
    None for anything that is not pure arithmetic, divides by zero, or is too large.
    """
    s = text.strip().replace("×", "*").replace("÷", "/").replace("\u2212", "-").rstrip(". ")
    if "=" in s:
        rhs = evaluate_arithmetic(s.rsplit("=", 1)[1])
        return rhs if rhs is not None else evaluate_arithmetic(s.rsplit("=", 1)[0])
    s = _THOUSANDS.sub(lambda m: m.group().replace(",", ""), s).strip("`$ ")
    if not s or len(s) > _MAX_LENGTH or not _ALLOWED.fullmatch(s) or not re.search(r"\d", s):
        return None
    try:
        return _eval(ast.parse(s, mode="eval").body)
    except (SyntaxError, ValueError, ZeroDivisionError, OverflowError, RecursionError):
        return None


def _eval(node: ast.AST) -> Fraction:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return Fraction(str(node.value))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _eval(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow):
            if right.denominator != 1 or abs(right) > _MAX_EXPONENT:
                raise ValueError("unsupported exponent")
            return left ** int(right)
        fn = _BINARY.get(type(node.op))
        if fn is not None:
            return fn(left, right)
    raise ValueError(f"not arithmetic: {ast.dump(node)[:60]}")

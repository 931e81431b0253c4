"""Markdown pieces every report.md shares (the run folder's, the strength folder's, the
claim section's): GitHub-flavoured pipe tables (:func:`md_table`), table cells that stay
on one line (:func:`md_cell`, :func:`cut_text`), numbers with a fixed number of decimals
(:func:`fmt_number`, :mod:`credo.numbers`'s) and an item's answers in one cell
(:func:`answer_summary`)."""

from __future__ import annotations

from collections.abc import Sequence

from credo.numbers import fmt_number

__all__ = ["answer_summary", "cut_text", "fmt_number", "md_cell", "md_table"]


def md_table(rows: Sequence[Sequence[str]]) -> list[str]:
    """The lines of a pipe table: ``rows[0]`` is the header, the rest the body.

    >>> md_table([["a", "b"], ["1", "2"]])
    ['| a | b |', '|---|---|', '| 1 | 2 |']
    """
    if not rows:
        raise ValueError("a table needs at least its header row")
    out = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    return out + ["| " + " | ".join(r) + " |" for r in rows[1:]]


def md_cell(text: object, limit: int = 60) -> str:
    """``text`` as one table cell: whitespace (code's newlines) folded to single spaces,
    pipes escaped, cut to ``limit`` characters with an ellipsis."""
    return cut_text(str(text).replace("|", "\\|"), limit)


def cut_text(text: str, limit: int) -> str:
    """``text`` on one line (whitespace folded to single spaces), cut to ``limit``
    characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def answer_summary(values: Sequence[object], correct: Sequence[object] = (), top: int = 3,
                   width: int = 40) -> str:
    """An item's original answers grouped, commonest first (ties in order of first
    appearance), as ``answer×count``: the ``top`` commonest and, after them, every group
    holding a correct sample, so the right answer is never hidden;
    groups with a correct sample are marked ✓ (when ``correct`` is given, one value per
    answer), unparsed answers are ∅, each answer is cut to ``width`` characters, and
    ``… +k more (j samples)`` counts the groups left out.

    >>> answer_summary(["a", "b", "a", "c", "d", "e"], [0, 0, 0, 0, 0, 1])
    'a×2, b×1, c×1, e×1 ✓, … +1 more (1 sample)'
    """
    counts: dict[str, int] = {}
    right: set[str] = set()
    for k, value in enumerate(values):
        key = "∅" if value is None else str(value)
        counts[key] = counts.get(key, 0) + 1
        verdict = correct[k] if k < len(correct) else None
        if not isinstance(verdict, bool | int | float) or verdict != 1:
            continue
        right.add(key)
    ranked = sorted(counts, key=lambda a: -counts[a])
    shown = ranked[:top] + [a for a in ranked[top:] if a in right]
    parts = [f"{cut_text(a, width)}×{counts[a]}{' ✓' if a in right else ''}" for a in shown]
    hidden = [a for a in ranked if a not in shown]
    if hidden:
        n = sum(counts[a] for a in hidden)
        parts.append(f"… +{len(hidden)} more ({n} sample{'' if n == 1 else 's'})")
    return ", ".join(parts)


def drawn_m(perturbed_per_item: Sequence[int]) -> int:
    """m as drawn: the most perturbed samples any item holds (0 when none holds one: a
    run whose methods read original samples only draws none, whatever its config's m)."""
    return max(perturbed_per_item, default=0)


def m_text(drawn: int, configured: object) -> str:
    """``m = <drawn> perturbed``, with the config's m beside it where the two differ
    (``m = 0 perturbed (config m = 30)``: no method read perturbed samples, or an
    adaptive run's items stopped before drawing them all)."""
    if drawn == configured or configured in (None, "?"):
        return f"m = {drawn} perturbed"
    return f"m = {drawn} perturbed (config m = {configured})"

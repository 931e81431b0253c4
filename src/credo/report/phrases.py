"""Sentences report.md and report.html say alike: the title, what an incomplete run's
items are, which stats stand above the tables."""

from __future__ import annotations

from credo.pipeline.score import GIVEN_RERUN

__all__ = ["ABOVE_STATS", "incomplete_note", "report_title"]

ABOVE_STATS = ("correctness", "answers", "given_scores", "identical_repeats")
"""Stats the report states above its tables, not again in its Run section."""


def report_title(task: str, model: str, given: object = None) -> str:
    """``credo run: <task> on <model>``; ``credo score: <file> (<layout> generations)``
    for generations scored without a model (``given``: the file's layout)."""
    if given:
        return f"credo score: {task} ({given} generations)"
    return f"credo run: {task} on {model}"


def incomplete_note(left_out: int, partial: int, why: str, *, given: bool = False) -> str:
    """What an incomplete run's report says of its incomplete items: how many are left out
    of every table (no sample) and how many are scored on the samples that finished
    (the counts are those of the tables), and why; for generations
    scored without a model (``given``) what completes them (a rerun of credo would not)."""
    counts = [f"{left_out} item{'' if left_out == 1 else 's'}"
              f" {'is' if left_out == 1 else 'are'} left out of every table"] if left_out else []
    counts += [f"{partial} item{'' if partial == 1 else 's'}"
               f" {'is' if partial == 1 else 'are'} scored on the samples that finished"
               ] if partial else []
    text = f"{'; '.join(counts) or 'No item is left out'}: {why}"
    if given:
        return f"{text}; {GIVEN_RERUN}."
    return text

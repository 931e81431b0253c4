"""Named tasks for the seeds' and peers' benchmarks that no installed package ships: SVAMP and
PopQA, read from the user's copy of the public file (no
download). TriviaQA and NQ-Open are lm-eval's tasks (:mod:`credo.tasks.lm_eval`).

* ``svamp:<path>``: SVAMP.json (a list of ``{ID, Body, Question, Answer, ...}``;
  github.com/arkilpatel/SVAMP), the ``file:svamp`` preset: numbers by value.
* ``popqa:<path>``: PopQA (huggingface.co/datasets/akariasai/PopQA, exported as
  ``.jsonl``/``.json``/``.csv``: ``id``, ``question``, ``possible_answers`` a JSON list);
  an answer is correct when one of the possible answers appears in it after SQuAD
  normalisation (PopQA's own accuracy, Mallen et al. 2023).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from credo.tasks.answers import normalise_text
from credo.tasks.base import AnswerFormat, Item, Task
from credo.tasks.grading import Graded, GradeMap, GradingContext, grader
from credo.tasks.loaders import DatasetError, read_rows
from credo.tasks.registry import required_argument, task_loader

POPQA = "popqa"


@task_loader("svamp", fmt=AnswerFormat.NUMBER, source="your file", usage="svamp:<path>")
def _svamp(arg: str | None) -> Task:
    """SVAMP from the user's SVAMP.json: ``svamp:<path>``."""
    from credo.tasks.builtin import load_task_from_file

    arg = required_argument(arg, "task 'svamp' needs SVAMP.json "
                            "(github.com/arkilpatel/SVAMP): svamp:<path>")
    return load_task_from_file(arg, name="svamp", preset="svamp")


@task_loader(POPQA, fmt=AnswerFormat.SHORT_TEXT, grader=POPQA, source="your file",
             usage="popqa:<path>")
def _popqa(arg: str | None) -> Task:
    """PopQA from the user's export of akariasai/PopQA: ``popqa:<path>``."""
    arg = required_argument(arg, "task 'popqa' needs an export of huggingface.co/datasets/"
                            "akariasai/PopQA (.jsonl, .json or .csv): popqa:<path>")
    items = []
    for line_no, row in read_rows(arg):
        where = f"{arg}:{line_no}"
        for col in ("question", "possible_answers"):
            if col not in row:
                raise DatasetError(f"{where}: no field {col!r} (is this PopQA?)")
        golds = row["possible_answers"]
        if isinstance(golds, str):
            try:
                golds = json.loads(golds)
            except json.JSONDecodeError:
                raise DatasetError(f"{where}: possible_answers is not a JSON list") from None
        if not isinstance(golds, list) or not golds:
            raise DatasetError(f"{where}: possible_answers should be a non-empty list")
        item_id = f"popqa-{row.get('id', line_no)}"
        items.append(Item(item_id, str(row["question"]).strip(), str(golds[0]), (),
                          {"grader": POPQA, "gold_answers": json.dumps(golds)}, where))
    return Task("popqa", tuple(items), AnswerFormat.SHORT_TEXT, "short-form factual recall")


@grader(POPQA, "a possible answer appears in the response after SQuAD normalisation (PopQA)")
def grade_popqa(ctx: GradingContext, originals: Mapping[str, Sequence[Graded]]) -> GradeMap:
    """PopQA's accuracy: some possible answer is a substring of the normalised response."""
    out: GradeMap = {}
    for item_id, samples in originals.items():
        golds = [normalise_text(g) for g in json.loads(ctx.items[item_id].meta["gold_answers"])]
        golds = [g for g in golds if g]
        out[item_id] = tuple(
            any(f" {g} " in f" {normalise_text(s.text)} " for g in golds) for s in samples
        )
    return out

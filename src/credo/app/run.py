"""``credo run``: the pipeline on a task and the run folder it writes (:func:`run`), or
what it would ask of its models (:func:`dry_run`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Unpack

from credo.app.common import HandedIn, check_neutral, check_writable, config_pool, given_roles

if TYPE_CHECKING:
    from credo.config import RunConfig
    from credo.evaluate.claims import ClaimCertificate
    from credo.pipeline.certificate import RunCertificate
    from credo.pipeline.estimate import RunEstimate
    from credo.pipeline.runner import RunResult

__all__ = ["dry_run", "run"]


def run(
    config: RunConfig,
    *,
    show_progress: bool = True,
    write: bool = True,
    certificate: RunCertificate | ClaimCertificate | str | Path | None = None,
    **handed: Unpack[HandedIn],
) -> RunResult:
    """Run C3 and the selected baselines on a task, write the run folder, return the results.

    A claim certificate (``credo certify RUN_DIR --claims``) turns the claim
    stage on (``config.claims``, its defaults where unset) and writes, per item,
    the retained and removed claims and the filtered answer to ``answers.jsonl``.

    ``certificate`` (a :class:`~credo.pipeline.certificate.RunCertificate` or the file
    ``credo certify`` wrote; default ``config.certificate``) decides which answers to act
    on: the run is refused before its first model call when its settings differ from the
    certificate's, and ``answers.jsonl`` gives each item's answer, its score and whether
    it is accepted at the certificate's risk.

    The keywords of :class:`~credo.app.common.HandedIn` (``model``, ``writer``,
    ``judge``, ``embedder``, ``task``) replace what ``config`` names (tests pass
    scripted models); nothing handed in is modified or closed. With ``write`` the run
    folder ``config.out`` is written (:mod:`credo.report.writer`). Under
    ``perturbation.neutrality: fail``, prefixes that fail the neutrality test raise
    :class:`~credo.errors.NeutralityFailed` (its ``result`` is the run's) once the
    folder is written.
    """
    roles = given_roles(handed, "run")
    from credo.generation.pool import MODEL
    from credo.pipeline.certificate import (
        CertificateUse,
        RunCertificate,
        apply_certificate,
        check_binding,
        read_certificate,
        task_settings,
    )
    from credo.pipeline.checks import method_specs
    from credo.pipeline.runner import configured_task, run_pipeline

    method_specs(config.methods)  # an unknown method fails before the folder or cache
    given = certificate if certificate is not None else config.certificate
    cert = read_certificate(given)  # a run's or a claim certificate
    # what it fills in: a certified fitted score, the claim stage, the decision threshold
    config = apply_certificate(config, cert, given)
    task = handed.get("task")
    task = configured_task(config) if task is None else task  # a bad task fails first
    if write:
        check_writable(config.out, "the run folder (out)")
    with config_pool(config, show_progress=show_progress, roles=roles,
                     embedder=handed.get("embedder"), max_cost_usd=config.max_cost_usd,
                     executor=config.executor) as pool:
        if cert is not None:  # bound to the run it was made on
            from credo.pipeline.runner import assign_roles

            assign_roles(pool, config)  # the model's identity, built, not called
            identity = pool.model(MODEL, probe=False).identity
            check_binding(cert, config, identity, task_settings(task.head(config.limit),
                                                                config))
        result = run_pipeline(config, pool, task)
    if isinstance(cert, RunCertificate):
        result = replace(result, certificate=CertificateUse.of(cert, result.items))
    if write:
        from credo.report.writer import write_run

        write_run(result, config.out, cert)  # answers.jsonl before the marker
    check_neutral(result)
    return result


def dry_run(
    config: RunConfig, **handed: Unpack[HandedIn]
) -> RunEstimate:
    """What :func:`run` would ask of its models for ``config``, per stage (requests,
    samples, cached samples, calls, estimated tokens and cost), without calling a model
    or contacting a server and without writing the run folder
    (:func:`credo.pipeline.estimate.estimate_run`). The arguments are :func:`run`'s."""
    roles = given_roles(handed, "dry_run")
    from credo.pipeline.estimate import estimate_run

    with config_pool(config, show_progress=False, roles=roles,
                     embedder=handed.get("embedder"), reach=False) as pool:
        return estimate_run(config, pool, handed.get("task"))

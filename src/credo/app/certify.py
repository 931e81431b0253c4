"""``credo certify``: a threshold certified on a finished run's scores
(:func:`certify_run`), the claims of its answers (:func:`certify_run_claims`), or the
adaptive decision procedure replayed from its cache (:func:`certify_adaptive`). The
certificate's reading, writing and binding are :mod:`credo.pipeline.certificate`'s."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from credo.app import common
from credo.app.claims import certify_claim_file

if TYPE_CHECKING:
    from credo.evaluate.claims import ClaimCertificate
    from credo.pipeline.adaptive_certificate import DecisionReplay
    from credo.pipeline.certificate import RunCertificate

__all__ = ["AdaptiveCertification", "certify_adaptive", "certify_run", "certify_run_claims"]


def certify_run(
    run_dir: str | Path,
    method: str,
    *,
    alpha: float = 0.1,
    delta: float = 0.1,
    procedure: str = "ltt",
    out: str | Path | None = None,
    allow_incomplete: bool = False,
) -> RunCertificate:
    """Certify a threshold on a finished, labelled run's ``method`` scores: the
    items' scores and the correctness of the answer credo gave each (``scores.jsonl``),
    :func:`credo.evaluate.certify.certify` at risk ``alpha`` with confidence
    ``1 - delta`` by ``procedure``, bound to the run's task and settings
    (:func:`credo.pipeline.certificate.run_settings`; for a ``credo score`` folder
    :func:`~credo.pipeline.certificate.given_settings`); written to ``out``
    when given. Items without a score or a known correctness are left out (their count
    is in the certificate's message). No model is called. An incomplete folder is
    refused unless ``allow_incomplete`` (:func:`~credo.app.common.check_complete`; the
    certificate's ``incomplete`` records it then)."""
    from credo.errors import UserError
    from credo.evaluate.certify import certify
    from credo.methods.fitted import is_fitted
    from credo.pipeline.certificate import (
        RunCertificate,
        given_settings,
        run_settings,
        write_certificate,
    )
    from credo.report.rundata import load_run

    if out is not None:  # before reading anything; its folder is made
        common.check_certificate_out(out, run_dir)
    data = load_run(run_dir)
    _check_method(data, method)
    incomplete = common.check_complete(data, allow_incomplete)
    task = common.recorded_task(data)
    config = common.folder_config(data)
    scores = [row.get("scores", {}).get(method) for row in data.scores]
    correct = [row.get("answer_correct") for row in data.scores]
    keep = [i for i, (s, c) in enumerate(zip(scores, correct, strict=True))
            if isinstance(s, int | float) and isinstance(c, int | float)
            and math.isfinite(s) and math.isfinite(c)]
    if not keep:
        raise UserError(f"{data.path}: no item has both a {method} score and a known "
                        "correctness (a labelled run is needed to certify)")
    found = certify([scores[i] for i in keep], [correct[i] >= 0.5 for i in keep],
                    alpha=alpha, delta=delta, method=procedure)
    if common.is_given(data.config):
        settings = given_settings(config, method, task, dict(data.config.get("sampling") or {}))
    else:
        settings = run_settings(config, common.run_identity(data), method, task)
    if is_fitted(method):  # the function the run fitted on all its labelled items
        fitted = (data.metrics.get("fitted") or {}).get(method)
        if not isinstance(fitted, dict):
            raise UserError(f"{data.path}: the run fitted no {method} function (it needs 2 "
                            "labelled items with the scores it reads); nothing to certify")
        settings["fitted"] = fitted
    cert = RunCertificate(found, settings, str(data.path), incomplete)
    if out is not None:
        write_certificate(out, cert.to_json())
    return cert


def certify_run_claims(
    run_dir: str | Path,
    score: str | None = None,
    *,
    alpha: float = 0.1,
    a: float = 1.0,
    delta: float | None = None,
    out: str | Path | None = None,
    allow_incomplete: bool = False,
) -> ClaimCertificate:
    """A claim certificate from a finished, labelled long-form run with claims:
    :func:`credo.evaluate.claims.certify_claims` on its ``claims.jsonl`` (every claim of
    every answer labelled), thresholding claim method ``score`` (default: the only
    one), marginal (``delta`` None) or with probability ``1 - delta``, bound to the run's
    model, task and settings (``settings``:
    :func:`credo.pipeline.certificate.claim_settings`), so that ``credo run
    --certificate`` refuses another task, model or claim splitter; written to ``out``
    when given (with ``incomplete`` where ``allow_incomplete`` let an incomplete folder
    through: :func:`~credo.app.common.check_complete`). No model is called."""

    from credo.errors import UserError
    from credo.pipeline.certificate import claim_settings, write_certificate
    from credo.report.rundata import CLAIMS_FILE, load_run

    if out is not None:  # before reading anything; its folder is made
        common.check_certificate_out(out, run_dir)
    data = load_run(run_dir)
    incomplete = common.check_complete(data, allow_incomplete)
    path = data.path / CLAIMS_FILE
    if not path.is_file():
        raise UserError(f"{data.path}: no {CLAIMS_FILE}; run with claims (config claims:, "
                        "--claims) on a long-form task")
    cert = certify_claim_file(path, alpha, a=a, delta=delta, score=score, option="--method")
    cert = replace(cert, settings=claim_settings(common.folder_config(data),
                                                 common.run_identity(data), str(cert.method),
                                                 common.recorded_task(data)))
    if out is not None:
        written = {**cert.to_dict(), "calibration_file": str(path)}
        write_certificate(out, written if incomplete is None
                          else {**written, "incomplete": incomplete})
    return cert


@dataclass(frozen=True)
class AdaptiveCertification:
    """What :func:`certify_adaptive` made: the certificate (bound to the run's settings
    and the procedure) and the replay it rests on (samples drawn and decisions against
    the full recipe's at the certified threshold)."""

    certificate: RunCertificate
    replay: DecisionReplay
    out: Path | None = None


def certify_adaptive(
    run_dir: str | Path,
    method: str,
    *,
    alpha: float = 0.1,
    delta: float = 0.1,
    procedure: str = "ltt",
    options: Mapping[str, Any] | None = None,
    out: str | Path | None = None,
    allow_incomplete: bool = False,
    **handed: Unpack[common.HandedIn],
) -> AdaptiveCertification:
    """``credo certify RUN_DIR --adaptive decision``: certify the
    adaptive decision procedure on ``method`` as it runs, replayed from the finished full
    labelled run's cache with no model call at every candidate threshold
    (:func:`credo.pipeline.adaptive_certificate.certify_decision_rule`); the certificate
    records the procedure (``settings["adaptive"]``: rule, round, min, confidence, the
    scores read), so ``credo serve`` and ``credo run --certificate`` apply it only with
    the same procedure. ``options``: the rule's ``round``, ``min``, ``confidence``. The
    models, embedder and task replace the config's as in
    :func:`~credo.app.adaptive.simulate_adaptive`.
    Refused in one line before anything is replayed: a ``credo score`` folder, an
    adaptive run's folder, a method the rule cannot read, a missing cache, an incomplete
    folder unless ``allow_incomplete``."""
    roles = common.given_roles(handed, "certify_adaptive")
    from pydantic import ValidationError

    from credo.config import AdaptiveConfig, validation_message
    from credo.errors import UserError
    from credo.evaluate.certify import PROCEDURE_METHODS
    from credo.pipeline.adaptive_certificate import certify_decision_rule
    from credo.pipeline.certificate import (
        RunCertificate,
        procedure_settings,
        rule_scores,
        run_settings,
        write_certificate,
    )
    from credo.report.rundata import load_run

    folder = Path(run_dir)
    _check_run_folder(folder, out)
    if procedure not in PROCEDURE_METHODS:
        raise UserError(f"--procedure {procedure}: the adaptive procedure is certified by "
                        f"{' or '.join(PROCEDURE_METHODS)} (Learn then Test over its "
                        "thresholds)")
    readable = rule_scores()
    if method not in readable:
        raise UserError(f"--method {method}: the decision rule reads {', '.join(readable)}"
                        " (computed from the answers drawn); certify the full recipe for "
                        "another method (no --adaptive)")
    try:
        rule = AdaptiveConfig(rule="decision", scores=[method], **dict(options or {}))
    except ValidationError as e:
        raise UserError(validation_message(e, "--adaptive decision")) from None
    data = load_run(folder)
    _check_method(data, method)
    incomplete = common.check_complete(data, allow_incomplete)
    if common.is_given(data.config):
        raise UserError(f"{folder}: a `credo score` folder; the adaptive procedure samples "
                        "a model, so it is certified on a `credo run` folder and its cache")
    config = common.full_run_config(data, folder, "the procedure is replayed from")
    common.check_min([rule], config, data)
    task_identity = common.recorded_task(data)
    cache = common.replay_cache(config, folder, "credo certify --adaptive")
    with common.replay_pool(config, roles, handed.get("embedder")) as pool:
        replay = certify_decision_rule(
            config, pool, handed.get("task"), method, rule, alpha=alpha, delta=delta,
            procedure=procedure, check_full=lambda r: common.check_replayed(r, data, cache))
    settings = run_settings(config, common.run_identity(data), method, task_identity)
    settings["adaptive"] = procedure_settings(rule)
    cert = RunCertificate(replay.certificate, settings, str(data.path), incomplete)
    written = None
    if out is not None:
        written = write_certificate(out, {**cert.to_json(), "replay": replay.to_json()})
    return AdaptiveCertification(cert, replay, written)


def _check_run_folder(folder: Path, out: str | Path | None) -> None:
    """A :class:`UserError` unless ``folder`` holds a run's config and the certificate
    file ``out`` (if any) can be written, before anything is replayed."""
    common.check_run_folder(folder)
    if out is not None:  # its folder is made when it is written
        common.check_certificate_out(out, folder)


def _check_method(data: Any, method: str) -> None:
    """A :class:`UserError` naming ``--method`` when the run folder ``data`` holds no
    ``method`` scores."""
    from credo.errors import UserError

    if method not in data.methods:
        raise UserError(f"--method {method!r}: the run at {data.path} has no such scores "
                        f"(methods: {', '.join(data.methods)})")

"""The Python API's entry points, one name each: the work lives in the application layer
(:mod:`credo.app`, one module per command family); this module only re-exports it.

- :func:`run`: ``credo run`` (C3 and the baselines) and its run folder.
- :func:`dry_run`: ``credo run --dry-run``, what a run would ask of its models, no call.
- :func:`run_strength`: ``credo strength run`` (Le et al.) and its output folder.
- :func:`score`: ``credo score``, generations a user already has, scored and written.
- :func:`certify_run`, :func:`certify_run_claims`, :func:`certify_adaptive`: ``credo
  certify``, a threshold certified on a finished run, its claims, or the adaptive
  decision procedure replayed.
- :func:`study`, :func:`calibrate_prompt`, :func:`calibrate_prompt_file`,
  :func:`simulate_adaptive`: the experiment drivers, several runs or replays of one
  towards a finding (``credo study``, ``credo perturb calibrate-prompt``, ``credo
  adaptive``).
- :func:`topic_check`, :func:`calibrate_threshold`, :func:`strength_agreement`,
  :func:`probe`, :func:`report`, :func:`cache_stats`: the other commands' work, each
  returning a typed result (the command line only prints them and maps their outcomes
  to exit statuses).
- :class:`HandedIn`, :class:`HelperModels`: the models (and task) a caller can hand
  :func:`run`, :func:`dry_run`, :func:`study`, :func:`simulate_adaptive` and
  :func:`certify_adaptive` as keywords in place of the config's.
"""

from __future__ import annotations

from credo.app.adaptive import AdaptiveSimulation, simulate_adaptive
from credo.app.catalogue import CacheStats, cache_stats
from credo.app.certify import (
    AdaptiveCertification,
    certify_adaptive,
    certify_run,
    certify_run_claims,
)
from credo.app.claims import ClaimFilterResult, certify_claim_file, filter_claim_file
from credo.app.common import HandedIn, HelperModels, check_writable
from credo.app.perturb import (
    PREFIX_SETTINGS,
    PromptCalibration,
    ThresholdResult,
    TopicCheckResult,
    calibrate_prompt,
    calibrate_prompt_file,
    calibrate_threshold,
    topic_check,
)
from credo.app.probe import ProbeResult, probe
from credo.app.report import ReportResult, report, write_missing_similarities
from credo.app.run import dry_run, run
from credo.app.score import score
from credo.app.strength import AgreementResult, dry_run_strength, run_strength, strength_agreement
from credo.app.study import StudyResult, StudyRun, study

__all__ = [
    "PREFIX_SETTINGS",
    "AdaptiveCertification",
    "AdaptiveSimulation",
    "AgreementResult",
    "CacheStats",
    "ClaimFilterResult",
    "HandedIn",
    "HelperModels",
    "ProbeResult",
    "PromptCalibration",
    "ReportResult",
    "StudyResult",
    "StudyRun",
    "ThresholdResult",
    "TopicCheckResult",
    "cache_stats",
    "calibrate_prompt",
    "calibrate_prompt_file",
    "calibrate_threshold",
    "certify_adaptive",
    "certify_claim_file",
    "certify_run",
    "certify_run_claims",
    "check_writable",
    "dry_run",
    "dry_run_strength",
    "filter_claim_file",
    "probe",
    "report",
    "run",
    "run_strength",
    "score",
    "simulate_adaptive",
    "strength_agreement",
    "study",
    "topic_check",
    "write_missing_similarities",
]

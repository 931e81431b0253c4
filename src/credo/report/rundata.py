"""A run folder read back from disk: everything the report needs, no model (design.md).

:func:`load_run` reads ``config.yaml``, ``metrics.json``, ``scores.jsonl``,
``samples.jsonl`` and ``perturbations.jsonl`` written by
:func:`credo.report.writer.write_run`, plus the optional outputs of the checks
(``topic_check.json``, ``threshold_calibration.json``, ``perturbation_similarity.json``,
``flip_rates.csv``). Methods are discovered, not assumed: they are the keys of
``metrics.json["methods"]`` followed by any other score column of ``scores.jsonl``. A score
that is missing, null or not a number (a method "not available on this backend") is NaN
and the item is left out of that method's metrics.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from credo.errors import UserError
from credo.ties import settle_scores

SIMILARITY_FILE = "perturbation_similarity.json"
STATUS_FILE = "run_status.json"
"""Written last by the run writer: ``{"status": "complete" | "incomplete", ...}``."""
CLAIMS_FILE = "claims.jsonl"
"""A long-form run's claims: one row per item in the claim-file layout
(:func:`credo.tasks.claims.read_claims`): id, prompt, answer, claims (text, label, scores)."""
CLAIM_METRICS_FILE = "claim_metrics.json"
"""The claim methods' metrics, the retained shares per alpha, the unavailable methods."""
OPTIONAL_JSON = (
    "topic_check.json", "threshold_calibration.json", SIMILARITY_FILE, CLAIM_METRICS_FILE,
    STATUS_FILE
)
READ_FILES = ("config.yaml", "metrics.json", "scores.jsonl", "samples.jsonl",
              "perturbations.jsonl", CLAIMS_FILE, *OPTIONAL_JSON)
"""The files :func:`load_run` reads: what no command may write over while it reads them."""
FLIP_RATE_COLUMNS = ("model", "perturbation_type", "strength", "n", "flips", "rate", "low", "high")


class RunFolderError(UserError):
    """A run folder file is missing or malformed; the message names the file and line."""


@dataclass
class RunData:
    """One run folder in memory."""

    path: Path
    config: dict[str, Any]
    metrics: dict[str, Any]
    scores: list[dict[str, Any]]
    samples: list[dict[str, Any]]
    perturbations: list[dict[str, Any]]
    extras: dict[str, Any] = field(default_factory=dict)
    #: ``claims.jsonl`` rows; empty for a run without claims.
    claims: list[dict[str, Any]] = field(default_factory=list)

    @property
    def status(self) -> str:
        """``complete``, ``incomplete`` (items whose requests failed; a rerun completes
        them) or ``interrupted`` (no status marker: the writer did not finish, or an older
        credo wrote the folder)."""
        marker = self.extras.get(STATUS_FILE)
        return str(marker.get("status", "interrupted")) if marker else "interrupted"

    @property
    def missing_files(self) -> list[str]:
        """The files the status marker lists (``files``) that the folder
        lacks: empty for a whole folder and for a marker without the list."""
        marker = self.extras.get(STATUS_FILE)
        listed = marker.get("files") if isinstance(marker, dict) else None
        if not isinstance(listed, list):
            return []
        return [str(f) for f in listed if not (self.path / str(f)).is_file()]

    @property
    def name(self) -> str:
        """The folder's name."""
        return self.path.name

    @property
    def task(self) -> str:
        """The task spec (``gsm8k``, ``mmlu:high_school_statistics``...)."""
        return str(self.metrics.get("task") or self.config.get("task") or "?")

    @property
    def model(self) -> str:
        """The model as configured (the full identity is ``metrics["model"]``)."""
        return str(self.config.get("model") or self.metrics.get("model") or "?")

    @property
    def given(self) -> str | None:
        """The layout of the generations a ``credo score`` folder scored (``inspect_ai``,
        ``lm-evaluation-harness``, ``credo``); None for a ``credo run`` folder."""
        stats = self.metrics.get("stats")
        layout = stats.get("given_layout") if isinstance(stats, dict) else None
        return str(layout) if layout else None

    @property
    def label(self) -> str:
        """``task · model`` for table headers."""
        return f"{self.task} · {self.model}"

    @property
    def methods(self) -> list[str]:
        """Method names: metrics.json order first, then other score columns."""
        names = list((self.metrics.get("methods") or {}).keys())
        for row in self.scores:
            for k in (row.get("scores") or {}):
                if k not in names:
                    names.append(k)
        return names

    @property
    def item_ids(self) -> list[str]:
        """Item ids in scores.jsonl order."""
        return [str(r["id"]) for r in self.scores]

    @property
    def performance(self) -> np.ndarray:
        """p̄ per item (mean correctness of the original samples)."""
        return np.array([_num(r.get("p_bar")) for r in self.scores], dtype=float)

    @property
    def answer_correct(self) -> np.ndarray:
        """Whether the answer credo gives each item is correct (1, 0, a grade in between;
        NaN when unknown): scores.jsonl's ``answer_correct``."""
        return np.array([_num(r.get("answer_correct")) for r in self.scores], dtype=float)

    @property
    def coverage(self) -> dict[str, dict[str, dict[str, Any]]]:
        """metrics.json's ``coverage_at_risk``; empty when absent."""
        found = self.metrics.get("coverage_at_risk")
        return found if isinstance(found, dict) else {}

    @property
    def degenerate(self) -> dict[str, str]:
        """metrics.json's ``degenerate``: why a method's scores are degenerate here."""
        found = self.metrics.get("degenerate")
        return found if isinstance(found, dict) else {}

    def score(self, method: str) -> np.ndarray:
        """The method's score per item, settled (:func:`credo.ties.settle`); NaN where it
        has none."""
        return settle_scores(
            np.array([_num((r.get("scores") or {}).get(method)) for r in self.scores]))

    def method_note(self, method: str) -> str:
        """Non-numeric entries of metrics.json for ``method`` (e.g. why it is not available)."""
        d = (self.metrics.get("methods") or {}).get(method) or {}
        if not isinstance(d, dict):
            return str(d)
        return "; ".join(f"{k}: {v}" for k, v in d.items() if isinstance(v, str))

    @property
    def m_drawn(self) -> int | None:
        """The most perturbed samples an item holds in samples.jsonl (0 when none does);
        None for a folder without samples.jsonl (the config's m is all it says)."""
        if not self.samples:
            return None
        counts: dict[str, int] = {}
        for s in self.samples:
            if s.get("set") == "perturbed":
                counts[str(s.get("id"))] = counts.get(str(s.get("id")), 0) + 1
        return max(counts.values(), default=0)

    def sample_sets(self) -> list[str]:
        """The sample-set names present in samples.jsonl (original, perturbed, ...)."""
        return list(dict.fromkeys(str(s.get("set")) for s in self.samples))

    def kept_perturbations(self) -> list[list[str]]:
        """The kept context prefixes of every item (perturbations.jsonl)."""
        return [list(p.get("kept") or []) for p in self.perturbations]


def load_run(path: str | Path) -> RunData:
    """Read a run folder; a missing core file or a malformed line raises RunFolderError."""
    p = Path(path)
    if not p.is_dir():
        raise RunFolderError(f"{p}: not a run folder (no such directory)")
    for required in ("metrics.json", "scores.jsonl"):
        if not (p / required).is_file():
            raise RunFolderError(f"{p / required}: missing; is {p} a credo run folder?")
    config = _read_config(p / "config.yaml")
    metrics = _read_json(p / "metrics.json")
    scores = list(_read_jsonl(p / "scores.jsonl"))
    for n, row in enumerate(scores, 1):
        if "id" not in row:
            raise RunFolderError(f"{p / 'scores.jsonl'}:{n}: row has no 'id'")
    return RunData(
        p,
        config,
        metrics,
        scores,
        _read_optional_jsonl(p / "samples.jsonl"),
        _read_optional_jsonl(p / "perturbations.jsonl"),
        _read_extras(p),
        _read_optional_jsonl(p / CLAIMS_FILE),
    )


def read_flip_rates(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a strength run's ``flip_rates.csv``.

    Columns: model, perturbation_type, strength, n, flips, rate, low, high (Le et al.'s flip
    rate per strength bin with its CI). ``strength`` stays a string when it is not a
    number (a judge's level name); the numeric columns must parse.
    """
    p = Path(path)
    with p.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = [c for c in FLIP_RATE_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise RunFolderError(
                f"{p}:1: missing columns {missing}; need {list(FLIP_RATE_COLUMNS)}"
            )
        rows = []
        for line, r in enumerate(reader, 2):
            try:
                strength: float | str = float(r["strength"])
            except ValueError:
                strength = r["strength"]
            try:
                rows.append(
                    {
                        "model": r["model"],
                        "perturbation_type": r["perturbation_type"],
                        "strength": strength,
                        "n": int(float(r["n"])),
                        "flips": int(float(r["flips"])),
                        "rate": float(r["rate"]),
                        "low": _num(r["low"]),
                        "high": _num(r["high"]),
                    }
                )
            except (TypeError, ValueError) as e:
                raise RunFolderError(f"{p}:{line}: {e}") from e
    return rows


def _read_config(path: Path) -> dict[str, Any]:
    """``config.yaml`` as a dict; empty when the folder has none. A file that is not a
    YAML mapping is one line naming it and the line
    (:func:`credo.config.read_yaml_mapping`, as ``credo run --config`` reads one)."""
    from credo.config import read_yaml_mapping

    if not path.is_file():
        return {}
    try:
        return read_yaml_mapping(path)
    except UserError as e:
        raise RunFolderError(str(e)) from None


def _read_extras(p: Path) -> dict[str, Any]:
    """The optional outputs of the checks present in the folder, by file name."""
    extras: dict[str, Any] = {name: _read_json(p / name) for name in OPTIONAL_JSON
                              if (p / name).is_file()}
    if (p / "flip_rates.csv").is_file():
        extras["flip_rates.csv"] = read_flip_rates(p / "flip_rates.csv")
    return extras


def _read_optional_jsonl(path: Path) -> list[dict[str, Any]]:
    """The rows of a JSONL file the folder may lack (empty then)."""
    return list(_read_jsonl(path)) if path.is_file() else []


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise RunFolderError(f"{path}:{e.lineno}: not valid JSON: {e.msg}") from e
    if not isinstance(data, dict):
        raise RunFolderError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def _read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """The objects of a run folder's JSONL file; a bad line is a :class:`RunFolderError`."""
    from credo.tasks.loaders import DatasetError, read_jsonl

    try:
        for _, row in read_jsonl(path):
            yield dict(row)
    except DatasetError as e:
        raise RunFolderError(str(e)) from e


def _num(x: Any) -> float:
    if isinstance(x, bool) or x is None:
        return math.nan
    if isinstance(x, int | float):
        return float(x)
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan

"""Where configs come from and where their cache goes: the default cache paths, a YAML
config file read as a mapping, a validation error in one line, and the base every
top-level config (run, strength, study) shares."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Self

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from credo.errors import UserError


def default_cache_dir() -> Path:
    """``$CREDO_CACHE_DIR`` or ``~/.cache/credo``: the generation and embedding caches."""
    return Path(os.environ.get("CREDO_CACHE_DIR", Path.home() / ".cache" / "credo"))


def default_cache_path(cache: str | Path | None = None) -> Path:
    """The SQLite generation cache: ``cache`` when given, else the default one. The one
    place the default is computed."""
    return Path(cache) if cache else default_cache_dir() / "generations.sqlite"



_YAML_VALUE_ERRORS = (ValueError, TypeError, KeyError, AttributeError)
"""What PyYAML's safe constructors raise, besides a YAMLError, for a scalar that does not
fit its tag or implicit type (``2020-13-01``, ``!!int abc``, ``!!bool x``, ``!!timestamp
x``); the text is at fault, so it is a user error."""


def read_yaml_mapping(path: str | Path) -> dict[str, Any]:
    """The mapping a YAML config file holds; a :class:`UserError` names the file (and the
    line, where one applies) otherwise: unreadable, not UTF-8, not YAML, not a mapping."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise UserError(f"{p}: cannot read the config file ({e.strerror or e})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise UserError(f"{p}:{line}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{p}:{mark.line + 1}" if mark is not None else str(p)
        problem = " ".join(str(getattr(e, "problem", None) or e).split())
        raise UserError(f"{where}: not valid YAML: {problem}") from None
    except RecursionError:
        raise UserError(f"{p}: not valid YAML: nested too deeply to read") from None
    except _YAML_VALUE_ERRORS as e:
        raise UserError(f"{p}: not valid YAML: a value does not fit its type ({e})") from None
    if not isinstance(data, dict):
        raise UserError(f"{p}: a config must be a mapping, got {type(data).__name__}")
    return data


def validation_message(error: ValidationError, source: str = "") -> str:
    """A pydantic validation error in one line: the first bad field's dotted path and
    what is wrong with it (``sampling.temprature: extra inputs are not permitted``), the
    number of other problems, and ``source`` (a config file, "flags") in front."""
    problems = error.errors()
    first = problems[0]
    loc = ".".join(str(x) for x in first.get("loc", ())) or "config"
    message = f"{loc}: {first.get('msg', 'invalid')}"
    if "input" in first and first.get("type") != "extra_forbidden" and not isinstance(
        first["input"], dict
    ):
        message += f" (got {first['input']!r})"
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"{source + ': ' if source else ''}{message}{more}"


Seed = Annotated[int, Field(ge=0, description="the run seed: part of every request key")]
"""The ``seed`` field of a config that generates (a run's, a strength run's)."""
MaxBlock = Annotated[int, Field(ge=1, description="most samples in one backend call")]
"""The ``max_block`` field of a config that generates."""
MaxCostUsd = Annotated[float | None, Field(
    gt=0,
    description="stop dispatching requests once this run's generations cost this much "
    "(US dollars, from the price_* options of its models; credo.generation.ledger); the run "
    "folder is written with the rest incomplete (exit 3) and a rerun resumes; part of no "
    "request",
)]
"""The ``max_cost_usd`` field of a config that generates (None: no budget)."""


class ConfigFile(BaseModel):
    """What every top-level config shares: unknown keys are errors, the cache file, and
    loading from YAML. Fields stay in the subclasses (their order is the order of the
    run folder's ``config.yaml``); each subclass declares ``cache``."""

    model_config = ConfigDict(extra="forbid")

    if TYPE_CHECKING:  # a field of every subclass, declared there
        cache: Path | None

    @property
    def cache_path(self) -> Path:
        """The SQLite cache file (:func:`default_cache_path` of ``cache``)."""
        return default_cache_path(self.cache)

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides: Any) -> Self:
        """Load a YAML config; ``overrides`` (non-None values) replace its fields."""
        data = read_yaml_mapping(path)
        data.update({k: v for k, v in overrides.items() if v is not None})
        return cls.model_validate(data)


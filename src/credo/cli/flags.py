"""Flags into a config: one helper for every command.

Each command that builds a config names its flags in a table, :class:`Flag` rows mapping
an argparse attribute to a config path (``"sampling.max_tokens"``) with an optional
conversion; :func:`config_from_flags` reads the YAML file (if any), writes every given
flag over it in the table's order and validates the result once with pydantic, so a flag
fails exactly as the YAML field it sets does. A flag that is absent (``None``) leaves the
file's value; a conversion may return :data:`SKIP` to leave it too.

The flags several commands declare alike (``--cache``, ``--quiet``, ``--dry-run``) are
declared by one function each (:func:`add_cache_flag`, ...), so their help reads the same
everywhere.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

__all__ = [
    "CACHE_HELP",
    "CALIBRATE_PROMPT_FLAGS",
    "EVALUATION_FLAGS",
    "EXECUTOR_FLAGS",
    "RUN_FLAGS",
    "SCORE_FLAGS",
    "SKIP",
    "STRENGTH_RUN_FLAGS",
    "STUDY_FLAGS",
    "Flag",
    "add_cache_flag",
    "add_dry_run_flag",
    "add_quiet_flag",
    "base_url_option",
    "config_from_flags",
    "item_limit",
    "merge_flags",
    "served_at",
]

SKIP: Any = object()
"""What a conversion returns for a flag that sets nothing (``--methods ""``)."""

C = TypeVar("C")


CACHE_HELP = "SQLite cache (default ~/.cache/credo)"
"""``--cache``'s help where the command reads the default cache."""


def add_cache_flag(p: argparse.ArgumentParser, help: str = CACHE_HELP) -> None:
    """``--cache PATH``: the SQLite generation cache (``help``: where the default is)."""
    p.add_argument("--cache", type=Path, help=help)


def add_quiet_flag(p: argparse.ArgumentParser) -> None:
    """``--quiet``: no progress bars."""
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def add_dry_run_flag(p: argparse.ArgumentParser) -> None:
    """``--dry-run``: the plan and its cost, no model called."""
    p.add_argument("--dry-run", action="store_true",
                   help="print the planned requests, samples, tokens and cost per stage (and "
                   "what is cached) without calling any model")


def item_limit(text: str) -> int | str:
    """The value of ``--limit``: a number of items (at least 1) or ``all`` (every item,
    the config's ``limit: null``)."""
    if text.strip().lower() == "all":
        return "all"
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither a number of items (1 or more) nor all")
    return value


@dataclass(frozen=True)
class Flag:
    """One flag of a command: its argparse attribute ``dest``, the config ``path`` it sets
    (dotted: ``"perturbation.rules"``; empty: the top-level field named ``dest``) and how
    its value becomes the field's."""

    dest: str
    path: str = ""
    convert: Callable[[Any], Any] | None = None
    old_names: tuple[str, ...] = ()
    """Deprecated names of the field (beside it in its section) that the flag replaces
    too: a file's ``perturbation.generator`` gives way to ``--writer``."""

    def __post_init__(self) -> None:
        """An empty ``path`` is the field named ``dest``."""
        if not self.path:
            object.__setattr__(self, "path", self.dest)


def merge_flags(
    data: dict[str, Any], args: argparse.Namespace, table: Sequence[Flag]
) -> dict[str, Any]:
    """``data`` (a config mapping, changed in place and returned) with every flag of
    ``table`` that ``args`` gives written at its path; a section (``sampling``) keeps its
    other keys."""
    for flag in table:
        value = getattr(args, flag.dest, None)
        if value is None:
            continue
        if flag.convert is not None:
            value = flag.convert(value)
            if value is SKIP:
                continue
        *sections, key = flag.path.split(".")
        target = data
        for section in sections:
            target[section] = {**(target.get(section) or {})}
            target = target[section]
        for old in flag.old_names:
            target.pop(old, None)
        target[key] = value
    return data


def config_from_flags(
    model: type[C],
    args: argparse.Namespace,
    table: Sequence[Flag],
    *,
    config: Path | None = None,
    prefix: str = "",
    where: str | None = None,
    then: Callable[[dict[str, Any]], None] | None = None,
) -> C:
    """The config ``model`` from the YAML file ``config`` (if any) with the flags of
    ``table`` written over it, validated once. ``then`` changes the merged mapping in
    place before it is validated (a flag that sets several fields, as
    :func:`served_at`). A bad field is a :class:`~credo.errors.UserError`: ``prefix``
    then the field and ``where`` it came from (default: the file, or ``options``)."""
    from pydantic import ValidationError

    from credo.config import read_yaml_mapping, validation_message
    from credo.errors import UserError

    data: dict[str, Any] = read_yaml_mapping(config) if config else {}
    merge_flags(data, args, table)
    if then is not None:
        then(data)
    try:
        return model.model_validate(data)  # type: ignore[attr-defined]
    except ValidationError as e:
        raise UserError(prefix + validation_message(e, where or str(config or "options"))) \
            from None


def base_url_option(values: list[str] | None) -> str | list[str] | None:
    """``--base-url`` given once or more, each maybe comma-separated: one URL stays a
    string (as in a YAML config), several are a list of replicas."""
    urls = [u.strip() for v in values or () for u in v.split(",") if u.strip()]
    if not urls:
        return None
    return urls[0] if len(urls) == 1 else urls


SERVED_ROLES = ("models", "writer", "judge")
"""The roles of a strength config that may be served models (``surprisal_model`` is an
embedded one)."""


def served_at(data: dict[str, Any], urls: str | list[str]) -> None:
    """``--base-url`` of ``credo strength run``: every served model (an ``openai:`` spec)
    among the strength config mapping ``data``'s models under test, writer and judge
    that names no ``base_url`` of its own is served at ``urls`` (one URL, or replicas);
    changed in place. A role given as a bare spec becomes a role mapping. A
    :class:`~credo.errors.UserError` when no role takes it (the URL would be ignored)."""
    from credo.errors import UserError

    taken = 0

    def at(role: Any) -> Any:
        nonlocal taken
        spec = role.get("model") if isinstance(role, dict) else role
        if not (isinstance(spec, str) and spec.startswith("openai:")) or (
                isinstance(role, dict) and role.get("base_url")):
            return role
        taken += 1
        return {**role, "base_url": urls} if isinstance(role, dict) else \
            {"model": spec, "base_url": urls}

    for key in SERVED_ROLES:
        value = data.get(key)
        if isinstance(value, list):
            data[key] = [at(role) for role in value]
        elif value is not None:
            data[key] = at(value)
    if not taken:
        raise UserError("--base-url: no served model (openai:<model>) without a base_url "
                        "of its own among the models, the writer and the judge to serve "
                        "from it")


def _base_urls(values: list[str]) -> Any:
    found = base_url_option(values)
    return SKIP if found is None else found


def _names(value: str) -> list[str]:
    """``a, b,c`` -> ``[a, b, c]``."""
    return [s.strip() for s in value.split(",") if s.strip()]


def _names_if_given(value: str) -> Any:
    """:func:`_names`, or :data:`SKIP` for an empty flag."""
    return _names(value) if value else SKIP


def _text_if_given(value: str) -> Any:
    return value if value else SKIP


def _fields(value: str) -> str | list[str]:
    """A field flag: ``a,b`` names several fields, ``a`` one."""
    names = _names(value)
    return names[0] if len(names) == 1 else names


def _none_word(value: str) -> str | None:
    """``none`` (any case) is no model."""
    return None if value.lower() == "none" else value


EXECUTOR_FLAGS: tuple[Flag, ...] = (
    Flag("executor", "executor.kind"),
    Flag("workers", "executor.workers"),
    Flag("ray_address", "executor.address"),
)
"""``--executor``, ``--workers``, ``--ray-address``: the config's ``executor`` section."""

EVALUATION_FLAGS: tuple[Flag, ...] = (
    Flag("methods", convert=_names_if_given),
    Flag("kernel"),
    Flag("bootstrap"),
    Flag("calibrate"),
    Flag("combine", "combine.methods", _names_if_given),
    Flag("combine_model", "combine.model"),
    Flag("calibrated_by", "combine.calibration"),
    Flag("certificate"),
    Flag("seed"),
    Flag("out"),
    Flag("cache"),
)
"""The flags ``credo run`` and ``credo score`` share: the methods and kernel scored, how
the metrics are reported, the certificate applied, the seed, the run folder and the
cache (the same fields of a :class:`~credo.config.RunConfig`)."""

RUN_FLAGS: tuple[Flag, ...] = (
    Flag("task"),
    Flag("model"),
    Flag("n"),
    Flag("m"),
    Flag("limit"),
    Flag("prompt_style"),
    *EVALUATION_FLAGS,
    Flag("max_cost_usd"),
    Flag("max_tokens", "sampling.max_tokens"),
    Flag("base_url", "model_options.base_url", _base_urls),
    Flag("label", "model_options.label"),
    Flag("followups", "baselines.followups"),
    Flag("corpus", "perturbation.corpus"),
    Flag("writer", "perturbation.writer", old_names=("generator",)),
    Flag("writer_prompt", "perturbation.prompt"),
    Flag("judge", "judge.model"),
    Flag("prefix_rules", "perturbation.rules"),
    Flag("neutrality", "perturbation.neutrality"),
    Flag("adaptive", "adaptive.rule"),
    Flag("adaptive_epsilon", "adaptive.epsilon"),
    Flag("adaptive_threshold", "adaptive.threshold"),
    *EXECUTOR_FLAGS,
    Flag("task_file", "task_file.path"),
    Flag("answer_format", "task_file.format"),
    Flag("question_field", "task_file.question", _fields),
    Flag("choices_field", "task_file.choices", _fields),
    Flag("gold_field", "task_file.gold"),
    Flag("gold_is_index", "task_file.gold_is_index"),
    Flag("id_field", "task_file.id"),
    Flag("domain", "task_file.domain"),
    Flag("grader", "task_file.grader"),
    Flag("task_family", "task_file.family"),
    Flag("claims", "claims.methods", _names_if_given),
    Flag("claim_split", "claims.split"),
    Flag("num_fewshot", "lm_eval.num_fewshot"),
    Flag("include_path", "lm_eval.include_path", lambda v: [str(p) for p in v]),
)
"""``credo run``'s flags over a :class:`~credo.config.RunConfig`."""

SCORE_FLAGS: tuple[Flag, ...] = (
    *EVALUATION_FLAGS,
    Flag("judge", "judge.model", _text_if_given),
)
"""``credo score``'s flags over a :class:`~credo.config.RunConfig`."""

STUDY_FLAGS: tuple[Flag, ...] = (
    Flag("out"),
    Flag("cache"),
    *EXECUTOR_FLAGS,
)
"""``credo study``'s flags over a :class:`~credo.config.StudyConfig`."""

STRENGTH_RUN_FLAGS: tuple[Flag, ...] = (
    Flag("task"),
    Flag("limit"),
    Flag("model", "models", _names),
    Flag("judge"),
    Flag("writer"),
    Flag("surprisal_model", convert=_none_word),
    Flag("types", convert=_names),
    Flag("cot_mode"),
    Flag("seed"),
    Flag("out"),
    Flag("cache"),
    Flag("max_cost_usd"),
)
"""``credo strength run``'s flags over a :class:`~credo.config.StrengthConfig`."""

CALIBRATE_PROMPT_FLAGS: tuple[Flag, ...] = ()
"""``credo perturb calibrate-prompt`` takes its config from the file alone."""

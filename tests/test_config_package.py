"""The configuration in pieces: ``credo.config`` is a package of small modules, every
name it exported as one module still imports from it, the renamed keys and keywords
are read under their new names with a warning, a run folder written before a rename
still reads, and the gateway's records are built by keyword only."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import warnings
from pathlib import Path

import pytest
import yaml

import credo.config
from credo.config import (
    DEPRECATED_KEYWORDS,
    RUN_RENAMES,
    PerturbationConfig,
    RunConfig,
    StudyConfig,
    current_names,
    renamed_keyword,
)

PACKAGE = Path(credo.config.__file__).parent

NAMES_BEFORE_THE_SPLIT = (
    "AdaptiveConfig", "AdaptiveScore", "AnswerFormatName", "BaselineConfig", "ClaimsConfig",
    "CombineConfig", "DEFAULT_LIMIT", "DEFAULT_MODEL_OPTIONS", "DEFAULT_SURPRISAL_MODEL",
    "DEPRECATED_KEYWORDS", "DEPRECATED_SINCE", "EvaluationConfig", "ExecutorConfig",
    "JudgeConfig", "LmEvalConfig", "PerturbationConfig", "PerturbationKind", "PromptStyle",
    "REMOVED_IN", "ROLE_OPTION_FIELDS", "RoleConfig", "RunConfig", "STUDY_RUN_FIXED",
    "StrengthConfig", "StudyConfig", "StudyModel", "TaskFileConfig", "default_cache_dir",
    "default_cache_path", "read_yaml_mapping", "reads_own_file", "renamed_keys",
    "renamed_keyword", "slug", "validation_message", "with_fitted",
)
"""Every public name of the single ``credo/config.py`` module the package replaced."""


def test_every_module_of_the_package_is_at_most_300_lines():
    modules = sorted(PACKAGE.glob("*.py"))
    assert len(modules) >= 10  # a package of pieces, not one module moved
    for path in modules:
        lines = len(path.read_text(encoding="utf-8").splitlines())
        assert lines <= 300, f"{path.name} has {lines} lines"


@pytest.mark.parametrize("name", NAMES_BEFORE_THE_SPLIT)
def test_every_name_importable_before_imports_from_the_package(name):
    namespace: dict[str, object] = {}
    exec(f"from credo.config import {name}", namespace)
    assert namespace[name] is getattr(credo.config, name)
    assert name in credo.config.__all__


def test_every_exported_name_comes_from_a_module_of_the_package():
    modules = [importlib.import_module(f"credo.config.{m.name}")
               for m in pkgutil.iter_modules([str(PACKAGE)])]
    for name in credo.config.__all__:
        owners = [m for m in modules if name in vars(m)]
        assert owners, f"{name} is defined in no module of credo.config"
    classes = [getattr(credo.config, n) for n in credo.config.__all__
               if isinstance(getattr(credo.config, n), type)]
    assert all(c.__module__.startswith("credo.config.") for c in classes)


def _caught(make):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = make()
    return value, [w for w in caught if issubclass(w.category, DeprecationWarning)]


def test_kernel_embedder_reads_as_embedder_with_a_warning():
    config, caught = _caught(lambda: RunConfig.model_validate({"kernel_embedder": "e5"}))
    assert config.embedder == "e5"
    assert "kernel_embedder" not in config.model_dump()
    assert len(caught) == 1 and "call it embedder" in str(caught[0].message)
    assert RUN_RENAMES["kernel_embedder"] == "embedder"
    assert set(RUN_RENAMES.values()) <= set(RunConfig.model_fields)
    _, none = _caught(lambda: RunConfig.model_validate({"embedder": "e5"}))
    assert none == []


def test_both_names_of_one_key_are_refused():
    with pytest.raises(ValueError, match="embedder is given twice"):
        RunConfig.model_validate({"kernel_embedder": "a", "embedder": "b"})


def test_the_old_attribute_reads_the_new_field_with_a_warning():
    value, caught = _caught(lambda: RunConfig(embedder="e5").kernel_embedder)
    assert value == "e5" and len(caught) == 1


def test_the_sections_old_keys_read_through_the_same_mechanism():
    config, caught = _caught(lambda: PerturbationConfig.model_validate({"generator": "w"}))
    assert config.writer is not None and config.writer.model == "w"
    assert len(caught) == 1 and "perturbation.generator" in str(caught[0].message)


def test_an_old_run_folders_config_maps_old_keys_silently_first():
    old = {"task": "gsm8k", "kernel_embedder": "e5", "not_a_field": 1}
    mapped = current_names(old, RUN_RENAMES)
    assert mapped == {"task": "gsm8k", "embedder": "e5", "not_a_field": 1}
    assert current_names({"kernel_embedder": "a", "embedder": "b"}, RUN_RENAMES) == {
        "embedder": "b"}
    assert old["kernel_embedder"] == "e5"  # the mapping read is left as it was


def _folder_config():
    """The function reading a run folder's config.yaml back as a RunConfig, wherever the
    application layer keeps it."""
    for home in ("credo.entry", "credo.app"):
        try:
            module = importlib.import_module(home)
        except ImportError:
            continue
        names = [home] + [i.name for i in pkgutil.walk_packages(
            getattr(module, "__path__", []), f"{home}.")]
        for name in names:
            found = getattr(importlib.import_module(name), "folder_config", None)
            if found is not None:
                return found
    raise AssertionError("no module of credo reads a run folder's config back")


def test_an_old_run_folder_reads_back_with_its_embedder(tmp_path):
    from credo.report.rundata import load_run

    dumped = RunConfig(out=tmp_path).model_dump(mode="json")
    del dumped["embedder"]
    dumped["kernel_embedder"] = "all-mpnet-base-v2"  # as an older credo wrote it
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(dumped, sort_keys=False))
    (tmp_path / "metrics.json").write_text("{}")
    (tmp_path / "scores.jsonl").write_text("")
    config, caught = _caught(lambda: _folder_config()(load_run(tmp_path)))
    assert config.embedder == "all-mpnet-base-v2" and caught == []


def test_a_study_reads_the_old_key_in_its_run_section():
    study, caught = _caught(lambda: StudyConfig.model_validate(
        {"tasks": ["gsm8k"], "models": ["m"], "run": {"kernel_embedder": "e5"}}))
    assert [c.embedder for c in study.run_configs()] == ["e5"]
    assert caught


def test_max_batch_is_max_concurrents_old_keyword():
    assert DEPRECATED_KEYWORDS["max_batch"] == "max_concurrent"
    value, caught = _caught(lambda: renamed_keyword(None, 3, "max_batch"))
    assert value == 3 and "pass max_concurrent=" in str(caught[0].message)
    with pytest.raises(TypeError, match="max_concurrent= and max_batch="):
        renamed_keyword(4, 3, "max_batch")


@pytest.mark.parametrize("record", ["Decision", "Upstream", "GuardAnswer", "Settled"])
def test_the_gateways_records_are_built_by_keyword_only(record):
    from credo.pipeline import gateway
    from credo.serve import guard

    cls = getattr(gateway, record, None) or getattr(guard, record)
    fields = dataclasses.fields(cls)
    assert fields and all(f.kw_only for f in fields)
    with pytest.raises(TypeError):
        cls(*[None] * len(fields))


def test_a_decision_built_by_keyword_reads_through_its_answer():
    from credo.pipeline.gateway import Decision, Upstream
    from credo.serve.guard import GuardAnswer

    decision = Decision(question="2+2?", answer="4", text="4", score=0.9, accept=True,
                        samples=8, full_samples=8, upstream=Upstream(calls=2))
    answer = GuardAnswer(id="r1", decision=decision, reply="4", method="c3",
                         threshold=0.5, alpha=0.1, delta=0.1, procedure="ltt",
                         certificate="c", seconds=1.0)
    assert (answer.answer, answer.accept, answer.samples) == ("4", True, 8)
    assert answer.to_json()["usage"]["calls"] == 2


@pytest.mark.parametrize("bad", [{"base_url": 5}, {"label": ""}, {"max_concurrency": 0},
                                 {"price_prompt_usd_per_mtok": -1}, {"api_key_env": ""}])
def test_the_model_under_tests_served_options_are_typed_as_every_roles(bad):
    from pydantic import ValidationError

    from credo.config import RoleConfig, validation_message

    with pytest.raises(ValidationError) as run_error:
        RunConfig(model="openai:q", model_options=bad)
    with pytest.raises(ValidationError):
        RoleConfig(model="openai:q", **bad)
    assert f"model_options: Value error, {next(iter(bad))}" in validation_message(
        run_error.value)


def test_served_options_stay_in_model_options_as_config_yaml_records_them():
    options = {"base_url": ["http://a/v1", "http://b/v1"], "label": "r1", "n_ctx": 512}
    config = RunConfig(model="openai:q", model_options=options)
    assert config.model_dump()["model_options"] == options
    role = config.model_role
    assert (role.base_url, role.label, role.model_options) == (
        ["http://a/v1", "http://b/v1"], "r1", {"n_ctx": 512})
    mapped = RunConfig.model_validate({"model": {
        "model": "openai:q", "base_url": options["base_url"], "label": "r1",
        "model_options": {"n_ctx": 512}}})
    assert mapped.model_dump() == config.model_dump()


def test_the_configuration_reference_lists_every_old_name():
    import sys

    from credo.config import CONFIG_RENAMES

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docs" / "gen"))
    import reference

    page = reference.config_page()
    rows = [(f"{section}{old}", f"{section}{new}") for section, renames in
            CONFIG_RENAMES.items() for old, new in renames.items()]
    assert ("kernel_embedder", "embedder") in rows
    for old, new in rows:
        assert f"| `{old}` | `{new}` |" in page

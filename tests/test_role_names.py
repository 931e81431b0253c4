"""One name per role (issue 31, item 3): the perturbation writer is ``writer`` in the
command line, the config, the Python API and the report; the names it had before
(``generator`` in a config, ``perturber`` in the API; ``paraphrase_generator`` for the
paraphraser) keep working for one release with a DeprecationWarning."""

from __future__ import annotations

import argparse
import inspect
import re
import warnings

import pytest
import yaml

import credo
import credo.api
from credo.config import DEPRECATED_KEYWORDS, RunConfig, StudyConfig

OLD_NAMES = {"perturber", "generator", "paraphrase_generator"}


def _public_callables():
    """Every callable of ``credo.__all__`` and ``credo.api.__all__`` (pydantic configs:
    their fields are their signature)."""
    seen = {}
    for module, names in ((credo, credo.__all__), (credo.api, credo.api.__all__)):
        for name in names:
            value = getattr(module, name)
            if callable(value):
                seen[f"{module.__name__}.{name}"] = value
    return seen


def _parameters(value) -> list[str]:
    """The keywords ``value`` takes: its parameters, with ``**kw: Unpack[TD]`` read as
    the keys of the TypedDict ``TD`` (PEP 692)."""
    fields = getattr(value, "model_fields", None)
    if fields is not None:
        return list(fields)
    try:
        params = inspect.signature(value).parameters
    except (TypeError, ValueError):  # a builtin without a signature
        return []
    names = []
    for p in params.values():
        unpacked = re.fullmatch(r"Unpack\[(?:\w+\.)*(\w+)\]", str(p.annotation))
        if p.kind is p.VAR_KEYWORD and unpacked:
            typed = getattr(credo.api, unpacked.group(1))
            names += sorted(typed.__optional_keys__ | typed.__required_keys__)
        else:
            names.append(p.name)
    return names


def test_no_public_signature_names_the_writer_by_an_old_name_but_as_an_alias():
    found = {}
    for where, value in _public_callables().items():
        old = [p for p in _parameters(value) if p in OLD_NAMES]
        if old:
            found[where] = old
    assert found, "the deprecated alias perturber= is expected on credo.run at least"
    for where, old in found.items():
        for name in old:
            assert name in DEPRECATED_KEYWORDS, f"{where} takes {name}= (not an alias)"
            assert DEPRECATED_KEYWORDS[name] in _parameters(_public_callables()[where]), (
                f"{where} takes the deprecated {name}= without its new name"
            )
    # no config class takes an old name as a field
    for config in (RunConfig, StudyConfig, credo.PerturbationConfig):
        assert not OLD_NAMES & set(_parameters(config))


def test_the_deprecated_keyword_warns_and_means_the_writer(tmp_path, bow_embedder):
    from conftest import context_writer, toy_respond, toy_task
    from credo.models.scripted import ScriptedModel

    task, respond = toy_task("easy", "fragile"), toy_respond

    cfg = RunConfig(task="toy", n=2, m=2, limit=None, bootstrap=0, methods=["c3"],
                    cache=tmp_path / "c.sqlite", out=tmp_path / "run")
    scripted = ScriptedModel(context_writer, name="w")
    with pytest.warns(DeprecationWarning,
                      match=r"perturber= is deprecated since credo 0\.1\.0 and goes in "
                      r"0\.2\.0; pass writer="):
        est = credo.api.dry_run(cfg, model=ScriptedModel(respond), perturber=scripted,
                                task=task)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same = credo.api.dry_run(cfg, model=ScriptedModel(respond), writer=scripted,
                                 task=task)
    assert est == same
    with pytest.raises(TypeError, match="both given"):
        credo.run(cfg, writer=scripted, perturber=scripted, task=task)


@pytest.mark.parametrize(("old", "new"), [
    ({"perturbation": {"generator": "qwen2.5-coder-0.5b", "max_rounds": 2}},
     {"perturbation": {"writer": "qwen2.5-coder-0.5b", "max_rounds": 2}}),
    ({"perturbation": {"generator": {"model": "openai:w", "base_url": "http://h:1/v1"}}},
     {"perturbation": {"writer": {"model": "openai:w", "base_url": "http://h:1/v1"}}}),
    ({"baselines": {"paraphrase_generator": "smollm2-135m"}},
     {"baselines": {"paraphraser": "smollm2-135m"}}),
])
def test_an_old_config_loads_with_a_warning_as_the_new_one(tmp_path, old, new):
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump({"model": "smollm2-135m", **old}))
    with pytest.warns(DeprecationWarning,
                      match=r"is deprecated since credo 0\.1\.0 and goes in 0\.2\.0; call it"):
        then = RunConfig.from_yaml(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        now = RunConfig.model_validate({"model": "smollm2-135m", **new})
    assert then == now
    assert then.model_dump(mode="json") == now.model_dump(mode="json")
    # the run folder's config.yaml says the new name, and reads back without a warning
    dumped = now.model_dump(mode="json")
    assert not OLD_NAMES & (set(dumped["perturbation"]) | set(dumped["baselines"]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert RunConfig.model_validate(dumped) == now
    # a study's shared run section too
    with pytest.warns(DeprecationWarning):
        study = StudyConfig.model_validate({"tasks": ["gsm8k"], "models": ["smollm2-135m"],
                                            "run": old})
    assert study.run_configs()[0].perturbation == now.perturbation


def test_the_writer_flag_replaces_a_files_old_name(tmp_path):
    """``--writer`` over a config file that names the writer ``generator``: the flag wins,
    as it did over the same field before the rename (no "given twice")."""
    from credo.cli.flags import RUN_FLAGS, config_from_flags

    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump({"perturbation": {"generator": "a", "max_rounds": 2}}))
    args = argparse.Namespace(writer="b")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the old name is gone before validation
        cfg = config_from_flags(RunConfig, args, RUN_FLAGS, config=path)
    assert cfg.perturbation.writer.model == "b" and cfg.perturbation.max_rounds == 2


def test_an_old_certificate_holds_for_the_renamed_paraphraser():
    from credo.pipeline.certificate import _current_names, mismatch

    old = {"baselines": {"paraphrase_generator": "p", "paraphrases": 5}, "n": 4}
    new = {"baselines": {"paraphrases": 5, "paraphraser": "p"}, "n": 4}
    assert mismatch(_current_names(old), new) is None
    assert mismatch(old, new) is not None  # what the normalisation is for


def test_the_model_under_test_is_a_role_with_one_base_url_check(tmp_path):
    """The model under test takes the role mapping every other role takes, and a
    ``base_url`` on an embedded model is refused by the one check every role passes
    (:func:`credo.generation.roles.assign_roles`), whichever way the config gives it."""
    from pathlib import Path

    from pydantic import ValidationError

    from credo.errors import UserError
    from credo.generation.pool import ModelPool
    from credo.generation.roles import assign_roles, run_roles

    url = "http://127.0.0.1:9/v1"
    for given in ({"model": "smollm2-135m", "model_options": {"base_url": url}},
                  {"model": {"model": "smollm2-135m", "base_url": url}}):
        cfg = RunConfig.model_validate({**given, "perturbation": {"writer": "openai:w"}})
        with ModelPool(cache_path=tmp_path / "c.sqlite", seed=0, show_progress=False,
                       reach=False) as pool, pytest.raises(UserError) as e:
            assign_roles(pool, run_roles(cfg))
        assert str(e.value) == ("the model 'smollm2-135m' is embedded: base_url is for served "
                                "models (openai:<model>)")
    with pytest.raises(ValidationError, match="names its model"):
        RunConfig.model_validate({"model": {"base_url": url}})
    with pytest.raises(ValidationError, match=r"model\.labl: Extra inputs"):
        RunConfig.model_validate({"model": {"model": "openai:x", "labl": "v1"}})
    # the flags (--base-url, --label write model_options) win over the file's mapping
    both = RunConfig.model_validate({"model": {"model": "openai:x", "base_url": url,
                                               "label": "a"},
                                     "model_options": {"label": "b"}})
    assert both.model_options == {"base_url": url, "label": "b"}
    # one place says it (issue 31: the check was written twice)
    src = Path(__file__).resolve().parents[1] / "src" / "credo"
    saying = [p for p in src.rglob("*.py") if "is for served models" in p.read_text()]
    assert [p.name for p in saying] == ["roles.py"]


def test_the_deprecation_versions_are_real_and_the_changelog_says_them():
    """The version old names are deprecated since is this package's (or an earlier
    release), the removal a later one, and CHANGELOG.md names both."""
    from pathlib import Path

    from packaging.version import Version

    from credo.config import DEPRECATED_SINCE, REMOVED_IN

    assert Version(DEPRECATED_SINCE) <= Version(credo.__version__) < Version(REMOVED_IN)
    changelog = (Path(__file__).resolve().parents[1] / "CHANGELOG.md").read_text()
    deprecated = changelog.split("### Deprecated", 1)[1].split("\n## ", 1)[0]
    assert DEPRECATED_SINCE in deprecated and REMOVED_IN in deprecated
    for old in ("perturbation.generator", "baselines.paraphrase_generator", "perturber="):
        assert old in deprecated


HANDED = {"model", "writer", "embedder", "task", "judge", "perturber"}


@pytest.mark.parametrize("name", ["run", "dry_run", "simulate_adaptive", "certify_adaptive"])
def test_run_like_commands_take_every_handed_model_by_keyword(name):
    """The models a caller hands in are declared once (``credo.api.HandedIn``) and every
    run-like command takes each of them, by the names its signature had before."""
    assert set(_parameters(getattr(credo.api, name))) >= HANDED
    assert set(_parameters(credo.api.study)) >= HANDED - {"model", "task"} | {"models"}


def test_a_misspelt_handed_model_is_pythons_type_error_before_anything_runs(tmp_path):
    cfg = RunConfig(task="toy", n=2, m=2, limit=None, bootstrap=0, methods=["c3"],
                    cache=tmp_path / "c.sqlite", out=tmp_path / "run")
    with pytest.raises(TypeError, match=r"^run\(\) got an unexpected keyword argument "
                                        r"'modle'$"):
        credo.run(cfg, modle=object())
    with pytest.raises(TypeError, match=r"^dry_run\(\) got an unexpected keyword"):
        credo.api.dry_run(cfg, jugde=object())
    study_cfg = StudyConfig(tasks=["toy"], models=["scripted:x"], out=tmp_path / "study",
                            cache=tmp_path / "c.sqlite")
    with pytest.raises(TypeError, match=r"^study\(\) got an unexpected keyword argument "
                                        r"'model'$"):
        credo.study(study_cfg, model=object())  # a study hands in models=
    assert not (tmp_path / "run").exists() and not (tmp_path / "study").exists()
    assert not (tmp_path / "c.sqlite").exists()

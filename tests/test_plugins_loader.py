"""Plug-ins found through the ``credo.plugins`` entry-point group (:mod:`credo.plugins`):
each test puts a fake installed distribution (a ``.dist-info`` folder with its
``entry_points.txt``, and the module it names) on ``sys.path``, as pip would, and reads
credo's registries."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from credo import plugins
from credo.cli import main
from credo.errors import UserError
from credo.registry import STOPPING_RULES, Registry, UnknownName, unload_plugins

SRC = Path(__file__).resolve().parents[1] / "src"


def _install(site: Path, dist: str, module: str, code: str, version: str = "1.0") -> None:
    """A distribution ``dist`` in ``site`` whose plug-in (entry point ``plug``) is
    ``module``, holding ``code``."""
    (site / f"{module}.py").write_text(textwrap.dedent(code), encoding="utf-8")
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n",
                                   encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[credo.plugins]\nplug = {module}\n",
                                           encoding="utf-8")


METHOD = """
from credo.methods.base import ORIGINAL, method

@method({name!r}, needs=(ORIGINAL,))
def scorer(samples, kernel):
    '''{summary}'''
    return {value}
"""


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A folder on ``sys.path`` to install fake distributions into; every plug-in's
    entry is removed after the test."""
    folder = tmp_path / "site"
    folder.mkdir()
    # the registries hold credo's own entries before any plug-in loads
    importlib.import_module("credo.methods")
    importlib.import_module("credo.tasks")
    importlib.import_module("credo.kernels")
    unload_plugins()
    monkeypatch.syspath_prepend(str(folder))
    importlib.invalidate_caches()
    yield folder
    unload_plugins()


def test_plugins_load_on_the_first_read_not_at_import(tmp_path):
    """A fresh process: ``import credo`` and the command line's parser import no
    plug-in; the first read of a registry imports it, once."""
    site = tmp_path / "site"
    site.mkdir()
    _install(site, "lazy-plug", "lazy_plug", METHOD.format(name="lazy", summary="lazy",
                                                          value=0.5)
             + "\nimport builtins\nbuiltins.LAZY_LOADS = getattr(builtins, 'LAZY_LOADS', 0) + 1\n")
    code = ("import sys, builtins; import credo, credo.cli; credo.cli._parser(); "
            "print('lazy_plug' in sys.modules); "
            "from credo.methods import METHODS; print('lazy_plug' in sys.modules); "
            "print('lazy' in METHODS, 'lazy' in METHODS, builtins.LAZY_LOADS)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={"PYTHONPATH": f"{SRC}:{site}", "PATH": "/usr/bin:/bin"},
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False", "True", "True", "1"]


def test_no_module_of_credo_reads_a_registry_on_import(tmp_path):
    """Importing every module of credo loads no plug-in: a registry read on import would
    import a plug-in while the module it imports from is half made."""
    site = tmp_path / "site"
    site.mkdir()
    _install(site, "watch-plug", "watch_plug", "")
    modules = sorted(
        ".".join(p.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__")
        for p in (SRC / "credo").rglob("*.py") if p.name != "_sandbox_child.py")
    code = (f"import importlib, sys\nfor m in {modules!r}:\n    importlib.import_module(m)\n"
            "print('watch_plug' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={"PYTHONPATH": f"{SRC}:{site}", "PATH": "/usr/bin:/bin"},
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == "False"


def test_a_free_name_is_bare_and_qualified(site):
    from credo.methods import METHODS, get_method

    _install(site, "Credo_Extra", "credo_extra_plug",
             METHOD.format(name="extra_share", summary="extra", value=0.25))
    assert "extra_share" in METHODS and "credo-extra:extra_share" in METHODS
    assert METHODS["credo-extra:extra_share"] is METHODS["extra_share"]
    assert METHODS["extra_share"].name == "extra_share"
    assert get_method("credo-extra:extra_share").name == "extra_share"
    assert str(METHODS.plugin("extra_share")) == "credo-extra 1.0"
    assert METHODS.plugin("c3") is None
    assert "credo-extra:extra_share" not in METHODS.names()  # listed once


def test_a_taken_name_is_the_plugins_qualified_one(site, capsys):
    from credo.methods import METHODS, get_method

    _install(site, "other-c3", "other_c3_plug",
             METHOD.format(name="c3", summary="a plug-in's c3", value=0.5))
    assert METHODS["c3"].summary.startswith("C3")  # credo's meaning stays
    spec = get_method("other-c3:c3")
    assert spec.summary == "a plug-in's c3" and spec.name == "other-c3:c3"
    assert METHODS.plugin("other-c3:c3").dist == "other-c3"
    assert main(["methods"]) == 0
    out = capsys.readouterr().out
    assert "other-c3:c3" in out and "plug-in: other-c3 1.0" in out


def test_a_name_two_plugins_register_is_ambiguous(site):
    from credo.methods import METHODS, get_method

    for dist, module in (("pkg-a", "pkg_a_plug"), ("pkg-b", "pkg_b_plug")):
        _install(site, dist, module, METHOD.format(name="shared", summary=dist, value=0.5))
    assert "shared" not in METHODS
    assert METHODS["pkg-a:shared"].summary == "pkg-a"
    assert METHODS["pkg-b:shared"].summary == "pkg-b"
    with pytest.raises(UnknownName, match=r"method 'shared' is ambiguous: plug-ins register it "
                       r"as pkg-a:shared, pkg-b:shared"):
        get_method("shared")


def test_an_ambiguous_task_or_model_names_the_qualified_ones(site):
    from credo.models.registry import load_model
    from credo.tasks import load_task
    from credo.tasks.registry import TaskSpecError

    code = """
        from credo.models.registry import backend
        from credo.models.scripted import ScriptedModel
        from credo.tasks.base import AnswerFormat, Item, Task
        from credo.tasks.registry import task_loader

        @task_loader("both")
        def both(arg):
            return Task("{dist}", (Item("a", "What is 1+1?", "2"),), AnswerFormat.NUMBER)

        @backend("twin", names=("twin-model",))
        def model(name, **options):
            return ScriptedModel(lambda messages, seed: "Answer: 2", name="{dist}-" + name)
    """
    for dist in ("one-pkg", "two-pkg"):
        _install(site, dist, dist.replace("-", "_") + "_plug", code.replace("{dist}", dist))
    with pytest.raises(TaskSpecError, match="task 'both' is ambiguous: plug-ins register it "
                       "as one-pkg:both, two-pkg:both"):
        load_task("both")
    assert load_task("two-pkg:both").name == "two-pkg"
    with pytest.raises(UserError, match="model prefix 'twin' is ambiguous"):
        load_model("twin:x")
    with pytest.raises(UserError, match="model name 'twin-model' is ambiguous"):
        load_model("twin-model")
    assert load_model("one-pkg:twin:x").name == "one-pkg-x"
    assert load_model("two-pkg:twin-model").name == "two-pkg-twin-model"


def test_every_registry_takes_qualified_names(site):
    """A task, a model prefix and name, a kernel and a stopping rule whose names credo
    has: each reachable by ``dist:name`` where credo reads that kind of name (a task
    spec's argument and a model spec's text after the prefix keep their colons)."""
    from credo.kernels.registry import KERNELS, get_kernel
    from credo.methods.base import get_method
    from credo.models.registry import load_model
    from credo.tasks import load_task

    _install(site, "every-kind", "every_kind_plug", """
        from credo.kernels.registry import kernel
        from credo.models.registry import backend
        from credo.models.scripted import ScriptedModel
        from credo.plan.adaptive import StoppingRule, stopping_rule
        from credo.tasks.base import AnswerFormat, Item, Task
        from credo.tasks.registry import task_loader

        @task_loader("gsm8k")
        def twice(arg):
            return Task(f"twice-{arg}", (Item("a", "What is 1+1?", "2"),), AnswerFormat.NUMBER)

        @backend("openai", names=("smollm2-135m",))
        def model(name, **options):
            return ScriptedModel(lambda messages, seed: "Answer: 2", name=f"plug-{name}")

        @kernel("indicator")
        def gram(xs, ys):
            return None

        @stopping_rule("consensus")
        class Never(StoppingRule):
            def holds(self, config, originals, perturbed, size):
                return False
    """)
    assert load_task("every-kind:gsm8k:x").name == "twice-x"
    assert load_task("every-kind:gsm8k").name == "twice-None"
    assert load_model("every-kind:openai:llama3:8b").name == "plug-llama3:8b"
    assert load_model("every-kind:smollm2-135m").name == "plug-smollm2-135m"
    own = load_model("openai:llama3:8b", base_url="http://127.0.0.1:9/v1")
    assert type(own).__name__ == "OpenAIModel"  # credo's own
    assert get_kernel("every-kind:indicator") is not KERNELS["indicator"]
    assert get_method("c3@every-kind:indicator").kernel == "every-kind:indicator"
    assert type(STOPPING_RULES["every-kind:consensus"]).__name__ == "Never"
    assert type(STOPPING_RULES["consensus"]).__name__ != "Never"


def test_a_plugin_that_fails_to_import_is_one_line_exit_2(site, capsys):
    _install(site, "broken-plug", "broken_plug", "import not_a_module_anywhere\n", "2.3")
    assert main(["run", "--task", "gsm8k", "--methods", "c3", "--dry-run"]) == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert "plug-in 'plug' of broken-plug 2.3 failed to load (broken_plug)" in err
    assert "ModuleNotFoundError" in err and "Traceback" not in err
    with pytest.raises(plugins.PluginError):  # every later read says it again
        STOPPING_RULES.names()
    assert main(["-v", "methods"]) == 2  # -v: the traceback too
    assert "Traceback" in capsys.readouterr().err


def test_no_plugins_loads_none(site, monkeypatch):
    from credo.methods import METHODS

    _install(site, "broken-plug", "broken_plug", "raise RuntimeError('no')\n")
    monkeypatch.setenv("CREDO_NO_PLUGINS", "1")
    assert "c3" in METHODS and plugins.load_plugins() == ()


def test_two_threads_load_once(site):
    """Threads reading at once: one imports the plug-ins, the others wait for it and see
    its entries."""
    _install(site, "slow-plug", "slow_plug", METHOD.format(
        name="slow", summary="slow", value=0.5) + "\nimport time\ntime.sleep(0.3)\n")
    from credo.methods import METHODS

    seen: list[bool] = []
    threads = [threading.Thread(target=lambda: seen.append("slow" in METHODS))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == [True] * 4
    assert [p.dist for p in plugins.load_plugins()] == ["slow-plug"]


def test_a_registry_of_commands_loads_no_plugin(site):
    _install(site, "broken-plug", "broken_plug", "raise RuntimeError('no')\n")
    commands: Registry[int] = Registry("thing", plugins=False)
    commands.add("one", 1)
    assert commands["one"] == 1 and "broken_plug" not in sys.modules
    with pytest.raises(UserError, match="broken-plug"):
        Registry("other")["x"]

"""The picture of docs/architecture.md holds: layers, no import circle, one model loader,
a light command line, and a report that needs no model library."""

from __future__ import annotations

import ast
import graphlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
DOC = ROOT / "docs" / "architecture.md"


def _modules() -> dict[str, Path]:
    out = {}
    for path in (SRC / "credo").rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(path: Path) -> list[tuple[str, int, bool]]:
    """(imported credo module, line, inside a function) for every import in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    lazy_lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lazy_lines.update(
                n.lineno for n in ast.walk(node) if isinstance(n, ast.Import | ast.ImportFrom)
            )
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # "from credo.x import y" names module credo.x.y when y is a submodule
            names = [
                f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES else node.module
                for a in node.names
            ]
        else:
            continue
        for name in names:
            if name == "credo" or name.startswith("credo."):
                found.append((name, node.lineno, node.lineno in lazy_lines))
    return found


def _table(title: str) -> list[list[str]]:
    """The rows of the first Markdown table after heading ``title`` in the architecture doc."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split(f"## {title}", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("|")][2:]
    return [[c.strip() for c in r.strip("|").split("|")] for r in rows]


def _layers() -> list[list[str]]:
    return [re.findall(r"`([\w.]+)`", row[1]) for row in _table("Layers")]


def _layer_of(module: str) -> int:
    best, rank = -1, -1
    for i, prefixes in enumerate(_layers()):
        for p in prefixes:
            exact = module == p
            if (exact or module.startswith(p + ".")) and len(p) > best:
                best, rank = len(p), i
    assert rank >= 0, f"{module} belongs to no layer of docs/architecture.md"
    return rank


def _exceptions() -> set[tuple[str, str]]:
    return {
        tuple(re.findall(r"`([\w.]+)`", f"{row[0]} {row[1]}"))  # type: ignore[misc]
        for row in _table("Imports that run back up a layer")
    }


def _graph() -> dict[str, list[tuple[str, int, bool]]]:
    return {m: _imports(p) for m, p in MODULES.items()}


def test_every_module_has_a_layer():
    for module in MODULES:
        _layer_of(module)


def test_no_import_runs_back_up_a_layer_except_the_named_ones():
    allowed = _exceptions()
    assert len(allowed) <= 2, "docs/architecture.md names more than two upward imports"
    bad, used = [], set()
    for module, imports in _graph().items():
        for target, line, lazy in imports:
            if _layer_of(target) <= _layer_of(module):
                continue
            key = next(
                (
                    (s, d)
                    for s, d in allowed
                    if (module == s or module.startswith(s + "."))
                    and (target == d or target.startswith(d + "."))
                ),
                None,
            )
            if key is None:
                bad.append(f"{MODULES[module].relative_to(ROOT)}:{line}: {module} -> {target}")
            else:
                assert lazy, f"{module} -> {target} (line {line}) must be imported lazily"
                used.add(key)
    assert not bad, "imports against docs/architecture.md:\n" + "\n".join(bad)
    assert used == allowed, f"named but unused upward imports: {allowed - used}"


def test_no_import_circle():
    """No exception, not even a named upward import (issue 22: config imports no method)."""
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    for module, imports in _graph().items():
        for target, _, _ in imports:
            if target in MODULES and target != module:
                edges[module].add(target)
    try:
        graphlib.TopologicalSorter(edges).prepare()
    except graphlib.CycleError as e:
        pytest.fail("import circle: " + " -> ".join(e.args[1]))


LOADERS = ("load_model", "load_embedder", "EmbeddedModel", "OpenAIModel", "SentenceTransformer",
           "ForcedDecodingScorer", "start_server")


def test_exactly_one_file_outside_models_loads_models():
    loaders = set()
    for module, path in MODULES.items():
        if module.startswith("credo.models"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            name = None
            if isinstance(node, ast.Name):
                name = node.id
            elif isinstance(node, ast.Attribute):
                name = node.attr
            elif isinstance(node, ast.alias):
                name = node.name
            if name in LOADERS:
                loaders.add(module)
    assert loaders == {"credo.generation.pool"}


def _fresh_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)


HEAVY = ("torch", "sklearn", "sentence_transformers", "xllamacpp", "matplotlib", "transformers",
         "scipy")


@pytest.mark.parametrize("statement", [
    "import credo.cli",
    "import credo.cli; credo.cli._parser()",
    "import credo",
])
def test_the_command_line_starts_light(statement):
    code = f"import sys; {statement}; print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    done = _fresh_python(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"{statement} loaded {done.stdout.strip()}"


def test_the_openai_backend_stays_split_by_concern():
    """Issue 22: requests, replicas, retries and errors, checks and the loop live in
    modules of their own; ``openai_compat.py`` keeps the model that ties them together."""
    lines = (SRC / "credo" / "models" / "openai_compat.py").read_text(encoding="utf-8")
    assert len(lines.splitlines()) < 500


CLI_MODULES = sorted(m for m in MODULES if m == "credo.cli" or m.startswith("credo.cli."))


@pytest.mark.parametrize("module", CLI_MODULES)
def test_the_command_line_holds_no_logic(module):
    """Issue 22 item 5: no cli module opens a pool, loads a model or an embedder or talks to
    a server: none imports ``credo.generation`` or ``credo.models``, not even inside a
    function; the API (``credo.api``) does that work and returns typed results."""
    bad = [
        f"{MODULES[module].relative_to(ROOT)}:{line}: {target}"
        for target, line, _ in _imports(MODULES[module])
        if target.split(".")[:2] in (["credo", "generation"], ["credo", "models"])
    ]
    assert not bad, "the command line imports a layer it should reach through credo.api:\n" \
        + "\n".join(bad)


def test_one_helper_merges_flags_into_a_config():
    """Issue 22 item 5: flags meet a config in ``credo.cli.flags`` alone; no other cli
    module reads a YAML config or validates one itself."""
    assert "credo.cli.flags" in MODULES
    for module in CLI_MODULES:
        if module == "credo.cli.flags":
            continue
        tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
        names = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        names |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                  for a in n.names}
        found = names & {"model_validate", "read_yaml_mapping", "ValidationError"}
        assert not found, f"{module} merges or validates a config itself: {sorted(found)}"


# --------------------------------------------------------------------------- stages (issue 31)


def _stage_classes() -> dict[str, type]:
    """Every concrete subclass of credo.generation.stage.Stage defined in src/credo."""
    import importlib
    import inspect

    from credo.generation.stage import Stage

    for module in MODULES:
        if not module.startswith(("credo.cli", "credo.serve")):
            importlib.import_module(module)
    found: dict[str, type] = {}
    todo = list(Stage.__subclasses__())
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if cls.__module__.startswith("credo.") and not inspect.isabstract(cls):
            found[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return found


def test_every_stage_is_in_the_architecture_table_with_its_ledger_name():
    table = {re.findall(r"`([\w.]+)`", row[0])[0]: row[1]
             for row in _table("Stages and the driver")}
    classes = _stage_classes()
    assert set(classes) == set(table), "docs/architecture.md's stage table and the code differ"
    for path, cls in classes.items():
        name = cls.__dict__.get("name")
        if isinstance(name, str):  # a class-level ledger stage (SampleSetStage names its set)
            assert f"`{name}`" in table[path], (path, name)


def test_every_stage_is_planned_and_its_role_is_a_pool_role():
    """A stage states its requests before anything runs: its plan is a mapping of units to
    PlannedRequests (no model is called by planning), and what it asks is a pool role."""
    from credo.generation import pool

    roles = {getattr(pool, r) for r in ("MODEL", "WRITER", "PARAPHRASER", "JUDGE", "GRADER",
                                        "SURPRISAL")}
    for path, cls in _stage_classes().items():
        for method in ("plan", "read"):
            assert method in {k for c in cls.__mro__[:-2] for k in c.__dict__}, (path, method)
        role = cls.__dict__.get("role")
        if isinstance(role, str):
            assert role in roles, (path, role)


def _calls_execute(path: Path) -> bool:
    """Whether ``path`` calls ``<executor>.execute(...)`` (not a database's)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                node.func.attr == "execute"):
            target = ast.unparse(node.func.value)
            if not re.search(r"(^|\.|_)db$", target):
                return True
    return False


def test_only_the_named_modules_call_an_executor():
    named = {re.findall(r"`([\w.]+)`", row[0])[0]
             for row in _table("Model calls outside the driver")}
    calling = {m for m, p in MODULES.items() if _calls_execute(p)}
    calling -= {"credo.generation.executor", "credo.generation.ray_executor"}  # the executors
    assert calling == named, "docs/architecture.md's list of modules calling an executor differs"


def _reaches(module: str, function: str, target: str) -> bool:
    """Whether ``module.function`` calls ``target`` in its body or through functions of
    its own module that it calls (transitively)."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    defs = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    seen, todo = set(), [function]
    while todo:
        name = todo.pop()
        if name in seen or name not in defs:
            continue
        seen.add(name)
        for node in ast.walk(defs[name]):
            if isinstance(node, ast.Call):
                called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(
                    node.func, "id", "")
                if called == target:
                    return True
                todo.append(called)
    return False


def test_every_pipeline_ends_in_end_run():
    """Every pipeline of the table ends in end_run (issue 31): its body, a function of its
    module, or another pipeline of the table that does (the gateway's batches are runs)."""
    rows = _table("Pipelines and their ending")
    assert len(rows) >= 4
    paths = [re.findall(r"`([\w.]+)`", row[0])[0] for row in rows]
    for row in rows:
        assert re.findall(r"`(\w+)`", row[1])[0] == "end_run", row
    direct = {p for p in paths if _reaches(*p.rsplit(".", 1), "end_run")}
    for path in set(paths) - direct:
        module, function = path.rsplit(".", 1)
        assert any(_reaches(module, function, d.rsplit(".", 1)[1]) for d in direct), path
    for module, path in MODULES.items():  # a pipeline module's runner is in the table
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name.endswith("_pipeline") \
                    and not node.name.startswith("_"):
                assert f"{module}.{node.name}" in paths, f"{module}.{node.name}: not in the table"


def test_every_outcome_is_decide_outcome_s():
    """Every ``outcome`` property of src/credo decides with credo.pipeline.ending's rule."""
    found = 0
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name == "outcome":
                found += 1
                calls = {getattr(n.func, "id", getattr(n.func, "attr", ""))
                         for n in ast.walk(node) if isinstance(n, ast.Call)}
                assert "decide_outcome" in calls, f"{module}: outcome decides on its own"
    assert found >= 3  # RunResult, StrengthResult, StageDriver


# --------------------------------------------------------------------------- private names




def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_imports(module: str, tree: ast.Module) -> tuple[dict[str, str], list[str]]:
    """The local names that stand for credo modules in ``tree``, and each
    ``from credo.x import _name`` with ``credo.x`` not ``module``."""
    aliases: dict[str, str] = {}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases.update((a.asname or "credo", a.name if a.asname else "credo")
                           for a in node.names if a.name.split(".")[0] == "credo")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.split(".")[0] == "credo":
            for a in node.names:
                full = f"{node.module}.{a.name}"
                if full in MODULES:
                    aliases[a.asname or a.name] = full
                elif _private(a.name) and node.module != module:
                    found.append(f"{node.lineno}: from {node.module} import {a.name}")
    return aliases, found


def _private_uses(module: str, path: Path) -> list[str]:
    """Each ``from credo.x import _name`` in ``path`` with ``credo.x`` another module, and
    each ``m._name`` with ``m`` a credo module it imported."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    aliases, found = _private_imports(module, tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            chain = ast.unparse(node.value)
            root, _, rest = chain.partition(".")
            target = ".".join(p for p in (aliases.get(root, ""), rest) if p)
            if root in aliases and target in MODULES and target != module:
                found.append(f"{node.lineno}: {chain}.{node.attr}")
    return found


def test_no_module_reaches_into_another_module_s_private_names():
    """A name shared across modules is public in the module that owns it: no
    ``from credo.x import _name`` and no ``credo.x._name`` outside ``credo.x``."""
    bad = [
        f"{path.relative_to(ROOT)}:{use}"
        for module, path in MODULES.items()
        for use in _private_uses(module, path)
    ]
    assert not bad, "private names used across modules:\n" + "\n".join(bad)


def test_the_private_name_check_sees_both_forms(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("import credo.evaluate.certify as c\n"
                    "from credo.evaluate.tables import _helper\n"
                    "from credo.evaluate import binomial\n"
                    "from credo.evaluate.binomial import check_level\n"
                    "c._threshold(1)\nbinomial._approx\nc.__doc__\n", encoding="utf-8")
    found = {f.split(": ", 1)[1] for f in _private_uses("credo.some.module", path)}
    assert found == {"from credo.evaluate.tables import _helper", "c._threshold",
                     "binomial._approx"}
    own = {f.split(": ", 1)[1] for f in _private_uses("credo.evaluate.tables", path)}
    assert own == {"c._threshold", "binomial._approx"}  # its own private name is its own


def test_every_claim_module_is_in_the_claims_table_on_its_layer():
    """Claims stay cut by floor (docs/architecture.md, "Claims"): every module whose name
    holds "claim" is in that table, and the layer the table gives it is its layer."""
    rows = {re.findall(r"`([\w.]+)`", row[0])[0]: row[1] for row in _table("Claims")}
    found = {m for m in MODULES if "claim" in m.rsplit(".", 1)[-1]}
    assert found == set(rows), "docs/architecture.md's claims table and the code differ"
    layers = [row[0] for row in _table("Layers")]
    for module, layer in rows.items():
        assert layers[_layer_of(module)] == layer, (module, layer)

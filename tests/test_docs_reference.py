"""The generated reference pages cannot go stale (issue 30, item 2): a flag, a config
field or an export added to the code appears on its page without anyone editing one, a
field without a description is reported, every exit status the command line returns is
declared, and the run-folder table matches what a real (scripted) run writes."""

from __future__ import annotations

import ast
import inspect
import itertools
import json
import sys
import types
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import Field

import credo
from conftest import BagOfWordsEmbedder
from credo.cli import _parser
from credo.config import RunConfig
from credo.errors import EXIT_STATUSES
from credo.models.scripted import ScriptedModel
from credo.pipeline.ending import EXIT_STATUS
from credo.report.run_files import RUN_FILES, run_file

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "gen"))

import reference  # noqa: E402
import sphinx_roles  # noqa: E402


def test_a_new_flag_appears_on_the_cli_page():
    parser = _parser()
    run = next(a for a in parser._actions if hasattr(a, "choices") and a.choices
               and "run" in a.choices).choices["run"]
    run.add_argument("--docs-probe-flag", type=int, default=7, help="a flag only this test has")
    page = reference.cli_page(parser)
    assert "`--docs-probe-flag DOCS_PROBE_FLAG`" in page
    assert "a flag only this test has" in page and "`7`" in page
    assert "--docs-probe-flag" not in reference.cli_page()


def test_every_command_and_flag_is_on_the_cli_page():
    page = reference.cli_page()
    for prog, sub, _ in reference.cli_commands(_parser()):
        assert f"`{prog}`" in page
        for action in sub._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert f"`{flag}" in page or f", {flag}" in page, (prog, flag)


def test_a_new_config_field_appears_and_one_without_description_is_reported():
    class Probe(RunConfig):
        docs_probe_field: int = Field(3, description="a field only this test has")
        undescribed_probe: str = "x"

    page = reference.config_page([Probe])
    assert "| `docs_probe_field` | int | `3` | a field only this test has |" in page
    assert "Probe.undescribed_probe" in reference.missing_descriptions([Probe])
    assert reference.missing_descriptions() == []  # every real field has its description


def test_every_config_field_is_on_the_config_page():
    page = reference.config_page()
    for model in reference.all_models():
        assert f"## {model.__name__}" in page
        for name in model.model_fields:
            assert f"| `{name}`" in page, (model.__name__, name)


def test_a_new_export_appears_on_the_api_pages(monkeypatch):
    def docs_probe_export() -> None:
        """A function only this test exports."""

    docs_probe_export.__module__ = "credo.newpackage.mod"
    docs_probe_export.__qualname__ = "docs_probe_export"
    monkeypatch.setattr(credo, "docs_probe_export", docs_probe_export, raising=False)
    pages = reference.api_pages([*credo.__all__, "docs_probe_export"])
    assert "::: credo.newpackage.mod.docs_probe_export" in pages["reference/api/newpackage.md"]
    assert "A function only this test exports." in pages["reference/api/index.md"]


def test_every_public_name_is_documented_where_it_is_defined():
    import importlib

    pages = reference.api_pages()
    text = "\n".join(pages.values())
    names = reference.api_names()
    assert {f"credo.{n.name}" for n in names} >= {f"credo.{n}" for n in credo.__all__}
    for n in names:
        assert f"::: {n.path}\n" in text
        assert f"`credo.{n.name}`" in pages["reference/api/index.md"]
        head, _, attr = f"credo.{n.name}".rpartition(".")
        obj = getattr(importlib.import_module(head), attr)
        if isinstance(obj, types.ModuleType) and callable(obj):  # a callable package:
            obj = inspect.unwrap(obj)  # the function it calls
        if callable(obj):  # a function or class: where it is defined
            assert n.path == f"{obj.__module__}.{obj.__qualname__}"
        else:  # a constant: where the guides take it from
            assert n.path == f"credo.{n.name}"


def _returned_statuses(path: Path) -> set[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.value.value for node in ast.walk(tree)
            if isinstance(node, ast.Return) and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, int)}


def test_every_exit_status_the_command_line_returns_is_declared():
    returned = set().union(*(_returned_statuses(p) for p in (ROOT / "src/credo/cli").glob("*.py")))
    returned |= set(EXIT_STATUS.values())
    assert returned <= set(EXIT_STATUSES), sorted(returned - set(EXIT_STATUSES))
    assert {0, 2, 3, 4} <= returned  # the declaration is not wider than what is used
    assert set(EXIT_STATUSES) == returned
    page = reference.exit_codes_page()
    for status in EXIT_STATUSES:
        assert f"| **{status}** |" in page


def test_an_undeclared_status_is_caught(tmp_path):
    bad = tmp_path / "cmd.py"
    bad.write_text("def cmd(args):\n    return 7\n")
    assert _returned_statuses(bad) - set(EXIT_STATUSES) == {7}


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _check_fields(folder: Path, name: str) -> None:
    decl = run_file(name)
    declared = {f for f, _ in decl.fields}
    rows = _rows(folder / name) if name.endswith(".jsonl") else [
        json.loads((folder / name).read_text())]
    assert rows
    for row in rows:
        assert set(row) <= declared, (name, set(row) - declared)
        assert declared - decl.optional_fields <= set(row), (name, declared - set(row))


def test_a_scripted_run_folder_holds_exactly_the_declared_files(tmp_path):
    from test_runner import TASK, respond

    cfg = RunConfig(task="toy", n=6, m=6, limit=None, out=tmp_path / "run",
                    cache=tmp_path / "c.sqlite", bootstrap=0)
    credo.run(cfg, model=ScriptedModel(respond), embedder=BagOfWordsEmbedder(), task=TASK,
              show_progress=False)
    folder = cfg.out
    written = {p.name for p in folder.iterdir()}
    always = {f.name for f in RUN_FILES if f.always}
    # a C3 run with an embedder writes the prefixes' similarities too; nothing else
    assert written == always | {"perturbation_similarity.json"}
    for f in RUN_FILES:
        if f.fields and f.name in written:
            _check_fields(folder, f.name)
    page = reference.run_folder_page()
    for f in RUN_FILES:
        assert f"`{f.name}`" in page
        for name, _ in f.fields:
            assert f"| `{name}` |" in page


def test_the_method_cards_cover_every_registered_method():
    text = (ROOT / "docs" / "concepts" / "methods.md").read_text(encoding="utf-8")
    for name in reference.method_names():
        assert f"<!-- credo:method {name} -->" in text, f"no card for method {name}"
        card = reference.method_card(name)
        assert card.startswith(f"### `{name}`")


@pytest.mark.parametrize("source,level", [("results.md", 2), ("benchmarks.md", 1)])
def test_the_split_of_results_and_benchmarks_loses_no_line(source, level):
    text = (ROOT / "docs" / source).read_text(encoding="utf-8")
    pre, sections = reference.split_sections(text, level)
    assert sections
    body = lambda t: [ln.lstrip("#").strip() for ln in t.splitlines() if ln.strip()]  # noqa: E731
    assert [*body(pre), *itertools.chain.from_iterable(body(s.text) for s in sections)] == (
        body(text))
    assert len({s.slug for s in sections}) == len(sections)


# --------------------------------------------------------------------------- README

QUICK_START = (
    "pip install -e '.[serve]'                           # credo, and the gateway's extra",
    "make demo   # C3 and baselines on 20 MMLU geography items, embedded 1.5B"
    " -> runs/demo/report.md",
)
#: The README's quick start: exactly two commands on a fresh machine, in one block.
README_QUICK_START = (
    "make demo   # C3 and baselines on 20 MMLU geography items, embedded 1.5B"
    " -> runs/demo/report.md\n"
    "make test   # the linter and every test, the slow real-model ones included\n"
)


def _relative_links(markdown: str) -> list[str]:
    """The targets of the Markdown links and images of ``markdown`` that are relative
    paths (no scheme, no ``/``, no bare ``#anchor``), without their ``#anchor``; links
    inside code spans and fenced blocks are left out."""
    import re

    prose = re.sub(r"```.*?```", "", markdown, flags=re.DOTALL)
    prose = re.sub(r"`[^`\n]*`", "", prose)
    targets = re.findall(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)", prose)
    return [t.split("#", 1)[0] for t in targets
            if not re.match(r"[a-z][a-z0-9+.-]*:|/|#", t, flags=re.IGNORECASE)]


def test_the_link_finder_sees_relative_links_only():
    text = ("[a](docs/x.md#y) ![fig](docs/f.png) [w](https://e.org/z.md) [m](mailto:q@e.org) "
            "[top](#quick-start) `[code](nope.md)`\n```md\n[fenced](nope2.md)\n```\n")
    assert _relative_links(text) == ["docs/x.md", "docs/f.png"]


def test_the_readme_is_a_landing_page_whose_links_resolve():
    """The README is at most 150 lines, keeps the install and quick-start commands
    exactly (as the site's home and getting-started pages give them), shows the
    report's figure, and every relative link in it names a file of this repository (so
    it works on GitHub as in a checkout)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150
    for line in QUICK_START:
        assert line in readme.splitlines(), line
        for page in ("docs/index.md", "docs/getting-started.md"):
            assert line in (ROOT / page).read_text(encoding="utf-8").splitlines(), (page, line)
    assert f"```bash\n{README_QUICK_START}```" in readme
    links = _relative_links(readme)
    assert "docs/report-screenshot.png" in links
    assert len(links) >= 20  # the table of what credo offers and the links into the site
    missing = [t for t in links if not (ROOT / t).is_file()]
    assert not missing, f"README.md links to files that do not exist: {missing}"
    # every page it links to is a page of the site (in the nav), not a stray file
    import yaml

    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]
    flat = json.dumps(nav)
    for target in links:
        if target.startswith("docs/") and target.endswith(".md"):
            page = target.removeprefix("docs/")
            assert f'"{page}"' in flat, f"README.md links to {target}, which is not in the nav"


_NAME = st.from_regex(r"[a-z_][a-z0-9_]{0,6}(\.[a-z_][a-z0-9_]{0,6}){0,3}", fullmatch=True)
_ROLE = st.sampled_from(["func", "class", "meth", "attr", "mod", "data", "exc", "obj"])


@given(st.lists(st.tuples(st.text(alphabet="ab :.`<>~\n", max_size=8), _ROLE,
                          st.sampled_from(["", "~"]), _NAME), max_size=4))
def test_sphinx_roles_become_code_spans_of_what_they_show(parts):
    """docs/gen/sphinx_roles.py: every role becomes the code span of its target (its
    last component under ``~``); the text around the roles is kept as it was."""
    text = "".join(f"{pre}:{role}:`{tilde}{name}`" for pre, role, tilde, name in parts)
    want = "".join(f"{pre}`{name.rsplit('.', 1)[-1] if tilde else name}`"
                   for pre, role, tilde, name in parts)
    assert sphinx_roles.plain_roles(text) == want


def test_a_titled_role_shows_its_title():
    assert sphinx_roles.plain_roles(":attr:`the answer <credo.ItemResult.answer>` and "
                                    ":py:func:`credo.run`") == "`the answer` and `credo.run`"

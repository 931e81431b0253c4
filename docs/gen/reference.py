"""The generated pages of the documentation site: the reference, generated, never
hand-copied.

Each function returns Markdown from the code it documents, so a new export, flag,
config field, exit status, run-folder file or scoring method appears on the site without
anyone editing a page; :mod:`hooks` hands the pages to mkdocs and
``tests/test_docs_reference.py`` checks that a flag or field added on the fly shows up.

- :func:`api_pages`: every name of ``credo.__all__`` and every other name of credo the
  pages' Python examples import or call (:func:`taught_names`), grouped by the package
  that defines it, each rendered by mkdocstrings from its docstring, with the docstring of
  each module a name's docstring points to.
- :func:`cli_page`: every command and flag of the argparse parsers (``credo.cli._parser``).
- :func:`config_page`: every field of the pydantic configs with type, default and
  description; :func:`missing_descriptions` lists the fields that have none.
- :func:`exit_codes_page`: ``credo.errors.EXIT_STATUSES``.
- :func:`run_folder_page`: ``credo.report.run_files.RUN_FILES``.
- :func:`method_card`: the registry's facts of one scoring method (``credo.methods.METHODS``).
- :func:`not_executed_page`: the documentation's blocks marked as needing a real model or
  a GPU (:mod:`blocks`).
- :func:`split_sections`: a long Markdown file cut at its headings into pages (docs/results.md,
  docs/benchmarks.md stay the sources).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import re
import sys
import types
import typing
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # blocks.py, beside this file

import blocks as blk  # noqa: E402

# ----------------------------------------------------------------------------- helpers

_ROLE = re.compile(r":(?:class|func|data|meth|mod|attr|obj|exc):`~?([^`]+)`")


def md_text(text: str | None) -> str:
    """Docstring prose as Markdown on one line: Sphinx roles as code, ``x`` as `x`, ``<``
    escaped (``mmlu:<subject>`` is no HTML tag), a ``{...}`` mapping as code (Markdown's
    attribute lists would take it for attributes and swallow it), table pipes escaped."""
    if not text:
        return ""
    text = _ROLE.sub(lambda m: f"`{m.group(1)}`", text)
    text = text.replace("``", "`")
    parts = re.split(r"(`[^`]*`)", " ".join(text.split()))
    out = []
    for part in parts:
        if part.startswith("`"):
            out.append(part)
        else:
            part = re.sub(r"\{[^{}`]*\}", lambda m: f"`{m.group(0)}`", part)
            out.append(re.sub(r"(`[^`]*`)|<|>", lambda m: m.group(1) or (
                "&lt;" if m.group(0) == "<" else "&gt;"), part))
    return "".join(out).replace("|", "\\|")


def code(text: str) -> str:
    """Inline code that survives a table cell."""
    return "`" + text.replace("|", "\\|").replace("`", "'") + "`"


def slugify(title: str) -> str:
    """A file name from a heading."""
    s = re.sub(r"[^a-z0-9]+", "-", title.lower().replace("²", "2")).strip("-")
    return s[:60].rstrip("-") or "section"


# ----------------------------------------------------------------------------- API

API_GROUPS: dict[str, tuple[str, str]] = {
    "api": ("running", "Running credo"),
    "app": ("running", "Running credo"),
    "pipeline": ("running", "Running credo"),
    "config": ("configuration", "Configuration objects"),
    "methods": ("methods", "Scoring methods"),
    "evaluate": ("evaluation", "Evaluation and certificates"),
    "strength": ("strength", "Perturbation strength"),
}
"""Second-level package of a name's module -> (page, title). A package not named here
gets a page of its own, titled by its name: a new export is never left out."""


@dataclass(frozen=True)
class ApiName:
    """A public name: as a reader writes it (``credo.run``, ``credo.api.score``), where it
    is defined, its one-line summary, and the modules its docstring points to."""

    name: str
    path: str
    summary: str
    modules: tuple[str, ...] = ()


_MODULE_ROLE = re.compile(r":mod:`~?(credo(?:\.\w+)*)`")


def api_names(names: Iterable[str] | None = None,
              docs: Path | None = ROOT / "docs") -> list[ApiName]:
    """Every name of ``credo.__all__`` (or ``names``) and, with ``docs``, every other name
    its pages teach (:func:`taught_names`), with its defining path."""
    import importlib

    import credo

    written = [f"credo.{n}" for n in (names if names is not None else credo.__all__)]
    if docs is not None:
        written += [t for t in taught_names(docs) if t not in written]
    out = []
    for full in written:
        head, _, name = full.rpartition(".")
        obj = getattr(importlib.import_module(head), name)
        if isinstance(obj, types.ModuleType) and callable(obj):  # a callable package
            obj = inspect.unwrap(obj)  # (credo.evaluate): the function it calls
        module = getattr(obj, "__module__", None) or head
        qual = getattr(obj, "__qualname__", name)
        path = f"{module}.{qual}" if inspect.isclass(obj) or callable(obj) else full
        doc = inspect.getdoc(obj) or "" if (inspect.isclass(obj) or callable(obj)) else ""
        pointed = _MODULE_ROLE.findall(doc)
        if "module docstring" in doc:  # "(module docstring)": its own module's
            pointed.append(module)
        out.append(ApiName(full.removeprefix("credo."), path,
                           md_text(doc.split("\n\n")[0]), tuple(dict.fromkeys(pointed))))
    return out


_DESCRIBES_INTERNALS = frozenset({"architecture.md", "docs.md", "results.md", "benchmarks.md"})
"""Pages whose prose names the code's internals for its developers (the layout, how the
docs are built, how results were measured): their code spans teach no API; their
Python examples still do."""


def taught_names(docs: Path) -> list[str]:
    """The dotted names of credo (beyond ``credo.X`` of ``credo.__all__``) that the pages'
    Python examples import (``from credo.api import score``) or call (``credo.api.score``),
    or their prose names in code (```credo.api.score(path, config)```): what a page
    teaches a reader to use, in order of first use."""
    import ast
    import importlib

    import credo

    found: dict[str, None] = {}
    for page in blk.pages(docs):
        if page.path.name not in _DESCRIBES_INTERNALS:
            prose = page.path.read_text(encoding="utf-8")
            found.update({m: None for m in re.findall(r"`(credo(?:\.\w+){2,})[(`]", prose)})
        for block in page.blocks:
            if block.lang != "python":
                continue
            try:
                tree = ast.parse(block.code)
            except SyntaxError:
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("credo"):
                    found.update({f"{node.module}.{a.name}": None for a in node.names})
                elif isinstance(node, ast.Attribute):
                    chain = _chain(node)
                    if chain and chain.startswith("credo.") and chain.count(".") >= 2:
                        found[chain] = None
    out = []
    for full in found:
        head, _, name = full.rpartition(".")
        if head == "credo" and name in credo.__all__:
            continue
        try:
            obj = getattr(importlib.import_module(head), name)
        except (ImportError, AttributeError):
            continue  # an attribute of an object, not of a module (credo.api.x.y)
        if not isinstance(obj, types.ModuleType):
            out.append(full)
    return out


def _chain(node: Any) -> str | None:
    """``a.b.c`` of an attribute access on a plain name, else None."""
    import ast

    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def api_group(path: str) -> tuple[str, str]:
    """(page slug, title) of the page that documents the name defined at ``path``."""
    parts = path.split(".")
    package = parts[1] if len(parts) > 2 else parts[0]
    return API_GROUPS.get(package, (slugify(package), package.replace("_", " ").title()))


def api_pages(names: Iterable[str] | None = None) -> dict[str, str]:
    """``reference/api/<group>.md`` -> page, plus ``reference/api/index.md``: the table
    of every public name, linking to its entry."""
    groups: dict[str, tuple[str, list[ApiName]]] = {}
    for n in api_names(names):
        slug, title = api_group(n.path)
        groups.setdefault(slug, (title, []))[1].append(n)
    pages = {}
    rows = ["| name | what it is | page |", "|---|---|---|"]
    for slug, (title, members) in groups.items():
        lines = [f"# {title}", "",
                 "Generated from the docstrings of the names in `credo.__all__` "
                 "(`import credo`, then `credo.<name>`) and of the other names the guides "
                 "use, as they write them.", ""]
        for n in members:
            lines += [f"::: {n.path}", "    options:", "      show_root_heading: true",
                      f"      heading: \"credo.{n.name}\"", "      toc_label: \"" + n.name + "\"",
                      "      heading_level: 2", ""]
            rows.append(f"| [`credo.{n.name}`]({slug}.md#{n.path}) | {n.summary} | {title} |")
        modules = dict.fromkeys(m for n in members for m in n.modules)
        for module in modules:  # the text a name's docstring points to, on the same page
            lines += [f"::: {module}", "    options:", "      show_root_heading: true",
                      "      members: false", f"      heading: \"The module {module}\"",
                      "      heading_level: 2", ""]
        pages[f"reference/api/{slug}.md"] = "\n".join(lines)
    index = ["# Python API", "",
             "Every public name of the `credo` package (`credo.__all__`), and every other "
             "name of credo the guides' examples import or call, generated from the code: "
             "a name added to `__all__` or used on a page appears here and on its group's "
             "page.", "", *rows, ""]
    pages["reference/api/index.md"] = "\n".join(index)
    return pages


def api_nav(pages: dict[str, str]) -> list[Any]:
    """The nav entries of :func:`api_pages`: the index first, then the groups."""
    entries: list[Any] = [{"Overview": "reference/api/index.md"}]
    for path, text in pages.items():
        if path.endswith("/index.md"):
            continue
        entries.append({text.splitlines()[0].lstrip("# "): path})
    return entries


# ----------------------------------------------------------------------------- CLI


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser,
                                                                    str | None]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, sub, helps.get(name)


def cli_commands(parser: argparse.ArgumentParser, prog: str = "credo",
                 help_text: str | None = None) -> Iterator[tuple[str, argparse.ArgumentParser,
                                                                  str | None]]:
    """``(command, parser, one-line help)`` of the program and every subcommand, depth first."""
    yield prog, parser, help_text
    for name, sub, h in _subcommands(parser):
        yield from cli_commands(sub, f"{prog} {name}", h)


def _action_row(action: argparse.Action) -> str | None:
    if isinstance(action, argparse._SubParsersAction | argparse._HelpAction):
        return None
    if action.option_strings:
        flag = ", ".join(action.option_strings)
        takes = action.nargs != 0
        if takes:
            flag += " " + (action.metavar if isinstance(action.metavar, str)
                           else action.dest.upper())
    else:
        flag = action.metavar if isinstance(action.metavar, str) else action.dest
    choices = ", ".join(map(str, action.choices)) if action.choices else ""
    default = action.default
    shown = "" if default in (None, argparse.SUPPRESS, False) or default == [] else str(default)
    helptext = (action.help or "").replace("%(choices)s", choices).replace("%%", "%")
    if action.nargs in ("+", "*") or isinstance(action, argparse._AppendAction):
        helptext += " (repeatable)" if isinstance(action, argparse._AppendAction) else ""
    if action.required and action.option_strings:
        helptext += " **(required)**"
    cells = [code(flag), ", ".join(code(c) for c in choices.split(", ")) if choices else "",
             code(shown) if shown else "", md_text(helptext)]
    return "| " + " | ".join(cells) + " |"


def _usage(parser: argparse.ArgumentParser) -> str:
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "96"
    try:
        return parser.format_usage().strip()
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old


def cli_page(parser: argparse.ArgumentParser | None = None) -> str:
    """Every command and flag of ``credo``, from its argparse parsers."""
    if parser is None:
        from credo.cli import _parser

        parser = _parser()
    lines = ["# Command line", "",
             "Generated from credo's argparse parsers (`credo.cli`): every command, its "
             "usage and every flag. `credo COMMAND --help` prints the same.", ""]
    commands = list(cli_commands(parser))
    lines += ["| command | what it does |", "|---|---|"]
    for prog, sub, h in commands[1:]:
        if _has_subcommands(sub):
            continue
        lines.append(f"| [`{prog}`](#{slugify(prog)}) | {md_text(h)} |")
    lines.append("")
    for prog, sub, h in commands:
        depth = prog.count(" ")
        lines += [f"{'#' * min(depth + 2, 4)} `{prog}` {{ #{slugify(prog)} }}", ""]
        if sub.description or h:
            lines += [md_text(sub.description or h), ""]
        lines += ["```text", _usage(sub), "```", ""]
        for group in sub._action_groups:
            rows = [r for r in map(_action_row, group._group_actions) if r]
            if not rows:
                continue
            title = group.title if group.title not in ("options", "optional arguments") else (
                "options")
            lines += [f"**{md_text(title)}**", "", "| flag | choices | default | meaning |",
                      "|---|---|---|---|", *rows, ""]
    return "\n".join(lines)


def _has_subcommands(parser: argparse.ArgumentParser) -> bool:
    return any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)


# ----------------------------------------------------------------------------- config


def config_models() -> list[type[BaseModel]]:
    """The top-level configs: what a YAML file (or a study's entry) is read as."""
    from credo.config import RunConfig, StrengthConfig, StudyConfig

    return [RunConfig, StudyConfig, StrengthConfig]


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation holds (``X | None``, ``list[X]``...)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    out: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        out += _models_in(arg)
    return out


def all_models(top: Sequence[type[BaseModel]] | None = None) -> list[type[BaseModel]]:
    """``top`` and every model their fields hold, each once, breadth first."""
    seen: list[type[BaseModel]] = []
    queue = list(top if top is not None else config_models())
    while queue:
        model = queue.pop(0)
        if model in seen:
            continue
        seen.append(model)
        for f in model.model_fields.values():
            queue += [m for m in _models_in(f.annotation) if m not in seen]
    return seen


def type_name(annotation: Any) -> str:
    """A field's type as a reader writes it: ``int | None``, ``list[str]``, ``RoleConfig``."""
    if annotation is type(None):
        return "None"
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__name__
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " \\| ".join(json.dumps(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(type_name(a) for a in args)
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(type_name(a) for a in args)}]"
    return str(annotation).replace("typing.", "")


def _default(f: Any) -> str:
    if f.is_required():
        return "required"
    value = f.default_factory() if f.default_factory is not None else f.default
    if value is PydanticUndefined:
        return "required"
    if isinstance(value, BaseModel):
        dumped = value.model_dump(mode="json", exclude_defaults=True)
        return f"{type(value).__name__}({', '.join(f'{k}={v!r}' for k, v in dumped.items())})"
    if isinstance(value, Path):
        return str(value)
    return json.dumps(value, default=str, ensure_ascii=False)


def missing_descriptions(models: Sequence[type[BaseModel]] | None = None) -> list[str]:
    """``Model.field`` of every config field without a description."""
    return [f"{m.__name__}.{name}" for m in all_models(models)
            for name, f in m.model_fields.items() if not (f.description or "").strip()]


def config_page(models: Sequence[type[BaseModel]] | None = None) -> str:
    """Every field of every config model: type, default, description."""
    found = all_models(models)
    names = {m.__name__ for m in found}
    lines = ["# Configuration", "",
             "Generated from credo's pydantic models (`credo.config`): every field with "
             "its type, default and description. A YAML config file (`credo run --config "
             "run.yaml`) is a `RunConfig`; `credo study` reads a `StudyConfig`, `credo "
             "strength run` a `StrengthConfig`. Nested sections are tables of their own, "
             "linked from the field that holds them; unknown keys are errors.", ""]
    for model in found:
        doc = inspect.getdoc(model) or ""
        lines += [f"## {model.__name__}", "", md_text(doc.split("\n\n")[0]), "",
                  "| field | type | default | description |", "|---|---|---|---|"]
        for name, f in model.model_fields.items():
            t = type_name(f.annotation)
            for other in sorted(names, key=len, reverse=True):
                t = re.sub(rf"\b{other}\b", f"[{other}](#{other.lower()})", t)
            alias = ""
            if f.validation_alias is not None and hasattr(f.validation_alias, "choices"):
                extra = [c for c in f.validation_alias.choices if c != name]
                alias = f" (also `{'`, `'.join(extra)}`)" if extra else ""
            lines.append(f"| `{name}`{alias} | {t} | {code(_default(f))} | "
                         f"{md_text(f.description)} |")
        lines.append("")
    return "\n".join(lines + (old_names_section() if models is None else []))


def old_names_section() -> list[str]:
    """The renamed config keys (``credo.config.CONFIG_RENAMES``), still read with a
    deprecation warning until the release that removes them."""
    from credo.config import CONFIG_RENAMES, DEPRECATED_SINCE, REMOVED_IN

    lines = ["## Old names", "",
             f"Keys renamed since credo {DEPRECATED_SINCE}: a config that uses the old name "
             f"is read as if it used the new one, with a deprecation warning, until credo "
             f"{REMOVED_IN}; giving both is an error. A run folder written under an old "
             "name reads as before.", "", "| old key | read as |", "|---|---|"]
    for section, renames in CONFIG_RENAMES.items():
        lines += [f"| `{section}{old}` | `{section}{new}` |" for old, new in renames.items()]
    return [*lines, ""]


# ----------------------------------------------------------------------------- exit codes


def exit_codes_page() -> str:
    """The exit statuses of ``credo`` (``credo.errors.EXIT_STATUSES``)."""
    from credo.errors import EXIT_STATUSES

    lines = ["# Exit codes", "",
             "Generated from `credo.errors.EXIT_STATUSES`, the one table the command line's "
             "exit statuses are checked against. Whatever the status, a run folder that was "
             "started is written: what finished is cached, and the same command resumes.", "",
             "| status | meaning |", "|---|---|"]
    lines += [f"| **{code_}** | {md_text(meaning)} |" for code_, meaning in
              sorted(EXIT_STATUSES.items())]
    return "\n".join([*lines, ""])


# ----------------------------------------------------------------------------- run folder


def run_folder_page() -> str:
    """The files of a run folder and their fields (``credo.report.run_files.RUN_FILES``)."""
    from credo.report.run_files import RUN_FILES

    lines = ["# The run folder", "",
             "Generated from `credo.report.run_files.RUN_FILES`. `credo run` and `credo "
             "score` write one folder (`--out`, default `runs/latest`); every file is "
             "written atomically and `run_status.json` last. A run owns its folder: "
             "rerunning into it replaces every file credo writes there. `credo report` "
             "needs nothing else.", "",
             "| file | written | by | what it holds |", "|---|---|---|---|"]
    for f in RUN_FILES:
        name = f"[`{f.name}`](#{slugify(f.name)})" if f.fields else f"`{f.name}`"
        lines.append(f"| {name} | {md_text(f.when)} | "
                     f"{md_text(f.written_by)} | {md_text(f.what)} |")
    lines.append("")
    for f in RUN_FILES:
        if not f.fields:
            continue
        lines += [f"## `{f.name}` {{ #{slugify(f.name)} }}", "", md_text(f.what) + ".", "",
                  "| field | meaning |", "|---|---|"]
        lines += [f"| `{name}` | {md_text(meaning)} |" for name, meaning in f.fields]
        lines.append("")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- methods


def method_card(name: str) -> str:
    """The registry's facts of scoring method ``name``: summary, sample sets read (per
    answer format where they differ), formats, logprobs, kernel, source file."""
    from credo.methods import METHODS
    from credo.tasks.base import AnswerFormat

    spec = METHODS[name]
    if callable(spec.needs):
        reads = "; ".join(f"{f.value}: {', '.join(spec.needs_for(f)) or '-'}"
                          for f in (AnswerFormat.CHOICE, AnswerFormat.NUMBER))
    else:
        reads = ", ".join(spec.needs)
    scorer = inspect.unwrap(spec.scorer)  # a sample_set_method's function, not its wrapper
    source = inspect.getsourcefile(scorer) or ""
    try:
        source = str(Path(source).resolve().relative_to(ROOT))
    except ValueError:
        source = Path(source).name
    module = scorer.__module__
    rows = [
        ("summary", md_text(spec.summary)),
        ("reads the sample sets", md_text(reads) or "none"),
        ("answer formats", ", ".join(f.value for f in spec.formats) if spec.formats else "all"),
        ("token logprobs", "needed (not available on a backend without them)" if spec.logprobs
         else "not needed"),
        ("kernel", f"`{spec.kernel}`" if spec.kernel else "the run's (`kernel`, or "
         f"`{name}@judge`)"),
        ("code", f"`{module}` ({source})"),
    ]
    if spec.min_samples:
        rows.insert(3, ("fewest samples", ", ".join(f"{k}: {v}" for k, v in
                                                     spec.min_samples.items())))
    lines = [f"### `{name}` {{ #{name} }}", "", "| property | of this method |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in rows]
    return "\n".join([*lines, ""])


def method_names() -> list[str]:
    from credo.methods import METHODS

    return sorted(METHODS)


# ----------------------------------------------------------------------------- metrics


def metrics_table() -> str:
    """The registered metrics (``credo.evaluate.registry.METRICS``): what each is measured
    against, which way is better, at which levels, and its flags."""
    from credo.evaluate.registry import METRICS

    target = {"p_bar": "p̄ (per generation: 0/1 correctness)",
              "label": "label: 1 when p̄ ≥ 0.5 (per generation: 0/1 correctness)"}
    lines = ["| metric | measured against | better | levels | notes |", "|---|---|---|---|---|"]
    for m in METRICS.values():
        notes = [n for n, on in (("binned", m.binned), ("ranking: needs both classes",
                                                         m.ranking),
                                 ("in the terminal's table", m.headline),
                                 ("also after --calibrate", m.calibrated)) if on]
        lines.append(f"| {m.label} (`{m.name}`) | {target.get(m.target, m.target)} | "
                     f"{'↓' if m.direction == 'lower' else '↑'} | {', '.join(m.per)} | "
                     f"{'; '.join(notes)} |")
    return "\n".join([*lines, ""])


# ----------------------------------------------------------------------------- blocks

SPLIT_SOURCES = {"results.md": 2, "benchmarks.md": 1}
"""Files the site shows split at a heading level (their pages go to ``<stem>/``)."""


def not_executed_page(docs: Path) -> str:
    """The blocks of the documentation that the test suite does not run, and why."""
    rows = []
    for page in blk.pages(docs):
        rel = page.path.relative_to(docs).as_posix()
        for b in page.blocks:
            if b.lang not in blk.RUN_LANGS:
                continue
            needs = b.needs or page.needs
            if needs is None:
                continue
            first = next((ln.strip() for ln in b.code.splitlines() if ln.strip()), "")
            target = (f"../{rel.removesuffix('.md')}/index.md" if rel in SPLIT_SOURCES
                      else f"../{rel}")
            rows.append(f"| [{rel}]({target}) line {b.line} | {needs[0]} | "
                        f"{md_text(needs[1])} | {code(first[:70])} |")
    lines = ["# Examples not executed", "",
             "Every code block of these pages runs in the test suite "
             "(`tests/test_docs_examples.py`) against the loopback fake server or the "
             "scripted backend, except the blocks below: each is marked on its page "
             "(`<!-- docs: needs-model: why -->` before it, or `<!-- docs: page needs-model: "
             "why -->` for a whole page) because it needs a real model or a GPU. This page "
             "is generated from those markers.", "",
             f"{len(rows)} blocks.", "",
             "| where | needs | why | first line |", "|---|---|---|---|", *rows, ""]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- split


@dataclass(frozen=True)
class Section:
    title: str
    slug: str
    text: str


def split_sections(text: str, level: int) -> tuple[str, list[Section]]:
    """``text`` cut before every heading of ``level`` (``#`` count) outside code fences:
    the preamble (the page's own title and intro) and one section per heading, each
    starting with its heading raised to a page title."""
    from markdown_it import MarkdownIt

    lines = text.splitlines(keepends=True)
    starts = [tok.map[0] for tok in MarkdownIt("commonmark").parse(text)
              if tok.type == "heading_open" and tok.tag == f"h{level}" and tok.map]
    if level > 1:  # the page title stays in the preamble
        starts = [s for s in starts if s > 0]
    pre = "".join(lines[: starts[0]]) if starts else text
    sections = []
    seen: set[str] = set()
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(lines)
        heading = lines[start].strip().lstrip("#").strip()
        body = "".join(lines[start + 1: end])
        if level > 1:  # subsections move up as many levels as the page title did
            body = _unfenced_shift(body, level - 1)
        slug = slugify(heading)
        while slug in seen:
            slug += "-2"
        seen.add(slug)
        sections.append(Section(heading, slug, f"# {heading}\n{body}"))
    return pre, sections


def _unfenced_shift(body: str, by: int) -> str:
    """Headings deeper than the section's, outside fences, raised ``by`` levels."""
    out, fence = [], None
    for line in body.splitlines(keepends=True):
        stripped = line.lstrip()
        if stripped.startswith(("```", "~~~")):
            mark = stripped[:3]
            fence = None if fence == mark else (fence or mark)
        if fence is None and re.match(r"#{2,6} ", line):
            hashes = len(line) - len(line.lstrip("#"))
            line = "#" * max(2, hashes - by) + line[hashes:]
        out.append(line)
    return "".join(out)

"""The code blocks of the documentation and their markers.

One parser for the two readers: the collector that runs every block in the test suite
(``tests/test_docs_examples.py``) and the generated page that lists the blocks nobody
runs (``reference/not-executed.md``). Blocks are found with markdown-it-py (the
CommonMark parser rich already installs), so a fence inside a list or a ``#`` inside a
fence is read as Markdown reads it.

A file the reader creates is a block with a title, as mkdocs-material shows it above the
block (```` ```yaml title="calibrate.yaml" ````): the collector writes it to that name, in
the page's folder, for the blocks after it, and runs nothing.

A marker is an HTML comment right before a block (blank lines between are allowed,
nothing else)::

    <!-- docs: needs-model: the embedded 1.5B model, 5 minutes -->
    <!-- docs: needs-gpu: vLLM on one GPU -->
    <!-- docs: needs-server: a hosted API with a key -->
    <!-- docs: needs-data: a file the user brings, which credo does not ship -->
    <!-- docs: installs: pip install changes the environment -->
    <!-- docs: exit 3 -->               the block's last command exits 3
    <!-- docs: output -->               (on a text block) the stdout of the python block before it
    <!-- docs: config study -->         (on a yaml block) validated as a StudyConfig

A ``python`` block runs on its own, as a script, unless it uses a name an earlier
``python`` block of its page defines and does not define it itself: then it continues
that session (:func:`continued_names`), and the site shows it so, with the caption
:data:`CONTINUED` above the block (``docs/gen/hooks.py``), so the reader sees which
blocks go together.

and one marker may stand anywhere on a page for all of it::

    <!-- docs: page needs-model: every block reproduces a measured run -->
    <!-- docs: page slow -->            the page's test is marked slow
"""

from __future__ import annotations

import ast
import builtins
import re
from dataclasses import dataclass, field
from pathlib import Path

from markdown_it import MarkdownIt

__all__ = [
    "CONTINUED",
    "DATA_LANGS",
    "RUN_LANGS",
    "SKIP_KINDS",
    "Block",
    "Page",
    "continued_names",
    "pages",
    "parse_page",
]

CONTINUED = "continues the Python code above"
"""The caption the site shows above a ``python`` block that continues an earlier one."""

RUN_LANGS = frozenset({"python", "bash", "console", "yaml"})
"""Fence languages the collector runs (yaml: validated as a config, or written to a file)."""
DATA_LANGS = frozenset({"text", "json", "jsonl", "csv", ""})
"""Fence languages that show data or output: never run (an output block is compared)."""

_MARKER = re.compile(r"<!--\s*docs:\s*(.*?)\s*-->", re.S)
_TITLE = re.compile(r'\btitle="([^"]+)"')
SKIP_KINDS = ("needs-model", "needs-gpu", "needs-server", "needs-data", "installs")
"""Markers of blocks nobody runs in the tests: a real model, a GPU, a hosted API or a real
server, a data file credo does not ship, a command that installs packages.
``reference/not-executed.md`` lists them."""
_BETWEEN = frozenset({"paragraph_open", "heading_open", "table_open", "blockquote_open", "hr",
                      "code_block"})


@dataclass
class Block:
    """One fenced block: its page, first line (1-based, the fence), language, text, the
    markers before it and its title (the file a reader saves it as; None: no title)."""

    path: Path
    line: int
    lang: str
    code: str
    markers: list[str] = field(default_factory=list)
    title: str | None = None

    def marker(self, name: str) -> str | None:
        """The argument of marker ``name`` (``""`` when it has none), or None."""
        for m in self.markers:
            head, _, rest = m.partition(" ")
            head = head.rstrip(":")
            if head == name:
                return rest.strip().lstrip(":").strip()
        return None

    @property
    def needs(self) -> tuple[str, str] | None:
        """``(kind, reason)`` when the block is marked with one of :data:`SKIP_KINDS`."""
        for kind in SKIP_KINDS:
            reason = self.marker(kind)
            if reason is not None:
                return kind, reason
        return None

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass
class Page:
    """A documentation page: its blocks in order and its page-wide markers."""

    path: Path
    blocks: list[Block]
    page_markers: list[str]

    def page_marker(self, name: str) -> str | None:
        for m in self.page_markers:
            head, _, rest = m.partition(" ")
            if head.rstrip(":") == name:
                return rest.strip().lstrip(":").strip()
        return None

    @property
    def needs(self) -> tuple[str, str] | None:
        for kind in SKIP_KINDS:
            reason = self.page_marker(kind)
            if reason is not None:
                return kind, reason
        return None


def parse_page(path: Path, text: str | None = None) -> Page:
    """The blocks of the Markdown page ``path`` (or of ``text``, read as that page)."""
    text = path.read_text(encoding="utf-8") if text is None else text
    tokens = MarkdownIt("commonmark").parse(text)
    blocks: list[Block] = []
    page_markers: list[str] = []
    pending: list[str] = []
    for tok in tokens:
        if tok.type == "html_block":
            for m in _MARKER.findall(tok.content):
                if m.startswith("page "):
                    page_markers.append(m[5:].strip())
                else:
                    pending.append(m)
            continue
        if tok.type == "fence":
            lang = (tok.info.split() or [""])[0].lower()
            line = (tok.map[0] + 1) if tok.map else 0
            title = _TITLE.search(tok.info)
            blocks.append(Block(path, line, lang, tok.content, pending,
                                title.group(1) if title else None))
            pending = []
        elif tok.type in _BETWEEN:  # text between a marker and a block: no marker
            pending = []
    return Page(path, blocks, page_markers)


def pages(docs: Path) -> list[Page]:
    """Every hand-written page under ``docs`` (generator code under ``gen/`` aside)."""
    return [parse_page(p) for p in sorted(docs.rglob("*.md")) if "gen" not in p.relative_to(
        docs).parts[:1]]


def continued_names(page: Page) -> dict[int, set[str]]:
    """For each ``python`` block (by its first line) that continues the page's earlier
    ``python`` blocks: the names it takes from them (used, not defined by the block
    itself, defined by an earlier one). A block with a title (a file the reader saves)
    neither continues nor is continued."""
    earlier: set[str] = set()
    out: dict[int, set[str]] = {}
    for block in page.blocks:
        if block.lang != "python" or block.title:
            continue
        try:
            tree = ast.parse(block.code)
        except SyntaxError:
            continue
        bound = _bound(tree)
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
                and isinstance(n.ctx, ast.Load)}
        taken = (used - bound - set(dir(builtins))) & earlier
        if taken:
            out[block.line] = taken
        earlier |= bound
    return out


def _bound(tree: ast.AST) -> set[str]:
    """Every name ``tree`` binds anywhere (assignments, imports, definitions, loop and
    ``with`` targets, arguments): a name bound somewhere in a block is its own."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            names.add(node.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
    return names

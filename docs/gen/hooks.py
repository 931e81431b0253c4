"""mkdocs hooks of credo's documentation site (``mkdocs.yml``: ``hooks:``).

- ``on_config``: the nav entries ``results.md`` and ``benchmarks.md`` become sections of
  the pages those files split into (at ``##`` and ``#`` headings: the files stay the
  sources, and other work appends to them), and ``reference/api.md`` the pages of the
  Python API, one per group of ``credo.__all__``.
- ``on_files``: adds every generated page (:mod:`reference`) and leaves the generator code
  and the two split sources out of the site.
- ``on_page_markdown``: a page's search weight (:data:`SEARCH_BOOST`); a ``python``
  block that continues an earlier one gets the caption "continues the Python code
  above" (:func:`blocks.continued_names`); ``<!-- credo:method NAME -->`` becomes the
  registry's card of method NAME (:func:`reference.method_card`),
  ``<!-- credo:metrics -->`` the table of the registered metrics
  (:func:`reference.metrics_table`).

A config field without a description, or a method card for an unknown method, is a
warning, so ``mkdocs build --strict`` (``make docs``) fails on it.
"""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
# this checkout's generators and credo, whatever is installed (mkdocs takes its own entry
# for this folder off sys.path once the hooks are loaded)
sys.path[:0] = [str(HERE), str(ROOT / "src")]

import blocks  # noqa: E402
import reference  # noqa: E402

log = logging.getLogger("mkdocs.plugins.credo")

SPLIT = reference.SPLIT_SOURCES
API_ENTRY = "reference/api.md"

_generated: dict[str, str] = {}


def _split_pages(docs: Path) -> tuple[dict[str, str], dict[str, list[Any]]]:
    pages: dict[str, str] = {}
    navs: dict[str, list[Any]] = {}
    for source, level in SPLIT.items():
        stem = source.removesuffix(".md")
        pre, sections = reference.split_sections((docs / source).read_text("utf-8"), level)
        intro = _relink(pre)
        toc = [f"- [{s.title}]({s.slug}.md)" for s in sections]
        pages[f"{stem}/index.md"] = intro.rstrip() + "\n\n## Sections\n\n" + "\n".join(toc) + "\n"
        navs[source] = [{"Overview": f"{stem}/index.md"}]
        for s in sections:
            pages[f"{stem}/{s.slug}.md"] = _relink(s.text)
            navs[source].append({s.title.replace("`", ""): f"{stem}/{s.slug}.md"})
    return pages, navs


def _relink(text: str) -> str:
    """Relative links of a page moved one folder down (``x.png`` -> ``../x.png``)."""
    return re.sub(r"\]\((?!https?:|#|/|mailto:)([^)\s]+)\)", r"](../\1)", text)


def _expand(nav: Any, replace: dict[str, list[Any]]) -> Any:
    if isinstance(nav, list):
        return [_expand(e, replace) for e in nav]
    if isinstance(nav, dict):
        return {k: replace.get(v, v) if isinstance(v, str) else _expand(v, replace)
                for k, v in nav.items()}
    return nav


def on_config(config: Any) -> Any:
    docs = Path(config["docs_dir"])
    split, navs = _split_pages(docs)
    api = reference.api_pages()
    _generated.clear()
    _generated.update(split)
    _generated.update(api)
    _generated.update({
        "reference/cli.md": reference.cli_page(),
        "reference/config.md": reference.config_page(),
        "reference/exit-codes.md": reference.exit_codes_page(),
        "reference/run-folder.md": reference.run_folder_page(),
        "reference/not-executed.md": reference.not_executed_page(docs),
        "changelog.md": (ROOT / "CHANGELOG.md").read_text("utf-8"),
    })
    for field in reference.missing_descriptions():
        log.warning("config field %s has no description (Field(description=...)): "
                    "reference/config.md would show it blank", field)
    config["nav"] = _expand(config["nav"], {**navs, API_ENTRY: reference.api_nav(api)})
    return config


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for f in list(files):
        if f.src_uri.startswith("gen/") or f.src_uri in SPLIT:
            files.remove(f)
    for uri, text in _generated.items():
        files.append(File.generated(config, uri, content=text))
    return files


_CARD = re.compile(r"(?m)^<!--\s*credo:method\s+(\S+)\s*-->[ \t]*$")
_METRICS = re.compile(r"(?m)^<!--\s*credo:metrics\s*-->[ \t]*$")
"""Placeholders stand alone on their line (in a code span they are text)."""


SEARCH_BOOST = {"reference/api/": 1.0, "reference/not-executed": 1.0,
                "tutorials/": 2.0, "reference/": 2.0, "install.md": 2.0, "faq.md": 2.0,
                "results/": 0.5, "benchmarks/": 0.5}
"""Search weight of a page by where it lives (the first prefix that matches): the pages
that teach and define rank above the measured results, which mention every name in
passing; the API pages and the list of blocks not run keep the plain weight (a module's
table of other tools' flags is not where a flag is defined)."""


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    uri = page.file.src_uri
    boost = next((b for prefix, b in SEARCH_BOOST.items() if uri.startswith(prefix)), None)
    if boost is not None:
        page.meta.setdefault("search", {}).setdefault("boost", boost)
    markdown = _captioned(markdown, page)
    known = set(reference.method_names())

    def card(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in known:
            log.warning("%s: method card for %r, which is no registered method",
                        page.file.src_uri, name)
            return m.group(0)
        return reference.method_card(name)

    return _METRICS.sub(lambda m: reference.metrics_table(), _CARD.sub(card, markdown))


def _captioned(markdown: str, page: Any) -> str:
    """Each ``python`` block that continues an earlier one of its page
    (:func:`blocks.continued_names`, as the docs' tests run it) with the caption
    :data:`blocks.CONTINUED` above it."""
    path = Path(page.file.abs_src_path or page.file.src_uri)
    continued = blocks.continued_names(blocks.parse_page(path, markdown))
    if not continued:
        return markdown
    lines = markdown.split("\n")
    for line in continued:
        lines[line - 1] = f'{lines[line - 1].rstrip()} title="{blocks.CONTINUED}"'
    return "\n".join(lines)

"""A griffe extension for the API pages (``mkdocs.yml``: the python handler's
``extensions``): credo's docstrings cross-reference with Sphinx roles
(``:func:`credo.run```, ``:class:`~credo.Guard```), which mkdocstrings renders as Markdown
with no Sphinx to read them, so the page showed ``:func:`` before every name. Each role
becomes the code span of what it names: the last component under ``~``, the title of a
``title <target>`` form, else the whole target.

A role becomes plain code, not a link: a link to an object the site does not document
would be a broken reference, which ``mkdocs build --strict`` fails on.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

__all__ = ["SphinxRoles", "plain_roles"]

ROLE = re.compile(
    r":(?:py:)?(?:func|class|meth|attr|mod|data|exc|obj|const|type|term|ref):`(?P<body>[^`]+)`"
)
"""A Sphinx cross-reference role of the Python domain (and ``term``, ``ref``)."""

_TITLED = re.compile(r"^(?P<title>.+?)\s*<(?P<target>[^<>]+)>$")


def _shown(body: str) -> str:
    """What a role shows: its title, else its target (the last component under ``~``)."""
    titled = _TITLED.match(body)
    if titled:
        return titled["title"]
    target = body.lstrip("!")
    if target.startswith("~"):
        return target[1:].rsplit(".", 1)[-1]
    return target


def plain_roles(text: str) -> str:
    """``text`` with every Sphinx role replaced by a code span of what it shows.

    >>> plain_roles("see :func:`credo.run` and :class:`~credo.serve.guard.Guard`")
    'see `credo.run` and `Guard`'
    >>> plain_roles(":attr:`the answer <ItemResult.answer>`, ``literal``")
    '`the answer`, ``literal``'
    """
    return ROLE.sub(lambda m: f"`{_shown(m['body'])}`", text)


class SphinxRoles(griffe.Extension):
    """Rewrites the Sphinx roles of every docstring griffe loads (:func:`plain_roles`)."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = plain_roles(obj.docstring.value)

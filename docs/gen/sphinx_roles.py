"""A griffe extension for the API pages (``mkdocs.yml``: the python handler's
``extensions``): credo's docstrings cross-reference with Sphinx roles
(``:func:`credo.run```, ``:class:`~credo.Guard```), which mkdocstrings renders as Markdown
with no Sphinx to read them, so the page showed ``:func:`` before every name. Each role
becomes the code span of what it names: the last component under ``~``, the title of a
``title <target>`` form, else the whole target.

A role becomes plain code, not a link: a link to an object the site does not document
would be a broken reference, which ``mkdocs build --strict`` fails on.

:class:`ConstantDefaults` shows a parameter's default that names a constant of its module
(``select_fraction: float = SELECT_FRACTION``) by its value (``= 0.3``): the signature a
reader sees says what the default is.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

__all__ = ["ConstantDefaults", "SphinxRoles", "plain_roles"]

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


class ConstantDefaults(griffe.Extension):
    """A parameter default naming a module-level constant with a literal value shows that
    value (once the whole package is loaded, so every constant is known)."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        for module in _modules(pkg):
            for obj in _functions(module):
                for param in obj.parameters:
                    value = _constant(module, param.default)
                    if value is not None:
                        param.default = value


def _modules(pkg: griffe.Module) -> list[griffe.Module]:
    out, todo = [], [pkg]
    while todo:
        module = todo.pop()
        out.append(module)
        todo += [m for m in module.modules.values() if not m.is_alias]
    return out


def _functions(module: griffe.Module) -> list[griffe.Function]:
    found = []
    for member in module.members.values():
        if member.is_alias:
            continue
        if member.is_function:
            found.append(member)
        elif member.is_class:
            found += [m for m in member.members.values() if not m.is_alias and m.is_function]
    return found


def _constant(module: griffe.Module, default: Any) -> str | None:
    """The literal value of the module constant ``default`` names, or None."""
    if not isinstance(default, griffe.ExprName):
        return None
    member = module.members.get(default.name)
    if member is not None and member.is_alias:  # a constant imported from its home module
        try:
            member = member.final_target
        except (griffe.AliasResolutionError, griffe.CyclicAliasError):
            return None
    if member is None or not member.is_attribute:
        return None
    value = member.value
    text = value if isinstance(value, str) else None
    if text is None or not re.fullmatch(r"-?[\d.]+(?:e-?\d+)?|'[^']*'|\"[^\"]*\"|True|False|None",
                                        text):
        return None
    return text

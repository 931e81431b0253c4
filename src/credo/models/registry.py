"""``load_model(spec)``: model specs → backends, through a decorator-based registry.

A spec is either a registered *name* (``"qwen2.5-coder-1.5b"``), ``"<prefix>:<rest>"``
for a registered prefix (``"openai:gpt-4o-mini"``, ``"gguf:/path/model.gguf"``), or a
path ending in ``.gguf``. A plug-in's prefix whose name credo already has is
``"<distribution>:<prefix>:<rest>"`` (:mod:`credo.plugins`); a registered prefix is read
first, so ``openai:llama3:8b`` keeps meaning ``openai`` with model ``llama3:8b``.
Backends register themselves with :func:`backend`::

    @backend("openai")                    # handles "openai:<model>"
    def _openai(rest: str, **options): ...

    @backend(names=("smollm2-135m",))     # handles exactly these names
    def _embedded(name: str, **options): ...
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from credo.errors import UserError
from credo.models.base import Model
from credo.models.weights import EMBEDDED_MODELS, is_embedded_spec
from credo.registry import DuplicateName, Registry

Factory = Callable[..., Model]
"""``factory(argument, **options) -> Model``; ``argument`` is the name or the text after
the prefix."""

F = TypeVar("F", bound=Factory)

_PREFIXES: Registry[Factory] = Registry("model prefix")
_NAMES: Registry[Factory] = Registry("model name")
_SUFFIXES: Registry[Factory] = Registry("model path suffix")


def backend(
    prefix: str | None = None,
    *,
    names: Iterable[str] = (),
    suffixes: Iterable[str] = (),
) -> Callable[[F], F]:
    """Register a factory for ``"<prefix>:..."`` specs, exact ``names`` and/or path ``suffixes``.

    Registering a key twice is an error, so two backends never silently shadow each other.
    """

    def register(factory: F) -> F:
        for table, keys in (
            (_PREFIXES, [prefix] if prefix else []),
            (_NAMES, list(names)),
            (_SUFFIXES, [s.lower() for s in suffixes]),
        ):
            for key in keys:
                try:  # no read before: a registry read on import would load plug-ins
                    table.add(key, factory)
                except DuplicateName:
                    if table.get(key) is not factory:  # the same factory again: a reload
                        raise
        return factory

    return register


def known_specs() -> list[str]:
    """Human-readable list of what :func:`load_model` accepts."""
    return (
        sorted(_NAMES)
        + [f"{prefix}:<…>" for prefix in sorted(_PREFIXES)]
        + [f"<path>{suffix}" for suffix in sorted(_SUFFIXES)]
    )


def load_model(spec: str, **options: Any) -> Model:
    """The backend for ``spec``; ``options`` go to the backend's constructor.

    Exact names win over prefixes, prefixes over path suffixes. An unknown spec, an
    option the backend does not take or a bad option value raises :class:`UserError`
    naming the spec and the option (``model_options`` in a config). Constructing a
    backend loads nothing heavy (servers and weights start on first use), so a run can
    build every model it needs before its first model call.
    """
    factory, argument = _factory(spec)
    try:
        return factory(argument, **options)
    except TypeError as e:
        bad = _UNEXPECTED.search(str(e))
        if bad is None:
            raise
        # a base_url on an embedded model is refused before, where roles are assigned
        # (credo.generation.roles.assign_roles: every role's one check)
        raise UserError(
            f"model {spec!r} does not take the option {bad.group(1)!r} (model_options)"
        ) from None
    except UserError:
        raise
    except ValueError as e:  # an option value the backend refuses
        raise UserError(f"model {spec!r}: {e} (model_options)") from None


_UNEXPECTED = re.compile(r"unexpected keyword argument '(\w+)'")


def _factory(spec: str) -> tuple[Factory, str]:
    """The registered factory for ``spec`` and the argument it gets."""
    if spec in _NAMES or _NAMES.ambiguous(spec):
        factory, plugin = _NAMES[spec], _NAMES.plugin(spec)
        if plugin is not None:  # a plug-in's dist:name: its factory gets the name
            return factory, spec.removeprefix(f"{plugin.dist}:")
        return factory, spec
    prefix, sep, rest = spec.partition(":")
    if sep and prefix not in _PREFIXES:  # a plug-in's prefix named dist:prefix:<model>
        inner, sep_inner, after = rest.partition(":")
        if sep_inner and f"{prefix}:{inner}" in _PREFIXES:
            prefix, rest = f"{prefix}:{inner}", after
        elif _PREFIXES.ambiguous(prefix):
            raise _PREFIXES.unknown(prefix)
    if sep and prefix in _PREFIXES:
        if not rest:
            raise UserError(f"model spec {spec!r} names no model after {prefix!r}:")
        return _PREFIXES[prefix], rest
    for suffix, factory in _SUFFIXES.items():
        if spec.lower().endswith(suffix):
            return factory, spec
    raise UserError(f"unknown model {spec!r}; known: {', '.join(known_specs())}")


@backend("gguf", names=tuple(EMBEDDED_MODELS), suffixes=(".gguf",))
def _embedded(name_or_path: str, **options: Any) -> Model:
    """Embedded llama.cpp model: a registry name or a local ``.gguf`` path."""
    from credo.models.embedded import EmbeddedModel

    return EmbeddedModel(name_or_path, **options)


@backend("forced")
def _forced(name_or_path: str, **options: Any) -> Model:
    """Forced decoding of given texts (Le et al.'s surprisal scorer): ``forced:<embedded name,
    .gguf path or gguf:...>``; identity ``llamacpp-forced:<weights label>``."""
    from credo.models.forced import ForcedDecodingScorer

    if not is_embedded_spec(name_or_path):
        raise ValueError(
            f"forced:{name_or_path}: forced decoding needs an embedded GGUF model "
            "(a registry name, a .gguf path or gguf:<...>)"
        )
    return ForcedDecodingScorer(name_or_path.removeprefix("gguf:"), **options)


@backend("openai")
def _openai(model: str, **options: Any) -> Model:
    """OpenAI-compatible endpoint: ``openai:<model>`` (``base_url=`` for local servers)."""
    from credo.models.openai_compat import OpenAIModel

    return OpenAIModel(model, **options)


@backend("scripted")
def _scripted(name: str, **options: Any) -> Model:
    """Scripted test model: ``scripted:<name>`` with ``respond=`` (see :class:`ScriptedModel`)."""
    from credo.models.scripted import ScriptedModel

    if "respond" not in options:
        raise ValueError("a scripted model needs respond= (a function or an answer table)")
    return ScriptedModel(options.pop("respond"), name=name, **options)


__all__ = ["Factory", "backend", "known_specs", "load_model"]

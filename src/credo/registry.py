"""One registry type for everything credo looks up by name.

Methods, metrics, tasks, graders, answer extractors, kernels and their builders, sample
sets, neutrality rules, model backends, importers and adaptive stopping rules are each a
:class:`Registry`: entries registered once by name (a decorator or :meth:`Registry.add`),
read as a read-only mapping in registration order, looked up with one user error::

    KERNELS: Registry[Kernel] = Registry("kernel")

    @KERNELS.register("indicator")
    def indicator(xs, ys): ...

    KERNELS["indicator"]      # the function
    KERNELS["cosine"]         # UnknownName: unknown kernel 'cosine'; known kernels: indicator

A second entry under a name already taken is refused (:class:`DuplicateName`), so two
registrations never silently shadow each other. An unknown name raises
:class:`UnknownName`, a :class:`~credo.errors.UserError` (the command line prints its one
line and exits 2) that is also a :class:`KeyError`, so ``name in registry``,
``registry.get(name)`` and code catching either keep working.

A registry read by a layer below the modules that fill it (the config validates a
stopping rule's name; the rules live in :mod:`credo.plan.adaptive`) names those modules
in ``load``: the first read imports them, so their entries are there whoever reads first,
and the reader imports nothing above it.

Installed packages add entries through plug-ins (:mod:`credo.plugins`): the first read of
a registry (of any but those made with ``plugins=False``) loads them. A plug-in's entry
keeps its bare name when it is free, and is also reachable as ``distribution:name``; when
the name is taken it is named ``distribution:name`` only, so credo's own names (and a
config that uses them) never change meaning by installing a package. A name two plug-ins
register is named both ways qualified, and the bare name is ambiguous: looking it up says
which qualified names exist. :meth:`Registry.plugin` tells which plug-in an entry came
from (listings show it). An entry that is a dataclass with a ``name`` field (a method's
spec, a metric) is renamed with it, so results are keyed by the name it is listed under.

This module sits in the bottom layer (docs/architecture.md) and imports only
:mod:`credo.errors` and :mod:`credo.plugins`.
"""

from __future__ import annotations

import dataclasses
import importlib
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Generic, TypeVar, overload

from credo.errors import UserError
from credo.plugins import Plugin, forget_plugins, load_plugins, loading

__all__ = ["STOPPING_RULES", "DuplicateName", "Registry", "UnknownName", "unload_plugins"]

T = TypeVar("T")
F = TypeVar("F")


class UnknownName(UserError, KeyError):
    """A name no entry of the registry has; the message names it and every known one."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class DuplicateName(ValueError):
    """A second registration under a name already taken (a programming error)."""


class Registry(Mapping[str, T], Generic[T]):
    """Entries of one ``kind`` by name, in registration order (see the module docstring).

    ``kind`` names an entry in messages (``"stopping rule"``), ``plural`` its plural
    (default ``kind + "s"``); ``load`` lists modules whose import registers the built-in
    entries, imported on the first read; ``plugins=False``: a registry plug-ins do not
    fill (reading it loads none: the command line's commands).
    """

    def __init__(self, kind: str, *, plural: str | None = None, load: Sequence[str] = (),
                 plugins: bool = True) -> None:
        if not kind:
            raise ValueError("a registry needs a kind (what its entries are called)")
        self.kind = kind
        self.plural = plural or f"{kind}s"
        self._entries: dict[str, T] = {}
        self._load = tuple(load)
        self._loaded = not self._load
        self._plugins = plugins
        self._origins: dict[str, Plugin] = {}
        """The plug-in of each entry a plug-in registered, by the name it is listed under."""
        self._aliases: dict[str, str] = {}
        """``dist:name`` of a plug-in's entry listed under its bare ``name``."""
        self._ambiguous: dict[str, tuple[str, ...]] = {}
        """A bare name two or more plug-ins register: their qualified names."""
        _REGISTRIES.append(weakref.ref(self))

    # ------------------------------------------------------------------ registering

    def add(self, name: str, entry: T) -> T:
        """Register ``entry`` as ``name`` and return it; a name already taken raises
        :class:`DuplicateName` (nothing is replaced)."""
        if not isinstance(name, str) or not name or not name.isprintable():
            raise ValueError(f"a {self.kind} name must be a non-empty printable string "
                             f"(one line in messages), got {name!r}")
        plugin = loading()
        if plugin is not None and self._plugins:
            return self._add_plugin(plugin, name, entry)
        if name in self._origins:  # a plug-in took credo's name first: it moves aside
            self._qualify(name)
        elif name in self._entries:
            raise DuplicateName(f"{self.kind} {name!r} is already registered")
        self._ambiguous.pop(name, None)  # the plug-ins' qualified names stay
        self._entries[name] = entry
        return entry

    def _add_plugin(self, plugin: Plugin, name: str, entry: T) -> T:
        """A plug-in's entry: under ``name`` if free (and ``dist:name`` as an alias),
        else under ``dist:name`` (see the module docstring)."""
        qualified = plugin.qualify(name)
        if qualified in self._entries or qualified in self._aliases:
            raise DuplicateName(f"{self.kind} {qualified!r} is already registered")
        if name not in self._entries and name not in self._ambiguous:
            self._entries[name] = entry
            self._origins[name] = plugin
            self._aliases[qualified] = name
            return entry
        if name in self._origins:  # another plug-in's: neither keeps the bare name
            self._ambiguous[name] = (self._qualify(name),)
        if name in self._ambiguous:
            self._ambiguous[name] += (qualified,)
        self._entries[qualified] = _renamed(entry, name, qualified)
        self._origins[qualified] = plugin
        return entry

    def _qualify(self, name: str) -> str:
        """Move the plug-in entry listed as ``name`` to its qualified name; return it."""
        plugin = self._origins.pop(name)
        qualified = plugin.qualify(name)
        del self._aliases[qualified]
        self._entries[qualified] = _renamed(self._entries.pop(name), name, qualified)
        self._origins[qualified] = plugin
        return qualified

    @overload
    def register(self, name: str) -> Callable[[F], F]: ...

    @overload
    def register(self, name: str, make: Callable[[F], T]) -> Callable[[F], F]: ...

    def register(self, name: str, make: Callable[[Any], T] | None = None) -> Callable[[F], F]:
        """Decorator: register the decorated object as ``name`` (or ``make(obj)``, the
        entry built from it, e.g. a spec holding the function) and return it unchanged."""

        def decorate(obj: F) -> F:
            self.add(name, make(obj) if make is not None else obj)  # type: ignore[arg-type]
            return obj

        return decorate

    def remove(self, name: str) -> T:
        """Unregister ``name`` and return its entry (a test's own entries)."""
        listed = self._listed(name)
        if listed is None:
            raise self.unknown(name)
        entry = self._entries.pop(listed)
        self._aliases.pop(name, None)
        plugin = self._origins.pop(listed, None)
        if plugin is not None:
            self._aliases.pop(plugin.qualify(listed), None)
        return entry

    def __setitem__(self, name: str, entry: T) -> None:
        """``registry[name] = entry`` is :meth:`add`: a name already taken is refused."""
        self.add(name, entry)

    def __delitem__(self, name: str) -> None:
        self.remove(name)

    # ------------------------------------------------------------------ reading

    def _ensure_loaded(self) -> None:
        if not self._loaded:
            self._loaded = True  # before the imports: they register, and may read
            try:
                for module in self._load:
                    importlib.import_module(module)
            except BaseException:
                self._loaded = False
                raise
        if self._plugins:
            load_plugins()  # once for every registry; a user error if one fails

    def _listed(self, name: object) -> str | None:
        """The name ``name`` is listed under (itself, or a plug-in entry's bare name for
        its ``dist:name``), or None."""
        try:
            if name in self._entries:
                return name  # type: ignore[return-value]
            return self._aliases.get(name)  # type: ignore[arg-type]
        except TypeError:  # an unhashable name is no entry's
            return None

    def __getitem__(self, name: str) -> T:
        """The entry ``name`` (or ``dist:name``, a plug-in's); :class:`UnknownName` (a
        user error) naming the known ones, or the qualified names of an ambiguous one."""
        self._ensure_loaded()
        listed = self._listed(name)
        if listed is None:
            raise self.unknown(name)
        return self._entries[listed]

    def unknown(self, name: object) -> UnknownName:
        """The error for ``name``: ``unknown <kind> 'name'; known <plural>: a, b, c``, or,
        for a bare name plug-ins share, ``<kind> 'name' is ambiguous: ...``."""
        self._ensure_loaded()
        among = self.ambiguous(name)
        if among:
            return UnknownName(f"{self.kind} {name!r} is ambiguous: plug-ins register it as "
                               f"{', '.join(among)}; name one of them")
        known = ", ".join(sorted(self._entries)) or "none"
        return UnknownName(f"unknown {self.kind} {name!r}; known {self.plural}: {known}")

    def ambiguous(self, name: object) -> tuple[str, ...]:
        """The qualified names of a bare ``name`` two or more plug-ins register (empty
        when it is not ambiguous)."""
        self._ensure_loaded()
        try:
            return self._ambiguous.get(name, ())  # type: ignore[call-overload]
        except TypeError:
            return ()

    def plugin(self, name: str) -> Plugin | None:
        """The plug-in that registered entry ``name`` (None: credo's own, or no entry)."""
        self._ensure_loaded()
        listed = self._listed(name)
        return self._origins.get(listed) if listed is not None else None

    def __contains__(self, name: object) -> bool:
        self._ensure_loaded()
        return self._listed(name) is not None

    def __iter__(self) -> Iterator[str]:
        self._ensure_loaded()
        return iter(tuple(self._entries))

    def __len__(self) -> int:
        self._ensure_loaded()
        return len(self._entries)

    def names(self) -> tuple[str, ...]:
        """The registered names, in registration order."""
        self._ensure_loaded()
        return tuple(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self._entries)})"


_REGISTRIES: list[weakref.ref[Registry[Any]]] = []
"""Every registry made (weakly: a test's own may go), for :func:`unload_plugins`."""


def _renamed(entry: T, old: str, new: str) -> T:
    """``entry`` with its ``name`` field ``new`` when it is a dataclass instance named
    ``old`` (a method's spec, a metric), so what it computes is keyed by its listed
    name; any other entry as it is."""
    if (dataclasses.is_dataclass(entry) and not isinstance(entry, type)
            and getattr(entry, "name", None) == old):
        return dataclasses.replace(entry, name=new)  # type: ignore[type-var]
    return entry


def unload_plugins() -> None:
    """Remove every plug-in's entry from every registry and forget the plug-ins
    (:func:`credo.plugins.forget_plugins`), so the next read loads them again (tests)."""
    for ref in list(_REGISTRIES):
        registry = ref()
        if registry is None:
            continue
        for name in list(registry._origins):
            registry.remove(name)
        registry._ambiguous.clear()
    forget_plugins()


STOPPING_RULES: Registry[Any] = Registry("stopping rule", load=("credo.plan.adaptive",))
"""Adaptive sampling's stopping rules (:class:`credo.plan.adaptive.StoppingRule`) by
``adaptive.rule``. It lives here, in the bottom layer, because two readers sit below the
rules' module: the config validates ``adaptive.rule`` against it and the command line
offers its names as choices without loading numpy; the first read imports
:mod:`credo.plan.adaptive`, which registers the built-in rules (consensus, interval,
decision) with :func:`credo.plan.adaptive.stopping_rule`."""

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

This module sits in the bottom layer (docs/architecture.md) and imports only
:mod:`credo.errors`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Generic, TypeVar, overload

from credo.errors import UserError

__all__ = ["STOPPING_RULES", "DuplicateName", "Registry", "UnknownName"]

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
    entries, imported on the first read.
    """

    def __init__(self, kind: str, *, plural: str | None = None, load: Sequence[str] = ()) -> None:
        if not kind:
            raise ValueError("a registry needs a kind (what its entries are called)")
        self.kind = kind
        self.plural = plural or f"{kind}s"
        self._entries: dict[str, T] = {}
        self._load = tuple(load)
        self._loaded = not self._load

    # ------------------------------------------------------------------ registering

    def add(self, name: str, entry: T) -> T:
        """Register ``entry`` as ``name`` and return it; a name already taken raises
        :class:`DuplicateName` (nothing is replaced)."""
        if not isinstance(name, str) or not name or not name.isprintable():
            raise ValueError(f"a {self.kind} name must be a non-empty printable string "
                             f"(one line in messages), got {name!r}")
        if name in self._entries:
            raise DuplicateName(f"{self.kind} {name!r} is already registered")
        self._entries[name] = entry
        return entry

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
        entry = self[name]
        del self._entries[name]
        return entry

    def __setitem__(self, name: str, entry: T) -> None:
        """``registry[name] = entry`` is :meth:`add`: a name already taken is refused."""
        self.add(name, entry)

    def __delitem__(self, name: str) -> None:
        self.remove(name)

    # ------------------------------------------------------------------ reading

    def _ensure_loaded(self) -> None:
        if self._loaded:
            return
        self._loaded = True  # before the imports: they register, and may read
        try:
            for module in self._load:
                importlib.import_module(module)
        except BaseException:
            self._loaded = False
            raise

    def __getitem__(self, name: str) -> T:
        """The entry ``name``; :class:`UnknownName` (a user error) naming the known ones."""
        self._ensure_loaded()
        try:
            return self._entries[name]
        except (KeyError, TypeError):
            raise self.unknown(name) from None

    def unknown(self, name: object) -> UnknownName:
        """The error for ``name``: ``unknown <kind> 'name'; known <plural>: a, b, c``."""
        self._ensure_loaded()
        known = ", ".join(sorted(self._entries)) or "none"
        return UnknownName(f"unknown {self.kind} {name!r}; known {self.plural}: {known}")

    def __contains__(self, name: object) -> bool:
        self._ensure_loaded()
        try:
            return name in self._entries
        except TypeError:  # an unhashable name is no entry's
            return False

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


STOPPING_RULES: Registry[Any] = Registry("stopping rule", load=("credo.plan.adaptive",))
"""Adaptive sampling's stopping rules (:class:`credo.plan.adaptive.StoppingRule`) by
``adaptive.rule``. It lives here, in the bottom layer, because two readers sit below the
rules' module: the config validates ``adaptive.rule`` against it and the command line
offers its names as choices without loading numpy; the first read imports
:mod:`credo.plan.adaptive`, which registers the built-in rules (consensus, interval,
decision) with :func:`credo.plan.adaptive.stopping_rule`."""

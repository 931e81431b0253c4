"""Plug-ins: methods, metrics, tasks, model backends, kernels and stopping rules that
installed packages register, found through the entry-point group ``credo.plugins``.

A package declares one entry point per module whose import runs its registrations (the
same decorators credo's own modules use: ``@method``, ``@metric``, ``@task_loader``,
``@backend``, ``@kernel``, ``@stopping_rule``)::

    [project.entry-points."credo.plugins"]
    first_share = "credo_first_share"

Nothing is imported at ``import credo`` or when the command line starts: the first read
of a registry (:class:`credo.registry.Registry`) calls :func:`load_plugins`, which
imports every plug-in once, under a lock (a second thread waits for the first; a read
made by a plug-in's own import, in the loading thread, returns at once). While a
plug-in's module registers, :func:`loading` names it (a module of credo's that the
plug-in imports first registers as credo's), so a registry records where each of its
entries came from and names a plug-in's entry ``distribution:name`` when the name is
already taken (:mod:`credo.registry` holds those rules). An entry point names a module
(``module:attribute`` imports the module).

A plug-in that fails to import is a :class:`PluginError`, a user error naming the entry
point and its distribution (the command line prints one line and exits 2; ``-v`` shows the
traceback); every later read raises it again, so a broken installation is never half
used. ``CREDO_NO_PLUGINS=1`` loads none.

This module sits in the bottom layer (docs/architecture.md) and imports only
:mod:`credo.errors`; :mod:`importlib.metadata` is imported on the first load.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from credo.errors import UserError

__all__ = [
    "GROUP",
    "Plugin",
    "PluginError",
    "forget_plugins",
    "load_plugins",
    "loading",
]

GROUP = "credo.plugins"
"""The entry-point group credo reads plug-ins from."""

DISABLE = "CREDO_NO_PLUGINS"
"""Set this environment variable to ``1`` to load no plug-in."""


@dataclass(frozen=True)
class Plugin:
    """One entry point of the ``credo.plugins`` group: its ``name``, the ``module`` it
    imports, and the distribution that ships it (``dist``, normalised as pip does:
    lower case, ``-`` between words; ``version``)."""

    name: str
    module: str
    dist: str
    version: str

    def qualify(self, name: str) -> str:
        """``dist:name``: the name of this plug-in's entry ``name`` when the bare name is
        taken."""
        return f"{self.dist}:{name}"

    def __str__(self) -> str:
        return f"{self.dist} {self.version}"


class PluginError(UserError):
    """A plug-in whose module failed to import; the message names the entry point, its
    distribution and the error, in one line."""


_LOCK = threading.RLock()
_STATE = threading.local()
_loaded: tuple[Plugin, ...] | None = None
"""The plug-ins imported so far; None before the first load."""
_done = False
"""Whether the load finished (the fast path: no lock once it did)."""
_failure: PluginError | None = None


def _normalise(dist: str) -> str:
    return re.sub(r"[-_.]+", "-", dist).lower()


def _entry_points() -> list[Plugin]:
    """Every entry point of :data:`GROUP` with its :class:`Plugin` record, sorted by
    distribution and name (the order of ``sys.path`` decides nothing)."""
    from importlib.metadata import entry_points

    found = []
    seen: set[tuple[str, str]] = set()
    for ep in entry_points(group=GROUP):
        dist = ep.dist
        name = _normalise(dist.metadata["Name"] or "") if dist is not None else "unknown"
        plugin = Plugin(ep.name, ep.value.split(":", 1)[0].strip(), name or "unknown",
                        dist.version if dist is not None else "?")
        if (plugin.dist, plugin.name) in seen:  # one distribution found twice on the path
            continue
        seen.add((plugin.dist, plugin.name))
        found.append(plugin)
    return sorted(found, key=lambda p: (p.dist, p.name))


def loading() -> Plugin | None:
    """The plug-in that makes the registration running now: the plug-in whose module
    this thread is importing, unless the module being executed is credo's own (a module
    of credo the plug-in imports first registers credo's entries); else None."""
    plugin: Plugin | None = getattr(_STATE, "plugin", None)
    if plugin is None:
        return None
    frame = inspect.currentframe()
    while frame is not None and frame.f_code.co_name != "<module>":
        frame = frame.f_back  # the innermost module body: the module registering
    module = frame.f_globals.get("__name__", "") if frame is not None else ""
    return None if module == "credo" or module.startswith("credo.") else plugin


@contextmanager
def _importing(plugin: Plugin) -> Iterator[None]:
    before = loading()
    _STATE.plugin = plugin
    try:
        yield
    finally:
        _STATE.plugin = before


def load_plugins() -> tuple[Plugin, ...]:
    """Import every plug-in once and return them; :class:`PluginError` if one failed
    (again on every call). A call made while this thread is loading them (a plug-in's
    own registration reads a registry) returns the plug-ins loaded so far."""
    global _loaded, _done, _failure
    if _done and _failure is None:
        return _loaded or ()
    with _LOCK:  # another thread loading: wait for it
        if _failure is not None:
            raise _failure
        if _loaded is not None:  # done, or in progress in this very thread
            return _loaded
        _loaded = ()
        try:
            _load_all()
        finally:
            _done = True
        return _loaded


def _load_all() -> None:
    global _loaded, _failure
    if os.environ.get(DISABLE, "") not in ("", "0"):
        return
    for plugin in _entry_points():
        try:
            with _importing(plugin):
                importlib.import_module(plugin.module)
        except Exception as e:  # any failure of a third party's import is theirs
            _failure = PluginError(
                f"plug-in {plugin.name!r} of {plugin.dist} {plugin.version} failed to "
                f"load ({plugin.module}): {type(e).__name__}: {e}; uninstall it or set "
                f"{DISABLE}=1"
            )
            raise _failure from e
        _loaded = (*(_loaded or ()), plugin)


def forget_plugins() -> tuple[Plugin, ...]:
    """Forget the plug-ins loaded (and a failure) and drop their modules from
    ``sys.modules``, so the next read loads them again; return the ones forgotten (tests;
    :func:`credo.registry.unload_plugins` also removes their entries)."""
    global _loaded, _done, _failure
    with _LOCK:
        gone = _loaded or ()
        for plugin in gone:
            for name in [m for m in sys.modules
                         if m == plugin.module or m.startswith(plugin.module + ".")]:
                del sys.modules[name]
        _loaded, _done, _failure = None, False, None
        return gone

"""Old names still read: the config keys and API keywords renamed since credo
:data:`DEPRECATED_SINCE`, each read as its new name with a :class:`DeprecationWarning`
until :data:`REMOVED_IN`. The tables are public so that code reading a config mapping
itself (a run folder's ``config.yaml``) can map old keys first (:func:`current_names`)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from pydantic import model_validator

DEPRECATED_SINCE = "0.1.0"
"""The release whose old names (``perturbation.generator``, ``baselines.paraphrase_generator``,
``kernel_embedder``, ``perturber=``, ``max_batch=``) are read with a
:class:`DeprecationWarning` (CHANGELOG.md)."""
REMOVED_IN = "0.2.0"
"""The release that no longer reads them."""

RUN_RENAMES: dict[str, str] = {"kernel_embedder": "embedder"}
"""A run config's renamed top-level keys (old -> new): one name per notion, ``embedder``
for the sentence embedder wherever one is configured (the perturbation filter's, a
strength run's, the embedding kernel's)."""
PERTURBATION_RENAMES: dict[str, str] = {"generator": "writer"}
"""The ``perturbation:`` section's renamed keys: one name per role."""
BASELINE_RENAMES: dict[str, str] = {"paraphrase_generator": "paraphraser"}
"""The ``baselines:`` section's renamed keys: one name per role."""
CONFIG_RENAMES: dict[str, dict[str, str]] = {
    "": RUN_RENAMES, "perturbation.": PERTURBATION_RENAMES, "baselines.": BASELINE_RENAMES,
}
"""Every renamed config key, by the section it sits in (``""``: the run config's top
level, also a study's ``run:``): what the configuration reference lists."""


def renamed_keys(value: Any, renames: Mapping[str, str], where: str = "") -> Any:
    """``value`` (a config mapping) with each deprecated key of ``renames`` (old -> new)
    read as its new name, a :class:`DeprecationWarning` naming both (one name per role;
    the old names are read from :data:`DEPRECATED_SINCE` until :data:`REMOVED_IN`). Both
    names given is an error rather than a silent choice."""
    if not isinstance(value, dict) or not any(old in value for old in renames):
        return value
    out = dict(value)
    for old, new in renames.items():
        if old not in out:
            continue
        if new in out:
            raise ValueError(f"{where}{new} is given twice: as {new} and as {old} (its "
                             "deprecated name)")
        warnings.warn(f"{where}{old} is deprecated since credo {DEPRECATED_SINCE} and goes "
                      f"in {REMOVED_IN}; call it {where}{new}", DeprecationWarning,
                      stacklevel=2)
        out[new] = out.pop(old)
    return out


def old_names_read(renames: Mapping[str, str], where: str = "") -> Any:
    """The ``mode="before"`` model validator of a config section (``where``: its key and a
    dot, ``""`` at the top level) that reads each deprecated key of ``renames`` as its new
    name (:func:`renamed_keys`); a model takes it as ``_old_names = old_names_read(...)``."""

    def old_names(cls: type, value: Any) -> Any:
        return renamed_keys(value, renames, where)

    return model_validator(mode="before")(classmethod(old_names))


def current_names(value: Mapping[str, Any], renames: Mapping[str, str]) -> dict[str, Any]:
    """``value`` with each old key of ``renames`` under its new name, silently: for
    reading back what an older credo wrote (a run folder's ``config.yaml``), where the
    user has nothing to rename. The new name wins where both are there."""
    out = dict(value)
    for old, new in renames.items():
        if old in out:
            moved = out.pop(old)
            out.setdefault(new, moved)
    return out


DEPRECATED_KEYWORDS: dict[str, str] = {"perturber": "writer", "max_batch": "max_concurrent"}
"""The Python API's renamed keywords (old -> new): each is still accepted until
:data:`REMOVED_IN`, with a :class:`DeprecationWarning` (:func:`renamed_keyword`)."""


def renamed_keyword(new: Any, old: Any, name: str, stacklevel: int = 3) -> Any:
    """The value of an API keyword given by its new name or by its deprecated ``name``
    (:data:`DEPRECATED_KEYWORDS`), with a :class:`DeprecationWarning` for the old one;
    both given is a :class:`TypeError`, as two values for one argument are."""
    if old is None:
        return new
    current = DEPRECATED_KEYWORDS[name]
    if new is not None:
        raise TypeError(f"{current}= and {name}= (its deprecated name) are both given")
    warnings.warn(f"{name}= is deprecated since credo {DEPRECATED_SINCE} and goes in "
                  f"{REMOVED_IN}; pass {current}=", DeprecationWarning, stacklevel=stacklevel)
    return old



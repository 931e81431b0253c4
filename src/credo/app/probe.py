"""``credo probe``: what a served model's server does with ``n``, seeds, logprobs and
grammars (:func:`probe`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from credo.errors import UserError

if TYPE_CHECKING:
    from credo.models.openai_probe import ServerProbe

__all__ = ["ProbeResult", "probe"]


@dataclass
class ProbeResult:
    """``credo probe``'s result: the server's answers and where they were stored (None
    when the probe did not finish: nothing is stored then)."""

    probe: ServerProbe
    stored: Path | None


def probe(
    model: str,
    base_url: str | list[str],
    *,
    label: str | None = None,
    api_key_env: str | None = None,
    cache: str | Path | None = None,
) -> ProbeResult:
    """Ask the server of the served ``model`` (``openai:<name>``) what it does with ``n``,
    seeds, logprobs and grammars; store the answers per model identity in
    ``probes.json`` beside the cache when the probe finished and no empty reply left a
    question unknown."""
    from credo.config import default_cache_path
    from credo.generation.pool import MODEL, ModelPool
    from credo.generation.roles import assign_roles, single_role

    if not model.startswith("openai:"):
        raise UserError(f"--model {model!r}: credo probe asks served models (openai:<m>)")
    roles = single_role(MODEL, model, base_url=base_url, label=label, api_key_env=api_key_env,
                        probe=False)
    with ModelPool(cache_path=default_cache_path(cache), show_progress=False) as pool:
        assign_roles(pool, roles)
        found = pool.probe(MODEL)
        where = pool.probes.path
    return ProbeResult(found, Path(where) if found.settled else None)

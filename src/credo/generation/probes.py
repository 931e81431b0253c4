"""What served models were probed to do, per model identity, beside the generation cache.

``credo probe`` and a run's first use of a served model ask its server a handful of
questions (:mod:`credo.models.openai_probe`): whether it honours ``n``, whether a seed
reproduces its sample, whether the children of a call follow the seed contract, whether
it returns logprobs and obeys a grammar. The answers are kept in ``probes.json`` in the
folder of the SQLite cache, keyed by the model's identity (``openai:<model>[@<label>]``:
never a URL or a key), so a later run, against any replica or port, probes nothing::

    {"version": 1, "probes": {"openai:qwen": {"honours_n": true, ...}}}

Only settled probes are stored: complete, and with no question an empty reply left
unknown (:attr:`~credo.models.openai_probe.ServerProbe.settled`). A
file that cannot be read is reported and ignored (the model is probed again); writes are
atomic (:func:`credo.jsonio.write_text`).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from credo.jsonio import dumps, write_text
from credo.models.openai_probe import ServerProbe

__all__ = ["PROBES_FILE", "ProbeStore", "probes_path"]

log = logging.getLogger(__name__)

PROBES_FILE = "probes.json"
_VERSION = 1


def probes_path(cache_path: str | Path) -> Path | None:
    """``probes.json`` beside the cache file ``cache_path`` (None for an in-memory cache)."""
    path = Path(cache_path)
    if str(cache_path) in ("", ":memory:"):
        return None
    return path.parent / PROBES_FILE


class ProbeStore:
    """Probe records by model identity in one JSON file (``path`` None: kept in memory)."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path is not None else None
        self._memory: dict[str, ServerProbe] = {}

    def get(self, identity: str) -> ServerProbe | None:
        """The stored probe of ``identity``, or None."""
        if self.path is None:
            return self._memory.get(identity)
        record = self._read().get(identity)
        if record is None:
            return None
        try:
            return ServerProbe.from_json(record)
        except (TypeError, ValueError) as exc:
            log.warning("%s: the probe of %s is unreadable (%s); probing again",
                        self.path, identity, exc)
            return None

    def put(self, probe: ServerProbe) -> None:
        """Store ``probe`` under its identity, replacing what was there."""
        if self.path is None:
            self._memory[probe.identity] = probe
            return
        records = self._read()
        records[probe.identity] = probe.to_json()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_text(self.path, dumps({"version": _VERSION, "probes": records}, indent=1,
                                    sort_keys=True) + "\n")

    def _read(self) -> dict[str, Any]:
        """Every stored record ({} when there is no file or it cannot be read)."""
        assert self.path is not None
        if not self.path.exists():
            return {}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            records = data["probes"]
            if not isinstance(records, dict):
                raise TypeError("probes is not a mapping")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("%s: not a probe file credo can read (%s); ignoring it", self.path, exc)
            return {}
        return records

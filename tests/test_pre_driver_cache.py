"""A cache made before the stage driver (issue 31) serves every rerun: zero model calls.

``data/pre_driver/*.sqlite`` are the caches three scenarios of
:mod:`test_request_keys` left when run by the code before issue 31 routed every stage
through one driver (a run with every baseline, a FActScore run with its claim checks,
a strength run). Each scenario is run again over a copy of its cache with every
scripted model refusing to be called: it completes, and it leaves no key the old code
did not. A refactor that changes one request's key (or asks one request more) fails
here with the model call it made.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from credo.models.scripted import ScriptedModel
from test_request_keys import SCENARIOS, _keys

FIXTURES = Path(__file__).parent / "data" / "pre_driver"
NAMES = ("baselines_mc_v2", "factscore_knowledge", "strength")


def _samples(cache: Path) -> int:
    with sqlite3.connect(cache) as db:
        return db.execute("SELECT COUNT(*) FROM samples").fetchone()[0]


@pytest.mark.parametrize("name", NAMES)
def test_a_cache_from_before_the_driver_reruns_with_no_model_call(
    name, tmp_path, bow_embedder, monkeypatch
):
    fixture = FIXTURES / f"{name}.sqlite"
    shutil.copy(fixture, tmp_path / "c.sqlite")
    before = _keys(fixture)
    calls: list[str] = []

    def refuse(self, requests):
        calls.append(self.identity)
        raise AssertionError(f"{self.identity} was called: a request key changed")

    monkeypatch.setattr(ScriptedModel, "generate", refuse)
    cache = SCENARIOS[name](tmp_path, bow_embedder)
    assert calls == []
    assert _keys(cache) == before
    assert _samples(cache) == _samples(fixture)

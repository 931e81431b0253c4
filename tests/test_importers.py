"""The importers (issue 31): credo's JSONL, lm-eval's samples and inspect_ai logs are
entries of one registry, :data:`credo.importers.IMPORTERS`; a new layout is one module
and one registration, read by :func:`credo.importers.read_generations` and so by
``credo score``."""

from __future__ import annotations

import json

import pytest

from credo.importers import (
    IMPORTERS,
    Generations,
    GivenItem,
    GivenSample,
    Importer,
    read_generations,
)
from credo.registry import DuplicateName
from credo.tasks.loaders import DatasetError


def test_the_built_in_importers_are_registered():
    # their claims are disjoint; csv reads the files of its suffix
    assert set(IMPORTERS) == {"credo", "csv", "lm-eval", "inspect"}
    with pytest.raises(DuplicateName):
        IMPORTERS.add("credo", IMPORTERS["credo"])


def _tsv(path, rows, options):
    """A toy layout: one ``item<TAB>answer<TAB>1|0`` line per sample."""
    out = Generations(str(path), "tsv", correctness="given")
    seen: dict[str, None] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        item, answer, correct = line.split("\t")
        seen.setdefault(item)
        out.samples.append(GivenSample(item, "original", answer, answer, correct == "1"))
    out.items = [GivenItem(i) for i in seen]
    return out


@pytest.fixture
def tsv_importer():
    IMPORTERS.add("tsv", Importer(_tsv, suffixes=(".tsv",)))
    yield
    IMPORTERS.remove("tsv")


def test_a_registered_importer_reads_its_files(tmp_path, tsv_importer):
    path = tmp_path / "given.tsv"
    path.write_text("a\t5\t1\na\t6\t0\nb\t7\t1\n", encoding="utf-8")
    got = read_generations(path)
    assert got.layout == "tsv" and [i.id for i in got.items] == ["a", "b"]
    assert [(s.item, s.answer, s.correct) for s in got.samples] == [
        ("a", "5", True), ("a", "6", False), ("b", "7", True)]


def test_each_jsonl_layout_is_claimed_by_its_first_row(tmp_path):
    credo_rows = tmp_path / "credo.jsonl"
    credo_rows.write_text(json.dumps({"item": "q1", "set": "original", "answer": "4",
                                      "correct": True}) + "\n", encoding="utf-8")
    assert read_generations(credo_rows).layout == "credo"
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(DatasetError, match="no rows"):
        read_generations(empty)


@pytest.mark.parametrize("layout", ["csv", "jsonl"])
def test_an_items_scores_gather_over_its_rows_and_must_agree(layout, tmp_path):
    """credo JSONL and CSV merge an item's ``item_scores`` alike: rows that agree give the
    item one score (a JSONL row may say nothing); a row that differs is refused, naming
    its line."""

    def write(second: str) -> object:
        if layout == "csv":
            path = tmp_path / "t.csv"
            path.write_text("item,answer,correct,item_scores.judge\n"
                            f"q1,a,true,0.4\nq1,b,false,{second}\nq2,c,true,0.9\n")
        else:
            path = tmp_path / "t.jsonl"
            rows = [{"item": "q1", "answer": "a", "correct": True, "item_scores": {"judge": 0.4}},
                    {"item": "q1", "answer": "b", "correct": False},
                    {"item": "q2", "answer": "c", "correct": True, "item_scores": {"judge": 0.9}}]
            if second:
                rows[1]["item_scores"] = {"judge": float(second)}
            path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return path

    for agreeing in ("0.4", "") if layout == "jsonl" else ("0.4",):
        got = read_generations(write(agreeing))
        assert {i.id: dict(i.scores) for i in got.items} == {"q1": {"judge": 0.4},
                                                             "q2": {"judge": 0.9}}
    with pytest.raises(DatasetError, match=r":(2|3): item_scores.judge = 0.5, but an earlier"):
        read_generations(write("0.5"))

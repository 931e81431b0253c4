"""Open-ended tasks: the code sandbox, HumanEval, FreshQA / SimpleQA grading, FActScore."""

import json
import math
import socket
import threading
import time
from pathlib import Path

import pytest

from credo.tasks.answers import Answer, extract_answer
from credo.tasks.base import AnswerFormat, Item
from credo.tasks.builtin import list_tasks, load_task
from credo.tasks.factual import (
    Grade,
    gold_answers,
    grading_messages,
    load_simpleqa,
    parse_grade,
    pregrade,
)
from credo.tasks.grading import is_correct
from credo.tasks.humaneval import check_code, code_is_correct, completion_program
from credo.tasks.loaders import DatasetError
from credo.tasks.longform import (
    FolderKnowledgeSource,
    claims,
    load_factscore_labelled,
    load_factscore_task,
    parse_support,
)
from credo.tasks.sandbox import SandboxLimits, run_python

DATA = Path(__file__).parent / "data"
LIMITS = SandboxLimits(cpu_seconds=2, wall_seconds=6.0, memory_bytes=512 << 20)


# --------------------------------------------------------------------------- sandbox


def test_sandbox_runs_plain_code_in_its_own_temp_dir():
    program = "import os\nopen('x.txt', 'w').write('ok')\nassert os.path.exists('x.txt')"
    r = run_python(program, LIMITS)
    assert r.passed and r.returncode == 0
    assert run_python("assert 1 == 2", LIMITS).status == "failed"


def test_sandbox_stops_an_infinite_loop_within_its_cpu_limit():
    t0 = time.perf_counter()
    r = run_python("while True:\n    pass\n# loop", LIMITS)
    assert r.status == "timeout"
    # killed by RLIMIT_CPU after 2 CPU seconds, or at the latest by the wall-clock limit on
    # a loaded machine; without limits it would never return
    assert time.perf_counter() - t0 < LIMITS.wall_seconds + 3


def test_sandbox_stops_a_sleeper_at_the_wall_clock():
    limits = SandboxLimits(cpu_seconds=2, wall_seconds=1.5, memory_bytes=512 << 20)
    t0 = time.perf_counter()
    r = run_python("import time\ntime.sleep(60)", limits)
    assert r.status == "timeout" and time.perf_counter() - t0 < 5


def test_sandbox_stops_a_memory_hog():
    r = run_python("blocks = []\nwhile True:\n    blocks.append(bytearray(50 << 20))", LIMITS)
    assert r.status == "memory"
    assert "MemoryError" in r.stderr


def test_sandbox_refuses_network():
    # a listening socket in this process: the sandboxed child must not reach it
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    accepted = []

    def accept():
        server.settimeout(4)
        try:
            accepted.append(server.accept())
        except OSError:
            pass

    t = threading.Thread(target=accept)
    t.start()
    r = run_python(
        f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=2)\n",
        LIMITS,
    )
    t.join()
    server.close()
    assert r.status == "failed" and not accepted
    assert "sandbox" in r.stderr or "refused" in r.stderr.lower() or "unreachable" in r.stderr


@pytest.mark.parametrize(
    "program",
    [
        "import subprocess\nsubprocess.run(['true'])",
        "import os\nos.system('true')",
        "import os\nos.fork()",
        "open('/tmp/credo-sandbox-escape.txt', 'w').write('x')",
        "import ctypes\nctypes.CDLL(None)",
    ],
)
def test_sandbox_refuses_escape_hatches(program):
    r = run_python(program, LIMITS)
    assert r.status == "failed" and "PermissionError: sandbox" in r.stderr
    assert not Path("/tmp/credo-sandbox-escape.txt").exists()


# --------------------------------------------------------------------------- HumanEval


@pytest.fixture(scope="module")
def humaneval():
    return load_task("humaneval")


def test_humaneval_ships_164_problems(humaneval):
    assert len(humaneval.items) == 164 and humaneval.format is AnswerFormat.CODE
    first = humaneval.items[0]
    assert first.id == "HumanEval/0" and first.meta["entry_point"] == "has_close_elements"
    assert "humaneval" in list_tasks()


def test_humaneval_all_canonical_solutions_pass(humaneval):
    # 164 sandboxed subprocesses, ~15 s on two cores
    failed = [it.id for it in humaneval.items if not check_code(it.gold, it).passed]
    assert failed == []


def test_humaneval_broken_solutions_fail(humaneval):
    it = humaneval.items[0]
    assert not code_is_correct("    return True\n", it)
    assert not code_is_correct("    return (\n", it)  # syntax error
    assert check_code("    while True:\n        pass\n", it, LIMITS).status == "timeout"
    assert not code_is_correct(None, it)


def test_humaneval_answers_as_fenced_function_or_bare_body(humaneval):
    it = humaneval.items[2]  # truncate_number: return number % 1.0
    full = (
        "Here you go:\n```python\ndef truncate_number(number: float) -> float:\n"
        "    return number % 1.0\n```\nThis works because ..."
    )
    code = extract_answer(full, AnswerFormat.CODE).value
    assert code.startswith("def truncate_number")
    assert is_correct(Answer(code, full), it, AnswerFormat.CODE)
    assert code_is_correct("return number % 1.0", it)  # unindented bare body
    assert code_is_correct("    return number - int(number)", it)
    program = completion_program("return number % 1.0", it)
    assert program.rstrip().endswith("check(truncate_number)")


# --------------------------------------------------------------------------- FreshQA, SimpleQA


def test_freshqa_keeps_never_and_slow_changing_facts():
    task = load_task("freshqa")
    assert len(task.items) == 299 and task.format is AnswerFormat.SHORT_TEXT
    assert all(it.meta["fact_type"] in ("never-changing", "slow-changing") for it in task.items)
    assert all(it.meta["false_premise"] == "false" for it in task.items)
    everything = load_task("freshqa:all")
    assert len(everything.items) == 445
    ceo = next(it for it in task.items if it.question == "Who is the CEO of Google?")
    assert gold_answers(ceo) == ["Sundar Pichai", "Pichai Sundararajan"]
    assert ceo.meta["grader"] == "simpleqa"


def test_simpleqa_loaders_read_both_layouts():
    plain = load_simpleqa(DATA / "simpleqa_layout3.csv")
    assert [it.id for it in plain.items] == ["simpleqa-0", "simpleqa-1", "simpleqa-2"]
    assert plain.items[0].gold == "Michio Sugeno"
    assert plain.items[2].question.startswith("In which year did Apollo 11")  # quoted comma
    assert "Science and technology" in plain.items[0].meta["metadata"]
    verified = load_task(f"simpleqa_verified:{DATA / 'simpleqa_verified_layout3.csv'}")
    assert [it.id for it in verified.items] == [
        "simpleqa_verified-5", "simpleqa_verified-17", "simpleqa_verified-42"
    ]
    assert verified.items[1].gold == "George Eliot" and verified.items[1].meta["topic"] == "Art"


def test_simpleqa_loader_reads_question_and_true_answer_columns(tmp_path):
    path = tmp_path / "simpleqa_export.csv"
    path.write_text(
        'question,true_answer,true_reasoning\n"Who wrote Middlemarch?",George Eliot,\n',
        encoding="utf-8",
    )
    item = load_simpleqa(path).items[0]
    assert (item.id, item.question, item.gold) == (
        "simpleqa-0", "Who wrote Middlemarch?", "George Eliot"
    )
    assert gold_answers(item) == ["George Eliot"] and item.meta["grader"] == "simpleqa"
    other = tmp_path / "other.csv"
    other.write_text("prompt,target\nWhy?,Because\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"other\.csv:2: .*'question' and 'true_answer'"):
        load_simpleqa(other)


def test_simpleqa_loader_names_file_and_line(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("problem,answer\nWhat?,\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"bad\.csv:2"):
        load_simpleqa(bad)
    with pytest.raises(ValueError, match="needs the CSV"):
        load_task("simpleqa")


@pytest.mark.parametrize(
    ("reply", "grade"),
    [
        ("A", Grade.CORRECT),
        ("B", Grade.INCORRECT),
        ("C", Grade.NOT_ATTEMPTED),
        ("A) CORRECT", Grade.CORRECT),
        ("**B**", Grade.INCORRECT),
        ("Grade: C", Grade.NOT_ATTEMPTED),
        ("CORRECT", Grade.CORRECT),
        ("Incorrect.", Grade.INCORRECT),
        ("NOT_ATTEMPTED", Grade.NOT_ATTEMPTED),
        ("not attempted", Grade.NOT_ATTEMPTED),
        ("<think>hmm</think> B", Grade.INCORRECT),
        ("a correct answer", Grade.UNPARSABLE),
        ("The answer is right", Grade.UNPARSABLE),
        ("D", Grade.UNPARSABLE),
        ("A/B", Grade.UNPARSABLE),
        ("", Grade.UNPARSABLE),
    ],
)
def test_parse_grade(reply, grade):
    assert parse_grade(reply) is grade


def test_pregrade_and_grading_prompt():
    it = Item("x", "Who is the CEO of Google?", "Sundar Pichai",
              meta={"gold_answers": '["Sundar Pichai", "Pichai Sundararajan"]'})
    assert pregrade(it, None) is Grade.NOT_ATTEMPTED
    assert pregrade(it, "sundar pichai") is Grade.CORRECT
    assert pregrade(it, "pichai sundararajan") is Grade.CORRECT
    assert pregrade(it, "satya nadella") is None  # needs the judge
    _, user = grading_messages(it, "Answer: Pichai")
    assert "Gold target: Sundar Pichai (also accepted: Pichai Sundararajan)" in user.content
    assert "Predicted answer: Answer: Pichai" in user.content


@pytest.mark.parametrize(
    ("golds", "answer", "grade"),
    [
        (["22", "twenty-two"], "2", Grade.INCORRECT),  # FreshQA: a 1.5B judge passed this
        (["22", "twenty-two"], "22", Grade.CORRECT),
        (["22", "twenty-two"], "Twenty-two.", Grade.CORRECT),  # SQuAD-normalised text match
        (["$10", "10 USD"], "10", Grade.CORRECT),
        (["$10", "10 USD"], "25", Grade.INCORRECT),
        (["$10", "10 USD"], "10day", None),  # not only a number: the judge decides
        (["No humans have been to Mars yet.", "0", "zero", "none"], "2", Grade.INCORRECT),
        (["No humans have been to Mars yet.", "0", "zero", "none"], "none", Grade.CORRECT),
        (["120,000"], "120000", Grade.CORRECT),
        (["3.14"], "3.1416", Grade.CORRECT),  # to the gold's precision
        (["3.14"], "3.2", Grade.INCORRECT),
        (["Leonardo DiCaprio does not have any children."], "3", None),  # no numeric gold
    ],
)
def test_pregrade_numbers_decide_numeric_answers(golds, answer, grade):
    it = Item("x", "How many?", golds[0], meta={"gold_answers": json.dumps(golds)})
    assert pregrade(it, answer) is grade


# --------------------------------------------------------------------------- FActScore


def test_factscore_labelled_loader():
    bios = load_factscore_labelled(DATA / "factscore_labelled_layout2.jsonl")
    assert [b.topic for b in bios] == ["Ada Lovelace", "Nobody Known"]
    assert bios[0].factscore == pytest.approx(3 / 4)  # S, S, S, NS (IR excluded)
    assert bios[1].abstained and math.isnan(bios[1].factscore)
    task = load_factscore_task(DATA / "factscore_labelled_layout2.jsonl")
    assert task.items[0].question == "Tell me a bio of Ada Lovelace."
    assert task.format is AnswerFormat.LONG_FORM and "knowledge" not in task.items[0].meta


def test_factscore_entity_list_and_knowledge_folder(tmp_path):
    names = tmp_path / "entities.txt"
    names.write_text("Ada Lovelace\n\nAlan Turing\n", encoding="utf-8")
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "Ada_Lovelace.txt").write_text(
        "Ada Lovelace was an English mathematician. " * 3
        + "She was born in London in 1815. " * 60,
        encoding="utf-8",
    )
    task = load_task(f"factscore:{names},knowledge={kb}")
    assert [it.meta["entity"] for it in task.items] == ["Ada Lovelace", "Alan Turing"]
    assert task.items[0].meta["knowledge"] == str(kb)
    src = FolderKnowledgeSource(kb, words=50)
    assert len(src.passages("Ada Lovelace")) > 3 and src.passages("Alan Turing") == []
    top = src.retrieve("Ada Lovelace", "Ada Lovelace was a mathematician.", k=1)
    assert "mathematician" in top[0]
    with pytest.raises(ValueError, match="knowledge="):
        load_task(f"factscore:{names},wiki={kb}")


def test_claims_and_support_parsing():
    text = "Ada Lovelace was a mathematician. She was born in 1815! Ok. She died in 1852."
    assert claims(text) == [
        "Ada Lovelace was a mathematician.", "She was born in 1815!", "She died in 1852."
    ]
    assert claims(None) == []
    # a sentence ending inside quotes or brackets ends there (seen in a real run:
    # '... "The Unfocused Mirror." His performances ...' was one claim)
    quoted = ('He stars in "The Unfocused Mirror." His roles earn acclaim. '
              "He said \u201cyes.\u201d Then he left.")
    assert claims(quoted) == [
        'He stars in "The Unfocused Mirror."', "His roles earn acclaim.",
        "He said \u201cyes.\u201d", "Then he left.",
    ]
    assert claims("Born in Seoul (South Korea.) Later he moved there.") == [
        "Born in Seoul (South Korea.)", "Later he moved there.",
    ]
    assert claims('She wrote "On Numbers" and more. It sold well.') == [
        'She wrote "On Numbers" and more.', "It sold well.",
    ]
    assert parse_support("True") is True and parse_support("false.") is False
    assert parse_support("True or False") is None and parse_support("Supported") is None


def test_code_extraction_from_an_unclosed_fence():
    text = "Sure:\n```python\ndef f(x):\n    return x"
    assert extract_answer(text, AnswerFormat.CODE).value == "def f(x):\n    return x"

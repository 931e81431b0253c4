"""``credo score`` on what lm-evaluation-harness and inspect_ai themselves write (issue 25
item 4): each tool is run on a local task against a local OpenAI-compatible server
(:class:`fault_server.FaultServer`), and credo must read every sample of every item with
the tool's own per-sample correctness. Issue 34 items 11-13: an answer column mixing
numbers and text, ``credo run`` and ``credo score`` agreeing on ids and answers, the score
report, a cancelled inspect eval."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import credo
from credo import RunConfig
from credo.cli import main
from credo.importers import read_generations
from fault_server import FaultServer

lm_eval = pytest.importorskip("lm_eval")
inspect_ai = pytest.importorskip("inspect_ai")

OFFLINE = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}

TASK = """\
task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "{{{{question}}}}"
doc_to_target: "{{{{answer}}}}"
repeats: 5
generation_kwargs:
  until: ["\\n\\n"]
  do_sample: true
  temperature: 1.0
  max_gen_toks: 16
filter_list:
  - name: {filter}
    filter:
      - function: regex
        regex_pattern: "([0-9,]+)"
        group_select: -1
{take_first}metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
{options}"""
STRICT = {"name": "credo_toy", "filter": "strict", "take_first": "      - function: take_first\n",
          "options": "    ignore_case: true\n    ignore_punctuation: true\n"
                     "    regexes_to_ignore: [\",\"]\n"}
LOOSE = {"name": "credo_toy_loose", "filter": "loose", "take_first": "", "options": ""}
"""Two tasks on the same documents: ``credo_toy`` (regex, take_first; commas and
punctuation ignored) and ``credo_toy_loose`` (the regex alone: lm-eval keeps a list per
response; the metric compares "3,500" and "3500" as different)."""
DOCS = [{"id": "q-a", "question": "What is 1,000 + 2,500?", "answer": 3500},
        {"id": "q-b", "question": "What is 2 + 2?", "answer": "4"},
        {"id": "q-c", "question": "What is 3 + 4?", "answer": "7"},
        {"id": "q-d", "question": "Spell the sum of 2 and 3.", "answer": "five"}]
ANSWERS = ("1,000 + 2,500 = 3,500", "3500", "4", "7", "five")
"""The answer column mixes numbers and text (issue 34 item 11): lm-eval reads it as
``datasets``' JSON loader makes it, a ``Json`` column (3500, 4, 7, "five"), and renders
the targets "3500", ..., "five"."""


def _lm_eval_exact_match(text: str, target: str) -> bool:
    """The task's metric by hand: the regex filter's last number, commas and punctuation
    ignored, case folded ("five" has none: lm-eval's "[invalid]")."""
    found = re.findall(r"([0-9,]+)", text)
    answer = found[-1].replace(",", "") if found else "[invalid]"
    return answer.casefold() == target.casefold()


@pytest.fixture(scope="module")
def lm_eval_out(tmp_path_factory) -> Path:
    """``lm_eval --log_samples`` of both tasks with ``repeats: 5`` against the fake
    server, in one run: its output folder (a samples file per task, the results file)."""
    tmp = tmp_path_factory.mktemp("lm_eval")
    data = tmp / "data.jsonl"
    data.write_text("".join(json.dumps(d) + "\n" for d in DOCS), encoding="utf-8")
    (tmp / "tasks").mkdir()
    for task in (STRICT, LOOSE):
        (tmp / "tasks" / f"{task['name']}.yaml").write_text(TASK.format(data=data, **task),
                                                           encoding="utf-8")
    env = {**os.environ, **OFFLINE, "HF_HOME": str(tmp / "hf"), "OPENAI_API_KEY": "x"}
    with FaultServer(answers=ANSWERS, seed_mode="ignored") as server:
        done = subprocess.run(
            [sys.executable, "-m", "lm_eval", "--model", "local-chat-completions",
             "--model_args", f"model=m,base_url={server.url}/chat/completions,num_concurrent=1,"
             "max_retries=1,tokenized_requests=False", "--tasks",
             f"{STRICT['name']},{LOOSE['name']}",
             "--include_path", str(tmp / "tasks"), "--output_path", str(tmp / "out"),
             "--log_samples", "--apply_chat_template"],
            capture_output=True, text=True, env=env, timeout=300, check=False,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    return tmp / "out"


def _samples_of(out: Path, task: dict) -> Path:
    (samples,) = out.rglob(f"samples_{task['name']}_2*.jsonl")
    return samples


@pytest.fixture(scope="module")
def lm_eval_samples(lm_eval_out) -> Path:
    """The samples file of ``credo_toy`` (the results file beside it)."""
    return _samples_of(lm_eval_out, STRICT)


ORIGINALS_ONLY = {"self_consistency", "semantic_entropy", "num_semantic_sets", "eigv",
                  "degree", "eccentricity", "kle", "lexsim", "answer_consistency"}
"""The methods that read only the original samples (outside multiple choice; listed in
docs/how-to/own-generations.md):
what ``credo score`` scores by default on one set of samples per item."""


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _item_id(out: Path, task: dict, doc_id: int) -> str:
    """The id ``credo run --task lm-eval:<task>`` gives document ``doc_id``: the task, a
    digest of its local data file (the dataset's revision) and lm-eval's doc id."""
    revision = hashlib.sha256((out.parent / "data.jsonl").read_bytes()).hexdigest()[:12]
    return f"{task['name']}@{revision}:{doc_id}"


def test_lm_eval_repeats_read_with_lm_evals_own_metric(lm_eval_out, lm_eval_samples,
                                                        tmp_path, capsys):
    """Every response of every document, scored by lm-eval's own metric, from a file whose
    answer column mixes a number and text (issue 34 item 11: it was refused, exit 2)."""
    rows = _rows(lm_eval_samples)
    assert {type(r["doc"]["answer"]) for r in rows} == {int, str}  # as lm-eval logged them
    out = tmp_path / "scored"
    assert main(["score", str(lm_eval_samples), "--out", str(out), "--bootstrap", "0",
                 "--cache", str(tmp_path / "c.sqlite"), "--quiet"]) == 0
    written = _rows(out / "samples.jsonl")
    assert {r["id"] for r in written} == {_item_id(lm_eval_out, STRICT, d)
                                          for d in range(len(DOCS))}
    saw_the_difference = False
    for row in rows:
        item = _item_id(lm_eval_out, STRICT, row["doc_id"])
        texts = row["resps"][0]
        assert len(texts) == 5
        mine = [s for s in written if s["id"] == item and s["set"] == "original"]
        assert [s["text"] for s in mine] == texts  # every sample of every item, in order
        correct = [s["correct"] for s in mine]
        # lm-eval's own score of the response it kept (its filter takes the first)
        assert correct[0] == bool(row["exact_match"])
        assert correct == [_lm_eval_exact_match(t, row["target"]) for t in texts]
        saw_the_difference |= any(c and t.strip() != row["target"]
                                  for c, t in zip(correct, texts, strict=True))
    assert saw_the_difference  # "1,000 + 2,500 = 3,500" is right by the task's metric
    report = (out / "report.md").read_text()
    assert "correctness: lm-eval exact_match (filter strict: regex, take_first;" in report
    assert "ignore_punctuation=True" in report
    assert ("samples per item: 5 original, m = 0 perturbed; sampling: repeats=5, "
            "temperature=1.0, max_tokens=16") in report
    config = yaml.safe_load((out / "config.yaml").read_text())
    assert (config["n"], config["m"], config["limit"]) == (5, 0, None)
    # only what the file records, not credo's defaults (top_k, min_p, ...)
    assert config["sampling"] == {"temperature": 1.0, "max_tokens": 16}
    # the results file is no samples file: the message says which one is
    (results,) = lm_eval_samples.parent.glob("results_*.json")
    capsys.readouterr()
    assert main(["score", str(results), "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "samples_<task>_<date>.jsonl" in err and "Traceback" not in err


def test_lm_evals_own_accuracy_is_shown_beside_credos(lm_eval_samples, tmp_path, capsys):
    """credo's accuracy (every response) sat beside lm-eval's (the response its filter
    keeps per document) with no line relating them: both are named with what each
    averages, lm-eval's equal to the aggregate its own results file reports."""
    (results,) = lm_eval_samples.parent.glob("results_*.json")
    theirs = json.loads(results.read_text())["results"][STRICT["name"]]["exact_match,strict"]
    out = tmp_path / "scored"
    capsys.readouterr()
    assert main(["score", str(lm_eval_samples), "--methods", "self_consistency",
                 "--bootstrap", "0", "--out", str(out), "--quiet"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["stats"]["tool_accuracy"] == pytest.approx(theirs)
    rows = _rows(lm_eval_samples)
    every = np.mean([np.mean([_lm_eval_exact_match(t, r["target"]) for t in r["resps"][0]])
                     for r in rows])
    assert metrics["accuracy"] == pytest.approx(every) and every != pytest.approx(theirs)
    line = (f"accuracy (mean p̄ over items): {metrics['accuracy']:.3f}, p̄ the share of correct "
            "answers among every response of an item; lm-eval's exact_match (filter strict) "
            "as it logged it: the mean over documents of the one response its filter keeps: "
            f"{theirs:.3f}")
    assert line in printed and f"- {line}" in (out / "report.md").read_text()


def test_inspect_items_in_natural_order_with_inspects_own_accuracy(tmp_path):
    """inspect items came out in string order (q1, q10, q2); its own accuracy (the log's
    metric, epochs reduced by their mean) is shown beside credo's."""
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.log import read_eval_log
    from inspect_ai.scorer import match
    from inspect_ai.solver import generate

    ids = ["q10", "q2", "q1", "q11", "q3"]
    dataset = MemoryDataset([Sample(id=i, input=f"Capital number {i}?", target="Paris")
                             for i in ids])
    service = f"credofake{next(_SERVICES)}"
    with FaultServer(answers=("Paris", "Rome", "Lyon"), seed_mode="ignored") as server:
        os.environ.update(OFFLINE, **{f"{service.upper()}_API_KEY": "x",
                                      f"{service.upper()}_BASE_URL": server.url})
        try:
            (log,) = inspect_eval(Task(dataset=dataset, solver=generate(), scorer=match(),
                                       epochs=3), model=f"openai-api/{service}/m",
                                  log_format="eval", log_dir=str(tmp_path), display="none")
        finally:
            for key in ("API_KEY", "BASE_URL"):
                os.environ.pop(f"{service.upper()}_{key}", None)
    path = Path(log.location)
    theirs = read_eval_log(str(path)).results.scores[0].metrics["accuracy"].value
    gens = read_generations(path)
    assert [i.id for i in gens.items] == ["q1", "q2", "q3", "q10", "q11"]
    assert [s.item for s in gens.samples][::3] == ["q1", "q2", "q3", "q10", "q11"]
    assert gens.tool_accuracy == pytest.approx(theirs)
    assert gens.tool_accuracy_is.startswith("inspect_ai's accuracy of scorer match")
    res = credo.api.score(path, RunConfig(methods=["self_consistency"], bootstrap=0,
                                          out=tmp_path / "o"), show_progress=False)
    assert [r.item.id for r in res.items] == ["q1", "q2", "q3", "q10", "q11"]
    assert res.accuracy == pytest.approx(theirs)  # mean reducer: the same average


def test_a_score_report_says_what_was_scored(lm_eval_samples, tmp_path, capsys):
    """Issue 34 item 13, on lm-eval's samples: one correctness line (the tool's; credo's
    own grader, unused, is not named), a "credo score" title, m shown as the file holds
    it (m = 0: no perturbed sample), and without --methods every method the input allows
    (docs/how-to/own-generations.md: SE, EigV, degree, ... need only original samples)."""
    out = tmp_path / "scored"
    capsys.readouterr()
    assert main(["score", str(lm_eval_samples), "--out", str(out), "--bootstrap", "0",
                 "--cache", str(tmp_path / "c.sqlite"), "--quiet"]) == 0
    printed = capsys.readouterr().out
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics["methods"]) == ORIGINALS_ONLY
    tool = metrics["stats"]["correctness"]
    assert tool.startswith("lm-eval exact_match (filter strict: regex, take_first;")
    assert metrics["correctness"] == tool
    report = (out / "report.md").read_text()
    html = (out / "report.html").read_text()
    assert [ln for ln in report.splitlines() if "correctness:" in ln] == [f"- correctness: {tool}"]
    assert "SQuAD" not in report and "SQuAD" not in html
    assert report.startswith(f"# credo score: {lm_eval_samples} (lm-evaluation-harness")
    assert f"<h1>credo score: {lm_eval_samples} (lm-evaluation-harness" in html
    assert "credo run" not in report.splitlines()[0] and "<h1>credo run" not in html
    assert "m = 0 perturbed" in html
    printed = " ".join(printed.split())  # the table's title, wrapped to the terminal
    assert "· n=5 m=0 · accuracy" in printed
    assert "answers: lm-eval's filter strict (regex, take_first) on each response" in report


@pytest.mark.parametrize("fmt", ["number", "short_text"])
def test_recomputed_correctness_grades_what_lm_eval_grades(lm_eval_samples, tmp_path, fmt):
    """Issue 34 item 11: ``--recompute-correctness`` grades lm-eval's filtered answer of
    each response ("1,000 + 2,500 = 3,500" answers 3500), so what lm-eval grades right
    credo grades right; it graded the whole reply, wrong."""
    res = credo.api.score(lm_eval_samples, RunConfig(bootstrap=0, out=tmp_path / "r",
                                                     cache=tmp_path / "c.sqlite",
                                                     methods=["self_consistency"]),
                          recompute_correctness=True, answer_format=fmt, show_progress=False)
    assert res.stats["correctness"].startswith("recomputed")
    by_text = {}
    for r in res.items:
        for s, c in zip(r.original, r.set_correct["original"], strict=True):
            assert c == _lm_eval_exact_match(s.text, r.item.gold), (s.text, r.item.gold)
            by_text[s.text, r.item.gold] = c
    assert by_text[ANSWERS[0], "3500"] is True  # the case the issue names


def test_run_and_score_agree_on_item_ids_and_compared_answers(lm_eval_out, tmp_path):
    """Issue 34 item 12: the same lm-eval task through ``credo run --task lm-eval:<task>``
    (a scripted model answering each document with the responses lm-eval logged) and
    through ``credo score`` on lm-eval's own samples of it: equal item ids, equal answers
    (what SC and SE compare: lm-eval's filtered responses), so equal SC and SE, and equal
    correctness. Both tasks: take_first, and a regex filter without it."""
    from credo.config import LmEvalConfig
    from credo.models.scripted import ScriptedModel

    methods = ["self_consistency", "semantic_entropy"]
    for task in (STRICT, LOOSE):
        rows = _rows(_samples_of(lm_eval_out, task))
        table = {r["doc"]["question"]: r["resps"][0] for r in rows}

        def respond(messages, seed, table=table):
            prompt = next(m.content for m in reversed(messages) if m.role == "user")
            return table[prompt][seed % 5]  # the 5 seeds of a request: all 5 responses

        ran = credo.run(RunConfig(task=f"lm-eval:{task['name']}", n=5, limit=None,
                                  lm_eval=LmEvalConfig(include_path=[lm_eval_out.parent /
                                                                     "tasks"]),
                                  methods=methods, bootstrap=0, out=tmp_path / "run",
                                  cache=tmp_path / f"{task['name']}.sqlite"),
                        model=ScriptedModel(respond), show_progress=False)
        out = tmp_path / "scored"
        assert main(["score", str(_samples_of(lm_eval_out, task)), "--methods",
                     ",".join(methods), "--out", str(out), "--bootstrap", "0",
                     "--cache", str(tmp_path / "c.sqlite"), "--quiet"]) == 0
        scored = _rows(out / "samples.jsonl")
        want = [_item_id(lm_eval_out, task, d) for d in range(len(DOCS))]
        assert [r.item.id for r in ran.items] == want
        assert list(dict.fromkeys(s["id"] for s in scored)) == want
        differ = 0
        for r in ran.items:
            mine = sorted((s.text, s.answer.value, c) for s, c in
                          zip(r.original, r.set_correct["original"], strict=True))
            theirs = sorted((s["text"], s["answer"], s["correct"]) for s in scored
                            if s["id"] == r.item.id)
            assert mine == theirs, task["name"]
            differ += sum(1 for text, answer, _ in mine if answer != text.strip())
        assert differ  # the filter's answers, not the whole replies
        answers = {(s["text"], s["answer"]) for s in scored}
        if task is STRICT:  # commas ignored: one answer for both spellings
            assert {(ANSWERS[0], "3500"), ("3500", "3500"), ("five", None)} <= answers
        else:  # the metric tells "3,500" from "3500": so do SC and SE
            assert {(ANSWERS[0], "3,500"), ("3500", "3500"), ("five", None)} <= answers
        again = {r["id"]: r["scores"] for r in _rows(out / "scores.jsonl")}
        for r in ran.items:
            for m in methods:
                assert again[r.item.id][m] == pytest.approx(r.scores[m]), (task["name"], m)


@settings(max_examples=300, deadline=None)
@given(a=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                 max_size=8),
       b=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                 max_size=8),
       regexes=st.lists(st.sampled_from([",", r"\$", r"^\s*the\s+", r"\.$", "[0-9]"]),
                        max_size=2),
       case=st.booleans(), punctuation=st.booleans(), numbers=st.booleans())
def test_two_answers_are_equal_exactly_when_lm_evals_exact_match_says(
        a, b, regexes, case, punctuation, numbers):
    """:class:`AnswerRule` normalises as lm-eval's ``exact_match`` does: two (stripped)
    responses get the same answer exactly when that metric scores one against the other
    1 (the hand-written normalisation checked against lm-eval's function)."""
    from lm_eval.api.metrics import exact_match_hf_evaluate

    from credo.tasks.lm_eval_scores import AnswerRule

    options = {"regexes_to_ignore": regexes, "ignore_case": case,
               "ignore_punctuation": punctuation, "ignore_numbers": numbers}
    rule = AnswerRule.of(None, "exact_match", options)
    theirs = exact_match_hf_evaluate([a.strip()], [b.strip()], **options)["exact_match"]
    assert (rule(a) == rule(b)) == (theirs == 1.0)


_SERVICES = itertools.count()


def _inspect_eval(tmp: Path, fmt: str, faults: dict | None = None, epochs: int = 3):
    """inspect_ai itself: a task with ``epochs`` against the fake server; its log."""
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.scorer import match
    from inspect_ai.solver import generate

    dataset = MemoryDataset([Sample(id="fr", input="Capital of France?", target="Paris"),
                             Sample(id=7, input="Capital of Italy?", target="Rome"),
                             Sample(id="de", input="Capital of Germany?", target="Berlin")])
    service = f"credofake{next(_SERVICES)}"  # inspect keeps a client per model name
    with FaultServer(faults, answers=("Paris", "Rome", "Lyon", "paris."),
                     seed_mode="ignored") as server:
        os.environ.update(OFFLINE, **{f"{service.upper()}_API_KEY": "x",
                                      f"{service.upper()}_BASE_URL": server.url})
        try:
            (log,) = inspect_eval(
                Task(dataset=dataset, solver=generate(), scorer=match(), epochs=epochs),
                model=f"openai-api/{service}/m", log_format=fmt, log_dir=str(tmp),
                display="none", max_retries=0, timeout=10, fail_on_error=not faults,
                retry_on_error=0,
            )
        finally:
            for key in ("API_KEY", "BASE_URL"):
                os.environ.pop(f"{service.upper()}_{key}", None)
    return Path(log.location)


@pytest.mark.parametrize("fmt", ["eval", "json"])
def test_inspect_epochs_read_with_inspects_own_scorer(fmt, tmp_path, monkeypatch):
    from inspect_ai.log import read_eval_log

    path = _inspect_eval(tmp_path, fmt)
    log = read_eval_log(str(path))
    want = {(str(s.id), s.epoch): (s.output.completion, s.scores["match"].value == "C")
            for s in log.samples}
    readers = [False, True] if fmt == "eval" else [False]
    for without_inspect in readers:  # inspect_ai's reader, then the zstd codec alone
        if without_inspect:
            monkeypatch.setitem(sys.modules, "inspect_ai.log", None)
        gens = read_generations(path)
        got = {}
        for item in {s.item for s in gens.samples}:
            mine = [s for s in gens.samples if s.item == item]
            assert len(mine) == 3  # every epoch
            got |= {(item, k): (s.text, s.correct) for k, s in enumerate(mine, 1)}
        assert got == want
        assert gens.correctness.startswith("inspect_ai scorer match")
        assert gens.settings["epochs"] == 3
    res = credo.api.score(path, RunConfig(bootstrap=0, out=tmp_path / "o",
                                          cache=tmp_path / "c.sqlite"), show_progress=False)
    assert {r.item.id for r in res.items} == {"fr", "7", "de"}
    assert set(res.config.methods) == ORIGINALS_ONLY and res.config.n == 3
    assert json.loads((tmp_path / "o" / "run_status.json").read_text())["status"] == "complete"


def test_a_failed_inspect_eval_is_incomplete(tmp_path, capsys):
    """Samples inspect marks errored are left out and counted; the run is incomplete (exit
    3, one line); an item whose samples all failed is no item scored wrong."""
    from inspect_ai.log import read_eval_log

    path = _inspect_eval(tmp_path, "eval", faults={"http_400": 0.5})
    log = read_eval_log(str(path))
    failed = [s for s in log.samples if s.error is not None]
    assert failed  # the server's 400s, as inspect logged them
    out = tmp_path / "o"
    capsys.readouterr()
    assert main(["score", str(path), "--out", str(out), "--bootstrap", "0",
                 "--cache", str(tmp_path / "c.sqlite"), "--quiet"]) == 3
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and f"({len(failed)} errored)" in err[0], err
    status = json.loads((out / "run_status.json").read_text())
    assert status["status"] == "incomplete"
    scored = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert len(scored) == len(log.samples) - len(failed)
    ok = {str(s.id) for s in log.samples if s.error is None}
    assert {r["id"] for r in scored} == ok


def _cancelled_inspect_eval(tmp: Path, items: int = 10, epochs: int = 2,
                            stop_after: int = 7) -> Path:
    """inspect_ai itself, cancelled as a user cancels it: a task of ``items`` samples and
    ``epochs`` against the fake server (slow enough that the eval is mid-way), Ctrl-C
    (SIGINT) once the server has answered ``stop_after`` requests; the log it writes."""
    child = (
        "import sys\n"
        "from inspect_ai import Task, eval\n"
        "from inspect_ai.dataset import MemoryDataset, Sample\n"
        "from inspect_ai.scorer import match\n"
        "from inspect_ai.solver import generate\n"
        f"ds = MemoryDataset([Sample(id=f's{{i}}', input=f'Capital {{i}}?', target='Paris')"
        f" for i in range({items})])\n"
        f"eval(Task(dataset=ds, solver=generate(), scorer=match(), epochs={epochs}),"
        " model='openai-api/credocancel/m', log_format='eval', log_dir=sys.argv[1],"
        " display='none', max_retries=0, timeout=10, max_connections=1, max_samples=2,"
        " retry_on_error=0)\n"
    )
    with FaultServer(answers=("Paris", "Rome"), seed_mode="ignored", latency=0.3) as server:
        env = {**os.environ, **OFFLINE, "CREDOCANCEL_API_KEY": "x",
               "CREDOCANCEL_BASE_URL": server.url}
        proc = subprocess.Popen([sys.executable, "-c", child, str(tmp)], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 120
            while server.served < stop_after and time.monotonic() < deadline:
                assert proc.poll() is None, "inspect ended before it was cancelled"
                time.sleep(0.05)
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
    (log,) = tmp.glob("*.eval")
    return log


def test_a_cancelled_inspect_eval_says_what_it_lacks(tmp_path, capsys):
    """Issue 34 item 13: a cancelled inspect log. The samples inspect cancelled (its
    cancellation error) and those it never started (absent from the log) are counted
    apart, and never as failed; the report's counts are its tables' (items with no
    sample left out, the others scored on what finished); nothing says "rerun the same
    config" (``credo score`` generates nothing): inspect's own retry completes the log."""
    from inspect_ai._util.error import is_cancellation_message
    from inspect_ai.log import read_eval_log

    path = _cancelled_inspect_eval(tmp_path / "logs")
    log = read_eval_log(str(path))
    assert log.status == "cancelled"
    ids = [str(i) for i in log.eval.dataset.sample_ids]
    epochs = log.eval.config.epochs
    errors = [s for s in log.samples if s.error is not None]
    cancelled = [s for s in errors if is_cancellation_message(s.error.message)]
    assert cancelled and len(cancelled) == len(errors)  # inspect's own verdict
    never = len(ids) * epochs - len(log.samples)
    finished: dict[str, int] = {}
    for s in log.samples:
        if s.error is None:
            finished[str(s.id)] = finished.get(str(s.id), 0) + 1
    left_out = [i for i in ids if i not in finished]
    partial = [i for i in ids if 0 < finished.get(i, 0) < epochs]
    assert never and left_out and partial  # the log tells them apart

    out = tmp_path / "o"
    capsys.readouterr()
    assert main(["score", str(path), "--out", str(out), "--bootstrap", "0",
                 "--cache", str(tmp_path / "c.sqlite"), "--quiet"]) == 3
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1, err
    assert f"({len(cancelled)} cancelled, {never} never started)" in err[0]
    assert "errored" not in err[0] and "failed" not in err[0]
    assert f"{len(left_out)} items with none left out, {len(partial)} scored" in err[0]
    stats = json.loads((out / "metrics.json").read_text())["stats"]
    assert (stats["given_errored_samples"], stats["given_cancelled_samples"],
            stats["given_not_started_samples"]) == (0, len(cancelled), never)
    scored = {r["id"] for r in _rows(out / "scores.jsonl")}
    assert scored == set(finished)
    report = (out / "report.md").read_text()
    html = (out / "report.html").read_text()
    counts = (f"{len(left_out)} items are left out of every table; {len(partial)} items are"
              " scored on the samples that finished")
    for text in (report, html):
        assert counts in text
        assert "rerun the same config" not in text.lower()
        assert "rerun the config" not in text.lower()
        assert "inspect eval-retry" in text and "credo score generates nothing" in text
    for item in left_out:
        assert item not in scored
    first = next(i for i in partial if i not in {str(s.id) for s in cancelled})
    assert f"- {first}: {epochs - finished[first]} sample not in the log: 1 never started" \
        in report


def test_given_generations_name_their_task_and_model(lm_eval_out, lm_eval_samples, tmp_path):
    """What the real tools' files say of their task and model (read back from their own
    files): lm-eval's samples file name and the results file of the same date, inspect's
    log header."""
    (results,) = lm_eval_samples.parent.glob("results_*.json")
    gens = read_generations(lm_eval_samples)
    assert gens.task == STRICT["name"] and STRICT["name"] in json.loads(
        results.read_text())["configs"]
    assert gens.model == json.loads(results.read_text())["model_name"] == "m"
    assert gens.family == f"given:lm-evaluation-harness:{STRICT['name']}"
    assert read_generations(_samples_of(lm_eval_out, LOOSE)).task == LOOSE["name"]
    renamed = tmp_path / "renamed.jsonl"  # no date, no results beside it
    renamed.write_bytes(lm_eval_samples.read_bytes())
    moved = read_generations(renamed, recompute=True)
    assert (moved.task, moved.model, moved.family) == ("", "", "given:lm-evaluation-harness")


def test_a_certificate_on_an_inspect_log_binds_its_task_and_model(tmp_path, capsys):
    """A certificate made on a scored inspect log (issue 32 review: a certificate that can
    be applied to another task is a bug in a guarantee) holds for the task and model the
    log names: the same log is answered, a copy that names another task or model is
    refused before anything is scored (exit 2, the setting named)."""
    path = _inspect_eval(tmp_path / "logs", "json")
    log = json.loads(path.read_text())
    gens = read_generations(path)
    assert (gens.task, gens.model) == (log["eval"]["task"], log["eval"]["model"])
    scored, cert = tmp_path / "scored", tmp_path / "cert.json"
    assert main(["score", str(path), "--format", "short_text", "--methods",
                 "self_consistency", "--bootstrap", "0", "--out", str(scored), "--cache",
                 str(tmp_path / "c.sqlite"), "--quiet"]) == 0
    assert main(["certify", str(scored), "--method", "self_consistency", "--alpha", "0.5",
                 "--delta", "0.5", "--out", str(cert)]) == 0
    settings = json.loads(cert.read_text())["settings"]
    assert settings["task"]["family"] == f"given:inspect_ai:{log['eval']['task']}"
    assert settings["model"] == f"given:inspect_ai:{log['eval']['model']}"

    def apply(p: Path) -> int:
        capsys.readouterr()
        return main(["score", str(p), "--format", "short_text", "--methods",
                     "self_consistency", "--bootstrap", "0", "--out", str(tmp_path / p.stem),
                     "--cache", str(tmp_path / "c.sqlite"), "--quiet", "--certificate",
                     str(cert)])

    assert apply(path) == 0
    for field, value in (("task", "another_task"), ("model", "openai/another-model")):
        other = tmp_path / f"other-{field}.json"
        other.write_text(json.dumps({**log, "eval": {**log["eval"], field: value}}))
        assert apply(other) == 2
        err = capsys.readouterr().err
        assert value in err and "Traceback" not in err
        assert not (tmp_path / other.stem).exists()

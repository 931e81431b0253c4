"""``credo score`` on what lm-evaluation-harness and inspect_ai themselves write (issue 25
item 4): each tool is run on a local task against a local OpenAI-compatible server
(:class:`fault_server.FaultServer`), and credo must read every sample of every item with
the tool's own per-sample correctness."""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import credo
from credo import RunConfig
from credo.cli import main
from credo.tasks.generations import read_generations
from fault_server import FaultServer

lm_eval = pytest.importorskip("lm_eval")
inspect_ai = pytest.importorskip("inspect_ai")

OFFLINE = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}

TASK = """\
task: credo_toy
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
  - name: strict
    filter:
      - function: regex
        regex_pattern: "([0-9,]+)"
        group_select: -1
      - function: take_first
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
    ignore_case: true
    ignore_punctuation: true
    regexes_to_ignore: [","]
"""
DOCS = [{"id": "q-a", "question": "What is 1,000 + 2,500?", "answer": "3500"},
        {"id": "q-b", "question": "What is 2 + 2?", "answer": "4"},
        {"id": "q-c", "question": "What is 3 + 4?", "answer": "7"}]
ANSWERS = ("1,000 + 2,500 = 3,500", "3500", "4", "7", "five")


def _lm_eval_exact_match(text: str, target: str) -> bool:
    """The task's metric by hand: the regex filter's last number, commas and punctuation
    ignored, case folded ("five" has none: lm-eval's "[invalid]")."""
    found = re.findall(r"([0-9,]+)", text)
    answer = found[-1].replace(",", "") if found else "[invalid]"
    return answer.casefold() == target.casefold()


@pytest.fixture(scope="module")
def lm_eval_samples(tmp_path_factory) -> Path:
    """``lm_eval --log_samples`` with ``repeats: 5`` against the fake server: its
    samples file (the results file beside it)."""
    tmp = tmp_path_factory.mktemp("lm_eval")
    data = tmp / "data.jsonl"
    data.write_text("".join(json.dumps(d) + "\n" for d in DOCS), encoding="utf-8")
    (tmp / "tasks").mkdir()
    (tmp / "tasks" / "credo_toy.yaml").write_text(TASK.format(data=data), encoding="utf-8")
    env = {**os.environ, **OFFLINE, "HF_HOME": str(tmp / "hf"), "OPENAI_API_KEY": "x"}
    with FaultServer(answers=ANSWERS, seed_mode="ignored") as server:
        done = subprocess.run(
            [sys.executable, "-m", "lm_eval", "--model", "local-chat-completions",
             "--model_args", f"model=m,base_url={server.url}/chat/completions,num_concurrent=1,"
             "max_retries=1,tokenized_requests=False", "--tasks", "credo_toy",
             "--include_path", str(tmp / "tasks"), "--output_path", str(tmp / "out"),
             "--log_samples", "--apply_chat_template"],
            capture_output=True, text=True, env=env, timeout=300, check=False,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    (samples,) = (tmp / "out").rglob("samples_credo_toy_*.jsonl")
    return samples


def test_lm_eval_repeats_read_with_lm_evals_own_metric(lm_eval_samples, tmp_path, capsys):
    rows = [json.loads(line) for line in lm_eval_samples.read_text().splitlines()]
    out = tmp_path / "scored"
    assert main(["score", str(lm_eval_samples), "--out", str(out), "--bootstrap", "0",
                 "--cache", str(tmp_path / "c.sqlite"), "--quiet"]) == 0
    written = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert {r["id"] for r in written} == {d["id"] for d in DOCS}
    saw_the_difference = False
    for row in rows:
        item = row["doc"]["id"]  # the document's own id, not lm-eval's doc_id
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
    assert "samples per item: 5; sampling: repeats=5, temperature=1.0, max_tokens=16" in report
    config = yaml.safe_load((out / "config.yaml").read_text())
    assert (config["n"], config["m"], config["limit"]) == (5, 0, None)
    # only what the file records, not credo's defaults (top_k, min_p, ...)
    assert config["sampling"] == {"temperature": 1.0, "max_tokens": 16}
    # methods by default: those the sample sets allow (no perturbed set: no C3)
    metrics = json.loads((out / "metrics.json").read_text())["methods"]
    assert set(metrics) == {"self_consistency"}
    # credo's own rule when asked: the answer equal to the target, the report says so
    again = credo.api.score(lm_eval_samples, RunConfig(bootstrap=0, out=tmp_path / "r",
                                                       cache=tmp_path / "c.sqlite"),
                            recompute_correctness=True, answer_format="number",
                            show_progress=False)
    assert again.stats["correctness"].startswith("recomputed")
    # the results file is no samples file: the message says which one is
    (results,) = lm_eval_samples.parent.glob("results_*.json")
    capsys.readouterr()
    assert main(["score", str(results), "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "samples_<task>_<date>.jsonl" in err and "Traceback" not in err


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
    assert res.config.methods == ["self_consistency"] and res.config.n == 3
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
    assert len(err) == 1 and f"{len(failed)} samples failed" in err[0], err
    status = json.loads((out / "run_status.json").read_text())
    assert status["status"] == "incomplete"
    scored = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert len(scored) == len(log.samples) - len(failed)
    ok = {str(s.id) for s in log.samples if s.error is None}
    assert {r["id"] for r in scored} == ok

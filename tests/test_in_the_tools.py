"""credo inside the tools: an inspect_ai epoch reducer and metrics, found by name
(``credo/self_consistency``) through credo's entry point, and lm-evaluation-harness
metrics of a document's repeats named in a task's YAML. Each runs inside the real tool,
against the fake server, and gives the numbers ``credo score`` computes from that tool's
own log of the same samples."""

from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import credo.api
from credo import RunConfig
from fault_server import FaultServer

pytest.importorskip("inspect_ai")
pytest.importorskip("lm_eval")

ROOT = Path(__file__).resolve().parents[1]
OFFLINE = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
ANSWERS = ("Paris", "Rome", "Paris", "Lyon", "paris.")
_SERVICES = itertools.count()


def _credo_scores(log: Path, tmp: Path, methods: str) -> dict[str, dict[str, float]]:
    """``credo score`` of a tool's log: per item, credo's score of each method."""
    out = tmp / f"scored-{log.stem}"
    credo.api.score(log, RunConfig(methods=methods.split(","), bootstrap=0, out=out,
                                   cache=tmp / "c.sqlite"), show_progress=False)
    rows = [json.loads(x) for x in (out / "scores.jsonl").read_text().splitlines()]
    return {r["id"]: r["scores"] for r in rows}


def _certificate(tmp: Path, threshold: float) -> Path:
    """A certificate of self-consistency at ``threshold``, as ``credo certify`` writes
    one on a ``credo score`` folder of an inspect log."""
    from credo.evaluate.certify import Certificate
    from credo.pipeline.certificate import RunCertificate

    cert = RunCertificate(
        Certificate(threshold, 0.5, 0.1, 0.1, 40, "ltt", n_accepted=20, risk=0.05),
        {"command": "credo score", "model": "given:inspect_ai:m", "method": "self_consistency",
         "task": {"family": "given:inspect_ai:capitals", "format": "short_text", "domain": "",
                  "prompt": "given (the generating tool's own)",
                  "correctness": "inspect_ai scorer match"},
         "n": 5, "m": 0, "kernel": "indicator", "sampling": {}})
    path = tmp / "cert.json"
    path.write_text(json.dumps(cert.to_json()))
    return path


# --------------------------------------------------------------------------- inspect_ai


def _inspect(tmp: Path, cert: Path) -> Path:
    """inspect_ai itself: 8 questions, 5 epochs, reduced by inspect's mean and credo's two
    reducers, with credo's metrics beside accuracy. inspect sends every epoch of a
    question alike, and the server answers the k-th of them by a hash of the request and
    k ("repeats"), so which items the certificate accepts does not depend on the order
    inspect's concurrent requests arrive in."""
    from inspect_ai import Epochs, Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.scorer import accuracy, match
    from inspect_ai.solver import generate

    from credo.integrations import inspect_ai as credo_inspect

    dataset = MemoryDataset([Sample(id=f"q{i}", input=f"Capital of France, take {i}?",
                                    target="Paris") for i in range(8)])
    task = Task(dataset=dataset, solver=generate(), scorer=match(),
                epochs=Epochs(5, ["mean", "credo/self_consistency", "credo/semantic_entropy"]),
                metrics=[accuracy(), credo_inspect.self_consistency_metric(),
                         credo_inspect.semantic_entropy_metric(),
                         credo_inspect.accept_rate(certificate=str(cert))])
    service = f"credotools{next(_SERVICES)}"
    with FaultServer(answers=ANSWERS, seed_mode="repeats") as server:
        os.environ.update(OFFLINE, **{f"{service.upper()}_API_KEY": "x",
                                      f"{service.upper()}_BASE_URL": server.url})
        try:
            (log,) = inspect_eval(task, model=f"openai-api/{service}/m", log_format="eval",
                                  log_dir=str(tmp), display="none")
        finally:
            for key in ("API_KEY", "BASE_URL"):
                os.environ.pop(f"{service.upper()}_{key}", None)
    assert log.status == "success"
    return Path(log.location)


def test_the_inspect_reducers_and_metrics_give_credos_numbers(tmp_path):
    """Inside inspect_ai: each sample's reduced score under credo/self_consistency (and
    credo/semantic_entropy) is the score credo score gives its item from the same log;
    the results table's accuracy under that reducer and credo's metrics are their means;
    accept_rate is the share of items the certificate accepts."""
    from inspect_ai.log import read_eval_log

    threshold = 0.3
    path = _inspect(tmp_path, _certificate(tmp_path, threshold))
    log = read_eval_log(str(path))
    ours = _credo_scores(path, tmp_path, "self_consistency,semantic_entropy")
    reduced = {r.reducer: {str(s.sample_id): s for s in r.samples} for r in log.reductions}
    assert set(reduced) == {"mean", "credo/self_consistency", "credo/semantic_entropy"}
    for reducer, method in (("credo/self_consistency", "self_consistency"),
                            ("credo/semantic_entropy", "semantic_entropy")):
        got = {i: s.value for i, s in reduced[reducer].items()}
        assert got == pytest.approx({i: ours[i][method] for i in ours}, abs=1e-12)
    values = [s["self_consistency"] for s in ours.values()]
    assert 0 < min(values) < max(values) <= 1  # the items differ: the test tells them apart
    # inspect's own means over the per-sample correctness: the mean reducer's p̄
    for sample_id, s in reduced["credo/self_consistency"].items():
        assert s.metadata["credo"]["correct"] == pytest.approx(reduced["mean"][sample_id].value)
    table = {(e.reducer, name): m.value for e in log.results.scores
             for name, m in e.metrics.items()}
    mean_sc = sum(values) / len(values)
    mean_se = sum(s["semantic_entropy"] for s in ours.values()) / len(ours)
    assert table["credo/self_consistency", "accuracy"] == pytest.approx(mean_sc)
    # credo's metrics read every epoch (unreduced): one row, whatever the reducers
    assert table[None, "credo/self_consistency"] == pytest.approx(mean_sc)
    assert table[None, "credo/semantic_entropy"] == pytest.approx(mean_se)
    answers = {i: s.answer for i, s in reduced["credo/self_consistency"].items()}
    taken = [ours[i]["self_consistency"] >= threshold and answers[i] is not None
             for i in ours]
    assert table["credo/self_consistency", "credo/accept_rate"] == pytest.approx(
        sum(taken) / len(taken))
    assert 0 < sum(taken) < len(taken)
    assert math.isnan(table["mean", "credo/accept_rate"])  # not a credo reducer's scores


def _entry_point_site(tmp: Path) -> Path:
    """A folder that declares credo's ``inspect_ai`` entry point as pyproject.toml does
    (the installed package's metadata: ``pip install credo`` writes the same)."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "entry-points"]["inspect_ai"]
    site = tmp / "site"
    meta = site / "credo_entry_points-0.0.0.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: credo-entry-points\n"
                                   "Version: 0.0.0\n")
    (meta / "entry_points.txt").write_text(
        "[inspect_ai]\n" + "".join(f"{k} = {v}\n" for k, v in declared.items()))
    return site


def test_inspect_finds_the_reducer_by_name_from_its_command_line(tmp_path):
    """``inspect eval TASK --epochs 4 --epochs-reducer credo/self_consistency``: inspect
    loads credo's entry point and reduces with it; the values are credo score's."""
    from inspect_ai.log import read_eval_log

    (tmp_path / "capitals.py").write_text(
        "from inspect_ai import Task, task\n"
        "from inspect_ai.dataset import MemoryDataset, Sample\n"
        "from inspect_ai.scorer import match\n"
        "from inspect_ai.solver import generate\n\n\n"
        "@task\n"
        "def capitals():\n"
        "    return Task(dataset=MemoryDataset([Sample(id=f'q{i}', input=f'Capital of "
        "France ({i})?', target='Paris') for i in range(4)]), solver=generate(), "
        "scorer=match())\n")
    site = _entry_point_site(tmp_path)
    with FaultServer(answers=ANSWERS, seed_mode="ignored") as server:
        env = {**os.environ, **OFFLINE, "PYTHONPATH": f"{site}{os.pathsep}{ROOT / 'src'}",
               "CREDOCLI_API_KEY": "x", "CREDOCLI_BASE_URL": server.url}
        done = subprocess.run(
            [sys.executable, "-m", "inspect_ai", "eval", "capitals.py", "--model",
             "openai-api/credocli/m", "--epochs", "4", "--epochs-reducer",
             "credo/self_consistency", "--log-dir", "logs", "--display", "none"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    (path,) = (tmp_path / "logs").glob("*.eval")
    log = read_eval_log(str(path))
    (reduction,) = log.reductions
    assert reduction.reducer == "credo/self_consistency"
    ours = _credo_scores(path, tmp_path, "self_consistency")
    assert {str(s.sample_id): s.value for s in reduction.samples} == pytest.approx(
        {i: s["self_consistency"] for i, s in ours.items()}, abs=1e-12)


# --------------------------------------------------------------------------- lm-eval

TASK = """\
task: capitals_rep
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
  - name: all
    filter:
      - function: regex
        regex_pattern: "([A-Za-z]+)"
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
    ignore_case: true
  - metric: !function credo.integrations.lm_eval.self_consistency
    aggregation: mean
    higher_is_better: true
    ignore_case: true
  - metric: !function credo.integrations.lm_eval.semantic_entropy
    aggregation: mean
    higher_is_better: true
    ignore_case: true
"""


def test_the_lm_eval_metrics_appear_in_its_table_with_credos_numbers(tmp_path):
    """Inside lm-eval (its command line, ``repeats: 5``): the table's self_consistency
    and semantic_entropy are the means of the per-document values lm-eval logged, and
    each is the score credo score gives that document from the same samples file."""
    data = tmp_path / "data.jsonl"
    docs = [{"question": f"Capital of France ({i})?", "answer": "Paris"} for i in range(6)]
    data.write_text("".join(json.dumps(d) + "\n" for d in docs))
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "capitals_rep.yaml").write_text(TASK.format(data=data))
    env = {**os.environ, **OFFLINE, "HF_HOME": str(tmp_path / "hf"), "OPENAI_API_KEY": "x",
           "PYTHONPATH": str(ROOT / "src")}
    with FaultServer(answers=("Paris", "paris", "Rome", "Lyon", "42"),
                     seed_mode="ignored") as server:
        done = subprocess.run(
            [sys.executable, "-m", "lm_eval", "--model", "local-chat-completions",
             "--model_args", f"model=m,base_url={server.url}/chat/completions,"
             "num_concurrent=1,max_retries=1,tokenized_requests=False", "--tasks",
             "capitals_rep", "--include_path", str(tmp_path / "tasks"), "--output_path",
             str(tmp_path / "out"), "--log_samples", "--apply_chat_template"],
            capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "self_consistency" in done.stdout  # lm-eval's own printed table
    (results,) = (tmp_path / "out").rglob("results_*.json")
    table = json.loads(results.read_text())["results"]["capitals_rep"]
    (samples,) = (tmp_path / "out").rglob("samples_capitals_rep_*.jsonl")
    rows = [json.loads(x) for x in samples.read_text().splitlines()]
    ours = _credo_scores(samples, tmp_path, "self_consistency,semantic_entropy")
    assert len(ours) == len(rows) == 6
    by_doc = {i.rsplit(":", 1)[-1]: s for i, s in ours.items()}  # <task>@<rev>:<doc_id>
    for method in ("self_consistency", "semantic_entropy"):
        logged = {str(r["doc_id"]): float(r[method]) for r in rows}
        mine = {doc: s[method] for doc, s in by_doc.items()}
        assert logged == pytest.approx(mine, abs=1e-12)
        assert table[f"{method},all"] == pytest.approx(sum(mine.values()) / len(mine))
    # credo score's correctness is the task's exact_match, not credo's own metrics
    said = json.loads((tmp_path / f"scored-{samples.stem}" / "metrics.json").read_text())
    assert said["correctness"].startswith("lm-eval exact_match")
    values = [s["self_consistency"] for s in ours.values()]
    assert min(values) < max(values)  # the documents differ: the test tells them apart


def test_one_response_per_document_has_nothing_to_compare():
    from credo.integrations.lm_eval import self_consistency, semantic_entropy

    assert math.isnan(self_consistency(["Paris"], ["Paris"]))
    assert self_consistency(["Paris"], [["Paris", "paris", "[invalid]", "Rome"]],
                            ignore_case=True) == pytest.approx(1 / 6)
    assert semantic_entropy(["x"], [["a", "a"]]) == 1.0
    from lm_eval.api.registry import get_metric

    assert get_metric("credo_self_consistency") is self_consistency


def test_credos_metrics_are_never_read_as_the_tasks_correctness():
    """A task's YAML that names credo's metric first: ``credo score`` still grades by
    the first named metric (lm-eval's results file holds a function metric as its
    source)."""
    from credo.tasks.lm_eval_scores import function_metrics, metric_of

    source = "def self_consistency(references=None, predictions=(), **options):\n    ..."
    config = {"metric_list": [{"metric": source}, {"metric": "exact_match"}]}
    skip = function_metrics(config)
    assert skip == {"self_consistency"}
    rows = [(1, {"metrics": ["self_consistency", "exact_match"], "self_consistency": 0.5,
                 "exact_match": 1.0})]
    assert metric_of(rows, "f") == "self_consistency"  # what it read before
    assert metric_of(rows, "f", skip) == "exact_match"

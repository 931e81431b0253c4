"""lm-eval tasks (issue 25 items 1, 2, 3, 5): ``credo run --task lm-eval:<task>`` on a
custom task whose dataset is local, offline; its per-sample correctness equals what
lm-eval's own evaluator reports for the same responses; named tasks in ``credo tasks``;
the correctness function in every report; bad input in one line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from credo.cli import main
from credo.tasks.base import AnswerFormat
from credo.tasks.catalogue import task_catalogue
from credo.tasks.prompts import render_messages
from fault_server import FaultServer

lm_model = pytest.importorskip("lm_eval.api.model")

ANSWERS = (" 5\nQuestion: what else", " It is 6.", "seven", " 5", " The answer is -6")


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _task_folder(tmp: Path) -> Path:
    """A custom lm-eval task folder: ``toy_sums`` (generate_until, a local JSON Lines
    dataset with a train split for few-shot examples), ``toy_ll`` (loglikelihood),
    ``toy_hub`` (a Hub dataset, unreadable offline), group ``toy_group``."""
    folder = tmp / "lm_tasks"
    (folder / "data").mkdir(parents=True)
    rows = [("What is 2 plus 3?", "5"), ("What is 10 minus 4?", "6"),
            ("What is 3 minus 9?", "-6")]
    (folder / "data" / "test.jsonl").write_text(
        "".join(json.dumps({"q": q, "a": a}) + "\n" for q, a in rows))
    (folder / "data" / "train.jsonl").write_text(json.dumps({"q": "What is 1 plus 1?", "a": "2"})
                                                 + "\n")
    data = folder / "data"
    (folder / "toy_sums.yaml").write_text(f"""\
task: toy_sums
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data / 'test.jsonl'}
    train: {data / 'train.jsonl'}
output_type: generate_until
test_split: test
fewshot_split: train
doc_to_text: "Question: {{{{q}}}}\\nAnswer:"
doc_to_target: "{{{{a}}}}"
generation_kwargs:
  until: ["\\n"]
filter_list:
  - name: get-answer
    filter:
      - function: regex
        regex_pattern: "(-?[0-9]+)"
        group_select: 0
      - function: take_first
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
    ignore_case: true
""")
    (folder / "toy_ll.yaml").write_text(f"""\
task: toy_ll
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data / 'test.jsonl'}
output_type: loglikelihood
test_split: test
doc_to_text: "{{{{q}}}}"
doc_to_target: " {{{{a}}}}"
metric_list:
  - metric: acc
""")
    (folder / "toy_hub.yaml").write_text("""\
task: toy_hub
dataset_path: credo-tests/no-such-dataset
output_type: generate_until
test_split: test
doc_to_text: "{{q}}"
doc_to_target: "{{a}}"
metric_list:
  - metric: exact_match
""")
    (folder / "toy_group.yaml").write_text("group: toy_group\ntask:\n  - toy_sums\n  - toy_ll\n")
    return folder


def _run(folder: Path, out: Path, *extra: str) -> tuple[int, list[dict], list[dict]]:
    with FaultServer(answers=ANSWERS) as server:
        code = main(["run", "--task", "lm-eval:toy_sums", "--include-path", str(folder),
                     "--model", "openai:toy", "--base-url", server.url, "--methods",
                     "self_consistency", "--n", "5", "--out", str(out),
                     "--cache", str(out.parent / "c.sqlite"), "--quiet", *extra])
        bodies = [b for b in server.bodies if b.get("n") == 5]  # the samples, not the probe
    samples = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    return code, samples, bodies


class ReplayLM(lm_model.LM):
    """An lm-eval model that answers each document with the k-th response credo got,
    cut at the request's ``until`` strings (what lm-eval's backends do); it records the
    prompts lm-eval rendered."""

    def __init__(self, responses: dict[int, list[str]], k: int) -> None:
        super().__init__()
        self.responses, self.k, self.prompts = responses, k, {}

    def generate_until(self, requests, disable_tqdm: bool = False):
        out = []
        for r in requests:
            context, kwargs = r.args[0], r.args[1]
            self.prompts[r.doc_id] = context
            text = self.responses[r.doc_id][self.k]
            for stop in kwargs.get("until") or []:
                text = text.split(stop, 1)[0]
            out.append(text)
        return out

    def loglikelihood(self, requests):
        raise NotImplementedError

    def loglikelihood_rolling(self, requests):
        raise NotImplementedError


def _lm_eval_scores(folder: Path, responses: dict[int, list[str]], shots: int):
    """lm-eval's own per-document exact_match for each sample index, and its prompts."""
    from lm_eval.evaluator import simple_evaluate
    from lm_eval.tasks import TaskManager

    tm = TaskManager(include_path=str(folder))
    n = len(next(iter(responses.values())))
    scores: dict[int, list[float]] = {d: [] for d in responses}
    prompts = {}
    for k in range(n):
        lm = ReplayLM(responses, k)
        res = simple_evaluate(model=lm, tasks=["toy_sums"], task_manager=tm,
                              num_fewshot=shots, log_samples=True, bootstrap_iters=0)
        for s in res["samples"]["toy_sums"]:
            if s["filter"] == "get-answer":
                scores[s["doc_id"]].append(float(s["exact_match"]))
        prompts = lm.prompts
    return scores, prompts


@pytest.mark.parametrize("shots", [0, 1])
def test_a_custom_lm_eval_task_runs_offline_graded_as_lm_eval_grades(tmp_path, shots):
    folder = _task_folder(tmp_path)
    out = tmp_path / "run"
    extra = ("--num-fewshot", str(shots)) if shots else ()
    code, samples, bodies = _run(folder, out, *extra)
    assert code == 0
    originals = [s for s in samples if s["set"] == "original"]
    ids = sorted({s["id"] for s in originals})
    revision = ids[0].split("@", 1)[1].split(":", 1)[0]
    assert ids == [f"toy_sums@{revision}:{d}" for d in range(3)]
    responses: dict[int, list[str]] = {}
    ours: dict[int, list[float]] = {}
    for s in originals:
        doc = int(s["id"].rsplit(":", 1)[1])
        responses.setdefault(doc, []).append(s["text"])
        ours.setdefault(doc, []).append(float(s["correct"]))
    theirs, prompts = _lm_eval_scores(folder, responses, shots)
    assert ours == theirs
    flat = [v for vs in ours.values() for v in vs]
    assert 0 < sum(flat) < len(flat)  # some right, some wrong: the test tells them apart
    # the prompt credo sent is the one lm-eval rendered (no instruction of credo's)
    sent = {b["messages"][0]["content"] for b in bodies}
    assert all(len(b["messages"]) == 1 for b in bodies)
    assert sent == set(prompts.values())
    if shots:
        assert all(p.startswith("Question: What is 1 plus 1?\nAnswer: 2\n\n") for p in sent)
    config = (out / "config.yaml").read_text()
    assert f"revision: {revision}" in config
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["correctness"].startswith(
        "lm-eval toy_sums: exact_match(ignore_case=True) after filter 'get-answer'")
    assert f"- correctness: {metrics['correctness']}" in (out / "report.md").read_text()
    assert "correctness" in (out / "report.html").read_text()


def test_prefixes_go_right_before_the_rendered_question(tmp_path):
    from credo.tasks.lm_eval import load_lm_eval

    folder = _task_folder(tmp_path)
    task = load_lm_eval("lm-eval:toy_sums", num_fewshot=1, include_path=[folder])
    assert task.format is AnswerFormat.SHORT_TEXT
    item = task.items[0]
    assert item.question == "Question: What is 2 plus 3?\nAnswer:"
    (msg,) = render_messages(item, task.format, "direct", prefix="Cats purr.")
    assert msg.content == (
        "Question: What is 1 plus 1?\nAnswer: 2\n\nCats purr. Question: What is 2 plus 3?\nAnswer:"
    )


def test_a_group_expands_in_a_study_and_is_refused_by_a_run(tmp_path):
    from credo.errors import UserError
    from credo.tasks.lm_eval import expand_lm_eval_specs, load_lm_eval

    folder = _task_folder(tmp_path)
    assert expand_lm_eval_specs(["gsm8k", "lm-eval:toy_group"], [folder]) == [
        "gsm8k", "lm-eval:toy_ll", "lm-eval:toy_sums"]
    with pytest.raises(UserError, match="is a group of 2 tasks"):
        load_lm_eval("lm-eval:toy_group", include_path=[folder])


def test_named_tasks_are_listed_with_source_and_grader():
    rows = {r.spec: r for r in task_catalogue()}
    for spec in ("svamp", "triviaqa", "nq_open", "popqa", "lm-eval"):
        assert spec in rows, spec
        assert rows[spec].source and rows[spec].grader
    assert rows["triviaqa"].grader == "lm-eval" and "mandarjoshi/trivia_qa" in rows[
        "triviaqa"].source
    assert rows["nq_open"].grader == "lm-eval"
    assert rows["popqa"].grader == "popqa" and rows["svamp"].answer_format == "number"
    assert "PopQA" in rows["popqa"].correctness


def test_popqa_and_svamp_read_the_users_files(tmp_path):
    from credo.plan.samples import Sample
    from credo.tasks import load_task
    from credo.tasks.answers import Answer
    from credo.tasks.grading import GradingContext, grade_originals

    popqa = tmp_path / "popqa.jsonl"
    popqa.write_text(json.dumps({"id": 7, "question": "Who wrote Dune?",
                                 "possible_answers": '["Frank Herbert", "Herbert"]'}) + "\n")
    task = load_task(f"popqa:{popqa}")
    ctx = GradingContext(task, judge=lambda: None)
    graded = grade_originals(ctx, {"popqa-7": [Sample("It was Frank Herbert.", Answer(None, "")),
                                               Sample("Tolkien", Answer(None, ""))]})
    assert graded == {"popqa-7": (True, False)}
    svamp = tmp_path / "SVAMP.json"
    svamp.write_text(json.dumps([{"ID": "chal-1", "Body": "Sam has 3 apples.",
                                  "Question": "How many?", "Answer": 3.0,
                                  "Equation": "3", "Type": "x"}]))
    item = load_task(f"svamp:{svamp}").items[0]
    assert (item.id, item.gold) == ("chal-1", "3")


def _bad(tmp: Path) -> dict[str, tuple[list[str], str]]:
    folder = _task_folder(tmp)
    inc = ["--include-path", str(folder)]
    return {
        "unknown task": (["--task", "lm-eval:no_such_task", *inc],
                         "lm-eval knows no task 'no_such_task'"),
        "loglikelihood task": (["--task", "lm-eval:toy_ll", *inc],
                               "'lm-eval:toy_ll': output type 'loglikelihood' cannot be sampled"),
        "dataset offline": (["--task", "lm-eval:toy_hub", *inc],
                            "'lm-eval:toy_hub': its dataset cannot be read (offline"),
        "group in a run": (["--task", "lm-eval:toy_group", *inc], "is a group of 2 tasks"),
        "no name": (["--task", "lm-eval:"], "lm-eval:<task>"),
    }


@pytest.mark.parametrize("case", ["unknown task", "loglikelihood task", "dataset offline",
                                  "group in a run", "no name"])
def test_bad_lm_eval_input_is_one_line_and_exit_2(case, tmp_path, capsys, monkeypatch):
    def refuse(self, planned, description="sampling"):
        raise AssertionError(f"a model was called ({description}) before the error")

    monkeypatch.setattr("credo.generation.executor.Executor.execute", refuse)
    args, named = _bad(tmp_path)[case]
    with FaultServer(answers=ANSWERS) as server:
        code = main(["run", *args, "--model", "openai:toy", "--base-url", server.url,
                     "--methods", "self_consistency", "--out", str(tmp_path / "run"),
                     "--cache", str(tmp_path / "c.sqlite"), "--quiet"])
        chats = server.requests
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1, err
    assert named in err and "Traceback" not in err
    assert chats == 0


def test_without_lm_eval_the_error_says_how_to_install_it(tmp_path, capsys, monkeypatch):
    import builtins

    real = builtins.__import__

    def no_lm_eval(name, *a, **k):
        if name == "lm_eval" or name.startswith("lm_eval."):
            raise ImportError(name)
        return real(name, *a, **k)

    from credo.tasks import lm_eval as module

    module._manager.cache_clear()
    monkeypatch.setattr(builtins, "__import__", no_lm_eval)
    code = main(["run", "--task", "lm-eval:toy_sums", "--model", "openai:toy",
                 "--base-url", "http://127.0.0.1:9", "--out", str(tmp_path / "r"), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.splitlines() == [err]
    assert "pip install 'credo[lm-eval]'" in err


@pytest.fixture
def no_network(monkeypatch, tmp_path):
    """No offline switch set and no network: every host but the loopback fails to resolve
    (as offline), the Hugging Face switches are off as a user without them has them (the
    libraries read them once, at import), and the datasets cache is empty."""
    import socket

    import datasets.config
    import huggingface_hub.constants

    for name in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-datasets")
    resolve = socket.getaddrinfo
    asked: list[str] = []

    def loopback_only(host, *args, **kwargs):
        if str(host) not in ("127.0.0.1", "localhost", "::1"):
            asked.append(str(host))
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return resolve(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", loopback_only)
    return asked


@pytest.mark.parametrize("spec", ["lm-eval:gsm8k", "lm-eval:toy_hub"])
def test_a_hub_dataset_offline_fails_fast_in_one_line(spec, tmp_path, capfd, no_network):
    """Issue 34 item 9: offline, ``lm-eval:gsm8k`` printed 11 lines of the Hub client's
    retries over 25 s before its one-line error; the dataset is looked for in the local
    cache first, and the Hub is not asked when it cannot be reached."""
    import time

    from credo.tasks.lm_eval import _manager

    folder = _task_folder(tmp_path)
    _manager((str(folder.resolve()),))  # lm-eval's task index, built once: not timed
    with FaultServer(answers=ANSWERS) as server:
        t0 = time.monotonic()
        code = main(["run", "--task", spec, "--include-path", str(folder),
                     "--model", "openai:toy", "--base-url", server.url, "--methods",
                     "self_consistency", "--out", str(tmp_path / "run"),
                     "--cache", str(tmp_path / "c.sqlite"), "--quiet"])
        seconds = time.monotonic() - t0
        chats = server.requests
    err = capfd.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and chats == 0, err
    assert 1 <= len(lines) <= 2, err
    assert lines[0].startswith(f"error: task '{spec}': its dataset cannot be read"), err
    assert "offline" in lines[0] and "Retrying" not in err
    assert seconds < 8, (seconds, err)

"""The tools' own settings, honoured: an lm-eval task's ``generation_kwargs`` (its
``max_gen_toks``, ``until`` and a sampling temperature) are what ``credo run`` sends and
what its dry run plans, the user's own settings first; ``credo score --scorer`` reads
the named scorer of an inspect_ai log with several (the real inspect_ai writes it); and
identical repeats (lm-eval's fixed seed on a server that honours seeds) are explained in
one line naming the cause and the fix (the real lm-eval sends the requests)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from credo.cli import main
from credo.importers import Generations, GivenSample
from credo.pipeline.score import identical_repeats_line
from fault_server import FaultServer

pytest.importorskip("lm_eval")

OFFLINE = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
ANSWERS = (" 5\nQuestion: what else", " It is 6.", "seven", " 5", " The answer is -6")


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    for k, v in OFFLINE.items():
        monkeypatch.setenv(k, v)


def _folder(tmp: Path, generation: str) -> Path:
    """A custom lm-eval task folder with task ``toy_sums`` (3 local documents) whose
    ``generation_kwargs`` are ``generation`` (YAML lines)."""
    folder = tmp / "lm_tasks"
    folder.mkdir()
    rows = [("What is 2 plus 3?", "5"), ("What is 10 minus 4?", "6"),
            ("What is 3 minus 9?", "-6")]
    data = folder / "test.jsonl"
    data.write_text("".join(json.dumps({"q": q, "a": a}) + "\n" for q, a in rows))
    (folder / "toy_sums.yaml").write_text(f"""\
task: toy_sums
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
output_type: generate_until
test_split: test
doc_to_text: "Question: {{{{q}}}}\\nAnswer:"
doc_to_target: "{{{{a}}}}"
generation_kwargs:
{generation}
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
""")
    return folder


EIGHT = '  until: ["\\n"]\n  max_gen_toks: 8'
"""Generation kwargs of a task that caps answers at 8 tokens and cuts at a newline."""


def _dry(folder: Path, tmp: Path, capsys, *extra: str) -> tuple[int, str]:
    code = main(["run", "--task", "lm-eval:toy_sums", "--include-path", str(folder),
                 "--model", "openai:toy", "--base-url", "http://127.0.0.1:9", "--methods",
                 "self_consistency", "--n", "5", "--out", str(tmp / "run"),
                 "--cache", str(tmp / "c.sqlite"), "--dry-run", *extra])
    return code, capsys.readouterr().out


def _completion_tokens(printed: str, stage: str) -> int:
    """The ``completion tokens <=`` column of a stage's row of the dry-run table."""
    row = next(ln for ln in printed.splitlines() if ln.split()[:1] == [stage])
    return int(row.split()[-2])


def test_the_dry_run_plans_the_tasks_max_gen_toks(tmp_path, capsys):
    """Done when: the dry run of an lm-eval task with ``max_gen_toks: 8`` plans 8 tokens
    (3 items, n = 5: 15 samples of at most 8 tokens), and says where they come from."""
    folder = _folder(tmp_path, EIGHT)
    code, printed = _dry(folder, tmp_path, capsys)
    assert code == 0
    assert _completion_tokens(printed, "original") == 3 * 5 * 8
    line = next(ln for ln in printed.splitlines() if ln.startswith("sampling from"))
    assert line.startswith("sampling from lm-eval task toy_sums's generation_kwargs: "
                           "max_tokens 8, stop ['\\n']")
    assert "not its temperature: greedy decoding" in line  # lm-eval's default: greedy


def test_the_users_own_setting_wins_over_the_tasks(tmp_path, capsys):
    folder = _folder(tmp_path, EIGHT)
    code, printed = _dry(folder, tmp_path, capsys, "--max-tokens", "20")
    assert code == 0
    assert _completion_tokens(printed, "original") == 3 * 5 * 20
    assert "set by you: max_tokens 20 (yours)" in printed


def test_a_task_without_max_gen_toks_gets_lm_evals_default(tmp_path, capsys):
    from credo.tasks.lm_eval import LM_EVAL_MAX_GEN_TOKS

    folder = _folder(tmp_path, '  until: ["\\n"]')
    code, printed = _dry(folder, tmp_path, capsys)
    assert code == 0 and LM_EVAL_MAX_GEN_TOKS == 256  # lm-eval's API models' default
    assert _completion_tokens(printed, "original") == 3 * 5 * LM_EVAL_MAX_GEN_TOKS
    assert "max_gen_toks not set: lm-eval's default 256" in printed


@pytest.mark.parametrize(("generation", "temperature"), [
    ('  until: ["\\n"]\n  max_gen_toks: 8\n  do_sample: true\n  temperature: 0.7', 0.7),
    ('  until: ["\\n"]\n  max_gen_toks: 8\n  do_sample: false\n  temperature: 0.0', 1.0),
])
def test_a_run_sends_the_tasks_settings_and_records_them(tmp_path, generation, temperature):
    """What the server receives: the task's cap and stop strings, its sampling temperature
    (a greedy task's is not taken: credo samples at its own, 1), and the run folder's
    config.yaml records them, so a certificate binds what was sent."""
    import yaml

    folder = _folder(tmp_path, generation)
    out = tmp_path / "run"
    with FaultServer(answers=ANSWERS) as server:
        code = main(["run", "--task", "lm-eval:toy_sums", "--include-path", str(folder),
                     "--model", "openai:toy", "--base-url", server.url, "--methods",
                     "self_consistency", "--n", "4", "--out", str(out),
                     "--cache", str(tmp_path / "c.sqlite"), "--quiet"])
        bodies = [b for b in server.bodies if b.get("n") == 4]
    assert code == 0 and len(bodies) == 3
    assert {(b["max_tokens"], tuple(b["stop"]), b["temperature"]) for b in bodies} == {
        (8, ("\n",), temperature)}
    recorded = yaml.safe_load((out / "config.yaml").read_text())["sampling"]
    assert (recorded["max_tokens"], recorded["stop"], recorded["temperature"]) == (
        8, ["\n"], temperature)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["stats"]["sampling_from_task"].startswith(
        "sampling from lm-eval task toy_sums's generation_kwargs: max_tokens 8")


# --------------------------------------------------------------------------- --scorer

_SERVICES = itertools.count()


def _two_scorer_log(tmp: Path) -> Path:
    """inspect_ai itself: three questions, 4 epochs, scored by ``exact`` (the whole
    answer) and ``includes`` (the target anywhere in it), which disagree on "The capital
    is Paris"."""
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.scorer import exact, includes
    from inspect_ai.solver import generate

    dataset = MemoryDataset([Sample(id=f"q{i}", input=f"Capital of France? ({i})",
                                    target="Paris") for i in (1, 2, 3)])
    service = f"credotwo{next(_SERVICES)}"
    with FaultServer(answers=("The capital is Paris", "Paris", "Rome"),
                     seed_mode="ignored") as server:
        os.environ.update({f"{service.upper()}_API_KEY": "x",
                           f"{service.upper()}_BASE_URL": server.url})
        try:
            (log,) = inspect_eval(Task(dataset=dataset, solver=generate(),
                                       scorer=[exact(), includes()], epochs=4),
                                  model=f"openai-api/{service}/m", log_format="eval",
                                  log_dir=str(tmp), display="none")
        finally:
            for key in ("API_KEY", "BASE_URL"):
                os.environ.pop(f"{service.upper()}_{key}", None)
    return Path(log.location)


def test_an_inspect_log_with_two_scorers_is_scored_by_the_one_named(tmp_path, capsys):
    """Done when: an inspect log with two scorers is scored by the one named; the report
    names the one used and lists the other."""
    from inspect_ai.log import read_eval_log

    path = _two_scorer_log(tmp_path)
    log = read_eval_log(str(path))
    values = {name: {(str(s.id), s.epoch): s.scores[name].value == "C" for s in log.samples}
              for name in ("exact", "includes")}
    assert values["exact"] != values["includes"]  # the test tells the two apart
    for named, other in (("includes", "exact"), ("exact", "includes")):
        out = tmp_path / named
        code = main(["score", str(path), "--scorer", named, "--methods", "self_consistency",
                     "--bootstrap", "0", "--out", str(out), "--quiet"])
        assert code == 0, capsys.readouterr().err
        rows = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
        texts = {(str(s.id), s.epoch): s.output.completion for s in log.samples}
        got: dict[str, list[bool]] = {}
        for r in rows:
            got.setdefault(r["id"], []).append(r["correct"])
        want = {i: [values[named][i, e] for e in range(1, 5)] for i in ("q1", "q2", "q3")}
        assert got == want
        assert len(texts) == 12
        said = json.loads((out / "metrics.json").read_text())["correctness"]
        assert said.startswith(f"inspect_ai scorer {named} (its value per sample); the log's "
                               f"other scorers: {other} (credo score --scorer NAME)")
        assert f"- correctness: {said}" in (out / "report.md").read_text()
    capsys.readouterr()
    # without --scorer: the first scorer, the other named
    assert main(["score", str(path), "--methods", "self_consistency", "--bootstrap", "0",
                 "--out", str(tmp_path / "first"), "--quiet"]) == 0
    said = json.loads((tmp_path / "first" / "metrics.json").read_text())["correctness"]
    assert said.startswith("inspect_ai scorer exact") and "other scorers: includes" in said


def test_a_scorer_the_log_lacks_is_one_line_naming_those_it_has(tmp_path, capsys):
    path = _two_scorer_log(tmp_path)
    code = main(["score", str(path), "--scorer", "match", "--out", str(tmp_path / "o"),
                 "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "--scorer 'match'" in err and "its scorers: exact, includes" in err
    jsonl = tmp_path / "s.jsonl"
    jsonl.write_text(json.dumps({"item": "a", "set": "original", "answer": "x"}) + "\n")
    code = main(["score", str(jsonl), "--scorer", "exact", "--out", str(tmp_path / "p"),
                 "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "no inspect_ai log" in err and len(err.splitlines()) == 1


# --------------------------------------------------------------------------- repeats

REPEATS_TASK = """\
task: toy_rep
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "{{{{question}}}}"
doc_to_target: "{{{{answer}}}}"
repeats: 4
generation_kwargs:
  until: ["\\n\\n"]
  do_sample: true
  temperature: 1.0
  max_gen_toks: 16
filter_list:
  - name: strict
    filter:
      - function: regex
        regex_pattern: "([0-9]+)"
      - function: take_first
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
"""


def _lm_eval_repeats(tmp: Path, *extra: str) -> tuple[Path, list[dict]]:
    """The real lm-eval, ``repeats: 4`` at temperature 1, against a server that honours
    seeds (child j of seed s is seed s + j, as llama.cpp's server): its samples file and
    the request bodies the server received."""
    tmp.mkdir()
    data = tmp / "data.jsonl"
    docs = [{"question": f"What is {a} + {b}?", "answer": str(a + b)}
            for a, b in ((1, 2), (2, 2), (3, 4))]
    data.write_text("".join(json.dumps(d) + "\n" for d in docs))
    (tmp / "tasks").mkdir()
    (tmp / "tasks" / "toy_rep.yaml").write_text(REPEATS_TASK.format(data=data))
    env = {**os.environ, **OFFLINE, "HF_HOME": str(tmp / "hf"), "OPENAI_API_KEY": "x"}
    with FaultServer(answers=("3", "4", "7", "five", "The sum is 4")) as server:
        done = subprocess.run(
            [sys.executable, "-m", "lm_eval", "--model", "local-chat-completions",
             "--model_args", f"model=m,base_url={server.url}/chat/completions,"
             "num_concurrent=1,max_retries=1,tokenized_requests=False", "--tasks", "toy_rep",
             "--include_path", str(tmp / "tasks"), "--output_path", str(tmp / "out"),
             "--log_samples", "--apply_chat_template", *extra],
            capture_output=True, text=True, env=env, timeout=300, check=False)
        bodies = list(server.bodies)
    assert done.returncode == 0, done.stderr[-3000:]
    (samples,) = (tmp / "out").rglob("samples_toy_rep_*.jsonl")
    return samples, bodies


def test_identical_repeats_name_lm_evals_seed_and_the_fix(tmp_path, capsys):
    """lm-eval sends seed 1234 with every request, so on a server that honours seeds its 4
    repeats are byte-identical; credo score says so in one line naming the cause and the
    fix, and the fix (``--gen_kwargs seed=None``, or ``seed: null`` in the task's
    generation_kwargs) is one lm-eval accepts: its requests then carry no seed."""
    samples, bodies = _lm_eval_repeats(tmp_path / "a")
    assert bodies and {b.get("seed") for b in bodies} == {1234}
    out = tmp_path / "scored"
    code = main(["score", str(samples), "--methods", "self_consistency", "--bootstrap", "0",
                 "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0
    (line,) = [ln for ln in printed.splitlines() if ln.startswith("identical repeats")]
    assert line.startswith("identical repeats: on each of the 3 items with several samples, "
                           "its 4 samples are the same text")
    assert "lm-eval's API models send seed 1234 with every request" in line
    assert "seed: null in the task's generation_kwargs (or --gen_kwargs seed=None)" in line
    assert f"- {line}" in (out / "report.md").read_text()
    _, fixed = _lm_eval_repeats(tmp_path / "b", "--gen_kwargs", "seed=None")
    assert fixed and all("seed" in b and b["seed"] is None for b in fixed)


def _given(texts: dict[str, list[str]], layout: str = "credo", **settings) -> Generations:
    out = Generations("f.jsonl", layout, settings=dict(settings))
    out.samples = [GivenSample(item, "original", t, t) for item, ts in texts.items()
                   for t in ts]
    return out


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.sampled_from("abcd"), st.lists(st.sampled_from(["x", "y", "x "]),
                                                          min_size=1, max_size=4),
                       min_size=1))
def test_the_line_is_said_exactly_when_every_repeated_item_holds_one_text(texts):
    repeated = [ts for ts in texts.values() if len(ts) >= 2]
    alike = bool(repeated) and all(len(set(ts)) == 1 for ts in repeated)
    line = identical_repeats_line(_given(texts))
    assert (line is not None) == alike
    if line is not None:
        assert f"on each of the {len(repeated)} items" in line


def test_the_cause_follows_what_the_file_records():
    same = {"a": ["4", "4"], "b": ["7", "7"]}
    greedy = identical_repeats_line(_given(same, "lm-evaluation-harness", temperature=0.0))
    assert greedy is not None and "cause: greedy decoding (temperature 0)" in greedy
    assert "do_sample: true and temperature: 1.0" in greedy
    seeded = identical_repeats_line(_given(same, "inspect_ai", temperature=1.0, seed=42))
    assert seeded is not None and "fixes seed 42" in seeded and "without --seed" in seeded

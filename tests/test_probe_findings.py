"""What a new user's probes broke, each fixed: no traceback (every output location checked
before work starts, the seed validated), flags that do not apply to the chosen mode and
unknown names exit 2 naming why, messages name the right flag and what a file actually
is, no command writes over its input, duplicate samples and unknown sample sets are
refused with the line that holds them, and a config error is one line with file:line
under every command that reads a run folder.

Every case runs the command line in-process (:func:`credo.cli.main`) and asserts exit 2,
one line on stderr starting ``error:`` that names the option or the file, and no
traceback; where a file could be damaged, that it is unchanged."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from conftest import BagOfWordsEmbedder
from credo import RunConfig, run
from credo.cli import main
from credo.models.scripted import ScriptedModel
from test_claims_files import PAPER_ITEM
from test_runner import TASK, respond


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A finished, labelled run folder (c3 and self-consistency) and its cache."""
    tmp = tmp_path_factory.mktemp("finished")
    cfg = RunConfig(task="toy", n=8, m=4, limit=None, bootstrap=0,
                    methods=["c3", "self_consistency"], out=tmp / "run",
                    cache=tmp / "cache.sqlite")
    run(cfg, model=ScriptedModel(respond), embedder=BagOfWordsEmbedder(), task=TASK,
        show_progress=False)
    return tmp / "run"


def _copy(finished: Path, tmp: Path) -> Path:
    target = tmp / "copy"
    shutil.copytree(finished, target)
    return target


def _claims(tmp: Path, n: int = 20) -> Path:
    """An annotated claim file in the paper's layout (several scores per claim)."""
    path = tmp / "cal.json"
    path.write_text(json.dumps({"data": [{**PAPER_ITEM, "prompt": f"bio {i}"}
                                         for i in range(n)]}), encoding="utf-8")
    return path


def _samples(tmp: Path, extra: list[dict] | None = None) -> Path:
    """credo's JSONL: 6 items of 6 samples each, one always right, the others mixed."""
    rows = [{"item": f"q{k}", "set": "original", "answer": "18" if (i + k) % 3 else "7",
             "correct": bool((i + k) % 3), "gold": "18"} for k in range(6) for i in range(6)]
    path = tmp / "gen.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows + (extra or [])))
    return path


def _fails(args: list[str], capsys, *named: str) -> str:
    """Run ``credo ARGS``: exit 2, one line ``error: ...`` naming each of ``named``."""
    assert main(args) == 2
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("error:") and "Traceback" not in out + err
    for what in named:
        assert what in lines[0], lines[0]
    return lines[0]


# --------------------------------------------------------------------------- output locations


def test_certify_claims_makes_the_missing_folders_of_its_out(tmp_path, capsys):
    cal = _claims(tmp_path)
    out = tmp_path / "missing_dir" / "sub" / "c.json"
    assert main(["certify-claims", str(cal), "--score", "gpt-score", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["calibration_file"] == str(cal)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
def test_an_out_where_no_file_can_be_made_is_one_line(tmp_path, capsys):
    cal = _claims(tmp_path)
    _fails(["certify-claims", str(cal), "--score", "gpt-score", "--out", "/proc/c.json"],
           capsys, "/proc/c.json", "--out")
    cert = tmp_path / "c.json"
    assert main(["certify-claims", str(cal), "--score", "gpt-score", "--out", str(cert)]) == 0
    capsys.readouterr()
    _fails(["filter-claims", str(cert), str(cal), "--out", "/proc/f.jsonl"], capsys,
           "/proc/f.jsonl", "--out")


def test_filter_claims_makes_the_missing_folders_of_its_out(tmp_path, capsys):
    cal = _claims(tmp_path)
    cert = tmp_path / "c.json"
    assert main(["certify-claims", str(cal), "--score", "gpt-score", "--out", str(cert)]) == 0
    out = tmp_path / "x" / "y" / "f.jsonl"
    assert main(["filter-claims", str(cert), str(cal), "--out", str(out)]) == 0
    assert len(out.read_text().splitlines()) == 20


@pytest.mark.parametrize("which", ["claim file", "certificate", "claim file by another name"])
def test_no_claim_command_writes_over_its_input(which, tmp_path, capsys):
    cal = _claims(tmp_path)
    cert = tmp_path / "c.json"
    assert main(["certify-claims", str(cal), "--score", "gpt-score", "--out", str(cert)]) == 0
    before = {p: p.read_bytes() for p in (cal, cert)}
    target = {"claim file": str(cal), "certificate": str(cert),
              "claim file by another name": str(tmp_path / "." / "cal.json")}[which]
    _fails(["filter-claims", str(cert), str(cal), "--out", target], capsys, "--out",
           "reads")
    _fails(["certify-claims", str(cal), "--score", "gpt-score", "--out", str(cal)], capsys,
           "--out", "reads")
    assert {p: p.read_bytes() for p in (cal, cert)} == before


def test_certify_does_not_write_its_certificate_over_the_runs_files(finished, tmp_path,
                                                                    capsys):
    folder = _copy(finished, tmp_path)
    scores = (folder / "scores.jsonl").read_bytes()
    _fails(["certify", str(folder), "--method", "c3", "--out", str(folder / "scores.jsonl")],
           capsys, "--out", "reads")
    assert (folder / "scores.jsonl").read_bytes() == scores


def test_score_does_not_write_its_run_folder_over_the_file_it_scores(finished, tmp_path,
                                                                     capsys):
    """``credo score RUN/samples.jsonl --out RUN`` replaced the run with a score folder
    of its own samples (its config and cache reference lost)."""
    folder = _copy(finished, tmp_path)
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    _fails(["score", str(folder / "samples.jsonl"), "--out", str(folder), "--quiet",
            "--cache", str(tmp_path / "c.sqlite")], capsys, "samples.jsonl", "--out")
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before


# --------------------------------------------------------------------------- the right flag named


def test_certify_claims_of_a_run_asks_for_method_not_score(finished, tmp_path, capsys):
    """``credo certify RUN --claims`` told the user to pass ``--score``, which certify
    refuses; its flag is ``--method``."""
    folder = _copy(finished, tmp_path)
    rows = json.loads(_claims(tmp_path).read_text())["data"]
    (folder / "claims.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    line = _fails(["certify", str(folder), "--claims"], capsys, "--method", "gpt-score")
    assert "--score" not in line
    line = _fails(["certify-claims", str(_claims(tmp_path))], capsys, "--score")
    assert "--method" not in line


# --------------------------------------------------------------------------- credo adaptive


def test_adaptive_refuses_a_negative_seed_in_one_line(tmp_path, capsys):
    _fails(["adaptive", str(_samples(tmp_path)), "--seed", "-1", "--format", "number"],
           capsys, "--seed -1")
    assert not (tmp_path / "gen-adaptive").exists()


def test_adaptive_refuses_a_method_it_does_not_replay(finished, tmp_path, capsys):
    """``--method nope`` wrote a report titled "method: nope" and exited 0."""
    _fails(["adaptive", str(_samples(tmp_path)), "--method", "nope", "--format", "number",
            "--bootstrap", "10"], capsys, "--method nope", "self_consistency")
    assert not (tmp_path / "gen-adaptive").exists()
    _fails(["adaptive", str(finished), "--method", "nope", "--bootstrap", "10", "--out",
            str(tmp_path / "a")], capsys, "--method nope", "c3")
    assert not (tmp_path / "a").exists()


def test_adaptive_names_a_path_that_does_not_exist(tmp_path, capsys):
    line = _fails(["adaptive", str(tmp_path / "nope.jsonl")], capsys, "nope.jsonl",
                  "no such file or folder")
    assert "config.yaml" not in line


@pytest.mark.parametrize("flags", [["--format", "number"], ["--seed", "3"],
                                   ["--recompute-correctness"], ["--methods", "c3"]])
def test_adaptive_refuses_a_samples_files_flag_for_a_run_folder(flags, finished, tmp_path,
                                                                capsys):
    _fails(["adaptive", str(finished), *flags, "--bootstrap", "10", "--out",
            str(tmp_path / "a")], capsys, flags[0], "run folder")


# --------------------------------------------------------------------------- flags of another mode


@pytest.mark.parametrize(("flags", "named"), [
    (["--a", "0.9"], "--claims"),
    (["--adaptive-round", "8"], "--adaptive"),
    (["--adaptive-min", "8"], "--adaptive"),
    (["--adaptive-confidence", "0.9"], "--adaptive"),
])
def test_certify_refuses_a_flag_of_a_mode_not_chosen(flags, named, finished, tmp_path,
                                                     capsys):
    out = tmp_path / "cert.json"
    _fails(["certify", str(finished), "--method", "c3", *flags, "--out", str(out)], capsys,
           flags[0], named)
    assert not out.exists()


@pytest.mark.parametrize(("flags", "named"), [
    (["--reference", "nope"], "--reference nope"),
    (["--c3-method", "nope"], "--c3-method nope"),
    (["--pairs", "c3:self_consistency", "--reference", "c3"], "--pairs"),
])
def test_report_refuses_a_method_the_run_does_not_score(flags, named, finished, tmp_path,
                                                        capsys):
    folder = _copy(finished, tmp_path)
    page = (folder / "report.html").read_bytes()
    _fails(["report", str(folder), "--embedder", "none", *flags], capsys, named)
    assert (folder / "report.html").read_bytes() == page


# --------------------------------------------------------------------------- input files


def _lm_eval_row(doc: int) -> dict:
    return {"doc_id": doc, "doc": {"question": f"q{doc}"}, "target": "4",
            "arguments": {"gen_args_0": {"arg_0": f"q{doc}", "arg_1": {"temperature": 1.0}}},
            "resps": [[f"The answer is {4 if i % 3 else 5}." for i in range(4)]],
            "filtered_resps": ["4"], "filter": "none", "metrics": ["exact_match"],
            "exact_match": 1.0, "doc_hash": "h", "prompt_hash": "p", "target_hash": "t"}


@pytest.mark.parametrize("recompute", [True, False])
def test_an_lm_eval_document_logged_twice_is_refused_with_its_line(recompute, tmp_path,
                                                                   capsys):
    """A repeated doc_id was a ``ValueError: duplicate item id`` traceback."""
    rows = [_lm_eval_row(d) for d in (0, 1, 2, 3, 2)]
    path = tmp_path / "samples_toy_2026.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    _fails(["score", str(path), "--format", "number", "--out", str(tmp_path / "o"),
            "--quiet", "--cache", str(tmp_path / "c.sqlite"),
            *(["--recompute-correctness"] if recompute else [])],
           capsys, f"{path}:5", "doc_id 2", "line 3")


def test_a_second_filter_of_a_document_is_no_duplicate(tmp_path):
    """lm-eval logs one row per document and filter: two filters are no repeat."""
    from credo.importers import read_generations

    rows = [_lm_eval_row(d) for d in (0, 1)] + [{**_lm_eval_row(d), "filter": "strict"}
                                                for d in (0, 1)]
    path = tmp_path / "samples_toy_2026.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    found = read_generations(path, recompute=True)
    assert [i.id for i in found.items] == ["0", "1"] and len(found.samples) == 8


def _inspect_sample(sid: str, epoch: int = 1) -> dict:
    return {"id": sid, "epoch": epoch, "input": "2 + 2?", "target": "4",
            "output": {"completion": "4"}, "scores": {"match": {"value": "C", "answer": "4"}}}


def test_an_inspect_sample_logged_twice_is_refused(tmp_path, capsys):
    """The same id and epoch twice counted as two samples of the item."""
    samples = [_inspect_sample("q1"), _inspect_sample("q1", 2), _inspect_sample("q2"),
               _inspect_sample("q1", 2)]
    path = tmp_path / "log.json"
    path.write_text(json.dumps({"status": "success", "eval": {"task": "t", "model": "m"},
                                "samples": samples}))
    _fails(["score", str(path), "--out", str(tmp_path / "o"), "--quiet"], capsys,
           "samples[3]", "'q1' epoch 2", "samples[1]")


def test_a_sample_in_an_unknown_set_is_refused_with_its_line(tmp_path, capsys):
    """``set: "wibble"`` was dropped without a word."""
    path = _samples(tmp_path, [{"item": "q1", "set": "wibble", "answer": "18"}])
    _fails(["score", str(path), "--format", "number", "--out", str(tmp_path / "o"),
            "--quiet", "--cache", str(tmp_path / "c.sqlite")],
           capsys, f"{path}:37", "'wibble'", "perturbed")


@pytest.mark.parametrize(("rows", "says"), [
    ([{"item": "q1", "set": "original", "answer": "1"}], "a JSON list of credo sample rows"),
    ([_lm_eval_row(0)], "a JSON list of lm-evaluation-harness sample rows"),
    ([1, 2], "a JSON list, not an inspect_ai eval log"),
])
def test_a_json_list_is_named_for_what_it_is(rows, says, tmp_path, capsys):
    """A JSON list of credo's rows was called "an inspect_ai eval log"."""
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(rows))
    line = _fails(["score", str(path), "--out", str(tmp_path / "o"), "--quiet"], capsys,
                  says)
    assert ("JSON Lines" in line) == (len(rows) == 1)


# ------------------------------------------------------------ config files in run folders


@pytest.mark.parametrize("args", [
    lambda f, t: ["certify", str(f), "--method", "c3", "--out", str(t / "c.json")],
    lambda f, t: ["report", str(f), "--embedder", "none"],
    lambda f, t: ["adaptive", str(f), "--bootstrap", "10", "--out", str(t / "a")],
])
def test_a_bad_yaml_in_a_run_folder_is_one_line_with_its_line(args, finished, tmp_path,
                                                              capsys):
    """Under certify (and report, adaptive) a bad config.yaml was 8 lines naming
    ``"<unicode string>"``; ``credo run --config`` says one line with file:line."""
    folder = _copy(finished, tmp_path)
    config = folder / "config.yaml"
    lines = config.read_text().count("\n")
    config.write_text(config.read_text() + "n: [1, 2\n")
    line = _fails(args(folder, tmp_path), capsys, f"{config}:{lines + 2}", "not valid YAML")
    assert "unicode string" not in line

"""Annotated claim files (issue 33): the reader, fuzzed; ``credo certify-claims`` and
``credo filter-claims``; the worked example of docs/claims.md, run as written.

The reader raises :class:`~credo.errors.UserError` (a ``DatasetError``) naming the file
and the item (and claim) and nothing else; the command line exits 2 with one line.
"""

from __future__ import annotations

import gzip
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from credo.cli import main
from credo.errors import UserError
from credo.evaluate.claims import ClaimCertificate
from credo.tasks.claims import read_claims, score_names
from credo.tasks.loaders import DatasetError

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "claims.md"

PAPER_ITEM = {  # the released files' layout, a mark with a trailing space included
    "prompt": "Tell me a paragraph bio of Lanny Flaherty",
    "original-output": "Lanny Flaherty is an American actor ...",
    "claims": [
        {"subclaim": "Lanny Flaherty is an American actor.", "gpt-score": 1.0,
         "annotation": "Y", "noise": 0.0009, "frequency-score": 5.0,
         "frequency+gpt-score": 6.0, "baseline-score": 10},
        {"subclaim": "He was born in 1942.", "gpt-score": 0.9, "annotation": "S ",
         "noise": -0.0004, "frequency-score": 3.0, "frequency+gpt-score": 3.9,
         "baseline-score": 9},
        {"subclaim": "He starred in Titanic.", "gpt-score": 0.8, "annotation": "N",
         "noise": 0.0002, "frequency-score": 1.0, "frequency+gpt-score": 1.8,
         "baseline-score": 8},
        {"subclaim": "He won an Oscar.", "gpt-score": 0.5, "annotation": "U ",
         "noise": 0.0001, "frequency-score": 0.0, "frequency+gpt-score": 0.5,
         "baseline-score": 7},
    ],
}


def _write(path: Path, rows, *, lines: bool) -> Path:
    text = "".join(json.dumps(r) + "\n" for r in rows) if lines else json.dumps({"data": rows},
                                                                                 indent=4)
    path.write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------------------- the reader


def test_the_papers_layout_reads_with_its_marks_and_scores(tmp_path):
    path = _write(tmp_path / "factscore.json", [PAPER_ITEM, PAPER_ITEM], lines=False)
    items = read_claims(path)
    assert [it.id for it in items] == ["factscore-1", "factscore-2"]
    first = items[0]
    assert first.prompt.startswith("Tell me") and first.answer.startswith("Lanny")
    assert [c.correct for c in first.claims] == [True, True, False, False]
    assert [c.mark for c in first.claims] == ["Y", "S ", "N", "U "]
    assert first.claims[2].text == "He starred in Titanic."
    assert first.claims[0].scores["frequency+gpt-score"] == 6.0
    assert score_names(items) == ["baseline-score", "frequency+gpt-score", "frequency-score",
                                  "gpt-score", "noise"]


def test_credos_layout_reads_from_json_lines_and_gzip(tmp_path):
    rows = [{"id": 7, "question": "q", "claims": [
        {"text": "a", "correct": True, "scores": {"f": 2}, "score": 0.5},
        {"claim": "b", "correct": 0, "scores": {"f": 1}, "score": 0.1},
        {"text": "c", "correct": None, "scores": {"f": 0}, "score": 0.0}]},
        {"id": "empty", "claims": []}]
    path = tmp_path / "c.jsonl.gz"
    path.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode()))
    items = read_claims(path)
    assert [it.id for it in items] == ["7", "empty"] and items[0].prompt == "q"
    assert [c.correct for c in items[0].claims] == [True, False, None]
    assert items[0].claims[1].text == "b" and items[0].claims[0].scores == {"f": 2.0, "score": 0.5}
    assert items[1].claims == ()


@pytest.mark.parametrize(("row", "says"), [
    ({"claims": "x"}, "item 2 (line 2): expected a 'claims' list; 'claims' is str"),
    ({"prompt": "p"}, "item 2 (line 2): expected a 'claims' list; no 'claims' field"),
    ({"claims": [1]}, "item 2 (line 2): claim 1: expected an object, got int"),
    ({"claims": [{"correct": True}]}, "claim 1: no claim text"),
    ({"claims": [{"text": 3}]}, "claim 1: 'text' must be a string"),
    ({"claims": [{"text": "t", "annotation": "maybe"}]}, "claim 1: unknown annotation 'maybe'"),
    ({"claims": [{"text": "t", "annotation": 1}]}, "'annotation' must be a mark string"),
    ({"claims": [{"text": "t", "correct": "yes"}]}, "'correct' must be true, false"),
    ({"claims": [{"text": "t", "correct": True, "annotation": "N"}]}, "annotation 'N' says"),
    ({"claims": [{"text": "t", "gpt-score": "high"}]}, "score 'gpt-score' must be a finite"),
    ({"claims": [{"text": "t", "score": True}]}, "score 'score' must be a finite number"),
    ({"claims": [{"text": "t", "scores": [1]}]}, "'scores' must be an object"),
    ({"claims": [{"text": "t", "scores": {"score": 1}, "score": 2}]}, "given twice"),
    ({"claims": [{"text": "ok"}, {"text": "t", "scores": {"f": 10**400}}]}, "claim 2: score 'f'"),
    ({"id": "a", "claims": []}, "id 'a' repeats item 1"),
    ({"id": [1], "claims": []}, "'id' must be a non-empty string"),
    ({"claims": [], "prompt": 5}, "'prompt' must be a string"),
])
def test_a_malformed_item_is_one_line_naming_file_item_and_claim(tmp_path, row, says):
    path = _write(tmp_path / "bad.jsonl", [{"id": "a", "claims": []}, row], lines=True)
    with pytest.raises(DatasetError) as e:
        read_claims(path)
    message = str(e.value)
    assert message.startswith(f"{path}: ") and says in message and "\n" not in message


def test_nan_and_a_bad_file_are_refused(tmp_path):
    nan = tmp_path / "nan.jsonl"
    nan.write_text('{"claims": [{"text": "t", "score": NaN}]}\n')
    with pytest.raises(DatasetError, match=r"nan.jsonl: item 1 \(line 1\): claim 1: score"):
        read_claims(nan)
    for name, body, says in [("x.csv", "a,b\n", "a claim file is .json or .jsonl"),
                             ("e.jsonl", "\n\n", "no items"),
                             ("j.json", '{"a": 1}', "expected a JSON list")]:
        (tmp_path / name).write_text(body)
        with pytest.raises(DatasetError, match=says):
            read_claims(tmp_path / name)
    with pytest.raises(DatasetError, match="no such file"):
        read_claims(tmp_path / "absent.json")


scalars = (st.none() | st.booleans() | st.integers(-10**30, 10**30)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=8))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=8)
claim_keys = st.sampled_from(["text", "subclaim", "claim", "correct", "annotation", "scores",
                              "score", "noise", "gpt-score", "frequency+gpt-score", "x"])
marks = st.sampled_from(["Y", "S ", "N", "U", "y", "?"])
numbers = st.integers(-5, 5) | st.floats(-10, 10)
good_claims = st.fixed_dictionaries(
    {"text": st.text(max_size=8)},
    optional={"correct": st.booleans() | st.none(), "annotation": marks,
              "score": numbers, "noise": numbers, "gpt-score": numbers,
              "scores": st.dictionaries(st.text(max_size=4), numbers, max_size=2)})


@st.composite
def damaged_claims(draw: st.DrawFn) -> dict:
    """A good claim, maybe with one field replaced by any JSON value or a mark."""
    claim = draw(good_claims)
    if draw(st.booleans()):
        claim[draw(claim_keys)] = draw(values | marks)
    return claim


claims = damaged_claims()
items = st.fixed_dictionaries(
    {"claims": st.lists(claims, max_size=4)},
    optional={"id": st.text(max_size=4) | st.integers(0, 3) | values,
              "prompt": st.text(max_size=8) | values, "answer": values})
"""Items that are mostly well formed, so both outcomes occur."""


@given(rows=st.lists(items, min_size=1, max_size=4) | st.lists(values | items, max_size=3),
       lines=st.booleans())
def test_any_json_reads_as_claims_or_a_user_error_naming_the_file(rows, lines):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ("f.jsonl" if lines else "f.json")
        path.write_text("".join(json.dumps(r) + "\n" for r in rows) if lines
                        else json.dumps(rows))
        try:
            got = read_claims(path)
        except UserError as e:
            assert str(path) in str(e) and "\n" not in str(e)
        else:
            assert got and all(isinstance(c.text, str) for it in got for c in it.claims)


@given(data=st.binary(max_size=200), cut=st.integers(0, 400))
def test_any_bytes_or_a_cut_file_read_or_fail_as_a_user_error(data, cut):
    good = json.dumps({"data": [PAPER_ITEM]}).encode()
    with tempfile.TemporaryDirectory() as tmp:
        for body in (data, good[:cut], good[:cut] + data):
            path = Path(tmp) / "f.json"
            path.write_bytes(body)
            try:
                read_claims(path)
            except UserError as e:
                assert str(path) in str(e)


# --------------------------------------------------------------------------- the commands


def _paper_file(tmp_path: Path, n: int = 20) -> Path:
    rows = [{**PAPER_ITEM, "prompt": f"bio {i}"} for i in range(n)]
    return _write(tmp_path / "cal.json", rows, lines=False)


def test_certify_claims_and_filter_claims_from_the_command_line(tmp_path, capsys):
    cal = _paper_file(tmp_path)
    cert_path = tmp_path / "c.json"
    assert main(["certify-claims", str(cal), "--alpha", "0.1", "--score", "frequency+gpt-score",
                 "--tie-break", "noise", "--out", str(cert_path)]) == 0
    out = capsys.readouterr().out
    data = json.loads(cert_path.read_text())
    # every item's r is 1.8 + 0.0002 (its wrong claim "Titanic"): the threshold
    assert data["threshold"] == pytest.approx(1.8002) and data["rank"] == 19
    assert data["calibration_file"] == str(cal) and "keep claims scoring > 1.8002" in out
    new = _write(tmp_path / "new.jsonl", [{"id": "n", "claims": [
        {"text": "kept", "frequency+gpt-score": 2.0, "noise": 0.0},
        {"text": "gone", "frequency+gpt-score": 1.8, "noise": 0.0002}]}], lines=True)
    assert main(["filter-claims", str(cert_path), str(new), "--out",
                 str(tmp_path / "f.jsonl")]) == 0
    (row,) = [json.loads(x) for x in (tmp_path / "f.jsonl").read_text().splitlines()]
    assert [c["text"] for c in row["retained"]] == ["kept"]
    assert [c["text"] for c in row["removed"]] == ["gone"]
    assert "1/2 claims retained in 1 answers" in capsys.readouterr().out


def test_the_high_probability_variant_and_a_fraction_from_the_command_line(tmp_path, capsys):
    cal = _paper_file(tmp_path, 22)
    assert main(["certify-claims", str(cal), "--alpha", "0.1", "--delta", "0.1", "--a", "0.5",
                 "--score", "gpt-score", "--out", str(tmp_path / "c.json")]) == 0
    cert = ClaimCertificate.from_json((tmp_path / "c.json").read_text())
    # shares kept at a = 0.5: {1.0}: 1/1, {1.0, 0.9}: 2/2, {.., 0.8}: 2/3, all: 2/4 -> r = -inf
    assert (cert.procedure, cert.delta, cert.a, cert.threshold) == ("ltt", 0.1, 0.5, -float("inf"))
    assert "keep every claim" in capsys.readouterr().out


@pytest.mark.parametrize(("args", "says"), [
    (["--alpha", "1.5"], "--alpha must lie strictly between 0 and 1"),
    (["--a", "0"], "--a must lie in (0, 1]"),
    (["--delta", "nan"], "--delta must lie strictly between 0 and 1"),
    ([], "name the claim score to threshold"),
    (["--score", "nope"], "claim 1 has no score 'nope'"),
    (["--score", "gpt-score", "--tie-break", "nope"], "has no score 'nope'"),
])
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, args, says):
    cal = _paper_file(tmp_path)
    assert main(["certify-claims", str(cal), *args, "--out", str(tmp_path / "c.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "c.json").exists()


def test_unlabelled_calibration_and_bad_certificates_exit_2(tmp_path, capsys):
    unlabelled = _write(tmp_path / "u.jsonl", [{"claims": [{"text": "t", "score": 1}]}],
                        lines=True)
    assert main(["certify-claims", str(unlabelled)]) == 2
    assert "u.jsonl: item 1 (line 1): claim 1 has no label" in capsys.readouterr().err
    new = _write(tmp_path / "n.jsonl", [{"claims": [{"text": "t", "score": 1}]}], lines=True)
    for body, says in [("{", "not a claim certificate"), ('{"threshold": 1}', "no alpha"),
                       ("[]", "JSON object")]:
        (tmp_path / "c.json").write_text(body)
        assert main(["filter-claims", str(tmp_path / "c.json"), str(new), "--out",
                     str(tmp_path / "o.jsonl")]) == 2
        err = capsys.readouterr().err.strip()
        assert says in err and len(err.splitlines()) == 1
    assert main(["filter-claims", str(tmp_path / "absent.json"), str(new), "--out",
                 str(tmp_path / "o.jsonl")]) == 2
    assert "no such certificate file" in capsys.readouterr().err
    assert not (tmp_path / "o.jsonl").exists()


@settings(max_examples=12)
@given(rows=st.lists(items, max_size=3))
def test_the_command_line_never_shows_a_traceback_for_any_claim_file(rows):
    import contextlib
    import io

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "f.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main(["certify-claims", str(path), "--score", "score"])
        assert code in (0, 2)
        assert "Traceback" not in err.getvalue() and len(err.getvalue().splitlines()) <= 2

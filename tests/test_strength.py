"""Perturbation strength and flip rates (paper 003): formulas, parsing, loaders, pipeline."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import cohen_kappa_score

import credo
from credo.cli import main
from credo.models.scripted import ScriptedModel
from credo.strength import (
    agreement,
    flip_rate_summary,
    flip_rate_table,
    flip_rates,
    linear_kappa,
    mean_surprisal,
    parse_rating,
    surprisal_change,
    wilson_interval,
)
from credo.strength.answers import ANSWER_PREFIX, COT_INSTRUCTION, letter_answer
from credo.strength.judge import STRENGTH_GUIDE, judge_messages
from credo.strength.perturbations import (
    EDIT_PREFIX,
    MISTAKE_PREFIX,
    PARAPHRASE_PREFIX,
    combo_choice,
    parse_after_prefix,
    split_steps,
)
from credo.tasks.builtin import load_task
from credo.tasks.loaders import DatasetError
from credo.types import Generation, GenerationError, Message, TokenLogprob

DATA = Path(__file__).parent / "data"


# --------------------------------------------------------------------------- flip rates


def test_flip_rates_on_a_constructed_table():
    # level: (instances, flips) = 0: (4, 1), 1: (2, 0), 2: (1, 1), 3: (3, 2); plus two
    # instances left out (unrated strength, unreadable answer).
    strengths = [0, 0, 0, 0, 1, 1, 2, 3, 3, 3, None, 2]
    flipped = [True, False, False, False, False, False, True, True, True, False, True, None]
    assert flip_rates(strengths, flipped) == {0: 0.25, 1: 0.0, 2: 1.0, 3: 2 / 3}
    table = flip_rate_table(strengths, flipped)
    assert [(r.strength, r.n, r.flips) for r in table] == [(0, 4, 1), (1, 2, 0), (2, 1, 1),
                                                          (3, 3, 2)]
    summary = flip_rate_summary(table)
    assert summary["responsive_fr3"] == pytest.approx(2 / 3)
    assert summary["robust_fr0"] == pytest.approx(0.25)
    assert summary["overall"] == pytest.approx(2 / 3 - 0.25)
    assert credo.flip_rates is flip_rates


def test_flip_rate_table_marks_empty_levels_and_checks_input():
    table = flip_rate_table([0, 0], [True, False])
    assert table[3].n == 0 and math.isnan(table[3].rate) and math.isnan(table[3].low)
    assert flip_rate_summary(table)["responsive_fr3"] is None
    assert flip_rate_summary(table)["overall"] is None
    with pytest.raises(ValueError, match="entries"):
        flip_rates([0, 1], [True])
    with pytest.raises(ValueError, match="not among the levels"):
        flip_rate_table([5], [True])
    with pytest.raises(ValueError, match="integer level"):
        flip_rates([1.5], [True])


def test_wilson_interval_matches_the_formula():
    k, n, z = 2, 5, 1.959963984540054
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    low, high = wilson_interval(k, n)
    assert low == pytest.approx(centre - half, abs=1e-9)
    assert high == pytest.approx(centre + half, abs=1e-9)
    assert wilson_interval(0, 4)[0] == pytest.approx(0.0, abs=1e-12)
    assert all(math.isnan(x) for x in wilson_interval(0, 0))


# --------------------------------------------------------------------------- kappa


def test_linear_kappa_equals_sklearn_and_a_hand_computation():
    a = [0, 1, 2, 3, 3, 2, 1, 0, 2, 3]
    b = [0, 2, 2, 3, 2, 2, 0, 0, 3, 3]
    expected = cohen_kappa_score(a, b, weights="linear", labels=[0, 1, 2, 3])
    assert linear_kappa(a, b) == pytest.approx(expected)
    assert credo.linear_kappa(a, b, labels=[0, 1, 2, 3]) == pytest.approx(expected)

    # By hand, two raters on 3 levels: O = [[1,1,0],[0,1,0],[0,0,1]] / 4, marginals
    # a = (2,1,1)/4, b = (1,2,1)/4; w = |i-j|/2.
    # sum w O = (1 * 0.5) / 4 = 0.125; sum w E = sum_ij w_ij a_i b_j
    x = [0, 0, 1, 2]
    y = [0, 1, 1, 2]
    ai, bj = np.array([2, 1, 1]) / 4, np.array([1, 2, 1]) / 4
    w = np.abs(np.subtract.outer(range(3), range(3))) / 2
    by_hand = 1 - 0.125 / float(np.sum(w * np.outer(ai, bj)))
    assert linear_kappa(x, y) == pytest.approx(by_hand)


def test_linear_kappa_keeps_unused_levels_in_the_distances():
    # Nobody used level 2: sklearn without labels would treat 1 and 3 as adjacent.
    a, b = [0, 1, 3, 3], [0, 3, 3, 1]
    assert linear_kappa(a, b) == pytest.approx(
        cohen_kappa_score(a, b, weights="linear", labels=[0, 1, 2, 3])
    )
    assert linear_kappa(a, b) != pytest.approx(cohen_kappa_score(a, b, weights="linear"))
    with pytest.raises(ValueError, match="not an integer"):
        linear_kappa([0, None], [0, 1])


def test_agreement_matches_scipy_and_skips_unparsable():
    labels = [0, 1, 2, 3, 3, 0, 2]
    judge = [0, 1, 3, 3, None, 1, 2]
    ag = agreement("judge", judge, labels)
    kept = [(p, y) for p, y in zip(judge, labels, strict=True) if p is not None]
    x, y = [p for p, _ in kept], [t for _, t in kept]
    assert ag.n == 6 and ag.skipped == 1
    assert ag.pearson == pytest.approx(pearsonr(x, y).statistic)
    assert ag.spearman == pytest.approx(spearmanr(x, y).statistic)
    assert ag.kappa == pytest.approx(cohen_kappa_score(x, y, weights="linear",
                                                       labels=[0, 1, 2, 3]))
    cosine = agreement("cosine", [0.1, 0.2, 0.05, 0.4], [0, 1, 2, 3])
    assert cosine.kappa is None  # continuous: kappa not defined (003 Table 2)


# --------------------------------------------------------------------------- surprisal


def test_mean_surprisal_on_a_constructed_distribution():
    # P = 1/2, 1/4, 1/8: surprisals 1, 2, 3 bits; h = 2 bits.
    lps = [math.log(0.5), math.log(0.25), math.log(0.125)]
    assert mean_surprisal(lps) == pytest.approx(2.0)
    # x' with every token at P = 1/2: h = 1 bit; Δh = |2 - 1| = 1.
    assert surprisal_change(lps, [math.log(0.5)] * 5) == pytest.approx(1.0)
    assert surprisal_change([math.log(0.5)] * 5, lps) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="empty"):
        mean_surprisal([])


# --------------------------------------------------------------------------- judge parsing


@pytest.mark.parametrize(
    ("reply", "rating"),
    [
        ("Rating: 2\nReason: removes support for C.", 2),
        ("rating:3", 3),
        ("**Rating:** 1", 1),
        ("  Rating (0-3): 0", 0),
        ("2", 2),
        ("3.", 3),
        ("Rating: 2\nRating: 2", 2),
        ("Reason first.\nRating: 1", 1),
        ("Rating: 5", None),
        ("Rating: 1.5", None),
        ("Rating: 2-3", None),
        ("Rating: 2 or 3", None),
        ("Rating: 2/3", None),
        ("Rating: 1\nRating: 3", None),
        ("I think it is a moderately strong change, so 2.", None),
        ("Rating:", None),
        ("", None),
        (None, None),
        ("7", None),
    ],
)
def test_parse_rating_is_strict(reply, rating):
    assert parse_rating(reply) == rating


def test_judge_prompt_has_guide_and_one_example_per_level():
    msgs = judge_messages("cot", "Q?\nA): x\nB): y", "step one", "step two")
    assert msgs[0].content == STRENGTH_GUIDE
    assert "give a lower one" in STRENGTH_GUIDE
    for level in range(4):
        assert msgs[1].content.count(f"Rating: {level}\n") == 1
    assert msgs[1].content.endswith("Perturbed CoT: step two")
    assert "Perturbed Question: new?" in judge_messages("input", "Q?", "c", "new?")[1].content


# --------------------------------------------------------------------------- perturbations


def test_parse_after_prefix_and_steps():
    assert parse_after_prefix("Edited question: What is 2+3?\nA): 4\nB): 5", EDIT_PREFIX,
                              required=True, cut_options=True) == "What is 2+3?"
    # A CoT step may itself discuss an option: kept when options are not cut.
    assert parse_after_prefix(f"{MISTAKE_PREFIX} A): is true because x.", MISTAKE_PREFIX,
                              required=False) == "A): is true because x."
    assert parse_after_prefix("Sure! Edited question: \"Why?\"", EDIT_PREFIX,
                              required=True) == "Why?"
    assert parse_after_prefix("no marker here", EDIT_PREFIX, required=True) is None
    assert parse_after_prefix(f"{MISTAKE_PREFIX} Snow is warm.", MISTAKE_PREFIX,
                              required=False) == "Snow is warm."
    assert parse_after_prefix(" Snow is warm.\n\nMore text", MISTAKE_PREFIX,
                              required=False) == "Snow is warm."
    assert parse_after_prefix(f"{PARAPHRASE_PREFIX}", PARAPHRASE_PREFIX, required=True) is None
    assert split_steps("1. First step. Second one!\n\n2. Third (x).") == [
        "1. First step.", "Second one!", "2. Third (x)."
    ]
    long = split_steps(" ".join(f"Step {chr(65 + i)} holds." for i in range(20)), max_steps=5)
    assert len(long) == 5 and long[-1].endswith("Step T holds.")


def test_combo_choice_follows_appendix_d():
    seen_x = set()
    for k in range(200):
        x, steps = combo_choice(f"item-{k}", 4)
        assert 0 <= x <= 4 and len(steps) == x and len(set(steps)) == x
        assert all(0 <= s < 4 for s in steps)
        seen_x.add(x)
    assert seen_x == {0, 1, 2, 3, 4}
    assert combo_choice("a", 3) == combo_choice("a", 3)


def test_letter_answer_from_logprobs_and_text():
    gen = Generation(
        text=ANSWER_PREFIX + "B",
        logprobs=(TokenLogprob("B", math.log(0.4), (("B", math.log(0.4)), (" C", math.log(0.35)),
                                                    ("C", math.log(0.1)), ("Z", math.log(0.1)))),),
    )
    ans = letter_answer(gen, 4)
    assert ans.letter == "C" and ans.source == "logprobs"  # 0.35 + 0.1 > 0.4
    assert ans.probs["C"] == pytest.approx(0.45)
    none = Generation(text="x", logprobs=(TokenLogprob("Z", -0.1, (("Z", -0.1),)),))
    assert letter_answer(none, 4).letter is None
    assert letter_answer(Generation(text=ANSWER_PREFIX + "D) because"), 4).letter == "D"
    assert letter_answer(Generation(text=ANSWER_PREFIX + "E"), 4).letter is None


def test_letter_answer_shares_the_label_probability_reading():
    """One rule for which token is a letter and how its probability sums (002 and 003);
    003 reads the first token even when the generated token is not a letter (App. H)."""
    from credo.methods.label_prob import label_probabilities

    first = TokenLogprob("B", math.log(0.5), (("B", math.log(0.5)), ("(C", math.log(0.2)),
                                              ("A.", math.log(0.1))))
    ans = letter_answer(Generation(text="B", logprobs=(first,)), 3)
    shared = label_probabilities((first,), 3)
    assert shared is not None and ans.probs == pytest.approx(shared.raw)
    assert ans.letter == shared.top[0] == "B"
    not_a_letter = TokenLogprob("The", math.log(0.5), (("The", math.log(0.5)),
                                                       (" C", math.log(0.3))))
    assert letter_answer(Generation(text="The", logprobs=(not_a_letter,)), 3).letter == "C"
    assert label_probabilities((not_a_letter,), 3) is None


# --------------------------------------------------------------------------- loaders


def test_mcqa_loaders_read_the_real_layouts():
    arc = load_task(f"arc_challenge:{DATA / 'arc_challenge_test_sample5.jsonl'}")
    assert arc.items[0].gold == "C" and len(arc.items[0].choices) == 4
    obqa = load_task(f"openbookqa:{DATA / 'openbookqa_test_head3.json'}")
    assert [it.gold for it in obqa.items] == ["B", "A", "C"]
    assert obqa.items[0].choices[1] == "quit eating lunch out"
    sqa = load_task(f"strategyqa:{DATA / 'strategyqa_test_head3.jsonl'}")
    assert sqa.items[0].choices == ("Yes", "No") and [it.gold for it in sqa.items] == [
        "A", "B", "B"
    ]
    sports = load_task(f"bbh_sports:{DATA / 'bbh_sports_test_head3.jsonl'}", limit=2)
    assert sports.items[0].question == (
        "Is the following sentence plausible? Luke Voit was out at first"
    )
    assert sports.items[0].gold == "A" and sports.items[0].id == "sports-11"


def test_mcqa_loader_errors_name_file_and_line(tmp_path):
    bad = tmp_path / "sqa.jsonl"
    bad.write_text('{"id": 1, "question": "Q?", "answer": true}\n{"id": 2, "question": "R?", '
                   '"answer": "maybe"}\n')
    with pytest.raises(DatasetError, match=r"sqa.jsonl:2: field 'answer'"):
        load_task(f"strategyqa:{bad}")
    with pytest.raises(ValueError, match="needs a file"):
        load_task("strategyqa")


# --------------------------------------------------------------------------- the pipeline


def _respond(messages: tuple[Message, ...], seed: int) -> str:
    last = messages[-1].content
    if messages[0].content == STRENGTH_GUIDE:
        target = messages[-1].content.rsplit("Now, rate the following:", 1)[1]
        h = sum(map(ord, target)) % 5
        return "No idea." if h == 4 else f"Rating: {h}"
    if COT_INSTRUCTION in last:
        return "The mean is the average.\nThe answer uses the mean. So B fits."
    if EDIT_PREFIX in last:
        question = last.split("Original Question: ", 1)[1].split("\n", 1)[0]
        return f"{EDIT_PREFIX} {question} (with twice the data)"
    if PARAPHRASE_PREFIX in last:
        text = last.split("Text: ", 1)[1].split("\n", 1)[0]
        return f"{PARAPHRASE_PREFIX} In other words, {text}"
    if last == MISTAKE_PREFIX:
        return f"{MISTAKE_PREFIX} The median is the average."
    if last.endswith(ANSWER_PREFIX):
        return ANSWER_PREFIX + "C"
    raise AssertionError(f"unexpected prompt {last[:80]!r}")


def _letters(messages: tuple[Message, ...], seed: int) -> tuple[TokenLogprob, ...] | None:
    text = " ".join(m.content for m in messages)
    flip = "twice the data" in text or "median" in text
    best = "C" if flip else "B"
    other = "B" if flip else "C"
    return (TokenLogprob(best, math.log(0.6), ((best, math.log(0.6)), (other, math.log(0.3)))),)


def _word_logprobs(messages: tuple[Message, ...], seed: int) -> tuple[TokenLogprob, ...]:
    words = messages[-1].content.split()
    return tuple(TokenLogprob(w, -0.1 * len(w)) for w in words)


@pytest.fixture
def scripted_world(monkeypatch, bow_embedder):
    made: list[ScriptedModel] = []

    def fake_load_model(spec, **options):
        if spec.startswith("forced:"):  # the surprisal scorer
            return ScriptedModel(lambda m, s: m[-1].content, name="scorer",
                                 logprobs_fn=_word_logprobs)
        m = ScriptedModel(_respond, name=spec, logprobs_fn=_letters)
        made.append(m)
        return m

    monkeypatch.setattr("credo.models.registry.load_model", fake_load_model)
    monkeypatch.setattr("credo.models.embedders.load_embedder", lambda name: bow_embedder)
    return made


def test_strength_run_cli_writes_the_folder(tmp_path, scripted_world):
    out = tmp_path / "run"
    args = ["strength", "run", "--task", "mmlu:high_school_statistics", "--limit", "6",
            "--model", "scripted-a", "--out", str(out), "--cache", str(tmp_path / "c.sqlite"),
            "--quiet"]
    assert main(args) == 0
    for name in ("flip_rates.csv", "strengths.jsonl", "flip_rates.png", "summary.json",
                 "report.md"):
        assert (out / name).is_file(), name
    rows = [json.loads(line) for line in (out / "strengths.jsonl").read_text().splitlines()]
    assert {r["perturbation_type"] for r in rows} <= {"input", "cot", "paraphrase"}
    assert sum(r["perturbation_type"] == "input" for r in rows) == 6
    assert sum(r["perturbation_type"] != "input" for r in rows) == 6
    for r in rows:
        assert r["text_after"] and r["cosine_distance"] is not None
        assert r["surprisal_change"] == pytest.approx(
            abs(r["surprisal_before"] - r["surprisal_after"])
        )
        if r["judge_rating"] is None:
            assert r["judge_reply"] == "No idea."  # unparsable, recorded raw
        # The scripted model answers C after a mistake, B otherwise.
        assert r["answer_before"] == "B"
        assert r["flipped"] == (r["answer_after"] != "B")
        if r["perturbation_type"] == "paraphrase":
            assert r["flipped"] is False and len(r["perturbed_steps"]) == r["cot_steps"]
    with (out / "flip_rates.csv").open() as fh:
        reader = csv.DictReader(fh)
        assert reader.fieldnames == ["model", "perturbation_type", "strength", "n", "flips",
                                     "rate", "low", "high"]
        table = list(reader)
    # The CSV equals eq. 2 recomputed from strengths.jsonl.
    for kind in ("input", "cot"):
        sub = [r for r in rows if r["perturbation_type"] == kind]
        expect = flip_rates([r["judge_rating"] for r in sub], [r["flipped"] for r in sub])
        got = {int(t["strength"]): float(t["rate"]) for t in table
               if t["perturbation_type"] == kind and int(t["n"]) > 0}
        assert got == pytest.approx(expect)
    summary = json.loads((out / "summary.json").read_text())
    s = summary["models"]["scripted-a"]["input"]
    assert set(s) >= {"responsive_fr3", "robust_fr0", "overall"}
    assert s["judge_unparsable"] == sum(
        r["judge_rating"] is None for r in rows if r["perturbation_type"] == "input"
    )

    # A rerun is served from the cache: the new scripted model is never called.
    assert main(args) == 0
    assert scripted_world[-1].calls == 0


def test_strength_agree_cli(tmp_path, scripted_world, capsys):
    labels = tmp_path / "labels.jsonl"
    rows = [
        {"id": f"r{k}", "perturbation_type": kind, "question": "Q?\nA): x\nB): y",
         "cot": "Because x.", "text_before": before, "text_after": after, "label": label}
        for k, (kind, before, after, label) in enumerate([
            ("input", "Is x true?", "Is x true?", 0),
            ("input", "Is x true?", "Is y false now?", 3),
            ("cot", "Because x.", "Because x and z.", 1),
            ("cot", "Because x.", "Not x at all, so y.", 2),
            ("paraphrase", "Because x.", "Since x.", 0),
        ])
    ]
    labels.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = tmp_path / "agree.json"
    assert main(["strength", "agree", "--labels", str(labels), "--measure", "judge",
                 "--judge", "scripted-j", "--cache", str(tmp_path / "c.sqlite"), "--quiet",
                 "--json", str(out)]) == 0
    payload = json.loads(out.read_text())
    values = payload["values"]
    kept = [(v, r["label"]) for v, r in zip(values, rows, strict=True) if v is not None]
    allr = payload["agreement"]["all"]
    assert allr["n"] == len(kept)
    if len({v for v, _ in kept}) > 1:
        x, y = [v for v, _ in kept], [t for _, t in kept]
        assert allr["pearson"] == pytest.approx(pearsonr(x, y).statistic)
        assert allr["kappa"] == pytest.approx(linear_kappa(x, y, labels=[0, 1, 2, 3]))
    assert "Pearson" in capsys.readouterr().out
    assert main(["strength", "agree", "--labels", str(labels), "--measure", "cosine",
                 "--cache", str(tmp_path / "c.sqlite"), "--quiet"]) == 0
    assert main(["strength", "agree", "--labels", str(labels), "--measure", "surprisal",
                 "--cache", str(tmp_path / "c.sqlite"), "--quiet"]) == 0


def test_strength_agree_rejects_bad_labels(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"perturbation_type": "input", "question": "Q", "cot": "c",
                               "text_before": "a", "text_after": "b", "label": 4}) + "\n")
    assert main(["strength", "agree", "--labels", str(bad), "--measure", "cosine"]) == 2
    err = " ".join(capsys.readouterr().err.split())  # errors go to stderr (issue 12)
    assert "bad.jsonl:1: label must be an integer 0-3" in err


def test_strength_run_rejects_a_non_choice_task(tmp_path, capsys):
    assert main(["strength", "run", "--task", "gsm8k", "--limit", "2", "--out",
                 str(tmp_path / "o"), "--cache", str(tmp_path / "c.sqlite"), "--quiet"]) == 2
    assert "needs a multiple-choice task" in " ".join(capsys.readouterr().err.split())


# --------------------------------------------------------------------------- forced decoding


def _entry(token_id: int, logprob: float) -> dict:
    return {"id": token_id, "token": f"t{token_id}", "logprob": logprob}


def test_forced_decoding_reads_one_probability_per_token():
    from credo.models.forced import _parse_forced

    response = {"completion_probabilities": [_entry(5, -1.0), _entry(7, -3.0), _entry(2, -0.1)]}
    gen = _parse_forced(response, [5, 7], "ab", "t", 0.0)  # the EOS entry after is ignored
    assert [t.logprob for t in gen.logprobs] == [-1.0, -3.0]
    assert mean_surprisal([t.logprob for t in gen.logprobs]) == pytest.approx(2.0 / math.log(2))


def test_forced_decoding_with_a_split_character_reports_no_surprisal():
    """llama.cpp folds a token ending inside a UTF-8 character (the first byte of "χ") into
    the next entry: its probability is lost, so h(x) is unavailable, not biased low."""
    from credo.models.forced import _parse_forced

    merged = {"completion_probabilities": [_entry(504, -8.2), _entry(225, -2.9), _entry(34, -9.4)]}
    gen = _parse_forced(merged, [504, 11446, 225, 34], "The χ2", "t", 0.0)
    assert gen.logprobs == () and gen.finish_reason == "partial-utf8"
    with pytest.raises(GenerationError, match="diverged at token 1"):
        _parse_forced({"completion_probabilities": [_entry(504, -1), _entry(99, -1)]},
                      [504, 11446, 225], "x", "t", 0.0)
    with pytest.raises(GenerationError, match="2 of 3 tokens"):
        _parse_forced({"completion_probabilities": [_entry(504, -1), _entry(11446, -1)]},
                      [504, 11446, 225], "x", "t", 0.0)


def test_an_interrupted_figure_write_leaves_the_old_file(tmp_path):
    """report/strength.py writes every output atomically (noted in issue 31's review): a
    figure whose write fails half-way leaves the previous file and no temporary."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from credo.report.figures import save_figure

    target = tmp_path / "flip_rates.png"
    target.write_bytes(b"the previous figure")

    class Broken(Figure):
        def savefig(self, fname, **kw):
            Path(fname).write_bytes(b"half a png")
            raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        save_figure(Broken(), target)
    assert target.read_bytes() == b"the previous figure"
    assert [p.name for p in tmp_path.iterdir()] == ["flip_rates.png"]
    save_figure(Figure(), target)
    assert target.read_bytes().startswith(b"\x89PNG")

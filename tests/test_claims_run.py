"""Claims of a long-form run (issue 33 items 1-2): planned stages (split, support,
confidence, labels) through the stage driver, the claim methods computed by hand on a
scripted judge, the per-claim evaluation, the dry run and the ledger."""

from __future__ import annotations

import math
import shutil

import pytest
from hypothesis import given
from hypothesis import strategies as st

from credo.config import ClaimsConfig, RunConfig
from credo.errors import UserError
from credo.methods.claims import CLAIM_METHODS, score_claims, support_share
from credo.models.scripted import ScriptedModel
from credo.perturb.context import PROMPTS
from credo.plan.claims import (
    CONFIDENCE_STAGE,
    LABEL_STAGE,
    SPLIT_STAGE,
    SUPPORT_STAGE,
    ClaimEvidence,
    parse_claims,
    parse_confidence,
    parse_verdict,
)
from credo.tasks.longform import load_factscore_task

CONTEXTS = ["Biographies often start with birthplaces.", "Many people write memoirs.",
            "Libraries keep records of famous lives.", "Historians study letters."]
ORIGINALS = [
    "Ada Lovelace was born in 1815. She was a mathematician in London.",
    "Ada Lovelace was born in 1815. She wrote notes on the Analytical Engine.",
    "Ada Lovelace was born in 1816. She was a mathematician in London.",
]
PERTURBED = "Ada Lovelace was born in 1815. She lived in Paris."
SPLIT_REPLY = "- Ada Lovelace was born in 1815.\n- Ada Lovelace was a mathematician.\n" \
              "- Ada Lovelace lived in London."


def _claim_of(user: str) -> str:
    return user.split("\n\nClaim: ")[1].split("\n\n")[0]


def respond(messages, seed):
    system, user = messages[0].content, messages[-1].content
    if system in PROMPTS.values():
        return CONTEXTS[seed % 4]
    if system.startswith("Reply with one word: True or False"):  # FActScore labels
        claim = user.split("Input:")[1]
        return "True" if "1815" in claim or "mathematician" in claim else "False"
    if system.startswith("Reply with one word: support"):
        text = user.split("Text: ")[1].split("\n\nClaim: ")[0]
        claim = _claim_of(user)
        if "1816" in text and "1815" in claim:
            return "contradict"
        words = [w for w in claim.rstrip(".").split() if w not in ("Ada", "Lovelace", "was",
                                                                   "She", "in", "a")]
        return "support" if all(w in text for w in words) else "neither"
    if system.startswith("Reply with one number"):
        return "90" if "1815" in user else "40%"
    if system.startswith("You break texts"):
        return SPLIT_REPLY
    if any(c in user for c in CONTEXTS):
        return PERTURBED
    return ORIGINALS[seed % 3]


@pytest.fixture
def bio_task(tmp_path):
    names = tmp_path / "entities.txt"
    names.write_text("Ada Lovelace\n", encoding="utf-8")
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "Ada Lovelace.txt").write_text("Ada Lovelace was born in 1815.", encoding="utf-8")
    return load_factscore_task(names, kb)


def _config(tmp_path, **claims):
    return RunConfig(task="factscore", n=3, m=3, limit=None, kernel="embedding", bootstrap=50,
                     methods=["c3"], out=tmp_path / "run", cache=tmp_path / "cache.sqlite",
                     claims=ClaimsConfig(**claims))


def _run(cfg, task, bow_embedder, model=None):
    from credo.api import run

    return run(cfg, model=model or ScriptedModel(respond), embedder=bow_embedder, task=task,
               show_progress=False)


def test_sentence_claims_scored_by_hand(tmp_path, bio_task, bow_embedder):
    result = _run(_config(tmp_path), bio_task, bow_embedder)
    run = result.claims
    (item,) = run.items
    assert item.answer == ORIGINALS[0]  # the first original sample (all answers distinct)
    assert [c.text for c in item.claims] == ["Ada Lovelace was born in 1815.",
                                            "She was a mathematician in London."]
    born, maths = item.claims
    # other originals: ORIGINALS[1] supports "born 1815", ORIGINALS[2] contradicts it
    assert born.scores["frequency"] == 0.0  # max(0, (1 - 1) / 2)
    # "mathematician in London": ORIGINALS[1] neither, ORIGINALS[2] supports
    assert maths.scores["frequency"] == 0.5
    # perturbed samples all support "born 1815" (f_p = 1), none the mathematician
    assert born.scores["claim_c3"] == min(0.0, 1.0)
    assert maths.scores["claim_c3"] == 0.0
    assert born.scores["verbalized"] == 0.9 and maths.scores["verbalized"] == 0.4
    assert [c.scores["ordinal"] for c in item.claims] == [1.0, 0.5]
    # labels from the FActScore grader's check against the knowledge folder
    assert [c.correct for c in item.claims] == [True, True]
    assert run.stats["claim_labels"] == "factscore grader"
    stages = result.ledger["stages"]
    assert SUPPORT_STAGE in stages and CONFIDENCE_STAGE in stages and LABEL_STAGE in stages
    assert SPLIT_STAGE not in stages  # the offline split asks no model
    # 2 claims x (2 other originals + 3 perturbed samples, all the same text): one
    # request per distinct (claim, text) pair
    assert stages[SUPPORT_STAGE]["requests"] == 2 * 3
    assert stages[CONFIDENCE_STAGE]["requests"] == 2


def test_model_split_is_planned_and_cached(tmp_path, bio_task, bow_embedder):
    cfg = _config(tmp_path, split="model")
    model = ScriptedModel(respond)
    first = _run(cfg, bio_task, bow_embedder, model)
    (item,) = first.claims.items
    assert [c.text for c in item.claims] == parse_claims(SPLIT_REPLY)
    assert first.ledger["stages"][SPLIT_STAGE]["requests"] == 1
    # 1815: one for, one against; mathematician: ORIGINALS[2] supports, ORIGINALS[1] not;
    # "lived in London": no other sample says "lived" (the scripted judge: neither)
    assert [c.scores["frequency"] for c in item.claims] == [0.0, 0.5, 0.0]
    assert [c.correct for c in item.claims] == [True, True, False]
    calls = model.calls
    again = _run(cfg.model_copy(update={"out": tmp_path / "again"}), bio_task, bow_embedder,
                 model)
    assert model.calls == calls  # every claim request came from the cache
    assert [c.scores for c in again.claims.items[0].claims] == [
        c.scores for c in item.claims]


def test_metrics_per_claim_with_cluster_cis(tmp_path, bio_task, bow_embedder):
    result = _run(_config(tmp_path, split="model"), bio_task, bow_embedder)
    m = result.claims.metrics["verbalized"]
    assert m["n_claims"] == 3 and m["n_items"] == 1
    # verbalized: 0.9 (correct), 0.4 (correct), 0.4 (wrong): AUROC = (1 + 0.5) / 2
    assert m["auroc"] == pytest.approx(0.75)
    assert "auroc_low" in m  # one item: a cluster bootstrap has nothing to resample
    assert math.isnan(m["auroc_low"]) and math.isnan(m["auroc_high"])
    ordinal = result.claims.metrics["ordinal"]
    assert ordinal["auroc"] == pytest.approx(1.0)  # the wrong claim is the last


def test_dry_run_counts_claim_stages(tmp_path, bio_task, bow_embedder):
    from credo.api import dry_run

    cfg = _config(tmp_path, split="model")
    est = dry_run(cfg, model=ScriptedModel(respond), embedder=bow_embedder, task=bio_task)
    by = {s.stage: s for s in est.stages}
    assert by[SPLIT_STAGE].requests == 1
    per = cfg.claims.split_max_tokens // 12  # the placeholder reply's claims
    assert by[SUPPORT_STAGE].requests == per * (cfg.n - 1 + cfg.m)
    assert by[CONFIDENCE_STAGE].requests == per
    assert by[LABEL_STAGE].requests == per


def test_unknown_claim_method_and_wrong_format_refused(tmp_path, bio_task, bow_embedder):
    from credo.tasks.base import AnswerFormat, Item, Task

    numbers = Task("sums", (Item(id="a", question="1 + 1?", gold="2"),), AnswerFormat.NUMBER,
                   "sums")
    model = ScriptedModel(respond)
    with pytest.raises(UserError, match="unknown claim method 'nope'"):
        _run(_config(tmp_path, methods=["nope"]), bio_task, bow_embedder, model)
    with pytest.raises(UserError, match="long-form"):
        _run(_config(tmp_path), numbers, bow_embedder, model)
    assert model.calls == 0


def test_annotated_file_gives_claims_and_labels(tmp_path, bio_task, bow_embedder):
    f = tmp_path / "labels.jsonl"
    f.write_text('{"id": "factscore-0000", "claims": [{"text": "Ada Lovelace was born in '
                 '1815.", "correct": true}, {"text": "She lived in London.", "correct": '
                 'false}]}\n', encoding="utf-8")
    result = _run(_config(tmp_path, labels=str(f), methods=["frequency", "ordinal"]),
                  bio_task, bow_embedder)
    (item,) = result.claims.items
    assert [(c.text, c.correct) for c in item.claims] == [
        ("Ada Lovelace was born in 1815.", True), ("She lived in London.", False)]
    assert LABEL_STAGE not in result.ledger["stages"]  # the file labels them
    assert result.claims.stats["claim_labels"] == "file"


# --------------------------------------------------------------------------- pure parts


@given(st.lists(st.sampled_from([1, 0, -1, None]), max_size=12))
def test_support_share_is_clipped_net_support(verdicts):
    read = [v for v in verdicts if v is not None]
    got = support_share(verdicts)
    if not read:
        assert math.isnan(got)
    else:
        assert got == max(0.0, (read.count(1) - read.count(-1)) / len(read))
        assert 0.0 <= got <= 1.0


@given(st.integers(1, 30))
def test_ordinal_exact(n):
    ev = ClaimEvidence("x", tuple(f"c{j}" for j in range(n)))
    assert CLAIM_METHODS["ordinal"].score(ev) == [1 - j / n for j in range(n)]


@given(st.lists(st.tuples(st.lists(st.sampled_from([1, 0, -1]), min_size=1, max_size=5),
                          st.lists(st.sampled_from([1, 0, -1]), min_size=1, max_size=5)),
                min_size=1, max_size=6))
def test_claim_c3_is_the_weaker_support(rows):
    ev = ClaimEvidence("x", tuple(str(j) for j in range(len(rows))),
                       tuple(tuple(o) for o, _ in rows), tuple(tuple(p) for _, p in rows))
    got = score_claims(ev, ["frequency", "claim_c3"])
    for j, (o, p) in enumerate(rows):
        fo, fp = support_share(o), support_share(p)
        assert got["claim_c3"][j] == pytest.approx((fo + fp) / 2 - abs(fo - fp) / 2)
        assert got["claim_c3"][j] <= got["frequency"][j]


def test_parsers():
    assert parse_claims("Sure:\n- A is B.\n2. C is D.\n* A is B.\nnote") == ["A is B.",
                                                                          "C is D."]
    assert parse_claims("no list here") == []
    assert parse_verdict("Supported.") == 1 and parse_verdict("**contradicts**") == -1
    assert parse_verdict("Neither") == 0 and parse_verdict("maybe") is None
    assert parse_confidence("I'd say 85%") == 0.85 and parse_confidence("150") == 1.0
    assert parse_confidence("unsure") is None


# --------------------------------------------------------------------------- certify, filter


def _many_bios(tmp_path, n_items):
    names = tmp_path / "many.txt"
    people = [f"Person {k}" for k in range(n_items)]
    names.write_text("\n".join(people) + "\n", encoding="utf-8")
    kb = tmp_path / "kb_many"
    kb.mkdir()
    for p in people:
        (kb / f"{p}.txt").write_text(f"{p} was born in 1815.", encoding="utf-8")
    return load_factscore_task(names, kb)


def many_respond(messages, seed):
    system, user = messages[0].content, messages[-1].content
    if system.startswith("Tell me") or ("bio of" in user and not system.startswith("Reply")):
        who = user.split("bio of ")[1].rstrip(".")
        return [f"{who} was born in 1815. {who} was a painter in Rome.",
                f"{who} was born in 1815. {who} wrote poems in Paris.",
                f"{who} was born in 1815. {who} was a painter in Rome."][seed % 3]
    return respond(messages, seed)


def test_certify_run_claims_then_filter_unlabelled_run(tmp_path, bow_embedder):
    from dataclasses import replace

    from credo.api import certify_run_claims, run
    from credo.evaluate.claims import ClaimCertificate, certify_claims
    from credo.tasks.claims import read_claims

    task = _many_bios(tmp_path, 12)
    cfg = RunConfig(task="factscore", n=3, m=2, limit=None, kernel="embedding", bootstrap=0,
                    methods=["self_consistency"], out=tmp_path / "cal",
                    cache=tmp_path / "cache.sqlite",
                    claims=ClaimsConfig(methods=["frequency", "ordinal"]))
    run(cfg, model=ScriptedModel(many_respond), embedder=bow_embedder, task=task,
        show_progress=False)
    items = read_claims(cfg.out / "claims.jsonl")  # the claim-file layout, read back
    assert len(items) == 12 and all(c.correct is not None for it in items for c in it.claims)
    cert = certify_run_claims(cfg.out, "frequency", alpha=0.2, out=tmp_path / "cc.json")
    # the same procedure, bound to the run (tests/test_claims_certificate.py)
    assert replace(cert, settings=None) == certify_claims(items, 0.2, score="frequency")
    assert ClaimCertificate.from_json((tmp_path / "cc.json").read_text()).threshold == \
        cert.threshold
    from credo.cli import main

    assert main(["certify", str(cfg.out), "--claims", "--method", "frequency", "--alpha",
                 "0.2", "--procedure", "ltt", "--delta", "0.3"]) == 0
    ltt = ClaimCertificate.from_json((cfg.out / "claim_certificate.json").read_text())
    assert replace(ltt, settings=None) == certify_claims(items, 0.2, delta=0.3,
                                                         score="frequency")
    assert ltt.settings == cert.settings
    assert main(["certify", str(cfg.out), "--claims", "--method", "nope"]) == 2
    # the certificate on new, unlabelled questions (no knowledge folder: no labels)
    names = tmp_path / "new.txt"
    names.write_text("Person 90\nPerson 91\n", encoding="utf-8")
    new = load_factscore_task(names)
    out = tmp_path / "new"
    result = run(cfg.model_copy(update={"out": out, "claims": None}),
                 model=ScriptedModel(many_respond), embedder=bow_embedder, task=new,
                 show_progress=False, certificate=tmp_path / "cc.json")
    assert result.claims is not None  # the certificate turned the claim stage on
    import json

    rows = [json.loads(x) for x in (out / "answers.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == [it.id for it in new.items]
    for r, item in zip(rows, result.claims.items, strict=True):
        kept = [c.text for c in item.claims if c.scores["frequency"] > cert.threshold]
        assert [c["text"] for c in r["retained"]] == kept
        assert r["filtered_answer"] == " ".join(kept)
        assert len(r["retained"]) + len(r["removed"]) == len(item.claims)


def test_claim_file_certificate_is_refused_by_a_run(tmp_path, bio_task, bow_embedder):
    """A certificate made on a claim file (``credo certify-claims``) binds no model, task
    or settings: a run cannot be checked against it, so it is refused (issue 33)."""
    from credo.evaluate.claims import ClaimItem, certify_claims

    cert = certify_claims([ClaimItem.of([0.5, 0.2], [True, False], id=str(k),
                                        name="frequency") for k in range(12)], 0.2,
                          score="frequency")
    f = tmp_path / "c.json"
    f.write_text(cert.to_json())
    model = ScriptedModel(respond)
    with pytest.raises(UserError, match="made on a claim file"):
        from credo.api import run

        run(_config(tmp_path), model=model, embedder=bow_embedder, task=bio_task,
            show_progress=False, certificate=f)
    assert model.calls == 0


# --------------------------------------------------------------------------- report


def _claim_report(tmp_path, bow_embedder):
    from credo.api import run
    from credo.report.claims import claim_answers
    from credo.report.rundata import load_run

    task = _many_bios(tmp_path, 12)
    cfg = RunConfig(task="factscore", n=3, m=2, limit=None, kernel="embedding", bootstrap=20,
                    methods=["self_consistency"], out=tmp_path / "run",
                    cache=tmp_path / "cache.sqlite",
                    claims=ClaimsConfig(methods=["frequency", "claim_c3", "ordinal"],
                                        alphas=[0.2]))
    result = run(cfg, model=ScriptedModel(many_respond), embedder=bow_embedder, task=task,
                 show_progress=False)
    data = load_run(cfg.out)
    marked = claim_answers(data.claims, data.extras["claim_metrics.json"])
    kept = sum(c["kept"] for a in marked["answers"] for c in a["claims"])
    return cfg, result, kept


def test_report_claim_section_and_html_view(tmp_path, bow_embedder):
    cfg, result, kept = _claim_report(tmp_path, bow_embedder)
    md = (cfg.out / "report.md").read_text()
    assert "## Claims" in md and "retained at α = 0.2" in md
    n_claims = sum(len(it.claims) for it in result.claims.items)
    assert f"claims: {n_claims} (2.0 per answer" in md
    assert "claim_c3: not available (the run drew no perturbed samples" in md
    html = (cfg.out / "report.html").read_text()
    assert 0 < kept < n_claims
    assert html.count('<li class="kept">') == kept
    assert html.count('<li class="removed">') == n_claims - kept
    assert "{{" not in html and "claim-answer" in html


CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(n)), None)


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed "
                    "(Debian: apt-get install chromium); the browser check needs it")
def test_claim_view_opens_in_headless_chromium(tmp_path, bow_embedder):
    import re
    import subprocess

    cfg, _, kept = _claim_report(tmp_path, bow_embedder)
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", f"--user-data-dir={tmp_path / 'profile'}",
         "--virtual-time-budget=10000", "--dump-dom", (cfg.out / "report.html").as_uri()],
        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    assert 'id="claims"' in dom
    assert len(re.findall(r'<details class="claim-answer"', dom)) == 12
    assert len(re.findall(r'<li class="kept">', dom)) == kept


# --------------------------------------------------------------------------- the CLI flag


def test_cli_claims_flag_runs_the_claim_stage(tmp_path, bow_embedder, monkeypatch, capsys):
    """``credo run --claims METHODS`` (issue 33) on the scripted backend: the dry run
    counts the claim stages, the run writes claims.jsonl, claim_metrics.json and the
    report's claim section for exactly those methods."""
    import json

    from credo.app import run as api  # what the command line calls
    from credo.cli import main

    _many_bios(tmp_path, 12)
    for name in ("run", "dry_run"):
        real = getattr(api, name)

        def scripted(*a, _real=real, **k):
            return _real(*a, **k, model=ScriptedModel(many_respond), embedder=bow_embedder)

        monkeypatch.setattr(api, name, scripted)
    out = tmp_path / "run"
    args = ["run", "--task", f"factscore:{tmp_path / 'many.txt'},knowledge={tmp_path / 'kb_many'}",
            "--limit", "12", "--n", "3", "--m", "2", "--methods", "self_consistency",
            "--kernel", "embedding", "--bootstrap", "0", "--claims", "frequency,ordinal",
            "--out", str(out), "--cache", str(tmp_path / "c.sqlite"), "--quiet"]
    assert main([*args, "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert SUPPORT_STAGE in printed and LABEL_STAGE in printed
    assert CONFIDENCE_STAGE not in printed  # verbalized is not asked for
    assert main(args) == 0
    rows = [json.loads(x) for x in (out / "claims.jsonl").read_text().splitlines()]
    assert len(rows) == 12
    assert {k for r in rows for c in r["claims"] for k in c["scores"]} == {"frequency",
                                                                            "ordinal"}
    metrics = json.loads((out / "claim_metrics.json").read_text())
    assert metrics["methods"] == ["frequency", "ordinal"]
    assert metrics["metrics"]["frequency"]["auroc"] == pytest.approx(1.0)
    assert "## Claims" in (out / "report.md").read_text()


def test_claim_section_says_why_when_every_item_is_dropped(tmp_path, bow_embedder):
    """The claim stage on, and no item reaches it (the writer's prefixes are all empty,
    so every item is dropped for lack of perturbations): report.md and report.html still
    have the claim section, saying why there is nothing in it, not that nothing is
    labelled."""
    from credo.api import run

    def no_prefix(messages, seed):
        return "" if messages[0].content in PROMPTS.values() else many_respond(messages, seed)

    cfg = RunConfig(task="factscore", n=3, m=2, limit=None, kernel="embedding", bootstrap=0,
                    methods=["c3"], out=tmp_path / "run", cache=tmp_path / "cache.sqlite",
                    claims=ClaimsConfig(methods=["frequency", "claim_c3"]))
    result = run(cfg, model=ScriptedModel(no_prefix), embedder=bow_embedder,
                 task=_many_bios(tmp_path, 4), show_progress=False)
    assert result.items == [] and result.stats["items_dropped_without_perturbations"] == 4
    assert result.claims is not None and result.claims.items == []
    why = ("No answer was split into claims: no item reached the claim stage (4 dropped "
           "without perturbations: the writer gave no usable prefix, see perturbations.jsonl).")
    md = (cfg.out / "report.md").read_text()
    section = md.split("## Claims")[1].split("\n## ")[0]
    assert why in section and "No claim is labelled" not in section and "nan" not in section
    html = (cfg.out / "report.html").read_text()
    assert 'id=claims' in html and f"<p class=note>{why}</p>" in html


def test_judge_only_labels_without_a_knowledge_folder(tmp_path, bow_embedder):
    """``claims.judge_labels`` (issue 33 item 4): with no knowledge folder the grader is
    asked from its own knowledge whether each claim is true of the entity; the labels
    are named judge-only in the stats and the report; planned, counted and cached."""
    from credo.api import dry_run, run
    from credo.plan.claims import judge_label_messages

    names = tmp_path / "people.txt"
    names.write_text("Person 1\nPerson 2\n", encoding="utf-8")
    task = load_factscore_task(names)  # no knowledge folder

    def judged(messages, seed):
        if "from what you know" in messages[-1].content:
            return "True" if "1815" in messages[-1].content.split("Input:")[1] else "False"
        return many_respond(messages, seed)

    cfg = RunConfig(task="factscore", n=3, m=2, limit=None, kernel="embedding", bootstrap=0,
                    methods=["self_consistency"], out=tmp_path / "run",
                    cache=tmp_path / "cache.sqlite",
                    claims=ClaimsConfig(methods=["frequency"], judge_labels=True))
    off = run(cfg.model_copy(update={"claims": ClaimsConfig(methods=["frequency"]),
                                     "out": tmp_path / "off"}),
              model=ScriptedModel(judged), embedder=bow_embedder, task=task,
              show_progress=False)
    assert off.claims.stats["claim_labels"] == "none"
    est = dry_run(cfg, model=ScriptedModel(judged), embedder=bow_embedder, task=task)
    planned = {s.stage: s.requests for s in est.stages}[LABEL_STAGE]
    model = ScriptedModel(judged)
    result = run(cfg, model=model, embedder=bow_embedder, task=task, show_progress=False)
    claims = [c for it in result.claims.items for c in it.claims]
    assert len(claims) == 4  # two sentences per bio
    assert [c.correct for c in claims] == ["1815" in c.text for c in claims]
    assert result.ledger["stages"][LABEL_STAGE]["requests"] == 4
    assert planned >= 2  # the dry run counts the stage on placeholder answers
    assert result.claims.stats["claim_labels"] == (
        f"judge-only: grader model {cfg.model}'s own knowledge, no knowledge source "
        "(2 of 2 answers)")
    assert "labels: judge-only" in (cfg.out / "report.md").read_text()
    msgs = judge_label_messages("Person 1", "Person 1 was born in 1815.")
    assert msgs[0].content == "Reply with one word: True or False."
    assert "Person 1 was born in 1815. True or False?" in msgs[1].content
    calls = model.calls
    run(cfg.model_copy(update={"out": tmp_path / "again"}), model=model,
        embedder=bow_embedder, task=task, show_progress=False)
    assert model.calls == calls  # every label came from the cache

"""Open-ended runs end to end on a scripted model: code, graded short answers, long form."""

import json
import math

import numpy as np
import pytest

from credo import RunConfig, c3, run, self_consistency
from credo.kernels.embedding import EmbeddingKernel
from credo.kernels.judge import JUDGE_SYSTEM_PROMPT, naive_comparisons
from credo.models.scripted import ScriptedModel
from credo.perturb.context import PROMPTS
from credo.tasks.base import Task
from credo.tasks.builtin import load_task
from credo.tasks.factual import GRADER_SYSTEM_PROMPT, load_simpleqa
from credo.tasks.longform import load_factscore_task

CONTEXTS = [
    "Programmers often review each other's code before it is merged.",
    "Many libraries document their functions with short examples.",
    "Unit tests are usually run automatically on every change.",
    "Some teams write the tests before they write the code.",
    "Readable code tends to use short, well-named functions.",
    "Historians keep archives of letters and old newspapers.",
]

SIGNATURE = "```python\ndef truncate_number(number: float) -> float:\n"
GOOD = SIGNATURE + "    return number % 1.0\n```"
ALSO_GOOD = SIGNATURE + "    return number - int(number)\n```"
BAD = SIGNATURE + "    return 0.0\n```"


def _judge_reply(user: str) -> str:
    a = user.split("Answer 1:\n", 1)[1].split("\n\nAnswer 2:", 1)[0]
    b = user.split("Answer 2:\n", 1)[1].split("\n\nAre Answer 1", 1)[0]
    if "int(number)" in a + b and "return 0.0" in a + b:
        return "maybe"  # unparsable: counted, read as not equivalent
    works = ("% 1.0" in a or "int(number)" in a) and ("% 1.0" in b or "int(number)" in b)
    return "Yes" if works else "No"


def code_respond(messages, seed):
    system, user = messages[0].content, messages[-1].content
    if system in PROMPTS.values():
        return CONTEXTS[seed % len(CONTEXTS)]
    if system == JUDGE_SYSTEM_PROMPT:
        return _judge_reply(user)
    perturbed = any(c in user for c in CONTEXTS)
    if "truncate_number" in user:
        return [GOOD, ALSO_GOOD, GOOD][seed % 3] if not perturbed else [GOOD, BAD][seed % 2]
    return "I cannot solve this."  # unparsable? no: the whole text is taken as code -> fails


@pytest.fixture
def humaneval_task():
    he = load_task("humaneval")
    return Task("humaneval", (he.items[2], he.items[0]), he.format, he.domain)


def _config(tmp_path, **kw):
    base = dict(task="humaneval", n=4, m=4, limit=None, out=tmp_path / "run", bootstrap=0,
                cache=tmp_path / "cache.sqlite")
    base.update(kw)
    return RunConfig(**base)


def test_humaneval_run_with_embedding_and_judge_kernels(tmp_path, bow_embedder, humaneval_task):
    cfg = _config(
        tmp_path,
        kernel="embedding",
        methods=["c3", "c3@judge", "self_consistency", "self_consistency@judge"],
    )
    model = ScriptedModel(code_respond)
    result = run(cfg, model=model, embedder=bow_embedder, task=humaneval_task, show_progress=False)
    by_id = {r.item.id: r for r in result.items}
    trunc = by_id["HumanEval/2"]

    # correctness from the sandboxed tests: GOOD and ALSO_GOOD pass
    expected = [1.0 if "return 0.0" not in s.text else 0.0 for s in trunc.original]
    assert list(trunc.correct) == expected and trunc.performance == np.mean(expected)
    assert by_id["HumanEval/0"].performance == 0.0

    # the embedding kernel's scores are C3 / SC with an EmbeddingKernel on the extracted code
    kern = EmbeddingKernel(bow_embedder)
    orig = [s.answer.value for s in trunc.original]
    pert = [s.answer.value for s in trunc.perturbed]
    assert trunc.scores["c3"] == pytest.approx(c3(orig, pert, kern))
    assert trunc.scores["self_consistency"] == pytest.approx(self_consistency(orig, kern))

    # the judge kernel, computed by hand from the scripted judge's rule
    def judged(xs, ys):
        K = np.zeros((len(xs), len(ys)))
        for i, x in enumerate(xs):
            for j, y in enumerate(ys):
                if x == y:
                    K[i, j] = 1.0
                else:
                    reply = _judge_reply(f"Answer 1:\n{x}\n\nAnswer 2:\n{y}\n\nAre Answer 1")
                    K[i, j] = float(reply == "Yes")
        return K

    assert trunc.scores["c3@judge"] == pytest.approx(c3(orig, pert, judged))
    assert trunc.scores["self_consistency@judge"] == pytest.approx(self_consistency(orig, judged))

    # judge calls: one per unique unordered pair of distinct answers, against the naive count
    stats = result.stats
    distinct = [len({s.answer.value for s in (*r.original, *r.perturbed)}) for r in result.items]
    assert stats["judge_pairs_unique"] == sum(u * (u - 1) // 2 for u in distinct) == 3
    assert stats["judge_comparisons_naive"] == 2 * naive_comparisons(4, 4)
    assert stats["judge_calls_generated"] == 3 and stats["judge_unparsable_verdicts"] == 1
    assert stats["code_samples_passing"] == sum(expected)

    metrics = json.loads((cfg.out / "metrics.json").read_text())
    assert set(metrics["methods"]) == set(cfg.methods)
    report = (cfg.out / "report.md").read_text()
    assert "judge pairs unique: 3" in report
    # multi-line gold code stays inside its table row: every item row has the header's cells
    items_table = report.split("## Items")[1].strip().splitlines()
    header_cells = items_table[0].count(" | ")
    rows = [line for line in items_table[2:] if line.startswith("| ")]
    assert len(rows) == len(result.items)
    assert all(line.replace("\\|", "").count(" | ") == header_cells for line in rows)

    # a rerun generates nothing: samples, perturbations and verdicts come from the cache
    again_model = ScriptedModel(code_respond)
    again = run(cfg, model=again_model, embedder=bow_embedder, task=humaneval_task,
                show_progress=False)
    assert again_model.samples == 0
    assert [r.scores for r in again.items] == [r.scores for r in result.items]
    assert again.stats["judge_calls_generated"] == 0 and again.stats["judge_calls_cached"] == 3


# --------------------------------------------------------------------------- SimpleQA-style


def qa_respond(messages, seed):
    system, user = messages[0].content, messages[-1].content
    if system in PROMPTS.values():
        return ["Maps of the world show many countries.", "Old atlases list capitals.",
                "Quiz shows ask about geography.", "Travel guides describe famous cities.",
                "Encyclopedias have articles on every country."][seed % 5]
    if system == GRADER_SYSTEM_PROMPT:
        if "Predicted answer: Answer: Sydney" in user:
            return "B"
        if "Predicted answer: I don't know" in user:
            return "C"
        if "Predicted answer: Answer: The capital is Canberra, ACT" in user:
            return "A"
        return "Well, hmm."  # unparsable grade
    if system == JUDGE_SYSTEM_PROMPT:
        return "Yes" if "canberra" in user and "capital is canberra act" in user else "No"
    if "Australia" in user:
        return ["Answer: Canberra", "Answer: Sydney", "Answer: The capital is Canberra, ACT",
                "I don't know"][seed % 4]
    if "Apollo" in user:
        return "Answer: 1969"
    return "Answer: Charles Darwin"


def test_simpleqa_graded_run(tmp_path, bow_embedder):
    task = load_simpleqa(
        __import__("pathlib").Path(__file__).parent / "data" / "simpleqa_layout3.csv"
    )
    cfg = RunConfig(task="simpleqa", n=8, m=4, limit=None, kernel="judge", bootstrap=0,
                    methods=["c3", "c3@embedding", "self_consistency"],
                    out=tmp_path / "run", cache=tmp_path / "cache.sqlite")
    model = ScriptedModel(qa_respond)
    result = run(cfg, model=model, embedder=bow_embedder, task=task, show_progress=False)
    by_id = {r.item.id: r for r in result.items}
    aus = by_id["simpleqa-1"]
    # exact match (free), judged A, judged B, "I don't know" -> NOT_ATTEMPTED via judge C
    want = {"Answer: Canberra": 1.0, "Answer: Sydney": 0.0,
            "Answer: The capital is Canberra, ACT": 1.0, "I don't know": 0.0}
    assert list(aus.correct) == [want[s.text] for s in aus.original]
    assert by_id["simpleqa-2"].performance == 1.0  # "1969": exact match, no judge call
    assert by_id["simpleqa-0"].performance == 0.0  # unparsable grade counts as not correct
    s = result.stats
    assert s["graded_unparsable"] == 8 and s["graded_not_attempted"] == 2
    assert s["grading_decided_without_judge"] == 2  # "canberra" and "1969"
    assert s["grading_calls_generated"] == 4  # Sydney, Canberra ACT, I don't know, Darwin
    assert np.isfinite(result.metrics["c3"]["ece"])


def test_simpleqa_grader_model_is_separate_from_the_judge(tmp_path, bow_embedder, monkeypatch):
    """``RunConfig.grader`` grades; the judge kernel's verdicts still come from ``judge``."""
    from credo.config import JudgeConfig
    from credo.models import registry

    seen: list[str] = []

    def strict_grader(messages, seed):
        seen.append(messages[0].content)
        return "B"  # a grader that finds every non-identical answer incorrect

    grader = ScriptedModel(strict_grader)
    monkeypatch.setitem(registry._PREFIXES, "test-grader", lambda rest, **o: grader)
    task = load_simpleqa(
        __import__("pathlib").Path(__file__).parent / "data" / "simpleqa_layout3.csv"
    )
    cfg = RunConfig(task="simpleqa", n=8, m=4, limit=None, kernel="judge", bootstrap=0,
                    methods=["c3", "self_consistency"], grader=JudgeConfig(model="test-grader:x"),
                    out=tmp_path / "run", cache=tmp_path / "cache.sqlite")
    main_seen: list[str] = []

    def main_respond(messages, seed):
        main_seen.append(messages[0].content)
        return qa_respond(messages, seed)

    result = run(cfg, model=ScriptedModel(main_respond), embedder=bow_embedder, task=task,
                 show_progress=False)
    aus = {r.item.id: r for r in result.items}["simpleqa-1"]
    # only the exact match is correct: "Canberra, ACT" was judged A before, B by this grader
    want = {"Answer: Canberra": 1.0}
    assert list(aus.correct) == [want.get(s.text, 0.0) for s in aus.original]
    assert seen and set(seen) == {GRADER_SYSTEM_PROMPT}
    assert GRADER_SYSTEM_PROMPT not in main_seen and JUDGE_SYSTEM_PROMPT in main_seen
    assert result.stats["grading_calls_generated"] == len(seen) == 4
    assert grader.closed  # a grader the run loaded is closed by the run


# --------------------------------------------------------------------------- FActScore


def bio_respond(messages, seed):
    system, user = messages[0].content, messages[-1].content
    if system in PROMPTS.values():
        return ["Biographies often start with birthplaces.", "Many people write memoirs.",
                "Libraries keep records of famous lives.", "Historians study letters."][seed % 4]
    if system.startswith("Reply with one word: True or False"):
        return "True" if ("1815" in user.split("Input:")[1] and "1815" in user) else "False"
    return ["Ada Lovelace was born in 1815. She was a mathematician in London.",
            "Ada Lovelace was born in 1815. She wrote notes on the Analytical Engine."][seed % 2]


def test_factscore_without_knowledge_reports_correctness_unavailable(tmp_path, bow_embedder):
    names = tmp_path / "entities.txt"
    names.write_text("Ada Lovelace\n", encoding="utf-8")
    task = load_factscore_task(names)
    cfg = RunConfig(task="factscore", n=3, m=3, limit=None, kernel="embedding", bootstrap=0,
                    methods=["c3", "self_consistency"], out=tmp_path / "run",
                    cache=tmp_path / "cache.sqlite")
    result = run(cfg, model=ScriptedModel(bio_respond), embedder=bow_embedder, task=task,
                 show_progress=False)
    r = result.items[0]
    assert math.isnan(r.performance) and all(math.isnan(c) for c in r.correct)
    assert 0.0 <= r.scores["c3"] <= 1.0
    assert result.metrics == {}  # no correctness known: scored, not evaluated (issue 23)
    report = (cfg.out / "report.md").read_text()
    assert "nothing is evaluated" in report
    assert "unavailable for 1 of 1 items: no knowledge source" in report
    assert "accuracy (mean p̄ over items): n/a" in report
    # unknown correctness is null in strict JSON, never a NaN token or an invented label
    def strict(text):
        return json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON {c}"))

    samples = [strict(line) for line in (cfg.out / "samples.jsonl").read_text().splitlines()]
    assert samples and all(s["correct"] is None for s in samples)
    (row,) = [strict(line) for line in (cfg.out / "scores.jsonl").read_text().splitlines()]
    assert row["p_bar"] is None and row["label"] is None
    strict((cfg.out / "metrics.json").read_text())


def test_factscore_with_knowledge_scores_supported_claims(tmp_path, bow_embedder):
    names = tmp_path / "entities.txt"
    names.write_text("Ada Lovelace\n", encoding="utf-8")
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "Ada Lovelace.txt").write_text("Ada Lovelace was born in 1815.", encoding="utf-8")
    task = load_factscore_task(names, kb)
    cfg = RunConfig(task="factscore", n=4, m=3, limit=None, kernel="embedding", bootstrap=0,
                    methods=["c3"], out=tmp_path / "run", cache=tmp_path / "cache.sqlite")
    result = run(cfg, model=ScriptedModel(bio_respond), embedder=bow_embedder, task=task,
                 show_progress=False)
    r = result.items[0]
    assert list(r.correct) == [0.5, 0.5, 0.5, 0.5]  # one of two sentences supported
    assert r.performance == 0.5
    assert result.stats["factscore_claims_checked"] == 3  # three distinct sentences


def test_grader_and_judge_with_one_spec_share_one_model(tmp_path, bow_embedder, monkeypatch):
    from credo.config import JudgeConfig
    from credo.models import registry

    loads: list[ScriptedModel] = []

    def factory(rest, **options):
        loads.append(ScriptedModel(lambda messages, seed: "A" if "Grade" in
                                   messages[-1].content else "Yes"))
        return loads[-1]

    monkeypatch.setitem(registry._PREFIXES, "test-shared", factory)
    task = load_simpleqa(
        __import__("pathlib").Path(__file__).parent / "data" / "simpleqa_layout3.csv"
    )
    cfg = RunConfig(task="simpleqa", n=4, m=4, limit=None, kernel="judge", bootstrap=0,
                    methods=["c3"], judge=JudgeConfig(model="test-shared:x"),
                    grader=JudgeConfig(model="test-shared:x"),
                    out=tmp_path / "run", cache=tmp_path / "cache.sqlite")
    result = run(cfg, model=ScriptedModel(qa_respond), embedder=bow_embedder, task=task,
                 show_progress=False)
    assert len(loads) == 1 and loads[0].closed  # one server for verdicts and grades
    assert result.stats["judge_calls_generated"] > 0 and result.stats["grading_calls_generated"] > 0

"""The 002 / 000 App. J baselines: formulas on constructed samples and logprobs, and the
runner's shared-generation plan (every set generated once, reused, never regenerated)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

import credo
from credo import RunConfig, run
from credo.config import BaselineConfig
from credo.evaluate.metrics import ece_discrete
from credo.methods.answer_consistency import ac_levels
from credo.methods.base import APRICOT, LABEL, NLI, ORIGINAL, ItemSamples, Sample
from credo.methods.ccp import ccp_alternatives, ccp_sequence, score_ccp
from credo.methods.label_prob import label_probabilities
from credo.methods.p_true import p_true_from_logprobs
from credo.models.scripted import ScriptedModel
from credo.perturb.paraphrase import PARAPHRASE_SYSTEM_PROMPT, clean_paraphrase
from credo.tasks.answers import Answer
from credo.tasks.base import AnswerFormat, Item, Task
from credo.tasks.followups import (
    APRICOT_SYSTEM,
    LABEL_SYSTEM,
    NLI_SYSTEM,
    P_TRUE_SYSTEM,
    VERBALIZED_PROMPT,
    parse_confidence,
    parse_nli,
    parse_verdict,
)
from credo.types import Capabilities, TokenLogprob

ln = math.log


# ----------------------------------------------------------------- Answer Consistency


def test_answer_consistency_by_hand() -> None:
    # 002 App. A.11.2: AC_i = 1/(n-1) Σ_{j≠i} 1[y_j = y_i]; unparsable -> 0.
    assert credo.answer_consistency(["3", "3", "4", None]) == [1 / 3, 1 / 3, 0.0, 0.0]
    assert credo.answer_consistency(["a"] * 5) == [1.0] * 5
    assert credo.answer_consistency([None, None]) == [0.0, 0.0]  # None matches nothing
    with pytest.raises(ValueError, match="at least 2"):
        credo.answer_consistency(["3"])
    assert ac_levels(10) == tuple(j / 9 for j in range(10))


def test_answer_consistency_mean_is_self_consistency_when_all_parse() -> None:
    answers = ["1", "2", "2", "3", "2", "1"]
    assert np.mean(credo.answer_consistency(answers)) == pytest.approx(
        credo.self_consistency(answers)
    )


# ----------------------------------------------------------------- reply parsers


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("Probability: 0.85", 0.85),
        ("probability = .7", 0.7),
        ("0.9", 0.9),
        ("I'd say 80%", 0.8),
        ("Confidence: 1", 1.0),
        ("The probability that your answer is correct is 0.00000", 0.0),
        ("Probability: 95 %", 0.95),
        ("Probability: 1.5", None),  # outside [0, 1]
        ("between 0.3 and 0.6", None),  # two numbers, no marker
        ("I am quite sure.", None),
        ("", None),
    ],
)
def test_parse_confidence(reply: str, expected: float | None) -> None:
    assert parse_confidence(reply) == expected


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("The mean is 4. Verdict: correct", True),
        ("Verdict: incorrect.", False),
        ("Verdict: correct ... on reflection, Verdict: **incorrect**", False),
        ("It matches.\nCorrect", True),
        ("The option seems right", None),
    ],
)
def test_parse_verdict(reply: str, expected: bool | None) -> None:
    assert parse_verdict(reply) == expected


def test_parse_nli() -> None:
    assert parse_nli("Entailment.") == "entail"
    assert parse_nli(" contradiction") == "contradict"
    assert parse_nli("Neutral") == "neutral"
    assert parse_nli("B follows") is None


# ----------------------------------------------------------------- logprob methods


def test_p_true_normalises_over_the_two_labels() -> None:
    lps = (TokenLogprob(" A", ln(0.6), ((" A", ln(0.6)), ("B", ln(0.2)), ("(A", ln(0.1)))),)
    assert p_true_from_logprobs(lps) == pytest.approx(0.7 / 0.9)
    assert p_true_from_logprobs((TokenLogprob("Yes", ln(0.9), (("Yes", ln(0.9)),)),)) is None
    assert p_true_from_logprobs(None) is None


def test_label_probability_and_task_comprehension() -> None:
    # Letter token at position 1 (after "Answer"): mass 0.9 over letters, B most likely.
    lps = (
        TokenLogprob("Answer", ln(0.99), (("Answer", ln(0.99)),)),
        TokenLogprob(
            " B", ln(0.5), ((" B", ln(0.5)), ("A", ln(0.3)), (" C", ln(0.1)), ("x", ln(0.1)))
        ),
    )
    lp = label_probabilities(lps, n_choices=4)
    assert lp is not None and lp.position == 1
    assert lp.mass == pytest.approx(0.9)
    assert lp.top == ("B", pytest.approx(0.5 / 0.9))
    assert lp.normalised["D"] == 0.0
    assert label_probabilities((TokenLogprob("Hmm", 0.0),), 4) is None


def test_ccp_by_hand() -> None:
    lps = (
        TokenLogprob("Answer", ln(0.9), (("Answer", ln(0.9)), ("answer", ln(0.1)))),
        TokenLogprob(
            " 12",
            ln(0.5),
            ((" 12", ln(0.5)), (" 14", ln(0.3)), (" twelve", ln(0.15)), (" 9", ln(0.02))),
        ),
    )
    alts = list(ccp_alternatives(lps, min_prob=0.05))
    # "answer" is the same word (entails without a judge); " 9" is below the floor.
    assert [(p, r, a) for p, r, _, _, a in alts] == [(1, 1, " 14"), (1, 2, " twelve")]
    assert alts[0][2] == "Answer"
    verdicts = {(1, 1): "contradict", (1, 2): "entail"}
    # Token 0: (0.9 + 0.1) / 1.0 = 1. Token 1: (0.5 + 0.15) / (0.5 + 0.15 + 0.3).
    assert ccp_sequence(lps, verdicts) == pytest.approx(0.65 / 0.95)
    # Neutral or unparsable verdicts drop the alternative from both sums.
    assert ccp_sequence(lps, {(1, 1): "neutral", (1, 2): None}) == pytest.approx(1.0)
    samples = ItemSamples(
        "q",
        {
            ORIGINAL: (Sample("Answer 12", Answer("12", "Answer 12"), lps),),
            NLI: (
                Sample("contradict", Answer("contradict", ""), None, (0, 1, 1)),
                Sample("entail", Answer("entail", ""), None, (0, 1, 2)),
            ),
        },
    )
    score = score_ccp(samples, None)
    assert score.responses == (pytest.approx(0.65 / 0.95),)


# ----------------------------------------------------------------- paraphrases


def test_clean_paraphrase_keeps_the_numbers() -> None:
    q = "Tom has 2 apples and buys 3 more. How many apples does he have?"
    assert clean_paraphrase("Paraphrase: If Tom owns 2 apples and gets 3 more, how many?", q)
    assert clean_paraphrase("If Tom owns 2 apples and gets 4 more, how many?", q) is None
    assert clean_paraphrase(q, q) is None
    assert clean_paraphrase("   ", q) is None


# ----------------------------------------------------------------- the runner

MC = Task(
    "toy_mc",
    (
        Item("sure", "Which is a prime number?", "B", ("4", "5", "6", "8")),
        Item("torn", "Which is the median of 1, 2, 3?", "B", ("1", "2", "3", "4")),
        Item("wrong", "Which variance estimator divides by n - 1?", "C", ("a", "b", "c", "d")),
    ),
    AnswerFormat.CHOICE,
    domain="statistics",
)

NUM = Task(
    "toy_num",
    (
        Item("easy", "Tom has 2 apples and gets 3 more. How many apples?", "5"),
        Item("coin", "A coin question with answer 3 or 4.", "3"),
    ),
    AnswerFormat.NUMBER,
    domain="arithmetic reasoning",
)

CONTEXTS = [
    "Farmers at the market often compare their harvests with each other.",
    "Children in many schools practise sums with small wooden blocks.",
    "Shopkeepers keep ledgers to track what they sell every day.",
]


def _answer_for(user: str, seed: int) -> str:
    if "prime" in user or "Tom" in user:
        return "Answer: B" if "prime" in user else "Answer: 5"
    if "median" in user:
        return "Answer: " + "BC"[seed % 2]
    if "coin" in user:
        return f"Answer: {3 + seed % 2}"
    return "Answer: A"


def responder(messages, seed):
    system, user = messages[0].content, messages[-1].content
    if system.startswith("You write one"):  # the writer, any prompt version
        return CONTEXTS[seed % len(CONTEXTS)]
    if system == PARAPHRASE_SYSTEM_PROMPT:
        return f"Put differently (variant {'abcd'[seed % 4]}): {user}"
    if system == APRICOT_SYSTEM:
        gold_like = "Option to judge: B" in user
        return "Verdict: correct" if gold_like or seed % 3 == 0 else "Verdict: incorrect"
    if system == LABEL_SYSTEM:
        return "A" if "variance" in user else "B"
    if system == P_TRUE_SYSTEM:
        return "A"
    if system == NLI_SYSTEM:
        return "contradict"
    if user == VERBALIZED_PROMPT:
        answer = messages[-2].content
        return "Probability: 0.9" if answer.endswith("B") else "no idea"
    return _answer_for(user, seed)


def logprobs_for(messages, seed):
    system, user = messages[0].content, messages[-1].content
    if system == LABEL_SYSTEM:
        top = "A" if "variance" in user else "B"
        other = "C" if top == "A" else "A"
        return (TokenLogprob(top, ln(0.7), ((top, ln(0.7)), (other, ln(0.2)), ("x", ln(0.1)))),)
    if system == P_TRUE_SYSTEM:
        return (TokenLogprob("A", ln(0.8), (("A", ln(0.8)), ("B", ln(0.2)))),)
    if system == NLI_SYSTEM or user == VERBALIZED_PROMPT:
        return None
    text = responder(messages, seed)
    head, _, tail = text.partition(" ")
    return (
        TokenLogprob(head, ln(0.95), ((head, ln(0.95)),)),
        TokenLogprob(" " + tail, ln(0.6), ((" " + tail, ln(0.6)), (" Z", ln(0.4)))),
    )


ALL = [
    "c3",
    "self_consistency",
    "verbalized",
    "p_true",
    "label_prob",
    "answer_consistency",
    "paraphrase",
    "ccp",
]


def _config(tmp_path, methods=ALL, **kw) -> RunConfig:
    return RunConfig(
        task="toy",
        n=4,
        m=3,
        limit=None,
        methods=methods,
        out=tmp_path / "run",
        cache=tmp_path / "cache.sqlite",
        bootstrap=0,
        baselines=BaselineConfig(paraphrases=3, apricot_samples=3, **kw),
    )


def test_every_method_on_shared_generations(tmp_path, bow_embedder) -> None:
    model = ScriptedModel(responder, logprobs_fn=logprobs_for)
    res = run(_config(tmp_path), model=model, embedder=bow_embedder, task=MC, show_progress=False)
    by = {r.item.id: r for r in res.items}

    # Label probability: 0.7 / 0.9 on the top letter; task comprehension = raw mass 0.9.
    assert by["sure"].scores["label_prob"] == pytest.approx(0.7 / 0.9)
    assert res.metrics["label_prob"]["label_mass"] == pytest.approx(0.9)
    assert by["wrong"].set_correct[LABEL] == (False,)
    # P(True) = 0.8 for every asked sample.
    assert by["torn"].method_scores["p_true"].responses == pytest.approx((0.8,) * 4)
    # Verbalized: 0.9 after "B" answers, unparsable (None, not 0) after "C".
    torn = by["torn"]
    conf = torn.method_scores["verbalized"].responses
    for s, c in zip(torn.original, conf, strict=True):
        assert c == (0.9 if s.answer.value == "B" else None)
    # APriCoT Answer Consistency: per option, agreement among its 3 verdicts.
    ac = by["sure"].method_scores["answer_consistency"]
    assert ac.of == APRICOT and len(ac.responses) == 12
    verdicts = [s.answer.value for s in by["sure"].sets[APRICOT]]
    for o in range(4):
        chunk = verdicts[3 * o : 3 * o + 3]
        assert list(ac.responses[3 * o : 3 * o + 3]) == credo.answer_consistency(chunk)
    # An APriCoT verdict is right when it matches whether the option is gold.
    for s, ok in zip(by["sure"].sets[APRICOT], by["sure"].set_correct[APRICOT], strict=True):
        assert ok == (s.answer.value == (s.ref[0] == 1))
    # CCP: every judged alternative contradicts -> 0.6 / (0.6 + 0.4) per sample.
    assert by["sure"].scores["ccp"] == pytest.approx(0.6)
    # Paraphrase consistency reads the paraphrased answers only.
    assert by["sure"].scores["paraphrase"] == 1.0
    assert by["torn"].scores["paraphrase"] == pytest.approx(
        credo.self_consistency(
            torn.sets["paraphrased"] and [s.key for s in torn.sets["paraphrased"]]
        )
    )

    # Response-level AUROC of P(True)-like methods comes from sklearn on the pooled pairs.
    pooled_s, pooled_c = [], []
    for r in res.items:
        for v, ok in zip(
            r.method_scores["verbalized"].responses, r.set_correct[ORIGINAL], strict=True
        ):
            if v is not None:
                pooled_s.append(v)
                pooled_c.append(int(ok))
    rm = res.response_metrics["verbalized"]
    assert rm["n_responses"] == len(pooled_s)
    if len(set(pooled_c)) == 2:
        assert rm["auroc"] == pytest.approx(roc_auc_score(pooled_c, pooled_s))
    # Answer Consistency's response ECE uses one bin per discrete level (002 A.11.3).
    s_ac, c_ac = [], []
    for r in res.items:
        sc = r.method_scores["answer_consistency"]
        s_ac += list(sc.responses)
        c_ac += [float(x) for x in r.set_correct[APRICOT]]
    assert res.response_metrics["answer_consistency"]["ece"] == pytest.approx(
        ece_discrete(s_ac, c_ac, ac_levels(3))
    )


def test_arithmetic_answer_consistency_and_unavailable_methods(tmp_path, bow_embedder) -> None:
    # A backend without logprobs: the logprob methods are "not available", nothing crashes.
    model = ScriptedModel(responder)
    assert not model.capabilities.logprobs
    res = run(_config(tmp_path), model=model, embedder=bow_embedder, task=NUM, show_progress=False)
    for name in ("p_true", "ccp", "label_prob"):
        assert all(math.isnan(r.scores[name]) for r in res.items)
        assert name in res.unavailable
    assert "backend" in res.unavailable["p_true"]
    assert "choice" in res.unavailable["label_prob"]
    coin = next(r for r in res.items if r.item.id == "coin")
    answers = [s.answer.value for s in coin.original]
    assert list(coin.method_scores["answer_consistency"].responses) == credo.answer_consistency(
        answers
    )
    assert (tmp_path / "run" / "report.md").read_text().count("not available") >= 1


class Recorder(ScriptedModel):
    """Records the system prompt of every sample it draws."""

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.kinds: list[str] = []

    def sample(self, request, j):
        self.kinds.append(request.messages[-1].content[:20])
        return super().sample(request, j)


def test_adding_methods_generates_only_what_they_newly_need(tmp_path, bow_embedder) -> None:
    first = Recorder(responder, logprobs_fn=logprobs_for)
    run(
        _config(tmp_path, ["self_consistency"]),
        model=first,
        embedder=bow_embedder,
        task=MC,
        show_progress=False,
    )
    assert first.samples == 3 * 4  # n originals per item

    second = Recorder(responder, logprobs_fn=logprobs_for)
    res = run(
        _config(tmp_path, ["self_consistency", "verbalized", "p_true", "ccp"]),
        model=second,
        embedder=bow_embedder,
        task=MC,
        show_progress=False,
    )
    # No original sample again: only follow-ups, one per distinct sample text per item,
    # and NLI verdicts for the one alternative of each distinct text of the whole run
    # (the NLI prompt holds only the two statements, so items share it).
    assert all(k != q.question[:20] for k in second.kinds for q in MC.items)
    distinct = sum(len({s.text for s in r.original}) for r in res.items)
    texts = {s.text for r in res.items for s in r.original}
    assert second.samples == 2 * distinct + len(texts)
    assert res.stats["cached_samples"] >= 12

    third = Recorder(responder, logprobs_fn=logprobs_for)
    run(
        _config(tmp_path, ["self_consistency", "verbalized", "p_true", "ccp"]),
        model=third,
        embedder=bow_embedder,
        task=MC,
        show_progress=False,
    )
    assert third.samples == 0


def test_followups_scope(tmp_path, bow_embedder) -> None:
    model = ScriptedModel(responder, logprobs_fn=logprobs_for)
    res = run(
        _config(tmp_path, ["p_true", "ccp"], followups=2),
        model=model,
        embedder=bow_embedder,
        task=MC,
        show_progress=False,
    )
    for r in res.items:
        assert r.method_scores["p_true"].responses[2:] == (None, None)
        assert r.method_scores["ccp"].responses[2:] == (None, None)


def test_scripted_backend_without_logprob_capability_flag(tmp_path, bow_embedder) -> None:
    caps = Capabilities(logprobs=False, seeded=True, parallel_samples=True)
    model = ScriptedModel(responder, logprobs_fn=logprobs_for, capabilities=caps)
    res = run(
        _config(tmp_path, ["label_prob"]),
        model=model,
        embedder=bow_embedder,
        task=MC,
        show_progress=False,
    )
    assert all(math.isnan(r.scores["label_prob"]) for r in res.items)
    assert model.samples == 3 * 4  # only the originals: the label set is not planned

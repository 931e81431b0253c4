"""credo's scores in inspect_ai's own results: an epoch reducer and metrics, registered
in inspect's registry under credo's namespace when inspect loads credo's ``inspect_ai``
entry point (or when this module is imported).

Reducers (``inspect eval ... --epochs 5 --epochs-reducer credo/self_consistency``, or
``Task(epochs=Epochs(5, "credo/self_consistency"))``): each sample's epochs reduced to
one :class:`~inspect_ai.scorer.Score` whose ``value`` is credo's score of the epochs'
answers (``credo/self_consistency``; ``credo/semantic_entropy``: the confidence
1 − SE / ln K), whose ``answer`` is the answer credo gives (the commonest), and whose
``metadata["credo"]`` holds the method, the score, the answer and ``correct``: the mean
of the epochs' values as inspect reads them (C = 1, I = 0), credo's per-item
performance p̄. The scorer's metrics then read credo's score (``accuracy`` under
``credo/self_consistency`` is the mean self-consistency), beside the metrics of any
other reducer (``Epochs(5, ["mean", "credo/self_consistency"])``).

Metrics, for a scorer's or a task's ``metrics=[...]``:

* ``credo/self_consistency()`` and ``credo/semantic_entropy()``: the mean over samples
  of credo's score of each sample's epochs, whatever the reducer (they read the
  unreduced scores);
* ``credo/accept_rate(certificate=PATH)``: the share of samples whose credo score a
  certificate made by ``credo certify`` accepts (the score at or above its threshold and
  an answer to give), read from a credo reducer's scores for the certificate's method
  (NaN under another reducer). The metric applies the threshold; that the eval is the
  task and model the certificate was made on is yours to keep (certify a ``credo
  score`` of such a log).

Each epoch's answer is what its scorer extracted (``Score.answer``), normalised as
``credo score`` normalises a log's answers under its answer format (``answer_format``,
default ``short_text``: SQuAD's normalisation of case, punctuation and articles); an
epoch without one matches no other, so the reduced score of a sample equals the score
``credo score --format answer_format`` gives its item (where the scorer extracted an
answer: ``credo score`` falls back on the completion, which a reducer does not see).
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any, TypeVar

from inspect_ai.scorer import (
    Metric,
    SampleScore,
    Score,
    ScoreReducer,
    metric,
    score_reducer,
    value_to_float,
)

from credo.integrations import SCORES, modal_answer, question_score
from credo.tasks.answers import canonical_answer
from credo.tasks.base import AnswerFormat

__all__ = [
    "accept_rate",
    "self_consistency",
    "self_consistency_metric",
    "semantic_entropy",
    "semantic_entropy_metric",
]

NAMESPACE = "credo"
"""The registry namespace: ``credo/<name>`` (the entry point's name)."""

_as_float = value_to_float()

F = TypeVar("F", bound=Callable[..., Any])


def _reducer(method: str, answer_format: str) -> ScoreReducer:
    fmt = _format(answer_format)

    def reduce(scores: list[Score]) -> Score:
        answers = [epoch_answer(s, fmt) for s in scores]
        value = question_score(method, answers)
        answer = modal_answer(answers)
        correct = [_as_float(s.value) for s in scores]
        p_bar = sum(correct) / len(correct) if correct else math.nan
        return Score(
            value=value, answer=None if answer is None else str(answer),
            explanation=f"credo {method} of {len(scores)} epochs",
            metadata={NAMESPACE: {"method": method, "score": value, "answer": answer,
                                  "correct": p_bar, "epochs": len(scores)}})

    return reduce


def _as_credos(register: Callable[[F], F]) -> Callable[[F], F]:
    """inspect's registering decorator ``register``, its result keeping the function's
    name, module and docstring (inspect's wrapper has none of its own), so that the
    object inspect registers is documented as credo's."""

    def wrap(fn: F) -> F:
        return functools.update_wrapper(register(fn), fn)

    return wrap


@_as_credos(score_reducer(name=f"{NAMESPACE}/self_consistency"))
def self_consistency(answer_format: str = "short_text") -> ScoreReducer:
    """Each sample's epochs reduced to credo's self-consistency of their answers: the
    share of pairs of epochs that agree (Wu et al. 2026, App. J eq. 2); the answers
    compared as ``credo score --format answer_format`` compares them."""
    return _reducer("self_consistency", answer_format)


@_as_credos(score_reducer(name=f"{NAMESPACE}/semantic_entropy"))
def semantic_entropy(answer_format: str = "short_text") -> ScoreReducer:
    """Each sample's epochs reduced to credo's semantic-entropy confidence of their
    answers, 1 − SE / ln K (Farquhar et al. 2024); the answers compared as in
    :func:`self_consistency`."""
    return _reducer("semantic_entropy", answer_format)


def epoch_answer(score: Score, fmt: AnswerFormat = AnswerFormat.SHORT_TEXT) -> Hashable | None:
    """One epoch's answer: its scorer's ``answer`` in the normalised form of answer
    format ``fmt`` (:func:`~credo.tasks.answers.canonical_answer`, as ``credo score``
    reads a log's answers: short text by SQuAD's normalisation); None when it gave none
    or the format cannot read it."""
    answer = score.answer
    if isinstance(answer, str) and answer.strip():
        return canonical_answer(answer.strip(), fmt)
    return None


def _format(answer_format: str) -> AnswerFormat:
    try:
        return AnswerFormat(answer_format)
    except ValueError:
        known = ", ".join(f.value for f in AnswerFormat)
        raise ValueError(f"answer_format {answer_format!r}: one of {known}") from None


def _mean_over_samples(method: str, answer_format: str) -> Metric:
    fmt = _format(answer_format)

    def compute(scores: list[SampleScore]) -> float:
        by_sample: dict[Any, list[Hashable | None]] = defaultdict(list)
        for s in scores:
            by_sample[s.sample_id].append(epoch_answer(s.score, fmt))
        values = [question_score(method, answers) for answers in by_sample.values()]
        known = [v for v in values if not math.isnan(v)]
        return sum(known) / len(known) if known else math.nan

    return compute


@_as_credos(metric(name=f"{NAMESPACE}/self_consistency", scores="unreduced"))
def self_consistency_metric(answer_format: str = "short_text") -> Metric:
    """The mean over samples of credo's self-consistency of each sample's epochs (NaN
    when no sample has two); the answers compared as in :func:`self_consistency`."""
    return _mean_over_samples("self_consistency", answer_format)


@_as_credos(metric(name=f"{NAMESPACE}/semantic_entropy", scores="unreduced"))
def semantic_entropy_metric(answer_format: str = "short_text") -> Metric:
    """The mean over samples of credo's semantic-entropy confidence of each sample's
    epochs (NaN when no sample has two); the answers compared as in
    :func:`self_consistency`."""
    return _mean_over_samples("semantic_entropy", answer_format)


@_as_credos(metric(name=f"{NAMESPACE}/accept_rate", scores="reduced"))
def accept_rate(certificate: str) -> Metric:
    """The share of samples a certificate (a ``credo certify`` file at ``certificate``)
    accepts: a credo reducer's score for the certificate's method at or above its
    threshold, with an answer to give (:func:`credo.pipeline.certificate.accepts`).
    NaN under a reducer that is not credo's, or credo's for another method."""
    from credo.pipeline.certificate import accepts, read_run_certificate

    cert = read_run_certificate(Path(certificate))
    if cert.method not in SCORES:
        raise ValueError(f"{certificate}: certified for {cert.method!r}; credo's inspect "
                         f"reducers score {', '.join(SCORES)}")

    def compute(scores: list[SampleScore]) -> float:
        found = [s.score.metadata.get(NAMESPACE) if s.score.metadata else None
                 for s in scores]
        if not found or any(not isinstance(f, dict) or f.get("method") != cert.method
                            for f in found):
            return math.nan
        taken = [accepts(cert, float(f["score"]), f["answer"]) for f in found]
        return sum(taken) / len(taken)

    return compute

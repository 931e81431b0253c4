"""credo's scores in lm-evaluation-harness's own results table: metrics of a document's
``repeats``, named in a task's YAML.

A task with ``repeats: 5`` and a filter that keeps every response (a ``regex`` step with
no ``take_first``) names the metric by its import path, which lm-eval resolves::

    metric_list:
      - metric: exact_match          # over the 5 responses: the share that are right
        aggregation: mean
        higher_is_better: true
        ignore_case: true
      - metric: !function credo.integrations.lm_eval.self_consistency
        aggregation: mean
        higher_is_better: true
        ignore_case: true            # the same normalisation as exact_match's

and lm-eval's table gets a ``self_consistency`` row: the mean over documents of credo's
self-consistency of each document's answers. ``semantic_entropy`` is credo's
semantic-entropy confidence (1 − SE / ln K). Importing this module also registers both
in lm-eval's metric registry, as ``credo_self_consistency`` and
``credo_semantic_entropy``, for a task built in the same Python process.

The answers compared are what the filter kept of each response, normalised as the
task's ``exact_match`` compares (the options given to the metric: ``ignore_case``,
``ignore_punctuation``, ``ignore_numbers``, ``regexes_to_ignore``), a filter's fallback
(the regex filter's ``[invalid]``) being no answer: the answers ``credo score`` compares
on that task's samples file (:class:`~credo.tasks.lm_eval_scores.AnswerRule`), so the
table's value is the mean of the per-document scores ``credo score`` gives. Under a
filter that keeps one response per document (``take_first``), there is nothing to
compare: the value is NaN.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from lm_eval.api.registry import metric_registry, register_metric

from credo.integrations import question_score
from credo.tasks.lm_eval_scores import AnswerRule

__all__ = ["REGEX_FALLBACK", "self_consistency", "semantic_entropy"]

REGEX_FALLBACK = "[invalid]"
"""What lm-eval's ``regex`` filter keeps of a response where it finds nothing (its
default ``fallback``): no answer."""


def _answers(predictions: Sequence[Any], options: dict[str, Any]) -> list[str | None]:
    """One document's answers from lm-eval's ``predictions`` (the filter's output: a list
    of the repeats' kept values; a single value under ``take_first``)."""
    fallback = options.pop("fallback", REGEX_FALLBACK)
    rule = AnswerRule.of(None, "exact_match", options)
    rule = AnswerRule(frozenset({str(fallback).strip()}), rule.regexes_to_ignore,
                      rule.ignore_case, rule.ignore_punctuation, rule.ignore_numbers)
    kept = predictions[0] if len(predictions) == 1 else predictions
    if not isinstance(kept, list | tuple):
        return [rule(kept)]
    return [rule(k) for k in kept]


def _score(method: str, predictions: Sequence[Any], options: dict[str, Any]) -> float:
    answers = _answers(predictions, dict(options))
    return question_score(method, answers) if len(answers) >= 2 else math.nan


def self_consistency(references: Sequence[Any] | None = None,
                     predictions: Sequence[Any] = (), **options: Any) -> float:
    """credo's self-consistency of one document's repeated answers (lm-eval calls it
    with the document's ``references`` and ``predictions``; ``options`` are the metric's
    own keys in the YAML: the exact_match normalisation, ``fallback``)."""
    return _score("self_consistency", predictions, options)


def semantic_entropy(references: Sequence[Any] | None = None,
                     predictions: Sequence[Any] = (), **options: Any) -> float:
    """credo's semantic-entropy confidence (1 − SE / ln K) of one document's repeated
    answers (see :func:`self_consistency`)."""
    return _score("semantic_entropy", predictions, options)


def _register(name: str, fn: Any) -> None:
    """``fn`` in lm-eval's metric registry as ``name`` (higher is better, the mean over
    documents), unless a first import of this module did so."""
    import lm_eval.api.metrics  # noqa: F401 (fills the registry of aggregations: mean)

    if name not in metric_registry:
        register_metric(metric=name, higher_is_better=True, aggregation="mean")(fn)


_register("credo_self_consistency", self_consistency)
_register("credo_semantic_entropy", semantic_entropy)

"""The gateway's default limits, in one light module (the command line reads them to
build its help without importing the gateway)."""

from __future__ import annotations

__all__ = [
    "DEFAULT_DRAIN_TIMEOUT",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_JSON_DEPTH",
    "DEFAULT_MAX_QUESTION_CHARS",
]

DEFAULT_MAX_BODY_BYTES = 1 << 20
"""The largest request body taken by default: 1 MiB (``--max-body-bytes``); a larger one
gets 413 unread."""

DEFAULT_MAX_JSON_DEPTH = 32
"""The deepest JSON nesting taken by default (``--max-json-depth``); a chat request
needs about 5."""

DEFAULT_MAX_QUESTION_CHARS = 32_000
"""The longest question a Guard takes by default, in characters (about 8,000 tokens):
longer ones fail alone, before any sampling (``--max-question-chars``)."""

DEFAULT_DRAIN_TIMEOUT = 30.0
"""Seconds the questions in flight get to finish after SIGTERM (``--drain-timeout``)."""

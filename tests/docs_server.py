"""A loopback "toy model" for the documentation's examples (issue 30, item 3).

:class:`ToyModelServer` is a :class:`fault_server.FaultServer` (an OpenAI-compatible chat
server on 127.0.0.1, seeded, with the same usage counting) whose replies depend on the
prompt the way a small model's would, so a tutorial run against it has both right and
wrong answers and its tables mean something:

- a perturbation writer's prompt (credo's writer prompts) gets one of
  :data:`conftest.CONTEXTS`, chosen by the child's seed;
- a question holding ``A + B`` gets ``Answer: <A + B>`` with a probability that falls
  with the size of the numbers (0.95 for one-digit operands, 0.7 for two, 0.45 for three,
  0.25 beyond), with or without a context prefix (the prefixes are neutral: accuracy
  does not move), and otherwise a miss: off by 1 or 2 without a prefix, off by 10 or 100
  under one, so the wrong answers, and only they, depend on the context (what C3
  measures). Which answer is a hash of (the messages, the child's seed), so a rerun, a
  resumed run and lm-eval or inspect asking the same prompt get the same texts;
- anything else gets ``Answer: 18``.

Sample ``j`` of a call with seed ``s`` is the single call with seed ``s + j`` (credo's seed
contract), as with the FaultServer's default. With ``reseed=True`` the server plays one
that ignores seeds, as tools that repeat one request expect (lm-eval's ``repeats``,
inspect's ``epochs``): the k-th arrival of the same request body gets seed hash(body, k),
so the answers to a repeated request are fresh draws and yet the same on every run,
whatever the order of arrival of other requests.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from conftest import CONTEXTS
from credo.perturb.context import PROMPTS
from fault_server import FaultServer, _digest, _logprobs, _unit

__all__ = ["ToyModelServer", "toy_reply"]

_SUM = re.compile(r"(\d[\d,]*)\s*\+\s*(\d[\d,]*)")
_WRITERS = frozenset(PROMPTS.values())


def _accuracy(a: int, b: int) -> float:
    digits = len(str(max(a, b)))
    return {1: 0.95, 2: 0.7, 3: 0.45}.get(digits, 0.25)


def toy_reply(messages: Sequence[Mapping[str, Any]], seed: int) -> str:
    """What the toy model answers to ``messages`` with sample seed ``seed``."""
    contents = [str(m.get("content") or "") for m in messages]
    if contents and contents[0] in _WRITERS:
        return CONTEXTS[seed % len(CONTEXTS)]
    user = next((str(m.get("content") or "") for m in reversed(messages)
                 if m.get("role") == "user"), "")
    found = _SUM.findall(user)
    if not found:
        return "Answer: 18"
    a, b = (int(x.replace(",", "")) for x in found[-1])
    perturbed = any(c.rstrip(".") in user for c in CONTEXTS)
    if _unit("toy", messages, seed) < _accuracy(a, b):
        return f"Answer: {a + b}"
    misses = (10, 100, -10) if perturbed else (1, -1, 2)
    return f"Answer: {a + b + misses[_digest('miss', messages, seed) % 3]}"


class ToyModelServer(FaultServer):
    """A FaultServer that answers like a small model (see the module docstring)."""

    def __init__(self, *, reseed: bool = False, **options: Any) -> None:
        self.reseed = reseed
        self._arrivals: dict[int, int] = {}
        super().__init__(**options)

    def completion(self, body: Mapping[str, Any], fault: str | None = None) -> dict[str, Any]:
        messages = body.get("messages") or []
        n = int(body.get("n") or 1) if self.honour_n else 1
        seed = int(body.get("seed") or 0)
        if self.reseed:
            digest = _digest("body", {k: v for k, v in body.items() if k != "seed"})
            with self._lock:
                k = self._arrivals[digest] = self._arrivals.get(digest, -1) + 1
            seed = _digest("reseed", digest, k) % 2**31
        top = int(body.get("top_logprobs") or 0) if body.get("logprobs") and self.logprobs else -1
        max_tokens = body.get("max_tokens")
        choices, tokens = [], 0
        for j in range(n):
            text = toy_reply(messages, seed + j)
            words = [w if i == 0 else " " + w for i, w in enumerate(text.split(" "))]
            finish = "stop"
            if max_tokens is not None and len(words) > int(max_tokens):
                words, finish = words[: int(max_tokens)], "length"
            choice: dict[str, Any] = {"index": j, "finish_reason": finish, "logprobs": None,
                                      "message": {"role": "assistant", "content": "".join(words)}}
            if top >= 0:
                choice["logprobs"] = {"content": _logprobs(words, messages, seed + j, top)}
            choices.append(choice)
            tokens += len(words)
        prompt = sum(len(str(m.get("content") or "").split()) for m in messages)
        return {
            "id": f"chatcmpl-toy-{_digest('id', messages, seed) % 10**12}",
            "object": "chat.completion", "created": 0, "model": body.get("model", "toy"),
            "choices": choices,
            "usage": {"prompt_tokens": prompt, "completion_tokens": tokens,
                      "total_tokens": prompt + tokens},
        }

"""A deterministic backend for tests: answers come from a function or a table.

Sample ``j`` of a request is produced with seed ``seed + j`` (the seed contract of
:mod:`credo.models.base`), and depends only on the messages and that seed, so splitting
or resuming a request gives the same samples as one uninterrupted call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence

from credo.types import Capabilities, Generation, GenerationRequest, Message, TokenLogprob

Respond = Callable[[tuple[Message, ...], int], str]
"""``respond(messages, seed) -> text``."""

LogprobsFn = Callable[[tuple[Message, ...], int], tuple[TokenLogprob, ...] | None]
"""``logprobs_fn(messages, seed) -> token logprobs`` (or ``None``)."""

DEFAULT_CAPABILITIES = Capabilities(
    logprobs=False, max_top_logprobs=0, seeded=True, parallel_samples=True, notes=("scripted",)
)


def table_responder(table: Mapping[str, Sequence[str]], default: str | None = None) -> Respond:
    """A ``respond`` looking up the last user message: answer ``answers[seed % len]``.

    A message missing from the table gives ``default``, or a :class:`KeyError` naming it.
    """
    frozen = {key: tuple(answers) for key, answers in table.items()}
    for key, answers in frozen.items():
        if not answers:
            raise ValueError(f"table entry {key!r} has no answers")

    def respond(messages: tuple[Message, ...], seed: int) -> str:
        prompt = next((m.content for m in reversed(messages) if m.role == "user"), "")
        answers = frozen.get(prompt)
        if answers is None:
            if default is not None:
                return default
            raise KeyError(f"scripted model has no answers for user message {prompt!r}")
        return answers[seed % len(answers)]

    return respond


class ScriptedModel:
    """A :class:`~credo.models.base.Model` whose answers are scripted.

    ``respond`` is either a function ``(messages, seed) -> str`` or a mapping from the
    last user message to a list of answers (sample seed ``s`` gets ``answers[s % len]``).
    ``logprobs_fn`` supplies per-token logprobs when a request asks for them
    (``top_logprobs > 0``); without it the generations carry none. ``calls`` counts
    requests served and ``samples`` the samples produced, so tests can check caching.
    """

    def __init__(
        self,
        respond: Respond | Mapping[str, Sequence[str]],
        *,
        name: str = "scripted",
        logprobs_fn: LogprobsFn | None = None,
        capabilities: Capabilities | None = None,
    ) -> None:
        self._respond: Respond = (
            table_responder(respond) if isinstance(respond, Mapping) else respond
        )
        self.name = name
        self._logprobs_fn = logprobs_fn
        if capabilities is None:
            capabilities = (
                DEFAULT_CAPABILITIES
                if logprobs_fn is None
                else Capabilities(
                    logprobs=True,
                    max_top_logprobs=20,
                    seeded=True,
                    parallel_samples=True,
                    notes=("scripted",),
                )
            )
        self._capabilities = capabilities
        self.calls = 0
        self.samples = 0
        self.closed = False
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, object]:
        """Picklable (to a Ray actor) when its ``respond`` is: the lock is left out."""
        state = dict(self.__dict__)
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @property
    def identity(self) -> str:
        """``scripted:<name>``."""
        return f"scripted:{self.name}"

    @property
    def capabilities(self) -> Capabilities:
        """As configured (default: seeded, parallel samples, no logprobs)."""
        return self._capabilities

    def sample(self, request: GenerationRequest, j: int) -> Generation:
        """Sample ``j`` of ``request``: drawn with seed ``request.seed + j``."""
        seed = request.seed + j
        text = self._respond(request.messages, seed)
        logprobs = None
        if request.params.top_logprobs > 0 and self._logprobs_fn is not None:
            logprobs = self._logprobs_fn(request.messages, seed)
        tokens = len(text.split())  # words stand in for tokens; max_tokens is not applied
        prompt_tokens = sum(len(m.content.split()) for m in request.messages)
        return Generation(
            text=text,
            finish_reason="stop",
            completion_tokens=len(logprobs) if logprobs is not None else tokens,
            prompt_tokens=prompt_tokens,
            logprobs=logprobs,
            seconds=0.0,
        )

    def generate(
        self, requests: Sequence[GenerationRequest]
    ) -> Iterator[tuple[int, list[Generation]]]:
        """Yield ``(index, generations)`` in request order; counts calls and samples."""
        for index, request in enumerate(requests):
            generations = [self.sample(request, j) for j in range(request.n)]
            with self._lock:
                self.calls += 1
                self.samples += request.n
            yield index, generations

    def close(self) -> None:
        """Nothing to release; records that it was called."""
        self.closed = True


__all__ = ["DEFAULT_CAPABILITIES", "LogprobsFn", "Respond", "ScriptedModel", "table_responder"]

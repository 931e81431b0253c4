"""The one protocol every model backend implements (design.md, ``models/``).

A backend turns :class:`GenerationRequest` objects into :class:`Generation` objects.
It knows nothing about tasks, perturbations or scoring methods.

Seeds. A request asks for ``n`` samples of one prompt; sample ``j`` of the request
(``0 <= j < n``) must be drawn with seed ``seed + j``, and must depend only on
(prompt, sampling parameters, ``seed + j``). llama.cpp's server does exactly this for
its ``n`` parallel children (child ``j`` is seeded ``seed + j`` and they share the
prompt evaluation), so a block of consecutive sample indices can be sent as one call
and a resumed run reproduces an uninterrupted one.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol, Self, runtime_checkable

from credo.models.openai_probe import ServerProbe
from credo.types import (
    Capabilities,
    Generation,
    GenerationError,
    GenerationRequest,
    Message,
    SampleBlock,
    SamplingParams,
    TokenLogprob,
)

__all__ = [
    "Capabilities",
    "ClosesOnExit",
    "Generation",
    "GenerationError",
    "GenerationRequest",
    "Message",
    "Model",
    "SampleBlock",
    "SamplingParams",
    "ServedModel",
    "TokenLogprob",
]

class ClosesOnExit:
    """Context-manager support for a backend: ``with EmbeddedModel() as m:`` closes ``m``."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


@runtime_checkable
class Model(Protocol):
    """A generation backend.

    ``identity`` names the model precisely enough for the cache key: backend name plus
    model name plus a weights hash where one is known. ``generate`` yields
    ``(request_index, generations)`` as each request completes (in any order), so the
    caller can checkpoint continuously; ``len(generations) == request.n``.

    Failures. A backend that retries (a served model: 429, 5xx, malformed replies) yields
    ``(request_index, GenerationError)`` for a request whose retries ran out and goes on
    with the others, so one bad request never costs the rest of a run; it may count the
    calls it retried in an ``int`` attribute ``retries`` (cumulative). Nothing from a
    failed request is cached. An error that no retry can mend (a prompt longer than the
    context) may still be raised.
    """

    @property
    def identity(self) -> str: ...

    @property
    def capabilities(self) -> Capabilities: ...

    def generate(
        self, requests: Sequence[GenerationRequest]
    ) -> Iterator[tuple[int, list[Generation] | GenerationError]]: ...

    def close(self) -> None: ...


@runtime_checkable
class ServedModel(Model, Protocol):
    """A model behind a server (the OpenAI-compatible backend): it can check that its
    server answers (``preflight``), ask the server what it does with ``n``, seeds,
    logprobs and grammars (``probe``), and take the answers (``apply_probe``, which
    returns the warnings a user should see). ``auto_probe`` False: the pool does not
    probe it before use."""

    auto_probe: bool

    def preflight(self) -> None: ...

    def probe(self) -> ServerProbe: ...

    def apply_probe(self, probe: ServerProbe) -> list[str]: ...

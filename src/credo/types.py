"""The value types every layer shares (design.md, the bottom layer): chat messages,
sampling parameters, generation requests and their results, token logprobs and a
backend's capabilities. This module imports nothing of credo, so tasks, plans and methods
can name a request or a generation without importing any backend.

Seeds. A request asks for ``n`` samples of one prompt; sample ``j`` of the request
(``0 <= j < n``) must be drawn with seed ``seed + j``, and must depend only on
(prompt, sampling parameters, ``seed + j``). See :mod:`credo.models.base`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "user", "assistant"]


class Message(BaseModel):
    """One chat message."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Role
    content: str


class SamplingParams(BaseModel):
    """Decoding parameters.

    Defaults follow the papers: sample the full distribution at T = 1 (Wu et al., App. E.1),
    so llama.cpp's truncation defaults (top_k=40, top_p=0.95, min_p=0.05) are switched
    off. ``top_logprobs`` asks for that many alternatives per generated token (0 = none).
    ``grammar`` (llama.cpp GBNF) restricts what may be generated, on backends whose
    capabilities say ``grammar``; the reported logprobs stay those of the unrestricted
    distribution, so the mass a grammar excludes remains visible.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    temperature: float = Field(1.0, ge=0.0, description="sampling temperature (the papers: 1)")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="nucleus sampling bound; 1 = off")
    top_k: int = Field(0, ge=0, description="top-k sampling bound; 0 = off")
    min_p: float = Field(0.0, ge=0.0, le=1.0, description="min-p sampling bound; 0 = off")
    max_tokens: int = Field(256, ge=1, description="generation length cap per sample")
    stop: tuple[str, ...] = Field((), description="strings that end a generation")
    top_logprobs: int = Field(
        0, ge=0, le=20, description="top alternatives per generated token to return; 0 = none",
    )
    grammar: str | None = Field(
        None, description="GBNF grammar restricting the output (structured decoding)"
    )


class GenerationRequest(BaseModel):
    """``n`` samples of one chat prompt, sample ``j`` seeded ``seed + j``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    messages: tuple[Message, ...]
    params: SamplingParams = SamplingParams()
    seed: int = Field(0, ge=0, lt=2**31)
    n: int = Field(1, ge=1)


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token, its log-probability (natural log) and the top alternatives."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class Generation:
    """One sampled completion."""

    text: str
    finish_reason: str = "stop"
    completion_tokens: int = 0
    prompt_tokens: int = 0
    logprobs: tuple[TokenLogprob, ...] | None = None
    seconds: float = 0.0


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do; methods that need more are reported as not available."""

    logprobs: bool = False
    max_top_logprobs: int = 0
    seeded: bool = False
    parallel_samples: bool = False
    grammar: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)


@dataclass
class Usage:
    """What a server reported for the calls sent for one request:
    ``calls`` requests sent (every attempt: retries and failed ones included), and the
    prompt and completion tokens of their replies' ``usage``."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, other: Usage) -> None:
        """Add ``other``'s counts to these."""
        self.calls += other.calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens


class Generations(list[Generation]):
    """A request's generations as a metered backend yields them: a list, with ``usage``,
    what the server reported for every call sent for the request (retries included).
    The executor counts that in the ledger rather than the generations' own tokens."""

    def __init__(
        self, generations: Iterable[Generation] = (), usage: Usage | None = None
    ) -> None:
        super().__init__(generations)
        self.usage = usage


class GenerationError(RuntimeError):
    """A backend could not complete one request; ``request_index`` names it when known.
    ``usage``: what the server reported for the calls sent for it (a metered backend's;
    ``None``: not known). Calls of the request still in flight when it failed add to it
    until the backend's ``generate`` ends. ``kind``: what failed, in one word a service
    can count by (``http_500`` after the retries, ``timeout``, ``connection``,
    ``malformed_reply``, ``circuit_open``, ``rejected`` for a 4xx no retry mends;
    ``failed`` when the backend does not say)."""

    def __init__(
        self, message: str, request_index: int | None = None, usage: Usage | None = None,
        kind: str = "failed",
    ) -> None:
        super().__init__(message)
        self.request_index = request_index
        self.usage = usage
        self.kind = kind


def usage_of(outcome: object) -> Usage | None:
    """The ``usage`` a metered backend attached to a request's outcome (generations or a
    failure), or ``None``."""
    usage = getattr(outcome, "usage", None)
    return usage if isinstance(usage, Usage) else None


@dataclass(frozen=True)
class SampleBlock:
    """Samples ``offset .. offset + n - 1`` of request ``request_index``: one backend call."""

    request_index: int
    offset: int
    n: int

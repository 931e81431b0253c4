"""Chat bodies and replies of the OpenAI-compatible backend
(:class:`~credo.models.openai_compat.OpenAIModel`): what one call sends, and the
generations its reply holds.

Seeds. With ``supports_n`` a request's ``n`` samples are one call with ``n`` and
``seed``; llama.cpp's server seeds child ``j`` with ``seed + j`` (the protocol's
contract) but OpenAI and vLLM do not. ``supports_n=False`` sends ``n`` calls seeded
``seed + j``, which honours the contract on any server that honours ``seed``. Left
unset, the probe decides (and without a probe, ``True``). ``max_n`` caps the samples of
one call (llama.cpp's server refuses ``n`` above its slots, ``-np``): a larger request is
sent as blocks of consecutive samples, block ``k`` seeded ``seed + offset_k``, so the
contract still holds; left unset, the probe finds the cap.

``top_k`` and ``min_p`` are not OpenAI parameters; vLLM and llama.cpp's server accept
them in the body, so they go in ``extra_body`` when they differ from the protocol's
defaults (0 = off), or always with ``explicit_truncation=True`` — needed for a llama.cpp
server, whose own defaults are top_k=40 and min_p=0.05. A request's GBNF ``grammar`` goes
in ``extra_body`` under the field the server obeys (``grammar``: llama.cpp;
``guided_grammar``: vLLM), on a server the probe (or the ``grammar`` option) says obeys one.

A reply is checked before it is read (the client does not validate replies): one that is
not ``n`` choices each with a string content raises
:class:`~credo.models.openai_errors.MalformedReply`, which the backend retries.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any, Protocol

from credo.models.openai_errors import MalformedReply
from credo.models.openai_probe import GRAMMAR_FIELDS
from credo.types import (
    Generation,
    GenerationRequest,
    SampleBlock,
    SamplingParams,
    TokenLogprob,
    Usage,
)

MAX_TOP_LOGPROBS = 20


class Endpoint(Protocol):
    """What a chat body depends on: the served model's name and what it was declared, or
    probed, to do (:class:`~credo.models.openai_compat.OpenAIModel` is one)."""

    model: str
    supports_n: bool
    supports_seed: bool
    logprobs: bool
    max_top_logprobs: int
    grammar_field: str | None
    explicit_truncation: bool

    @property
    def identity(self) -> str: ...


def chat_kwargs(
    endpoint: Endpoint, request: GenerationRequest, offset: int, n: int
) -> dict[str, Any]:
    """The ``chat.completions.create`` keyword arguments for one call of ``n`` samples of
    ``request`` from sample ``offset`` on."""
    params: SamplingParams = request.params
    kwargs: dict[str, Any] = {
        "model": endpoint.model,
        "messages": [{"role": m.role, "content": m.content} for m in request.messages],
        "temperature": params.temperature,
        "top_p": params.top_p,
        "max_tokens": params.max_tokens,
    }
    if endpoint.supports_n:
        kwargs["n"] = n
    elif n != 1:
        raise ValueError(f"this endpoint takes one sample per call, asked for {n}")
    if endpoint.supports_seed:
        kwargs["seed"] = request.seed + offset
    if params.stop:
        kwargs["stop"] = list(params.stop)
    if params.top_logprobs > 0 and endpoint.logprobs:
        kwargs["logprobs"] = True
        kwargs["top_logprobs"] = min(params.top_logprobs, max(endpoint.max_top_logprobs, 1))
    extra = extra_body(endpoint, params)
    if extra:
        kwargs["extra_body"] = extra
    return kwargs


def extra_body(endpoint: Endpoint, params: SamplingParams) -> dict[str, Any]:
    """What goes in the body beyond OpenAI's parameters: truncation samplers, a grammar."""
    extra: dict[str, Any] = {}
    if params.top_k != 0 or endpoint.explicit_truncation:
        extra["top_k"] = params.top_k
    if params.min_p != 0.0 or endpoint.explicit_truncation:
        extra["min_p"] = params.min_p
    if params.grammar:
        if endpoint.grammar_field is None:
            raise ValueError(
                f"a request carries a grammar, but {endpoint.identity} takes none "
                "(model_options.grammar, or run `credo probe`)"
            )
        extra[endpoint.grammar_field] = params.grammar
    return extra


def calls_of(
    requests: Sequence[GenerationRequest], supports_n: bool, max_n: int | None
) -> list[SampleBlock]:
    """The calls that send ``requests``: with ``supports_n``, blocks of at most ``max_n``
    consecutive samples (None: one block per request); otherwise one call per sample."""
    return [
        SampleBlock(index, offset, size)
        for index, request in enumerate(requests)
        for offset, size in (
            blocks(request.n, max_n) if supports_n else [(j, 1) for j in range(request.n)]
        )
    ]


def blocks(n: int, most: int | None) -> list[tuple[int, int]]:
    """``(offset, size)`` blocks of consecutive samples, each at most ``most`` (None: one)."""
    step = n if most is None else most
    return [(offset, min(step, n - offset)) for offset in range(0, n, step)]


def grammar_field(grammar: str | bool | None) -> str | None:
    """The body field of the ``grammar`` option: True = llama.cpp's ``grammar``."""
    if grammar is None or grammar is False:
        return None
    if grammar is True:
        return GRAMMAR_FIELDS[0]
    if grammar not in GRAMMAR_FIELDS:
        raise ValueError(f"grammar must be true, false or one of {GRAMMAR_FIELDS}, got {grammar!r}")
    return str(grammar)


def get(obj: Any, name: str, default: Any = None) -> Any:
    """Attribute or key ``name`` of a response object (pydantic model or plain dict)."""
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _lp(value: Any) -> float:
    """A logprob (``None`` stands for an impossible token)."""
    return float("-inf") if value is None else float(value)


def parse_choice_logprobs(logprobs: Any) -> tuple[TokenLogprob, ...] | None:
    """``choice.logprobs`` → :class:`TokenLogprob` tuple (alternatives sorted), or ``None``."""
    content = get(logprobs, "content") if logprobs is not None else None
    if content is None:
        return None
    tokens = []
    for entry in content:
        top = sorted(
            (
                (get(alt, "token") or "", _lp(get(alt, "logprob")))
                for alt in get(entry, "top_logprobs") or ()
            ),
            key=lambda pair: -pair[1],
        )
        tokens.append(
            TokenLogprob(get(entry, "token") or "", _lp(get(entry, "logprob")), tuple(top))
        )
    return tuple(tokens)


def generations_of(
    response: Any, request: GenerationRequest, n: int, seconds: float
) -> list[Generation]:
    """The ``n`` generations of one call's reply (``seconds``: how long it took); a reply
    that is not ``n`` well-formed choices raises :class:`MalformedReply`."""
    choices = checked_choices(response, n)
    usage = get(response, "usage")
    prompt_tokens = _count(get(usage, "prompt_tokens")) if usage is not None else 0
    total_completion = _count(get(usage, "completion_tokens")) if usage is not None else 0
    generations = []
    for choice in choices:
        text = get(get(choice, "message"), "content")
        finish = get(choice, "finish_reason") or "stop"
        try:
            logprobs = parse_choice_logprobs(get(choice, "logprobs"))
        except (TypeError, ValueError, AttributeError) as exc:
            raise MalformedReply(f"unreadable logprobs ({exc})") from exc
        if logprobs is not None:
            completion_tokens = len(logprobs)
        elif n == 1:
            completion_tokens = total_completion
        elif finish == "length":
            completion_tokens = request.params.max_tokens
        else:
            completion_tokens = -1  # not reported per choice: shared out below
        generations.append(
            Generation(
                text=text,
                finish_reason=str(finish),
                completion_tokens=completion_tokens,
                prompt_tokens=prompt_tokens,
                logprobs=logprobs if request.params.top_logprobs > 0 else None,
                seconds=seconds,
            )
        )
    return share_completion_tokens(generations, total_completion)


def share_completion_tokens(generations: list[Generation], total: int) -> list[Generation]:
    """The choices whose count the reply does not give (``-1``: no logprobs, ``n > 1``,
    not cut at ``max_tokens``) share evenly what ``usage.completion_tokens`` leaves after
    the others (the first ones one token more), so a call's samples add up to the
    server's count (credo.generation.ledger)."""
    unknown = [i for i, g in enumerate(generations) if g.completion_tokens < 0]
    if not unknown:
        return generations
    known = sum(g.completion_tokens for g in generations if g.completion_tokens >= 0)
    share, extra = divmod(max(0, total - known), len(unknown))
    out = list(generations)
    for j, i in enumerate(unknown):
        out[i] = dataclasses.replace(out[i], completion_tokens=share + (j < extra))
    return out


def metered_generations(
    response: Any, request: GenerationRequest, n: int, seconds: float, usage: Usage | None
) -> list[Generation]:
    """:func:`generations_of` the reply, with the tokens its ``usage`` reports added to
    ``usage`` first (a malformed reply's too: the server billed it); a
    well-formed reply without ``usage`` adds its generations' completion tokens."""
    reported = reported_usage(response)
    if usage is not None and reported is not None:
        usage.prompt_tokens += reported[0]
        usage.completion_tokens += reported[1]
    generations = generations_of(response, request, n, seconds)
    if usage is not None and reported is None:
        usage.completion_tokens += sum(g.completion_tokens for g in generations)
    return generations


def reported_usage(response: Any) -> tuple[int, int] | None:
    """The ``(prompt_tokens, completion_tokens)`` a reply's ``usage`` reports, read from
    any reply that has one (a malformed one too: the server billed it); ``None`` when the
    reply has no ``usage``."""
    if response is None or isinstance(response, str | bytes | list | tuple):
        return None
    usage = get(response, "usage")
    if usage is None or isinstance(usage, str | bytes | list | tuple):
        return None
    return _count(get(usage, "prompt_tokens")), _count(get(usage, "completion_tokens"))


def tokens_used(generations: list[Generation]) -> int | None:
    """The tokens a call cost as the server reported them (``None``: no usage)."""
    if not generations or generations[0].prompt_tokens <= 0:
        return None
    return generations[0].prompt_tokens + sum(g.completion_tokens for g in generations)


def _count(value: Any) -> int:
    """A token count from ``usage`` (0 when absent or not a number)."""
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def checked_choices(response: Any, n: int) -> list[Any]:
    """The ``n`` choices of a chat completion in index order, each with a string content;
    anything else raises :class:`MalformedReply` (the client does not validate replies)."""
    if isinstance(response, str | bytes | list | tuple) or response is None:
        raise MalformedReply(f"not a chat completion ({type(response).__name__})")
    choices = get(response, "choices")
    if not isinstance(choices, list | tuple):
        raise MalformedReply(f"no list of choices ({type(choices).__name__})")
    if len(choices) != n:
        raise MalformedReply(f"asked for {n} choices, got {len(choices)}")
    indices = [get(c, "index") for c in choices]
    if all(isinstance(i, int) for i in indices):
        if sorted(indices) != list(range(n)):
            raise MalformedReply(f"choice indices {sorted(indices)} are not 0..{n - 1}")
        choices = [c for _, c in sorted(zip(indices, choices, strict=True), key=lambda p: p[0])]
    for position, choice in enumerate(choices):
        message = get(choice, "message")
        if message is None:
            raise MalformedReply(f"choice {position} has no message")
        if not isinstance(get(message, "content"), str):
            raise MalformedReply(f"choice {position} has no text content")
    return list(choices)


async def send_chat(client: Any, kwargs: dict[str, Any]) -> Any:
    """One chat completions call with ``kwargs`` (:func:`chat_kwargs`); the reply.

    For the ``openai.AsyncOpenAI`` client credo made, the body is posted as it is (its
    ``extra_body`` merged in) and the reply is its JSON, a plain dict: the client's
    request transform (it walks the body against its typed parameters) and its response
    models cost about 1 ms of CPU a call on these machines (benchmarks: the gateway's
    profile), which a service making hundreds of calls a second pays on its critical
    path, and credo's body is already plain JSON and its reader reads dicts. The client
    still sends it: its base URL, headers, auth, timeout, connection pool and error
    classes (a non-2xx status raises as ever; a body that is not JSON raises
    ``json.JSONDecodeError``, a malformed reply to retry). Another client (injected, in
    tests) is called through ``chat.completions.create``."""
    from openai import AsyncOpenAI

    if not isinstance(client, AsyncOpenAI):
        return await client.chat.completions.create(**kwargs)
    import httpx

    body = dict(kwargs)
    body.update(body.pop("extra_body", None) or {})
    raw = await client.post("/chat/completions", body=body, cast_to=httpx.Response)
    return json.loads(raw.content)


__all__ = [
    "MAX_TOP_LOGPROBS",
    "Endpoint",
    "blocks",
    "calls_of",
    "chat_kwargs",
    "checked_choices",
    "extra_body",
    "generations_of",
    "get",
    "grammar_field",
    "metered_generations",
    "parse_choice_logprobs",
    "reported_usage",
    "send_chat",
    "share_completion_tokens",
    "tokens_used",
]

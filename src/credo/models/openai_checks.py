"""The checks of an OpenAI-compatible server before a run
(:class:`~credo.models.openai_compat.OpenAIModel`): the preflight, the probe's requests and
what a probe sets. The probe's questions and conclusions are :mod:`credo.models.openai_probe`'s.

Preflight. :meth:`~credo.models.openai_compat.OpenAIModel.preflight` sends one
``GET {base_url}/models`` to every replica (timeout ``preflight_timeout``) before a run's
first call, so an unreachable server is a one-line :class:`~credo.errors.UserError`
rather than a run of failed requests; any HTTP answer counts as reachable, except a
401/403, which is the key's error raised early.

Probe. :meth:`~credo.models.openai_compat.OpenAIModel.probe` asks the first replica a
handful of tiny requests (:mod:`credo.models.openai_probe`): whether it honours ``n``,
whether a seed reproduces its sample, whether the children of a call follow the seed
contract, whether it returns logprobs (how many alternatives) and whether it obeys a
grammar. :meth:`~credo.models.openai_compat.OpenAIModel.apply_probe` sets from that what
the options left open (``supports_n``, ``max_n``, ``logprobs``, ``grammar``); an option
given explicitly always wins, and so does the option's default where an empty reply
left the probe's answer unknown (one glitch decides nothing).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Set
from typing import Any, Protocol

from credo.errors import UserError
from credo.models.breaker import CircuitBreaker
from credo.models.openai_errors import (
    Fail,
    MalformedReply,
    OpenAIGenerationError,
    Retry,
    connection_reason,
    key_refused,
    tell_breaker,
)
from credo.models.openai_probe import ProbeRefused, ServerProbe, probe_server
from credo.models.openai_replicas import Replica, client_options
from credo.models.openai_requests import checked_choices, get, reported_usage
from credo.types import Usage


def preflight_replica(
    replica: Replica, api_key: str | None, api_key_env: str, timeout: float
) -> None:
    """One ``GET {url}/models`` to ``replica``: raise :class:`~credo.errors.UserError` when
    it cannot be reached (refused, unknown host, no answer within ``timeout`` seconds) or
    refuses the key (401/403); any other HTTP answer passes."""
    import openai

    client = openai.OpenAI(**client_options(replica, api_key, timeout))
    try:
        client.models.list()
    except openai.APIConnectionError as exc:  # APITimeoutError included
        raise UserError(
            f"cannot reach the OpenAI-compatible server at {replica.url}: "
            f"{connection_reason(exc)}"
        ) from exc
    except openai.APIStatusError as exc:
        if exc.status_code in (401, 403):
            raise key_refused(exc.status_code, replica, api_key_env, api_key) from None
    except (openai.OpenAIError, ValueError):
        pass  # an HTTP answer that is not a model list: the server is there
    finally:
        client.close()


async def send_probe_request(
    client: Any,
    kwargs: dict[str, Any],
    timeout: float,
    attempts: int,
    verdict_of: Callable[[Exception], Retry | Fail],
    backoff: Callable[[int], float],
    where: str,
    meter: Usage | None = None,
    breaker: CircuitBreaker | None = None,
) -> Any:
    """One probe request (on the loop thread): the reply as ``client`` gives it, once it is
    a chat completion whose choices all have a text (their number is the probe's
    business). Tried ``attempts`` times at most, each given ``timeout`` seconds;
    ``verdict_of`` classifies a failure (it raises what no retry concerns), ``backoff``
    gives the wait before retry ``k + 1``. Raises
    :class:`~credo.models.openai_probe.ProbeRefused` for a 4xx no retry mends and
    :class:`~credo.models.openai_errors.OpenAIGenerationError` (naming ``where``) when the
    tries run out or ``breaker`` (told of every attempt) is open. Every attempt counts
    one call in ``meter``, with the tokens its reply reports (a malformed one's too)."""
    verdict: Retry | Fail = Retry("not sent")
    for attempt in range(attempts):
        if breaker is not None and not breaker.allow():
            raise OpenAIGenerationError(f"{where}: probe request not sent: {breaker.reason}")
        outcome = await _probe_attempt(client, kwargs, timeout, verdict_of, meter)
        if breaker is not None:
            tell_breaker(breaker, outcome)
        if not isinstance(outcome, Retry | Fail):
            return outcome
        verdict = outcome
        if isinstance(verdict, Fail):
            raise ProbeRefused(verdict.reason)
        if attempt + 1 < attempts:
            wait = verdict.retry_after
            delay = wait if wait is not None else backoff(attempt)
            await (breaker.sleep(delay) if breaker is not None else asyncio.sleep(delay))
    raise OpenAIGenerationError(f"{where} failed after {attempts} attempts: {verdict.reason}")


async def _probe_attempt(
    client: Any,
    kwargs: dict[str, Any],
    timeout: float,
    verdict_of: Callable[[Exception], Retry | Fail],
    meter: Usage | None,
) -> Any:
    """One attempt of :func:`send_probe_request`: the reply, or what to do about the
    failure (:class:`Retry` or :class:`Fail`); counted in ``meter``."""
    if meter is not None:
        meter.calls += 1
    try:
        reply = await asyncio.wait_for(client.chat.completions.create(**kwargs), timeout=timeout)
        reported = reported_usage(reply)
        if meter is not None and reported is not None:
            meter.prompt_tokens += reported[0]
            meter.completion_tokens += reported[1]
        checked_choices(reply, len(get(reply, "choices") or ()) or 1)
        return reply
    except MalformedReply as exc:
        return Retry(f"malformed reply: {exc}")
    except TimeoutError:
        return Retry(f"no answer within {timeout} s")
    except Exception as exc:
        return verdict_of(exc)


def check_numbers(max_concurrency: int, max_retries: int, retry_backoff: float) -> None:
    """Refuse option values that make no sense (a ValueError names the option)."""
    if max_concurrency < 1:
        raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
    if max_retries < 0 or retry_backoff < 0:
        raise ValueError(
            f"max_retries and retry_backoff must be >= 0, got {max_retries}, {retry_backoff}"
        )


def checked_label(label: str | None) -> str | None:
    """The identity's label: a non-empty string without whitespace, or None."""
    if label is None:
        return None
    text = str(label)
    if not text or any(c.isspace() for c in text):
        raise ValueError(f"label must be a non-empty word without spaces, got {label!r}")
    return text


def metered_probe(
    send: Callable[[dict[str, Any], Usage], Any], model: str, identity: str
) -> ServerProbe:
    """:func:`~credo.models.openai_probe.probe_server` through ``send(body, meter)``, the
    record's ``calls`` and tokens those ``meter`` counted over every attempt (retries
    included)."""
    meter = Usage()
    found = probe_server(lambda body: send(body, meter), model, identity)
    return dataclasses.replace(found, calls=meter.calls, prompt_tokens=meter.prompt_tokens,
                               completion_tokens=meter.completion_tokens)


class Probed(Protocol):
    """What a probe sets on a model (:class:`~credo.models.openai_compat.OpenAIModel`)."""

    probed: ServerProbe | None
    supports_n: bool
    max_n: int | None
    logprobs: bool
    max_top_logprobs: int
    grammar_field: str | None
    seeds_reproducible: bool | None

    @property
    def identity(self) -> str: ...


def apply_probe(model: Probed, probe: ServerProbe, explicit: Set[str]) -> list[str]:
    """Set on ``model`` what the options left open (those not in ``explicit``) from
    ``probe``; the warnings the user should see (see
    :meth:`~credo.models.openai_compat.OpenAIModel.apply_probe`)."""
    model.probed = probe
    name = model.identity
    if not probe.complete:
        return [f"{name}: the probe of the server did not finish "
                f"({probe.errors[0]}); using model_options as given"]
    warnings = []
    if "supports_n" not in explicit:
        together = bool(probe.honours_n) and probe.seed_contract is not False
        if model.supports_n and not together:
            why = ("does not honour n" if not probe.honours_n
                   else "does not seed the children of a call seed + j")
            warnings.append(f"{name}: the server {why}: one call per sample, "
                            "seeded seed + j (model_options.supports_n overrides)")
        model.supports_n = together
    if "max_n" not in explicit:
        model.max_n = probe.max_n
    if probe.unsettled:
        warnings.append(f"{name}: an empty reply left the probe's answer to "
                        f"{', '.join(probe.unsettled)} unknown: those options stay as given "
                        "and the probe is asked again next time")
    if "logprobs" not in explicit and probe.logprobs is not None:
        model.logprobs = bool(probe.logprobs)
        model.max_top_logprobs = probe.top_logprobs if probe.logprobs else 0
        if not probe.logprobs:
            warnings.append(f"{name}: the server returns no logprobs: methods "
                            "that need them are not available")
    if "grammar" not in explicit and "grammar" not in probe.unsettled:
        model.grammar_field = probe.grammar
    model.seeds_reproducible = probe.deterministic
    if probe.deterministic is False:
        warnings.append(f"{name}: the server does not reproduce a sample from "
                        "its seed: samples are not reproducible (the cache still holds "
                        "them, so a rerun reads them back)")
    return warnings


__all__ = [
    "Probed",
    "apply_probe",
    "check_numbers",
    "checked_label",
    "metered_probe",
    "preflight_replica",
    "send_probe_request",
]

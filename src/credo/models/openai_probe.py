"""What an OpenAI-compatible server does with ``n``, seeds, logprobs and grammars.

Servers differ where credo's results depend on it (:mod:`credo.models.base`, *Seeds*):
llama.cpp's server seeds child ``j`` of a call with ``n`` children ``seed + j``; vLLM and
hosted APIs do not (or ignore ``n``, or the seed). :func:`probe_server` finds out with a
handful of tiny requests (at most :data:`MAX_PROBE_REQUESTS`, sent one after another,
``max_tokens`` = :data:`PROBE_MAX_TOKENS`, sampled at T = 1):

1. one call with ``n = 3`` and seed ``s``: does the reply hold 3 choices (``honours_n``)?
   If so, calls of one token with ``n`` = 32, 16, 8, 4 until one is accepted: the most
   samples one call may ask (``max_n``; ``None``: 32 or more). A refusal that states the
   bound (llama.cpp: "1 <= value <= 4") is taken at its word.
2. single calls with seeds ``s``, ``s``, ``s + 1``, ``s + 2``: does a seed reproduce its
   sample (``deterministic``), do different seeds give different samples
   (``seeds_vary``), and is child ``j`` of step 1 the single call with seed ``s + j``
   (``seed_contract``; unknown when ``n`` is not honoured or seeds do not reproduce)?
3. a single call with ``logprobs`` and 20 alternatives (5 if 20 is refused): are
   logprobs returned (``logprobs``), with how many alternatives per token
   (``top_logprobs``, the fewest over the tokens)?
4. a single call with a GBNF grammar allowing only :data:`GRAMMAR_WORDS`, in the body
   field ``grammar`` (llama.cpp), then ``guided_grammar`` (vLLM): the first whose 2xx
   reply obeys it is ``grammar``. (vLLM's ``guided_choice`` is not tried: the label
   baseline needs a grammar, and a server that takes ``guided_choice`` takes
   ``guided_grammar``.)

A 4xx answer is a "no" to what was asked; any other failure (after the sender's
retries) stops the probe, whose record then lists it in ``errors`` (incomplete: nothing
is concluded and nothing stored).

Glitches. An empty reply is no answer: the probe's prompt always has
one, so an empty text is a server's glitch more likely than a sample. A question whose
answer rests on an empty reply (two replies to one seed that disagree because one is
empty, a logprobs or grammar reply without text) is answered "unknown" and named in
``unsettled``, never "no" from one glitch: a probe with an unsettled question leaves
those options as given and is not stored, so the next run asks again.

The backend (:class:`~credo.models.openai_compat.OpenAIModel`) sends the requests
(:mod:`credo.models.openai_checks`); this module holds the questions and the conclusions.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "GRAMMAR_WORDS",
    "MAX_PROBE_CHOICES",
    "MAX_PROBE_REQUESTS",
    "PROBE_MAX_TOKENS",
    "PROBE_PROMPT",
    "ProbeRefused",
    "ServerProbe",
    "probe_server",
]

PROBE_SEED = 4242
PROBE_MAX_TOKENS = 12
PROBE_PROMPT = "Write one short sentence about an animal of your choice."
GRAMMAR_WORDS = ("credo-alpha", "credo-beta")
"""What the probe's grammar allows: words no model writes unasked."""
PROBE_GRAMMAR = "root ::= " + " | ".join(f'"{w}"' for w in GRAMMAR_WORDS)
GRAMMAR_FIELDS = ("grammar", "guided_grammar")
"""Request-body fields that carry a GBNF grammar: llama.cpp's server, vLLM's."""
WIDE_N = (32, 16, 8, 4)
"""The ``n`` tried for ``max_n``, widest first."""
MAX_PROBE_REQUESTS = 1 + len(WIDE_N) + 4 + 2 + len(GRAMMAR_FIELDS)
MAX_PROBE_CHOICES = 3 + sum(WIDE_N) + 4 + 2 + len(GRAMMAR_FIELDS)
"""The most samples (choices) the probe's requests ask for, each at most
:data:`PROBE_MAX_TOKENS` long: what a dry run bounds a probe's completion tokens by."""
_BOUND = re.compile(r"(?:value\s*<=|<=|at most|maximum(?:\s+is|\s+of)?)\s*(\d+)", re.I)


class ProbeRefused(Exception):
    """The server answered a probe request with a 4xx: it does not do what was asked."""


@dataclass(frozen=True)
class ServerProbe:
    """What :func:`probe_server` found for one model identity (``None``: not known)."""

    identity: str
    honours_n: bool | None = None
    max_n: int | None = None
    deterministic: bool | None = None
    seeds_vary: bool | None = None
    seed_contract: bool | None = None
    logprobs: bool | None = None
    top_logprobs: int = 0
    grammar: str | None = None
    requests: int = 0
    seconds: float = 0.0
    probed_at: str = ""
    errors: tuple[str, ...] = ()
    #: What the probe cost, as the server reported it (``usage``; the ledger's stage
    #: ``probe``): the replies received and their choices, the requests sent (``calls``:
    #: every attempt, retries included; 0 in a record of an older credo) and the prompt
    #: and completion tokens of every reply (a retried one's too).
    replies: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    choices: int = 0
    #: The questions an empty reply left unknown (field names: ``deterministic``,
    #: ``seeds_vary``, ``seed_contract``, ``logprobs``, ``grammar``).
    unsettled: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        """Whether every question got an answer (an incomplete probe decides nothing)."""
        return not self.errors

    @property
    def settled(self) -> bool:
        """Complete, and no question left unknown by an empty reply: worth storing."""
        return self.complete and not self.unsettled

    def to_json(self) -> dict[str, Any]:
        """The record as JSON-ready values."""
        out = asdict(self)
        out["errors"] = list(self.errors)
        out["unsettled"] = list(self.unsettled)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ServerProbe:
        """A record from :meth:`to_json` (unknown keys ignored: a newer credo's record)."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["errors"] = tuple(values.get("errors") or ())
        values["unsettled"] = tuple(values.get("unsettled") or ())
        return cls(**values)

    def rows(self) -> list[tuple[str, str]]:
        """(question, answer) lines for people."""

        def yes(value: bool | None, name: str = "") -> str:
            if name in self.unsettled:
                return "unknown (an empty reply)"
            return "unknown" if value is None else ("yes" if value else "no")

        lp = yes(self.logprobs, "logprobs") + (
            f", top {self.top_logprobs}" if self.logprobs else "")
        grammar = f"yes ({self.grammar})" if self.grammar else yes(False, "grammar")
        return [
            ("honours n", yes(self.honours_n)),
            ("most samples per call", "32 or more" if self.max_n is None else str(self.max_n)),
            ("same seed, same sample", yes(self.deterministic, "deterministic")),
            ("other seeds, other samples", yes(self.seeds_vary, "seeds_vary")),
            ("child j of a call seeded seed + j", yes(self.seed_contract, "seed_contract")),
            ("logprobs", lp),
            ("grammar", grammar),
        ]

    def summary(self) -> str:
        """One line: the answers of :meth:`rows`."""
        return "; ".join(f"{q}: {a}" for q, a in self.rows())


Send = Callable[[dict[str, Any]], Any]
"""Sends one ``chat.completions.create`` body and returns the reply (a ``ChatCompletion``
or a dict); raises :class:`ProbeRefused` on a 4xx, anything else on a failure."""


def probe_server(send: Send, model: str, identity: str) -> ServerProbe:
    """Ask the server behind ``send`` the questions of the module docstring about
    ``model``; the record is keyed by ``identity``."""
    probe = _Prober(send, model)
    start = time.perf_counter()
    found: dict[str, Any] = {}
    try:
        found.update(probe.seeds())
        found.update(probe.logprobs())
        found["grammar"] = probe.grammar()
    except _Stop:
        pass
    return ServerProbe(
        identity=identity,
        requests=probe.requests,
        seconds=round(time.perf_counter() - start, 3),
        probed_at=datetime.now(UTC).isoformat(timespec="seconds"),
        errors=tuple(probe.errors),
        replies=probe.replies,
        prompt_tokens=probe.prompt_tokens,
        completion_tokens=probe.completion_tokens,
        calls=probe.requests,
        choices=probe.choices,
        unsettled=tuple(dict.fromkeys(probe.unsettled)),
        **found,
    )


class _Stop(Exception):
    """A probe request failed in a way that is no answer: stop probing."""


class _Prober:
    """Sends the probe's requests and reads their replies."""

    def __init__(self, send: Send, model: str) -> None:
        self.send, self.model = send, model
        self.requests = self.replies = self.prompt_tokens = self.completion_tokens = 0
        self.choices = 0
        self.errors: list[str] = []
        self.unsettled: list[str] = []
        self.refusal = ""

    def seeds(self) -> dict[str, Any]:
        """Steps 1 and 2: ``n``, determinism, the seed contract. An empty text is no
        answer (the module docstring, *Glitches*): a comparison it takes part in is
        unknown."""
        together = self.texts(n=3, seed=PROBE_SEED)
        if together is not None and len(together) not in (1, 3):
            self.errors.append(f"a call with n=3 was answered with {len(together)} choices")
            raise _Stop
        honours_n = together is not None and len(together) == 3
        max_n = self.widest() if honours_n else 1
        single = [self.texts(seed=PROBE_SEED + j) for j in (0, 0, 1, 2)]
        texts = [t[0] if t else "" for t in single]
        deterministic = self.same("deterministic", [(texts[0], texts[1])])
        contract = None
        if honours_n and deterministic and together is not None:
            contract = self.same("seed_contract", list(zip(
                together, [texts[0], texts[2], texts[3]], strict=True)))
        return {
            "honours_n": honours_n,
            "max_n": max_n,
            "deterministic": deterministic,
            "seeds_vary": self.vary([texts[0], texts[2], texts[3]]),
            "seed_contract": contract,
        }

    def same(self, question: str, pairs: list[tuple[str, str]]) -> bool | None:
        """Whether each pair of texts (replies that should agree) agrees: ``False`` when
        two texts differ, ``True`` when all agree, ``None`` (``question`` unsettled) when
        an empty text leaves it open."""
        if any(a and b and a != b for a, b in pairs):
            return False
        if all(a and b for a, b in pairs):
            return True
        self.unsettled.append(question)
        return None

    def vary(self, texts: list[str]) -> bool | None:
        """Whether texts of different seeds differ: ``True`` when two non-empty ones do,
        ``False`` when all are the same text, ``None`` (unsettled) when empty ones leave
        it open."""
        seen = {t for t in texts if t}
        if len(seen) > 1:
            return True
        if all(texts):
            return False
        self.unsettled.append("seeds_vary")
        return None

    def widest(self) -> int | None:
        """Step 1, continued: the most samples one call may ask (None: 32 or more)."""
        for n in WIDE_N:
            reply = self.call({"n": n, "max_tokens": 1})
            if reply is not None and len(_choices(reply)) == n:
                return None if n == WIDE_N[0] else n
            bound = _BOUND.search(self.refusal) if reply is None else None
            if bound is not None and 3 <= int(bound.group(1)) < n:
                return int(bound.group(1))
        return 3

    def logprobs(self) -> dict[str, Any]:
        """Step 3: logprobs and how many alternatives per token."""
        for top in (20, 5):
            reply = self.call({"logprobs": True, "top_logprobs": top})
            if reply is None:
                continue
            choices = _choices(reply)
            content = _get(_get(choices[0], "logprobs"), "content") if choices else None
            if not content:
                if not any(_texts(reply)[:1]):  # no text, hence no tokens: a glitch
                    self.unsettled.append("logprobs")
                    return {"logprobs": None, "top_logprobs": 0}
                break
            counts = [len(_get(entry, "top_logprobs") or ()) for entry in content]
            return {"logprobs": True, "top_logprobs": min(counts)}
        return {"logprobs": False, "top_logprobs": 0}

    def grammar(self) -> str | None:
        """Step 4: the body field whose grammar the server obeys, if any (unsettled when
        none was obeyed and a reply had no text)."""
        empty = False
        for field in GRAMMAR_FIELDS:
            reply = self.call({"extra_body": {field: PROBE_GRAMMAR}})
            got = _texts(reply) if reply is not None else None
            if got and got[0].strip() in GRAMMAR_WORDS:
                return field
            empty = empty or (got is not None and not (got and got[0]))
        if empty:
            self.unsettled.append("grammar")
        return None

    def texts(self, n: int = 1, seed: int = PROBE_SEED) -> list[str] | None:
        """The sample texts of one call. A call with ``n`` that is refused is ``None``;
        a plain call that is refused stops the probe (a wrong model name, a bad key)."""
        if n == 1:
            return _texts(self.call({}, seed=seed, stop_if_refused=True))
        reply = self.call({"n": n}, seed=seed)
        return None if reply is None else _texts(reply)

    def call(
        self, extra: dict[str, Any], seed: int = PROBE_SEED, stop_if_refused: bool = False
    ) -> Any:
        """One request: the reply, or ``None`` when refused with a 4xx (with
        ``stop_if_refused``, a refusal is recorded and stops the probe too); any other
        failure is recorded and stops the probe."""
        if self.requests >= MAX_PROBE_REQUESTS:
            raise AssertionError("the probe sends at most MAX_PROBE_REQUESTS requests")
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "user", "content": PROBE_PROMPT}],
            "temperature": 1.0,
            "top_p": 1.0,
            "max_tokens": PROBE_MAX_TOKENS,
            "seed": seed,
            **extra,
        }
        self.requests += 1
        try:
            reply = self.send(body)
        except ProbeRefused as exc:
            self.refusal = str(exc)
            if not stop_if_refused:
                return None
            self.errors.append(f"refused: {exc}")
            raise _Stop from exc
        except Exception as exc:
            self.errors.append(f"{type(exc).__name__}: {exc}")
            raise _Stop from exc
        self.count(reply)
        return reply

    def count(self, reply: Any) -> None:
        """Add the ``usage`` the server reported for ``reply``."""
        usage = _get(reply, "usage")
        self.replies += 1
        self.choices += len(_choices(reply))
        self.prompt_tokens += int(_get(usage, "prompt_tokens") or 0)
        self.completion_tokens += int(_get(usage, "completion_tokens") or 0)


def _get(obj: Any, name: str) -> Any:
    """Attribute or key ``name`` (a pydantic reply or a dict); ``None`` when absent."""
    if obj is None:
        return None
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def _choices(reply: Any) -> list[Any]:
    """The reply's choices in index order ([] when there are none)."""
    choices = list(_get(reply, "choices") or ())
    return sorted(choices, key=lambda c: _get(c, "index") or 0)


def _texts(reply: Any) -> list[str]:
    """The text of every choice (``""`` for a choice without one)."""
    return [str(_get(_get(c, "message"), "content") or "") for c in _choices(reply)]

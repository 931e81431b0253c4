"""The run's ledger: requests, samples, tokens and cost per stage.

Every :meth:`~credo.generation.executor.Executor.execute` call records into the pool's
:class:`Ledger`, under a *stage*: the ``stage`` of a planned request, else the stage the
call names, else the stage the pipeline has entered (:meth:`Ledger.stage`), else the
call's description. Per stage and model the ledger counts the requests asked for (cache
keys), the samples asked for and how many of them came from the cache, the samples
generated in this run, and the backend calls and prompt and completion tokens this run
sent and was billed.

Counting. A served model (the OpenAI-compatible backend) meters every
request it sends: ``calls`` counts each one, retries, failed ones and empty samples asked
again included, and the tokens are the sums of what the server reported in the ``usage``
of every reply, a reply that was retried (malformed, or asked again because a sample was
empty) or belonged to a request that failed in the end included: so the ledger's total
equals what the server billed. A request whose reply never reached credo (a 500, a
timeout, a body cut short) counts as a call with no tokens: none were reported. The
probe of a served model counts under stage ``probe`` the same way (its samples are the
choices its replies held; none is cached). Cached samples cost nothing.

A backend that meters nothing (the embedded llama.cpp backend, the scripted one) is
counted from the generations it returns: prompt tokens **once per backend call** (once
per block of consecutive samples sent with ``n``, the block's first sample; once per
sample on a backend without parallel samples) and the samples' ``completion_tokens``
summed, for every reply (an empty sample asked again counts again). llama.cpp's server
reports usage of choice 0 only when ``n > 1``: its other choices count only when they
carry logprobs or ran to ``max_tokens``, so embedded completion tokens are a lower bound
then. An embedded block larger than ``n_parallel`` is split into several calls that the
ledger counts as one.

Prices. ``model_options: {price_prompt_usd_per_mtok: 0.15, price_completion_usd_per_mtok:
0.6}`` (US dollars per million tokens) price a model's tokens. The pool takes them out of
the options before the backend is built (:func:`split_prices`), so they never reach a
backend, an identity or a request key; a model without prices has no cost.

Budget. With ``max_cost_usd`` the executors stop dispatching new blocks once the
ledger's cost reaches it (:attr:`Ledger.budget_reached`): what is done is cached, the
rest of the run's requests are reported missing, and a rerun resumes. The cost counted is
this run's (one invocation's): samples read from the cache cost nothing.

Threads. Executors may run in several threads at once over one ledger (the gateway
decides each question in a thread of its own): counts are added under a lock
(:meth:`Ledger.count`), and the stage a thread has entered (:meth:`Ledger.stage`) is that
thread's own.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass, fields
from dataclasses import replace as dataclass_copy
from typing import Any

from credo.errors import UserError

PRICE_PROMPT = "price_prompt_usd_per_mtok"
PRICE_COMPLETION = "price_completion_usd_per_mtok"
PRICE_KEYS = (PRICE_PROMPT, PRICE_COMPLETION)
"""The ``model_options`` keys that price a model (US dollars per million tokens)."""

COUNTING = (
    "every request this run sent to a served model (the probe, retries, failed requests "
    "and empty samples asked again included) with the tokens the server reported in its "
    "replies' usage; a backend that reports no usage per request: counted from its "
    "samples, prompt tokens once per backend call; cached samples cost nothing"
)
"""How the ledger counts, as written into ``metrics.json``."""

__all__ = [
    "COUNTING",
    "PRICE_COMPLETION",
    "PRICE_KEYS",
    "PRICE_PROMPT",
    "Ledger",
    "Prices",
    "StageUsage",
    "split_prices",
]


@dataclass(frozen=True)
class Prices:
    """US dollars per million prompt and completion tokens of one model."""

    prompt_usd_per_mtok: float = 0.0
    completion_usd_per_mtok: float = 0.0

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """``(prompt · p_prompt + completion · p_completion) / 10⁶`` US dollars."""
        return (
            prompt_tokens * self.prompt_usd_per_mtok
            + completion_tokens * self.completion_usd_per_mtok
        ) / 1e6


def split_prices(
    options: Mapping[str, Any], where: str = "model_options"
) -> tuple[dict[str, Any], Prices | None]:
    """``options`` without the price keys, and the prices they give (``None`` when they
    give none; a missing one of the two is 0). A price that is not a number ≥ 0 raises
    :class:`~credo.errors.UserError` naming ``where`` and the key."""
    rest = {k: v for k, v in options.items() if k not in PRICE_KEYS}
    given = {k: options[k] for k in PRICE_KEYS if k in options}
    if not given:
        return rest, None
    values = {}
    for key, value in given.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not (
            math.isfinite(value) and value >= 0
        ):
            raise UserError(f"{where}.{key}: a price must be a number >= 0, got {value!r}")
        values[key] = float(value)
    return rest, Prices(values.get(PRICE_PROMPT, 0.0), values.get(PRICE_COMPLETION, 0.0))


@dataclass
class StageUsage:
    """What one stage asked of one model: requests (cache keys) and samples asked for,
    samples read from the cache and generated, backend calls (every request sent) and
    reported tokens."""

    requests: int = 0
    samples: int = 0
    cached_samples: int = 0
    generated_samples: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, other: StageUsage) -> None:
        """Add ``other``'s counts to these (only the counts of this class: an
        :class:`~credo.generation.executor.ExecutionStats` adds its usage)."""
        for f in fields(StageUsage):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


class Ledger:
    """Counts per (stage, model identity) over a run, prices per model, and the budget.

    ``max_cost_usd`` None means no budget. One ledger is shared by every executor of a
    :class:`~credo.generation.pool.ModelPool`, from any number of threads (module
    docstring: counts go through :meth:`count`).
    """

    def __init__(self, max_cost_usd: float | None = None) -> None:
        if max_cost_usd is not None and not max_cost_usd > 0:
            raise ValueError(f"max_cost_usd must be > 0, got {max_cost_usd}")
        self.max_cost_usd = max_cost_usd
        #: Set by an executor that left blocks undispatched because of the budget.
        self.stopped = False
        self._usage: dict[tuple[str, str], StageUsage] = {}
        self._prices: dict[str, Prices] = {}
        self._lock = threading.Lock()
        self._stage: ContextVar[str | None] = ContextVar(f"credo-ledger-stage-{id(self)}",
                                                         default=None)

    # ------------------------------------------------------------------ stages

    @property
    def current_stage(self) -> str | None:
        """The stage this thread has entered (:meth:`stage`), if any."""
        return self._stage.get()

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Record this thread's executor calls inside the ``with`` under stage ``name``
        (unless a planned request or the call names its own)."""
        token = self._stage.set(name)
        try:
            yield
        finally:
            self._stage.reset(token)

    def usage(self, stage: str, identity: str) -> StageUsage:
        """The counts of ``stage`` on model ``identity`` (created empty on first use): a
        copy to read; add to them with :meth:`count`."""
        with self._lock:
            return dataclass_copy(self._usage.get((stage, identity)) or StageUsage())

    def count(self, stage: str, identity: str, **added: int) -> None:
        """Add ``added`` (field name -> count of :class:`StageUsage`) to the counts of
        ``stage`` on model ``identity``, atomically."""
        with self._lock:
            usage = self._usage.setdefault((stage, identity), StageUsage())
            for name, value in added.items():
                setattr(usage, name, getattr(usage, name) + value)

    # ------------------------------------------------------------------ prices

    def set_prices(self, identity: str, prices: Prices | None, role: str = "") -> None:
        """Price model ``identity``; two different prices for one model are a user error."""
        if prices is None:
            return
        known = self._prices.get(identity)
        if known is not None and known != prices:
            raise UserError(
                f"model {identity} is given two prices ({known} and, for the {role or 'role'},"
                f" {prices}); give its price_* options once"
            )
        self._prices[identity] = prices

    def prices(self, identity: str) -> Prices | None:
        """The prices of model ``identity`` (None: unpriced)."""
        return self._prices.get(identity)

    def cost_of(self, identity: str, prompt_tokens: int, completion_tokens: int) -> float:
        """The cost of these tokens on model ``identity`` (0 when it is unpriced)."""
        prices = self._prices.get(identity)
        return prices.cost(prompt_tokens, completion_tokens) if prices else 0.0

    @property
    def cost_usd(self) -> float:
        """What the generations of this run cost so far, over the priced models."""
        return sum(
            self.cost_of(identity, u.prompt_tokens, u.completion_tokens)
            for (_, identity), u in self._entries().items()
        )

    @property
    def budget_reached(self) -> bool:
        """Whether ``max_cost_usd`` is set and the cost has reached it."""
        return self.max_cost_usd is not None and self.cost_usd >= self.max_cost_usd

    # ------------------------------------------------------------------ output

    def totals(self) -> StageUsage:
        """Every stage's counts added up."""
        total = StageUsage()
        for u in self._entries().values():
            total.add(u)
        return total

    def _entries(self) -> dict[tuple[str, str], StageUsage]:
        """A consistent copy of the counts per (stage, model)."""
        with self._lock:
            return {k: dataclass_copy(u) for k, u in self._usage.items()}

    def to_dict(self) -> dict[str, Any]:
        """The ledger as ``metrics.json`` keeps it: per stage (in the order stages were
        first used) its models and counts, with ``cost_usd`` where a model of the stage is
        priced (``null`` otherwise); the total; the prices; the budget, whether the cost
        reached it and whether that left requests undispatched (``stopped_by_budget``)."""
        stages: dict[str, dict[str, Any]] = {}
        for (stage, identity), u in self._entries().items():
            entry = stages.setdefault(stage, {"models": [], **asdict(StageUsage())})
            entry["models"].append(identity)
            for name, value in asdict(u).items():
                entry[name] += value
            if identity in self._prices:
                cost = self.cost_of(identity, u.prompt_tokens, u.completion_tokens)
                entry["cost_usd"] = (entry.get("cost_usd") or 0.0) + cost
        priced = bool(self._prices)
        for entry in stages.values():
            entry.setdefault("cost_usd", None)
        return {
            "stages": stages,
            "total": {**asdict(self.totals()), "cost_usd": self.cost_usd if priced else None},
            "prices": {identity: asdict(p) for identity, p in sorted(self._prices.items())},
            "max_cost_usd": self.max_cost_usd,
            "budget_reached": self.budget_reached,
            "stopped_by_budget": self.stopped,
            "counting": COUNTING,
        }

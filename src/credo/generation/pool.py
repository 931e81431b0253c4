"""The model pool: every model a run or a strength study needs, loaded once, closed once.

A run uses models in several *roles*: the model under test, the perturbation writer, the
paraphraser, the LLM judge (judge kernel, CCP's NLI step), the grader of open-ended
answers and, for Le et al., the surprisal scorer. The pool maps each role to a model
spec (a registry name, a ``.gguf`` path, ``openai:<model>``...) plus its options, or to
another role ("the writer is the model under test"). It loads a spec the first time a
role that needs it asks, once per pool however many roles name it (a judge and a grader
naming one model share one server), gives every distinct model one
:class:`~credo.generation.executor.Executor` over the shared cache, and closes what it
loaded. Models handed in (tests, library users with a model already open) are used as
they are and never closed.

Served models are probed (:mod:`credo.generation.probes`): when the pool loads a model
that can be probed (an OpenAI-compatible backend, unless its ``probe`` option is false),
it takes the model's stored probe, or checks that the server answers and probes it once
(a handful of tiny requests) and stores the answers beside the cache; the model then
sets from them what its options left open (one call per sample where the children of a
call break the seed contract, no logprob methods where the server returns none, the
grammar field the server obeys). What deserves a warning is logged.

Prices (``price_prompt_usd_per_mtok``, ``price_completion_usd_per_mtok`` in a role's
options) are taken out of the options before the backend is built, so no backend sees
them and no identity or request key changes; the pool keeps them with the role and hands
them, per model, to its :class:`~credo.generation.ledger.Ledger`, which every executor
records into (requests, samples, tokens and cost per stage; the cost budget).

Executors. ``executor`` (an :class:`~credo.config.ExecutorConfig`) chooses where samples
are generated: ``local`` (this process) or ``ray`` (a
:class:`~credo.generation.ray_executor.RayExecutor` per model: Ray actors each build the
model's backend from a :class:`ModelSource` and the pool's process alone writes the
cache). Either gives the same cache rows; nothing above this layer sees which ran.

This is the only module outside :mod:`credo.models` that loads a model or an embedder
(docs/architecture.md); a Ray actor builds its backend through :meth:`ModelSource.build`,
which is this module's code running in the actor's process.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from credo.config import ExecutorConfig, default_cache_path
from credo.errors import UserError
from credo.generation.executor import ExecutionStats, Executor
from credo.generation.ledger import Ledger, Prices, split_prices
from credo.generation.probes import ProbeStore, probes_path
from credo.generation.store import GenerationStore
from credo.models.base import Model, ServedModel
from credo.models.embedders import Embedder
from credo.models.openai_probe import ServerProbe
from credo.models.weights import MissingWeights, WeightsError

log = logging.getLogger(__name__)

MODEL = "model"
"""The model under test."""
WRITER = "writer"
"""Writes context prefixes (Wu et al., §3) and Le et al.'s perturbations."""
PARAPHRASER = "paraphraser"
"""Writes paraphrases of the question (paraphrase consistency)."""
JUDGE = "judge"
"""The LLM judge at T = 0: answer equivalence (Wu et al., App. D.5), CCP's NLI step, Le et al.'s
rubric."""
GRADER = "grader"
"""Grades open-ended answers (SimpleQA grades, FActScore support)."""
SURPRISAL = "surprisal"
"""Scores a text's token log-probabilities by forced decoding (Le et al., §3.3)."""

ROLE_CHOICE = {
    MODEL: "--model",
    WRITER: "--writer (perturbation.writer)",
    PARAPHRASER: "baselines.paraphraser in the config",
    JUDGE: "--judge (judge.model)",
    GRADER: "grader.model in the config",
    SURPRISAL: "--surprisal-model (surprisal_model)",
}
"""Where a user picks another model for each role: named when a role's model is missing."""

PROBE_STAGE = "probe"
"""The ledger stage of a served model's probe (:mod:`credo.generation.probes`)."""

SMALLEST_EMBEDDED = "smollm2-135m"
"""The embedded model ``make install`` installs (requirements-assets.txt)."""

__all__ = [
    "GRADER",
    "JUDGE",
    "MODEL",
    "PARAPHRASER",
    "PROBE_STAGE",
    "SURPRISAL",
    "WRITER",
    "ModelPool",
    "ModelSource",
    "shared_embedder",
]


def missing_model_message(role: str, exc: WeightsError, choice: str | None = None) -> str:
    """One line for a role whose weights are missing: the role, the model,
    what is missing, the command that installs it and the option that picks another
    (``choice``; default: the role's in :data:`ROLE_CHOICE`)."""
    base = role.split("/")[0]  # a strength run's roles are per model: "writer/<spec>"
    choice = choice or ROLE_CHOICE.get(base, f"the {base} model in the config")
    if not isinstance(exc, MissingWeights):
        return f"the {base} model cannot be used: {exc}; or choose another with {choice}"
    install = f": install it with {exc.install}" if exc.install else ""
    other = SMALLEST_EMBEDDED if exc.model != SMALLEST_EMBEDDED else "openai:<model>"
    return (
        f"the {base} model {exc.model!r} is not installed (it needs {exc.missing}){install};"
        f" or choose another with {choice}, e.g. {choice.split()[0]} {other}"
    )


class _MissingRole(UserError):
    """A role's weights are missing; keeps the error so :meth:`ModelPool.preflight` can
    name the command's own option."""

    def __init__(self, message: str, error: WeightsError) -> None:
        super().__init__(message)
        self.error = error


def shared_embedder(name: str) -> Embedder:
    """The process-wide sentence embedder ``name`` (loaded once per process, offline)."""
    from credo.models.embedders import load_embedder

    return load_embedder(name)


@dataclass(frozen=True)
class ModelSource:
    """How another process (a Ray actor) gets a role's backend: the registry spec and its
    options, built there with :meth:`build`, or a model handed in, shipped whole
    (pickled) when it can be. Pickles by reference to this module, so the process that
    unpickles it imports the pool, not the other way round."""

    spec: str | None = None
    options: tuple[tuple[str, Any], ...] = ()
    model: Model | None = None

    def build(self) -> Model:
        """The backend: the shipped model, or a fresh one from the registry (which loads
        nothing heavy until its first call)."""
        if self.model is not None:
            return self.model
        assert self.spec is not None
        from credo.models.registry import load_model

        return load_model(self.spec, **dict(self.options))


@dataclass(frozen=True)
class _Spec:
    """What plays a role: a spec to load, a model handed in, or another role's model;
    ``prices`` price its tokens (never part of ``options``)."""

    name: str | None = None
    options: tuple[tuple[str, Any], ...] = ()
    model: Model | None = None
    same_as: str | None = None
    prices: Prices | None = None

    @property
    def load_key(self) -> str:
        return json.dumps([self.name, dict(self.options)], sort_keys=True, default=str)


class ModelPool:
    """Models by role over one cache; see the module docstring.

    Parameters
    ----------
    store : GenerationStore or None
        The cache every executor reads and writes; None opens ``cache_path`` (and the
        pool closes it).
    cache_path : path or None
        Where to open the store when ``store`` is None (default: :func:`default_cache_path`).
    seed : int
        The run seed, part of every request key.
    max_block : int
        Most samples in one backend call.
    show_progress : bool
        Draw progress bars.
    embedder : Embedder or None
        Used for every embedder name instead of loading one (tests pass a small one).
    max_cost_usd : float or None
        The cost budget of the pool's ledger (:attr:`ledger`); None: none.
    reach : bool
        Whether served models may be contacted (their server probed when loaded); False
        for a dry run, which builds models only to know their identities.
    executor : ExecutorConfig or None
        Where samples are generated (default: locally, in this process).
    replay : bool
        Read the cache only (``credo adaptive``): every executor is local and fails a
        request it does not find cached instead of calling the model.
    """

    def __init__(
        self,
        store: GenerationStore | None = None,
        *,
        cache_path: str | Path | None = None,
        seed: int = 0,
        max_block: int = 16,
        show_progress: bool = True,
        embedder: Embedder | None = None,
        max_cost_usd: float | None = None,
        reach: bool = True,
        executor: ExecutorConfig | None = None,
        replay: bool = False,
    ) -> None:
        self._owns_store = store is None
        self.replay = replay
        self.reach = reach
        self.store = store if store is not None else GenerationStore(default_cache_path(cache_path))
        self.probes = ProbeStore(probes_path(self.store.path))
        self.seed = seed
        self.max_block = max_block
        self.show_progress = show_progress
        self._embedder = embedder
        self._roles: dict[str, _Spec] = {}
        self._loaded: dict[str, Model] = {}
        self._probed: set[str] = set()  # load keys of served models given their probe
        self._executors: dict[int, Executor] = {}
        self.ledger = Ledger(max_cost_usd)
        self.executor_config = executor or ExecutorConfig()
        self._ray: Any = None  # the RaySession of the first Ray executor
        # models and executors are built once, whichever thread asks first (the gateway
        # decides questions in threads of their own)
        self._building = threading.RLock()

    # ------------------------------------------------------------------ roles

    def assign(
        self,
        role: str,
        spec: str | None = None,
        options: dict[str, Any] | None = None,
        *,
        model: Model | None = None,
        same_as: str | None = None,
    ) -> None:
        """Say what plays ``role``: an open ``model``, a ``spec`` to load with
        ``options``, or (``spec`` None) the model of role ``same_as``. Nothing is loaded
        until the role is used; a role assigned twice keeps its first assignment, so a
        model handed in wins over the config's spec, but takes the prices of the later
        assignment when it has none. Price options are kept apart from the options the
        backend is built with (the module docstring)."""
        options, prices = split_prices(options or {}, f"{role} model_options")
        known = self._roles.get(role)
        if known is not None:
            if known.prices is None and prices is not None and known.model is not None:
                self._roles[role] = _Spec(known.name, known.options, known.model,
                                          known.same_as, prices)
            return
        if model is None and spec is None and same_as is None:
            raise ValueError(f"role {role!r}: give a model, a spec or a role to share")
        self._roles[role] = _Spec(spec, tuple(sorted(options.items())), model, same_as, prices)

    def has(self, role: str) -> bool:
        """Whether ``role`` was assigned."""
        return role in self._roles

    def handed_in(self, role: str) -> bool:
        """Whether ``role`` is played by a model handed in (not loaded from a spec)."""
        spec = self._roles.get(role)
        return spec is not None and spec.model is not None

    def model(self, role: str, *, probe: bool = True) -> Model:
        """The model playing ``role``, built on first use; a served model is probed on
        first use too (``probe`` False: not yet, as :meth:`preflight` builds every role
        before it contacts any server). Missing weights of an embedded model raise
        :class:`~credo.errors.UserError` naming the role."""
        with self._building:
            return self._model(role, probe)

    def _model(self, role: str, probe: bool) -> Model:
        """:meth:`model`, under the building lock."""
        spec = self._spec(role)
        if spec.model is not None:
            return spec.model
        if spec.name is None:
            assert spec.same_as is not None
            return self._model(spec.same_as, probe)
        key = spec.load_key
        if key not in self._loaded:
            from credo.models.registry import load_model

            log.info("loading %s for %s", spec.name, role)
            try:
                self._loaded[key] = load_model(spec.name, **dict(spec.options))
            except WeightsError as exc:
                raise _MissingRole(missing_model_message(role, exc), exc) from exc
        model = self._loaded[key]
        # auto_probe first: isinstance reads every member (a weights hash, for some)
        if (probe and (self.reach or self.replay) and key not in self._probed
                and getattr(model, "auto_probe", False) and isinstance(model, ServedModel)):
            self._use_probe(model, role)
            self._probed.add(key)
        return model

    def probe(self, role: str) -> ServerProbe:
        """Probe the server of ``role``'s model now (its server must answer), store the
        answers if the probe is complete, and return them; :class:`UserError` when the
        model is not a served one."""
        model = self.model(role)
        if not (hasattr(model, "auto_probe") and isinstance(model, ServedModel)):
            raise UserError(
                f"{model.identity} is not a served model: only openai:<model> backends "
                "are probed"
            )
        model.preflight()
        found = model.probe()
        self._count_probe(role, model.identity, found)
        if found.settled:
            self.probes.put(found)
        return found

    def _use_probe(self, model: ServedModel, role: str) -> None:
        """Give a freshly loaded model its stored probe, probing its server first when
        none is stored; log what the model warns about."""
        found = self.probes.get(model.identity)
        if found is None and not self.reach:  # a replay takes a stored probe or none
            return
        if found is None:
            log.info("probing the server of %s", model.identity)
            model.preflight()
            found = model.probe()
            self._count_probe(role, model.identity, found)
            if found.settled:
                self.probes.put(found)
        for warning in model.apply_probe(found):
            log.warning("%s", warning)

    def unprobed(self, roles: list[str]) -> list[tuple[str, Model]]:
        """The served models of ``roles`` (one per model, with its first role) that a run
        would probe: built (nothing contacted), probed automatically, no probe stored."""
        out: dict[int, tuple[str, Model]] = {}
        for role in roles:
            model = self.model(role, probe=False)
            if (getattr(model, "auto_probe", False) and isinstance(model, ServedModel)
                    and self.probes.get(model.identity) is None):
                out.setdefault(id(model), (role, model))
        return list(out.values())

    def _count_probe(self, role: str, identity: str, found: ServerProbe) -> None:
        """Count a probe just sent in the ledger, under stage :data:`PROBE_STAGE`: its
        requests, the samples (choices) its replies held, the calls it sent (every
        attempt, retries included) and the tokens the server reported for all of them,
        at the role's prices (a stored probe sends nothing and counts nothing)."""
        self.ledger.set_prices(identity, self.prices(role), role)
        self.ledger.count(PROBE_STAGE, identity, requests=found.requests,
                          samples=found.choices, generated_samples=found.choices,
                          calls=found.calls or found.replies,
                          prompt_tokens=found.prompt_tokens,
                          completion_tokens=found.completion_tokens)

    def executor(self, role: str) -> Executor:
        """The cached executor of ``role``'s model (one per distinct model), recording
        into the pool's ledger (the role's prices price the model there): a local one, or
        a Ray one when the pool's executor config says ``ray`` (a handed-in model that
        cannot be pickled stays local, with a warning)."""
        with self._building:
            return self._executor(role)

    def _executor(self, role: str) -> Executor:
        """:meth:`executor`, under the building lock."""
        model = self.model(role)
        self.ledger.set_prices(model.identity, self.prices(role), role)
        ex = self._executors.get(id(model))
        if ex is None:
            ray = self.executor_config.kind == "ray" and not self.replay
            ex = self._ray_executor(role, model) if ray else None
            if ex is None:
                ex = Executor(
                    model, self.store, self.seed, self.max_block, self.show_progress, self.ledger
                )
                ex.replay = self.replay
            self._executors[id(model)] = ex
        return ex

    def prices(self, role: str) -> Prices | None:
        """The prices of ``role``'s model: its own, else those of the role it shares."""
        spec = self._spec(role)
        if spec.prices is None and spec.same_as is not None:
            return self.prices(spec.same_as)
        return spec.prices

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Count the executor calls inside the ``with`` under ledger stage ``name``."""
        with self.ledger.stage(name):
            yield

    def source(self, role: str) -> ModelSource:
        """How a worker process builds ``role``'s model (see :class:`ModelSource`)."""
        spec = self._spec(role)
        while spec.model is None and spec.name is None:
            assert spec.same_as is not None
            spec = self._spec(spec.same_as)
        if spec.model is not None:
            return ModelSource(model=spec.model)
        return ModelSource(spec.name, spec.options)

    def _ray_executor(self, role: str, model: Model) -> Executor | None:
        from credo.generation.ray_executor import RayExecutor, RaySession, shippable

        source = self.source(role)
        if source.model is not None and not shippable(source.model):
            log.warning(
                "%s (%s) was handed in and cannot be pickled to Ray workers; it generates"
                " in this process", model.identity, role,
            )
            return None
        if self._ray is None:
            self._ray = RaySession(self.executor_config)
        return RayExecutor(
            model, self.store, self.seed, self.max_block, self.show_progress, self.ledger,
            source=source, session=self._ray,
        )

    def preflight(self, roles: list[str], choices: dict[str, str] | None = None) -> None:
        """Check every model of ``roles`` before any generation: first build
        each one and check what needs no server (an embedded model's weights are on this
        machine, or its packages are installed), then, when the pool may reach servers,
        check that every served model's server answers and give it its probe. Building a
        backend loads nothing heavy. An unknown spec, a bad option, missing weights or an
        unreachable server raise :class:`~credo.errors.UserError` naming the role, so no
        request is sent before every role is known to be there. ``choices`` names, per
        role, the option that picks another model where a command's differs from
        :data:`ROLE_CHOICE`."""
        models: dict[int, tuple[str, Model]] = {}
        for role in roles:
            try:
                model = self.model(role, probe=False)
            except _MissingRole as exc:
                choice = (choices or {}).get(role)
                raise UserError(missing_model_message(role, exc.error, choice)) from exc
            models.setdefault(id(model), (role, model))
        served = {k for k, (_, m) in models.items()
                  if getattr(m, "auto_probe", None) is not None and isinstance(m, ServedModel)}
        for key, (role, model) in models.items():
            if key not in served:
                self._check_local(role, model, (choices or {}).get(role))
        if not self.reach:
            return
        for key in served:
            role, model = models[key]
            model.preflight()
            self.model(role)  # its probe, stored or asked now

    @staticmethod
    def _check_local(role: str, model: Model, choice: str | None = None) -> None:
        """A local model's own check (its weights are here), as a user error naming
        ``role``."""
        check = getattr(model, "preflight", None)
        if not callable(check):
            return
        try:
            check()
        except WeightsError as exc:
            raise UserError(missing_model_message(role, exc, choice)) from exc

    def embedder(self, name: str) -> Embedder:
        """The sentence embedder ``name`` (the one handed in, if any)."""
        return self._embedder if self._embedder is not None else shared_embedder(name)

    def _spec(self, role: str) -> _Spec:
        try:
            return self._roles[role]
        except KeyError:
            raise UserError(
                f"no model for the {role} (set {role}.model in the config, or --{role});"
                f" assigned: {', '.join(self._roles) or 'none'}"
            ) from None

    # ------------------------------------------------------------------ accounting

    @property
    def history(self) -> list[ExecutionStats]:
        """What the last ``execute`` calls of every executor did (:data:`HISTORY` each),
        in order per executor."""
        return [h for ex in self._executors.values() for h in ex.history]

    def total(self, field: str) -> int:
        """Sum of one :class:`ExecutionStats` field over every call of every executor."""
        return sum(getattr(ex.totals, field) for ex in self._executors.values())

    # ------------------------------------------------------------------ lifetime

    def close(self) -> None:
        """Close every executor (a Ray executor's actors), every model the pool loaded,
        Ray if the pool started it, then the store if the pool opened it."""
        try:
            for ex in self._executors.values():
                ex.close()
        finally:
            self._executors.clear()
            for model in self._loaded.values():
                model.close()
            self._loaded.clear()
            if self._ray is not None:
                self._ray.close()
                self._ray = None
            if self._owns_store:
                self.store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

"""Which model plays which role, decided in one place.

Every command asks models in some of six roles: the model under test, the perturbation
writer, the paraphraser, the judge, the grader and the surprisal scorer. A command's
config says which model plays each (a :class:`~credo.config.RoleConfig`: the spec and its
options, the same shape for every role), or that a role shares another's model
(:class:`Same`). The rules of each command are here, as data:

* :func:`run_roles` (``credo run``, ``credo study``, ``credo.run``): the writer defaults to
  the strongest embedded model when the model under test is embedded, else to
  the model under test; the paraphraser to the writer; the judge to the model under test;
  the grader to the judge. A role naming the run's own model shares it.
* :func:`score_roles` (``credo score``): only the judge and the grader, when named.
* :func:`strength_roles` (``credo strength run``): per model under test, its writer and
  judge (each the model itself unless named), and the surprisal scorer.
* :func:`agree_role` (``credo strength agree``): the one model its measure asks.
* :func:`single_role` (``credo probe``, ``credo perturb``): one role, from flags.

:func:`assign_roles` is the one function that hands a role map to the
:class:`~credo.generation.pool.ModelPool`; roles already assigned there (models handed
in) stay.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from credo.config import RoleConfig, RunConfig, StrengthConfig
from credo.errors import UserError
from credo.generation.pool import (
    GRADER,
    JUDGE,
    MODEL,
    PARAPHRASER,
    SURPRISAL,
    WRITER,
    ModelPool,
)
from credo.models.weights import STRONGEST_EMBEDDED, is_embedded_spec

__all__ = [
    "RoleMap",
    "Same",
    "agree_role",
    "assign_roles",
    "judge_role",
    "model_role",
    "run_roles",
    "score_roles",
    "single_role",
    "strength_model",
    "strength_roles",
    "writer_role",
]


@dataclass(frozen=True)
class Same:
    """A role played by the model of another role."""

    role: str


RoleMap = dict[str, RoleConfig | Same]
"""Role name -> the model that plays it, in the order the roles are used."""


def assign_roles(pool: ModelPool, roles: Mapping[str, RoleConfig | Same]) -> None:
    """Assign every role of ``roles`` in ``pool`` (the one place a role is assigned from a
    config). A ``base_url`` on an embedded model is a user error naming the role: the
    one check of it, the model under test's included (a role too)."""
    for role, played in roles.items():
        if isinstance(played, Same):
            pool.assign(role, same_as=played.role)
            continue
        if played.model is None:
            raise UserError(f"the {role} names no model")
        if played.base_url is not None and is_embedded_spec(played.model):
            raise UserError(
                f"the {role} {played.model!r} is embedded: base_url is for served models "
                "(openai:<model>)"
            )
        pool.assign(role, played.model, played.options())


def _shared(role: RoleConfig | None, config: RunConfig, default: str) -> RoleConfig | Same:
    """``role`` itself, or the role it shares: ``default`` when it names no model, the
    model under test when it names the run's own model (one server, whatever its
    options say)."""
    if role is None or role.model is None:
        return Same(default)
    return Same(MODEL) if role.model == config.model else role


def run_roles(config: RunConfig, model_handed_in: bool = False) -> RoleMap:
    """The roles of a run (see the module docstring); ``model_handed_in``: the model under
    test is an open model handed in (then the writer defaults to it)."""
    writer = config.perturbation.writer
    if (writer is None or writer.model is None) and not model_handed_in and is_embedded_spec(
        config.model
    ):
        writer = RoleConfig(model=STRONGEST_EMBEDDED)
    roles: RoleMap = {
        MODEL: config.model_role,
        WRITER: _shared(writer, config, MODEL),
        PARAPHRASER: _shared(config.baselines.paraphraser, config, WRITER),
        JUDGE: _shared(config.judge, config, MODEL),
    }
    roles[GRADER] = Same(JUDGE) if config.grader is None else _shared(config.grader, config, MODEL)
    return roles


def score_roles(config: RunConfig) -> RoleMap:
    """The roles of ``credo score``: there is no model under test; the judge when named,
    the grader when named (else the judge's model)."""
    roles: RoleMap = {}
    if config.judge.model:
        roles[JUDGE] = config.judge
    if config.grader is not None and config.grader.model:
        roles[GRADER] = config.grader
    elif JUDGE in roles:
        roles[GRADER] = Same(JUDGE)
    return roles


def model_role(spec: str) -> str:
    """The pool role of a strength run's model under test ``spec``."""
    return f"{MODEL}/{spec}"


def writer_role(spec: str) -> str:
    """The pool role writing the perturbations of model under test ``spec``."""
    return f"{WRITER}/{spec}"


def judge_role(spec: str) -> str:
    """The pool role rating the perturbations of model under test ``spec`` (Le et al., Fig. 17)."""
    return f"{JUDGE}/{spec}"


def strength_model(role: RoleConfig, options: Mapping[str, Any]) -> RoleConfig:
    """A strength run's model ``role`` with the run's ``model_options`` under its own
    when it is embedded (a strength role takes base_url, label and prices as a
    run's roles do)."""
    if role.model is None or not is_embedded_spec(role.model):
        return role
    return role.model_copy(update={"model_options": {**options, **role.model_options}})


def strength_roles(config: StrengthConfig, surprisal: str | None = None) -> RoleMap:
    """The roles of a strength run (Le et al.): per model under test, the model, its
    writer and its judge (``config.writer`` / ``config.judge``; None = the model itself);
    the surprisal scorer ``surprisal`` (a ``forced:`` spec) when given."""
    roles: RoleMap = {}
    for played in config.models:
        spec = played.model or ""
        roles[model_role(spec)] = strength_model(played, config.model_options)
        for role, other in ((writer_role(spec), config.writer), (judge_role(spec), config.judge)):
            roles[role] = (Same(model_role(spec)) if other is None or other.model is None
                           else strength_model(other, config.model_options))
    if surprisal is not None:
        roles[SURPRISAL] = RoleConfig(model=surprisal)
    return roles


def agree_role(role: str, spec: str, options: Mapping[str, Any]) -> RoleMap:
    """The one role of ``credo strength agree``: the judge (or the surprisal scorer)
    ``spec``, with ``options`` when it is embedded (as in a strength run)."""
    return {role: strength_model(RoleConfig(model=spec), options)}


def single_role(role: str, spec: str, **options: Any) -> RoleMap:
    """One role from a command's flags (``credo probe``, ``credo perturb``): the named
    options (``base_url``, ``label``, ``api_key_env``...) typed, the rest the backend's."""
    named = {k: v for k, v in options.items()
             if k in RoleConfig.model_fields and k != "model_options" and v is not None}
    rest = {k: v for k, v in options.items() if k not in named and v is not None}
    return {role: RoleConfig(model=spec, model_options=rest, **named)}

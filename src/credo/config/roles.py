"""Roles: the model playing each part (writer, paraphraser, judge, grader, surprisal
scorer, and the models under test), one shape in YAML and flags alike."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_serializer,
    model_validator,
)

from credo.config.files import validation_message

ROLE_OPTION_FIELDS = (
    "label", "base_url", "api_key_env", "price_prompt_usd_per_mtok",
    "price_completion_usd_per_mtok", "max_concurrency",
)
"""The options every role may set by name; the backend's own go in ``model_options``."""


class RoleConfig(BaseModel):
    """The model playing one role: the same shape for the writer, the
    paraphraser, the judge, the grader and the surprisal scorer, in YAML and flags alike.
    A bare string is the model spec alone (``writer: smollm2-135m``); a mapping names it
    with its options::

        writer: {model: openai:qwen, base_url: http://127.0.0.1:8000/v1, label: q7b,
                 price_prompt_usd_per_mtok: 0.1, price_completion_usd_per_mtok: 0.4}

    ``base_url`` (one URL, or several replicas), ``label``, ``api_key_env`` and
    ``max_concurrency`` are the served backend's options and the prices the ledger's
    (:mod:`credo.generation.ledger`); ``model_options`` holds the rest (an embedded
    model's ``n_ctx``...). None of them enters a request key (a served model's identity
    is its name and label). ``model`` None: the role's default (each config says which).
    """

    model_config = ConfigDict(extra="forbid")

    model: str | None = Field(
        None, min_length=1, description="the model spec: an embedded name, a .gguf path or "
        "openai:<model>; None = the role's default",
    )
    model_options: dict[str, Any] = Field(
        default_factory=dict, description="the backend's own options (an embedded model's n_ctx, a "
        "served model's timeout...)",
    )
    label: str | None = Field(
        None, min_length=1, description="what a served model's name does not say (a weights "
        "revision): its identity becomes openai:<model>@<label>",
    )
    base_url: str | list[str] | None = Field(
        None, description="a served model's OpenAI-compatible server URL, or a list of replicas of "
        "one model",
    )
    api_key_env: str | None = Field(
        None, min_length=1, description="the environment variable holding a served model's API key "
        "(default OPENAI_API_KEY); a literal key is refused",
    )
    price_prompt_usd_per_mtok: float | None = Field(
        None, ge=0, description="US dollars per million prompt tokens: the ledger's cost and "
        "max_cost_usd read it",
    )
    price_completion_usd_per_mtok: float | None = Field(
        None, ge=0, description="US dollars per million completion tokens (the ledger's cost)",
    )
    max_concurrency: int | None = Field(
        None, ge=1, description="most calls in flight to a served model at once",
    )

    @model_validator(mode="before")
    @classmethod
    def _bare_spec(cls, value: Any) -> Any:
        """A bare string is the model spec alone."""
        return {"model": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _each_option_once(self) -> Self:
        twice = [f for f in ROLE_OPTION_FIELDS
                 if getattr(self, f) is not None and f in self.model_options]
        if twice:
            raise ValueError(f"{twice[0]} is given twice: by name and in model_options")
        return self

    @model_serializer(mode="wrap")
    def _without_unset_options(self, handler: Any) -> Any:
        """The dump leaves out the named options left unset, so a config.yaml reads as it
        did before roles had them."""
        data = handler(self)
        return {k: v for k, v in data.items() if k not in ROLE_OPTION_FIELDS or v is not None}

    def options(self) -> dict[str, Any]:
        """What the model is loaded with: ``model_options`` plus the named options set."""
        named = {f: getattr(self, f) for f in ROLE_OPTION_FIELDS if getattr(self, f) is not None}
        return {**self.model_options, **named}

    @classmethod
    def from_options(cls, model: str | None, options: Mapping[str, Any]) -> RoleConfig:
        """The role of ``model`` given one flat mapping of options (the model under
        test's ``model_options``): the named options (:data:`ROLE_OPTION_FIELDS`)
        typed, the rest the backend's. The values are not checked again: they reach the
        pool as given (:meth:`options` is ``options``), which checks them."""
        named = {f: options.get(f) for f in ROLE_OPTION_FIELDS}
        rest = {k: v for k, v in options.items() if k not in ROLE_OPTION_FIELDS}
        return cls.model_construct(model=model, model_options=rest, **named)

    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> None:
        """Check the named options (:data:`ROLE_OPTION_FIELDS`) of one flat mapping (the
        model under test's ``model_options``) as a role's are checked: ``base_url`` one
        URL or a list, ``label`` and ``api_key_env`` non-empty, prices at least 0,
        ``max_concurrency`` at least 1. A :class:`ValueError` names the first bad one;
        the mapping itself is left as given."""
        named = {f: options[f] for f in ROLE_OPTION_FIELDS if f in options}
        if not named:
            return
        try:
            cls.model_validate(named)
        except ValidationError as e:
            raise ValueError(validation_message(e)) from None

    @property
    def bare(self) -> bool:
        """Whether the role names its model and nothing else (dumped as a bare string)."""
        return self.model is not None and not self.options()



def role_dump(role: RoleConfig | None) -> str | dict[str, Any] | None:
    """A role field's dump: a bare spec as the string it was, else its mapping."""
    if role is None:
        return None
    return role.model if role.bare else role.model_dump()


class JudgeConfig(RoleConfig):
    """An LLM judge at T = 0: answer equivalence for the ``judge`` kernel (Wu et al., App. D.5),
    CCP's NLI step and, unless ``RunConfig.grader`` names another, the grading of
    open-ended answers (SimpleQA-style grades, FActScore support). A role
    (:class:`RoleConfig`: ``model`` None = the run's model) with its sampling setting."""

    max_tokens: int = Field(8, ge=1, description="a verdict is one word")



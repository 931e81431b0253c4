r"""Conformal factuality: which claims of a long answer to keep, with a guarantee.

Mohri & Hashimoto (ICML 2024, "Language Models with Conformal Factuality Guarantees",
arXiv 2402.10978) calibrate one threshold ``tau`` on ``N`` labelled answers (items),
each split into claims with a score (higher = more credible), and keep, in a new answer,
only the claims scoring strictly above ``tau``. The items (calibration and new) are
assumed exchangeable: i.i.d. questions of one distribution, answered and scored by the
same model and method. Notation: an item's claims have scores ``s_j`` and labels
``y_j``; at threshold ``t`` it retains ``R(t) = {j : s_j > t}``; for ``a`` in (0, 1]
the item *satisfies* ``t`` when ``R(t)`` is empty or at least a share ``a`` of it is
correct (``#correct(R(t)) >= a |R(t)|``); ``a = 1``: every retained claim is correct.

**Nonconformity** (:func:`nonconformity`). ``r(a) = inf {t : the item satisfies every
t' >= t}``. ``R(t)`` only changes at the scores, so ``r(a)`` is computed on the distinct
scores ``u_1 > u_2 > ... > u_K``: at ``t = u_1`` nothing is retained (satisfied); at
``t = u_{k+1}`` the claims of the top ``k`` score groups are; at ``t = -inf`` all are. If
including group ``k`` first breaks the condition, ``r(a) = u_k`` (the item satisfies
every ``t >= u_k`` and fails on ``[u_{k+1}, u_k)``); if no prefix breaks it,
``r(a) = -inf`` (every claim can be kept). For ``a = 1`` the first breaking group is the
one holding the highest-scored wrong claim: ``r = max {s_j : y_j wrong}`` (``-inf`` when
none is wrong), the paper's score. Properties: (i) ``t >= r(a)`` implies that the item
satisfies ``t`` (by definition: every ``t' >= r(a)`` is satisfied, the infimum is
attained because ``R`` is constant on ``[u_{k+1}, u_k)``); (ii) ``r(a)`` is
non-increasing in ``a`` (a smaller ``a`` is a weaker condition, so the set of satisfied
thresholds only grows). The "every stricter threshold too" in the definition is what
makes (i) hold for ``a < 1``, where the share correct of ``R(t)`` need not be monotone
in ``t``: the infimum of the satisfied thresholds alone would not do. The share is
compared as ``#correct >= a |R| - 1e-9 |R|`` so that, e.g., 7 of 10 meets ``a = 0.7``
despite ``0.7 * 10 = 7.000000000000001`` in floating point (the same test calibrates
and evaluates).

**Marginal procedure** (``delta=None``; the paper's Theorem 3.1). With ``r_1..r_N`` the
calibration items' ``r(a)``, ``tau`` = the ``k``-th smallest, ``k = ceil((N + 1)(1 -
alpha))`` (computed exactly: ``alpha`` is read as the decimal it prints as). By
exchangeability ``P(r_{N+1} <= tau) >= k / (N + 1) >= 1 - alpha``, ties included; by
(i), P(the new item's retained claims are at least a share ``a`` correct) ``>= 1 -
alpha``, over the calibration and the new item together. Without ties among the
``r_i`` (continuous scores, and at most one item with no wrong claim),
``P(r_{N+1} <= tau) <= 1 - alpha + 1/(N + 1)``; for ``a = 1`` that is the probability of
the event itself, so the realised factuality lies in ``[1 - alpha, 1 - alpha + 1/(N +
1)]``. For ``a < 1`` only the lower bound is promised (an item may satisfy ``tau <
r(a)``). When ``k > N`` (``N < 1/alpha - 1``) there is no threshold: nothing is kept,
and the certificate says how many items would be needed.

**High-probability variant** (``delta`` given; not in the paper). With probability at
least ``1 - delta`` over the calibration draw, the miscoverage of the returned ``tau``,
``P_new(the new item fails tau)``, is at most ``alpha``. Learn then Test (Angelopoulos
et al. 2021) by fixed-sequence testing over candidate thresholds from strict to loose,
with the monotone loss ``L_i(t) = 1[r_i(a) > t]`` (which bounds ``1[item i fails t]``
by (i)) and the exact binomial p-value of ``H_t: P(r > t) > alpha``,
``P(Binom(N, alpha) <= #{i : r_i > t})`` (:func:`credo.evaluate.binomial.binomial_p_value`
and its fixed-sequence stop, shared with ``certify``); the loosest threshold before the
first test with p > delta is returned. The counts change only at the ``r_i``, so testing
the distinct ``r_i`` from the highest down is the same as testing every real ``t``.
Validity, ties included: ``R(t) = P(r > t)`` is non-increasing and right-continuous; let
``t* = inf {t : R(t) <= alpha}``. A returned ``tau`` is bad only if ``tau < t*``; then
the test at some ``t`` in ``[tau, t*)`` passed, with ``#{r_i > t} >= #{r_i >= t*}``, a
``Binom(N, q)`` count with ``q = P(r >= t*) >= alpha``, whose p-value is at most
``delta`` with probability at most ``delta``. (The result is the order statistic of
training-conditional conformal prediction, Vovk 2012: ``tau`` = the ``(N - k*)``-th
smallest ``r_i`` with ``k* = max {k : P(Binom(N, alpha) <= k) <= delta}``.) Nothing is
certified when even the strictest candidate fails, ``(1 - alpha)^N > delta``.

**Ties.** No noise is added and the threshold is deterministic: both guarantees hold with
tied scores (claims are kept strictly above ``tau``, and the rank arguments above allow
ties); ties only make the marginal procedure more conservative (its upper bound needs
untied ``r_i``). The paper adds a draw of N(0, 0.001) to every claim score to break ties
(the ``noise`` field of its files); ``tie_break="noise"`` adds such a named per-claim
value to the score, as the paper does. Items whose claims are all correct have ``r =
-inf`` and stay tied whatever the noise: where more than ``(1 - alpha)(N + 1)`` of them
exist, everything is kept and the realised factuality is their share, above the upper
bound.
"""

from __future__ import annotations

import functools
import json
import math
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np

from credo.evaluate.binomial import binomial_p_value, check_level, items_needed, leading_run
from credo.tasks.claims import Claim, ClaimItem, score_names
from credo.ties import settle_scores

__all__ = [
    "PROCEDURES",
    "Claim",
    "ClaimCertificate",
    "ClaimItem",
    "FilteredItem",
    "apply_claim_certificate",
    "certify_claims",
    "conformal_threshold",
    "ltt_threshold",
    "nonconformity",
    "satisfies",
]

PROCEDURES = ("conformal", "ltt")
ArrayLike = Sequence[float] | np.ndarray
_SHARE_TOL = 1e-9


@dataclass(frozen=True)
class ClaimCertificate:
    """A claim threshold from :func:`certify_claims`, or the statement that none exists.

    ``threshold``: keep the claims scoring strictly above it (``-inf``: keep every claim;
    None: keep none); ``alpha``, ``a``, ``delta`` (None for the marginal procedure):
    the guarantee (the module :mod:`credo.evaluate.claims`); ``n``: calibration items;
    ``procedure``: ``"conformal"`` (marginal, Mohri & Hashimoto 2024) or ``"ltt"`` (with probability
    ``1 - delta``); ``method``: the claim score it thresholds (the file's key
    ``score``; ``score=`` and ``.score`` are its deprecated names), plus
    ``tie_break``'s named value when set; ``rank``: the order statistic of the ``r_i``
    used (1-based, None when uncertified); ``p_value``: the binomial p-value of the
    returned threshold (``ltt`` only); ``retained``: share of the calibration claims it
    keeps;
    ``n_needed``: how many calibration items would give a threshold (when there is
    none; None there too when no number would); ``message``: one sentence for people.
    """

    threshold: float | None
    alpha: float
    a: float
    delta: float | None
    n: int
    procedure: str
    method: str | None = None
    tie_break: str | None = None
    rank: int | None = None
    p_value: float | None = None
    retained: float = 0.0
    n_needed: int | None = None
    message: str = ""
    settings: dict[str, Any] | None = None
    """What the guarantee holds for besides the data, when the certificate was made on a
    run (``credo certify RUN_DIR --claims``: the model, task, sampling, n, m, claim
    splitter, ...; :func:`credo.pipeline.certificate.claim_settings`), compared by
    ``credo run --certificate`` before its first model call. None for a certificate made
    on a claim file (``credo certify-claims``), which binds only the score's name."""

    @property
    def certified(self) -> bool:
        return self.threshold is not None

    @property
    def score(self) -> str | None:
        """The claim score's former name (:attr:`method`); deprecated since credo 0.1.0,
        it goes in 0.2.0 (a certificate file keeps the key ``score``)."""
        warnings.warn(_SCORE_RENAMED, DeprecationWarning, stacklevel=2)
        return self.method

    def keep(self, scores: ArrayLike) -> np.ndarray:
        """Boolean array: which of ``scores`` are kept (``score > threshold``)."""
        s = np.asarray(scores, dtype=float)
        if self.threshold is None:
            return np.zeros(s.shape, dtype=bool)
        return s > self.threshold

    def apply(self, items: Sequence[ClaimItem]) -> list[FilteredItem]:
        """:func:`apply_claim_certificate` of this certificate."""
        return apply_claim_certificate(self, items)

    def to_dict(self) -> dict[str, Any]:
        """The fields as JSON values; a threshold of ``-inf`` is written ``"-inf"`` (JSON
        has no infinity, and null means no threshold); :attr:`method` under its file key
        ``score``, in its place (the files are byte-identical to those before the rename)."""
        out = {_FILE_KEYS.get(k, k): v for k, v in asdict(self).items()}
        if out["threshold"] is not None and math.isinf(out["threshold"]):
            out["threshold"] = "-inf"
        return out

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), allow_nan=False, **kwargs)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ClaimCertificate:
        """The certificate in ``data`` (keys that are no field are ignored); a
        ValueError names the first field that is missing or of the wrong kind."""
        if not isinstance(data, dict):
            raise ValueError(f"a claim certificate is a JSON object, not {type(data).__name__}")
        missing = [k for k in ("threshold", "alpha", "a", "delta", "n", "procedure")
                   if k not in data]
        if missing:
            raise ValueError(f"not a claim certificate: no {', '.join(missing)}")
        fields = {k: data[key] for k in cls.__dataclass_fields__
                  if (key := _FILE_KEYS.get(k, k)) in data}
        if fields["threshold"] == "-inf":
            fields["threshold"] = -math.inf
        _check_fields(fields)
        return cls(**fields)

    @classmethod
    def from_json(cls, text: str) -> ClaimCertificate:
        return cls.from_dict(json.loads(text))


_FILE_KEYS = {"method": "score"}
"""A :class:`ClaimCertificate` field -> its key in the file, where they differ (the
claim score kept its file key when the field became ``method``)."""

_SCORE_RENAMED = ("ClaimCertificate.score is now ClaimCertificate.method (the claim score "
                  "it thresholds; its procedure is .procedure); deprecated since credo "
                  "0.1.0, it goes in 0.2.0")


def _takes_score_keyword(cls: type[ClaimCertificate]) -> None:
    """Let ``cls(...)`` take the claim score by its former keyword ``score=`` (with a
    :class:`DeprecationWarning`) beside the dataclass's own ``method=``: the generated
    ``__init__`` wrapped, not rewritten field by field."""
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self: ClaimCertificate, *args: Any, score: str | None = None,
                 **kwargs: Any) -> None:
        if score is not None:
            if kwargs.get("method") is not None or len(args) > 6:
                raise TypeError("method= and score= (its deprecated name) are both given")
            warnings.warn(_SCORE_RENAMED, DeprecationWarning, stacklevel=2)
            kwargs["method"] = score
        init(self, *args, **kwargs)

    cls.__init__ = __init__  # type: ignore[method-assign]


_takes_score_keyword(ClaimCertificate)


@dataclass(frozen=True)
class FilteredItem:
    """One item after a certificate: its retained and removed claims, in the item's order."""

    id: str
    prompt: str
    retained: tuple[Claim, ...]
    removed: tuple[Claim, ...]
    score: str | None = None
    """The certificate's score name."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON row: id, prompt, and the text and the certificate's score of each
        retained and removed claim (with its label when known)."""
        return {"id": self.id, "prompt": self.prompt,
                "retained": [_claim_row(c, self.score) for c in self.retained],
                "removed": [_claim_row(c, self.score) for c in self.removed]}


def certify_claims(
    items: Sequence[ClaimItem],
    alpha: float = 0.1,
    *,
    a: float = 1.0,
    delta: float | None = None,
    score: str | None = None,
    tie_break: str | None = None,
) -> ClaimCertificate:
    """Calibrate a claim threshold on labelled ``items`` (the procedures and their
    guarantees: the module :mod:`credo.evaluate.claims`).

    ``alpha``: the allowed share of new items whose retained claims fail; ``a``: the
    share of retained claims that must be correct (1: all); ``delta``: None for the
    paper's marginal guarantee, else the allowed probability that the calibration draw
    misleads (Learn then Test); ``score``: which claim score to threshold (default: the
    only one the claims have); ``tie_break``: the name of a per-claim value added to the
    score (the paper's ``noise``). Every claim of every item must be labelled.

    Raises ValueError for a level outside (0, 1), no item, an unlabelled claim, or a
    score a claim lacks; the message names the item.
    """
    alpha = check_level(alpha, "alpha")
    a = _check_share(a)
    if delta is not None:
        delta = check_level(delta, "delta")
    if not items:
        raise ValueError("certify_claims needs at least one calibration item")
    score = _pick_score(items, score)
    r = np.array([nonconformity(*_labelled(item, score, tie_break), a=a) for item in items])
    if delta is None:
        t, rank = conformal_threshold(r, alpha)
        p = None
    else:
        t, p, rank = _ltt(r, alpha, delta)
    return _certificate(items, r, alpha, a, delta, score, tie_break, t, rank, p)


def apply_claim_certificate(
    cert: ClaimCertificate, items: Sequence[ClaimItem]
) -> list[FilteredItem]:
    """Keep, in every item, the claims scoring strictly above the certificate's threshold
    (its ``score`` plus its ``tie_break``); labels are not needed. Raises ValueError
    naming the first item with a claim that lacks the score."""
    out = []
    for item in items:
        keep = cert.keep(_scores(item, cert.method, cert.tie_break))
        out.append(FilteredItem(
            item.id, item.prompt,
            tuple(c for c, k in zip(item.claims, keep, strict=True) if k),
            tuple(c for c, k in zip(item.claims, keep, strict=True) if not k), cert.method))
    return out


# --------------------------------------------------------------------------- the formulas


def nonconformity(scores: ArrayLike, correct: Sequence[bool] | np.ndarray, a: float = 1.0) -> float:
    """``r(a)`` of one item (module docstring): the lowest threshold from which up every
    threshold keeps a retained set at least a share ``a`` correct; for ``a = 1`` the
    highest score of a wrong claim; ``-inf`` when every claim can be kept."""
    s = np.asarray(scores, dtype=float)
    c = np.asarray(correct, dtype=bool)
    if s.shape != c.shape or s.ndim != 1:
        raise ValueError(f"one label per score: shapes {s.shape} and {c.shape}")
    if not np.all(np.isfinite(s)):
        raise ValueError("claim scores must be finite (no NaN or infinity)")
    if s.size == 0:
        return -math.inf
    order = np.argsort(-s, kind="stable")
    ss = s[order]
    last = np.r_[ss[1:] != ss[:-1], True]  # the last claim of each group of tied scores
    kept = np.arange(1, s.size + 1)[last]
    right = np.cumsum(c[order])[last]
    fails = np.nonzero(~satisfies(right, kept, a))[0]
    return float(ss[last][fails[0]]) if fails.size else -math.inf


def satisfies(correct: ArrayLike, retained: ArrayLike, a: float) -> np.ndarray:
    """Whether ``correct`` correct claims among ``retained`` retained meet the share
    ``a`` (an empty retained set does); one tolerance (``1e-9`` per claim) for
    calibration and evaluation alike."""
    k = np.asarray(correct, dtype=float)
    m = np.asarray(retained, dtype=float)
    return (m == 0) | (k >= a * m - _SHARE_TOL * m)


def conformal_threshold(r: ArrayLike, alpha: float) -> tuple[float | None, int | None]:
    """The ``ceil((N + 1)(1 - alpha))``-th smallest of ``r`` and that rank, or
    ``(None, None)`` when the rank exceeds ``N`` (Mohri & Hashimoto 2024, Thm 3.1)."""
    values = np.sort(np.asarray(r, dtype=float))
    rank = _conformal_rank(values.size, check_level(alpha, "alpha"))
    if rank > values.size:
        return None, None
    return float(values[rank - 1]), rank


def ltt_threshold(r: ArrayLike, alpha: float, delta: float) -> tuple[float | None, float | None]:
    """The threshold certified with probability ``1 - delta`` (module docstring) and its
    binomial p-value, or ``(None, None)``."""
    t, p, _ = _ltt(np.asarray(r, dtype=float), check_level(alpha, "alpha"),
                   check_level(delta, "delta"))
    return t, p


def _ltt(
    r: np.ndarray, alpha: float, delta: float
) -> tuple[float | None, float | None, int | None]:
    """Fixed-sequence testing over the distinct ``r_i``, highest first: at ``t``, the
    ``#{r_i > t}`` losses among ``N`` items give the p-value of ``P(r > t) > alpha``."""
    n = r.size
    grid = np.unique(r)[::-1]  # strict to loose
    losses = n - np.searchsorted(np.sort(r), grid, side="right")
    p = _p_values(n, alpha)[losses]
    run = leading_run(p <= delta)
    if run == 0:
        return None, None, None
    t = float(grid[run - 1])
    return t, float(p[run - 1]), int(n - losses[run - 1])


@lru_cache(maxsize=256)
def _p_values(n: int, alpha: float) -> np.ndarray:
    """The binomial p-value for each loss count ``0..n`` among ``n`` items, read-only
    (one scipy call per ``(n, alpha)``: repeated calibrations on splits reuse it)."""
    p = binomial_p_value(np.arange(n + 1), np.full(n + 1, n), alpha)
    p.setflags(write=False)
    return p


@lru_cache(maxsize=1024)
def _conformal_rank(n: int, alpha: float) -> int:
    """``ceil((n + 1)(1 - alpha))`` in exact arithmetic on ``alpha``'s printed decimal
    (0.1 is 1/10, not 0.1000000000000000055...)."""
    return math.ceil((n + 1) * (1 - Fraction(repr(float(alpha)))))


def _conformal_needed(alpha: float) -> int:
    """Fewest ``N`` with ``ceil((N + 1)(1 - alpha)) <= N``."""
    n = max(1, math.floor(1 / alpha) - 2)
    while _conformal_rank(n, alpha) > n:
        n += 1
    return n


# --------------------------------------------------------------------------- the certificate


def _certificate(items, r, alpha, a, delta, score, tie_break, t, rank, p) -> ClaimCertificate:
    n = int(r.size)
    procedure = "conformal" if delta is None else "ltt"
    event = ("every retained claim is correct" if a == 1.0
             else f"at least {a:g} of the retained claims are correct")
    if t is None:
        needed = _conformal_needed(alpha) if delta is None else items_needed(0.0, alpha, delta)
        why = (f"ceil((N + 1)(1 - alpha)) = {_conformal_rank(n, alpha)} exceeds N = {n}"
               if delta is None else f"(1 - alpha)^N = {(1 - alpha) ** n:.3g} exceeds delta")
        msg = (f"{procedure}: no threshold at alpha = {alpha:g}: {why}; keep no claim; "
               f"at least {needed} calibration items are needed.")
        return ClaimCertificate(None, alpha, a, delta, n, procedure, score, tie_break,
                                None, None, 0.0, needed, msg)
    kept = total = 0
    for item in items:
        s = _scores(item, score, tie_break)
        kept += int(np.sum(s > t))
        total += s.size
    share = kept / total if total else 1.0
    keep = "keep every claim" if math.isinf(t) else f"keep claims scoring > {t:.6g}"
    failing = ("a retained claim is wrong" if a == 1.0
               else f"fewer than {a:g} of its retained claims are correct")
    bound = (f"P({event} in a new item) >= {1 - alpha:g}" if delta is None else
             f"with probability >= {1 - delta:g} over the calibration draw, P(a new item "
             f"fails: {failing}) <= {alpha:g}")
    msg = (f"{procedure}: {keep}; {bound}; {n} exchangeable calibration items, "
           f"{share:.1%} of their claims kept.")
    return ClaimCertificate(t, alpha, a, delta, n, procedure, score, tie_break, rank, p,
                            share, None, msg)


# --------------------------------------------------------------------------- inputs


def _pick_score(items: Sequence[ClaimItem], score: str | None) -> str | None:
    """``score``, or the one score every claim has; None when no item has a claim."""
    names = score_names(items)
    if score is not None:
        return score
    if not any(item.claims for item in items):
        return None
    if len(names) != 1:
        raise ValueError("name the claim score to threshold (score=..., --score): the "
                         "claims have "
                         + (f"{len(names)}: {', '.join(names)}" if names else "none in common"))
    return names[0]


def _scores(item: ClaimItem, score: str | None, tie_break: str | None) -> np.ndarray:
    out = np.empty(len(item.claims))
    if score is None and item.claims:  # a certificate calibrated on items without claims
        raise ValueError(f"{item.source or f'item {item.id!r}'}: the certificate names no "
                         "claim score to threshold")
    for j, claim in enumerate(item.claims):
        for name in (score, tie_break):
            if name is not None and name not in claim.scores:
                where = item.source or f"item {item.id!r}"
                raise ValueError(f"{where}: claim {j + 1} has no score {name!r} (it has: "
                                 f"{', '.join(sorted(claim.scores)) or 'none'})")
        out[j] = claim.scores[score] + (0.0 if tie_break is None else claim.scores[tie_break])
    if not np.all(np.isfinite(out)):
        raise ValueError(f"{item.source or f'item {item.id!r}'}: scores must be finite")
    return settle_scores(out)  # claims scored equal within rounding tie at the threshold


def _labelled(item: ClaimItem, score: str | None, tie_break: str | None):
    unknown = [j + 1 for j, c in enumerate(item.claims) if c.correct is None]
    if unknown:
        where = item.source or f"item {item.id!r}"
        raise ValueError(f"{where}: claim {unknown[0]} has no label; calibration needs every "
                         f"claim labelled ({len(unknown)} unlabelled in this item)")
    return _scores(item, score, tie_break), np.array([bool(c.correct) for c in item.claims],
                                                     dtype=bool)


def _check_fields(fields: dict[str, Any]) -> None:
    """The kinds a certificate's fields must have (read back from a file)."""
    t = fields["threshold"]
    if t is not None and not (_real(t) or t == -math.inf):
        raise ValueError(f"threshold must be a number, \"-inf\" or null; got {t!r}")
    for name in ("alpha", "a"):
        if not _real(fields[name]) or not 0.0 < fields[name] <= 1.0:
            raise ValueError(f"{name} must be a number in (0, 1]; got {fields[name]!r}")
    if fields["delta"] is not None and not _real(fields["delta"]):
        raise ValueError(f"delta must be a number or null; got {fields['delta']!r}")
    if isinstance(fields["n"], bool) or not isinstance(fields["n"], int) or fields["n"] < 0:
        raise ValueError(f"n must be a count; got {fields['n']!r}")
    if fields["procedure"] not in PROCEDURES:
        raise ValueError(f"procedure must be one of {', '.join(PROCEDURES)}; got "
                         f"{fields['procedure']!r}")
    for field in ("method", "tie_break"):  # named by their file keys
        if fields.get(field) is not None and not isinstance(fields[field], str):
            raise ValueError(f"{_FILE_KEYS.get(field, field)} must be a score name or null; "
                             f"got {fields[field]!r}")
    if fields.get("settings") is not None and not isinstance(fields["settings"], dict):
        raise ValueError(f"settings must be an object or null; got {fields['settings']!r}")


def _check_share(a: float) -> float:
    a = float(a)
    if not 0.0 < a <= 1.0:
        raise ValueError(f"a must lie in (0, 1]; got {a!r}")
    return a


def _real(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _claim_row(c: Claim, score: str | None) -> dict[str, Any]:
    row: dict[str, Any] = {"text": c.text}
    if score is not None:
        row["score"] = c.scores[score]
    if c.correct is not None:
        row["correct"] = c.correct
    return row

"""Selective risk control: a score threshold certified on a labelled calibration set.

Given ``N`` calibration items, each with a credibility score ``s_i`` (higher = more
credible; negate an uncertainty such as semantic entropy first) and the correctness
``c_i`` of the answer credo would give, :func:`certify` chooses a threshold ``t`` and
answers only items with ``s >= t``. Three guarantees, each under the one assumption that
the calibration items and the new items are exchangeable (e.g. i.i.d. draws from one
distribution of questions, one model, one method):

- ``method="ltt"`` (default): Learn then Test (Angelopoulos, Bates, Candès, Jordan & Lei
  2021, "Learn then Test: Calibrating predictive algorithms to achieve risk control"),
  fixed-sequence testing with a selection split. With probability at least ``1 - delta``
  over the calibration draw, the selective risk of the returned threshold,
  ``R(t) = P(wrong | s >= t)`` on new items, is at most ``alpha``. A random share
  ``select_fraction`` of the calibration items orders the candidate thresholds (the one
  whose projected p-value is smallest first, then every looser one, strictest to
  loosest); the other items test ``H_t: R(t) > alpha`` along that order with the exact
  binomial p-value ``P(Binom(m, alpha) <= k)`` (``k`` errors among ``m`` accepted
  items) and stop at the first test that fails (p > delta). Every hypothesis rejected
  before the stop is rejected at level ``delta`` jointly (fixed-sequence testing controls
  the family-wise error rate because the order does not depend on the test items), so
  the loosest of them is certified. Nothing beyond exchangeability is assumed: not that
  P(correct | s) rises with ``s``, not that scores are untied.
- ``method="sgr"``: Selection with Guaranteed Risk (Geifman & El-Yaniv 2017, "Selective
  classification for deep neural networks", Algorithm 1): a binary search over the
  sorted scores, ``ceil(log2 N)`` binomial tests each at level ``delta / ceil(log2 N)``
  (a union bound); the loosest threshold that passed is returned. Same guarantee as
  ``ltt``; the union bound over data-chosen thresholds is exact for untied (continuous)
  scores, where the items above an order statistic are i.i.d. given it.
- ``method="fixed-sequence"``: plain Learn-then-Test fixed-sequence over every distinct
  score from the highest down, each at level ``delta``, all calibration items testing.
  Valid as ``ltt`` but nearly powerless: the first thresholds accept one or two items,
  whose p-value is at least ``(1 - alpha)^m``, so the sequence usually stops at once
  (Benchmarks, "Certified thresholds").
- ``method="crc"``: conformal risk control (Angelopoulos, Bates, Fisch, Lei & Schuster
  2022, "Conformal risk control") with the loss ``L_i(t) = 1[s_i >= t and c_i wrong]``:
  the loosest ``t`` with ``(errors accepted at t + 1) / (N + 1) <= alpha``. Guarantee in
  expectation over calibration and new item together: ``E[P(s >= t and wrong)] <= alpha``,
  the expected share of answered-and-wrong items among *all* items (not among the
  answered ones, and not with high probability); ``delta`` plays no part.

The binomial tail is the exact one (``scipy.stats.binom``); scores need not lie in [0, 1].
When no threshold can be certified (too few items, or even the best-scored items err too
often), :func:`certify` returns a :class:`Certificate` with ``threshold=None``, a message
saying so, and ``n_needed``: about how many calibration items would be needed at the
error rates observed. It never returns a threshold that was not certified.

:func:`credo.evaluate.coverage.coverage_at_risk` estimates, from one run's labelled
items, the coverage the procedure would certify on new data: repeated random
calibration/test splits.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from credo.evaluate.binomial import (
    binomial_p_value,
    check_level,
    items_needed,
    projected_p_value,
)
from credo.evaluate.coverage import CoverageAtRisk, coverage_at_risk
from credo.evaluate.thresholds import (
    METHODS,
    SELECT_FRACTION,
    as_scores,
    certified_threshold,
    check_inputs,
    check_method,
    ladder,
)

__all__ = ["METHODS", "PROCEDURE_METHODS", "Certificate", "CoverageAtRisk", "Decide",
           "binomial_p_value", "certify", "certify_procedure", "coverage_at_risk",
           "items_needed"]
# CoverageAtRisk and coverage_at_risk live in credo.evaluate.coverage, the binomial test in
# credo.evaluate.binomial; their names stay importable from here, where they were first.

ArrayLike = Sequence[float] | np.ndarray

Decide = Callable[[float, np.ndarray], tuple[np.ndarray, np.ndarray]]
"""``decide(t, idx) -> (accepted, wrong)``: for the calibration items ``idx``, which ones
a procedure run at threshold ``t`` accepts, and whether the answer it gives each is wrong."""

PROCEDURE_METHODS = ("ltt", "fixed-sequence")
"""The procedures :func:`certify_procedure` runs (both test thresholds in a fixed order)."""

POWER_DRAWS = 40
"""Resampled calibration sets per size when estimating the items needed (:func:`_n_needed`)."""

POWER = 0.8
"""The share of those sets that must certify (the power a study is usually sized for)."""

MAX_NEEDED_FACTOR = 64
"""The items-needed search stops at this many times the calibration set (at least 10,000)."""


FILE_KEYS = {"procedure": "method"}
"""A :class:`Certificate` field written under another key in a certificate file (the
file's keys stay as they were: files are byte-identical and old ones read)."""


@dataclass(frozen=True)
class Certificate:
    """A threshold certified by :func:`certify`, or the statement that none could be.

    ``threshold``: answer items with ``score >= threshold`` (None: answer none);
    ``coverage``: share of the ``n`` calibration items accepted; ``risk``: their error
    rate (None when none is accepted); ``n_accepted``; ``p_value``: the binomial p-value of
    the certified threshold on the items that tested it (None for ``crc`` or when
    uncertified); ``n_needed``: about how many calibration items would certify something
    at the observed error rates (set only when ``threshold`` is None; None there too when
    no number of items would); ``message``: one sentence for people; ``procedure``: the
    procedure that certified it (``ltt``, ``sgr``, ``fixed-sequence``, ``crc``), written
    ``method`` in a certificate file as before (:data:`FILE_KEYS`).
    """

    threshold: float | None
    coverage: float
    alpha: float
    delta: float | None
    n: int
    procedure: str
    n_accepted: int = 0
    risk: float | None = None
    p_value: float | None = None
    n_needed: int | None = None
    message: str = ""

    @property
    def certified(self) -> bool:
        return self.threshold is not None

    @property
    def method(self) -> str:
        """The procedure's former name (:attr:`procedure`); deprecated since credo 0.1.0,
        it goes in 0.2.0 (a certificate file keeps the key ``method``)."""
        import warnings

        warnings.warn("Certificate.method is now Certificate.procedure (the scoring "
                      "method is the run certificate's); deprecated since credo 0.1.0, it "
                      "goes in 0.2.0", DeprecationWarning, stacklevel=2)
        return self.procedure

    def accept(self, scores: ArrayLike) -> np.ndarray:
        """Boolean array: which of ``scores`` are answered (``score >= threshold``)."""
        s = as_scores(scores)
        if self.threshold is None:
            return np.zeros(s.shape, dtype=bool)
        return s >= self.threshold

    def to_dict(self) -> dict[str, Any]:
        """The fields as a certificate file holds them, in order: the procedure under
        its file key ``method`` (:data:`FILE_KEYS`)."""
        return {FILE_KEYS.get(k, k): v for k, v in asdict(self).items()}

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), allow_nan=False, **kwargs)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Certificate:
        """The certificate in ``data`` (:meth:`to_dict`'s keys; ``procedure`` is read
        too); keys that are not fields (run settings written next to it) are ignored."""
        fields = {k: data[FILE_KEYS.get(k, k)] for k in cls.__dataclass_fields__
                  if FILE_KEYS.get(k, k) in data}
        if "procedure" not in fields and "procedure" in data:
            fields["procedure"] = data["procedure"]
        return cls(**fields)

    @classmethod
    def from_json(cls, text: str) -> Certificate:
        return cls.from_dict(json.loads(text))


def certify(
    scores: ArrayLike,
    correct: ArrayLike,
    alpha: float = 0.1,
    delta: float = 0.1,
    method: str = "ltt",
    *,
    select_fraction: float = SELECT_FRACTION,
    seed: int = 0,
    needed: bool = True,
) -> Certificate:
    """Certify a threshold whose selective risk is at most ``alpha`` (the procedures and
    their guarantees: the module :mod:`credo.evaluate.certify`).

    ``scores``: one credibility score per calibration item (higher = answer more
    readily); ``correct``: 0/1 or bool correctness of each item's answer; ``alpha``: the
    risk level; ``delta``: the allowed probability that the calibration draw misleads;
    ``method``: ``"ltt"``, ``"sgr"``, ``"fixed-sequence"`` or ``"crc"``;
    ``select_fraction`` and ``seed``: the share of items that orders the thresholds in
    ``ltt`` and the seed of that random split (the certificate is reproducible);
    ``needed`` False: when nothing is certified, skip estimating how many items would be
    (``n_needed`` None; a resampling search of some tens of milliseconds, which a loop
    over many calibration sets need not pay).

    Assumes the calibration items and future items are exchangeable.
    """
    s, wrong = check_inputs(scores, correct)
    alpha = check_level(alpha, "alpha")
    delta = check_level(delta, "delta")
    check_method(method, select_fraction)
    t, p = certified_threshold(s, wrong, alpha, delta, method, select_fraction, seed)
    return _certificate(s, wrong, alpha, None if method == "crc" else delta, method, t, p,
                        select_fraction if needed else None)


def certify_procedure(
    scores: ArrayLike,
    correct: ArrayLike,
    decide: Decide,
    alpha: float = 0.1,
    delta: float = 0.1,
    method: str = "ltt",
    *,
    select_fraction: float = SELECT_FRACTION,
    seed: int = 0,
    what: str = "the procedure",
) -> Certificate:
    """Learn then Test over a procedure whose decisions depend on the threshold (the
    adaptive decision rule stops sampling where the score's side of ``t`` is settled, so
    what it accepts at ``t`` is not ``s >= t`` of one fixed score).

    The hypotheses are the thresholds ``t`` of a grid, ``H_t``: the selective risk of the
    procedure run at ``t`` exceeds ``alpha``; the loss at ``t`` is ``decide(t, idx)``'s:
    the items it accepts and whether their answers are wrong. ``method="ltt"``: the grid
    is the distinct ``scores`` (the full recipe's, one per item, ``correct`` their
    answers' correctness) of a random ``select_fraction`` of the items (``seed``), which
    also order it as :func:`certify` does (the smallest projected p-value first, then
    every lower threshold, strictest to loosest); the other items test along that order
    with the exact binomial p-value until the first failure, and the loosest threshold
    rejected is certified (fixed-sequence testing: family-wise error at most ``delta``,
    since neither the grid nor the order depends on the test items; Angelopoulos et al.
    2021). ``"fixed-sequence"``: every distinct score from the highest down, all items
    testing. Nothing is assumed of the procedure beyond that its decisions on different
    items are exchangeable. With ``decide(t, idx) = (s[idx] >= t, wrong[idx])`` this is
    :func:`certify` (tests/test_certify_adaptive.py). ``decide`` is called once per grid
    threshold on the selection items and then along the order on the test items only
    as far as the tests go; the certificate's coverage and risk are the procedure's at
    the certified threshold on all items. ``what`` names the procedure in the message.
    """
    s, wrong_full = check_inputs(scores, correct)
    alpha = check_level(alpha, "alpha")
    delta = check_level(delta, "delta")
    if method not in PROCEDURE_METHODS:
        raise ValueError(f"a procedure is certified by {' or '.join(PROCEDURE_METHODS)}; "
                         f"got {method!r}")
    n = s.size
    everything = np.arange(n)
    if method == "ltt":
        if not 0.0 < select_fraction < 1.0:
            raise ValueError(f"select_fraction must lie in (0, 1); got {select_fraction!r}")
        if n < 2:
            return _procedure_certificate(None, None, None, s, wrong_full, alpha, delta,
                                          method, select_fraction, what)
        n_sel = min(max(1, round(select_fraction * n)), n - 1)
        perm = np.random.default_rng(seed).permutation(n)
        sel, test = perm[:n_sel], perm[n_sel:]
        grid = np.unique(s[sel])[::-1]
        counts = [_counts(decide, float(t), sel) for t in grid]
        k1, m1 = (np.array(c, dtype=float) for c in zip(*counts, strict=True))
        scale = test.size / sel.size
        start = int(np.argmin(projected_p_value(k1 * scale, m1 * scale, alpha)))
        grid = grid[start:]
    else:
        sel, test = everything[:0], everything
        grid = np.unique(s)[::-1]
    best: tuple[float, float] | None = None
    for t in grid:
        k, m = _counts(decide, float(t), test)
        p = float(binomial_p_value(k, m, alpha))
        if p > delta:
            break
        best = (float(t), p)
    if best is None:
        return _procedure_certificate(None, None, None, s, wrong_full, alpha, delta, method,
                                      select_fraction, what)
    accepted, wrong = decide(best[0], everything)
    return _procedure_certificate(best[0], best[1], (np.asarray(accepted, dtype=bool),
                                                     np.asarray(wrong, dtype=bool)),
                                  s, wrong_full, alpha, delta, method, select_fraction,
                                  what)


def _counts(decide: Decide, t: float, idx: np.ndarray) -> tuple[int, int]:
    """Errors and acceptances of the procedure at ``t`` on the items ``idx``."""
    accepted, wrong = (np.asarray(x, dtype=bool) for x in decide(t, idx))
    if accepted.shape != idx.shape or wrong.shape != idx.shape:
        raise ValueError(f"decide({t!r}, idx) must give one accept and one wrong per item "
                         f"of idx ({idx.size}); got {accepted.shape} and {wrong.shape}")
    return int((accepted & wrong).sum()), int(accepted.sum())


def _procedure_certificate(
    t: float | None,
    p: float | None,
    decisions: tuple[np.ndarray, np.ndarray] | None,
    s: np.ndarray,
    wrong_full: np.ndarray,
    alpha: float,
    delta: float,
    method: str,
    select_fraction: float,
    what: str,
) -> Certificate:
    """The :class:`Certificate` of :func:`certify_procedure`: coverage and risk are the
    procedure's at ``t`` on all ``n`` items; uncertified, ``n_needed`` is estimated from
    the full recipe's scores (the procedure's own are not known without a threshold)."""
    n = int(s.size)
    if t is not None and decisions is not None:
        accepted, wrong = decisions
        m = int(accepted.sum())
        risk = float(wrong[accepted].mean()) if m else 0.0
        msg = (f"{method} over {what}: answer when it accepts at threshold {t:.6g}; "
               f"selective risk (probability >= {1 - delta:g}) <= {alpha:g}; {m}/{n} "
               f"calibration items accepted (error rate {risk:.3g}).")
        return Certificate(t, m / n, alpha, delta, n, method, m, risk, p, None, msg)
    needed, why = _n_needed(s, wrong_full, alpha, delta, method, select_fraction,
                            "the full recipe's error rates")
    msg = (f"{method} over {what}: nothing certified: {n} calibration items cannot show "
           f"selective risk <= {alpha:g} at delta = {delta:g}; {why}")
    return Certificate(None, 0.0, alpha, delta, n, method, 0, None, None, needed, msg)


# --- the certificate and its message ------------------------------------------------------


def _certificate(s, wrong, alpha, delta, method, t, p, select_fraction) -> Certificate:
    """The :class:`Certificate` of :func:`certify`; ``select_fraction`` None: the items
    needed are not estimated."""
    n = int(s.size)
    if t is not None:
        acc = s >= t
        m = int(acc.sum())
        risk = float(wrong[acc].mean())
        what = ("expected answered-and-wrong share" if method == "crc"
                else f"selective risk (probability >= {1 - delta:g})")
        msg = (f"{method}: answer scores >= {t:.6g}; {what} <= {alpha:g}; "
               f"{m}/{n} calibration items accepted (error rate {risk:.3g}).")
        return Certificate(t, m / n, alpha, delta, n, method, m, risk, p, None, msg)
    needed, why = ((None, "the items needed were not estimated.") if select_fraction is None
                   else _n_needed(s, wrong, alpha, delta, method, select_fraction))
    msg = (f"{method}: nothing certified: {n} calibration items cannot show "
           f"{'expected risk' if method == 'crc' else 'selective risk'} <= {alpha:g}"
           + ("" if delta is None else f" at delta = {delta:g}") + "; " + why)
    return Certificate(None, 0.0, alpha, delta, n, method, 0, None, None, needed, msg)


def _n_needed(s, wrong, alpha, delta, method, select_fraction,
              rates: str = "the observed error rates") -> tuple[int | None, str]:
    """About how many calibration items would certify a threshold, and the message's
    tail saying so: the least size at which a share :data:`POWER` of
    :data:`POWER_DRAWS` calibration sets of that size, drawn with replacement from the
    items observed, certify something under the same ``method`` (a bootstrap power
    estimate: the observed scores and errors stand in for the distribution). Searched by
    growing the size by a quarter from ``n + 1``, then bisecting; the draws are seeded,
    so the same items give the same estimate. ``rates`` names the error rates in the
    message.

    Replaces an analytic estimate (the items a binomial test needs at the best top
    set's error rate, scaled by its share of items, floored at ``n + 1``): on the gateway's
    held-out run it said "about 101 items" of 100 that failed, and "about 201" of 200,
    where resampling shows sets of 101 certify in about 2 of 5 draws: a coin flip, read
    by a user as one item short. ``None`` when no size can help: every top-scored set
    errs at least at ``alpha``."""
    n = s.size
    if method == "crc":  # (0 + 1) / (N + 1) <= alpha at the least
        need = max(n + 1, math.ceil(1.0 / alpha - 1.0))
        return need, f"at least {need} items would be needed."
    _, m, k = ladder(s, wrong)
    if not (k / m < alpha).any():
        return None, (f"no calibration size would: even the best-scored items err at least "
                      f"at {alpha:g} (raise alpha or use a better score).")
    rng = np.random.default_rng(0)

    wanted = math.ceil(POWER * POWER_DRAWS)

    def powered(size: int) -> bool:
        hits = 0
        for d in range(POWER_DRAWS):
            idx = rng.integers(0, n, size)
            t, _ = certified_threshold(s[idx], wrong[idx], alpha, delta, method, select_fraction, d)
            hits += t is not None
            if hits >= wanted:
                return True
            if hits + POWER_DRAWS - d - 1 < wanted:
                return False
        return False

    cap = max(MAX_NEEDED_FACTOR * n, 10_000)
    low, high = n, n + 1
    while not powered(high):
        if high >= cap:
            return None, (f"no calibration size up to {cap} would certify in {POWER:.0%} of "
                          f"draws at {rates} (raise alpha or use a better "
                          f"score).")
        low, high = high, min(cap, max(high + 1, math.ceil(high * 1.25)))
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if powered(mid) else (mid, high)
    return high, (f"at {rates} about {high} items would be needed "
                  f"({POWER:.0%} of calibration sets that size certify a threshold).")

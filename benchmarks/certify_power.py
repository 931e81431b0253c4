"""Validity and power of certified thresholds (credo.certify) on synthetic data.

Synthetic calibration sets with a known P(correct | s): ``s ~ N(0, 1)`` and
``P(correct | s) = 1 / (1 + exp(-(a + b s)))`` with ``b = 3`` (``--slope``) and ``a`` set
so the base accuracy is 0.6. The true selective risk ``R(t) = P(wrong | s >= t)`` and
coverage ``P(s >= t)`` of any threshold are computed by quadrature; the oracle threshold is
the one with ``R(t) = alpha`` exactly (coverage 0.537 at ``alpha = 0.1``, ``b = 3``; 0.406
at ``b = 2``, whose risk curve is so flat that no test certifies 0.8 of it at N = 1000).

For each N (``--n``, default 300 and 1000) and each procedure, ``--draws`` calibration
sets are drawn; per draw the procedure's threshold is scored by its *true* risk and
coverage. Printed per procedure:

- ``violation``: share of draws whose true selective risk exceeds alpha (must be at most
  delta within Monte-Carlo error, ``+- 2 sqrt(delta (1 - delta) / draws)``); for ``crc``
  the share whose true ``P(s >= t, wrong)`` exceeds alpha, and its mean (the quantity CRC
  bounds in expectation);
- ``none``: share of draws where nothing was certified;
- ``coverage``: mean true coverage (0 where nothing was certified) and its ratio to the
  oracle's.

Procedures: ``sgr`` (Geifman & El-Yaniv 2017), ``fixed-sequence`` (plain LTT over every
distinct score from the top), ``ltt`` (credo's default: LTT with a selection split, at
``select_fraction`` 0.3 unless ``--fractions`` lists others), ``crc`` (conformal risk
control, expected answered-and-wrong share), and ``grid-fs`` (fixed sequence over the
top-m sets at every 5 % of N from at least ``2 log(delta) / log(1 - alpha)`` items, on
all items: more power, but valid only when P(correct | s)
rises with s; shown for comparison, not offered by certify).

Usage::

    PYTHONPATH=src python benchmarks/certify_power.py
    PYTHONPATH=src python benchmarks/certify_power.py --n 300 1000 --draws 1000
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.optimize import brentq
from scipy.special import expit
from scipy.stats import norm

from credo.evaluate.certify import binomial_p_value, certify

_X = np.linspace(-8.0, 8.0, 32001)
_W = norm.pdf(_X) * (_X[1] - _X[0])


class Synthetic:
    """s ~ N(0, 1), P(correct | s) = expit(a + b s), a chosen for the base accuracy."""

    def __init__(self, accuracy: float = 0.6, slope: float = 3.0) -> None:
        self.b = slope
        self.a = brentq(lambda a: float((expit(a + slope * _X) * _W).sum()) - accuracy, -9, 9)
        err = (1.0 - expit(self.a + self.b * _X)) * _W
        self._tail_err = np.cumsum(err[::-1])[::-1]
        self._tail_w = np.cumsum(_W[::-1])[::-1]

    def draw(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        s = rng.standard_normal(n)
        return s, rng.random(n) < expit(self.a + self.b * s)

    def risk(self, t: float) -> float:
        return float(np.interp(t, _X, self._tail_err) / np.interp(t, _X, self._tail_w))

    def joint_risk(self, t: float) -> float:
        return float(np.interp(t, _X, self._tail_err))

    def coverage(self, t: float) -> float:
        return float(norm.sf(t))

    def oracle(self, alpha: float) -> float:
        return brentq(lambda t: self.risk(t) - alpha, -8.0, 8.0)


def grid_fixed_sequence(s, correct, alpha, delta, step=0.05):
    """Fixed sequence over the top-m sets, m = step N, 2 step N, ... (valid when
    P(correct | s) rises with s and scores are untied: the first top-m set reaching below
    the oracle threshold is then a function of how many items lie above it, and its errors
    are at least Binomial(m, alpha))."""
    order = np.argsort(-s)
    wrong = ~correct[order]
    m = np.arange(1, int(1 / step) + 1) * max(1, round(step * s.size))
    m = m[(m <= s.size) & (m >= 2 * np.log(delta) / np.log(1 - alpha))]
    p = binomial_p_value(np.cumsum(wrong)[m - 1], m, alpha)
    fails = np.nonzero(p > delta)[0]
    run = fails[0] if fails.size else m.size
    return None if run == 0 else float(s[order][m[run - 1] - 1])


def evaluate(syn, procedure, n, draws, alpha, delta, seed):
    rng = np.random.default_rng(seed)
    viol = none = 0
    cov = joint = 0.0
    for _ in range(draws):
        s, c = syn.draw(n, rng)
        t = procedure(s, c)
        if t is None:
            none += 1
            continue
        cov += syn.coverage(t)
        joint += syn.joint_risk(t)
        viol += (syn.joint_risk(t) if procedure.crc else syn.risk(t)) > alpha
    return viol / draws, none / draws, cov / draws, joint / draws


def procedures(alpha, delta, fractions):
    def make(method, **kw):
        def run(s, c):
            return certify(s, c, alpha, delta, method, needed=False, **kw).threshold
        run.crc = method == "crc"
        return run

    out = {"sgr": make("sgr"), "fixed-sequence": make("fixed-sequence")}
    for f in fractions:
        out[f"ltt (select {f:g})"] = make("ltt", select_fraction=f)
    out["crc"] = make("crc")

    def grid(s, c):
        return grid_fixed_sequence(s, c, alpha, delta)
    grid.crc = False
    out["grid-fs (monotone only)"] = grid
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, nargs="+", default=[300, 1000])
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--alpha", type=float, default=0.1)
    ap.add_argument("--delta", type=float, default=0.1)
    ap.add_argument("--fractions", type=float, nargs="+", default=[0.3])
    ap.add_argument("--slope", type=float, default=3.0, help="b in expit(a + b s)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    syn = Synthetic(slope=args.slope)
    t_star = syn.oracle(args.alpha)
    oracle_cov = syn.coverage(t_star)
    mc = 2 * np.sqrt(args.delta * (1 - args.delta) / args.draws)
    print(f"synthetic: s ~ N(0,1), P(correct|s) = expit({syn.a:.3f} + {syn.b:g} s), "
          f"accuracy 0.6; alpha {args.alpha:g}, delta {args.delta:g}, {args.draws} draws")
    print(f"oracle threshold {t_star:.4f}, coverage {oracle_cov:.4f}; "
          f"Monte-Carlo 2-sigma on a violation rate: +-{mc:.3f}")
    for n in args.n:
        print(f"\nN = {n}")
        print(f"{'procedure':<26}{'violation':>10}{'none':>7}{'coverage':>10}"
              f"{'/ oracle':>10}{'E joint':>9}{'sec':>6}")
        for name, proc in procedures(args.alpha, args.delta, args.fractions).items():
            t0 = time.perf_counter()
            v, none, cov, joint = evaluate(syn, proc, n, args.draws, args.alpha,
                                           args.delta, args.seed)
            print(f"{name:<26}{v:>10.3f}{none:>7.3f}{cov:>10.4f}{cov / oracle_cov:>10.3f}"
                  f"{joint:>9.4f}{time.perf_counter() - t0:>6.1f}")


if __name__ == "__main__":
    main()

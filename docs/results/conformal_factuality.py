"""Mohri & Hashimoto's (ICML 2024) figures 2-3 from their released annotations.

Reads the paper's two annotated claim files (FActScore biographies and Natural Questions,
50 answers each, every claim labelled; "Y"/"S" correct, "N"/"U" not) with credo's own
reader, and for each alpha repeats ``--splits`` random splits of the 50 answers into 25
calibration and 25 test answers (the paper's calibration figure: half and half, 1000
splits). On each split credo's conformal threshold (``credo.evaluate.claims``) is
calibrated on the 25 and applied to the other 25: the realised factuality is the share of
test answers whose retained claims are all correct (or at least a share ``a``), the
retained share is the mean over test answers of the share of their claims kept (the
paper's "percent removed" is one minus it). Scores, as in the paper's code: each claim's
score plus the paper's tie-breaking ``noise`` field (N(0, 0.001), in the files);
``--no-noise`` drops it. Methods: frequency+gpt (the paper's best), frequency, GPT-4's
verbalised confidence, and the ordinal baseline (position in the answer).

Also: the fraction-``a`` generalisation, and the high-probability variant (Learn then
Test, ``delta``), whose violation rate is measured where it is defined exactly: the
calibration set drawn i.i.d. (with replacement) from the 50 answers, the miscoverage of
its threshold computed on all 50 (the population for that draw).

    .venv/bin/python docs/results/conformal_factuality.py ../shared/data/conformal_factuality \\
        --figure docs/conformal-factuality.png > /tmp/cf.md
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from credo.evaluate.claims import conformal_threshold, ltt_threshold, nonconformity, satisfies
from credo.tasks.claims import ClaimItem, read_claims

DATASETS = {"factscore": "factscore_subclaims_with_scores.json",
            "nq": "nq_subclaims_with_scores.json"}
TITLES = {"factscore": "FActScore (biographies)", "nq": "Natural Questions"}
METHODS = {"frequency+gpt": "frequency+gpt-score", "frequency": "frequency-score",
           "gpt": "gpt-score", "ordinal": "baseline-score"}
ALPHAS = tuple(round(0.05 * k, 2) for k in range(1, 7))
N_CAL = 25


@dataclass
class Claims:
    """One dataset as padded arrays: ``scores[i, j]`` (``-inf`` past an answer's last
    claim), ``correct[i, j]``, ``size[i]``."""

    name: str
    scores: dict[str, np.ndarray]
    correct: np.ndarray
    size: np.ndarray

    def r(self, method: str, a: float) -> np.ndarray:
        """Each answer's nonconformity ``r(a)`` under ``method``."""
        s = self.scores[method]
        return np.array([nonconformity(s[i, :n], self.correct[i, :n], a)
                         for i, n in enumerate(self.size)])

    def evaluate(self, method: str, items: np.ndarray, tau: np.ndarray, a: float
                 ) -> tuple[np.ndarray, np.ndarray]:
        """For thresholds ``tau`` (one per row of ``items``; NaN: keep nothing): the share
        of the row's answers meeting the condition, and their mean share of claims kept."""
        s = self.scores[method][items]  # (splits, answers, claims)
        t = np.where(np.isnan(tau), np.inf, tau)[:, None, None]
        kept = s > t
        m = kept.sum(axis=2)
        ok = satisfies((kept & self.correct[items]).sum(axis=2), m, a)
        return ok.mean(axis=1), (m / self.size[items]).mean(axis=1)


@dataclass
class Row:
    """One (dataset, method, a, alpha, delta) over the splits."""

    dataset: str
    method: str
    a: float
    alpha: float
    delta: float | None
    factual: float
    factual_se: float
    retained: float
    certified: float
    floor: float
    violation: float | None = None

    @property
    def upper(self) -> float:
        return 1 - self.alpha + 1 / (N_CAL + 1)


@dataclass
class Results:
    rows: list[Row] = field(default_factory=list)
    splits: int = 0
    noise: bool = True

    def get(self, dataset: str, method: str, alpha: float, a: float = 1.0,
            delta: float | None = None) -> Row:
        return next(r for r in self.rows if (r.dataset, r.method, r.a, r.delta) ==
                    (dataset, method, a, delta) and math.isclose(r.alpha, alpha))


def load(folder: Path, noise: bool = True) -> dict[str, Claims]:
    """Both datasets, read by :func:`credo.tasks.claims.read_claims`."""
    return {name: _arrays(name, read_claims(folder / file), noise)
            for name, file in DATASETS.items()}


def reproduce(folder: Path, *, alphas=ALPHAS, splits: int = 1000, seed: int = 0,
              noise: bool = True, shares=(1.0, 0.9, 0.8), delta: float | None = 0.1
              ) -> Results:
    """Every row: the four methods at ``a = 1`` (marginal), frequency+gpt at the other
    ``shares`` and, unless ``delta`` is None, with ``delta`` (Learn then Test)."""
    data = load(folder, noise)
    out = Results(splits=splits, noise=noise)
    for name, claims in data.items():
        n = claims.size.size
        rng = np.random.default_rng(seed)
        perms = np.array([rng.permutation(n) for _ in range(splits)])
        cal, test = perms[:, :N_CAL], perms[:, N_CAL:]
        boot = rng.integers(0, n, size=(splits, N_CAL))  # i.i.d. calibration draws
        for method in METHODS:
            for a in shares if method == "frequency+gpt" else (1.0,):
                r = claims.r(method, a)
                floor = float(np.mean(np.isneginf(r)))
                for alpha in alphas:
                    tau = np.array([_or_nan(conformal_threshold(r[c], alpha)[0]) for c in cal])
                    out.rows.append(_row(name, method, a, alpha, None, claims, test, tau, floor))
                    if method != "frequency+gpt" or delta is None:
                        continue
                    tau = np.array([_or_nan(ltt_threshold(r[c], alpha, delta)[0]) for c in cal])
                    row = _row(name, method, a, alpha, delta, claims, test, tau, floor)
                    tau_b = np.array([_or_nan(ltt_threshold(r[b], alpha, delta)[0]) for b in boot])
                    everyone = np.broadcast_to(np.arange(n), (splits, n))
                    miss = 1 - claims.evaluate(method, everyone, tau_b, a)[0]
                    row.violation = float(np.mean(miss > alpha))
                    out.rows.append(row)
    return out


def _row(name, method, a, alpha, delta, claims, test, tau, floor) -> Row:
    factual, kept = claims.evaluate(method, test, tau, a)
    return Row(name, method, a, alpha, delta, float(factual.mean()),
               float(factual.std(ddof=1) / math.sqrt(factual.size)), float(kept.mean()),
               float(np.mean(~np.isnan(tau))), floor)


def _or_nan(t: float | None) -> float:
    return math.nan if t is None else t


def _arrays(name: str, items: list[ClaimItem], noise: bool) -> Claims:
    width = max(len(it.claims) for it in items)
    size = np.array([len(it.claims) for it in items])
    correct = np.zeros((len(items), width), dtype=bool)
    scores = {m: np.full((len(items), width), -np.inf) for m in METHODS}
    for i, it in enumerate(items):
        for j, c in enumerate(it.claims):
            correct[i, j] = bool(c.correct)
            for m, key in METHODS.items():
                scores[m][i, j] = c.scores[key] + (c.scores["noise"] if noise else 0.0)
    return Claims(name, scores, correct, size)


# --------------------------------------------------------------------------- output


def table(res: Results) -> str:
    """The markdown tables: the four methods at a = 1, then the variants."""
    lines = []
    for name in DATASETS:
        lines += [f"**{TITLES[name]}** (50 answers; {_floor(res, name)}):", "",
                  "| α | 1 − α | bound 1 − α + 1/26 | " + " | ".join(
                      f"{m}: factual · kept" for m in METHODS) + " |",
                  "|---|---|---|" + "---|" * len(METHODS)]
        for alpha in sorted({r.alpha for r in res.rows}):
            cells = []
            for m in METHODS:
                r = res.get(name, m, alpha)
                cells.append(f"{r.factual:.3f} ± {r.factual_se:.3f} · {r.retained:.2f}")
            lines.append(f"| {alpha:g} | {1 - alpha:.2f} | {1 - alpha + 1 / 26:.3f} | "
                         + " | ".join(cells) + " |")
        lines.append("")
    if not any(r.delta is not None for r in res.rows):
        return "\n".join(lines)
    lines += ["**Variants, frequency+gpt**: the share of test answers meeting the condition "
              "(at least a share a of the retained claims correct) · claims kept; with δ: "
              "Learn then Test, share of splits certified, and the violation rate over "
              "i.i.d. calibration draws (miscoverage on the 50 > α).", "",
              "| data | a | α | marginal: factual · kept | δ = 0.1: factual · kept · "
              "certified · violation |", "|---|---|---|---|---|"]
    for name in DATASETS:
        for a in sorted({r.a for r in res.rows}, reverse=True):
            for alpha in sorted({r.alpha for r in res.rows}):
                m = res.get(name, "frequency+gpt", alpha, a)
                h = next(r for r in res.rows if r.dataset == name and r.a == a
                         and r.delta is not None and math.isclose(r.alpha, alpha))
                lines.append(
                    f"| {name} | {a:g} | {alpha:g} | {m.factual:.3f} · {m.retained:.2f} | "
                    f"{h.factual:.3f} · {h.retained:.2f} · {h.certified:.2f} · "
                    f"{h.violation:.3f} |")
    return "\n".join(lines)


def _floor(res: Results, name: str) -> str:
    r = res.get(name, "frequency+gpt", res.rows[0].alpha)
    return f"{r.floor:.0%} of them have no wrong claim"


def done_when(res: Results, z: float = 3.0) -> list[str]:
    """The claim certificates' promise on every a = 1 marginal row: realised factuality >= 1 - alpha
    (within ``z`` standard errors of the splits' mean) and <= 1 - alpha + 0.05 where the
    finite-sample bound allows: unless the answers with no wrong claim (always factual,
    tied at r = -inf) are at least 1 - alpha of them. Returns the failures."""
    bad = []
    for r in res.rows:
        if r.a != 1.0 or r.delta is not None:
            continue
        if r.factual < 1 - r.alpha - z * r.factual_se:
            bad.append(f"{r.dataset} {r.method} alpha={r.alpha:g}: {r.factual:.3f} < 1 - alpha")
        if r.floor < 1 - r.alpha and r.factual > 1 - r.alpha + 0.05 + z * r.factual_se:
            bad.append(f"{r.dataset} {r.method} alpha={r.alpha:g}: {r.factual:.3f} more than "
                       "0.05 above 1 - alpha")
    return bad


def figure(res: Results, path: Path) -> None:
    """Left: realised factuality of frequency+gpt against 1 - alpha with Theorem 3.1's
    bounds (the paper's calibration figure); right: share of claims removed against
    realised factuality for each method (the paper's figures 2-3)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 8), layout="constrained")
    axes = fig.subplots(2, 2)
    alphas = sorted({r.alpha for r in res.rows})
    target = np.array([1 - a for a in alphas])
    for row, name in zip(axes, DATASETS, strict=True):
        left, right = row
        left.plot(target, target, "--", color="gray", label="bounds 1 − α, 1 − α + 1/26")
        left.plot(target, target + 1 / (N_CAL + 1), "--", color="gray")
        for m in METHODS:
            rs = [res.get(name, m, a) for a in alphas]
            y = np.array([r.factual for r in rs])
            err = 2 * np.array([r.factual_se for r in rs])
            style = {"linewidth": 2.5} if m == "frequency+gpt" else {"linewidth": 1, "alpha": .6}
            left.errorbar(target, y, yerr=err, label=m, **style)
            right.errorbar(y, [1 - r.retained for r in rs], xerr=err, label=m, marker="o",
                           markersize=3, **style)
        left.set(title=TITLES[name], xlabel="target factuality 1 − α",
                 ylabel="realised factuality (test answers)")
        right.set(title=f"{TITLES[name]}: claims removed",
                  xlabel="realised factuality", ylabel="share of claims removed")
        floor = res.get(name, "frequency+gpt", alphas[0]).floor
        if floor > target.min() - 0.05:  # within the plot: the factuality it cannot go below
            left.axhline(floor, linestyle=":", color="black",
                         label=f"answers with no wrong claim ({floor:.0%})")
        left.legend(fontsize=8)
        right.legend(fontsize=8)
    fig.suptitle(f"Conformal factuality on the paper's annotations: {res.splits} splits "
                 f"25 / 25" + ("" if res.noise else ", no tie-breaking noise"))
    fig.savefig(path, dpi=110)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folder", type=Path, nargs="?",
                   default=Path("../shared/data/conformal_factuality"))
    p.add_argument("--splits", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--delta", type=float, default=0.1)
    p.add_argument("--no-noise", action="store_true", help="no tie-breaking noise")
    p.add_argument("--figure", type=Path, help="write the figure here (PNG)")
    args = p.parse_args()
    res = reproduce(args.folder, splits=args.splits, seed=args.seed, noise=not args.no_noise,
                    delta=args.delta)
    print(table(res))
    bad = done_when(res)
    print("\ndone-when (realised >= 1 - alpha within 3 SE; <= 1 - alpha + 0.05 where the "
          "bound allows): " + ("met on every row" if not bad else "NOT met: " + "; ".join(bad)))
    if args.figure:
        figure(res, args.figure)
        print(f"figure: {args.figure}")


if __name__ == "__main__":
    main()

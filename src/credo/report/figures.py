"""The report's figures, drawn with matplotlib from arrays read off a run folder.

Each ``plot_*`` function draws on the axes it is given and returns nothing, so the HTML
report can lay several out in one figure; :func:`figure_to_data_uri` turns a figure into a
base64 PNG ``data:`` URI that the page embeds (no file or network access when opened),
:func:`save_figure` writes one as a PNG file. Figures are plain
:class:`matplotlib.figure.Figure` objects rendered by Agg when saved, outside pyplot: no
backend is chosen at import and no figure stays registered after it is written.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from sklearn.metrics import precision_recall_curve, roc_curve

from credo.evaluate.binning import bin_centres, bin_index
from credo.evaluate.bootstrap import polarisation_entropy
from credo.evaluate.convergence import Convergence
from credo.evaluate.quadrants import REGION_COLORS, Quadrants

DPI = 90
FLIP_TYPE_COLOURS = {"input": "#d95f02", "cot": "#1b9e77", "paraphrase": "#7570b3"}
MAX_DISCRETE_LEVELS = 12


def new_figure(width: float, height: float, rows: int = 1, cols: int = 1) -> tuple[Figure, Any]:
    """A figure of ``width`` x ``height`` inches with a grid of axes (squeezed)."""
    fig = Figure(figsize=(width, height), dpi=DPI)
    axes = fig.subplots(rows, cols, squeeze=False)
    return fig, axes


def figure_to_data_uri(fig: Figure) -> str:
    """The figure as a ``data:image/png;base64,...`` URI."""
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=DPI)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def save_figure(fig: Figure, path: str | Path, dpi: int = 130) -> Path:
    """Write the figure as a PNG file at ``dpi``, atomically (:func:`credo.jsonio.write_with`:
    an interrupted write leaves the file as it was)."""
    from credo import jsonio

    fig.tight_layout()
    return jsonio.write_with(path, lambda tmp: fig.savefig(tmp, dpi=dpi, format="png"))


def discrete_levels(scores: np.ndarray, max_levels: int = MAX_DISCRETE_LEVELS) -> np.ndarray | None:
    """The distinct score values when a method's scores are discrete, else None.

    Scores count as discrete when they take at most ``max_levels`` distinct values and at
    least two items share a value, e.g. answer consistency with n samples (levels k/n) or
    self-consistency with few samples; their reliability diagram and ECE then use one bin
    per level (Müller et al., App. A.11.3) instead of equal-width bins.
    """
    s = np.asarray(scores, dtype=float)
    s = s[~np.isnan(s)]
    levels = np.unique(np.round(s, 9))
    if levels.size == 0 or levels.size > max_levels or levels.size >= s.size:
        return None
    return levels


def bin_assignment(
    scores: np.ndarray, n_bins: int = 10, levels: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(bin index per item, bin centres, bar widths): equal-width bins or one per level.

    Bins and centres from :mod:`credo.evaluate.binning` (the rule of ECE); a bar spans
    its equal-width bin, or is narrower than the gap between discrete levels.
    """
    bins = bin_index(scores, n_bins, levels)
    centres = bin_centres(n_bins, levels)
    if levels is None:
        widths = np.full(centres.size, 1.0 / centres.size)
    else:
        gap = np.diff(centres).min() if centres.size > 1 else 0.1
        widths = np.full(centres.size, min(0.8 * gap, 0.08))
    return bins, centres, widths


def plot_reliability(
    ax: Axes,
    scores: np.ndarray,
    performance: np.ndarray,
    title: str,
    *,
    n_bins: int = 10,
    levels: np.ndarray | None = None,
    ece_value: float | None = None,
    seed: int = 0,
) -> None:
    """Reliability diagram: mean p̄ per score bin against the bin's mean score.

    Bars show the mean performance of the items in each bin (equal-width bins, or one bin
    per discrete level), dots the (mean score, mean p̄) of the bin with a 95% bootstrap
    interval of the bin's mean p̄ (Müller et al., §3.7: CIs over calibration curves), the numbers
    above the bars the item counts. The dashed diagonal is perfect calibration.
    """
    s = np.asarray(scores, dtype=float)
    p = np.asarray(performance, dtype=float)
    ok = ~(np.isnan(s) | np.isnan(p))
    s, p = s[ok], p[ok]
    ax.plot([0, 1], [0, 1], "--", color="#999999", lw=1)
    if s.size:
        bins, centres, widths = bin_assignment(s, n_bins, levels)
        rng = np.random.default_rng(seed)
        for b in np.unique(bins):
            mask = bins == b
            pb, sb = p[mask], s[mask]
            ax.bar(centres[b], pb.mean(), width=widths[b], color="#4c72b0", alpha=0.35,
                   edgecolor="#4c72b0")
            lo = hi = pb.mean()
            if pb.size >= 2:
                means = pb[rng.integers(0, pb.size, size=(500, pb.size))].mean(axis=1)
                lo, hi = np.quantile(means, [0.025, 0.975])
            ax.errorbar(sb.mean(), pb.mean(), yerr=[[pb.mean() - lo], [hi - pb.mean()]],
                        fmt="o", color="#1f3b73", ms=4, capsize=2, lw=1)
            ax.text(centres[b], min(pb.mean() + 0.03, 0.97), str(int(mask.sum())),
                    ha="center", va="bottom", fontsize=7, color="#333333")
    kind = f"{len(levels)} discrete levels" if levels is not None else f"{n_bins} bins"
    ece_txt = f"ECE {ece_value:.3f}" if ece_value is not None and not math.isnan(ece_value) else ""
    ax.set_title(f"{title}\n{ece_txt} ({kind})", fontsize=9)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("score", fontsize=8)
    ax.set_ylabel("mean performance p̄", fontsize=8)
    ax.tick_params(labelsize=7)


def plot_score_histogram(
    ax: Axes, scores: np.ndarray, title: str, *, n_bins: int = 10,
    levels: np.ndarray | None = None, polarisation: float | None = None,
) -> None:
    """Histogram of a method's scores with the normalised entropy of its bin counts
    (polarisation, Müller et al., §3.7 and §6.1;
    :func:`credo.evaluate.bootstrap.polarisation_entropy`)."""
    s = np.asarray(scores, dtype=float)
    s = s[~np.isnan(s)]
    if s.size:
        bins, centres, widths = bin_assignment(s, n_bins, levels)
        counts = np.bincount(bins, minlength=centres.size)
        ax.bar(centres, counts, width=widths, color="#dd8452", alpha=0.8, edgecolor="#a0522d")
    h = polarisation_entropy(s, n_bins, levels) if polarisation is None else polarisation
    extra = f"\nbin-count entropy {h:.2f} (0 = polarised)" if not math.isnan(h) else ""
    ax.set_title(f"{title}{extra}", fontsize=9)
    ax.set_xlim(-0.02, 1.02)
    ax.set_xlabel("score", fontsize=8)
    ax.set_ylabel("items", fontsize=8)
    ax.tick_params(labelsize=7)


def plot_roc_pr(
    ax_roc: Axes, ax_pr: Axes, curves: Mapping[str, tuple[np.ndarray, np.ndarray]]
) -> None:
    """ROC and precision-recall curves (scikit-learn) of every method, label 1[p̄ >= 0.5].

    ``curves`` maps method -> (scores, labels) with NaN-scored items already removed.
    Methods whose items share one label are listed as undefined.
    """
    undefined = []
    for name, (s, y) in curves.items():
        if np.unique(y).size < 2:
            undefined.append(name)
            continue
        fpr, tpr, _ = roc_curve(y, s)
        prec, rec, _ = precision_recall_curve(y, s)
        ax_roc.plot(fpr, tpr, lw=1.5, label=name)
        ax_pr.step(rec, prec, where="post", lw=1.5, label=name)
    ax_roc.plot([0, 1], [0, 1], "--", color="#999999", lw=1)
    for ax, (xl, yl, t) in (
        (ax_roc, ("false positive rate", "true positive rate", "ROC")),
        (ax_pr, ("recall", "precision", "precision-recall (AUPRC-P)")),
    ):
        ax.set_xlabel(xl, fontsize=8)
        ax.set_ylabel(yl, fontsize=8)
        ax.set_title(t, fontsize=9)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1.02)
        ax.tick_params(labelsize=7)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="lower right" if ax is ax_roc else "lower left")
    if undefined:
        ax_roc.text(0.5, 0.5, "undefined (one class): " + ", ".join(undefined),
                    ha="center", fontsize=7, transform=ax_roc.transAxes, wrap=True)


def plot_risk_coverage(
    ax: Axes, curves: Mapping[str, tuple[np.ndarray, np.ndarray]], alphas: Sequence[float]
) -> None:
    """Selective risk against coverage per method (Geifman & El-Yaniv 2017): each point answers the
    items scored at or above one threshold. ``curves`` maps
    method -> (coverage, risk) from :func:`credo.evaluate.coverage.risk_coverage_curve`;
    each ``alpha`` is a dotted horizontal line: points below it keep the risk at α on
    this run (a certificate also needs the margin of finite calibration)."""
    for name, (cov, risk) in curves.items():
        if cov.size:
            ax.step(np.r_[0.0, cov], np.r_[risk[0], risk], where="post", lw=1.5, label=name)
    for a in alphas:
        ax.axhline(a, ls=":", color="#444444", lw=1)
        ax.text(1.0, a, f" α={a:g}", va="center", ha="left", fontsize=7,
                transform=ax.get_yaxis_transform())
    ax.set_xlabel("coverage (share of items answered)", fontsize=8)
    ax.set_ylabel("selective risk (error rate of the answered)", fontsize=8)
    ax.set_title("risk–coverage", fontsize=9)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.tick_params(labelsize=7)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="upper left")


def plot_quadrants(ax: Axes, q: Quadrants, title: str, *, jitter: float = 0.01) -> None:
    """Wu et al., Fig. 4: mean performance (x) against mean C3 (y) per item, median splits.

    Shaded regions: mastered (green, top right), brittle (yellow, bottom right), biased
    (red, top left), unlearned (gray, bottom left); counts in the corners. Points get a
    small deterministic jitter so that tied items stay visible.
    """
    ps, cs = q.perf_split, q.c3_split
    spans = {
        "mastered": ((ps, 1.05), (cs, 1.05)),
        "brittle": ((ps, 1.05), (-0.05, cs)),
        "biased": ((-0.05, ps), (cs, 1.05)),
        "unlearned": ((-0.05, ps), (-0.05, cs)),
    }
    for region, ((x0, x1), (y0, y1)) in spans.items():
        ax.fill_between([x0, x1], y0, y1, color=REGION_COLORS[region], alpha=0.12, lw=0)
        ax.text(x1 - 0.02 if x0 == ps else x0 + 0.02, y1 - 0.03 if y0 == cs else y0 + 0.03,
                f"{region} ({q.counts.get(region, 0)})",
                ha="right" if x0 == ps else "left", va="top" if y0 == cs else "bottom",
                fontsize=8, color=REGION_COLORS[region], fontweight="bold")
    rng = np.random.default_rng(0)
    jx = rng.uniform(-jitter, jitter, q.performance.size)
    jy = rng.uniform(-jitter, jitter, q.c3.size)
    colors = [REGION_COLORS[r] for r in q.regions]
    ax.scatter(q.performance + jx, q.c3 + jy, c=colors, s=22, edgecolor="black", lw=0.4, zorder=3)
    ax.axvline(ps, color="black", lw=0.8, ls=":")
    ax.axhline(cs, color="black", lw=0.8, ls=":")
    ax.set_xlim(-0.05, 1.05)
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel(f"mean performance p̄ (split {ps:.3g})", fontsize=8)
    ax.set_ylabel(f"mean C3 (split {cs:.3g})", fontsize=8)
    ax.set_title(title, fontsize=9)
    ax.tick_params(labelsize=7)


def plot_convergence(ax_mean: Axes, ax_change: Axes, conv: Convergence) -> None:
    """Wu et al., App. B / Fig. 7: mean estimate and mean |estimate_k − estimate_K| against k."""
    for name, y in conv.mean.items():
        ax_mean.plot(conv.k, y, marker="o", ms=3, label=name)
        ax_change.plot(conv.k, conv.abs_change[name], marker="o", ms=3, label=name)
    ax_mean.set_title(f"estimate on the first k samples (mean over {conv.n_items} items)",
                      fontsize=9)
    ax_change.set_title("mean |estimate(k) − estimate(all)|", fontsize=9)
    for ax in (ax_mean, ax_change):
        ax.set_xlabel("samples per set k", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=7)
    ax_mean.set_ylim(-0.02, 1.02)


def plot_neutrality(ax: Axes, delta: np.ndarray, mean: float, low: float, high: float,
                    k: int, title: str) -> None:
    """Wu et al., App. A.3 / Fig. 6: histogram of Δ = #correct perturbed − #correct original."""
    d = np.asarray(delta, dtype=float)
    lo_edge = math.floor(min(d.min(), 0)) - 0.5 if d.size else -0.5
    hi_edge = math.ceil(max(d.max(), 0)) + 0.5 if d.size else 0.5
    ax.hist(d, bins=np.arange(lo_edge, hi_edge + 1.0), color="#55a868", alpha=0.8,
            edgecolor="#2d6a3e")
    ax.axvline(0, color="red", lw=1.2, label="0 (no shift)")
    if not math.isnan(mean):
        ax.axvline(mean, color="black", lw=1.2, ls="--", label=f"mean {mean:+.2f}")
    if not (math.isnan(low) or math.isnan(high)):
        ax.axvspan(low, high, color="black", alpha=0.1, label=f"95% CI [{low:+.2f}, {high:+.2f}]")
    ax.set_xlabel(f"Δ = #correct perturbed − #correct original (of {k} each)", fontsize=8)
    ax.set_ylabel("items", fontsize=8)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    ax.tick_params(labelsize=7)


def plot_similarity_histogram(ax: Axes, sims: np.ndarray, title: str, *,
                              threshold: float | None = None, threshold_label: str = "k") -> None:
    """Distribution of pairwise cosine similarities (Wu et al., App. A.2 / Fig. 5)."""
    s = np.asarray(sims, dtype=float)
    if s.size:
        ax.hist(s, bins=np.linspace(min(-0.1, s.min()), 1.0, 41), color="#8172b3", alpha=0.85,
                edgecolor="#4b3f72")
    if threshold is not None and not math.isnan(threshold):
        ax.axvline(threshold, color="red", lw=1.2, label=f"{threshold_label} = {threshold:.4f}")
        ax.legend(fontsize=7)
    ax.set_xlabel("cosine similarity", fontsize=8)
    ax.set_ylabel("pairs", fontsize=8)
    ax.set_title(f"{title} ({s.size} pairs)", fontsize=9)
    ax.tick_params(labelsize=7)


def plot_flip_rates(ax: Axes, rows: Sequence[Mapping[str, Any]], title: str) -> None:
    """Flip rate against perturbation strength with its CI, one line per (model, type).

    ``rows`` come from a strength run's ``flip_rates.csv`` (Le et al.: flip rate by strength).
    Non-numeric strengths are placed in order of first appearance.
    """
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault((str(r["model"]), str(r["perturbation_type"])), []).append(r)
    categorical = any(isinstance(r["strength"], str) for r in rows)
    order = list(dict.fromkeys(str(r["strength"]) for r in rows))
    for (model, ptype), rs in groups.items():
        if categorical:
            rs = sorted(rs, key=lambda r: order.index(str(r["strength"])))
            x = np.array([order.index(str(r["strength"])) for r in rs], dtype=float)
        else:
            rs = sorted(rs, key=lambda r: float(r["strength"]))
            x = np.array([float(r["strength"]) for r in rs])
        y = np.array([r["rate"] for r in rs])
        lo = np.array([r["low"] for r in rs], dtype=float)
        hi = np.array([r["high"] for r in rs], dtype=float)
        yerr = np.vstack([np.where(np.isnan(lo), 0, y - lo), np.where(np.isnan(hi), 0, hi - y)])
        ax.errorbar(x, y, yerr=yerr, marker="o", ms=4, capsize=3, lw=1.2,
                    label=f"{model} · {ptype}")
    if categorical:
        ax.set_xticks(range(len(order)), order, fontsize=7)
    ax.set_xlabel("perturbation strength", fontsize=8)
    ax.set_ylabel("flip rate", fontsize=8)
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title, fontsize=9)
    ax.tick_params(labelsize=7)
    if groups:
        ax.legend(fontsize=7)



def plot_flip_rate_bars(ax: Axes, rows: Sequence[Mapping[str, Any]], title: str) -> None:
    """Le et al., Fig. 6: FR(s) in percent as grouped bars, a group per strength and a bar per
    perturbation type (input vs CoT), Wilson intervals as error bars, ``n`` at each bar.

    ``rows`` are one model's rows of a strength run's ``flip_rates.csv`` (keys
    perturbation_type, strength, n, rate, low, high; :func:`plot_flip_rates` draws the
    same rows as lines). A bin with ``n = 0`` draws an empty bar. Numeric strengths are
    placed in increasing order, others in order of first appearance.
    """
    kinds = list(dict.fromkeys(str(r["perturbation_type"]) for r in rows))
    levels = list(dict.fromkeys(r["strength"] for r in rows))
    if not any(isinstance(v, str) for v in levels):
        levels.sort()
    width = 0.8 / max(1, len(kinds))
    for j, kind in enumerate(kinds):
        rs = [r for r in rows if str(r["perturbation_type"]) == kind]
        xs = (np.array([levels.index(r["strength"]) for r in rs], dtype=float)
              + (j - (len(kinds) - 1) / 2) * width)
        rates = np.array([0.0 if r["n"] == 0 else r["rate"] for r in rs])
        err = np.array(
            [[0.0, 0.0] if r["n"] == 0 else [r["rate"] - r["low"], r["high"] - r["rate"]]
             for r in rs]
        ).T
        ax.bar(xs, 100 * rates, width, yerr=100 * err, capsize=3, label=kind,
               color=FLIP_TYPE_COLOURS.get(kind), alpha=0.85)
        for x, r in zip(xs, rs, strict=True):
            ax.text(x, 1, f"n={r['n']}", ha="center", va="bottom", fontsize=6, rotation=90)
    ax.set_xticks(range(len(levels)), [str(v) for v in levels])
    ax.set_xlabel("perturbation strength (LLM judge)")
    ax.set_ylabel("flip rate (%)")
    ax.set_ylim(0, 105)
    ax.set_title(title, fontsize=9)
    if kinds:
        ax.legend(fontsize=7, loc="upper left")

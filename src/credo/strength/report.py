"""The strength run folder (read by the HTML report; keep the layout stable).

``<out>/strengths.jsonl``
    One row per (model, item, perturbation): ``model``, ``item_id``,
    ``perturbation_type`` (``input`` | ``cot`` | ``paraphrase``), ``question``,
    ``choices``, ``gold``, ``cot`` (the original CoT, one step per line), ``text_before``,
    ``text_after`` (``null`` when the writer's reply was unusable; ``writer_reply`` then
    holds it), ``perturbed_steps``, ``cot_steps``, ``judge_rating`` (0-3, ``null`` when
    unparsable) with the raw ``judge_reply``, ``cosine_distance``, ``surprisal_before``,
    ``surprisal_after``, ``surprisal_change`` (bits), ``answer_before``, ``answer_after``,
    ``answer_source``, ``flipped``, ``correct_before``, ``correct_after``.
``<out>/flip_rates.csv``
    ``model,perturbation_type,strength,n,flips,rate,low,high``: FR(s) of 003 eq. 2 over
    rows with a judge rating and both answers; ``low``/``high`` the 95% Wilson interval;
    ``nan`` where ``n = 0``.
``<out>/flip_rates.png``
    FR against strength, one panel per model, a bar group per strength, one bar per
    perturbation type (input vs CoT, as 003 Fig. 6), Wilson intervals as error bars.
``<out>/summary.json``
    Per model and type: responsive FR(3), robust FR(0), overall FR(3) - FR(0), counts;
    plus the configuration and model identities.
``<out>/report.md``
    The same as tables, with the departures from the paper.

Everything but the configuration is recomputed from ``strengths.jsonl`` by
:func:`write_outputs`, so the figures can be regenerated without a model.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from credo import jsonio
from credo.strength.flip import STRENGTH_LEVELS, flip_rate_table, self_consistency

if TYPE_CHECKING:
    from credo.strength.pipeline import StrengthResult

TYPE_ORDER = ("input", "cot", "paraphrase")
CSV_COLUMNS = ("model", "perturbation_type", "strength", "n", "flips", "rate", "low", "high")


def write_strength_run(result: StrengthResult, out: str | Path) -> Path:
    """Write the run folder for ``result`` (see the module docstring)."""
    meta = {
        "task": result.task.name,
        "items": len(result.task.items),
        "config": result.config.model_dump(mode="json"),
        "identities": result.identities,
        "seconds": round(result.seconds, 1),
    }
    return write_outputs([r.as_dict() for r in result.rows], out, meta)


def write_outputs(rows: Sequence[dict[str, Any]], out: str | Path, meta: dict[str, Any]) -> Path:
    """strengths.jsonl, flip_rates.csv/.png, summary.json and report.md from the rows."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with (out / "strengths.jsonl").open("w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(jsonio.dumps(r, ensure_ascii=False) + "\n")
    tables = flip_tables(rows)
    with (out / "flip_rates.csv").open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(CSV_COLUMNS)
        for (model, kind), table in tables.items():
            for fr in table:
                w.writerow([model, kind, fr.strength, fr.n, fr.flips, _num(fr.rate),
                            _num(fr.low), _num(fr.high)])
    summary = summarise(rows, tables, meta)
    (out / "summary.json").write_text(jsonio.dumps(summary, indent=2) + "\n", encoding="utf-8")
    plot_flip_rates(tables, out / "flip_rates.png")
    (out / "report.md").write_text(render_report(summary, tables), encoding="utf-8")
    return out


def flip_tables(rows: Sequence[dict[str, Any]]) -> dict[tuple[str, str], list]:
    """``{(model, type): [FlipRate per level 0-3]}`` with the judge rating as strength."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["model"], r["perturbation_type"]), []).append(r)
    models = list(dict.fromkeys(r["model"] for r in rows))
    out = {}
    for model in models:
        for kind in TYPE_ORDER:
            group = groups.get((model, kind))
            if not group:
                continue
            out[(model, kind)] = flip_rate_table(
                [g["judge_rating"] for g in group], [g["flipped"] for g in group]
            )
    return out


def summarise(
    rows: Sequence[dict[str, Any]], tables: dict[tuple[str, str], list], meta: dict[str, Any]
) -> dict[str, Any]:
    """summary.json: FR(3), FR(0), FR(3) - FR(0) and counts per model and type."""
    models: dict[str, dict[str, Any]] = {}
    for (model, kind), table in tables.items():
        group = [r for r in rows if r["model"] == model and r["perturbation_type"] == kind]
        usable = [r for r in group if r["text_after"] is not None]
        flips = [r["flipped"] for r in usable if r["flipped"] is not None]
        entry = {
            **self_consistency(table),
            "perturbations": len(group),
            "unusable_perturbations": len(group) - len(usable),
            "judge_unparsable": sum(r["judge_rating"] is None for r in usable),
            "answers_unreadable": sum(r["flipped"] is None for r in usable),
            "rated_with_answers": sum(fr.n for fr in table),
            "flip_rate_all": (sum(flips) / len(flips)) if flips else None,
            "strength_counts": {str(fr.strength): fr.n for fr in table},
            "mean_cosine_distance_by_strength": _mean_by_level(usable, "cosine_distance"),
            "mean_surprisal_change_by_strength": _mean_by_level(usable, "surprisal_change"),
            "accuracy_before": _mean([r["correct_before"] for r in usable]),
        }
        models.setdefault(model, {})[kind] = entry
    return {**meta, "models": models}


def plot_flip_rates(tables: dict[tuple[str, str], list], path: Path) -> None:
    """Grouped bars of FR(s) by strength, one bar per perturbation type (003 Fig. 6)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(m for m, _ in tables))
    fig, axes = plt.subplots(
        1, max(1, len(models)), figsize=(4.6 * max(1, len(models)), 3.6), squeeze=False
    )
    colours = {"input": "#d95f02", "cot": "#1b9e77", "paraphrase": "#7570b3"}
    for ax, model in zip(axes[0], models, strict=False):
        kinds = [k for k in TYPE_ORDER if (model, k) in tables]
        width = 0.8 / max(1, len(kinds))
        for j, kind in enumerate(kinds):
            table = tables[(model, kind)]
            xs = np.arange(len(STRENGTH_LEVELS)) + (j - (len(kinds) - 1) / 2) * width
            rates = np.array([0.0 if fr.n == 0 else fr.rate for fr in table])
            err = np.array(
                [[0.0, 0.0] if fr.n == 0 else [fr.rate - fr.low, fr.high - fr.rate]
                 for fr in table]
            ).T
            ax.bar(xs, 100 * rates, width, yerr=100 * err, capsize=3, label=kind,
                   color=colours.get(kind), alpha=0.85)
            for x, fr in zip(xs, table, strict=True):
                ax.text(x, 1, f"n={fr.n}", ha="center", va="bottom", fontsize=6, rotation=90)
        ax.set_xticks(range(len(STRENGTH_LEVELS)), [str(s) for s in STRENGTH_LEVELS])
        ax.set_xlabel("perturbation strength (LLM judge)")
        ax.set_ylabel("flip rate (%)")
        ax.set_ylim(0, 105)
        ax.set_title(model, fontsize=9)
        ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def render_report(summary: dict[str, Any], tables: dict[tuple[str, str], list]) -> str:
    """report.md: the flip-rate table, self-consistency and the measures by strength."""
    cfg = summary.get("config", {})
    lines = [
        f"# Perturbation strength and flip rates: {summary.get('task', '')}",
        "",
        f"{summary.get('items', '?')} items · models {', '.join(cfg.get('models', []))} · "
        f"writer {cfg.get('writer') or 'each model'} · judge {cfg.get('judge') or 'each model'}"
        f" · surprisal {cfg.get('surprisal_model') or 'not measured'} · "
        f"CoT perturbations: {cfg.get('cot_mode', '')} · {summary.get('seconds', '?')} s",
        "",
        "## Flip rate by strength (003 eq. 2), 95% Wilson intervals",
        "",
        "| model | type | FR(0) | FR(1) | FR(2) | FR(3) | responsive FR(3) ↑ | robust FR(0) ↓ |"
        " FR(3)−FR(0) ↑ |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for (model, kind), table in tables.items():
        s = summary["models"][model][kind]
        cells = [
            "–" if fr.n == 0 else f"{fr.flips}/{fr.n} = {fr.rate:.2f} [{fr.low:.2f}, {fr.high:.2f}]"
            for fr in table
        ]
        lines.append(
            f"| {model} | {kind} | {' | '.join(cells)} | {_fmt(s['responsive_fr3'])} | "
            f"{_fmt(s['robust_fr0'])} | {_fmt(s['overall'])} |"
        )
    lines += [
        "",
        "## Counts and the other strength measures",
        "",
        "| model | type | perturbations | unusable | judge unparsable | answers unreadable |"
        " accuracy before | mean cosine distance by strength 0/1/2/3 |"
        " mean Δh (bits) by strength 0/1/2/3 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for model, kinds in summary["models"].items():
        for kind, s in kinds.items():
            cos = "/".join(_fmt(v) for v in s["mean_cosine_distance_by_strength"].values())
            dh = "/".join(_fmt(v) for v in s["mean_surprisal_change_by_strength"].values())
            lines.append(
                f"| {model} | {kind} | {s['perturbations']} | {s['unusable_perturbations']} | "
                f"{s['judge_unparsable']} | {s['answers_unreadable']} | "
                f"{_fmt(s['accuracy_before'])} | {cos} | {dh} |"
            )
    lines += [
        "",
        "![flip rates](flip_rates.png)",
        "",
        "Notes: strengths are the LLM judge's 0-3 ratings (003 Fig. 17 guide, one example per "
        "level, T = 0); rows with an unparsable rating or an unreadable answer are left out of "
        "FR(s) and counted above. Input perturbations compare direct answers (App. H); CoT "
        "perturbations compare answers after the original and the perturbed CoT. "
        "`paraphrase` rows are App. D's x = 0 case (every CoT step paraphrased).",
        "",
    ]
    return "\n".join(lines)


def _mean_by_level(rows: Sequence[dict[str, Any]], key: str) -> dict[str, float | None]:
    out = {}
    for s in STRENGTH_LEVELS:
        vals = [r[key] for r in rows if r["judge_rating"] == s and r.get(key) is not None]
        out[str(s)] = float(np.mean(vals)) if vals else None
    return out


def _mean(values: Sequence[bool | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def _num(x: float) -> str:
    return "nan" if math.isnan(x) else f"{x:.6g}"


def _fmt(x: float | None) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.2f}"


__all__ = [
    "CSV_COLUMNS",
    "flip_tables",
    "plot_flip_rates",
    "render_report",
    "summarise",
    "write_outputs",
    "write_strength_run",
]

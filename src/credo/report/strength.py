"""The strength run folder of Le et al.'s pipeline (read by the HTML report; keep the
layout stable).

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
    ``model,perturbation_type,strength,n,flips,rate,low,high``: FR(s) of Le et al., eq. 2 over
    rows with a judge rating and both answers; ``low``/``high`` the 95% Wilson interval;
    ``nan`` where ``n = 0``.
``<out>/flip_rates.png``
    FR against strength, one panel per model, a bar group per strength, one bar per
    perturbation type (input vs CoT, as Le et al., Fig. 6), Wilson intervals as error bars.
``<out>/summary.json``
    Per model and type: responsive FR(3), robust FR(0), overall FR(3) - FR(0), counts;
    plus the configuration and model identities.
``<out>/report.md``
    The same as tables, with the departures from the paper.
``<out>/run_status.json``
    Written last: ``status`` complete or incomplete, the ``outcome``
    (:class:`credo.pipeline.ending.Outcome`) and, when incomplete, the model items left
    out (``<model>/<item id>`` -> why); ``summary.json`` holds them too, with the ledger.

Everything but the configuration is recomputed from ``strengths.jsonl`` by
:func:`write_outputs`, so the figures can be regenerated without a model. The figure is
drawn by :func:`credo.report.figures.plot_flip_rate_bars` and the tables by
:mod:`credo.report.md_pieces`, as for the run folders of ``credo run``.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from credo import jsonio
from credo.pipeline.ending import status_record
from credo.report import figures as fg
from credo.report.md_pieces import fmt_number, md_cell, md_table
from credo.report.rundata import FLIP_RATE_COLUMNS, STATUS_FILE
from credo.strength.flip import STRENGTH_LEVELS, FlipRate, flip_rate_summary, flip_rate_table

if TYPE_CHECKING:
    from credo.strength.pipeline import StrengthResult

TYPE_ORDER = ("input", "cot", "paraphrase")
CSV_COLUMNS = FLIP_RATE_COLUMNS


def write_strength_run(result: StrengthResult, out: str | Path) -> Path:
    """Write the run folder for ``result`` (see the module docstring), then
    ``run_status.json`` (written last, as a run folder's: complete, or incomplete with
    the outcome and the model items left out; a rerun resumes from the cache)."""
    folder = write_outputs([r.as_dict() for r in result.rows], out, _meta(result))
    marker = result.status or status_record(result.outcome, result.incomplete,
                                            result.stopped_by_budget)
    status = {
        "status": marker["status"], "outcome": marker["outcome"], "rows": len(result.rows),
        "items_incomplete": marker["items_incomplete"],
        **({"incomplete": result.incomplete} if result.incomplete else {}),
        **marker, "written": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    jsonio.write_text(folder / STATUS_FILE, jsonio.dumps(status, indent=2))
    return folder


def strength_summary(result: StrengthResult) -> dict[str, Any]:
    """What ``summary.json`` holds for ``result`` (FR(3), FR(0), counts per model and
    type), without writing it: the command line prints it."""
    rows = [r.as_dict() for r in result.rows]
    return summarise(rows, flip_tables(rows), _meta(result))


def _meta(result: StrengthResult) -> dict[str, Any]:
    return {
        "task": result.task.name,
        "items": len(result.task.items),
        "config": result.config.model_dump(mode="json"),
        "identities": result.identities,
        "seconds": round(result.seconds, 1),
        **({"incomplete": result.incomplete} if result.incomplete else {}),
        **({"ledger": result.ledger} if result.ledger else {}),
    }


def write_outputs(rows: Sequence[dict[str, Any]], out: str | Path, meta: dict[str, Any]) -> Path:
    """strengths.jsonl, flip_rates.csv/.png, summary.json and report.md from the rows, each
    written atomically (:mod:`credo.jsonio`: an interrupted run leaves no half file)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    jsonio.write_jsonl(out / "strengths.jsonl", rows)
    tables = flip_tables(rows)
    buf = io.StringIO(newline="")
    w = csv.writer(buf)
    w.writerow(CSV_COLUMNS)
    for r in flip_rate_rows(tables):
        w.writerow([r[c] if c not in ("rate", "low", "high") else _num(r[c])
                    for c in CSV_COLUMNS])
    jsonio.write_text(out / "flip_rates.csv", buf.getvalue())
    summary = summarise(rows, tables, meta)
    jsonio.write_text(out / "summary.json", jsonio.dumps(summary, indent=2) + "\n")
    save_flip_rate_figure(tables, out / "flip_rates.png")
    jsonio.write_text(out / "report.md", render_report(summary, tables))
    return out


def flip_rate_rows(tables: dict[tuple[str, str], list[FlipRate]]) -> list[dict[str, Any]]:
    """The rows of ``flip_rates.csv`` (columns :data:`CSV_COLUMNS`), one per strength level
    of each (model, perturbation type): FR(s) of Le et al., eq. 2 with its Wilson interval."""
    return [
        {"model": model, "perturbation_type": kind, "strength": fr.strength, "n": fr.n,
         "flips": fr.flips, "rate": fr.rate, "low": fr.low, "high": fr.high}
        for (model, kind), table in tables.items()
        for fr in table
    ]


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
            **flip_rate_summary(table),
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


def save_flip_rate_figure(tables: dict[tuple[str, str], list[FlipRate]], path: Path) -> Path:
    """``flip_rates.png``: one panel per model of FR(s) by strength, a bar per perturbation
    type (Le et al., Fig. 6; :func:`credo.report.figures.plot_flip_rate_bars`)."""
    rows = flip_rate_rows(tables)
    models = list(dict.fromkeys(m for m, _ in tables))
    fig, axes = fg.new_figure(4.6 * max(1, len(models)), 3.6, 1, max(1, len(models)))
    for ax, model in zip(axes[0], models, strict=False):
        fg.plot_flip_rate_bars(ax, [r for r in rows if r["model"] == model], model)
    return fg.save_figure(fig, path, dpi=130)


def render_report(summary: dict[str, Any], tables: dict[tuple[str, str], list]) -> str:
    """report.md: the flip-rate table, self-consistency and the measures by strength."""
    cfg = summary.get("config", {})
    lines = [
        f"# Perturbation strength and flip rates: {summary.get('task', '')}",
        "",
        f"{summary.get('items', '?')} items · models "
        f"{', '.join(_spec(m) for m in cfg.get('models', []))} · "
        f"writer {_spec(cfg.get('writer')) or 'each model'} · judge "
        f"{_spec(cfg.get('judge')) or 'each model'}"
        f" · surprisal {cfg.get('surprisal_model') or 'not measured'} · "
        f"CoT perturbations: {cfg.get('cot_mode', '')} · {summary.get('seconds', '?')} s",
        "",
        *(_incomplete_lines(summary.get("incomplete") or {})),
        "## Flip rate by strength (Le et al., eq. 2), 95% Wilson intervals",
        "",
        *md_table(_flip_rate_table_rows(summary, tables)),
        "",
        "## Counts and the other strength measures",
        "",
        *md_table(_count_table_rows(summary)),
        "",
        "![flip rates](flip_rates.png)",
        "",
        "Notes: strengths are the LLM judge's 0-3 ratings (Le et al., Fig. 17 guide, one example "
        "per level, T = 0); rows with an unparsable rating or an unreadable answer are left out of "
        "FR(s) and counted above. Input perturbations compare direct answers (App. H); CoT "
        "perturbations compare answers after the original and the perturbed CoT. "
        "`paraphrase` rows are App. D's x = 0 case (every CoT step paraphrased).",
        "",
    ]
    return "\n".join(lines)


def _spec(role: Any) -> str:
    """A role of the dumped config as its model spec (a bare string, or a role's
    ``model``)."""
    if isinstance(role, dict):
        return str(role.get("model") or "")
    return str(role or "")


def _incomplete_lines(incomplete: dict[str, str]) -> list[str]:
    """What an incomplete run left out (``<model>/<item id>``: why), ended by a blank."""
    if not incomplete:
        return []
    return [f"Incomplete: {len(incomplete)} model items left out (their requests failed or the "
            "cost budget stopped them); a rerun generates only what is missing.", "",
            *(f"- {md_cell(k)}: {why}" for k, why in incomplete.items()), ""]


def _flip_rate_table_rows(
    summary: dict[str, Any], tables: dict[tuple[str, str], list[FlipRate]]
) -> list[list[str]]:
    """FR(s) per level as ``flips/n = rate [low, high]``, then FR(3), FR(0), FR(3) − FR(0)."""
    rows = [["model", "type", *(f"FR({s})" for s in STRENGTH_LEVELS), "responsive FR(3) ↑",
             "robust FR(0) ↓", "FR(3)−FR(0) ↑"]]
    for (model, kind), table in tables.items():
        s = summary["models"][model][kind]
        cells = [
            "–" if fr.n == 0 else f"{fr.flips}/{fr.n} = {fr.rate:.2f} [{fr.low:.2f}, {fr.high:.2f}]"
            for fr in table
        ]
        rows.append([model, kind, *cells, _fmt(s["responsive_fr3"]), _fmt(s["robust_fr0"]),
                     _fmt(s["overall"])])
    return rows


def _count_table_rows(summary: dict[str, Any]) -> list[list[str]]:
    """Counts, accuracy before, and the cosine and surprisal measures by judge level."""
    rows = [["model", "type", "perturbations", "unusable", "judge unparsable",
             "answers unreadable", "accuracy before", "mean cosine distance by strength 0/1/2/3",
             "mean Δh (bits) by strength 0/1/2/3"]]
    for model, kinds in summary["models"].items():
        for kind, s in kinds.items():
            cos = "/".join(_fmt(v) for v in s["mean_cosine_distance_by_strength"].values())
            dh = "/".join(_fmt(v) for v in s["mean_surprisal_change_by_strength"].values())
            rows.append([model, kind, str(s["perturbations"]), str(s["unusable_perturbations"]),
                         str(s["judge_unparsable"]), str(s["answers_unreadable"]),
                         _fmt(s["accuracy_before"]), cos, dh])
    return rows


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
    """Two decimals, ``–`` when missing (the strength report's tables)."""
    return fmt_number(x, 2, "–")


__all__ = [
    "CSV_COLUMNS",
    "flip_rate_rows",
    "flip_tables",
    "render_report",
    "save_flip_rate_figure",
    "strength_summary",
    "summarise",
    "write_outputs",
    "write_strength_run",
]

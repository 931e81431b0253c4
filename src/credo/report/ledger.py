"""The ledger of a run as a table: requests, samples, tokens and cost per stage.

Reads the ``stats.ledger`` mapping of ``metrics.json``
(:meth:`credo.generation.ledger.Ledger.to_dict`), so ``report.md`` and the HTML run page
show the same rows, rebuilt from the run folder alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["LEDGER_COLUMNS", "fmt_usd", "ledger_notes", "ledger_table_rows"]

LEDGER_COLUMNS = (
    ("requests", "requests"),
    ("samples", "samples"),
    ("cached_samples", "cached"),
    ("generated_samples", "generated"),
    ("calls", "calls"),
    ("prompt_tokens", "prompt tokens"),
    ("completion_tokens", "completion tokens"),
)
"""The counts of a ledger row (key, header), in table order; the cost follows."""


def fmt_usd(x: Any) -> str:
    """A cost in US dollars with 6 decimals; ``–`` when unpriced (None)."""
    if x is None:
        return "–"
    return f"{float(x):.6f}"


def ledger_table_rows(ledger: Mapping[str, Any]) -> list[list[str]]:
    """Header, one row per stage (stage, models, the :data:`LEDGER_COLUMNS`, cost USD) and
    the total; only the header when the ledger has no stage."""
    header = ["stage", "model", *(label for _, label in LEDGER_COLUMNS), "cost USD"]
    rows = [header]
    for stage, entry in (ledger.get("stages") or {}).items():
        rows.append(_row(stage, ", ".join(entry.get("models") or ()), entry))
    total = ledger.get("total")
    if total and len(rows) > 1:
        rows.append(_row("total", "", total))
    return rows


def _row(stage: str, models: str, entry: Mapping[str, Any]) -> list[str]:
    return [
        stage,
        models,
        *(str(entry.get(key, 0)) for key, _ in LEDGER_COLUMNS),
        fmt_usd(entry.get("cost_usd")),
    ]


def ledger_notes(ledger: Mapping[str, Any]) -> list[str]:
    """One line each: how tokens are counted, the prices, the budget and whether it
    stopped the run."""
    notes = [f"Counting: {ledger.get('counting', '')}."]
    prices = ledger.get("prices") or {}
    if prices:
        notes.append(
            "Prices (USD per million prompt / completion tokens): "
            + "; ".join(
                f"{identity}: {p.get('prompt_usd_per_mtok')} / {p.get('completion_usd_per_mtok')}"
                for identity, p in prices.items()
            )
            + "."
        )
    else:
        notes.append(
            "No prices given (model_options price_prompt_usd_per_mtok,"
            " price_completion_usd_per_mtok): no cost."
        )
    budget = ledger.get("max_cost_usd")
    if budget is not None:
        spent = fmt_usd((ledger.get("total") or {}).get("cost_usd") or 0.0)
        state = (
            "reached: requests left undispatched, rerun to resume"
            if ledger.get("stopped_by_budget")
            else "reached" if ledger.get("budget_reached") else "not reached"
        )
        notes.append(f"Budget max_cost_usd = {budget}: {spent} USD spent, {state}.")
    return notes

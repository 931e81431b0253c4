"""The tables of docs/results.md's issue-16 and issue-15 sections, read from the run folders
that docs/results/neutrality_runs.sh writes (metrics.json, perturbations.jsonl, scores.jsonl,
config.yaml): Δ and its CI, rejections per rule (and the strict rules applied afterwards to
every kept prefix), C3 / cross / self-consistency per prefix source, every estimator.

Usage: python docs/results/neutrality_tables.py [runs/neutrality]
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from credo.perturb.context import rule_context
from credo.perturb.rules import broken_rule
from credo.tasks.builtin import load_task
from credo.tasks.loaders import read_jsonl

TASKS = [("geo", "MMLU hs geography"), ("stats", "MMLU hs statistics"),
         ("arc", "ARC-Challenge"), ("tqa", "TruthfulQA-MC1"), ("gsm8k", "GSM8K (expression)")]
SOURCES = [("old", "0.5B, v1, basic"), ("new", "1.5B, v2, strict"),
           ("corpus", "corpus (App. F)")]
HEADLINE = ("c3", "c3_cross", "self_consistency")


def rows(path: Path) -> list[dict[str, Any]]:
    return [dict(row) for _, row in read_jsonl(path)]


def fmt(metrics: dict[str, Any], key: str) -> str:
    """``value [low, high]`` of one metric, or n/a."""
    value = metrics.get(key)
    if value is None:
        return "n/a"
    low, high = metrics.get(key + "_low"), metrics.get(key + "_high")
    return f"{value:.2f} [{low:.2f}, {high:.2f}]" if low is not None else f"{value:.2f}"


def strict_breaks(run: Path) -> tuple[int, Counter[str]]:
    """Kept prefixes of ``run`` and, per strict rule, how many of them break it."""
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    items = {it.id: it for it in load_task(cfg["task"], cfg.get("limit")).items}
    answers = {r["id"]: r.get("original_answers", []) for r in rows(run / "scores.jsonl")}
    broken: Counter[str] = Counter()
    kept = 0
    for row in rows(run / "perturbations.jsonl"):
        ctx = rule_context(items[row["id"]], "strict", answers.get(row["id"], []))
        for text in row["kept"]:
            kept += 1
            rule = broken_rule(text, ctx, "strict")
            if rule:
                broken[rule] += 1
    return kept, broken


def counts(by: Counter[str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in by.most_common()) or "–"


def run_rows(run: Path, task: str, source: str) -> tuple[str, str]:
    """The neutrality row and the rejections row of one run."""
    m = json.loads((run / "metrics.json").read_text())
    n = m.get("neutrality") or {}
    pert = rows(run / "perturbations.jsonl")
    by: Counter[str] = Counter()
    for p in pert:
        by.update(p.get("rejected_by") or {})
    similar = sum(p.get("rejected_similar", 0) for p in pert)
    kept, broken = strict_breaks(run)
    neutral = "yes" if n.get("neutral") else "**no**"
    delta = f"{n['mean_delta']:+.2f} [{n['low']:+.2f}, {n['high']:+.2f}]" if n else "n/a"
    reuse = m["stats"].get("items_with_reused_perturbations", 0)
    return (
        f"| {task} | {source} | {m['accuracy']:.3f} | {delta} | {neutral} | {reuse} |",
        f"| {task} | {source} | {sum(p.get('candidates', 0) for p in pert)} | {counts(by)}; "
        f"similar {similar} | {kept} | {sum(broken.values())}: {counts(broken)} |",
    )


def main(root: Path) -> None:
    neutrality, rejections, headline, estimators = [], [], [], []
    for t, task in TASKS:
        for s, source in SOURCES:
            run = root / f"{t}-{s}"
            if not (run / "metrics.json").exists():
                continue
            row_n, row_r = run_rows(run, task, source)
            neutrality.append(row_n)
            rejections.append(row_r)
            methods = json.loads((run / "metrics.json").read_text())["methods"]
            for name, mm in methods.items():
                if name in HEADLINE:
                    headline.append(
                        f"| {task} | {source} | {name} | {fmt(mm, 'ece')} | {fmt(mm, 'auroc')}"
                        f" | {fmt(mm, 'prr')} | {mm.get('smaller_class')} |"
                    )
                if s == "new":
                    estimators.append(
                        f"| {task} | {name} | {fmt(mm, 'ece')} | {fmt(mm, 'brier')} | "
                        f"{fmt(mm, 'auroc')} | {fmt(mm, 'auarc')} | {fmt(mm, 'prr')} |"
                    )
    tables = [
        ("neutrality", "| task | prefixes | accuracy | mean Δ [95% CI] | neutral "
                       "| items reusing |", neutrality),
        ("rejections", "| task | prefixes | candidates | rejected by rule (run's own set) "
                       "| kept | kept that break a strict rule |", rejections),
        ("C3 / cross / SC per writer", "| task | prefixes | method | ECE | AUROC | PRR "
                                       "| smaller class |", headline),
        ("estimators (new writer runs)", "| task | method | ECE | Brier | AUROC | AUARC "
                                         "| PRR |", estimators),
    ]
    for i, (title, header, lines) in enumerate(tables):
        rule = "|" + "---|" * (header.count("|") - 1)
        print(("\n" if i else "") + f"## {title}\n{header}\n{rule}\n" + "\n".join(lines))


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "runs/neutrality"))

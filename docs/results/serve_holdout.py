"""The gateway's real-task result: certify on one half of a labelled task, serve the
other half's questions through the gateway as unlabelled, and grade what it accepted.

1. The config's items (its ``limit``) are shuffled (``--seed``) and halved.
2. The calibration half: a full labelled ``credo run`` (``OUT/calib``), then two
   certificates at ``--alpha`` / ``--delta``: the full recipe's (``credo certify``) and
   the adaptive decision procedure's (``credo certify --adaptive decision``, replayed from
   that run's cache).
3. The test half's questions go through ``credo serve``'s HTTP layer (in this process,
   :class:`credo.serve.server.Gateway` over a :class:`credo.Guard` of the adaptive
   certificate) from the official ``openai`` client, all at once, without their gold
   answers: the gateway samples them live, under the decision rule.
4. The test half again as a full labelled run (``OUT/test-full``) on the same cache: each
   request's first samples are the gateway's, the rest drawn now, so the full recipe is
   compared with the adaptive one on the same samples.
5. The gateway's answers graded against the gold answers it never saw: the realised error
   rate of the accepted ones against α (exact Clopper-Pearson 95% CI), the coverage (CI),
   the samples per question against the full recipe's n, and how often its accept decision
   equals the full recipe's (the full run's score against the same threshold, and against
   the full recipe's own certificate). Written to ``OUT/holdout.json`` and
   ``OUT/holdout.md``; printed.

::

    .venv/bin/python docs/results/serve_holdout.py --config configs/serve-holdout-arc-easy.yaml \
        --alpha 0.2 --n 64

``--n`` (n and m) and ``--limit`` replace the config's. Cost: the calibration half at n,
and the test half at n (the gateway's samples are the first of them): items x n samples in
all (200 x 64 = 12,800; at 5-8 samples/s for the embedded 1.5B on two cores, 30-45
minutes; a run at a larger n or limit on the same cache draws only the samples it adds).
tests/test_serve_holdout.py runs it on the scripted backend.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import beta

from credo import RunConfig, run
from credo.api import certify_adaptive, certify_run
from credo.pipeline.runner import configured_task
from credo.serve.guard import Guard
from credo.serve.server import Gateway
from credo.tasks.answers import Answer
from credo.tasks.base import Task
from credo.tasks.grading import is_correct


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The exact binomial CI of ``k`` of ``n``."""
    if n == 0:
        return math.nan, math.nan
    tail = (1 - level) / 2
    low = beta.ppf(tail, k, n - k + 1) if k else 0.0
    high = beta.ppf(1 - tail, k + 1, n - k) if k < n else 1.0
    return float(low), float(high)


def halves(task: Task, seed: int) -> tuple[Task, Task]:
    order = np.random.default_rng(seed).permutation(len(task.items))
    cut = len(order) // 2
    pick = [task.items[i] for i in order]
    return (dataclasses.replace(task, items=tuple(pick[:cut])),
            dataclasses.replace(task, items=tuple(pick[cut:])))


async def ask(url: str, model: str, test: Task) -> list[Any]:
    """Every test question at once through the official client, without its gold."""
    import openai

    client = openai.AsyncOpenAI(base_url=url, api_key="none", max_retries=0, timeout=None)
    async with client:
        return await asyncio.gather(*(
            client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": it.question}],
                extra_body={"credo": {"choices": list(it.choices)}} if it.choices else None)
            for it in test.items))


def main(argv: Sequence[str] | None = None, **handed: Any) -> dict[str, Any]:
    """The experiment (module docstring); ``handed``: ``model`` (and ``task``) replacing
    the config's, as tests/test_serve_holdout.py hands in the scripted backend."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", type=Path, required=True)
    p.add_argument("--out", type=Path, help="default: the config's out")
    p.add_argument("--alpha", type=float, default=0.1)
    p.add_argument("--delta", type=float, default=0.1)
    p.add_argument("--method", default="self_consistency")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--n", type=int, help="samples per question (n and m); default: the config's")
    p.add_argument("--limit", type=int, help="questions, halved; default: the config's")
    args = p.parse_args(argv)
    config = RunConfig.from_yaml(args.config, n=args.n, m=args.n, limit=args.limit)
    out = args.out or config.out
    model = handed.get("model")
    task = (handed.get("task") or configured_task(config)).head(config.limit)
    calib, test = halves(task, args.seed)
    cfg = config.model_copy(update={"out": out / "calib", "methods": [args.method],
                                    "limit": None})
    run(cfg, model=model, task=calib, show_progress=False)
    full_cert = certify_run(out / "calib", args.method, alpha=args.alpha, delta=args.delta,
                            out=out / "certificate-full.json")
    made = certify_adaptive(out / "calib", args.method, alpha=args.alpha, delta=args.delta,
                            out=out / "certificate-adaptive.json", model=model, task=calib)
    t = made.certificate.certificate.threshold
    if t is None:
        raise SystemExit(f"nothing certified: {made.certificate.certificate.message}")
    with Guard(out / "certificate-adaptive.json", model=model,
               log=out / "decisions.jsonl", max_queue=max(256, len(test.items))) as guard, \
            Gateway(guard) as url:
        replies = asyncio.run(ask(url, guard.model_identity, test))
    full = run(cfg.model_copy(update={"out": out / "test-full"}), model=model, task=test,
               show_progress=False)
    result = _measure(test, replies, full, args, t, full_cert.certificate.threshold,
                      made, config.n)
    (out / "holdout.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "holdout.md").write_text(_table(result))
    print(_table(result))
    return result


def _measure(test: Task, replies: Sequence[Any], full: Any, args: argparse.Namespace,
             t: float, t_full: float | None, made: Any, n: int) -> dict[str, Any]:
    by_id = {r.item.id: r for r in full.items}
    rows = []
    for it, reply in zip(test.items, replies, strict=True):
        c = reply.credo
        ok = c["answer"] is not None and is_correct(
            Answer(c["answer"], reply.choices[0].message.content), it, test.format)
        f = by_id.get(it.id)
        score = f.scores.get(args.method, math.nan) if f else math.nan
        rows.append({"id": it.id, "accept": c["accept"], "correct": bool(ok),
                     "samples": c["samples"], "full_score": score,
                     "full_correct": f.answer_correct if f else math.nan})
    accepted = [r for r in rows if r["accept"]]
    errors = sum(not r["correct"] for r in accepted)
    full_at_t = [bool(r["full_score"] >= t) for r in rows]
    full_own = [bool(t_full is not None and r["full_score"] >= t_full) for r in rows]
    own_accepted = [r for r, a in zip(rows, full_own, strict=True) if a]
    own_errors = sum(r["full_correct"] < 0.5 for r in own_accepted)
    m = len(rows)
    return {
        "items": m, "alpha": args.alpha, "delta": args.delta, "method": args.method,
        "threshold_adaptive": t, "threshold_full": t_full,
        "calibration": {"items": len(made.replay.items), "replays": made.replay.replays,
                        "sample_share": made.replay.sample_share,
                        "decisions_equal_full": made.replay.agreement},
        "adaptive": {
            "accepted": len(accepted), "coverage": len(accepted) / m,
            "coverage_ci": clopper_pearson(len(accepted), m),
            "error_rate": errors / len(accepted) if accepted else None,
            "error_ci": clopper_pearson(errors, len(accepted)),
            "samples_per_question": float(np.mean([r["samples"] for r in rows])),
            "full_samples_per_question": n,
        },
        "full": {
            "accepted": len(own_accepted), "coverage": len(own_accepted) / m,
            "coverage_ci": clopper_pearson(len(own_accepted), m),
            "error_rate": own_errors / len(own_accepted) if own_accepted else None,
            "error_ci": clopper_pearson(own_errors, len(own_accepted)),
        },
        "decisions_equal_full_at_t": float(np.mean(
            [r["accept"] == a for r, a in zip(rows, full_at_t, strict=True)])),
        "decisions_equal_full_certificate": float(np.mean(
            [r["accept"] == a for r, a in zip(rows, full_own, strict=True)])),
    }


def _f(x: float | None, fmt: str = ".3f") -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def _table(r: dict[str, Any]) -> str:
    a, f = r["adaptive"], r["full"]
    lines = [
        f"{r['items']} test questions served unlabelled; {r['method']}, alpha = "
        f"{r['alpha']:g}, delta = {r['delta']:g}; thresholds: adaptive "
        f"{_f(r['threshold_adaptive'], '.4g')}, full recipe {_f(r['threshold_full'], '.4g')}",
        "",
        "| procedure | accepted | coverage [95% CI] | error rate among accepted [95% CI] "
        "| samples / question |",
        "|---|---|---|---|---|",
        f"| adaptive decision (gateway, live) | {a['accepted']} | {a['coverage']:.3f} "
        f"[{_f(a['coverage_ci'][0])}, {_f(a['coverage_ci'][1])}] | {_f(a['error_rate'])} "
        f"[{_f(a['error_ci'][0])}, {_f(a['error_ci'][1])}] | {a['samples_per_question']:.1f} |",
        f"| full recipe (its own certificate) | {f['accepted']} | {f['coverage']:.3f} "
        f"[{_f(f['coverage_ci'][0])}, {_f(f['coverage_ci'][1])}] | {_f(f['error_rate'])} "
        f"[{_f(f['error_ci'][0])}, {_f(f['error_ci'][1])}] | "
        f"{a['full_samples_per_question']} |",
        "",
        f"Accept decisions equal the full recipe's: {r['decisions_equal_full_at_t']:.1%} at "
        f"the same threshold, {r['decisions_equal_full_certificate']:.1%} against the full "
        "recipe's own certificate. On the calibration half the replay drew "
        f"{_f(r['calibration']['sample_share'], '.1%')} of the samples "
        f"({r['calibration']['replays']} replays).",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()

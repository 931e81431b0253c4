"""The HTML report, its figures and analyses, the Parquet exports (issue 6).

Run folders are built with ``credo.run`` on a ScriptedModel and the bag-of-words
embedder, then everything is regenerated from the folder alone.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from sklearn.metrics import average_precision_score, roc_auc_score

from conftest import BagOfWordsEmbedder, toy_respond, toy_task
from credo import RunConfig, run
from credo.evaluate.convergence import ItemTrials, trial_convergence
from credo.evaluate.metrics import ece, ece_discrete
from credo.evaluate.paired import auroc_rows, average_precision, ece_rows, paired_bootstrap
from credo.evaluate.quadrants import diagnose, region_of
from credo.methods import c3, self_consistency
from credo.models.scripted import ScriptedModel
from credo.report import analysis as an
from credo.report.export import flatten_row
from credo.report.figures import discrete_levels
from credo.report.html import ReportOptions, write_report, write_run_report
from credo.report.rundata import RunFolderError, load_run, read_flip_rates

TASK = toy_task()
respond = toy_respond


@pytest.fixture(scope="module")
def built_run(tmp_path_factory):
    """One scripted run for the module (the run writes its own report.html)."""
    base = tmp_path_factory.mktemp("built")
    cfg = RunConfig(task="toy", n=6, m=6, limit=None, out=base / "run",
                    cache=base / "cache.sqlite")
    run(cfg, model=ScriptedModel(respond), embedder=BagOfWordsEmbedder(), task=TASK,
        show_progress=False)
    return cfg.out


@pytest.fixture
def run_dir(built_run, tmp_path):
    """A private copy of the built run folder (tests edit it), with the cache beside it."""
    shutil.copy(built_run.parent / "cache.sqlite", tmp_path / "cache.sqlite")
    return Path(shutil.copytree(built_run, tmp_path / "run"))


def _imgs(page: str) -> list[str]:
    return re.findall(r'<img[^>]*src="([^"]*)"', page)


# --------------------------------------------------------------------------- run folder


def test_run_writes_a_self_contained_page_and_parquet(run_dir):
    page = (run_dir / "report.html").read_text()
    srcs = _imgs(page)
    assert len(srcs) >= 6  # reliability, histograms, ROC/PR, quadrants, convergence, neutrality
    assert all(s.startswith("data:image/png;base64,") for s in srcs)
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)  # nothing fetched
    for heading in ("Calibration and ranking", "Reliability diagrams", "Benchmark diagnosis",
                    "Neutrality (A.3)", "Trial-count convergence", "Paired comparisons"):
        assert heading in page
    # samples.jsonl now records correctness of perturbed samples too (000 App. A.3)
    rows = [json.loads(x) for x in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert all(isinstance(r["correct"], bool) for r in rows)
    fragile = [r for r in rows if r["id"] == "fragile" and r["set"] == "perturbed"]
    assert fragile and not any(r["correct"] for r in fragile)


def test_parquet_round_trip(run_dir):
    scores = [json.loads(x) for x in (run_dir / "scores.jsonl").read_text().splitlines()]
    table = pq.read_table(run_dir / "scores.parquet").to_pylist()
    assert [r["id"] for r in table] == [r["id"] for r in scores]
    for got, want in zip(table, scores, strict=True):
        assert got["p_bar"] == pytest.approx(want["p_bar"])
        assert got["gold"] == want["gold"]
        assert got["original_answers"] == want["original_answers"]
        for m, v in want["scores"].items():
            assert got[f"score_{m}"] == pytest.approx(v)
    samples = [json.loads(x) for x in (run_dir / "samples.jsonl").read_text().splitlines()]
    got = pq.read_table(run_dir / "samples.parquet").to_pylist()
    assert len(got) == len(samples)
    for g, want in zip(got, samples, strict=True):
        flat = flatten_row(want)
        assert {k: v for k, v in g.items() if v is not None} == {
            k: v for k, v in flat.items() if v is not None}


def test_figures_regenerate_from_the_folder_alone(run_dir, tmp_path, monkeypatch):
    copy = tmp_path / "elsewhere" / "copy"
    shutil.copytree(run_dir, copy)
    for f in ("report.html", "scores.parquet", "samples.parquet"):
        (copy / f).unlink()
    (tmp_path / "cache.sqlite").unlink()  # no cache, no model: only the folder

    def no_model(*a, **k):
        raise AssertionError("the report must not load a model")

    monkeypatch.setattr("credo.models.registry.load_model", no_model)
    monkeypatch.setattr("credo.models.embedders.load_embedder", no_model)
    page = write_run_report(copy, ReportOptions(n_resamples=200))
    assert page == copy / "report.html"
    assert (copy / "scores.parquet").is_file() and (copy / "samples.parquet").is_file()
    original = (run_dir / "report.html").read_text()
    assert len(_imgs(page.read_text())) == len(_imgs(original))


def test_report_handles_any_method_set(run_dir, tmp_path):
    """Methods come from the files: a discrete one, one with missing scores, one with none."""
    rows = [json.loads(x) for x in (run_dir / "scores.jsonl").read_text().splitlines()]
    for k, r in enumerate(rows):
        r["scores"]["answer_consistency"] = [1.0, 5 / 6, 0.5, 1.0, 1.0, 0.5, 1.0][k]
        r["scores"]["verbalized"] = None if k % 3 == 0 else 0.9
        r["scores"]["p_true"] = "not available on this backend"
    (run_dir / "scores.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    metrics = json.loads((run_dir / "metrics.json").read_text())
    metrics["methods"]["verbalized"] = {"ece": 0.3, "pearson": 0.1, "polarisation": 0.0}
    metrics["methods"]["p_true"] = {"status": "not available on this backend"}
    (run_dir / "metrics.json").write_text(json.dumps(metrics))

    loaded = load_run(run_dir)
    assert loaded.methods[-3:] == ["verbalized", "p_true", "answer_consistency"]
    summaries = {s.method: s for s in an.method_summaries(loaded, n_resamples=100)}
    assert summaries["verbalized"].n_items == 4
    assert summaries["p_true"].n_items == 0 and "not available" in summaries["p_true"].note
    assert summaries["answer_consistency"].levels is not None
    assert summaries["verbalized"].extra["pearson"] == 0.1
    page = write_run_report(run_dir, ReportOptions(n_resamples=100)).read_text()
    for m in ("answer_consistency", "verbalized", "p_true", "(discrete)", "pearson"):
        assert m in page


def test_table_estimates_match_sklearn_and_metrics(run_dir):
    loaded = load_run(run_dir)
    perf = loaded.performance
    y = (perf >= 0.5).astype(int)
    for s in an.method_summaries(loaded, n_resamples=300):
        sc = loaded.score(s.method)
        assert s.estimates["ece"].value == pytest.approx(ece(sc, perf))
        assert s.estimates["auroc"].value == pytest.approx(roc_auc_score(y, sc))
        assert s.estimates["auprc_pos"].value == pytest.approx(average_precision_score(y, sc))
        assert s.estimates["auprc_neg"].value == pytest.approx(
            average_precision_score(1 - y, 1 - sc))
        for e in s.estimates.values():
            assert e.low <= e.value + 1e-9 or np.isnan(e.low)
            assert e.high >= e.value - 1e-9 or np.isnan(e.high)


def test_bad_run_folder_errors_name_the_file_and_line(tmp_path):
    with pytest.raises(RunFolderError, match="missing"):
        load_run(tmp_path)
    (tmp_path / "metrics.json").write_text("{}")
    (tmp_path / "scores.jsonl").write_text('{"id": "a", "p_bar": 1}\n{"id": \n')
    with pytest.raises(RunFolderError, match=r"scores.jsonl:2"):
        load_run(tmp_path)


# --------------------------------------------------------------------------- comparison


def test_credo_report_compares_runs_with_flip_rates(run_dir, tmp_path, capsys):
    from credo.cli import main

    second = tmp_path / "second"
    shutil.copytree(run_dir, second)
    strength = tmp_path / "strength"
    strength.mkdir()
    (strength / "flip_rates.csv").write_text(
        "model,perturbation_type,strength,n,flips,rate,low,high\n"
        "m1,context,1,40,2,0.05,0.01,0.17\n"
        "m1,context,2,40,6,0.15,0.07,0.29\n"
        "m1,context,3,40,15,0.375,0.24,0.53\n"
        "m1,paraphrase,1,30,1,0.033,0.006,0.17\n"
        "m1,paraphrase,3,30,9,0.3,0.17,0.48\n"
    )
    out = tmp_path / "cmp"
    assert main(["report", str(run_dir), str(second), "--out", str(out), "--resamples", "200",
                 "--strength", str(strength), "--pairs", "c3:self_consistency,c3:c3_cross"]) == 0
    index = (out / "index.html").read_text()
    assert (out / "run.html").is_file() and (out / "second.html").is_file()
    assert "flip rate" in index.lower() and "Benchmark diagnosis" in index
    assert index.count("c3_cross") >= 2
    # the table carries a CI under every defined estimate: [low, high]
    assert len(re.findall(r"<span class=ci>\[\d\.\d{3}, \d\.\d{3}\]</span>", index)) >= 8
    assert all(s.startswith("data:image/png;base64,") for s in _imgs(index))
    assert main(["report", str(run_dir), "--pairs", "c3:nope"]) == 2


def test_flip_rate_csv_is_checked(tmp_path):
    bad = tmp_path / "flip_rates.csv"
    bad.write_text("model,perturbation_type,strength,n,flips,rate,low,high\nm,c,low,ten,1,0.1,0,1\n")
    with pytest.raises(RunFolderError, match=r"flip_rates.csv:2"):
        read_flip_rates(bad)
    bad.write_text("model,strength\n")
    with pytest.raises(RunFolderError, match="missing columns"):
        read_flip_rates(bad)
    ok = tmp_path / "ok.csv"
    ok.write_text("model,perturbation_type,strength,n,flips,rate,low,high\nm,c,low,10,1,0.1,,\n")
    (row,) = read_flip_rates(ok)
    assert row["strength"] == "low" and np.isnan(row["low"])


# --------------------------------------------------------------------------- quadrants


def test_quadrants_follow_000_fig4():
    assert region_of(0.9, 0.9, 0.5, 0.5) == "mastered"
    assert region_of(0.9, 0.1, 0.5, 0.5) == "brittle"
    assert region_of(0.1, 0.9, 0.5, 0.5) == "biased"
    assert region_of(0.1, 0.1, 0.5, 0.5) == "unlearned"
    run_a = {"m": (1.0, 1.0), "b": (1.0, 0.2), "x": (0.0, 0.9), "u": (0.0, 0.1),
             "mid": (0.5, 0.5)}
    run_b = {"m": (0.8, 0.8), "b": (0.6, 0.0), "x": (0.2, 1.0), "u": (0.2, 0.3),
             "mid": (0.5, 0.5)}
    q = diagnose([run_a, run_b])
    # per-item means over the two runs, median split of those means
    assert q.performance[q.item_ids.index("b")] == pytest.approx(0.8)
    assert q.perf_split == pytest.approx(np.median([0.9, 0.8, 0.1, 0.1, 0.5]))
    assert q.c3_split == pytest.approx(np.median([0.9, 0.1, 0.95, 0.2, 0.5]))
    regions = dict(zip(q.item_ids, q.regions, strict=True))
    # "mid" lies on both medians; 2 items above and 2 below each: ties go low
    assert regions == {"m": "mastered", "b": "brittle", "x": "biased", "u": "unlearned",
                       "mid": "unlearned"}
    assert q.counts == {"mastered": 1, "brittle": 1, "biased": 1, "unlearned": 2}
    assert q.items_in("biased") == ["x"]
    # many items tied at the top (C3 = 1): the ties are the high side
    q = diagnose([{"a": (1.0, 1.0), "b": (0.0, 1.0), "c": (1.0, 1.0), "d": (1.0, 0.2),
                   "e": (0.0, 0.0)}])
    assert q.c3_split == 1.0 and q.perf_split == 1.0
    assert dict(zip(q.item_ids, q.regions, strict=True)) == {
        "a": "mastered", "b": "biased", "c": "mastered", "d": "brittle", "e": "unlearned"}
    fixed = diagnose([run_a], perf_split=0.4, c3_split=0.4)
    assert dict(zip(fixed.item_ids, fixed.regions, strict=True))["mid"] == "mastered"


def test_quadrants_of_a_run(run_dir):
    q = an.quadrants_for([load_run(run_dir)])
    regions = dict(zip(q.item_ids, q.regions, strict=True))
    assert regions["easy"] == "mastered"  # always right, same answer under perturbation
    assert regions["fragile"] == "brittle"  # right, but flips under every perturbation
    assert regions["stuck"] == "biased"  # always the same wrong answer


# --------------------------------------------------------------------------- paired bootstrap


def test_paired_bootstrap_identical_methods_give_zero():
    rng = np.random.default_rng(0)
    perf = rng.uniform(0, 1, 60)
    s = np.clip(perf + rng.normal(0, 0.2, 60), 0, 1)
    d = paired_bootstrap(s, s.copy(), perf, n_resamples=500)
    for x in d.values():
        assert x.delta == 0.0 and x.low == 0.0 and x.high == 0.0
        assert x.low <= 0.0 <= x.high and x.p_value == 1.0 and not x.significant


def test_paired_bootstrap_detects_a_clearly_better_method():
    rng = np.random.default_rng(1)
    perf = (rng.uniform(0, 1, 80) < 0.5).astype(float)
    good = np.clip(perf * 0.8 + 0.1 + rng.normal(0, 0.05, 80), 0, 1)  # separates, calibrated
    bad = rng.uniform(0, 1, 80)  # noise
    d = paired_bootstrap(good, bad, perf, method_a="good", method_b="bad", n_resamples=1000)
    y = (perf >= 0.5).astype(int)
    assert d["auroc"].delta == pytest.approx(roc_auc_score(y, good) - roc_auc_score(y, bad))
    assert d["ece"].delta == pytest.approx(ece(good, perf) - ece(bad, perf))
    assert d["auroc"].low > 0 and d["auroc"].significant
    assert d["ece"].high < 0 and d["ece"].significant
    assert d["auroc"].p_value <= 2 / 1001 + 1e-12


def test_paired_bootstrap_uses_the_same_indices_for_both_methods():
    """With B = s + c the ECE difference is identical in every replicate only if paired."""
    rng = np.random.default_rng(2)
    perf = rng.uniform(0, 1, 40)
    a = rng.uniform(0.0, 0.5, 40)
    d = paired_bootstrap(a, a, perf, n_resamples=200, metrics=("auroc",))
    assert d["auroc"].low == d["auroc"].high == 0.0
    # a shifted copy ranks identically, so ΔAUROC is 0 in every paired replicate
    d = paired_bootstrap(a, a + 0.5, perf, n_resamples=200, metrics=("auroc",))
    assert d["auroc"].low == d["auroc"].high == 0.0


def test_paired_replicates_on_the_weighted_engine_equal_the_row_functions():
    """The replicates equal auroc_rows / ece_rows on the resampled items (issue 15)."""
    rng = np.random.default_rng(6)
    perf = rng.integers(0, 5, 30) / 4
    a, b = np.round(rng.uniform(0, 1, 30), 1), rng.uniform(0, 1, 30)
    y = (perf >= 0.5).astype(int)
    lv = np.linspace(0, 1, 11)
    d = paired_bootstrap(a, b, perf, n_resamples=300, seed=4, levels_a=lv)
    idx = np.random.default_rng(4).integers(0, 30, (300, 30))
    reps = {
        "auroc": auroc_rows(a[idx], y[idx]) - auroc_rows(b[idx], y[idx]),
        "ece": ece_rows(a[idx], perf[idx], levels=lv) - ece_rows(b[idx], perf[idx], 10),
    }
    for name, rep in reps.items():
        rep = rep[~np.isnan(rep)]
        assert d[name].n_valid == rep.size
        assert (d[name].low, d[name].high) == pytest.approx(
            tuple(np.quantile(rep, [0.025, 0.975])), abs=1e-12)


def test_vectorised_metrics_equal_sklearn_and_metrics():
    rng = np.random.default_rng(3)
    s = rng.integers(0, 6, (50, 30)) / 5
    p = rng.uniform(0, 1, (50, 30))
    y = (p >= 0.5).astype(int)
    au = auroc_rows(s, y)
    e = ece_rows(s, p, 10)
    lv = np.linspace(0, 1, 6)
    ed = ece_rows(s, p, levels=lv)
    for i in range(50):
        if 0 < y[i].sum() < 30:
            assert au[i] == pytest.approx(roc_auc_score(y[i], s[i]))
            assert average_precision(s[i], y[i]) == pytest.approx(
                average_precision_score(y[i], s[i]))
        assert e[i] == pytest.approx(ece(s[i], p[i], 10))
        assert ed[i] == pytest.approx(ece_discrete(s[i], p[i], lv))
    assert np.isnan(auroc_rows(np.ones((1, 3)), np.ones((1, 3))))[0]


# --------------------------------------------------------------------------- neutrality


def test_neutrality_by_hand():
    from credo.evaluate.neutrality import neutrality

    orig = {"a": [True, True, False, False], "b": [False] * 4, "c": [True] * 4}
    pert = {"a": [True, False, False, False], "b": [True, True, False, False], "c": [True] * 4}
    nt = neutrality(orig, pert)
    assert list(nt.delta) == [-1, 2, 0] and nt.mean == pytest.approx(1 / 3)
    assert nt.low <= nt.mean <= nt.high and nt.samples_per_set == 4
    # unequal set sizes: the first min(n, m) samples of each
    nt = neutrality({"a": [True, True, True, False, False]}, {"a": [False, True, True]})
    assert list(nt.delta) == [2 - 3]


def test_neutrality_of_a_run_counts_correct_samples(run_dir):
    loaded = load_run(run_dir)
    nt = an.neutrality_of(loaded)
    rows = [json.loads(x) for x in (run_dir / "samples.jsonl").read_text().splitlines()]
    want = {}
    for i in loaded.item_ids:
        o = sum(r["correct"] for r in rows if r["id"] == i and r["set"] == "original")
        p = sum(r["correct"] for r in rows if r["id"] == i and r["set"] == "perturbed")
        want[i] = p - o
    assert dict(zip(nt.item_ids, nt.delta.tolist(), strict=True)) == want
    assert want["fragile"] == -6 and want["helped"] == 6 and want["easy"] == 0


def test_neutrality_explains_old_run_folders(run_dir):
    rows = [json.loads(x) for x in (run_dir / "samples.jsonl").read_text().splitlines()]
    for r in rows:
        if r["set"] == "perturbed":
            del r["correct"]
    (run_dir / "samples.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert "rerun" in an.neutrality_of(load_run(run_dir))


# --------------------------------------------------------------------------- convergence


def test_trial_convergence_ends_at_the_run_scores(run_dir):
    loaded = load_run(run_dir)
    conv = an.convergence_of(loaded)
    assert list(conv.k) == [2, 3, 4, 5, 6]
    assert conv.mean["C3"][-1] == pytest.approx(np.mean(loaded.score("c3")))
    assert conv.mean["self_consistency"][-1] == pytest.approx(
        np.mean(loaded.score("self_consistency")))
    assert conv.mean["performance"][-1] == pytest.approx(np.mean(loaded.performance))
    assert conv.abs_change["C3"][-1] == 0.0


def test_trial_convergence_prefixes():
    it = ItemTrials("x", ["1", "1", "2", "2"], ["1", "2", "2"], [True, True, False, False])
    conv = trial_convergence([it])
    assert conv.mean["C3"][0] == pytest.approx(c3(["1", "1"], ["1", "2"]))
    assert conv.mean["self_consistency"][2] == pytest.approx(self_consistency(["1", "1", "2", "2"]))
    assert np.isnan(conv.mean["C3"][2])  # k = 4 > m = 3
    assert conv.mean["performance"][1] == pytest.approx(2 / 3)


# --------------------------------------------------------------------------- discrete scores


def test_discrete_levels():
    ac = np.array([0, 1, 2, 3, 3, 5, 5, 5, 4, 1]) / 5  # answer consistency with n = 5
    assert list(discrete_levels(ac)) == pytest.approx([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    assert discrete_levels(np.random.default_rng(0).uniform(0, 1, 50)) is None


# --------------------------------------------------------------------------- comparison helpers


def test_write_report_requires_runs(tmp_path):
    with pytest.raises(ValueError, match="no run folders"):
        write_report([], tmp_path)


# --------------------------------------------------------------------------- markdown


def test_markdown_helpers():
    from credo.report.markdown import fmt_number, md_cell, md_table

    assert md_table([["a", "b"], ["1", "2"]]) == ["| a | b |", "|---|---|", "| 1 | 2 |"]
    with pytest.raises(ValueError, match="header"):
        md_table([])
    assert md_cell("x | y\n  z") == "x \\| y z"
    assert md_cell("abcdefgh", 5) == "abcd…"
    assert fmt_number(0.12345) == "0.123" and fmt_number(None) == "n/a"
    assert fmt_number(float("nan"), 2, "–") == "–" and fmt_number(2, 2) == "2.00"


# --------------------------------------------------------------------------- run folder only

BLOCKER = """
import sys

BLOCKED = {"sentence_transformers", "xllamacpp", "torch", "transformers"}
attempted = []


class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            attempted.append(name)
            raise ImportError(f"{name} is blocked in this test")
        return None


sys.meta_path.insert(0, Blocker())
from credo.cli import main

code = main(sys.argv[1:])
print("ATTEMPTED:" + ",".join(sorted(set(attempted))))
sys.exit(code)
"""


def _report_without_model_libraries(tmp_path: Path, *args: str):
    """``credo report ARGS`` in a fresh interpreter where the model libraries cannot load."""
    import credo

    script = tmp_path / "blocked_report.py"
    script.write_text(BLOCKER)
    src = str(Path(credo.__file__).parents[1])
    done = subprocess.run([sys.executable, str(script), "report", *args], capture_output=True,
                          text=True, timeout=300, check=False,
                          env={**os.environ, "PYTHONPATH": src})
    attempted = re.search(r"ATTEMPTED:(.*)", done.stdout)
    return done, (attempted.group(1).split(",") if attempted and attempted.group(1) else [])


def _bare_copy(run_dir: Path, target: Path) -> Path:
    copy = Path(shutil.copytree(run_dir, target))
    for f in ("report.html", "scores.parquet", "samples.parquet", an.SIMILARITY_FILE):
        (copy / f).unlink(missing_ok=True)
    return copy


def test_report_needs_no_model_library(run_dir, tmp_path):
    """design.md: the report reads the run folder only. With sentence_transformers,
    xllamacpp, torch and transformers unimportable, ``credo report`` still writes the page;
    the diversity check (000 App. A.2) explains that it was not computed."""
    copy = _bare_copy(run_dir, tmp_path / "copy")
    done, _ = _report_without_model_libraries(tmp_path, str(copy), "--resamples", "50")
    assert done.returncode == 0, done.stderr[-3000:]
    page = (copy / "report.html").read_text()
    assert "Diversity (A.2)" in page and "not computed" in page
    assert 'alt="similarity"' not in page
    assert not (copy / an.SIMILARITY_FILE).exists()
    assert len(_imgs(page)) >= 6

    # --embedder none: not even an attempt to import a model library
    done, attempted = _report_without_model_libraries(tmp_path, str(copy), "--embedder", "none",
                                                      "--resamples", "50")
    assert done.returncode == 0 and attempted == []

    # with perturbation_similarity.json in the folder the figure is drawn from it alone
    from credo.perturb.quality import similarity_record

    record = similarity_record(load_run(copy).kept_perturbations(), BagOfWordsEmbedder(), 0.8)
    (copy / an.SIMILARITY_FILE).write_text(json.dumps(record))
    (copy / "report.html").unlink()
    done, attempted = _report_without_model_libraries(tmp_path, str(copy), "--resamples", "50")
    assert done.returncode == 0, done.stderr[-3000:]
    assert attempted == []
    page = (copy / "report.html").read_text()
    assert 'alt="similarity"' in page and "not computed" not in page
    assert f"{record['items']} items with ≥ 2 kept; embedder bow" in page


def test_similarity_record_is_pairwise_similarities(bow_embedder):
    from credo.perturb.quality import pairwise_similarities, similarity_record

    groups = [["a b", "a c", "d e"], ["x"], ["e f", "e g"], []]
    record = similarity_record(groups, bow_embedder, 0.8124)
    want = pairwise_similarities([groups[0], groups[2]], bow_embedder)
    assert record["similarities"] == pytest.approx(want.tolist())
    assert len(record["similarities"]) == 3 + 1
    assert record["items"] == 2 and record["threshold"] == 0.8124 and record["embedder"] == "bow"
    assert set(record) == {"embedder", "threshold", "items", "similarities"}
    assert np.isnan(similarity_record(groups, bow_embedder, None)["threshold"])


def test_credo_report_writes_the_similarities_once(run_dir, tmp_path, monkeypatch):
    """``credo report`` loads the embedder for a folder without the file and writes it;
    the next report reads the file and never loads the embedder."""
    from credo.cli import main

    loads = []

    def bow(name):
        loads.append(name)
        return BagOfWordsEmbedder()

    copy = _bare_copy(run_dir, tmp_path / "copy")
    monkeypatch.setattr("credo.generation.pool.shared_embedder", bow)
    assert main(["report", str(copy), "--resamples", "50"]) == 0
    assert loads == [load_run(copy).config["perturbation"]["embedder"]]
    written = json.loads((copy / an.SIMILARITY_FILE).read_text())
    groups = [g for g in load_run(copy).kept_perturbations() if len(g) >= 2]
    assert written["items"] == len(groups) > 0 and written["embedder"] == "bow"
    assert 'alt="similarity"' in (copy / "report.html").read_text()

    def no_model(*a, **k):
        raise AssertionError("the second report must read perturbation_similarity.json")

    monkeypatch.setattr("credo.generation.pool.shared_embedder", no_model)
    before = (copy / an.SIMILARITY_FILE).read_text()
    (copy / "report.html").unlink()
    assert main(["report", str(copy), "--resamples", "50"]) == 0
    assert (copy / an.SIMILARITY_FILE).read_text() == before
    assert 'alt="similarity"' in (copy / "report.html").read_text()

    # an embedder that fails to load is a warning; the page explains the missing figure
    other = _bare_copy(run_dir, tmp_path / "other")

    def broken(name):
        raise OSError("no weights here")

    monkeypatch.setattr("credo.generation.pool.shared_embedder", broken)
    assert main(["report", str(other), "--resamples", "50", "--embedder", "x"]) == 0
    assert "not computed" in (other / "report.html").read_text()
    assert not (other / an.SIMILARITY_FILE).exists()


def test_the_report_api_returns_what_it_wrote(run_dir, tmp_path, monkeypatch):
    """Issue 22 item 5: ``credo report`` prints what :func:`credo.api.report` returns."""
    from credo.api import ReportResult, report

    monkeypatch.setattr("credo.generation.pool.shared_embedder",
                        lambda name: BagOfWordsEmbedder())
    copy = _bare_copy(run_dir, tmp_path / "copy")
    done = report([copy], resamples=50, pairs="")
    assert isinstance(done, ReportResult) and done.page == copy / "report.html"
    assert done.similarities == [copy / an.SIMILARITY_FILE] and done.unfinished == []
    assert [r.path for r in done.runs] == [copy]


def test_run_writer_saves_the_result_similarities(run_dir, tmp_path, bow_embedder):
    """The perturbation stage computes the kept prefixes' similarities with its embedder
    (000 App. A.2) and the run folder keeps them, so the report draws the diversity
    figure without an embedder."""
    from credo.perturb.quality import similarity_record
    from credo.report.writer import write_run

    cfg = RunConfig(task="toy", n=6, m=6, limit=None, out=tmp_path / "again",
                    cache=tmp_path / "cache.sqlite", bootstrap=0)
    result = run(cfg, model=ScriptedModel(respond), embedder=bow_embedder, task=TASK,
                 show_progress=False)
    groups = [list(p.kept) for p in result.perturbation_sets.values()]
    assert result.perturbation_similarity == similarity_record(groups, bow_embedder, 0.8124)
    written = json.loads((cfg.out / an.SIMILARITY_FILE).read_text())
    assert written == result.perturbation_similarity
    assert 'alt="similarity"' in (cfg.out / "report.html").read_text()
    result.perturbation_similarity = {}
    out = write_run(result, tmp_path / "without_sims")
    assert not (out / an.SIMILARITY_FILE).exists()
    assert "not computed" in (out / "report.html").read_text()


# --------------------------------------------------------------------------- real browser

CHROMIUM = next(
    (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)),
    None,
)


def _chromium(args: list[str], profile: Path) -> str:
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
           "--disable-background-networking", "--no-first-run", "--disable-component-update",
           "--disable-sync", "--hide-scrollbars", f"--user-data-dir={profile}", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed "
                    "(Debian: apt-get install chromium); the browser check needs it")
def test_pages_render_in_headless_chromium(run_dir, tmp_path):
    """Open the run page and a comparison page in a real browser: every figure decodes."""
    import matplotlib.image as mpimg

    cmp_page = write_report([run_dir], tmp_path / "cmp", ReportOptions(n_resamples=100))
    for page in (run_dir / "report.html", cmp_page):
        n_img = len(_imgs(page.read_text()))
        dom = _chromium(["--virtual-time-budget=10000", "--dump-dom", page.as_uri()],
                        tmp_path / f"profile-dom-{page.stem}")
        body = re.search(r"<body([^>]*)>", dom).group(1)
        total = int(re.search(r'data-figures="(\d+)"', body).group(1))
        ok = int(re.search(r'data-figures-ok="(\d+)"', body).group(1))
        assert total == n_img and ok == n_img and n_img >= 3
        shot = tmp_path / f"{page.stem}.png"
        _chromium([f"--screenshot={shot}", "--window-size=1300,2600", page.as_uri()],
                  tmp_path / f"profile-shot-{page.stem}")
        pixels = mpimg.imread(shot)
        assert pixels.shape[:2] == (2600, 1300)
        assert pixels[..., :3].std() > 0.05  # not a blank page
    # the check does catch a figure that fails to decode
    broken = tmp_path / "broken.html"
    page = (run_dir / "report.html").read_text()
    broken.write_text(page.replace("data:image/png;base64,", "data:image/png;base64,AAAA", 1))
    dom = _chromium(["--virtual-time-budget=10000", "--dump-dom", broken.as_uri()],
                    tmp_path / "profile-broken")
    body = re.search(r"<body([^>]*)>", dom).group(1)
    assert int(re.search(r'data-figures-ok="(\d+)"', body).group(1)) == len(_imgs(page)) - 1

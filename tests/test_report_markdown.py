"""report.md is rendered by :mod:`credo.report.markdown` and written by
:mod:`credo.report.writer` (issue 31, item 4). The files in ``data/report_md`` were
written by credo before the renderer left the writer: the same scripted runs (a labelled
run with perturbations, bootstrap CIs and calibration; the same samples scored by
``credo score``) must give them byte for byte, but for the seconds the run took and the
temporary folder's name. ``CREDO_REGENERATE_REPORT_MD=1`` rewrites them (only when a
change of report.md is intended)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import credo.api
from conftest import BagOfWordsEmbedder, toy_respond, toy_task
from credo import RunConfig, run
from credo.models.scripted import ScriptedModel

DATA = Path(__file__).parent / "data" / "report_md"


def _stable(text: str, tmp: Path) -> str:
    """``text`` without what differs between two identical runs: the seconds the stages
    took and the temporary folder."""
    text = re.sub(r"^(- seconds [\w ]+): [0-9.]+$", r"\1: S", text, flags=re.M)
    return text.replace(str(tmp), "<tmp>")


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> tuple[Path, dict[str, Path]]:
    base = tmp_path_factory.mktemp("md")
    cfg = RunConfig(task="toy", n=6, m=6, limit=None, out=base / "run",
                    cache=base / "c.sqlite", bootstrap=50, calibrate="isotonic",
                    methods=["c3", "c3_cross", "self_consistency", "answer_consistency"])
    run(cfg, model=ScriptedModel(toy_respond), embedder=BagOfWordsEmbedder(), task=toy_task(),
        show_progress=False)
    credo.api.score(cfg.out / "samples.jsonl",
                    RunConfig(methods=["self_consistency"], bootstrap=20, out=base / "given",
                              cache=base / "c.sqlite"),
                    answer_format="number", show_progress=False)
    return base, {"run": cfg.out / "report.md", "given": base / "given" / "report.md"}


@pytest.mark.parametrize("name", ["run", "given"])
def test_report_md_is_what_credo_wrote_before_the_renderer_moved(written, name):
    base, files = written
    got = _stable(files[name].read_text(encoding="utf-8"), base)
    pinned = DATA / f"{name}.md"
    if os.environ.get("CREDO_REGENERATE_REPORT_MD") == "1":
        DATA.mkdir(parents=True, exist_ok=True)
        pinned.write_text(got, encoding="utf-8")
    assert got == pinned.read_text(encoding="utf-8")


def test_the_writer_renders_no_markdown():
    """The folder writer writes files; the Markdown is the renderer's (issue 31)."""
    import ast
    import inspect

    from credo.report import markdown, writer

    tree = ast.parse(inspect.getsource(writer))
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert "render_markdown" not in defined and "md_table" not in defined
    assert not any(name.endswith("_section") for name in defined)
    assert callable(markdown.render_markdown)

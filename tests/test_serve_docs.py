"""docs/serve.md's worked example runs as it is written (issue 32: every feature lands with
an example the tests run): its ``python`` blocks in order in one namespace, its ``bash``
blocks through bash, in a fresh folder, on the scripted backend. ``console`` blocks are
transcripts for a real model and are not run; the ``yaml`` block is LiteLLM's config,
which tests/test_serve_guardrail.py runs in the real proxy."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "serve.md"


def blocks(text: str) -> list[tuple[str, str]]:
    """The page's fenced code blocks as (language, code), in order."""
    return [(m.group(1), m.group(2))
            for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.MULTILINE | re.DOTALL)]


def test_the_worked_example_runs(tmp_path, monkeypatch, capsys) -> None:
    found = blocks(PAGE.read_text(encoding="utf-8"))
    assert [lang for lang, _ in found].count("python") >= 4
    assert {lang for lang, _ in found} <= {"python", "bash", "console", "yaml"}
    monkeypatch.chdir(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    namespace: dict = {"__name__": "__docs__"}
    for i, (lang, code) in enumerate(found):
        if lang == "python":
            exec(compile(code, f"{PAGE}:block{i}", "exec"), namespace)
        elif lang == "bash":
            done = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=tmp_path,
                                  env=env, capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, done.stderr
    out = capsys.readouterr().out
    assert "exchangeable with its 80 calibration questions" in out
    assert "7 1.0 True\n1023 0.571 True\n" in out  # the lm-eval task's certificate, served
    assert (tmp_path / "decisions.jsonl").read_text().count("\n") == 1
    assert (tmp_path / "runs" / "calib" / "samples-adaptive" / "adaptive.md").is_file()

"""Every code block of the documentation runs (issue 30, item 3).

One test per page of ``docs/**/*.md`` runs its blocks in order, in a fresh folder with
fresh caches, like a reader typing them:

- ``python``: executed, every block of a page in one namespace; a ``text`` block marked
  ``<!-- docs: output -->`` right after it must equal what it printed;
- ``bash``: each command line run, ``credo ...`` in this process (``credo.cli.main``: one
  embedder load per test session, not per command), anything else with bash; each must
  exit 0 (``<!-- docs: exit N -->``: the block's last command exits N);
- ``console``: ``$ command`` lines run the same way, and the lines after each are its
  output, compared with what it printed (durations masked);
- ``yaml``: validated as a ``RunConfig`` (``<!-- docs: config study -->``: a
  ``StudyConfig``, ``config strength``: a ``StrengthConfig``) unless written to a file;
- any block marked ``<!-- docs: file NAME -->`` is written to NAME in the page's folder
  instead (a task file, a study config) for the blocks after it.

A served model at ``http://localhost:8000/v1`` in a block is the loopback toy model
(:class:`docs_server.ToyModelServer`), started for the page: what a reader runs against
vLLM or llama.cpp's server, the test runs against it. Blocks marked as needing a real
model, a GPU, a hosted API or an install (``<!-- docs: needs-model: why -->`` ...) are
skipped and listed on the generated page ``reference/not-executed.md``; every other block
runs. A page marked ``<!-- docs: page slow -->`` is a slow test; ``<!-- docs: page server
reseed -->`` makes the toy model ignore seeds, as tools that repeat one request expect.

``CREDO_DOCS_UPDATE=1`` writes what each command printed into the page's output blocks
instead of comparing: run it after a change of output, and review the diff.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS / "gen"))

import blocks  # noqa: E402

LOCAL_URL = "http://localhost:8000/v1"
"""The served model the docs show; the tests answer it with the loopback toy model."""
SKIP_KINDS = blocks.SKIP_KINDS
UPDATE = os.environ.get("CREDO_DOCS_UPDATE") == "1"
_SHELL = re.compile(r"[|<>;&$`*?(){}\[\]]|^\w+=")
_DURATION = re.compile(r"\b\d+(?:\.\d+)? ?(?:s|ms|min)\b")
_STAMP = re.compile(r"\d{4}-\d\d-\d\dT[\d:.+-]+(?:_task_\w+)?")
"""A time in a file name the tools chose (lm-eval's samples, inspect's logs), with inspect's
random task id."""
_PROGRESS = re.compile(r"samples .*/s .*ETA")
_CERTIFICATE_ID = re.compile(r"sha256:[0-9a-f]{12}")
"""A certificate's id in a line (`credo run --certificate`): it changes with credo's version."""


def _pages() -> list[blocks.Page]:
    return blocks.pages(DOCS)


def _skipped(block: blocks.Block, page: blocks.Page) -> str | None:
    for kind in SKIP_KINDS:
        for where in (block.marker(kind), page.page_marker(kind)):
            if where is not None:
                return f"{kind}: {where}"
    return None


class PageRun:
    """The blocks of one page, run in ``work`` with ``server`` as the served model."""

    def __init__(self, page: blocks.Page, work: Path, server_url: str | None,
                 cache: Path | None = None) -> None:
        self.page = page
        self.work = work
        self.cache = cache
        self.url = server_url
        self.namespace: dict[str, object] = {"__name__": "__docs__"}
        self.last_stdout = ""
        self.updates: list[tuple[blocks.Block, str]] = []
        self.failures: list[str] = []

    # ------------------------------------------------------------------ helpers

    def sub(self, text: str) -> str:
        return text.replace(LOCAL_URL, self.url) if self.url else text

    def shown(self, text: str) -> str:
        """What a page shows of an output: the loopback URL as ``LOCAL_URL``, the page's
        cache folder as ``~/.cache/credo``, its work folder as ``.``; progress bars and
        trailing spaces dropped."""
        if self.url:
            text = text.replace(self.url, LOCAL_URL)
        if self.cache is not None:
            text = text.replace(str(self.cache), "~/.cache/credo")
        text = text.replace(str(self.work) + os.sep, "").replace(str(self.work), ".")
        lines = [ln.rstrip() for ln in text.splitlines() if not _PROGRESS.search(ln)]
        while lines and not lines[-1]:
            lines.pop()
        return "\n".join(lines)

    def normal(self, text: str) -> str:
        """What a comparison sees: :meth:`shown` with durations, file-name times and
        certificate ids (a digest of the file, which names credo's version) masked."""
        return _CERTIFICATE_ID.sub("sha256:<id>",
                                   _DURATION.sub("<t>", _STAMP.sub("<time>", self.shown(text))))

    def command(self, line: str) -> tuple[int, str]:
        """Run one command line: ``(exit status, stdout and stderr together)``."""
        line = self.sub(line)
        if line.startswith("credo ") and not _SHELL.search(line.split("#", 1)[0]):
            return self._credo(shlex.split(line, comments=True)[1:])
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
               "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests"),
                                              os.environ.get("PYTHONPATH", "")])}
        done = subprocess.run(["bash", "-o", "pipefail", "-c", line], cwd=self.work, env=env,
                              capture_output=True, text=True, timeout=600, check=False)
        return done.returncode, done.stdout + done.stderr

    def _credo(self, argv: list[str]) -> tuple[int, str]:
        from credo.cli import main

        buf = io.StringIO()
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            try:
                status = main(argv)
            except SystemExit as e:  # argparse's errors and --help
                status = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
        return int(status or 0), buf.getvalue()

    def fail(self, block: blocks.Block, message: str) -> None:
        self.failures.append(f"{block.where}: {message}")

    # ------------------------------------------------------------------ blocks

    def run(self, block: blocks.Block) -> None:
        name = block.marker("file")
        if name:
            target = self.work / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(self.sub(block.code), encoding="utf-8")
            return
        if block.marker("output") is not None:
            got = self.normal(self.last_stdout)
            if UPDATE:
                self.updates.append((block, self.shown(self.last_stdout) + "\n"))
            elif got != self.normal(block.code):
                self.fail(block, f"the output differs from what the block before printed:\n"
                          f"--- page\n{block.code}--- run\n{got}\n")
            return
        runner = {"python": self.python, "bash": self.bash, "console": self.console,
                  "yaml": self.yaml}.get(block.lang)
        if runner is not None:
            runner(block)
        elif block.lang not in blocks.DATA_LANGS:
            self.fail(block, f"fence language {block.lang!r} is neither run "
                      f"({sorted(blocks.RUN_LANGS)}) nor data ({sorted(blocks.DATA_LANGS)})")

    def python(self, block: blocks.Block) -> None:
        buf = io.StringIO()
        code = compile(self.sub(block.code), str(block.where), "exec")
        with contextlib.redirect_stdout(buf):
            exec(code, self.namespace)
        self.last_stdout = buf.getvalue()

    def _expect(self, block: blocks.Block) -> int:
        value = block.marker("exit")
        return int(value) if value else 0

    def bash(self, block: blocks.Block) -> None:
        lines = _logical_lines(block.code)
        for i, line in enumerate(lines):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            status, out = self.command(line)
            want = self._expect(block) if i == len(lines) - 1 else 0
            if status != want:
                self.fail(block, f"`{line}` exited {status}, not {want}:\n{out[-3000:]}")
                return
            self.last_stdout = out

    def console(self, block: blocks.Block) -> None:
        steps = _console_steps(block.code)
        rendered = []
        for i, (line, raw, expected) in enumerate(steps):
            status, out = self.command(line)
            want = self._expect(block) if i == len(steps) - 1 else 0
            if status != want:
                self.fail(block, f"`{line}` exited {status}, not {want}:\n{out[-3000:]}")
                return
            got = self.normal(out)
            rendered.append((raw, self.shown(out)))
            if not UPDATE and got != self.normal(expected):
                self.fail(block, f"the output of `{line}` differs from the page:\n--- page\n"
                          f"{expected}\n--- run\n{got}\n(CREDO_DOCS_UPDATE=1 writes the run's)")
        if UPDATE:
            text = ""
            for raw, out in rendered:
                text += raw + "\n" + (out + "\n" if out else "")
            self.updates.append((block, text))

    def yaml(self, block: blocks.Block) -> None:
        from credo.config import RunConfig, StrengthConfig, StudyConfig

        kind = block.marker("config") or "run"
        model = {"run": RunConfig, "study": StudyConfig, "strength": StrengthConfig}[kind]
        data = yaml.safe_load(self.sub(block.code))
        model.model_validate(data)

    # ------------------------------------------------------------------ page

    def write_updates(self) -> None:
        """Replace each updated block's body in the page file (bottom up)."""
        lines = self.page.path.read_text(encoding="utf-8").splitlines(keepends=True)
        for block, text in sorted(self.updates, key=lambda u: -u[0].line):
            start = block.line  # the fence's line (1-based): the body starts after it
            n_body = len(block.code.splitlines())
            indent = re.match(r"\s*", lines[start - 1]).group(0)
            body = [indent + ln + "\n" if ln else "\n" for ln in text.splitlines()]
            lines[start: start + n_body] = body
        self.page.path.write_text("".join(lines), encoding="utf-8")


def _logical_lines(code: str) -> list[str]:
    """Command lines with backslash continuations joined."""
    out, cur = [], ""
    for raw in code.splitlines():
        if raw.rstrip().endswith("\\"):
            cur += raw.rstrip()[:-1] + " "
            continue
        out.append(cur + raw)
        cur = ""
    if cur:
        out.append(cur)
    return out


def _console_steps(code: str) -> list[tuple[str, str, str]]:
    """``(command, its lines as written, expected output)`` of a console block's ``$``
    lines (a command continues over lines ending in a backslash)."""
    steps: list[tuple[str, list[str], list[str]]] = []
    lines = code.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("$ "):
            cmd, raw = line[2:], [line]
            while cmd.rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                cmd = cmd.rstrip()[:-1] + " " + lines[i].strip()
                raw.append(lines[i])
            steps.append((cmd, raw, []))
        elif steps:
            steps[-1][2].append(line)
        i += 1
    return [(c, "\n".join(r), "\n".join(o)) for c, r, o in steps]


def _params() -> list:
    out = []
    for page in _pages():
        rel = page.path.relative_to(DOCS).as_posix()
        marks = [pytest.mark.slow] if page.page_marker("slow") is not None else []
        out.append(pytest.param(page, id=rel, marks=marks))
    return out


@pytest.mark.parametrize("page", _params())
def test_every_block_of_the_page_runs(page: blocks.Page, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from docs_server import ToyModelServer

    todo = [b for b in page.blocks if _skipped(b, page) is None]
    if not any(b.lang in blocks.RUN_LANGS or b.marker("file") for b in todo):
        pytest.skip("no block to run on this page (the rest is marked: "
                    "reference/not-executed.md)")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    for name, value in {
        "CREDO_CACHE_DIR": str(tmp_path / "cache"), "HF_HOME": str(tmp_path / "hf"),
        "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
        "COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb", "OPENAI_API_KEY": "sk-docs-toy",
        "INSPECT_LOG_DIR": str(work / "logs"),
    }.items():
        monkeypatch.setenv(name, value)
    text = page.path.read_text(encoding="utf-8")
    with contextlib.ExitStack() as stack:
        url = None
        if LOCAL_URL in text:
            reseed = page.page_marker("server") == "reseed"
            url = stack.enter_context(ToyModelServer(reseed=reseed)).url
        run = PageRun(page, work, url, tmp_path / "cache")
        for block in todo:
            run.run(block)
            if run.failures and not UPDATE:
                break
    if UPDATE and run.updates:
        run.write_updates()
    assert not run.failures, "\n".join(run.failures)


def test_the_markers_are_known_and_the_not_executed_page_lists_them():
    """A misspelt marker would run nothing silently: every marker is one of the known
    kinds, and the generated page lists exactly the skipped blocks."""
    import reference

    known = {*SKIP_KINDS, "file", "exit", "output", "config"}
    page_known = {*SKIP_KINDS, "slow", "server"}
    listed = reference.not_executed_page(DOCS)
    skipped = 0
    for page in _pages():
        for m in page.page_markers:
            assert m.split()[0].rstrip(":") in page_known, f"{page.path}: page marker {m!r}"
        for b in page.blocks:
            for m in b.markers:
                assert m.split()[0].rstrip(":") in known, f"{b.where}: marker {m!r}"
            if _skipped(b, page) and b.lang in blocks.RUN_LANGS:
                skipped += 1
                rel = page.path.relative_to(DOCS).as_posix()
                assert re.search(rf"\| \[{re.escape(rel)}\]\([^)]*\) line {b.line} \|", listed)
    assert f"{skipped} blocks." in listed


def test_a_page_whose_output_drifted_fails(tmp_path, monkeypatch):
    """The comparison bites: a console block whose shown output is not what the
    command prints fails, and one that matches passes."""
    page_path = tmp_path / "p.md"
    page_path.write_text("```console\n$ credo methods\nc3 is not what it prints\n```\n")
    page = blocks.parse_page(page_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "100")
    run = PageRun(page, tmp_path, None)
    run.run(page.blocks[0])
    assert run.failures and "differs from the page" in run.failures[0]
    _, out = run.command("credo methods")
    page_path.write_text("```console\n$ credo methods\n" + out + "```\n")
    page = blocks.parse_page(page_path)
    good = PageRun(page, tmp_path, None)
    good.run(page.blocks[0])
    assert not good.failures

"""Every code block of the documentation runs, as a reader would run it.

One test per page of ``docs/**/*.md`` runs its blocks in order, in a fresh, empty folder
with fresh caches, like a reader typing them, using only what the page shows:

- a block with a title (```` ```yaml title="calibrate.yaml" ````, shown above the block)
  is a file the reader saves: written to that name for the blocks after it, not run;
- ``python``: executed, each block on its own like a script the reader runs, unless it
  uses names an earlier block defines: then it continues that session, and the site
  captions it "continues the Python code above" (``blocks.continued_names``); a ``text``
  block marked ``<!-- docs: output -->`` right after it must equal what it printed;
- ``bash``: each command line run, ``credo ...`` in this process (``credo.cli.main``: one
  embedder load per test session, not per command), anything else with bash; each must
  exit 0 (``<!-- docs: exit N -->``: the block's last command exits N);
- ``console``: ``$ command`` lines run the same way, and the lines after each are its
  output, compared with what it printed (durations masked);
- ``yaml``: validated as a ``RunConfig`` (``<!-- docs: config study -->``: a
  ``StudyConfig``, ``config strength``: a ``StrengthConfig``) unless it has a title.

A page that uses the served model at ``http://localhost:8000/v1`` starts it itself with
``credo toy-server`` (:mod:`credo.devtools.toy_server`), as its reader does in a second
terminal: the test starts that command in the background, on a free port that stands in
for 8000 in every block, and stops it after the page. Blocks marked as needing a real
model, a GPU, a hosted API or an install (``<!-- docs: needs-model: why -->`` ...) are
skipped and listed on the generated page ``reference/not-executed.md``; every other block
runs. A page marked ``<!-- docs: page slow -->`` is a slow test.

``CREDO_DOCS_UPDATE=1`` writes what each command printed into the page's output blocks
instead of comparing: run it after a change of output, and review the diff.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS / "gen"))

import blocks  # noqa: E402

LOCAL_URL = "http://localhost:8000/v1"
"""The served model the docs show: the toy model the page starts (``credo toy-server``)."""
TOY_SERVER = "credo toy-server"
"""The command a page starts the toy model with (it runs until stopped)."""
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
    """The blocks of one page, run in ``work``; ``server_url`` answers the page's
    ``LOCAL_URL`` (None: the page starts the toy model itself, or uses no server)."""

    def __init__(self, page: blocks.Page, work: Path, server_url: str | None = None,
                 cache: Path | None = None, *, compare: bool = True,
                 port: int | None = None) -> None:
        self.page = page
        self.compare = compare
        self.port = port
        self.work = work
        self.cache = cache
        self.url = server_url
        self.servers: list[subprocess.Popen[str]] = []
        self.session: dict[str, object] = {"__name__": "__main__"}
        self.continued = blocks.continued_names(page)
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
        if line.startswith(TOY_SERVER):
            return self.start_toy_server(line)
        if LOCAL_URL in line and self.url is None:
            return 1, (f"the page uses {LOCAL_URL} before it starts the toy model "
                       f"(`{TOY_SERVER}`): a reader's command would find no server")
        line = self.sub(line)
        if line.startswith("credo ") and not _SHELL.search(line.split("#", 1)[0]):
            return self._credo(shlex.split(line, comments=True)[1:])
        done = subprocess.run(["bash", "-o", "pipefail", "-c", line], cwd=self.work,
                              env=_env(), capture_output=True, text=True, timeout=600,
                              check=False)
        return done.returncode, done.stdout + done.stderr

    def start_toy_server(self, line: str) -> tuple[int, str]:
        """Start the page's ``credo toy-server`` command in the background, on a free port
        in place of the page's (8000 by default), as a reader does in a second terminal;
        ``(0, "")`` once it answers, else its exit status and output."""
        argv = shlex.split(line, comments=True)
        if "--port" in argv:
            i = argv.index("--port")
            del argv[i: i + 2]
        port = self.port = self.port or _session_port()
        proc = subprocess.Popen([*argv, "--port", str(port)], cwd=self.work, env=_env(),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.servers.append(proc)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return proc.returncode or 1, proc.stdout.read() if proc.stdout else ""
            with contextlib.suppress(OSError), socket.create_connection(
                    ("127.0.0.1", port), timeout=1):
                self.url = f"http://127.0.0.1:{port}/v1"
                return 0, ""
            time.sleep(0.1)
        return 1, f"`{line}` did not listen within 60 s"

    def close(self) -> None:
        """Stop the servers the page started (Ctrl-C, as the reader does)."""
        for proc in self.servers:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)
            if proc.stdout:
                proc.stdout.close()
        self.servers.clear()

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
        name = block.title
        if name:
            target = self.work / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(self.sub(block.code), encoding="utf-8")
            return
        if block.marker("output") is not None:
            got = self.normal(self.last_stdout)
            if UPDATE:
                self.updates.append((block, self.shown(self.last_stdout) + "\n"))
            elif self.compare and got != self.normal(block.code):
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
        """Run the block on its own, as a script, unless it continues the page's earlier
        blocks (:func:`blocks.continued_names`: the site captions it so); then in their
        session."""
        if LOCAL_URL in block.code and self.url is None:
            self.fail(block, f"the block uses {LOCAL_URL} before the page starts the toy "
                      f"model (`{TOY_SERVER}`)")
            return
        buf = io.StringIO()
        code = compile(self.sub(block.code), str(block.where), "exec")
        namespace = self.session if block.line in self.continued else {"__name__": "__main__"}
        with contextlib.redirect_stdout(buf):
            exec(code, namespace)
        self.session.update(namespace)
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
            if not UPDATE and self.compare and got != self.normal(expected):
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


def _env() -> dict[str, str]:
    """The environment of a command: this Python's ``credo`` and scripts first on PATH,
    this checkout's credo first on PYTHONPATH."""
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
            "PYTHONPATH": os.pathsep.join([str(ROOT / "src"),
                                           os.environ.get("PYTHONPATH", "")])}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_PORT: list[int] = []


def _session_port() -> int:
    """One port for every page's toy model in this test session, as a reader's 8000: a
    tool run in this process (inspect_ai) keeps its client for a model name, with the
    URL it first saw."""
    if not _PORT:
        _PORT.append(_free_port())
    return _PORT[0]


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
    todo = [b for b in page.blocks if _skipped(b, page) is None]
    if not any(b.lang in blocks.RUN_LANGS or b.title for b in todo):
        pytest.skip("no block to run on this page (the rest is marked: "
                    "reference/not-executed.md)")
    work = _fresh_folder(tmp_path, monkeypatch)
    run = _run_page(page, work, tmp_path / "cache")
    if UPDATE and run.updates:
        run.write_updates()
    assert not run.failures, "\n".join(run.failures)


@pytest.mark.slow
def test_the_score_logs_tutorial_runs_twice_in_one_folder(tmp_path, monkeypatch):
    """A reader who follows the page a second time in the same folder has two logs of
    each tool: the page scores the newest, and every step still runs (the outputs are
    not compared: the file names hold the time)."""
    (page,) = [p for p in _pages() if p.path == DOCS / "tutorials" / "score-logs.md"]
    work = _fresh_folder(tmp_path, monkeypatch)
    for compare in (True, False):
        run = _run_page(page, work, tmp_path / "cache", compare=compare)
        assert not run.failures, "\n".join(run.failures)
    assert len(list((work / "logs").glob("*.eval"))) == 2
    assert len(list(work.glob("lm-out/*/samples_sums_toy_*.jsonl"))) == 2


def _fresh_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty work folder, the current one, with fresh caches and none of the
    variables a page sets itself."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    for name, value in {
        "CREDO_CACHE_DIR": str(tmp_path / "cache"), "HF_HOME": str(tmp_path / "hf"),
        "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
        "COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb",
    }.items():
        monkeypatch.setenv(name, value)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "LOCAL_BASE_URL", "LOCAL_API_KEY"):
        monkeypatch.setenv(name, "")  # restored after the page, whatever the page sets
        monkeypatch.delenv(name)  # the page sets what it needs
    return work


def _run_page(page: blocks.Page, work: Path, cache: Path, *, compare: bool = True,
              port: int | None = None) -> PageRun:
    """The page's blocks run in order in ``work`` (until the first failure, unless
    updating), the toy model on ``port`` (default: a free one); the servers it started
    are stopped."""
    run = PageRun(page, work, None, cache, compare=compare, port=port)
    try:
        for block in page.blocks:
            if _skipped(block, page) is not None:
                continue
            run.run(block)
            if run.failures and not UPDATE:
                break
    finally:
        run.close()
    return run


def test_the_markers_are_known_and_the_not_executed_page_lists_them():
    """A misspelt marker would run nothing silently: every marker is one of the known
    kinds, and the generated page lists exactly the skipped blocks."""
    import reference

    known = {*SKIP_KINDS, "exit", "output", "config"}
    page_known = {*SKIP_KINDS, "slow"}
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

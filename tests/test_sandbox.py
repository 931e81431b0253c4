"""A catalogue of hostile programs against the code sandbox (credo.tasks.sandbox).

Each program runs in three kinds of variant: ``default`` is ``run_python`` as credo uses it
(the strongest mode here plus the audit hook); ``<mode>-os`` runs it in one mode *without*
the audit hook, so that only the operating system's layers stand in the way; ``hook-only``
runs it with the audit hook and no operating-system layer (mode ``none``). A variant is
skipped where the layer a case needs is not among that variant's guarantees (as
``sandbox_guarantees`` states them), never silently passed. Every case checks that
nothing in a world-writable directory outside the sandbox was created or changed (only
the sandbox, not file permissions, can stop a write there) and that no process of the
run is alive afterwards.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from credo.tasks.sandbox import (
    GUARANTEES,
    SandboxLimits,
    SandboxResult,
    execute,
    guarantees_of,
    run_python,
    sandbox_guarantees,
)

LIMITS = SandboxLimits(cpu_seconds=2, wall_seconds=6.0, memory_bytes=512 << 20, processes=20)
# every program starts by saying where it runs: survivors are found by that path
PRELUDE = "import os, sys\nprint('CWD', os.getcwd(), file=sys.stderr, flush=True)\n"


def _starts(mode: str) -> bool:
    """Whether ``mode`` runs a program that needs nothing beyond what is already loaded."""
    try:
        return execute("import os", SandboxLimits(wall_seconds=20.0), mode).passed  # type: ignore[arg-type]
    except Exception:
        return False


# default: as credo runs it; <mode>-os: that mode without the hook; hook-only: mode
# "none" with the hook, the second layer on its own
VARIANTS = ["default"] + [f"{m}-os" for m in GUARANTEES if _starts(m)]
if _starts("none"):
    VARIANTS.append("hook-only")


@pytest.fixture(params=VARIANTS)
def sandbox(request) -> tuple[Callable[[str, SandboxLimits], SandboxResult], dict[str, bool]]:
    """(run, guarantees) for one variant."""
    if request.param == "default":
        return run_python, sandbox_guarantees()
    if request.param == "hook-only":

        def hooked(program: str, limits: SandboxLimits) -> SandboxResult:
            return execute(program, limits, "none")

        return hooked, guarantees_of("none")
    mode = request.param.removesuffix("-os")

    def run(program: str, limits: SandboxLimits) -> SandboxResult:
        return execute(program, limits, mode, audit_hook=False)  # type: ignore[arg-type]

    return run, {**guarantees_of(mode), "audit_hook": False}  # type: ignore[arg-type]


def _need(guarantees: dict[str, bool], layer: str, hook_stops_it: bool) -> None:
    if not guarantees[layer] and not (hook_stops_it and guarantees["audit_hook"]):
        pytest.skip(f"this variant does not enforce {layer} (and no audit hook covers it)")


@pytest.fixture
def outside() -> Iterator[Path]:
    """A world-writable directory outside the sandbox, with a world-writable victim file."""
    d = Path(tempfile.mkdtemp(prefix="credo-outside-"))
    d.chmod(0o777)
    victim = d / "victim.txt"
    victim.write_text("original")
    victim.chmod(0o666)
    before = _snapshot(d)
    yield d
    after = _snapshot(d)
    shutil.rmtree(d, ignore_errors=True)
    assert after == before, "the sandbox created or changed something outside its directory"


def _snapshot(d: Path) -> dict[str, tuple]:
    out: dict[str, tuple] = {".": (d.stat().st_mtime_ns, d.stat().st_mode)}
    for p in sorted(d.rglob("*")):
        st = p.lstat()
        data = p.read_bytes() if p.is_file() and not p.is_symlink() else b""
        out[str(p.relative_to(d))] = (st.st_mode, st.st_nlink, st.st_mtime_ns, data)
    return out


def _survivors(*tokens: str, wait: float = 2.0) -> list[str]:
    """Command lines of live processes that mention a token, after up to ``wait`` seconds."""
    end = time.monotonic() + wait
    while True:
        found = []
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == os.getpid():
                continue
            try:
                cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
            except OSError:
                continue
            if any(t.encode() in cmdline for t in tokens if t):
                found.append(cmdline.replace(b"\0", b" ").decode(errors="replace")[:200])
        if not found or time.monotonic() > end:
            return found
        time.sleep(0.05)


def _top(result: SandboxResult) -> str:
    """The sandbox's own directory, from the prelude's line."""
    for line in result.stderr.splitlines():
        if line.startswith("CWD "):
            return str(Path(line[4:]).parent)
    return ""


def _checked_run(run, program: str, outside: Path, limits: SandboxLimits = LIMITS) -> SandboxResult:
    result = run(PRELUDE + program, limits)
    assert _survivors(_top(result), str(outside)) == []
    return result


# ------------------------------------------------------------------ writes outside


FORK_EXEC = """
import _posixsubprocess
r, w = os.pipe()
pid = _posixsubprocess.fork_exec(
    [b"/bin/sh", b"-c", b"echo x > {out}/shell.txt; echo x >> {out}/victim.txt"], [b"/bin/sh"],
    True, (w,), None, None, -1, -1, -1, -1, -1, -1, r, w, True, False, -1, None, None, None,
    -1, None, False)
os.waitpid(pid, 0)
"""

ESCAPES = {
    # name: (program, whether the audit hook stops it too)
    "fork_exec_shell": (FORK_EXEC, True),
    "sqlite": (
        "import sqlite3\nc = sqlite3.connect('{out}/db.sqlite')\n"
        "c.execute('create table t (x)')\nc.commit()",
        True,
    ),
    "dir_fd": (
        "fd = os.open('{out}', os.O_RDONLY)\n"
        "f = os.open('dirfd.txt', os.O_WRONLY | os.O_CREAT, 0o666, dir_fd=fd)\n"
        "os.write(f, b'x')",
        True,
    ),
    "hard_link": (
        "os.link('{out}/victim.txt', 'link.txt')\nopen('link.txt', 'a').write('changed')",
        True,
    ),
    "mkfifo": ("os.mkfifo('{out}/fifo')", False),
    "symlink_then_write": (
        "os.symlink('{out}/victim.txt', 'sym.txt')\nopen('sym.txt', 'a').write('changed')",
        True,
    ),
}


@pytest.mark.parametrize("case", sorted(ESCAPES))
def test_no_write_outside_the_sandbox(sandbox, outside, case):
    run, guarantees = sandbox
    program, hook_stops_it = ESCAPES[case]
    _need(guarantees, "read_only_filesystem", hook_stops_it)
    result = _checked_run(run, program.format(out=outside), outside)
    assert result.status == "failed" or case == "fork_exec_shell", result
    # the outside fixture checks that nothing there changed


def test_the_shell_escape_does_write_without_the_layers():
    # the control: with neither the operating system's layers nor the hook, the shell
    # writes into a world-writable directory, so the catalogue above proves something
    if not _starts("none") or os.geteuid() != 0:
        pytest.skip("needs mode 'none' run as root, where file permissions do not stop it")
    d = Path(tempfile.mkdtemp(prefix="credo-outside-"))
    d.chmod(0o777)
    try:
        execute(PRELUDE + FORK_EXEC.format(out=d), LIMITS, "none", audit_hook=False)
        assert (d / "shell.txt").read_text() == "x\n"
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_every_visible_directory_is_read_only(sandbox, outside):
    run, guarantees = sandbox
    _need(guarantees, "read_only_filesystem", hook_stops_it=True)
    name = f"credo-ro-probe-{os.getpid()}"
    program = f"""
places = [sys.prefix, sys.base_prefix, '/', '/etc', '/usr/lib', '/tmp', '/dev',
          os.path.dirname(os.getcwd()), os.path.dirname(os.__file__)]
written = []
for d in places:
    try:
        with open(os.path.join(d, '{name}'), 'w') as f:
            f.write('x')
        written.append(d)
    except OSError:
        pass
assert written == [], written
open('inside.txt', 'w').write('fine')  # while its own directory stays writable
"""
    result = _checked_run(run, program, outside)
    for d in (sys.prefix, sys.base_prefix, "/", "/etc", "/usr/lib", "/tmp", "/dev"):
        Path(d, name).unlink(missing_ok=True)
    assert result.passed, result.stderr


def test_files_outside_are_invisible(sandbox, outside):
    run, guarantees = sandbox
    _need(guarantees, "hidden_files", hook_stops_it=False)  # the hook lets reads through
    program = f"""
for path in ('{outside}/victim.txt', '{Path.cwd()}/pyproject.toml', '/etc/passwd'):
    try:
        print('read', path, open(path).read()[:20], file=sys.stderr)
    except OSError as e:
        print('refused', path, type(e).__name__, file=sys.stderr)
"""
    result = _checked_run(run, program, outside)
    assert f"read {outside}" not in result.stderr and f"read {Path.cwd()}" not in result.stderr
    assert "read /etc/passwd" in result.stderr  # the system directories are there


def test_its_directory_cannot_fill_the_disk(sandbox, outside):
    run, guarantees = sandbox
    _need(guarantees, "read_only_filesystem", hook_stops_it=False)
    limits = SandboxLimits(cpu_seconds=2, wall_seconds=6.0, memory_bytes=512 << 20,
                           file_bytes=1 << 20)  # fmt: skip
    program = """
n = 0
try:
    while n < 100:
        open(f'f{n}', 'wb').write(bytes(512 << 10))
        n += 1
except OSError as e:
    print('stopped', n, e.errno, file=sys.stderr)
"""
    result = _checked_run(run, program, outside, limits)
    made, errno = (int(x) for x in result.stderr.split("stopped")[1].split()[:2])
    assert errno == 28 and 12 <= made <= 16  # ENOSPC at 8 MiB in all: 16 half-MiB files


# ------------------------------------------------------------------ processes


def test_a_fork_bomb_stops_at_the_process_limit(sandbox, outside):
    run, guarantees = sandbox
    _need(guarantees, "process_limit", hook_stops_it=True)
    program = """
import time
made = 0
for _ in range(500):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    made += 1
print('forks', made, file=sys.stderr)
"""
    result = _checked_run(run, program, outside)
    made = int(result.stderr.split("forks")[1].split()[0])
    if guarantees["audit_hook"]:
        assert made == 0  # os.fork refused (PermissionError is an OSError)
    else:
        assert 0 < made < LIMITS.processes  # the limit, not the loop, stopped it


def test_a_setsid_grandchild_dies_at_the_wall_limit(sandbox, outside):
    run, guarantees = sandbox
    _need(guarantees, "kills_all_descendants", hook_stops_it=True)
    limits = SandboxLimits(cpu_seconds=2, wall_seconds=0.8, memory_bytes=512 << 20)
    program = f"""
import time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(1.2)
        open('{outside}/marker', 'w').write('alive')
        os._exit(0)
    os._exit(0)
time.sleep(60)
"""
    t0 = time.monotonic()
    result = _checked_run(run, program, outside, limits)
    if guarantees["audit_hook"]:
        assert "PermissionError: sandbox" in result.stderr  # no fork at all
        return
    assert result.status == "timeout", result
    time.sleep(max(0.0, 1.6 - (time.monotonic() - t0)))
    assert not (outside / "marker").exists()  # the grandchild never woke up


def test_signals_do_not_reach_credo(sandbox, outside):
    run, guarantees = sandbox
    if not (guarantees["hidden_processes"] or guarantees["own_user"]):
        _need(guarantees, "hidden_processes", hook_stops_it=True)  # the hook, or skip
    program = f"""
import signal
tried = []
for pid in (os.getppid(), {os.getpid()}):
    try:
        os.kill(pid, signal.SIGKILL)
        tried.append(pid)
    except (OSError, PermissionError) as e:
        print('refused', pid, type(e).__name__, file=sys.stderr)
print('delivered to', tried, file=sys.stderr)
"""
    result = _checked_run(run, program, outside)
    # this test process is alive (it is running this line), and nothing said otherwise
    assert f"delivered to [{os.getpid()}" not in result.stderr
    assert f", {os.getpid()}]" not in result.stderr


@pytest.fixture
def secret_process() -> Iterator[tuple[int, str]]:
    """A process of credo's user holding a secret in its environment."""
    secret = f"credo-secret-{os.getpid()}-{time.time_ns()}"
    proc = subprocess.Popen(["sleep", "30"], env={"CREDO_SECRET": secret, "PATH": "/usr/bin:/bin"})
    yield proc.pid, secret
    proc.kill()
    proc.wait()


def test_other_processes_environment_is_unreadable(sandbox, outside, secret_process):
    run, guarantees = sandbox
    if not (guarantees["hidden_processes"] or guarantees["own_user"]):
        _need(guarantees, "hidden_processes", hook_stops_it=True)
    pid, secret = secret_process
    program = f"""
for pid in ({pid}, {os.getpid()}, os.getppid()):
    try:
        print('read', pid, open(f'/proc/{{pid}}/environ', 'rb').read(), file=sys.stderr)
    except OSError as e:
        print('refused', pid, type(e).__name__, file=sys.stderr)
"""
    result = _checked_run(run, program, outside)
    assert secret not in result.stderr
    assert f"read {pid}" not in result.stderr and f"read {os.getpid()}" not in result.stderr


# ------------------------------------------------------------------ network


def test_no_connection_to_a_loopback_listener(sandbox, outside):
    run, guarantees = sandbox
    _need(guarantees, "no_network", hook_stops_it=True)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)  # a completed connection waits in the backlog, accepted or not
    port = server.getsockname()[1]
    program = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
    result = _checked_run(run, program, outside)
    server.setblocking(False)
    try:
        accepted = [server.accept()]
    except BlockingIOError:
        accepted = []
    server.close()
    assert result.status == "failed" and not accepted


# ------------------------------------------------------------------ what credo states


def test_guarantees_are_stated():
    g = sandbox_guarantees()
    assert set(g) == set(GUARANTEES["root"]) and g["audit_hook"]
    assert all(isinstance(v, bool) for v in g.values())
    if sys.platform.startswith("linux") and os.geteuid() == 0 and _starts("root"):
        assert all(g.values())  # root on Linux with namespaces: every layer


def test_a_fallback_says_once_what_it_does_not_enforce(monkeypatch, caplog):
    from credo.tasks import sandbox as sb

    monkeypatch.setattr(sb, "_candidates", lambda: ["none"])
    sb.sandbox_mode.cache_clear()
    try:
        with caplog.at_level("WARNING", logger="credo.tasks.sandbox"):
            assert sb.sandbox_mode() == "none" and sb.sandbox_mode() == "none"
            g = sb.sandbox_guarantees()
    finally:
        sb.sandbox_mode.cache_clear()
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "container" in warnings[0]
    for layer in ("read_only_filesystem", "hidden_processes", "no_network", "process_limit"):
        assert not g[layer] and layer in warnings[0]


UNPRIVILEGED = r"""
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("sb", sys.argv[1])
sb = importlib.util.module_from_spec(spec)
sys.modules["sb"] = sb
spec.loader.exec_module(sb)
limits = sb.SandboxLimits(cpu_seconds=2, wall_seconds=6.0, memory_bytes=512 << 20, processes=20)
bomb = sb.execute(sys.argv[2], limits, "userns", audit_hook=False)
print(json.dumps({"mode": sb.sandbox_mode(), "guarantees": sb.sandbox_guarantees(),
                  "stderr": bomb.stderr}))
"""


def test_an_unprivileged_user_gets_the_user_namespace_layers(outside):
    # credo run by a user who is not root: the user-namespace mode, with its own
    # process count (Linux 5.14+) and read-only file system; run here as uid 65534 with a
    # system Python (the sandbox module needs only the standard library)
    python, setpriv = shutil.which("python3", path="/usr/bin:/bin"), shutil.which("setpriv")
    source = Path(__file__).parents[1] / "src" / "credo" / "tasks" / "sandbox.py"
    if os.geteuid() != 0 or not python or not setpriv:
        pytest.skip("needs root, setpriv and a system python3 to become another user")
    bomb = PRELUDE + f"""
import time
made = 0
for _ in range(500):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    made += 1
try:
    open('{outside}/x', 'w')
except OSError as e:
    print('refused', e.errno, file=sys.stderr)
print('forks', made, file=sys.stderr)
"""
    cmd = [setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups", python, "-I"]
    done = subprocess.run(
        [*cmd, "-c", UNPRIVILEGED, str(source), bomb], capture_output=True, text=True, timeout=60,
        cwd="/",
    )  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"uid 65534 cannot run the sandbox module here: {done.stderr[-300:]}")
    report = json.loads(done.stdout)
    if report["mode"] != "userns":
        pytest.skip(f"no unprivileged user namespaces here (mode {report['mode']})")
    made = int(report["stderr"].split("forks")[1].split()[0])
    assert report["guarantees"]["read_only_filesystem"] and "refused" in report["stderr"]
    if report["guarantees"]["process_limit"]:
        assert 0 < made < 20
    assert _survivors(_top(SandboxResult("passed", 0, report["stderr"], 0.0))) == []

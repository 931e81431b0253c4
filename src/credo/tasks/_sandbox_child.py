"""The sandbox's own processes (:mod:`credo.tasks.sandbox`); never imported by credo itself.

``run(["MODE", "DIR", "CPU", "MEM", "FSIZE", "NPROC", "WALL", "UID", "REPORT_FD", "HOOK"])``
in a fresh ``python -I`` (credo imports this file there by its path, so that its compiled
form is cached; ``python -I _sandbox_child.py ARGS`` does the same).

*Stage 0* (this process, with credo's privileges) becomes a child subreaper, enters a new
PID namespace (MODE ``root``; ``userns`` also a new user namespace), forks stage 1, waits
for it at most WALL seconds, kills it and whatever it left behind, and writes one line to
REPORT_FD: ``<wait status of the program>\\t<timed out 0/1>\\t<setup error>``.

*Stage 1* takes a new session; in the namespace modes it enters new mount, network and IPC
namespaces and builds the file system the program sees (a tmpfs root holding the system
directories and Python's own directories bound read-only, a fresh ``/proc``, and a small
tmpfs at ``DIR/work``, the only writable place), then drops privileges (MODE ``root`` and
``uid``: ``setresuid`` to UID, a uid of its own; ``userns``: every capability) and sets
the resource limits. In a PID namespace it stays as PID 1 (its death kills every process in the
namespace) and forks the program; otherwise it becomes the program.

The *program* runs in this interpreter (no second start-up), behind the audit hook when
HOOK is 1. Only the standard library: this runs before and outside credo.
"""

from __future__ import annotations

import _signal  # what `signal` wraps, without its 4 ms of enum start-up
import ctypes
import os
import resource
import select
import sys
import time
import types

TYPE_CHECKING = False  # `typing` costs start-up time too
if TYPE_CHECKING:
    from typing import NoReturn

CLONE_NEWNS, CLONE_NEWIPC = 0x00020000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
MNT_DETACH, AT_FDCWD, AT_RECURSIVE = 2, -100, 0x8000
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID = 1, 2
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 36, 38
# system call numbers glibc has no wrapper for: (pivot_root, mount_setattr, capset)
SYSCALLS = {"x86_64": (155, 442, 126), "aarch64": (41, 442, 91)}
NAMESPACE_MODES = ("root", "userns")
SANDBOX_UID_INSIDE = 65534  # what the program sees as its uid in a user namespace
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
DEVICES = ("null", "zero", "full", "random", "urandom")


class Config:
    """The command line, parsed."""

    def __init__(self, argv: list[str]) -> None:
        self.mode, self.dir = argv[0], argv[1]
        self.cpu, self.mem, self.fsize, self.nproc = (int(a) for a in argv[2:6])
        self.wall = float(argv[6])
        self.uid, self.report_fd, self.hook = int(argv[7]), int(argv[8]), argv[9] == "1"
        self.work = os.path.join(self.dir, "work")


def main(argv: list[str]) -> tuple[str, Config] | None:
    """Stage 0; returns ``(source, config)`` in the program's process only."""
    cfg = Config(argv)
    with open(os.path.join(cfg.dir, "program.py"), encoding="utf-8") as f:
        source = f.read()
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    python_dirs = _python_dirs(cfg.dir)
    err_r, err_w = os.pipe()
    try:
        _enter_user_and_pid_namespaces(cfg)
        pid = os.fork()
    except OSError as e:
        _report(cfg, None, False, f"stage 0: {e}")
        return None
    if pid == 0:
        os.close(err_r)
        os.close(cfg.report_fd)
        _stage1(cfg, err_w, python_dirs)
        return source, cfg
    os.close(err_w)
    status, timed_out = _wait(pid, cfg.wall)
    _kill_descendants(pid)
    message = _read_all(err_r)
    if message.startswith("status "):  # PID 1 passes the program's own wait status on
        status, message = int(message.split()[1]), ""
    _report(cfg, status, timed_out, message)
    return None


def _report(cfg: Config, status: int | None, timed_out: bool, message: str) -> None:
    line = f"{'' if status is None else status}\t{int(timed_out)}\t{message}"
    os.write(cfg.report_fd, line.encode("utf-8", "replace"))
    os.close(cfg.report_fd)


def _read_all(fd: int) -> str:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks).decode("utf-8", "replace")


def _enter_user_and_pid_namespaces(cfg: Config) -> None:
    if cfg.mode == "root":
        _unshare(CLONE_NEWPID)
    elif cfg.mode == "userns":
        uid, gid = os.geteuid(), os.getegid()
        _unshare(CLONE_NEWUSER | CLONE_NEWPID)
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{SANDBOX_UID_INSIDE} {uid} 1")
        _write("/proc/self/gid_map", f"{SANDBOX_UID_INSIDE} {gid} 1")


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as f:
        f.write(text)


def _wait(pid: int, seconds: float) -> tuple[int, bool]:
    """Wait for ``pid`` at most ``seconds``, then SIGKILL it: (wait status, timed out)."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        return _wait_polling(pid, seconds)
    try:
        ready, _, _ = select.select([fd], [], [], seconds)
        if not ready:
            _signal.pidfd_send_signal(fd, _signal.SIGKILL)
        return os.waitpid(pid, 0)[1], not ready
    finally:
        os.close(fd)


def _wait_polling(pid: int, seconds: float) -> tuple[int, bool]:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status, False
        time.sleep(0.005)
    os.kill(pid, _signal.SIGKILL)
    return os.waitpid(pid, 0)[1], True


def _kill_descendants(group: int, seconds: float = 5.0) -> None:
    """SIGKILL and reap every process left below this one (a subreaper inherits them all;
    elsewhere than Linux, what is left of stage 1's process group)."""
    try:
        os.killpg(group, _signal.SIGKILL)  # a group id is not reused while it has members
    except OSError:
        pass
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid:
            continue
        for child in _children():
            try:
                os.kill(child, _signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.002)


def _children() -> list[int]:
    try:
        with open(f"/proc/self/task/{os.getpid()}/children", encoding="ascii") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        pass
    me, found = os.getpid(), []
    for name in os.listdir("/proc") if os.path.isdir("/proc") else []:
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == me:
            found.append(int(name))
    return found


# ------------------------------------------------------------------------------- stage 1


def _stage1(cfg: Config, err_w: int, python_dirs: list[str]) -> None:
    """Build the sandbox; returns in the program's process, exits in PID 1."""
    try:
        os.setsid()
        os.umask(0o022)
        if cfg.mode in NAMESPACE_MODES:
            _unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC)
            _build_root(cfg, python_dirs)
        _drop_privileges(cfg)
        _set_limits(cfg)
        _prctl(PR_SET_PDEATHSIG, _signal.SIGKILL)
        os.chdir(cfg.work)
        if cfg.mode in NAMESPACE_MODES:
            _be_pid_1(err_w)
    except BaseException as e:  # the program must not start half-sandboxed
        os.write(err_w, f"stage 1: {type(e).__name__}: {e}".encode("utf-8", "replace"))
        os._exit(125)
    os.close(err_w)


def _be_pid_1(err_w: int) -> None:
    """Fork the program and reap until it ends; then exit, which kills the namespace."""
    program = os.fork()
    if program == 0:
        return
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == program:
            os.write(err_w, f"status {status}".encode())
            os._exit(0)


def _build_root(cfg: Config, python_dirs: list[str]) -> None:
    """The program's file system: read-only but for ``cfg.work``; nothing else of the host."""
    new = os.path.join(cfg.dir, "root")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            os.symlink(os.readlink(path), new + path)
        elif os.path.isdir(path):
            _bind(path, new + path)
    for path in python_dirs:
        _bind(os.path.realpath(path), new + path)
    for name in DEVICES:
        if os.path.exists(f"/dev/{name}"):
            _bind(f"/dev/{name}", f"{new}/dev/{name}")
    os.mkdir(new + "/proc")
    _mount("proc", new + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    # its directory: a tmpfs of its own, 8 file-size limits at most in all
    owner = cfg.uid if cfg.mode == "root" else SANDBOX_UID_INSIDE
    size = f"size={8 * cfg.fsize},nr_inodes=4096,mode=0700,uid={owner},gid={owner}"
    os.makedirs(new + cfg.work, 0o755, exist_ok=True)
    _mount("tmpfs", new + cfg.work, "tmpfs", MS_NOSUID | MS_NODEV, size)
    os.chdir(new)
    _syscall(0, b".", b".")  # pivot_root(".", "."): the old root lies on top of the new
    _check(_libc().umount2(b".", MNT_DETACH), "umount2")  # ... and is gone
    os.chdir("/")
    _mount_setattr("/", AT_RECURSIVE, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, 0)
    _mount_setattr(cfg.work, 0, 0, MOUNT_ATTR_RDONLY)


def _python_dirs(sandbox: str) -> list[str]:
    """This interpreter's directories outside the system ones, outermost only, and none
    that holds ``sandbox`` (that would show the host's files around it)."""
    found = set()
    for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *sys.path):
        if p and os.path.isdir(p):
            found.update({os.path.abspath(p), os.path.realpath(p)})
    keep: list[str] = []
    for p in sorted(found):
        if not any(_within(p, q) for q in (*SYSTEM_DIRS, *keep)) and not _within(sandbox, p):
            keep.append(p)
    return keep


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _bind(src: str, target: str, recursive: bool = True) -> None:
    if os.path.isdir(src):
        os.makedirs(target, 0o755, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), 0o755, exist_ok=True)
        open(target, "a").close()
    _mount(src, target, None, MS_BIND | (MS_REC if recursive else 0))


def _drop_privileges(cfg: Config) -> None:
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    if cfg.mode in ("root", "uid"):
        os.setgroups([])
        os.setresgid(cfg.uid, cfg.uid, cfg.uid)
        os.setresuid(cfg.uid, cfg.uid, cfg.uid)  # from root: every capability is dropped
    elif cfg.mode == "userns":
        header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, self
        data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable (x2): none
        _syscall(2, header, data)


def _set_limits(cfg: Config) -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (cfg.cpu, cfg.cpu + 1))
    resource.setrlimit(resource.RLIMIT_AS, (cfg.mem, cfg.mem))
    resource.setrlimit(resource.RLIMIT_FSIZE, (cfg.fsize, cfg.fsize))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if cfg.nproc > 0:
        resource.setrlimit(resource.RLIMIT_NPROC, (cfg.nproc, cfg.nproc))


# ------------------------------------------------------------------------- system calls


_LIBC: list[ctypes.CDLL] = []


def _libc() -> ctypes.CDLL:
    if not _LIBC:
        _LIBC.append(ctypes.CDLL(None, use_errno=True))
    return _LIBC[0]


def _check(result: int, what: str) -> None:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _unshare(flags: int) -> None:
    _check(_libc().unshare(ctypes.c_int(flags)), f"unshare({flags:#x})")


def _mount(src: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    args = [None if s is None else os.fsencode(s) for s in (src, target, fstype, data or None)]
    result = _libc().mount(args[0], args[1], args[2], ctypes.c_ulong(flags), args[3])
    _check(result, f"mount {src} on {target}")


def _mount_setattr(path: str, flags: int, attr_set: int, attr_clr: int) -> None:
    attr = (ctypes.c_uint64 * 4)(attr_set, attr_clr, 0, 0)  # struct mount_attr
    args = (ctypes.c_int(AT_FDCWD), os.fsencode(path), ctypes.c_uint(flags), attr)
    _syscall(1, *args, ctypes.c_size_t(ctypes.sizeof(attr)))


def _syscall(which: int, *args: object) -> None:
    numbers = SYSCALLS.get(os.uname().machine)
    if numbers is None:
        raise OSError(f"no system call numbers for {os.uname().machine}")
    name = ("pivot_root", "mount_setattr", "capset")[which]
    _check(_libc().syscall(ctypes.c_long(numbers[which]), *args), name)


def _prctl(option: int, value: int) -> None:
    if not sys.platform.startswith("linux"):
        return
    zero = ctypes.c_ulong(0)
    _check(_libc().prctl(ctypes.c_int(option), ctypes.c_ulong(value), zero, zero, zero), "prctl")


# ------------------------------------------------------------------------------ program


def run(argv: list[str]) -> NoReturn:
    """Stage 0, and in the program's process the program; ends with ``os._exit``."""
    program = main(argv)
    if program is None:
        os._exit(0)  # stage 0 is done: skip the interpreter's teardown
    code = _start(*program)
    try:
        exec(code, sys.modules["__main__"].__dict__)
        status = 0
    except SystemExit as e:
        status = _exit_status(e.code)
    except BaseException:
        sys.excepthook(*sys.exc_info())
        status = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(status)


def _exit_status(code: object) -> int:
    """What the interpreter makes of ``sys.exit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _start(source: str, cfg: Config) -> types.CodeType:
    """Make this interpreter the program's: hook, ``__main__``, ``argv``; its code object."""
    sys.modules.pop(__name__, None)
    if cfg.hook:
        _install_audit_hook(os.path.realpath(cfg.work))
    sys.modules["__main__"] = types.ModuleType("__main__")
    sys.argv = ["program.py"]
    return compile(source, "program.py", "exec")


def _install_audit_hook(root: str) -> None:
    """A PEP 578 audit hook that refuses processes, sockets, native code and writes outside
    ``root``: a second layer under the operating system's, best effort by nature (code
    that rewrites the standard library it relies on can get past it). Its state lives in
    closures, out of reach of the program's namespace."""
    deny = (
        "socket.",
        "subprocess.",
        "os.system",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "os.fork",
        "os.forkpty",
        "pty.",
        "ctypes.",
        "os.kill",
        "os.killpg",
        "signal.pthread_kill",
        "webbrowser.",
        "urllib.",
        "http.",
        "ftplib.",
        "smtplib.",
        "imaplib.",
        "poplib.",
        "nntplib.",
        "telnetlib.",
        "gc.get_",
    )
    modules = frozenset(
        {"_posixsubprocess", "_ctypes", "_testcapi", "_testinternalcapi", "_xxsubinterpreters"}
    )
    inside = _inside_check(root)
    check_open, check_paths = _open_check(inside), _paths_check(inside)

    def guard(event: str, args: tuple) -> None:
        if event.startswith(deny) or (event == "import" and args[0] in modules):
            raise PermissionError(f"sandbox: {event} {args[0] if args else ''} is not allowed")
        if event == "open":
            check_open(*args)
        else:
            check_paths(event, args)

    sys.addaudithook(guard)


def _inside_check(root: str):  # -> Callable[[object], bool]
    realpath, fsdecode = os.path.realpath, os.fsdecode

    def inside(path: object) -> bool:
        try:
            p = realpath(fsdecode(path))  # type: ignore[arg-type]
        except Exception:
            return False
        return p == root or p.startswith(root + "/")

    return inside


def _open_check(inside):  # -> Callable[[object, object, object], None]
    """The ``open`` event: no writing outside, no directory descriptor outside (``dir_fd``),
    no other process's ``/proc`` entries."""
    fsdecode, isdir, pid = os.fsdecode, os.path.isdir, str(os.getpid())
    writing = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC

    def check_open(path: object, mode: object, flags: object) -> None:
        if path is None or isinstance(path, int):
            return  # an open file descriptor
        name = fsdecode(path)  # type: ignore[arg-type]
        part = name.split("/")
        if name.startswith("/proc/") and part[2].isdigit() and part[2] != pid:
            raise PermissionError(f"sandbox: reading {name!r} is not allowed")
        writes = isinstance(mode, str) and any(c in mode for c in "wax+")
        writes = writes or (isinstance(flags, int) and bool(flags & writing))
        dir_fd = mode is None and isdir(name)  # os.open of a directory: a dir_fd to be
        if (writes or dir_fd) and not inside(name):
            raise PermissionError(f"sandbox: opening {name!r} for writing is not allowed")

    return check_open


def _paths_check(inside):  # -> Callable[[str, tuple], None]
    """Events that change a path: every path they change inside, no ``dir_fd``."""
    # event: (indices of the paths it changes, indices of its dir_fd arguments)
    paths = {
        "os.remove": ((0,), (1,)),
        "os.rename": ((0, 1), (2, 3)),
        "os.rmdir": ((0,), (1,)),
        "os.chmod": ((0,), (2,)),
        "os.chown": ((0,), (3,)),
        "os.truncate": ((0,), ()),
        "os.mkdir": ((0,), (2,)),
        "os.link": ((0, 1), (2, 3)),
        "os.symlink": ((1,), (2,)),
        "os.utime": ((0,), (3,)),
        "shutil.rmtree": ((0,), ()),
        "os.setxattr": ((0,), ()),
        "os.removexattr": ((0,), ()),
        "sqlite3.connect": ((0,), ()),
    }

    def check_paths(event: str, args: tuple) -> None:
        if event not in paths or (event == "sqlite3.connect" and args[0] in (":memory:", "")):
            return
        written, fds = paths[event]
        if any(args[i] not in (None, -1) for i in fds if i < len(args)):
            raise PermissionError(f"sandbox: {event} with dir_fd is not allowed")
        if not all(inside(args[i]) for i in written):
            raise PermissionError(f"sandbox: {event} outside the sandbox is not allowed")

    return check_paths


if __name__ == "__main__":
    run(sys.argv[1:])

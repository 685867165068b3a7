"""The unprivileged ids a submission runs as where bubblewrap cannot run (AUTOGRADER_SANDBOX=user,
`autograder.sandbox`), and what the grader does with them.

`allocate()` hands out a `Users`: two numeric ids of their own for one submission, the kernel's
(nbgrader, the notebook's kernel and whatever they start) and the runner's (the judge's processes
that run the student's function on hidden inputs). The ids come from a reserved range
(AUTOGRADER_UIDS=START-END, default 40000-49999: within the 65,536 ids a container's user namespace
commonly maps) and have no passwd or group entry. An id is handed out only when nothing holds it:
no passwd or group entry names it, no process runs as it, no file of it is left at the top of the
machine's world-writable folders (what a submission graded without Landlock may leave there), its
lock (a file in LOCKS, root's only, held with flock and naming the holder's pid) is free, and this
process has not handed it out before: two submissions of one grading never share an id.

Every process of an id is found in /proc (its real, effective, saved or file-system uid), and
killed or stopped from a child forked as root that becomes that id and sends kill(-1, signal):
that reaches every process of the id but the sender, and fork cannot outrun it (a process with a
fatal or stop signal pending creates no child); it is repeated until /proc shows none left (killed)
or none running (stopped). A killed process stays in /proc as a zombie, its name readable by all,
until its parent reaps it: the grader makes itself the subreaper of what it starts
(`become_subreaper`), so that orphans of the submission become its children, and reaps them
itself (`kill_ids`), not waiting on another init. A grading run, before it returns, kills what is
left of every id it handed out and no other grading has taken since (`sweep`).
"""

from __future__ import annotations

import fcntl
import os
import pwd
import grp
import signal
import stat
import threading
import time
from pathlib import Path

from .limits import proc_table

DEFAULT_RANGE = (40000, 49999)
LOCKS = Path("/run/course-autograder-uids")
WORLD_WRITABLE = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/dev/mqueue")
_used: set[int] = set()
_used_lock = threading.Lock()


def uid_range() -> range:
    """AUTOGRADER_UIDS=START-END (inclusive), or the default; a clear error when malformed."""
    text = os.environ.get("AUTOGRADER_UIDS", "")
    if not text:
        return range(DEFAULT_RANGE[0], DEFAULT_RANGE[1] + 1)
    try:
        start, end = (int(x) for x in text.split("-"))
    except ValueError:
        raise RuntimeError(f"AUTOGRADER_UIDS={text!r}: expected START-END, e.g. 40000-49999") from None
    if not 0 < start <= end < 2**31:
        raise RuntimeError(f"AUTOGRADER_UIDS={text!r}: START-END within 1 .. 2**31-1")
    return range(start, end + 1)


class Users:
    """The ids of one submission: `kernel` and `runner` (each its own gid, equal to it)."""

    def __init__(self, kernel: int, runner: int, locks: list[int]):
        self.kernel, self.runner, self._locks = kernel, runner, locks

    @property
    def uids(self) -> tuple[int, int]:
        return self.kernel, self.runner

    def kill(self, patience: float = 10.0, keep=()) -> list[int]:
        """Kill every process of both ids (see `kill_ids`); the pids still there after `patience` seconds."""
        return kill_ids(self.uids, patience, keep=keep)

    def freeze_kernel(self, patience: float = 10.0) -> bool:
        """Stop every process of the kernel's id; True once none is running."""
        return stop_id(self.kernel, patience)

    def thaw_kernel(self) -> None:
        signal_id(self.kernel, signal.SIGCONT)

    def release(self) -> None:
        """Free the locks (the ids stay used for this process)."""
        for fd in self._locks:
            try:
                os.close(fd)
            except OSError:
                pass
        self._locks = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    def __repr__(self):
        return f"Users(kernel={self.kernel}, runner={self.runner})"


def _lock_dir() -> Path:
    """LOCKS, made root's only; refused when it is a link, another's or writable by others."""
    try:
        LOCKS.mkdir(mode=0o700, exist_ok=True)
    except OSError as e:
        raise RuntimeError(f"cannot make {LOCKS} for the grading ids' locks: {e}") from None
    info = os.lstat(LOCKS)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != 0 or info.st_mode & 0o022:
        raise RuntimeError(f"{LOCKS} is not a folder of root's only: refusing its locks")
    return LOCKS


def _named(uid: int) -> bool:
    for lookup in (pwd.getpwuid, grp.getgrgid):
        try:
            lookup(uid)
            return True
        except KeyError:
            pass
    return False


def file_owners() -> set[int]:
    """The owners of what lies at the top of the machine's world-writable folders (and one level
    into the world-writable folders found there, such as /tmp/.X11-unix)."""
    owners: set[int] = set()

    def scan(folder: str, depth: int) -> None:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            return
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            owners.add(info.st_uid)
            if depth and stat.S_ISDIR(info.st_mode) and info.st_mode & 0o002:
                scan(entry.path, depth - 1)

    for folder in WORLD_WRITABLE:
        scan(folder, 1)
    return owners


def _try_lock(locks_dir: Path, uid: int) -> int | None:
    """The file descriptor holding `uid`'s lock, or None where another holds it."""
    fd = os.open(locks_dir / str(uid), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def allocate(n: int = 2) -> Users:
    """The next `n` (2: kernel, runner) free ids of the range, locked until `release()`."""
    if os.geteuid() != 0:
        raise RuntimeError("AUTOGRADER_SANDBOX=user: the grader must run as root (it switches to unprivileged ids)")
    locks_dir = _lock_dir()
    busy = {u for p in proc_table().values() for u in p.uids} | file_owners()
    got: list[tuple[int, int]] = []
    with _used_lock:
        for uid in uid_range():
            if len(got) == n:
                break
            if uid in _used or uid in busy or _named(uid):
                continue
            fd = _try_lock(locks_dir, uid)
            if fd is None:
                continue
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            _used.add(uid)
            got.append((uid, fd))
        if len(got) < n:
            for _, fd in got:
                os.close(fd)
            r = uid_range()
            raise RuntimeError(f"no {n} free ids left in AUTOGRADER_UIDS={r.start}-{r.stop - 1} for this grading "
                               "(each submission takes two, never handed out twice in one grading)")
    return Users(got[0][0], got[1][0], [fd for _, fd in got])


def sweep(patience: float = 120.0) -> list[int]:
    """Kill what is left of every id this process handed out (`allocate`) and has released, for up
    to `patience` seconds: a grading run calls it before it returns, so that nothing of a submission
    outlives the run where that submission's own close gave up (`Users.kill`'s 10 s, on a loaded
    machine). The pids still there (see `kill_released`)."""
    with _used_lock:
        used = set(_used)
    return kill_released(used, patience)


def kill_released(uids, patience: float = 10.0) -> list[int]:
    """Kill every process of those of `uids` whose lock no one holds, holding it meanwhile, for up to
    `patience` seconds; the pids still there. An id whose lock another holds is not touched: a
    released id may since have been handed to another grading on this machine, which holds its lock
    and took it only when no process ran as it, so what runs as it now is that grading's."""
    wanted = set(uids)
    alive = sorted({u for p in proc_table().values() for u in p.uids if u in wanted})
    if not alive:
        return []
    locks_dir, held = _lock_dir(), {}
    try:
        for uid in alive:
            if (fd := _try_lock(locks_dir, uid)) is not None:
                held[uid] = fd
        return kill_ids(sorted(held), patience) if held else []
    finally:
        for fd in held.values():
            os.close(fd)


def holders_of(pid: int) -> list[int]:
    """The ids whose lock file names `pid` as its last holder (to clean up after a killed grading)."""
    out = []
    for path in LOCKS.glob("*") if LOCKS.is_dir() else []:
        try:
            if path.name.isdigit() and path.read_text().split()[:1] == [str(pid)]:
                out.append(int(path.name))
        except OSError:
            continue
    return out


def become_subreaper() -> None:
    """Make this process the subreaper of its descendants (PR_SET_CHILD_SUBREAPER): an orphan
    below it becomes its child, and `kill_ids` reaps it."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)


def processes_of(uids, zombies: bool = False) -> list[int]:
    """The processes any of whose uids is in `uids` (zombies too when asked)."""
    wanted = set(uids)
    return [pid for pid, p in proc_table().items()
            if (zombies or p.state not in "ZX") and wanted.intersection(p.uids)]


def reap(uids, keep=()) -> None:
    """Reap the zombies of `uids` that are this process's children, but `keep` (children another
    part of this process waits for, such as a subprocess.Popen's)."""
    wanted, me = set(uids), os.getpid()
    for pid, p in proc_table().items():
        if p.state == "Z" and p.ppid == me and pid not in keep and wanted.intersection(p.uids):
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass


def signal_id(uid: int, sig: int) -> None:
    """Send `sig` to every process of `uid`, from a child that becomes `uid` (kill(-1, sig))."""
    pid = os.fork()
    if pid == 0:  # the child does nothing but this: no lock it could inherit is taken
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            os.kill(-1, sig)
        except OSError:
            pass
        finally:
            os._exit(0)
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:  # another thread's `reap` took it: once a zombie of `uid`, it had sent its signal
        pass


def kill_ids(uids, patience: float = 10.0, keep=()) -> list[int]:
    """SIGKILL every process of `uids` and reap the zombies that are this process's (but `keep`),
    until none is left, zombies included, or `patience` seconds pass; the pids left (alive, or
    zombies another process has yet to reap)."""
    deadline = time.monotonic() + patience
    while True:
        if processes_of(uids):
            for uid in uids:
                signal_id(uid, signal.SIGKILL)
        reap(uids, keep)
        left = [pid for pid in processes_of(uids, zombies=True) if pid not in keep]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.01)


def stop_id(uid: int, patience: float = 10.0) -> bool:
    """SIGSTOP every process of `uid` until none runs (stopped, or dead); False after `patience` s.
    (A process stops when it is next scheduled: on a loaded machine that can take a while.)"""
    deadline = time.monotonic() + patience
    sent = 0.0
    while True:
        if time.monotonic() - sent > 0.5:
            signal_id(uid, signal.SIGSTOP)
            sent = time.monotonic()
        if not [pid for pid, p in proc_table().items() if uid in p.uids and p.state not in "TtZX"]:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)

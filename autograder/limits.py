"""The limits every run of student code gets: time, memory and processes over all its processes
together, output size.

A `Slot` is the limits of one submission: a memory cgroup and a pids cgroup (v2, or v1's
hierarchies) that every process of the submission joins: the grading kernel and everything it
starts, and the judge's fresh processes that run its functions (`autograder.judge`), so three
children holding 2 GiB each count as 6 GiB, and a judge process started by a call that does not
wait still counts against the submission and dies with its slot (`Slot.close` kills what is
left in the cgroups). Where no cgroup can be made, memory is watched instead: the resident memory
of the slot's process trees and of every process of the submission's own ids (`Slot.users`, where
it runs as unprivileged ids: `autograder.uids`; a double-forked daemon leaves its tree, not its
id), summed every 50 ms, and all of them killed above the limit (`Slot.kind` says which; each
process also keeps an address-space limit as a backstop). Closing a slot kills every process of
its trees, of its ids and of its cgroups.

`run_limited(cmd, ...)` runs one command in a slot (its own, or a shared one) with a wall-clock
limit (its process tree is killed at the deadline), a size limit on every file it writes and on
its captured output (which goes to a file opened here, never into this process's memory: a flood
cannot take the grader down; the run is stopped as soon as the output reaches the limit), and no
core files.
"""

from __future__ import annotations

import itertools
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import NamedTuple

OUTPUT_LIMIT = 64 * 2**20  # bytes per file a limited process writes (its output, a notebook)
MAX_PROCESSES = 512  # processes and threads of one slot
RUNNER_PROCESSES = 256  # those of one runner (`autograder.trial`) within it
CLOSE_PATIENCE = 30.0  # seconds a slot's cgroup may take to empty when it is closed
CGROUP_ROOT = Path("/sys/fs/cgroup")
SLOT_NAME = "course-slot"
_counter = itertools.count()
_swept = threading.Event()
_pending: list = []  # slot cgroups whose close gave up: `drain_pending` tries them again
_pending_lock = threading.Lock()


class Proc(NamedTuple):
    """One process as /proc shows it: parent, uids, resident memory in KiB, state letter."""

    ppid: int
    uids: tuple[int, ...]
    rss_kib: int
    state: str


_PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024
_root_owned: dict[tuple[int, str], tuple[int, ...]] = {}  # (pid, start time): uids read from its status


def proc_table() -> dict[int, Proc]:
    """Every process of the machine: /proc/<pid>/stat (parent, state, memory) and its folder's owner,
    which is the process's effective uid, except for a process that is not dumpable, whose folder
    root owns: its uids (real, effective, saved, file system) are read from its status, once per
    process (by pid and start time). (A process that root started and that changes its uid without
    exec keeps what was first read here: the slots count those by their tree.)"""
    out, seen = {}, set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        try:
            fields = _read(f"/proc/{pid}/stat").rsplit(b")", 1)[1].split()
            owner = entry.stat().st_uid
        except (OSError, IndexError):
            continue
        uids: tuple[int, ...] = (owner,)
        if owner == 0:
            key = (pid, fields[19].decode())
            seen.add(key)
            if key not in _root_owned:
                try:
                    line = next(x for x in _read(f"/proc/{pid}/status").split(b"\n") if x.startswith(b"Uid:"))
                    _root_owned[key] = tuple(int(u) for u in line.split()[1:])
                except (OSError, StopIteration, ValueError):
                    continue
            uids = _root_owned[key]
        try:
            out[pid] = Proc(int(fields[1]), uids, int(fields[21]) * _PAGE_KIB, fields[0].decode())
        except (IndexError, ValueError):
            continue
    for key in [k for k in _root_owned if k not in seen]:  # gone: forget them
        _root_owned.pop(key, None)
    return out


def _read(path: str) -> bytes:
    """The first 4 KiB of a /proc file (os.read: a third of a Python file object's cost here)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.read(fd, 4096)
    finally:
        os.close(fd)


def _start_time(pid: int) -> str | None:
    """When process `pid` started (clock ticks since boot, /proc/<pid>/stat), None when there is none:
    with the pid it names one process, where a pid alone is reused (pid_max may be 32768)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def slot_prefix(pid: int | None = None) -> str:
    """The start of the cgroup names of the slots made by process `pid` (this one by default)."""
    pid = os.getpid() if pid is None else pid
    return f"{SLOT_NAME}-{pid}-{_start_time(pid)}-"


# ---------------------------------------------------------------- cgroups
class Cgroup:
    """A cgroup of one controller ("memory" or "pids") made for a slot, v2 or v1."""

    def __init__(self, path: Path, controller: str, version: int):
        self.path, self.controller, self.version = path, controller, version

    @classmethod
    def make(cls, controller: str, name: str) -> "Cgroup | None":
        """A new cgroup below this process's own (or the hierarchy's root), or None where none can be made."""
        for version, root in ((2, CGROUP_ROOT), (1, CGROUP_ROOT / controller)):
            if version == 2:
                controllers = root / "cgroup.controllers"
                if not (controllers.is_file() and controller in controllers.read_text().split()):
                    continue
            elif not (root / "cgroup.procs").is_file():
                continue
            for parent in (cls._own(root, controller, version), root):
                if parent is None:
                    continue
                try:
                    if version == 2:
                        _write(parent / "cgroup.subtree_control", f"+{controller}", quiet=True)
                    path = parent / name
                    path.mkdir()
                except OSError:
                    continue
                limit = "memory.max" if (controller, version) == ("memory", 2) else \
                    "memory.limit_in_bytes" if controller == "memory" else "pids.max"
                if (path / limit).exists():
                    return cls(path, controller, version)
                _rmdir(path)
        return None

    @staticmethod
    def _own(root: Path, controller: str, version: int) -> Path | None:
        """This process's own cgroup in the hierarchy, where it is a folder here."""
        try:
            for line in Path("/proc/self/cgroup").read_text().splitlines():
                _, names, path = line.split(":", 2)
                if (version == 2 and names == "") or (version == 1 and controller in names.split(",")):
                    own = root / path.lstrip("/")
                    return own if own != root and own.is_dir() else None
        except (OSError, ValueError):
            pass
        return None

    @classmethod
    def sweep(cls, controller: str) -> list[Path]:
        """Remove the slot cgroups of processes that are gone (a grading killed before its slots
        closed), killing what is left in them; returns the cgroups removed."""
        removed = []
        for version, root in ((2, CGROUP_ROOT), (1, CGROUP_ROOT / controller)):
            parents = {p for p in (cls._own(root, controller, version), root) if p is not None and p.is_dir()}
            for path in (c for parent in parents for c in parent.glob(f"{SLOT_NAME}-*") if c.is_dir()):
                fields = path.name[len(SLOT_NAME) + 1:].split("-")  # pid, start time, number
                if not fields[0].isdigit() or path.name.startswith(slot_prefix(int(fields[0]))):
                    continue  # its maker still runs
                if len(fields) < 3 and _start_time(int(fields[0])) is not None:
                    continue  # a name without a start time whose pid is in use: it may be its maker's
                cls(path, controller, version).close(patience=2.0)
                if not path.exists():
                    removed.append(path)
        return removed

    def limit(self, value: int) -> None:
        if self.controller == "pids":
            _write(self.path / "pids.max", str(value))
        elif self.version == 2:
            _write(self.path / "memory.max", str(value))
            _write(self.path / "memory.swap.max", "0", quiet=True)
        else:
            _write(self.path / "memory.limit_in_bytes", str(value))
            _write(self.path / "memory.memsw.limit_in_bytes", str(value), quiet=True)  # no swap beyond the limit

    def join(self) -> None:
        """Move the calling process here (in a child, before exec)."""
        _write(self.path / "cgroup.procs", str(os.getpid()))

    def pids(self) -> list[int]:
        try:
            return [int(x) for x in (self.path / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def hits(self) -> int:
        """How many times the limit acted: processes refused (pids) or processes OOM-killed (memory)."""
        if self.controller == "pids":
            return _event(self.path / "pids.events", "max")
        if self.version == 2:
            return _event(self.path / "memory.events", "oom_kill")
        return _event(self.path / "memory.oom_control", "oom_kill")

    def close(self, patience: float = CLOSE_PATIENCE) -> bool:
        """Kill every process left in the cgroup and remove it, trying for up to `patience` seconds
        (a process killed in the middle of a large allocation can take seconds to leave); True once
        removed. What still holds it after that is reported on stderr, and the next process that
        makes a slot removes it (`sweep`)."""
        deadline = time.monotonic() + patience
        while True:
            for pid in self.pids():
                _kill(pid)
            if _rmdir(self.path):
                return True
            if time.monotonic() > deadline:
                left = {pid: _state(pid) for pid in self.pids()}
                print(f"autograder.limits: could not remove {self.path} in {patience:.0f} s; processes left: "
                      f"{left or 'none listed'}; tried again at the end of the run", file=sys.stderr)
                with _pending_lock:
                    _pending.append(self)
                return False
            time.sleep(0.05)


def _write(path: Path, text: str, quiet: bool = False) -> None:
    try:
        path.write_text(text)
    except OSError:
        if not quiet:
            raise


def _event(path: Path, key: str) -> int:
    try:
        fields = path.read_text().split()
        return int(fields[fields.index(key) + 1])
    except (OSError, ValueError, IndexError):
        return 0


def drain_pending(patience: float = 120.0) -> list[Path]:
    """Close again the slot cgroups whose close gave up (`Cgroup.close`), for up to `patience`
    seconds in all: a grading run calls it before it returns, so nothing of a submission outlives
    it. Returns the cgroups still there (reported on stderr)."""
    deadline = time.monotonic() + patience
    with _pending_lock:
        groups, _pending[:] = list(_pending), []
    left = []
    for group in groups:
        if not group.close(patience=max(1.0, deadline - time.monotonic())):
            left.append(group.path)
    with _pending_lock:  # a second give-up of the same cgroup is not retried again here
        _pending[:] = [g for g in _pending if g.path not in left]
    return left


def _rmdir(path: Path) -> bool:
    try:
        path.rmdir()
        return True
    except FileNotFoundError:
        return True
    except OSError:
        return False


def _state(pid: int) -> str:
    """A process's state letter and name (/proc/<pid>/stat), for a report."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return f"{stat.rsplit(')', 1)[1].split()[0]} {stat[stat.find('(') + 1:stat.rfind(')')]}"
    except OSError:
        return "gone"


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


# ---------------------------------------------------------------- the slot
class Slot:
    """The memory and process limits of one submission, over all its processes together.

    `kind` is {"memory": "cgroup" | "watch" | "none", "processes": "cgroup" | "rlimit" | "none"}:
    a pids cgroup where one can be made, else RLIMIT_NPROC (which counts every process of the
    user, and does not bind root; the unprivileged ids of `users` each have it).

    `users`: the submission's unprivileged ids (`autograder.uids.Users`: `uids`, `kill()`), whose
    every process the slot counts and kills, wherever it was reparented."""

    def __init__(self, memory_bytes: int | None = None, max_processes: int | None = MAX_PROCESSES, users=None):
        self.memory_bytes, self.max_processes, self.users = memory_bytes, max_processes, users
        if not _swept.is_set():  # once per process: what a killed grading left behind
            _swept.set()
            for controller in ("memory", "pids"):
                Cgroup.sweep(controller)
        name = f"{slot_prefix()}{next(_counter)}"
        self.memory = Cgroup.make("memory", name) if memory_bytes else None
        self.processes = Cgroup.make("pids", name) if max_processes else None
        if self.memory is not None:
            self.memory.limit(memory_bytes)
        if self.processes is not None:
            self.processes.limit(max_processes)
        self.kind = {"memory": "cgroup" if self.memory else ("watch" if memory_bytes else "none"),
                     "processes": "cgroup" if self.processes else
                     ("rlimit" if max_processes and (os.getuid() != 0 or users is not None) else "none")}
        self._roots: set[int] = set()
        self._watch_hit = False
        self._lock = threading.Lock()
        self._closed = threading.Event()
        if self.kind["memory"] == "watch":
            threading.Thread(target=self._watch, daemon=True).start()

    def preexec(self, *, file_bytes: int | None, address_space: int | None):
        """A preexec_fn: a new session (so the whole tree can be killed), the slot's cgroups,
        an address-space and a file-size limit, no core files, RLIMIT_NPROC where no pids cgroup."""
        n, rlimit_processes = self.max_processes, self.kind["processes"] == "rlimit"

        def apply():
            os.setsid()
            for group in (self.memory, self.processes):
                if group is not None:
                    group.join()
            if address_space:
                resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
            if file_bytes:
                resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            if rlimit_processes:
                mine = sum(1 for p in Path("/proc").iterdir() if p.name.isdigit() and _owner(p) == os.getuid())
                resource.setrlimit(resource.RLIMIT_NPROC, (mine + n, mine + n))

        return apply

    def started(self, pid: int) -> None:
        with self._lock:
            self._roots.add(pid)

    def finished(self, pid: int) -> None:
        with self._lock:
            self._roots.discard(pid)

    def hit(self) -> set[str]:
        """Which limits acted so far: "memory" (a process OOM-killed, or the watched sum reached
        the limit), "processes" (a process refused)."""
        out = set()
        if (self.memory is not None and self.memory.hits() > 0) or self._watch_hit:
            out.add("memory")
        if self.processes is not None and self.processes.hits() > 0:
            out.add("processes")
        return out

    def members(self, table: dict[int, Proc] | None = None) -> set[int]:
        """The slot's processes now: its trees, and every process of its ids."""
        table = proc_table() if table is None else table
        with self._lock:
            roots = set(self._roots)
        out = _descendants(roots, table) if roots else set()
        if self.users is not None:
            ids = set(self.users.uids)
            out |= {pid for pid, p in table.items() if ids.intersection(p.uids)}
        return out

    def _watch(self) -> None:
        """Without a memory cgroup: kill the slot's processes when their resident memory sums above the limit."""
        while not self._closed.wait(0.05):
            table = proc_table()
            members = self.members(table)
            if sum(table[pid].rss_kib for pid in members if pid in table) * 1024 > self.memory_bytes:
                self._watch_hit = True
                for pid in members:
                    _kill(pid)
                if self.users is not None:
                    with self._lock:
                        roots = set(self._roots)
                    self.users.kill(patience=0.0, keep=roots)

    def close(self) -> None:
        """Kill everything left in the slot (its trees, every process of its ids) and remove its cgroups."""
        self._closed.set()
        for pid in self.members():
            _kill(pid)
        if self.users is not None:
            with self._lock:
                roots = set(self._roots)
            left = self.users.kill(keep=roots)
            if left:
                print(f"autograder.limits: processes of {self.users} left after 10 s: {left}", file=sys.stderr)
        for group in (self.memory, self.processes):
            if group is not None:
                group.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _owner(proc: Path) -> int | None:
    try:
        return proc.stat().st_uid
    except OSError:
        return None


def _descendants(roots: set[int], table: dict[int, Proc] | None = None) -> set[int]:
    """`roots` and every process below them (by parent pid), as /proc shows them now (or `table`)."""
    children: dict[int, list[int]] = {}
    for pid, p in (proc_table() if table is None else table).items():
        children.setdefault(p.ppid, []).append(pid)
    out, stack = set(), list(roots)
    while stack:
        pid = stack.pop()
        if pid not in out:
            out.add(pid)
            stack += children.get(pid, [])
    return out


# ---------------------------------------------------------------- one limited run
class Limited(NamedTuple):
    """What `run_limited` returns: the exit status (None: timed out), the output (bounded by the
    file limit) and the limits the run hit ("processes", "output", "memory")."""

    returncode: int | None
    stdout: bytes
    stderr: bytes
    hit: frozenset


class Running:
    """A command started under the limits of `run_limited`, its input not given yet: `finish`
    feeds it and waits. A warm process (its imports done, waiting on stdin) is started this way."""

    def __init__(self, cmd: list[str], *, slot: Slot | None, memory_bytes: int | None, address_space: int | None,
                 cwd: Path | None, env: dict | None, file_bytes: int | None, max_processes: int | None,
                 stdout_path: Path | None, stderr: str, stdin: bool, stdout_pipe: bool = False):
        self.own = slot is None
        self.slot = Slot(memory_bytes, max_processes) if self.own else slot
        self.users = None  # ids this run holds alone (`autograder.uids.Users`), released when it closes
        self.file_bytes, self.stderr = file_bytes, stderr
        self.before = self.slot.hit()
        self.tmp = tempfile.TemporaryDirectory(prefix="course-run-")
        out_path = Path(stdout_path) if stdout_path else Path(self.tmp.name) / "stdout"
        self.out_f = open(out_path, "w+b")
        self.err_f = open(Path(self.tmp.name) / "stderr" if stderr == "keep" else os.devnull, "w+b")
        address_space = address_space or self.slot.memory_bytes or memory_bytes
        self.started = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                     stdout=subprocess.PIPE if stdout_pipe else self.out_f,
                                     stderr=self.out_f if stderr == "stdout" else self.err_f, cwd=cwd, env=env,
                                     preexec_fn=self.slot.preexec(file_bytes=file_bytes, address_space=address_space))
        self.slot.started(self.proc.pid)

    def finish(self, input: bytes | None, timeout: float) -> Limited:
        """Feed `input` (when the process takes one) and wait up to `timeout` seconds from now."""
        hit = set()
        try:
            if self.proc.stdin is not None:
                threading.Thread(target=_feed, args=(self.proc.stdin, input or b""), daemon=True).start()
            files = [self.out_f] + ([self.err_f] if self.stderr == "keep" else [])
            rc, flooded = _wait(self.proc, timeout, self.file_bytes, files)
            if flooded:
                hit.add("output")
            kill_tree(self.proc)  # daemons it left behind in its session
            self.slot.finished(self.proc.pid)
            out = _read_bounded(self.out_f, self.file_bytes)
            err = _read_bounded(self.err_f, self.file_bytes) if self.stderr == "keep" else b""
        finally:
            hit |= self.slot.hit() - self.before  # before an own slot's cgroups go
            self.close()
        if self.file_bytes and (len(out) >= self.file_bytes or len(err) >= self.file_bytes):
            hit.add("output")
        return Limited(rc, out, err, frozenset(hit))

    def close(self) -> None:
        """Stop it (if still running) and release its files and, when it has its own, its slot."""
        if self.proc.poll() is None:
            kill_tree(self.proc)
            self.proc.wait()
        self.slot.finished(self.proc.pid)
        for f in (self.out_f, self.err_f, self.proc.stdin, self.proc.stdout):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass
        self.tmp.cleanup()
        if self.own:
            self.slot.close()
        if self.users is not None:
            self.users.release()


def start_limited(cmd: list[str], *, memory_bytes: int | None = None, slot: Slot | None = None,
                  address_space: int | None = None, cwd: Path | None = None, env: dict | None = None,
                  file_bytes: int | None = OUTPUT_LIMIT, max_processes: int | None = MAX_PROCESSES,
                  stdout_path: Path | None = None, stderr: str = "keep", stdin: bool = True,
                  stdout_pipe: bool = False) -> Running:
    """Start `cmd` under the limits of `run_limited` (arguments as there); `.finish(input, timeout)`.
    `stdout_pipe`: its stdout is a pipe this process reads (`.proc.stdout`) rather than a file."""
    return Running(cmd, slot=slot, memory_bytes=memory_bytes, address_space=address_space, cwd=cwd, env=env,
                   file_bytes=file_bytes, max_processes=max_processes, stdout_path=stdout_path, stderr=stderr,
                   stdin=stdin, stdout_pipe=stdout_pipe)


def run_limited(cmd: list[str], *, timeout: float, memory_bytes: int | None = None, slot: Slot | None = None,
                address_space: int | None = None, input: bytes | None = None, cwd: Path | None = None,
                env: dict | None = None, file_bytes: int | None = OUTPUT_LIMIT,
                max_processes: int | None = MAX_PROCESSES, stdout_path: Path | None = None,
                stderr: str = "keep") -> Limited:
    """Run `cmd` under the limits above, in `slot` (shared with other runs of the same
    submission) or in a slot of its own (memory_bytes and max_processes over its whole tree,
    closed at the end). stdout goes to a file (`stdout_path` when given: a path this process
    chose, opened here before the run), stderr to another ("keep"), to the same ("stdout") or
    nowhere ("discard"). `address_space` is each process's own limit (default: the slot's memory)."""
    running = start_limited(cmd, memory_bytes=memory_bytes, slot=slot, address_space=address_space, cwd=cwd, env=env,
                            file_bytes=file_bytes, max_processes=max_processes, stdout_path=stdout_path,
                            stderr=stderr, stdin=input is not None)
    return running.finish(input, timeout)


def _read_bounded(f, limit: int | None) -> bytes:
    """Up to `limit` bytes of a file this process opened itself (never reopened by its path)."""
    f.flush()
    f.seek(0)
    return f.read(limit) if limit else f.read()


def _feed(stdin, data: bytes) -> None:
    try:
        stdin.write(data)
        stdin.close()
    except (BrokenPipeError, OSError):  # it stopped reading: it died or exited early
        pass


def _wait(proc: subprocess.Popen, timeout: float, file_bytes: int | None, files: list) -> tuple[int | None, bool]:
    """Wait for `proc`; kill its tree at the deadline (returncode None) or as soon as one of its
    output files reaches `file_bytes` (an output flood: no use waiting for the deadline)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return proc.wait(timeout=0.25), False
        except subprocess.TimeoutExpired:
            pass
        flooded = bool(file_bytes) and any(os.fstat(f.fileno()).st_size >= file_bytes for f in files)
        if flooded or time.monotonic() > deadline:
            kill_tree(proc)
            proc.wait()
            return (proc.returncode if flooded else None), flooded


def kill_tree(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass

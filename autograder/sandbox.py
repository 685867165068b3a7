"""Process limits and the bubblewrap sandbox every piece of student code runs in while grading.

`sandboxed(cmd, ...)` prefixes a command with bubblewrap when it is installed: the whole file
system read-only, a private /tmp, no network (its own network namespace: loopback only), its
own PID namespace (killing the sandbox kills everything in it), and the folders named in
`hide` (hidden cases, the gradebook, other students' submissions) replaced by empty ones.

Given `course_lib=STUB` (a stubbed copy, `autograder.stubs`), the repository itself is masked
too: only its Python environment, `autograder/` (without the hidden cases), `data/` and
`configs/` come back, read-only, and STUB stands where `course_lib/` was. So no reference body
of an open assignment can be imported, reloaded or read from disk: not from `course_lib`, not
from `solutions/`, `lessons/`, `notebooks/` (later notebooks paste earlier references), `tests/`
or the git history. Other copies of the course elsewhere on the grading machine are not known
here: name them in AUTOGRADER_HIDE (paths separated by ":").

Without bubblewrap (AUTOGRADER_SANDBOX=0, or not installed) the command runs bare, with the
same limits and `unsandboxed_env` putting STUB first on PYTHONPATH; `sandbox_available()` says
which, and the grading output says so.

`run_limited` applies the limits to any command: a wall-clock limit (the process tree is
killed), an address-space limit per process, a size limit on every file it writes (its output
goes to files, never into this process's memory: an output flood cannot take the grader down),
and a limit on the number of processes (a pids cgroup where the grader may create one, e.g. as
root; RLIMIT_NPROC otherwise), so a fork bomb stays inside its submission.
"""

from __future__ import annotations

import itertools
import os
import resource
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import NamedTuple

REPO_ROOT = Path(__file__).resolve().parent.parent
# what of the repository a sandboxed notebook or function may see (besides the stubbed course_lib)
VISIBLE = ("autograder", "data", "configs")
OUTPUT_LIMIT = 64 * 2**20  # bytes per file a sandboxed process writes (its output, a notebook)
MAX_PROCESSES = 512  # processes and threads of one sandboxed run


def sandbox_available() -> bool:
    if os.environ.get("AUTOGRADER_SANDBOX", "1") == "0":
        return False
    return shutil.which("bwrap") is not None


def sandboxed(cmd: list[str], *, writable: list[Path] = (), hide: list[Path] = (), binds: list[Path] = (),
              course_lib: Path | None = None) -> list[str]:
    if not sandbox_available():
        return list(cmd)
    args = [
        "bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
        "--unshare-all", "--die-with-parent", "--new-session",
    ]
    # the private /tmp must not hide the course or its Python when they live under /tmp (a CI
    # clone, say): bind them back, read-only, before anything is masked
    for path in _code_roots():
        args += ["--ro-bind", str(path), str(path)]
    hidden = [Path(p) for p in hide] + extra_hidden()
    if course_lib is not None:
        args += ["--tmpfs", str(REPO_ROOT)]
        for path in _python_roots_in_repo() + [REPO_ROOT / name for name in VISIBLE]:
            if path.exists():
                args += ["--ro-bind", str(path), str(path)]
        args += ["--ro-bind", str(Path(course_lib).resolve()), str(REPO_ROOT / "course_lib")]
        hidden += _git_dirs()
    for path in hidden:
        if Path(path).exists():
            args += ["--tmpfs", str(path)]
    for path in list(writable) + list(binds):
        args += ["--bind", str(path), str(path)]
    return args + ["--"] + list(cmd)


def unsandboxed_env(env: dict, course_lib: Path | None) -> dict:
    """The best that can be done without bubblewrap: the stubbed course_lib first on PYTHONPATH
    (its folder also holds a `data` link), then the repository for `autograder`."""
    env = dict(env)
    if course_lib is not None and not sandbox_available():
        env["PYTHONPATH"] = os.pathsep.join([str(Path(course_lib).resolve().parent), str(REPO_ROOT),
                                             env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def extra_hidden() -> list[Path]:
    return [Path(p) for p in os.environ.get("AUTOGRADER_HIDE", "").split(":") if p]


def _code_roots() -> list[Path]:
    """The repository and the Python installation(s), where they lie under /tmp."""
    import sys

    roots = {REPO_ROOT, Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()}
    return sorted(p for p in roots if p.is_relative_to("/tmp"))


def _python_roots_in_repo() -> list[Path]:
    """The Python environment(s) inside the repository (e.g. .venv/), which the masked view keeps."""
    import sys

    roots = {Path(sys.prefix), Path(sys.base_prefix), Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()}
    out = set()
    for p in roots:
        if p.is_relative_to(REPO_ROOT) and p != REPO_ROOT:
            out.add(REPO_ROOT / p.relative_to(REPO_ROOT).parts[0])
    return sorted(out)


def _git_dirs() -> list[Path]:
    """The repository's git folder where it lives outside the repository (a worktree)."""
    dot_git = REPO_ROOT / ".git"
    if dot_git.is_file():
        text = dot_git.read_text(encoding="utf-8", errors="replace").strip()
        if text.startswith("gitdir:"):
            path = (REPO_ROOT / text.split(":", 1)[1].strip()).resolve()
            common = path / "commondir"
            dirs = [path]
            if common.is_file():
                dirs.append((path / common.read_text().strip()).resolve())
            return dirs
    return []


# ---------------------------------------------------------------- limits
class Limited(NamedTuple):
    """What `run_limited` returns: the exit status (None: timed out), the output (bounded by the
    file limit) and the limits the run hit ("processes", "output")."""
    returncode: int | None
    stdout: bytes
    stderr: bytes
    hit: frozenset


_counter = itertools.count()


class ProcessLimit:
    """At most `n` processes (threads included) for a command and everything it starts.

    A pids cgroup (v2, or v1's pids hierarchy) where this process may create one; otherwise
    RLIMIT_NPROC, which counts all processes of the user (so it is set to the current number plus
    `n`) and does not bind root. `kind` says which is in force ("cgroup", "rlimit" or "none").
    """

    def __init__(self, n: int | None):
        self.n, self.path, self.kind = n, None, "none"
        if not n:
            return
        for root in (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup")):
            controllers = root / "cgroup.controllers"
            if root.name != "pids" and not (controllers.is_file() and "pids" in controllers.read_text().split()):
                continue
            try:
                path = root / f"course-grade-{os.getpid()}-{next(_counter)}"
                path.mkdir()
                (path / "pids.max").write_text(str(n))
                self.path, self.kind = path, "cgroup"
                return
            except OSError:
                continue
        if os.getuid() != 0:
            self.kind = "rlimit"

    def apply_in_child(self) -> None:
        if self.kind == "cgroup":
            (self.path / "cgroup.procs").write_text(str(os.getpid()))
        elif self.kind == "rlimit":
            mine = sum(1 for p in Path("/proc").iterdir() if p.name.isdigit() and _owner(p) == os.getuid())
            resource.setrlimit(resource.RLIMIT_NPROC, (mine + self.n, mine + self.n))

    def was_hit(self) -> bool:
        if self.kind != "cgroup":
            return False
        try:
            events = (self.path / "pids.events").read_text().split()
            return int(events[events.index("max") + 1]) > 0
        except (OSError, ValueError, IndexError):
            return False

    def close(self) -> None:
        """Kill what is left in the cgroup (an unsandboxed run's daemons) and remove it."""
        if self.kind != "cgroup":
            return
        for _ in range(50):
            try:
                pids = [int(x) for x in (self.path / "cgroup.procs").read_text().split()]
            except OSError:
                pids = []
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.1)


def _owner(proc: Path) -> int | None:
    try:
        return proc.stat().st_uid
    except OSError:
        return None


def limiter(memory_bytes: int | None, file_bytes: int | None = None, processes: ProcessLimit | None = None):
    """preexec_fn: a new session (so the whole tree can be killed), an address-space limit, a
    file-size limit, no core files, and the process limit."""

    def apply():
        os.setsid()
        if memory_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        if file_bytes:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if processes is not None:
            processes.apply_in_child()

    return apply


def run_limited(cmd: list[str], *, input: bytes | None = None, timeout: float, memory_bytes: int | None,
                cwd: Path | None = None, env: dict | None = None, file_bytes: int | None = OUTPUT_LIMIT,
                max_processes: int | None = MAX_PROCESSES, stdout_path: Path | None = None,
                stderr: str = "keep") -> Limited:
    """Run `cmd` under the limits above. stdout goes to a file (`stdout_path` when given),
    stderr to another ("keep"), to the same ("stdout") or nowhere ("discard"), so what comes
    back is bounded by `file_bytes`. Returns a `Limited`."""
    processes = ProcessLimit(max_processes)
    hit = set()
    with tempfile.TemporaryDirectory(prefix="course-run-") as tmp:
        out_path = Path(stdout_path) if stdout_path else Path(tmp) / "stdout"
        err_path = Path(tmp) / "stderr"
        try:
            with open(out_path, "wb") as out_f, open(err_path if stderr == "keep" else os.devnull, "wb") as err_f:
                proc = subprocess.Popen(cmd, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                        stdout=out_f, stderr=out_f if stderr == "stdout" else err_f, cwd=cwd, env=env,
                                        preexec_fn=limiter(memory_bytes, file_bytes, processes))
                if input is not None:
                    threading.Thread(target=_feed, args=(proc.stdin, input), daemon=True).start()
                rc, flooded = _wait(proc, timeout, file_bytes, [out_path] + ([err_path] if stderr == "keep" else []))
                if flooded:
                    hit.add("output")
                kill_tree(proc)  # daemons it left behind in its session
        finally:
            if processes.was_hit():
                hit.add("processes")
            processes.close()
        out = out_path.read_bytes()
        err = err_path.read_bytes() if stderr == "keep" and err_path.exists() else b""
    if file_bytes and (len(out) >= file_bytes or len(err) >= file_bytes):
        hit.add("output")
    return Limited(rc, out, err, frozenset(hit))


def _feed(stdin, data: bytes) -> None:
    try:
        stdin.write(data)
        stdin.close()
    except (BrokenPipeError, OSError):  # it stopped reading: it died or exited early
        pass


def _wait(proc: subprocess.Popen, timeout: float, file_bytes: int | None, outputs: list[Path]) -> tuple[int | None, bool]:
    """Wait for `proc`; kill its tree at the deadline (returncode None) or as soon as one of its
    output files reaches `file_bytes` (an output flood: no use waiting for the deadline)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return proc.wait(timeout=0.25), False
        except subprocess.TimeoutExpired:
            pass
        flooded = bool(file_bytes) and any(p.exists() and p.stat().st_size >= file_bytes for p in outputs)
        if flooded or time.monotonic() > deadline:
            kill_tree(proc)
            proc.wait()
            return (proc.returncode if flooded else None), flooded


def kill_tree(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass

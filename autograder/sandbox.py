"""Process limits and the bubblewrap sandbox every piece of student code runs in while grading.

`sandboxed(cmd, ...)` prefixes a command with bubblewrap when it is installed: the whole file
system read-only, a private /tmp, no network (its own network namespace: loopback only), its
own PID namespace (killing the sandbox kills everything in it), and the folders named in
`hide` (hidden cases, the gradebook, other students' submissions) replaced by empty ones.
Without bubblewrap (AUTOGRADER_SANDBOX=0, or not installed) the command runs bare, with the
same time and memory limits; `sandbox_available()` says which.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
from pathlib import Path


def sandbox_available() -> bool:
    if os.environ.get("AUTOGRADER_SANDBOX", "1") == "0":
        return False
    return shutil.which("bwrap") is not None


def sandboxed(cmd: list[str], *, writable: list[Path] = (), hide: list[Path] = (), binds: list[Path] = ()) -> list[str]:
    if not sandbox_available():
        return list(cmd)
    args = [
        "bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
        "--unshare-all", "--die-with-parent", "--new-session",
    ]
    # the private /tmp must not hide the course or its Python when they live under /tmp (a CI
    # clone, say): bind them back, read-only, before the hidden folders are masked
    for path in _code_roots():
        args += ["--ro-bind", str(path), str(path)]
    for path in hide:
        if Path(path).exists():
            args += ["--tmpfs", str(path)]
    for path in list(writable) + list(binds):
        args += ["--bind", str(path), str(path)]
    return args + ["--"] + list(cmd)


def _code_roots() -> list[Path]:
    """The repository and the Python installation(s), where they lie under /tmp."""
    import sys

    roots = {Path(__file__).resolve().parent.parent, Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()}
    return sorted(p for p in roots if p.is_relative_to("/tmp"))


def limiter(memory_bytes: int | None):
    """preexec_fn: a new session (so the whole tree can be killed) and an address-space limit."""

    def apply():
        os.setsid()
        if memory_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


def run_limited(cmd: list[str], *, input: bytes | None = None, timeout: float, memory_bytes: int | None,
                cwd: Path | None = None, env: dict | None = None, stdout=subprocess.PIPE, stderr=subprocess.PIPE):
    """Run `cmd` with a wall-clock limit (the whole process group is killed) and a memory limit.

    Returns (returncode or None on timeout, stdout bytes, stderr bytes).
    """
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                            stdout=stdout, stderr=stderr, cwd=cwd, env=env, preexec_fn=limiter(memory_bytes))
    try:
        out, err = proc.communicate(input=input, timeout=timeout)
        return proc.returncode, out or b"", err or b""
    except subprocess.TimeoutExpired:
        kill_tree(proc)
        out, err = proc.communicate()
        return None, out or b"", err or b""


def kill_tree(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass

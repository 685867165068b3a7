"""The bubblewrap sandbox every piece of student code runs in while grading, built from what it needs.

`sandboxed(cmd, course_lib=STUB, ...)` prefixes a command with bubblewrap when it is installed.
The sandbox's file system is *made* of what a grading run needs, read-only, and nothing else:

- the system: /usr, /bin, /sbin, /lib*, /etc, /sys (programs, libraries, configuration);
- the Python environment: the interpreter's prefix and base prefix (e.g. .venv/ and the Python
  it was made from), and nothing else of the folders they live in;
- of the repository: `data/`, `configs/`, the stubbed `course_lib` (`autograder.stubs`) where
  `course_lib/` was, so that no reference body of an open assignment can be imported, reloaded or
  read, and, where `autograder/` was, its kernel side only (`autograder.harness`: the checker, the
  runner, the comparison and each suite's harness; no suite's case generator or truth, no hidden
  case, no grader module);
- a private /tmp, /dev and /proc; `writable` folders (the submission's work folder) and `binds`
  (the judge's socket folder), read-write.

Everything else is absent: the lessons, solutions, notebooks, tests and git history of the
repository, the hidden cases, the gradebook, the other submissions, and any other copy of the
course on the machine, wherever it lies, without having to name it. It has its own network
namespace (loopback only) and PID namespace (killing the sandbox kills everything in it).

Without bubblewrap (AUTOGRADER_SANDBOX=0, or not installed) the command runs bare, with the same
limits and `unsandboxed_env` putting the stub first on PYTHONPATH; `sandbox_available()` says
which, and the grading output says so.

Where bubblewrap is installed but cannot make namespaces (`bubblewrap_works()`: a Docker container
with the default seccomp profile, such as a Gradescope autograder's), AUTOGRADER_SANDBOX=user:NAME
makes the same view out of file permissions instead (`sandbox_kind() == "user"`, root only): the
command runs as the unprivileged user NAME (`setpriv`, with RLIMIT_NPROC at the slot's process
limit), its `writable` and `binds` folders handed to that user, with PYTHONPATH holding only the
stubbed course_lib and the kernel side of `autograder`. What it must not read, the caller makes
unreadable to NAME (`autograder.gradescope_run.lock_grader_files`: the repository's `autograder/`,
`course_lib/`, hidden cases and source notebooks, root-only). It has no network or PID namespace
and no private /tmp.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
VISIBLE = ("data", "configs")  # of the repository, besides the stubbed course_lib and the kernel-side autograder
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/sys")
USER_MODE = "user:"  # AUTOGRADER_SANDBOX=user:NAME


def sandbox_kind() -> str | None:
    """How student code is confined: "bubblewrap" (installed, AUTOGRADER_SANDBOX not 0), "user"
    (AUTOGRADER_SANDBOX=user:NAME: as an unprivileged user, see the module docstring) or None."""
    setting = os.environ.get("AUTOGRADER_SANDBOX", "1")
    if setting == "0":
        return None
    if setting.startswith(USER_MODE):
        return "user"
    return "bubblewrap" if shutil.which("bwrap") is not None else None


def sandbox_available() -> bool:
    return sandbox_kind() is not None


def bubblewrap_works() -> bool:
    """Whether bubblewrap is installed and can make its namespaces here (a container may forbid it)."""
    if shutil.which("bwrap") is None:
        return False
    try:
        return subprocess.run(["bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "true"],
                              capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def sandbox_user() -> pwd.struct_passwd:
    """The unprivileged user of AUTOGRADER_SANDBOX=user:NAME (which only root can switch to)."""
    name = os.environ.get("AUTOGRADER_SANDBOX", "")[len(USER_MODE):]
    try:
        user = pwd.getpwnam(name)
    except KeyError:
        raise RuntimeError(f"AUTOGRADER_SANDBOX=user:{name}: no such user") from None
    if os.geteuid() != 0 or user.pw_uid == 0:
        raise RuntimeError(f"AUTOGRADER_SANDBOX=user:{name}: the grader must run as root and {name} must not be root")
    return user


def python_roots() -> list[Path]:
    """The folders of the running Python: its prefix and base prefix (as named and as resolved)."""
    roots = set()
    for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix):
        roots |= {Path(p), Path(p).resolve()}
    roots.add(Path(sys.executable).resolve().parent.parent)
    # a root inside another one is bound with it
    return sorted(r for r in roots if not any(o != r and r.is_relative_to(o) for o in roots))


def sandboxed(cmd: list[str], *, course_lib: Path, writable: list[Path] = (), binds: list[Path] = (),
              hide: list[Path] = ()) -> list[str]:
    """`cmd` inside a bubblewrap sandbox made of what it needs (see the module docstring);
    `hide` names folders inside the visible parts to replace by empty ones."""
    kind = sandbox_kind()
    if kind is None:
        return list(cmd)
    if kind == "user":
        return as_user(cmd, course_lib=course_lib, writable=writable, binds=binds)
    from .harness import sandbox_autograder

    args = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session",
            "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--dir", "/var/tmp"]
    for path in SYSTEM:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for path in python_roots():
        if not any(path.is_relative_to(s) for s in SYSTEM):
            args += ["--ro-bind", str(path), str(path)]
    for name in VISIBLE:
        if (REPO_ROOT / name).exists():
            args += ["--ro-bind", str(REPO_ROOT / name), str(REPO_ROOT / name)]
    args += ["--ro-bind", str(Path(course_lib).resolve()), str(REPO_ROOT / "course_lib")]
    args += ["--ro-bind", str(sandbox_autograder()), str(REPO_ROOT / "autograder")]
    for path in hide:
        if Path(path).is_dir() and any(Path(path).resolve().is_relative_to(REPO_ROOT / v) for v in VISIBLE):
            args += ["--tmpfs", str(Path(path).resolve())]
    for path in list(writable) + list(binds):
        args += ["--bind", str(path), str(path)]
    return args + ["--"] + list(cmd)


def as_user(cmd: list[str], *, course_lib: Path, writable: list[Path] = (), binds: list[Path] = ()) -> list[str]:
    """`cmd` as the unprivileged user of AUTOGRADER_SANDBOX=user:NAME (see the module docstring):
    `writable` and `binds` become that user's (their links are not followed), RLIMIT_NPROC binds it
    (no pids cgroup needed: it counts the user's processes, and root is never bound by it), and its
    PYTHONPATH holds the stubbed course_lib's folder and the kernel side of `autograder` only."""
    from .harness import sandbox_autograder
    from .limits import MAX_PROCESSES

    user = sandbox_user()
    for top in [*writable, *binds]:
        for folder, dirs, files in os.walk(top):
            for name in [folder, *(os.path.join(folder, n) for n in dirs + files)]:
                os.chown(name, user.pw_uid, user.pw_gid, follow_symlinks=False)
    path = os.pathsep.join([str(Path(course_lib).resolve().parent), str(sandbox_autograder().parent)])
    return ["prlimit", f"--nproc={MAX_PROCESSES}", "--", "setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}",
            "--clear-groups", "--", "env", f"PYTHONPATH={path}", *cmd]


def unsandboxed_env(env: dict, course_lib: Path | None) -> dict:
    """The best that can be done without bubblewrap: the stubbed course_lib first on PYTHONPATH
    (its folder also holds a `data` link), then the repository for `autograder`."""
    env = dict(env)
    if course_lib is not None and not sandbox_available():
        env["PYTHONPATH"] = os.pathsep.join([str(Path(course_lib).resolve().parent), str(REPO_ROOT),
                                             env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env

"""The bubblewrap sandbox every piece of student code runs in while grading, built from what it needs.

`sandboxed(cmd, course_lib=STUB, ...)` prefixes a command with bubblewrap when it is installed.
The sandbox's file system is *made* of what a grading run needs, read-only, and nothing else:

- the system: /usr, /bin, /sbin, /lib*, /etc, /sys (programs, libraries, configuration);
- the Python environment: the interpreter's prefix and base prefix (e.g. .venv/ and the Python
  it was made from), and nothing else of the folders they live in;
- of the repository: `data/`, `configs/`, the stubbed `course_lib` (`autograder.stubs`) where
  `course_lib/` was, so that no reference body of an open assignment can be imported, reloaded or
  read, and, where `autograder/` was, its kernel side only (`autograder.harness`: the checker, the
  runner, the comparison and each graded function's harness; no grader.py, no hidden case, no
  grader module);
- a private /tmp, /dev and /proc; `writable` folders (the submission's work folder) and `binds`
  (the judge's socket folder), read-write.

Everything else is absent: the lessons, solutions, notebooks, tests and git history of the
repository, the hidden cases, the gradebook, the other submissions, and any other copy of the
course on the machine, wherever it lies, without having to name it. It has its own network
namespace (loopback only) and PID namespace (killing the sandbox kills everything in it).

Without bubblewrap (AUTOGRADER_SANDBOX=0, or not installed) the command runs bare, with the same
limits and `unsandboxed_env` putting the stub first on PYTHONPATH; `sandbox_available()` says
which, and the grading output says so.

Where bubblewrap cannot make its namespaces (`bubblewrap_works()`: a Docker container with the
default seccomp profile, such as a Gradescope autograder's), AUTOGRADER_SANDBOX=user (root only)
makes the same confinement out of what such a container allows (`sandbox_kind() == "user"`): each
submission gets two unprivileged numeric ids of its own (`autograder.uids`: the kernel's, for
nbgrader and the notebook, and the runner's, for the judge's processes that run its functions on
hidden inputs), and `autograder.confine` puts each process in its role: its id, RLIMIT_NPROC,
Landlock where the kernel has it (the same file view as above: read-only system, Python, data,
configs, stubbed course_lib and kernel-side autograder, the work folder writable, nothing else, no
/tmp; no TCP), and a seccomp filter (the kernel's role: unix sockets only; the runner's: no socket,
no file written anywhere, no IPC). `user_spec` writes that confinement; `as_user` runs a command
in it; the judge's runner applies it in each child it forks (`autograder.runner`). Without Landlock,
the file view is what the ids' permissions allow: the caller makes the grader's files root-only
(`autograder.gradescope_run.lock_grader_files`). There is no network or PID namespace: the
processes of the machine are listed, and the judge stops every process of the kernel's id while
the runner's run (`autograder.judge`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
VISIBLE = ("data", "configs")  # of the repository, besides the stubbed course_lib and the kernel-side autograder
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/sys")
USER_MODE = "user"  # AUTOGRADER_SANDBOX=user
DEVICES_WRITABLE = ("/dev/shm",)  # besides the work folder, where the kernel's role may write (POSIX semaphores)


def sandbox_kind() -> str | None:
    """How student code is confined: "bubblewrap" (installed, AUTOGRADER_SANDBOX not 0), "user"
    (AUTOGRADER_SANDBOX=user: as unprivileged ids, see the module docstring) or None."""
    setting = os.environ.get("AUTOGRADER_SANDBOX", "1")
    if setting == "0":
        return None
    if setting == USER_MODE:
        return "user"
    if setting.startswith(USER_MODE + ":"):
        raise RuntimeError(f"AUTOGRADER_SANDBOX={setting}: one user for every submission is no longer offered; set "
                           "AUTOGRADER_SANDBOX=user (each submission runs as two unprivileged ids of its own, from "
                           "AUTOGRADER_UIDS)")
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


def python_roots() -> list[Path]:
    """The folders of the running Python: its prefix and base prefix (as named and as resolved)."""
    roots = set()
    for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix):
        roots |= {Path(p), Path(p).resolve()}
    roots.add(Path(sys.executable).resolve().parent.parent)
    # a root inside another one is bound with it
    return sorted(r for r in roots if not any(o != r and r.is_relative_to(o) for o in roots))


def import_roots() -> list[str]:
    """The running Python's folders (`python_roots`) and its site folders, wherever a .pth put them."""
    import site

    found = {str(p) for p in python_roots()}
    for path in [*site.getsitepackages(), *sys.path]:
        if path and Path(path).name in ("site-packages", "dist-packages") and Path(path).is_dir():
            found.add(str(Path(path).resolve()))
    return sorted(found)


def sandboxed(cmd: list[str], *, course_lib: Path, writable: list[Path] = (), binds: list[Path] = (),
              hide: list[Path] = (), user: int | None = None) -> list[str]:
    """`cmd` inside a bubblewrap sandbox made of what it needs (see the module docstring);
    `hide` names folders inside the visible parts to replace by empty ones; `user`: the
    submission's kernel id, where AUTOGRADER_SANDBOX=user."""
    kind = sandbox_kind()
    if kind is None:
        return list(cmd)
    if kind == "user":
        if user is None:
            raise RuntimeError("AUTOGRADER_SANDBOX=user: a sandboxed command needs the submission's id")
        return as_user(cmd, user=user, course_lib=course_lib, writable=writable, binds=binds, hide=hide)
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


def visible_beneath(folder: Path, hide: list[Path]) -> list[str]:
    """`folder` as paths to grant, with the folders in `hide` below it left out (Landlock grants a
    whole tree: the siblings on the way down to each hidden folder are granted instead)."""
    folder = Path(folder).resolve()
    inside = [Path(h).resolve() for h in hide if Path(h).resolve().is_relative_to(folder)]
    if not inside:
        return [str(folder)]
    if folder in inside or not folder.is_dir():
        return []
    return [p for child in sorted(folder.iterdir()) for p in visible_beneath(child, inside)]


def user_spec(uid: int, role: str, *, course_lib: Path, writable: list[Path] = (), hide: list[Path] = (),
              env: dict | None = None) -> dict:
    """The confinement of one process of a submission (`autograder.confine`'s SPEC): its `role`
    ("kernel" or "runner") as `uid`, reading what bubblewrap would show (less `hide`), writing
    `writable` (and, the kernel's role, DEVICES_WRITABLE), with `env` added to its environment."""
    from .harness import sandbox_autograder
    from .limits import MAX_PROCESSES, RUNNER_PROCESSES

    read = [p for p in [*SYSTEM, "/proc"] if os.path.exists(p)] + import_roots()
    for name in VISIBLE:
        if (REPO_ROOT / name).exists():
            read += visible_beneath(REPO_ROOT / name, list(hide))
    read += [str(Path(course_lib).resolve().parent), str(sandbox_autograder().parent)]
    write = [str(Path(p).resolve()) for p in writable] + (list(DEVICES_WRITABLE) if role == "kernel" else [])
    return {"uid": uid, "gid": uid, "role": role, "read": read, "write": write, "env": dict(env or {}),
            "processes": MAX_PROCESSES if role == "kernel" else RUNNER_PROCESSES}


def user_path(course_lib: Path) -> str:
    """PYTHONPATH of a confined process: the stubbed course_lib's folder and the kernel side of autograder."""
    from .harness import sandbox_autograder

    return os.pathsep.join([str(Path(course_lib).resolve().parent), str(sandbox_autograder().parent)])


def as_user(cmd: list[str], *, user: int, course_lib: Path, writable: list[Path] = (), binds: list[Path] = (),
            hide: list[Path] = ()) -> list[str]:
    """`cmd` run in the kernel's role as the id `user` (AUTOGRADER_SANDBOX=user, see the module
    docstring): `writable` and `binds` become that id's, private (their links are not followed),
    and `autograder/confine.py`, run as root, confines the process and then runs `cmd` with a
    PYTHONPATH of the stubbed course_lib's folder and the kernel side of autograder only."""
    for top in [*writable, *binds]:
        for folder, dirs, files in os.walk(top):
            for name in [folder, *(os.path.join(folder, n) for n in dirs + files)]:
                os.chown(name, user, user, follow_symlinks=False)
        os.chmod(top, 0o700)
    spec = user_spec(user, "kernel", course_lib=course_lib, writable=[*writable, *binds], hide=hide,
                     env={"PYTHONPATH": user_path(course_lib), "USER": f"course-{user}", "LOGNAME": f"course-{user}"})
    return [sys.executable, "-I", "-S", str(Path(__file__).resolve().parent / "confine.py"), json.dumps(spec), "--",
            *cmd]


def unsandboxed_env(env: dict, course_lib: Path | None) -> dict:
    """The best that can be done without bubblewrap: the stubbed course_lib first on PYTHONPATH
    (its folder also holds a `data` link), then the repository for `autograder`."""
    env = dict(env)
    if course_lib is not None and not sandbox_available():
        env["PYTHONPATH"] = os.pathsep.join([str(Path(course_lib).resolve().parent), str(REPO_ROOT),
                                             env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env

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
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
VISIBLE = ("data", "configs")  # of the repository, besides the stubbed course_lib and the kernel-side autograder
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/sys")


def sandbox_available() -> bool:
    if os.environ.get("AUTOGRADER_SANDBOX", "1") == "0":
        return False
    return shutil.which("bwrap") is not None


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
    if not sandbox_available():
        return list(cmd)
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


def unsandboxed_env(env: dict, course_lib: Path | None) -> dict:
    """The best that can be done without bubblewrap: the stubbed course_lib first on PYTHONPATH
    (its folder also holds a `data` link), then the repository for `autograder`."""
    env = dict(env)
    if course_lib is not None and not sandbox_available():
        env["PYTHONPATH"] = os.pathsep.join([str(Path(course_lib).resolve().parent), str(REPO_ROOT),
                                             env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env

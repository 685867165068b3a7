"""A test harness (not the product): a command run as it would run in a Docker container with the
default profile, such as a Gradescope autograder's, on this machine.

`container_like(cmd)` wraps `cmd` so that it runs

- in a private mount namespace (`unshare --mount`) where /sys/fs/cgroup is an empty tmpfs: no
  cgroup is delegated, so the grader's limits fall back to watching memory and RLIMIT_NPROC;
- with Docker's default capability set only (`setpriv --bounding-set`): root, but no
  CAP_SYS_ADMIN, CAP_SYS_PTRACE or CAP_SYS_RESOURCE;
- under a seccomp filter like the part of Docker's default profile that matters here (moby's
  `seccomp/default.json`: without CAP_SYS_ADMIN, no unshare, setns, mount or namespace flags to
  clone, and clone3 answered ENOSYS), so bubblewrap is installed but cannot make its namespaces
  (`autograder.sandbox.bubblewrap_works()` is False), as the README expects on Gradescope;
  with `landlock=False`, the filter also answers Landlock's calls ENOSYS, as a kernel without
  Landlock, or a Docker whose profile predates them, would.

The machine's /tmp, /proc and network stay shared (a container's are its own but as open to its
processes). Needs root and util-linux's `unshare` and `setpriv`.

    python tests/container.py [--no-landlock] -- CMD ...   # the filter's step, run by `container_like`'s wrapper
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Docker's default capabilities (moby: oci/caps/defaults.go)
DOCKER_CAPS = ("chown", "dac_override", "fsetid", "fowner", "mknod", "net_raw", "setgid", "setuid", "setfcap",
               "setpcap", "net_bind_service", "sys_chroot", "kill", "audit_write")


def usable() -> str | None:
    """None where the harness can run here, else why not."""
    if os.geteuid() != 0:
        return "needs root"
    missing = [t for t in ("unshare", "setpriv") if shutil.which(t) is None]
    if missing:
        return f"needs {', '.join(missing)}"
    from autograder.confine import filter_supported

    return None if filter_supported() else "the seccomp filter is x86_64's"


def container_like(cmd: list[str], python: str = sys.executable, landlock: bool = True) -> list[str]:
    """`cmd` wrapped as the module docstring says (`python` runs the filter's step)."""
    caps = ",".join(["-all", *(f"+{c}" for c in DOCKER_CAPS)])
    script = ('mount -t tmpfs -o size=64k,mode=755 none /sys/fs/cgroup && '
              f'exec setpriv --bounding-set={caps} --inh-caps=-all -- "$@"')
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "container",
            python, str(Path(__file__).resolve()), *([] if landlock else ["--no-landlock"]), "--", *cmd]


def user_python(place: Path) -> str | None:
    """An interpreter of this environment that unprivileged users (here `nobody`) can run, made in
    `place` where needed: this one, or, where it lives in root's home (as here), the system's
    Python of the same version with this environment's packages on its path and its scripts
    (nbgrader calls `alembic`) rewritten for it."""
    probe = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", "env"]
    check = "import os, sys; os.stat(os.path.realpath(sys.executable)); import torch, nbgrader"
    if subprocess.run([*probe, sys.executable, "-c", check], capture_output=True).returncode == 0:
        return sys.executable
    system = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
    if not system.is_file():
        return None
    venv = place / "venv-for-nobody"
    subprocess.run([str(system), "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    import sysconfig

    (site / "course-environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    for script in Path(sys.executable).parent.iterdir():
        target = venv / "bin" / script.name
        if not target.exists() and script.is_file() and script.read_bytes()[:2] == b"#!" \
                and b"python" in script.read_bytes().split(b"\n", 1)[0]:
            target.write_bytes(f"#!{venv / 'bin' / 'python'}\n".encode() + script.read_bytes().split(b"\n", 1)[1])
            target.chmod(0o755)
    python = str(venv / "bin" / "python")
    ok = subprocess.run([*probe, python, "-c", check], capture_output=True).returncode == 0
    return python if ok else None


def docker_like_filter(landlock: bool = True) -> bytes:
    """The seccomp program of the harness: namespaces and mounts refused (and, without `landlock`,
    Landlock's calls), everything else allowed."""
    from autograder.confine import (CLONE_NAMESPACES, ENOSYS, EPERM, JSET, RET, RET_ALLOW, deny, deny_when, insn,
                                    prologue)

    p = prologue()
    if not landlock:
        for name in ("landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self"):
            p += deny(name, ENOSYS)
    for name in ("unshare", "setns", "mount", "umount2", "pivot_root", "open_tree", "move_mount", "fsopen",
                 "fsmount", "fspick", "mount_setattr"):
        p += deny(name, EPERM)
    p += deny("clone3", ENOSYS)
    p += deny_when("clone", 0, JSET, CLONE_NAMESPACES, EPERM)
    return b"".join(p + [insn(RET, RET_ALLOW)])


def main(argv: list[str]) -> int:
    landlock = argv[:1] != ["--no-landlock"]
    argv = argv if landlock else argv[1:]
    if not argv or argv[0] != "--" or len(argv) < 2:
        print("usage: python tests/container.py [--no-landlock] -- CMD ...", file=sys.stderr)
        return 2
    sys.path.insert(0, str(ROOT))
    from autograder.confine import install_filter

    install_filter(docker_like_filter(landlock))
    os.execvp(argv[1], argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

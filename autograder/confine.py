"""What a process of a submission does to itself before it runs the submission's code where
bubblewrap cannot run (AUTOGRADER_SANDBOX=user, `autograder.sandbox`): as root, it becomes the
unprivileged id of its role and confines itself with what any process may install on itself, no
namespace and no capability needed:

- **its id**: the role's numeric uid and gid (no passwd entry, no supplementary group),
  RLIMIT_NPROC over that uid, umask 077, oom_score_adj 1000 (a container's OOM killer takes it
  before the grader);
- **Landlock** (where the kernel has it; `landlock_abi()`): the files it may read and run and
  those it may write, as bubblewrap would show them (SPEC's `read` and `write`; nothing else of
  the machine, /tmp included); from ABI 4, no TCP; from ABI 6, no abstract unix socket or signal
  reaching outside its own domain;
- **a seccomp filter** (x86_64), after PR_SET_NO_NEW_PRIVS, which every process it starts
  inherits: never ptrace, process_vm_*, io_uring (its operations would bypass the filter),
  inotify or fanotify, new namespaces, mounts, keyrings, bpf, perf events or userfaultfd; the
  kernel's role ("kernel": nbgrader and the notebook's kernel) opens unix and netlink sockets
  only (no TCP, UDP or raw socket: it reaches no network and no other kernel's ports); the
  runner's role ("runner": the judge's process that runs the student's function on hidden
  inputs) opens no socket, creates, writes, renames, removes, truncates or touches no file and
  sets no attribute anywhere, makes no SysV or POSIX IPC object, and cannot make itself dumpable
  again: whatever it learns has no way out but its results.

    python -I -S autograder/confine.py SPEC -- CMD ...    (as root: confine, then exec CMD)

SPEC is JSON: {"uid": int, "gid": int, "role": "kernel" | "runner", "processes": int,
"read": [paths], "write": [paths], "env": {name: value}}. The judge's runner server applies
`enter(spec)` in each child it forks (`autograder.runner.serve`). Standard library only.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import resource
import stat
import struct
import sys

ROLES = ("kernel", "runner")
ARCH_X86_64 = 0xC000003E  # AUDIT_ARCH_X86_64
X32_BIT = 0x40000000
# x86_64 system call numbers (arch/x86/entry/syscalls/syscall_64.tbl)
NR = {
    "open": 2, "socket": 41, "clone": 56, "truncate": 76, "rename": 82, "mkdir": 83, "rmdir": 84, "creat": 85,
    "link": 86, "unlink": 87, "symlink": 88, "chmod": 90, "chown": 92, "lchown": 94, "ptrace": 101,
    "utime": 132, "mknod": 133, "prctl": 157, "chroot": 161, "mount": 165, "umount2": 166, "pivot_root": 155,
    "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190, "removexattr": 197, "lremovexattr": 198,
    "fremovexattr": 199, "shmget": 29, "shmat": 30, "semget": 64, "semop": 65, "msgget": 68, "msgsnd": 69,
    "semtimedop": 220, "utimes": 235, "mq_open": 240, "mq_timedsend": 242, "add_key": 248, "request_key": 249,
    "keyctl": 250, "inotify_init": 253, "inotify_add_watch": 254, "openat": 257, "mkdirat": 258,
    "mknodat": 259, "fchownat": 260, "futimesat": 261, "unlinkat": 263, "renameat": 264, "linkat": 265,
    "symlinkat": 266, "fchmodat": 268, "unshare": 272, "utimensat": 280, "inotify_init1": 294,
    "perf_event_open": 298, "fanotify_init": 300, "fanotify_mark": 301, "name_to_handle_at": 303,
    "open_by_handle_at": 304, "setns": 308, "process_vm_readv": 310, "process_vm_writev": 311,
    "renameat2": 316, "bpf": 321, "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426,
    "io_uring_register": 427, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
    "fsmount": 432, "fspick": 433, "clone3": 435, "openat2": 437, "mount_setattr": 442,
    "landlock_create_ruleset": 444, "landlock_add_rule": 445, "landlock_restrict_self": 446, "fchmodat2": 452,
}
EPERM, EACCES, ENOSYS = 1, 13, 38
AF_UNIX, AF_NETLINK = 1, 16
PR_SET_DUMPABLE, PR_SET_SECCOMP, PR_SET_NO_NEW_PRIVS = 4, 22, 38
SECCOMP_MODE_FILTER = 2
RET_ALLOW, RET_ERRNO, RET_KILL_PROCESS = 0x7FFF0000, 0x00050000, 0x80000000
LD_ABS, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ/JGE/JSET|K, BPF_RET|K
# open(2) flags that write or create: O_WRONLY, O_RDWR, O_CREAT, O_TRUNC, O_APPEND
WRITE_FLAGS = 0o1 | 0o2 | 0o100 | 0o1000 | 0o2000
CLONE_NAMESPACES = 0x80 | 0x20000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
BOTH = ("ptrace", "process_vm_readv", "process_vm_writev", "io_uring_setup", "io_uring_enter", "io_uring_register",
        "inotify_init", "inotify_init1", "inotify_add_watch", "fanotify_init", "fanotify_mark", "unshare", "setns",
        "mount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount",
        "fspick", "mount_setattr", "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
        "name_to_handle_at", "open_by_handle_at")
RUNNER_ONLY = ("socket", "creat", "mkdir", "mkdirat", "rmdir", "unlink", "unlinkat", "rename", "renameat",
               "renameat2", "link", "linkat", "symlink", "symlinkat", "mknod", "mknodat", "chmod", "fchmodat",
               "fchmodat2", "chown", "lchown", "fchownat", "truncate", "utime", "utimes", "utimensat", "futimesat",
               "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr", "shmget",
               "shmat", "semget", "semop", "semtimedop", "msgget", "msgsnd", "mq_open", "mq_timedsend")

# Landlock (include/uapi/linux/landlock.h)
LL_EXECUTE, LL_WRITE_FILE, LL_READ_FILE, LL_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
LL_ABI1 = (1 << 13) - 1  # execute ... make_sym
LL_REFER, LL_TRUNCATE = 1 << 13, 1 << 14  # ABI 2, ABI 3
LL_FILE = LL_EXECUTE | LL_WRITE_FILE | LL_READ_FILE | LL_TRUNCATE  # the rights a rule on a file may hold
LL_READ = LL_EXECUTE | LL_READ_FILE | LL_READ_DIR
LL_NET_TCP = 0b11  # bind and connect (ABI 4)
LL_SCOPES = 0b11  # abstract unix sockets and signals (ABI 6)
LL_RULE_PATH_BENEATH = 1
# devices a program may need, whatever its view: read, or read and write
DEVICES = {"/dev/null": LL_READ_FILE | LL_WRITE_FILE, "/dev/zero": LL_READ_FILE, "/dev/full": LL_READ_FILE,
           "/dev/random": LL_READ_FILE, "/dev/urandom": LL_READ_FILE}

_libc = ctypes.CDLL(None, use_errno=True)


class ConfineError(RuntimeError):
    pass


def _call(name: str, *args) -> int:
    """A raw system call; its result, or ConfineError with errno's text."""
    out = _libc.syscall(ctypes.c_long(NR[name]), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    if out < 0:
        err = ctypes.get_errno()
        raise ConfineError(f"{name}: {os.strerror(err)}") from OSError(err, os.strerror(err))
    return out


def _prctl(option: int, arg: int | ctypes.c_void_p = 0) -> None:
    if _libc.prctl(ctypes.c_int(option), arg if not isinstance(arg, int) else ctypes.c_ulong(arg),
                   ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
        raise ConfineError(f"prctl({option}): {os.strerror(ctypes.get_errno())}")


# ---------------------------------------------------------------- seccomp
def filter_supported() -> bool:
    """The seccomp filter is written for x86_64 only (its system call numbers)."""
    return sys.platform == "linux" and platform.machine() == "x86_64"


def insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def deny(name: str, errno: int) -> list[bytes]:
    return [insn(JEQ, NR[name], 0, 1), insn(RET, RET_ERRNO | errno)]


def deny_when(name: str, arg: int, test: int, value: int, errno: int) -> list[bytes]:
    """`name` is refused when the low 32 bits of argument `arg` pass `test` (JEQ, JSET) against
    `value`; the syscall number is reloaded after."""
    return [insn(JEQ, NR[name], 0, 4), insn(LD_ABS, 16 + 8 * arg), insn(test, value, 0, 1),
            insn(RET, RET_ERRNO | errno), insn(LD_ABS, 0)]


def allow_only(name: str, arg: int, values: tuple[int, ...], errno: int) -> list[bytes]:
    """`name` is refused unless the low 32 bits of argument `arg` are one of `values`."""
    n = len(values)
    return [insn(JEQ, NR[name], 0, n + 3), insn(LD_ABS, 16 + 8 * arg),
            *[insn(JEQ, v, n - i, 0) for i, v in enumerate(values)],
            insn(RET, RET_ERRNO | errno), insn(LD_ABS, 0)]


def prologue() -> list[bytes]:
    """A program's start: a call of another ABI kills the process, an x32 call is refused, and the
    system call number is loaded for the rules that follow (which end with RET_ALLOW)."""
    return [insn(LD_ABS, 4), insn(JEQ, ARCH_X86_64, 1, 0), insn(RET, RET_KILL_PROCESS), insn(LD_ABS, 0),
            insn(JGE, X32_BIT, 0, 1), insn(RET, RET_ERRNO | EPERM)]


def program(role: str) -> bytes:
    """The classic-BPF seccomp program of `role` (see the module docstring)."""
    if role not in ROLES:
        raise ConfineError(f"unknown role {role!r}")
    p = prologue()
    for name in BOTH:
        p += deny(name, EPERM)
    p += deny("clone3", ENOSYS)  # its flags are out of reach of a filter: the C library falls back to clone
    p += deny_when("clone", 0, JSET, CLONE_NAMESPACES, EPERM)
    if role == "kernel":  # netlink: the C library and ZeroMQ list the machine's interfaces (and abort without)
        p += allow_only("socket", 0, (AF_UNIX, AF_NETLINK), EACCES)
    else:
        for name in RUNNER_ONLY:
            p += deny(name, EACCES)
        p += deny("openat2", ENOSYS)  # its flags are behind a pointer: the C library falls back to openat
        p += deny_when("open", 1, JSET, WRITE_FLAGS, EACCES)
        p += deny_when("openat", 2, JSET, WRITE_FLAGS, EACCES)
        p += deny_when("prctl", 0, JEQ, PR_SET_DUMPABLE, EPERM)
    p.append(insn(RET, RET_ALLOW))
    return b"".join(p)


def install_filter(code: bytes) -> None:
    """Install a seccomp program on this thread (PR_SET_NO_NEW_PRIVS first); inherited by its
    children and kept across exec."""

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    buffer = ctypes.create_string_buffer(code, len(code))
    prog = SockFprog(len(code) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    if _libc.prctl(ctypes.c_int(PR_SET_SECCOMP), ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(prog),
                   ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
        raise ConfineError(f"seccomp: {os.strerror(ctypes.get_errno())}")


# ---------------------------------------------------------------- Landlock
def landlock_abi() -> int:
    """The Landlock ABI version of this kernel (0: none, or refused here)."""
    if not filter_supported():
        return 0
    try:
        return _call("landlock_create_ruleset", None, 0, 1)  # LANDLOCK_CREATE_RULESET_VERSION
    except ConfineError:
        return 0


def landlock(read: list[str], write: list[str]) -> int:
    """Restrict this process (and what it starts) to reading and running `read` and to every
    access below `write` (plus DEVICES); returns the ABI used, 0 where the kernel has none."""
    abi = landlock_abi()
    if abi < 1:
        return 0
    handled = LL_ABI1 | (LL_REFER if abi >= 2 else 0) | (LL_TRUNCATE if abi >= 3 else 0)
    attr = struct.pack("=QQQ", handled, LL_NET_TCP if abi >= 4 else 0, LL_SCOPES if abi >= 6 else 0)
    attr = attr[: 8 if abi < 4 else 16 if abi < 6 else 24]
    ruleset = _call("landlock_create_ruleset", ctypes.create_string_buffer(attr, len(attr)), len(attr), 0)
    try:
        rules = [(p, LL_READ) for p in read] + [(p, handled) for p in write] + list(DEVICES.items())
        for path, rights in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # not on this machine
            try:
                allowed = rights & handled & (LL_FILE if not stat.S_ISDIR(os.fstat(fd).st_mode) else ~0)
                rule = struct.pack("=Qi", allowed, fd)
                _call("landlock_add_rule", ruleset, LL_RULE_PATH_BENEATH, ctypes.create_string_buffer(rule, 12), 0)
            finally:
                os.close(fd)
        _call("landlock_restrict_self", ruleset, 0)
    finally:
        os.close(ruleset)
    return abi


# ---------------------------------------------------------------- the whole
def enter(spec: dict) -> dict:
    """Become SPEC's uid and confine this process as its role (see the module docstring); what was
    applied: {"landlock": ABI or 0, "seccomp": bool}. Call as root, before any untrusted code."""
    role, uid, gid = spec["role"], int(spec["uid"]), int(spec["gid"])
    if role not in ROLES or uid <= 0 or gid <= 0:
        raise ConfineError(f"a confined process needs a role and a non-root uid and gid: {spec}")
    if not filter_supported():
        raise ConfineError(f"no system call filter for {platform.machine()} (x86_64 only)")
    try:  # raising one's own score needs no privilege; lowering it back would
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getuid() != uid or os.geteuid() != uid:
        raise ConfineError(f"could not become uid {uid}")
    resource.setrlimit(resource.RLIMIT_NPROC, (int(spec["processes"]),) * 2)
    os.umask(0o077)
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    if role == "runner":
        _prctl(PR_SET_DUMPABLE, 0)  # /proc/<pid>/{environ,fd,mem,maps} become root's
    abi = landlock(list(spec.get("read", [])), list(spec.get("write", [])))
    install_filter(program(role))
    return {"landlock": abi, "seccomp": True}


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -I -S autograder/confine.py SPEC -- CMD ...", file=sys.stderr)
        return 2
    spec = json.loads(argv[0])
    try:
        enter(spec)
    except (ConfineError, OSError) as e:
        print(f"autograder.confine: {e}", file=sys.stderr)
        return 126
    env = dict(os.environ, **spec.get("env", {}))
    try:
        os.execvpe(argv[2], argv[2:], env)
    except OSError as e:
        print(f"autograder.confine: {argv[2]}: {e}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The sandbox where bubblewrap cannot run (AUTOGRADER_SANDBOX=user), piece by piece, on real
processes: the confinement of each role (`autograder.confine`), the submission's ids
(`autograder.uids`), the judge's door (`autograder.judge`), the memory watch over every process of
the ids (`autograder.limits`), and what the grader does with what a submission left (a deep folder,
names that are not UTF-8, a request that trickles in). Whole gradings in a container-like run are
in tests/test_exploits.py and tests/test_gradescope.py.

The probes run as unprivileged ids with the system's Python (standard library only), which those
ids can run; the tests that need root, x86_64 or that Python say so when they skip.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYTHON = "/usr/bin/python3"


def needs_root():
    from autograder.confine import filter_supported

    if os.geteuid() != 0 or not filter_supported():
        pytest.skip("switching to unprivileged ids needs root, and the system call filter x86_64")
    if not os.access(PYTHON, os.X_OK):
        pytest.skip(f"no {PYTHON} for the probes")


@pytest.fixture
def users():
    needs_root()
    from autograder.uids import allocate

    with allocate() as pair:
        yield pair
        pair.kill()


@pytest.fixture
def place():
    """A folder the ids can pass through (pytest's own are root's only)."""
    folder = Path(tempfile.mkdtemp(prefix="course-user-sandbox-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def confined(uid: int, role: str, code: str, *, read=(), write=(), timeout: float = 60) -> dict:
    """Run `code` (it prints one JSON line) with the system's Python as `uid` in `role`: the
    kernel's through the launcher (confine, then exec), the runner's in process (`enter`, as the
    judge's runner does in each child it forks)."""
    spec = {"uid": uid, "gid": uid, "role": role, "processes": 64, "env": {},
            "read": ["/usr", "/bin", "/lib", "/lib64", "/etc", "/proc", *read], "write": list(write)}
    if role == "kernel":
        cmd = [sys.executable, "-I", "-S", str(ROOT / "autograder" / "confine.py"), json.dumps(spec), "--",
               PYTHON, "-I", "-S", "-c", code]
    else:
        enter = f"import sys; sys.path.insert(0, {str(ROOT / 'autograder')!r}); import confine; confine.enter({spec!r})\n"
        cmd = [PYTHON, "-I", "-S", "-c", enter + code]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd="/")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


PROBE = r'''
import ctypes, json, os, socket
libc = ctypes.CDLL(None, use_errno=True)
out = {}
def attempt(name, fn):
    try:
        fn()
        out[name] = "done"
    except OSError as e:
        out[name] = e.errno
attempt("write /tmp", lambda: open(f"/tmp/course-probe-{os.getpid()}", "w"))
attempt("append a world-writable file", lambda: open(SHARED, "a"))
attempt("truncate it", lambda: os.truncate(SHARED, 0))
attempt("touch it", lambda: os.utime(SHARED))
attempt("give it an attribute", lambda: os.setxattr(SHARED, "user.x", b"1"))
attempt("mkdir /tmp", lambda: os.mkdir(f"/tmp/course-probe-{os.getpid()}"))
attempt("tcp socket", lambda: socket.socket(socket.AF_INET).close())
attempt("unix socket", lambda: socket.socket(socket.AF_UNIX).close())
attempt("write the folder given", lambda: open(os.path.join(GIVEN, "x"), "w").write("x"))
attempt("read the repository", lambda: open(README).read(1))
attempt("inotify", lambda: os.close(libc.inotify_init()) if libc.inotify_init() >= 0 else (_ for _ in ()).throw(OSError(ctypes.get_errno(), "")))
out["dumpable again"] = libc.prctl(4, 1, 0, 0, 0) == 0
out["dumpable"] = libc.prctl(3, 0, 0, 0, 0)
out["seccomp"] = open("/proc/self/status").read().split("Seccomp:")[1].split()[0]
out["uid"] = os.getuid()
print(json.dumps(out))
'''


def probe(uid: int, role: str, given: Path, shared: Path) -> dict:
    code = PROBE.replace("SHARED", repr(str(shared))).replace("GIVEN", repr(str(given))) \
        .replace("README", repr(str(ROOT / "README.md")))
    return confined(uid, role, code, write=[str(given)] if role == "kernel" else [])


def probe_beside_a_shared_file(uid: int, role: str, place: Path) -> dict:
    """`probe` as `uid` in `role`, given a folder of its own (place/given) and a world-writable
    file in /tmp, removed afterwards."""
    given = place / "given"
    given.mkdir()
    os.chown(given, uid, uid)
    shared = Path("/tmp") / f"course-shared-{os.getpid()}"
    shared.write_text("")
    shared.chmod(0o666)
    try:
        return probe(uid, role, given, shared)
    finally:
        shared.unlink()


def test_the_runner_writes_nothing_anywhere_and_opens_no_socket(users, place):
    """The runner's role, even with a folder of its own and a world-writable file at hand: every
    way of leaving a mark is refused, and it cannot make itself dumpable again."""
    from autograder.confine import landlock_abi

    seen = probe_beside_a_shared_file(users.runner, "runner", place)
    refused = ["write /tmp", "append a world-writable file", "truncate it", "touch it", "give it an attribute",
               "mkdir /tmp", "tcp socket", "unix socket", "write the folder given", "inotify"]
    assert all(seen[k] != "done" for k in refused), seen
    assert seen["dumpable again"] is False and seen["dumpable"] == 0 and seen["seccomp"] == "2", seen
    assert seen["uid"] == users.runner
    if landlock_abi():
        assert seen["read the repository"] != "done", seen


def test_the_kernel_writes_its_folder_only_and_opens_no_tcp_socket(users, place):
    from autograder.confine import landlock_abi

    seen = probe_beside_a_shared_file(users.kernel, "kernel", place)
    assert seen["write the folder given"] == "done" and seen["unix socket"] == "done", seen
    assert seen["tcp socket"] != "done" and seen["inotify"] != "done" and seen["seccomp"] == "2", seen
    if landlock_abi():  # no /tmp and no repository in its view
        assert seen["write /tmp"] != "done" and seen["read the repository"] != "done", seen
        assert seen["append a world-writable file"] != "done", seen


DAEMON = r'''
import json, os, time
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:  # a daemon: it keeps none of its parent's files
        os.close(r)
        os.write(w, str(os.getpid()).encode())
        os.close(w)
        null = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        hoard = b"x" * int(GIB * 2**30)  # touched
        time.sleep(300)
    os._exit(0)
os.close(w)
print(json.dumps({"daemon": int(os.read(r, 32))}), flush=True)
'''


def test_ids_are_handed_out_once_and_their_daemons_stopped_and_killed(users):
    """Two pairs of ids share none; a double-forked daemon of an id, outside every tree, is stopped
    (SIGSTOP over the id) and killed (kill(-1) as the id), and no process of the id is left."""
    from autograder.limits import proc_table
    from autograder.uids import allocate, processes_of, stop_id

    with allocate() as other:
        assert len({*users.uids, *other.uids}) == 4
    code = DAEMON.replace("GIB", "0.01")
    daemon = confined(users.kernel, "kernel", code)["daemon"]
    assert daemon in processes_of([users.kernel])
    assert stop_id(users.kernel) and proc_table()[daemon].state in "Tt"
    users.thaw_kernel()
    assert users.kill() == [] and processes_of(users.uids, zombies=True) == []


def test_the_run_sweeps_what_a_submission_left_of_its_ids(users):
    """A daemon of an id this process handed out, left alive after its submission (a close that gave
    up), is killed by the sweep a grading run makes before it returns; nothing of the id is left."""
    from autograder.uids import processes_of, sweep

    daemon = confined(users.kernel, "kernel", DAEMON.replace("GIB", "0.01"))["daemon"]
    assert daemon in processes_of([users.kernel])
    users.release()  # the submission's close: its ids' locks freed
    assert sweep(patience=30) == [] and processes_of(users.uids, zombies=True) == []


HOLDER = r'''
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()
'''


def test_the_sweep_leaves_an_id_another_grading_has_taken_since():
    """An id this process handed out and released may since be another grading's on the same
    machine (two `make grade` runs, or a Gradescope run beside one): while another process holds its
    lock, a daemon of it outlives this process's sweep; once the lock is free, the sweep kills it."""
    needs_root()
    from autograder.uids import LOCKS, allocate, processes_of, sweep

    pair = allocate()
    pair.release()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(LOCKS / str(pair.kernel))], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        daemon = confined(pair.kernel, "kernel", DAEMON.replace("GIB", "0.01"))["daemon"]
        sweep(patience=5)
        assert daemon in processes_of([pair.kernel]), "the sweep killed a process of an id another grading holds"
    finally:
        holder.communicate("", timeout=30)
    assert sweep(patience=30) == [] and processes_of(pair.uids, zombies=True) == []

@pytest.mark.slow
def test_memory_is_counted_over_every_process_of_the_ids(users, monkeypatch):
    """No cgroup (as in a container): a daemon of the kernel's id holding 1.5 GiB, reparented away
    from every tree the slot started, counts against its 1 GiB and is killed (6 s at load 20)."""
    from autograder import limits

    monkeypatch.setattr(limits.Cgroup, "make", classmethod(lambda cls, controller, name: None))
    slot = limits.Slot(2**30, None, users=users)
    assert slot.kind["memory"] == "watch"
    try:
        daemon = confined(users.kernel, "kernel", DAEMON.replace("GIB", "1.5"))["daemon"]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and "memory" not in slot.hit():
            time.sleep(0.1)
        assert "memory" in slot.hit()
        time.sleep(0.5)
        assert not Path(f"/proc/{daemon}").exists() or Path(f"/proc/{daemon}/stat").read_text().split()[2] in "ZX"
    finally:
        slot.close()


CLIENT = r'''
import json, os, socket, struct, sys, time
head, body = json.dumps({"name": "no_such_suite"}).encode(), b"x"
with socket.socket(socket.AF_UNIX) as s:
    s.settimeout(60)
    s.connect(sys.argv[1])
    message = struct.pack("!II", len(head), len(body)) + head + body
    try:
        if sys.argv[2] == "trickle":  # a byte a second: the request never completes in time
            for byte in message:
                s.sendall(bytes([byte]))
                time.sleep(1)
        s.sendall(message)
        n_head, n_body = struct.unpack("!II", s.recv(8))
        print(json.loads(s.recv(n_head)).get("problem"))
    except (OSError, struct.error):
        print("no answer")
'''


def test_the_judge_answers_its_kernel_only_and_bounds_a_whole_request(users, place, monkeypatch):
    """The judge's door, where the submission runs as its own ids: root (not the kernel's id) gets
    no answer (SO_PEERCRED); the kernel's id does; and a request that trickles in (a byte a second,
    each read well within any per-read timeout) is dropped at the whole request's deadline, so the
    next one is answered."""
    import autograder.judge as judge

    monkeypatch.setattr(judge, "REQUEST_SECONDS", 3)
    folder = place / "j"
    folder.mkdir(mode=0o700)
    os.chown(folder, users.kernel, users.kernel)
    path = folder / "judge.sock"
    with judge.JudgeServer(path, assignment=None, budget=Counter(), slot=SimpleNamespace(users=users)) as server:
        with socket.socket(socket.AF_UNIX) as s:  # root's connection: closed unanswered
            s.settimeout(10)
            s.connect(str(path))
            assert s.recv(8) == b""

        def client(mode: str) -> subprocess.Popen:
            return subprocess.Popen([PYTHON, "-I", "-S", "-c", CLIENT, str(path), mode], user=users.kernel,
                                    group=users.kernel, extra_groups=[], stdout=subprocess.PIPE, text=True)

        started = time.monotonic()
        slow, fast = client("trickle"), None
        time.sleep(0.5)
        fast = client("whole")
        assert fast.communicate(timeout=60)[0].strip() == "unknown"
        assert time.monotonic() - started < 10
        assert slow.communicate(timeout=60)[0].strip() == "no answer"
    assert server.strangers == 1


def test_copies_stop_at_a_depth_and_name_bytes_as_text(tmp_path):
    """A tree 1,100 folders deep is copied 64 down (no RecursionError), and names that are not UTF-8
    are reported with their bytes escaped."""
    from autograder.safe_files import MAX_DEPTH, copy_tree, remove_tree

    src = tmp_path / "src"
    folder = src
    folder.mkdir()
    for _ in range(1100):
        folder = folder / "d"
        folder.mkdir()
    (folder / "deep.ipynb").write_text("{}")
    os.mkfifo(src / os.fsdecode(b"pipe-\xff"))
    os.symlink("/etc/passwd", src / os.fsdecode(b"link-\xfe"))
    report = copy_tree(src, tmp_path / "dst", max_bytes=2**20)
    assert report.too_deep == ["/".join(["d"] * (MAX_DEPTH + 1))] and report.files == 0
    notes = json.dumps(report.notes("the upload"), ensure_ascii=False).encode("utf-8")  # valid UTF-8 text
    assert b"pipe-\\\\xff" in notes and b"link-\\\\xfe" in notes
    remove_tree(src)
    assert not src.exists()


def test_a_trickled_message_runs_out_of_time():
    from autograder.protocol import recv_message

    a, b = socket.socketpair()
    with a, b:
        b.sendall(struct.pack("!II", 2, 0))
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            recv_message(a, deadline=time.monotonic() + 1.0)  # one byte of the header never comes
        assert time.monotonic() - started < 2


def test_the_at_once_view_depends_on_nothing_the_notebook_did():
    """results.json for rows of every status, score and note (and an executed notebook or none):
    what is shown at once is the same byte for byte."""
    from autograder.gradescope_results import at_once_view, results

    cells = [{"notebook": "07", "cell": "a", "max_score": 2.0}, {"notebook": "07", "cell": "b", "max_score": 3.0}]
    settings = {"visibility": {"cells": "after_due_date", "status": "visible", "stdout": "hidden"}}
    rows = [{"status": status, "score": score, "cells": {"07:a": score, "07:b": 0.0}, "notes": notes}
            for status, score, notes in [("ok", 2.0, []), ("timeout", 0.0, ["stopped after 6 s"]),
                                         ("out of memory", 0.0, ["a: 0 points (MemoryError: )"]),
                                         ("output flood", 0.0, []), ("crashed", 1.0, ["the kernel died"])]]
    notebook = {"cells": [{"metadata": {"nbgrader": {"grade": True, "grade_id": "a"}},
                           "outputs": [{"output_type": "stream", "text": "secret verdict"}]}]}
    views = {json.dumps(at_once_view(results(row, cells, notebook=nb, settings=settings, seconds=seconds,
                                             found="07.ipynb (graded as 07.ipynb)", upload_notes=["a note"])),
                        sort_keys=True)
             for row in rows for nb in (None, notebook) for seconds in (3.0, 300.0)}
    assert len(views) == 1
    view = json.loads(views.pop())
    assert [t["name"] for t in view["tests"]] == ["Submission"] and "score" not in view
    assert "secret" not in json.dumps(view) and "a note" in view["output"]

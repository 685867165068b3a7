"""The student's side of a hidden check: a fresh process that runs one function on case inputs.

Reads from stdin (torch.save bytes, written by the judge):
    {"suite": name, "fn": cloudpickle bytes of the student's function, "tripwire": [names],
     "cases": [{"name": str, "inputs": dict}], "package": the view of the suite, SUITES or HARNESSES (optional)}
writes to its original stdout (torch.save bytes, plain types only):
    {"results": [{"name": str, "outputs": dict} | {"name": str, "error": CODE, "exception": str}]}
with CODE one of "not loaded", "unusable", "reference", "raised". The judge trusts none of it: it
reads the bytes with `weights_only=True`, compares the outputs itself, and maps every error to a
fixed message (`autograder.report`), since the student's code runs in this process and could
write anything here.

With `--serve LIMIT` it answers one payload after another, each in a child forked from it
(`serve`): the judge starts one per submission ahead of time, so a hidden check costs its cases'
time, not an interpreter's start, and still runs in a process of its own.

With `--confine SPEC` (AUTOGRADER_SANDBOX=user: it is started as root, outside any sandbox, and
never runs student code itself) each payload's process first becomes the submission's runner id
and confines itself (`autograder.confine`: no socket, no file written anywhere, its reads limited
to what bubblewrap would show) before it reads the payload.

It never sees expected values, and while grading it runs where the references of the open
assignments do not exist: its `course_lib` is a stubbed copy (`autograder.stubs`, bound over the
repository's by the sandbox). The tripwire stays for runs without the sandbox: before the
student's function is unpickled, every `course_lib` name in the tripwire (the suite's TRIPWIRE and
the released functions that compute its graded function: `autograder.student_view.tripwire`) is
replaced by a function that records the call and raises, so a function that merely delegates to
the reference gets no credit even if it catches the error. Anything the student's code prints goes to stderr,
which the judge discards.
"""

from __future__ import annotations

import io
import json
import os
import sys


class ReferenceCalled(RuntimeError):
    pass


TRIPPED: list[str] = []


def install_tripwire(names: list[str]) -> None:
    import course_lib

    modules = [m for key, m in list(sys.modules.items()) if key == "course_lib" or key.startswith("course_lib.")]
    for name in names:
        def tripwire(*args, _name=name, **kwargs):
            TRIPPED.append(_name)
            raise ReferenceCalled(f"course_lib.{_name} is the reference implementation; the graded function must not call it")

        tripwire.__name__ = name
        for module in modules:
            if hasattr(module, name):
                setattr(module, name, tripwire)
    assert course_lib  # imported for its side effect: all submodules loaded


def run_function(suite, fn_bytes: bytes, cases: list[dict], tripwire: list[str]) -> list[dict]:
    """The results of one function (cloudpickle bytes) on every case."""
    import cloudpickle

    from autograder.suite_api import run_case

    try:
        fn = cloudpickle.loads(fn_bytes)
        install_tripwire(tripwire)  # modules imported while unpickling
    except Exception:  # noqa: BLE001
        return [{"name": c["name"], "error": "not loaded"} for c in cases]
    results = []
    for case in cases:
        before = len(TRIPPED)
        try:
            outputs = run_case(suite, fn, case["inputs"])
        except Exception:  # noqa: BLE001 - e.g. an output of a type that cannot be compared
            results.append({"name": case["name"], "error": "unusable"})
            continue
        if len(TRIPPED) > before:
            results.append({"name": case["name"], "error": "reference"})
        elif "__error__" in outputs:
            results.append({"name": case["name"], "error": "raised", "exception": outputs["__error__"]})
        else:
            results.append({"name": case["name"], "outputs": outputs})
    return results


def results_of(payload_bytes: bytes) -> bytes:
    """torch.save bytes of the results of one payload (see the module docstring)."""
    import torch

    from autograder.suite_api import SUITES, load_suite

    payload = torch.load(io.BytesIO(payload_bytes), weights_only=False)  # from the judge: trusted
    suite = load_suite(payload["suite"], payload.get("package", SUITES))
    install_tripwire(payload["tripwire"])
    # one function (a hidden check), or several in turn (the tests' bulk runs of many wrong versions)
    many = [run_function(suite, fn, payload["cases"], payload["tripwire"]) for fn in payload.get("fns", [payload.get("fn")])]
    buffer = io.BytesIO()
    torch.save({"results": many[0]} if "fns" not in payload else {"results_many": many}, buffer)
    return buffer.getvalue()


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def serve(result_fd: int, limit: int, confine: dict | None = None) -> int:
    """`--serve`: answer payloads one after the other, each in a child forked from this process
    (so each call still runs in a fresh copy of a process that never ran student code, without
    paying the imports again), which first enters `confine` when given. Frames on stdin and on
    `result_fd`: 8 bytes of length, then the bytes; an answer of length 0 means the child gave
    nothing (it crashed, could not be confined, or wrote more than `limit` bytes)."""
    import struct
    import signal

    while True:
        head = _read_exact(0, 8)
        if head is None:
            return 0
        payload = _read_exact(0, struct.unpack("!Q", head)[0])
        if payload is None:
            return 0
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: run the payload, hand the results to the parent, exit
            os.close(read_end)
            os.close(result_fd)
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)  # the next payloads are not the child's to read
            os.setpgid(0, 0)  # its own process group, which the parent ends with it
            try:
                if confine is not None:
                    from .confine import enter

                    enter(confine)
                data = results_of(payload)
                with os.fdopen(write_end, "wb") as f:
                    f.write(data)
            finally:
                os._exit(0)
        os.close(write_end)
        chunks, size = [], 0
        with os.fdopen(read_end, "rb") as f:
            while size <= limit:
                chunk = f.read(1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
        if size > limit:
            os.kill(pid, signal.SIGKILL)
            chunks = []
        os.waitpid(pid, 0)
        try:  # whatever the student's code left running in the child's group ends with the call
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        data = b"".join(chunks)
        os.write(result_fd, struct.pack("!Q", len(data)) + data)


def main() -> int:
    # the judge reads fd `result_fd`; everything else written to stdout lands on stderr
    result_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    # the imports first, then the wait for the payload: a runner the judge starts ahead of time
    # (`autograder.judge.JudgeServer`) has them done when a hidden check arrives (and those its
    # suites name: `python -m autograder.runner --warm transformers,math_verify`)
    import importlib

    import cloudpickle  # noqa: F401 - imported ahead for the same reason
    import torch  # noqa: F401

    args = sys.argv[1:]
    if "--warm" in args:
        for module in filter(None, args[args.index("--warm") + 1].split(",")):
            try:
                importlib.import_module(module)
            except ImportError:
                pass

    import autograder.compare  # noqa: F401
    import autograder.suite_api  # noqa: F401
    import course_lib  # noqa: F401 - the stubbed copy, whose names the tripwire replaces

    confine = json.loads(args[args.index("--confine") + 1]) if "--confine" in args else None
    if "--serve" in args:
        return serve(result_fd, int(args[args.index("--serve") + 1]), confine)
    if confine is not None:
        from .confine import enter

        enter(confine)
    data = results_of(sys.stdin.buffer.read())
    with os.fdopen(result_fd, "wb") as f:
        f.write(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""One function on a list of cases: the runner in a fresh, limited (and, grading, sandboxed)
process, its outputs compared here with the expected values, and the report.

The runner (`autograder.runner`) gets the case inputs only, never an expected value. What it
sends back is read with `torch.load(weights_only=True)` (so a hostile runner cannot run code
here) and trusted for nothing: outputs are compared with `autograder.compare`, errors are mapped
to the fixed codes of `autograder.report`, anything else is "malformed".

Used by the judge (hidden cases, `autograder.judge`), by `make check` (practice cases,
`autograder.practice`, in the repository and in a student kit) and by the tests.
"""

from __future__ import annotations

import io
import json
import os
import sys
import time
from pathlib import Path

from .compare import compare, margin, verdict
from .limits import RUNNER_PROCESSES, Slot, start_limited
from .recognition import besides, errors_not_raised, recognise, unfinished
from .report import error_code
from .suite_api import HARNESSES, SUITES

REPO_ROOT = Path(__file__).resolve().parent.parent
RUNNER_MEMORY = int(float(os.environ.get("AUTOGRADER_RUNNER_MEMORY_GB", "6")) * 2**30)
RUNNER_OUTPUT = 256 * 2**20  # bytes of results a runner may write (outputs of every case, e.g. gradients)
CASE_ERRORS = ("not loaded", "unusable", "reference")


class Runner:
    """A runner process started ahead of its cases (`start_runner`): its imports done, it waits
    for its payload on stdin. `package` is the view of the suites it loads (`suite_api.SUITES`, or
    HARNESSES in a sandbox, which holds the harnesses only); `unsandboxed` says it runs without
    bubblewrap."""

    def __init__(self, running, package: str, unsandboxed: bool):
        self.running, self.package, self.unsandboxed = running, package, unsandboxed

    def run(self, payload: bytes, timeout: float):
        """The `Limited` of one payload (this runner is then spent)."""
        return self.running.finish(payload, timeout)

    def alive(self) -> bool:
        return self.running.proc.poll() is None

    def close(self) -> None:
        self.running.close()


class ForkingRunner(Runner):
    """A runner in `--serve` mode (`autograder.runner.serve`): it imports once, then forks a fresh
    child for each payload. `run` writes a frame and reads the answer's frame, within the time
    limit; a timeout or a dead runner ends it (the judge then starts another)."""

    def run(self, payload: bytes, timeout: float):
        import select
        import struct

        from .limits import Limited

        proc, before = self.running.proc, self.running.slot.hit()
        deadline = time.monotonic() + timeout

        def read(n: int) -> bytes | None:
            chunks, got = [], 0
            while got < n:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([proc.stdout], [], [], left)[0]:
                    return None
                chunk = os.read(proc.stdout.fileno(), min(n - got, 1 << 20))
                if not chunk:  # the runner is gone (crashed or killed): no answer
                    return b""
                chunks.append(chunk)
                got += len(chunk)
            return b"".join(chunks)

        try:
            proc.stdin.write(struct.pack("!Q", len(payload)) + payload)
            proc.stdin.flush()
            head = read(8)
        except (BrokenPipeError, OSError):
            head = b""
        data = read(struct.unpack("!Q", head)[0]) if head and len(head) == 8 else head
        if data is None:  # past the deadline: the runner and whatever it runs end here
            self.close()
            return Limited(None, b"", b"", frozenset(self.running.slot.hit() - before))
        hit = self.running.slot.hit() - before
        if not data:  # a child that gave nothing: crashed, killed, or over the output limit
            return Limited(1, b"", b"", frozenset(hit))
        return Limited(0, data, b"", frozenset(hit))


def start_runner(*, package: str, course_lib: Path | None = None, sandbox: bool = True, root: Path = REPO_ROOT,
                 hide: list[Path] = (), slot: Slot | None = None, processes: int = RUNNER_PROCESSES,
                 warm: list[str] = (), forking: bool = False) -> Runner:
    """A fresh runner process under its limits (in `slot`, the submission's, when given), sandboxed
    where bubblewrap is available and `sandbox` is asked for (a student kit has no sandbox module);
    `warm`: modules it imports while it waits for its cases; `forking`: a `ForkingRunner`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOGRADER_")}
    env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
    env["HF_HUB_OFFLINE"] = "1"
    cmd = [sys.executable, "-m", "autograder.runner"] + (["--warm", ",".join(warm)] if warm else []) \
        + (["--serve", str(RUNNER_OUTPUT)] if forking else [])
    unsandboxed, cwd, users = False, root, None
    if sandbox:
        from .sandbox import sandbox_available, sandbox_kind, sandboxed, unsandboxed_env, user_path, user_spec

        if sandbox_kind() == "user":
            # started as root, confined per payload as the submission's runner id (`autograder.runner`),
            # in the stub's folder: `-m` puts the working folder first on the path, and the repository's
            # `autograder` must not be importable there
            if slot is None or slot.users is None:
                from .uids import allocate

                users = allocate()
                slot = Slot(RUNNER_MEMORY, processes, users=users)
            package = HARNESSES if package == SUITES else package
            spec = user_spec(slot.users.runner, "runner", course_lib=course_lib, hide=list(hide))
            cmd += ["--confine", json.dumps(spec)]
            env["PYTHONPATH"], cwd = user_path(course_lib), Path(course_lib).resolve().parent
        elif sandbox_available():
            package = HARNESSES if package == SUITES else package  # a sandbox sees the suites' harnesses only
            cmd = sandboxed(cmd, course_lib=course_lib, hide=list(hide))
        else:
            env, unsandboxed = unsandboxed_env(env, course_lib), True
    running = start_limited(cmd, slot=slot, memory_bytes=RUNNER_MEMORY, address_space=RUNNER_MEMORY, cwd=cwd,
                            env=env, stderr="discard", max_processes=processes, file_bytes=RUNNER_OUTPUT,
                            stdout_pipe=forking)
    if users is not None:  # a slot of its own, with ids of its own: both end with the runner
        running.own, running.users = True, users
    return (ForkingRunner if forking else Runner)(running, package, unsandboxed)


def run_cases(name: str, fn_bytes: bytes | list[bytes], cases: list[dict], settings: dict, *, package: str,
              course_lib: Path | None = None, sandbox: bool = True, root: Path = REPO_ROOT, kind: str = "hidden",
              hide: list[Path] = (), slot: Slot | None = None, runner: Runner | None = None,
              mistakes: dict | None = None) -> dict | list[dict]:
    """Run the function (cloudpickle bytes) on `cases` ({name, inputs, expected}) in a fresh
    runner process (`runner`, started ahead, or a new one) and compare; the full report
    (`autograder.report`: redact it before a kernel sees it). `hide`: folders inside the
    sandbox's visible parts to empty; `slot`: the submission's limits, which the runner joins;
    `mistakes`: the known mistakes' signatures on these cases (`autograder.signatures`), which a
    failing function is compared with (`autograder.recognition`).

    Given a list of functions, they run in turn in one runner process (the time limit multiplied
    by their number) and a list of reports comes back: a bulk check for the tests."""
    import torch

    runner = runner or start_runner(package=package, course_lib=course_lib, sandbox=sandbox, root=root, hide=hide,
                                    slot=slot)
    many = isinstance(fn_bytes, list)
    payload = {"suite": name, "tripwire": settings["tripwire"], "package": runner.package,
               "cases": [{"name": c["name"], "inputs": c["inputs"]} for c in cases],
               **({"fns": fn_bytes} if many else {"fn": fn_bytes})}
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    n = len(fn_bytes) if many else 1
    result = runner.run(buffer.getvalue(), settings["timeout"] * n)
    problem, results = _problem(result), None
    if problem is None:
        try:
            loaded = torch.load(io.BytesIO(result.stdout), weights_only=True)
            results = loaded["results_many"] if many else [loaded["results"]]
            if not isinstance(results, list) or len(results) != n:
                raise ValueError("results of another number of functions")
        except Exception:  # noqa: BLE001 - a crashed or hostile runner
            problem = "crashed" if result.returncode else "malformed"
    reports = []
    for i in range(n):
        report = {"name": name, "kind": kind, "cases": [], "passed": False, "problem": problem}
        if runner.unsandboxed:
            report["unsandboxed"] = True
        if problem is None:
            _compare_into(report, results[i], cases, settings, mistakes)
        reports.append(report)
    return reports if many else reports[0]


def _problem(result) -> str | None:
    if result.returncode is None:
        return "timeout"
    if "output" in result.hit:
        return "output"
    if "processes" in result.hit:
        return "processes"
    return None


def _compare_into(report: dict, results, cases: list[dict], settings: dict, mistakes: dict | None = None) -> None:
    """The per-case entries of `report` from the runner's `results`; for a failing function, the
    known mistakes it matches ("mistakes"), whether it fails a case they do not explain ("besides"),
    when only error cases fail their names ("errors_not_raised"), and whether it raised
    NotImplementedError on every case ("unfinished")."""
    by_name = {r.get("name"): r for r in results if isinstance(r, dict)} if isinstance(results, list) else {}
    seen = {}  # per case: {"outputs": ...} or {"error": its code}, for recognition
    for case in cases:
        got = by_name.get(case["name"])
        entry = {"case": case["name"], "ok": False, "verdict": "error", "error": None, "problems": []}
        if got is None:
            entry["error"] = "no result"
        elif "error" in got:
            code = got["error"]
            entry["error"] = error_code(str(got.get("exception"))) if code == "raised" else \
                code if code in CASE_ERRORS else "no result"
        elif "outputs" in got:
            try:
                entry["problems"] = compare(got["outputs"], case["expected"], settings)
                entry["verdict"] = verdict(entry["problems"])
                entry["ok"] = not entry["problems"]
                entry["margin"] = margin(got["outputs"], case["expected"])  # for the tests; redacted away
                seen[case["name"]] = {"outputs": got["outputs"]}
            except Exception:  # noqa: BLE001 - outputs of a shape the comparison cannot walk
                entry["error"] = "unusable"
        else:
            entry["error"] = "no result"
        if entry["error"]:
            seen[case["name"]] = {"error": entry["error"]}
        report["cases"].append(entry)
    report["passed"] = bool(report["cases"]) and all(c["ok"] for c in report["cases"])
    if not report["passed"] and report["cases"]:
        error_cases = [c["name"] for c in cases if c.get("error_case")]
        passed = [c["case"] for c in report["cases"] if c["ok"]]
        report["mistakes"] = recognise(seen, mistakes, settings, error_cases=error_cases, passed=passed)
        report["besides"] = besides(seen, [c["case"] for c in report["cases"] if not c["ok"]], report["mistakes"],
                                    mistakes, settings, error_cases=error_cases)
        report["errors_not_raised"] = errors_not_raised(report["cases"], cases)
        report["unfinished"] = unfinished(seen, error_cases=error_cases)

"""The grader's judge: hidden cases, answered a bounded number of times, revealing nothing it need not.

`judge(name, fn_bytes)` loads the hidden cases of suite `name` and runs the student's function
(cloudpickle bytes) on them in a fresh, sandboxed runner where the references of the open
assignments are stubs (`autograder.trial`, `autograder.stubs`); the report it returns is the
full one, for the grader. What a grading kernel receives is `report.redact(...)` of it: per case
its name, pass or fail, and whether a failure is at rounding scale or far off, and for a failing
function the known mistakes its outputs match (compared here, outside the sandbox, with each
mistake's outputs stored beside the hidden cases: `autograder.recognition`).

While grading, the judge is a `JudgeServer` on a unix socket outside the submission's sandbox
(`autograder.grade` runs one per submission). It answers:

- only the suites of the assignment being graded (a later assignment's hidden cases cannot be
  mapped early);
- each suite as many times as the assignment's graded cells call it (`hidden_calls`: once per
  graded check, since nbgrader runs each cell once). A submission that calls a check itself
  first uses up that answer; every call beyond is refused at once, so reading the reports over
  many calls is not possible: one report per graded check carries a few bits per case, no more;
- one request at a time, each with a deadline for the whole request to arrive (REQUEST_SECONDS,
  however slowly it trickles in), and its runner joins the submission's `Slot` (memory and
  processes over all its processes together): a call that does not wait starts nothing outside
  the submission's limits, and nothing outlives its slot;
- where the submission runs as unprivileged ids (AUTOGRADER_SANDBOX=user, `autograder.uids`):
  only connections from the kernel's id (SO_PEERCRED; the socket is that id's alone), and while
  the student's function runs on hidden inputs every process of the kernel's id is stopped, and
  every process of the runner's id is killed before they go on: nothing of the kernel's side
  watches the runner at work (its /proc entries), and nothing the runner started is left to
  talk to it afterwards.

One runner per submission is started ahead (`trial.ForkingRunner`: its imports done while the
notebook runs) and forks a fresh child for each call: a hidden check then costs its cases' time,
not an interpreter's start, and each call still runs in a process of its own, forked from one
that never ran student code.

It also keeps the verdicts, so a kernel that swallows the failure of a hidden-test cell still
gets no points for it.

    python -m autograder.judge NAME  < cloudpickled function   # a fresh judge (outside grading)

is what `check_hidden` uses when no server is there (a solution notebook run by the course's
own tests or by an instructor): it makes missing or stale case files first and prints the
redacted report as JSON.
"""

from __future__ import annotations

import json
import os
import socket
import socketserver
import struct
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from .cases import HIDDEN_DIR, ensure_cases, load_cases
from .limits import Slot
from .protocol import recv_message, send_message
from .recognition import label
from .report import redact
from .stubs import stub_for_suite
from .suite_api import SUITES, load_suite, suite_settings
from .trial import Runner, run_cases, start_runner

REQUEST_SECONDS = 30  # a client must send its whole request within this
CLOSE_SECONDS = 60  # what closing the server waits for a call in progress (its runner is killed first)


def judge(name: str, fn_bytes: bytes | list[bytes], hidden_dir: Path | None = None, assignment: str | None = None,
          slot: Slot | None = None, runner: Runner | None = None) -> dict | list[dict]:
    """Run the student's function on the hidden cases of suite `name`; the full report (a list
    of functions gives a list of reports: the tests' bulk checks). `runner`: one started ahead
    with the stub of `assignment`."""
    suite = load_suite(name)
    data = load_cases(name, hidden_dir)
    return run_cases(name, fn_bytes, data["cases"], suite_settings(suite), package=SUITES,
                     course_lib=stub_for_suite(name, assignment), hide=[Path(hidden_dir or HIDDEN_DIR)], slot=slot,
                     runner=runner, mistakes=data.get("mistakes"))


class JudgeServer:
    """A judge on a unix socket for one submission of `assignment`.

    `budget` is {suite: calls allowed}; `verdicts` maps a suite to the pass/fail of its answered
    calls; `refused` counts the calls refused per suite. `outcomes` maps a suite to what its last
    answered call found, for the grades' rows and the class report (`autograder.class_report`):
    {"failed_cases": [case names], "mistakes": [known mistakes named], "errors_not_raised": [...],
    "unfinished": bool, "besides": str} (`outcome_of`)."""

    def __init__(self, socket_path: Path, *, assignment: str | None, budget: Counter, slot: Slot | None = None,
                 hidden_dir: Path | None = None):
        self.socket_path = Path(socket_path)
        self.assignment, self.slot, self.hidden_dir = assignment, slot, hidden_dir
        self.left = Counter(budget)
        self.verdicts: dict[str, list[bool]] = {}
        self.outcomes: dict[str, dict] = {}
        self.refused: Counter = Counter()
        self.seconds: dict[str, float] = {}  # of the answered calls of each suite (the grading time's breakdown)
        self.users = slot.users if slot is not None else None  # the submission's ids, where it has its own
        self.strangers = 0  # connections refused: not from the kernel's id
        self.runner: Runner | None = None  # a forking runner, started ahead
        self.stub = None
        self.warm: list[str] = []
        if any(budget.values()):  # every suite of one assignment runs with the same stub
            self.stub = stub_for_suite(next(iter(budget)), assignment)
            self.warm = sorted({m for n in budget for m in suite_settings(load_suite(n))["warm"]})
        outer = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                if outer.users is not None and peer_uid(self.request) != outer.users.kernel:
                    outer.strangers += 1
                    return
                try:
                    header, body = recv_message(self.request, deadline=time.monotonic() + REQUEST_SECONDS)
                except Exception:  # noqa: BLE001 - a stalled, short or oversized request: no answer
                    return
                report = outer.answer(str(header.get("name", "?"))[:100], body)
                try:
                    self.request.settimeout(REQUEST_SECONDS)
                    send_message(self.request, report)
                except OSError:
                    pass

        # one request at a time (no threads): a burst of calls queues up and is refused in turn
        self.server = socketserver.UnixStreamServer(str(self.socket_path), Handler)
        if self.users is not None:  # the kernel's id alone may connect
            os.chown(self.socket_path, self.users.kernel, self.users.kernel)
            self.socket_path.chmod(0o600)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)

    def answer(self, name: str, fn_bytes: bytes) -> dict:
        """The redacted report of one call, counted against the budget."""
        refusal = None
        if name not in self.left and name not in self.verdicts:
            refusal = "assignment" if name in _known_suites() else "unknown"
        elif self.left[name] <= 0:
            refusal = "budget"
        if refusal is not None:
            self.refused[name] += 1
            return {"name": name, "kind": "hidden", "passed": False, "problem": refusal, "cases": []}
        self.left[name] -= 1
        started = time.perf_counter()
        runner = self.runner if self.runner is not None and self.runner.alive() else None
        try:
            if self.users is not None and not self.users.freeze_kernel():
                raise RuntimeError("the kernel's processes could not all be stopped")
            report = judge(name, fn_bytes, self.hidden_dir, self.assignment, self.slot,
                           runner if stub_for_suite(name, self.assignment) == self.stub else None)
        except Exception:  # noqa: BLE001 - never let one call take the server down
            report = {"name": name, "kind": "hidden", "passed": False, "problem": "checker", "cases": []}
        finally:
            if self.users is not None:  # nothing of the runner's id goes on with the kernel
                from .uids import kill_ids

                left = kill_ids([self.users.runner])
                if left:  # what the kernel could still read of them: no verdict rests on this call
                    print(f"autograder.judge: processes of the runner's id left: {left}", file=sys.stderr)
                    report = {"name": name, "kind": "hidden", "passed": False, "problem": "checker", "cases": []}
                self.users.thaw_kernel()
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started
        self._warm_up()
        self.verdicts.setdefault(name, []).append(bool(report["passed"]))
        self.outcomes[name] = outcome_of(report, self.hidden_dir)
        return redact(report)

    def _warm_up(self) -> None:
        """Have a forking runner ready while the budget allows more calls (a new one when the last
        timed out or died): its imports done while the notebook runs."""
        if self.stub is None or sum(self.left.values()) <= 0:
            if self.runner is not None:
                self.runner.close()
                self.runner = None
            return
        if self.runner is None or not self.runner.alive():
            if self.runner is not None:  # a dead runner still holds its files and, when it has one, its own slot
                self.runner.close()
            try:
                self.runner = start_runner(package=SUITES, course_lib=self.stub, slot=self.slot,
                                           hide=[Path(self.hidden_dir or HIDDEN_DIR)], warm=self.warm, forking=True)
            except Exception:  # noqa: BLE001 - no runner ahead: the call starts its own
                self.runner = None

    def __enter__(self):
        self._warm_up()
        self.thread.start()
        return self

    def __exit__(self, *exc):
        # the submission's processes are gone by now (its slot closed): a call in progress ends soon
        stopper = threading.Thread(target=self.server.shutdown, daemon=True)
        stopper.start()
        stopper.join(CLOSE_SECONDS)
        if stopper.is_alive():
            print(f"autograder.judge: a call still in progress after {CLOSE_SECONDS} s; left behind", file=sys.stderr)
        self.server.server_close()
        self.socket_path.unlink(missing_ok=True)
        if self.runner is not None:
            self.runner.close()
            self.runner = None


def peer_uid(sock) -> int:
    """The uid of the process at the other end of a unix socket (SO_PEERCRED: pid, uid, gid)."""
    return struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))[1]


def outcome_of(report: dict, hidden_dir: Path | None = None) -> dict:
    """What one answered check found: the failed case names (every case of the suite when the run
    itself failed: a timeout, a crash), the known mistakes named ("a or b" for alternatives:
    `autograder.recognition.label`), the error cases not raised,
    whether it raised NotImplementedError on every case (a stub) and what else a named function
    gets wrong (`autograder.recognition.besides`)."""
    failed = [c["case"] for c in report.get("cases", []) if not c["ok"]]
    if report.get("problem") and not report.get("cases"):
        try:
            failed = [c["name"] for c in load_cases(report["name"], hidden_dir)["cases"]]
        except Exception:  # noqa: BLE001 - no case file to name them from
            failed = []
    return {"failed_cases": failed, "mistakes": [label(m) for m in report.get("mistakes", [])],
            "errors_not_raised": list(report.get("errors_not_raised", [])),
            "unfinished": bool(report.get("unfinished")), "besides": str(report.get("besides") or "")}


def _known_suites() -> set[str]:
    from .suite_api import suite_names

    return set(suite_names())


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m autograder.judge NAME  < cloudpickled function", file=sys.stderr)
        return 2
    name = argv[0]
    ensure_cases(name)
    report = judge(name, sys.stdin.buffer.read())
    sys.stdout.write(json.dumps(redact(report)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

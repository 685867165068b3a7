"""The grader's side of a hidden check: holds the expected values and does the comparison.

`judge(name, fn_bytes)` loads the hidden cases of suite `name`, runs the student's function
(cloudpickle bytes) in a fresh, sandboxed runner process that only gets the inputs, reads the
runner's outputs back with `torch.load(weights_only=True)` (so a hostile runner cannot run code
here), compares them with the expected outputs and returns a report that names each case and
the size of its error, never an expected value.

The runner runs where the references of the open assignments cannot be imported at all: its
`course_lib` is a stubbed copy (`autograder.stubs`) for the suite's assignment (the graded
names of that assignment and later raise NotImplementedError), bound over the repository's by
the sandbox, which also masks the rest of the repository (`autograder.sandbox`). So importing,
reloading or copying the library earns nothing. Without bubblewrap the copy goes first on
PYTHONPATH and the report says the run is unsandboxed.

It is reached in one of two ways, neither of which lets student code see expected values:
- `python -m autograder.judge NAME` (fn bytes on stdin, JSON report on stdout): a fresh process
  the notebook kernel starts; used when a solution notebook runs outside the grading command.
- `serve(socket_path)`: a server the grading command runs *outside* the sandbox of a
  submission; it also keeps the verdicts, so a kernel that swallows the failure of a hidden-test
  cell still gets no points for it.
"""

from __future__ import annotations

import io
import json
import os
import socketserver
import struct
import sys
import threading
from pathlib import Path

from .engine import HIDDEN_DIR, SUITES, compare, load_cases, load_suite, suite_settings
from .sandbox import run_limited, sandbox_available, sandboxed, unsandboxed_env

REPO_ROOT = Path(__file__).resolve().parent.parent
RUNNER_MEMORY = int(float(os.environ.get("AUTOGRADER_RUNNER_MEMORY_GB", "6")) * 2**30)
RUNNER_PROCESSES = 256
RUNNER_OUTPUT = 256 * 2**20  # bytes of results a runner may write (outputs of every case, e.g. gradients)
MAX_REQUEST = 64 * 2**20
UNSANDBOXED = ("unsandboxed: bubblewrap is not in use (AUTOGRADER_SANDBOX=0 or not installed), so the stubbed "
               "course_lib is only first on PYTHONPATH and the repository is readable")


def ensure_cases(name: str, hidden_dir: Path | None = None) -> None:
    """Generate missing or stale case files (a fresh secret seed) so a solution notebook runs anywhere.

    Stale: the suite or the reference's module changed since the cases were made."""
    from .engine import case_path, fingerprint, load_cases
    from .make_cases import make_cases

    if case_path(name, hidden_dir).is_file():
        try:
            if load_cases(name, hidden_dir).get("fingerprint") == fingerprint(name):
                return
        except Exception:  # noqa: BLE001 - an unreadable file is regenerated
            pass
    make_cases([name], out=hidden_dir)


def stubbed_course_lib(name: str, assignment: str | None = None) -> Path:
    """The stubbed `course_lib` a runner of suite `name` gets: every graded name of the suite's
    assignment and later is a stub (of `assignment` and later when that is earlier: the
    assignment being graded). A suite whose function no lesson grades yet stubs every graded
    name, its own function and its tripwire."""
    import course_lib

    from .assignments import Graded, assignment_of
    from .stubs import stub_tree

    suite = load_suite(name)
    own = assignment_of(suite.GRADED)
    extra = []
    if own is None:
        for n in {suite.GRADED, *suite_settings(suite)["tripwire"]}:
            obj = getattr(course_lib, n, None)
            if obj is not None and hasattr(obj, "__module__"):
                extra.append(Graded("", obj.__module__, n))
    target = min(a for a in (own, assignment) if a) if (own or assignment) else None
    return stub_tree(target, extra) / "course_lib"


def run_cases(name: str, fn_bytes: bytes | list[bytes], cases: list[dict], settings: dict, *, package: str = SUITES,
              course_lib: Path | None = None, hide: list[Path] = (), sandbox: bool = True,
              root: Path = REPO_ROOT) -> dict | list[dict]:
    """Run the student's function on `cases` (dicts with name, inputs, expected) in a fresh runner
    process and compare; the report holds case names and error sizes only.

    Given a list of functions, they run in turn in one runner process (with the time limit
    multiplied by their number) and a list of reports comes back: a bulk check for the tests."""
    import torch

    many = isinstance(fn_bytes, list)
    payload = {
        "suite": name, "tripwire": settings["tripwire"], "package": package,
        "cases": [{"name": c["name"], "inputs": c["inputs"]} for c in cases],
        **({"fns": fn_bytes} if many else {"fn": fn_bytes}),
    }
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOGRADER_")}
    env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
    env["HF_HUB_OFFLINE"] = "1"
    cmd = [sys.executable, "-m", "autograder.runner"]
    report = {"name": name, "cases": [], "passed": False}
    if sandbox:
        cmd = sandboxed(cmd, hide=list(hide), course_lib=course_lib)
        env = unsandboxed_env(env, course_lib)
        if not sandbox_available():
            report["unsandboxed"] = True
    timeout = settings["timeout"] * (len(fn_bytes) if many else 1)
    result = run_limited(cmd, input=buffer.getvalue(), timeout=timeout, memory_bytes=RUNNER_MEMORY,
                         cwd=root, env=env, stderr="discard", max_processes=RUNNER_PROCESSES,
                         file_bytes=RUNNER_OUTPUT)
    problem, results = None, None
    if result.returncode is None:
        problem = f"timed out after {timeout:.0f} s on the hidden cases"
    elif "output" in result.hit:
        problem = "the fresh process running the function wrote more than the output limit"
    else:
        try:
            loaded = torch.load(io.BytesIO(result.stdout), weights_only=True)
            results = loaded["results_many"] if many else [loaded["results"]]
        except Exception:  # noqa: BLE001 - a crashed or hostile runner
            why = "; it started too many processes" if "processes" in result.hit else ""
            problem = f"the fresh process running the function crashed (exit status {result.returncode}){why}"
    reports = []
    for i in range(len(fn_bytes) if many else 1):
        one = {**report, "cases": []}
        if problem is not None:
            one["problem"] = problem
        else:
            _compare_into(one, results[i], cases, settings)
        reports.append(one)
    return reports if many else reports[0]


def _compare_into(report: dict, results: list[dict], cases: list[dict], settings: dict) -> None:
    by_name = {r["name"]: r for r in results}
    for case in cases:
        got = by_name.get(case["name"])
        if got is None:
            problems = ["no result"]
        elif "error" in got:
            problems = [str(got["error"])[:200]]
        else:
            try:
                problems = compare(got["outputs"], case["expected"], settings)
            except Exception as e:  # noqa: BLE001
                problems = [f"outputs could not be compared ({type(e).__name__})"]
        report["cases"].append({"case": case["name"], "ok": not problems, "problems": problems[:3]})
    report["passed"] = all(c["ok"] for c in report["cases"]) and bool(report["cases"])


def judge(name: str, fn_bytes: bytes | list[bytes], hidden_dir: Path | None = None, hide: list[Path] = (),
          assignment: str | None = None) -> dict | list[dict]:
    """Run the student's function on the hidden cases of suite `name`; the report (see run_cases;
    a list of functions gives a list of reports)."""
    suite = load_suite(name)
    settings = suite_settings(suite)
    data = load_cases(name, hidden_dir)
    hidden = Path(hidden_dir or HIDDEN_DIR)
    return run_cases(name, fn_bytes, data["cases"], settings, course_lib=stubbed_course_lib(name, assignment),
                     hide=[hidden, *hide])


def format_report(report: dict) -> str:
    cases = report["cases"]
    n_ok = sum(c["ok"] for c in cases)
    lines = [f"{report['name']}: {n_ok}/{len(cases)} {report.get('kind', 'hidden')} cases passed"]
    if report.get("unsandboxed"):
        lines.append(f"  ({UNSANDBOXED})")
    if report.get("problem"):
        lines.append(f"  {report['problem']}")
    for c in cases:
        if not c["ok"]:
            lines.append(f"  FAIL {c['case']}: " + "; ".join(c["problems"]))
    return "\n".join(lines)


# ---------------------------------------------------------------- server for the grading command
def _recv_exact(sock, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(min(n - got, 1 << 20))
        if not chunk:
            raise ConnectionError("short read")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def send_message(sock, header: dict, body: bytes = b"") -> None:
    head = json.dumps(header).encode()
    sock.sendall(struct.pack("!II", len(head), len(body)) + head + body)


def recv_message(sock) -> tuple[dict, bytes]:
    n_head, n_body = struct.unpack("!II", _recv_exact(sock, 8))
    if n_head > 1 << 16 or n_body > MAX_REQUEST:
        raise ValueError("message too large")
    return json.loads(_recv_exact(sock, n_head)), _recv_exact(sock, n_body)


class JudgeServer:
    """A judge on a unix socket; `verdicts` maps a suite name to the list of its pass/fail results."""

    def __init__(self, socket_path: Path, hidden_dir: Path | None = None, hide: list[Path] = (),
                 assignment: str | None = None):
        self.socket_path = Path(socket_path)
        self.verdicts: dict[str, list[bool]] = {}
        self.lock = threading.Lock()
        outer = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                try:
                    header, body = recv_message(self.request)
                    name = str(header.get("name"))
                    report = judge(name, body, hidden_dir, hide, assignment)
                except Exception as e:  # noqa: BLE001
                    report = {"name": str(header.get("name", "?")) if "header" in locals() else "?", "cases": [],
                              "passed": False, "problem": f"the checker could not run ({type(e).__name__})"}
                with outer.lock:
                    outer.verdicts.setdefault(report["name"], []).append(bool(report["passed"]))
                try:
                    send_message(self.request, report)
                except OSError:
                    pass

        self.server = socketserver.ThreadingUnixStreamServer(str(self.socket_path), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        self.socket_path.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m autograder.judge NAME  < cloudpickled function", file=sys.stderr)
        return 2
    name = argv[0]
    ensure_cases(name)
    report = judge(name, sys.stdin.buffer.read())
    sys.stdout.write(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The grader's side of a hidden check: holds the expected values and does the comparison.

`judge(name, fn_bytes)` loads the hidden cases of suite `name`, runs the student's function
(cloudpickle bytes) in a fresh, sandboxed runner process that only gets the inputs, reads the
runner's outputs back with `torch.load(weights_only=True)` (so a hostile runner cannot run code
here), compares them with the expected outputs and returns a report that names each case and
the size of its error, never an expected value.

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

from .engine import HIDDEN_DIR, compare, load_cases, load_suite, suite_settings
from .sandbox import run_limited, sandboxed

REPO_ROOT = Path(__file__).resolve().parent.parent
RUNNER_MEMORY = int(float(os.environ.get("AUTOGRADER_RUNNER_MEMORY_GB", "6")) * 2**30)
MAX_REQUEST = 64 * 2**20


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


def judge(name: str, fn_bytes: bytes, hidden_dir: Path | None = None, hide: list[Path] = ()) -> dict:
    import torch

    suite = load_suite(name)
    settings = suite_settings(suite)
    data = load_cases(name, hidden_dir)
    payload = {
        "suite": name, "fn": fn_bytes, "tripwire": settings["tripwire"],
        "cases": [{"name": c["name"], "inputs": c["inputs"]} for c in data["cases"]],
    }
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    hidden = Path(hidden_dir or HIDDEN_DIR)
    cmd = sandboxed([sys.executable, "-m", "autograder.runner"], hide=[hidden, *hide])
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOGRADER_")}
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["HF_HUB_OFFLINE"] = "1"
    rc, out, err = run_limited(cmd, input=buffer.getvalue(), timeout=settings["timeout"],
                               memory_bytes=RUNNER_MEMORY, cwd=REPO_ROOT, env=env)
    report = {"name": name, "cases": [], "passed": False}
    if rc is None:
        report["problem"] = f"timed out after {settings['timeout']:.0f} s on the hidden cases"
        return report
    try:
        results = torch.load(io.BytesIO(out), weights_only=True)["results"]
        by_name = {r["name"]: r for r in results}
    except Exception:  # noqa: BLE001 - a crashed or hostile runner
        report["problem"] = f"the fresh process running the function crashed (exit status {rc})"
        return report
    for case in data["cases"]:
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
    return report


def format_report(report: dict) -> str:
    cases = report["cases"]
    n_ok = sum(c["ok"] for c in cases)
    lines = [f"{report['name']}: {n_ok}/{len(cases)} hidden cases passed"]
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

    def __init__(self, socket_path: Path, hidden_dir: Path | None = None, hide: list[Path] = ()):
        self.socket_path = Path(socket_path)
        self.verdicts: dict[str, list[bool]] = {}
        self.lock = threading.Lock()
        outer = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                try:
                    header, body = recv_message(self.request)
                    name = str(header.get("name"))
                    report = judge(name, body, hidden_dir, hide)
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

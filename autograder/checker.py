"""`check_hidden(name, fn)`: what a hidden-test cell calls.

The student's function is serialised by value (cloudpickle) and handed to a judge in another
process (`autograder.judge`): the judge runs it on the hidden cases in a fresh sandboxed process
and compares; this process only ever receives the redacted report (per case: its name, pass or
fail, and whether a failure is at rounding scale or far off; for a failing function, the names
and sentences of the known mistakes it makes, `autograder.recognition`). The report's text is the
error a failing cell shows, so nbgrader's feedback carries it. While grading, the judge is a
server outside the submission's sandbox (AUTOGRADER_JUDGE_SOCKET) that also keeps the verdict
and answers each graded check once; otherwise a fresh `python -m autograder.judge` process is
started.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys


class HiddenCheckFailed(AssertionError):
    pass


def check_hidden(name: str, fn) -> None:
    """Run `fn` on the hidden cases of `name`; raise HiddenCheckFailed unless every case passes."""
    import cloudpickle

    from .protocol import recv_message, send_message
    from .report import format_report

    fn_bytes = cloudpickle.dumps(fn)
    path = os.environ.get("AUTOGRADER_JUDGE_SOCKET")
    if path:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(path)
            send_message(sock, {"name": name}, fn_bytes)
            report, _ = recv_message(sock)
    else:
        proc = subprocess.run([sys.executable, "-m", "autograder.judge", name], input=fn_bytes,
                              capture_output=True, timeout=900)
        if proc.returncode != 0:
            raise RuntimeError(f"the hidden-case checker failed to run:\n{proc.stderr.decode(errors='replace')[-2000:]}")
        report = json.loads(proc.stdout)
    text = format_report(report, numbers=False)
    if not report["passed"]:
        raise HiddenCheckFailed(text)
    print(text)

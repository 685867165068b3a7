"""Grading seconds per submission and where they go, per assignment (a part of `make bench`).

For each assignment, its solution notebook is graded as one submission by the real grading
command (`autograder.grade`: sandbox, judge, limits), one submission at a time (`--jobs 1`) so
that the figure is one submission's own time, after a first submission of the same assignment
has warmed the machine's file cache and built the stubbed library. The per-stage breakdown is
the grading row's own (`autograder.grade.stage_seconds`): copying in; nbgrader's and the
kernel's start up to the first cell; the cells less the judge; the judge's calls; nbgrader's
finish after the last cell; reading back. Hidden cases are made before the clock starts.

    python benchmarks/grading.py [NN ...]      # default: every assignment of solutions/
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def grade_solution(assignment: str, course: Path) -> dict:
    from autograder.grade import grade

    shutil.rmtree(course, ignore_errors=True)
    shutil.copytree(REPO / "solutions" / assignment, course / "submitted" / "solution" / assignment)
    t0 = time.perf_counter()
    row = grade(assignment, course, jobs=1)[0]
    row["command_seconds"] = round(time.perf_counter() - t0, 1)  # the whole command: + preparing the course
    return row


def measure(assignments: list[str] | None = None) -> dict:
    from autograder.assignments import hidden_calls
    from autograder.cases import ensure_cases

    assignments = assignments or sorted(p.name for p in (REPO / "solutions").glob("[0-9][0-9]"))
    out = {}
    with tempfile.TemporaryDirectory(prefix="bench-grading-") as tmp:
        for a in assignments:
            for suite in hidden_calls(REPO / "solutions" / a):
                ensure_cases(suite)
            grade_solution(a, Path(tmp) / "warm")  # file cache, stubs, the sandbox's autograder copy
            row = grade_solution(a, Path(tmp) / a)
            out[a] = {"seconds": row["seconds"], "command_seconds": row["command_seconds"], "status": row["status"],
                      "score": row["score"], "max_score": row["max_score"], "stages": row.get("stages", {})}
            print(f"[bench] grading {a}: {row['seconds']} s {json.dumps(row.get('stages', {}))}", flush=True)
    return out


if __name__ == "__main__":
    print(json.dumps(measure(sys.argv[1:] or None), indent=1))

"""Grade a folder of submissions: sandboxed, in parallel, with time, memory, output and process limits.

    python -m autograder.grade ASSIGNMENT [--course DIR] [--jobs N] [--timeout S] [--memory-gb G]

Submissions are read from nbgrader's layout, DIR/submitted/<student>/<ASSIGNMENT>/*.ipynb.
For each student, `nbgrader autograde` runs in a private temporary course folder (the
assignment's gradebook entries and that one submission; no source notebooks) inside a
bubblewrap sandbox: read-only file system, private /tmp, no network, the hidden cases, the
course folder (other submissions, grades) and the other students' folders invisible, and the
repository masked except for its Python environment, `autograder/`, `data/`, `configs/` and a
stubbed `course_lib` in which every graded name of ASSIGNMENT and later raises
NotImplementedError (`autograder.stubs`): the submission can neither import nor read a reference
body of an open assignment. Limits: wall-clock time on the whole run (the process tree is
killed), address space per process, size of every file written (the log included), number of
processes. The hidden-test cells reach a judge server that runs *outside* the sandbox
(`autograder.judge`): it alone holds the expected values, and its verdicts are what count: a
graded cell earns its points only when nbgrader saw it pass *and* every suite it calls passed
in the judge.

Results: DIR/autograded/<student>/<ASSIGNMENT>/ (the executed notebooks), DIR/grades/<ASSIGNMENT>.csv
and .json (one row per student: status, score, max score, per-cell scores, notes, seconds). A
student's status is one of: ok; timeout; output flood (a file or the log reached the output
limit); too many processes (the process limit was reached); out of memory (a MemoryError, or
the kernel died at the memory limit); crashed (the kernel died or nbgrader could not grade the
notebook); no notebook. One bad submission never stops the others. Without bubblewrap every row
notes that it was graded unsandboxed.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat

from .assignments import assignments as lesson_assignments
from .engine import HIDDEN_DIR, suite_names
from .judge import UNSANDBOXED, JudgeServer, ensure_cases
from .release import CONFIG, SOLUTIONS, prepare_course, tool_env
from .sandbox import OUTPUT_LIMIT, run_limited, sandbox_available, sandboxed, unsandboxed_env
from .stubs import stub_tree

HIDDEN_CALL = re.compile(r"check_hidden\(\s*[\"'](\w+)[\"']")


def hidden_gates(source_dir: Path) -> dict[tuple[str, str], list[str]]:
    """{(notebook name, grade id): [suite names]} for every graded cell that calls check_hidden."""
    gates = {}
    for path in sorted(source_dir.glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            meta = cell.metadata.get("nbgrader", {})
            if meta.get("grade") and cell.cell_type == "code":
                names = HIDDEN_CALL.findall(cell.source)
                if names:
                    gates[(path.stem, meta["grade_id"])] = names
    return gates


def read_scores(work: Path, assignment: str, student: str) -> list[dict] | None:
    """Per graded cell: notebook, grade id, score, max score; None when nothing was recorded."""
    from nbgrader.api import Gradebook, MissingEntry

    try:
        with Gradebook(f"sqlite:///{work / 'gradebook.db'}") as gb:
            submission = gb.find_submission(assignment, student)
            rows = []
            for nb in submission.notebooks:
                for grade in nb.grades:
                    # the autograder's score only: a manual score here could only come from the submission
                    rows.append({"notebook": nb.name, "cell": grade.name,
                                 "score": float(grade.auto_score or 0.0), "max_score": float(grade.max_score or 0.0)})
            return rows
    except MissingEntry:
        return None
    except Exception:  # noqa: BLE001 - a gradebook the submission damaged
        return None


def max_scores(base: Path, assignment: str) -> list[dict]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{base / 'gradebook.db'}") as gb:
        a = gb.find_assignment(assignment)
        return [{"notebook": nb.name, "cell": cell.name, "max_score": float(cell.max_score)}
                for nb in a.notebooks for cell in nb.grade_cells]


def kernel_course_lib(assignment: str) -> Path:
    """The stubbed course_lib a submission of `assignment` runs with: the graded names of the
    assignment and later are stubs (all graded names for an assignment no lesson defines)."""
    return stub_tree(assignment if assignment in lesson_assignments() else None) / "course_lib"


def cell_errors(folder: Path) -> dict[tuple[str, str], str]:
    """{(notebook, grade id): "ExceptionName: first line of its message"} of the graded cells that
    raised, in the executed notebooks of `folder`."""
    out = {}
    for path in sorted(folder.glob("*.ipynb")) if folder.is_dir() else []:
        try:
            nb = nbformat.read(path, as_version=4)
        except Exception:  # noqa: BLE001 - whatever the submission left there
            continue
        for cell in nb.cells:
            grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
            for o in cell.get("outputs", []) if cell.cell_type == "code" and grade_id else []:
                if o.get("output_type") == "error":
                    message = (str(o.get("evalue", "")).strip().splitlines() or [""])[0][:160]
                    out[(path.stem, grade_id)] = f"{o.get('ename', 'Error')}: {message}"
    return out


def outcome(rc: int | None, hit: frozenset, log: str, scores, work: Path, timeout: float) -> tuple[str, list[str]]:
    """The status of one graded submission and the notes that explain it."""
    errors = set()  # the exception names of the executed notebook's error outputs
    for path in (work / "autograded").rglob("*.ipynb") if (work / "autograded").is_dir() else []:
        try:
            nb = nbformat.read(path, as_version=4)
        except Exception:  # noqa: BLE001 - whatever the submission left there
            continue
        errors |= {o.get("ename", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                   if o.get("output_type") == "error"}
    if "output" in hit:
        return "output flood", [f"the output reached the limit of {OUTPUT_LIMIT // 2**20} MiB per file; the run was stopped"]
    if "processes" in hit:
        return "too many processes", ["the submission reached the process limit (a fork bomb?)"]
    if rc is None:
        return "timeout", [f"stopped after {timeout:.0f} s (an endless loop or a very slow cell?)"]
    if "MemoryError" in errors or "MemoryError" in log:
        return "out of memory", ["a cell ran out of memory (the limit is per process)"]
    if scores is None:
        return "crashed", [f"nbgrader autograde exited with status {rc} without recording grades"]
    if "DeadKernelError" in log or "Removing failed assignment" in log:
        return "crashed", ["the kernel died or the notebook could not be graded (see the log)"]
    if rc != 0 or "[AutogradeApp | ERROR]" in log:
        return "ok", ["errors while autograding (see the autograded notebook)"]
    return "ok", []


def grade_one(student: str, index: int, submission: Path, assignment: str, base: Path, tmp_root: Path,
              course: Path, gates: dict, cells: list[dict], timeout: float, memory_bytes: int) -> dict:
    started = time.time()
    work = tmp_root / f"s{index}"
    # no source/: the solution notebooks stay out of the submission's reach (autograde does not need them)
    shutil.copytree(base, work, ignore=shutil.ignore_patterns("source", "release", "submitted", "autograded"))
    target = work / "submitted" / student / assignment
    shutil.copytree(submission, target, symlinks=False, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    (work / "home").mkdir()
    shutil.copy(CONFIG, work / "nbgrader_config.py")
    sock_dir = tmp_root / f"j{index}"
    sock_dir.mkdir()
    row = {"student": student, "status": "ok", "score": 0.0, "max_score": sum(c["max_score"] for c in cells),
           "cells": {}, "notes": []}
    if not sandbox_available():
        row["notes"].append(UNSANDBOXED)
    if not any(target.glob("*.ipynb")):
        row["status"] = "no notebook"
        row["cells"] = {f"{c['notebook']}:{c['cell']}": 0.0 for c in cells}
        return row
    hide = [HIDDEN_DIR, course.resolve(), tmp_root]
    stub = kernel_course_lib(assignment)
    with JudgeServer(sock_dir / "judge.sock", hide=hide, assignment=assignment) as judge:
        cmd = sandboxed([sys.executable, "-m", "nbgrader", "autograde", assignment, "--student", student,
                         f"--CourseDirectory.root={work}"],
                        hide=hide, writable=[work], binds=[sock_dir], course_lib=stub)
        env = {k: v for k, v in tool_env().items() if not k.startswith(("AUTOGRADER_", "JUPYTER_"))}
        env.update({"AUTOGRADER_JUDGE_SOCKET": str(sock_dir / "judge.sock"), "HOME": str(work / "home"),
                    "HF_HUB_OFFLINE": "1", "MPLBACKEND": "Agg", "PYTHONDONTWRITEBYTECODE": "1"})
        env = unsandboxed_env(env, stub)
        result = run_limited(cmd, timeout=timeout, memory_bytes=memory_bytes, cwd=work, env=env,
                             stdout_path=work / "autograde.log", stderr="stdout")
        verdicts = {k: list(v) for k, v in judge.verdicts.items()}
    rc = result.returncode
    log = result.stdout.decode(errors="replace")
    scores = read_scores(work, assignment, student) if rc is not None else None
    row["status"], notes = outcome(rc, result.hit, log, scores, work, timeout)
    row["notes"] += notes
    by_cell = {(s["notebook"], s["cell"]): s["score"] for s in scores or []}
    errors = cell_errors(work / "autograded" / student / assignment)
    for cell in cells:
        key = (cell["notebook"], cell["cell"])
        score = min(by_cell.get(key, 0.0), cell["max_score"])
        names = gates.get(key, [])
        if score > 0 and names and not all(any(verdicts.get(n, [])) for n in names):
            row["notes"].append(f"{cell['cell']}: the hidden check of {', '.join(names)} did not pass in the judge; 0 points")
            score = 0.0
        elif score == 0 and key in errors:
            row["notes"].append(f"{cell['cell']}: 0 points ({errors[key]})")
        row["cells"][f"{cell['notebook']}:{cell['cell']}"] = score
    row["score"] = sum(row["cells"].values())
    graded = work / "autograded" / student / assignment
    if graded.is_dir():
        dest = course / "autograded" / student / assignment
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(graded, dest, symlinks=False, ignore_dangling_symlinks=True,
                        ignore=shutil.ignore_patterns("*.db", "__pycache__"))
    (course / "autograded" / student).mkdir(parents=True, exist_ok=True)
    shutil.copy(work / "autograde.log", course / "autograded" / student / f"{assignment}.log")
    row["seconds"] = round(time.time() - started, 1)
    return row


def grade(assignment: str, course: Path, jobs: int = 2, timeout: float = 600.0, memory_gb: float = 6.0,
          source: Path | None = None) -> list[dict]:
    course = Path(course).resolve()
    source = Path(source or SOLUTIONS)
    if not (source / assignment).is_dir():
        raise SystemExit(f"no assignment {assignment!r} in {source}")
    submitted = course / "submitted"
    students = sorted(p.name for p in submitted.iterdir() if (p / assignment).is_dir()) if submitted.is_dir() else []
    gates = hidden_gates(source / assignment)
    needed = sorted({n for names in gates.values() for n in names})
    unknown = [n for n in needed if n not in suite_names()]
    if unknown:
        raise SystemExit(f"hidden-test cells call suites that do not exist: {', '.join(unknown)}")
    for name in needed:  # missing or stale case files are (re)generated with a fresh secret seed
        ensure_cases(name)
    kernel_course_lib(assignment)  # build the stubbed copy once, before the parallel jobs
    with tempfile.TemporaryDirectory(prefix="course-grade-") as tmp:
        tmp_root = Path(tmp)
        base = tmp_root / "base"
        base.mkdir()
        prepare_course(base, [assignment], solutions=source)
        cells = max_scores(base, assignment)
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            futures = [pool.submit(grade_one, s, i, submitted / s / assignment, assignment, base, tmp_root, course,
                                   gates, cells, timeout, int(memory_gb * 2**30)) for i, s in enumerate(students)]
            rows = []
            for student, future in zip(students, futures):
                try:
                    rows.append(future.result())
                except Exception as e:  # noqa: BLE001 - never let one submission stop the run
                    rows.append({"student": student, "status": "crashed", "score": 0.0,
                                 "max_score": sum(c["max_score"] for c in cells), "cells": {},
                                 "notes": [f"grading error: {type(e).__name__}: {e}"]})
    out = course / "grades"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{assignment}.json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
    with open(out / f"{assignment}.csv", "w", newline="", encoding="utf-8") as f:
        cell_names = [f"{c['notebook']}:{c['cell']}" for c in cells]
        writer = csv.writer(f)
        writer.writerow(["student", "status", "score", "max_score", *cell_names, "notes"])
        for r in rows:
            writer.writerow([r["student"], r["status"], r["score"], r["max_score"],
                             *[r["cells"].get(c, 0.0) for c in cell_names], " | ".join(r["notes"])])
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("assignment", help="assignment id, e.g. 01")
    parser.add_argument("--course", type=Path, default=Path("."), help="folder holding submitted/<student>/<assignment>/")
    parser.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) // 2), help="submissions graded at once")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per submission (the whole notebook)")
    parser.add_argument("--memory-gb", type=float, default=6.0, help="address-space limit per process, GiB")
    parser.add_argument("--source", type=Path, default=None, help="source notebooks folder (default: solutions/)")
    args = parser.parse_args(argv)
    if not sandbox_available():
        print("warning: bubblewrap (bwrap) not found or AUTOGRADER_SANDBOX=0: submissions run UNSANDBOXED (time, "
              "memory, output and process limits still apply, the stubbed course_lib is only first on PYTHONPATH and "
              "the repository is readable); install it with `apt-get install bubblewrap`", file=sys.stderr)
    rows = grade(args.assignment, args.course, args.jobs, args.timeout, args.memory_gb, args.source)
    width = max([len(r["student"]) for r in rows] + [7])
    print(f"{'student':<{width}}  {'status':<11}  score")
    for r in rows:
        print(f"{r['student']:<{width}}  {r['status']:<11}  {r['score']:g}/{r['max_score']:g}  {'; '.join(r['notes'])}")
    print(f"grades written to {Path(args.course) / 'grades' / (args.assignment + '.csv')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

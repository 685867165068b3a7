"""Grade a folder of submissions: sandboxed, in parallel, with limits over each submission as a whole.

    python -m autograder.grade ASSIGNMENT [--course DIR] [--jobs N] [--timeout S] [--memory-gb G]
                               [--roster CSV] [--canvas-column TITLE]

Submissions are read from nbgrader's layout, DIR/submitted/<student>/<ASSIGNMENT>/*.ipynb. For each
student, in a private temporary folder:

1. **Copy in.** The assignment's gradebook entries and that one submission are copied into a work
   folder, never following a link: symbolic links, pipes and devices in the submission are left
   out (and noted), and the copy is bounded in size (`autograder.safe_files`). A student folder
   that is itself a link is not graded. The cells after a notebook's last graded cell are cut:
   they cannot change a score, and they are most of its time (`cut_after_last_graded_cell`).
2. **Run.** `nbgrader autograde` runs in a bubblewrap sandbox built from what it needs
   (`autograder.sandbox`): the Python environment, `autograder/` without hidden cases, `data/`,
   `configs/`, a stubbed `course_lib` in which every graded name of ASSIGNMENT and later raises
   NotImplementedError (`autograder.stubs`), and the work folder; nothing else of the machine.
   Limits (`autograder.limits.Slot`): wall-clock time on the whole run, memory and processes over
   all its processes together (the judge's processes for it included), the size of every file.
3. **Judge.** The hidden-test cells reach a judge server outside the sandbox
   (`autograder.judge.JudgeServer`): only this assignment's suites, each answered as many times as
   the graded cells call it, and its verdicts are what count: a graded cell earns its points only
   when nbgrader saw it pass *and* every suite it calls passed in the judge.
4. **Read back.** The log is written to a file of the grader's own, outside the sandbox. The
   gradebook and executed notebooks are copied out of the work folder by the same link-proof,
   bounded copy before anything reads them, and what lands in DIR/autograded/<student>/ is
   bounded in total size.

Results: DIR/autograded/<student>/<ASSIGNMENT>/ (the executed notebooks and the log),
DIR/grades/<ASSIGNMENT>.csv and .json (one row per student: status, score, max score, per-cell
scores, notes, seconds; the JSON also holds what the judge found: the known mistakes named per
cell, the failed hidden cases per suite, for `python -m autograder.class_report`), and what
Canvas's gradebook imports (`autograder.lms`): DIR/grades/<ASSIGNMENT>_canvas.csv and
DIR/grades/canvas.csv (every assignment graded so far), nbgrader's student ids mapped to Canvas's
by a roster (`--roster`, default DIR/roster.csv). A student's status is one of: ok; timeout;
output flood (a file or the log reached the output limit); too many processes; out of memory;
crashed (the kernel died or nbgrader could not grade the notebook); no notebook. One bad
submission never stops the others.
Without bubblewrap every row notes that it was graded unsandboxed. Where bubblewrap cannot make its
namespaces, AUTOGRADER_SANDBOX=user (root only) runs each submission as two unprivileged ids of its
own, never handed out twice in one grading (`autograder.uids`), each process confined to what
bubblewrap would show (`autograder.confine`), in folders whose names no other submission can
guess and which only its ids can enter; every process of its ids is killed before its results
are read, and its folders are removed before its ids are released.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat

from .assignments import assignments as lesson_assignments
from .assignments import hidden_calls, hidden_gates
from .cases import ensure_cases
from .course_folder import CONFIG, SOLUTIONS, gradebook_cells, prepare_course, tool_env
from .judge import JudgeServer
from .limits import OUTPUT_LIMIT, Slot, drain_pending, run_limited
from .lms import Roster, RosterError, default_roster, read_roster, write_canvas, write_combined
from .report import RECOGNITION_LINES, UNSANDBOXED
from .safe_files import copy_tree, read_file, remove_tree
from .sandbox import sandbox_available, sandbox_kind, sandboxed, unsandboxed_env
from .stubs import stub_tree
from .uids import allocate, become_subreaper, sweep
from .suite_api import suite_names

SUBMISSION_BYTES = 64 * 2**20  # what of a submission folder is copied in
RESULT_BYTES = 64 * 2**20  # what of a graded work folder is copied out, in total
LOG_BYTES = 4 * 2**20  # of the log, what is kept


def read_scores(gradebook: Path, assignment: str, student: str) -> list[dict] | None:
    """Per graded cell: notebook, grade id, score, max score; None when nothing was recorded."""
    from nbgrader.api import Gradebook, MissingEntry

    if not gradebook.is_file():
        return None
    try:
        with Gradebook(f"sqlite:///{gradebook}") as gb:
            submission = gb.find_submission(assignment, student)
            # the autograder's score only: a manual score here could only come from the submission
            return [{"notebook": nb.name, "cell": grade.name, "score": float(grade.auto_score or 0.0),
                     "max_score": float(grade.max_score or 0.0)} for nb in submission.notebooks for grade in nb.grades]
    except MissingEntry:
        return None
    except Exception:  # noqa: BLE001 - a gradebook the submission damaged
        return None


def kernel_course_lib(assignment: str) -> Path:
    """The stubbed course_lib a submission of `assignment` runs with: the graded names of the
    assignment and later are stubs (all graded names for an assignment no lesson defines)."""
    return stub_tree(assignment if assignment in lesson_assignments() else None) / "course_lib"


def executed_notebooks(folder: Path) -> list[nbformat.NotebookNode]:
    out = []
    for path in sorted(folder.glob("*.ipynb")) if folder.is_dir() else []:
        try:
            out.append((path.stem, nbformat.read(path, as_version=4)))
        except Exception:  # noqa: BLE001 - whatever the submission left there
            continue
    return out


def cell_errors(notebooks) -> dict[tuple[str, str], str]:
    """{(notebook, grade id): "ExceptionName: first line of its message"} of the graded cells that
    raised; for a failed hidden check, with what recognition found (`autograder.report`)."""
    out = {}
    for stem, nb in notebooks:
        for cell in nb.cells:
            grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
            for o in cell.get("outputs", []) if cell.cell_type == "code" and grade_id else []:
                if o.get("output_type") == "error":
                    lines = [line.strip() for line in str(o.get("evalue", "")).strip().splitlines()] or [""]
                    found = [line for line in lines[1:] if line.startswith(RECOGNITION_LINES)] \
                        if o.get("ename") == "HiddenCheckFailed" else []
                    message = "; ".join([lines[0][:160], *[line[:200] for line in found[:3]]])
                    out[(stem, grade_id)] = f"{o.get('ename', 'Error')}: {message}"
    return out


def outcome(rc: int | None, hit: frozenset, log: str, scores, notebooks, timeout: float, memory_gb: float) -> tuple[str, list[str]]:
    """The status of one graded submission and the notes that explain it."""
    errors = {o.get("ename", "") for _, nb in notebooks for c in nb.cells if c.cell_type == "code"
              for o in c.get("outputs", []) if o.get("output_type") == "error"}
    if "output" in hit:
        return "output flood", [f"the output reached the limit of {OUTPUT_LIMIT // 2**20} MiB per file; the run was stopped"]
    if "processes" in hit:
        return "too many processes", ["the submission reached the process limit (a fork bomb?)"]
    if rc is None:
        return "timeout", [f"stopped after {timeout:.0f} s (an endless loop or a very slow cell?)"]
    if "memory" in hit or "MemoryError" in errors or "MemoryError" in log:
        return "out of memory", [f"the submission's processes together reached the memory limit of {memory_gb:g} GiB"]
    if scores is None:
        return "crashed", [f"nbgrader autograde exited with status {rc} without recording grades"]
    if "DeadKernelError" in log or "Removing failed assignment" in log:
        return "crashed", ["the kernel died or the notebook could not be graded (see the log)"]
    if rc != 0 or "[AutogradeApp | ERROR]" in log:
        return "ok", ["errors while autograding (see the autograded notebook)"]
    return "ok", []


def cut_after_last_graded_cell(folder: Path, cells: list[dict]) -> None:
    """Each submitted notebook without the cells after its last graded cell: nothing there can
    change a score (a cell's points are its own outputs), and running them is most of a
    notebook's time in grading mode (figures, the trainer runs of 05 and 09). A notebook that
    does not parse is left for nbgrader to judge."""
    graded = {(c["notebook"], c["cell"]) for c in cells}
    for path in sorted(folder.glob("*.ipynb")):
        try:
            nb = nbformat.read(path, as_version=4)
        except Exception:  # noqa: BLE001 - whatever the submission holds
            continue
        ids = [(path.stem, c.get("metadata", {}).get("nbgrader", {}).get("grade_id")) for c in nb.cells]
        last = max((i for i, key in enumerate(ids) if key in graded), default=None)
        if last is not None and last + 1 < len(nb.cells):
            nb.cells = nb.cells[: last + 1]
            nbformat.write(nb, path)


def real_folder(path: Path) -> bool:
    """A folder that is not itself a symbolic link."""
    return path.is_dir() and not path.is_symlink()


def stage_seconds(marks: dict, notebooks, judge_seconds: dict[str, float]) -> dict:
    """Where a submission's time went: copying in; nbgrader's and the kernel's start (up to the
    first cell); the cells, less the judge; the judge's calls; nbgrader's finish (after the last
    cell: the gradebook, the files); reading back. The cells' times come from the executed
    notebook's own timing metadata."""
    from datetime import datetime

    stamps = [(c.metadata.get("execution") or {}) for _, nb in notebooks for c in nb.cells if c.cell_type == "code"]
    begin = [s["iopub.execute_input"] for s in stamps if "iopub.execute_input" in s]
    end = [s["shell.execute_reply"] for s in stamps if "shell.execute_reply" in s]
    out = {"copy_in": marks["run"] - marks["start"], "read_back": marks["done"] - marks["ran"]}
    if begin and end:
        first, last = (datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp() for t in (min(begin), max(end)))
        judge = sum(judge_seconds.values())
        out.update({"nbgrader_and_kernel_start": first - marks["run"], "cells": last - first - judge, "judge": judge,
                    "nbgrader_finish": marks["ran"] - last})
    return {k: round(max(v, 0.0), 2) for k, v in out.items()}


def grade_one(student: str, submission: Path, assignment: str, base: Path, tmp_root: Path, course: Path,
              gates: dict, budget, cells: list[dict], timeout: float, memory_gb: float) -> dict:
    """One submission's row (see the module docstring), graded in folders of its own below `tmp_root`."""
    started = time.time()
    marks = {"start": started}
    row = {"student": student, "status": "ok", "score": 0.0, "max_score": sum(c["max_score"] for c in cells),
           "cells": {f"{c['notebook']}:{c['cell']}": 0.0 for c in cells}, "notes": []}
    _record_outcomes(row, cells, gates, {})  # nothing judged yet: no mistake named, no suite answered
    if not sandbox_available():
        row["notes"].append(UNSANDBOXED)
    if not real_folder(submission) or not real_folder(submission.parent):
        row["status"] = "no notebook"
        row["notes"].append("the submission folder is a symbolic link: not followed, not graded")
        return row
    # the submission's own folders (names no other can guess) and, as unprivileged ids, its own ids:
    # all of them gone before the next submission may be handed the ids again
    folders = [Path(tempfile.mkdtemp(prefix=p, dir=tmp_root)) for p in ("w-", "p-", "j-")]
    users = allocate() if sandbox_kind() == "user" else None
    try:
        return _grade_in(row, marks, *folders, users=users, student=student, submission=submission,
                         assignment=assignment, base=base, course=course, gates=gates, budget=budget, cells=cells,
                         timeout=timeout, memory_gb=memory_gb)
    finally:
        for folder in folders:
            remove_tree(folder)
        if users is not None:
            users.release()


def _grade_in(row: dict, marks: dict, work: Path, private: Path, sock_dir: Path, *, users, student: str,
              submission: Path, assignment: str, base: Path, course: Path, gates: dict, budget, cells: list[dict],
              timeout: float, memory_gb: float) -> dict:
    """Steps 1-4 of `grade_one` in its folders: `work` (the submission's), `private` (the grader's
    own: the log, what is read back) and `sock_dir` (the judge's socket)."""
    # 1. copy in: the gradebook entries (no source notebooks), the submission without its links
    shutil.copytree(base, work, ignore=shutil.ignore_patterns("source", "release", "submitted", "autograded"),
                    dirs_exist_ok=True)
    target = work / "submitted" / student / assignment
    copied = copy_tree(submission, target, max_bytes=SUBMISSION_BYTES, skip=lambda n: n == ".ipynb_checkpoints")
    row["notes"] += copied.notes("the submission")
    for name in ("home", "tmp", "rt"):
        (work / name).mkdir()
    shutil.copy(CONFIG, work / "nbgrader_config.py")
    if not any(target.glob("*.ipynb")):
        row["status"] = "no notebook"
        return row
    cut_after_last_graded_cell(target, cells)
    # 2. run, 3. judge: the kernel and the judge's processes share one slot of limits
    stub = kernel_course_lib(assignment)
    marks["run"] = time.time()
    with Slot(int(memory_gb * 2**30), users=users) as slot, \
            JudgeServer(sock_dir / "judge.sock", assignment=assignment, budget=budget, slot=slot) as judge:
        args = [sys.executable, "-m", "autograder.nbgrader_cli", "autograde", assignment, "--student", student,
                f"--CourseDirectory.root={work}"]
        if users is not None:  # the kernel's channels on unix sockets in its own folder: it opens no TCP socket
            args += ["--KernelManager.transport=ipc", f"--KernelManager.ip={work / 'rt' / 'kernel'}"]
        cmd = sandboxed(args, course_lib=stub, writable=[work], binds=[sock_dir],
                        user=users.kernel if users is not None else None)
        env = {k: v for k, v in tool_env().items() if not k.startswith(("AUTOGRADER_", "JUPYTER_"))}
        env.update({"AUTOGRADER_JUDGE_SOCKET": str(sock_dir / "judge.sock"), "HOME": str(work / "home"),
                    "HF_HUB_OFFLINE": "1", "MPLBACKEND": "Agg", "PYTHONDONTWRITEBYTECODE": "1"})
        if users is not None:  # no /tmp in its view: its temporary files and the kernel's sockets in its folder
            env.update({"TMPDIR": str(work / "tmp"), "JUPYTER_RUNTIME_DIR": str(work / "rt")})
        result = run_limited(cmd, timeout=timeout, slot=slot, cwd=work, env=unsandboxed_env(env, stub),
                             stdout_path=private / "autograde.log", stderr="stdout")
        slot.close()  # nothing of the submission outlives its run
        marks["ran"] = time.time()
        verdicts = {k: list(v) for k, v in judge.verdicts.items()}
        refused, judge_seconds, outcomes = dict(judge.refused), dict(judge.seconds), dict(judge.outcomes)
    # 4. read back, never through a link
    out = private / "out"
    graded = work / "autograded" / student / assignment
    if real_folder(graded):
        back = copy_tree(graded, out / "autograded", max_bytes=RESULT_BYTES,
                         skip=lambda n: n.endswith(".db") or n == "__pycache__")
        row["notes"] += back.notes("the graded folder")
    gradebook = private / "gradebook.db"
    data = read_file(work / "gradebook.db", 256 * 2**20)
    if data is not None:
        gradebook.write_bytes(data)
    log = result.stdout.decode(errors="replace")
    scores = read_scores(gradebook, assignment, student) if result.returncode is not None else None
    notebooks = executed_notebooks(out / "autograded")
    row["status"], notes = outcome(result.returncode, result.hit, log, scores, notebooks, timeout, memory_gb)
    row["notes"] += notes
    row["notes"] += [f"{name}: {n} more call(s) of its hidden check refused (each graded check is answered once)"
                     for name, n in refused.items()]
    _score_cells(row, scores, cells, gates, verdicts, cell_errors(notebooks))
    _record_outcomes(row, cells, gates, outcomes)
    dest = course / "autograded" / student / assignment
    shutil.rmtree(dest, ignore_errors=True)
    if (out / "autograded").is_dir():
        copy_tree(out / "autograded", dest, max_bytes=RESULT_BYTES)
    dest.mkdir(parents=True, exist_ok=True)
    (course / "autograded" / student / f"{assignment}.log").write_bytes(result.stdout[-LOG_BYTES:])
    marks["done"] = time.time()
    row["seconds"] = round(marks["done"] - marks["start"], 1)
    row["stages"] = stage_seconds(marks, notebooks, judge_seconds)
    row["judge_seconds"] = {k: round(v, 2) for k, v in judge_seconds.items()}
    return row


def _score_cells(row: dict, scores, cells: list[dict], gates: dict, verdicts: dict, errors: dict) -> None:
    by_cell = {(s["notebook"], s["cell"]): s["score"] for s in scores or []}
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


def _record_outcomes(row: dict, cells: list[dict], gates: dict, outcomes: dict[str, dict]) -> None:
    """The judge's findings in the row, for any tool that reads the grades: `mistakes`, per graded
    cell, the names of the known mistakes its hidden checks named; `failed_cases`, per suite the
    judge answered, the hidden cases that failed ([] when it passed); `errors_not_raised`, per suite
    whose only failures were error cases, those cases; `recognition`, per suite the judge answered,
    the known mistakes named, whether the function was still a stub (`unfinished`) and what else a
    named function gets wrong (`besides`: "values", "errors" or "")."""
    row["mistakes"] = {f"{c['notebook']}:{c['cell']}": sorted({m for n in gates.get((c["notebook"], c["cell"]), [])
                                                                  for m in outcomes.get(n, {}).get("mistakes", [])})
                       for c in cells}
    row["failed_cases"] = {name: found["failed_cases"] for name, found in sorted(outcomes.items())}
    row["errors_not_raised"] = {name: found["errors_not_raised"] for name, found in sorted(outcomes.items())
                                if found["errors_not_raised"]}
    row["recognition"] = {name: {"mistakes": found["mistakes"], "unfinished": found.get("unfinished", False),
                                 "besides": found.get("besides", "")} for name, found in sorted(outcomes.items())}


def grade(assignment: str, course: Path, jobs: int = 2, timeout: float = 600.0, memory_gb: float = 6.0,
          source: Path | None = None, roster: Path | None = None, canvas_column: str | None = None) -> list[dict]:
    """Grade COURSE/submitted/*/ASSIGNMENT (see the module docstring); the rows, also written to
    COURSE/grades/. `roster` (default COURSE/roster.csv) and `canvas_column` shape the Canvas files."""
    course = Path(course).resolve()
    source = Path(source or SOLUTIONS)
    if not (source / assignment).is_dir():
        raise SystemExit(f"no assignment {assignment!r} in {source}")
    submitted = course / "submitted"
    students = sorted(p.name for p in submitted.iterdir()
                      if (p / assignment).is_dir() or (p / assignment).is_symlink()) if submitted.is_dir() else []
    gates = hidden_gates(source / assignment)
    unknown = sorted({n for names in gates.values() for n in names} - set(suite_names()))
    if unknown:
        raise SystemExit(f"hidden-test cells call suites that do not exist: {', '.join(unknown)}")
    budget = hidden_calls(source / assignment)  # how many times the judge answers each suite
    for name in sorted(budget):  # missing or stale case files: a fresh secret seed
        ensure_cases(name)
    kernel_course_lib(assignment)  # build the stubbed copy once, before the parallel jobs
    if sandbox_kind() == "user":
        become_subreaper()  # a submission's orphans become this process's, which reaps them (`autograder.uids`)
    tmp_root = Path(tempfile.mkdtemp(prefix="course-grade-"))
    try:
        tmp_root.chmod(0o711)  # a submission run as another user reaches its own work folder by name, lists nothing
        base = tmp_root / "base"
        base.mkdir(mode=0o700)  # the source notebooks: the grader's only
        prepare_course(base, [assignment], solutions=source)
        cells = gradebook_cells(base, assignment)
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            futures = [pool.submit(grade_one, s, submitted / s / assignment, assignment, base, tmp_root, course,
                                   gates, budget, cells, timeout, memory_gb) for s in students]
            rows = []
            for student, future in zip(students, futures):
                try:
                    rows.append(future.result())
                except Exception as e:  # noqa: BLE001 - never let one submission stop the run
                    rows.append({"student": student, "status": "crashed", "score": 0.0,
                                 "max_score": sum(c["max_score"] for c in cells), "cells": {},
                                 "notes": [f"grading error: {type(e).__name__}: {e}"]})
    finally:
        remove_tree(tmp_root)  # whatever a submission left in its folder, however deep
    drain_pending()  # a slot that was slow to empty (a process killed mid-allocation) is removed before the run ends
    if sandbox_kind() == "user":
        left = sweep()  # and every process of the ids this run handed out is gone
        if left:
            print(f"autograder.grade: processes of this run's ids still there after 120 s: {left}", file=sys.stderr)
    write_grades(course, assignment, rows=rows, cells=cells, roster=roster, canvas_column=canvas_column)
    return rows


def write_grades(course: Path, assignment: str, rows: list[dict], cells: list[dict], roster: Path | None = None,
                 canvas_column: str | None = None) -> None:
    """COURSE/grades/NN.json and NN.csv (the rows), then the Canvas files (`autograder.lms`): NN_canvas.csv,
    its column titled `canvas_column` (default: the notebook's name), and canvas.csv."""
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
    roster_path = roster or default_roster(course)
    lms_roster = read_roster(roster_path) if roster_path else Roster()
    write_canvas(course, assignment, rows, max_score=sum(c["max_score"] for c in cells), roster=lms_roster,
                 column=canvas_column or (cells[0]["notebook"] if cells else assignment))
    write_combined(course, lms_roster)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("assignment", help="assignment id, e.g. 01")
    parser.add_argument("--course", type=Path, default=Path("."), help="folder holding submitted/<student>/<assignment>/")
    parser.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) // 2), help="submissions graded at once")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per submission (the whole notebook)")
    parser.add_argument("--memory-gb", type=float, default=6.0, help="memory of one submission's processes together, GiB")
    parser.add_argument("--source", type=Path, default=None, help="source notebooks folder (default: solutions/)")
    parser.add_argument("--roster", type=Path, default=None,
                        help="Canvas's gradebook export, mapping student ids to Canvas (default: COURSE/roster.csv)")
    parser.add_argument("--canvas-column", default=None,
                        help="the Canvas assignment column, e.g. 'Clip loss (4711)' (default: the notebook's name)")
    args = parser.parse_args(argv)
    roster_path = args.roster or default_roster(args.course)
    try:  # a bad roster stops the command before any grading, naming its file and line
        roster = read_roster(roster_path) if roster_path else None
    except RosterError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        kind = sandbox_kind()
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if kind == "user":
        from .confine import filter_supported, landlock_abi

        if os.geteuid() != 0 or not filter_supported():
            print("error: AUTOGRADER_SANDBOX=user needs root (it switches to unprivileged ids) on x86_64 (its system "
                  "call filter)", file=sys.stderr)
            return 2
        abi = landlock_abi()
        print("note: no bubblewrap (AUTOGRADER_SANDBOX=user): each submission runs as two unprivileged ids of its own "
              "under a seccomp filter, with the time, memory, output and process limits; " +
              (f"Landlock (ABI {abi}) limits what it reads to what bubblewrap would show" if abi else
               "this kernel has no Landlock, so it reads whatever its ids may: the grader's own files (the "
               "repository, its hidden cases, any other copy of the course) must be unreadable to others"),
              file=sys.stderr)
    elif not sandbox_available():
        print("warning: bubblewrap (bwrap) not found or AUTOGRADER_SANDBOX=0: submissions run UNSANDBOXED (time, "
              "memory, output and process limits still apply, the stubbed course_lib is only first on PYTHONPATH and "
              "the repository is readable); install it with `apt-get install bubblewrap`", file=sys.stderr)
    rows = grade(args.assignment, args.course, jobs=args.jobs, timeout=args.timeout, memory_gb=args.memory_gb,
                 source=args.source, roster=roster_path, canvas_column=args.canvas_column)
    width = max([len(r["student"]) for r in rows] + [7])
    print(f"{'student':<{width}}  {'status':<11}  score")
    for r in rows:
        print(f"{r['student']:<{width}}  {r['status']:<11}  {r['score']:g}/{r['max_score']:g}  {'; '.join(r['notes'])}")
    grades = Path(args.course) / "grades"
    print(f"grades written to {grades / (args.assignment + '.csv')}; for Canvas's gradebook import: "
          f"{grades / (args.assignment + '_canvas.csv')} and {grades / 'canvas.csv'} (every assignment graded so far)")
    unknown = [r["student"] for r in rows if roster is not None and roster.student(r["student"]) is None]
    if unknown:
        print(f"{len(unknown)} student id(s) not in the roster {roster_path}, written with the id as SIS Login ID: "
              f"{', '.join(unknown[:20])}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What run_autograder does for one submission: find the notebook, grade it as `make grade` does,
write results.json.

Steps 1 and 3 come once a notebook is found (before anything of it runs).

1. **Lock.** The grader's files become root-only: everything under ROOT/source but what the
   sandbox shows (course/data, course/configs and course/build, which holds the stubbed
   course_lib and the kernel side of autograder), and the upload and submission_metadata.json;
   ROOT, source/ and course/ can be passed through by name, not listed. Where bubblewrap cannot
   run, the notebook runs as unprivileged ids, which then cannot read the hidden cases, the
   references, the source notebook or the grader's modules.
2. **Find.** ROOT/submission is copied link-proof (`autograder.safe_files`: links, pipes and
   devices left out and noted, at most 64 folders deep) into a private folder; its notebooks, at
   any depth and of any name (not in .ipynb_checkpoints/ or __MACOSX/), are counted: none or
   several is a result that says so, and nothing is graded.
3. **Sandbox.** bubblewrap where it can make its namespaces here; else, as root on x86_64, the
   submission's own unprivileged ids (AUTOGRADER_SANDBOX=user, `autograder.sandbox`); else
   unsandboxed. When AUTOGRADER_SANDBOX is set, it decides instead, as for `make grade`.
4. **Grade.** Before anything of the notebook runs, results.json already holds the at-once view
   and a run that "did not finish": what stays if this process is stopped. Then the grading
   command itself, `python -m autograder.grade` (what `make grade` runs: the same stubbed library,
   judge, limits and hidden cases), on a private course folder holding that one notebook under the
   assignment's notebook name, in a process group of its own with a deadline this process keeps:
   the settings' timeout plus GRACE seconds from the start. Past it the grading is killed, and
   every process of the ids it held (`autograder.uids.holders_of`), and the run is a timeout.
   This process is root's: no process of the submission can signal or stop it.
5. **Results.** ROOT/results/results.json (`autograder.gradescope_results`), written whole; the
   grading row goes to stdout, which Gradescope shows the instructor. When the grader itself
   fails, the results say so after the due date (and stdout has the traceback): the at-once view
   is the same whatever happened to the run.
"""

from __future__ import annotations

import json
import os
import signal
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import nbformat

from .gradescope_results import error_results, not_graded, problems, results, ungraded_row
from .safe_files import copy_tree, shown

SETTINGS = "gradescope.json"  # in ROOT/source: what the zip grades and how (`autograder.gradescope`)
PUBLIC = ("data", "configs", "build")  # of ROOT/source/course: what the sandbox shows
SKIP = (".ipynb_checkpoints", "__MACOSX")  # folders an editor or an archiver adds to an upload
STUDENT = "submission"  # the one student of the private course folder
UPLOAD_BYTES = 64 * 2**20
GRACE = 45.0  # seconds past the notebook's time limit that the whole grading may take (setup, read-back)


def warm_caches(assignment: str) -> list[Path]:
    """What the sandbox shows of the grader's code, built into course/build once by setup.sh (else
    by the first grading): the stubbed course_lib of `assignment` and the kernel side of autograder."""
    from .harness import sandbox_autograder
    from .stubs import stub_tree

    return [stub_tree(assignment) / "course_lib", sandbox_autograder()]


def lock_grader_files(root: Path) -> None:
    """Step 1 (see the module docstring)."""
    os.umask(0o022)
    source, course = root / "source", root / "source" / "course"
    (course / "build").mkdir(exist_ok=True)
    for path in [*source.iterdir(), *course.iterdir(), root / "submission", root / "submission_metadata.json"]:
        if path == course or path.is_symlink() or not path.exists():
            continue
        if path.parent == course and path.name in PUBLIC:
            for folder, _, files in os.walk(path):  # readable, however the zip was unpacked
                os.chmod(folder, 0o755)
                for name in files:
                    file = os.path.join(folder, name)
                    os.chmod(file, stat.S_IMODE(os.lstat(file).st_mode) | 0o444)
        else:
            path.chmod(stat.S_IMODE(path.stat().st_mode) & 0o700)
    root.chmod(stat.S_IMODE(root.stat().st_mode) | 0o011)
    for folder in (source, course):
        folder.chmod(0o711)


def find_notebook(submission: Path, into: Path) -> tuple[Path | None, str, list[str]]:
    """Step 2: (the notebook's copy or None, what was found, notes on what was left out)."""
    if not submission.is_dir() or submission.is_symlink():
        return None, "no upload", []
    copied = copy_tree(submission, into, max_bytes=UPLOAD_BYTES, skip=lambda n: n in SKIP or n.startswith("._"))
    notes = copied.notes("your upload")
    found = sorted(p for p in into.rglob("*.ipynb") if p.is_file())
    names = [shown(p.relative_to(into).as_posix()) for p in found]
    if not found:
        links = [name for name in copied.links if name.endswith(".ipynb")]
        return None, "no notebook (.ipynb) in your upload" + (
            f" ({', '.join(links)}: a symbolic link, not followed)" if links else ""), notes
    if len(found) > 1:
        return None, f"{len(found)} notebooks in your upload ({', '.join(names[:5])}): upload exactly one", notes
    return found[0], names[0], notes


def choose_sandbox() -> str | None:
    """Step 3: sets AUTOGRADER_SANDBOX when it is not set; the sentence the results carry about it
    (None under bubblewrap, and unsandboxed, where the grading row says so itself)."""
    from .confine import filter_supported, landlock_abi
    from .sandbox import bubblewrap_works, sandbox_kind

    if "AUTOGRADER_SANDBOX" not in os.environ:
        if bubblewrap_works():
            os.environ["AUTOGRADER_SANDBOX"] = "1"
        elif os.geteuid() == 0 and filter_supported():
            os.environ["AUTOGRADER_SANDBOX"] = "user"
        else:
            os.environ["AUTOGRADER_SANDBOX"] = "0"
    if sandbox_kind() != "user":
        return None
    files = ("Landlock limited what it could read to what bubblewrap would show" if landlock_abi() else
             "file permissions kept the hidden cases, the references and the grader's files from it")
    return ("sandbox: bubblewrap cannot make its namespaces here, so your notebook and the judge's processes ran "
            "as unprivileged ids of their own under a seccomp filter; " + files +
            ", under the usual time, memory and process limits")


def graded_cells(source: Path) -> list[dict]:
    """[{notebook, cell, max_score}] of the source notebook's graded cells (nbgrader's metadata), in order."""
    out = []
    for path in sorted(source.glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if meta.get("grade"):
                out.append({"notebook": path.stem, "cell": meta["grade_id"], "max_score": float(meta.get("points", 0))})
    return out


def grade_one_notebook(course: Path, source: Path, settings: dict, deadline: float) -> dict:
    """Step 4: the grading command on COURSE/submitted/*/NN, stopped at `deadline` (time.time());
    its row, from COURSE/grades/NN.json."""
    assignment = settings["assignment"]
    cmd = [sys.executable, "-m", "autograder.grade", assignment, "--course", str(course), "--jobs", "1",
           "--timeout", str(settings["timeout"]), "--memory-gb", str(settings["memory_gb"]), "--source", str(source)]
    proc = subprocess.Popen(cmd, cwd=source.parent, start_new_session=True)
    try:
        proc.wait(timeout=max(1.0, deadline - time.time()))
    except subprocess.TimeoutExpired:
        stop_grading(proc)
        return ungraded_row(graded_cells(source / assignment), "timeout", [
            f"the grading passed its time limit ({settings['timeout']:.0f} s for the notebook, {GRACE:.0f} s more "
            "for the rest) and was stopped"])
    grades = course / "grades" / f"{assignment}.json"
    if proc.returncode != 0 or not grades.is_file():
        raise RuntimeError(f"the grading command exited with status {proc.returncode}")
    return json.loads(grades.read_text(encoding="utf-8"))[0]


def stop_grading(proc: subprocess.Popen) -> None:
    """Kill the grading command's process group and every process of the ids it held."""
    from .uids import holders_of, kill_released

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    held = holders_of(proc.pid)
    if held:
        left = kill_released(held)
        if left:
            print(f"processes of ids {held} left after the grading was stopped: {left}", flush=True)


def grade_submission(root: Path, started: float) -> dict:
    """Steps 1-4 and the results of step 5."""
    settings = json.loads((root / "source" / SETTINGS).read_text(encoding="utf-8"))
    assignment = settings["assignment"]
    source = root / "source" / "course" / "solutions"
    cells = graded_cells(source / assignment)
    with tempfile.TemporaryDirectory(prefix="course-gradescope-") as tmp:
        upload, found, notes = find_notebook(root / "submission", Path(tmp) / "upload")
        if upload is None:  # nothing of the upload runs
            log(started, f"not graded: {found}; {notes}")
            return not_graded(found, cells, notes=notes, settings=settings, seconds=time.time() - started)
        lock_grader_files(root)
        sandbox_note = choose_sandbox()
        log(started, f"found {found}; the grader's files locked; AUTOGRADER_SANDBOX={os.environ['AUTOGRADER_SANDBOX']}")
        found = f"{found} (graded as {settings['notebook']})"

        def with_row(row: dict, notebook=None) -> dict:
            return results(row, cells, notebook=notebook, settings=settings, seconds=time.time() - started,
                           found=found, upload_notes=notes, sandbox_note=sandbox_note)

        write_results(root, with_row(ungraded_row(cells, "the grading did not finish")))
        target = Path(tmp) / "course" / "submitted" / STUDENT / assignment
        target.mkdir(parents=True)
        shutil.copyfile(upload, target / settings["notebook"])
        try:
            row = grade_one_notebook(Path(tmp) / "course", source, settings,
                                     deadline=started + float(settings["timeout"]) + GRACE)
        except Exception as e:  # noqa: BLE001 - said after the due date, like any other status
            traceback.print_exc()
            return with_row(ungraded_row(cells, f"not graded: the autograder itself failed ({type(e).__name__}), not "
                                                "your notebook; your instructor can see why and will regrade it"))
        log(started, f"graded: {json.dumps(row, indent=1)}")
        executed = Path(tmp) / "course" / "autograded" / STUDENT / assignment / settings["notebook"]
        try:
            notebook = nbformat.read(executed, as_version=4)
        except Exception:  # noqa: BLE001 - none left (a timeout, a crash) or not readable: the row says why
            notebook = None
        return with_row(row, notebook)


def write_results(root: Path, data: dict) -> None:
    """ROOT/results/results.json, whole (written aside, then renamed), in Gradescope's format."""
    wrong = problems(data)
    if wrong:
        print(f"results do not conform to Gradescope's format: {wrong}", flush=True)
        data = error_results("its results did not conform to Gradescope's format")
    path = root / "results" / "results.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    tmp.replace(path)


def run(root: Path) -> int:
    """Grade ROOT/submission and write ROOT/results/results.json, whatever happens."""
    started = time.time()
    root = Path(root).resolve()
    try:
        data = grade_submission(root, started)
    except Exception as e:  # noqa: BLE001 - the student gets a clear result, the instructor the traceback
        traceback.print_exc()
        data = error_results(type(e).__name__)
    write_results(root, data)
    log(started, f"results.json written: score {data.get('score')}, {len(data.get('tests', []))} tests")
    return 0


def log(started: float, text: str) -> None:
    """A line of run_autograder's output (Gradescope shows it to the instructor), with the seconds so far."""
    print(f"[{time.time() - started:5.1f} s] {text}", flush=True)

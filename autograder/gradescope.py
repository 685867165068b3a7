"""The Gradescope autograder of an assignment: the zip a class uploads, and its command line.

    make gradescope ASSIGNMENT=07 OUT=build/gs      # = python -m autograder.gradescope build 07 --out build/gs

writes OUT/autograder_07.zip in Gradescope's autograder format
(https://gradescope-autograders.readthedocs.io/en/latest/specs/): Gradescope unpacks it into
/autograder/source, runs `setup.sh` once as root to build the grading image, copies
`run_autograder` to /autograder/run_autograder and runs it per submission, with the upload in
/autograder/submission; it reads /autograder/results/results.json. The zip holds

    setup.sh run_autograder   from autograder/gradescope_template/ (the student user filled in)
    requirements.lock         requirements-grading.lock: every package's exact version and wheel hash
    torch.lock                its torch entry (setup.sh installs it first, from PyTorch's CPU index)
    gradescope.json           the settings: assignment, notebook, time and memory limits, visibility
    course/                   the grading side, laid out as the repository: autograder/ (no other
                              command's module, no graded function's own tests; registry.json
                              stands in for the lessons), course_lib/,
                              data/, configs/, solutions/NN/ (nbgrader's gradebook is made from it) and
                              autograder/hidden/: the hidden cases of NN's suites, drawn with a fresh
                              secret seed for this zip only

and nothing else: no tests, lessons, notebooks, other assignments or git history. Each build draws
new hidden cases, so two zips of one assignment share none; keep the zip as private as the cases.

    python -m autograder.gradescope run [--root /autograder]       # what run_autograder calls
    python -m autograder.gradescope prepare [--root /autograder]   # what setup.sh calls

Visibility (`--visibility` and the two below; Gradescope's values: visible, after_due_date,
after_published, hidden): the per-cell results, the run's status and with them the score, after
the due date by default, since a student may resubmit until then and every submission gets the
judge's one answer per graded check (visible at once, a verdict per hidden case and resubmission
would be an oracle on the hidden cases); a "Submission" line visible at once
(`--status-visibility`) that says only what is known before the notebook runs (which file was
found, what of the upload was left out: `autograder.gradescope_results.at_once`), so a student
knows the upload was taken; run_autograder's stdout (the grader's log, for the instructor) hidden
(`--stdout-visibility`).
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

from .assignments import REPO_ROOT, SOLUTIONS, assignments, hidden_calls, registry
from .gradescope_run import SETTINGS, run, warm_caches

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "gradescope_template"
VISIBILITY = ("visible", "after_due_date", "after_published", "hidden")
# of autograder/: the other commands' modules and files (a kit, a release, feedback, case making, the lock)
NOT_SHIPPED = ("hidden", "kit_template", "gradescope_template", "kit.py", "release.py", "feedback.py",
               "make_cases.py", "requirements_lock.py", "registry.json", "__pycache__")
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", ".*")
# What one honest submission took here, every process of run_autograder together (the grader,
# nbgrader, the kernel, the judge's processes): peak PSS, sampled every 0.1 s, and CPU seconds
# (`python benchmarks/grading.py --gradescope 07 09 --repeat 1`, 2 cores at load average 13-26).
# In a 768 MB, half-CPU cgroup (`--container 768M,0.5`) 07 still earned 15/15 with no OOM kill,
# the cgroup held at its limit (0.71 GiB charged); 09 was not run there.
MEASURED = {"07": {"peak_gib": 0.80, "cpu_seconds": 12.1}, "09": {"peak_gib": 1.03, "cpu_seconds": 18.1}}
DEFAULT_CONTAINER_GIB = 768 * 2**20 / 2**30  # Gradescope's default container: 768 MB, half a CPU
# Of 07's peak in that cgroup, the processes outside the zip's own memory limit: the grading
# command (0.23 GiB) and run_autograder's Python (0.045 GiB), rounded up.
GRADER_GIB = 0.3


def locked_requirements() -> tuple[str, str]:
    """(the lock, its torch entry): what setup.sh installs. A lock that has drifted from
    requirements-cpu.txt stops the build, naming each difference."""
    from . import requirements_lock  # the build's alone: not in the zip

    lock = requirements_lock.read()
    found = requirements_lock.problems(lock, requirements_lock.grading_requirements())
    if found:
        raise SystemExit(f"{requirements_lock.LOCK.name} does not hold requirements-cpu.txt (make lock makes it "
                         "again):\n  " + "\n  ".join(found))
    if "torch" not in lock or not lock["torch"].version.endswith("+cpu"):
        raise SystemExit(f"{requirements_lock.LOCK.name}: torch must be its CPU build (torch==X.Y.Z+cpu)")
    return requirements_lock.LOCK.read_text(encoding="utf-8"), requirements_lock.entry_text("torch", lock["torch"])


def settings_of(assignment: str, notebook: str, *, timeout: float, memory_gb: float, visibility: dict) -> dict:
    """gradescope.json: what run_autograder grades and how its results are shown."""
    for what, value in visibility.items():
        if value not in VISIBILITY:
            raise SystemExit(f"--{what}-visibility {value!r}: one of {', '.join(VISIBILITY)}")
    return {"assignment": assignment, "notebook": notebook, "timeout": float(timeout), "memory_gb": float(memory_gb),
            "visibility": dict(visibility)}


def stage(assignment: str, out: Path, settings: dict) -> None:
    """The zip's contents in the folder `out` (see the module docstring)."""
    from .cases import ensure_cases

    lock, torch = locked_requirements()
    for name in ("setup.sh", "run_autograder"):
        text = (TEMPLATES / name).read_text(encoding="utf-8")
        (out / name).write_text(text, encoding="utf-8")
        (out / name).chmod(0o755)
    (out / "requirements.lock").write_text(lock, encoding="utf-8")
    (out / "torch.lock").write_text(torch, encoding="utf-8")
    (out / SETTINGS).write_text(json.dumps(settings, indent=1) + "\n", encoding="utf-8")
    course = out / "course"
    shutil.copytree(HERE, course / "autograder", ignore=lambda folder, names: [
        n for n in names if n in NOT_SHIPPED or n.startswith((".", "test_")) or n == "conftest.py" or n.endswith(".pyc")])
    for name in ("course_lib", "data", "configs"):
        shutil.copytree(REPO_ROOT / name, course / name, ignore=IGNORE)
    shutil.copytree(SOLUTIONS / assignment, course / "solutions" / assignment, ignore=IGNORE)
    snapshot = {"assignments": assignments(), "graded": [[g.assignment, g.module, g.name] for g in registry()]}
    (course / "autograder" / "registry.json").write_text(json.dumps(snapshot, indent=1) + "\n", encoding="utf-8")
    for suite in sorted(hidden_calls(SOLUTIONS / assignment)):  # a fresh secret seed each, never stored
        ensure_cases(suite, hidden_dir=course / "autograder" / "hidden")


def write_zip(folder: Path, path: Path) -> Path:
    """`folder`'s files (not its dot files, such as the case files' locks) into the zip `path`, modes kept."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".zip.tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for file in sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".")):
            info = zipfile.ZipInfo.from_file(file, file.relative_to(folder).as_posix())
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (0o100755 if file.stat().st_mode & 0o100 else 0o100644) << 16
            z.writestr(info, file.read_bytes())
    tmp.replace(path)
    return path


def build(assignment: str, out: Path, *, timeout: float = 300.0, memory_gb: float = 4.0,
          visibility: dict | None = None) -> Path:
    """Write OUT/autograder_NN.zip for `assignment`; returns its path."""
    if not (SOLUTIONS / assignment).is_dir():
        raise SystemExit(f"no assignment {assignment!r} in {SOLUTIONS}")
    notebooks = sorted((SOLUTIONS / assignment).glob("*.ipynb"))
    if len(notebooks) != 1:
        raise SystemExit(f"{SOLUTIONS / assignment}: {len(notebooks)} notebooks; a Gradescope autograder grades one")
    shown = {"cells": "after_due_date", "status": "visible", "stdout": "hidden", **(visibility or {})}
    settings = settings_of(assignment, notebooks[0].name, timeout=timeout, memory_gb=memory_gb, visibility=shown)
    with tempfile.TemporaryDirectory(prefix="course-gradescope-") as tmp:
        stage(assignment, Path(tmp), settings)
        return write_zip(Path(tmp), Path(out) / f"autograder_{assignment}.zip")


def container_advice(*, memory_gb: float, timeout: float) -> str:
    """What to set in Gradescope's Autograder Settings for this zip, and why (printed at build time)."""
    peaks = ", ".join(f"{m['peak_gib']:.2f} GiB for {a}" for a, m in MEASURED.items())
    cpu = ", ".join(f"{m['cpu_seconds']:.0f} s for {a}" for a, m in MEASURED.items())
    need_gb = math.ceil((memory_gb + GRADER_GIB) * 2**30 / 10**9)  # Gradescope's settings are in decimal GB
    return "\n".join([
        "Gradescope's Autograder Settings for this zip (its default container, 768 MB of memory and half a CPU, "
        "is too small):",
        f"  memory: at least {need_gb} GB. One honest submission's processes together (the "
        f"grader, nbgrader, the kernel, the judge's processes) peaked at {peaks} here (PSS), torch loaded in several "
        "of them: 768 MB held 07 only at its edge. And the zip stops a submission's own processes at "
        f"{memory_gb:g} GiB (--memory-gb): the container must hold that and the grader's {GRADER_GIB:g} GiB, or a "
        "notebook that takes too much is killed by the container instead of graded \"out of memory\". For a smaller "
        f"container, build with --memory-gb at most its memory less {GRADER_GIB:g} GiB.",
        f"  CPU: half a CPU is enough. A submission took {cpu} of CPU time here, so about twice that at half a CPU "
        "(07 earned full marks in a 768 MB, half-CPU cgroup); more CPU only makes it faster.",
        f"  timeout: 10 minutes (Gradescope's default) or more, well above the zip's own {timeout:g} s per notebook: "
        "run_autograder also starts Python and makes the gradebook, and a run Gradescope stops writes no results.",
    ])


def prepare(root: Path) -> None:
    """setup.sh's last step: the caches every submission uses (the stubbed course_lib, the
    sandbox's copy of autograder), built once into the image; a broken environment fails here."""
    import nbgrader  # noqa: F401 - what grading runs
    import torch  # noqa: F401

    settings = json.loads((Path(root) / "source" / SETTINGS).read_text(encoding="utf-8"))
    for path in warm_caches(settings["assignment"]):
        print(f"built {path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="write OUT/autograder_NN.zip")
    b.add_argument("assignment")
    b.add_argument("--out", type=Path, required=True)
    b.add_argument("--timeout", type=float, default=300.0, help="seconds per submission (set Gradescope's own "
                   "autograder timeout a few minutes above it)")
    b.add_argument("--memory-gb", type=float, default=4.0, help="memory of one submission's processes together, GiB")
    for what, default in (("cells", "after_due_date"), ("status", "visible"), ("stdout", "hidden")):
        flag = "--visibility" if what == "cells" else f"--{what}-visibility"
        b.add_argument(flag, dest=what, default=default, choices=VISIBILITY)
    for name in ("run", "prepare"):
        sub.add_parser(name).add_argument("--root", type=Path, default=Path("/autograder"))
    args = parser.parse_args(argv)
    if args.command == "build":
        path = build(args.assignment.zfill(2), args.out, timeout=args.timeout, memory_gb=args.memory_gb,
                     visibility={"cells": args.cells, "status": args.status, "stdout": args.stdout})
        print(f"wrote {path} ({path.stat().st_size / 2**20:.1f} MiB): upload it as the assignment's autograder")
        print(container_advice(memory_gb=args.memory_gb, timeout=args.timeout))
        return 0
    if args.command == "prepare":
        prepare(args.root)
        return 0
    return run(args.root)


if __name__ == "__main__":
    sys.exit(main())

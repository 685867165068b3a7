"""The Gradescope autograder of an assignment: the zip a class uploads, and its command line.

    make gradescope ASSIGNMENT=07 OUT=build/gs      # = python -m autograder.gradescope build 07 --out build/gs

writes OUT/autograder_07.zip in Gradescope's autograder format
(https://gradescope-autograders.readthedocs.io/en/latest/specs/): Gradescope unpacks it into
/autograder/source, runs `setup.sh` once as root to build the grading image, copies
`run_autograder` to /autograder/run_autograder and runs it per submission, with the upload in
/autograder/submission; it reads /autograder/results/results.json. The zip holds

    setup.sh run_autograder   from autograder/gradescope_template/ (the torch pin and user filled in)
    requirements.txt          requirements-cpu.txt without the test tools (torch's CPU wheel goes first)
    gradescope.json           the settings: assignment, notebook, time and memory limits, visibility
    course/                   the grading side, laid out as the repository: autograder/ (no other
                              command's module; registry.json stands in for the lessons), course_lib/,
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
import re
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
TEST_TOOLS = ("pytest", "pytest-xdist", "hypothesis", "playwright")  # in requirements-cpu.txt, not for grading
# of autograder/: the other commands' modules and files (a kit, a release, feedback, case making)
NOT_SHIPPED = ("hidden", "kit_template", "gradescope_template", "kit.py", "release.py", "feedback.py",
               "make_cases.py", "registry.json", "__pycache__")
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", ".*")


def requirement_name(line: str) -> str:
    return re.split(r"[<>=!~\[ ;]", line.strip(), maxsplit=1)[0].lower()


def grading_requirements() -> tuple[str, str]:
    """(requirements.txt for the zip: requirements-cpu.txt less TEST_TOOLS, torch's pin line)."""
    lines = (REPO_ROOT / "requirements-cpu.txt").read_text(encoding="utf-8").splitlines()
    kept = [line for line in lines if line.lstrip().startswith("#") or requirement_name(line) not in TEST_TOOLS]
    torch = [line.strip() for line in lines if requirement_name(line) == "torch"]
    if len(torch) != 1 or "==" not in torch[0]:
        raise SystemExit("requirements-cpu.txt must pin torch (torch==X.Y.Z): setup.sh installs that CPU wheel")
    return "\n".join(kept) + "\n", torch[0]


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

    requirements, torch = grading_requirements()
    for name in ("setup.sh", "run_autograder"):
        text = (TEMPLATES / name).read_text(encoding="utf-8")
        text = text.replace("@TORCH@", torch)
        (out / name).write_text(text, encoding="utf-8")
        (out / name).chmod(0o755)
    (out / "requirements.txt").write_text(requirements, encoding="utf-8")
    (out / SETTINGS).write_text(json.dumps(settings, indent=1) + "\n", encoding="utf-8")
    course = out / "course"
    shutil.copytree(HERE, course / "autograder", ignore=lambda folder, names: [
        n for n in names if n in NOT_SHIPPED or n.startswith(".") or n.endswith(".pyc")])
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
        return 0
    if args.command == "prepare":
        prepare(args.root)
        return 0
    return run(args.root)


if __name__ == "__main__":
    sys.exit(main())

"""nbgrader course folders: the course configuration, running nbgrader in a folder, and a
folder prepared with the source notebooks of some assignments and their gradebook entries.

The release, grading and feedback commands each work in a temporary course folder of their own,
so that no gradebook or nbgrader state lands in the repository.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
SOLUTIONS = REPO_ROOT / "solutions"
NOTEBOOKS = REPO_ROOT / "notebooks"
CONFIG = HERE / "nbgrader_config.py"


def solution_assignments(solutions: Path = SOLUTIONS) -> list[str]:
    """The assignments that have source notebooks in `solutions`."""
    return sorted(p.name for p in solutions.iterdir() if p.is_dir() and any(p.glob("*.ipynb")))


def tool_env(env: dict | None = None) -> dict:
    """The environment with this interpreter's bin folder first on PATH (nbgrader calls `alembic`)."""
    env = dict(os.environ if env is None else env)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


def nbgrader(args: list[str], course: Path, env: dict | None = None, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    """Run `nbgrader ARGS` (through `autograder.nbgrader_cli`) with the course config in the course folder `course`."""
    shutil.copy(CONFIG, course / "nbgrader_config.py")
    cmd = [sys.executable, "-m", "autograder.nbgrader_cli", *args, f"--CourseDirectory.root={course}"]
    proc = subprocess.run(cmd, cwd=course, env=tool_env(env), capture_output=True, text=True, **kwargs)
    if check and proc.returncode != 0:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def prepare_course(course: Path, names: list[str], solutions: Path = SOLUTIONS) -> None:
    """A course folder with source/NN copied from `solutions` and each assignment generated
    (this fills release/NN and the gradebook with the grade cells)."""
    for name in names:
        shutil.copytree(solutions / name, course / "source" / name,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    for name in names:
        nbgrader(["generate_assignment", name, "--force"], course)


def gradebook_cells(course: Path, assignment: str) -> list[dict]:
    """[{notebook, cell, max_score}] of every graded cell of `assignment` in a prepared course folder."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        a = gb.find_assignment(assignment)
        return [{"notebook": nb.name, "cell": cell.name, "max_score": float(cell.max_score)}
                for nb in a.notebooks for cell in nb.grade_cells]

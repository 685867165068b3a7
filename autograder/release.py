"""Generate the student notebooks `notebooks/NN/` from the source notebooks `solutions/NN/`.

    python -m autograder.release            # (re)write notebooks/
    python -m autograder.release --check    # fail if notebooks/ differs from a fresh release
    python -m autograder.release --only 06  # just these assignments

`nbgrader generate_assignment` runs in a temporary course folder (so no gradebook or
nbgrader state lands in the repository); its output is written back without outputs or
execution counts, in a stable form, so that the committed notebooks change only when the
lessons do. `make release` first rebuilds `solutions/` from `lessons/`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
SOLUTIONS = REPO_ROOT / "solutions"
NOTEBOOKS = REPO_ROOT / "notebooks"
CONFIG = HERE / "nbgrader_config.py"


def assignments(solutions: Path = SOLUTIONS) -> list[str]:
    return sorted(p.name for p in solutions.iterdir() if p.is_dir() and any(p.glob("*.ipynb")))


def nbgrader(args: list[str], course: Path, env: dict | None = None, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    """Run `nbgrader ARGS` with the course config in the course folder `course`."""
    shutil.copy(CONFIG, course / "nbgrader_config.py")
    cmd = [sys.executable, "-m", "nbgrader", *args, f"--CourseDirectory.root={course}"]
    proc = subprocess.run(cmd, cwd=course, env=tool_env(env), capture_output=True, text=True, **kwargs)
    if check and proc.returncode != 0:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def tool_env(env: dict | None = None) -> dict:
    """The environment with this interpreter's bin folder first on PATH (nbgrader calls `alembic`)."""
    env = dict(os.environ if env is None else env)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


def prepare_course(course: Path, names: list[str], solutions: Path = SOLUTIONS) -> None:
    """A course folder with source/NN copied from solutions/ and each assignment generated
    (this fills release/NN and the gradebook with the grade cells)."""
    for name in names:
        shutil.copytree(solutions / name, course / "source" / name,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    for name in names:
        nbgrader(["generate_assignment", name, "--force"], course)


def clean(nb: nbformat.NotebookNode) -> str:
    """A stable text form of a release notebook: no outputs, no execution counts."""
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    return nbformat.writes(nb) + "\n"


def release_texts(names: list[str] | None = None) -> dict[Path, str]:
    """{path under notebooks/: text} of a fresh release of the named (default: all) assignments."""
    names = names or assignments()
    texts = {}
    with tempfile.TemporaryDirectory(prefix="course-release-") as tmp:
        course = Path(tmp)
        prepare_course(course, names)
        for name in names:
            for path in sorted((course / "release" / name).rglob("*")):
                if path.is_file():
                    rel = Path(name) / path.relative_to(course / "release" / name)
                    if path.suffix == ".ipynb":
                        texts[rel] = clean(nbformat.read(path, as_version=4))
                    else:
                        texts[rel] = path.read_text(encoding="utf-8")
    return texts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if notebooks/ differs from a fresh release")
    parser.add_argument("--only", nargs="+", metavar="NN", help="release only these assignments (e.g. --only 06 07)")
    args = parser.parse_args(argv)
    texts = release_texts(args.only)
    names = {rel.parts[0] for rel in texts}
    current = {p.relative_to(NOTEBOOKS): p.read_text(encoding="utf-8")
               for name in names for p in (NOTEBOOKS / name).rglob("*") if p.is_file() and "__pycache__" not in p.parts} \
        if NOTEBOOKS.exists() else {}
    stale = sorted({rel for rel in texts if current.get(rel) != texts[rel]} | {rel for rel in current if rel not in texts})
    if args.check:
        if stale:
            print("notebooks/ differs from a fresh release of solutions/ (run `make release`):",
                  *[f"notebooks/{rel}" for rel in stale], sep="\n  ", file=sys.stderr)
            return 1
        return 0
    for rel in stale:
        target = NOTEBOOKS / rel
        if rel in texts:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(texts[rel], encoding="utf-8")
            print(f"wrote notebooks/{rel}")
        else:
            target.unlink()
            print(f"removed notebooks/{rel}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())

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
import sys
import tempfile
from pathlib import Path

import nbformat

from .course_folder import NOTEBOOKS, prepare_course, solution_assignments


def clean(nb: nbformat.NotebookNode) -> str:
    """A stable text form of a release notebook: no outputs, no execution counts."""
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    return nbformat.writes(nb) + "\n"


def release_texts(names: list[str] | None = None) -> dict[Path, str]:
    """{path under notebooks/: text} of a fresh release of the named (default: all) assignments."""
    names = names or solution_assignments()
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

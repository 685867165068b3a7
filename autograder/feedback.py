"""Per-student feedback of a graded assignment: nbgrader's feedback HTML.

    make feedback ASSIGNMENT=01 COURSE=path/to/course   # = python -m autograder.feedback 01 --course DIR

Reads what `make grade` wrote (DIR/autograded/<student>/<ASSIGNMENT>/ and
DIR/grades/<ASSIGNMENT>.json) and writes DIR/feedback/<student>/<ASSIGNMENT>/<notebook>.html
with `nbgrader generate_feedback`: the executed notebook with the score of each graded cell,
the scores being the grading command's (those that count: nbgrader's, gated by the judge).

Before nbgrader sees them, the executed notebooks are cleaned: the hidden-test lines of every
graded cell are replaced by one comment, and every error keeps its name and message only (no
traceback, so no source line of the checker or of a hidden test). What a student reads of the
hidden cases is therefore the judge's report: the case names and the size of each error, never
an expected value.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

import nbformat

from .release import SOLUTIONS, nbgrader, prepare_course

HIDDEN_BLOCK = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS[ \t]*$", re.S | re.M)
HIDDEN_NOTE = "# (the hidden cases ran here: their report, if any, is this cell's output)"


def clean_notebook(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Hidden-test source out of the graded cells; tracebacks down to the error's name and message."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        cell.source = HIDDEN_BLOCK.sub(HIDDEN_NOTE, cell.source)
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                output["traceback"] = [f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"]
    return nb


def record_scores(gradebook: Path, assignment: str, student: str, cells: dict[str, float]) -> None:
    """The grading command's score of each cell ("notebook:cell" -> points) into a fresh gradebook."""
    import warnings

    from nbgrader.api import Gradebook, MissingEntry

    with warnings.catch_warnings(), Gradebook(f"sqlite:///{gradebook}") as gb:
        warnings.simplefilter("ignore")  # SQLAlchemy's autoflush notices inside nbgrader's add_submission
        gb.update_or_create_student(student)
        try:
            gb.find_submission(assignment, student)
        except MissingEntry:
            gb.add_submission(assignment, student)
        for key, score in cells.items():
            notebook, _, cell = key.partition(":")
            grade = gb.find_grade(cell, notebook, assignment, student)
            grade.auto_score = float(score)
            grade.manual_score = None
            grade.needs_manual_grade = False
        gb.db.commit()


def feedback(assignment: str, course: Path, source: Path | None = None) -> list[Path]:
    """Write the feedback HTML of every graded student of `assignment`; returns the files written."""
    course = Path(course).resolve()
    grades = course / "grades" / f"{assignment}.json"
    if not grades.is_file():
        raise SystemExit(f"no {grades}: run `make grade ASSIGNMENT={assignment} COURSE={course}` first")
    rows = [r for r in json.loads(grades.read_text(encoding="utf-8"))
            if (course / "autograded" / r["student"] / assignment).is_dir() and r.get("cells")]
    written = []
    with tempfile.TemporaryDirectory(prefix="course-feedback-") as tmp:
        base = Path(tmp)
        prepare_course(base, [assignment], solutions=Path(source or SOLUTIONS))
        shutil.rmtree(base / "source", ignore_errors=True)  # not needed: the gradebook has the cells
        for row in rows:
            student = row["student"]
            target = base / "autograded" / student / assignment
            target.mkdir(parents=True)
            for path in sorted((course / "autograded" / student / assignment).glob("*.ipynb")):
                try:
                    nb = nbformat.read(path, as_version=4)
                except Exception:  # noqa: BLE001 - a notebook the submission broke: no feedback for it
                    continue
                nbformat.write(clean_notebook(nb), target / path.name)
            record_scores(base / "gradebook.db", assignment, student, row["cells"])
        if rows:
            nbgrader(["generate_feedback", assignment, "--force"], base)
        for row in rows:
            student = row["student"]
            out = base / "feedback" / student / assignment
            dest = course / "feedback" / student / assignment
            shutil.rmtree(dest, ignore_errors=True)
            dest.mkdir(parents=True)
            for html in sorted(out.glob("*.html")):
                shutil.copy(html, dest / html.name)
                written.append(dest / html.name)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("assignment", help="assignment id, e.g. 01")
    parser.add_argument("--course", type=Path, default=Path("."), help="the folder `make grade` wrote into")
    parser.add_argument("--source", type=Path, default=None, help="source notebooks folder (default: solutions/)")
    args = parser.parse_args(argv)
    written = feedback(args.assignment.zfill(2), args.course, args.source)
    for path in written:
        print(f"wrote {path}")
    print(f"{len(written)} feedback file(s) for assignment {args.assignment}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

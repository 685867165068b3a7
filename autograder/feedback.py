"""Per-student feedback of a graded assignment: nbgrader's feedback HTML.

    make feedback ASSIGNMENT=01 COURSE=path/to/course   # = python -m autograder.feedback 01 --course DIR

Reads what `make grade` wrote (DIR/autograded/<student>/<ASSIGNMENT>/ and
DIR/grades/<ASSIGNMENT>.json) and writes DIR/feedback/<student>/<ASSIGNMENT>/<notebook>.html
with `nbgrader generate_feedback`: the executed notebook with the score of each graded cell,
the scores being the grading command's (those that count: nbgrader's, gated by the judge).

Before nbgrader sees them, the executed notebooks are cleaned: the hidden-test lines of every
graded cell are replaced by one comment, and every error keeps its name and message only (no
traceback, so no source line of the checker or of a hidden test). What a student reads of the
hidden cases is therefore the judge's redacted report: per case its name, pass or fail, and
whether a failure is at rounding scale or far off, never an expected value or an error figure.

Only the notebooks the gradebook knows (the assignment's own) are rendered, the whole class in one
run of nbgrader; where that run fails, each student in a run of their own: a notebook a submission
added, or one nbgrader cannot render, costs that student a note, never the class its feedback.
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

from .course_folder import SOLUTIONS, gradebook_cells, nbgrader, prepare_course

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
    """Write the feedback HTML of every graded student of `assignment`; returns the files written.
    A student whose feedback cannot be made gets `feedback/<student>/<assignment>/FAILED.txt`."""
    course = Path(course).resolve()
    grades = course / "grades" / f"{assignment}.json"
    if not grades.is_file():
        raise SystemExit(f"no {grades}: run `make grade ASSIGNMENT={assignment} COURSE={course}` first")
    rows = [r for r in json.loads(grades.read_text(encoding="utf-8"))
            if (course / "autograded" / r["student"] / assignment).is_dir() and r.get("cells")]
    written = []
    with tempfile.TemporaryDirectory(prefix="course-feedback-") as tmp:
        base = Path(tmp) / "base"
        base.mkdir()
        prepare_course(base, [assignment], solutions=Path(source or SOLUTIONS))
        shutil.rmtree(base / "source", ignore_errors=True)  # not needed: the gradebook has the cells
        known = {c["notebook"] for c in gradebook_cells(base, assignment)}
        together = class_feedback(base, Path(tmp) / "class", course, assignment, rows, known)
        for i, row in enumerate(rows):
            dest = course / "feedback" / row["student"] / assignment
            shutil.rmtree(dest, ignore_errors=True)
            dest.mkdir(parents=True)
            try:
                if row["student"] not in together:  # a run of its own
                    work = Path(tmp) / f"s{i}"
                    shutil.copytree(base, work)
                    add_student(work, course, assignment, row, known)
                    nbgrader(["generate_feedback", assignment, "--student", row["student"], "--force"], work)
                    together[row["student"]] = rendered(work, row["student"], assignment)
                for html in together[row["student"]]:
                    shutil.copy(html, dest / html.name)
                    written.append(dest / html.name)
            except Exception as e:  # noqa: BLE001 - one student's feedback never stops the others
                (dest / "FAILED.txt").write_text(f"no feedback could be made: {type(e).__name__}\n", encoding="utf-8")
    return written


def class_feedback(base: Path, work: Path, course: Path, assignment: str, rows: list[dict],
                   known: set[str]) -> dict[str, list[Path]]:
    """Every student of `rows` in one run of nbgrader, in a copy of `base`: {student: HTML files}
    for each student all of whose notebooks were rendered; nothing when the run fails."""
    shutil.copytree(base, work)
    notebooks = {}
    for row in rows:
        try:
            notebooks[row["student"]] = add_student(work, course, assignment, row, known)
        except Exception:  # noqa: BLE001 - that student alone, in a run of their own
            shutil.rmtree(work / "autograded" / row["student"], ignore_errors=True)
    if nbgrader(["generate_feedback", assignment, "--force"], work, check=False).returncode != 0:
        return {}
    out = {}
    for student, names in notebooks.items():
        html = rendered(work, student, assignment)
        if names and {p.stem for p in html} == names:
            out[student] = html
    return out


def add_student(work: Path, course: Path, assignment: str, row: dict, known: set[str]) -> set[str]:
    """The student's executed notebooks that the gradebook knows, cleaned, into `work`'s autograded
    folder, and the grading command's scores into its gradebook; the names of the notebooks."""
    student = row["student"]
    target = work / "autograded" / student / assignment
    target.mkdir(parents=True)
    names = set()
    for path in sorted((course / "autograded" / student / assignment).glob("*.ipynb")):
        if path.stem not in known or path.is_symlink():
            continue
        try:
            nb = nbformat.read(path, as_version=4)
        except Exception:  # noqa: BLE001 - a notebook the submission broke: no feedback for it
            continue
        nbformat.write(clean_notebook(nb), target / path.name)
        names.add(path.stem)
    record_scores(work / "gradebook.db", assignment, student, row["cells"])
    return names


def rendered(work: Path, student: str, assignment: str) -> list[Path]:
    return sorted((work / "feedback" / student / assignment).glob("*.html"))


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

"""Grades an LMS imports: Canvas gradebook CSV files, from the grading rows and a roster.

Canvas's gradebook import reads the columns of Canvas's own gradebook export: Student, ID, SIS
User ID, SIS Login ID, Section, then one column per assignment, titled by the assignment's name
(`Name (12345)` where Canvas knows its id); a row whose first field holds "Points Possible" gives
the points of an assignment the import creates. It finds each row's student by ID (Canvas's user
id), else by SIS User ID or SIS Login ID, else by name; a blank score changes nothing. (Its
importer, instructure/canvas-lms `app/models/gradebook_importer.rb`, rejects a header whose
student columns do not end with Section, so SIS Login ID must be there too.)

nbgrader's student ids (the folders of COURSE/submitted/) are not Canvas's ids. The mapping is a
roster: Canvas's own gradebook export (Grades, Export), saved as COURSE/roster.csv or named by
`--roster`. An nbgrader id is looked up in the roster's SIS Login ID column, then SIS User ID, then
ID (the first that holds it exactly), and that row's five columns are written. Without a roster,
or for an id the roster lacks, the id goes in as the SIS Login ID (Student is the id, the other
columns empty): Canvas then matches it when the nbgrader ids are the students' logins. The grading
command lists the ids the roster lacks.

    COURSE/grades/NN_canvas.csv   one assignment (`write_canvas`)
    COURSE/grades/canvas.csv      every assignment graded so far, one column each (`write_combined`)

A row the grader could not grade (a grading error, not the notebook's doing) gets a blank score,
so an import leaves that student's grade as it was.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path

STUDENT_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
LOOKUP = ("SIS Login ID", "SIS User ID", "ID")  # where an nbgrader id is looked for, in this order
POINTS_ROW = "    Points Possible"  # as Canvas's export writes it
COMBINED = "canvas.csv"


class RosterError(ValueError):
    """A roster that cannot be read; the message names the file and the line."""


@dataclass(frozen=True)
class Student:
    """One student's five columns of a Canvas gradebook CSV."""

    name: str
    canvas_id: str = ""
    sis_user_id: str = ""
    sis_login_id: str = ""
    section: str = ""

    def fields(self) -> list[str]:
        return [self.name, self.canvas_id, self.sis_user_id, self.sis_login_id, self.section]


class Roster:
    """Canvas's gradebook export read as {column: {value: Student}} for the LOOKUP columns."""

    def __init__(self, path: Path | None = None, students: list[tuple[int, Student]] = ()):
        self.path = path
        self.index: dict[str, dict[str, Student]] = {column: {} for column in LOOKUP}
        lines: dict[tuple[str, str], int] = {}
        for line, student in students:
            for column, value in zip(LOOKUP, (student.sis_login_id, student.sis_user_id, student.canvas_id)):
                if not value:
                    continue
                if (column, value) in lines:
                    raise RosterError(f"{path}, lines {lines[column, value]} and {line}: two students with "
                                      f"{column} {value!r}")
                lines[column, value] = line
                self.index[column][value] = student

    def student(self, student_id: str) -> Student | None:
        """The roster's row of an nbgrader id, None when no LOOKUP column holds it."""
        return next((by[student_id] for by in self.index.values() if student_id in by), None)

    def columns(self, student_id: str) -> list[str]:
        """The five columns written for an nbgrader id (the id as SIS Login ID when the roster lacks it)."""
        found = self.student(student_id)
        return (found or Student(student_id, sis_login_id=student_id)).fields()


def read_roster(path: Path) -> Roster:
    """Canvas's gradebook export (comma- or semicolon-separated, as Canvas's importer takes it);
    the "Points Possible" row and the posting-policy rows are skipped."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise RosterError(f"{path}: cannot be read ({e.strerror})") from None
    data = data[3:] if data.startswith(b"\xef\xbb\xbf") else data  # the byte-order mark Canvas's export starts with
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise RosterError(f"{path}, line {line}: not UTF-8 text (Canvas's export is UTF-8)") from None
    first = text.splitlines()[0] if text.strip() else ""
    reader = csv.reader(io.StringIO(text), delimiter=";" if first.count(";") > first.count(",") else ",")
    header = next(reader, None)
    missing = [c for c in STUDENT_COLUMNS if c not in (header or [])]
    if missing:
        raise RosterError(f"{path}, line 1: no {', '.join(missing)} column(s); a roster is Canvas's gradebook export "
                          f"(Grades, Export), whose first columns are {', '.join(STUDENT_COLUMNS)}")
    at = [header.index(c) for c in STUDENT_COLUMNS]
    students = []
    for row in reader:
        if not any(field.strip() for field in row) or "Points Possible" in row[0] or all(
                field.strip().lower() in ("", "muted") or field.strip().startswith("Manual Posting") for field in row):
            continue
        if len(row) != len(header):
            raise RosterError(f"{path}, line {reader.line_num}: {len(row)} fields where the header has {len(header)}")
        students.append((reader.line_num, Student(*(row[i].strip() for i in at))))
    return Roster(path, students)


def default_roster(course: Path) -> Path | None:
    """COURSE/roster.csv when there is one."""
    path = Path(course) / "roster.csv"
    return path if path.is_file() else None


def score_field(row: dict) -> str:
    """A row's score as Canvas reads it; blank where the grader, not the notebook, failed."""
    if any(str(n).startswith("grading error") for n in row.get("notes", [])):
        return ""
    return f"{float(row['score']):g}"


def write_table(path: Path, *, columns: list[str], points: list[float], lines: list[list[str]]) -> Path:
    """A Canvas gradebook CSV: the header, the Points Possible row, one line per student."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow([*STUDENT_COLUMNS, *columns])
        writer.writerow([POINTS_ROW, "", "", "", "", *[f"{p:g}" for p in points]])
        writer.writerows(lines)
    return path


def write_canvas(course: Path, assignment: str, rows: list[dict], *, max_score: float, roster: Roster,
                 column: str) -> Path:
    """COURSE/grades/NN_canvas.csv: one column, titled `column`, of the rows' scores."""
    lines = [[*roster.columns(r["student"]), score_field(r)] for r in rows]
    return write_table(Path(course) / "grades" / f"{assignment}_canvas.csv", columns=[column], points=[max_score],
                       lines=lines)


def canvas_column(course: Path, assignment: str) -> str | None:
    """The assignment column of COURSE/grades/NN_canvas.csv (the title its last grading used)."""
    path = Path(course) / "grades" / f"{assignment}_canvas.csv"
    if not path.is_file():
        return None
    with open(path, newline="", encoding="utf-8") as f:
        header = next(csv.reader(f), [])
    return header[len(STUDENT_COLUMNS)] if len(header) > len(STUDENT_COLUMNS) else None


def write_combined(course: Path, roster: Roster) -> Path:
    """COURSE/grades/canvas.csv: a column per assignment graded so far (each COURSE/grades/NN.json),
    titled as in its NN_canvas.csv; a student without a row in an assignment gets a blank there."""
    grades = Path(course) / "grades"
    columns, points, scores = [], [], {}
    for path in sorted(grades.glob("[0-9][0-9].json")):
        rows = json.loads(path.read_text(encoding="utf-8"))
        columns.append(canvas_column(course, path.stem) or path.stem)
        points.append(max([float(r.get("max_score", 0.0)) for r in rows] or [0.0]))
        for r in rows:
            scores.setdefault(r["student"], {})[len(columns) - 1] = score_field(r)
    lines = [[*roster.columns(s), *(scores[s].get(i, "") for i in range(len(columns)))] for s in sorted(scores)]
    return write_table(grades / COMBINED, columns=columns, points=points, lines=lines)

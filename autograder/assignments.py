"""Which graded name belongs to which assignment, and which suites a notebook's graded cells call.

Every `# %% [solution] MODULE:NAME ...` header of `lessons/NN_*.py` makes NAME graded in
assignment NN: functions, classes (e.g. `course_lib.logprobs:_SelectedLogProb`) and constants
(e.g. `course_lib.gsm8k:_FINAL_ANSWER`). Nothing else is a list to keep in sync: the student kit,
the judge and the tests all ask `registry()`, through `autograder.student_view`, which adds the
twins of the graded functions (other functions of the library that compute the same).

An assignment is *open* for a kit or a grading run of assignment NN when it is NN or later: its
graded names are stubs there (the deadline of an earlier assignment has passed, so its reference
is released).

`hidden_gates(folder)` reads a folder of source notebooks: which graded cell calls which
hidden-case suite (`check_hidden("NAME", ...)`), the calls the judge answers while grading.

A Gradescope autograder ships no lessons: its `autograder/registry.json` (SNAPSHOT, written by
`autograder.gradescope` from `registry()` when the zip is built) stands in for them.
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from .lesson_format import LessonError, assignment_of_lesson, lesson_files, read_lesson

REPO_ROOT = Path(__file__).resolve().parent.parent
LESSONS = REPO_ROOT / "lessons"
SOLUTIONS = REPO_ROOT / "solutions"
HIDDEN_CALL = re.compile(r"check_hidden\(\s*[\"'](\w+)[\"']")
SNAPSHOT = Path(__file__).resolve().parent / "registry.json"  # the registry where no lessons ship


@dataclass(frozen=True)
class Graded:
    assignment: str  # "01"
    module: str  # "course_lib.gsm8k"
    name: str  # "extract_gsm8k_answer"
    twin_of: str = ""  # a twin of a graded name (`autograder.student_view`): the graded name it computes

    @property
    def ref(self) -> str:
        return f"{self.module}:{self.name}"


def snapshot(lessons: Path = LESSONS) -> dict | None:
    """{"assignments": [...], "graded": [[assignment, module, name], ...]} frozen when a Gradescope
    autograder was built, where `lessons` is not there; None where it is."""
    if Path(lessons).is_dir() or not SNAPSHOT.is_file():
        return None
    return json.loads(SNAPSHOT.read_text(encoding="utf-8"))


def registry(lessons: Path = LESSONS) -> list[Graded]:
    """Every graded name of every lesson, in lesson order (read again when a lesson file changes)."""
    frozen = snapshot(lessons)
    if frozen is not None:
        return [Graded(*g) for g in frozen["graded"]]
    stamp = tuple((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in lesson_files(lessons))
    return list(_registry(Path(lessons), stamp))


@functools.lru_cache(maxsize=16)
def _registry(lessons: Path, stamp: tuple) -> tuple[Graded, ...]:
    """`registry` of the lesson files whose names, times and sizes are `stamp` (the cache's key)."""
    out: list[Graded] = []
    seen: dict[str, str] = {}
    for lesson in lesson_files(lessons):
        assignment = assignment_of_lesson(lesson)
        for cell in read_lesson(lesson):
            if cell.kind != "solution":
                continue
            for ref in cell.refs:
                module, _, name = ref.partition(":")
                if name in seen and seen[name] != assignment:
                    raise LessonError(f"{cell.where}: {name} is graded in both assignment {seen[name]} and {assignment}")
                if name not in seen:
                    seen[name] = assignment
                    out.append(Graded(assignment, module, name))
    return tuple(out)


def assignments(lessons: Path = LESSONS) -> list[str]:
    """The assignment ids that have a lesson, sorted."""
    frozen = snapshot(lessons)
    if frozen is not None:
        return list(frozen["assignments"])
    return sorted({assignment_of_lesson(p) for p in lesson_files(lessons)})


def assignment_of(name: str, lessons: Path = LESSONS) -> str | None:
    """The assignment in which `name` is graded, or None when no lesson grades it."""
    return next((g.assignment for g in registry(lessons) if g.name == name), None)


GRADED_FOLDERS = Path(__file__).resolve().parent / "graded"
NO_LESSON_YET = "~"  # the assignment of a graded function with a suite but no lesson: after every one


def unassigned(lessons: Path = LESSONS) -> list[Graded]:
    """The graded functions that have a folder (`autograder/graded/<name>/`, named as the function it
    grades) but no lesson yet (a notebook being written): open for every assignment, so that no kit
    ships their reference before their notebook exists."""
    import course_lib

    graded = {g.name for g in registry(lessons)}
    out = []
    # the folders read from the disk: suite_api's settings read student_view, which reads this module
    for name in sorted(p.parent.name for p in GRADED_FOLDERS.glob("*/__init__.py")
                       if not p.parent.name.startswith("_")):
        if name not in graded and hasattr(course_lib, name):
            out.append(Graded(NO_LESSON_YET, getattr(course_lib, name).__module__, name))
            graded.add(name)
    return out


def open_names(assignment: str | None, lessons: Path = LESSONS) -> list[Graded]:
    """The graded names that are stubs for `assignment`: those of `assignment` and later, and those
    of no lesson yet (`unassigned`).

    `assignment=None` (a suite whose function no lesson grades yet) makes every graded name open.
    """
    return [g for g in registry(lessons) + unassigned(lessons) if assignment is None or g.assignment >= assignment]


def hidden_gates(source_dir: Path) -> dict[tuple[str, str], list[str]]:
    """{(notebook name, grade id): [suite names]} for every graded cell of the source notebooks
    in `source_dir` that calls check_hidden."""
    import nbformat

    gates = {}
    for path in sorted(Path(source_dir).glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            meta = cell.metadata.get("nbgrader", {})
            if meta.get("grade") and cell.cell_type == "code":
                names = HIDDEN_CALL.findall(cell.source)
                if names:
                    gates[(path.stem, meta["grade_id"])] = names
    return gates


def hidden_calls(source_dir: Path) -> Counter:
    """{suite: how many times the graded cells call it}: the judge's budget for one submission."""
    return Counter(name for names in hidden_gates(source_dir).values() for name in names)

"""Which graded name belongs to which assignment, read from the lessons.

Every `# %% [solution] MODULE:NAME ...` header of `lessons/NN_*.py` makes NAME graded in
assignment NN: functions, classes (e.g. `course_lib.logprobs:_SelectedLogProb`) and constants
(e.g. `course_lib.gsm8k:_FINAL_ANSWER`). Nothing else is a list to keep in sync: the student kit,
the judge and the tests all ask `registry()`.

An assignment is *open* for a kit or a grading run of assignment NN when it is NN or later: its
graded names are stubs there (the deadline of an earlier assignment has passed, so its reference
is released).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
LESSONS = REPO_ROOT / "lessons"
SOLUTION_HEADER = re.compile(r"^# %%\s+\[solution\](.*)$")


@dataclass(frozen=True)
class Graded:
    assignment: str  # "01"
    module: str  # "course_lib.gsm8k"
    name: str  # "extract_gsm8k_answer"

    @property
    def ref(self) -> str:
        return f"{self.module}:{self.name}"


def registry(lessons: Path = LESSONS) -> list[Graded]:
    """Every graded name of every lesson, in lesson order."""
    out: list[Graded] = []
    seen: dict[str, str] = {}
    for lesson in sorted(Path(lessons).glob("[0-9][0-9]_*.py")):
        assignment = lesson.name[:2]
        for line in lesson.read_text(encoding="utf-8").splitlines():
            match = SOLUTION_HEADER.match(line)
            if not match:
                continue
            for ref in match.group(1).split():
                module, _, name = ref.partition(":")
                if not module or not name:
                    raise ValueError(f"{lesson.name}: [solution] reference {ref!r} is not MODULE:NAME")
                if name in seen and seen[name] != assignment:
                    raise ValueError(f"{name} is graded in both assignment {seen[name]} and {assignment}")
                if name not in seen:
                    seen[name] = assignment
                    out.append(Graded(assignment, module, name))
    return out


def assignments(lessons: Path = LESSONS) -> list[str]:
    """The assignment ids that have a lesson, sorted."""
    return sorted({p.name[:2] for p in Path(lessons).glob("[0-9][0-9]_*.py")})


def assignment_of(name: str, lessons: Path = LESSONS) -> str | None:
    """The assignment in which `name` is graded, or None when no lesson grades it."""
    return next((g.assignment for g in registry(lessons) if g.name == name), None)


def open_names(assignment: str | None, lessons: Path = LESSONS) -> list[Graded]:
    """The graded names that are stubs for `assignment`: those of `assignment` and later.

    `assignment=None` (a suite whose function no lesson grades yet) makes every graded name open.
    """
    return [g for g in registry(lessons) if assignment is None or g.assignment >= assignment]

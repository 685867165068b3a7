"""The grammar of a lesson file, parsed in one place (the notebook build, the registry, the tests).

A lesson `lessons/NN_name.py` is Python in "percent" format. Each cell starts with a header line:

    # %% [markdown]                      a markdown cell (leading "# " stripped from each line)
    # %%                                 a plain code cell
    # %% [solution] MODULE:NAME ...      a graded answer cell: its own lines, then the source of
                                         each reference object from course_lib, bodies between
                                         ### BEGIN SOLUTION / ### END SOLUTION
    # %% [given] MODULE:NAME ...         the full source of reference objects, not graded
    # %% [tests] ID POINTS               an autograded test cell worth POINTS, grade id ID

`NN` (the first two characters of the file name) is the assignment the lesson's graded names
belong to. Every parse error names the file and the line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

HEADER = re.compile(r"^# %%(?:\s+\[(\w+)\](.*))?\s*$")
KINDS = ("markdown", "solution", "given", "tests")
LESSON_GLOB = "[0-9][0-9]_*.py"


class LessonError(ValueError):
    """A lesson file that does not follow the grammar (the message names the file and line)."""


@dataclass
class Cell:
    kind: str | None  # None: a plain code cell; else one of KINDS
    arg: str  # what follows the [kind] on the header line, stripped
    lineno: int  # the header's line number (1-based)
    where: str  # "file.py:LINE", for messages
    body: list[str] = field(default_factory=list)

    @property
    def refs(self) -> list[str]:
        """The MODULE:NAME references of a [solution] or [given] header."""
        return self.arg.split() if self.kind in ("solution", "given") else []

    def test_fields(self) -> tuple[str, int]:
        """(grade id, points) of a [tests] header."""
        fields = self.arg.split()
        if len(fields) != 2 or not fields[1].isdigit():
            raise LessonError(f"{self.where}: [tests] needs 'ID POINTS', got {self.arg!r}")
        return fields[0], int(fields[1])


def split_cells(text: str, path: Path | str) -> list[Cell]:
    """The cells of a lesson's text, in order."""
    name = Path(path).name
    cells: list[Cell] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        match = HEADER.match(line)
        if match:
            kind, arg = match.group(1), (match.group(2) or "").strip()
            if kind is not None and kind not in KINDS:
                raise LessonError(f"{name}:{lineno}: unknown cell kind [{kind}]")
            if kind in ("solution", "given"):
                if not arg:
                    raise LessonError(f"{name}:{lineno}: [{kind}] needs at least one MODULE:NAME")
                for ref in arg.split():
                    module, _, obj = ref.partition(":")
                    if not module or not obj:
                        raise LessonError(f"{name}:{lineno}: [{kind}] reference {ref!r} is not MODULE:NAME")
            cells.append(Cell(kind, arg, lineno, f"{name}:{lineno}"))
        elif cells:
            cells[-1].body.append(line)
        elif line.strip():
            raise LessonError(f"{name}:{lineno}: text before the first '# %%' cell header")
    return cells


def read_lesson(path: Path) -> list[Cell]:
    return split_cells(Path(path).read_text(encoding="utf-8"), path)


def lesson_files(folder: Path) -> list[Path]:
    """The lesson files of a folder, in assignment order."""
    return sorted(Path(folder).glob(LESSON_GLOB))


def assignment_of_lesson(path: Path) -> str:
    """lessons/06_group_advantages.py -> "06"."""
    return Path(path).name[:2]


def solution_refs(path: Path) -> list[list[str]]:
    """The MODULE:NAME references of each [solution] cell of a lesson, in order."""
    return [cell.refs for cell in read_lesson(path) if cell.kind == "solution"]

"""results.json for Gradescope from a grading row, and a checker of Gradescope's format.

The format (https://gradescope-autograders.readthedocs.io/en/latest/specs/, "Output format"):
top-level `score` (optional when every test has one; it overrides their total), `execution_time`
(seconds), `output`, `output_format`, `test_output_format`, `test_name_format`, `visibility` (the
tests' default), `stdout_visibility`, `extra_data`, `tests` and `leaderboard`; each test has
optional `score`, `max_score`, `status` ("passed" or "failed"), `name`, `name_format`, `number`,
`output`, `output_format`, `tags`, `visibility` and `extra_data`. Visibility is one of hidden,
after_due_date, after_published, visible; a format one of text, html, simple_format, md, ansi.
While any test is hidden from a student, so is the total score.

What a student reads (every text as plain "text", never rendered as HTML):

- one test per graded cell: its points, and as its output what nbgrader's feedback shows of that
  cell: its printed lines and its error (for a hidden check, the judge's redacted report:
  per case pass or fail, at rounding scale or far off, never an expected value or an error
  figure), then the grader's notes on that cell;
- a "Status" test without points: how the run went (graded, timeout, out of memory, output
  flood, too many processes, crashed, or the autograder's own failure), the notes that are not
  about one cell, and its seconds; shown when the cells are;
- a "Submission" test without points, and the top-level output: the at-once view (`at_once`),
  made only of what is known before anything of the notebook runs: which file was found (or that
  none or several were, or a link), what of the upload was left out, how it is sandboxed, and when
  the rest is shown. Nothing in it depends on how the notebook ran, so a notebook cannot choose
  what it says (a MemoryError raised, a loop or a flood after a failing hidden check reads the
  same as a pass); no execution time is given either.
"""

from __future__ import annotations

import json
import math
import re

VISIBILITY = ("hidden", "after_due_date", "after_published", "visible")
FORMATS = ("text", "html", "simple_format", "md", "ansi")
TOP_KEYS = {"score", "execution_time", "output", "output_format", "test_output_format", "test_name_format",
            "visibility", "stdout_visibility", "extra_data", "tests", "leaderboard"}
TEST_KEYS = {"score", "max_score", "status", "name", "name_format", "number", "output", "output_format", "tags",
             "visibility", "extra_data"}
OUTPUT_CHARS = 8000  # of one cell's output
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
WHEN = {"after_due_date": "after the due date", "after_published": "when your instructor publishes the grades",
        "hidden": "by your instructor only"}
STATUS = {"ok": "graded", "no notebook": "not graded"}  # the row's status as the Status test says it


def cell_text(cell, notes: list[str]) -> str:
    """What nbgrader's feedback shows of one executed graded cell (printed lines and its error, in
    plain text), then the grader's notes on it."""
    parts = []
    for o in cell.get("outputs", []) if cell is not None else []:
        if o.get("output_type") == "stream":
            parts.append(str(o.get("text", "")).rstrip("\n"))
        elif o.get("output_type") == "error":
            parts.append(f"{o.get('ename', 'Error')}: {o.get('evalue', '')}")
    parts += [f"grader: {n}" for n in notes]
    text = ANSI.sub("", "\n".join(p for p in parts if p))
    return text if len(text) <= OUTPUT_CHARS else text[:OUTPUT_CHARS] + "\n... (cut)"


def graded_cells(notebook) -> dict:
    """{grade id: cell} of an executed notebook (None: no executed notebook)."""
    if notebook is None:
        return {}
    return {c.get("metadata", {}).get("nbgrader", {}).get("grade_id"): c for c in notebook.get("cells", [])
            if c.get("metadata", {}).get("nbgrader", {}).get("grade")}


def at_once(found: str, *, notes: list[str], settings: dict, sandbox_note: str | None = None,
            graded: bool = True) -> str:
    """The text shown at once (see the module docstring): `found` (the file, or why none is
    graded), the upload's `notes` (what was left out of it), the sandbox's sentence, and when the
    rest is shown."""
    lines = [f"{found}: {'received, and graded' if graded else 'not graded'}", *notes]
    if sandbox_note:
        lines.append(sandbox_note)
    shown = settings["visibility"]["cells"]
    if shown != "visible":
        lines.append(f"Your score, how the run went and each graded cell's result are shown {WHEN[shown]}.")
    return "\n".join(lines)


def results(row: dict, cells: list[dict], *, notebook, settings: dict, seconds: float, found: str,
            upload_notes: list[str] = (), sandbox_note: str | None = None, graded: bool = True) -> dict:
    """results.json of one graded submission: `row` from `autograder.grade`, `cells` the assignment's
    graded cells, `notebook` its executed notebook (None when nbgrader left none); `found`,
    `upload_notes` and `sandbox_note` make the at-once view (`at_once`)."""
    shown = settings["visibility"]
    executed = graded_cells(notebook)
    prefixes = {c["cell"]: f"{c['cell']}: " for c in cells}  # a note on one cell starts with its grade id
    by_cell = {cell: [n[len(p):] for n in row["notes"] if n.startswith(p)] for cell, p in prefixes.items()}
    general = [n for n in row["notes"] if not any(n.startswith(p) for p in prefixes.values())]
    tests = []
    for c in cells:
        score = float(row["cells"].get(f"{c['notebook']}:{c['cell']}", 0.0))
        output = cell_text(executed.get(c["cell"]), by_cell[c["cell"]])
        if not output:
            output = "passed" if score >= c["max_score"] else f"not run ({row['status']})"
        tests.append({"name": c["cell"], "score": score, "max_score": c["max_score"],
                      "status": "passed" if score >= c["max_score"] else "failed", "output": output,
                      "visibility": shown["cells"]})
    status = [f"{STATUS.get(row['status'], row['status'])} ({seconds:.0f} s)", *general]
    tests.append({"name": "Status", "status": "passed" if row["status"] == "ok" else "failed",
                  "output": "\n".join(status), "visibility": shown["cells"]})
    view = at_once(found, notes=list(upload_notes), settings=settings, sandbox_note=sandbox_note, graded=graded)
    tests.append({"name": "Submission", "status": "passed" if graded else "failed", "output": view,
                  "visibility": shown["status"]})
    return {"score": float(row["score"]), "output": view, "output_format": "text", "test_output_format": "text",
            "test_name_format": "text", "visibility": shown["cells"], "stdout_visibility": shown["stdout"],
            "tests": tests}


def ungraded_row(cells: list[dict], status: str, notes: list[str] = ()) -> dict:
    """A row with 0 in every graded cell: a submission not graded, or whose grading did not finish."""
    return {"status": status, "score": 0.0, "notes": list(notes),
            "cells": {f"{c['notebook']}:{c['cell']}": 0.0 for c in cells}}


def not_graded(message: str, cells: list[dict], *, notes: list[str], settings: dict, seconds: float) -> dict:
    """results.json of a submission that was not graded (no notebook, several, a link): 0 points
    in each graded cell and `message` with `notes`, visible at once (known before anything ran)."""
    return results(ungraded_row(cells, "no notebook"), cells, notebook=None, settings=settings, seconds=seconds,
                   found=message, upload_notes=notes, graded=False)


def at_once_view(data: dict) -> dict:
    """What of a results.json a student sees before the due date: the top level but the score (hidden
    while any test is) and the execution time, and the tests shown at once."""
    view = {k: v for k, v in data.items() if k not in ("score", "execution_time", "tests")}
    view["tests"] = [t for t in data.get("tests", []) if t.get("visibility", data.get("visibility")) == "visible"]
    return view


def error_results(message: str) -> dict:
    """results.json when the grader itself failed before a notebook was found: a clear message,
    never its traceback (nothing of an upload has run, so nothing in it depends on one)."""
    return {"score": 0.0, "output_format": "text", "tests": [],
            "output": f"This submission could not be graded: the autograder itself failed ({message}), not your "
                      "notebook. Your instructor can see why and will regrade it."}


def problems(data) -> list[str]:
    """Where `data` departs from Gradescope's results.json format (empty: it conforms)."""
    if not isinstance(data, dict):
        return ["results.json holds no JSON object"]
    out = [f"unknown key {k!r}" for k in sorted(set(data) - TOP_KEYS)]
    out += _typed(data, "", number=("score", "execution_time"), text=("output",), formats=(
        "output_format", "test_output_format", "test_name_format"), visible=("visibility", "stdout_visibility"))
    tests = data.get("tests", [])
    if not isinstance(tests, list):
        return out + ["tests is not a list"]
    for i, test in enumerate(tests):
        if not isinstance(test, dict):
            out.append(f"tests[{i}] is not an object")
            continue
        out += [f"tests[{i}]: unknown key {k!r}" for k in sorted(set(test) - TEST_KEYS)]
        out += _typed(test, f"tests[{i}].", number=("score", "max_score"), text=("name", "number", "output"),
                      formats=("name_format", "output_format"), visible=("visibility",))
        if "status" in test and test["status"] not in ("passed", "failed"):
            out.append(f"tests[{i}].status {test['status']!r} is not passed or failed")
        if "tags" in test and not (isinstance(test["tags"], list) and all(isinstance(t, str) for t in test["tags"])):
            out.append(f"tests[{i}].tags is not a list of strings")
    if "score" not in data and not all(isinstance(t, dict) and "score" in t for t in tests):
        out.append("no top-level score, and not every test has one")
    try:
        json.dumps(data, allow_nan=False)
    except ValueError:
        out.append("a number is NaN or infinite (not JSON)")
    return out


def _typed(obj: dict, where: str, *, number=(), text=(), formats=(), visible=()) -> list[str]:
    out = []
    for key in number:
        value = obj.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            out.append(f"{where}{key} is not a finite number")
    out += [f"{where}{k} is not a string" for k in text if k in obj and not isinstance(obj[k], str)]
    out += [f"{where}{k} {obj[k]!r} is not one of {FORMATS}" for k in formats if k in obj and obj[k] not in FORMATS]
    out += [f"{where}{k} {obj[k]!r} is not one of {VISIBILITY}" for k in visible
            if k in obj and obj[k] not in VISIBILITY]
    if "extra_data" in obj and not isinstance(obj["extra_data"], dict):
        out.append(f"{where}extra_data is not an object")
    return out

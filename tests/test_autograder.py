"""The hidden-case checker and the grading command.

- the comparison: shapes, dtypes, NaN positions, tolerances; its messages never hold expected values;
- check_hidden: a copy of the reference passes, a function that delegates to course_lib gets no
  credit, a wrong one fails naming the case and the size of the error;
- every graded cell of every notebook holds a hidden check;
- the sandbox's view: the stubbed course_lib, no solutions, lessons, notebooks, tests, hidden
  cases or git history; the output and process limits of `run_limited`;
- the grading command, on every assignment of solutions/: the solutions as a submission get full
  marks, the untouched release 0 for every graded cell (the kernel and the judge run where the
  references of the assignment and later are stubs: a notebook that calls one, or a suite whose
  `call` needs one, fails here);
- the grading command on a small synthetic assignment: a crashing, a memory-hungry and a
  hostile submission (it disarms check_hidden and looks for the hidden cases) each get a clear
  status and no points, while a correct one next to them gets full marks. (The full exploit
  catalogue is tests/test_exploits.py.)
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import nbformat
import pytest
import torch

from autograder.engine import compare, load_cases, suite_names
from autograder.judge import ensure_cases

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENTS = sorted(p.name for p in (ROOT / "solutions").glob("[0-9][0-9]") if any(p.glob("*.ipynb")))
SETTINGS = {"tolerance": {"atol": 1e-6, "rtol": 1e-5}, "check_dtype": True}




def student_functions(source: str) -> dict:
    """Functions defined as if in a notebook (module __main__), so they are pickled by value."""
    namespace = {"__name__": "__main__"}
    exec(compile(source, "<notebook>", "exec"), namespace)
    return namespace


# ---------------------------------------------------------------- the comparison
def test_compare_reports_sizes_not_values():
    expected = {"x": torch.tensor([[1.0, 2.0, 3.0]]), "n": 7, "s": "1080"}
    assert compare({"x": expected["x"].clone(), "n": 7, "s": "1080"}, expected, SETTINGS) == []
    problems = compare({"x": torch.tensor([[1.0, 2.5, 3.0]]), "n": 9, "s": "1,080"}, expected, SETTINGS)
    text = " ".join(problems)
    assert "max abs error 0.5" in text and "off by 2" in text
    assert "1080" not in text and "2.0" not in text and "7" not in text
    shape = compare({"x": torch.zeros(3, 1)}, {"x": torch.zeros(1, 3)}, SETTINGS)
    assert shape == ["'x' has shape (3, 1), not the expected shape"]


def test_compare_nan_dtype_and_tolerance():
    e = torch.tensor([float("nan"), 1.0, float("inf")])
    assert compare(e.clone(), e, SETTINGS) == []
    assert "NaN" in compare(torch.tensor([0.0, 1.0, float("inf")]), e, SETTINGS)[0]
    assert "dtype" in compare(e.double(), e, SETTINGS)[0]
    assert compare(torch.tensor([1.0, 2.0]) + 1e-7, torch.tensor([1.0, 2.0]), SETTINGS) == []
    assert compare(torch.tensor([1.0, 2.0]) + 1e-3, torch.tensor([1.0, 2.0]), SETTINGS)
    assert compare(torch.tensor([True, False]), torch.tensor([True, True]), SETTINGS) == ["the output: 1 of 2 values differ (exact match needed)"]
    assert compare([1, 2], [1, 2, 3], SETTINGS) == ["the output has length 2, not the expected length"]
    assert "lacks key" in compare({}, {"loss": 1.0}, SETTINGS)[0]


def test_every_suite_generates_cases_from_the_reference(hidden_cases):
    for name in suite_names():
        data = load_cases(name)
        assert data["cases"], f"suite {name} has no cases"
        assert len({c["name"] for c in data["cases"]}) == len(data["cases"])


# ---------------------------------------------------------------- check_hidden
EXTRACT = '''
import re
import course_lib
_FINAL = re.compile(r"####(?!.*####)\\s*(.+?)\\s*$", re.DOTALL)  # after the last marker

def good(answer_text):
    match = _FINAL.search(answer_text)
    if match is None:
        raise ValueError("no final answer")
    return match.group(1).strip().replace(",", "")

def keeps_commas(answer_text):
    match = _FINAL.search(answer_text)
    if match is None:
        raise ValueError("no final answer")
    return match.group(1).strip()

def delegates(answer_text):
    try:
        return course_lib.extract_gsm8k_answer(answer_text)
    except Exception:
        return good(answer_text)
'''


@pytest.mark.slow
def test_check_hidden_passes_fails_and_refuses_the_reference(hidden_cases):
    from autograder.checker import HiddenCheckFailed, check_hidden

    fns = student_functions(EXTRACT)
    check_hidden("extract_gsm8k_answer", fns["good"])
    with pytest.raises(HiddenCheckFailed) as wrong:
        check_hidden("extract_gsm8k_answer", fns["keeps_commas"])
    text = str(wrong.value)
    assert "FAIL thousands_commas" in text and "differs from the expected value" in text
    expected = [s for c in load_cases("extract_gsm8k_answer")["cases"] for s in c["expected"]["answers"] if s]
    assert not any(s in text for s in expected if len(s) > 2), "the report holds an expected value"
    with pytest.raises(HiddenCheckFailed) as delegated:
        check_hidden("extract_gsm8k_answer", fns["delegates"])
    assert "calls the reference course_lib.extract_gsm8k_answer (no credit)" in str(delegated.value)


# ---------------------------------------------------------------- every graded point through the judge
def test_every_graded_cell_calls_check_hidden():
    from autograder.grade import HIDDEN_CALL

    for path in sorted((ROOT / "solutions").glob("[0-9][0-9]/*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            meta = cell.metadata.get("nbgrader", {})
            if meta.get("grade"):
                assert HIDDEN_CALL.search(cell.source), f"{path.name}: graded cell {meta['grade_id']} has no check_hidden call"


PROBE = r"""
import json, os, pathlib, course_lib, course_lib.logprobs, inspect
repo = pathlib.Path(course_lib.__file__).resolve().parent.parent
seen = {p: (repo / p).exists() and any((repo / p).iterdir()) for p in
        ["solutions", "lessons", "notebooks", "tests", ".git", "autograder/hidden", "autograder/suites", "data", "course_lib"]}
seen["stub"] = "NotImplementedError" in inspect.getsource(course_lib.logprobs.compute_entropy)
seen["early_reference"] = "NotImplementedError" not in inspect.getsource(course_lib.extract_gsm8k_answer)
print(json.dumps(seen))
"""


def test_the_sandbox_shows_the_stubbed_library_and_hides_the_rest(hidden_cases):
    import subprocess
    import sys

    from autograder.judge import stubbed_course_lib
    from autograder.sandbox import sandbox_available, sandboxed

    if not sandbox_available():
        pytest.skip("bubblewrap is not available")
    cmd = sandboxed([sys.executable, "-c", PROBE], hide=[ROOT / "autograder" / "hidden"],
                    course_lib=stubbed_course_lib("compute_entropy"))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen == {"solutions": False, "lessons": False, "notebooks": False, "tests": False, ".git": False,
                    "autograder/hidden": False, "autograder/suites": True, "data": True, "course_lib": True,
                    "stub": True, "early_reference": True}, seen


def test_run_limited_stops_output_floods_and_fork_bombs(tmp_path):
    import sys

    from autograder.sandbox import ProcessLimit, run_limited

    flood = run_limited([sys.executable, "-c", "import os\nfor _ in range(64): os.write(1, b'x' * 2**20)"],
                        timeout=60, memory_bytes=None, file_bytes=2**20)
    assert "output" in flood.hit and len(flood.stdout) <= 2**20 and flood.returncode != 0
    if ProcessLimit(4).kind != "cgroup":
        pytest.skip("no pids cgroup here: the process limit is RLIMIT_NPROC (or none for root), not observable")
    bomb = ("import os, time\nn = 0\nfor _ in range(100):\n    try:\n        if os.fork() == 0:\n"
            "            time.sleep(5); os._exit(0)\n        n += 1\n    except OSError:\n        break\nprint(n)")
    limited = run_limited([sys.executable, "-c", bomb], timeout=60, memory_bytes=None, max_processes=20)
    assert "processes" in limited.hit and int(limited.stdout) < 20, limited


# ---------------------------------------------------------------- the grading command
def grade(assignment, course, **kwargs):
    from autograder.grade import grade as run

    return {r["student"]: r for r in run(assignment, course, **kwargs)}


@pytest.mark.slow
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_autograde_solutions_full_marks_release_zero(assignment, tmp_path, hidden_cases):
    for student, folder in (("solution", "solutions"), ("release", "notebooks")):
        target = tmp_path / "submitted" / student / assignment
        shutil.copytree(ROOT / folder / assignment, target)
    rows = grade(assignment, tmp_path, jobs=2, timeout=600)
    solution, release = rows["solution"], rows["release"]
    assert solution["status"] == "ok" and solution["max_score"] > 0, solution
    assert solution["score"] == solution["max_score"], solution
    assert release["status"] == "ok", release
    assert release["cells"] and all(v == 0 for v in release["cells"].values()), release
    assert (tmp_path / "grades" / f"{assignment}.csv").is_file()
    assert (tmp_path / "autograded" / "solution" / assignment).is_dir()


SYNTH_SOLUTION = '''def extract_gsm8k_answer(answer_text):
    """The final answer after the last '####', thousands commas removed."""
    ### BEGIN SOLUTION
    import re
    match = re.search(r"####(?!.*####)\\s*(.+?)\\s*$", answer_text, re.DOTALL)
    if match is None:
        raise ValueError("no final answer")
    return match.group(1).strip().replace(",", "")
    ### END SOLUTION'''
SYNTH_VISIBLE = 'assert extract_gsm8k_answer("x\\n#### 1,080") == "1080", "thousands commas kept"'
SYNTH_HIDDEN = '''### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("extract_gsm8k_answer", extract_gsm8k_answer)
### END HIDDEN TESTS'''

HOSTILE = '''import os, pathlib
hidden = pathlib.Path(os.environ.get("COURSE_REPO", ".")) / "autograder" / "hidden"
print("HIDDEN-VISIBLE" if hidden.is_dir() and any(hidden.iterdir()) else "HIDDEN-MASKED")
import autograder.checker
autograder.checker.check_hidden = lambda name, fn: print(name, "passed, trust me")  # disarm the hidden check

def extract_gsm8k_answer(answer_text):
    return "1080"  # right for the visible check only'''


def synthetic_assignment(source: Path) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata = {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
                   "language_info": {"name": "python"}}
    cells = [
        nbformat.v4.new_markdown_cell("# A small assignment"),
        nbformat.v4.new_code_cell(SYNTH_SOLUTION),
        nbformat.v4.new_code_cell(SYNTH_VISIBLE),
        nbformat.v4.new_code_cell(SYNTH_VISIBLE + "\n" + SYNTH_HIDDEN),
    ]
    meta = [None,
            {"grade": False, "solution": True, "locked": False, "grade_id": "answer", "schema_version": 3},
            {"grade": True, "solution": False, "locked": True, "grade_id": "visible", "points": 1, "schema_version": 3},
            {"grade": True, "solution": False, "locked": True, "grade_id": "hidden", "points": 2, "schema_version": 3}]
    nb.cells = cells
    for i, (cell, m) in enumerate(zip(cells, meta)):
        cell.id = f"c{i}"
        if m:
            cell.metadata["nbgrader"] = m
    (source / "90").mkdir(parents=True)
    nbformat.write(nb, source / "90" / "small.ipynb")


def submit(course: Path, student: str, source: Path, answer_cell: str | None) -> None:
    nb = nbformat.read(source / "90" / "small.ipynb", as_version=4)
    if answer_cell is not None:
        nb.cells[1].source = answer_cell
    target = course / "submitted" / student / "90"
    target.mkdir(parents=True)
    nbformat.write(nb, target / "small.ipynb")


@pytest.mark.slow
def test_grading_survives_crashing_and_hostile_submissions(tmp_path, hidden_cases, monkeypatch):
    """An assignment no lesson defines (every graded name is a stub for it), with an ungated
    visible cell; loops, floods, bombs and the rest are tests/test_exploits.py's catalogue."""
    from autograder.sandbox import sandbox_available

    monkeypatch.setenv("COURSE_REPO", str(ROOT))
    source, course = tmp_path / "source", tmp_path / "course"
    synthetic_assignment(source)
    submit(course, "good", source, None)
    submit(course, "crashes", source, "import os\nos._exit(3)")
    submit(course, "hogs_memory", source, "block = bytearray(64 * 2**30)")
    submit(course, "hostile", source, HOSTILE)
    (course / "submitted" / "empty" / "90").mkdir(parents=True)
    rows = grade("90", course, jobs=2, timeout=60, memory_gb=6, source=source)
    summary = {s: (r["status"], r["score"]) for s, r in rows.items()}
    print(json.dumps(summary))
    assert rows["good"]["status"] == "ok" and rows["good"]["score"] == 3, rows["good"]
    assert rows["empty"]["status"] == "no notebook" and rows["empty"]["score"] == 0
    assert rows["crashes"]["status"] == "crashed" and rows["crashes"]["score"] == 0, rows["crashes"]
    assert rows["hogs_memory"]["status"] == "out of memory" and rows["hogs_memory"]["score"] == 0, rows["hogs_memory"]
    hostile = rows["hostile"]
    # the kernel disarmed check_hidden, so nbgrader saw a passing cell; the judge's verdict still rules
    assert hostile["cells"]["small:visible"] == 1, hostile  # a visible check it really passes
    assert hostile["cells"]["small:hidden"] == 0, hostile
    assert any("did not pass in the judge" in n for n in hostile["notes"]), hostile
    if sandbox_available():
        graded = nbformat.read(course / "autograded" / "hostile" / "90" / "small.ipynb", as_version=4)
        printed = "".join(o.get("text", "") for c in graded.cells if c.cell_type == "code" for o in c.outputs)
        assert "HIDDEN-MASKED" in printed and "HIDDEN-VISIBLE" not in printed

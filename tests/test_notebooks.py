"""Every notebook of the course, generically over solutions/NN/: it builds, releases, runs and leaks nothing.

- solutions/ is up to date with lessons/ (so each graded cell is the course_lib reference code),
  and notebooks/ with a fresh `nbgrader generate_assignment` of solutions/ (no drift);
- both are stored without outputs;
- every graded cell of a release notebook is a stub that raises NotImplementedError with a
  message that says what to do (each notebook's run is its grading in the sandbox,
  `tests/test_autograder.py`: the solution with full marks, no error in any cell, within the time
  limit; the release with nothing erring before its first graded cell, which fails on the stub);
- no solution code, hidden-test code or hidden case value appears under notebooks/.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = sorted((ROOT / "solutions").glob("[0-9][0-9]/*.ipynb"))
RELEASES = sorted((ROOT / "notebooks").glob("[0-9][0-9]/*.ipynb"))


def ids(paths):
    return [p.parent.name for p in paths]


def test_there_are_notebooks():
    assert SOLUTIONS, "no solution notebooks in solutions/NN/"
    assert ids(SOLUTIONS) == ids(RELEASES), "every solutions/NN/ needs its release in notebooks/NN/ (run `make release`)"


def test_solutions_are_built_from_lessons():
    proc = subprocess.run([sys.executable, "scripts/build_solutions.py", "--check"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow
def test_release_has_not_drifted():
    proc = subprocess.run([sys.executable, "-m", "autograder.release", "--check"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr + proc.stdout[-2000:]


@pytest.mark.parametrize("path", SOLUTIONS + RELEASES, ids=[f"solutions/{i}" for i in ids(SOLUTIONS)] + [f"notebooks/{i}" for i in ids(RELEASES)])
def test_stored_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name} is stored with outputs"


@pytest.mark.parametrize("path", RELEASES, ids=ids(RELEASES))
def test_release_leaks_no_solution_or_hidden_test(path):
    text = path.read_text(encoding="utf-8")
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "check_hidden", "autograder"):
        assert marker not in text, f"{path} contains {marker!r}"
    source = ROOT / "solutions" / path.parent.name / path.name
    src = nbformat.read(source, as_version=4)
    visible = "\n".join(re.sub(r"### BEGIN SOLUTION.*?### END SOLUTION", "", c.source, flags=re.S) for c in src.cells)
    released = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells)
    for cell in src.cells:
        for region in re.findall(r"### BEGIN SOLUTION(.*?)### END SOLUTION", cell.source, flags=re.S):
            for line in region.splitlines():
                line = line.strip()
                if len(line) > 25 and not line.startswith("#") and line not in visible:
                    assert line not in released, f"solution line leaked into {path}: {line!r}"


@pytest.mark.parametrize("path", RELEASES, ids=ids(RELEASES))
def test_every_graded_cell_of_a_release_is_a_stub_that_says_what_to_do(path):
    """What a student runs first in a graded cell raises NotImplementedError with what to do (the
    release's run in the sandbox, `tests/test_autograder.py`, fails there on it)."""
    from traitlets.config.loader import PyFileConfigLoader

    from autograder.course_folder import CONFIG

    stub = PyFileConfigLoader(str(CONFIG)).load_config().ClearSolutions.code_stub["python"]
    assert "NotImplementedError(\"replace this line with your code" in stub, stub
    stubs = [c.source for c in nbformat.read(path, as_version=4).cells if c.metadata.get("nbgrader", {}).get("solution")]
    assert stubs, f"{path} has no graded cell"
    lines = [line for line in stub.splitlines() if line.strip()]  # indented in a function's body
    assert all(all(line in source for line in lines) for source in stubs), f"{path}: a graded cell without the stub {stub!r}"


def _strings(obj):
    if isinstance(obj, str):
        yield obj
    elif hasattr(obj, "truth"):  # an expected output (autograder.compare.Expected)
        yield from _strings(obj.truth)
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _strings(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _strings(v)


def test_no_hidden_case_under_notebooks():
    from autograder.cases import ensure_cases, load_cases
    from autograder.suite_api import suite_names

    for name in suite_names():
        ensure_cases(name)
    assert subprocess.run(["git", "check-ignore", "-q", "autograder/hidden/x.pt"], cwd=ROOT).returncode == 0, \
        "autograder/hidden/ must be git-ignored"
    files = [p for p in (ROOT / "notebooks").rglob("*") if p.is_file()]
    assert all(p.suffix == ".ipynb" for p in files), "only notebooks belong under notebooks/"
    text = "\n".join(p.read_text(encoding="utf-8") for p in files)
    for name in suite_names():
        for case in load_cases(name)["cases"]:
            for s in _strings([case["inputs"], case["expected"]]):
                # short strings, the public prompt template and an argument's public vocabulary (a mode
                # such as 'sequence_truncate': one identifier, no text of a case) are no evidence of a leak
                if len(s) >= 16 and not s.isidentifier() and "{question}" not in s and "conversation between User" not in s:
                    assert s not in text, f"a hidden case string of {name} appears under notebooks/"


def test_lesson_build_refuses_a_pasted_function_whose_names_are_not_defined(tmp_path):
    """The AST pass of the lesson build: a pasted function needs every global name it reads."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from build_solutions import build_notebook
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    lesson = tmp_path / "99_check.py"
    header = "# %%\nimport torch\n\n"
    lesson.write_text(header + "# %% [given] course_lib.logprobs:_row_chunks\n")
    with pytest.raises(ValueError, match=r"99_check.py:4: course_lib.logprobs:_row_chunks uses CHUNK_ELEMENTS"):
        build_notebook(lesson)
    lesson.write_text(header + "# %%\nCHUNK_ELEMENTS = 1 << 22\n\n# %% [given] course_lib.logprobs:_row_chunks\n")
    assert "def _row_chunks" in build_notebook(lesson).cells[-1].source

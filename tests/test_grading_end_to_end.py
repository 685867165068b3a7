"""Two mistakes graded end to end through `autograder.grade.grade`, as whole notebooks.

The per-function corpora (tests/graded/) run each wrong version through the judge directly; this
runs two of them as a student's submitted notebook: nbgrader's layout, the sandboxed kernel, the
judge server and the gradebook, and checks that each loses exactly the points of its cell."""

from __future__ import annotations

import textwrap
from pathlib import Path

import nbformat
import pytest

from autograder.grade import grade
from autograder.mistakes import catalogue

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_end_to_end(tmp_path):
    """Two mistakes through `make grade` as whole notebooks (01 and 04, cut after their last graded
    cell): each loses exactly the points of its cell, while the solution keeps all of its own."""
    plan = {"01": ("solution_tokenize_prompt_and_output",
                   catalogue("tokenize_prompt_and_output")["special_tokens_added"].source, "test_tokenize_prompt_and_output"),
            "04": ("solution_sft_microbatch_train_step", catalogue("sft_microbatch_train_step")["input_grad_zeroed"].source,
                   "sft_microbatch_train_step")}
    for assignment, (solution_id, wrong, graded_cell) in plan.items():
        path = next((ROOT / "solutions" / assignment).glob("*.ipynb"))
        nb = nbformat.read(path, as_version=4)
        last = max(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade"))
        nb.cells = nb.cells[: last + 1]
        source, course = tmp_path / f"source{assignment}", tmp_path / f"course{assignment}"
        for folder in (source / assignment, course / "submitted" / "solution" / assignment):
            folder.mkdir(parents=True)
            nbformat.write(nb, folder / path.name)
        for cell in nb.cells:
            if cell.metadata.get("nbgrader", {}).get("grade_id") == solution_id:
                cell.source = textwrap.dedent(wrong)
        (course / "submitted" / "mistake" / assignment).mkdir(parents=True)
        nbformat.write(nb, course / "submitted" / "mistake" / assignment / path.name)
        rows = {r["student"]: r for r in grade(assignment, course, jobs=2, timeout=600, source=source)}
        solution, mistake = rows["solution"], rows["mistake"]
        assert solution["status"] == "ok" and solution["score"] == solution["max_score"] > 0, \
            f"{assignment}: the solution is {solution['status']}, {solution['score']}/{solution['max_score']}: {solution['notes']}"
        key = f"{path.stem}:{graded_cell}"
        assert mistake["cells"][key] == 0 and solution["cells"][key] > 0, mistake
        assert mistake["score"] == solution["score"] - solution["cells"][key], mistake

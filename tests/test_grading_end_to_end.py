"""Mistakes graded end to end through `autograder.grade.grade`, as whole notebooks.

tests/test_graded.py runs each graded function's wrong versions through the judge directly; this
runs some of them as a student's submitted notebook: nbgrader's layout, the sandboxed kernel, the
judge server and the gradebook, and checks that each loses exactly the points of its cell, and that
the judge names the known mistake where students and instructors read it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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


# each wrong student: (the graded cell of the function, the solution cell it rewrites, the mistake)
KNOWN_MISTAKES_07 = {
    "zeros_counted": ("masked_mean", "solution_masked_mean", "masked_mean", "mean_including_the_masked_zeros"),
    "sign_flipped": ("compute_grpo_clip_loss", "solution_compute_grpo_clip_loss", "compute_grpo_clip_loss",
                     "clip_sign_flipped"),
    "ratio_inverted": ("compute_grpo_clip_loss", "solution_compute_grpo_clip_loss", "compute_grpo_clip_loss",
                       "ratio_inverted"),
}


@pytest.mark.slow
def test_known_mistakes_named_end_to_end(tmp_path):
    """Assignment 07 graded with the solution, the release's notebook as it is (every graded function
    a stub) and three students who each make one catalogued mistake: the grades' rows name each wrong
    student's mistake in its cell and the honest row names none, the graded notebook's cell says it
    (what nbgrader's feedback and a Gradescope output show), `make check` on the wrong notebook prints
    the name and the sentence, and the class report counts the stub as not attempted (apart from the
    attempts, in every row and case rate) and the callers of a wrong helper as "a helper it calls
    failed", never as their own mistake. It took 844 s at a load average of 25 on two shared cores."""
    from autograder.class_report import class_report

    path = next((ROOT / "solutions" / "07").glob("*.ipynb"))
    course = tmp_path / "course"
    nb = nbformat.read(path, as_version=4)
    (course / "submitted" / "solution" / "07").mkdir(parents=True)
    nbformat.write(nb, course / "submitted" / "solution" / "07" / path.name)
    (course / "submitted" / "stub" / "07").mkdir(parents=True)
    release = next((ROOT / "notebooks" / "07").glob("*.ipynb"))
    nbformat.write(nbformat.read(release, as_version=4), course / "submitted" / "stub" / "07" / path.name)
    for student, (_, solution_id, suite, mistake) in KNOWN_MISTAKES_07.items():
        wrong = nbformat.read(path, as_version=4)
        cell = next(c for c in wrong.cells if c.metadata.get("nbgrader", {}).get("grade_id") == solution_id)
        cell.source = textwrap.dedent(catalogue(suite)[mistake].source)
        (course / "submitted" / student / "07").mkdir(parents=True)
        nbformat.write(wrong, course / "submitted" / student / "07" / path.name)
    rows = {r["student"]: r for r in grade("07", course, jobs=2, timeout=600)}
    assert rows["solution"]["score"] == rows["solution"]["max_score"] > 0, rows["solution"]
    assert not any(rows["solution"]["mistakes"].values()), rows["solution"]["mistakes"]
    assert not any(rows["solution"]["failed_cases"].values()), rows["solution"]["failed_cases"]
    saved = {r["student"]: r for r in json.loads((course / "grades" / "07.json").read_text())}
    for student, (graded_cell, _, suite, mistake) in KNOWN_MISTAKES_07.items():
        key = f"{path.stem}:{graded_cell}"
        assert saved[student]["mistakes"][key] == [mistake] and rows[student]["cells"][key] == 0, saved[student]
        assert set(catalogue(suite)[mistake].cases) <= set(saved[student]["failed_cases"][suite])
        executed = nbformat.read(course / "autograded" / student / "07" / path.name, as_version=4)
        said = [o.get("evalue", "") for c in executed.cells if c.metadata.get("nbgrader", {}).get("grade_id") == graded_cell
                for o in c.get("outputs", []) if o.get("output_type") == "error"]
        assert any(f"known mistake {mistake}: {catalogue(suite)[mistake].sentence}" in text for text in said), said

    check = subprocess.run([sys.executable, "-m", "autograder.practice", "07", "--notebook",
                            str(course / "submitted" / "zeros_counted" / "07" / path.name)],
                           cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
                           timeout=600)
    named = catalogue("masked_mean")["mean_including_the_masked_zeros"]
    assert f"known mistake mean_including_the_masked_zeros: {named.sentence}" in check.stdout, check.stdout[-3000:]

    assert saved["stub"]["recognition"]["masked_mean"]["unfinished"] and not any(saved["stub"]["mistakes"].values())
    table, csv_path, png = class_report("07", course)
    text = table.read_text()
    for _, _, suite, mistake in KNOWN_MISTAKES_07.values():
        assert f"| `{suite}` | `{mistake}` | 1 |" in text, text
    # function | checked | passed | not attempted | named (and more) | errors only | a helper failed | otherwise
    assert "| `masked_mean` | 5 | 3 | 1 | 1 (0) | 0 | 0 | 0 |" in text, text
    assert "| `compute_grpo_clip_loss` | 5 | 2 | 1 | 2 (0) | 0 | 0 | 0 |" in text, text
    assert "| `compute_policy_gradient_loss` | 5 | 2 | 1 | 0 (0) | 0 | 2 | 0 |" in text, text
    assert "| `grpo_microbatch_train_step` | 5 | 1 | 1 | 0 (0) | 0 | 3 | 0 |" in text, text
    # case rates over the 4 attempts: the stub fails every case and counts in none
    assert "| `masked_mean` | `dim_last_bool_mask_4x7` | 1 | 4 | 25% | 1 | 0 | 0 |" in text, text
    assert csv_path.read_text().startswith("table,function,item,count,of") and png.stat().st_size > 10_000
    from PIL import Image

    width, height = Image.open(png).size
    assert width == 1100 and height <= 1600, (width, height)
    print(text)

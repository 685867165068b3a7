"""No twin of a graded function in what a student gets (autograder.student_view, autograder.twins).

- the declaration is sound, and its three consumers agree with it for every assignment and suite:
  the stubbed course_lib of the kit and of the judge, the runner's tripwire, and
  `references_hidden` (how a known mistake is run as the judge runs a student's function);
- the twin check finds nothing reachable in any assignment's stubbed course_lib, and finds the
  packed GRPO update where the declaration is left out (slow: a scan per assignment);
- the GRPO trainer runs the plain loop where the packed update is a stub, and a student's own;
- the kit's leak check refuses an open twin's body;
- delegating a graded function to each declared twin earns 0 of that function's points through the
  grading command, the rest of the notebook its full points (slow: one grading run per assignment
  with twins, every twin's student in it).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.assignments import SOLUTIONS, assignment_of, assignments, hidden_gates
from autograder.kit import leaks, secret_lines, write_course_lib
from autograder.signatures import ReferenceCalled, references_hidden
from autograder.stubs import COURSE_LIB, stub_for_suite, stub_tree
from autograder.student_view import TWINS, check_declaration, stubbed, suite_view
from autograder.suite_api import load_suite, suite_settings
from autograder.twins import find_twins, graded_suites

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENTS = assignments()
PACKED = "course_lib.training.grpo_update:packed_grpo_train_step"

# the graded cell of a student who delegates to each twin (appended to the solution's cell: its def wins)
DELEGATES = {
    PACKED: """
from course_lib.training.grpo_update import packed_grpo_train_step


def grpo_train_step(*args, **kwargs):
    return packed_grpo_train_step(*args, **kwargs)
""",
    "course_lib.logprobs:get_response_log_probs": """
from course_lib.logprobs import get_response_log_probs


def chunked_response_log_probs(model, input_ids, labels, chunk_size=1024):
    return get_response_log_probs(model, input_ids, labels)["log_probs"]
""",
    "course_lib.grpo:_k3_per_token": """
from course_lib.grpo import _k3_per_token


def kl_k3(policy_log_probs, ref_log_probs):
    if policy_log_probs.shape != ref_log_probs.shape:
        raise ValueError("the two shapes differ")
    return _k3_per_token(policy_log_probs, ref_log_probs)
""",
    "course_lib.rollouts.mismatch_atlas:batch_of": """
from course_lib.rollouts.mismatch_atlas import batch_of


def tokenize_prompt_and_output(prompt_strs, output_strs, tokenizer):
    if len(prompt_strs) != len(output_strs):
        raise ValueError("prompts and outputs differ in number")
    if tokenizer.pad_token_id is None:
        raise ValueError("no pad token")
    ids = lambda texts: tokenizer(list(texts), add_special_tokens=False)["input_ids"]
    return batch_of(ids(prompt_strs), ids(output_strs), tokenizer.pad_token_id)
""",
    "course_lib.gsm8k:as_r1_zero": """
from course_lib.gsm8k import as_r1_zero


def gsm8k_to_r1_zero(example, template=None):
    return as_r1_zero([example])[0]
""",
    "course_lib.logprobs:entropy_from_logits": """
from course_lib.logprobs import entropy_from_logits


def compute_entropy(logits):
    return entropy_from_logits(logits.reshape(1, -1, logits.shape[-1])).reshape(logits.shape[:-1])
""",
    "course_lib.rollouts.mismatch_atlas:full_forward": """
from course_lib.rollouts.mismatch_atlas import full_forward


def get_response_log_probs(model, input_ids, labels, return_token_entropy=False):
    return {"log_probs": full_forward(model, {"input_ids": input_ids, "labels": labels}), "token_entropy": None}
""",
    "course_lib.training.evaluation:evaluate": """
from course_lib.training.evaluation import evaluate as evaluate_records


def evaluate(engine, prompts, ground_truths, sampling_params, reward_fn=None):
    records = [{"prompt": p, "ground_truth": g} for p, g in zip(prompts, ground_truths)]
    return evaluate_records(engine, None, records, max_tokens=sampling_params.max_tokens, return_rollouts=True)
""",
}


# ---------------------------------------------------------------- one declaration, three consumers
def test_the_declaration_is_sound():
    assert check_declaration() == []
    assert sorted(DELEGATES) == sorted(t.ref for t in TWINS), "a twin needs the graded cell that delegates to it here"


def stubs_in(tree: Path) -> set[tuple[str, str]]:
    """(module, name) of every top-level function of a course_lib copy whose body (after its
    docstring) only raises NotImplementedError, every class whose methods all do, and every
    constant a stub left at None."""
    out = set()

    def raises_only(node) -> bool:
        body = node.body[1:] if ast.get_docstring(node) is not None else node.body
        return len(body) == 1 and isinstance(body[0], ast.Raise) and "NotImplementedError" in ast.unparse(body[0])

    for path in sorted(tree.rglob("*.py")):
        rel = path.relative_to(tree.parent).with_suffix("")
        module = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        for node in ast.parse(source).body:
            methods = [n for n in getattr(node, "body", []) if isinstance(n, ast.FunctionDef)]
            if isinstance(node, ast.FunctionDef) and raises_only(node):
                out.add((module, node.name))
            elif isinstance(node, ast.ClassDef) and methods and all(raises_only(m) for m in methods):
                out.add((module, node.name))
            elif isinstance(node, ast.Assign) and "= None  # a stub:" in lines[node.lineno - 1]:
                out.add((module, node.targets[0].id))
    return out


BASELINE = stubs_in(COURSE_LIB)  # the library's own (none expected)


@pytest.mark.slow
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_kit_judge_tripwire_and_mistakes_take_one_view(assignment, tmp_path):
    """What the kit of NN stubs, what the judge's runner of each suite of NN finds stubbed and trips
    on, and what `references_hidden` replaces are all `student_view`'s, entry for entry (4-8 s each
    at a load average of 17 on 2 cores)."""
    declared = {(g.module, g.name) for g in stubbed(assignment)}
    assert {(t.module, t.name) for t in TWINS if t.handled == "stub" and assignment_of(t.of) >= assignment} <= declared
    assert stubs_in(write_course_lib(tmp_path, assignment)) - BASELINE == declared  # what `build_kit` ships
    judged = stub_tree(assignment) / "course_lib"  # what the grading command's kernel and the judge bind
    assert stubs_in(judged) - BASELINE == declared
    for name in graded_suites(assignment):
        suite = load_suite(name)
        names, wire = suite_view(suite, assignment)
        assert {(g.module, g.name) for g in names} == declared
        assert stub_for_suite(name, assignment) == judged, name  # the same folder: the same names stubbed
        assert suite_settings(suite)["tripwire"] == wire, name  # what `autograder.trial` sends the runner
        assert set(wire) >= {t.name for t in TWINS if t.of == suite.GRADED and t.handled == "tripwire"}
        _references_hidden_take(suite, names, wire)


def _references_hidden_take(suite, names, wire) -> None:
    import course_lib

    for g in names:  # loaded first, as references_hidden loads them
        importlib.import_module(g.module)
    modules = {k: m for k, m in sys.modules.items() if k == "course_lib" or k.startswith("course_lib.")}
    before = {(k, a): v for k, m in modules.items() for a, v in vars(m).items()}
    originals = {id(vars(sys.modules[g.module])[g.name]) for g in names}
    with references_hidden(suite):
        changed = {(k, a) for k, m in modules.items() for a, v in vars(m).items() if before.get((k, a)) is not v}
        expected = {(k, a) for (k, a), v in before.items() if a in wire or
                    (id(v) in originals and not isinstance(v, type))}
        assert changed == expected, suite.GRADED
        for g in names:
            obj = vars(sys.modules[g.module])[g.name]
            if obj is None or isinstance(obj, type):  # a constant stubbed; a graded class, left as it is
                continue
            with pytest.raises(ReferenceCalled if g.name in wire else NotImplementedError):
                obj()
        for name in wire:
            if hasattr(course_lib, name):
                with pytest.raises((ReferenceCalled, NotImplementedError)):
                    getattr(course_lib, name)()


# ---------------------------------------------------------------- twins found, not remembered
@pytest.mark.slow
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_no_twin_is_reachable(assignment):
    """The check finds no function of NN's stubbed course_lib that passes (nearly) every practice case
    of a graded function of NN (25-221 s each at a load average of 16-26 on 2 cores; 9-43 s, 381 s for
    the fifteen, at 6-9)."""
    found = find_twins(assignment)
    assert not found, "\n".join(f.line() for f in found)


@pytest.mark.slow
def test_the_check_finds_the_packed_update_where_it_is_not_declared():
    """Control: without the declaration the packed update is reachable in kit 09 and passes every case
    (354 s at a load average of 19; 16 s at 3-6)."""
    found = find_twins("09", declared=False)
    assert [(f.candidate, f.twin, f.passed == f.cases) for f in found] == [(PACKED, True, True)], found


# ---------------------------------------------------------------- the trainer where the packed update is a stub
def test_the_trainer_keeps_the_packed_update_where_it_is_real():
    from course_lib.training.grpo_update import packed_grpo_train_step, plain_where_stubbed

    assert plain_where_stubbed(packed_grpo_train_step) is packed_grpo_train_step


FALLBACK = '''
import inspect, json, sys
import torch
from course_lib.training.grpo_trainer import train_grpo
from course_lib.training.grpo_update import packed_grpo_train_step
from tests.helpers import course_tokenizer, problems, random_qwen2

out = {}
try:
    packed_grpo_train_step(None, None, {}, "no_baseline", 1, 1)
except NotImplementedError as e:
    out["packed"] = str(e)
tok = course_tokenizer()
run = dict(n_grpo_steps=1, rollout_batch_size=4, group_size=2, train_batch_size=4, gradient_accumulation_steps=2,
           sampling_max_tokens=8, sampling_min_tokens=1, eval_examples=0)
try:
    train_grpo(run, model=random_qwen2(tok), tokenizer=tok, train_data=problems(4), eval_data=[], progress=False)
except NotImplementedError as e:
    out["default"] = str(e)
# the student's own plain loop (notebook 09's solution), as notebook 09 passes it
from course_lib.grpo import _check_rollout_batch, _k3_per_token, grpo_microbatch_train_step, slice_micro_batch
from course_lib.logprobs import get_response_log_probs
from course_lib.masking import masked_mean
exec(sys.argv[1])
res = train_grpo(run, model=random_qwen2(tok), tokenizer=tok, train_data=problems(4), eval_data=[], progress=False,
                 update_fn=grpo_train_step)
out["own"] = [r["kind"] for r in res.metrics]
print(json.dumps(out))
'''


@pytest.mark.slow
def test_where_the_packed_update_is_a_stub_the_trainer_runs_the_plain_loop(tmp_path):
    """In the stubbed course_lib of 09: the packed update's stub names its graded function; the trainer's
    default update is then the plain loop (the stub of the student's grpo_train_step, which names its
    notebook), and the student's own runs a step (24 s at a load average of 20)."""
    from course_lib.grpo import grpo_train_step

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(stub_tree("09")), str(ROOT)]), "OMP_NUM_THREADS": "1"}
    # not from the repository's folder: `python -c` puts its working folder first on the path
    proc = subprocess.run([sys.executable, "-c", FALLBACK, inspect.getsource(grpo_train_step)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["packed"] == "packed_grpo_train_step computes grpo_train_step, yours to write in notebook 09"
    assert out["default"] == "grpo_train_step is yours to write in notebook 09"
    assert out["own"] == ["train"]


def test_batch_of_lays_out_the_ids_as_written_out():
    """`batch_of`, which now batches through `tokenize_prompt_and_output`, gives the layout written out
    by hand (its former body) on random batches, extra padding columns included."""
    import random

    import torch

    from course_lib.rollouts.mismatch_atlas import batch_of

    def by_hand(prompt_ids, response_ids, pad, extra):
        full = [p + r for p, r in zip(prompt_ids, response_ids)]
        width = max(len(f) for f in full) - 1 + extra
        ids = torch.full((len(full), width + 1), pad, dtype=torch.long)
        mask = torch.zeros(len(full), width, dtype=torch.bool)
        for i, (f, p) in enumerate(zip(full, prompt_ids)):
            ids[i, : len(f)] = torch.tensor(f)
            mask[i, len(p) - 1 : len(f) - 1] = True
        return {"input_ids": ids[:, :-1], "labels": ids[:, 1:], "response_mask": mask}

    rng = random.Random(0)
    for _ in range(300):
        rows = rng.randint(1, 6)
        prompts, responses = ([[rng.randint(0, 50) for _ in range(rng.randint(1, 9))] for _ in range(rows)]
                              for _ in range(2))
        pad, extra = rng.randint(0, 3), rng.choice([0, 1, 5, 64])
        got, want = batch_of(prompts, responses, pad, extra), by_hand(prompts, responses, pad, extra)
        assert all(got[k].dtype == want[k].dtype and torch.equal(got[k], want[k]) for k in want), (prompts, responses)


# ---------------------------------------------------------------- the kit's leak check
@pytest.mark.slow
def test_the_leak_check_refuses_an_open_twin_body(tmp_path):
    """Kit 09's course_lib with the packed update's real module in it leaks its body; the stubbed one does
    not (9 s at a load average of 13)."""
    secrets = secret_lines("09")
    module = Path("course_lib") / "training" / "grpo_update.py"
    stubbed_copy = write_course_lib(tmp_path / "stubbed", "09")
    assert leaks(stubbed_copy.parent, "09", secrets) == []
    planted = tmp_path / "planted" / module
    planted.parent.mkdir(parents=True)
    planted.write_bytes((ROOT / module).read_bytes())
    found = leaks(tmp_path / "planted", "09", secrets)
    assert found and all(f == str(module) for f, _ in found)
    assert any("micro_batch_rows(rollout_batch" in line for _, line in found), found


# ---------------------------------------------------------------- delegating to a twin earns nothing
def submission(assignment: str, graded: str, delegate: str, folder: Path) -> Path:
    """The solution notebook of NN with `delegate` appended to the cell that defines `graded`."""
    source = next((SOLUTIONS / assignment).glob("*.ipynb"))
    nb = nbformat.read(source, as_version=4)
    cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution") and f"def {graded}(" in c.source]
    assert len(cells) == 1, (assignment, graded)
    cells[0].source += "\n\n" + delegate.strip() + "\n"
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / source.name)
    return folder / source.name


def student_of(ref: str) -> str:
    return ref.replace("course_lib.", "").replace(".", "_").replace(":", "__")


def graded_cells(assignment: str, name: str | None = None) -> dict[str, float]:
    """{"notebook:grade id": points} of NN's graded cells (those whose hidden check is `name`'s, when given),
    as the grading rows name them."""
    source = next((SOLUTIONS / assignment).glob("*.ipynb"))
    points = {c.metadata["nbgrader"]["grade_id"]: float(c.metadata["nbgrader"]["points"])
              for c in nbformat.read(source, as_version=4).cells if c.metadata.get("nbgrader", {}).get("grade")}
    return {f"{notebook}:{cell}": points[cell] for (notebook, cell), suites in hidden_gates(SOLUTIONS / assignment).items()
            if name is None or name in suites}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """{assignment: {student: row}}: each assignment with a twin graded once, through the grading
    command (`make grade`'s path), every twin of it a student of that run; beside them the solution as
    it is where no other graded cell of the notebook can show that the run awards points."""
    rows = {}

    def grade(assignment: str) -> dict:
        if assignment not in rows:
            course = tmp_path_factory.mktemp(f"twins{assignment}")
            twins = [t for t in TWINS if assignment_of(t.of) == assignment]
            for t in twins:
                submission(assignment, t.of, DELEGATES[t.ref], course / "submitted" / student_of(t.ref) / assignment)
            if not set(graded_cells(assignment)) - {c for t in twins for c in graded_cells(assignment, t.of)}:
                source = next((SOLUTIONS / assignment).glob("*.ipynb"))
                (course / "submitted" / "honest" / assignment).mkdir(parents=True)
                (course / "submitted" / "honest" / assignment / source.name).write_bytes(source.read_bytes())
            proc = subprocess.run([sys.executable, "-m", "autograder.grade", assignment, "--course", str(course),
                                   "--jobs", "2", "--timeout", "600", "--memory-gb", "4"], cwd=ROOT, capture_output=True,
                                  text=True, timeout=3000, env={**os.environ, "OMP_NUM_THREADS": "1"})
            assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
            rows[assignment] = {r["student"]: r for r in json.loads((course / "grades" / f"{assignment}.json").read_text())}
            print(assignment, {s: (r["status"], r["score"], r["max_score"], r.get("seconds")) for s, r in rows[assignment].items()})
        return rows[assignment]

    return grade


@pytest.mark.slow
@pytest.mark.parametrize("ref", [t.ref for t in TWINS])
def test_delegating_to_a_twin_earns_nothing(ref, graded):
    """The graded function's cells earn 0 through the grading command, every other cell of the notebook
    its full points (and the solution as it is all its points, where it is graded beside): one grading
    run per assignment with twins, 35-140 s per submission at a load average of 17-26 on 2 cores; the
    eight in 472 s at 4-7."""
    twin = next(t for t in TWINS if t.ref == ref)
    assignment = assignment_of(twin.of)
    rows = graded(assignment)
    row, cells, mine = rows[student_of(ref)], graded_cells(assignment), graded_cells(assignment, twin.of)
    assert row["status"] == "ok", row
    assert mine and all(row["cells"][cell] == 0 for cell in mine), row
    assert all(row["cells"][cell] == points for cell, points in cells.items() if cell not in mine), row
    assert row["score"] == sum(cells.values()) - sum(mine.values()) == row["max_score"] - sum(mine.values()), row
    if "honest" in rows:
        assert rows["honest"]["status"] == "ok" and rows["honest"]["score"] == sum(cells.values()) > 0, rows["honest"]
    else:  # another cell earned its points in this run
        assert row["score"] > 0, row

"""The student kit and the stubbed course_lib it ships (autograder.assignments, .stubs, .kit, .practice).

- the registry reads every `[solution]` header of the lessons, and each name is defined where it says;
- a stubbed module differs from its source only in the graded bodies and constants, and each
  stub raises NotImplementedError naming its notebook, while the references of earlier
  assignments stay;
- `make student-kit` for every assignment: the kit holds the release notebooks up to NN and no
  solutions, lessons, suites, hidden cases or tests, and no line of a reference body of an open
  assignment in any file, its zip included (and the check finds a line that is planted there);
- a kit's `make setup` works and its notebook runs with the kit's own course_lib, and
  `make check` reports on practice cases in the judge's format (slow).

The kit's `make setup` runs for real (pip, the editable install of the kit's course_lib), in a
virtual environment that sees the repository's installed packages through a `.pth` line
(`seeded_venv`): the packages are the same ones `requirements.txt` names, and installing them
again from the network would take minutes and need a network. The notebook then runs in a
kernel of that environment, so the course_lib it imports is the kit's stubbed one.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import nbformat
import pytest
import torch

from autograder.assignments import NO_LESSON_YET, assignments, open_names, registry, unassigned
from autograder.kit import build_kit, harness_leaks, leaks, secret_lines
from autograder.stubs import module_path, stub_message, stub_source, write_stubbed

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENTS = [a for a in assignments() if (ROOT / "notebooks" / a).is_dir() and (ROOT / "solutions" / a).is_dir()]


# ---------------------------------------------------------------- the registry and the stubs
def test_registry_reads_every_solution_header():
    graded = registry()
    assert {g.assignment for g in graded} >= {"01", "02", "03", "04", "05"}
    headers = [ref for lesson in sorted((ROOT / "lessons").glob("[0-9][0-9]_*.py"))
               for line in lesson.read_text(encoding="utf-8").splitlines() if line.startswith("# %% [solution]")
               for ref in line.split()[3:]]
    assert sorted({h.partition(":")[2] for h in headers}) == sorted(g.name for g in graded)
    by_name = {g.name: g for g in graded}
    assert by_name["_FINAL_ANSWER"].assignment == "01" and by_name["_SelectedLogProb"].assignment == "03"
    for g in graded:  # each name is defined at the top of the module the lesson names
        module = importlib.import_module(g.module)
        assert g.name in vars(module), f"{g.ref}: not defined in {g.module}"
    assert [g.name for g in open_names("05")][:2] == ["evaluate", "sft_train_step"]
    assert {g.assignment for g in open_names("03")} - {NO_LESSON_YET} == {a for a in assignments() if a >= "03"}


SAMPLE = '''"""A module."""
import re

PATTERN = re.compile(r"x+")  # graded


def helper(x):
    return x + 1


def graded(x, y=2):
    """Docstring stays.

    Args: x.
    """
    # a comment before the body stays, as in the release notebook
    z = helper(x)

    def inner():
        return z * y
    return inner()


class Graded:
    """A class: its methods are stubbed, its attributes stay."""
    scale = 3

    @staticmethod
    def forward(ctx, a):
        return a * 2

    def backward(self):
        """Doc."""
        return None


TAIL = 1
'''


def test_stub_source_replaces_only_the_graded_bodies():
    out = stub_source(SAMPLE, {"graded": "07", "Graded": "07", "PATTERN": "07"})
    assert 'raise NotImplementedError("graded is yours to write in notebook 07")' in out
    assert 'raise NotImplementedError("Graded.forward is yours to write in notebook 07")' in out
    assert 'raise NotImplementedError("Graded.backward is yours to write in notebook 07")' in out
    assert "PATTERN = None  # a stub: PATTERN is yours to write in notebook 07" in out
    for kept in ('"""Docstring stays.\n\n    Args: x.\n    """', "# a comment before the body stays", "def helper(x):\n    return x + 1",
                 "    scale = 3", "    @staticmethod\n    def forward(ctx, a):", '        """Doc."""', "TAIL = 1\n", "import re"):
        assert kept in out, kept
    for gone in ("z = helper(x)", "def inner", "return a * 2", 're.compile(r"x+")'):
        assert gone not in out, gone
    namespace = {}
    exec(compile(out, "<stub>", "exec"), namespace)
    with pytest.raises(NotImplementedError, match="notebook 07"):
        namespace["graded"](1)
    assert namespace["helper"](1) == 2 and namespace["Graded"].scale == 3
    with pytest.raises(ValueError, match="defines no top-level missing"):
        stub_source(SAMPLE, {"missing": "07"})


def _top_level_segments(source: str, skip: set[str]) -> list[str]:
    tree = ast.parse(source)
    out = []
    for node in tree.body:
        names = {getattr(node, "name", None)} | {t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)}
        if not names & skip:
            out.append(ast.get_source_segment(source, node))
    return out


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_stubbed_course_lib_of_each_assignment(assignment, tmp_path):
    """Every other top-level statement is byte for byte the source's; every graded name of the
    assignment and later raises, naming its notebook; earlier ones are the references."""
    stub = write_stubbed(tmp_path, open_names(assignment))
    by_module = {}
    for g in open_names(assignment):
        by_module.setdefault(g.module, set()).add(g.name)
    for path in sorted((ROOT / "course_lib").rglob("*.py")):
        rel = path.relative_to(ROOT / "course_lib")
        original, stubbed = path.read_text(encoding="utf-8"), (stub / rel).read_text(encoding="utf-8")
        module = "course_lib." + ".".join(rel.with_suffix("").parts).replace(".__init__", "")
        if module not in by_module:
            assert stubbed == original, f"{rel} changed although it holds no graded name of {assignment} or later"
        else:
            assert _top_level_segments(stubbed, by_module[module]) == _top_level_segments(original, by_module[module])
    probe = f'''
import importlib, inspect, json
closed, open_ = {json.dumps([g.ref for g in registry() if g.assignment < assignment])}, {json.dumps([g.ref for g in open_names(assignment)])}
out = {{"open": {{}}, "closed": {{}}}}
for ref in open_:
    module, name = ref.split(":")
    obj = getattr(importlib.import_module(module), name)
    if callable(obj) and not isinstance(obj, type):
        try:
            params = inspect.signature(obj).parameters.values()
            obj(*[None for p in params if p.kind != p.KEYWORD_ONLY],
                **{{p.name: None for p in params if p.kind == p.KEYWORD_ONLY}})
            out["open"][name] = "returned"
        except NotImplementedError as e:
            out["open"][name] = str(e)
    else:
        out["open"][name] = repr(obj) if not isinstance(obj, type) else "class"
for ref in closed:
    module, name = ref.split(":")
    obj = getattr(importlib.import_module(module), name)
    out["closed"][name] = "NotImplementedError" not in (inspect.getsource(obj) if callable(obj) else repr(obj))
print(json.dumps(out))
'''
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for g in open_names(assignment):
        got = out["open"][g.name]
        assert got in (stub_message(g.name, g.assignment), "class", "None"), (g.name, got)
    assert all(out["closed"].values()), out["closed"]
    # a graded function whose notebook is not written yet (a suite, no lesson) is a stub in every kit
    for g in unassigned():
        assert out["open"][g.name] == f"{g.name} is yours to write in a later notebook", (g.name, out["open"][g.name])


# ---------------------------------------------------------------- the kit of every assignment
@pytest.fixture(scope="module")
def kits(tmp_path_factory):
    """kits(NN): the kit (folder and zip) of assignment NN, built once per worker when a test first
    asks for it (a worker builds the kits of the tests it runs; their practice cases are made once,
    `autograder.cases.seeded_cases`)."""
    root = tmp_path_factory.mktemp("kits")
    built = {}

    def kit(assignment: str) -> Path:
        if assignment not in built:
            built[assignment] = build_kit(assignment, root / f"kit{assignment}")
        return built[assignment]

    return kit


PRIVATE_PROBE = r"""
import importlib, json, sys
# as in a kit or the sandbox, where this repository is not installed: no editable-install finder
sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
from autograder.suite_api import HARNESSES, load_suite, suite_names
out = {"suites": suite_names(), "harnesses": [load_suite(s, HARNESSES).GRADED for s in suite_names()], "importable": []}
for s in suite_names():
    try:
        load_suite(s)
        out["importable"].append(s)
    except ModuleNotFoundError:
        pass
for m in ["autograder.mistakes", "autograder.cases", "autograder.signatures", "autograder.graded._log_ratio_cases",
          *[f"autograder.graded.{s}.grader" for s in suite_names()]]:
    try:
        importlib.import_module(m)
        out["importable"].append(m)
    except ModuleNotFoundError:
        pass
print(json.dumps(out))
"""


def test_nothing_private_is_importable_from_the_kernel_side(tmp_path):
    """What a kit and the grading sandbox hold of autograder (`write_kernel_side`) is each folder's
    harness, copied as a file: every harness loads there (`call` and its settings), and no grader.py,
    shared case module, catalogue or case maker can be imported, nor the grader's view of a suite."""
    from autograder.harness import write_kernel_side
    from autograder.suite_api import suite_names

    suites = ["compute_entropy", "kl_k2", "grpo_train_step"]
    target = write_kernel_side(tmp_path, suites)
    graded = sorted(p.relative_to(target).as_posix() for p in (target / "graded").rglob("*") if p.is_file())
    # kl_k2's harness takes kl_k1's call: the harnesses a harness imports come with it
    assert graded == ["graded/__init__.py", "graded/compute_entropy/__init__.py", "graded/grpo_train_step/__init__.py",
                      "graded/kl_k1/__init__.py", "graded/kl_k2/__init__.py"], graded
    for suite in suites:
        assert (target / "graded" / suite / "__init__.py").read_bytes() == \
            (ROOT / "autograder" / "graded" / suite / "__init__.py").read_bytes()
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}", "PYTHONSAFEPATH": "1"}
    proc = subprocess.run([sys.executable, "-c", PRIVATE_PROBE], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen == {"suites": sorted(suites + ["kl_k1"]), "harnesses": sorted(suites + ["kl_k1"]), "importable": []}, seen
    assert set(suite_names()) > set(seen["suites"])


@pytest.mark.slow
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_student_kit_has_no_reference_of_an_open_assignment(assignment, kits):
    kit = kits(assignment)
    zip_path = kit.with_suffix(".zip")
    assert zip_path.is_file()
    top = {p.name for p in kit.iterdir()}
    assert top == {"README.md", "Makefile", "requirements.txt", "pyproject.toml", "notebooks", "course_lib", "data",
                   "configs", "jupyter_config", "practice", "autograder"}, top
    assert sorted(p.name for p in (kit / "notebooks").iterdir()) == [a for a in ASSIGNMENTS if a <= assignment]
    files = [p for p in kit.rglob("*") if p.is_file()]
    names = {p.relative_to(kit).as_posix() for p in files}
    assert not any(n.startswith(("solutions/", "lessons/", "tests/", "autograder/hidden/", ".git")) for n in names)
    graded = [n for n in names if n.startswith("autograder/graded/")]
    assert graded and all(n.endswith("/__init__.py") and n.count("/") <= 3 for n in graded), graded  # harnesses only
    with zipfile.ZipFile(zip_path) as z:  # the folder's files, byte for byte: its leak check is the zip's
        members = {n.split("/", 1)[1]: n for n in z.namelist() if not n.endswith("/")}
        assert sorted(members) == sorted(names)
        assert all(z.read(members[p.relative_to(kit).as_posix()]) == p.read_bytes() for p in files)
    for path in files:
        if path.suffix in (".py", ".ipynb", ".md", ".json", ".txt", ""):
            text = path.read_text(encoding="utf-8", errors="replace")
            assert not re.search(r"^def (make_inputs|truth)\(", text, flags=re.M), \
                f"{path}: a case generator or a suite's truth"
            assert "BEGIN SOLUTION" not in text and "check_hidden(" not in text, path
    manifest = json.loads((kit / "practice" / "manifest.json").read_text())
    assert sorted(manifest) == [a for a in ASSIGNMENTS if a <= assignment]
    for a, entry in manifest.items():
        for suite in entry["suites"]:
            assert (kit / "practice" / a / f"{suite}.pt").is_file()
            assert (kit / "autograder" / "graded" / suite / "__init__.py").is_file()
            known = torch.load(kit / "practice" / a / f"{suite}.pt", weights_only=False)["mistakes"]
            assert known and all(set(m) == {"sentence", "signature", "untold", "returned", "covers"}
                                 for m in known.values()), suite  # outputs and case names, no code
    secrets = secret_lines(assignment)
    assert secrets, "no reference line to look for"
    assert leaks(kit, assignment, secrets) == []
    assert not [line for line in secrets if line in "\n".join(sorted(names))]  # what the zip adds: its names
    shared = {suite: lines for suite, lines in harness_leaks(assignment).items() if lines}
    assert all(len(lines) <= 1 for lines in shared.values()), shared  # a call's line, never a pasted block


def test_the_leak_check_finds_a_planted_reference(tmp_path):
    """Negative control: a kit with one real reference module copied in is caught, in the folder and in a
    zip; so is a mistake's code, as a file or as a string in a torch archive."""
    assignment = ASSIGNMENTS[0]
    planted = build_kit(assignment, tmp_path / "kit", make_zip=False)
    graded = open_names(assignment)[-1]
    target = planted / "course_lib" / module_path(graded.module, ROOT).relative_to(ROOT / "course_lib")
    shutil.copy(module_path(graded.module, ROOT), target)
    found = leaks(planted, assignment)
    assert found and all(f.startswith("course_lib/") for f, _ in found)
    shutil.make_archive(str(tmp_path / "planted"), "zip", root_dir=tmp_path, base_dir="kit")
    assert leaks(tmp_path / "planted.zip", assignment)
    shutil.rmtree(planted / "course_lib")  # and a catalogue of mistakes, whose code is grader-only
    shutil.copy(ROOT / "autograder" / "graded" / "masked_mean" / "grader.py", planted / "notes.py")
    found = leaks(planted, assignment)
    assert found and {f for f, _ in found} == {"notes.py"}
    # a mistake's code as a string in a case file: a torch archive's pickle is read (its storages are not)
    (planted / "notes.py").unlink()
    torch.save({"cases": [], "note": (ROOT / "autograder" / "graded" / "masked_mean" / "grader.py").read_text()},
               planted / "practice" / "notes.pt")
    found = leaks(planted, assignment)
    assert found and {f for f, _ in found} == {"practice/notes.pt!notes/data.pkl"}, found


# ---------------------------------------------------------------- a kit in use
def fill_in(kit: Path, assignment: str) -> Path:
    """The kit's release notebook of `assignment` with its graded cells written (the solutions'),
    as a student who finished it; returns its path."""
    source = nbformat.read(next((ROOT / "solutions" / assignment).glob("*.ipynb")), as_version=4)
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in source.cells if c.metadata.get("nbgrader", {}).get("solution")}
    path = next((kit / "notebooks" / assignment).glob("*.ipynb"))
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.metadata.get("nbgrader", {}).get("solution"):
            cell.source = answers[grade_id]
    nbformat.write(nb, path)
    return path


def seeded_venv(kit: Path) -> Path:
    """kit/.venv whose interpreter also sees this environment's installed packages (a .pth line), so
    that the kit's `make setup` finds every requirement installed and needs no network."""
    subprocess.run([sys.executable, "-m", "venv", str(kit / ".venv")], check=True)
    site = next((kit / ".venv" / "lib").glob("python3*/site-packages"))
    (site / "course_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return kit / ".venv" / "bin" / "python"


RUN_NOTEBOOK = '''
import sys, nbformat
from nbclient import NotebookClient
nb = nbformat.read(sys.argv[1], as_version=4)
NotebookClient(nb, timeout=900, kernel_name="python3", allow_errors=True,
               resources={"metadata": {"path": sys.argv[2]}}).execute()
errors = [(i, o.get("ename"), o.get("evalue", "")[:300]) for i, c in enumerate(nb.cells) if c.cell_type == "code"
          for o in c.get("outputs", []) if o.get("output_type") == "error"]
text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
print({"errors": errors, "yours": [l for l in text.splitlines() if ": yours, from" in l or "released reference" in l]})
'''


@pytest.mark.slow
def test_kit_setup_check_and_notebook_run(kits, tmp_path):
    """The latest kit: `make setup`, `make check` on the release notebook (stubs: fails) and on a
    finished one (passes), and the finished notebook runs top to bottom in grading mode with the
    kit's course_lib, where the graded names of its assignment and later are stubs."""
    assignment = ASSIGNMENTS[-1]
    kit = tmp_path / "kit"
    shutil.copytree(kits(assignment), kit)
    python = seeded_venv(kit)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(OMP_NUM_THREADS="1", PATH=f"{python.parent}{os.pathsep}{env.get('PATH', '')}")
    setup = subprocess.run(["make", "setup"], cwd=kit, env=env, capture_output=True, text=True, timeout=900)
    assert setup.returncode == 0, setup.stdout[-2000:] + setup.stderr[-2000:]
    where = subprocess.run([str(python), "-c", "import course_lib, autograder; print(course_lib.__file__, autograder.__file__)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True)
    assert where.stdout.split() == [str(kit / "course_lib" / "__init__.py"), str(kit / "autograder" / "__init__.py")], where

    unfinished = subprocess.run(["make", "check", f"NB={assignment}"], cwd=kit, env=env, capture_output=True, text=True, timeout=900)
    assert unfinished.returncode != 0 and "still the NotImplementedError stub" in unfinished.stdout, unfinished.stdout[-3000:]
    for suite in json.loads((kit / "practice" / "manifest.json").read_text())[assignment]["suites"]:
        count = len(torch.load(kit / "practice" / assignment / f"{suite}.pt", weights_only=False)["cases"])
        assert f"{suite}: 0/{count} practice cases passed" in unfinished.stdout, (suite, unfinished.stdout[-3000:])
    notebook = fill_in(kit, assignment)
    finished = subprocess.run(["make", "check", f"NB={assignment}"], cwd=kit, env=env, capture_output=True, text=True, timeout=900)
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-2000:]
    suites = json.loads((kit / "practice" / "manifest.json").read_text())[assignment]["suites"]
    for suite in suites:
        assert f"{suite}: " in finished.stdout and "practice cases passed" in finished.stdout
    assert f"{len(suites)} of {len(suites)} graded functions pass" in finished.stdout

    run = subprocess.run([str(python), "-c", RUN_NOTEBOOK, str(notebook), str(notebook.parent)], cwd=kit,
                         env={**env, "NBGRADER_EXECUTION": "autograde"}, capture_output=True, text=True, timeout=1200)
    assert run.returncode == 0, run.stderr[-3000:]
    report = ast.literal_eval(run.stdout.strip().splitlines()[-1])
    assert report["errors"] == [], report["errors"]
    print(report["yours"])


@pytest.mark.slow
def test_make_check_in_the_repository(tmp_path):
    """The repository's `make check`: practice cases from the public seed, the student's notebook
    run where the open references are stubs; a finished notebook passes, the release does not."""
    release = next((ROOT / "notebooks" / "02").glob("*.ipynb"))
    kit_like = tmp_path / "kit"
    (kit_like / "notebooks" / "02").mkdir(parents=True)
    shutil.copy(release, kit_like / "notebooks" / "02" / release.name)
    finished = fill_in(kit_like, "02")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    ok = subprocess.run([sys.executable, "-m", "autograder.practice", "02", "--notebook", str(finished)],
                        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    from autograder.suite_api import load_suite

    n = len(load_suite("compute_entropy").make_inputs(torch.Generator().manual_seed(0)))  # the suite's cases, any seed
    assert ok.returncode == 0 and f"compute_entropy: {n}/{n} practice cases passed" in ok.stdout, ok.stdout + ok.stderr[-2000:]
    bad = subprocess.run([sys.executable, "-m", "autograder.practice", "02", "--notebook", str(release)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert bad.returncode == 1 and "still the NotImplementedError stub" in bad.stdout, bad.stdout
    assert f"compute_entropy: 0/{n} practice cases passed" in bad.stdout, bad.stdout  # its cases counted, none run

"""The student kit of an assignment: what the students of assignment NN get, and its leak check.

    make student-kit ASSIGNMENT=03 OUT=DIR          # = python -m autograder.kit 03 --out DIR

writes DIR/ and DIR.zip:

    README.md Makefile requirements.txt pyproject.toml    the kit's own (make setup, make lab, make check)
    notebooks/01 .. notebooks/NN     the release notebooks up to NN (from notebooks/)
    course_lib/                      every graded name of assignment NN or later, and every twin of
                                     one (another function that computes it), a stub raising
                                     NotImplementedError that names its notebook (autograder.stubs,
                                     from autograder.student_view); the references of earlier
                                     assignments stay (their deadlines passed)
    data/ configs/                   the tiny world and the training configurations
    jupyter_config/                  the settings `make lab` starts JupyterLab with (no nbgrader panels, no news)
    practice/MM/<suite>.pt           practice cases of notebooks MM <= NN: inputs drawn with the public
                                     seed, expected outputs from the reference (the only expected values
                                     in the kit) and the known mistakes' outputs on them with their names
                                     and sentences (no code); practice/manifest.json says which suites
                                     each notebook has
    autograder/                      what `make check` needs and nothing else: the suite interface, the
                                     comparison, the report, the runner, its limits, one trial of a
                                     function on cases, `practice`, and graded/<suite>/__init__.py: each
                                     graded function's harness (`call` and its settings), no grader.py

and nothing else: no solutions/, lessons/, grader.py, hidden cases, tests or git history.
`leaks(path, assignment)` lists every line of a reference body of an open assignment (a stubbed
twin's too), or of a catalogued mistake's code, found in a kit folder or zip (notebooks read cell
by cell, zips and torch files member by member); a test builds the kit of every assignment and
requires none.
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import re
import shutil
import sys
import zipfile
from pathlib import Path

import nbformat

from .assignments import REPO_ROOT, assignments
from .harness import PRACTICE_SIDE, harness_closure, harness_path, write_kernel_side
from .student_view import stubbed
from .stubs import COURSE_LIB, IGNORE, module_path, write_stubbed

TEMPLATES = Path(__file__).resolve().parent / "kit_template"
NOTEBOOKS = REPO_ROOT / "notebooks"
SOLUTIONS = REPO_ROOT / "solutions"
DEV_REQUIREMENTS = ("pytest", "pytest-xdist", "hypothesis", "playwright", "nbgrader")
KIT_INIT = '"""What `make check` runs: practice cases through the judge\'s harness and comparison."""\n'
MIN_SECRET_CHARS = 16  # shorter body lines ("return loss", "else:") prove nothing


# ---------------------------------------------------------------- building
def notebook_suites(assignment: str) -> dict[str, str]:
    """{suite: graded function} of the hidden checks of assignment NN's source notebook."""
    from .assignments import hidden_gates
    from .suite_api import load_suite

    names = sorted({n for ns in hidden_gates(SOLUTIONS / assignment).values() for n in ns})
    return {n: load_suite(n).GRADED for n in names}


def practice_cases(suite: str, seed: int) -> dict:
    """A suite's practice cases for `seed` (made once per fingerprint, `autograder.cases.seeded_cases`:
    kits of later assignments hold the same files for the same notebooks), as a kit holds them."""
    from .cases import seeded_cases

    data = seeded_cases(suite, seed)
    return {"suite": suite, "graded": data["graded"], "seed": seed,
            "cases": [{"name": c["name"], "inputs": c["inputs"], "expected": c["expected"],
                       "error_case": c["error_case"]} for c in data["cases"]],
            # names, sentences and outputs on these public inputs: no mistake's code
            "mistakes": {name: {k: m[k] for k in ("sentence", "signature", "untold", "returned", "covers")}
                         for name, m in data["mistakes"].items()}}


_PRACTICE_FILES: dict[tuple[str, int, str], bytes] = {}


def practice_file(suite: str, seed: int) -> bytes:
    """`practice_cases(suite, seed)` as the bytes of a torch.save file, made once per process and
    fingerprint: the kit of every later assignment holds the same file."""
    import torch

    from .cases import fingerprint

    key = (suite, seed, fingerprint(suite))
    if key not in _PRACTICE_FILES:
        buffer = io.BytesIO()
        torch.save(practice_cases(suite, seed), buffer)
        _PRACTICE_FILES[key] = buffer.getvalue()
    return _PRACTICE_FILES[key]


def write_course_lib(dest: Path, assignment: str) -> Path:
    """Write `dest/course_lib`, the kit's library: the names `student_view.stubbed(assignment)` names
    stubbed (the graded names of NN and later, their twins). Returns that folder."""
    return write_stubbed(dest, stubbed(assignment), COURSE_LIB)


def kit_requirements() -> str:
    lines = []
    for line in (REPO_ROOT / "requirements-cpu.txt").read_text(encoding="utf-8").splitlines():
        name = re.split(r"[<>=\[ ;]", line.strip(), maxsplit=1)[0]
        if name and not line.lstrip().startswith("#") and name in DEV_REQUIREMENTS:
            continue
        lines.append(line)
    return "\n".join(lines) + "\n"


def build_kit(assignment: str, out: Path, seed: int | None = None, make_zip: bool = True) -> Path:
    """Write the kit of `assignment` to `out` (replaced if it exists) and `out`.zip."""
    from .suite_api import PRACTICE_SEED

    seed = PRACTICE_SEED if seed is None else seed
    known = assignments()
    if assignment not in known:
        raise SystemExit(f"no lesson for assignment {assignment!r} (known: {', '.join(known)})")
    included = [a for a in known if a <= assignment and (NOTEBOOKS / a).is_dir()]
    out = Path(out).resolve()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for a in included:
        shutil.copytree(NOTEBOOKS / a, out / "notebooks" / a, ignore=IGNORE)
    write_course_lib(out, assignment)
    shutil.copytree(REPO_ROOT / "data", out / "data", ignore=IGNORE)
    shutil.copytree(REPO_ROOT / "configs", out / "configs", ignore=IGNORE)
    shutil.copytree(REPO_ROOT / "jupyter_config", out / "jupyter_config", ignore=IGNORE)  # `make lab`'s settings
    # the autograder of `make check`: no grader.py, no hidden cases, no grading command
    suites = {a: notebook_suites(a) for a in included}
    write_kernel_side(out, sorted({s for by in suites.values() for s in by}), init=KIT_INIT, modules=PRACTICE_SIDE)
    manifest = {}
    for a in included:
        manifest[a] = {"notebook": sorted(p.name for p in (NOTEBOOKS / a).glob("*.ipynb")), "suites": suites[a]}
        (out / "practice" / a).mkdir(parents=True)
        for suite in suites[a]:
            (out / "practice" / a / f"{suite}.pt").write_bytes(practice_file(suite, seed))
    (out / "practice").mkdir(exist_ok=True)
    (out / "practice" / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    for name in ("README.md", "Makefile"):
        text = (TEMPLATES / name).read_text(encoding="utf-8")
        text = text.replace("{assignment}", assignment).replace("{first}", included[0])
        (out / name).write_text(text, encoding="utf-8")
    (out / "requirements.txt").write_text(kit_requirements(), encoding="utf-8")
    pyproject = (REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8")
    pyproject = pyproject.split("[tool.pytest.ini_options]")[0].rstrip() + "\n"
    (out / "pyproject.toml").write_text(pyproject, encoding="utf-8")
    if make_zip:
        zip_path = out.with_suffix(".zip")
        zip_path.unlink(missing_ok=True)
        shutil.make_archive(str(out), "zip", root_dir=out.parent, base_dir=out.name)
    return out


# ---------------------------------------------------------------- the leak check
def _body_lines(source: str, names: dict[str, str]) -> set[str]:
    """Stripped lines of the bodies (after docstrings) of `names` in a module source, and of graded constants."""
    tree = ast.parse(source)
    lines = source.splitlines()
    out = set()

    def body(node):
        stmts = node.body
        if stmts and isinstance(stmts[0], ast.Expr) and isinstance(getattr(stmts[0], "value", None), ast.Constant) \
                and isinstance(stmts[0].value.value, str):
            stmts = stmts[1:]
        if stmts:
            first = min([stmts[0].lineno] + [d.lineno for d in getattr(stmts[0], "decorator_list", [])])
            out.update(line.strip() for line in lines[first - 1:node.end_lineno])

    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in names:
            body(node)
        elif isinstance(node, ast.ClassDef) and node.name in names:
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    body(item)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id in names for t in targets):
                out.update(line.strip() for line in lines[node.lineno - 1:node.end_lineno])
    return out


def _public_text(assignment: str, harnesses: bool = True) -> str:
    """What the course shows anyway: the stubbed course_lib of `assignment`, the solution
    notebooks up to it without their solution regions (what nbgrader releases) and, unless
    `harnesses=False`, the harnesses of their suites (how each function is called: a suite may
    share a line with a reference, e.g. `if loss_type == "grpo_clip":`; `harness_leaks` checks
    that none holds more than such a line)."""
    import tempfile

    parts = []
    if harnesses:
        for a in assignments():
            if a <= assignment and (SOLUTIONS / a).is_dir():
                for suite in harness_closure(list(notebook_suites(a))):
                    parts.append(harness_path(suite).read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as tmp:
        stub = write_course_lib(Path(tmp), assignment)
        parts += [p.read_text(encoding="utf-8") for p in sorted(stub.rglob("*.py"))]
    for a in assignments():
        if a <= assignment:
            for path in sorted((SOLUTIONS / a).glob("*.ipynb")):
                for cell in nbformat.read(path, as_version=4).cells:
                    parts.append(re.sub(r"### BEGIN SOLUTION.*?### END SOLUTION", "", cell.source, flags=re.S))
    return "\n".join(parts)


def secret_lines(assignment: str, harnesses_public: bool = True, mistakes: bool = True) -> set[str]:
    """Lines of the reference bodies of the open assignments of `assignment` (and of their stubbed
    twins) and, unless `mistakes=False`, of the code of every catalogued mistake (`mistake_lines`),
    that nothing public shows (a line found anywhere in the public text, e.g. `optimizer.step()` in
    a docstring, is no secret)."""
    by_module: dict[str, dict[str, str]] = {}
    for g in stubbed(assignment):
        by_module.setdefault(g.module, {})[g.name] = g.assignment
    lines = set()
    for module, names in by_module.items():
        lines |= _body_lines(module_path(module, REPO_ROOT).read_text(encoding="utf-8"), names)
    if mistakes:
        lines |= mistake_lines()
    public = _public_text(assignment, harnesses_public)
    return {line for line in lines if len(line) >= MIN_SECRET_CHARS and not line.startswith("#") and line not in public}


def mistake_lines() -> set[str]:
    """The stripped lines of every catalogued mistake's code (`autograder.mistakes`): grader-only, so
    a kit carries the mistakes' names, sentences and outputs on the practice cases, never their code."""
    import textwrap

    from .mistakes import catalogue, catalogue_files

    return {line.strip() for suite in catalogue_files() for m in catalogue(suite).values()
            for line in textwrap.dedent(m.source).splitlines()}


def harness_leaks(assignment: str) -> dict[str, list[str]]:
    """{suite: the reference-body lines of open assignments its harness holds}, for the suites of
    the notebooks up to `assignment`: a harness may share one line with a reference (how it calls
    the function), never a block of them."""
    secrets = secret_lines(assignment, harnesses_public=False, mistakes=False)
    out = {}
    for a in assignments():
        if a <= assignment and (SOLUTIONS / a).is_dir():
            for suite in harness_closure(list(notebook_suites(a))):
                text = harness_path(suite).read_text(encoding="utf-8")
                out[suite] = sorted(line for line in secrets if line in text)
    return out


TENSOR_STORAGE = re.compile(r"(^|/)data/\d+$")  # a torch.save archive's member that holds one storage's raw numbers


def _texts(name: str, data: bytes):
    """(where, text) of a file's content: the raw bytes, a notebook's cell sources; of a zip, its
    members' names and contents (its raw bytes are compressed). In a torch.save archive (a zip with
    a data.pkl) the tensor storages are left out: they are the raw bytes of numbers, while every
    string it holds is in its pickle."""
    archive = _zip(data)
    if archive is None:
        yield name, data.decode("latin-1")
    if name.endswith(".ipynb"):
        try:
            nb = nbformat.reads(data.decode("utf-8"), as_version=4)
            yield name, "\n".join(c.source for c in nb.cells)
        except Exception:  # noqa: BLE001 - not a notebook after all: the raw bytes were scanned
            pass
    if archive is not None:
        with archive:
            members = archive.namelist()
            yield name, "\n".join(members)
            torch_archive = any(m.endswith("data.pkl") for m in members)
            for member in members:
                if not (torch_archive and TENSOR_STORAGE.search(member)):
                    yield from _texts(f"{name}!{member}", archive.read(member))


def _zip(data: bytes) -> zipfile.ZipFile | None:
    """`data` opened as a zip, or None when it is not one."""
    if data[:4] != b"PK\x03\x04":
        return None
    try:
        return zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        return None


def leaks(path: Path, assignment: str, secrets: set[str] | None = None) -> list[tuple[str, str]]:
    """(file, line) for every secret line of `assignment` found in a kit folder or zip."""
    secrets = secret_lines(assignment) if secrets is None else secrets
    path = Path(path)
    files = [(str(p.relative_to(path)), p.read_bytes()) for p in sorted(path.rglob("*")) if p.is_file()] \
        if path.is_dir() else [(path.name, path.read_bytes())]
    found = []
    for name, data in files:
        for where, text in _texts(name, data):
            found += [(where, line) for line in secrets if line in text]
    return sorted(set(found))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("assignment", help="the assignment the kit is for, e.g. 03")
    parser.add_argument("--out", type=Path, required=True, help="the kit folder to write (DIR.zip next to it)")
    parser.add_argument("--no-zip", action="store_true")
    args = parser.parse_args(argv)
    assignment = args.assignment.zfill(2)
    out = build_kit(assignment, args.out, make_zip=not args.no_zip)
    found = leaks(out, assignment) + ([] if args.no_zip else leaks(out.with_suffix(".zip"), assignment))
    if found:
        print("the kit holds lines of reference bodies of open assignments or of catalogued mistakes:",
              *[f"{f}: {line}" for f, line in found[:20]],
              sep="\n  ", file=sys.stderr)
        return 1
    print(f"wrote {out}" + ("" if args.no_zip else f" and {out.with_suffix('.zip')}") +
          f": notebooks {', '.join(sorted(p.name for p in (out / 'notebooks').iterdir()))}, "
          f"stubs for {', '.join(g.name for g in stubbed(assignment))}; no reference line of an open assignment "
          "or line of a mistake's code")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A copy of `course_lib` in which the graded names of the open assignments, and their twins, are stubs.

Generated from the one source, the `course_lib` module files: in each module that defines a
name to stub (`autograder.student_view.stubbed`), the body of each graded function (and of each
method of a graded class), after its docstring, becomes

    raise NotImplementedError("<name> is yours to write in notebook NN")

that of a twin (another function that computes a graded one) becomes

    raise NotImplementedError("<twin> computes <name>, yours to write in notebook NN")

and a graded constant becomes `NAME = None`; every other byte of the file stays as it is. The
student kit of assignment NN ships such a copy (the graded names of NN and later are stubs), and
the judge runs a student's function where this copy stands in for `course_lib`, so that no
reference of an open assignment can be imported, reloaded or copied, under its name or a twin's.

    python -m autograder.stubs 03 OUT_DIR     # writes OUT_DIR/course_lib
"""

from __future__ import annotations

import ast
import hashlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

from .assignments import REPO_ROOT, Graded
from .student_view import stubbed, suite_view

COURSE_LIB = REPO_ROOT / "course_lib"
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints")


def stub_message(name: str, assignment: str, twin_of: str = "") -> str:
    """What a stub raises: `name` is the student's to write in `assignment`'s notebook or, for a twin
    (`twin_of`: the graded name it computes), it computes that one."""
    from .assignments import NO_LESSON_YET

    where = "a later notebook" if assignment == NO_LESSON_YET else f"notebook {assignment}"
    if twin_of:
        return f"{name} computes {twin_of}, yours to write in {where}"
    return f"{name} is yours to write in {where}"


def _message(name: str, stub) -> str:
    """The stub message of `name`, stubbed as `stub`: an assignment, or a `Graded` entry (a twin's too)."""
    if isinstance(stub, str):
        return stub_message(name, stub)
    return stub_message(name, stub.assignment, stub.twin_of)


def _body_region(node: ast.AST, lines: list[str]) -> tuple[int, int, str] | None:
    """(first line, end line, indent) of a function's body after its docstring, 0-based, end exclusive."""
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
            and isinstance(body[0].value.value, str):
        docstring, body = body[0], body[1:]
    else:
        docstring = None
    if not body:  # a docstring only: the stub goes right after it
        after = docstring.end_lineno if docstring else node.lineno
        indent = " " * (node.col_offset + 4)
        return after, after, indent
    first = body[0].lineno - 1
    for dec in getattr(body[0], "decorator_list", []):
        first = min(first, dec.lineno - 1)
    if first < node.lineno or (docstring is not None and first < docstring.end_lineno):
        raise ValueError(f"line {node.lineno}: put the body of {node.name} on its own lines to stub it")
    indent = lines[first][: len(lines[first]) - len(lines[first].lstrip())]
    return first, node.end_lineno, indent


def stub_source(source: str, stubs: dict, module: str = "<module>") -> str:
    """`source` with every top-level name in `stubs` ({name: its assignment, or its `Graded` entry})
    stubbed; the rest unchanged."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, str]] = []  # (start, end, replacement text), 0-based lines
    found = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in stubs:
            first, end, indent = _body_region(node, lines)
            edits.append((first, end, f'{indent}raise NotImplementedError("{_message(node.name, stubs[node.name])}")\n'))
            found.add(node.name)
        elif isinstance(node, ast.ClassDef) and node.name in stubs:
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    first, end, indent = _body_region(item, lines)
                    message = _message(f"{node.name}.{item.name}", stubs[node.name])
                    edits.append((first, end, f'{indent}raise NotImplementedError("{message}")\n'))
            found.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            hit = [n for n in names if n in stubs]
            if hit:
                if len(names) != 1 or len(targets) != 1:
                    raise ValueError(f"{module}: stub the constant {hit[0]} alone on its line")
                name = hit[0]
                edits.append((node.lineno - 1, node.end_lineno,
                              f"{name} = None  # a stub: {_message(name, stubs[name])}\n"))
                found.add(name)
    missing = sorted(set(stubs) - found)
    if missing:
        raise ValueError(f"{module} defines no top-level {', '.join(missing)} to stub")
    for start, end, text in sorted(edits, reverse=True):
        lines[start:end] = [text]
    out = "".join(lines)
    compile(out, module, "exec")  # a stub that does not parse is a bug here, not in the course
    return out


def module_path(module: str, root: Path) -> Path:
    """course_lib.gsm8k -> ROOT/course_lib/gsm8k.py (or .../__init__.py for a package)."""
    parts = module.split(".")
    if parts[0] != "course_lib":
        raise ValueError(f"graded name in {module}: only course_lib modules can be stubbed")
    path = root.joinpath(*parts)
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def write_stubbed(dest: Path, names: list[Graded], source: Path = COURSE_LIB) -> Path:
    """Write `dest/course_lib`: a copy of `source` with `names` stubbed (`student_view.stubbed`).
    Returns that folder."""
    target = Path(dest) / "course_lib"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target, ignore=IGNORE)
    by_module: dict[str, dict[str, Graded]] = {}
    for g in names:
        by_module.setdefault(g.module, {})[g.name] = g
    for module, stubs in by_module.items():
        path = module_path(module, target.parent)
        path.write_text(stub_source(path.read_text(encoding="utf-8"), stubs, module), encoding="utf-8")
    return target


def _sources_digest(names: list[Graded], source: Path = COURSE_LIB) -> str:
    h = hashlib.sha256()
    for path in sorted(source.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            h.update(str(path.relative_to(source)).encode() + b"\0" + path.read_bytes() + b"\0")
    h.update(repr([(g.assignment, g.module, g.name, g.twin_of) for g in names]).encode())
    return h.hexdigest()[:16]


def cache_root() -> Path:
    env = os.environ.get("AUTOGRADER_STUB_CACHE")
    if env:
        return Path(env)
    build = REPO_ROOT / "build"
    try:
        build.mkdir(exist_ok=True)
        if os.access(build, os.W_OK):
            return build / "stubs"
    except OSError:
        pass
    return Path(tempfile.gettempdir()) / f"course-stubs-{os.getuid()}"


def stub_tree(assignment: str | None, extra: list[Graded] = ()) -> Path:
    """A cached folder holding a stubbed `course_lib` for `assignment` (and a `data` link to the
    repository's data, so that the copy finds its files when put first on PYTHONPATH).

    What `student_view.stubbed(assignment, extra)` names is stubbed: the graded names of
    `assignment` and later, `extra` (a suite's own function when no lesson grades it yet), and
    their twins. Rebuilt when course_lib, the lessons, the twins or `extra` change.
    """
    return cached_tree(stubbed(assignment, extra))


def stub_for_suite(name: str, assignment: str | None = None) -> Path:
    """The stubbed `course_lib` folder a runner of suite `name` gets while `assignment` is graded:
    what `student_view.suite_view` stubs (the graded names of the suite's assignment and later, of
    `assignment` and later when that is earlier, and their twins)."""
    from .suite_api import load_suite

    return cached_tree(suite_view(load_suite(name), assignment)[0]) / "course_lib"


def cached_tree(names: list[Graded]) -> Path:
    """The cached folder of a stubbed `course_lib` with `names` stubbed (see `stub_tree`), named for
    the first assignment it stubs and a digest of the sources and `names`."""
    from .assignments import NO_LESSON_YET

    first = min((g.assignment for g in names if g.assignment not in ("", NO_LESSON_YET)), default="all")
    key = f"{first}-{_sources_digest(names)}"
    root = cache_root()
    folder = root / key
    if (folder / "course_lib" / "__init__.py").is_file():
        return folder
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
    write_stubbed(tmp, names)
    # readable by a submission run as unprivileged ids (AUTOGRADER_SANDBOX=user), whatever the modes
    # of mkdtemp (0700) and of the folder copied
    for made in (tmp, tmp / "course_lib"):
        made.chmod(0o755)
    os.symlink(REPO_ROOT / "data", tmp / "data")
    try:
        os.rename(tmp, folder)
    except OSError:  # another process built it first
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m autograder.stubs ASSIGNMENT OUT_DIR", file=sys.stderr)
        return 2
    print(write_stubbed(Path(argv[1]), stubbed(argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())


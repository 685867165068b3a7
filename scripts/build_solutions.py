"""Build the nbgrader source notebooks in `solutions/` from the lesson texts in `lessons/`.

A lesson is a Python file in "percent" format, its grammar parsed by `autograder.lesson_format`:

    # %% [markdown]                      a markdown cell (leading "# " stripped from each line)
    # %%                                 a plain code cell
    # %% [solution] MODULE:NAME ...      a graded answer cell: the cell's own lines (imports,
                                         say), then the source of each reference object from
                                         course_lib, with every function body between
                                         ### BEGIN SOLUTION / ### END SOLUTION
    # %% [given] MODULE:NAME ...         the full source of reference objects, not graded
                                         (a constant, e.g. a compiled regex, is written as
                                         `NAME = repr(value)`)
    # %% [tests] ID POINTS               an autograded test cell worth POINTS, grade id ID

so a solution notebook shows *the same code* as `course_lib`: the reference is written once.
Every pasted object is checked at build time: each global name it uses must be a builtin or be
defined by an earlier cell (or earlier in its own cell), so a new helper in `course_lib` cannot
break a notebook only when it runs.
`nbgrader generate_assignment` then turns each solution region into a stub whose
`raise NotImplementedError(...)` says what to do (`autograder/nbgrader_config.py`), and drops
the `### BEGIN HIDDEN TESTS` ... `### END HIDDEN TESTS` lines of test cells.

Usage: python scripts/build_solutions.py [--check] [--only NN ...]   (--check: fail if solutions/ is stale)
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import re
import sys
import textwrap
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from autograder.lesson_format import lesson_files, read_lesson  # noqa: E402 - after the path is set

LESSONS = ROOT / "lessons"
SOLUTIONS = ROOT / "solutions"
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def reference_source(ref: str) -> str:
    """Source text of `module:name` (e.g. `course_lib.masking:masked_mean`), dedented.

    A constant (a compiled regex, a number, a string...) becomes `name = repr(value)`, checked to
    evaluate back to an equal value, so the notebook's functions can stay self-contained.
    """
    module_name, _, name = ref.partition(":")
    module = importlib.import_module(module_name)
    obj = getattr(module, name)
    if inspect.isfunction(obj) or inspect.isclass(obj):
        return textwrap.dedent(inspect.getsource(obj))
    text = f"{name} = {obj!r}"
    if eval(repr(obj), {"re": re}) != obj:
        raise ValueError(f"{ref}: repr() of this constant does not evaluate back to it; write it in the lesson")
    return text


def mark_solution_bodies(source: str) -> str:
    """Wrap the body of every function in `source` (methods too) in solution delimiters.

    The signature and docstring stay visible to the student; everything after the docstring
    becomes the solution region.
    """
    lines = source.splitlines()
    regions = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) and isinstance(body[0].value.value, str):
                body = body[1:]
            if not body:
                continue
            first = body[0].lineno - 1
            for dec in getattr(body[0], "decorator_list", []):
                first = min(first, dec.lineno - 1)
            last = node.end_lineno  # exclusive, 0-based end
            indent = re.match(r"\s*", lines[first]).group(0)
            regions.append((first, last, indent))
    # innermost-last insertion would break outer line numbers: insert bottom-up, skip nested
    # (a function nested in another one's body is inside that body's region already)
    kept = [r for r in regions if not any(o[0] <= r[0] and r[1] <= o[1] and o[:2] != r[:2] for o in regions)]
    kept.sort(reverse=True)
    for first, last, indent in kept:
        lines[last:last] = [f"{indent}### END SOLUTION"]
        lines[first:first] = [f"{indent}### BEGIN SOLUTION"]
    return "\n".join(lines)


def bound_names(tree: ast.AST) -> set[str]:
    """Every name a piece of code binds anywhere: imports, assignments, defs, loop and with targets."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            if not isinstance(node, ast.ClassDef):
                a = node.args
                names |= {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg] if x}
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return names


def free_names(source: str) -> set[str]:
    """Global names `source` reads but neither binds itself nor gets from Python's builtins."""
    import builtins

    tree = ast.parse(source)
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return used - bound_names(tree) - set(dir(builtins))


def _ipython_free(source: str) -> str:
    """The cell's Python without IPython's `%magic` and `!shell` lines (which ast cannot parse)."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


def _trim(lines: list[str]) -> str:
    return "\n".join(lines).strip("\n")


def build_notebook(path: Path) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata = {"kernelspec": KERNELSPEC, "language_info": {"name": "python"}}
    defined: set[str] = set()  # names the cells so far define (for the check of pasted code)
    for index, lesson_cell in enumerate(read_lesson(path)):
        kind, arg, body, where = lesson_cell.kind, lesson_cell.arg, lesson_cell.body, lesson_cell.where
        if kind == "markdown":
            text = "\n".join(re.sub(r"^# ?", "", line) for line in body)
            cell = nbformat.v4.new_markdown_cell(text.strip("\n"))
        elif kind is None:
            cell = nbformat.v4.new_code_cell(_trim(body))
        elif kind in ("solution", "given"):
            refs = lesson_cell.refs
            parts = [_trim(body)] if _trim(body) else []
            for ref in refs:
                src = reference_source(ref)
                missing = free_names(src) - defined - bound_names(ast.parse("\n\n".join(parts + [src])))
                if missing:
                    raise ValueError(f"{where}: {ref} uses {', '.join(sorted(missing))}, which no earlier cell "
                                     f"defines: paste or import it before this cell")
                parts.append(mark_solution_bodies(src) if kind == "solution" else src)
            cell = nbformat.v4.new_code_cell("\n\n\n".join(parts))
            if kind == "solution":
                name = refs[-1].partition(":")[2]
                cell.metadata["nbgrader"] = {
                    "grade": False, "solution": True, "locked": False,
                    "grade_id": f"solution_{name}", "schema_version": 3,
                }
        else:  # tests
            grade_id, points = lesson_cell.test_fields()
            cell = nbformat.v4.new_code_cell(_trim(body))
            cell.metadata["nbgrader"] = {
                "grade": True, "solution": False, "locked": True,
                "grade_id": grade_id, "points": points, "schema_version": 3,
            }
        cell.id = f"c{index:03d}"
        if cell.cell_type == "code":
            defined |= bound_names(ast.parse(_ipython_free(cell.source), f"{where}"))
        nb.cells.append(cell)
    return nb


def solution_path(lesson: Path) -> Path:
    """lessons/01_tokenization.py -> solutions/01/01_tokenization.ipynb (assignment id "01")."""
    return SOLUTIONS / lesson.stem.split("_", 1)[0] / f"{lesson.stem}.ipynb"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if any solution notebook is stale")
    parser.add_argument("--only", nargs="+", metavar="NN", help="build only these assignments (e.g. --only 06 07)")
    args = parser.parse_args(argv)
    stale = []
    for lesson in lesson_files(LESSONS):
        if args.only and lesson.name[:2] not in args.only:
            continue
        target = solution_path(lesson)
        text = nbformat.writes(build_notebook(lesson)) + "\n"
        current = target.read_text(encoding="utf-8") if target.exists() else None
        if current == text:
            continue
        stale.append(target.relative_to(ROOT))
        if not args.check:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
    if args.check and stale:
        print("stale solution notebooks (run `make release`):", *stale, sep="\n  ", file=sys.stderr)
        return 1
    for path in stale:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

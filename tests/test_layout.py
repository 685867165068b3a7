"""The shape of `course_lib`: graded modules at the top, rooms for the rest, no cycles, short functions;
and no import cycle in `autograder` either."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "course_lib"
UTILITIES = {"paths", "selfcheck"}
ROOMS = {"training", "rollouts", "world"}
MAX_FUNCTION_LINES = 80


def graded_modules() -> set[str]:
    """The top-level course_lib modules that define a graded name: read from the lessons' `[solution]`
    headers and the folders of functions no lesson grades yet (`autograder.assignments.open_names`),
    never listed by hand."""
    from autograder.assignments import open_names

    return {g.module.split(".", 1)[1] for g in open_names(None)}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def course_modules(package: Path = PACKAGE) -> dict[str, Path]:
    """{dotted name: path} of the package's modules (a graded function's own tests aside)."""
    return {module_name(p): p for p in package.rglob("*.py") if not p.name.startswith("test_") and p.name != "conftest.py"}


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of `modules` that `name` imports (at module level or inside functions)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets = []
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                root = ".".join(base + ([node.module] if node.module else []))
            else:
                root = node.module or ""
            targets = [root] + [f"{root}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        found |= {t for t in targets if t in modules and t != name}
    return found


def test_top_level_holds_graded_modules_and_rooms_only():
    top = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__"}
    rooms = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    graded = graded_modules()
    assert top == graded | UTILITIES, top ^ (graded | UTILITIES)
    assert rooms == ROOMS
    for room in ROOMS:
        doc = ast.get_docstring(ast.parse((PACKAGE / room / "__init__.py").read_text()))
        assert doc and len(doc) > 100, f"course_lib/{room}/__init__.py must say what the room holds"


@pytest.mark.parametrize("package", ["course_lib", "autograder"])
def test_no_import_cycles(package):
    modules = course_modules(PACKAGE.parent / package)
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}

    def visit(node, stack, done):
        for dep in graph[node]:
            # a package importing its own submodules is how packages work, not a cycle
            if dep.startswith(node + ".") and (PACKAGE.parent / Path(*node.split("."))).is_dir():
                continue
            assert dep not in stack, f"import cycle: {' -> '.join(stack[stack.index(dep):] + [dep])}"
            if dep not in done:
                visit(dep, stack + [dep], done)
        done.add(node)

    done: set[str] = set()
    for name in graph:
        visit(name, [name], done)


def test_graded_modules_do_not_import_the_rooms():
    """The graded references stand alone: a student's kit stubs them without the trainers."""
    modules = course_modules()
    for name in graded_modules():
        deps = imports_of(f"course_lib.{name}", PACKAGE / f"{name}.py", modules)
        rooms = {d for d in deps if d.split(".")[1] in ROOMS}
        assert not rooms, f"course_lib.{name} imports {rooms}"


def test_neither_trainer_imports_the_other():
    modules = course_modules()
    sft = imports_of("course_lib.training.sft_trainer", modules["course_lib.training.sft_trainer"], modules)
    grpo = imports_of("course_lib.training.grpo_trainer", modules["course_lib.training.grpo_trainer"], modules)
    assert "course_lib.training.grpo_trainer" not in sft
    assert "course_lib.training.sft_trainer" not in grpo


def test_the_trainers_call_their_seams_by_keyword():
    """In the training loops and what they share, a call with more than three arguments names them."""
    positional = []
    for name in ("grpo_trainer", "sft_trainer", "dpo_trainer", "common"):
        path = PACKAGE / "training" / f"{name}.py"
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and len(node.args) > 3:
                positional.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {ast.unparse(node.func)}")
    assert not positional, positional


def test_no_function_is_longer_than_80_lines():
    long = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name} ({n} lines)")
    assert not long, long


@pytest.mark.parametrize("name, module", [("sft_train_step", "sft"), ("sft_microbatch_train_step", "sft"),
                                          ("grpo_train_step", "grpo"), ("grpo_microbatch_train_step", "grpo")])
def test_graded_steps_live_beside_their_micro_batch_steps(name, module):
    import course_lib

    assert getattr(course_lib, name).__module__ == f"course_lib.{module}"


def test_every_module_imports():
    for name in course_modules():
        if name.endswith(("vllm_engine", "__main__")):  # vLLM is optional; __main__ runs the CLI
            continue
        importlib.import_module(name)


def contract_rows() -> list[tuple[str, list[str]]]:
    """(name, its parameters as the README's contract table writes them) for every row."""
    readme = (PACKAGE.parent / "README.md").read_text(encoding="utf-8")
    table = readme.split("### The contract", 1)[1].split("\n\n| name |", 1)[1].split("\n\n", 1)[0]
    rows = []
    for line in table.splitlines()[2:]:
        names, signature = (cell.strip() for cell in line.split(" | ", 2)[:2])
        params = [p.strip().replace('"', "'") for p in signature[1:signature.index(")")].split(",")]
        rows += [(name.strip("| "), params) for name in names.split(",")]
    return rows


def test_the_readme_contract_table_matches_the_code():
    import inspect

    import course_lib

    rows = contract_rows()
    assert len(rows) >= 24, rows
    for name, params in rows:
        function = getattr(course_lib, name)
        got = [p.name if p.default is inspect.Parameter.empty else f"{p.name}={p.default!r}"
               for p in inspect.signature(function).parameters.values()]
        assert got == params, f"README's contract row for {name}: {params}, the code: {got}"

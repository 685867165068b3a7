"""The harness of a suite, and the part of `autograder` that student code may see.

A suite's *harness* is the suite without what only the grader may hold: `make_inputs` (how the
hidden inputs are drawn), `truth` / `truth_inputs` (how the expected values are computed: a
`truth` is a float64 implementation of the graded function, so a student's function that could
import it would not need to be written) and any `variant_*` (another correct implementation, for
the tolerance). What is left is how a function is called (`call`) and
the settings.

`write_kernel_side(dest, suites)` writes `dest/autograder`: the modules a grading kernel, the
judge's runner and `make check` need (KERNEL_SIDE: no case generation, no judge server, no
grading command) and `harness/<suite>.py` for each suite. A student kit ships such a copy; the
grading sandbox binds one (`sandbox_autograder()`, cached) where the repository's `autograder/`
was, so no suite source, hidden case or grader module is visible to the submission.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
import shutil
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
KERNEL_SIDE = ("checker.py", "protocol.py", "report.py", "compare.py", "recognition.py", "suite_api.py", "runner.py",
               "trial.py", "limits.py", "practice.py", "nbgrader_cli.py", "student_view.py", "confine.py")
# a kit: no hidden check, no grading run
PRACTICE_SIDE = tuple(n for n in KERNEL_SIDE if n not in ("checker.py", "protocol.py", "nbgrader_cli.py", "confine.py"))
GRADER_ONLY = ("make_inputs", "truth", "truth_inputs")
INIT = '"""What student code may see of the grader: the checker, the runner, the comparison, the harnesses."""\n'
HARNESS_INIT = '"""How each graded function is called: the suites without their case generators and truths."""\n'


def harness_source(suite_source: str) -> str:
    """A suite's source without its GRADER_ONLY functions (the docstring and the rest kept)."""
    tree = ast.parse(suite_source)
    lines = suite_source.splitlines(keepends=True)
    for node in reversed(tree.body):
        if isinstance(node, ast.FunctionDef) and (node.name in GRADER_ONLY or node.name.startswith("variant_")):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
            del lines[start:node.end_lineno]
    text = re.sub(r"\n{4,}", "\n\n\n", "".join(lines))
    compile(text, "<harness>", "exec")
    return text


def write_kernel_side(dest: Path, suites: list[str], init: str = INIT, modules: tuple[str, ...] = KERNEL_SIDE) -> Path:
    """Write `dest/autograder` (replaced): `modules` (default: the kernel side) and the harnesses of
    `suites`. A student kit takes PRACTICE_SIDE: what `make check` runs, no hidden check."""
    target = Path(dest) / "autograder"
    if target.exists():
        shutil.rmtree(target)
    (target / "harness").mkdir(parents=True)
    (target / "__init__.py").write_text(init, encoding="utf-8")
    for name in modules:
        shutil.copy(HERE / name, target / name)
    (target / "harness" / "__init__.py").write_text(HARNESS_INIT, encoding="utf-8")
    for suite in suites:
        source = (HERE / "suites" / f"{suite}.py").read_text(encoding="utf-8")
        (target / "harness" / f"{suite}.py").write_text(harness_source(source), encoding="utf-8")
    return target


def sandbox_autograder() -> Path:
    """A cached `autograder` folder for the grading sandbox: the kernel side and every suite's harness."""
    from .stubs import cache_root
    from .suite_api import suite_names

    suites = suite_names()
    h = hashlib.sha256()
    for path in [HERE / n for n in KERNEL_SIDE] + [HERE / "suites" / f"{s}.py" for s in suites] + [Path(__file__)]:
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    folder = cache_root() / f"autograder-{h.hexdigest()[:16]}"
    if (folder / "autograder" / "__init__.py").is_file():
        return folder / "autograder"
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".autograder-", dir=folder.parent))
    tmp.chmod(0o755)  # mkdtemp's 0700 would shut out a submission run as another user (AUTOGRADER_SANDBOX=user)
    write_kernel_side(tmp, suites)
    try:
        os.rename(tmp, folder)
    except OSError:  # another process built it first
        shutil.rmtree(tmp, ignore_errors=True)
    return folder / "autograder"

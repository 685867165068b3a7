"""The part of `autograder` that student code may see: the kernel side and the folders' harnesses.

A graded function's *harness* is its folder's `__init__.py` (`autograder/graded/<name>/`): how the
function is called (`call`) and the settings the runner reads. Everything else of the folder is
the grader's (`grader.py`: how the hidden inputs are drawn, the truths, the correct versions, the
known mistakes) and is never copied: the line between the two is drawn by file, not cut out of a
module.

`write_kernel_side(dest, suites)` writes `dest/autograder`: the modules a grading kernel, the
judge's runner and `make check` need (KERNEL_SIDE: no case generation, no judge server, no
grading command, no catalogue) and `graded/<suite>/__init__.py` for each suite (with the harnesses
it imports). A student kit ships such a copy; the grading sandbox binds one
(`sandbox_autograder()`, cached) where the repository's `autograder/` was, so no grader.py,
hidden case or grader module is visible to the submission.
"""

from __future__ import annotations

import ast
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
FOLDERS = HERE / "graded"
KERNEL_SIDE = ("checker.py", "protocol.py", "report.py", "compare.py", "recognition.py", "suite_api.py", "runner.py",
               "trial.py", "limits.py", "practice.py", "nbgrader_cli.py", "student_view.py", "confine.py")
# a kit: no hidden check, no grading run
PRACTICE_SIDE = tuple(n for n in KERNEL_SIDE if n not in ("checker.py", "protocol.py", "nbgrader_cli.py", "confine.py"))
INIT = '"""What student code may see of the grader: the checker, the runner, the comparison, the harnesses."""\n'
GRADED_INIT = '"""How each graded function is called: each folder\'s harness, without its grader.py."""\n'


def harness_path(suite: str) -> Path:
    """The public file of a graded function's folder."""
    return FOLDERS / suite / "__init__.py"


def harness_closure(suites: list[str]) -> list[str]:
    """`suites` and every folder their harnesses import (`from autograder.graded.<other> import ...`:
    kl_k2's harness takes kl_k1's `call`), sorted."""
    out, todo = set(), list(suites)
    while todo:
        suite = todo.pop()
        if suite in out:
            continue
        out.add(suite)
        for node in ast.walk(ast.parse(harness_path(suite).read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("autograder.graded."):
                parts = node.module.split(".")
                if len(parts) != 3 or parts[2].startswith("_"):
                    raise ValueError(f"autograder/graded/{suite}/__init__.py imports {node.module}: a harness may "
                                     "import another folder's harness only")
                todo.append(parts[2])
    return sorted(out)


def write_kernel_side(dest: Path, suites: list[str], init: str = INIT, modules: tuple[str, ...] = KERNEL_SIDE) -> Path:
    """Write `dest/autograder` (replaced): `modules` (default: the kernel side) and the harnesses of
    `suites`. A student kit takes PRACTICE_SIDE: what `make check` runs, no hidden check."""
    target = Path(dest) / "autograder"
    if target.exists():
        shutil.rmtree(target)
    (target / "graded").mkdir(parents=True)
    (target / "__init__.py").write_text(init, encoding="utf-8")
    for name in modules:
        shutil.copy(HERE / name, target / name)
    (target / "graded" / "__init__.py").write_text(GRADED_INIT, encoding="utf-8")
    for suite in harness_closure(suites):
        (target / "graded" / suite).mkdir()
        shutil.copy(harness_path(suite), target / "graded" / suite / "__init__.py")
    return target


def sandbox_autograder() -> Path:
    """A cached `autograder` folder for the grading sandbox: the kernel side and every suite's harness."""
    from .stubs import cache_root
    from .suite_api import suite_names

    suites = suite_names()
    h = hashlib.sha256()
    for path in [HERE / n for n in KERNEL_SIDE] + [harness_path(s) for s in suites] + [Path(__file__)]:
        h.update(str(path.relative_to(HERE)).encode() + b"\0" + path.read_bytes() + b"\0")
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

"""Twins found, not remembered: every function of the library a student of NN gets that computes an open graded function of NN.

    python -m autograder.twins [NN ...] [--undeclared]   # every assignment by default; exit 1 when one is found

For each graded function of assignment NN that has a suite, every function of the stubbed
course_lib of NN (`autograder.stubs.stub_tree`: what the kit of NN ships and the judge runs
with) whose signature can take the graded function's arguments is *run* as a delegating
student's function would be: through the suite's `call`, on the suite's practice cases (seed
PRACTICE_SEED), with the suite's tripwire installed (`autograder.student_view.tripwire`), in a
fresh process where the stubbed copy is `course_lib`. Its result is read as it is, or as one
entry of the dict or tuple it returns (`get_response_log_probs(...)["log_probs"]`). A candidate
is a *twin* when it passes every case on the outputs that are not errors the contract asks for
(a student adds the checks), and a *near twin* when it passes at least NEAR of them (a student
who fixes what it gets wrong has done the work that case checks; listed so that someone reads it).

Bounded: the signature filter first (`fits`: the candidate takes every argument the graded function
requires and requires none it does not have), one case first (the rest only for a candidate that
passes it), CALL_SECONDS per call, and the modules that start processes or servers, write files or
run whole commands (SKIPPED) left out. What does not fit a call (the trainers' steps and losses, engines, metrics, a function of ids
instead of strings) is read instead: `autograder.student_view.TWINS` lists what reading found.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .assignments import REPO_ROOT

NEAR = 0.75  # a near twin passes at least this share of the cases
CALL_SECONDS = 20.0  # one call of a candidate on one case
SCAN_SECONDS = 900  # one assignment's scan
# modules whose functions start processes or servers, write files, run notebooks or whole commands: not run
# (what they compute is read: student_view.TWINS)
SKIPPED = ("course_lib.training.cli", "course_lib.training.demo", "course_lib.training.__main__",
           "course_lib.training.checkpoint", "course_lib.training.plots", "course_lib.rollouts.vllm_server",
           "course_lib.rollouts.vllm_engine", "course_lib.rollouts.vllm_worker_ext", "course_lib.world.tokenizer_build",
           "course_lib.world.stand_in", "course_lib.selfcheck")
SKIPPED_NAMES = ("main",)


@dataclass(frozen=True)
class Finding:
    graded: str  # the graded function
    candidate: str  # "module:qualname" of the function run in its place
    output: str  # how its result was read: "as it is", or "[key]" / "[i]" of what it returns
    passed: int  # math cases passed
    cases: int  # math cases run
    failed: tuple[str, ...]  # the names of the math cases it failed

    @property
    def twin(self) -> bool:
        return self.passed == self.cases > 0

    def line(self) -> str:
        kind = "twin" if self.twin else "near twin"
        read = "" if self.output == "as it is" else f" (its result{self.output})"
        fails = f", fails {', '.join(self.failed)}" if self.failed else ""
        return f"{kind} of {self.graded}: {self.candidate}{read} passes {self.passed}/{self.cases} practice cases{fails}"


# ---------------------------------------------------------------- the grader's side
def graded_suites(assignment: str) -> list[str]:
    """The suites of assignment NN's graded functions (a suite is named for the function it grades)."""
    from .assignments import registry
    from .suite_api import suite_names

    suites = set(suite_names())
    return [g.name for g in registry() if g.assignment == assignment and g.name in suites]


def find_twins(assignment: str, *, declared: bool = True, timeout: float = SCAN_SECONDS) -> list[Finding]:
    """The twins and near twins of assignment NN's graded functions in its stubbed course_lib (see
    the module docstring): a fresh process with that copy first on its path runs them.
    `declared=False` scans the library as it would be without `student_view.TWINS` (the graded
    names stubbed, the suites' own TRIPWIRE): what the declaration has to answer for."""
    import torch

    from .assignments import open_names
    from .cases import make_suite_cases
    from .stubs import cached_tree, stub_tree
    from .suite_api import PRACTICE_SEED

    suites = graded_suites(assignment)
    if not suites:
        return []
    stub = stub_tree(assignment) if declared else cached_tree(open_names(assignment))
    with tempfile.TemporaryDirectory(prefix="twins-") as tmp:
        cases = {s: make_suite_cases(s, PRACTICE_SEED, mistakes=False)["cases"] for s in suites}
        torch.save(cases, Path(tmp) / "cases.pt")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(stub), str(REPO_ROOT)]), "OMP_NUM_THREADS": "1",
               "HF_HUB_OFFLINE": "1"}
        cmd = [sys.executable, "-m", "autograder.twins", "--scan", str(Path(tmp) / "cases.pt")]
        proc = subprocess.run(cmd + ([] if declared else ["--undeclared"]), cwd=tmp, env=env, capture_output=True,
                              text=True, timeout=timeout)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0:
        raise RuntimeError(f"the twin scan of assignment {assignment} failed (exit {proc.returncode}):\n"
                           f"{proc.stderr[-3000:]}")
    return [Finding(**{**json.loads(line), "failed": tuple(json.loads(line)["failed"])}) for line in lines]


# ---------------------------------------------------------------- the scan, where the stubbed copy is course_lib
class CallTimeout(BaseException):
    """A candidate ran past CALL_SECONDS (a BaseException: a candidate's `except Exception` cannot keep it)."""


def library_functions() -> list[tuple[str, object]]:
    """("module:qualname", function) of every function defined in course_lib outside SKIPPED: the
    top-level functions and the static methods of the top-level classes, each once."""
    import importlib
    import inspect
    import pkgutil

    import course_lib

    out, seen = [], set()
    modules = ["course_lib"] + [m.name for m in pkgutil.walk_packages(course_lib.__path__, "course_lib.")]
    for name in modules:
        if name in SKIPPED:
            continue
        try:
            module = importlib.import_module(name)
        except ImportError:  # an optional dependency (vLLM) that is not installed
            continue
        for attr, obj in vars(module).items():
            found = []
            if inspect.isfunction(obj) and obj.__module__ == name:
                found.append((attr, obj))
            elif inspect.isclass(obj) and obj.__module__ == name:
                found += [(f"{attr}.{k}", v.__func__) for k, v in vars(obj).items() if isinstance(v, staticmethod)]
            for qualname, fn in found:
                if qualname.rpartition(".")[2] not in SKIPPED_NAMES and id(fn) not in seen:
                    seen.add(id(fn))
                    out.append((f"{name}:{qualname}", fn))
    return out


def resolve(ref: str):
    """The object "module:qualname" names now (a tripwire may have replaced it)."""
    module, _, qualname = ref.partition(":")
    obj = sys.modules[module]
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def fits(candidate, graded) -> int | None:
    """How many leading positional arguments `candidate` takes of a call of `graded`, or None when the
    call does not fit: it must take every argument the graded function requires (positionally, and
    its required keywords by name) and require none the graded function does not have."""
    import inspect

    try:
        mine, theirs = inspect.signature(candidate).parameters, inspect.signature(graded).parameters
    except (TypeError, ValueError):
        return None

    def positional(params):
        return [p for p in params.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]

    varargs = any(p.kind == p.VAR_POSITIONAL for p in mine.values())
    any_keyword = any(p.kind == p.VAR_KEYWORD for p in mine.values())
    width = len(theirs) if varargs else len(positional(mine))
    needs = [p for p in positional(theirs) if p.default is p.empty]
    needs_by_name = [p.name for p in theirs.values() if p.kind == p.KEYWORD_ONLY and p.default is p.empty]
    required = [p for p in mine.values() if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if width < len(needs) or not (any_keyword or all(n in mine for n in needs_by_name)):
        return None
    if len(required) > len(theirs) or any(p.kind == p.KEYWORD_ONLY and p.name not in theirs for p in required):
        return None
    return width


def delegate(candidate, width: int, output):
    """A graded function that delegates to `candidate`: the first `width` positional arguments and
    the keywords it takes, its result read by `output` (None: as it is; else a key or an index)."""
    import inspect

    params = inspect.signature(candidate).parameters
    any_keyword = any(p.kind == p.VAR_KEYWORD for p in params.values())

    def student(*args, **kwargs):
        result = candidate(*args[:width], **{k: v for k, v in kwargs.items() if any_keyword or k in params})
        return result if output is None else result[output]

    return student


def readings(result) -> list:
    """The ways to read a candidate's result: as it is, and each entry of a dict or tuple."""
    if isinstance(result, dict):
        return [None, *result]
    if isinstance(result, (tuple, list)) and 1 < len(result) <= 8:
        return [None, *range(len(result))]
    return [None]


def math_part(tree):
    """Of a case's outputs (or expected tree), what is not an error the contract asks for: the
    top-level entries whose names do not start with "raises"."""
    if isinstance(tree, dict):
        return {k: v for k, v in tree.items() if not str(k).startswith("raises")}
    return tree


def passes(outputs: dict, expected, settings: dict) -> bool:
    from .compare import compare

    if "__error__" in outputs:
        return False
    want = math_part(expected)
    got = {k: outputs.get(k) for k in want} if isinstance(want, dict) else outputs
    try:
        return not compare(got, want, settings)
    except Exception:  # noqa: BLE001 - outputs the comparison cannot walk
        return False


def run_one(suite, fn, inputs: dict) -> dict:
    """`run_case` within CALL_SECONDS: the outputs, or {"__error__": ...}."""
    import signal

    from .suite_api import run_case

    def alarm(*_):
        raise CallTimeout()

    signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, CALL_SECONDS)
    try:
        return run_case(suite, fn, inputs)
    except CallTimeout:
        return {"__error__": "timeout"}
    except Exception:  # noqa: BLE001 - outputs the comparison cannot normalise
        return {"__error__": "unusable"}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def scan(cases_path: Path, declared: bool = True):
    """Yield a Finding for every candidate that passes at least NEAR of a suite's math cases (see the
    module docstring); run where the stubbed course_lib is the one imported. `declared=False`: with the
    suites' own TRIPWIRE, not the tripwire twins."""
    import torch

    import course_lib

    from .runner import install_tripwire
    from .student_view import tripwire
    from .suite_api import load_suite, suite_settings

    torch.set_num_threads(1)
    candidates = [ref for ref, _ in library_functions()]
    all_cases = torch.load(cases_path, weights_only=False)
    for name, cases in all_cases.items():
        suite = load_suite(name)
        settings = suite_settings(suite)
        graded = getattr(course_lib, suite.GRADED)
        wire = tripwire(suite) if declared else list(getattr(suite, "TRIPWIRE", [suite.GRADED]))
        saved = [(m, a, v) for k, m in list(sys.modules.items()) if k == "course_lib" or k.startswith("course_lib.")
                 for a, v in list(vars(m).items()) if a in wire]
        install_tripwire(wire)
        math = [c for c in cases if math_part(c["expected"]) not in ({}, None)]
        for ref in candidates:
            fn = resolve(ref)  # as a delegate's name resolves once the tripwire is in: what it is now
            width = fits(fn, graded)
            if width is None:
                continue
            first = math[0]
            kept = []
            plain = run_one(suite, delegate(fn, width, None), first["inputs"])
            if passes(plain, first["expected"], settings):
                kept.append(None)
            elif "__error__" not in plain or plain["__error__"] not in ("TypeError", "NotImplementedError"):
                # what it returns, read entry by entry (a dict's keys, a tuple's places)
                for output in _entries(suite, fn, width, first["inputs"]):
                    if passes(run_one(suite, delegate(fn, width, output), first["inputs"]), first["expected"], settings):
                        kept.append(output)
            for output in kept:
                failed = []
                for case in math[1:]:
                    if not passes(run_one(suite, delegate(fn, width, output), case["inputs"]), case["expected"], settings):
                        failed.append(case["name"])
                        if len(failed) > (1 - NEAR) * len(math):
                            break
                if len(failed) <= (1 - NEAR) * len(math):
                    yield Finding(graded=suite.GRADED, candidate=ref,
                                  output="as it is" if output is None else f"[{output!r}]",
                                  passed=len(math) - len(failed), cases=len(math), failed=tuple(failed))
        for module, attr, value in saved:  # the next suite's tripwire starts from the library as it is
            setattr(module, attr, value)


def _entries(suite, fn, width: int, inputs: dict) -> list:
    """The keys or indices of what `fn` returns when the suite calls it as a delegate; [] when the call fails."""
    seen = []
    student = delegate(fn, width, None)

    def recorded(*args, **kwargs):
        seen.append(student(*args, **kwargs))
        return seen[-1]

    run_one(suite, recorded, inputs)
    return [r for r in readings(seen[0]) if r is not None] if seen else []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("assignments", nargs="*", help="e.g. 09 (default: every assignment)")
    parser.add_argument("--undeclared", action="store_true", help="the library without student_view.TWINS")
    parser.add_argument("--scan", type=Path, help=argparse.SUPPRESS)  # the fresh process's side
    args = parser.parse_args(argv)
    if args.scan is not None:
        for finding in scan(args.scan, declared=not args.undeclared):
            print(json.dumps(finding.__dict__ | {"failed": list(finding.failed)}), flush=True)
        return 0
    from .assignments import assignments

    found_twin = False
    for assignment in [a.zfill(2) for a in args.assignments] or assignments():
        findings = find_twins(assignment, declared=not args.undeclared)
        print(f"assignment {assignment}: {len(findings)} found" + "".join(f"\n  {f.line()}" for f in findings))
        found_twin |= bool(findings)
    return 1 if found_twin else 0


if __name__ == "__main__":
    sys.exit(main())

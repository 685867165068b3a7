"""The hidden-case engine: suites, case files, output normalisation and the comparison.

A hidden-case suite is a module `autograder/suites/<graded_name>.py` defining:

    GRADED = "compute_entropy"                  # the course_lib name it grades
    TOLERANCE = {"atol": 1e-6, "rtol": 1e-5}    # optional (default below)
    def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
        '''(case name, inputs) pairs; inputs survive torch.save/torch.load.'''
    def call(fn, inputs: dict) -> dict:
        '''Run fn on FRESH COPIES of inputs; return named outputs (tensors, floats, ints,
        bools, strings, None, lists/tuples/dicts of them).'''

Optional: CHECK_DTYPE (default True: a tensor of another dtype fails), TIMEOUT (seconds for all
cases of the suite in the student's process, default 120), TRIPWIRE (course_lib names that
must not be called by the student's function, default [GRADED]).

Expected outputs are `call(course_lib.<GRADED>, inputs)`, computed by `make_cases` on the
grader's side. A student's outputs pass a case when every key matches: same structure, same
shapes and dtypes, same NaN positions, allclose within TOLERANCE for floats, exact for ints,
bools and strings. A report names the case and the size of the error, never expected values.
"""

from __future__ import annotations

import importlib
import math
import os
import pkgutil
from pathlib import Path
from types import ModuleType

import torch

HERE = Path(__file__).resolve().parent
HIDDEN_DIR = Path(os.environ.get("AUTOGRADER_HIDDEN_DIR", HERE / "hidden"))
DEFAULT_TOLERANCE = {"atol": 1e-6, "rtol": 1e-5}
DEFAULT_TIMEOUT = 120.0


SUITES = "autograder.suites"  # the package of the suites; a student kit has only their harnesses


def suite_names(package: str = SUITES) -> list[str]:
    pkg = importlib.import_module(package)
    return sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_"))


def load_suite(name: str, package: str = SUITES) -> ModuleType:
    """The suite module `name`. In a student kit (`package="autograder.harness"`) a suite is its
    harness only: `call` and the settings, without `make_inputs` (the practice cases are files)."""
    if name not in suite_names(package):
        raise KeyError(f"no hidden-case suite named {name!r} (known: {', '.join(suite_names(package))})")
    suite = importlib.import_module(f"{package}.{name}")
    needed = ("GRADED", "make_inputs", "call") if package == SUITES else ("GRADED", "call")
    for attr in needed:
        if not hasattr(suite, attr):
            raise AttributeError(f"suite {name!r} lacks {attr}")
    return suite


def suite_settings(suite: ModuleType) -> dict:
    return {
        "tolerance": dict(getattr(suite, "TOLERANCE", DEFAULT_TOLERANCE)),
        "check_dtype": bool(getattr(suite, "CHECK_DTYPE", True)),
        "timeout": float(getattr(suite, "TIMEOUT", DEFAULT_TIMEOUT)),
        "tripwire": list(getattr(suite, "TRIPWIRE", [suite.GRADED])),
    }


def case_path(name: str, hidden_dir: Path | None = None) -> Path:
    return Path(hidden_dir or HIDDEN_DIR) / f"{name}.pt"


# ---------------------------------------------------------------- outputs: one plain shape
class OutputError(TypeError):
    """A function returned something the checker cannot compare."""


def normalize(obj, where: str = "output"):
    """Detached CPU copies of tensors; tuples become lists; only plain, comparable types remain."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu").clone().contiguous()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, (list, tuple)):
        return [normalize(x, f"{where}[{i}]") for i, x in enumerate(obj)]
    if isinstance(obj, dict):
        if not all(isinstance(k, str) for k in obj):
            raise OutputError(f"{where} is a dict with non-string keys")
        return {k: normalize(v, f"{where}[{k!r}]") for k, v in obj.items()}
    # numpy scalars and similar: accept anything that is exactly a number
    for kind in (int, float):
        try:
            if hasattr(obj, "item") and isinstance(obj.item(), kind):
                return obj.item()
        except Exception:
            pass
    raise OutputError(f"{where} has type {type(obj).__name__}, which is not a tensor, number, bool, string, list or dict")


# ---------------------------------------------------------------- the comparison
def _kind(x) -> str:
    if isinstance(x, torch.Tensor):
        return "tensor"
    if isinstance(x, bool):
        return "bool"
    if isinstance(x, (int, float)):
        return "number"
    if x is None:
        return "None"
    return type(x).__name__


def compare(got, expected, settings: dict, where: str = "") -> list[str]:
    """Problems found comparing `got` to `expected`, worded without any expected value."""
    label = where or "the output"
    if _kind(got) != _kind(expected):
        return [f"{label} is a {_kind(got)}, not the expected kind of value"]
    if isinstance(expected, dict):
        problems = []
        missing = [k for k in expected if k not in got]
        extra = [k for k in got if k not in expected]
        if missing:
            problems.append(f"{label} lacks key(s) {', '.join(map(repr, missing))}")
        if extra:
            problems.append(f"{label} has unexpected key(s) {', '.join(map(repr, extra))}")
        for k in expected:
            if k in got:
                problems += compare(got[k], expected[k], settings, f"{where}[{k!r}]" if where else repr(k))
        return problems
    if isinstance(expected, list):
        if len(got) != len(expected):
            return [f"{label} has length {len(got)}, not the expected length"]
        problems = []
        for i, (g, e) in enumerate(zip(got, expected)):
            problems += compare(g, e, settings, f"{where}[{i}]" if where else f"item {i}")
        return problems
    if isinstance(expected, torch.Tensor):
        if tuple(got.shape) != tuple(expected.shape):
            return [f"{label} has shape {tuple(got.shape)}, not the expected shape"]
        if settings.get("check_dtype", True) and got.dtype != expected.dtype:
            return [f"{label} has dtype {got.dtype}, not the expected dtype"]
        if got.numel() == 0:
            return []
        if expected.is_floating_point() or expected.is_complex() or got.is_floating_point():
            g, e = got.to(torch.float64), expected.to(torch.float64)
            g_nan, e_nan = torch.isnan(g), torch.isnan(e)
            if not torch.equal(g_nan, e_nan):
                n = int((g_nan != e_nan).sum())
                return [f"{label}: NaN at {n} position(s) where the expected output differs"]
            both_inf = torch.isinf(e) & (g == e)
            ok = torch.isclose(g, e, equal_nan=True, **settings["tolerance"]) | both_inf
            if bool(ok.all()):
                return []
            diff = (g - e).abs()
            diff = torch.where(ok, torch.zeros_like(diff), diff)
            worst = float(diff.max())
            return [f"{label}: {int((~ok).sum())} of {ok.numel()} values differ, max abs error {worst:.3g}"]
        if torch.equal(got, expected):
            return []
        n = int((got != expected).sum())
        return [f"{label}: {n} of {expected.numel()} values differ (exact match needed)"]
    if isinstance(expected, bool) or isinstance(expected, str) or expected is None:
        return [] if got == expected else [f"{label} differs from the expected value"]
    # numbers: exact for two ints, allclose otherwise
    if isinstance(expected, int) and isinstance(got, int):
        return [] if got == expected else [f"{label} is off by {abs(got - expected)}"]
    g, e = float(got), float(expected)
    if math.isnan(e) or math.isnan(g):
        return [] if (math.isnan(e) and math.isnan(g)) else [f"{label}: NaN where the expected output differs"]
    tol = settings["tolerance"]
    if g == e or abs(g - e) <= tol.get("atol", 1e-8) + tol.get("rtol", 1e-5) * abs(e):
        return []
    return [f"{label}: abs error {abs(g - e):.3g}"]


# ---------------------------------------------------------------- case files
def make_suite_cases(name: str, seed: int) -> dict:
    """Inputs and the reference's expected outputs of one suite (grader side only)."""
    import course_lib

    suite = load_suite(name)
    gen = torch.Generator().manual_seed(seed)
    reference = getattr(course_lib, suite.GRADED)
    cases = []
    names = set()
    for case_name, inputs in suite.make_inputs(gen):
        if case_name in names:
            raise ValueError(f"suite {name!r} has two cases named {case_name!r}")
        names.add(case_name)
        expected = run_case(suite, reference, inputs)
        if "__error__" in expected:  # a suite turns errors it expects into outputs itself
            raise RuntimeError(f"the reference fails on case {case_name!r} of suite {name!r}: {expected['__error__']}")
        cases.append({"name": case_name, "inputs": inputs, "expected": expected})
    return {"suite": name, "graded": suite.GRADED, "fingerprint": fingerprint(name), "cases": cases}


def fingerprint(name: str) -> str:
    """A hash of the suite's source and of the reference's module: case files older than either are stale."""
    import hashlib
    import inspect

    import course_lib

    suite = load_suite(name)
    reference = getattr(course_lib, suite.GRADED)
    text = inspect.getsource(suite) + inspect.getsource(inspect.getmodule(reference))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_case(suite: ModuleType, fn, inputs: dict) -> dict:
    """Outputs of `suite.call(fn, inputs)` in plain form; an exception becomes {"__error__": ...}.

    A suite may turn an exception it expects into an output itself (e.g. {"raises": "ValueError"}).
    """
    try:
        out = suite.call(fn, _fresh(inputs))
    except Exception as e:  # noqa: BLE001 - any failure of the graded function is a result
        return {"__error__": _exception_name(e)}
    if not isinstance(out, dict):
        raise OutputError(f"suite {suite.__name__} call() must return a dict, got {type(out).__name__}")
    return normalize(out)


def _fresh(inputs):
    import copy

    return copy.deepcopy(inputs)


def _exception_name(e: BaseException) -> str:
    """The exception's class name when it is a builtin one, else a generic word (no side channel)."""
    import builtins

    name = type(e).__name__
    return name if getattr(builtins, name, None) is type(e) else "an exception of a custom class"


def save_cases(data: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save(data, tmp)
    os.replace(tmp, path)


def load_cases(name: str, hidden_dir: Path | None = None) -> dict:
    path = case_path(name, hidden_dir)
    if not path.is_file():
        raise FileNotFoundError(f"no hidden cases for {name!r} at {path}: the grader runs `python -m autograder.make_cases`")
    return torch.load(path, weights_only=False)  # a grader-made file: trusted

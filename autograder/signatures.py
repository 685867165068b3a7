"""Each known mistake's signature on a draw of cases: what the judge compares a failing function with.

When a suite's cases are made (`autograder.cases.make_suite_cases`), each mistake of its
catalogue (`autograder.mistakes`) runs on every case as a student's function runs in the judge:
where the references of the open assignments and their twins are stubs and the suite's tripwire
names trip (`references_hidden`, from `autograder.student_view`). Its *signature* is the cases it
fails against the truth that tell it from a correct function. On each of them its outputs become
an expected tree made the way the truth's is (`autograder.compare.expected_tree` of the mistake in
float64 against its own run in the case's precision, and against its runs with another thread
count and, for a training step, on inputs moved by one unit: a tolerance for its own rounding), so
that a student who makes the same mistake with other rounding still matches; an error (a raised
exception, the tripwire) is kept as the judge's error code.

A case the mistake fails does not tell it from a correct function when the two trees overlap:
some output within the truth's tolerance is also within the mistake's (`could_be_correct`: every
value's two tolerance intervals meet, with the same structure, dtypes, NaN positions and exact
values). That happens where the mistake's error is its own rounding (an entropy that loses 1e-3
at logits shifted by 1e4: its float64 run is the truth, its tolerance 16 times that loss): any
function right on that case would match it there. Such a case is kept apart ("untold"): it never
names the mistake, and it only explains a failure of a function named for the mistake's other
cases. A mistake with no telling case on a draw is not named on it.

Per mistake, the case file holds

    {"sentence": str, "signature": {case: {"expected": tree} | {"error": code}},
     "untold": {case: {"expected": tree}}, "returned": [case], "covers": [name], "near_tie": [case]}

"returned" lists the cases on which the mistake raised nothing (recognition asks a function named
for an error to return where the mistake returns: `autograder.recognition`). "covers" lists the
other mistakes whose whole signature this mistake's own outputs match on the draw (a mistake that
fails every case another fails, in the same way, and more): recognition names the one that
explains more, and names two that cover each other as alternatives. "near_tie" lists the
signature cases on which the mistake's own float64 run was not near its run in the case's
precision (or gave another structure): there the tree is its own run, with the tolerance of that
run's rounding only. An empty signature (the mistake passes every case of this draw, or fails
only untold ones) is kept as it is: nothing names it on that draw, and the tests report it. No
source is kept: what recognition needs is outputs, and a case file of practice cases goes into a
student kit.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from contextlib import contextmanager
from types import ModuleType

import torch

from .compare import atol_at


class ReferenceCalled(RuntimeError):
    """A mistake called a reference the judge's runner would have tripped on."""


def hidden_names(suite: ModuleType) -> tuple[tuple, tuple[str, ...]]:
    """(stubbed, tripwire) of `student_view.suite_view(suite)`: the `Graded` entries the judge's
    stubbed course_lib stubs for a runner of the suite (`autograder.stubs.stub_for_suite`) and the
    names the runner's tripwire replaces (`autograder.runner.install_tripwire`)."""
    return _hidden_names(suite)


@functools.lru_cache(maxsize=None)
def _hidden_names(suite: ModuleType) -> tuple[tuple, tuple[str, ...]]:
    from .student_view import suite_view

    stubbed, tripwire = suite_view(suite)
    return tuple(stubbed), tuple(tripwire)


@contextmanager
def references_hidden(suite: ModuleType):
    """Within: `hidden_names(suite)` in force in every loaded course_lib module, as the judge's runner
    finds them: each stubbed function (a graded one or a twin), under its own name and every alias
    of it, raises NotImplementedError, a stubbed constant is None (the modules that define them are
    imported first, as the stubbed copy holds them); each tripwire name raises ReferenceCalled and
    is recorded in the yielded list. Graded classes are left as they are (no catalogued mistake uses
    one). Restored on exit. What the code run within prints or warns is dropped, as the judge drops
    a student's output."""
    import contextlib
    import importlib
    import io
    import warnings

    import course_lib  # noqa: F401 - every submodule loaded before the names are replaced

    stubbed, tripwire = hidden_names(suite)
    tripped: list[str] = []
    saved = []
    targets = {}  # id of each stubbed object -> (its name, the object), found where it is defined
    for g in stubbed:
        obj = vars(importlib.import_module(g.module))[g.name]
        targets[id(obj)] = (g.name, obj)

    def stand_in(name: str, obj):
        if name in tripwire:
            def tripwire_fn(*args, _name=name, **kwargs):
                tripped.append(_name)
                raise ReferenceCalled(f"course_lib.{_name} is the reference implementation")
            return tripwire_fn
        if isinstance(obj, type):
            return obj
        if callable(obj):
            def stub(*args, _name=name, **kwargs):
                raise NotImplementedError(f"{_name} is a stub here")
            return stub
        return None

    modules = [m for key, m in list(sys.modules.items()) if key == "course_lib" or key.startswith("course_lib.")]
    try:
        for module in modules:
            for attr, value in list(vars(module).items()):
                hit = targets.get(id(value))
                if attr in tripwire or (hit is not None and hit[1] is value):
                    saved.append((module, attr, value))
                    setattr(module, attr, stand_in(attr if attr in tripwire else hit[0], value))
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            yield tripped
    finally:
        for module, name, obj in reversed(saved):
            setattr(module, name, obj)


def run_as_judged(suite: ModuleType, fn, inputs: dict, tripped: list[str]) -> dict:
    """{"outputs": plain outputs} or {"error": the judge's error code} of `fn` on one case, inside
    `references_hidden` (the codes of `autograder.trial._compare_into`)."""
    from .report import error_code
    from .suite_api import run_case

    before = len(tripped)
    try:
        outputs = run_case(suite, fn, inputs)
    except Exception:  # noqa: BLE001 - an output the comparison cannot walk, as in the runner
        return {"error": "unusable"}
    if len(tripped) > before:
        return {"error": "reference"}
    if "__error__" in outputs:
        return {"error": error_code(outputs["__error__"])}
    return {"outputs": outputs}


def fails(result: dict, case: dict, settings: dict) -> bool:
    """Whether a result ({"outputs"} or {"error"}) fails a case against its truth."""
    from .compare import compare

    if "error" in result:
        return True
    try:
        return bool(compare(result["outputs"], case["expected"], settings))
    except Exception:  # noqa: BLE001 - outputs the comparison cannot walk: a failure, as in the judge
        return True


def other_thread_count() -> int:
    """A torch thread count other than this process's: 1 where it runs more, else 2."""
    return 1 if torch.get_num_threads() > 1 else 2


@contextmanager
def torch_threads(n: int):
    """Within: torch runs `n` threads; the count before is restored on exit."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def mistake_tree(suite: ModuleType, fn, case: dict, native: dict, tripped: list[str]) -> tuple[object, bool]:
    """(expected tree of the mistake's outputs on one case, whether it fell back to its own run):
    its run in the case's precision against its run in float64, as the truth's tree is made, with
    two more runs in the spread: its run with another torch thread count (`other_thread_count`: the
    judge's runner takes its own, one per core, and an operation large enough to be split over
    threads sums in another order), and, where the suite sets PERTURB, its run on the inputs moved
    by one unit of rounding (the training steps, whose float64 updates another process's summation
    order moves by more than eps). Moving the inputs does not reach a model the suite builds inside
    the call: there the thread count's run is the one that measures it (on a draw of
    grpo_train_step, `old_log_probs_recomputed` run with two threads missed a tree made without it
    by 1.47 tolerances)."""
    from .compare import NearTie, TruthMismatch, expected_tree
    from .precision import case_precision, perturb, upcast

    precision = case_precision(case["inputs"])
    eps = torch.finfo(precision).eps
    if precision == torch.float64:
        wide = native
    else:
        wide = run_as_judged(suite, fn, upcast(case["inputs"]), tripped).get("outputs")
    with torch_threads(other_thread_count()):
        threaded = run_as_judged(suite, fn, case["inputs"], tripped).get("outputs")
    others = [threaded] if threaded is not None else []
    if getattr(suite, "PERTURB", False):
        moved = run_as_judged(suite, fn, perturb(case["inputs"], torch.Generator().manual_seed(len(case["name"]))),
                              tripped).get("outputs")
        others += [moved] if moved is not None else []
    for variants in (others, []):  # a run of another structure drops the spread, not the tree
        if wide is not None:
            try:
                return expected_tree(native, wide, variants, eps), False
            except (NearTie, TruthMismatch):
                pass
    return expected_tree(native, native, [], eps), True


def slim(tree):
    """`tree` with each floating tensor's run in the case's precision (`Expected.native`) kept as a
    stride-0 view of one zero: comparing with a floating leaf reads only the native's kind, shape
    and floating dtype, and its values against the float64 truth (`autograder.compare.compare`), so
    the view keeps what recognition reads at no size (kit 12's practice cases: 96 MiB to 81)."""
    from .compare import Expected

    if isinstance(tree, dict):
        return {k: slim(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [slim(v) for v in tree]
    if isinstance(tree, Expected) and isinstance(tree.native, torch.Tensor) and tree.native.is_floating_point():
        return dataclasses.replace(tree, native=torch.zeros((), dtype=tree.native.dtype).expand(tree.native.shape))
    return tree


def mistake_results(suite: ModuleType, source: str, cases: list[dict]) -> dict[str, dict]:
    """{case name: `run_as_judged` result} of the function a cell's `source` defines, on every case,
    as the judge runs it (the cell itself runs inside `references_hidden`: a name it imports from
    course_lib is the stand-in, as the judge's unpickled function finds it)."""
    from .mistakes import function_from

    with references_hidden(suite) as tripped:
        fn = function_from(source, suite.GRADED)
        return {case["name"]: run_as_judged(suite, fn, case["inputs"], tripped) for case in cases}


def could_be_correct(tree, expected, settings: dict) -> bool:
    """Whether some output within tolerance of the truth (`expected`, a case's tree) is also within
    tolerance of a mistake's `tree` on that case: the same kinds, keys, lengths, shapes, dtypes,
    NaN and infinity positions and exact values, and for every floating value
    |mistake - truth| <= its tolerance + the truth's. A case where this holds does not tell the
    mistake from a correct function."""
    from .compare import Expected, _kind

    if isinstance(expected, dict):
        return isinstance(tree, dict) and set(tree) == set(expected) and \
            all(could_be_correct(tree[k], expected[k], settings) for k in expected)
    if isinstance(expected, list):
        return isinstance(tree, list) and len(tree) == len(expected) and \
            all(could_be_correct(a, b, settings) for a, b in zip(tree, expected))
    if not isinstance(tree, Expected) or not isinstance(expected, Expected) or _kind(tree.native) != _kind(expected.native):
        return False
    if isinstance(expected.native, torch.Tensor):
        if tuple(tree.native.shape) != tuple(expected.native.shape):
            return False
        if tree.dtype != expected.dtype:
            return False
        if not expected.native.is_floating_point():
            return tree.native.dtype == expected.native.dtype and torch.equal(tree.native, expected.native)
        if not tree.native.is_floating_point():
            return False
        return _intervals_meet(tree, expected.truth, expected)
    if isinstance(expected.truth, float):
        if not isinstance(tree.truth, float):
            return False
        return _intervals_meet(dataclasses.replace(tree, truth=torch.tensor([tree.truth], dtype=torch.float64)),
                               torch.tensor([expected.truth], dtype=torch.float64), expected)
    return type(tree.native) is type(expected.native) and tree.native == expected.native


def _intervals_meet(tree, truth: torch.Tensor, expected) -> bool:
    a, b = tree.truth.to(torch.float64), truth.to(torch.float64)
    for where in (torch.isnan, lambda x: torch.isinf(x) & (x > 0), lambda x: torch.isinf(x) & (x < 0)):
        if not torch.equal(where(a), where(b)):
            return False
    finite = torch.isfinite(b)
    room = (atol_at(tree, finite) + tree.rtol * a[finite].abs()  # each tolerance: one number or one per value
            + atol_at(expected, finite) + expected.rtol * b[finite].abs())
    return bool(((a[finite] - b[finite]).abs() <= room).all())


def signature_of(suite: ModuleType, source: str, cases: list[dict], results: dict[str, dict]) -> dict:
    """{"signature", "untold", "returned", "near_tie"} of one mistake (its cell's `source`) from its
    `results` on `cases` (see the module docstring)."""
    from .mistakes import function_from
    from .suite_api import suite_settings

    settings = suite_settings(suite)
    signature, untold, near = {}, {}, []
    with references_hidden(suite) as tripped:
        fn = function_from(source, suite.GRADED)
        for case in cases:
            result = results[case["name"]]
            if not fails(result, case, settings):
                continue
            if "error" in result:
                signature[case["name"]] = {"error": result["error"]}
                continue
            tree, fell_back = mistake_tree(suite, fn, case, result["outputs"], tripped)
            if could_be_correct(tree, case["expected"], settings):
                untold[case["name"]] = {"expected": slim(tree)}
                continue
            signature[case["name"]] = {"expected": slim(tree)}
            if fell_back:
                near.append(case["name"])
    returned = [case["name"] for case in cases if "error" not in results[case["name"]]]
    return {"signature": signature, "untold": untold, "returned": returned, "near_tie": near}


def draw_signatures(name: str, suite: ModuleType, cases: list[dict]) -> tuple[dict[str, dict], dict[str, dict]]:
    """({mistake name: its sentence and `signature_of`}, {mistake name: its results}) on
    `cases` (made with their expected trees), for every mistake of suite `name`'s catalogue that
    outputs can recognise (see the module docstring and `autograder.mistakes.Mistake`)."""
    from .mistakes import catalogue

    from .recognition import matching
    from .suite_api import suite_settings

    out, results = {}, {}
    for label, mistake in catalogue(name).items():
        if not mistake.recognisable:
            continue
        results[label] = mistake_results(suite, mistake.source, cases)
        out[label] = {"sentence": mistake.sentence, **signature_of(suite, mistake.source, cases, results[label])}
    error_cases = [c["name"] for c in cases if c.get("error_case")]
    for label in out:
        out[label]["covers"] = [other for other in matching(results[label], out, suite_settings(suite),
                                                            error_cases=error_cases,
                                                            passed=passed_cases(suite, results[label], cases))
                                if other != label]
    return out, results


def passed_cases(suite: ModuleType, results: dict[str, dict], cases: list[dict]) -> list[str]:
    """The names of the cases whose result (`run_as_judged`'s) passes against the truth."""
    from .suite_api import suite_settings

    settings = suite_settings(suite)
    return [case["name"] for case in cases if not fails(results[case["name"]], case, settings)]


def signatures(name: str, suite: ModuleType, cases: list[dict]) -> dict[str, dict]:
    """What a case file holds of the known mistakes (`draw_signatures`, without their results)."""
    return draw_signatures(name, suite, cases)[0]

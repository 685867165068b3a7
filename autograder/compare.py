"""Outputs in one plain shape, the expected value of each output, and the comparison.

**Expected values are the float64 truth.** Each case's expected outputs come from the reference
run on the case's inputs cast up to float64 (`autograder.cases`); a student's output is compared
with that truth, never with the reference's own float32 rounding. Each floating output (a tensor
or a number) carries a tolerance measured on the case itself:

    |got - truth| <= atol + rtol * |truth|,  with
    atol = F * (E + eps * S) + B,  rtol = F * eps,  F = ROUNDING_FACTOR = 16

where E is the largest error, against the truth, of the reference computed in the case's own
precision (and of a suite's other correct implementations, its VARIANTS, where it names some):
the rounding that a correct computation of this very case shows; eps is the machine epsilon of
the dtype a correct output has (float32: 1.2e-7; float64: 2.2e-16; a Python number: that of the
tensors it came from); S is the largest |truth| of that output. B, one per value, is the case's
rounding bound (`autograder.rounding`): how far a correct computation of that value in the
case's precision may land from the truth in any order of its sums (a loop over sequences, a
weighted sum), derived from the magnitudes of the terms each sum adds, so that a value that
cancels to near 0 among terms of size 1 keeps the rounding of size 1, which E (one order) and
eps * S (the output's own size) miss. F covers the rest (the reference's rounding is one draw
of a correct function's, and a correct function may round a little worse than it); measured
over the corpus of independent correct implementations of every graded function (grader.py's CORRECT),
the largest share of the tolerance any of them uses is below 1 (see CONTRIBUTING.md). A case on
which the reference's own rounding is not small (E above 1e-3 * S, or 8 eps * S for a dtype
coarser than that: a near-tie of a comparison, a discontinuity) is redrawn when the cases are
made.

Integers, booleans, strings and None are exact. NaN and infinity must stand where the truth has
them. A tensor must have the reference's shape and dtype.

Verdicts per case: "pass"; "rounding" (every value within ROUNDING_SCALE = 4 times its
tolerance: an error of the size of rounding, which a lower precision or a less stable formula
gives, and so does a tiny wrong term such as a + 1e-8 inside a log); "far" (a value off by more:
a wrong value, whether from a wrong formula or from one that loses precision); "wrong" (a wrong
kind, key, length, shape, dtype, NaN position or exact value): a `masked_whiten` that takes the
masked-out entries into its mean, 52 tolerances off on a case, is far. How the catalogue's
mistakes fall on either side of the scale is measured by `python benchmarks/recognition_rates.py
--verdicts` (README, "Feedback that names the mistake"). Problems are worded without any expected
value; their numbers (error and tolerance) are shown for practice cases only (`autograder.report`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import torch

ROUNDING_FACTOR = 16.0
ROUNDING_SCALE = 4.0  # a failure within this many tolerances is at "rounding scale" (see the module docstring)
NEAR_TIE = 1e-3  # a case whose reference rounding exceeds NEAR_TIE * S (or 8 eps * S) is redrawn


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
    for kind in (int, float):  # numpy scalars and similar: anything that is exactly a number
        try:
            if hasattr(obj, "item") and isinstance(obj.item(), kind):
                return obj.item()
        except Exception:  # noqa: BLE001
            pass
    raise OutputError(f"{where} has type {type(obj).__name__}, which is not a tensor, number, bool, string, list or dict")


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


# ---------------------------------------------------------------- expected values
@dataclass
class Expected:
    """One expected output: the float64 truth, the reference's output in the case's own
    precision (`native`), the dtype a correct tensor has, and the tolerance of a float."""

    truth: object
    native: object
    dtype: torch.dtype | None = None
    atol: float | torch.Tensor = 0.0  # one per value (a tensor of the truth's shape) where the case's rounding bound is in
    rtol: float = 0.0


class NearTie(ValueError):
    """The reference in the case's own precision is not near the float64 truth on this case."""


class TruthMismatch(ValueError):
    """The float64 run of a case gave outputs of another structure: a bug of the suite."""


def tolerance(truth: torch.Tensor, probes: list[torch.Tensor], eps: float) -> tuple[float, float]:
    """(atol, rtol) of one floating output, by the rule in this module's docstring."""
    finite = torch.isfinite(truth)
    scale = float(truth[finite].abs().max()) if bool(finite.any()) else 0.0
    rounding = 0.0
    for probe in probes:
        p = probe.to(torch.float64)
        both = finite & torch.isfinite(p)
        if not torch.equal(torch.isnan(p), torch.isnan(truth)) or not torch.equal(both, finite):
            raise NearTie("NaN or infinity at other positions than in the truth")
        if bool(both.any()):
            rounding = max(rounding, float((p[both] - truth[both]).abs().max()))
    if rounding > max(NEAR_TIE, 8 * eps) * max(scale, 1e-30) and rounding > 0:
        raise NearTie(f"the reference's own rounding {rounding:.3g} is not small against the output's scale {scale:.3g}")
    return ROUNDING_FACTOR * (rounding + eps * scale), ROUNDING_FACTOR * eps


def expected_tree(native, truth, variants: list, scalar_eps: float, where: str = "the output"):
    """The expected outputs of a case: `native` (the reference on the case's inputs) and `truth`
    (on the inputs in float64) walked together; leaves become `Expected`. `variants` are other
    correct implementations' outputs on the case's inputs. Raises NearTie when the two disagree
    beyond rounding (a discrete output, a NaN position, a value), TruthMismatch when their
    structures differ."""
    if _kind(native) != _kind(truth):
        raise TruthMismatch(f"{where}: a {_kind(native)} in the case's precision, a {_kind(truth)} in float64")
    if isinstance(native, dict):
        if set(native) != set(truth):
            raise TruthMismatch(f"{where}: other keys in float64")
        return {k: expected_tree(native[k], truth[k], [v[k] for v in variants], scalar_eps, f"{where}[{k!r}]")
                for k in native}
    if isinstance(native, list):
        if len(native) != len(truth):
            raise TruthMismatch(f"{where}: another length in float64")
        return [expected_tree(n, t, [v[i] for v in variants], scalar_eps, f"{where}[{i}]")
                for i, (n, t) in enumerate(zip(native, truth))]
    if isinstance(native, torch.Tensor):
        if native.shape != truth.shape:
            raise TruthMismatch(f"{where}: another shape in float64")
        if not native.is_floating_point():
            if not torch.equal(native, truth.to(native.dtype)):
                raise NearTie(f"{where}: discrete values differ in float64")
            return Expected(native, native, native.dtype)
        t = truth.to(torch.float64)
        atol, rtol = tolerance(t, [native, *variants], torch.finfo(native.dtype).eps)
        return Expected(t, native, native.dtype, atol, rtol)
    if isinstance(native, float) or (isinstance(native, int) and not isinstance(native, bool) and isinstance(truth, float)):
        t = torch.tensor([float(truth)], dtype=torch.float64)
        probes = [torch.tensor([float(x)], dtype=torch.float64) for x in [native, *variants]]
        atol, rtol = tolerance(t, probes, scalar_eps)
        return Expected(float(truth), native, None, atol, rtol)
    if native != truth:
        raise NearTie(f"{where}: discrete values differ in float64")
    return Expected(native, native)


def widened(expected, bounds):
    """An expected tree with the case's rounding bounds (`autograder.rounding.bound_run`: a tree
    of the same outputs) added to its tolerances: a floating tensor's absolute tolerance becomes
    one per value (kept in float32, rounded up), a number's grows by its bound."""
    if isinstance(expected, dict):
        return {k: widened(e, bounds.get(k) if isinstance(bounds, dict) else None) for k, e in expected.items()}
    if isinstance(expected, list):
        return [widened(e, bounds[i] if isinstance(bounds, list) and i < len(bounds) else None)
                for i, e in enumerate(expected)]
    if isinstance(bounds, torch.Tensor) and isinstance(expected.truth, torch.Tensor) \
            and expected.truth.is_floating_point() and bounds.shape == expected.truth.shape:
        wide = expected.atol + bounds.to(torch.float64).where(torch.isfinite(expected.truth), 0.0)
        atol = wide.to(torch.float32)  # rounded up, so that a tolerance with its bound is never tighter than without
        atol = torch.where(atol.to(torch.float64) < wide, atol.nextafter(torch.tensor(math.inf)), atol)
        return dataclasses.replace(expected, atol=atol)
    if isinstance(bounds, float) and isinstance(expected.truth, float):
        return dataclasses.replace(expected, atol=expected.atol + bounds)
    return expected


# ---------------------------------------------------------------- the comparison
def _problem(where: str, what: str, error: float | None = None, tol: float | None = None) -> dict:
    return {"where": where, "what": what, "error": error, "tolerance": tol}


def atol_at(exp: Expected, where: torch.Tensor):
    """The absolute tolerance of the values at `where` (a mask of the truth): one number, or one per value."""
    if not isinstance(exp.atol, torch.Tensor):
        return exp.atol
    return exp.atol.to(torch.float64).reshape(-1)[where.reshape(-1)] if exp.atol.numel() == where.numel() \
        else exp.atol.to(torch.float64)


def _values(got: torch.Tensor, exp: Expected, where: str) -> list[dict]:
    """Elementwise check of a floating tensor against its truth. In numpy: the same float64
    arithmetic as torch's, at a quarter of the cost on the small tensors of cases."""
    g, t = got.detach().cpu().to(torch.float64).numpy(), exp.truth.detach().cpu().numpy()
    if not (np.array_equal(np.isnan(g), np.isnan(t)) and np.array_equal(np.isposinf(g), np.isposinf(t))
            and np.array_equal(np.isneginf(g), np.isneginf(t))):
        return [_problem(where, "nan")]
    finite = np.isfinite(t)
    if not finite.any():
        return []
    diff = np.abs(g[finite] - t[finite])
    atol = exp.atol
    if isinstance(atol, torch.Tensor):
        atol = atol.detach().cpu().to(torch.float64).numpy()
        atol = atol.reshape(-1)[finite.reshape(-1)] if atol.size == finite.size else atol
    allowed = atol + exp.rtol * np.abs(t[finite])
    bad = diff > allowed
    if not bad.any():
        return []
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(allowed > 0, diff / np.maximum(allowed, 1e-300), math.inf)
    worst = int(ratio.argmax())
    return [_problem(where, "value", float(diff[worst]), float(allowed[worst]))]


def compare(got, expected, settings: dict, where: str = "") -> list[dict]:
    """Problems found comparing `got` with an expected tree (of `Expected` leaves). Each problem
    names where it is (a key or item of the expected outputs) and what is wrong; a "value"
    problem also holds the worst error and its tolerance (shown for practice cases only).
    `settings` are the suite's (`autograder.suite_api.suite_settings`): no setting changes the
    comparison."""
    label = where or "the output"
    if isinstance(expected, dict):
        if not isinstance(got, dict):
            return [_problem(label, "kind")]
        problems = []
        if any(k not in got for k in expected):
            problems.append(_problem(label, "missing keys:" + ",".join(sorted(k for k in expected if k not in got))))
        if any(k not in expected for k in got):
            problems.append(_problem(label, "extra keys"))
        for k in expected:
            if k in got:
                problems += compare(got[k], expected[k], settings, f"{where}[{k!r}]" if where else repr(k))
        return problems
    if isinstance(expected, list):
        if not isinstance(got, list):
            return [_problem(label, "kind")]
        if len(got) != len(expected):
            return [_problem(label, "length")]
        problems = []
        for i, (g, e) in enumerate(zip(got, expected)):
            problems += compare(g, e, settings, f"{where}[{i}]" if where else f"item {i}")
        return problems
    exp: Expected = expected
    if _kind(got) != _kind(exp.native):
        return [_problem(label, "kind")]
    if isinstance(exp.native, torch.Tensor):
        if tuple(got.shape) != tuple(exp.native.shape):
            return [_problem(label, "shape")]
        if got.dtype != exp.dtype:
            return [_problem(label, "dtype")]
        if got.numel() == 0:
            return []
        if exp.native.is_floating_point():
            return _values(got, exp, label) if got.is_floating_point() else [_problem(label, "dtype")]
        return [] if torch.equal(got, exp.native) else [_problem(label, "exact")]
    if isinstance(exp.truth, float):
        value = float(got)
        t = torch.tensor([exp.truth], dtype=torch.float64)
        return _values(torch.tensor([value], dtype=torch.float64), Expected(t, exp.native, None, exp.atol, exp.rtol), label)
    return [] if got == exp.native else [_problem(label, "exact")]


def margin(got, expected) -> float:
    """The largest |got - truth| / tolerance over every floating value of a comparable output
    (0 when all are exact): how much of its tolerance a passing output used. For the tests'
    measurement of the rounding factor; never shown to a student."""
    if isinstance(expected, dict):
        return max([margin(got[k], e) for k, e in expected.items() if isinstance(got, dict) and k in got], default=0.0)
    if isinstance(expected, list):
        return max([margin(g, e) for g, e in zip(got, expected)], default=0.0) if isinstance(got, list) else 0.0
    exp: Expected = expected
    if isinstance(exp.truth, float):
        got, truth = torch.tensor([float(got)], dtype=torch.float64), torch.tensor([exp.truth], dtype=torch.float64)
    elif isinstance(exp.native, torch.Tensor) and exp.native.is_floating_point() and isinstance(got, torch.Tensor) \
            and got.shape == exp.truth.shape:
        got, truth = got.to(torch.float64), exp.truth
    else:
        return 0.0
    finite = torch.isfinite(truth) & torch.isfinite(got)
    if not bool(finite.any()):
        return 0.0
    diff = (got[finite] - truth[finite]).abs()
    allowed = atol_at(exp, finite) + exp.rtol * truth[finite].abs()
    ratio = torch.where(allowed > 0, diff / allowed.clamp(min=1e-300), torch.where(diff > 0, math.inf, 0.0))
    return float(ratio.max())


def verdict(problems: list[dict]) -> str:
    """"pass", "rounding", "far" or "wrong" (see the module docstring)."""
    if not problems:
        return "pass"
    if any(p["what"] != "value" for p in problems):
        return "wrong"
    worst = max(p["error"] / p["tolerance"] if p["tolerance"] else math.inf for p in problems)
    return "rounding" if worst <= ROUNDING_SCALE else "far"

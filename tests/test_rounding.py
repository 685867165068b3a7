"""The rounding bound of a case (`autograder/rounding.py`): what it covers, measured on real float32
computations in other orders, and how it follows values through views, in-place operations,
gradients and Python numbers."""

from __future__ import annotations

import math

import pytest
import torch

from autograder.compare import ROUNDING_FACTOR, compare, expected_tree, widened
from autograder.rounding import LAMBDA, bound_run

EPS32 = torch.finfo(torch.float32).eps


def bound_of(fn, *inputs, precision=torch.float32):
    """The bound of fn's output (a tensor or a float) on float64 copies of `inputs`."""
    out, bounds = bound_run(lambda: {"y": fn(*[x.to(torch.float64) for x in inputs])}, precision)
    return out["y"], bounds["y"]


def in_orders(x: torch.Tensor) -> dict[str, float]:
    """The float32 sum of a float32 vector in orders a correct function may use."""
    def loop(values):
        total = torch.zeros((), dtype=torch.float32)
        for v in values:
            total = total + v
        return float(total)

    def pairwise(v):
        return v[0] if len(v) == 1 else pairwise(v[: len(v) // 2]) + pairwise(v[len(v) // 2:])

    g = torch.Generator().manual_seed(len(x))
    return {"torch.sum": float(x.sum()), "loop": loop(x), "reversed loop": loop(x.flip(0)),
            "cumsum": float(x.cumsum(0)[-1]), "pairwise": float(pairwise(x)),
            "largest first": loop(x[x.abs().argsort(descending=True)]),
            "shuffled loop": loop(x[torch.randperm(len(x), generator=g)])}


def test_every_order_of_a_cancelling_sum_lands_within_its_bound():
    """Sums of 2 to 65 float32 terms of size 1 whose total cancels to near 0: every order errs by
    less than the bound (which the rule before it, 16 eps |sum|, did not hold), and by at most the
    bound's formula for one sum, LAMBDA / 2 sqrt(n) eps sum |x_i|."""
    gen = torch.Generator().manual_seed(0)
    worst, before = 0.0, 0
    for trial in range(300):
        n = 2 + trial % 64
        x = torch.randn(n, generator=gen, dtype=torch.float64)
        x[-1] = -x[:-1].sum() + 1e-6 * torch.randn((), generator=gen, dtype=torch.float64)  # cancels
        x = x.to(torch.float32)
        exact = float(x.to(torch.float64).sum())
        total, bound = bound_of(lambda v: v.sum(), x)
        assert float(total) == exact
        formula = LAMBDA / 2 * math.sqrt(n) * EPS32 * float(x.abs().to(torch.float64).sum())
        assert float(bound) <= formula * (1 + 1e-12)
        for order, value in in_orders(x).items():
            error = abs(value - exact)
            assert error <= float(bound), f"n={n}, {order}: error {error:.3g} > bound {float(bound):.3g}"
            worst = max(worst, error / float(bound)) if bound > 0 else worst  # 0: a sum exact in any order
            before += error > ROUNDING_FACTOR * EPS32 * abs(exact)
    print(f"largest share of the bound any order used: {worst:.3g}; errors beyond 16 eps |sum|: {before}")
    assert before > 0  # the cases are ones the rule without the bound did not cover


def test_sums_of_counts_and_of_small_integers_are_exact():
    mask = torch.rand(8, 64, generator=torch.Generator().manual_seed(1)) < 0.5
    _, count_bound = bound_of(lambda m: m.sum(-1), mask.float())
    assert torch.equal(count_bound, torch.zeros(8, dtype=torch.float64))
    _, integers = bound_of(lambda v: (v * 3).sum(), torch.arange(100, dtype=torch.float32))
    assert integers == 0.0
    _, exact_division = bound_of(lambda v: v.sum() / 4, torch.ones(8))  # 8 / 4 = 2, representable
    assert exact_division == 0.0
    _, inexact = bound_of(lambda v: v.sum() / 3, torch.ones(8))
    assert inexact > 0.0


def test_a_deep_computation_keeps_a_bound_of_its_own_rounding():
    """Eight layers of tanh(W x) (a worst-case bound of the same chain grows by the layers' sums of
    magnitudes and reaches whole units): the bound stays within a small multiple of eps, above the
    error of the float32 computation."""
    gen = torch.Generator().manual_seed(2)
    weights = [torch.randn(32, 32, generator=gen, dtype=torch.float64) / 4 for _ in range(8)]
    x = torch.randn(32, 5, generator=gen, dtype=torch.float64)

    def net(x, *ws):
        for w in ws:
            x = torch.tanh(w @ x)
        return x

    exact, bound = bound_of(net, x, *weights)
    single = net(x.float(), *[w.float() for w in weights]).double()
    assert bool(((single - exact).abs() <= bound).all())
    assert float(bound.max()) < 1e4 * EPS32


def test_views_in_place_operations_and_accumulated_gradients_share_their_bounds():
    x = torch.randn(50, generator=torch.Generator().manual_seed(3))

    def in_place(v):
        out = torch.zeros(3, dtype=v.dtype)
        out[1] += v.sum()  # a view written in place
        return out

    _, written = bound_of(in_place, x)
    _, summed = bound_of(lambda v: v.sum(), x)
    assert written[0] == 0 and written[2] == 0 and float(summed) <= float(written[1]) <= 1.01 * float(summed)

    def two_backwards(v):
        theta = v.clone().requires_grad_()
        (theta * v).sum().backward()
        first = theta.grad.clone()
        (theta.exp() * 3).sum().backward()  # adds into .grad
        return torch.stack([first, theta.grad])

    _, grads = bound_of(two_backwards, x)
    assert bool((grads[1] >= grads[0]).all()) and bool((grads[1] > 0).all())


def test_a_number_read_out_of_a_tensor_keeps_its_bound():
    x = torch.randn(40, generator=torch.Generator().manual_seed(4))
    out, bounds = bound_run(lambda: {"loss": float(x.double().sum()), "computed_in_python": 0.1 + 0.2},
                            torch.float32)
    assert bounds["loss"] > 0.0 and bounds["computed_in_python"] == 0.0


def test_a_float64_case_is_bounded_in_float64_units():
    x = torch.randn(40, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    _, b32 = bound_of(lambda v: v.sum(), x)
    _, b64 = bound_of(lambda v: v.sum(), x, precision=torch.float64)
    assert math.isclose(float(b64) / float(b32), torch.finfo(torch.float64).eps / EPS32, rel_tol=1e-6)


def test_the_bound_widens_a_tolerance_value_by_value():
    truth = torch.tensor([1e-9, 2.0], dtype=torch.float64)  # a value that cancels beside a large one
    native = truth.float()
    expected = expected_tree({"y": native}, {"y": truth}, [], EPS32)
    bounded = widened(expected, {"y": torch.tensor([2e-5, 0.0], dtype=torch.float64)})
    off_by = torch.tensor([1e-5, 0.0], dtype=torch.float64)
    assert compare({"y": (truth + off_by).float()}, expected, {})
    assert not compare({"y": (truth + off_by).float()}, bounded, {})
    assert compare({"y": (truth + off_by.flip(0)).float()}, bounded, {})  # the other value's tolerance is unchanged


def test_an_operation_without_a_rule_is_named():
    with pytest.raises(NotImplementedError, match="linalg_eigh"):
        bound_run(lambda: torch.linalg.eigh(torch.eye(3, dtype=torch.float64) * 2).eigenvalues, torch.float32)

"""kl_k2 (notebook 10): the reference's contract, correct versions that earn full marks through the
real judge, and realistic mistakes that lose them (CONTRIBUTING.md, "Adding a graded function")."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from course_lib import kl_k2
from tests.helpers import PROPERTY_SETTINGS, corpus_tests, edited, many_draws_test, randn, seeds, shapes

SUITE = "kl_k2"


def log_probs_pair(shape, seed, scale=1.0, dtype=torch.float32):
    """(policy, ref) log-probs at or below 0 whose difference ref - policy is a N(0, scale^2) draw."""
    log_r = randn(*shape, seed=seed, dtype=torch.float64, scale=scale)
    policy = -randn(*shape, seed=seed + 1, dtype=torch.float64).abs() - log_r.clamp(min=0)
    return policy.to(dtype), (policy + log_r).to(dtype)


# ---------------------------------------------------------------- the reference
@PROPERTY_SETTINGS
@given(shapes, seeds, st.sampled_from([torch.float32, torch.float64]), st.sampled_from([1e-3, 1.0, 20.0]))
def test_reference_matches_float64(shape, seed, dtype, scale):
    policy, ref = log_probs_pair(shape, seed, scale, dtype)
    got = kl_k2(policy, ref)
    assert got.shape == policy.shape and got.dtype == dtype
    log_r = ref.double() - policy.double()
    torch.testing.assert_close(got.double(), log_r * log_r / 2, atol=0.0, rtol=4 * torch.finfo(dtype).eps)
    assert (got >= 0).all()


@PROPERTY_SETTINGS
@given(seeds, st.integers(2, 12))
def test_reference_matches_the_kl_to_second_order(seed, V):
    """E_{o ~ pi}[k2] = KL(pi || pi_ref) + O(|log r|^3): taken exactly over the vocabulary, for a
    pi_ref close to pi (log-probs moved by at most 1e-2), the two agree to about 1e-2 of the KL."""
    log_pi = torch.log_softmax(randn(V, seed=seed, dtype=torch.float64, scale=2.0), -1)
    log_ref = torch.log_softmax(log_pi + 1e-2 * torch.tanh(randn(V, seed=seed + 1, dtype=torch.float64)), -1)
    expectation = (log_pi.exp() * kl_k2(log_pi, log_ref)).sum()
    kl = (log_pi.exp() * (log_pi - log_ref)).sum()
    assert abs(float(expectation - kl)) <= 0.03 * float(kl)


@PROPERTY_SETTINGS
@given(shapes, seeds)
def test_reference_gradient_is_the_log_ratio(shape, seed):
    policy, ref = log_probs_pair(shape, seed, dtype=torch.float64)
    policy.requires_grad_()
    ref.requires_grad_()
    kl_k2(policy, ref).sum().backward()
    log_r = ref.detach() - policy.detach()
    torch.testing.assert_close(ref.grad, log_r)
    torch.testing.assert_close(policy.grad, -log_r)


def test_reference_rejects_shapes_that_differ():
    with pytest.raises(ValueError, match="ref_log_probs"):
        kl_k2(torch.zeros(4), torch.zeros(4, 1))


# ---------------------------------------------------------------- correct versions and mistakes
CORRECT = {
    "half_the_squared_log_ratio": """
        import torch
        def kl_k2(policy_log_probs, ref_log_probs):
            log_ratio = ref_log_probs - policy_log_probs
            return 0.5 * log_ratio**2
    """,
    # the other order of the difference: squared, the sign does not matter
    "pow_over_two": """
        import torch
        def kl_k2(policy_log_probs, ref_log_probs):
            return (policy_log_probs - ref_log_probs).pow(2) / 2
    """,
    "float64_inside": """
        import torch
        def kl_k2(policy_log_probs, ref_log_probs):
            d = policy_log_probs.double() - ref_log_probs.double()
            return (d * d * 0.5).to(policy_log_probs.dtype)
    """,
    "square_mul_half": """
        import torch
        def kl_k2(policy_log_probs, ref_log_probs):
            return torch.square(ref_log_probs - policy_log_probs).mul(0.5)
    """,
}

HALF = CORRECT["half_the_squared_log_ratio"]
RETURN = "return 0.5 * log_ratio**2"
MISTAKES = {
    # (log r)^2: twice k2
    "half_dropped": (edited(HALF, (RETURN, "return log_ratio**2")),
                     ["mixed_signs_float32_B4_T9", "positive_log_ratio_float32_3x7", "negative_log_ratio_float32_3x7"]),
    # the square of the ratio's distance from 1: equal to first order only (e^40 / 2 at log r = 20)
    "ratio_minus_one_squared": (edited(HALF, (RETURN, "return 0.5 * (torch.exp(log_ratio) - 1) ** 2")),
                                ["near_r_equal_1_float32_4x16", "log_ratio_pm20_float32_4x10",
                                 "positive_log_ratio_float32_3x7"]),
    # the square forgotten: log r / 2, negative wherever pi_ref < pi
    "square_forgotten": (edited(HALF, (RETURN, "return 0.5 * log_ratio")),
                         ["negative_log_ratio_float32_3x7", "mixed_signs_float32_B4_T9"]),
    # through the probabilities: exp underflows below -104 in float32, log(0 / 0) = NaN
    "log_of_ratio_of_exps": (edited(HALF, ("log_ratio = ref_log_probs - policy_log_probs",
                                           "log_ratio = torch.log(torch.exp(ref_log_probs) / torch.exp(policy_log_probs))")),
                             ["log_probs_near_minus_110_float32_3x6"]),
    # float64 log-probs must give a float64 k2
    "always_float32": (edited(HALF, ("log_ratio = ref_log_probs - policy_log_probs",
                                     "log_ratio = (ref_log_probs - policy_log_probs).float()")),
                       ["float64_4x6"]),
    # the reference log-probs detached "because the reference model is frozen": the contract is
    # differentiable with respect to both inputs
    "ref_detached": (edited(HALF, ("log_ratio = ref_log_probs - policy_log_probs",
                                   "log_ratio = ref_log_probs.detach() - policy_log_probs")),
                     ["mixed_signs_float32_B4_T9"]),
}

test_correct_version_earns_full_marks, test_mistake_loses_its_points = corpus_tests(SUITE, CORRECT, MISTAKES)
test_each_version_holds_on_many_draws = many_draws_test(SUITE, CORRECT, MISTAKES)

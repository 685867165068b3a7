"""Hidden cases of `exact_kl(policy_logits, ref_logits) -> (...)`: KL(pi || pi_ref) over the last
(vocabulary) dim, pi = softmax(policy_logits), pi_ref = softmax(ref_logits), for vocabularies of 2
to 200 tokens, 1-d to 4-d logits, float32 and float64, logits of magnitude 1e3 whose gaps exceed
100 (and 745), positions where the two logits are identical (KL 0), and a peaked pi against a
flat pi_ref.

Outputs: the KL per position, the gradients of a weighted sum of it (fixed random weights) with
respect to both logits (pi * (log pi - log pi_ref - KL) for the policy's, pi_ref - pi for the
reference's), and whether the logits were left unchanged.

The far-apart cases keep two policy logits within 1 of each other in each row, the rest of
both logits spread over +-3e3: with a single likely token, pi would be one-hot and the float64
truth of the policy's gradient would be rounding noise (its exact value about e^-100), a scale
that leaves no tolerance. For the same reason the identical positions share their case with
positions that differ.

The truth is a closed form (`truth`), not the reference's autograd in float64: the gradient with
respect to the policy's logits is what is left of terms of size |log pi - log pi_ref| (up to
some 1e3 where the logits are far apart) once log_softmax's backward subtracts them, and every
float64 computation of it rounds at tens of eps times its scale (the reference up to some 50,
measured against an 80-bit one) - more than the 16 eps times the scale a float64 case allows
when it is its own truth, so that a correct formula of another order (cross-entropy minus
entropy, a logsumexp by hand) failed some draws. With the closed form as the truth, the
reference's own float64 rounding is measured on each case and counted in its tolerance.

What the cases are built to catch:

- `far_apart_logits_1e3_*`: log(softmax(...)), whose softmax underflows to 0 where a logit is
  more than about 104 (float32) or 745 (float64) below the row's largest, so that
  0 * log 0 = NaN; log(softmax + eps), which puts log(eps) in the place of a log-prob of -2000;
  a softmax without the max shift (exp(1e3) = inf); log_softmax as logits - logsumexp(logits),
  whose rounding at magnitude 1e3 (a unit of 6e-5 in log pi) moves pi by a relative 6e-5, far
  beyond float32's rounding of the KL;
- `very_different_peaked_vs_flat_*` (and every other case): the direction reversed,
  KL(pi_ref || pi), which is far from KL(pi || pi_ref) when a peaked pi meets a flat pi_ref;
- `identical_positions_give_0_*`: the cross-entropy alone, -sum pi log pi_ref, without the
  entropy term (not 0 where the two distributions are equal);
- the gradients: the KL computed under no_grad or from detached logits, pi's weights in the
  expectation detached (the right value, the wrong policy gradient);
- `float32_4x7x11`, `leading_dims_*`, `vector_V29`, `T1_*`: the sum over another dim (dim 0),
  a mean over the vocabulary instead of the sum;
- `vocab_2_*`, `vocab_200_*`: the vocabulary's size;
- `float64_*`: float64 computed in float32 (or returned as float32);
- `no_grad_inputs_*` (`inputs_unchanged`): an in-place max shift of the caller's logits.
"""

from __future__ import annotations

import torch

GRADED = "exact_kl"


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    def randn(*shape, scale=1.0):
        return torch.randn(shape, generator=gen, dtype=torch.float64) * scale

    def case(policy, ref, dtype=torch.float32, grad=True):
        return {"policy_logits": policy.to(dtype), "ref_logits": ref.to(dtype),
                "weights": randn(*policy.shape[:-1]).to(dtype), "grad": grad}

    def far_apart(B, V, dtype):
        """Logits of magnitude 1e3: most gaps far above 100; two policy tokens within 1 per row."""
        policy, ref = randn(B, V, scale=1e3), randn(B, V, scale=1e3)
        rows = torch.arange(B)
        top = policy.argmax(-1)
        second = (top + 1 + torch.randint(0, V - 1, (B,), generator=gen)) % V
        policy[rows, second] = policy[rows, top] - torch.rand(B, generator=gen, dtype=torch.float64)
        return case(policy, ref, dtype)

    same_policy = randn(4, 3, 9, scale=2.0)
    same_ref = randn(4, 3, 9, scale=2.0)
    same_ref[0] = same_policy[0]  # a whole row of positions, and two single ones
    same_ref[2, 1] = same_policy[2, 1]
    same_ref[3, 2] = same_policy[3, 2]
    return [
        ("float32_4x7x11", case(randn(4, 7, 11, scale=2.0), randn(4, 7, 11, scale=2.0))),
        ("vocab_2_3x5x2", case(randn(3, 5, 2, scale=2.0), randn(3, 5, 2, scale=2.0))),
        ("vocab_200_2x3x200", case(randn(2, 3, 200, scale=3.0), randn(2, 3, 200, scale=3.0))),
        ("vector_V29", case(randn(29, scale=2.0), randn(29, scale=2.0))),
        ("leading_dims_2x2x3x6", case(randn(2, 2, 3, 6, scale=2.0), randn(2, 2, 3, 6, scale=2.0))),
        ("T1_3x1x50", case(randn(3, 1, 50, scale=2.0), randn(3, 1, 50, scale=2.0))),
        ("float64_3x4x13", case(randn(3, 4, 13, scale=3.0), randn(3, 4, 13, scale=3.0), dtype=torch.float64)),
        ("far_apart_logits_1e3_float32_4x50", far_apart(4, 50, torch.float32)),
        ("far_apart_logits_1e3_float64_3x40", far_apart(3, 40, torch.float64)),
        ("identical_positions_give_0_4x3x9", case(same_policy, same_ref)),
        ("very_different_peaked_vs_flat_4x20", case(randn(4, 20, scale=6.0), randn(4, 20, scale=0.3))),
        ("no_grad_inputs_3x8", case(randn(3, 8, scale=2.0), randn(3, 8, scale=2.0), grad=False)),
        ("empty_0x10", case(randn(0, 10), randn(0, 10), grad=False)),
        ("B8_T64_V100", case(randn(8, 64, 100, scale=2.0), randn(8, 64, 100, scale=2.0))),
    ]


def call(fn, inputs: dict) -> dict:
    policy = inputs["policy_logits"].clone().requires_grad_(inputs["grad"])
    ref = inputs["ref_logits"].clone().requires_grad_(inputs["grad"])
    before = (policy.detach().clone(), ref.detach().clone())
    kl = fn(policy, ref)
    result = {"kl": kl, "inputs_unchanged": bool(torch.equal(policy.detach(), before[0])
                                                 and torch.equal(ref.detach(), before[1]))}
    if inputs["grad"]:
        (kl * inputs["weights"].to(kl.dtype)).sum().backward()
        result["grad_policy_logits"] = policy.grad
        result["grad_ref_logits"] = ref.grad
    return result


def truth(inputs: dict) -> dict:
    """The float64 truth in closed form (see the module's docstring): the KL from log_softmax,
    its gradients pi * (log pi - log pi_ref - KL) and pi_ref - pi, times the weights."""
    lp = torch.log_softmax(inputs["policy_logits"].double(), dim=-1)
    lq = torch.log_softmax(inputs["ref_logits"].double(), dim=-1)
    p = lp.exp()
    kl = (p * (lp - lq)).sum(dim=-1)
    out = {"kl": kl, "inputs_unchanged": True}
    if inputs["grad"]:
        w = inputs["weights"].double().unsqueeze(-1)
        out["grad_policy_logits"] = w * p * (lp - lq - kl.unsqueeze(-1))
        out["grad_ref_logits"] = w * (lq.exp() - p)
    return out

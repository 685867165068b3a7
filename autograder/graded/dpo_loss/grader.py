"""The grader's side of `dpo_loss` (notebook 12): how its hidden cases are drawn, the correct versions
that must earn full marks and the known mistakes that must lose them, each with the sentence a
student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox, which hold the
folder's __init__.py only.

Hidden cases of `dpo_loss(policy_chosen_log_probs, policy_rejected_log_probs, ref_chosen_log_probs,
ref_rejected_log_probs, beta) -> (loss, metadata)` (notebook 12):

    chosen_rewards = beta * (pi_c - ref_c),   rejected_rewards = beta * (pi_r - ref_r)
    loss = mean_b -logsigmoid(chosen_rewards - rejected_rewards)

The four (B,) inputs are sequence log-probs (all negative), built from a chosen beta * margin per
pair. Outputs: the loss, its gradients with respect to the two policy inputs, whether a gradient
reached a reference input, the metadata "chosen_rewards" and "rejected_rewards" ((B,) tensors),
"reward_margin" (a Python number: a 0-dim tensor or a float both do), "reward_accuracy" as the
number of wins it stands for (round(accuracy * B): exact, whatever precision the fraction is
computed in) and whether the two reward tensors are detached. Error cases must raise ValueError
(or a subclass); their output is {"raises": "ValueError"}, {"raises": "other"} (another exception)
or {"raises": None}.

What the cases are built to catch:

- `random_beta_*` (beta 0.01, 0.1, 0.5, 2; margins of both signs, rewards of both signs): the
  margin's sign flipped (chosen and rejected swapped), the reference term dropped (beta * pi), beta
  outside the logsigmoid, a sum over the batch instead of the mean, rewards without beta, a
  detached policy (no gradient), rewards returned with their graph;
- `large_negative_margin_*` (beta * margin of -200 and -1000, in float32 and float64):
  log(sigmoid(x)) (sigmoid underflows to 0, its log to -inf: an infinite loss, NaN gradients) and
  log(1 + exp(-x)) (exp overflows), torch.where of the two stable branches (the branch not taken
  overflows, and its NaN gradient leaks through); `large_positive_margin_*`: the same formulas on
  the other side;
- `policy_equals_reference_*` (the first step: margins exactly 0, loss log 2) and
  `ties_and_wins_*`: `>=` in the reward accuracy (a tie is no win), softplus written by hand as
  max(-x, 0) + log1p(exp(-|x|)) (right values, but at x = 0 a gradient twice too large);
- `ref_requires_grad_*`: reference inputs that require gradients (a reference scored with
  gradients by mistake): a gradient must not reach them (not detached: it would train the frozen
  copy's log-probs);
- `float64_*`: float64 computed or returned in float32; gradients of every case: a detached policy;
- errors: (B, 1) inputs, a reference of another length (and one of length 1, which torch would
  broadcast silently), beta 0 and beta < 0.

The tolerance is measured from the reference and one grader-only variant that subtracts the
policies first (another correct order of subtraction, with another float32 rounding of the margin).
"""

from __future__ import annotations

import torch

from autograder.mistakes import edited, Mistake


# ---------------------------------------------------------------- the hidden cases
# each error case and the phrase of the reference's `Raises:` section that states it (tests/test_contracts.py)
RAISES = {
    "error_inputs_B_by_1": "a (B, 1) input",
    "error_ref_of_another_length": "a reference of another length",
    "error_ref_of_length_1_broadcasts": "even one of length 1 that torch would broadcast",
    "error_beta_0": "beta <= 0",
    "error_beta_negative": "beta <= 0",
}
# grader-only: the margin with the policies subtracted first, a rounding of its own in float32
VARIANTS = ["autograder.graded.dpo_loss.grader:variant_policies_subtracted_first"]


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    def uniform(n, lo, hi):
        return lo + (hi - lo) * torch.rand(n, generator=gen, dtype=torch.float64)

    def pairs(x, beta, dtype=torch.float32, ref_requires_grad=False, expect_error=False):
        """Four (B,) log-prob tensors with beta * ((pi_c - ref_c) - (pi_r - ref_r)) = x, all negative."""
        d = x / beta
        share = uniform(len(x), 0.3, 0.7)
        chosen_ratio = d * share + torch.randn(len(x), generator=gen, dtype=torch.float64)  # pi_c - ref_c
        rejected_ratio = chosen_ratio - d  # pi_r - ref_r
        top_c, top_r = -uniform(len(x), 5.0, 60.0), -uniform(len(x), 5.0, 60.0)
        pc = top_c + chosen_ratio.clamp(max=0)
        rc = pc - chosen_ratio
        pr = top_r + rejected_ratio.clamp(max=0)
        rr = pr - rejected_ratio
        return {"policy_chosen_log_probs": pc.to(dtype), "policy_rejected_log_probs": pr.to(dtype),
                "ref_chosen_log_probs": rc.to(dtype), "ref_rejected_log_probs": rr.to(dtype), "beta": beta,
                "ref_requires_grad": ref_requires_grad, "expect_error": expect_error}

    def random_margins(B, beta, scale=6.0):
        """beta * margin for log-ratio margins of a few nats, both signs, never within 0.05 of a tie."""
        m = torch.randn(B, generator=gen, dtype=torch.float64) * scale
        m = torch.where(m.abs() < 0.05, m.sign() * 0.05 + m, m)
        m[-1], m[0] = -m[-1].abs() - 0.05, m[0].abs() + 0.05  # a win and a loss in every batch (B = 1: a win)
        return beta * m

    def fixed(values, beta, **kw):
        x = torch.tensor(values, dtype=torch.float64) + uniform(len(values), -0.5, 0.5)
        return pairs(x, beta, **kw)

    same = pairs(random_margins(6, 0.1), 0.1)
    same["ref_chosen_log_probs"] = same["policy_chosen_log_probs"].clone()
    same["ref_rejected_log_probs"] = same["policy_rejected_log_probs"].clone()
    ties = pairs(random_margins(6, 0.1), 0.1)
    for i in (1, 3, 4):
        ties["ref_chosen_log_probs"][i] = ties["policy_chosen_log_probs"][i]
        ties["ref_rejected_log_probs"][i] = ties["policy_rejected_log_probs"][i]

    def bad(change, beta=0.1):
        c = pairs(random_margins(4, 0.1), beta, expect_error=True)
        return change(c) or c

    return [
        ("random_beta_0.01_B8", pairs(random_margins(8, 0.01, scale=20.0), 0.01)),
        ("random_beta_0.1_B8", pairs(random_margins(8, 0.1), 0.1)),
        ("random_beta_0.5_B6", pairs(random_margins(6, 0.5), 0.5)),
        ("random_beta_2_B5", pairs(random_margins(5, 2.0, scale=2.0), 2.0)),
        ("large_negative_margin_minus_200_mixed_float32_B4", fixed([-200.0, 1.5, -200.0, -0.7], 0.1)),
        ("large_negative_margin_minus_1000_float32_B3", fixed([-1000.0, -1000.0, -1000.0], 0.5)),
        ("large_negative_margin_minus_1000_float64_B3", fixed([-1000.0, 2.0, -1000.0], 0.5, dtype=torch.float64)),
        ("large_positive_margin_plus_200_float32_B4", fixed([200.0, 200.0, -1.2, 200.0], 0.1)),
        ("large_positive_margin_plus_1000_float64_B3", fixed([1000.0, 1000.0, 0.8], 0.5, dtype=torch.float64)),
        ("policy_equals_reference_B6", same),
        ("ties_and_wins_B6", ties),
        ("float64_random_beta_0.1_B7", pairs(random_margins(7, 0.1), 0.1, dtype=torch.float64)),
        ("ref_requires_grad_beta_0.1_B6", pairs(random_margins(6, 0.1), 0.1, ref_requires_grad=True)),
        ("ref_requires_grad_float64_beta_0.5_B4", pairs(random_margins(4, 0.5), 0.5, dtype=torch.float64,
                                                        ref_requires_grad=True)),
        ("B1_beta_0.1", pairs(random_margins(1, 0.1), 0.1)),
        ("B32_beta_0.1", pairs(random_margins(32, 0.1), 0.1)),
        ("error_inputs_B_by_1", bad(lambda c: c.update({k: v[:, None] for k, v in c.items()
                                                         if isinstance(v, torch.Tensor)}))),
        ("error_ref_of_another_length", bad(lambda c: c.update(ref_rejected_log_probs=c["ref_rejected_log_probs"][:3]))),
        ("error_ref_of_length_1_broadcasts", bad(lambda c: c.update(ref_chosen_log_probs=c["ref_chosen_log_probs"][:1]))),
        ("error_beta_0", bad(lambda c: None, beta=0.0)),
        ("error_beta_negative", bad(lambda c: None, beta=-0.1)),
    ]


def variant_policies_subtracted_first(policy_chosen_log_probs, policy_rejected_log_probs, ref_chosen_log_probs,
                                      ref_rejected_log_probs, beta):
    """Grader-only: beta * ((pi_c - pi_r) - (ref_c - ref_r)), a correct order of subtraction whose float32
    rounding differs from the reference's (each reward first)."""
    import torch.nn.functional as F

    from course_lib import dpo_loss

    dpo_loss(policy_chosen_log_probs, policy_rejected_log_probs, ref_chosen_log_probs, ref_rejected_log_probs,
             beta)  # the reference's ValueErrors on the error cases
    ref_c, ref_r = ref_chosen_log_probs.detach(), ref_rejected_log_probs.detach()
    margins = beta * ((policy_chosen_log_probs - policy_rejected_log_probs) - (ref_c - ref_r))
    chosen, rejected = beta * (policy_chosen_log_probs - ref_c), beta * (policy_rejected_log_probs - ref_r)
    metadata = {"chosen_rewards": chosen.detach(), "rejected_rewards": rejected.detach(),
                "reward_margin": margins.detach().mean(), "reward_accuracy": (margins.detach() > 0).float().mean()}
    return -F.logsigmoid(margins).mean(), metadata


# ---------------------------------------------------------------- the correct versions
BASE = """
    import torch
    import torch.nn.functional as F
    def dpo_loss(policy_chosen_log_probs, policy_rejected_log_probs, ref_chosen_log_probs, ref_rejected_log_probs, beta):
        tensors = [policy_chosen_log_probs, policy_rejected_log_probs, ref_chosen_log_probs, ref_rejected_log_probs]
        if any(t.dim() != 1 or t.shape != policy_chosen_log_probs.shape for t in tensors):
            raise ValueError("the four log-prob tensors must all be (B,)")
        if beta <= 0:
            raise ValueError("beta must be positive")
        ref_c, ref_r = ref_chosen_log_probs.detach(), ref_rejected_log_probs.detach()
        chosen = beta * (policy_chosen_log_probs - ref_c)
        rejected = beta * (policy_rejected_log_probs - ref_r)
        margins = chosen - rejected
        loss = -F.logsigmoid(margins).mean()
        metadata = {"chosen_rewards": chosen.detach(), "rejected_rewards": rejected.detach(),
                    "reward_margin": margins.detach().mean(), "reward_accuracy": (margins > 0).float().mean()}
        return loss, metadata
"""

LOSS = "loss = -F.logsigmoid(margins).mean()"

CHOSEN = "chosen = beta * (policy_chosen_log_probs - ref_c)"

REJECTED = "rejected = beta * (policy_rejected_log_probs - ref_r)"

RANDOM = ["random_beta_0.1_B8", "random_beta_0.5_B6", "random_beta_2_B5"]


CORRECT = {
    "logsigmoid_detach": BASE,
    # softplus(-x) = -logsigmoid(x); the policies subtracted first; the reference read under no_grad
    "softplus_policies_first": """
        import torch
        import torch.nn.functional as F
        def dpo_loss(policy_chosen_log_probs, policy_rejected_log_probs, ref_chosen_log_probs, ref_rejected_log_probs, beta):
            B = policy_chosen_log_probs.shape
            for name, t in [("policy_rejected", policy_rejected_log_probs), ("ref_chosen", ref_chosen_log_probs),
                            ("ref_rejected", ref_rejected_log_probs), ("policy_chosen", policy_chosen_log_probs)]:
                if t.ndim != 1 or t.shape != B:
                    raise ValueError(f"{name} has shape {tuple(t.shape)}")
            if not beta > 0:
                raise ValueError("beta")
            with torch.no_grad():
                ref_diff = ref_chosen_log_probs - ref_rejected_log_probs
                chosen_rewards = beta * (policy_chosen_log_probs - ref_chosen_log_probs)
                rejected_rewards = beta * (policy_rejected_log_probs - ref_rejected_log_probs)
            logits = beta * ((policy_chosen_log_probs - policy_rejected_log_probs) - ref_diff)
            loss = F.softplus(-logits).mean()
            wins = (chosen_rewards > rejected_rewards).sum().item()
            return loss, {"chosen_rewards": chosen_rewards, "rejected_rewards": rejected_rewards,
                          "reward_margin": (chosen_rewards - rejected_rewards).mean().item(),
                          "reward_accuracy": wins / len(chosen_rewards)}
    """,
    # float64 inside, cast back; a Python-float accuracy from the float64 margins
    "float64_inside": """
        import torch
        import torch.nn.functional as F
        def dpo_loss(policy_chosen_log_probs, policy_rejected_log_probs, ref_chosen_log_probs, ref_rejected_log_probs, beta):
            shapes = {tuple(t.shape) for t in (policy_chosen_log_probs, policy_rejected_log_probs,
                                               ref_chosen_log_probs, ref_rejected_log_probs)}
            if len(shapes) != 1 or len(next(iter(shapes))) != 1:
                raise ValueError(f"shapes {shapes}: four (B,) tensors expected")
            if beta <= 0:
                raise ValueError("beta <= 0")
            dtype = policy_chosen_log_probs.dtype
            pc, pr = policy_chosen_log_probs.double(), policy_rejected_log_probs.double()
            rc, rr = ref_chosen_log_probs.detach().double(), ref_rejected_log_probs.detach().double()
            chosen, rejected = beta * (pc - rc), beta * (pr - rr)
            margins = chosen - rejected
            loss = (-F.logsigmoid(margins)).mean().to(dtype)
            return loss, {"chosen_rewards": chosen.detach().to(dtype), "rejected_rewards": rejected.detach().to(dtype),
                          "reward_margin": margins.detach().mean().to(dtype),
                          "reward_accuracy": float((margins > 0).double().mean())}
    """,
    # one pair at a time, softplus on each margin
    "loop_over_pairs_softplus": """
        import torch
        import torch.nn.functional as F
        def dpo_loss(policy_chosen_log_probs, policy_rejected_log_probs, ref_chosen_log_probs, ref_rejected_log_probs, beta):
            n = policy_chosen_log_probs.shape
            if len(n) != 1:
                raise ValueError("policy_chosen_log_probs must be (B,)")
            for t in (policy_rejected_log_probs, ref_chosen_log_probs, ref_rejected_log_probs):
                if t.shape != n:
                    raise ValueError("all four log-prob tensors must be (B,) alike")
            if beta <= 0:
                raise ValueError("beta must be > 0")
            losses, chosen, rejected = [], [], []
            for pc, pr, rc, rr in zip(policy_chosen_log_probs, policy_rejected_log_probs,
                                      ref_chosen_log_probs.detach(), ref_rejected_log_probs.detach()):
                c, r = beta * (pc - rc), beta * (pr - rr)
                x = c - r
                losses.append(F.softplus(-x))
                chosen.append(c.detach())
                rejected.append(r.detach())
            chosen, rejected = torch.stack(chosen), torch.stack(rejected)
            margin = chosen - rejected
            return torch.stack(losses).mean(), {"chosen_rewards": chosen, "rejected_rewards": rejected,
                                                "reward_margin": margin.mean(),
                                                "reward_accuracy": (margin > 0).to(margin.dtype).mean()}
    """,
}


# ---------------------------------------------------------------- the known mistakes
MISTAKES = {
    # chosen and rejected swapped: the loss pushes the rejected response up
    "margin_sign_flipped": Mistake(
        "takes the margin as rejected - chosen, so the loss pushes the rejected response up",
        edited(BASE, ("margins = chosen - rejected", "margins = rejected - chosen")),
        RANDOM),
    "reference_term_dropped": Mistake(
        "leaves the reference log-probs out of the implicit rewards: beta * pi instead of beta * (pi - pi_ref)",
        edited(BASE, (CHOSEN, "chosen = beta * policy_chosen_log_probs"),
                                          (REJECTED, "rejected = beta * policy_rejected_log_probs")),
        RANDOM),
    # sigmoid(-200) is 0 in float32 (sigmoid(-1000) in float64): log 0 = -inf, an infinite loss
    "log_of_sigmoid": Mistake(
        "takes log(sigmoid(x)) instead of logsigmoid(x): sigmoid underflows to 0 for a large negative margin, an infinite loss",
        edited(BASE, (LOSS, "loss = -torch.log(torch.sigmoid(margins)).mean()")),
        ["large_negative_margin_minus_200_mixed_float32_B4", "large_negative_margin_minus_1000_float32_B3",
         "large_negative_margin_minus_1000_float64_B3"]),
    # exp(200) overflows in float32, exp(1000) in float64
    "log1p_of_exp": Mistake(
        "computes log1p(exp(-x)), which overflows for a large negative margin",
        edited(BASE, (LOSS, "loss = torch.log1p(torch.exp(-margins)).mean()")),
        ["large_negative_margin_minus_200_mixed_float32_B4", "large_negative_margin_minus_1000_float64_B3"]),
    # the two stable branches picked by torch.where: right values, but the branch not taken overflows and its
    # NaN gradient leaks through where's backward
    "where_of_two_branches_nan_gradient": Mistake(
        "picks between two stable branches with torch.where: the branch not taken overflows and its NaN gradient leaks through",
        edited(BASE, (LOSS, "loss = torch.where(margins > 0, torch.log1p(torch.exp(-margins)), "
                                                                   "-margins + torch.log1p(torch.exp(margins))).mean()")),
        ["large_negative_margin_minus_1000_float32_B3",
         "large_positive_margin_plus_1000_float64_B3"]),
    # softplus by hand, max(-x, 0) + log1p(exp(-|x|)): right values, but at a tie (x = 0, the first step)
    # clamp passes the gradient of -x while abs' is 0 there: -1 instead of -1/2, the step twice too long
    "softplus_by_hand_gradient_wrong_at_a_tie": Mistake(
        "writes softplus as max(-x, 0) + log1p(exp(-|x|)), whose gradient at a margin of exactly 0 is -1 instead of -1/2",
        edited(BASE, (LOSS, "loss = (torch.clamp(-margins, min=0) + "
                                                                         "torch.log1p(torch.exp(-margins.abs()))).mean()")),
        ["policy_equals_reference_B6", "ties_and_wins_B6"]),
    # a reference scored with gradients sends them into the frozen model's log-probs
    "reference_not_detached": Mistake(
        "leaves the reference log-probs attached, so gradients flow into the frozen model's log-probs",
        edited(BASE, ("ref_c, ref_r = ref_chosen_log_probs.detach(), ref_rejected_log_probs.detach()",
                                                 "ref_c, ref_r = ref_chosen_log_probs, ref_rejected_log_probs")),
        ["ref_requires_grad_beta_0.1_B6", "ref_requires_grad_float64_beta_0.5_B4"]),
    "accuracy_counts_ties": Mistake(
        "counts a margin of 0 as a win in reward_accuracy (>= instead of >)",
        edited(BASE, ("(margins > 0)", "(margins >= 0)")),
        ["policy_equals_reference_B6", "ties_and_wins_B6"]),
    "sum_over_the_batch": Mistake(
        "sums the loss over the batch instead of averaging it",
        edited(BASE, (LOSS, "loss = -F.logsigmoid(margins).sum()")),
        RANDOM),
    "beta_outside_the_logsigmoid": Mistake(
        "puts beta outside the logsigmoid (-beta * logsigmoid(margin / beta)) instead of inside it",
        edited(BASE, (LOSS, "loss = -beta * F.logsigmoid(margins / beta).mean()")),
        RANDOM),
    "rewards_without_beta": Mistake(
        "returns the implicit rewards without the factor beta",
        edited(BASE, ('"chosen_rewards": chosen.detach(), "rejected_rewards": rejected.detach()',
                                               '"chosen_rewards": chosen.detach() / beta, "rejected_rewards": rejected.detach() / beta')),
        RANDOM),
    "rewards_not_detached": Mistake(
        "returns the implicit rewards in metadata still attached to the graph",
        edited(BASE, ('"chosen_rewards": chosen.detach(), "rejected_rewards": rejected.detach()',
                                               '"chosen_rewards": chosen, "rejected_rewards": rejected')),
        RANDOM),
    # the policy detached as well: no gradient reaches the model
    "policy_detached": Mistake(
        "detaches the policy's log-probs too, so no gradient reaches the model",
        edited(BASE, ("margins = chosen - rejected", "margins = (chosen - rejected).detach()")),
        RANDOM,
        # it raises on every case that asks for no error (RuntimeError in backward: no graph):
        # an exception's class alone is no evidence of this mistake, so recognition cannot name it
        recognisable=False),
    "always_float32": Mistake(
        "computes the loss in float32 always: float64 log-probs must give float64",
        edited(BASE, ("margins = chosen - rejected", "margins = (chosen - rejected).float()")),
        ["float64_random_beta_0.1_B7", "ref_requires_grad_float64_beta_0.5_B4"]),
    "shapes_not_checked": Mistake(
        "accepts inputs that are not all (B,) of one length instead of raising ValueError",
        edited(BASE, ("""        if any(t.dim() != 1 or t.shape != policy_chosen_log_probs.shape for t in tensors):
            raise ValueError("the four log-prob tensors must all be (B,)")
""", "")),
        ["error_inputs_B_by_1", "error_ref_of_another_length", "error_ref_of_length_1_broadcasts"]),
    "beta_not_checked": Mistake(
        "accepts beta <= 0 instead of raising ValueError",
        edited(BASE, ("""        if beta <= 0:
            raise ValueError("beta must be positive")
""", "")),
        ["error_beta_0", "error_beta_negative"]),
}

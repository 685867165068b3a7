"""Realistic wrong versions of the graded functions of notebooks 06 and 07 each lose points.

Every wrong version is the course_lib reference with one realistic edit (a biased std, the
groups cut the wrong way, max instead of min, ...), defined as a student's notebook would define
it (module `__main__`, so it is sent to the judge by value) and graded by the real judge:
`autograder.checker.check_hidden`, which runs it in a fresh process on the hidden cases. Each
test asserts that the check fails and names the case built to catch that mistake. A last test
checks that the unedited copies of the references pass every suite, so the failures come from
the edits and not from the copying.
"""

from __future__ import annotations

import inspect

import pytest

import course_lib.grpo as grpo
import course_lib.masking as masking

HEADER = "from typing import Callable\nimport torch\n\n"


def source_of(*objects) -> str:
    return HEADER + "\n\n".join(inspect.getsource(o) for o in objects)


# what a student's notebook defines: notebook 06, and notebook 07 (whose step uses its own
# loss and masked_mean)
NB06 = source_of(grpo.compute_group_normalized_rewards)
NB07 = (HEADER + f"LOSS_TYPES = {grpo.LOSS_TYPES!r}\n\n"
        + source_of(grpo._as_column, grpo.compute_naive_policy_gradient_loss, grpo.compute_grpo_clip_loss,
                    grpo.compute_policy_gradient_loss, masking.masked_mean,
                    grpo.grpo_microbatch_train_step)[len(HEADER):])
SUITE_SOURCE = {
    "compute_group_normalized_rewards": NB06,
    "compute_naive_policy_gradient_loss": NB07,
    "compute_grpo_clip_loss": NB07,
    "compute_policy_gradient_loss": NB07,
    "masked_mean": NB07,
    "grpo_microbatch_train_step": NB07,
}


def student_function(source: str, name: str):
    """`name` from `source` run as a notebook runs it (module __main__: cloudpickle sends it by value)."""
    namespace = {"__name__": "__main__"}
    exec(compile(source, "<notebook>", "exec"), namespace)
    return namespace[name]


def edited(source: str, old: str, new: str) -> str:
    """`source` with the one occurrence of `old` replaced (the test breaks loudly if the reference changed)."""
    assert source.count(old) == 1, f"expected exactly one {old!r} in the reference source"
    return source.replace(old, new)


# (test id, graded function, [(old, new), ...] edits of the reference, the case that must fail)
MISTAKES = [
    # ---------------------------------------------------------------- 06
    ("biased_std", "compute_group_normalized_rewards",
     [("grouped.std(dim=1, keepdim=True)", "grouped.std(dim=1, keepdim=True, unbiased=False)")],
     "G2_6groups_std"),
    ("groups_transposed", "compute_group_normalized_rewards",
     [("raw_rewards.view(-1, group_size)", "raw_rewards.view(group_size, -1)")],
     "binary_G8_4groups_std"),
    ("no_eps_nan_on_constant_group", "compute_group_normalized_rewards",
     [("advantages = torch.where(denom > 0, centered / safe, torch.zeros_like(centered))",
       "advantages = centered / grouped.std(dim=1, keepdim=True)")],
     "binary_G8_4groups_std"),
    ("eps_added_but_nan_when_eps_is_0", "compute_group_normalized_rewards",
     [("advantages = torch.where(denom > 0, centered / safe, torch.zeros_like(centered))",
       "advantages = centered / (grouped.std(dim=1, keepdim=True) + advantage_eps)")],
     "constant_groups_only_eps0_std"),
    ("nan_for_group_size_1", "compute_group_normalized_rewards",
     [("grouped.std(dim=1, keepdim=True) if group_size > 1 else torch.zeros_like(grouped[:, :1])",
       "grouped.std(dim=1, keepdim=True)"),
      ("advantages = torch.where(denom > 0, centered / safe, torch.zeros_like(centered))",
       "advantages = torch.where(std == 0, torch.zeros_like(centered), centered / denom)")],
     "group_size_1_std"),
    ("std_applied_when_normalize_by_std_is_false", "compute_group_normalized_rewards",
     [("if normalize_by_std:", "if True:")],
     "binary_G8_4groups_no_std"),
    ("eps_under_the_square_root", "compute_group_normalized_rewards",
     [("denom = std + advantage_eps", "denom = (std ** 2 + advantage_eps).sqrt()")],
     "continuous_G3_4groups_eps_half"),
    ("answer_reward_instead_of_reward", "compute_group_normalized_rewards",
     [('[s["reward"] for s in scores]', '[s["answer_reward"] for s in scores]')],
     "continuous_G4_5groups_std"),
    # ---------------------------------------------------------------- 07: the naive loss
    ("naive_sign_flipped", "compute_naive_policy_gradient_loss",
     [("return -_as_column(raw_rewards_or_advantages", "return _as_column(raw_rewards_or_advantages")],
     "advantages_B3_T7"),
    ("naive_advantage_flattened", "compute_naive_policy_gradient_loss",
     [('return -_as_column(raw_rewards_or_advantages, "raw_rewards_or_advantages") * policy_log_probs',
       "return -raw_rewards_or_advantages.view(-1) * policy_log_probs")],
     "square_B4_T4"),
    ("naive_vector_advantage_used_as_is", "compute_naive_policy_gradient_loss",
     [('return -_as_column(raw_rewards_or_advantages, "raw_rewards_or_advantages") * policy_log_probs',
       "return -raw_rewards_or_advantages * policy_log_probs")],
     "advantages_as_vector_square_B4_T4"),
    # ---------------------------------------------------------------- 07: the clip loss
    ("clip_sign_flipped", "compute_grpo_clip_loss",
     [("loss = -torch.minimum(unclipped, clipped)", "loss = torch.minimum(unclipped, clipped)")],
     "mixed_advantages_B4_T9_eps0.2"),
    ("clamp_on_the_advantage", "compute_grpo_clip_loss",
     [("clipped = torch.clamp(ratio, 1.0 - cliprange, 1.0 + cliprange) * adv",
       "clipped = ratio * torch.clamp(adv, 1.0 - cliprange, 1.0 + cliprange)")],
     "mixed_advantages_B4_T9_eps0.2"),
    ("max_instead_of_min", "compute_grpo_clip_loss",
     [("loss = -torch.minimum(unclipped, clipped)", "loss = -torch.maximum(unclipped, clipped)")],
     "positive_advantages_B3_T12_eps0.2"),
    ("ratio_inverted", "compute_grpo_clip_loss",
     [("ratio = torch.exp(policy_log_probs - old_log_probs)", "ratio = torch.exp(old_log_probs - policy_log_probs)")],
     "mixed_advantages_B4_T9_eps0.2"),
    ("ratio_as_exp_over_exp", "compute_grpo_clip_loss",
     [("ratio = torch.exp(policy_log_probs - old_log_probs)",
       "ratio = torch.exp(policy_log_probs) / torch.exp(old_log_probs)")],
     "log_probs_near_minus_100_B3_T6"),
    ("clip_mask_ignores_the_sign_of_A", "compute_grpo_clip_loss",
     [('"clipped": (clipped < unclipped).detach()',
       '"clipped": ((ratio < 1 - cliprange) | (ratio > 1 + cliprange)).detach()')],
     "positive_advantages_B3_T12_eps0.2"),
    # ---------------------------------------------------------------- 07: the dispatcher
    ("unknown_loss_type_runs_grpo_clip", "compute_policy_gradient_loss",
     [('raise ValueError(f"unknown loss_type',
       'return compute_grpo_clip_loss(advantages, policy_log_probs, old_log_probs, cliprange)\n    (f"unknown loss_type')],
     "error_unknown_loss_type_GRPO_clip"),
    ("unknown_loss_type_raises_KeyError", "compute_policy_gradient_loss",
     [('raise ValueError(f"unknown loss_type', 'raise KeyError(f"unknown loss_type')],
     "error_unknown_loss_type_reinforce"),
    ("missing_argument_not_checked", "compute_policy_gradient_loss",
     [("        if missing:\n", "        if False:\n")],
     "error_no_baseline_without_raw_rewards"),
    ("baseline_loss_reads_raw_rewards", "compute_policy_gradient_loss",
     [("return compute_naive_policy_gradient_loss(advantages, policy_log_probs), {}",
       "return compute_naive_policy_gradient_loss(raw_rewards, policy_log_probs), {}")],
     "reinforce_with_baseline_all_arguments_given"),
    # ---------------------------------------------------------------- 07: masked_mean
    ("masked_mean_count_over_everything", "masked_mean",
     [("return kept.sum(dim=dim) / count.sum(dim=dim)", "return kept.sum(dim=dim) / count.sum()")],
     "dim_last_bool_mask_4x7"),
    ("masked_mean_indexes_with_the_mask", "masked_mean",
     [("return kept.sum() / count.sum()", "return tensor[mask].mean()")],
     "int_mask_dim_none_4x5"),
    ("masked_mean_zero_for_an_empty_row", "masked_mean",
     [("return kept.sum(dim=dim) / count.sum(dim=dim)", "return kept.sum(dim=dim) / count.sum(dim=dim).clamp(min=1)")],
     "empty_row_gives_nan_dim_last"),
    ("masked_mean_multiplies_by_the_mask", "masked_mean",
     [("kept = torch.where(mask.bool(), tensor, 0.0)  # where, not *", "kept = tensor * mask  #")],
     "masked_inf_and_nan"),
    # ---------------------------------------------------------------- 07: the micro-batch step
    ("step_token_level_mean", "grpo_microbatch_train_step",
     [("masked_mean(per_token, response_mask, dim=-1).mean()", "masked_mean(per_token, response_mask)")],
     "reinforce_with_baseline_k1_B5_T8"),
    ("step_no_division_by_accumulation_steps", "grpo_microbatch_train_step",
     [(".mean() / gradient_accumulation_steps", ".mean()")],
     "reinforce_with_baseline_k2_B4_T9"),
    ("step_sum_over_the_batch", "grpo_microbatch_train_step",
     [("masked_mean(per_token, response_mask, dim=-1).mean()", "masked_mean(per_token, response_mask, dim=-1).sum()")],
     "reinforce_with_baseline_k1_B5_T8"),
    ("step_without_backward", "grpo_microbatch_train_step",
     [("    loss.backward()\n", "")],
     "no_baseline_k1_B4_T7"),
    ("step_gradient_replaces_grad", "grpo_microbatch_train_step",
     [("    loss.backward()\n",
       "    for leaf in _leaves(loss):\n        leaf.grad = None  # 'fresh' gradients each call\n    loss.backward()\n")],
     "existing_grad_reinforce_with_baseline_k2"),
    ("step_returns_the_unscaled_loss", "grpo_microbatch_train_step",
     [("return loss.detach(), metadata", "return loss.detach() * gradient_accumulation_steps, metadata")],
     "reinforce_with_baseline_k2_B4_T9"),
]

# a helper one wrong version uses: the leaf tensors a loss depends on (a student reaching for the
# parameters to zero them)
LEAVES = '''

def _leaves(t):
    seen, stack, out = set(), [t.grad_fn], []
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        if hasattr(fn, "variable"):
            out.append(fn.variable)
        stack += [f for f, _ in fn.next_functions]
    return out
'''


@pytest.mark.slow
@pytest.mark.parametrize("mistake, graded, edits, failing_case", MISTAKES, ids=[m[0] for m in MISTAKES])
def test_a_realistic_mistake_loses_the_hidden_check(mistake, graded, edits, failing_case, hidden_cases):
    from autograder.checker import HiddenCheckFailed, check_hidden

    source = SUITE_SOURCE[graded]
    for old, new in edits:
        source = edited(source, old, new)
    fn = student_function(source + LEAVES, graded)
    with pytest.raises(HiddenCheckFailed) as failed:
        check_hidden(graded, fn)
    report = str(failed.value)
    print(report)
    assert f"FAIL {failing_case}:" in report, f"{mistake}: the case {failing_case} should catch it:\n{report}"


@pytest.mark.slow
@pytest.mark.parametrize("graded", list(SUITE_SOURCE))
def test_copies_of_the_references_pass_every_suite(graded, hidden_cases):
    from autograder.checker import check_hidden

    check_hidden(graded, student_function(SUITE_SOURCE[graded], graded))

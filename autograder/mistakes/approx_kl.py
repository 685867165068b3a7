"""The known mistakes of `approx_kl` (notebook 10): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake, edited


# the correct version 'where_sum_over_clamped_count' (tests/graded/test_approx_kl.py), which the edits start from
WHERE = """
        import torch
        def approx_kl(policy_log_probs, old_log_probs, response_mask):
            keep = response_mask.bool()
            sq = 0.5 * (policy_log_probs - old_log_probs) ** 2
            kept = torch.where(keep, sq, torch.zeros_like(sq))
            return kept.sum() / keep.sum().clamp(min=1)
    """

RETURN = "return kept.sum() / keep.sum().clamp(min=1)"

SQ = "sq = 0.5 * (policy_log_probs - old_log_probs) ** 2"

MISTAKES = {
    # divided by every position, not by the response tokens
    "mean_over_all_positions": Mistake(
        "divides by every position, not by the number of response tokens",
        edited(WHERE, (RETURN, "return kept.mean()")),
        ["rows_of_different_lengths_B4_T12", "bool_mask_B3_T9"]),
    # the mask never used: padding's garbage log-probs enter the mean
    "mask_ignored": Mistake(
        "never uses the mask, so the prompt's and the padding's log-probs enter the mean",
        edited(WHERE, (RETURN, "return sq.mean()")),
        ["masked_positions_hold_large_values_B3_T8", "prompt_and_padding_masked_B4_T16"]),
    # each row's mean, then the mean of the rows: a short row's tokens weigh more
    "mean_of_per_row_means": Mistake(
        "averages each row, then the rows: a short response's tokens weigh more than a long one's",
        edited(WHERE, (RETURN, "return (kept.sum(-1) / keep.sum(-1).clamp(min=1)).mean()")),
        ["rows_of_different_lengths_B4_T12", "one_row_without_response_B3_T6"]),
    # (log r)^2 without the 0.5: twice the monitor
    "half_dropped": Mistake(
        "drops the 0.5: (log r)^2 instead of (log r)^2 / 2, twice the monitor",
        edited(WHERE, (SQ, "sq = (policy_log_probs - old_log_probs) ** 2")),
        ["bool_mask_B3_T9", "float64_B4_T6"]),
    # no clamp: 0 / 0 = NaN when no token is a response token
    "nan_on_an_all_zero_mask": Mistake(
        "divides by the raw token count, so a mask with no response token gives 0 / 0 = NaN instead of 0",
        edited(WHERE, (RETURN, "return kept.sum() / keep.sum()")),
        ["all_zero_mask_gives_0_B3_T5"]),
    # the classic PPO monitor, mean(log pi_old - log pi): k1, not the k2 of the contract
    "k1_mean_log_ratio": Mistake(
        "averages log pi_old - log pi (the k1 estimator) instead of (log pi - log pi_old)^2 / 2",
        edited(WHERE, (SQ, "sq = old_log_probs - policy_log_probs")),
        ["bool_mask_B3_T9", "rows_of_different_lengths_B4_T12"]),
    # k3 = r - log r - 1 in the place of k2
    "k3_instead_of_k2": Mistake(
        "averages k3 = r - log r - 1 instead of k2 = (log r)^2 / 2",
        edited(WHERE, (
            SQ, "sq = torch.expm1(old_log_probs - policy_log_probs) - (old_log_probs - policy_log_probs)")),
        ["rows_of_different_lengths_B4_T12"]),
    # indexing with the mask as given: a long mask indexes rows 0 and 1, a float mask raises
    "indexes_with_the_mask_as_given": Mistake(
        "indexes with the mask as given: a long mask indexes rows, a float mask raises, instead of selecting tokens",
        """
        import torch
        def approx_kl(policy_log_probs, old_log_probs, response_mask):
            d = policy_log_probs[response_mask] - old_log_probs[response_mask]
            return 0.5 * d.pow(2).sum() / max(d.numel(), 1)
    """,
        ["long_mask_B3_T9", "int_mask_B4_T7", "float_mask_B3_T9"]),
    # float64 log-probs must give a float64 monitor
    "always_float32": Mistake(
        "computes in float32 whatever the input: float64 log-probs must give a float64 value",
        edited(WHERE, (SQ, "sq = 0.5 * (policy_log_probs.float() - old_log_probs.float()) ** 2")),
        ["float64_B4_T6", "float64_float_mask_B3_T7"]),
}

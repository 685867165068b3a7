"""The known mistakes of `token_level_rewards` (notebook 11): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake, edited


# the correct version 'argmax_on_the_flipped_mask' (tests/graded/test_token_level_rewards.py), which the edits start from
ARGMAX = """
        import torch
        def token_level_rewards(scores, response_mask, kl=None, kl_coef=0.0):
            mask = response_mask.bool()
            dtype = scores.dtype if kl is None else torch.promote_types(scores.dtype, kl.dtype)
            T = mask.shape[1]
            last = T - 1 - torch.argmax(mask.flip(dims=[1]).int(), dim=1)
            rewards = torch.zeros(mask.shape, dtype=dtype)
            has = mask.any(dim=1)
            rows = torch.arange(mask.shape[0])[has]
            rewards[rows, last[has]] = scores[has].to(dtype)
            if kl is not None:
                rewards = rewards - kl_coef * kl.to(dtype) * mask
            return rewards
    """

LAST = "last = T - 1 - torch.argmax(mask.flip(dims=[1]).int(), dim=1)"

ASSIGN = "rewards[rows, last[has]] = scores[has].to(dtype)"

KL = "rewards = rewards - kl_coef * kl.to(dtype) * mask"

# the correct version 'cumsum_equals_sum' (tests/graded/test_token_level_rewards.py), which the edits start from
CUMSUM = """
        import torch
        def token_level_rewards(scores, response_mask, kl=None, kl_coef=0.0):
            m = response_mask.long()
            is_last = (m.cumsum(-1) == m.sum(-1, keepdim=True)) & (m == 1)
            rewards = torch.where(is_last, scores.unsqueeze(-1), torch.zeros((), dtype=scores.dtype))
            if kl is not None:
                rewards = rewards - kl_coef * torch.where(m == 1, kl, torch.zeros((), dtype=kl.dtype))
            return rewards
    """

# the correct version 'loop_over_rows' (tests/graded/test_token_level_rewards.py), which edits start from
LOOP_OVER_ROWS = """
        import torch
        def token_level_rewards(scores, response_mask, kl=None, kl_coef=0.0):
            B, T = response_mask.shape
            dtype = scores.dtype if kl is None else torch.promote_types(scores.dtype, kl.dtype)
            rewards = torch.zeros(B, T, dtype=dtype)
            for b in range(B):
                idx = torch.nonzero(response_mask[b]).flatten()
                if len(idx) == 0:
                    continue
                rewards[b, idx[-1]] = scores[b]
                if kl is not None:
                    rewards[b, idx] -= kl_coef * kl[b, idx]
            return rewards
    """

MISTAKES = {
    # a response length is not an index: the prompt is ignored, and an empty row's -1 is the last column
    "index_at_mask_sum_minus_1": Mistake(
        "puts the score at index mask.sum() - 1, a response length, not the position of the last response token",
        edited(ARGMAX, (LAST, "last = mask.sum(dim=1) - 1"),
                                             (ASSIGN, "rewards[torch.arange(mask.shape[0]), last] = scores.to(dtype)")),
        ["score_only_float32_B4_T12", "kl_coef_0.1_float32_B4_T16",
         "empty_rows_score_only_long_mask_B4_T6"]),
    # argmax of the mask itself: the first response token
    "reward_on_the_first_response_token": Mistake(
        "puts the score on the first response token instead of the last",
        edited(ARGMAX, (LAST, "last = torch.argmax(mask.int(), dim=1)")),
        ["score_only_float32_B4_T12", "square_score_only_B6_T6"]),
    # first + length, one past the last: the first pad (clamped, after the IndexError a response ending the row gave)
    "reward_one_past_the_last_response_token": Mistake(
        "puts the score one position past the last response token",
        edited(ARGMAX, (LAST, "last = (torch.argmax(mask.int(), dim=1) + mask.sum(dim=1)).clamp(max=T - 1)")),
        ["score_only_float32_B4_T12", "kl_coef_0.1_float32_B4_T16", "single_token_responses_kl_coef_0.1_B4_T10"]),
    "kl_subtracted_on_every_position": Mistake(
        "subtracts the KL term on every position instead of on response positions only",
        edited(ARGMAX, (KL, "rewards = rewards - kl_coef * kl.to(dtype)")),
        ["kl_coef_0.1_float32_B4_T16", "kl_coef_0.3_float64_long_mask_B4_T14",
         "empty_rows_kl_coef_0.1_B5_T8"]),
    "kl_added_instead_of_subtracted": Mistake(
        "adds kl_coef * kl instead of subtracting it",
        edited(ARGMAX, (KL, "rewards = rewards + kl_coef * kl.to(dtype) * mask")),
        ["kl_coef_0.1_float32_B4_T16", "kl_coef_0.05_float_mask_B3_T20"]),
    "kl_coef_ignored": Mistake(
        "subtracts the KL without the factor kl_coef",
        edited(ARGMAX, (KL, "rewards = rewards - kl.to(dtype) * mask")),
        ["kl_coef_0.1_float32_B4_T16", "kl_given_coef_0_float32_B4_T12",
         "kl_given_default_coef_B3_T9"]),
    # the argmax of an all-0 row is 0: T - 1 - 0 names the last column
    "empty_row_not_left_at_0": Mistake(
        "puts a row's score on the last column even when the row has no response token",
        edited(ARGMAX, (ASSIGN, "rewards[torch.arange(mask.shape[0]), last] = scores.to(dtype)")),
        ["empty_rows_kl_coef_0.1_B5_T8", "empty_rows_score_only_long_mask_B4_T6", "T1_B4"]),
    # without `& (m == 1)`: the running count also equals the count on every pad after the response
    "cumsum_equals_sum_without_the_mask": Mistake(
        "finds the last token as where the running count equals the total, which also holds on the padding after it",
        edited(CUMSUM, ("is_last = (m.cumsum(-1) == m.sum(-1, keepdim=True)) & (m == 1)",
                                                               "is_last = m.cumsum(-1) == m.sum(-1, keepdim=True)")),
        ["score_only_float32_B4_T12", "empty_rows_score_only_long_mask_B4_T6"]),
    # (B,) scores against (B, T) without [:, None]: broadcast along the positions, silently when B = T
    "scores_broadcast_over_the_positions": Mistake(
        "broadcasts the (B,) scores along the positions instead of the rows (no [:, None])",
        edited(CUMSUM, ("scores.unsqueeze(-1)", "scores")),
        ["square_score_only_B6_T6", "square_kl_coef_0.2_float64_B7_T7",
         "score_only_float32_B4_T12"]),
    # torch.zeros(B, T) is float32 whatever the scores are (and the in-place -= keeps it)
    "always_float32": Mistake(
        "makes the rewards float32 whatever the scores' dtype",
        edited(LOOP_OVER_ROWS, ("rewards = torch.zeros(B, T, dtype=dtype)",
                                                             "rewards = torch.zeros(B, T)")),
        ["score_only_float64_long_mask_B5_T10", "kl_coef_0.3_float64_long_mask_B4_T14"]),
    # zeros of the scores' dtype and an in-place -=: float32 scores with float64 kl stay float32
    "in_place_subtraction_keeps_the_scores_dtype": Mistake(
        "subtracts in place, so float32 scores with float64 kl stay float32 instead of promoting",
        edited(ARGMAX, ("dtype = scores.dtype if kl is None else torch.promote_types(scores.dtype, kl.dtype)",
                        "dtype = scores.dtype"),
               (KL, "rewards -= kl_coef * kl * mask")),
        ["mixed_scores_float32_kl_float64_B3_T10"]),
    # the caller's kl zeroed outside the response, in place
    "kl_zeroed_in_place": Mistake(
        "zeroes the caller's kl outside the response in place",
        edited(ARGMAX, (KL, "rewards = rewards - kl_coef * kl.mul_(response_mask).to(dtype)")),
        ["kl_coef_0.1_float32_B4_T16", "kl_given_coef_0_float32_B4_T12"]),
    # the KL term guarded by the coefficient: kl=None with kl_coef=0.1 multiplies None
    "kl_guarded_by_kl_coef": Mistake(
        "checks kl_coef instead of kl is None, so kl=None with kl_coef > 0 fails",
        edited(ARGMAX, ("if kl is not None:", "if kl_coef:")),
        ["kl_none_with_coef_0.1_B3_T10"]),
    # torch.where needs a bool condition: a long or float mask raises
    "mask_not_made_bool": Mistake(
        "uses a long or float mask as a boolean condition as it is, which raises",
        edited(CUMSUM, ("torch.where(m == 1, kl,", "torch.where(response_mask, kl,")),
        ["kl_coef_0.05_float_mask_B3_T20", "kl_coef_0.3_float64_long_mask_B4_T14"]),
}

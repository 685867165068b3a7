"""The grader's side of `token_level_rewards` (notebook 11): how its hidden cases are drawn, the
correct versions that must earn full marks and the known mistakes that must lose them, each with the
sentence a student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox,
which hold the folder's __init__.py only.

Hidden cases of `token_level_rewards(scores, response_mask, kl=None, kl_coef=0.0) -> Tensor`:
(B,) scores -> (B, T) per-token rewards, each row's score on its last response position, minus
kl_coef * kl on the response positions when kl is given, 0 everywhere else (an empty row is all
0); float32 and float64, bool / long / float masks.

Every mask is what the course's batches have: one contiguous run per row (prompt, response,
padding), with prompts of various lengths (0 in some rows), trailing padding of various lengths
(none where a response ends at the last column), and, in their own cases, empty rows and
one-token responses. Scores are nonzero (magnitude 0.5 to 3, either sign), so that the position
of every row's score shows; kl on the response is KL-shaped (N(0, 0.5^2)); kl where the mask is
0 is garbage of magnitude 5 to 50, so that kl read outside the response shows.

Outputs: the rewards and whether the caller's tensors were left unchanged. No gradient: rewards
are data (the reference detaches its inputs).

What the cases are built to catch:

- every case with a prompt (`*_B4_T12`, `kl_coef_*`, ...): the last position taken as
  `mask.sum(-1) - 1` (a response length is not an index: it ignores the prompt);
- every case with responses of 2 tokens or more: the score on the first response token
  (`mask.argmax(-1)`), or one past the last one (the first pad; an IndexError where a response
  ends at the last column: `responses_end_at_last_column_*`, `T1_B4`);
- `empty_rows_*` (rows with no response token): the score left on a row that has no response
  (the argmax of an all-0 row is 0, `sum - 1` is -1: both name a real column), and
  `mask.cumsum(-1) == mask.sum(-1, keepdim=True)` without `& mask` (true on every column of an
  empty row, and on every trailing pad of the others);
- `kl_coef_*` (kl_coef 0.05 to 0.3, garbage kl on the prompt and the padding): kl subtracted on
  every position, kl added instead of subtracted, kl_coef ignored (kl taken with a weight of 1);
- `kl_given_coef_0_*` and `kl_given_default_coef_*` (kl given, kl_coef 0 or left out): a KL
  term applied whatever kl_coef is (a default of its own, a weight of 1);
- `kl_none_with_coef_0.1_*` (kl=None, kl_coef=0.1): a KL term guarded by `if kl_coef:` instead
  of `if kl is not None:` (None * 0.1 raises);
- `square_*` (B = T): the (B,) scores broadcast against (B, T) along the last dimension
  (`is_last * scores` without `[:, None]`), which raises when B != T and runs silently
  when B = T;
- `float64_*`: float64 computed or returned in float32 (`torch.zeros(B, T)`);
  `mixed_scores_float32_kl_float64_*`: the output not promoted to kl's dtype (zeros of the
  scores' dtype and an in-place `-=`, which keeps it);
- `long_mask_*`, `float_mask_*`: a mask used as an index or compared as a bool without `.bool()`;
- `inputs_unchanged` in every case: an in-place edit of the caller's kl or scores
  (`kl.mul_(mask)`, `kl[~mask] = 0`);
- `long_responses_up_to_64_*`, `T1_B4`: shapes beyond the small ones (a response of 64 tokens,
  a single column).
"""

from __future__ import annotations

import torch

from autograder.graded._response_mask_cases import MaskDraw
from autograder.mistakes import edited, Mistake


# ---------------------------------------------------------------- the hidden cases
def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:

    d = MaskDraw(gen)
    randint, signs, mask_of, spans = d.randint, d.signs, d.mask_of, d.spans

    def scores(B):
        """Nonzero scores, magnitude 0.5 to 3, either sign (float64)."""
        return signs(B) * (0.5 + 2.5 * torch.rand(B, generator=gen, dtype=torch.float64))

    def kl_for(m):
        """KL-shaped values on the response (N(0, 0.5^2)), garbage of magnitude 5 to 50 elsewhere (float64)."""
        kl = 0.5 * torch.randn(m.shape, generator=gen, dtype=torch.float64)
        return torch.where(m, kl, d.garbage(*m.shape))

    def case(m, kl_coef="default", with_kl=True, dtype=torch.float32, kl_dtype=None, mask_kind="bool"):
        mk = {"bool": m, "long": m.long(), "float": m.to(dtype)}[mask_kind]
        kl = kl_for(m).to(kl_dtype or dtype) if with_kl else None
        return {"scores": scores(m.shape[0]).to(dtype), "response_mask": mk, "kl": kl, "kl_coef": kl_coef}

    # rows with no response token beside ordinary ones
    empty = spans(5, 8)
    empty[1] = empty[3] = (0, 0)
    empty_score_only = spans(4, 6)
    empty_score_only[0] = (0, 0)
    # one-token responses at various offsets (one at column 0, one at the last column)
    single = [(0, 1), (randint(1, 4), 1), (randint(5, 8), 1), (9, 1)]
    # prompts of 0 tokens: responses from column 0
    no_prompt = [(0, randint(2, 6)), (0, randint(2, 6)), (0, 8)]  # the last row is all response
    # a single column: a response of one token or none
    t1 = [(0, 1), (0, 0), (0, 1), (0, 1)]
    return [
        ("score_only_float32_B4_T12", case(mask_of(12, spans(4, 12)), with_kl=False)),
        ("score_only_float64_long_mask_B5_T10", case(mask_of(10, spans(5, 10)), with_kl=False, dtype=torch.float64,
                                                     mask_kind="long")),
        ("score_only_float_mask_B3_T9", case(mask_of(9, spans(3, 9)), with_kl=False, mask_kind="float")),
        ("kl_coef_0.1_float32_B4_T16", case(mask_of(16, spans(4, 16)), kl_coef=0.1)),
        ("kl_coef_0.05_float_mask_B3_T20", case(mask_of(20, spans(3, 20)), kl_coef=0.05, mask_kind="float")),
        ("kl_coef_0.3_float64_long_mask_B4_T14", case(mask_of(14, spans(4, 14)), kl_coef=0.3, dtype=torch.float64,
                                                      mask_kind="long")),
        ("kl_given_coef_0_float32_B4_T12", case(mask_of(12, spans(4, 12)), kl_coef=0.0)),
        ("kl_given_default_coef_B3_T9", case(mask_of(9, spans(3, 9)))),
        ("kl_none_with_coef_0.1_B3_T10", case(mask_of(10, spans(3, 10)), kl_coef=0.1, with_kl=False)),
        ("mixed_scores_float32_kl_float64_B3_T10", case(mask_of(10, spans(3, 10)), kl_coef=0.2,
                                                        kl_dtype=torch.float64)),
        ("square_score_only_B6_T6", case(mask_of(6, spans(6, 6)), with_kl=False)),
        ("square_kl_coef_0.2_float64_B7_T7", case(mask_of(7, spans(7, 7)), kl_coef=0.2, dtype=torch.float64)),
        ("empty_rows_kl_coef_0.1_B5_T8", case(mask_of(8, empty), kl_coef=0.1)),
        ("empty_rows_score_only_long_mask_B4_T6", case(mask_of(6, empty_score_only), with_kl=False,
                                                       mask_kind="long")),
        ("single_token_responses_kl_coef_0.1_B4_T10", case(mask_of(10, single), kl_coef=0.1)),
        ("responses_end_at_last_column_kl_coef_0.1_B4_T11",
         case(mask_of(11, [(11 - n, n) for _, n in spans(4, 11)]), kl_coef=0.1)),
        ("no_prompt_kl_coef_0.1_B3_T8", case(mask_of(8, no_prompt), kl_coef=0.1)),
        ("T1_B4", case(mask_of(1, t1), kl_coef=0.1)),
        ("long_responses_up_to_64_kl_coef_0.05_B4_T80", case(mask_of(80, spans(4, 80, lengths=(40, 64))),
                                                             kl_coef=0.05)),
    ]


# ---------------------------------------------------------------- the correct versions
# the correct version 'argmax_on_the_flipped_mask' (autograder/graded/token_level_rewards/test_token_level_rewards.py), which the edits start from
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

# the correct version 'cumsum_equals_sum' (autograder/graded/token_level_rewards/test_token_level_rewards.py), which the edits start from
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

# the correct version 'loop_over_rows' (autograder/graded/token_level_rewards/test_token_level_rewards.py), which edits start from
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


CORRECT = {
    # the last 1 is the first 1 of the flipped row; rows without a response are left out of the assignment
    "argmax_on_the_flipped_mask": ARGMAX,
    # the position where the running count reaches the row's count, on a response token
    "cumsum_equals_sum": CUMSUM,
    "loop_over_rows": LOOP_OVER_ROWS,
    # the largest masked position (-1 for an empty row), then a scatter of the scores
    "scatter_at_the_largest_masked_position": """
        import torch
        def token_level_rewards(scores, response_mask, kl=None, kl_coef=0.0):
            mask = response_mask != 0
            positions = torch.arange(mask.shape[-1]).expand_as(mask)
            last = torch.where(mask, positions, -1).max(dim=-1).values
            has = last >= 0
            out_dtype = scores.dtype if kl is None else torch.result_type(scores, kl)
            values = torch.where(has, scores, torch.zeros_like(scores)).to(out_dtype)
            rewards = torch.zeros(mask.shape, dtype=out_dtype).scatter(1, last.clamp(min=0).unsqueeze(1),
                                                                       values.unsqueeze(1))
            if kl is not None:
                rewards = rewards - kl_coef * kl.masked_fill(~mask, 0)
            return rewards
    """,
    # the end of the run (a 1 followed by a 0 or by the end of the row), in float64, cast back
    "float64_inside_end_of_run": """
        import torch
        def token_level_rewards(scores, response_mask, kl=None, kl_coef=0.0):
            out_dtype = scores.dtype if kl is None else torch.promote_types(scores.dtype, kl.dtype)
            m = response_mask.double()
            next_m = torch.cat([m[:, 1:], torch.zeros_like(m[:, :1])], dim=1)
            is_last = m * (1 - next_m)
            r = is_last * scores.double()[:, None]
            if kl is not None:
                r = r - kl_coef * torch.where(m > 0, kl.double(), 0.0)
            return r.to(out_dtype)
    """,
}


# ---------------------------------------------------------------- the known mistakes
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

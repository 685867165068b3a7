"""The known mistakes of `compute_gae` (notebook 11): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake, edited


# the correct version 'loop_over_positions_with_where' (tests/graded/test_compute_gae.py), which the edits start from
LOOP = """
        import torch
        def compute_gae(rewards, values, response_mask, gamma, lam):
            dtype = torch.promote_types(rewards.dtype, values.dtype)
            r, v = rewards.to(dtype), values.to(dtype)
            m = response_mask.bool()
            B, T = m.shape
            adv = torch.zeros(B, T, dtype=dtype)
            last_gae = torch.zeros(B, dtype=dtype)
            for t in reversed(range(T)):
                if t + 1 < T:
                    next_v = torch.where(m[:, t + 1], v[:, t + 1], torch.zeros_like(v[:, t + 1]))
                else:
                    next_v = torch.zeros(B, dtype=dtype)
                delta = r[:, t] + gamma * next_v - v[:, t]
                last_gae = torch.where(m[:, t], delta + gamma * lam * last_gae, torch.zeros_like(delta))
                adv[:, t] = last_gae
            returns = torch.where(m, adv + v, torch.zeros_like(adv))
            return adv, returns
    """

# the correct version 'python_loop_per_row_over_its_response_indices' (tests/graded/test_compute_gae.py), which the edits start from
ROWS = """
        import torch
        def compute_gae(rewards, values, response_mask, gamma, lam):
            dtype = torch.promote_types(rewards.dtype, values.dtype)
            B, T = response_mask.shape
            adv = torch.zeros(B, T, dtype=dtype)
            ret = torch.zeros(B, T, dtype=dtype)
            for b in range(B):
                idx = response_mask[b].nonzero().flatten().tolist()
                gae = torch.zeros((), dtype=dtype)
                next_value = torch.zeros((), dtype=dtype)
                for t in reversed(idx):
                    v = values[b, t].to(dtype)
                    delta = rewards[b, t].to(dtype) + gamma * next_value - v
                    gae = delta + gamma * lam * gae
                    adv[b, t] = gae
                    ret[b, t] = gae + v
                    next_value = v
            return adv, ret
    """

# the correct version 'discount_matrix' (tests/graded/test_compute_gae.py), which the edits start from
MATRIX = """
        import torch
        def compute_gae(rewards, values, response_mask, gamma, lam):
            dtype = torch.promote_types(rewards.dtype, values.dtype)
            m = response_mask.to(dtype)
            r = rewards.to(dtype) * m
            v = values.to(dtype) * m
            next_v = torch.cat([v[:, 1:], torch.zeros_like(v[:, :1])], dim=1)
            delta = (r + gamma * next_v - v) * m
            T = m.shape[1]
            pos = torch.arange(T)
            lag = pos[None, :] - pos[:, None]
            discount = torch.where(lag >= 0, torch.tensor(gamma * lam, dtype=dtype) ** lag.clamp(min=0),
                                   torch.zeros((), dtype=dtype))
            adv = (delta @ discount.T) * m
            return adv, (adv + v) * m
    """

NEXT_V = "next_v = torch.where(m[:, t + 1], v[:, t + 1], torch.zeros_like(v[:, t + 1]))"

DELTA = "delta = r[:, t] + gamma * next_v - v[:, t]"

RETURNS = "returns = torch.where(m, adv + v, torch.zeros_like(adv))"

MISTAKES = {
    # V_{t+1} from the next column whatever it is: the last response token bootstraps from the pad's value
    "bootstrap_from_the_pad": Mistake(
        "bootstraps the last response token from the next column's value (a pad) instead of from 0",
        edited(LOOP, (NEXT_V, "next_v = v[:, t + 1]")),
        ["gae_0.99_0.95_float32_B4_T24", "td_residual_1_0_float32_B5_T16",
         "single_token_responses_0.99_0.95_B4_T10"]),
    # the CleanRL loop without dones: every column in the recursion (the padding's garbage flows back), masked at the end
    "recursion_over_every_column_masked_at_the_end": Mistake(
        "runs the recursion over every column and masks at the end, so the padding's values flow back into the response",
        """
        import torch
        def compute_gae(rewards, values, response_mask, gamma, lam):
            dtype = torch.promote_types(rewards.dtype, values.dtype)
            m = response_mask.to(dtype)
            B, T = m.shape
            adv = torch.zeros(B, T, dtype=dtype)
            last_gae = torch.zeros(B, dtype=dtype)
            for t in reversed(range(T)):
                next_v = values[:, t + 1] if t + 1 < T else torch.zeros(B, dtype=dtype)
                delta = rewards[:, t] + gamma * next_v - values[:, t]
                last_gae = delta + gamma * lam * last_gae
                adv[:, t] = last_gae
            adv = adv * m
            return adv, (adv + values) * m
    """,
        ["gae_0.99_0.95_float32_B4_T24", "monte_carlo_1_1_float32_B4_T20", "empty_rows_0.99_0.95_B5_T10"]),
    "gamma_left_out_of_delta": Mistake(
        "leaves gamma out of delta: r_t + V_{t+1} - V_t instead of r_t + gamma * V_{t+1} - V_t",
        edited(LOOP, (DELTA, "delta = r[:, t] + next_v - v[:, t]")),
        ["gae_0.99_0.95_float32_B4_T24", "gae_0.9_0.5_long_mask_B3_T18",
         "td_residual_0.9_0_float64_B3_T12"]),
    # lam where gamma goes (the product gamma * lam of the recursion is the same either way)
    "gamma_and_lam_swapped": Mistake(
        "uses lam where gamma belongs in delta",
        edited(LOOP, (DELTA, "delta = r[:, t] + lam * next_v - v[:, t]")),
        ["gae_0.99_0.95_float32_B4_T24", "td_residual_1_0_float32_B5_T16",
         "gae_0.9_0.5_long_mask_B3_T18"]),
    "lam_applied_in_delta": Mistake(
        "multiplies V_{t+1} by gamma * lam in delta, where only gamma belongs",
        edited(LOOP, (DELTA, "delta = r[:, t] + gamma * lam * next_v - v[:, t]")),
        ["gae_0.99_0.95_float32_B4_T24", "td_residual_1_0_float32_B5_T16",
         "gae_1_0.95_float_mask_B4_T22"]),
    "returns_are_the_advantages": Mistake(
        "returns the advantages as the returns, instead of advantages + values",
        edited(LOOP, (RETURNS, "returns = adv")),
        ["gae_0.99_0.95_float32_B4_T24", "monte_carlo_1_1_float32_B4_T20"]),
    # A + V everywhere: the garbage values of the prompt and the padding in the returns
    "returns_not_0_outside_the_response": Mistake(
        "gives returns = A + V on every position, not 0 outside the response",
        edited(LOOP, (RETURNS, "returns = adv + v")),
        ["gae_0.99_0.95_float32_B4_T24", "empty_rows_0.99_0.95_B5_T10"]),
    # A_t from A_{t-1}: the recursion run forward
    "forward_recursion": Mistake(
        "runs the recursion forward (A_t from A_{t-1}) instead of backward from the last response token",
        edited(LOOP, ("for t in reversed(range(T)):", "for t in range(T):")),
        ["gae_0.99_0.95_float32_B4_T24", "monte_carlo_1_1_float32_B4_T20"]),
    # every row's response tokens as one sequence: a row's last token bootstraps from the next row's first
    "discount_not_reset_between_rows": Mistake(
        "treats all rows' response tokens as one sequence: a row's last token bootstraps from the next row",
        """
        import torch
        def compute_gae(rewards, values, response_mask, gamma, lam):
            dtype = torch.promote_types(rewards.dtype, values.dtype)
            m = response_mask.bool()
            r, v = rewards.to(dtype)[m], values.to(dtype)[m]
            next_v = torch.cat([v[1:], v.new_zeros(1)])
            delta = r + gamma * next_v - v
            a = torch.zeros_like(r)
            running = torch.zeros((), dtype=dtype)
            for i in reversed(range(r.numel())):
                running = delta[i] + gamma * lam * running
                a[i] = running
            adv = torch.zeros(m.shape, dtype=dtype)
            ret = torch.zeros(m.shape, dtype=dtype)
            adv[m] = a
            ret[m] = a + v
            return adv, ret
    """,
        ["gae_0.99_0.95_float32_B4_T24", "td_residual_1_0_float32_B5_T16", "square_1_1_float64_B8_T8"]),
    # range(mask.sum()) from column 0: the prompt offset ignored
    "response_taken_from_column_0": Mistake(
        "takes the response as the first mask.sum() columns, ignoring where the prompt ends",
        edited(ROWS, ("idx = response_mask[b].nonzero().flatten().tolist()",
                                                       "idx = list(range(int(response_mask[b].sum())))")),
        ["gae_0.99_0.95_float32_B4_T24", "single_token_responses_0.99_0.95_B4_T10"]),
    # the response's first and last index taken without a guard: an empty row has neither (IndexError)
    "empty_row_not_guarded": Mistake(
        "reads each row's first and last response index without a guard, so an empty row raises IndexError",
        edited(ROWS, ("for t in reversed(idx):",
                                                "first, last = idx[0], idx[-1]\n"
                                                "                for t in range(last, first - 1, -1):")),
        ["empty_rows_0.99_0.95_B5_T10", "T1_0.99_0.95_B4"]),
    # returns as the discounted sum of rewards to go (right for lam = 1 only)
    "returns_as_discounted_rewards_to_go": Mistake(
        "computes the returns as discounted rewards to go, which equals A + V only when lam = 1",
        edited(ROWS, ("next_value = torch.zeros((), dtype=dtype)\n",
                                                              "next_value = torch.zeros((), dtype=dtype)\n"
                                                              "                to_go = torch.zeros((), dtype=dtype)\n"),
                                                       ("ret[b, t] = gae + v",
                                                        "to_go = rewards[b, t].to(dtype) + gamma * to_go\n"
                                                        "                    ret[b, t] = to_go")),
        ["gae_0.99_0.95_float32_B4_T24", "gae_1_0.95_float_mask_B4_T22"]),
    # (T, T) @ (B, T): runs only when B = T, and mixes the rows
    "discount_matrix_on_the_wrong_side": Mistake(
        "multiplies the (T, T) discount matrix on the wrong side, which mixes rows (and runs only when B = T)",
        edited(MATRIX, ("adv = (delta @ discount.T) * m", "adv = (discount @ delta) * m")),
        ["square_0.99_0.95_float32_B6_T6", "square_1_1_float64_B8_T8"]),
    # the next value shifted along the batch: row b + 1's value at the same column
    "next_value_shifted_along_the_batch": Mistake(
        "shifts the next value along the batch dimension instead of along time",
        edited(MATRIX, ("next_v = torch.cat([v[:, 1:], torch.zeros_like(v[:, :1])], dim=1)",
                        "next_v = torch.cat([v[1:], torch.zeros_like(v[:1])], dim=0)")),
        ["gae_0.99_0.95_float32_B4_T24", "square_0.99_0.95_float32_B6_T6"]),
    # a row index for a position: values[t] is row t, silently when B = T
    "row_index_for_a_position": Mistake(
        "indexes rows with a position (values[t] instead of values[:, t])",
        edited(LOOP, (DELTA, "delta = r[t] + gamma * next_v - v[t]")),
        ["square_0.99_0.95_float32_B6_T6", "square_1_1_float64_B8_T8"]),
    # zeros_like(rewards): float32 advantages for float32 rewards and float64 values
    "advantages_of_the_rewards_dtype": Mistake(
        "makes the advantages in the rewards' dtype instead of the promoted dtype of rewards and values",
        edited(LOOP, ("adv = torch.zeros(B, T, dtype=dtype)", "adv = torch.zeros_like(rewards)")),
        ["mixed_rewards_float32_values_float64_0.99_0.95_B3_T12"]),
    "always_float32": Mistake(
        "computes in float32 always: float64 inputs must give float64 outputs",
        edited(LOOP, ("dtype = torch.promote_types(rewards.dtype, values.dtype)", "dtype = torch.float32")),
        ["gae_0.99_0.95_float64_long_mask_B4_T32", "square_1_1_float64_B8_T8"]),
    # values.to(dtype) is the caller's tensor when the dtype already matches: mul_ zeroes its padding
    "values_zeroed_in_place": Mistake(
        "zeroes the padding of values in place, changing the caller's tensor",
        edited(LOOP, ("m = response_mask.bool()\n",
                                                 "m = response_mask.bool()\n            v.mul_(m)\n")),
        ["gae_0.99_0.95_float32_B4_T24", "gae_0.99_0.95_float64_long_mask_B4_T32"]),
}

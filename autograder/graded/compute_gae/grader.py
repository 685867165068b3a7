"""The grader's side of `compute_gae` (notebook 11): how its hidden cases are drawn, the correct
versions that must earn full marks and the known mistakes that must lose them, each with the
sentence a student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox,
which hold the folder's __init__.py only.

Hidden cases of `compute_gae(rewards, values, response_mask, gamma, lam) -> (advantages, returns)`:
generalised advantage estimation backward over each row's response positions,

    delta_t = r_t + gamma * V_{t+1} - V_t   (V = 0 after the last response token)
    A_t     = delta_t + gamma * lam * A_{t+1},    returns_t = A_t + V_t,

0 outside the response; (gamma, lam) = (1, 1), (1, 0), (0.99, 0.95), (0.9, 0.5), (1, 0.95) and
(0.9, 0); float32 and float64 (and float32 rewards with float64 values); bool / long / float masks.

Every mask is what the course's batches have: one contiguous run per row (prompt, response,
padding), with prompts of various lengths (0 in some rows), trailing padding of various lengths
(none where a response ends at the last column), and, in their own cases, empty rows and
one-token responses; responses up to 64 tokens. Rewards are per-token everywhere on the
response (N(0, 0.1^2), as a KL penalty makes them) with a score of magnitude 0.5 to 3 on the
last token; values on the response are N(0, 1). Rewards and values where the mask is 0 are
garbage of magnitude 5 to 50, either sign, so that reading either there shows.

Outputs: advantages, returns, and whether the caller's tensors were left unchanged. No
gradient: advantages and returns are data.

What the cases are built to catch:

- every case with trailing padding (all but `responses_end_at_last_column_*`): V_{t+1} read from
  the next column even where it is padding (bootstrapping from the pad's garbage value), and a
  recursion run over every column (garbage rewards and values of the padding carried into
  the response) and masked only at the end;
- `gae_0.99_0.95_*`, `gae_0.9_0.5_*`, `td_residual_0.9_0_*`, `square_0.99_0.95_*`: gamma left
  out of delta; with gamma != lam as well: gamma and lam swapped (delta discounted by lam); every
  lam != 1 case: lam applied in delta (r + gamma * lam * V_{t+1} - V_t), the returns taken as the
  discounted sum of rewards to go instead of A + V;
- `td_residual_*` (lam = 0: A is the TD residual) and `monte_carlo_1_1_*` (gamma = lam = 1: the
  sum of the rewards to the end, minus V): the two limits, which pin each factor down;
- every case whose responses have 2 tokens or more and gamma * lam > 0: a forward instead of a
  backward recursion;
- every case of 2 or more rows: the discount not reset between rows (every row's response
  tokens concatenated into one sequence, so that a row bootstraps from the next one);
- every case with a prompt: a per-row loop over `range(mask.sum())` from column 0 (the prompt
  offset ignored);
- `returns` in every case: returns = advantages (V not added back), returns or advantages not 0
  outside the response (`advantages + values` unmasked shows the garbage values);
- `square_*` (B = T): a row index used for a position (`values[t]` for `values[:, t]`), or a
  (T, T) discount matrix multiplied on the wrong side, which raise when B != T and run silently
  when B = T; every case: a shift along the batch dimension instead of the positions;
- `empty_rows_*`, `T1_*` (a row with no response token): a per-row loop that takes the
  response's first and last index (`idx[0]`, `idx[-1]`) without a guard;
  `single_token_responses_*` (A = r - V whatever gamma and lam: the bootstrap from the pad shows
  alone), `responses_end_at_last_column_*`, `no_prompt_*`: the other edges of the runs (an index
  one past the last column, a prompt of 0 tokens, a row that is all response);
- `float64_*`: float64 computed or returned in float32 (`torch.zeros(B, T)`);
  `mixed_rewards_float32_values_float64_*`: the output not promoted (`torch.zeros_like(rewards)`);
- `long_mask_*`, `float_mask_*`: a mask used as a bool without `.bool()`;
- `inputs_unchanged` in every case: an in-place edit of the caller's tensors (`values.mul_(mask)`,
  `rewards[~mask] = 0`);
- `long_responses_up_to_64_*`: responses of 40 to 64 tokens (the discount's powers down to
  (gamma * lam)^63, and the rounding a float32 recursion of that length accumulates).
"""

from __future__ import annotations

import torch

from autograder.graded._response_mask_cases import MaskDraw
from autograder.mistakes import edited, Mistake


# ---------------------------------------------------------------- the hidden cases
def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:

    d = MaskDraw(gen)
    randint, signs, mask_of, spans = d.randint, d.signs, d.mask_of, d.spans

    def case(m, gamma, lam, dtype=torch.float32, values_dtype=None, mask_kind="bool"):
        """Per-token rewards N(0, 0.1^2) plus a score on each row's last response token, values
        N(0, 1); garbage of magnitude 5 to 50 wherever the mask is 0 (drawn in float64, then cast)."""
        B, T = m.shape
        rewards = 0.1 * torch.randn(B, T, generator=gen, dtype=torch.float64)
        score = signs(B) * (0.5 + 2.5 * torch.rand(B, generator=gen, dtype=torch.float64))
        last = T - 1 - m.flip(-1).long().argmax(-1)
        rewards[torch.arange(B), last] += torch.where(m.any(-1), score, 0.0)
        values = torch.randn(B, T, generator=gen, dtype=torch.float64)
        rewards = torch.where(m, rewards, d.garbage(B, T))
        values = torch.where(m, values, d.garbage(B, T))
        mk = {"bool": m, "long": m.long(), "float": m.to(dtype)}[mask_kind]
        return {"rewards": rewards.to(dtype), "values": values.to(values_dtype or dtype), "response_mask": mk,
                "gamma": gamma, "lam": lam}

    empty = spans(5, 10)
    empty[0] = empty[3] = (0, 0)
    single = [(0, 1), (randint(1, 4), 1), (randint(5, 8), 1), (9, 1)]  # one at column 0, one at the last column
    no_prompt = [(0, randint(2, 10)), (0, randint(2, 10)), (0, 12)]  # the last row is all response
    return [
        ("gae_0.99_0.95_float32_B4_T24", case(mask_of(24, spans(4, 24)), 0.99, 0.95)),
        ("gae_0.99_0.95_float64_long_mask_B4_T32", case(mask_of(32, spans(4, 32)), 0.99, 0.95, dtype=torch.float64,
                                                        mask_kind="long")),
        ("gae_0.9_0.5_long_mask_B3_T18", case(mask_of(18, spans(3, 18)), 0.9, 0.5, mask_kind="long")),
        ("gae_1_0.95_float_mask_B4_T22", case(mask_of(22, spans(4, 22)), 1.0, 0.95, mask_kind="float")),
        ("monte_carlo_1_1_float32_B4_T20", case(mask_of(20, spans(4, 20)), 1.0, 1.0)),
        ("monte_carlo_1_1_float64_float_mask_B3_T16", case(mask_of(16, spans(3, 16)), 1.0, 1.0, dtype=torch.float64,
                                                           mask_kind="float")),
        ("td_residual_1_0_float32_B5_T16", case(mask_of(16, spans(5, 16)), 1.0, 0.0)),
        ("td_residual_0.9_0_float64_B3_T12", case(mask_of(12, spans(3, 12)), 0.9, 0.0, dtype=torch.float64)),
        ("square_0.99_0.95_float32_B6_T6", case(mask_of(6, spans(6, 6)), 0.99, 0.95)),
        ("square_1_1_float64_B8_T8", case(mask_of(8, spans(8, 8)), 1.0, 1.0, dtype=torch.float64)),
        ("mixed_rewards_float32_values_float64_0.99_0.95_B3_T12", case(mask_of(12, spans(3, 12)), 0.99, 0.95,
                                                                      values_dtype=torch.float64)),
        ("empty_rows_0.99_0.95_B5_T10", case(mask_of(10, empty), 0.99, 0.95)),
        ("single_token_responses_0.99_0.95_B4_T10", case(mask_of(10, single), 0.99, 0.95)),
        ("responses_end_at_last_column_0.9_0.5_B4_T15",
         case(mask_of(15, [(15 - n, n) for _, n in spans(4, 15)]), 0.9, 0.5)),
        ("no_prompt_1_0.95_float_mask_B3_T12", case(mask_of(12, no_prompt), 1.0, 0.95, mask_kind="float")),
        ("T1_0.99_0.95_B4", case(mask_of(1, [(0, 1), (0, 0), (0, 1), (0, 1)]), 0.99, 0.95)),
        ("long_responses_up_to_64_0.99_0.95_float32_B4_T80", case(mask_of(80, spans(4, 80, lengths=(40, 64))),
                                                                  0.99, 0.95)),
        ("long_responses_up_to_64_1_1_float32_B3_T72", case(mask_of(72, spans(3, 72, lengths=(40, 64))), 1.0, 1.0)),
        ("long_responses_up_to_64_1_0.95_float64_B3_T72", case(mask_of(72, spans(3, 72, lengths=(40, 64))), 1.0, 0.95,
                                                               dtype=torch.float64)),
    ]


# ---------------------------------------------------------------- the correct versions
# the correct version 'loop_over_positions_with_where' (autograder/graded/compute_gae/test_compute_gae.py), which the edits start from
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

# the correct version 'python_loop_per_row_over_its_response_indices' (autograder/graded/compute_gae/test_compute_gae.py), which the edits start from
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

# the correct version 'discount_matrix' (autograder/graded/compute_gae/test_compute_gae.py), which the edits start from
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


CORRECT = {
    # one column at a time, V_{t+1} taken only where column t + 1 is a response token
    "loop_over_positions_with_where": LOOP,
    "python_loop_per_row_over_its_response_indices": ROWS,
    # masked deltas times a (T, T) matrix of the discount's powers (gamma * lam)^(s - t), s >= t
    "discount_matrix": MATRIX,
    # each row's response by boolean indexing, the recursion in float64 Python numbers, cast back
    "float64_inside_boolean_indexing": """
        import torch
        def compute_gae(rewards, values, response_mask, gamma, lam):
            out_dtype = torch.promote_types(rewards.dtype, values.dtype)
            m = response_mask.bool()
            adv = torch.zeros(m.shape, dtype=torch.float64)
            for b in range(m.shape[0]):
                r = rewards[b][m[b]].double()
                v = values[b][m[b]].double()
                n = r.numel()
                if n == 0:
                    continue
                next_v = torch.cat([v[1:], v.new_zeros(1)])
                delta = (r + gamma * next_v - v).tolist()
                a = [0.0] * n
                running = 0.0
                for i in range(n - 1, -1, -1):
                    running = delta[i] + gamma * lam * running
                    a[i] = running
                adv[b, m[b]] = torch.tensor(a, dtype=torch.float64)
            returns = torch.where(m, adv + values.double(), 0.0)
            return adv.to(out_dtype), returns.to(out_dtype)
    """,
    # the lambda-return first, G_t = r_t + gamma ((1 - lam) V_{t+1} + lam G_{t+1}), then A = G - V
    "lambda_return_then_minus_values": """
        import torch
        def compute_gae(rewards, values, response_mask, gamma, lam):
            dtype = torch.promote_types(rewards.dtype, values.dtype)
            m = response_mask.bool()
            r = torch.where(m, rewards.to(dtype), 0.0)
            v = torch.where(m, values.to(dtype), 0.0)
            B, T = m.shape
            returns = torch.zeros(B, T, dtype=dtype)
            next_g = torch.zeros(B, dtype=dtype)
            next_v = torch.zeros(B, dtype=dtype)
            for t in range(T - 1, -1, -1):
                g = r[:, t] + gamma * ((1 - lam) * next_v + lam * next_g)
                returns[:, t] = torch.where(m[:, t], g, 0.0)
                next_g, next_v = returns[:, t], v[:, t]
            advantages = torch.where(m, returns - v, 0.0)
            return advantages, returns
    """,
}


# ---------------------------------------------------------------- the known mistakes
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

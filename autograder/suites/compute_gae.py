"""Hidden cases of `compute_gae(rewards, values, response_mask, gamma, lam) -> (advantages, returns)`:
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

GRADED = "compute_gae"
TRIPWIRE = ["compute_gae"]


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    from ._response_mask_cases import MaskDraw

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


def call(fn, inputs: dict) -> dict:
    rewards = inputs["rewards"].clone()
    values = inputs["values"].clone()
    mask = inputs["response_mask"].clone()
    before = (rewards.clone(), values.clone(), mask.clone())
    advantages, returns = fn(rewards, values, mask, inputs["gamma"], inputs["lam"])
    unchanged = all(torch.equal(a, b) for a, b in zip((rewards, values, mask), before))
    return {"advantages": advantages, "returns": returns, "inputs_unchanged": unchanged}

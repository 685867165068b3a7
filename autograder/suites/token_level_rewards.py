"""Hidden cases of `token_level_rewards(scores, response_mask, kl=None, kl_coef=0.0) -> Tensor`:
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

GRADED = "token_level_rewards"
TRIPWIRE = ["token_level_rewards"]


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    from ._response_mask_cases import MaskDraw

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


def call(fn, inputs: dict) -> dict:
    scores = inputs["scores"].clone()
    mask = inputs["response_mask"].clone()
    kl = None if inputs["kl"] is None else inputs["kl"].clone()
    before = [t.clone() for t in (scores, mask, kl) if t is not None]
    if inputs["kl_coef"] == "default":
        rewards = fn(scores, mask) if kl is None else fn(scores, mask, kl=kl)
    else:
        rewards = fn(scores, mask, kl=kl, kl_coef=inputs["kl_coef"])
    after = [t for t in (scores, mask, kl) if t is not None]
    return {"rewards": rewards, "inputs_unchanged": all(torch.equal(a, b) for a, b in zip(after, before))}

"""The known mistakes of `sampler_log_probs` (notebook 15): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake, edited


CHECKS = """
            V = logits.shape[-1]
            if temperature <= 0:
                raise ValueError("temperature must be positive")
            if top_k is not None and (top_k < 0 or top_k > V):
                raise ValueError("top_k out of range")
            if top_p is not None and not (0 < top_p <= 1):
                raise ValueError("top_p must be in (0, 1]")
            if tuple(tokens.shape) != tuple(logits.shape[:-1]):
                raise ValueError("tokens must have the shape of logits[..., 0]")
"""

# the correct version 'sort_once_prefix_scatter' (tests/graded/test_sampler_log_probs.py), which the edits start from
SORT = """
        import torch
        def sampler_log_probs(logits, tokens, temperature=1.0, top_k=None, top_p=None, renormalize=True):
""" + CHECKS + """
            z = logits / temperature
            if not renormalize:
                return torch.log_softmax(z, dim=-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
            sorted_z, order = torch.sort(z, dim=-1, descending=True)
            keep_sorted = torch.ones_like(sorted_z, dtype=torch.bool)
            if top_k:
                keep_sorted &= sorted_z >= sorted_z[..., top_k - 1:top_k]
            if top_p is not None and top_p < 1.0:
                probs = torch.softmax(sorted_z.masked_fill(~keep_sorted, float("-inf")), dim=-1)
                before = torch.cumsum(probs, dim=-1) - probs
                keep_sorted &= before < top_p
            keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
            log_p = torch.log_softmax(z.masked_fill(~keep, float("-inf")), dim=-1)
            return log_p.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    """

# the correct version 'vllm_ascending_cumsum' (tests/graded/test_sampler_log_probs.py), which the edits start from
VLLM = """
        import torch
        def sampler_log_probs(logits, tokens, temperature=1.0, top_k=None, top_p=None, renormalize=True):
""" + CHECKS + """
            z = logits / temperature
            if not renormalize:
                return torch.log_softmax(z, dim=-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
            if top_k:
                kth = torch.topk(z, top_k, dim=-1).values[..., -1:]
                z = torch.where(z < kth, torch.full_like(z, float("-inf")), z)
            if top_p is not None and top_p < 1.0:
                z_sorted, idx = z.sort(dim=-1, descending=False)
                cum = z_sorted.softmax(dim=-1).cumsum(dim=-1)
                drop = cum <= 1 - top_p
                drop[..., -1] = False
                drop = drop.scatter(-1, idx, drop)
                z = z.masked_fill(drop, float("-inf"))
            return torch.log_softmax(z, dim=-1).gather(-1, tokens[..., None])[..., 0]
    """

# the correct version 'float64_ranks_where' (tests/graded/test_sampler_log_probs.py), which the edits start from
RANKS = """
        import torch
        def sampler_log_probs(logits, tokens, temperature=1.0, top_k=None, top_p=None, renormalize=True):
""" + CHECKS + """
            z = logits.double() / temperature
            if renormalize:
                rank = z.argsort(dim=-1, descending=True).argsort(dim=-1)
                above = (z.unsqueeze(-2) > z.unsqueeze(-1)).sum(dim=-1)  # how many z are larger: ties share it
                keep = above < (top_k if top_k else V)
                if top_p is not None and top_p != 1.0:
                    p = torch.where(keep, z, torch.tensor(float("-inf"), dtype=z.dtype)).softmax(-1)
                    p_sorted = p.sort(dim=-1, descending=True).values
                    excl = torch.cat([torch.zeros_like(p_sorted[..., :1]), p_sorted.cumsum(-1)[..., :-1]], dim=-1)
                    n_keep = (excl < top_p).sum(dim=-1, keepdim=True)
                    keep = keep & (rank < n_keep)
                z = torch.where(keep, z, torch.tensor(float("-inf"), dtype=z.dtype))
            log_p = z - torch.logsumexp(z, dim=-1, keepdim=True)
            return torch.gather(log_p, -1, tokens.unsqueeze(-1)).squeeze(-1).to(logits.dtype)
    """

MISTAKES = {
    # the nucleus of the whole distribution, then cut to k: more tokens than the nucleus of the top k
    "top_p_before_top_k": Mistake(
        "applies top-p to the whole distribution before top-k, instead of top-k first and top-p within it",
        edited(RANKS, ("keep = above < (top_k if top_k else V)\n", "keep = torch.ones_like(rank, dtype=torch.bool)\n"),
                                      ("keep = keep & (rank < n_keep)", "keep = keep & (rank < n_keep)\n"
                                       "                if top_k:\n"
                                       "                    keep = keep & (above < top_k)")),
        ["top_k_20_then_top_p_0.8_float32_N12_V64", "large_vocab_N8_V512_top_k_50_top_p_0.95"]),
    # cumsum < top_p with the token itself: the token whose probability crosses top_p is dropped
    "cumsum_includes_the_token": Mistake(
        "compares the cumulative probability including the token itself with top_p, dropping the token that crosses it",
        edited(SORT, ("before = torch.cumsum(probs, dim=-1) - probs", "before = torch.cumsum(probs, dim=-1)")),
        ["top_p_0.9_float32_N12_V32", "top_p_0.5_float32_N8_V64",
         "top_k_20_then_top_p_0.8_float32_N12_V64"]),
    # log_softmax over the whole vocabulary, -inf only put on the dropped tokens
    "no_renormalisation": Mistake(
        "puts -inf on the dropped tokens without renormalising the kept ones",
        edited(SORT, ('log_p = torch.log_softmax(z.masked_fill(~keep, float("-inf")), dim=-1)',
                                             'log_p = torch.log_softmax(z, dim=-1).masked_fill(~keep, float("-inf"))')),
        ["top_k_10_float32_N8_V32", "top_p_0.9_float32_N12_V32"]),
    "renormalised_when_not_asked": Mistake(
        "renormalises over the kept tokens even when renormalize is False",
        edited(VLLM, ("            if not renormalize:\n"
                                                      "                return torch.log_softmax(z, dim=-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)\n", "")),
        ["renormalize_false_top_k_10_top_p_0.9_N8_V32",
         "renormalize_false_temperature_0.8_N8_V32"]),
    "temperature_not_applied": Mistake(
        "never divides the logits by the temperature",
        edited(SORT, ("z = logits / temperature", "z = logits")),
        ["temperature_0.7_top_p_0.9_N8_V32", "temperature_0.5_no_truncation_N8_V32"]),
    # log p / T after the softmax: neither the distribution nor its truncation is the sampler's
    "temperature_after_the_softmax": Mistake(
        "divides the log-probs by the temperature after the softmax instead of the logits before it",
        edited(SORT, ("z = logits / temperature", "z = torch.log_softmax(logits, dim=-1)"),
                                                 ("return log_p.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)",
                                                  "return log_p.gather(-1, tokens.unsqueeze(-1)).squeeze(-1) / temperature"),
                                                 ("return torch.log_softmax(z, dim=-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)",
                                                  "return z.gather(-1, tokens.unsqueeze(-1)).squeeze(-1) / temperature")),
        ["temperature_1.5_top_k_8_N8_V32", "temperature_0.5_no_truncation_N8_V32"]),
    "top_k_keeps_k_plus_1": Mistake(
        "keeps k + 1 tokens for top-k instead of k",
        edited(SORT, ("sorted_z[..., top_k - 1:top_k]", "sorted_z[..., top_k:top_k + 1]")),
        ["top_k_10_float32_N8_V32", "top_k_1_N8_V32", "temperature_1.5_top_k_8_N8_V32"]),
    # a cut at the k-th place of a sort: of two equal logits there, one is kept and one dropped
    "top_k_splits_ties": Mistake(
        "keeps exactly k tokens for top-k, splitting a tie at the k-th place, instead of every token "
        "whose scaled logit is at least the k-th largest",
        edited(SORT, ("keep_sorted &= sorted_z >= sorted_z[..., top_k - 1:top_k]", "keep_sorted[..., top_k:] = False")),
        ["top_k_6_tie_at_the_kth_place_N8_V32", "float64_top_k_3_tie_at_the_kth_place_temperature_0.8_N4_V16"]),
    # a large negative number instead of -inf: the dropped tokens get a finite log-prob
    "dropped_tokens_finite": Mistake(
        "masks the dropped tokens with a large negative number instead of -inf, giving them a finite log-prob",
        edited(SORT, ('log_p = torch.log_softmax(z.masked_fill(~keep, float("-inf")), dim=-1)',
                                                'log_p = torch.log_softmax(z.masked_fill(~keep, -1e9), dim=-1)')),
        ["top_k_10_float32_N8_V32", "top_p_0.9_float32_N12_V32"]),
    # top_k = 0 taken as "keep 0" (topk of 0 values): the off value not honoured
    "top_k_0_not_off": Mistake(
        "reads top_k = 0 as keeping 0 tokens instead of as no top-k",
        edited(VLLM, ("if top_k:", "if top_k is not None:")),
        ["top_k_0_top_p_1_temperature_1.2_N8_V32"]),
    "always_float32": Mistake(
        "computes in float32 always: float64 or bfloat16 logits must give log-probs of their own dtype",
        edited(SORT, ("z = logits / temperature", "z = logits.float() / temperature")),
        ["float64_top_k_12_top_p_0.85_N8_V48", "bfloat16_top_k_12_top_p_0.9_temperature_0.5_N8_V32"]),
    "settings_not_checked": Mistake(
        "accepts a temperature <= 0 or top_p outside (0, 1] instead of raising ValueError",
        edited(SORT, ('raise ValueError("temperature must be positive")', "pass"),
                                        ('raise ValueError("top_p must be in (0, 1]")', "pass")),
        ["error_temperature_negative", "error_top_p_1.5"]),
}

"""The grader's side of `sampler_log_probs` (notebook 15): how its hidden cases are drawn, the correct
versions that must earn full marks and the known mistakes that must lose them, each with the
sentence a student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox,
which hold the folder's __init__.py only.

Hidden cases of `sampler_log_probs(logits, tokens, temperature=1.0, top_k=None, top_p=None,
renormalize=True) -> (...)` (notebook 15): the log-prob of each token under the distribution a
sampler draws from: z = logits / temperature, every z at least the k-th largest kept (top_k: a tie
at the k-th place is kept whole), then among those the smallest prefix (by the top-k-renormalised
probability, descending) whose cumulative probability reaches top_p (a token is kept iff the
probability strictly before it sums to < top_p), then log_softmax over the kept z (-inf outside);
renormalize=False: log_softmax(z) over the whole vocabulary.

Logits are N(0, scale^2) (scale 1.5 to 3), in float32, float64 and bfloat16, of shapes (N, V),
(B, T, V) and (V,), V from 16 to 512. Every row is drawn again until its kept set is decided with
room: no two z within 1e-4 of each other, the k-th and (k+1)-th z at least 1e-3 apart, and no
cumulative probability within 1e-3 of top_p (there the kept set is undefined; 0.05 for bfloat16
logits, whose probabilities round at 2^-8, and whose rows are drawn on bfloat16's grid). The
`*_tie_at_the_kth_place_*` cases then plant, in every row, a tie: the (k+1)-th largest logit set
equal to the k-th (equal in every dtype), so that top-k keeps k + 1 tokens. The tokens of each
row are, in turn, the last token kept (the one whose probability crosses top_p or the k-th
largest), the first token dropped, a kept token and any token; in a tie row, the two tied tokens,
a kept token and the first token dropped. Error cases must raise ValueError: their output is
{"raises": "ValueError"}, {"raises": "other"} or {"raises": None}.

Outputs: the log-probs (-inf where a token is dropped) and whether the caller's tensors were left
unchanged. No gradient: a sampler's log-probs are data.

What the cases are built to catch:

- every top-p case (the last token kept is among the tokens): the cumulative sum taken with the
  token itself (cumsum < top_p drops the token that crosses top_p), a cumsum <= top_p;
- `top_k_*`: top-k keeping k + 1 tokens (`>` against the (k+1)-th value), or k - 1;
- `*_tie_at_the_kth_place_*`: top-k that keeps exactly k tokens (a sort or a rank cut at k)
  where the k-th largest ties with the next: one tied token gets -inf, the others another
  normalisation;
- `top_k_20_then_top_p_0.8_*`, `large_vocab_*`: top-p applied before top-k (the nucleus of
  the whole distribution, then cut to k: more tokens kept than the nucleus of the top k);
- every truncated case with renormalize=True: log_softmax over the whole vocabulary where the
  kept set's is asked (no renormalisation), a dropped token given a finite log-prob;
- `renormalize_false_*`: renormalising when not asked;
- `temperature_*`: the temperature not applied, applied after the softmax (log p / T), or
  multiplied instead of divided;
- `top_k_1_*`, `top_p_0.05_*` (only the most likely token kept: log p = 0 there), `top_k_V_*`,
  `top_k_0_top_p_1_*` (the off values), `defaults_*` (no keyword passed);
- `float64_*`, `bfloat16_*`: the log-probs computed or returned in float32 (a tensor of
  another dtype than the logits'); `3d_*`, `vector_1d_*`: shapes;
- errors: temperature 0 and negative, top_k -1 and V + 1, top_p 0 and 1.5, tokens of another shape.
"""

from __future__ import annotations

import torch

from autograder.mistakes import edited, Mistake


# ---------------------------------------------------------------- the hidden cases
# each error case and the phrase of the reference's `Raises:` section that states it (tests/test_contracts.py)
RAISES = {
    "error_temperature_0": "temperature <= 0",
    "error_temperature_negative": "temperature <= 0",
    "error_top_k_negative": "top_k < 0 or > V",
    "error_top_k_above_V": "top_k < 0 or > V",
    "error_top_p_0": "top_p outside (0, 1]",
    "error_top_p_1.5": "top_p outside (0, 1]",
    "error_tokens_shape": "tokens whose shape is not logits.shape[:-1]",
}
ARGS = ("temperature", "top_k", "top_p", "renormalize")


def _kept_count(z: torch.Tensor, top_k, top_p, margin: float = 1e-3) -> tuple[int, bool]:
    """(how many tokens the sampler keeps, whether that is decided with room) for one row of z
    (float64) without ties, sorted descending: the kept set is always a prefix of that order.
    `margin`: how far every cumulative probability must stay from top_p."""
    s = z.sort(descending=True).values
    V = len(s)
    ok = bool((s[:-1] - s[1:]).min() > 1e-4) if V > 1 else True
    n = top_k if top_k else V
    if n < V:
        ok = ok and bool(s[n - 1] - s[n] > 1e-3)
    if top_p is not None and top_p < 1:
        probs = torch.softmax(s[:n], -1)
        before = torch.cat([probs.new_zeros(1), probs.cumsum(-1)[:-1]])
        ok = ok and bool((before - top_p).abs().min() > margin)
        n = int((before < top_p).sum())
    return n, ok


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    def rows(N, V, scale, temperature, top_k, top_p, dtype, tie):
        """(N, V) float64 logits whose kept sets are decided with room (on `dtype`'s grid), and (N,)
        tokens; with `tie`, each row's (k+1)-th largest logit set equal to its k-th."""
        grid = dtype == torch.bfloat16  # float32's and float64's rounding is far inside the margins
        margin = 0.05 if grid else 1e-3
        logits, tokens = torch.zeros(N, V, dtype=torch.float64), torch.zeros(N, dtype=torch.long)
        for i in range(N):
            for _ in range(1000):
                row = scale * torch.randn(V, generator=gen, dtype=torch.float64)
                if grid:
                    row = row.to(dtype).double()
                # a tie row: decided with room for k + 1 tokens before its tie is planted
                n, ok = _kept_count(row / temperature, top_k + 1 if tie else top_k, top_p, margin)
                if ok:
                    break
            else:
                raise RuntimeError("no row of logits with a kept set decided with room")
            order = (row / temperature).argsort(descending=True)
            pick = int(torch.randint(0, n, (), generator=gen))
            if tie:
                row[order[top_k]] = row[order[top_k - 1]]
                candidates = [order[top_k - 1], order[top_k], order[pick], order[n] if n < V else order[0]]
            else:
                anywhere = int(torch.randint(0, V, (), generator=gen))
                candidates = [order[n - 1], order[n] if n < V else order[0], order[pick], anywhere]
            logits[i], tokens[i] = row, int(candidates[i % 4])
        return logits, tokens

    def case(shape, V, dtype=torch.float32, scale=2.0, tie=False, **kwargs):
        settings = {"temperature": 1.0, "top_k": None, "top_p": None, **kwargs}
        settings.pop("renormalize", None)
        N = 1
        for s in shape:
            N *= s
        logits, tokens = rows(N, V, scale, settings["temperature"], settings["top_k"], settings["top_p"], dtype, tie)
        return {"logits": logits.view(*shape, V).to(dtype), "tokens": tokens.view(shape), "kwargs": kwargs,
                "expect_error": False}

    def error(shape=(3, 16), tokens_shape=(3,), **kwargs):
        return {"logits": torch.randn(*shape, generator=gen), "tokens": torch.zeros(tokens_shape, dtype=torch.long),
                "kwargs": kwargs, "expect_error": True}

    return [
        ("top_k_10_float32_N8_V32", case((8,), 32, top_k=10)),
        ("top_p_0.9_float32_N12_V32", case((12,), 32, top_p=0.9)),
        ("top_p_0.5_float32_N8_V64", case((8,), 64, scale=1.5, top_p=0.5)),
        ("top_k_20_then_top_p_0.8_float32_N12_V64", case((12,), 64, scale=1.5, top_k=20, top_p=0.8)),
        ("temperature_0.7_top_p_0.9_N8_V32", case((8,), 32, temperature=0.7, top_p=0.9)),
        ("temperature_1.5_top_k_8_N8_V32", case((8,), 32, temperature=1.5, top_k=8)),
        ("temperature_0.5_no_truncation_N8_V32", case((8,), 32, temperature=0.5)),
        ("renormalize_false_top_k_10_top_p_0.9_N8_V32", case((8,), 32, top_k=10, top_p=0.9, renormalize=False)),
        ("renormalize_false_temperature_0.8_N8_V32", case((8,), 32, temperature=0.8, top_p=0.7, renormalize=False)),
        ("top_k_1_N8_V32", case((8,), 32, top_k=1)),
        ("top_p_0.05_N8_V32", case((8,), 32, top_p=0.05)),
        ("top_k_V_N8_V16", case((8,), 16, top_k=16)),
        ("top_k_0_top_p_1_temperature_1.2_N8_V32", case((8,), 32, temperature=1.2, top_k=0, top_p=1.0)),
        ("defaults_N8_V32", case((8,), 32)),
        ("float64_top_k_12_top_p_0.85_N8_V48", case((8,), 48, dtype=torch.float64, top_k=12, top_p=0.85)),
        ("bfloat16_top_k_12_top_p_0.9_temperature_0.5_N8_V32",
         case((8,), 32, dtype=torch.bfloat16, temperature=0.5, top_k=12, top_p=0.9)),
        ("top_k_6_tie_at_the_kth_place_N8_V32", case((8,), 32, tie=True, top_k=6)),
        ("float64_top_k_3_tie_at_the_kth_place_temperature_0.8_N4_V16",
         case((4,), 16, dtype=torch.float64, tie=True, temperature=0.8, top_k=3)),
        ("3d_B2_T4_V32_top_p_0.9", case((2, 4), 32, top_p=0.9, temperature=0.9)),
        ("vector_1d_V24_top_k_5", case((), 24, top_k=5)),
        ("large_vocab_N8_V512_top_k_50_top_p_0.95", case((8,), 512, scale=3.0, top_k=50, top_p=0.95)),
        ("error_temperature_0", error(temperature=0.0)),
        ("error_temperature_negative", error(temperature=-1.0)),
        ("error_top_k_negative", error(top_k=-1)),
        ("error_top_k_above_V", error(top_k=17)),
        ("error_top_p_0", error(top_p=0.0)),
        ("error_top_p_1.5", error(top_p=1.5)),
        ("error_tokens_shape", error(tokens_shape=(3, 1))),
    ]


# ---------------------------------------------------------------- the correct versions
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

# the correct version 'sort_once_prefix_scatter' (autograder/graded/sampler_log_probs/test_sampler_log_probs.py), which the edits start from
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

# the correct version 'vllm_ascending_cumsum' (autograder/graded/sampler_log_probs/test_sampler_log_probs.py), which the edits start from
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

# the correct version 'float64_ranks_where' (autograder/graded/sampler_log_probs/test_sampler_log_probs.py), which the edits start from
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


CORRECT = {
    # one sort: the kept set is a prefix of the descending order
    "sort_once_prefix_scatter": SORT,
    # Python floats, one row at a time
    "loop_over_rows_python_floats": """
        import math
        import torch
        def sampler_log_probs(logits, tokens, temperature=1.0, top_k=None, top_p=None, renormalize=True):
""" + CHECKS + """
            flat = logits.reshape(-1, V).double().tolist()
            toks = tokens.reshape(-1).tolist()
            out = []
            for row, tok in zip(flat, toks):
                z = [x / temperature for x in row]
                top = max(z)
                if not renormalize:
                    out.append(z[tok] - top - math.log(sum(math.exp(x - top) for x in z)))
                    continue
                order = sorted(range(V), key=lambda i: z[i], reverse=True)
                if top_k:
                    kth = z[order[top_k - 1]]
                    order = [i for i in order if z[i] >= kth]  # a tie at the k-th place is kept whole
                if top_p is not None and top_p < 1.0:
                    norm = sum(math.exp(z[i] - top) for i in order)
                    kept, acc = [], 0.0
                    for i in order:
                        if acc >= top_p:
                            break
                        kept.append(i)
                        acc += math.exp(z[i] - top) / norm
                    order = kept
                if tok in order:
                    out.append(z[tok] - top - math.log(sum(math.exp(z[i] - top) for i in order)))
                else:
                    out.append(float("-inf"))
            return torch.tensor(out, dtype=logits.dtype).reshape(tokens.shape)
    """,
    # the way vLLM writes it: top-k by the k-th value, then top-p on the ascending sort, dropping
    # the tokens whose cumulative probability from below is <= 1 - p (the last one always stays)
    "vllm_ascending_cumsum": VLLM,
    # float64 inside, ranks from argsort of argsort, an exclusive cumsum by concatenation
    "float64_ranks_where": RANKS,
}


# ---------------------------------------------------------------- the known mistakes
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

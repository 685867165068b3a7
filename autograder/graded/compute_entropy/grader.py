"""The grader's side of `compute_entropy` (notebook 02): how its hidden cases are drawn, the correct
versions that must earn full marks and the known mistakes that must lose them, each with the
sentence a student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox,
which hold the folder's __init__.py only.

Hidden cases of `compute_entropy(logits) -> (...,)`: shapes, dtypes and extreme logits the
visible checks of notebook 02 do not try.
"""

from __future__ import annotations

import torch

from autograder.mistakes import Mistake


# ---------------------------------------------------------------- the hidden cases
def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    def randn(*shape, scale=1.0, dtype=torch.float32):
        return (torch.randn(*shape, generator=gen, dtype=torch.float64) * scale).to(dtype)

    one_hot = torch.zeros(3, 17)
    one_hot[torch.arange(3), torch.randint(0, 17, (3,), generator=gen)] = 1e4
    two_way = torch.full((2, 9), -1e4)
    two_way[:, 2] = 1e4
    two_way[:, 5] = 1e4  # two tied tokens far above the rest: exactly log 2
    # one token 13 nats above 31999 others (each p = 2e-6): an entropy of many small probabilities, which
    # log(p + eps) biases by about V * eps while the float32 rounding of any order of the sum stays below that
    peaked = torch.full((2, 32000), -13.0)
    peaked[:, 7] = 0.0
    return [
        ("float32_2x3x11", {"logits": randn(2, 3, 11, scale=2.0)}),
        ("float32_leading_dims_2x3x4x6", {"logits": randn(2, 3, 4, 6)}),
        ("float32_vector_V29", {"logits": randn(29, scale=3.0)}),
        ("float64_4x7", {"logits": randn(4, 7, scale=5.0, dtype=torch.float64)}),
        ("bfloat16_3x5x1000", {"logits": randn(3, 5, 1000, scale=4.0, dtype=torch.bfloat16)}),
        ("float16_2x513", {"logits": randn(2, 513, scale=3.0, dtype=torch.float16)}),
        ("V1_5x1", {"logits": randn(5, 1)}),
        ("T1_3x1x50", {"logits": randn(3, 1, 50)}),
        ("magnitude_1e4_4x64", {"logits": randn(4, 64, scale=1e4)}),
        ("one_hot_1e4_3x17", {"logits": one_hot}),
        ("two_tied_1e4_2x9", {"logits": two_way}),
        ("shifted_by_1e4_4x300", {"logits": randn(4, 300, scale=2.0) + 1e4}),
        ("negative_shift_1e4_2x100", {"logits": randn(2, 100, scale=2.0) - 1e4}),
        ("uniform_2x32000", {"logits": torch.zeros(2, 32000)}),
        ("peaked_2x32000", {"logits": peaked}),
        ("float32_2x4x32000", {"logits": randn(2, 4, 32000, scale=3.0)}),
        ("empty_batch_0x10", {"logits": torch.zeros(0, 10)}),
    ]


# ---------------------------------------------------------------- the correct versions
CORRECT = {
    "log_softmax": """
        import torch
        def compute_entropy(logits):
            lp = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
            return -(lp.exp() * lp).sum(-1)
    """,
    "softmax_entr": """
        import torch
        def compute_entropy(logits):
            p = torch.softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
            return torch.special.entr(p).sum(dim=-1)
    """,
    "max_shift_by_hand": """
        import torch
        def compute_entropy(logits):
            x = logits if logits.dtype in (torch.float32, torch.float64) else logits.float()
            z = x - x.max(dim=-1, keepdim=True).values
            log_p = z - torch.log(torch.exp(z).sum(dim=-1, keepdim=True))
            return -(torch.exp(log_p) * log_p).sum(dim=-1)
    """,
    "float64_inside": """
        import torch
        def compute_entropy(logits):
            out_dtype = torch.promote_types(logits.dtype, torch.float32)
            lp = torch.log_softmax(logits.double(), dim=-1)
            return (-(lp.exp() * lp).sum(-1)).to(out_dtype)
    """,
}


# ---------------------------------------------------------------- the known mistakes
MISTAKES = {
    # torch.distributions normalises the logits by subtracting their logsumexp: at magnitude 1e4 that
    # difference of two large floats loses ~1e-3 in log p (rounding scale, but not the exact contract)
    "categorical_distribution": Mistake(
        "uses torch.distributions.Categorical, whose log-probs lose precision for logits shifted far from 0 (1e4)",
        """
        import torch
        def compute_entropy(logits):
            x = logits.to(torch.promote_types(logits.dtype, torch.float32))
            if x.numel() == 0:
                return x.sum(-1)
            return torch.distributions.Categorical(logits=x).entropy()
    """,
        ["shifted_by_1e4_4x300"],
        # it fails only where its own float32 rounding holds the truth (its float64 run is exact): a function
        # right there matches it, so no case tells it from a correct one (autograder.signatures)
        recognisable=False),
    "log_of_softmax": Mistake(
        "takes log(softmax(x)) in float32, which gives log(0) = -inf and 0 * -inf = NaN where a probability underflows",
        """
        import torch
        def compute_entropy(logits):
            p = torch.softmax(logits.float(), dim=-1)
            return -(p * torch.log(p)).sum(-1)
    """,
        ["magnitude_1e4_4x64", "one_hot_1e4_3x17"]),
    # its bias (about V * 1e-8 nats) is within the rounding a correct float32 sum of V = 32000 terms may have in
    # another order on the uniform and the random float32 draws (0.33 of the uniform case's tolerance); the peaked
    # case, whose sum of p log p is small, misses by 2.4 times its tolerance
    "log_of_softmax_plus_eps": Mistake(
        "takes log(p + 1e-8) instead of log_softmax, which biases the entropy of many small probabilities",
        """
        import torch
        def compute_entropy(logits):
            p = torch.softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
            return -(p * torch.log(p + 1e-8)).sum(-1)
    """,
        ["peaked_2x32000"]),
    "logsumexp_minus_expected_logit": Mistake(
        "computes logsumexp(z) - sum(p * z), which cancels catastrophically for logits shifted far from 0",
        """
        import torch
        def compute_entropy(logits):
            z = logits.to(torch.promote_types(logits.dtype, torch.float32))
            return torch.logsumexp(z, -1) - (torch.softmax(z, -1) * z).sum(-1)
    """,
        ["shifted_by_1e4_4x300"],
        # it fails only where its own float32 rounding holds the truth (its float64 run is exact): a function
        # right there matches it, so no case tells it from a correct one (autograder.signatures)
        recognisable=False),
    "no_upcast_of_half_precision": Mistake(
        "computes in bfloat16 or float16 as given instead of upcasting to float32 first",
        """
        import torch
        def compute_entropy(logits):
            lp = torch.log_softmax(logits, dim=-1)
            return -(lp.exp() * lp).sum(-1)
    """,
        ["bfloat16_3x5x1000", "float16_2x513"]),
    "float64_cast_down_to_float32": Mistake(
        "casts float64 logits down to float32: a float64 input must give a float64 entropy",
        """
        import torch
        def compute_entropy(logits):
            lp = torch.log_softmax(logits.float(), dim=-1)
            return -(lp.exp() * lp).sum(-1)
    """,
        ["float64_4x7"]),
    "log2_bits": Mistake(
        "divides by log 2: the entropy in bits instead of in nats",
        """
        import torch
        def compute_entropy(logits):
            lp = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
            return -(lp.exp() * lp).sum(-1) / 0.6931471805599453
    """,
        ["float32_2x3x11"]),
    "in_place_max_shift": Mistake(
        "subtracts the row maximum in place, changing the caller's logits",
        """
        import torch
        def compute_entropy(logits):
            logits -= logits.max(dim=-1, keepdim=True).values
            lp = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
            return -(lp.exp() * lp).sum(-1)
    """,
        ["float32_2x3x11"]),
    "minus_sign_dropped": Mistake(
        "drops the minus sign: returns sum(p * log p), which is minus the entropy",
        """
        import torch
        def compute_entropy(logits):
            lp = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
            return (lp.exp() * lp).sum(-1)
    """,
        ["float32_2x3x11"]),
    # notebook 02's visible check: "float32 logits should give float32 entropies"
    "float64_returned": Mistake(
        "computes in float64 and returns float64 entropies: float32 logits must give float32",
        """
        import torch
        def compute_entropy(logits):
            lp = torch.log_softmax(logits.double(), dim=-1)
            return -(lp.exp() * lp).sum(-1)
    """,
        ["float32_2x3x11", "bfloat16_3x5x1000"]),
}

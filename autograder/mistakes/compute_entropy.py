"""The known mistakes of `compute_entropy` (notebook 02): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake


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

"""The known mistakes of `final_logits_softcap` (notebook 08): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake


CAPPED = ["beyond_cap_float32_2x3x11_cap30", "beyond_cap_float32_4x50_cap5", "inside_cap_float32_3x7_cap50"]

MISTAKES = {
    # tanh of the capped logits again: 40 -> 26.1 -> 21.0
    "softcap_applied_twice": Mistake(
        "applies the cap twice: cap * tanh(cap * tanh(x / cap) / cap)",
        """
        import torch
        def final_logits_softcap(logits, cap):
            if not cap:
                return logits
            once = cap * torch.tanh(logits / cap)
            return cap * torch.tanh(once / cap)
    """,
        CAPPED[:2]),
    # the logits times the tanh: neither bounded nor ~x inside the cap
    "softcap_as_logits_times_tanh": Mistake(
        "returns logits * tanh(logits / cap) instead of cap * tanh(logits / cap)",
        """
        import torch
        def final_logits_softcap(logits, cap):
            if not cap:
                return logits
            return logits * torch.tanh(logits / cap)
    """,
        ["beyond_cap_float32_4x50_cap5", "inside_cap_float32_3x7_cap50"]),
    # tanh alone: in (-1, 1), not in (-cap, cap)
    "softcap_not_scaled_back_by_the_cap": Mistake(
        "returns tanh(logits / cap) without multiplying back by the cap: values in (-1, 1), not (-cap, cap)",
        """
        import torch
        def final_logits_softcap(logits, cap):
            if not cap:
                return logits
            return torch.tanh(logits / cap)
    """,
        CAPPED),
    # only None is "no cap": a cap of 0 divides by zero
    "softcap_cap_0_divides_by_zero": Mistake(
        "treats only None as no cap, so a cap of 0 divides by zero",
        """
        import torch
        def final_logits_softcap(logits, cap):
            if cap is None:
                return logits
            return cap * torch.tanh(logits / cap)
    """,
        ["cap_0_2x8_unchanged", "cap_0.0_with_zero_logits_unchanged"]),
    # only 0 is "no cap": None reaches the division
    "softcap_cap_None_not_handled": Mistake(
        "treats only 0 as no cap, so a cap of None reaches the division",
        """
        import torch
        def final_logits_softcap(logits, cap):
            if cap == 0:
                return logits
            return cap * torch.tanh(logits / cap)
    """,
        ["cap_None_2x3x11_unchanged", "cap_None_float64_4x6_unchanged"]),
    # in place: the caller's logits are the capped ones afterwards
    "softcap_in_place_on_the_callers_logits": Mistake(
        "caps in place, changing the caller's logits",
        """
        import torch
        def final_logits_softcap(logits, cap):
            if not cap:
                return logits
            return logits.div_(cap).tanh_().mul_(cap)
    """,
        ["no_grad_input_3x5_cap30"]),
    # a hard clip: equal inside the cap only where |logits| is far below it, and no gradient beyond it
    "clamp_instead_of_tanh": Mistake(
        "clamps the logits to [-cap, cap] instead of cap * tanh(logits / cap)",
        """
        import torch
        def final_logits_softcap(logits, cap):
            if not cap:
                return logits
            return logits.clamp(-cap, cap)
    """,
        CAPPED),
    # always float32: float64 logits must stay float64
    "always_float32": Mistake(
        "computes in float32 always: float64 logits must stay float64",
        """
        import torch
        def final_logits_softcap(logits, cap):
            if not cap:
                return logits
            return cap * torch.tanh(logits.float() / cap)
    """,
        ["float64_3x4x13_cap7.5"]),
    # notebook 08's visible check: "the gradient should be 1 - tanh^2(z / c): do not detach"
    "softcap_without_a_graph": Mistake(
        "computes the cap under torch.no_grad(), so the capped logits have no gradient",
        """
        import torch
        def final_logits_softcap(logits, cap):
            if not cap:
                return logits
            with torch.no_grad():
                return cap * torch.tanh(logits / cap)
    """,
        ["beyond_cap_float32_2x3x11_cap30", "inside_cap_float32_3x7_cap50"]),
}

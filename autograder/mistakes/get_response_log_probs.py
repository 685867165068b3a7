"""The known mistakes of `get_response_log_probs` (notebook 03): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake


GRLP_BASE = """
    import torch
    def log_probs_from_logits(logits, labels):
        lp = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
        return lp.gather(-1, labels[..., None]).squeeze(-1)
    def entropy_from_logits(logits):
        with torch.no_grad():
            lp = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
            return -(lp.exp() * lp).sum(-1)
    def get_response_log_probs(model, input_ids, labels, return_token_entropy=False):
        logits = model(input_ids).logits
        return {"log_probs": log_probs_from_logits(logits, labels),
                "token_entropy": entropy_from_logits(logits) if return_token_entropy else None}
"""


def grlp(old: str, new: str) -> str:
    """The log_softmax version with one part replaced (a mistake is one such replacement)."""
    assert old in GRLP_BASE, old
    return GRLP_BASE.replace(old, new)


MISTAKES = {
    # the labels are already shifted by tokenize_prompt_and_output
    "shifted_again": Mistake(
        "shifts logits and labels by one again, though the labels are already shifted",
        grlp('"log_probs": log_probs_from_logits(logits, labels)',
                               '"log_probs": log_probs_from_logits(logits[:, :-1], labels[:, 1:])'),
        ["float32_B2_T5_V11_entropy"]),
    "entropy_with_a_graph": Mistake(
        "computes the token entropy with a graph, where it is a diagnostic without gradients",
        grlp("        with torch.no_grad():\n            lp", "        if True:\n            lp"),
        ["float32_B2_T5_V11_entropy"]),
    "entropy_even_when_not_asked": Mistake(
        "returns the token entropy even when return_token_entropy is False, where it must be None",
        grlp(" if return_token_entropy else None", ""),
        ["float32_B3_T4_V7_no_entropy"]),
    # no gradient reaches the model: the SFT step would train nothing
    "model_run_without_grad": Mistake(
        "runs the model under no_grad, so no gradient reaches it",
        grlp("logits = model(input_ids).logits",
                                        "with torch.no_grad():\n            logits = model(input_ids).logits"),
        ["float32_B2_T5_V11_entropy"]),
    "always_float32": Mistake(
        "computes the log-probs in float32 always: a float64 model's log-probs must stay float64",
        grlp("logits.to(torch.promote_types(logits.dtype, torch.float32))", "logits.float()"),
        ["float64_B2_T6_V13"]),
    # log(softmax) is -inf where a probability underflows (logits of magnitude 1e4)
    "log_of_softmax": Mistake(
        "takes log(softmax(logits)), which is -inf where a probability underflows, instead of log_softmax",
        grlp(
            "lp = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)\n        return lp.gather",
            "lp = torch.log(torch.softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1))\n        return lp.gather"),
        ["logits_magnitude_1e4"]),
    # bfloat16 logits scored in bfloat16: about two digits
    "no_upcast_of_half_precision": Mistake(
        "scores bfloat16 logits in bfloat16 instead of upcasting to float32 first",
        grlp(
            "lp = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)\n        return lp.gather",
            "lp = torch.log_softmax(logits, dim=-1)\n        return lp.gather"),
        ["bfloat16_B2_T6_V300"]),
}

"""The grader's side of `get_response_log_probs` (notebook 03): how its hidden cases are drawn, the
correct versions that must earn full marks and the known mistakes that must lose them, each with the
sentence a student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox,
which hold the folder's __init__.py only.

Hidden cases of `get_response_log_probs(model, input_ids, labels, return_token_entropy=False)`.

The model is a small causal LM built here from the case's weights (embedding -> causal running
mean -> tanh -> output head), so the inputs are plain tensors. Outputs: the log-probs, the
entropies (or None), whether the entropy carries a graph, and, for float32/float64 models, the
gradients of the parameters through a weighted sum of the log-probs.

The truth (`truth`) is the exact log-softmax, in float64, of *the model's own logits*: the model
runs in its own precision, as it does for any student (a bfloat16 model's forward rounds its
logits before any graded code sees them), and the graded part, everything after the logits, is
exact; its gradient flows back through the model in the model's precision.

In the notebook this cell calls the student's own `log_probs_from_logits` (the course_lib one is
a tripwire while grading) and the given `entropy_from_logits`, so every version below brings its
log-prob helper along.
"""

from __future__ import annotations

import torch

from autograder.graded.get_response_log_probs import TinyCausalLM
from autograder.graded.log_probs_from_logits.grader import REFERENCE as CHUNKED_LOG_PROBS
from autograder.mistakes import Mistake


# ---------------------------------------------------------------- the hidden cases
def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    def case(B, T, V, H=8, scale=3.0, dtype=torch.float32, entropy=True, labels=None):
        emb = torch.randn(V, H, generator=gen, dtype=torch.float64).to(dtype)
        head = torch.randn(V, H, generator=gen, dtype=torch.float64).to(dtype)
        ids = torch.randint(0, V, (B, T), generator=gen)
        lab = torch.randint(0, V, (B, T), generator=gen) if labels is None else labels
        weights = torch.randn(B, T, generator=gen)
        return {"embedding": emb, "head": head, "scale": scale, "input_ids": ids, "labels": lab,
                "weights": weights, "return_token_entropy": entropy,
                "backward": dtype in (torch.float32, torch.float64)}  # low-precision weights: the forward only

    edge = torch.tensor([[0, 12, 12, 0, 5], [12, 0, 1, 11, 12]])
    return [
        ("float32_B2_T5_V11_entropy", case(2, 5, 11)),
        ("float32_B3_T4_V7_no_entropy", case(3, 4, 7, entropy=False)),
        ("float64_B2_T6_V13", case(2, 6, 13, dtype=torch.float64)),
        ("bfloat16_B2_T6_V300", case(2, 6, 300, dtype=torch.bfloat16)),
        ("T1_B4_V9", case(4, 1, 9)),
        ("V1_B2_T3", case(2, 3, 1)),
        ("B1_T1_V1_no_entropy", case(1, 1, 1, entropy=False)),
        ("labels_at_vocab_edges_V13", case(2, 5, 13, labels=edge)),
        ("logits_magnitude_1e4", case(2, 4, 17, scale=3e3)),
        ("large_vocab_B2_T8_V5000", case(2, 8, 5000, H=4)),
        ("many_chunks_B2_T300_V8000", case(2, 300, 8000, H=4, scale=2.0)),
    ]


def truth(inputs: dict) -> dict:
    model = TinyCausalLM(inputs["embedding"], inputs["head"], inputs["scale"])
    logits = model(inputs["input_ids"]).logits  # (B, T, V) in the model's own precision
    log_p = torch.log_softmax(logits.double(), dim=-1)
    log_probs = log_p.gather(-1, inputs["labels"][..., None])[..., 0]
    entropy = -(log_p.exp() * log_p).sum(-1).detach() if inputs["return_token_entropy"] else None
    result = {"log_probs": log_probs, "token_entropy": entropy, "token_entropy_requires_grad": False}
    if inputs["backward"]:
        (log_probs * inputs["weights"].double()).sum().backward()
        result["grad_embedding"] = model.embedding.grad.double()
        result["grad_head"] = model.head.grad.double()
    return result


# ---------------------------------------------------------------- the correct versions
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


CORRECT = {
    "log_softmax_gather": GRLP_BASE,
    # the notebook's path: the chunked custom Function of the cell above and the given entropy helper
    "chunked_custom_function": CHUNKED_LOG_PROBS + """
    from course_lib.logprobs import entropy_from_logits
    def get_response_log_probs(model, input_ids, labels, return_token_entropy=False):
        logits = model(input_ids).logits
        log_probs = log_probs_from_logits(logits, labels)
        token_entropy = entropy_from_logits(logits) if return_token_entropy else None
        return {"log_probs": log_probs, "token_entropy": token_entropy}
    """,
    # log p = -cross-entropy of each position; the entropy from notebook 02's compute_entropy
    "cross_entropy_per_token": """
        import torch
        import torch.nn.functional as F
        from course_lib import compute_entropy
        def log_probs_from_logits(logits, labels):
            z = logits.to(torch.promote_types(logits.dtype, torch.float32))
            nll = F.cross_entropy(z.flatten(0, 1), labels.flatten(), reduction="none")
            return -nll.view(labels.shape)
        def get_response_log_probs(model, input_ids, labels, return_token_entropy=False):
            logits = model(input_ids).logits
            out = {"log_probs": log_probs_from_logits(logits, labels), "token_entropy": None}
            if return_token_entropy:
                with torch.no_grad():
                    out["token_entropy"] = compute_entropy(logits)
            return out
    """,
    # float64 log-softmax, cast back to float32 at least (the gradient flows through the casts)
    "float64_inside": """
        import torch
        def log_probs_from_logits(logits, labels):
            out_dtype = torch.promote_types(logits.dtype, torch.float32)
            lp = torch.log_softmax(logits.double(), dim=-1)
            return torch.gather(lp, 2, labels.unsqueeze(2)).squeeze(2).to(out_dtype)
        def get_response_log_probs(model, input_ids, labels, return_token_entropy=False):
            logits = model(input_ids).logits
            entropy = None
            if return_token_entropy:
                lp = torch.log_softmax(logits.detach().double(), dim=-1)
                entropy = (-(lp.exp() * lp).sum(-1)).to(torch.promote_types(logits.dtype, torch.float32))
            return {"log_probs": log_probs_from_logits(logits, labels), "token_entropy": entropy}
    """,
    # one sequence at a time, stacked; the entropy row by row from detached logits with notebook 02's
    # compute_entropy (an entropy from z - logsumexp(z) instead loses ~ulp(|z|) = 2e-4 at logits of
    # magnitude 3e3: notebook 02 grades that formula as a precision mistake, and so does this suite)
    "row_by_row": """
        import torch
        from course_lib import compute_entropy
        def log_probs_from_logits(logits, labels):
            rows = []
            for z, y in zip(logits, labels):  # (T, V), (T,)
                z = z if z.dtype in (torch.float32, torch.float64) else z.float()
                rows.append(z[torch.arange(len(y)), y] - torch.logsumexp(z, dim=-1))
            return torch.stack(rows)
        def get_response_log_probs(model, input_ids, labels, return_token_entropy=False):
            logits = model(input_ids).logits
            result = {"log_probs": log_probs_from_logits(logits, labels), "token_entropy": None}
            if return_token_entropy:
                result["token_entropy"] = torch.stack([compute_entropy(z) for z in logits.detach()])
            return result
    """,
}

# the fresh draws of the cases the many-draws check holds every version to (tests/test_graded.py; 40 by default)
DRAWS = 30  # 10 s; the z - logsumexp entropy failed 14 of 300


# ---------------------------------------------------------------- the known mistakes
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

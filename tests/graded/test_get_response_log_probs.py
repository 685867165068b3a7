"""get_response_log_probs (notebook 03): the reference's contract, correct versions that earn full
marks through the real judge, and realistic mistakes that lose them (CONTRIBUTING.md, "Adding a
graded function").

In the notebook this cell calls the student's own `log_probs_from_logits` (the course_lib one is
a tripwire while grading) and the given `entropy_from_logits`, so every version below brings its
log-prob helper along."""

from __future__ import annotations

import torch
from hypothesis import given

from autograder.mistakes.get_response_log_probs import GRLP_BASE
from course_lib import get_response_log_probs
from tests.graded.test_log_probs_from_logits import REFERENCE as CHUNKED_LOG_PROBS  # notebook 03's cell above
from tests.helpers import PROPERTY_SETTINGS, corpus_tests, many_draws_test, randn, seeds, shapes

SUITE = "get_response_log_probs"


def entropy_float64(logits):
    """Independent: the definition on float64 probabilities after a max shift."""
    x = logits.double()
    x = x - x.max(dim=-1, keepdim=True).values
    p = x.exp() / x.exp().sum(-1, keepdim=True)
    logp = x - x.exp().sum(-1, keepdim=True).log()
    return -(torch.where(p > 0, p * logp, torch.zeros_like(p))).sum(-1)


class FixedLogits(torch.nn.Module):
    """A real module whose forward returns given logits (a parameter, so gradients reach it)."""

    def __init__(self, logits):
        super().__init__()
        self.logits = torch.nn.Parameter(logits.clone())

    def forward(self, input_ids):
        assert input_ids.shape == self.logits.shape[:2]
        return type("Out", (), {"logits": self.logits})()


# ---------------------------------------------------------------- the reference
@PROPERTY_SETTINGS
@given(shapes, seeds)
def test_log_probs_match_float64_log_softmax(shape, seed):
    B, T, V = shape
    logits = randn(B, T, V, seed=seed, scale=3.0)
    labels = torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(seed))
    out = get_response_log_probs(FixedLogits(logits), torch.zeros(B, T, dtype=torch.long), labels, True)
    expected = torch.log_softmax(logits.double(), -1).gather(-1, labels[..., None]).squeeze(-1)
    torch.testing.assert_close(out["log_probs"].double(), expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out["token_entropy"].double(), entropy_float64(logits), atol=1e-5, rtol=1e-5)
    assert out["log_probs"].shape == (B, T)


def test_log_probs_without_entropy_returns_none():
    logits = randn(2, 3, 5)
    out = get_response_log_probs(FixedLogits(logits), torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, 3, dtype=torch.long))
    assert out["token_entropy"] is None


@PROPERTY_SETTINGS
@given(shapes, seeds)
def test_reference_log_probs_carry_the_gradient_and_the_entropy_none(shape, seed):
    B, T, V = shape
    model = FixedLogits(randn(B, T, V, seed=seed, scale=3.0))
    labels = torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(seed))
    out = get_response_log_probs(model, torch.zeros(B, T, dtype=torch.long), labels, return_token_entropy=True)
    assert set(out) == {"log_probs", "token_entropy"}
    assert out["log_probs"].requires_grad and not out["token_entropy"].requires_grad
    out["log_probs"].sum().backward()
    onehot = torch.nn.functional.one_hot(labels, V).float()
    torch.testing.assert_close(model.logits.grad, onehot - torch.softmax(model.logits.detach(), -1), atol=1e-6, rtol=1e-5)


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


test_correct_version_earns_full_marks, test_mistake_loses_its_points = corpus_tests(SUITE, CORRECT)
test_each_version_holds_on_many_draws = many_draws_test(SUITE, CORRECT, draws=30)  # 10 s; the z - logsumexp entropy failed 14 of 300

"""compute_per_instance_dpo_loss (notebook 12): the reference's contract. Its correct versions and
known mistakes are in grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import copy
import functools
import math
import pytest
import torch
from hypothesis import given, settings, strategies as st

from autograder.graded.compute_per_instance_dpo_loss import TinyCausalLM
from course_lib import compute_per_instance_dpo_loss, format_r1_zero_prompt, gsm8k_to_r1_zero, off_policy_pairs
from tests.helpers import course_tokenizer, problems, PROPERTY_SETTINGS


@functools.lru_cache(maxsize=1)
def _world():
    """The course tokenizer, 12 questions, their gold outputs and the off-policy rejections."""
    records = problems(12)
    gold = [gsm8k_to_r1_zero(p) for p in records]
    return course_tokenizer(), [p["question"] for p in records], gold, off_policy_pairs(gold)


def _models(seed, noise=0.3):
    tok = _world()[0]
    g = torch.Generator().manual_seed(seed)
    emb = torch.randn(len(tok), 8, generator=g, dtype=torch.float64) * 0.5
    head = torch.randn(len(tok), 8, generator=g, dtype=torch.float64) * 0.5
    ref = TinyCausalLM(emb + noise * torch.randn(emb.shape, generator=g, dtype=torch.float64),
                       head + noise * torch.randn(head.shape, generator=g, dtype=torch.float64)).requires_grad_(False)
    return TinyCausalLM(emb, head), ref


def response_log_prob(model, tok, question, response):
    """Independent: one sequence, no padding, sum of log p(token | everything before) over the response and eos."""
    p = tok(format_r1_zero_prompt(question), add_special_tokens=False)["input_ids"]
    r = tok(response, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    ids = torch.tensor([p + r])
    lp = torch.log_softmax(model(ids[:, :-1]).logits.double(), -1)[0]
    return sum(lp[len(p) - 1 + j, t] for j, t in enumerate(r))


# ---------------------------------------------------------------- the reference
@settings(PROPERTY_SETTINGS, max_examples=12)
@given(st.integers(0, 11), st.sampled_from([0.01, 0.1, 1.0]), st.integers(0, 2**16))
def test_reference_is_the_dpo_loss_of_the_summed_response_log_probs(i, beta, seed):
    tok, questions, _, pairs = _world()
    lm, ref = _models(seed)
    chosen, rejected = pairs[i]["chosen"], pairs[i]["rejected"]
    loss = compute_per_instance_dpo_loss(lm, ref, tok, beta, questions[i], chosen, rejected)
    assert loss.shape == () and loss.dtype == torch.float64
    with torch.no_grad():
        x = beta * ((response_log_prob(lm, tok, questions[i], chosen) - response_log_prob(ref, tok, questions[i], chosen))
                    - (response_log_prob(lm, tok, questions[i], rejected) - response_log_prob(ref, tok, questions[i], rejected)))
    torch.testing.assert_close(loss.detach(), -torch.nn.functional.logsigmoid(x), atol=1e-12, rtol=1e-12)


def test_reference_first_step_is_log_2_with_a_gradient_and_the_reference_untouched():
    tok, questions, _, pairs = _world()
    lm, ref = _models(3, noise=0.0)
    before = [p.clone() for p in ref.parameters()]
    loss = compute_per_instance_dpo_loss(lm, ref, tok, 0.1, questions[0], pairs[0]["chosen"], pairs[0]["rejected"])
    assert loss.item() == pytest.approx(math.log(2), abs=1e-12)
    loss.backward()
    assert lm.head.grad is not None and bool(lm.head.grad.abs().sum() > 0)
    assert all(p.grad is None for p in ref.parameters())
    assert all(torch.equal(p, q) for p, q in zip(ref.parameters(), before))


def test_reference_appends_eos_to_each_response():
    tok, questions, _, pairs = _world()
    lm, ref = _models(4)
    with_eos = compute_per_instance_dpo_loss(lm, ref, tok, 0.5, questions[1], pairs[1]["chosen"], pairs[1]["rejected"])
    x = 0.5 * sum(s * (response_log_prob(lm, tok, questions[1], r) - response_log_prob(ref, tok, questions[1], r))
                  for s, r in ((1, pairs[1]["chosen"]), (-1, pairs[1]["rejected"])))
    torch.testing.assert_close(with_eos.detach(), -torch.nn.functional.logsigmoid(x.detach()))


def test_reference_errors():
    tok, questions, gold, pairs = _world()
    lm, ref = _models(5)
    q, c, r = questions[2], pairs[2]["chosen"], pairs[2]["rejected"]
    with pytest.raises(ValueError, match="identical"):
        compute_per_instance_dpo_loss(lm, ref, tok, 0.1, q, c, c)
    with pytest.raises(ValueError, match="response_rejected is empty"):
        compute_per_instance_dpo_loss(lm, ref, tok, 0.1, q, c, "")
    with pytest.raises(ValueError, match="lm_ref requires gradients"):
        compute_per_instance_dpo_loss(lm, copy.deepcopy(ref).requires_grad_(True), tok, 0.1, q, c, r)
    no_eos = copy.deepcopy(tok)
    no_eos.eos_token = None
    assert no_eos.eos_token is None and tok.eos_token is not None  # the copy alone lost it
    with pytest.raises(ValueError, match="eos_token"):
        compute_per_instance_dpo_loss(lm, ref, no_eos, 0.1, q, c, r)

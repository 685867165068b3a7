"""compute_per_instance_dpo_loss (notebook 12): the reference's contract, correct versions that earn
full marks through the real judge, and realistic mistakes that lose them (CONTRIBUTING.md, "Adding
a graded function").

In the notebook this cell calls the student's own `sequence_log_probs` and `dpo_loss` (the
course_lib ones are a tripwire while grading), so every version below brings its helpers along;
none calls an earlier notebook's graded function either (in the judge they may be stubs), only
the course's r1_zero template."""

from __future__ import annotations

import copy
import functools
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.mistakes.compute_per_instance_dpo_loss import BASE
from autograder.suites.compute_per_instance_dpo_loss import TinyCausalLM
from course_lib import compute_per_instance_dpo_loss, format_r1_zero_prompt, gsm8k_to_r1_zero, off_policy_pairs
from tests.helpers import PROPERTY_SETTINGS, corpus_tests, course_tokenizer, many_draws_test, problems

SUITE = "compute_per_instance_dpo_loss"


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


CORRECT = {
    "batch_of_two_like_the_course": BASE,
    # each sequence scored alone (no padding), eos as an id, softplus, the policies subtracted first
    "row_by_row_eos_id_softplus": """
        import torch
        import torch.nn.functional as F
        from course_lib import r1_zero_prompt_template
        def response_log_prob(model, prompt_ids, response_ids):
            ids = torch.tensor([prompt_ids + response_ids], device=next(model.parameters()).device)
            logits = model(ids[:, :-1]).logits[0]
            lp = logits.log_softmax(dim=-1)
            start = len(prompt_ids) - 1
            positions = torch.arange(start, start + len(response_ids), device=ids.device)
            return lp[positions, ids[0, start + 1:]].sum()
        def compute_per_instance_dpo_loss(lm, lm_ref, tokenizer, beta, prompt, response_chosen, response_rejected):
            if not response_chosen or not response_rejected:
                raise ValueError("a response is empty")
            if response_chosen == response_rejected:
                raise ValueError("chosen == rejected")
            if tokenizer.eos_token_id is None or tokenizer.eos_token is None:
                raise ValueError("tokenizer without eos")
            for p in lm_ref.parameters():
                if p.requires_grad:
                    raise ValueError("the reference must not require gradients")
            text = r1_zero_prompt_template().replace("{question}", prompt)
            p_ids = tokenizer.encode(text, add_special_tokens=False)
            c_ids = tokenizer.encode(response_chosen, add_special_tokens=False) + [tokenizer.eos_token_id]
            r_ids = tokenizer.encode(response_rejected, add_special_tokens=False) + [tokenizer.eos_token_id]
            pi_c, pi_r = response_log_prob(lm, p_ids, c_ids), response_log_prob(lm, p_ids, r_ids)
            with torch.no_grad():
                dev = pi_c.device
                ref_c, ref_r = response_log_prob(lm_ref, p_ids, c_ids).to(dev), response_log_prob(lm_ref, p_ids, r_ids).to(dev)
            return F.softplus(-beta * ((pi_c - pi_r) - (ref_c - ref_r)))
    """,
    # cross-entropy with ignore_index on the prompt and padding, in float64; the frozen reference scored
    # without no_grad (its parameters need none), its result detached
    "cross_entropy_ignore_index_float64": """
        import torch
        import torch.nn.functional as F
        from course_lib.gsm8k import format_r1_zero_prompt
        def summed_log_probs(model, full, response_start, lengths):
            logits = model(full[:, :-1]).logits.double()
            labels = full[:, 1:].clone()
            cols = torch.arange(labels.shape[1], device=labels.device)[None, :]
            keep = (cols >= response_start - 1) & (cols < lengths[:, None] - 1)
            labels[~keep] = -100
            nll = F.cross_entropy(logits.transpose(1, 2), labels, ignore_index=-100, reduction="none")
            return -nll.sum(dim=1)
        def compute_per_instance_dpo_loss(lm, lm_ref, tokenizer, beta, prompt, response_chosen, response_rejected):
            if tokenizer.eos_token is None:
                raise ValueError("tokenizer.eos_token is None")
            if any(p.requires_grad for p in lm_ref.parameters()):
                raise ValueError("lm_ref has parameters that require grad")
            if len(response_chosen) == 0 or len(response_rejected) == 0:
                raise ValueError("empty")
            if response_chosen == response_rejected:
                raise ValueError("same")
            prompt_ids = tokenizer(format_r1_zero_prompt(prompt), add_special_tokens=False).input_ids
            rows = [prompt_ids + tokenizer(r + tokenizer.eos_token, add_special_tokens=False).input_ids
                    for r in (response_chosen, response_rejected)]
            lengths = torch.tensor([len(r) for r in rows])
            full = torch.nn.utils.rnn.pad_sequence([torch.tensor(r) for r in rows], batch_first=True,
                                                   padding_value=tokenizer.pad_token_id)
            device, ref_device = next(lm.parameters()).device, next(lm_ref.parameters()).device
            pi = summed_log_probs(lm, full.to(device), len(prompt_ids), lengths.to(device))
            ref = summed_log_probs(lm_ref, full.to(ref_device), len(prompt_ids), lengths.to(ref_device)).detach().to(device)
            chosen, rejected = beta * (pi[0] - ref[0]), beta * (pi[1] - ref[1])
            return -F.logsigmoid(chosen - rejected).to(next(lm.parameters()).dtype)
    """,
}


test_correct_version_earns_full_marks, test_mistake_loses_its_points = corpus_tests(SUITE, CORRECT)
test_each_version_holds_on_many_draws = many_draws_test(SUITE, CORRECT, draws=4)

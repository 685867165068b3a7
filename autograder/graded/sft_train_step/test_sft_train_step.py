"""sft_train_step (notebook 05): the reference's contract. Its correct versions and known mistakes are
in grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import copy
import functools
import pytest
import torch
from hypothesis import given, settings, strategies as st

from autograder.graded.sft_train_step import TinyCausalLM
from course_lib import (get_response_log_probs, gsm8k_to_r1_zero, masked_normalize, sft_microbatch_train_step,
    sft_train_step, tokenize_prompt_and_output)
from tests.helpers import course_tokenizer, problems, PROPERTY_SETTINGS


# ---------------------------------------------------------------- the reference
@functools.lru_cache(maxsize=1)
def _world():
    """The course tokenizer and 16 r1_zero training examples."""
    return course_tokenizer(), [gsm8k_to_r1_zero(p) for p in problems(16)]


def _model_and_optimizer(seed: int, lr=1e-2):
    tok, _ = _world()
    g = torch.Generator().manual_seed(seed)
    model = TinyCausalLM(torch.randn(len(tok), 8, generator=g, dtype=torch.float64) * 0.5,
                         torch.randn(len(tok), 8, generator=g, dtype=torch.float64) * 0.5)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    return model, optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 0.5 ** s)


@settings(PROPERTY_SETTINGS, max_examples=12)  # ten (batch, k, clip) settings: a dozen draws cover them
@given(st.sampled_from([(4, 1), (4, 2), (4, 4), (6, 3), (6, 2)]), st.sampled_from([0.05, 1e4]), st.integers(0, 2**16))
def test_reference_equals_the_full_batch_step(batch_and_k, clip, seed):
    """k micro-batches accumulate to the full batch's gradient: the same parameters after the step."""
    batch, k = batch_and_k
    tok, examples = _world()
    examples = examples[seed % 8: seed % 8 + batch]
    mine, mine_opt, mine_sched = _model_and_optimizer(seed)
    direct = copy.deepcopy(mine)
    direct_opt = torch.optim.AdamW(direct.parameters(), lr=1e-2, betas=(0.9, 0.95), weight_decay=0.0)
    direct_sched = torch.optim.lr_scheduler.LambdaLR(direct_opt, lambda s: 0.5 ** s)
    calls = []
    counted = lambda name, f: lambda *a, **kw: (calls.append(name), f(*a, **kw))[1]  # noqa: E731
    out = sft_train_step(mine, tok, mine_opt, examples, k, max_grad_norm=clip, scheduler=mine_sched,
                         tokenize_fn=counted("tok", tokenize_prompt_and_output),
                         log_probs_fn=counted("logp", get_response_log_probs),
                         train_step_fn=counted("step", sft_microbatch_train_step))
    full = tokenize_prompt_and_output([e["prompt"] for e in examples], [e["output"] for e in examples], tok)
    logp = get_response_log_probs(direct, full["input_ids"], full["labels"])["log_probs"]
    loss = masked_normalize(-logp, full["response_mask"], dim=-1).mean()
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(direct.parameters(), clip)
    direct_opt.step()
    direct_sched.step()
    assert sorted(calls) == sorted(["tok", "logp", "step"] * k)
    assert all(isinstance(out[key], float) for key in ("loss", "grad_norm", "nll_sum")) and isinstance(out["response_tokens"], int)
    assert out["loss"] == pytest.approx(loss.item(), rel=1e-12)
    assert out["grad_norm"] == pytest.approx(norm.item(), rel=1e-12)
    assert out["response_tokens"] == int(full["response_mask"].sum())
    assert out["nll_sum"] == pytest.approx(loss.item() * batch, rel=1e-12)
    assert mine_opt.param_groups[0]["lr"] == direct_opt.param_groups[0]["lr"] == 1e-2 * 0.5
    assert all(p.grad is None for p in mine.parameters())  # zeroed with set_to_none after the step
    for p, q in zip(mine.parameters(), direct.parameters()):
        torch.testing.assert_close(p, q, atol=1e-12, rtol=1e-12)


def test_reference_batch_that_does_not_split_into_k_is_a_clear_error():
    tok, examples = _world()
    model, optimizer, _ = _model_and_optimizer(0)
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(ValueError, match="do not split into 2"):
        sft_train_step(model, tok, optimizer, examples[:5], 2)
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), before))  # nothing stepped

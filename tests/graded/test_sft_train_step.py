"""sft_train_step (notebook 05): the reference's contract, correct versions that earn full marks
through the real judge, and realistic mistakes that lose them (CONTRIBUTING.md, "Adding a graded
function").

One optimizer step: k micro-batches of tokenize -> log-probs -> loss and backward (the three
functions passed in), then clip, optimizer.step, scheduler.step, zero_grad."""

from __future__ import annotations

import copy
import functools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.suites.sft_train_step import TinyCausalLM
from course_lib import (
    get_response_log_probs,
    gsm8k_to_r1_zero,
    masked_normalize,
    sft_microbatch_train_step,
    sft_train_step,
    tokenize_prompt_and_output,
)
from autograder.mistakes.sft_train_step import STEP_BASE
from tests.helpers import PROPERTY_SETTINGS, corpus_tests, many_draws_test, course_tokenizer, problems

SUITE = "sft_train_step"


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


CORRECT = {
    "index_slices": STEP_BASE,
    # slices by a stride over the batch, tensors moved to the model's device, boolean indexing for the NLL
    "stride_slices_on_the_device": """
        import torch
        def sft_train_step(model, tokenizer, optimizer, batch_examples, gradient_accumulation_steps, max_grad_norm=1.0,
                           scheduler=None, tokenize_fn=None, log_probs_fn=None, train_step_fn=None):
            n, k = len(batch_examples), gradient_accumulation_steps
            if n % k:
                raise ValueError(f"{n} examples do not split into {k} micro-batches")
            size = n // k
            device = next(model.parameters()).device
            stats = {"loss": 0.0, "grad_norm": 0.0, "response_tokens": 0, "nll_sum": 0.0}
            for start in range(0, n, size):
                part = batch_examples[start:start + size]
                enc = tokenize_fn([e["prompt"] for e in part], [e["output"] for e in part], tokenizer)
                ids, labels, mask = (enc[key].to(device) for key in ("input_ids", "labels", "response_mask"))
                log_probs = log_probs_fn(model, ids, labels)["log_probs"]
                loss, _ = train_step_fn(log_probs, mask, k)
                stats["loss"] += loss.item()
                stats["response_tokens"] += int(mask.sum().item())
                stats["nll_sum"] += -log_probs.detach()[mask.bool()].sum().item()
            stats["grad_norm"] = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=max_grad_norm).item()
            optimizer.step()
            if scheduler:
                scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            return stats
    """,
    # gradients zeroed before the loop as well (harmless); the NLL from the step's own metadata (c = 1)
    "zeroed_before_and_after_nll_from_metadata": """
        import torch
        def sft_train_step(model, tokenizer, optimizer, batch_examples, gradient_accumulation_steps, max_grad_norm=1.0,
                           scheduler=None, tokenize_fn=None, log_probs_fn=None, train_step_fn=None):
            if len(batch_examples) % gradient_accumulation_steps != 0:
                raise ValueError("batch size must be a multiple of gradient_accumulation_steps")
            optimizer.zero_grad(set_to_none=True)
            per = len(batch_examples) // gradient_accumulation_steps
            losses, tokens, nll = [], 0, 0.0
            for i in range(gradient_accumulation_steps):
                examples = batch_examples[i * per:(i + 1) * per]
                prompts = [ex["prompt"] for ex in examples]
                outputs = [ex["output"] for ex in examples]
                b = tokenize_fn(prompts, outputs, tokenizer)
                lp = log_probs_fn(model, b["input_ids"], b["labels"], return_token_entropy=False)["log_probs"]
                loss, meta = train_step_fn(lp, b["response_mask"], gradient_accumulation_steps)
                losses.append(float(loss))
                tokens += int(b["response_mask"].sum())
                nll += float(meta["nll_per_sequence"].sum())  # c = 1: each sequence's summed NLL
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            return {"loss": sum(losses), "grad_norm": float(norm), "response_tokens": tokens, "nll_sum": nll}
    """,
    # the norm measured by hand before clipping (the same number clip_grad_norm_ returns); model.zero_grad
    "norm_by_hand_before_clipping": """
        import math
        import torch
        def sft_train_step(model, tokenizer, optimizer, batch_examples, gradient_accumulation_steps, max_grad_norm=1.0,
                           scheduler=None, tokenize_fn=None, log_probs_fn=None, train_step_fn=None):
            k = gradient_accumulation_steps
            if len(batch_examples) % k != 0:
                raise ValueError("uneven micro-batches")
            m = len(batch_examples) // k
            micro_batches = [batch_examples[i:i + m] for i in range(0, len(batch_examples), m)]
            loss_sum, n_tokens, nll_sum = 0.0, 0, 0.0
            for mb in micro_batches:
                t = tokenize_fn([x["prompt"] for x in mb], [x["output"] for x in mb], tokenizer)
                out = log_probs_fn(model, t["input_ids"], t["labels"])
                loss, _ = train_step_fn(out["log_probs"], t["response_mask"], k)
                loss_sum += float(loss.detach())
                n_tokens += int(t["response_mask"].sum())
                nll_sum += float((-out["log_probs"].detach() * t["response_mask"]).sum())  # log-probs are finite here
            grads = [p.grad for p in model.parameters() if p.grad is not None]
            norm = math.sqrt(sum(float((g.double() ** 2).sum()) for g in grads))
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
            model.zero_grad(set_to_none=True)
            return {"loss": loss_sum, "grad_norm": norm, "response_tokens": n_tokens, "nll_sum": nll_sum}
    """,
}


test_correct_version_earns_full_marks, test_mistake_loses_its_points = corpus_tests(SUITE, CORRECT)
test_each_version_holds_on_many_draws = many_draws_test(SUITE, CORRECT, draws=4)

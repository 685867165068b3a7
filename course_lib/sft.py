"""SFT's two graded steps: the micro-batch loss (notebook 04) and one optimizer step (notebook 05).

`sft_microbatch_train_step` is the negative log-likelihood of the response tokens, scaled so that
micro-batches accumulate; `sft_train_step` is one optimizer step built from it, and the inner
loop of the course's SFT trainer (`course_lib.training.sft_trainer`).
"""

from __future__ import annotations

import torch

from .logprobs import get_response_log_probs
from .masking import masked_normalize
from .tokenization import tokenize_prompt_and_output


def sft_microbatch_train_step(
    policy_log_probs: torch.Tensor,
    response_mask: torch.Tensor,
    gradient_accumulation_steps: int,
    normalize_constant: float = 1.0,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Compute the SFT loss of one micro-batch and backpropagate it.

        loss = mean_b [ sum_t -log p[b, t] * mask[b, t] / normalize_constant ] / gradient_accumulation_steps

    Dividing by `gradient_accumulation_steps` makes the gradients of the micro-batches *add up*
    (in `.grad`, never overwritten) to the gradient of the mean over the whole batch: the step
    calls `loss.backward()` and never zeroes, replaces or steps anything, not even the `.grad`
    of `policy_log_probs` itself when it is a leaf.

    Args:
        policy_log_probs: (B, T) log-probs of the labels under the policy (requires grad); a
            masked-out position may hold -inf, which never reaches the loss.
        response_mask: (B, T), bool or 0/1 of an int or float dtype: 1 on response tokens (a row,
            or the whole mask, may be all 0: its NLL is 0).
        gradient_accumulation_steps: micro-batches per optimizer step.
        normalize_constant: divisor of each sequence's summed NLL.

    Returns:
        (loss, metadata): the scaled loss that was backpropagated, a detached 0-dim tensor of the
        log-probs' dtype (not a Python float), and {"nll_per_sequence": (B,) detached, each
        row's sum_t -log p * mask / normalize_constant, "response_tokens": scalar}.
    """
    per_sequence = masked_normalize(-policy_log_probs, response_mask, dim=-1, normalize_constant=normalize_constant)
    loss = per_sequence.mean() / gradient_accumulation_steps
    loss.backward()
    return loss.detach(), {
        "nll_per_sequence": per_sequence.detach(),
        "response_tokens": response_mask.sum().detach(),
    }


def sft_train_step(
    model: torch.nn.Module,
    tokenizer,
    optimizer: torch.optim.Optimizer,
    batch_examples: list[dict],
    gradient_accumulation_steps: int,
    max_grad_norm: float = 1.0,
    scheduler=None,
    tokenize_fn=tokenize_prompt_and_output,
    log_probs_fn=get_response_log_probs,
    train_step_fn=sft_microbatch_train_step,
) -> dict:
    """One optimizer step of SFT on `batch_examples`, as `gradient_accumulation_steps` micro-batches.

        for each of the k micro-batches (consecutive slices of len(batch_examples) / k examples):
            batch = tokenize_fn(prompts, outputs, tokenizer)
            log_probs = log_probs_fn(model, input_ids, labels)["log_probs"]
            loss = train_step_fn(log_probs, response_mask, k)      # backward inside: .grad adds up
        clip the gradient norm to max_grad_norm; optimizer.step(); scheduler.step(); zero the grads

    Each of the three functions is called once per micro-batch, and the step leaves no gradient
    behind (the next step starts from zero).

    Args:
        batch_examples: r1_zero records with "prompt" and "output"; their number divisible by k.
        scheduler: stepped once after the optimizer when given.
        tokenize_fn, log_probs_fn, train_step_fn: your functions of notebooks 01, 03 and 04.

    Returns:
        {"loss": the sum of the k returned (scaled) losses, i.e. the batch loss (float),
         "grad_norm": the gradient norm before clipping (float),
         "response_tokens": response tokens in the batch (int),
         "nll_sum": the summed negative log-likelihood of those tokens (float)}
    Raises:
        ValueError: a batch whose size gradient_accumulation_steps does not divide.
    """
    if len(batch_examples) % gradient_accumulation_steps != 0:
        raise ValueError(f"{len(batch_examples)} examples do not split into {gradient_accumulation_steps} micro-batches")
    device = next(model.parameters()).device
    micro = len(batch_examples) // gradient_accumulation_steps
    total_loss, tokens, nll_sum = 0.0, 0, 0.0
    for j in range(gradient_accumulation_steps):
        chunk = batch_examples[j * micro : (j + 1) * micro]
        batch = tokenize_fn([e["prompt"] for e in chunk], [e["output"] for e in chunk], tokenizer)
        mask = batch["response_mask"].to(device)
        log_probs = log_probs_fn(model, batch["input_ids"].to(device), batch["labels"].to(device))["log_probs"]
        loss, _ = train_step_fn(log_probs, mask, gradient_accumulation_steps)
        total_loss += float(loss)
        tokens += int(mask.sum())
        nll_sum += float(masked_normalize(-log_probs.detach(), mask))
    grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm))
    optimizer.step()
    if scheduler is not None:
        scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return {"loss": total_loss, "grad_norm": grad_norm, "response_tokens": tokens, "nll_sum": nll_sum}

"""Reference of notebook 05's graded `sft_train_step`: one optimizer step of the SFT loop.

It is the inner loop of `course_lib.sft_trainer.train_sft`, written as a function; notebook 05
checks a student's version against that trainer (same parameters after a few steps). Not a
hidden-case suite (the leading underscore keeps it out of `suite_names()`): hidden cases need
the reference in `course_lib`.
"""

from __future__ import annotations

import torch

from course_lib import get_response_log_probs, sft_microbatch_train_step, tokenize_prompt_and_output


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

    Args:
        batch_examples: r1_zero records with "prompt" and "output"; their number divisible by k.
        scheduler: stepped once after the optimizer when given.
        tokenize_fn, log_probs_fn, train_step_fn: your functions of notebooks 01, 03 and 04.

    Returns:
        {"loss": the sum of the k returned (scaled) losses, i.e. the batch loss (float),
         "grad_norm": the gradient norm before clipping (float),
         "response_tokens": response tokens in the batch (int)}
    """
    if len(batch_examples) % gradient_accumulation_steps != 0:
        raise ValueError(f"{len(batch_examples)} examples do not split into {gradient_accumulation_steps} micro-batches")
    device = next(model.parameters()).device
    micro = len(batch_examples) // gradient_accumulation_steps
    total_loss, tokens = 0.0, 0
    for j in range(gradient_accumulation_steps):
        chunk = batch_examples[j * micro : (j + 1) * micro]
        batch = tokenize_fn([e["prompt"] for e in chunk], [e["output"] for e in chunk], tokenizer)
        mask = batch["response_mask"].to(device)
        log_probs = log_probs_fn(model, batch["input_ids"].to(device), batch["labels"].to(device))["log_probs"]
        loss, _ = train_step_fn(log_probs, mask, gradient_accumulation_steps)
        total_loss += float(loss)
        tokens += int(mask.sum())
    grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm))
    optimizer.step()
    if scheduler is not None:
        scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return {"loss": total_loss, "grad_norm": grad_norm, "response_tokens": tokens}

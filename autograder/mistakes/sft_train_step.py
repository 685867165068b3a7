"""The known mistakes of `sft_train_step` (notebook 05): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

from autograder.mistakes import Mistake, edited


STEP_BASE = """
    import torch
    def sft_train_step(model, tokenizer, optimizer, batch_examples, gradient_accumulation_steps, max_grad_norm=1.0,
                       scheduler=None, tokenize_fn=None, log_probs_fn=None, train_step_fn=None):
        k = gradient_accumulation_steps
        if len(batch_examples) % k != 0:
            raise ValueError("the batch does not split into k micro-batches")
        micro = len(batch_examples) // k
        total, tokens, nll = 0.0, 0, 0.0
        for j in range(k):
            chunk = batch_examples[j * micro:(j + 1) * micro]
            batch = tokenize_fn([e["prompt"] for e in chunk], [e["output"] for e in chunk], tokenizer)
            mask = batch["response_mask"]
            log_probs = log_probs_fn(model, batch["input_ids"], batch["labels"])["log_probs"]
            loss, _ = train_step_fn(log_probs, mask, k)
            total += float(loss)
            tokens += int(mask.sum())
            nll += float(torch.where(mask, -log_probs.detach(), 0.0).sum())
            #CLIP_IN_LOOP
        grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm))
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        return {"loss": total, "grad_norm": grad_norm, "response_tokens": tokens, "nll_sum": nll}
"""

MISTAKES = {
    # each micro-batch's gradient wipes the previous ones: only the last micro-batch trains
    "zero_grad_between_micro_batches": Mistake(
        "zeroes the gradients before each micro-batch, so only the last micro-batch's gradient reaches the step",
        edited(STEP_BASE, (
            "            batch = tokenize_fn(", "            optimizer.zero_grad(set_to_none=True)\n            batch = tokenize_fn(")),
        ["k2_B4_clipped_with_schedule"]),
    "clip_inside_the_loop": Mistake(
        "clips the gradient inside the micro-batch loop instead of once before the step",
        edited(STEP_BASE, ("#CLIP_IN_LOOP", "torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)")),
        ["k2_B4_clipped_with_schedule"]),
    "schedule_stepped_per_micro_batch": Mistake(
        "steps the scheduler after every micro-batch instead of once per optimizer step",
        edited(STEP_BASE, (
            "#CLIP_IN_LOOP", "if scheduler is not None:\n                scheduler.step()"), (
            "        if scheduler is not None:\n            scheduler.step()\n        optimizer.zero_grad", "        optimizer.zero_grad")),
        ["k2_B4_clipped_with_schedule"]),
    "schedule_never_stepped": Mistake(
        "never steps the scheduler",
        edited(STEP_BASE, ("        if scheduler is not None:\n            scheduler.step()\n", "")),
        ["k2_B4_clipped_with_schedule"]),
    "norm_after_clipping": Mistake(
        "reports the gradient norm after clipping instead of the norm before it",
        edited(STEP_BASE, (
            "grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm))",
            "torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)\n"
            "        grad_norm = float(torch.norm(torch.stack([p.grad.norm() for p in model.parameters() if p.grad is not None])))")),
        ["k2_B4_clipped_with_schedule"]),
    "loss_averaged_over_micro_batches": Mistake(
        "reports the loss divided by k again instead of the sum of the micro-batches' scaled losses",
        edited(STEP_BASE, ('"loss": total,', '"loss": total / k,')),
        ["k2_B4_clipped_with_schedule"]),
    "k_not_passed_to_the_loss": Mistake(
        "passes 1 instead of gradient_accumulation_steps to the micro-batch step",
        edited(STEP_BASE, ("train_step_fn(log_probs, mask, k)", "train_step_fn(log_probs, mask, 1)")),
        ["k4_B4_not_clipped"]),
    # the course_lib functions instead of the ones passed in (the student's own, in the notebook)
    "passed_functions_ignored": Mistake(
        "calls course_lib's functions instead of the ones passed in",
        edited(STEP_BASE, ("    def sft_train_step(", "    import course_lib\n    def sft_train_step("), (
            "batch = tokenize_fn(", "batch = course_lib.tokenize_prompt_and_output("), (
            "log_probs_fn(model,", "course_lib.get_response_log_probs(model,"), (
            "train_step_fn(log_probs,", "course_lib.sft_microbatch_train_step(log_probs,")),
        ["k1_B3"]),
    "gradients_zeroed_first_not_last": Mistake(
        "zeroes the gradients at the start instead of after the optimizer step, leaving them set after the step",
        edited(STEP_BASE, (
            "        micro = len(batch_examples) // k\n", "        micro = len(batch_examples) // k\n        optimizer.zero_grad()\n"), (
            "        optimizer.zero_grad(set_to_none=True)\n        return", "        return")),
        ["k1_B3"]),
    "uneven_batch_silently_truncated": Mistake(
        "accepts a batch that does not split into k micro-batches instead of raising ValueError",
        edited(STEP_BASE, (
            "        if len(batch_examples) % k != 0:\n            raise ValueError(\"the batch does not split into k micro-batches\")\n", "")),
        ["batch_does_not_split_into_k"]),
    # an optimizer step per micro-batch: k small steps, not one step of the whole batch
    "optimizer_stepped_per_micro_batch": Mistake(
        "steps the optimizer after every micro-batch: k small steps instead of one",
        edited(STEP_BASE, (
            "#CLIP_IN_LOOP", "optimizer.step()\n            optimizer.zero_grad(set_to_none=True)")),
        ["k2_B4_clipped_with_schedule"]),
    # notebook 05's visible check: "response_tokens should count the response tokens of the whole batch"
    "response_tokens_of_the_last_micro_batch": Mistake(
        "counts the response tokens of the last micro-batch only instead of the whole batch's",
        edited(STEP_BASE, ("tokens += int(mask.sum())", "tokens = int(mask.sum())")),
        ["k2_B4_no_schedule", "k4_B4_not_clipped"]),
}

"""The grader's side of `sft_train_step` (notebook 05): how its hidden cases are drawn, the correct
versions that must earn full marks and the known mistakes that must lose them, each with the
sentence a student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox,
which hold the folder's __init__.py only.

Hidden cases of `sft_train_step(model, tokenizer, optimizer, batch_examples,
gradient_accumulation_steps, max_grad_norm=1.0, scheduler=None, tokenize_fn=...,
log_probs_fn=..., train_step_fn=...)` (notebook 05).

Each case trains a small causal LM (embedding -> causal running mean -> tanh -> output head,
built here from the case's float64 weights: float64 end to end, so the expected parameters are
exact to about 1e-15 and any batching of a correct step lands within the measured tolerance)
with AdamW for a few optimizer steps of the student's `sft_train_step`, on r1_zero examples tokenized by the course tokenizer, with the released
references of notebooks 01, 03 and 04 passed in as `tokenize_fn`, `log_probs_fn` and
`train_step_fn` (wrapped to count their calls). Outputs, after every step: the parameters
(compared with those of the reference step, to float rounding), the learning rate (the
schedule steps once per optimizer step), whether gradients are left over, the returned
`loss`, `grad_norm` (before clipping), `response_tokens` and `nll_sum`, and the number of
calls of each passed function (once per micro-batch). Cases: k = 1..4, clipping active and
inactive, with and without a schedule, weight decay, examples of very different lengths, and
a batch that does not split into k micro-batches (ValueError).

One optimizer step: k micro-batches of tokenize -> log-probs -> loss and backward (the three
functions passed in), then clip, optimizer.step, scheduler.step, zero_grad.
"""

from __future__ import annotations

import torch

from autograder.mistakes import edited, Mistake
from autograder.suite_api import course_tokenizer


# ---------------------------------------------------------------- the hidden cases
# each error case and the phrase of the reference's `Raises:` section that states it (tests/test_contracts.py)
RAISES = {"batch_does_not_split_into_k": "a batch whose size gradient_accumulation_steps does not divide"}
PERTURB = True  # the inputs' rounding carried through the update (autograder.cases.perturb)


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    from course_lib import gsm8k_to_r1_zero, load_problems

    problems = load_problems("arith", "train")
    vocab = len(course_tokenizer())

    def examples(n):
        idx = torch.randperm(len(problems), generator=gen)[:n].tolist()
        return [{k: v for k, v in gsm8k_to_r1_zero(problems[i]).items() if k in ("prompt", "output")} for i in idx]

    def case(steps, batch, k, clip=0.05, lr=1e-2, weight_decay=0.0, schedule=True, data=None, H=8):
        return {
            "embedding": torch.randn(vocab, H, generator=gen, dtype=torch.float64) * 0.5,
            "head": torch.randn(vocab, H, generator=gen, dtype=torch.float64) * 0.5,
            "examples": data or examples(steps * batch),
            "steps": steps, "batch": batch, "k": k, "max_grad_norm": clip, "lr": lr,
            "weight_decay": weight_decay, "schedule": schedule,
        }

    short_long = examples(6)
    short_long[0] = {"prompt": "Q: 2 + 3?", "output": " 5 </think> <answer> 5 </answer>"}
    short_long[3] = {"prompt": "Q: 7 * 6?", "output": " 42 </think> <answer> 42 </answer>"}
    return [
        ("k2_B4_clipped_with_schedule", case(3, 4, 2)),
        ("k1_B3", case(2, 3, 1)),
        ("k4_B4_not_clipped", case(2, 4, 4, clip=1e4)),
        ("k2_B4_no_schedule", case(2, 4, 2, schedule=False)),
        ("k3_B6_weight_decay", case(2, 6, 3, weight_decay=0.1)),
        ("k2_B6_lengths_far_apart", case(1, 6, 2, data=short_long)),
        ("batch_does_not_split_into_k", case(1, 5, 2)),
    ]


# ---------------------------------------------------------------- the correct versions
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

# the fresh draws of the cases the many-draws check holds every version to (tests/test_graded.py; 40 by default)
DRAWS = 4


# ---------------------------------------------------------------- the known mistakes
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

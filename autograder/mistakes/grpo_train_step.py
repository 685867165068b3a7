"""The known mistakes of `grpo_train_step` (notebook 09): the catalogue `autograder.mistakes` describes."""

from __future__ import annotations

import inspect
import textwrap

import course_lib.grpo as grpo
from autograder.mistakes import Mistake, edited


# notebook 09's given cell: its own k3 estimator (notebook 10 grades the KL estimators), the
# slicing of a micro-batch and the check of the sizes, as the notebook defines them above the step
GIVEN = "import torch\nfrom course_lib import masked_mean\n\n" + "\n\n".join(
    inspect.getsource(f) for f in (grpo._k3_per_token, grpo.slice_micro_batch, grpo._check_rollout_batch))


def given(source: str) -> str:
    """A version's source below the given cell."""
    return GIVEN + "\n\n" + textwrap.dedent(source)


SIGNATURE = """
def grpo_train_step(policy, optimizer, rollout_batch, loss_type, train_batch_size, gradient_accumulation_steps,
                    epochs_per_rollout_batch=1, cliprange=None, max_grad_norm=1.0, kl_coef=0.0, scheduler=None,
                    log_probs_fn=None, train_step_fn=None):"""

# the loop of "full_width_micro_batches" with one realistic edit each, and the hidden cases each must fail
# (it may fail others too)
# the correct version 'full_width_micro_batches' (tests/graded/test_grpo_train_step.py), which the edits start from
FULL_WIDTH = """
    import torch
    def grpo_train_step(policy, optimizer, rollout_batch, loss_type, train_batch_size, gradient_accumulation_steps,
                        epochs_per_rollout_batch=1, cliprange=None, max_grad_norm=1.0, kl_coef=0.0, scheduler=None,
                        log_probs_fn=None, train_step_fn=None):
        n = rollout_batch["advantages"].shape[0]
        k = gradient_accumulation_steps
        micro = train_batch_size // k
        out = {"loss": [], "grad_norm": [], "token_entropy": [], "clip_fraction": [], "kl": []}
        for _ in range(epochs_per_rollout_batch):
            for step in range(n // train_batch_size):
                rows = torch.arange(step * train_batch_size, (step + 1) * train_batch_size)
                step_loss = 0.0
                for j in range(k):
                    mb = {key: value[rows[j * micro:(j + 1) * micro]] for key, value in rollout_batch.items()}
                    scored = log_probs_fn(policy, mb["input_ids"], mb["labels"], return_token_entropy=True)
                    log_probs, mask = scored["log_probs"], mb["response_mask"]
                    out["token_entropy"].append(float((scored["token_entropy"] * mask).sum() / mask.sum()))
                    if kl_coef > 0:
                        log_ratio = mb["ref_log_probs"] - log_probs
                        per_token = torch.exp(log_ratio) - log_ratio - 1
                        kl = ((per_token * mask).sum(-1) / mask.sum(-1)).mean()
                        (kl_coef / k * kl).backward(retain_graph=True)
                        step_loss += float(kl_coef / k * kl.detach())
                        out["kl"].append(float(kl))
                    loss, meta = train_step_fn(log_probs, mask, k, loss_type, raw_rewards=mb["raw_rewards"],
                                               advantages=mb["advantages"], old_log_probs=mb.get("old_log_probs"),
                                               cliprange=cliprange)
                    step_loss += float(loss)
                    if "clip_fraction" in meta:
                        out["clip_fraction"].append(float(meta["clip_fraction"]))
                out["grad_norm"].append(float(torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)))
                optimizer.step()
                if scheduler is not None:
                    scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                out["loss"].append(step_loss)
        return out
    """

# its lines after the micro-batches of a train batch: clip (and log the norm), step, schedule, zero
CLIP = 'out["grad_norm"].append(float(torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)))'

SCHEDULE = "                if scheduler is not None:\n                    scheduler.step()\n"

TRAIN_BATCH_STEP = ("                " + CLIP + "\n                optimizer.step()\n" + SCHEDULE
                    + "                optimizer.zero_grad(set_to_none=True)\n")

MISTAKES = {
    # the gradients zeroed before each micro-batch: only the last one's reaches the step
    "zero_grad_between_micro_batches": Mistake(
        "zeroes the gradients before each micro-batch, so only the last micro-batch's gradient reaches the step",
        edited(FULL_WIDTH, (
            "for j in range(k):\n",
            "for j in range(k):\n"
            "                    optimizer.zero_grad(set_to_none=True)  # a clean slate for each micro-batch\n")),
        ["on_policy_k2", "on_policy_k4"]),
    # an optimizer step (and clip, schedule, zero) after every micro-batch: k steps where one is due
    "optimizer_step_per_micro_batch": Mistake(
        "steps the optimizer (and clips, schedules, zeroes) after every micro-batch: k steps where one is due",
        edited(FULL_WIDTH, (TRAIN_BATCH_STEP,
                                                              textwrap.indent(TRAIN_BATCH_STEP, "    "))),
        ["on_policy_k2", "on_policy_k4"]),
    # never zeroed: each step's gradient carries the previous steps'
    "no_zero_grad": Mistake(
        "never zeroes the gradients, so each optimizer step's gradient carries the previous steps'",
        edited(FULL_WIDTH, ("                optimizer.zero_grad(set_to_none=True)\n", "")),
        ["two_optimizer_steps_per_rollout_batch"]),
    # the norm logged, the gradient never clipped
    "no_gradient_clipping": Mistake(
        "logs the gradient norm but never clips the gradient to max_grad_norm",
        edited(FULL_WIDTH, (
            CLIP,
            "norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in policy.parameters()\n"
            "                                                             if p.grad is not None]))\n"
            '                out["grad_norm"].append(float(norm))')),
        ["two_optimizer_steps_per_rollout_batch", "grad_clipped_two_steps"]),
    # clipped after optimizer.step(): the step has used the unclipped gradient
    "clipping_after_the_step": Mistake(
        "clips the gradient after optimizer.step(), so the step has used the unclipped gradient",
        edited(FULL_WIDTH, (CLIP + "\n                optimizer.step()\n",
                                                       "optimizer.step()\n                " + CLIP + "\n")),
        ["two_optimizer_steps_per_rollout_batch", "grad_clipped_two_steps"]),
    # the scheduler is never stepped: the warmup's first factor forever
    "scheduler_not_stepped": Mistake(
        "never steps the scheduler, so the learning rate stays at the schedule's first value",
        edited(FULL_WIDTH, (SCHEDULE, "")),
        ["warmup_schedule_two_epochs"]),
    # the scheduler stepped after every micro-batch: the schedule runs k times too fast
    "scheduler_stepped_per_micro_batch": Mistake(
        "steps the scheduler after every micro-batch, so the schedule runs k times too fast",
        edited(FULL_WIDTH, (SCHEDULE, ""), (
            'out["clip_fraction"].append(float(meta["clip_fraction"]))\n',
            'out["clip_fraction"].append(float(meta["clip_fraction"]))\n' + textwrap.indent(SCHEDULE, "    "))),
        ["warmup_schedule_two_epochs"]),
    # one pass whatever epochs_per_rollout_batch says
    "epochs_ignored": Mistake(
        "makes one pass over the rollout batch whatever epochs_per_rollout_batch says",
        edited(FULL_WIDTH, ("for _ in range(epochs_per_rollout_batch):",
                                               "for _ in range(1):  # one epoch")),
        ["grpo_clip_two_epochs_given_old_log_probs", "temperature_policy"]),
    # "the old policy is the policy before the update": recomputed from the current one (ratio 1 in the
    # first epoch), not taken as given from the sampling policy
    "old_log_probs_recomputed": Mistake(
        "recomputes the old log-probs from the current policy instead of using those of the rollout batch",
        edited(FULL_WIDTH, (
            "        micro = train_batch_size // k\n",
            "        micro = train_batch_size // k\n"
            "        rollout_batch = dict(rollout_batch)\n"
            '        if "old_log_probs" in rollout_batch:\n'
            "            with torch.no_grad():\n"
            '                rollout_batch["old_log_probs"] = log_probs_fn(policy, rollout_batch["input_ids"],\n'
            '                                                              rollout_batch["labels"])["log_probs"]\n')),
        ["grpo_clip_two_epochs_given_old_log_probs", "temperature_policy"]),
    # every n_steps-th row in a train batch: each group split across optimizer steps
    "strided_train_batches": Mistake(
        "builds each train batch from every n-th row instead of consecutive rows, splitting each group across steps",
        edited(FULL_WIDTH, (
            "rows = torch.arange(step * train_batch_size, (step + 1) * train_batch_size)",
            "rows = torch.arange(step, n, n // train_batch_size)")),
        ["two_optimizer_steps_per_rollout_batch", "grad_clipped_two_steps"]),
    # the KL term subtracted: a reward for moving away from the reference
    "kl_wrong_sign": Mistake(
        "subtracts the KL term instead of adding it: a reward for moving away from the reference",
        edited(FULL_WIDTH,
                                 ("(kl_coef / k * kl).backward(", "(-kl_coef / k * kl).backward("),
                                 ("float(kl_coef / k * kl.detach())", "float(-kl_coef / k * kl.detach())")),
        ["kl_penalty_to_reference", "kl_penalty_grpo_clip_k4"]),
    # the KL term of each micro-batch not divided by k: k micro-batches count it k times
    "kl_not_divided_by_k": Mistake(
        "does not divide each micro-batch's KL term by gradient_accumulation_steps, so it counts k times",
        edited(FULL_WIDTH,
                                       ("(kl_coef / k * kl).backward(", "(kl_coef * kl).backward("),
                                       ("float(kl_coef / k * kl.detach())", "float(kl_coef * kl.detach())")),
        ["kl_penalty_to_reference", "kl_penalty_grpo_clip_k4"]),
    # the step's loss overwritten by each micro-batch's: the last one's, not their sum
    "loss_of_the_last_micro_batch_only": Mistake(
        "logs the last micro-batch's loss instead of the sum over the step's micro-batches",
        edited(FULL_WIDTH, ("step_loss += float(loss)", "step_loss = float(loss)")),
        ["on_policy_k2", "on_policy_k4"]),
}

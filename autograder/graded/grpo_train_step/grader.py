"""The grader's side of `grpo_train_step` (notebook 09): how its hidden cases are drawn, the correct
versions that must earn full marks and the known mistakes that must lose them, each with the
sentence a student reads (`autograder.mistakes`). Never in a student kit or the grading sandbox,
which hold the folder's __init__.py only.

Hidden cases of `grpo_train_step(policy, optimizer, rollout_batch, loss_type, train_batch_size,
gradient_accumulation_steps, epochs_per_rollout_batch=1, cliprange=None, max_grad_norm=1.0,
kl_coef=0.0, scheduler=None, log_probs_fn=..., train_step_fn=...) -> dict`.

Each case is one rollout batch's update of a small random Qwen2 in float64, end to end: its
attention is PyTorch's sdpa, which computes in float64 (Hugging Face's eager attention takes its
softmax in float32 even in a float64 model, and that rounding, ~1e-8 in the log-probs, moves with
the batch's width and AdamW turns it into ~1e-6 in near-zero-gradient parameters). The expected
update is the plain reference's; the tolerance is measured from its spread against two other
batchings (VARIANTS): the trainer's packed update (rows of advantage 0 skipped, the rest sorted
by length into micro-batches of other widths) and the whole train batch scored at once
(`variant_whole_train_batch`, grader-only), so that a correct step of any batching passes while
a wrong order, count or slice moves parameters by about the learning rate. A case is plain data: `make_inputs` draws the rollout batch (random
token ids in groups that share a prompt, 0/1 rewards, group-normalised advantages), and `call`
builds the model from a config dict and a seed, AdamW (and a warmup schedule where the case has
one) from numbers, and passes the reference `log_probs_fn` (notebook 03) and `train_step_fn`
(notebook 07) explicitly, so a student is graded on the update itself. Outputs: the returned per-optimizer-step losses and gradient norms, the number of
optimizer steps, every parameter after the update, the learning rate left in the optimizer, and
whether gradients are left over.

The old log-probs of the grpo_clip cases come from a perturbed copy of the model (a sampling
policy that is not the current one), and so do the reference log-probs of the KL case: a step
that recomputes them from the current policy, or whose KL term has the wrong sign or scale,
lands elsewhere. Several cases clip the gradient (a small max_grad_norm) over two or more
optimizer steps of different norms, where AdamW, scale-free within one step, feels the clip.

The hidden cases run one rollout batch's update of a small random float64 Qwen2 whose attention is
sdpa (`autograder/graded/grpo_train_step/`): the correct versions below batch the rows in other
ways (full-width or cut micro-batches, packed by length with the rows of weight 0 left out), so
their updates differ from the reference's by float64 rounding only, the whole train batch at once
among them (see WHOLE_TRAIN_BATCH_AT_ONCE: it found a hole in the first tolerance rule).
"""

from __future__ import annotations

import inspect
import textwrap
import torch

import course_lib.grpo as grpo
from autograder.graded.grpo_train_step import build_model, Temperature
from autograder.mistakes import edited, Mistake


# ---------------------------------------------------------------- the hidden cases
PERTURB = True  # the inputs' rounding carried through the update (autograder.cases.perturb)
VARIANTS = ["course_lib.training.grpo_update:packed_grpo_train_step",
            "autograder.graded.grpo_train_step.grader:variant_whole_train_batch"]

MODEL = dict(vocab_size=48, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
             num_key_value_heads=1, max_position_embeddings=64, tie_word_embeddings=True, pad_token_id=0)


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    @torch.no_grad()
    def log_probs(model, batch: dict) -> torch.Tensor:
        logits = model(batch["input_ids"]).logits
        return torch.log_softmax(logits, dim=-1).gather(-1, batch["labels"][..., None])[..., 0]

    def rollout_batch(gen: torch.Generator, n_groups: int, group_size: int, vocab: int,
                       constant_groups: tuple[int, ...] = ()) -> dict:
        """Groups of `group_size` responses to one prompt each, right-padded with id 0, tokenized as
        `tokenize_prompt_and_output` does; rewards 0/1, advantages normalised per group by the std."""
        rows = []
        for g in range(n_groups):
            prompt = torch.randint(3, vocab, (int(torch.randint(2, 6, (1,), generator=gen)),), generator=gen)
            for _ in range(group_size):
                response = torch.randint(3, vocab, (int(torch.randint(1, 8, (1,), generator=gen)),), generator=gen)
                rows.append((prompt, response))
        width = max(len(p) + len(r) for p, r in rows)
        full = torch.zeros(len(rows), width, dtype=torch.long)
        is_output = torch.zeros(len(rows), width, dtype=torch.bool)
        for i, (p, r) in enumerate(rows):
            full[i, : len(p)] = p
            full[i, len(p) : len(p) + len(r)] = r
            is_output[i, len(p) : len(p) + len(r)] = True
        rewards = (torch.rand(n_groups, group_size, generator=gen) < 0.5).double()
        for g in constant_groups:  # every answer of the group scored the same: no signal, advantage exactly 0
            rewards[g] = float(g % 2)
        for g in range(n_groups):
            if g not in constant_groups and rewards[g].min() == rewards[g].max():
                rewards[g, 0] = 1.0 - rewards[g, 0]  # keep the other groups informative
        centered = rewards - rewards.mean(dim=1, keepdim=True)
        std = rewards.std(dim=1, keepdim=True)
        advantages = torch.where(std > 0, centered / (std + 1e-6), torch.zeros_like(centered))
        return {"input_ids": full[:, :-1], "labels": full[:, 1:], "response_mask": is_output[:, 1:],
                "raw_rewards": rewards.reshape(-1), "advantages": advantages.reshape(-1)}

    def case(loss_type="reinforce_with_baseline", n_groups=2, group_size=4, train_batch_size=8, k=2, epochs=1,
             cliprange=None, max_grad_norm=1.0, kl_coef=0.0, schedule=None, temperature=None, lr=1e-2,
             weight_decay=0.0, constant_groups=()):
        seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen))
        batch = rollout_batch(gen, n_groups, group_size, MODEL["vocab_size"], constant_groups)
        sampler_seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen))

        def scored(model):
            return log_probs(Temperature(model, temperature) if temperature else model, batch)

        if loss_type == "grpo_clip":  # the policy that sampled: near the current one, not equal to it
            batch["old_log_probs"] = scored(build_model(MODEL, seed, perturb=0.05, perturb_seed=sampler_seed))
        if kl_coef > 0:  # a reference policy that differs from the current one, so the KL has a gradient
            batch["ref_log_probs"] = scored(build_model(MODEL, seed, perturb=0.1, perturb_seed=sampler_seed + 1))
        return {
            "model": {"config": dict(MODEL), "seed": seed},
            "rollout_batch": batch,
            "args": {"loss_type": loss_type, "train_batch_size": train_batch_size, "gradient_accumulation_steps": k,
                     "epochs_per_rollout_batch": epochs, "cliprange": cliprange, "max_grad_norm": max_grad_norm,
                     "kl_coef": kl_coef},
            "optimizer": {"lr": lr, "betas": (0.9, 0.95), "weight_decay": weight_decay},
            "schedule": schedule,  # None, or the list of learning-rate factors of successive optimizer steps
            "temperature": temperature,
        }

    return [
        ("on_policy_k1", case(k=1)),
        ("on_policy_k2", case(k=2)),
        ("on_policy_k4", case(k=4, n_groups=2, group_size=4)),
        ("no_baseline_k2", case(loss_type="no_baseline", k=2)),
        ("grpo_clip_two_epochs_given_old_log_probs", case(loss_type="grpo_clip", k=2, epochs=2, cliprange=0.2)),
        ("two_optimizer_steps_per_rollout_batch", case(n_groups=4, group_size=4, train_batch_size=8, k=2,
                                                       max_grad_norm=0.05)),
        ("grpo_clip_two_steps_two_epochs_clipped_grad", case(loss_type="grpo_clip", n_groups=4, group_size=4,
                                                             train_batch_size=8, k=2, epochs=2, cliprange=0.1,
                                                             max_grad_norm=0.05)),
        ("kl_penalty_to_reference", case(k=2, kl_coef=0.5, n_groups=4, group_size=4, train_batch_size=8)),
        ("kl_penalty_grpo_clip_k4", case(loss_type="grpo_clip", k=4, kl_coef=0.3, cliprange=0.2,
                                         n_groups=2, group_size=4, train_batch_size=8)),
        ("warmup_schedule_two_epochs", case(loss_type="grpo_clip", n_groups=4, group_size=4, train_batch_size=8, k=2,
                                            epochs=2, cliprange=0.2, schedule=[0.1, 0.4, 0.7, 1.0, 1.0],
                                            weight_decay=0.1)),
        ("rows_of_zero_advantage", case(n_groups=4, group_size=2, train_batch_size=8, k=4, constant_groups=(0, 1))),
        ("grad_clipped_two_steps", case(n_groups=4, group_size=2, train_batch_size=4, k=2, max_grad_norm=0.02)),
        ("temperature_policy", case(loss_type="grpo_clip", k=2, epochs=2, cliprange=0.2, temperature=0.7)),
    ]


def variant_whole_train_batch(policy, optimizer, rollout_batch, loss_type, train_batch_size, gradient_accumulation_steps,
                              epochs_per_rollout_batch=1, cliprange=None, max_grad_norm=1.0, kl_coef=0.0,
                              scheduler=None, log_probs_fn=None, train_step_fn=None):
    """The same update with each train batch scored in one forward (one micro-batch of all its
    rows, accumulation 1): the same gradient, rounded otherwise. Grader-only (a harness drops it)."""
    from course_lib.grpo import _check_rollout_batch, _k3_per_token, slice_micro_batch
    from course_lib.masking import masked_mean

    n = len(rollout_batch["advantages"])
    _check_rollout_batch(n, train_batch_size, gradient_accumulation_steps, kl_coef, rollout_batch)
    out = {"loss": [], "grad_norm": [], "token_entropy": [], "clip_fraction": [], "kl": []}
    for _ in range(epochs_per_rollout_batch):
        for first in range(0, n, train_batch_size):
            tb = slice_micro_batch(rollout_batch, slice(first, first + train_batch_size))
            scored = log_probs_fn(policy, tb["input_ids"], tb["labels"], return_token_entropy=True)
            log_probs, mask = scored["log_probs"], tb["response_mask"]
            step_loss = 0.0
            if kl_coef > 0:
                kl = masked_mean(_k3_per_token(log_probs, tb["ref_log_probs"]), mask, dim=-1).mean()
                (kl_coef * kl).backward(retain_graph=True)
                step_loss += float(kl_coef * kl.detach())
            loss, _ = train_step_fn(log_probs, mask, 1, loss_type, raw_rewards=tb["raw_rewards"],
                                    advantages=tb["advantages"], old_log_probs=tb.get("old_log_probs"),
                                    cliprange=cliprange)
            out["grad_norm"].append(float(torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)))
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            out["loss"].append(step_loss + float(loss))
    return out


# ---------------------------------------------------------------- the correct versions
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
# the correct version 'full_width_micro_batches' (autograder/graded/grpo_train_step/test_grpo_train_step.py), which the edits start from
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


CORRECT = {
    # the loop of the docstring, with the given helpers
    "plain_loop_with_the_given_helpers": given(SIGNATURE + """
    n, k = len(rollout_batch["advantages"]), gradient_accumulation_steps
    _check_rollout_batch(n, train_batch_size, k, kl_coef, rollout_batch)
    micro = train_batch_size // k
    out = {"loss": [], "grad_norm": [], "token_entropy": [], "clip_fraction": [], "kl": []}
    for _ in range(epochs_per_rollout_batch):
        for first in range(0, n, train_batch_size):
            step_loss = 0.0
            for start in range(first, first + train_batch_size, micro):
                mb = slice_micro_batch(rollout_batch, slice(start, start + micro))
                scored = log_probs_fn(policy, mb["input_ids"], mb["labels"], return_token_entropy=True)
                log_probs, mask = scored["log_probs"], mb["response_mask"]
                out["token_entropy"].append(float(masked_mean(scored["token_entropy"], mask)))
                if kl_coef > 0:
                    kl = masked_mean(_k3_per_token(log_probs, mb["ref_log_probs"]), mask, dim=-1).mean()
                    (kl_coef * kl / k).backward(retain_graph=True)
                    step_loss += float(kl_coef * kl / k)
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
    """),
    # no helpers: full-width micro-batches (padding columns kept), the KL written out, index tensors
    "full_width_micro_batches": FULL_WIDTH,
    # the trainer's packed update as a student writes it: without a KL term the rows of weight exactly 0
    # (their loss and gradient are exactly 0) are left out, the rest sorted by length and cut into
    # micro-batches of near-equal size, each weighed by its share of the train batch
    "packed_by_length_zero_rows_skipped": given(SIGNATURE + """
    n, k = len(rollout_batch["advantages"]), gradient_accumulation_steps
    _check_rollout_batch(n, train_batch_size, k, kl_coef, rollout_batch)
    micro = train_batch_size // k
    weight = rollout_batch["raw_rewards" if loss_type == "no_baseline" else "advantages"]
    mask_all = rollout_batch["response_mask"]
    length = mask_all.shape[1] - mask_all.flip(-1).long().argmax(-1)  # one past each row's last response token
    out = {"loss": [], "grad_norm": [], "token_entropy": [], "clip_fraction": [], "kl": []}
    for _ in range(epochs_per_rollout_batch):
        for first in range(0, n, train_batch_size):
            rows = torch.arange(first, first + train_batch_size)
            if kl_coef == 0:
                rows = rows[weight[rows] != 0]
            rows = rows[length[rows].argsort(stable=True)]
            groups = rows.tensor_split(-(-len(rows) // micro)) if len(rows) else []
            step_loss = 0.0
            for mb_rows in groups:
                mb = slice_micro_batch(rollout_batch, mb_rows)
                share = train_batch_size / len(mb_rows)  # this micro-batch's rows weigh 1 / train_batch_size each
                scored = log_probs_fn(policy, mb["input_ids"], mb["labels"], return_token_entropy=True)
                log_probs, mask = scored["log_probs"], mb["response_mask"]
                out["token_entropy"].append(float(masked_mean(scored["token_entropy"], mask)))
                if kl_coef > 0:
                    kl = masked_mean(_k3_per_token(log_probs, mb["ref_log_probs"]), mask, dim=-1).mean()
                    (kl_coef * kl / share).backward(retain_graph=True)
                    step_loss += float(kl_coef * kl / share)
                    out["kl"].append(float(kl))
                loss, meta = train_step_fn(log_probs, mask, share, loss_type, raw_rewards=mb["raw_rewards"],
                                           advantages=mb["advantages"], old_log_probs=mb.get("old_log_probs"),
                                           cliprange=cliprange)
                step_loss += float(loss)
                if "clip_fraction" in meta:
                    out["clip_fraction"].append(float(meta["clip_fraction"]))
            if not groups:  # nothing scored: a zero gradient, and the optimizer still steps on it
                for p in policy.parameters():
                    p.grad = torch.zeros_like(p)
            out["grad_norm"].append(float(torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)))
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            out["loss"].append(step_loss)
    return out
    """),
    # split / tensor_split over row indices, .item() for the logs, the optimizer's default zero_grad
    "split_indices": given(SIGNATURE + """
    N = rollout_batch["input_ids"].shape[0]
    _check_rollout_batch(N, train_batch_size, gradient_accumulation_steps, kl_coef, rollout_batch)
    logs = {"loss": [], "grad_norm": [], "token_entropy": [], "clip_fraction": [], "kl": []}
    for epoch in range(epochs_per_rollout_batch):
        for step_rows in torch.arange(N).split(train_batch_size):
            total = 0.0
            for mb_rows in step_rows.tensor_split(gradient_accumulation_steps):
                mb = slice_micro_batch(rollout_batch, mb_rows)
                res = log_probs_fn(policy, mb["input_ids"], mb["labels"], return_token_entropy=True)
                logp, mask = res["log_probs"], mb["response_mask"]
                logs["token_entropy"].append(masked_mean(res["token_entropy"], mask).item())
                if kl_coef > 0:
                    kl = masked_mean(_k3_per_token(logp, mb["ref_log_probs"]), mask, dim=-1).mean()
                    kl_term = kl_coef * kl / gradient_accumulation_steps
                    torch.autograd.backward(kl_term, retain_graph=True)  # train_step_fn backprops through logp next
                    total += kl_term.item()
                    logs["kl"].append(kl.item())
                loss, meta = train_step_fn(logp, mask, gradient_accumulation_steps, loss_type,
                                           raw_rewards=mb["raw_rewards"], advantages=mb["advantages"],
                                           old_log_probs=mb.get("old_log_probs"), cliprange=cliprange)
                total += loss.item()
                if "clip_fraction" in meta:
                    logs["clip_fraction"].append(float(meta["clip_fraction"]))
            norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), max_norm=max_grad_norm)
            optimizer.step()
            if scheduler:
                scheduler.step()
            optimizer.zero_grad()
            logs["grad_norm"].append(norm.item())
            logs["loss"].append(total)
    return logs
    """),
}


# The same update with the whole train batch scored at once (k micro-batches of one train batch add up to
# its gradient; more memory, and the visible checks count the calls, but the update is the one graded).
# It found a hole in the first tolerance rule: in on_policy_k4 its returned loss was -0.00402839403639027
# against the float64 truth -0.004028394036390215, an error of 5.55e-17, half a unit in the last place of
# the micro-batch terms (~0.5) whose sum the loss is (a group's advantages sum to 0, so the terms cancel to
# 0.004), while the tolerance, 16 * eps * |loss| = 1.43e-17, knew only the cancelled value. The rule now
# carries the rounding of the inputs through the reference (`autograder.cases.perturb`), which measures
# that cancellation on every case, and this version earns full marks.
WHOLE_TRAIN_BATCH_AT_ONCE = given(SIGNATURE + """
    n = len(rollout_batch["advantages"])
    _check_rollout_batch(n, train_batch_size, gradient_accumulation_steps, kl_coef, rollout_batch)
    out = {"loss": [], "grad_norm": [], "token_entropy": [], "clip_fraction": [], "kl": []}
    for _ in range(epochs_per_rollout_batch):
        for first in range(0, n, train_batch_size):
            tb = slice_micro_batch(rollout_batch, slice(first, first + train_batch_size))
            scored = log_probs_fn(policy, tb["input_ids"], tb["labels"], return_token_entropy=True)
            log_probs, mask = scored["log_probs"], tb["response_mask"]
            out["token_entropy"].append(float(masked_mean(scored["token_entropy"], mask)))
            step_loss = 0.0
            if kl_coef > 0:
                kl = masked_mean(_k3_per_token(log_probs, tb["ref_log_probs"]), mask, dim=-1).mean()
                (kl_coef * kl).backward(retain_graph=True)
                step_loss += float(kl_coef * kl)
                out["kl"].append(float(kl))
            loss, meta = train_step_fn(log_probs, mask, 1, loss_type, raw_rewards=tb["raw_rewards"],
                                       advantages=tb["advantages"], old_log_probs=tb.get("old_log_probs"),
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
    """)
CORRECT["whole_train_batch_at_once"] = WHOLE_TRAIN_BATCH_AT_ONCE

# the fresh draws of the cases the many-draws check holds every version to (tests/test_graded.py; 40 by default)
DRAWS = 4


# ---------------------------------------------------------------- the known mistakes
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

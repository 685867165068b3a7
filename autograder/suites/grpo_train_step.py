"""Hidden cases of `grpo_train_step(policy, optimizer, rollout_batch, loss_type, train_batch_size,
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
"""

from __future__ import annotations

import torch

GRADED = "grpo_train_step"
PERTURB = True  # the inputs' rounding carried through the update (autograder.cases.perturb)
WARM = ('transformers',)  # imported by a judge runner started ahead (autograder.judge)
VARIANTS = ["course_lib.training.grpo_update:packed_grpo_train_step",
            "autograder.suites.grpo_train_step:variant_whole_train_batch"]
ATTENTION = "sdpa"  # float64 end to end (tests/graded/test_grpo_train_step.py checks it)
TIMEOUT = 240.0

MODEL = dict(vocab_size=48, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
             num_key_value_heads=1, max_position_embeddings=64, tie_word_embeddings=True, pad_token_id=0)


def build_model(config: dict, seed: int, perturb: float = 0.0, perturb_seed: int = 0) -> torch.nn.Module:
    """A random float64 Qwen2 from `config` and `seed`; `perturb` adds Gaussian noise to every weight."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(Qwen2Config(**config, attn_implementation=ATTENTION)).double()
    if perturb:
        gen = torch.Generator().manual_seed(perturb_seed)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(perturb * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    return model


class Temperature(torch.nn.Module):
    """A policy that scores at sampling temperature T: its logits are the model's divided by T."""

    def __init__(self, model: torch.nn.Module, temperature: float):
        super().__init__()
        self.model, self.temperature = model, temperature

    def forward(self, input_ids, **kw):
        out = self.model(input_ids, **kw)
        out.logits = out.logits / self.temperature
        return out


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


def call(fn, inputs: dict) -> dict:
    from course_lib.grpo import grpo_microbatch_train_step
    from course_lib.logprobs import get_response_log_probs

    torch.manual_seed(0)
    model = build_model(inputs["model"]["config"], inputs["model"]["seed"])
    model.train()
    policy = Temperature(model, inputs["temperature"]) if inputs["temperature"] else model
    opt = inputs["optimizer"]
    optimizer = torch.optim.AdamW(model.parameters(), lr=opt["lr"], betas=tuple(opt["betas"]),
                                  weight_decay=opt["weight_decay"])
    scheduler = None
    if inputs["schedule"] is not None:
        factors = list(inputs["schedule"])
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: factors[min(s, len(factors) - 1)])
    out = fn(policy, optimizer, inputs["rollout_batch"], scheduler=scheduler, log_probs_fn=get_response_log_probs,
             train_step_fn=grpo_microbatch_train_step, **inputs["args"])
    leftover = any(p.grad is not None and bool(p.grad.any()) for p in model.parameters())
    return {
        "loss": torch.tensor([float(x) for x in out["loss"]], dtype=torch.float64),
        "grad_norm": torch.tensor([float(x) for x in out["grad_norm"]], dtype=torch.float64),
        "optimizer_steps": len(out["loss"]),
        "parameters": torch.cat([p.detach().reshape(-1) for p in model.parameters()]),
        "final_lr": float(optimizer.param_groups[0]["lr"]),
        "gradients_left_over": leftover,
    }

"""How the judge calls `grpo_train_step(policy, optimizer, rollout_batch, loss_type, train_batch_size,
gradient_accumulation_steps, epochs_per_rollout_batch=1, cliprange=None, max_grad_norm=1.0,
kl_coef=0.0, scheduler=None, log_probs_fn=..., train_step_fn=...) -> dict` on a hidden case: `call`
(fresh copies of the case's inputs in, named outputs out) and its settings. Public: a student kit
and the grading sandbox hold this file; the cases, the correct versions and the known mistakes are
grader.py's.
"""

from __future__ import annotations

import torch

GRADED = "grpo_train_step"
WARM = ('transformers',)  # imported by a judge runner started ahead (autograder.judge)
ATTENTION = "sdpa"  # float64 end to end (autograder/graded/grpo_train_step/test_grpo_train_step.py checks it)
TIMEOUT = 240.0


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

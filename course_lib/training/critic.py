"""PPO's critic: a copy of the policy's backbone with a value head, V(s_t) at every position.

The critic reads the same tokens as the policy. `values[:, t]` is the value of the state after
input_ids[:, : t + 1], the state in which labels[:, t] (= input_ids[:, t + 1]) is chosen, so it
lines up with the log-probs of `get_response_log_probs` and with `response_mask`.

It starts as a copy of the policy's transformer (the features that already predict the answer
are a good start for predicting its reward) with a head initialised to 0, so that V = 0 exactly
at the first step: GAE's first advantages are then the plain returns, and no random head injects
noise the actor has to unlearn.
"""

from __future__ import annotations

import copy

import torch


class Critic(torch.nn.Module):
    """Backbone + linear value head: (B, T) input_ids -> (B, T) values (float32 or the backbone's dtype)."""

    def __init__(self, policy: torch.nn.Module):
        super().__init__()
        backbone = getattr(policy, "base_model", None)
        if backbone is None or backbone is policy:
            raise ValueError(f"{type(policy).__name__} has no base_model (the transformer under the LM head) "
                             f"to copy as the critic's backbone")
        self.backbone = copy.deepcopy(backbone)
        for p in self.backbone.parameters():
            p.requires_grad_(True)
        hidden = policy.config.hidden_size
        param = next(self.backbone.parameters())
        self.head = torch.nn.Linear(hidden, 1, dtype=param.dtype, device=param.device)
        torch.nn.init.zeros_(self.head.weight)  # V = 0 at the start (see the module docstring)
        torch.nn.init.zeros_(self.head.bias)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return self.head(hidden).squeeze(-1)


def parameter_count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())

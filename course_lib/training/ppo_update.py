"""PPO's update of one rollout batch: the critic scores it, GAE turns the rewards into per-token
advantages, then actor and critic train side by side on the graded `ppo_microbatch_train_step`.

    old_values      = critic(rollouts)                          (B, T), before any update, eval mode
    rewards         = token_level_rewards(scores, mask, kl=log pi_old - log pi_ref, kl_coef)   (k1 per token)
    A, returns      = compute_gae(rewards, old_values, mask, gamma, lam);  A = masked_whiten(A, mask)
    for each epoch, optimizer step, micro-batch (packed by length, as GRPO's packed update):
        loss = (clip loss of the actor + vf_coef * clipped value loss) / accumulation;  backward
        clip each model's gradient norm to max_grad_norm; step both optimizers

`PPOUpdate` is called exactly as the GRPO trainer calls its `update_fn`, so the PPO trainer is
the GRPO trainer's loop with this update: same rollouts, same reward, same old log-probs; the
advantages are the only difference. It holds the critic and the critic's AdamW (constant learning
rate `critic_lr`), and gives their state to the trainer's checkpoints (`state_dict`). The graded
functions it calls are injectable (`step_fn`, `token_rewards_fn`, `gae_fn`, `whiten_fn`: notebook
11 passes the student's own).
"""

from __future__ import annotations

import torch

from ..grpo import slice_micro_batch
from ..masking import masked_mean
from ..ppo import compute_gae, masked_whiten, ppo_microbatch_train_step, token_level_rewards
from .common import make_optimizer
from .critic import Critic
from .grpo_update import micro_batch_rows


def masked_variance(x: torch.Tensor, mask: torch.Tensor) -> float:
    """The (biased) variance of `x` over the entries where `mask` is 1."""
    mean = masked_mean(x, mask)
    return float(masked_mean((x - mean) ** 2, mask))


def explained_variance(predicted: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> float:
    """1 - Var[target - predicted] / Var[target] over the mask: 1 a perfect critic, 0 one that predicts the mean,
    negative one worse than that."""
    var = masked_variance(target, mask)
    return float("nan") if var == 0 else 1.0 - masked_variance(target - predicted, mask) / var


class PPOUpdate:
    """The PPO update (see the module docstring) around `critic`, with the settings of a `PPOConfig`."""

    def __init__(self, critic: Critic, *, gamma: float, lam: float, vf_coef: float, cliprange_value: float,
                 critic_lr: float, weight_decay: float, betas, whiten_advantages: bool, kl_coef: float,
                 fused_adamw: bool = False, step_fn=ppo_microbatch_train_step, token_rewards_fn=token_level_rewards,
                 gae_fn=compute_gae, whiten_fn=masked_whiten):
        self.critic, self.step_fn = critic, step_fn
        self.token_rewards_fn, self.gae_fn, self.whiten_fn = token_rewards_fn, gae_fn, whiten_fn
        self.gamma, self.lam, self.vf_coef, self.cliprange_value = gamma, lam, vf_coef, cliprange_value
        self.whiten, self.kl_coef = whiten_advantages, kl_coef
        self.optimizer = make_optimizer(critic, lr=critic_lr, weight_decay=weight_decay, betas=betas,
                                        fused=fused_adamw)

    def state_dict(self) -> dict:
        return {"critic": self.critic.state_dict(), "critic_optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.critic.load_state_dict(state["critic"])
        self.optimizer.load_state_dict(state["critic_optimizer"])

    @torch.no_grad()
    def score_values(self, batch: dict[str, torch.Tensor], micro: int) -> torch.Tensor:
        """(N, T) values of the rollouts under the critic as it is now (eval mode), `micro` rows at a time."""
        self.critic.eval()
        values = torch.zeros_like(batch["response_mask"], dtype=torch.float32)
        for rows in micro_batch_rows(batch, 0, batch["response_mask"].shape[0], micro, None):
            mb = slice_micro_batch(batch, rows)
            values[rows, : mb["input_ids"].shape[1]] = self.critic(mb["input_ids"]).float()
        return values

    def prepare(self, rollout_batch: dict[str, torch.Tensor], micro: int) -> dict[str, torch.Tensor]:
        """The rollout batch with per-token "advantages", "returns", "old_values" (and the raw advantages)."""
        mask = rollout_batch["response_mask"]
        kl = None
        if self.kl_coef > 0:  # k1 per token, in the reward (as InstructGPT's PPO)
            kl = rollout_batch["old_log_probs"] - rollout_batch["ref_log_probs"]
        old_values = self.score_values(rollout_batch, micro)
        rewards = self.token_rewards_fn(rollout_batch["raw_rewards"], mask, kl=kl, kl_coef=self.kl_coef)
        advantages, returns = self.gae_fn(rewards, old_values, mask, self.gamma, self.lam)
        out = {**rollout_batch, "old_values": old_values, "returns": returns, "raw_advantages": advantages}
        out["advantages"] = self.whiten_fn(advantages, mask) if self.whiten else advantages
        return out

    def __call__(self, *, policy, optimizer, rollout_batch, loss_type, train_batch_size, gradient_accumulation_steps,
                 epochs_per_rollout_batch=1, cliprange=0.2, max_grad_norm=1.0, scheduler=None, log_probs_fn,
                 **_grpo_only) -> dict:
        """Arguments and result as `packed_grpo_train_step` (its `train_step_fn`, `kl_coef` and `kl_term`
        are GRPO's and not used), plus "metrics": the critic's numbers of this batch."""
        if loss_type != "grpo_clip":
            raise ValueError(f"PPO trains the clip loss: loss_type must be 'grpo_clip', not {loss_type!r}")
        micro = train_batch_size // gradient_accumulation_steps
        batch = self.prepare(rollout_batch, micro)
        mask = batch["response_mask"]
        out = {"loss": [], "grad_norm": [], "token_entropy": [], "clip_fraction": [], "kl": [], "value_loss": [],
               "value_clip_fraction": [], "critic_grad_norm": []}
        n = mask.shape[0]
        self.critic.train()
        for _epoch in range(epochs_per_rollout_batch):
            for step in range(n // train_batch_size):
                step_loss = 0.0
                for rows in micro_batch_rows(batch, step * train_batch_size, train_batch_size, micro, None):
                    mb = slice_micro_batch(batch, rows)
                    scored = log_probs_fn(policy, mb["input_ids"], mb["labels"], return_token_entropy=True)
                    out["token_entropy"].append(float(masked_mean(scored["token_entropy"], mb["response_mask"])))
                    values = self.critic(mb["input_ids"])
                    loss, meta = self.step_fn(
                        scored["log_probs"], values, mb["response_mask"], train_batch_size / len(rows),
                        advantages=mb["advantages"], old_log_probs=mb["old_log_probs"], old_values=mb["old_values"],
                        returns=mb["returns"], cliprange=cliprange, cliprange_value=self.cliprange_value,
                        vf_coef=self.vf_coef)
                    step_loss += float(loss)
                    for key in ("clip_fraction", "value_loss", "value_clip_fraction"):
                        out[key].append(float(meta[key]))
                out["grad_norm"].append(float(torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)))
                out["critic_grad_norm"].append(float(torch.nn.utils.clip_grad_norm_(self.critic.parameters(),
                                                                                    max_grad_norm)))
                for opt in (optimizer, self.optimizer):
                    opt.step()
                    opt.zero_grad(set_to_none=True)
                if scheduler is not None:
                    scheduler.step()
                out["loss"].append(step_loss)
        out["metrics"] = {
            "value_loss": _mean(out.pop("value_loss")),
            "value_clip_fraction": _mean(out.pop("value_clip_fraction")),
            "critic_grad_norm": _mean(out.pop("critic_grad_norm")),
            "explained_variance": explained_variance(batch["old_values"], batch["returns"], mask),
            "value_mean": float(masked_mean(batch["old_values"], mask)),
            "advantage_var": masked_variance(batch["raw_advantages"], mask),
        }
        return out


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")

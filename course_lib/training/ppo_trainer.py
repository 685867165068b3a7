"""PPO with a critic (notebook 11): the GRPO trainer's loop with PPO's update.

    for step in 1 .. n_grpo_steps:                  # train_grpo's loop, unchanged
        rollouts, scores, old (and reference) log-probs      (collect_rollouts: same sampling, same reward)
        PPOUpdate: critic values -> token rewards -> GAE -> whitened per-token advantages,
                   then actor and critic trained on ppo_microbatch_train_step
        weight sync, evaluation, checkpoint (the critic and its optimizer inside it)

Four models in InstructGPT's PPO: the actor (the policy), a frozen reference (kl_coef > 0),
the critic (`critic.Critic`: the policy's backbone copied, a value head at 0) and the reward
model; here the reward is the rule-based `r1_zero_reward_fn`, so three are networks.
The group advantages `collect_rollouts` computes are not used; `group_size` still sets how many
samples each question gets, so PPO and GRPO can be run on the same rollouts.
"""

from __future__ import annotations

from typing import Callable

import torch

from ..ppo import compute_gae, masked_whiten, ppo_microbatch_train_step, token_level_rewards
from .common import TrainResult, resolve_config
from .config import PPOConfig
from .critic import Critic
from .grpo_trainer import _policy, train_grpo
from .ppo_update import PPOUpdate


def check_ppo_config(cfg: PPOConfig) -> None:
    """The settings PPO does not take, each named."""
    if cfg.loss_type != "grpo_clip":
        raise ValueError(f"PPO trains the clip loss: loss_type must be 'grpo_clip', not {cfg.loss_type!r}")
    if cfg.kl_coef > 0 and cfg.kl_penalty != "k1_reward":
        raise ValueError(f"PPO puts the KL in the per-token reward: kl_penalty must be 'k1_reward' with kl_coef > 0, "
                         f"not {cfg.kl_penalty!r}")
    for name in ("gamma", "lam"):
        if not 0.0 <= getattr(cfg, name) <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {getattr(cfg, name)}")


def train_ppo(config: PPOConfig | dict | None = None, model: torch.nn.Module | None = None, tokenizer=None,
              train_data: list[dict] | None = None, eval_data: list[dict] | None = None, *,
              critic: Critic | None = None, step_fn: Callable = ppo_microbatch_train_step,
              token_rewards_fn: Callable = token_level_rewards, gae_fn: Callable = compute_gae,
              whiten_fn: Callable = masked_whiten, **kwargs) -> TrainResult:
    """Train `model` (or `config.model`) with PPO; returns the run's result, its critic as `result.critic`.

    Args: as `train_grpo` (its keywords pass through: engine, resume, progress, on_step, reward_fn,
    log_probs_fn, tokenize_fn), plus an optional ready `critic` (default: `Critic(model)`) and the
    graded functions of notebook 11 it calls, `step_fn`, `token_rewards_fn`, `gae_fn`, `whiten_fn`
    (default: the references in `course_lib.ppo`; notebook 11 passes the student's own).
    """
    # config fields given as keywords override the config; `engine` is both a field (the engine's name) and
    # `train_grpo`'s keyword (an engine object): an object passes through to `train_grpo`
    overrides = {k: kwargs.pop(k) for k in list(kwargs) if k in PPOConfig.__dataclass_fields__
                 and not (k == "engine" and not isinstance(kwargs[k], str))}
    cfg = resolve_config("ppo", config, overrides)
    if not isinstance(cfg, PPOConfig):
        raise ValueError(f"train_ppo needs a PPOConfig (or a dict of its fields), got {type(cfg).__name__}")
    check_ppo_config(cfg)
    model, tokenizer = _policy(cfg, model, tokenizer)
    critic = critic if critic is not None else Critic(model)
    if cfg.gradient_checkpointing:  # the critic's backbone is a second policy-sized network: checkpointed too
        critic.backbone.gradient_checkpointing_enable()
    update = PPOUpdate(critic, gamma=cfg.gamma, lam=cfg.lam, vf_coef=cfg.vf_coef, cliprange_value=cfg.cliprange_value,
                       critic_lr=cfg.critic_lr, weight_decay=cfg.weight_decay, betas=cfg.betas,
                       whiten_advantages=cfg.whiten_advantages, kl_coef=cfg.kl_coef, fused_adamw=cfg.fused_adamw,
                       step_fn=step_fn, token_rewards_fn=token_rewards_fn, gae_fn=gae_fn, whiten_fn=whiten_fn)
    result = train_grpo(cfg, model, tokenizer, train_data, eval_data, update_fn=update, extra_state=update, **kwargs)
    result.critic = critic.eval()
    return result

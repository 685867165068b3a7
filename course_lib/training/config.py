"""Run configurations (dataclasses) and YAML loading with `key=value` overrides.

One dataclass per command: `SFTConfig`, `GRPOConfig`, `PPOConfig`, `DPOConfig`, `EvalConfig`. A YAML file sets any of
their fields; `key=value` overrides on the command line are parsed as YAML scalars
(`lr=3e-4`, `n_examples=null`, `filter_correct=true`). Unknown keys are errors, not silently
ignored settings.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar


@dataclass
class ModelConfig:
    model: str = "qwen2-base"  # a tiny model name, a saved folder (a checkpoint), or a hub id
    tokenizer: str | None = None  # default: the model's own
    device: str = "auto"  # "auto": cuda when present, else cpu
    dtype: str = "auto"  # "auto": bfloat16 on GPU, float32 on CPU; or "float32", "bfloat16"
    attn_implementation: str | None = None  # e.g. "flash_attention_2" on GPUs; None: the default
    seed: int = 0
    output_dir: str | None = None


@dataclass
class EvalSettings:
    data: str = "arith"  # load_problems source: "arith", "gsm8k", or a folder of {split}.jsonl
    eval_split: str = "test"
    eval_examples: int | None = 1000  # first N of the split; None: all
    eval_every: int = 0  # steps between evaluations during training; 0: only at the end
    eval_max_tokens: int = 128
    eval_batch_size: int = 256
    engine: str = "fast"  # rollout engine: "fast" (Qwen2/Llama; else it falls back to "hf"), "hf" or "vllm"
    engine_kwargs: dict = field(default_factory=dict)
    engine_fallback: str | None = None  # an engine to go on with when the rollout engine fails mid-run; None: stop


@dataclass
class SFTConfig(ModelConfig, EvalSettings):
    train_split: str = "train"
    n_examples: int | None = None  # train on the first N examples (the data-size ablation)
    filter_correct: bool = False  # keep only examples whose output the reward function grades correct
    lr: float = 1e-3
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.95)
    fused_adamw: bool = False  # AdamW's fused kernel (training/common.make_optimizer); the GPU configs set it
    warmup_steps: int = 10
    min_lr_ratio: float = 0.1  # the cosine decays to lr * min_lr_ratio
    steps: int | None = None  # optimizer steps; None: derived from epochs
    epochs: float = 1.0
    batch_size: int = 32  # examples per optimizer step
    gradient_accumulation_steps: int = 1
    max_grad_norm: float = 1.0
    gradient_checkpointing: bool = False
    checkpoint_every: int = 0  # 0: only at the end (when output_dir is set)
    keep_checkpoints: int = 2


@dataclass
class GRPOConfig(ModelConfig, EvalSettings):
    kind: ClassVar[str] = "grpo"  # the trainer's name in checkpoints and metrics (not a setting)
    per_token_advantages: ClassVar[bool] = False  # GRPO: one advantage per response, 0 for a tied group
    train_split: str = "train"
    n_questions: int | None = None  # draw questions from the first N of the split; None: all
    n_grpo_steps: int = 200
    lr: float = 1e-5
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.95)
    fused_adamw: bool = False  # AdamW's fused kernel (training/common.make_optimizer); the GPU configs set it
    warmup_steps: int = 0
    min_lr_ratio: float = 1.0  # the cosine decays to lr * min_lr_ratio over the optimizer steps; 1.0: constant lr
    advantage_eps: float = 1e-6
    rollout_batch_size: int = 256
    group_size: int = 8
    sampling_temperature: float = 1.0
    sampling_top_p: float = 1.0
    sampling_min_tokens: int = 4
    sampling_max_tokens: int = 1024
    stop: tuple[str, ...] = ("</answer>",)
    epochs_per_rollout_batch: int = 1  # 1: on-policy; more: off-policy with stored old log-probs
    train_batch_size: int = 256
    gradient_accumulation_steps: int = 128
    loss_type: str = "reinforce_with_baseline"  # no_baseline | reinforce_with_baseline | grpo_clip
    use_std_normalization: bool = True
    cliprange: float = 0.2
    kl_coef: float = 0.0  # > 0: a KL penalty to the frozen starting policy
    kl_penalty: str = "k3"  # with kl_coef > 0: k3 | k2 | k3_value_k2_grad (a loss) | k1_reward (training/kl_penalty.py)
    # the train/inference mismatch (notebook 15), grpo_clip only: None trains the plain loss; token_truncate |
    # token_mask | sequence_truncate | sequence_mask trains corrected_grpo_loss, weighting each token by the trainer's
    # old log-prob against the sampler's (is_cap: the cap; is_aggregate: sum | mean of a sequence's log-ratios)
    is_correction: str | None = None
    is_cap: float = 2.0
    is_aggregate: str = "sum"
    log_mismatch: bool = False  # also score the sampler's log-probs without a correction, to log their gap
    max_grad_norm: float = 1.0
    gradient_checkpointing: bool = False
    checkpoint_every: int = 0
    keep_checkpoints: int = 2


@dataclass
class PPOConfig(GRPOConfig):
    """GRPO's settings (the same rollouts, reward and clip loss) plus the critic's: PPO with GAE."""

    kind: ClassVar[str] = "ppo"
    per_token_advantages: ClassVar[bool] = True  # every row has advantages: none is skipped
    loss_type: str = "grpo_clip"  # PPO's actor loss; the only one accepted
    kl_penalty: str = "k1_reward"  # with kl_coef > 0: k1 per token in the reward (the only one accepted)
    gamma: float = 1.0  # discount over response tokens
    lam: float = 0.95  # GAE's lambda: 0 the one-step TD residual, 1 the Monte Carlo return minus V
    vf_coef: float = 0.5  # weight of the value loss
    cliprange_value: float = 0.2
    critic_lr: float = 1e-4  # the critic's AdamW, constant
    whiten_advantages: bool = True  # masked_whiten over the rollout batch's response tokens


@dataclass
class DPOConfig(ModelConfig, EvalSettings):
    """DPO from preference pairs built once before training (`dpo_trainer`): the pairs' settings, the step's,
    the run's. The names are the other configs' where the setting is the same."""

    model: str = "qwen2-sft"  # DPO starts from an SFT policy, as RL does; it is also the frozen reference
    train_split: str = "train"
    pair_source: str = "on_policy"  # on_policy: the policy's own samples, correct against wrong; off_policy: gold
    #                                 against the gold with its answer changed (course_lib.preferences)
    n_questions: int | None = 256  # build pairs from the first N questions of the split; None: all
    group_size: int = 8  # on_policy: samples per question
    max_pairs_per_group: int = 1  # on_policy: pairs taken from one question's group at most
    sampling_temperature: float = 1.0
    sampling_top_p: float = 1.0
    sampling_min_tokens: int = 4
    sampling_max_tokens: int = 128
    stop: tuple[str, ...] = ("</answer>",)
    beta: float = 0.1  # the implicit reward's scale: beta * (log pi - log pi_ref)
    average_log_probs: bool = False  # score a response by its mean token log-prob instead of the sum (DPO: the sum)
    lr: float = 1e-5
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.95)
    fused_adamw: bool = False  # AdamW's fused kernel (training/common.make_optimizer); the GPU configs set it
    warmup_steps: int = 0
    min_lr_ratio: float = 1.0  # the cosine decays to lr * min_lr_ratio; 1.0: constant lr
    steps: int | None = None  # optimizer steps; None: derived from epochs over the pairs
    epochs: float = 1.0
    batch_size: int = 16  # pairs per optimizer step
    gradient_accumulation_steps: int = 1
    max_grad_norm: float = 1.0
    kl_eval_prompts: int = 64  # at each evaluation, the exact KL to the reference on the first N held-out prompts
    gradient_checkpointing: bool = False
    checkpoint_every: int = 0  # 0: only at the end (when output_dir is set)
    keep_checkpoints: int = 2


@dataclass
class EvalConfig(ModelConfig, EvalSettings):
    log_generations: int = 0  # write this many generations to generations.jsonl (0: none)
    temperature: float = 0.0


CONFIGS = {"sft": SFTConfig, "grpo": GRPOConfig, "ppo": PPOConfig, "dpo": DPOConfig, "eval": EvalConfig}


def _coerce(value: Any, current: Any, name: str) -> Any:
    if isinstance(current, tuple) and isinstance(value, list):
        return tuple(value)
    if isinstance(current, float) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(current, float) and isinstance(value, str):  # YAML reads "1e-3" as a string
        try:
            return float(value)
        except ValueError:
            raise ValueError(f"config key {name!r} must be a number, got {value!r}") from None
    return value


def build_config(kind: str, values: dict | None = None):
    """A config of kind "sft" | "grpo" | "ppo" | "dpo" | "eval" from a dict; unknown keys raise."""
    cls = CONFIGS[kind]
    cfg = cls()
    names = {f.name for f in dataclasses.fields(cls)}
    for key, value in (values or {}).items():
        if key not in names:
            raise ValueError(f"unknown {kind} config key {key!r}; known keys: {', '.join(sorted(names))}")
        setattr(cfg, key, _coerce(value, getattr(cfg, key), key))
    return cfg


def parse_overrides(items: list[str]) -> dict:
    import yaml

    out = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"override {item!r} is not key=value")
        key, raw = item.split("=", 1)
        out[key.strip()] = yaml.safe_load(raw) if raw.strip() else None
    return out


def load_config(kind: str, path: str | os.PathLike | None = None, overrides: list[str] | dict | None = None):
    """Read a YAML config (if given), apply overrides, and return the dataclass."""
    import yaml

    values: dict = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"config file {path} does not exist")
        values = yaml.safe_load(path.read_text()) or {}
        if not isinstance(values, dict):
            raise ValueError(f"{path}: a config must be a mapping of keys to values")
    if isinstance(overrides, dict):
        values.update(overrides)
    elif overrides:
        values.update(parse_overrides(list(overrides)))
    return build_config(kind, values)


def config_to_dict(cfg) -> dict:
    d = dataclasses.asdict(cfg)
    return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}

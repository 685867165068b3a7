"""Run configurations (dataclasses), YAML loading with `key=value` overrides, and shared helpers.

One dataclass per command: `SFTConfig`, `GRPOConfig`, `EvalConfig`. A YAML file sets any of
their fields; `key=value` overrides on the command line are parsed as YAML scalars
(`lr=3e-4`, `n_examples=null`, `filter_correct=true`). Unknown keys are errors, not silently
ignored settings.
"""

from __future__ import annotations

import dataclasses
import os
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch


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
    engine: str = "hf"  # rollout engine: "hf" or "vllm"
    engine_kwargs: dict = field(default_factory=dict)


@dataclass
class SFTConfig(ModelConfig, EvalSettings):
    train_split: str = "train"
    n_examples: int | None = None  # train on the first N examples (the data-size ablation)
    filter_correct: bool = False  # keep only examples whose output the reward function grades correct
    lr: float = 1e-3
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.95)
    warmup_steps: int = 10
    min_lr_ratio: float = 0.1  # the cosine decays to lr * min_lr_ratio
    steps: int | None = None  # optimizer steps; None: derived from epochs
    epochs: float = 1.0
    batch_size: int = 32  # examples per optimizer step
    gradient_accumulation_steps: int = 1
    max_grad_norm: float = 1.0
    gradient_checkpointing: bool = False
    checkpoint_every: int = 0  # 0: only at the end (when output_dir is set)
    log_every: int = 1
    keep_checkpoints: int = 2


@dataclass
class GRPOConfig(ModelConfig, EvalSettings):
    train_split: str = "train"
    n_questions: int | None = None  # draw questions from the first N of the split; None: all
    n_grpo_steps: int = 200
    lr: float = 1e-5
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.95)
    warmup_steps: int = 0
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
    kl_coef: float = 0.0  # > 0: k3 KL penalty to the frozen starting policy
    max_grad_norm: float = 1.0
    gradient_checkpointing: bool = False
    checkpoint_every: int = 0
    log_every: int = 1
    keep_checkpoints: int = 2


@dataclass
class EvalConfig(ModelConfig, EvalSettings):
    log_generations: int = 0  # write this many generations to generations.jsonl (0: none)
    temperature: float = 0.0


CONFIGS = {"sft": SFTConfig, "grpo": GRPOConfig, "eval": EvalConfig}


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
    """A config of kind "sft" | "grpo" | "eval" from a dict; unknown keys raise."""
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


# ---------------------------------------------------------------------------------------------
# shared helpers


def set_seed(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % 2**32)
    except ImportError:  # pragma: no cover
        pass


def resolve_device(device: str) -> torch.device:
    """"auto" -> cuda when present, else cpu; a named device must exist (clear error, not a CUDA trace)."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda":
        have = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if (dev.index or 0) >= have:
            raise ValueError(f"config key 'device' is {device!r} but this machine has {have} CUDA device(s); "
                             "on one GPU use device=cuda:0 (and give vLLM a smaller gpu_memory_utilization)")
    return dev


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """bfloat16 on GPU, float32 on CPU, unless set."""
    if dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    try:
        return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; use auto, float32, bfloat16 or float16") from None


def load_model_and_tokenizer(cfg: ModelConfig):
    """Load the policy and its tokenizer, and check that they belong together.

    Errors before any training starts: a missing model path, and a tokenizer whose ids do not
    fit the model's embedding table (a tokenizer of another model).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .tiny_models import TINY_MODELS, load_tiny, load_tiny_tokenizer

    device = resolve_device(cfg.device)
    dtype = resolve_dtype(cfg.dtype, device)
    name = cfg.model
    if name in TINY_MODELS:
        model, tokenizer = load_tiny(name, dtype=dtype)
    else:
        path = Path(name)
        looks_local = not _hub_like(name)
        if looks_local and not (path / "config.json").is_file():
            raise FileNotFoundError(
                f"model {name!r}: no such folder with a config.json (and not a tiny model name: "
                f"{', '.join(TINY_MODELS)})"
            )
        kwargs = {"dtype": dtype}
        if cfg.attn_implementation:
            kwargs["attn_implementation"] = attention_backend(cfg.attn_implementation)
        try:
            model = AutoModelForCausalLM.from_pretrained(name, **kwargs)
        except OSError as e:
            raise FileNotFoundError(f"could not load model {name!r}: {e}") from None
        tokenizer = None
        if cfg.tokenizer is None:
            tokenizer = AutoTokenizer.from_pretrained(name)
    if cfg.tokenizer is not None:
        tpath = Path(cfg.tokenizer)
        if cfg.tokenizer in TINY_MODELS:
            tokenizer = load_tiny_tokenizer(cfg.tokenizer)
        elif not _hub_like(cfg.tokenizer) and not tpath.is_dir():
            raise FileNotFoundError(f"tokenizer {cfg.tokenizer!r}: no such folder")
        else:
            tokenizer = AutoTokenizer.from_pretrained(cfg.tokenizer)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    check_tokenizer_matches(model, tokenizer)
    model.to(device)
    return model, tokenizer


def attention_backend(requested: str) -> str:
    """flash-attn where it is installed (CUDA machines), PyTorch's sdpa otherwise.

    flash-attn has no CPU build; a GPU config that asks for it still runs, with sdpa, on a
    machine without it, and says so.
    """
    if requested.startswith("flash_attention"):
        import importlib.util

        if importlib.util.find_spec("flash_attn") is None:
            print(f"attn_implementation={requested!r}: flash-attn is not installed, using 'sdpa'", file=sys.stderr)
            return "sdpa"
    return requested


def _hub_like(name: str) -> bool:
    """"owner/name" with no path that exists locally: a hub id."""
    parts = name.split("/")
    return len(parts) == 2 and all(parts) and not Path(name).exists()


def check_tokenizer_matches(model, tokenizer) -> None:
    """Raise when token ids of `tokenizer` would fall outside the model's embedding table."""
    n_embed = model.get_input_embeddings().num_embeddings
    n_tok = len(tokenizer)
    if n_tok > n_embed:
        raise ValueError(
            f"the tokenizer has {n_tok} tokens but the model's embedding table has {n_embed} rows: "
            f"they do not belong together (wrong tokenizer for this model?)"
        )
    for name in ("pad_token_id", "eos_token_id"):
        tid = getattr(tokenizer, name)
        if tid is not None and tid >= n_embed:
            raise ValueError(f"tokenizer {name}={tid} is outside the model's vocabulary of {n_embed}")


class TemperatureScaled(torch.nn.Module):
    """`model` whose `.logits` are divided by `temperature`: log-probs of the sampling distribution.

    Rollouts sampled at temperature T come from softmax(logits / T). The policy-gradient
    estimator needs log pi(o_t) of *that* distribution: with raw logits, the old, new and
    reference log-probs would belong to the T = 1 policy, the importance ratio pi / pi_old would
    not be 1 on-policy, and the gradient would be for a distribution nobody sampled from.
    """

    def __init__(self, model: torch.nn.Module, temperature: float):
        super().__init__()
        self.model = model
        self.temperature = temperature

    def forward(self, input_ids, **kw):
        out = self.model(input_ids, **kw)
        if self.temperature not in (0, 1.0):
            out.logits = out.logits / self.temperature
        return out

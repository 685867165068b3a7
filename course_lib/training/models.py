"""Loading the policy and its tokenizer for a run: device, dtype, attention backend, checks.

Also the two small wrappers every trainer shares: `set_seed` (python, numpy, torch) and
`TemperatureScaled` (a model whose logits are divided by the sampling temperature).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import torch

from .config import ModelConfig

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

    from ..world.tiny_models import TINY_MODELS, load_tiny, load_tiny_tokenizer

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


def scoring_temperature(sampling_temperature: float) -> float:
    """The temperature to score samples drawn at `sampling_temperature` with: the same one, except
    that temperature 0 (greedy decoding, no softmax to match) means no scaling, i.e. 1.

    The one place of that rule: `TemperatureScaled` applies it, so callers pass the sampling
    temperature as it is."""
    return sampling_temperature if sampling_temperature > 0 else 1.0


class TemperatureScaled(torch.nn.Module):
    """`model` whose `.logits` are divided by the sampling temperature: log-probs of the sampling distribution.

    Rollouts sampled at temperature T come from softmax(logits / T). The policy-gradient
    estimator needs log pi(o_t) of *that* distribution: with raw logits, the old, new and
    reference log-probs would belong to the T = 1 policy, the importance ratio pi / pi_old would
    not be 1 on-policy, and the gradient would be for a distribution nobody sampled from.
    Temperature 0 (greedy) means no scaling (`scoring_temperature`); at 1 the logits are left as they are.
    """

    def __init__(self, model: torch.nn.Module, temperature: float):
        super().__init__()
        self.model = model
        self.temperature = scoring_temperature(temperature)

    def forward(self, input_ids, **kw):
        out = self.model(input_ids, **kw)
        if self.temperature != 1.0:
            out.logits = out.logits / self.temperature
        return out

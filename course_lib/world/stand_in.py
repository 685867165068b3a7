"""A stand-in for a real model: a randomly initialised network of its exact shape, saved as a local model folder
with a tokenizer of its vocabulary size. `scripts/gpu_check.py` trains it where no weights can be downloaded.

The shapes the project ships are Hugging Face `config.json` files in `configs/models/`:
`qwen2.5-math-1.5b.json` is Qwen2.5-Math-1.5B's published config (hidden 1536, 28 layers, 12 query and 2
key-value heads, intermediate 8960, vocabulary 151,936, tied embeddings, RoPE theta 10,000, 4,096 positions;
https://huggingface.co/Qwen/Qwen2.5-Math-1.5B/blob/main/config.json as mirrored verbatim at
https://huggingface.co/mlx-community/Qwen2.5-Math-1.5B-bf16/blob/main/config.json).

The tokenizer is the course's (`data/tokenizer/`) widened to the model's vocabulary by
`tokenizer_build.pad_vocabulary`: the logits are 151,936 wide, as the real model's, every id the random model
samples decodes, and the course's prompts tokenize as they do in the tiny world. What differs from the real model:
the weights (random, `initializer_range` 0.02, so the model writes no answer and earns no reward), the tokenizer's
ids of ordinary text (the course's 822 tokens, not Qwen's 151k) and so the token counts of a text (the arithmetic
world's prompts are about 120 course tokens).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..paths import REPO_ROOT

MODEL_SHAPES_DIR = REPO_ROOT / "configs" / "models"


def load_shape(name_or_path: str | os.PathLike) -> dict:
    """A shipped shape by name ("qwen2.5-math-1.5b": `configs/models/<name>.json`) or any config.json path."""
    path = Path(name_or_path)
    if not str(name_or_path).endswith(".json"):  # a name ("qwen2.5-math-1.5b" has dots of its own)
        path = MODEL_SHAPES_DIR / f"{name_or_path}.json"
    if not path.is_file():
        shipped = ", ".join(sorted(p.stem for p in MODEL_SHAPES_DIR.glob("*.json")))
        raise FileNotFoundError(f"model shape {name_or_path!r}: no file {path} (shipped: {shipped})")
    return json.loads(path.read_text())


def stand_in_config(shape: dict, tokenizer, num_hidden_layers: int | None = None):
    """The transformers config of `shape` (a config.json's dict), with the tokenizer's special ids and, when given,
    `num_hidden_layers` layers instead of the shape's (the CPU rehearsal keeps the width and vocabulary)."""
    from transformers import AutoConfig

    values = {k: v for k, v in shape.items() if k not in ("architectures", "transformers_version", "torch_dtype")}
    values.update(pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                  bos_token_id=tokenizer.eos_token_id)
    if num_hidden_layers is not None:
        values["num_hidden_layers"] = num_hidden_layers
    config = AutoConfig.for_model(**values)
    if len(tokenizer) != config.vocab_size:
        raise ValueError(f"the tokenizer has {len(tokenizer)} ids, the shape's vocabulary {config.vocab_size}")
    return config


def build_stand_in(out_dir: str | os.PathLike, shape: str | os.PathLike = "qwen2.5-math-1.5b", *,
                   num_hidden_layers: int | None = None, dtype=None, device: str = "cpu", seed: int = 0) -> dict:
    """Write a random model of `shape` and its widened tokenizer into `out_dir` (a `save_pretrained` folder that
    the trainers, the evaluation and vLLM load like any other); returns what was built.

    `dtype` defaults to the shape's own (bfloat16 for Qwen2.5); `device` is where the weights are drawn (a GPU
    draws 1.5 B of them in a second). Returns {"path", "parameters", "num_hidden_layers", "vocab_size", "dtype"}.
    """
    import torch
    from transformers import AutoModelForCausalLM

    from .tiny_models import generation_config_for, load_tiny_tokenizer
    from .tokenizer_build import pad_vocabulary

    values = load_shape(shape)
    tokenizer = pad_vocabulary(load_tiny_tokenizer(), values["vocab_size"],
                               model_max_length=values.get("max_position_embeddings"))
    config = stand_in_config(values, tokenizer, num_hidden_layers)
    dtype = dtype or getattr(torch, values.get("torch_dtype", "float32"))
    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    model.generation_config = generation_config_for(tokenizer)
    out = Path(out_dir)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return {"path": str(out), "parameters": sum(p.numel() for p in model.parameters()),
            "num_hidden_layers": config.num_hidden_layers, "vocab_size": config.vocab_size, "dtype": str(dtype)}

"""The course's tiny models, committed under `data/tiny/`, and the one function that loads them.

- `qwen2-base`: a Qwen2-architecture *base* model of about 0.9M parameters, pretrained by
  `scripts/make_world.py base` on plain arithmetic text (`Question: ... Answer: ... #### N` and
  bare equations). It never saw the r1_zero tags, so, like a real base model, it knows some
  arithmetic but scores about 0 format reward zero-shot: SFT and then GRPO have work to do.
- `qwen2-sft`: `qwen2-base` after the demo's SFT stage (128 worked solutions, 100 steps; made by
  `scripts/make_world.py sft`): it answers in the r1_zero format, and about half of its answers
  are right, so GRPO has groups of mixed rewards to learn from. The RL notebooks start here.
- `qwen2-think`: `qwen2-base` after SFT on chat conversations in two modes (`data/think/`; made
  by `scripts/make_world.py think`): with the worked steps inside `<think>` it gets most answers
  right, answering directly (after an empty think block) almost none. Notebook 13 starts here.
- `gemma2-softcap`: a tiny Gemma 2 whose config sets `final_logit_softcapping` (the real Hugging
  Face field) and whose raw logits are large, so the cap changes the log-probabilities of sampled
  tokens by a clear margin: the softcap notebook has a real gap to show.

Both share the course tokenizer (`data/tokenizer/`, a copy lives in each model folder) and load
offline: `load_tiny` only reads local files (`local_files_only=True`), so `HF_HUB_OFFLINE=1`
changes nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..paths import DATA_DIR

TINY_DIR = DATA_DIR / "tiny"
TOKENIZER_DIR = DATA_DIR / "tokenizer"
TINY_MODELS = {
    "qwen2-base": TINY_DIR / "qwen2-base",
    "qwen2-sft": TINY_DIR / "qwen2-sft",
    "gemma2-softcap": TINY_DIR / "gemma2-softcap",
    "qwen2-think": TINY_DIR / "qwen2-think",
}
GEMMA2_SOFTCAP = 30.0


def qwen2_base_config(vocab_size: int, pad_token_id: int, eos_token_id: int):
    """About 0.9M parameters: hidden 128, 4 layers, 4 query / 2 key-value heads, tied embeddings."""
    from transformers import Qwen2Config

    return Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=128,
        intermediate_size=384,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        rope_theta=10_000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        use_cache=True,
        pad_token_id=pad_token_id,
        eos_token_id=eos_token_id,
        bos_token_id=eos_token_id,
    )


def gemma2_softcap_config(vocab_size: int, pad_token_id: int, eos_token_id: int):
    """A tiny Gemma 2: hidden 64, 2 layers, the real softcap fields (final 30.0, attention 50.0)."""
    from transformers import Gemma2Config

    return Gemma2Config(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        query_pre_attn_scalar=32,
        max_position_embeddings=512,
        sliding_window=256,
        final_logit_softcapping=GEMMA2_SOFTCAP,
        attn_logit_softcapping=50.0,
        tie_word_embeddings=True,
        use_cache=True,
        pad_token_id=pad_token_id,
        eos_token_id=eos_token_id,
        bos_token_id=eos_token_id,
    )


def generation_config_for(tokenizer):
    """Greedy by default; stops on the tokenizer's eos; pads with its pad token."""
    from transformers import GenerationConfig

    return GenerationConfig(
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.eos_token_id,
        do_sample=False,
    )


def resolve_tiny_path(name_or_path: str | os.PathLike) -> Path:
    """A registered name ("qwen2-base", "gemma2-softcap") or a folder saved with `save_pretrained`."""
    if isinstance(name_or_path, str) and name_or_path in TINY_MODELS:
        path = TINY_MODELS[name_or_path]
        if not (path / "config.json").is_file():
            raise FileNotFoundError(
                f"tiny model {name_or_path!r} is missing at {path}; rebuild it with "
                f"`python scripts/make_world.py {'base' if 'qwen' in name_or_path else 'gemma'}`"
            )
        return path
    path = Path(name_or_path)
    if not (path / "config.json").is_file():
        raise FileNotFoundError(
            f"{name_or_path!r} is neither a tiny model name ({', '.join(TINY_MODELS)}) "
            f"nor a folder holding a config.json"
        )
    return path


def attn_implementation_for(model_type: str) -> str:
    # Gemma 2's attention-logit softcapping only exists in the eager kernel; sdpa would drop it.
    return "eager" if model_type == "gemma2" else "sdpa"


def load_tiny_tokenizer(name_or_path: str | os.PathLike | None = None):
    """The course tokenizer: the copy in a model folder when there is one, else `data/tokenizer/`."""
    from transformers import AutoTokenizer

    path = TOKENIZER_DIR
    if name_or_path is not None:
        folder = resolve_tiny_path(name_or_path)
        if (folder / "tokenizer.json").is_file():
            path = folder
    return AutoTokenizer.from_pretrained(path, local_files_only=True)


def load_tiny(name_or_path: str | os.PathLike = "qwen2-base", dtype=None, device=None):
    """Load a tiny model and its tokenizer offline: returns `(model, tokenizer)`, model in eval mode.

    `name_or_path` is "qwen2-base", "gemma2-softcap", or any folder written by `save_pretrained`
    (a checkpoint of a run, for instance). `dtype` defaults to float32.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    path = resolve_tiny_path(name_or_path)
    config = AutoConfig.from_pretrained(path, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(
        path,
        local_files_only=True,
        dtype=dtype or torch.float32,
        attn_implementation=attn_implementation_for(config.model_type),
    )
    if device is not None:
        model.to(device)
    model.eval()
    return model, load_tiny_tokenizer(path)


def count_parameters(model) -> int:
    """Distinct parameters (tied embeddings counted once)."""
    return sum(p.numel() for p in model.parameters())


def greedy_complete(model, tokenizer, prompts: list[str], max_new_tokens: int = 64, batch_size: int = 100) -> list[str]:
    """Greedy continuations of `prompts` (left-padded batches), decoded without special tokens.

    A small helper for checks and scripts; the course's rollout code is the place for sampling.
    """
    import torch

    outs = []
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    try:
        for i in range(0, len(prompts), batch_size):
            enc = tokenizer(prompts[i : i + batch_size], return_tensors="pt", padding=True, add_special_tokens=False)
            enc = {k: v.to(model.device) for k, v in enc.items()}
            with torch.no_grad():
                gen = model.generate(
                    **enc,
                    max_new_tokens=max_new_tokens,
                    do_sample=False,
                    pad_token_id=tokenizer.pad_token_id,
                    eos_token_id=tokenizer.eos_token_id,
                )
            new = gen[:, enc["input_ids"].shape[1] :]
            outs += tokenizer.batch_decode(new, skip_special_tokens=True)
    finally:
        tokenizer.padding_side = side
    return outs

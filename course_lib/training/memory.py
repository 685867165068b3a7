"""What a training config holds on a GPU, computed rather than measured: the weights, gradients and AdamW states in
the dtype the trainer keeps them (the model's own: all bfloat16 in the GPU configs), a frozen reference (a KL
penalty), PPO's critic, the activations at the configured micro-batch with and without gradient checkpointing,
the logits of the chunked log-prob path, and vLLM's share of the GPU.

The activations are *counted*, not guessed: `saved_bytes_per_token` runs the real Hugging Face Qwen2 layers of the
model's width (one and two layers, so that the difference is one layer) in the model's dtype with sdpa attention on
the CPU, through the course's `get_response_log_probs`, and adds up the distinct storages autograd saves for the
backward (parameters excluded). A layer under gradient checkpointing keeps only its input, (T, hidden) in the
model's dtype, and the backward recomputes one layer at a time. The CPU's sdpa keeps no (T, T) matrix (the count
per token is the same at 64 and at 256 tokens), as flash-attention on a GPU keeps none. What is not counted:
the allocator's fragmentation and reserve, CUDA's context, the transient buffers of one operation, vLLM's own
profiling. `python benchmarks/gpu_memory.py` prints the table the README shows.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

GB = 1e9


@dataclass
class Shape:
    """What the estimate needs of a model: its parameter count, width, depth, vocabulary, dtype's bytes."""

    parameters: int
    hidden: int
    layers: int
    vocab: int
    bytes_per_value: int = 2  # bfloat16

    @classmethod
    def of(cls, config: dict, bytes_per_value: int = 2) -> "Shape":
        """From a config.json's values (`course_lib.world.stand_in.load_shape`), counted on the meta device."""
        from transformers import AutoConfig, AutoModelForCausalLM

        cfg = AutoConfig.for_model(**{k: v for k, v in config.items() if k != "architectures"})
        with torch.device("meta"):
            n = sum(p.numel() for p in AutoModelForCausalLM.from_config(cfg).parameters())
        return cls(parameters=n, hidden=cfg.hidden_size, layers=cfg.num_hidden_layers, vocab=cfg.vocab_size,
                   bytes_per_value=bytes_per_value)


def saved_bytes(model: torch.nn.Module, input_ids: torch.Tensor) -> int:
    """Bytes of the distinct storages autograd saves for the backward of `get_response_log_probs(model, ...)`,
    parameters excluded: what a training forward holds until its backward."""
    from ..logprobs import get_response_log_probs

    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in params:
            saved[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        get_response_log_probs(model, input_ids, input_ids)
    return sum(saved.values())


def saved_bytes_per_token(config: dict, dtype=torch.bfloat16, tokens: int = 64, vocab: int = 512) -> dict:
    """Autograd's saved bytes per token of one layer of `config`'s width, and of what is outside the layers
    (embedding, final norm, LM head's input) without the logits: counted on the CPU (see the module docstring)
    with a `vocab`-token stand-in vocabulary, whose logits are taken out again."""
    from transformers import AutoConfig, AutoModelForCausalLM

    counts = []
    for layers in (1, 2):
        values = {k: v for k, v in config.items() if k != "architectures"}
        cfg = AutoConfig.for_model(**{**values, "num_hidden_layers": layers, "vocab_size": vocab, "bos_token_id": 0,
                                      "eos_token_id": 0})
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype, attn_implementation="sdpa").train()
        counts.append(saved_bytes(model, torch.randint(0, vocab, (1, tokens))) / tokens)
    layer = counts[1] - counts[0]
    logits = vocab * torch.finfo(dtype).bits // 8  # the stand-in's logits, held by the log-prob path
    return {"layer": layer, "outside": counts[0] - layer - logits}


def config_memory(cfg, shape: Shape, per_token: dict, sequence: int, gpu_gb: float | None, kind: str) -> dict:
    """Bytes a run of `cfg` (an SFT, GRPO, PPO or eval config) holds on the policy's GPU, by part.

    `sequence` tokens per row (prompt and response) at the config's micro-batch; `per_token` is
    `saved_bytes_per_token`'s; `gpu_gb` the GPU's memory when vLLM shares it (its `gpu_memory_utilization` of it),
    None when vLLM has a GPU of its own. Returns {part: bytes}, "activations" with the config's checkpointing and
    "activations_other" without it when it is on (with it when it is off)."""
    b, n = shape.bytes_per_value, shape.parameters
    share = (cfg.engine_kwargs or {}).get("gpu_memory_utilization", 0.4) if cfg.engine == "vllm" else 0.0
    out = {"vllm": share * gpu_gb * GB if gpu_gb else 0.0}
    if kind == "eval":  # the policy's weights, and the entropies' forward of `log_generations`, bounded
        from .evaluation import LOGIT_ELEMENTS

        return {**out, "weights": n * b, "logits": LOGIT_ELEMENTS * b}
    micro = cfg.batch_size // cfg.gradient_accumulation_steps if kind == "sft" else \
        cfg.train_batch_size // cfg.gradient_accumulation_steps
    tokens = micro * sequence
    full = shape.layers * per_token["layer"] + per_token["outside"]
    # checkpointed: each layer keeps its input, and the backward recomputes one layer at a time
    checkpointed = shape.layers * shape.hidden * b + per_token["layer"] + per_token["outside"]
    mine, other = (checkpointed, full) if cfg.gradient_checkpointing else (full, checkpointed)
    networks = 2 if kind == "ppo" else 1  # PPO's critic: a copy of the backbone, trained, with its activations
    out.update(weights=networks * n * b, gradients=networks * n * b, adamw=networks * 2 * n * b,
               reference=n * b if getattr(cfg, "kl_coef", 0.0) > 0 else 0.0,
               activations=networks * tokens * mine, activations_other=networks * tokens * other,
               logits=2 * tokens * shape.vocab * b)  # held for the backward, and their gradient in it
    return out


def total(parts: dict) -> float:
    """The bytes of all parts but the alternative activations."""
    return sum(v for k, v in parts.items() if k != "activations_other")

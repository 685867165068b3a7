"""Rollouts: prompts in, sampled completions out, behind one interface.

The GRPO trainer and the evaluation only ever see a `RolloutEngine`, so the engine is a
configuration choice (`engine: hf | vllm`):

- `interface`: `SamplingParams`, `Rollout`, the `RolloutEngine` protocol and its contract;
- `hf_engine.HFEngine`: batched sampling with the policy module itself (shares its weights, so
  `load_weights` has nothing to copy); the CPU default;
- `vllm_engine.VLLMEngine`: the real vLLM engine with its own copy of the weights, refreshed by
  `load_weights` after every optimizer step (imported lazily: vLLM is optional).
"""

from __future__ import annotations

import torch

from .hf_engine import HFEngine
from .interface import Rollout, RolloutEngine, SamplingParams, cut_at_stop


def make_engine(name: str, model: torch.nn.Module, tokenizer, **kw) -> RolloutEngine:
    """The rollout engine called `name`: "hf" (CPU default) or "vllm" (needs the vllm extra)."""
    if name == "hf":
        return HFEngine(model, tokenizer, **kw)
    if name == "vllm":
        from .vllm_engine import VLLMEngine  # imported lazily: vllm is an optional dependency

        return VLLMEngine(model, tokenizer, **kw)
    raise ValueError(f"unknown rollout engine {name!r}; expected 'hf' or 'vllm'")


__all__ = ["HFEngine", "Rollout", "RolloutEngine", "SamplingParams", "cut_at_stop", "make_engine"]

"""Rollouts: prompts in, sampled completions out, behind one interface.

The GRPO trainer and the evaluation only ever see a `RolloutEngine`, so the engine is a
configuration choice (`engine: fast | hf | vllm`):

- `interface`: `SamplingParams`, `Rollout`, the `RolloutEngine` protocol and its contract;
- `fast_engine.FastEngine`: the default for Qwen2/Llama models: the network as a short list of
  tensor operations over a preallocated KV cache, on the policy's own parameters (greedy
  outputs token-identical to `HFEngine`'s; 2-3x faster on the tiny model on a CPU);
- `hf_engine.HFEngine`: batched sampling with the policy module itself through Hugging Face's
  forward (shares its weights, so `load_weights` has nothing to copy); any architecture;
- `vllm_engine.VLLMEngine`: the real vLLM engine with its own copy of the weights, refreshed by
  `load_weights` after every optimizer step (imported lazily: vLLM is optional);
- `slot_decoder`, `vllm_server`: notebook 14's per-slot decoder and the vLLM server as a backend;
- `mismatch_atlas`: notebook 15's tools, the same sampled tokens scored by the trainer and by an engine.
"""

from __future__ import annotations

import torch

import sys

from .fast_engine import FastEngine, UnsupportedModelError, check_supported
from .hf_engine import HFEngine
from .interface import Rollout, RolloutEngine, RolloutEngineError, SamplingParams, cut_at_stop

ENGINES = ("fast", "hf", "vllm")
DEFAULT_ENGINE = "fast"


def make_engine(name: str, model: torch.nn.Module, tokenizer, **kw) -> RolloutEngine:
    """The rollout engine called `name`: "fast" (the default), "hf" or "vllm" (needs vLLM).

    "fast" runs Qwen2 and Llama models; for any other architecture it says so on stderr and
    returns an `HFEngine`, which runs every causal LM. The fast and HF engines take only `batch_size`:
    another keyword (a config's vLLM `engine_kwargs` left in place) is refused by name.
    """
    if name in ("fast", "hf") and set(kw) - {"batch_size"}:
        raise ValueError(f"engine {name!r} takes no {', '.join(sorted(set(kw) - {'batch_size'}))} (vLLM's settings?): "
                         f"set engine_kwargs={{}} with engine={name}")
    if name == "fast":
        try:
            check_supported(model)
        except UnsupportedModelError as err:
            print(f"engine 'fast': {err}; using engine 'hf' instead", file=sys.stderr)
            return HFEngine(model, tokenizer, **kw)
        return FastEngine(model, tokenizer, **kw)
    if name == "hf":
        return HFEngine(model, tokenizer, **kw)
    if name == "vllm":
        from .vllm_engine import VLLMEngine  # imported lazily: vllm is an optional dependency

        return VLLMEngine(model, tokenizer, **kw)
    raise ValueError(f"unknown rollout engine {name!r}; expected one of {', '.join(ENGINES)}")


__all__ = ["DEFAULT_ENGINE", "ENGINES", "FastEngine", "HFEngine", "Rollout", "RolloutEngine", "RolloutEngineError",
           "SamplingParams", "UnsupportedModelError", "cut_at_stop", "make_engine"]

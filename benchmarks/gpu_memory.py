"""Memory per GPU of each Qwen2.5-Math-1.5B config, computed (not measured): the README's table.

    python benchmarks/gpu_memory.py          # about 15 s on a CPU: prints the markdown table

and, last, the share of bfloat16 weights one AdamW step changes (the trainers keep their states in bfloat16).

Each config as shipped (`configs/*_qwen2.5_math_1.5b_gsm8k.yaml`), on one GPU (vLLM sharing it with its
`gpu_memory_utilization`; the README's one-GPU setting 0.3 for training, the eval config's 0.85) and, for GRPO and
PPO, on two (the policy's GPU; vLLM has the other). The parts are `course_lib.training.memory.config_memory`'s: the
weights, gradients and AdamW states in bfloat16 (the dtype the trainer keeps them in), the activations autograd
saves (counted on the CPU with the real layers: see that module) at the configured micro-batch, the logits of the
chunked log-prob path and their gradient, and vLLM's share. Sequence lengths are assumptions, not measurements
(Qwen's tokenizer cannot be downloaded here): SFT rows of 512 tokens (a GSM8K r1_zero prompt and worked solution),
RL rows of a 256-token prompt and the full 1,024-token budget, which a random or long-winded policy reaches.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SFT_TOKENS, PROMPT_TOKENS = 512, 256
GPUS_GB = (80, 141)  # an H100 and an H200, as sold (10^9 bytes)


def rows():
    """(label, kind, config, sequence, share the GPU with vLLM) for each line of the table."""
    from course_lib.paths import REPO_ROOT
    from course_lib.training.config import load_config

    def cfg(kind, **overrides):
        return load_config(kind, REPO_ROOT / "configs" / f"{kind}_qwen2.5_math_1.5b_gsm8k.yaml", overrides)

    one_gpu = {"device": "cuda:0", "engine_kwargs": {"gpu_memory_utilization": 0.3}}
    out = [("SFT, one GPU (vLLM 0.3 for the evaluation)", "sft", cfg("sft"), SFT_TOKENS, True)]
    for kind in ("grpo", "ppo"):
        rl = cfg(kind).sampling_max_tokens + PROMPT_TOKENS
        out.append((f"{kind.upper()}, one GPU (vLLM 0.3)", kind, cfg(kind, **one_gpu), rl, True))
        out.append((f"{kind.upper()}, two GPUs: the policy's", kind, cfg(kind), rl, False))
    out.append(("GRPO + KL reference (kl_coef > 0), one GPU", "grpo", cfg("grpo", kl_coef=0.05, **one_gpu), rl, True))
    out.append(("eval, one GPU (vLLM 0.85)", "eval", cfg("eval"), 0, True))
    return out


def bfloat16_steps_kept(lrs=(1e-6, 1e-5, 2e-5), n: int = 1_000_000) -> dict:
    """The share of bfloat16 weights (N(0, 0.02), the stand-in's initialisation) that one AdamW step of each
    learning rate changes at all, {kernel: {lr: share}}: an update below half a unit in the last place rounds away.
    Kernels: the fused one the GPU configs use (`fused_adamw`) and torch's foreach loop, its default on GPU."""
    import torch

    out = {}
    for kernel in ("fused", "foreach"):
        out[kernel] = {}
        for lr in lrs:
            gen = torch.Generator().manual_seed(0)
            weights = (torch.randn(n, generator=gen) * 0.02).to(torch.bfloat16).requires_grad_()
            start = weights.detach().clone()
            weights.grad = torch.randn(n, generator=gen).to(torch.bfloat16)
            torch.optim.AdamW([weights], lr=lr, betas=(0.9, 0.95), weight_decay=0.0, **{kernel: True}).step()
            out[kernel][lr] = float((weights.detach() != start).float().mean())
    return out


def main() -> int:
    from course_lib.training.memory import GB, Shape, config_memory, saved_bytes_per_token, total
    from course_lib.world.stand_in import load_shape

    values = load_shape("qwen2.5-math-1.5b")
    shape, per_token = Shape.of(values), saved_bytes_per_token(values)
    print(f"Qwen2.5-Math-1.5B: {shape.parameters:,} parameters in bfloat16; autograd saves {per_token['layer']:,.0f} "
          f"bytes per token per layer and {per_token['outside']:,.0f} outside the layers (logits apart), counted on "
          f"the CPU; SFT rows {SFT_TOKENS} tokens, RL rows {PROMPT_TOKENS} + sampling_max_tokens (assumed).\n")
    print("| config, GPU | weights | gradients | AdamW | reference | activations (other checkpointing) "
          "| logits (+ gradient) | vLLM on 80 / 141 GB | total on 80 GB | total on 141 GB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for label, kind, cfg, sequence, shared in rows():
        parts = {gpu: config_memory(cfg, shape, per_token, sequence, gpu if shared else None, kind) for gpu in GPUS_GB}
        p = parts[GPUS_GB[0]]

        def gb(key):
            return f"{p.get(key, 0.0) / GB:.1f}" if p.get(key) else "-"

        acts = f"{gb('activations')} ({gb('activations_other')})" if "activations" in p else "-"
        vllm = " / ".join(f"{parts[g]['vllm'] / GB:.1f}" for g in GPUS_GB) if shared else "its own GPU"
        print(f"| {label} | {gb('weights')} | {gb('gradients')} | {gb('adamw')} | {gb('reference')} | {acts} "
              f"| {gb('logits')} | {vllm} | {total(parts[80]) / GB:.1f} | {total(parts[141]) / GB:.1f} |")
    for kernel, kept in bfloat16_steps_kept().items():
        print(f"\nOne AdamW step ({kernel} kernel) on a million bfloat16 weights of spread 0.02 changes "
              + ", ".join(f"{share:.1%} of them at lr {lr:g}" for lr, share in kept.items()) + " (on this CPU).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

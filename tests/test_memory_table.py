"""The README's GPU memory table (`benchmarks/gpu_memory.py`): what autograd saves is counted, and each config's
parts follow its settings."""

from __future__ import annotations

import torch

from course_lib.training.config import load_config
from course_lib.training.memory import Shape, config_memory, saved_bytes
from tests.helpers import REPO, random_qwen2


def test_saved_bytes_count_what_the_backward_keeps(tok):
    """The activation count behind the README's memory table: the storages autograd saves, per token."""
    model = random_qwen2(tok).train()
    ids = torch.randint(0, len(tok), (1, 16))
    one = saved_bytes(model, ids)
    assert saved_bytes(model, torch.cat([ids, ids], dim=1)) == 2 * one  # every saved tensor grows with the tokens
    assert one > 16 * len(tok) * 4  # the float32 logits the log-prob path keeps for its backward, and the layers'
    with torch.no_grad():
        assert saved_bytes(model, ids) == 0  # without autograd nothing is kept


def test_the_memory_parts_follow_the_configs():
    """PPO holds a second trained network, a KL reference one more set of weights, and checkpointing keeps less."""
    shape = Shape(parameters=1_000_000, hidden=64, layers=4, vocab=1000)
    per_token = {"layer": 1000.0, "outside": 100.0}

    def parts(kind, **overrides):
        cfg = load_config(kind, REPO / "configs" / f"{kind}_qwen2.5_math_1.5b_gsm8k.yaml", overrides)
        return config_memory(cfg, shape, per_token, sequence=100, gpu_gb=80, kind=kind)

    grpo, ppo = parts("grpo"), parts("ppo")
    assert ppo["adamw"] == 2 * grpo["adamw"] == 8_000_000 and grpo["reference"] == 0
    assert parts("grpo", kl_coef=0.1)["reference"] == 2_000_000
    assert grpo["vllm"] == 0.85 * 80e9 and parts("grpo", engine_kwargs={"gpu_memory_utilization": 0.3})["vllm"] == 24e9
    assert grpo["activations"] < grpo["activations_other"]  # the GRPO config checkpoints
    assert grpo["activations"] == 2 * 100 * (4 * 64 * 2 + 1000 + 100)  # micro-batch 2 x 100 tokens

"""The fast engine on a GPU: greedy parity with the HF engine and throughput of both.

    python benchmarks/gpu_engines.py          # needs CUDA; prints one JSON line

Two models: the course's tiny SFT model (float32, 300 held-out prompts, greedy, parity checked
token by token) and a randomly initialised Qwen2 of Qwen2.5-1.5B's shape (28 layers, 1536 wide,
12 heads, 2 KV heads, 151,936-token vocabulary) in bfloat16, sampled in GRPO's layout (16 prompts
x 8 samples, 256 new tokens, no stop string: random weights never write one), to show what the
engine does at the real model's size. Its random weights make greedy outputs near-ties, so
parity is checked on the tiny model only.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def timed(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return out, time.perf_counter() - t0


def main() -> None:
    from course_lib import load_problems
    from course_lib.gsm8k import as_r1_zero
    from course_lib.rollouts import FastEngine, HFEngine, SamplingParams
    from course_lib.world.tiny_models import load_tiny

    assert torch.cuda.is_available(), "needs a CUDA device"
    res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__}
    model, tok = load_tiny("qwen2-sft")
    model = model.cuda().eval()
    prompts = [r["prompt"] for r in as_r1_zero(load_problems("arith", "test")[:300])]
    greedy = SamplingParams(temperature=0, max_tokens=100)
    hf, fast = HFEngine(model, tok, batch_size=300), FastEngine(model, tok, batch_size=300)
    fast.generate(prompts[:8], greedy)
    hf.generate(prompts[:8], greedy)
    a, t_hf = timed(lambda: hf.generate(prompts, greedy))
    b, t_fast = timed(lambda: fast.generate(prompts, greedy))
    same = sum((x.token_ids, x.text, x.finish_reason) == (y.token_ids, y.text, y.finish_reason) for x, y in zip(a, b))
    res["tiny_greedy_identical"] = f"{same}/{len(a)}"
    res["tiny_greedy_300_s"] = {"hf": round(t_hf, 3), "fast": round(t_fast, 3)}
    sampled = SamplingParams(temperature=1.0, max_tokens=100, n=8, seed=1)
    _, t_hf = timed(lambda: hf.generate(prompts[:16], sampled))
    _, t_fast = timed(lambda: fast.generate(prompts[:16], sampled))
    res["tiny_grpo_batch_128_s"] = {"hf": round(t_hf, 3), "fast": round(t_fast, 3)}

    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=151936, hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
                      num_attention_heads=12, num_key_value_heads=2, max_position_embeddings=4096,
                      tie_word_embeddings=True, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    with torch.device("cuda"):
        big = Qwen2ForCausalLM(cfg).to(torch.bfloat16).eval()
    params = SamplingParams(temperature=1.0, max_tokens=256, stop=(), n=8, seed=2)
    hf, fast = HFEngine(big, tok, batch_size=128), FastEngine(big, tok, batch_size=128)
    fast.generate(prompts[:2], SamplingParams(temperature=1.0, max_tokens=8, stop=(), n=8, seed=0))
    hf.generate(prompts[:2], SamplingParams(temperature=1.0, max_tokens=8, stop=(), n=8, seed=0))
    out_hf, t_hf = timed(lambda: hf.generate(prompts[:16], params))
    out_fast, t_fast = timed(lambda: fast.generate(prompts[:16], params))
    tokens = sum(len(r.token_ids) for r in out_fast)
    res["qwen2.5_1.5b_shape_bf16_batch_128x256_s"] = {"hf": round(t_hf, 3), "fast": round(t_fast, 3),
                                                       "fast_tokens_per_s": round(tokens / t_fast)}
    res["peak_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 1)
    print(json.dumps(res))


if __name__ == "__main__":
    main()

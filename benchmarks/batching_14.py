"""Static against continuous batching, measured (notebook 14), with the course's own decode step.

Requests: the r1_zero prompts of the first N_REQUESTS test problems, tokenized with the tiny SFT
model's tokenizer, decoded greedily by `SlotDecoder` (a KV cache per slot) under
`static_batch_generate` and `continuous_batch_generate` in BATCH_SIZES slots. The tiny SFT model
never writes its eos, so every request runs to its max_tokens, drawn (seed 0) two ways:

- `uniform`: uniform in 8 .. 64;
- `long_tail`: log-normal around 16 (sigma 0.9), clipped to 8 .. 192: most requests short, a few
  long ones that hold a static batch's other slots idle.

For each: decode steps, slot utilization (slot_steps / (steps * batch_size)), generated tokens
and tokens per second (the best of REPEATS runs' wall time), and whether both batchers gave
every request the same tokens. Writes `data/experiments/batching_14.json`. Usage (one core):

    OMP_NUM_THREADS=1 python benchmarks/batching_14.py
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT_OUT = ROOT / "data" / "experiments" / "batching_14.json"
N_REQUESTS = 64
BATCH_SIZES = (8, 16)
REPEATS = 3


def max_tokens_of(kind: str, n: int, seed: int = 0) -> list[int]:
    import torch

    gen = torch.Generator().manual_seed(seed)
    if kind == "uniform":
        return torch.randint(8, 65, (n,), generator=gen).tolist()
    draws = (torch.randn(n, generator=gen, dtype=torch.float64) * 0.9).exp() * 16
    return draws.round().clamp(8, 192).long().tolist()


def run(fn, model, requests, batch_size: int, eos_id: int) -> dict:
    from course_lib.rollouts.slot_decoder import SlotDecoder

    max_len = max(len(r["prompt_ids"]) + r["max_tokens"] for r in requests) + 1
    best, report = float("inf"), None
    for _ in range(REPEATS):
        step = SlotDecoder(model, batch_size, max_len)
        started = time.perf_counter()
        report = fn(step, requests, batch_size, eos_id)
        best = min(best, time.perf_counter() - started)
    tokens = sum(len(o) for o in report["outputs"])
    return {"steps": report["steps"], "utilization": round(report["utilization"], 4), "tokens": tokens,
            "seconds": round(best, 3), "tokens_per_s": round(tokens / best, 1), "outputs": report["outputs"]}


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    torch.set_num_threads(1)
    from course_lib import continuous_batch_generate, gsm8k_to_r1_zero, load_problems, static_batch_generate
    from course_lib.world.tiny_models import load_tiny

    model, tok = load_tiny("qwen2-sft")
    model.eval()
    prompts = [gsm8k_to_r1_zero(p)["prompt"] for p in load_problems("arith", "test")[:N_REQUESTS]]
    ids = tok(prompts, add_special_tokens=False)["input_ids"]
    results = {"command": "OMP_NUM_THREADS=1 python benchmarks/batching_14.py",
               "machine": {"python": platform.python_version(), "torch": torch.__version__, "threads": 1},
               "model": "qwen2-sft", "requests": N_REQUESTS, "repeats": REPEATS, "runs": []}
    for kind in ("uniform", "long_tail"):
        lengths = max_tokens_of(kind, N_REQUESTS)
        requests = [{"prompt_ids": x, "max_tokens": m} for x, m in zip(ids, lengths)]
        for batch_size in BATCH_SIZES:
            row = {"lengths": kind, "batch_size": batch_size, "max_tokens_mean": sum(lengths) / len(lengths),
                   "max_tokens_max": max(lengths)}
            for name, fn in (("static", static_batch_generate), ("continuous", continuous_batch_generate)):
                row[name] = run(fn, model, requests, batch_size, tok.eos_token_id)
            row["same_outputs"] = row["static"].pop("outputs") == row["continuous"].pop("outputs")
            row["speedup"] = round(row["continuous"]["tokens_per_s"] / row["static"]["tokens_per_s"], 2)
            results["runs"].append(row)
            print(f"{kind:9s} B={batch_size:2d}  static: {row['static']['steps']} steps, utilization "
                  f"{row['static']['utilization']:.3f}, {row['static']['tokens_per_s']:.0f} tok/s  |  continuous: "
                  f"{row['continuous']['steps']} steps, utilization {row['continuous']['utilization']:.3f}, "
                  f"{row['continuous']['tokens_per_s']:.0f} tok/s  |  x{row['speedup']}  same={row['same_outputs']}",
                  flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

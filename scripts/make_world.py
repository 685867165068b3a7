"""Rebuild the course's embedded world: data, tokenizer, tiny base model, tiny Gemma 2.

    python scripts/make_world.py data        # data/arith/{train,test}.jsonl      (seconds)
    python scripts/make_world.py tokenizer   # data/tokenizer/                    (seconds)
    python scripts/make_world.py base        # data/tiny/qwen2-base/  (pretraining, ~10 min on 2 cores)
    python scripts/make_world.py gemma       # data/tiny/gemma2-softcap/          (~2 min)
    python scripts/make_world.py sft         # data/tiny/qwen2-sft/   (the demo's SFT stage, ~1 min)
    python scripts/make_world.py think       # data/think/train.jsonl, data/tiny/qwen2-think/ (~1 min)
    python scripts/make_world.py all         # the six in order

Every step is seeded (`--seed`, default 0) and stops by step count, never by wall time, so the
same command gives the same files on the same software (CPU float32 kernels may still differ
in the last bits between machines). Each step prints how long it took.

Simplifications, named on purpose:
- the base model's "pretraining corpus" is arithmetic only: word problems in a plain
  `Question: ... / Answer: ... / #### N` form and bare equations `12 + 7 = 19`. It holds no
  `<think>` / `<answer>` tags (so zero-shot format reward is about 0) and no test question;
- documents are packed into fixed 256-token rows separated by the eos token, and the loss is
  plain next-token cross-entropy over every token (no document masking);
- the Gemma 2 model is trained only briefly, then its final norm is scaled so that its raw
  logits are large; the cap (30) then matters for every sampled token's log-probability.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from course_lib.world.arith_data import arithmetic_fact, generate_problem, generate_splits, plain_qa_text, write_jsonl  # noqa: E402
from course_lib.gsm8k import load_problems  # noqa: E402
from course_lib.paths import DATA_DIR  # noqa: E402
from course_lib.world.tiny_models import TINY_MODELS, TOKENIZER_DIR  # noqa: E402

N_TRAIN, N_TEST = 10_000, 1_000
SEQ_LEN = 256
BASE = dict(steps=1500, batch_size=32, lr=3e-3, warmup=30, weight_decay=0.1)
THINK = dict(problems=2000, keep_prob=1.0, steps=150, lr=1e-3)
GEMMA = dict(steps=100, batch_size=8, lr=3e-3, warmup=20, weight_decay=0.0, target_gap=0.5,
             target_max_logit_over_cap=1.2)


def step_data(seed: int) -> None:
    train, test = generate_splits(N_TRAIN, N_TEST, seed)
    write_jsonl(train, DATA_DIR / "arith" / "train.jsonl")
    write_jsonl(test, DATA_DIR / "arith" / "test.jsonl")
    print(f"data: {len(train)} train, {len(test)} test problems in {DATA_DIR / 'arith'}")


def step_tokenizer(seed: int) -> None:
    from course_lib.world.tokenizer_build import save_tokenizer

    tok = save_tokenizer(TOKENIZER_DIR, seed)
    print(f"tokenizer: {len(tok)} tokens, eos {tok.eos_token!r}={tok.eos_token_id}, "
          f"pad {tok.pad_token!r}={tok.pad_token_id}, saved to {TOKENIZER_DIR}")


def pretraining_rows(tokenizer, n_rows: int, seed: int):
    """`n_rows` packed rows of SEQ_LEN token ids: plain Q/A problems and equation blocks, eos-separated.

    Problems come from a fresh generator stream (not the committed train list) and any question
    of the test split is skipped.
    """
    import torch

    test_questions = {p["question"] for p in load_problems("arith", "test")}
    rng = random.Random(seed + 1_000_003)
    need = n_rows * SEQ_LEN
    docs, n_tokens_est, skipped = [], 0, 0
    while n_tokens_est < need * 1.02:
        if rng.random() < 0.7:
            p = generate_problem(rng)
            if p["question"] in test_questions:
                skipped += 1
                continue
            docs.append(plain_qa_text(p))
            n_tokens_est += 75
        else:
            docs.append("\n".join(arithmetic_fact(rng) for _ in range(8)))
            n_tokens_est += 80
    ids = []
    eos = tokenizer.eos_token_id
    for enc in tokenizer(docs, add_special_tokens=False)["input_ids"]:
        ids += enc + [eos]
    while len(ids) < need:  # the estimate was short: repeat from the start
        ids += ids[: need - len(ids)]
    rows = torch.tensor(ids[:need], dtype=torch.long).view(n_rows, SEQ_LEN)
    print(f"  corpus: {len(docs)} documents, {need} tokens used, {skipped} test questions skipped")
    return rows


def train_lm(model, rows, steps: int, batch_size: int, lr: float, warmup: int, weight_decay: float, seed: int, tag: str):
    import torch

    torch.manual_seed(seed)
    model.train()
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=lr, betas=(0.9, 0.95),
    )

    def lr_at(step):
        if step < warmup:
            return lr * (step + 1) / warmup
        progress = (step - warmup) / max(1, steps - warmup)
        return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))

    gen = torch.Generator().manual_seed(seed)
    order = torch.randperm(rows.shape[0], generator=gen)
    log, t0 = [], time.time()
    for step in range(steps):
        idx = order[(torch.arange(batch_size) + step * batch_size) % rows.shape[0]]
        batch = rows[idx]
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step % 10 == 0 or step == steps - 1:
            elapsed = time.time() - t0
            log.append({"step": step, "loss": round(loss.item(), 4), "elapsed_s": round(elapsed, 1)})
            print(f"  {tag} step {step:4d}/{steps}  loss {loss.item():.3f}  {elapsed:6.1f}s", flush=True)
    model.eval()
    return log


def evaluate_base(model, tokenizer, n: int = 200, seed: int = 0) -> dict:
    """Zero-shot r1_zero rewards on the first `n` test problems and plain-equation accuracy."""
    from course_lib.gsm8k import gsm8k_to_r1_zero
    from course_lib.rewards import r1_zero_reward_fn
    from course_lib.world.tiny_models import greedy_complete

    examples = [gsm8k_to_r1_zero(p) for p in load_problems("arith", "test")[:n]]
    responses = greedy_complete(model, tokenizer, [e["prompt"] for e in examples], max_new_tokens=64)
    rewards = [r1_zero_reward_fn(r, e["ground_truth"]) for r, e in zip(responses, examples)]
    rng = random.Random(seed + 99)
    facts = [arithmetic_fact(rng) for _ in range(n)]
    prompts = [f.rsplit("=", 1)[0] + "=" for f in facts]
    outs = greedy_complete(model, tokenizer, prompts, max_new_tokens=5)
    right = [o.strip().split("\n")[0].strip() == f.rsplit("= ", 1)[1] for o, f in zip(outs, facts)]
    return {
        "zero_shot_format_reward": sum(r["format_reward"] for r in rewards) / n,
        "zero_shot_answer_reward": sum(r["answer_reward"] for r in rewards) / n,
        "plain_equation_accuracy": sum(right) / n,
        "n": n,
        "example_response": responses[0],
    }


def save_model(model, tokenizer, out: Path, extra: dict) -> None:
    from course_lib.world.tiny_models import generation_config_for

    if out.exists():
        shutil.rmtree(out)
    model.generation_config = generation_config_for(tokenizer)
    model.save_pretrained(out, safe_serialization=True)
    for f in TOKENIZER_DIR.iterdir():  # the tokenizer as built, not the one a run has touched
        shutil.copy(f, out / f.name)
    (out / "build_info.json").write_text(json.dumps(extra, indent=2) + "\n", encoding="utf-8")


def step_base(seed: int, steps: int | None = None) -> None:
    import torch
    from transformers import AutoTokenizer, Qwen2ForCausalLM

    from course_lib.world.tiny_models import count_parameters, qwen2_base_config

    torch.manual_seed(seed)
    cfg = dict(BASE, steps=steps or BASE["steps"])
    tok = AutoTokenizer.from_pretrained(TOKENIZER_DIR, local_files_only=True)
    config = qwen2_base_config(len(tok), tok.pad_token_id, tok.eos_token_id)
    config._attn_implementation = "sdpa"
    model = Qwen2ForCausalLM(config)
    n_params = count_parameters(model)
    print(f"base: Qwen2 with {n_params:,} parameters; {cfg['steps']} steps of {cfg['batch_size']}x{SEQ_LEN} tokens")
    rows = pretraining_rows(tok, cfg["steps"] * cfg["batch_size"], seed)
    t0 = time.time()
    log = train_lm(model, rows, cfg["steps"], cfg["batch_size"], cfg["lr"], cfg["warmup"], cfg["weight_decay"], seed, "base")
    train_s = time.time() - t0
    metrics = evaluate_base(model, tok)
    print(f"  base: zero-shot format {metrics['zero_shot_format_reward']:.3f}, answer "
          f"{metrics['zero_shot_answer_reward']:.3f}, plain equations {metrics['plain_equation_accuracy']:.3f}")
    print(f"  example zero-shot response: {metrics['example_response']!r}")
    save_model(model, tok, TINY_MODELS["qwen2-base"], {
        "built_by": "python scripts/make_world.py base", "seed": seed, "parameters": n_params,
        "train": cfg, "seq_len": SEQ_LEN, "train_seconds": round(train_s, 1), "log": log, "eval": metrics,
    })


def logprob_gap(model, tokenizer, n_prompts: int = 32, new_tokens: int = 24, seed: int = 0) -> tuple[float, float]:
    """Mean |log p_capped - log p_uncapped| over tokens sampled from the (capped) model, and the
    mean over those positions of the largest |raw logit|."""
    import torch

    from course_lib.gsm8k import gsm8k_to_r1_zero

    torch.manual_seed(seed)
    problems = load_problems("arith", "test")[:n_prompts]
    prompts = [gsm8k_to_r1_zero(p)["prompt"] for p in problems]
    tokenizer.padding_side = "left"
    enc = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    tokenizer.padding_side = "right"
    with torch.no_grad():
        seq = model.generate(**enc, do_sample=True, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                             pad_token_id=tokenizer.pad_token_id, top_k=0, top_p=1.0, temperature=1.0)
        mask = torch.cat([enc["attention_mask"], torch.ones_like(seq[:, enc["input_ids"].shape[1]:])], dim=1)
        out = model(input_ids=seq, attention_mask=mask, output_hidden_states=True)
        capped = out.logits.float()
        raw = model.lm_head(out.hidden_states[-1]).float()
    start = enc["input_ids"].shape[1]
    targets = seq[:, start:]
    lp_c = torch.log_softmax(capped[:, start - 1 : -1], -1).gather(-1, targets[..., None])[..., 0]
    lp_r = torch.log_softmax(raw[:, start - 1 : -1], -1).gather(-1, targets[..., None])[..., 0]
    max_raw = raw[:, start - 1 : -1].abs().amax(-1).mean().item()
    return (lp_c - lp_r).abs().mean().item(), max_raw


def step_gemma(seed: int) -> None:
    import torch
    from transformers import AutoTokenizer, Gemma2ForCausalLM

    from course_lib.world.tiny_models import count_parameters, gemma2_softcap_config

    torch.manual_seed(seed)
    tok = AutoTokenizer.from_pretrained(TOKENIZER_DIR, local_files_only=True)
    config = gemma2_softcap_config(len(tok), tok.pad_token_id, tok.eos_token_id)
    config._attn_implementation = "eager"
    model = Gemma2ForCausalLM(config)
    n_params = count_parameters(model)
    print(f"gemma: Gemma 2 with {n_params:,} parameters, final_logit_softcapping={config.final_logit_softcapping}")
    rows = pretraining_rows(tok, GEMMA["steps"] * GEMMA["batch_size"], seed + 1)
    log = train_lm(model, rows, GEMMA["steps"], GEMMA["batch_size"], GEMMA["lr"], GEMMA["warmup"],
                   GEMMA["weight_decay"], seed, "gemma")
    # Gemma's RMSNorm multiplies by (1 + weight): scaling (1 + weight) by s scales every raw logit
    # by exactly s and touches nothing else. Grow s until the cap clearly matters.
    norm = model.model.norm
    base_w = norm.weight.detach().clone()
    cap, scale = config.final_logit_softcapping, 1.0
    gap, max_raw = logprob_gap(model, tok, seed=seed)
    print(f"  gemma: trained, log-prob gap from the cap {gap:.3f} nat, mean max |raw logit| {max_raw:.1f}")
    while (gap < GEMMA["target_gap"] or max_raw < GEMMA["target_max_logit_over_cap"] * cap) and scale < 64:
        scale *= 1.25
        with torch.no_grad():
            norm.weight.copy_((1 + base_w) * scale - 1)
        gap, max_raw = logprob_gap(model, tok, seed=seed)
        print(f"  gemma: raw logits x{scale:.2f}: gap {gap:.3f} nat, mean max |raw logit| {max_raw:.1f}")
    with torch.no_grad():
        probe = model(input_ids=rows[:4, :128], output_hidden_states=True)
        raw = model.lm_head(probe.hidden_states[-1])
    frac_over = (raw.abs() > cap).float().mean().item()
    max_over = raw.abs().amax(-1).mean().item()
    print(f"  gemma: on corpus text mean max |raw logit| {max_over:.1f}, {100 * frac_over:.1f}% of raw logits beyond the cap")
    save_model(model, tok, TINY_MODELS["gemma2-softcap"], {
        "built_by": "python scripts/make_world.py gemma", "seed": seed, "parameters": n_params,
        "train": GEMMA, "logit_scale": round(scale, 4), "sampled_logprob_gap_nat": round(gap, 4),
        "sampled_mean_max_abs_raw_logit": round(max_raw, 2),
        "mean_max_abs_raw_logit": round(max_over, 2), "log": log,
    })


def step_sft(seed: int) -> None:
    """The demo's SFT stage (`configs/demo.yaml`, section `sft`) from the committed base model:
    the starting point of the RL notebooks, so that they need not train it first."""
    import yaml

    from course_lib.training.common import eval_examples_for
    from course_lib.training.config import build_config
    from course_lib.training.evaluation import evaluate
    from course_lib.training.sft_trainer import train_sft
    from course_lib.world.tiny_models import load_tiny

    spec = yaml.safe_load((DATA_DIR.parent / "configs" / "demo.yaml").read_text())
    settings = {**spec["common"], **spec["sft"], "seed": seed, "eval_examples": 0}
    model, tok = load_tiny(settings.pop("model"))
    t0 = time.time()
    run = train_sft(build_config("sft", settings), model=model, tokenizer=tok, eval_data=[], progress=False)
    train_s = time.time() - t0
    held_out = eval_examples_for(build_config("eval", {"data": "arith", "eval_examples": 1000}))
    res = evaluate(run.model, tok, held_out, max_tokens=spec["eval"]["eval_max_tokens"], batch_size=500)
    metrics = {k: res[k] for k in ("format_reward", "answer_reward", "n", "mean_response_tokens")}
    print(f"  sft: held-out format {metrics['format_reward']:.3f}, answer {metrics['answer_reward']:.3f}")
    save_model(run.model, tok, TINY_MODELS["qwen2-sft"], {
        "built_by": "python scripts/make_world.py sft", "seed": seed, "from": "qwen2-base",
        "train": settings, "train_seconds": round(train_s, 1),
        "eval_greedy_first_1000_test": metrics,
        "final_nll_per_token": round([r for r in run.metrics if r["kind"] == "train"][-1]["nll_per_token"], 4),
    })


def step_think(seed: int) -> None:
    """Notebook 13's world: `data/think/train.jsonl`, single-turn chat conversations of the first
    THINK["problems"] training problems, half of them (drawn) answered after the worked steps in
    `<think>`, half directly after an empty block; and `qwen2-think`, `qwen2-base` after SFT on
    them with every empty block kept (the keep rate that follows both modes best in
    `benchmarks/thinking_13.py`). The arith data, the other models and their figures are untouched."""
    from course_lib.training.config import build_config
    from course_lib.training.sft_trainer import train_sft
    from course_lib.training.thinking import conversations, evaluate_modes, load_conversations, sft_records
    from course_lib.rollouts import make_engine
    from course_lib.world.tiny_models import load_tiny

    convs = conversations(load_problems("arith", "train")[: THINK["problems"]], thinking_share=0.5, seed=seed)
    path = DATA_DIR / "think" / "train.jsonl"
    write_jsonl(convs, path)
    convs = load_conversations(path)
    print(f"think: {len(convs)} conversations ({sum(c['thinking'] for c in convs)} thinking) in {path}")
    records = sft_records(convs, keep_prob=THINK["keep_prob"], seed=seed + 1)
    settings = {"lr": THINK["lr"], "steps": THINK["steps"], "batch_size": 32, "warmup_steps": 10,
                "eval_examples": 0, "seed": seed}
    model, tok = load_tiny("qwen2-base")
    t0 = time.time()
    run = train_sft(build_config("sft", settings), model=model, tokenizer=tok, train_data=records, eval_data=[],
                    progress=False)
    train_s = time.time() - t0
    modes = evaluate_modes(make_engine("fast", run.model, tok), tok, load_problems("arith", "test")[:500])
    metrics = {mode: {k: round(v[k], 4) for k in ("followed", "accuracy", "tokens", "n")} for mode, v in modes.items()}
    print(f"  think: {metrics}")
    save_model(run.model, tok, TINY_MODELS["qwen2-think"], {
        "built_by": "python scripts/make_world.py think", "seed": seed, "from": "qwen2-base",
        "data": "data/think/train.jsonl", "keep_prob": THINK["keep_prob"], "train": settings,
        "train_seconds": round(train_s, 1), "eval_greedy_first_500_test_qwen3_template": metrics,
    })


STEPS = {"data": step_data, "tokenizer": step_tokenizer, "base": step_base, "gemma": step_gemma, "sft": step_sft,
         "think": step_think}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=[*STEPS, "all"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    ap.add_argument("--base-steps", type=int, default=None, help="override the pretraining step count (smoke tests)")
    args = ap.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    names = list(STEPS) if args.step == "all" else [args.step]
    total = time.time()
    for name in names:
        t0 = time.time()
        if name == "base":
            step_base(args.seed, args.base_steps)
        else:
            STEPS[name](args.seed)
        print(f"[{name}] done in {time.time() - t0:.1f}s", flush=True)
    if len(names) > 1:
        print(f"[all] done in {time.time() - total:.1f}s")


if __name__ == "__main__":
    main()

"""PPO against GRPO at an equal number of sampled responses, and GAE's lambda sweep (notebook 11).

1. From the committed `qwen2-sft`, for each seed: GRPO (group advantages, the clip loss, one epoch)
   and PPO (the same rollouts' settings, the same clip loss, GAE advantages from a critic) for
   STEPS steps (30) of 64 responses (8 per question); greedy held-out answer reward on the first
   EVAL_N test problems every EVAL_EVERY steps; each step's metrics (reward, seconds, the
   critic's explained variance, the per-token advantage variance before normalisation).
2. The lambda sweep, with the policy and critic of PPO's first seed at the end of its run: for
   PREFIXES (question, response prefix through token t) states, 2 * K continuations sampled from
   the prefix. The lambda-return G_t = A_t + V_t of each of the first K (GAE with that lambda,
   gamma 1, the critic's values along the continuation) estimates Q(s_t, a_t); the mean reward
   of the other K is the Monte Carlo Q. Bias = mean over prefixes of (mean G - Q_MC); variance =
   mean over prefixes of the variance of G over the K continuations.

Writes `data/experiments/ppo_11.json`, which notebook 11 plots. Usage (about 20 minutes on one
core of a busy 2-core machine):

    OMP_NUM_THREADS=1 python benchmarks/ppo_11.py
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
DEFAULT_OUT = ROOT / "data" / "experiments" / "ppo_11.json"
SETTINGS = dict(lr=1e-4, rollout_batch_size=64, group_size=8, train_batch_size=64, gradient_accumulation_steps=2,
                loss_type="grpo_clip", use_std_normalization=True, sampling_temperature=1.0, sampling_min_tokens=4,
                sampling_max_tokens=100, eval_max_tokens=100)
PPO_SETTINGS = dict(critic_lr=1e-3, gamma=1.0, lam=0.95, vf_coef=0.5, cliprange_value=0.2, whiten_advantages=True)
LAMBDAS = (0.0, 0.5, 0.95, 1.0)


def run(kind: str, seed: int, args, held_out) -> tuple[dict, object]:
    import torch

    from course_lib.training.grpo_trainer import train_grpo
    from course_lib.training.ppo_trainer import train_ppo
    from course_lib.world.tiny_models import load_tiny

    model, tokenizer = load_tiny("qwen2-sft")
    cfg = {**SETTINGS, **(PPO_SETTINGS if kind == "ppo" else {}), "n_grpo_steps": args.steps, "seed": seed,
           "eval_every": args.eval_every, "eval_examples": args.eval_n}
    trainer = train_ppo if kind == "ppo" else train_grpo
    t0 = time.perf_counter()
    result = trainer(cfg, model=model, tokenizer=tokenizer, eval_data=held_out, progress=False)
    keys = ("step", "train_reward", "step_time", "rollout_time", "advantage_var", "explained_variance", "value_loss",
            "clip_fraction", "response_length")
    steps = [{k: r[k] for k in keys if k in r} for r in result.metrics if r["kind"] == "train"]
    evals = [{"step": e["step"], "answer_reward": e["answer_reward"], "format_reward": e["format_reward"]}
             for e in result.evals]
    torch.set_num_threads(1)
    return {"kind": kind, "seed": seed, "seconds": time.perf_counter() - t0, "steps": steps, "evals": evals}, result


def lambda_sweep(result, problems: list[dict], args) -> dict:
    """The bias and variance of the lambda-return against Monte Carlo Q (see the module docstring)."""
    import torch

    from course_lib import compute_gae, r1_zero_reward_fn, token_level_rewards, tokenize_prompt_and_output
    from course_lib.rollouts import SamplingParams, make_engine

    policy, critic, tok = result.model.eval(), result.critic.eval(), result.tokenizer
    engine = make_engine("fast", policy, tok)
    gen = torch.Generator().manual_seed(0)
    firsts = engine.generate([p["prompt"] for p in problems], SamplingParams(
        temperature=1.0, max_tokens=100, min_tokens=4, stop=("</answer>",), n=1, seed=1))
    states = []
    for prob, first in zip(problems, firsts):
        ids = list(first.token_ids)
        for _ in range(args.positions):
            if len(ids) >= 2:
                states.append((prob, ids[: int(torch.randint(0, len(ids) - 1, (1,), generator=gen)) + 1]))
    G = {lam: [] for lam in LAMBDAS}
    q_mc, reward_var, skipped = [], [], 0
    for s, (prob, prefix_ids) in enumerate(states):
        prefix = tok.decode(prefix_ids)
        conts = engine.generate([prob["prompt"] + prefix], SamplingParams(
            temperature=1.0, max_tokens=100 - len(prefix_ids), min_tokens=1, stop=("</answer>",), n=2 * args.k,
            seed=100 + s))
        responses = [prefix + c.text for c in conts]
        rewards = torch.tensor([r1_zero_reward_fn(r, prob["ground_truth"])["reward"] for r in responses])
        batch = tokenize_prompt_and_output([prob["prompt"]] * len(responses), responses, tok)
        mask = batch["response_mask"].bool()
        t = int(mask[0].nonzero()[0]) + len(prefix_ids) - 1  # the prefix's last token, a_t
        if not torch.equal(batch["labels"][0, t - len(prefix_ids) + 1: t + 1], torch.tensor(prefix_ids)):
            skipped += 1  # the prefix did not re-tokenize to the same ids
            continue
        with torch.no_grad():
            values = critic(batch["input_ids"]).float()
        token_rewards = token_level_rewards(rewards, batch["response_mask"])
        for lam in LAMBDAS:
            adv, ret = compute_gae(token_rewards, values, batch["response_mask"], 1.0, lam)
            G[lam].append(ret[: args.k, t])
        q_mc.append(float(rewards[args.k:].mean()))
        reward_var.append(float(rewards[args.k:].var()))
    rows = []
    for lam in LAMBDAS:
        means = torch.stack([g.mean() for g in G[lam]])
        vars_ = torch.stack([g.var() for g in G[lam]])
        bias = means - torch.tensor(q_mc)
        rows.append({"lam": lam, "bias": float(bias.mean()), "abs_bias": float(bias.abs().mean()),
                     "rms_bias": float(bias.pow(2).mean().sqrt()), "variance": float(vars_.mean())})
    return {"states": len(q_mc), "skipped": skipped, "k": args.k,
            "q_mc_noise_variance": sum(reward_var) / len(reward_var) / args.k, "rows": rows}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--eval-every", type=int, default=5)
    p.add_argument("--eval-n", type=int, default=200)
    p.add_argument("--prompts", type=int, default=24, help="lambda sweep: held-out questions")
    p.add_argument("--positions", type=int, default=2, help="lambda sweep: prefixes per question")
    p.add_argument("--k", type=int, default=16, help="lambda sweep: continuations per half")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = p.parse_args(argv)

    import torch

    from course_lib.gsm8k import as_r1_zero, load_problems

    torch.set_num_threads(1)
    test = load_problems("arith", "test")
    held_out = test[: args.eval_n]
    out = {"settings": {**SETTINGS, "ppo": PPO_SETTINGS, "steps": args.steps, "eval_n": args.eval_n},
           "command": "OMP_NUM_THREADS=1 python benchmarks/ppo_11.py " + " ".join(argv or sys.argv[1:]),
           "machine": {"platform": platform.platform(), "torch": torch.__version__}, "runs": []}
    from course_lib.training.evaluation import evaluate as evaluate_policy
    from course_lib.world.tiny_models import load_tiny

    start_model, tokenizer = load_tiny("qwen2-sft")
    start = evaluate_policy(start_model, tokenizer, as_r1_zero(held_out), max_tokens=SETTINGS["eval_max_tokens"],
                            batch_size=args.eval_n)
    out["start"] = {k: start[k] for k in ("format_reward", "answer_reward")}
    ppo_first = None
    for seed in args.seeds:
        for kind in ("grpo", "ppo"):
            record, result = run(kind, seed, args, held_out)
            out["runs"].append(record)
            if kind == "ppo" and ppo_first is None:
                ppo_first = result
            print(f"{kind} seed {seed}: {record['seconds']:.0f} s, held-out answer "
                  f"{[round(e['answer_reward'], 3) for e in record['evals']]}", flush=True)
            args.out.write_text(json.dumps(out, indent=1) + "\n")
    sweep_problems = as_r1_zero(test[args.eval_n: args.eval_n + args.prompts])
    t0 = time.perf_counter()
    out["lambda_sweep"] = {**lambda_sweep(ppo_first, sweep_problems, args), "seconds": time.perf_counter() - t0,
                           "policy": f"PPO seed {args.seeds[0]} after {args.steps} steps"}
    print(json.dumps(out["lambda_sweep"], indent=1))
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""DPO against SFT-on-chosen and GRPO on one question budget; beta; reference hygiene (notebook 12).

From the committed `qwen2-sft`, on the first QUESTIONS (256) training questions:

1. For each seed: on-policy pairs (GROUP = 8 samples per question at temperature 1, graded by
   `r1_zero_reward_fn`, up to 2 pairs per group), then
   - `dpo_on`: DPO on those pairs,
   - `dpo_off`: DPO on off-policy pairs of the same questions (gold against its answer + 1),
   - `sft_chosen`: SFT on the chosen responses of the on-policy pairs only,
   - `grpo`: GRPO over the same questions, each once (32 steps of 8 questions x 8 samples, the
     settings of notebook 11's comparison),
   each scored by greedy decoding on the first EVAL_N test problems (held-out answer reward), and
   the DPO runs' per-step metrics (loss, margin, accuracy, chosen and rejected log-probs) and the
   exact KL(pi || pi_ref) per response token on held-out prompts.
2. The learning rate (LRS) and beta (BETAS, at lr BETA_LR), each on the first seed's on-policy pairs: beta on the first seed's on-policy pairs: the implicit-reward accuracy on held-out
   on-policy pairs (made the same way from EVAL_PAIR_QUESTIONS test questions) against the exact
   KL to the reference, and the held-out answer reward.
3. Reference hygiene, first seed, on-policy pairs, at lr HYGIENE_LR: (a) a reference with
   attention dropout 0.1 scored in train mode, (b) the reference's log-probs taken from the
   policy being trained, against the correct run at the same settings.
4. Cost: seconds per DPO step on 64 responses (32 pairs) against a GRPO step on 64 (sampling
   included), and the one-time costs of DPO (sampling the pairs, the reference's log-probs).

Writes `data/experiments/dpo_12.json`, which notebook 12 plots. Usage (about 15 minutes on one
core of a 2-core machine):

    OMP_NUM_THREADS=1 python benchmarks/dpo_12.py
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT_OUT = ROOT / "data" / "experiments" / "dpo_12.json"
QUESTIONS, GROUP = 256, 8
DPO = dict(beta=0.1, lr=3e-5, batch_size=16, gradient_accumulation_steps=1, epochs=2, warmup_steps=0,
           max_grad_norm=1.0, eval_every=0, eval_max_tokens=100)
SFT = dict(lr=3e-5, batch_size=16, gradient_accumulation_steps=1, warmup_steps=0, max_grad_norm=1.0,
           eval_every=0, eval_max_tokens=100, n_examples=None, filter_correct=False)
GRPO = dict(lr=1e-4, rollout_batch_size=64, group_size=GROUP, train_batch_size=64, gradient_accumulation_steps=2,
            loss_type="grpo_clip", use_std_normalization=True, sampling_temperature=1.0, sampling_min_tokens=4,
            sampling_max_tokens=100, eval_max_tokens=100, n_questions=QUESTIONS,
            n_grpo_steps=QUESTIONS // (64 // GROUP), eval_every=0)
BETAS = (0.01, 0.1, 0.5)
LRS = (3e-5, 1e-4, 3e-4)
BETA_LR = 1e-4  # the beta sweep's learning rate: at 3e-5 no run moves far enough from the reference to tell
HYGIENE_LR = 1e-4  # the reference-hygiene runs' learning rate, for the same reason
PARTS = ("comparison", "lr_sweep", "beta_sweep", "cost", "hygiene")


def held_out(n: int) -> list[dict]:
    from course_lib import gsm8k_to_r1_zero, load_problems

    return [gsm8k_to_r1_zero(p) for p in load_problems("arith", "test")[:n]]


def answer_reward(model, tokenizer, problems) -> float:
    from course_lib.training.evaluation import evaluate

    return evaluate(model, tokenizer, problems, max_tokens=100, batch_size=len(problems))["answer_reward"]


def sample_pairs(model, tokenizer, questions: list[dict], seed: int) -> list[dict]:
    """On-policy pairs of `questions` from `model` (GROUP samples each at temperature 1)."""
    from course_lib.training.dpo_trainer import build_pairs

    return build_pairs({"pair_source": "on_policy", "n_questions": len(questions), "group_size": GROUP,
                        "sampling_temperature": 1.0, "sampling_max_tokens": 100, "max_pairs_per_group": 2,
                        "seed": seed}, model=model, tokenizer=tokenizer, questions=questions)


def dpo_run(pairs, seed, args, evals, *, reference=None, ref_log_probs=None, step_fn=None, **extra):
    """One DPO run from qwen2-sft; per-step metrics, held-out answer reward, the exact KL at the end."""
    import torch

    from course_lib.training.dpo_trainer import train_dpo
    from course_lib.training.evaluation import exact_kl_to_reference
    from course_lib.world.tiny_models import load_tiny

    model, tokenizer = load_tiny("qwen2-sft")
    kwargs = {"reference": reference, "ref_log_probs": ref_log_probs}
    if step_fn is not None:
        kwargs["step_fn"] = step_fn
    t0 = time.perf_counter()
    result = train_dpo({**DPO, **extra, "seed": seed, "eval_examples": 0}, model=model, tokenizer=tokenizer,
                       pairs=pairs, eval_data=[], progress=False, **kwargs)
    seconds = time.perf_counter() - t0
    keys = ("step", "loss", "reward_margin", "reward_accuracy", "chosen_rewards", "rejected_rewards",
            "chosen_log_probs", "rejected_log_probs", "grad_norm", "step_time")
    steps = [{k: r[k] for k in keys if k in r} for r in result.metrics if r["kind"] == "train"]
    torch.set_num_threads(1)
    out = {"seconds": seconds, "steps": steps, "pairs": len(pairs),
           "held_out_answer": answer_reward(model, tokenizer, evals["problems"]),
           "exact_kl": exact_kl_to_reference(model, result.reference, tokenizer, evals["kl_prompts"], max_tokens=100, seed=0)}
    return out, model, result.reference


def pair_accuracy(model, reference, tokenizer, pairs, beta: float) -> float:
    """The fraction of `pairs` whose implicit reward ranks chosen above rejected, strictly."""
    from course_lib.training.dpo_trainer import reference_log_probs

    pi = reference_log_probs(model, tokenizer, pairs, batch_size=32)
    ref = reference_log_probs(reference, tokenizer, pairs, batch_size=32)
    margin = beta * ((pi[:, 0] - ref[:, 0]) - (pi[:, 1] - ref[:, 1]))
    return float((margin > 0).float().mean())


def comparison(seed, args, questions, evals) -> dict:
    from course_lib import off_policy_pairs
    from course_lib.training.grpo_trainer import train_grpo
    from course_lib.training.sft_trainer import train_sft
    from course_lib.world.tiny_models import load_tiny

    model, tokenizer = load_tiny("qwen2-sft")
    t0 = time.perf_counter()
    on = sample_pairs(model, tokenizer, questions, seed)
    sampling = time.perf_counter() - t0
    off = off_policy_pairs(questions)
    row = {"seed": seed, "pairs_on_policy": len(on), "pairs_off_policy": len(off), "sampling_seconds": sampling}
    row["dpo_on"], *_ = dpo_run(on, seed, args, evals)
    row["dpo_off"], *_ = dpo_run(off, seed, args, evals)
    sft_model, _ = load_tiny("qwen2-sft")
    steps = row["dpo_on"]["steps"][-1]["step"]
    t0 = time.perf_counter()
    train_sft({**SFT, "steps": steps, "seed": seed, "eval_examples": 0}, model=sft_model, tokenizer=tokenizer,
              train_data=[{"prompt": p["prompt"], "output": p["chosen"], "ground_truth": p["ground_truth"]} for p in on],
              eval_data=[], progress=False)
    row["sft_chosen"] = {"steps": steps, "seconds": time.perf_counter() - t0,
                         "held_out_answer": answer_reward(sft_model, tokenizer, evals["problems"])}
    grpo_model, _ = load_tiny("qwen2-sft")
    t0 = time.perf_counter()
    result = train_grpo({**GRPO, "seed": seed, "eval_examples": 0}, model=grpo_model, tokenizer=tokenizer,
                        eval_data=[], progress=False)
    train = [r for r in result.metrics if r["kind"] == "train"]
    row["grpo"] = {"steps": len(train), "seconds": time.perf_counter() - t0,
                   "step_time": [r["step_time"] for r in train],
                   "held_out_answer": answer_reward(grpo_model, tokenizer, evals["problems"])}
    for name in ("dpo_on", "dpo_off", "sft_chosen", "grpo"):
        print(f"seed {seed} {name:10s} held-out answer {row[name]['held_out_answer']:.3f} "
              f"({row[name]['seconds']:.0f} s)", flush=True)
    return row, on


def beta_sweep(on, seed, args, evals) -> list[dict]:
    out = []
    for beta in BETAS:
        run, model, start = dpo_run(on, seed, args, evals, beta=beta, lr=BETA_LR)
        run["beta"] = beta
        run["held_out_pair_accuracy"] = pair_accuracy(model, start, start_tokenizer(), evals["pairs"], beta)
        run["train_reward_accuracy_last"] = run["steps"][-1]["reward_accuracy"]
        print(f"beta {beta}: held-out pair accuracy {run['held_out_pair_accuracy']:.3f}, exact KL {run['exact_kl']:.4f}, "
              f"held-out answer {run['held_out_answer']:.3f}", flush=True)
        out.append(run)
    return out


def lr_sweep(on, seed, args, evals) -> list[dict]:
    out = []
    for lr in LRS:
        run, *_ = dpo_run(on, seed, args, evals, lr=lr)
        run["lr"] = lr
        print(f"lr {lr}: held-out answer {run['held_out_answer']:.3f}, exact KL {run['exact_kl']:.4f}, last chosen / "
              f"rejected log-prob {run['steps'][-1]['chosen_log_probs']:.1f} / {run['steps'][-1]['rejected_log_probs']:.1f}",
              flush=True)
        out.append(run)
    return out


def cost(on, seed, args, evals) -> dict:
    """Seconds per DPO step of 32 pairs (64 responses, two models' forwards, no sampling) and the one-time costs."""
    from course_lib.training.dpo_trainer import reference_log_probs
    from course_lib.world.tiny_models import load_tiny

    model, tokenizer = load_tiny("qwen2-sft")
    t0 = time.perf_counter()
    reference_log_probs(model, tokenizer, on, batch_size=32)
    ref_seconds = time.perf_counter() - t0
    run, *_ = dpo_run(on, seed, args, evals, batch_size=32, steps=8)
    times = sorted(s["step_time"] for s in run["steps"][1:])
    return {"dpo_step_64_responses": times[len(times) // 2], "dpo_step_times": [s["step_time"] for s in run["steps"]],
            "reference_log_probs_seconds": ref_seconds, "pairs": len(on)}


def start_tokenizer():
    from course_lib.world.tiny_models import load_tiny_tokenizer

    return load_tiny_tokenizer()


def hygiene(on, seed, args, evals) -> dict:
    """(a) the reference with dropout scored in train mode; (b) reference log-probs from the policy itself."""
    import torch

    from course_lib.training.dpo_trainer import dpo_train_step, reference_log_probs
    from course_lib.world.tiny_models import load_tiny

    tokenizer = start_tokenizer()
    out = {}
    # (a) the same weights with attention dropout 0.1, scored in train mode (the bug) and in eval mode
    noisy_ref, _ = load_tiny("qwen2-sft")
    noisy_ref.config.attention_dropout = 0.1
    for layer in noisy_ref.model.layers:
        layer.self_attn.attention_dropout = 0.1
    noisy_ref.requires_grad_(False)
    torch.manual_seed(seed)
    noisy_ref.train()
    with torch.no_grad():
        train_mode = _scores(noisy_ref, tokenizer, on)
    eval_mode = reference_log_probs(noisy_ref, tokenizer, on, batch_size=32)
    out["dropout_reference_gap"] = {"mean_abs": float((train_mode - eval_mode).abs().mean()),
                                    "max_abs": float((train_mode - eval_mode).abs().max())}
    out["correct"], *_ = dpo_run(on, seed, args, evals, lr=HYGIENE_LR)
    out["reference_train_mode"], *_ = dpo_run(on, seed, args, evals, ref_log_probs=train_mode, lr=HYGIENE_LR)

    # (b) the reference's log-probs recomputed from the policy at every step (the reference is the policy)
    def from_policy(**kw):
        with torch.no_grad():
            was = kw["model"].training
            kw["model"].eval()
            kw["ref_log_probs"] = _scores(kw["model"], kw["tokenizer"], kw["batch_pairs"])
            kw["model"].train(was)
        return dpo_train_step(**kw)

    out["reference_from_policy"], *_ = dpo_run(on, seed, args, evals, step_fn=from_policy, lr=HYGIENE_LR)
    for name in ("correct", "reference_train_mode", "reference_from_policy"):
        first = out[name]["steps"][0]
        print(f"{name}: first loss {first['loss']:.4f} (log 2 = {math.log(2):.4f}), accuracy {first['reward_accuracy']:.3f}, "
              f"exact KL {out[name]['exact_kl']:.4f}, held-out answer {out[name]['held_out_answer']:.3f}", flush=True)
    return out


def _scores(model, tokenizer, pairs):
    """(N, 2) summed log-probs of chosen and rejected under `model`, in the mode it is in, without gradient."""
    import torch

    from course_lib import sequence_log_probs
    from course_lib.training.dpo_trainer import pair_log_probs

    with torch.no_grad():
        return torch.cat([pair_log_probs(model, tokenizer, pairs[i:i + 32], average=False,
                                         sequence_log_probs_fn=sequence_log_probs) for i in range(0, len(pairs), 32)])


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--eval-n", type=int, default=200)
    parser.add_argument("--kl-prompts", type=int, default=32)
    parser.add_argument("--eval-pair-questions", type=int, default=128)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--parts", default=",".join(PARTS),
                        help="a subset reruns those parts and keeps the others of the existing --out file")
    args = parser.parse_args()
    torch.set_num_threads(1)

    from course_lib import gsm8k_to_r1_zero, load_problems
    from course_lib.world.tiny_models import load_tiny

    questions = [gsm8k_to_r1_zero(p) for p in load_problems("arith", "train")[:QUESTIONS]]
    problems = held_out(args.eval_n)
    start, tokenizer = load_tiny("qwen2-sft")
    evals = {"problems": problems, "kl_prompts": [p["prompt"] for p in problems[:args.kl_prompts]],
             "pairs": sample_pairs(start, tokenizer, held_out(args.eval_pair_questions), seed=1000)}
    parts = args.parts.split(",")
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"--parts: unknown {', '.join(unknown)} (known: {', '.join(PARTS)})")
    t0 = time.perf_counter()
    results = json.loads(args.out.read_text()) if set(parts) != set(PARTS) else {}
    results.update({"settings": {"questions": QUESTIONS, "group_size": GROUP, "dpo": DPO, "sft": SFT, "grpo": GRPO,
                                 "betas": BETAS, "beta_lr": BETA_LR, "lrs": LRS, "hygiene_lr": HYGIENE_LR,
                                 "eval_n": args.eval_n, "kl_prompts": args.kl_prompts,
                                 "held_out_pairs": len(evals["pairs"])},
                    "command": "OMP_NUM_THREADS=1 python benchmarks/dpo_12.py",
                    "machine": {"python": platform.python_version(), "torch": torch.__version__, "threads": 1},
                    "start": {"held_out_answer": answer_reward(start, tokenizer, problems)}})
    if "comparison" in parts:
        results["seeds"], first_pairs = [], None
        for seed in range(args.seeds):
            row, on = comparison(seed, args, questions, evals)
            results["seeds"].append(row)
            first_pairs = on if seed == 0 else first_pairs
    else:
        first_pairs = sample_pairs(start, tokenizer, questions, seed=0)  # seeded: the comparison's first pairs
        if results.get("seeds") and len(first_pairs) != results["seeds"][0]["pairs_on_policy"]:
            raise RuntimeError("the resampled pairs of seed 0 are not the comparison's: rerun every part")
    for part, run in (("lr_sweep", lr_sweep), ("beta_sweep", beta_sweep), ("cost", cost), ("hygiene", hygiene)):
        if part in parts:
            results[part] = run(first_pairs, 0, args, evals)
    elapsed = time.perf_counter() - t0
    if set(parts) == set(PARTS):
        results["seconds"] = elapsed
    else:
        results.setdefault("rerun_seconds", {})[args.parts] = elapsed
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {args.out} in {elapsed:.0f} s")


if __name__ == "__main__":
    main()

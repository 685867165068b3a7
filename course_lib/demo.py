"""`make demo`: base -> SFT -> GRPO on the embedded tiny default, on a CPU, in minutes.

The story it measures, on the held-out test split (greedy, `r1_zero_reward_fn`):

- base:     the pretrained tiny Qwen2; it has never seen the r1_zero tags, so format reward ~0.
            (Asked in its own pretraining form, `Question: ... / Answer:`, it solves ~94% of the
            same problems: the arithmetic is there, the format is not.)
- sft:      SFT to its plateau on a *limited* set of worked solutions (128, the small end of the
            data-size ablation): the format is learned, but fitting so few examples costs part
            of the base model's arithmetic, and held-out answer reward flattens around 0.5.
- sft_more: the same budget of further SFT from that checkpoint on the same worked solutions.
            The control: if it gained as much as GRPO, the SFT run was just unfinished.
- grpo:     GRPO from the sft checkpoint on many more questions with only their final answers.
            This is the real reason RL helps here: answers are cheap, worked solutions are not,
            and a reward on the final answer alone brings back the arithmetic that SFT on a few
            examples lost.

Every stage stops by step count, not wall time, so a busy machine changes the time and not
the result. Writes `runs/demo/summary.json` (the four evaluations, stage times and the
settings) and `runs/demo/curves.png`. Settings: `configs/demo.yaml`.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

from .paths import REPO_ROOT

DEFAULT_CONFIG = REPO_ROOT / "configs" / "demo.yaml"


def main(argv: list[str] | None = None) -> int:
    import torch
    import yaml

    from .config import build_config, set_seed
    from .evaluation import evaluate, log_generations
    from .grpo_trainer import train_grpo
    from .plots import plot_demo
    from .sft_trainer import eval_examples_for, sft_examples, train_sft
    from .tiny_models import load_tiny

    parser = argparse.ArgumentParser(prog="python -m course_lib.demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=str(DEFAULT_CONFIG))
    parser.add_argument("--output-dir", default="runs/demo")
    parser.add_argument("--quick", action="store_true", help="a seconds-long smoke run (tests); figures meaningless")
    parser.add_argument("--model", help="start from this model instead of the config's (a name or folder)")
    parser.add_argument("--seed", type=int, help="override the config's seed (data order, sampling)")
    parser.add_argument("--threads", type=int, help="torch threads (default: the config's)")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)

    spec = yaml.safe_load(Path(args.config).read_text())
    if args.quick:
        for stage, quick in spec.get("quick", {}).items():
            spec[stage].update(quick)
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    progress = not args.no_progress
    threads = args.threads or spec.get("threads")
    if threads:
        torch.set_num_threads(int(threads))
    common = spec.setdefault("common", {})
    if args.model:
        common["model"] = args.model
    if args.seed is not None:
        common["seed"] = args.seed
    t_all = time.perf_counter()
    times: dict[str, float] = {}

    set_seed(common.get("seed", 0))
    model, tokenizer = load_tiny(common.get("model", "qwen2-base"))
    eval_cfg = build_config("eval", {k: v for k, v in {**common, **spec.get("eval", {})}.items()
                                     if k in ("data", "eval_split", "eval_examples", "eval_max_tokens",
                                              "eval_batch_size", "seed", "model")})
    held_out = eval_examples_for(eval_cfg)

    def measure(name, m):
        t0 = time.perf_counter()
        res = evaluate(m, tokenizer, held_out, max_tokens=eval_cfg.eval_max_tokens,
                       batch_size=eval_cfg.eval_batch_size, progress=progress)
        times[f"eval_{name}"] = round(time.perf_counter() - t0, 1)
        print(f"[demo] {name:8s} format {res['format_reward']:.3f}  answer {res['answer_reward']:.3f}  "
              f"(n={res['n']}, {times[f'eval_{name}']} s)", flush=True)
        return {k: res[k] for k in ("format_reward", "answer_reward", "n", "mean_response_tokens")}

    summary: dict = {}
    summary["base"] = measure("base", model)

    # SFT to its plateau on a limited set of worked solutions
    sft_cfg = build_config("sft", {**common, **spec["sft"], "output_dir": str(out / "sft"), "eval_examples": 0})
    t0 = time.perf_counter()
    sft = train_sft(sft_cfg, model=model, tokenizer=tokenizer, eval_data=[], progress=progress)
    times["sft"] = round(time.perf_counter() - t0, 1)
    summary["sft"] = measure("sft", sft.model)
    sft_state = copy.deepcopy(sft.model.state_dict())

    # the control: the same budget of further SFT on the same worked solutions
    more_cfg = build_config("sft", {**common, **spec["sft"], **spec["sft_more"],
                                    "output_dir": str(out / "sft_more"), "eval_examples": 0})
    t0 = time.perf_counter()
    more = train_sft(more_cfg, model=sft.model, tokenizer=tokenizer, eval_data=[], progress=progress)
    times["sft_more"] = round(time.perf_counter() - t0, 1)
    summary["sft_more"] = measure("sft_more", more.model)

    # GRPO from the same SFT checkpoint, on many questions with final answers only
    policy = more.model
    policy.load_state_dict(sft_state)
    grpo_cfg = build_config("grpo", {**common, **spec["grpo"], "output_dir": str(out / "grpo"), "eval_examples": 0})
    t0 = time.perf_counter()
    grpo = train_grpo(grpo_cfg, model=policy, tokenizer=tokenizer, eval_data=[], progress=progress)
    times["grpo"] = round(time.perf_counter() - t0, 1)
    summary["grpo"] = measure("grpo", grpo.model)
    log_generations(grpo.model, tokenizer, held_out[:100], out / "generations_grpo.jsonl",
                    max_tokens=eval_cfg.eval_max_tokens)

    n_sft = len(sft_examples(sft_cfg))
    times["total"] = round(time.perf_counter() - t_all, 1)
    summary["gains"] = {
        "grpo_minus_sft_answer": round(summary["grpo"]["answer_reward"] - summary["sft"]["answer_reward"], 4),
        "grpo_minus_sft_more_answer": round(summary["grpo"]["answer_reward"] - summary["sft_more"]["answer_reward"], 4),
        "sft_more_minus_sft_answer": round(summary["sft_more"]["answer_reward"] - summary["sft"]["answer_reward"], 4),
    }
    summary["data"] = {"sft_worked_solutions": n_sft, "grpo_questions": grpo_cfg.n_questions or "all train",
                       "held_out_problems": len(held_out)}
    summary["seconds"] = times
    summary["settings"] = {**{k: spec[k] for k in ("common", "sft", "sft_more", "grpo")},
                           "threads": torch.get_num_threads()}
    summary["quick"] = bool(args.quick)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    stages = {"sft": sft.metrics, "sft_more": more.metrics, "grpo": grpo.metrics}
    plot_demo(stages, summary, out / "curves.png")
    print(json.dumps({k: summary[k] for k in ("base", "sft", "sft_more", "grpo", "seconds")}, indent=2))

    checks = {
        "sft format reward >= 0.95": summary["sft"]["format_reward"] >= 0.95,
        "grpo answer reward >= sft + 0.15": summary["gains"]["grpo_minus_sft_answer"] >= 0.15,
        "grpo answer reward > sft_more": summary["gains"]["grpo_minus_sft_more_answer"] > 0,
    }
    for name, ok in checks.items():
        print(f"[demo] {'PASS' if ok else 'FAIL'}  {name}")
    return 0 if (all(checks.values()) or args.quick) else 1


if __name__ == "__main__":
    sys.exit(main())

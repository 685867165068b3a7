"""Thinking modes, measured (notebook 13): the empty-block keep rate in SFT, thinking_ratio in GRPO,
the prefilled-`<think>` reward bug, multi-turn prefix preservation.

1. `keep_rate`: for each keep rate in KEEP_RATES and each seed, SFT of `qwen2-base` on notebook
   13's mixture (`data/think/train.jsonl`: 2,000 conversations, half thinking, half direct) with
   the empty blocks kept at that rate (`remove_empty_think`), the settings of `qwen2-think`
   (`scripts/make_world.py think`); then greedy replies to the first EVAL_N test problems in each
   mode asked (Qwen3-style template): how often the reply is in that mode, its accuracy (by the
   number of steps of the problem too), and its generated tokens.
2. `thinking_ratio`: GRPO from `qwen2-think` on the first QUESTIONS training questions, each
   prompt's mode drawn with `thinking_flags` at each ratio of RATIOS; per step, the reward and
   response tokens of each mode's rollouts; at the end the held-out replies in both modes.
3. `prefill_bug`: GRPO from `qwen2-think` with the course template, whose thinking prompt
   prefills `<think>`, rewarded (a) by a format check that wants the completion to start with
   `<think>` and (b) by `thinking_format_reward(prefilled=True)`: the fraction of groups with no
   signal, the reward, and how far the weights moved.
4. `multiturn`: three-turn conversations of test problems rendered turn by turn (what the model
   sees when it writes turn t+1) against the transcript it wrote up to turn t: the tokens that are
   not a shared prefix, for the Qwen3-style template (which drops earlier turns' reasoning) and
   the course template (which keeps every block).

Writes `data/experiments/thinking_13.json`, which notebook 13 plots. Usage (one core):

    OMP_NUM_THREADS=1 python benchmarks/thinking_13.py
    OMP_NUM_THREADS=1 python benchmarks/thinking_13.py --parts multiturn   # reruns one part, keeps the rest
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
DEFAULT_OUT = ROOT / "data" / "experiments" / "thinking_13.json"
KEEP_RATES = (0.0, 0.2, 1.0)
RATIOS = (0.0, 0.5, 0.9)
QUESTIONS, GROUP = 256, 8
GRPO = dict(lr=1e-4, rollout_batch_size=64, group_size=GROUP, train_batch_size=64, gradient_accumulation_steps=2,
            loss_type="grpo_clip", use_std_normalization=True, sampling_temperature=1.0, sampling_min_tokens=1,
            sampling_max_tokens=160, n_grpo_steps=QUESTIONS // (64 // GROUP), eval_every=0, eval_examples=0)
BUG_STEPS = 12
PARTS = ("keep_rate", "thinking_ratio", "prefill_bug", "multiturn")


def steps_of(problem: dict) -> int:
    return sum(1 for line in problem["answer"].split("\n") if not line.startswith("####"))


def mode_table(model, tokenizer, problems, template="qwen3") -> dict:
    """evaluate_modes, plus the accuracy of each mode by the number of steps of the problem."""
    from course_lib.rollouts import make_engine
    from course_lib.training.thinking import chat_reward, evaluate_modes, prefilled_by, rl_questions

    out = evaluate_modes(make_engine("fast", model, tokenizer), tokenizer, problems, template=template)
    for mode, row in out.items():
        prompts = rl_questions(problems, thinking_ratio=1.0 if mode == "thinking" else 0.0, seed=0, template=template)
        correct = [chat_reward(text, q["ground_truth"], prefilled_by(q["prompt"]))["answer_reward"]
                   for text, q in zip(row.pop("texts"), prompts)]
        by = {}
        for k in sorted({steps_of(p) for p in problems}):
            rows = [c for c, p in zip(correct, problems) if steps_of(p) == k]
            by[str(k)] = {"accuracy": sum(rows) / len(rows), "n": len(rows)}
        row["accuracy_by_steps"] = by
    return out


def keep_rate(args, problems) -> dict:
    from course_lib.training.config import build_config
    from course_lib.training.sft_trainer import train_sft
    from course_lib.training.thinking import load_conversations, sft_records
    from course_lib.world.tiny_models import load_tiny

    sys.path.insert(0, str(ROOT / "scripts"))
    from make_world import THINK

    convs = load_conversations()
    rows = []
    for keep in KEEP_RATES:
        for seed in range(args.seeds):
            model, tok = load_tiny("qwen2-base")
            records = sft_records(convs, keep_prob=keep, seed=seed + 1)
            t0 = time.perf_counter()
            train_sft(build_config("sft", {"lr": THINK["lr"], "steps": THINK["steps"], "batch_size": 32,
                                           "warmup_steps": 10, "eval_examples": 0, "seed": seed}),
                      model=model, tokenizer=tok, train_data=records, eval_data=[], progress=False)
            row = {"keep_prob": keep, "seed": seed, "train_seconds": time.perf_counter() - t0,
                   "direct_targets_with_block": sum(not r["thinking"] for r in records),
                   "direct_targets": sum(not c["thinking"] for c in convs),
                   "modes": mode_table(model, tok, problems)}
            rows.append(row)
            print(f"keep {keep} seed {seed}: " + ", ".join(
                f"{m} followed {v['followed']:.3f} acc {v['accuracy']:.3f} tokens {v['tokens']:.1f}"
                for m, v in row["modes"].items()), flush=True)
    return {"runs": rows, "settings": THINK}


def grpo_run(questions, reward_fn, seed, steps=None, template_fn=None):
    """GRPO from qwen2-think on `questions`: the run's per-step records, each with the step's rewards
    and tokens per mode of prompt, and the trained model."""
    from course_lib.rollouts import make_engine
    from course_lib.training.grpo_trainer import train_grpo
    from course_lib.training.thinking import RecordingEngine, by_mode
    from course_lib.world.tiny_models import load_tiny

    model, tok = load_tiny("qwen2-think")
    truth = {q["prompt"]: q["ground_truth"] for q in questions}
    engine = RecordingEngine(make_engine("fast", model, tok), keep_all=False)
    records = []

    def on_step(record):
        if record.get("kind") != "train":
            return
        split = by_mode(engine.calls[-1], lambda r: reward_fn(r.text, truth[r.prompt])["reward"])
        records.append({k: record[k] for k in ("step", "train_reward", "format_reward", "zero_std_group_fraction",
                                               "response_length", "grad_norm", "clip_fraction")}
                       | {"by_mode": split,
                          "opens_think": sum(r.text.lstrip().startswith("<think>") for r in engine.calls[-1])
                          / len(engine.calls[-1])})

    settings = {**GRPO, "seed": seed, **({"n_grpo_steps": steps} if steps else {})}
    train_grpo(settings, model=model, tokenizer=tok, train_data=questions, eval_data=[], reward_fn=reward_fn,
               engine=engine, progress=False, on_step=on_step)
    return records, model, tok


def thinking_ratio(args, problems) -> dict:
    from course_lib import load_problems
    from course_lib.training.thinking import chat_reward_fn, rl_questions

    train = load_problems("arith", "train")[:QUESTIONS]
    runs = []
    for ratio in RATIOS:
        for seed in range(args.rl_seeds):
            t0 = time.perf_counter()
            questions = rl_questions(train, thinking_ratio=ratio, seed=seed)
            steps, model, tok = grpo_run(questions, chat_reward_fn, seed)
            runs.append({"thinking_ratio": ratio, "seed": seed, "seconds": time.perf_counter() - t0,
                         "thinking_prompts": sum(q["thinking"] for q in questions), "steps": steps,
                         "held_out": mode_table(model, tok, problems)})
            last = runs[-1]["held_out"]
            print(f"ratio {ratio} seed {seed}: held-out thinking {last['thinking']['accuracy']:.3f}, "
                  f"direct {last['direct']['accuracy']:.3f}", flush=True)
    return {"runs": runs, "settings": GRPO, "questions": QUESTIONS}


def prefill_bug(args, problems) -> dict:
    import torch

    from course_lib import load_problems
    from course_lib.training.thinking import prefilled_reward_fn, rl_questions, starts_with_think_reward_fn
    from course_lib.world.tiny_models import load_tiny

    train = load_problems("arith", "train")[:QUESTIONS]
    questions = rl_questions(train, thinking_ratio=1.0, seed=0, template="course")  # prompts end with "<think>\n"
    start, start_tok = load_tiny("qwen2-think")
    out = {"start_held_out_thinking": mode_table(start, start_tok, problems, template="course")["thinking"]}
    for name, fn in (("starts_with_think", starts_with_think_reward_fn), ("prefilled_aware", prefilled_reward_fn)):
        steps, model, tok = grpo_run(questions, fn, seed=0, steps=BUG_STEPS)
        moved = max((p - q).abs().max().item() for p, q in zip(model.parameters(), start.parameters()))
        held = mode_table(model, tok, problems, template="course")
        out[name] = {"steps": steps, "max_weight_change": moved, "held_out_thinking": held["thinking"]}
        print(f"{name}: zero-signal fraction {[round(s['zero_std_group_fraction'], 2) for s in steps]}, "
              f"completions opening <think> {[round(s['opens_think'], 2) for s in steps]}, "
              f"max |dtheta| {moved:.2e}", flush=True)
    return out


def multiturn(args, problems) -> dict:
    from course_lib.thinking import render_conversation
    from course_lib.training.thinking import chat_target
    from course_lib.world.tiny_models import load_tiny_tokenizer

    tok = load_tiny_tokenizer("qwen2-think")

    def ids(text):
        return tok(text, add_special_tokens=False)["input_ids"]

    out = {}
    for template in ("qwen3", "course"):
        turns = []
        for c in range(args.conversations):
            three = problems[3 * c: 3 * c + 3]
            messages = []
            for t, p in enumerate(three):
                prompt = render_conversation(messages + [{"role": "user", "content": p["question"]}], template=template,
                                             thinking=True)
                if t > 0:  # what the model wrote up to here, against what it is now shown
                    a, b = ids(written), ids(prompt)
                    common = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
                    turns.append({"turn": t + 1, "written": len(a), "shown": len(b), "not_a_prefix": len(a) - common})
                reply = chat_target(p, thinking=True)
                # the transcript as generated: the prompt, then the completion (the reply past the prefill), then im_end
                written = prompt + reply[len(prompt.split("<|im_start|>assistant\n")[-1]):] + "<|im_end|>\n"
                messages += [{"role": "user", "content": p["question"]}, {"role": "assistant", "content": reply}]
        whole = sum(t["written"] for t in turns)
        out[template] = {"turns": len(turns), "written_tokens": whole,
                         "tokens_not_a_prefix": sum(t["not_a_prefix"] for t in turns),
                         "by_turn": {str(k): sum(t["not_a_prefix"] for t in turns if t["turn"] == k) /
                                     max(1, sum(t["turn"] == k for t in turns)) for k in (2, 3)}}
        print(f"{template}: {out[template]}", flush=True)
    return out


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=3, help="SFT seeds per keep rate")
    parser.add_argument("--rl-seeds", type=int, default=2, help="GRPO seeds per thinking_ratio")
    parser.add_argument("--eval-n", type=int, default=300)
    parser.add_argument("--conversations", type=int, default=50)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--parts", default=",".join(PARTS),
                        help="a subset reruns those parts and keeps the others of the existing --out file")
    args = parser.parse_args()
    parts = args.parts.split(",")
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"--parts: unknown {', '.join(unknown)} (known: {', '.join(PARTS)})")
    torch.set_num_threads(1)
    from course_lib import load_problems

    problems = load_problems("arith", "test")[: args.eval_n]
    results = json.loads(args.out.read_text()) if set(parts) != set(PARTS) and args.out.exists() else {}
    results.update({"command": "OMP_NUM_THREADS=1 python benchmarks/thinking_13.py",
                    "machine": {"python": platform.python_version(), "torch": torch.__version__, "threads": 1},
                    "eval_n": args.eval_n})
    t0 = time.perf_counter()
    for part, run in (("keep_rate", keep_rate), ("thinking_ratio", thinking_ratio), ("prefill_bug", prefill_bug),
                      ("multiturn", multiturn)):
        if part in parts:
            started = time.perf_counter()
            results[part] = run(args, problems)
            results.setdefault("seconds", {})[part] = round(time.perf_counter() - started, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out} in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()

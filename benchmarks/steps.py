"""One measurement of `make bench`, run in the environment that has what it needs; prints JSON.

    python benchmarks/steps.py grpo-course --model DIR --steps 8 [--engine fast|hf] [--update packed|plain]
    python benchmarks/steps.py grpo-trl    --model DIR --steps 8          (in .venv-trl)
    python benchmarks/steps.py sft-course  --model DIR --steps 12
    python benchmarks/steps.py sft-trl     --model DIR --steps 12         (in .venv-trl)
    python benchmarks/steps.py rollouts    --model DIR --engine fast|hf|vllm --batch 32 64 128
    python benchmarks/steps.py make-sft    --out DIR                      (the demo's SFT stage)

Everything runs on the CPU (also on a machine with a GPU). The work is the same on both sides of
each comparison (`benchmarks/bench.py` says how). Every
figure is wall-clock seconds per optimizer step, measured around the step by the trainer itself
(course) or by a callback at every optimizer step's end (TRL); nothing is averaged here.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
DEMO = REPO / "configs" / "demo.yaml"


def demo_spec() -> dict:
    import yaml

    return yaml.safe_load(DEMO.read_text())


def grpo_settings(model: str, steps: int) -> dict:
    """The demo's GRPO stage from `model`: 16 questions x 8 samples, 2 micro-batches of 64."""
    spec = demo_spec()
    return {**spec["common"], **spec["grpo"], "model": model, "n_grpo_steps": steps, "eval_examples": 0,
            "output_dir": None, "device": "cpu"}


def grpo_questions_in_order(cfg: dict, steps: int) -> list[dict]:
    """The questions the course trainer draws at steps 0 .. steps-1, in its order."""
    from course_lib.training.common import data_indices
    from course_lib.training.config import build_config
    from course_lib.training.grpo_trainer import grpo_questions

    c = build_config("grpo", cfg)
    questions = grpo_questions(c)
    per_step = c.rollout_batch_size // c.group_size
    return [questions[i] for i in data_indices(len(questions), c.seed, 0, per_step * steps)]


def grpo_course(args) -> dict:
    from course_lib.grpo import grpo_train_step
    from course_lib.training.grpo_trainer import train_grpo
    from course_lib.training.grpo_update import packed_grpo_train_step

    cfg = {**grpo_settings(args.model, args.steps), "engine": args.engine}
    records: list[dict] = []
    # packed: the trainer's default update; plain: the graded grpo_train_step, every row scored (as before)
    update = {"packed": packed_grpo_train_step, "plain": grpo_train_step}[args.update]
    train_grpo(cfg, eval_data=[], progress=False, on_step=records.append, update_fn=update)
    return {"step_s": [r["step_time"] for r in records], "rollout_s": [r["rollout_time"] for r in records],
            "completion_tokens": [r["response_length"] for r in records],
            "zero_std_group_fraction": [r["zero_std_group_fraction"] for r in records]}


class _Timer:
    """A TrainerCallback recording the wall time between optimizer steps and the logs."""

    def __new__(cls):
        from transformers import TrainerCallback

        class Timer(TrainerCallback):
            def __init__(self):
                self.marks, self.logs = [], []

            def on_train_begin(self, args, state, control, **kw):
                self.marks.append(time.perf_counter())

            def on_step_end(self, args, state, control, **kw):
                self.marks.append(time.perf_counter())

            def on_log(self, args, state, control, logs=None, **kw):
                self.logs.append(dict(logs or {}))

        return Timer()


def grpo_trl(args) -> dict:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from course_lib.rewards import r1_zero_reward_fn

    cfg = grpo_settings(args.model, args.steps)
    tok = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    # HF generate takes no stop strings: "</answer>" (one token here) becomes an extra end-of-sequence id
    answer = tok.convert_tokens_to_ids("</answer>")
    model.generation_config.eos_token_id = [tok.eos_token_id, answer]
    model.generation_config.pad_token_id = tok.pad_token_id
    questions = grpo_questions_in_order(cfg, args.steps)
    data = Dataset.from_list([{"prompt": q["prompt"], "ground_truth": q["ground_truth"]} for q in questions])

    def reward(prompts, completions, ground_truth, **kw):
        return [r1_zero_reward_fn(c, g)["reward"] for c, g in zip(completions, ground_truth)]

    micro = cfg["train_batch_size"] // cfg["gradient_accumulation_steps"]
    with tempfile.TemporaryDirectory() as out:
        targs = GRPOConfig(
            output_dir=out, per_device_train_batch_size=micro, gradient_accumulation_steps=cfg["gradient_accumulation_steps"],
            num_generations=cfg["group_size"], max_completion_length=cfg["sampling_max_tokens"],
            temperature=cfg["sampling_temperature"], top_p=1.0, learning_rate=float(cfg["lr"]),
            lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0, adam_beta1=0.9, adam_beta2=0.95,
            max_grad_norm=1.0, beta=0.0, loss_type="grpo", scale_rewards="group", num_iterations=1,
            generation_kwargs={"min_new_tokens": cfg["sampling_min_tokens"]},
            max_steps=args.steps, logging_steps=1, report_to=[], save_strategy="no", use_cpu=True, bf16=False,
            shuffle_dataset=False, seed=cfg["seed"], disable_tqdm=True, log_completions=False,
            dataloader_num_workers=0)
        timer = _Timer()
        trainer = GRPOTrainer(model=model, reward_funcs=[reward], args=targs, train_dataset=data,
                              processing_class=tok, callbacks=[timer])
        trainer.train()
    marks = timer.marks
    lengths = [log["completions/mean_length"] for log in timer.logs if "completions/mean_length" in log]
    return {"step_s": [b - a for a, b in zip(marks, marks[1:])], "completion_tokens": lengths}


def sft_settings(model: str, steps: int) -> dict:
    spec = demo_spec()
    return {**spec["common"], **spec["sft"], "model": model, "steps": steps, "eval_examples": 0, "output_dir": None,
            "device": "cpu"}


def sft_course(args) -> dict:
    from course_lib.training.sft_trainer import train_sft

    records: list[dict] = []
    train_sft(sft_settings(args.model, args.steps), eval_data=[], progress=False, on_step=records.append)
    return {"step_s": [r["step_time"] for r in records], "tokens": [r["response_tokens"] for r in records]}


def sft_trl(args) -> dict:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    from course_lib.training.config import build_config
    from course_lib.training.sft_trainer import sft_examples

    cfg = sft_settings(args.model, args.steps)
    examples = sft_examples(build_config("sft", cfg))
    tok = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    data = Dataset.from_list([{"prompt": e["prompt"], "completion": e["output"]} for e in examples])
    with tempfile.TemporaryDirectory() as out:
        targs = SFTConfig(
            output_dir=out, per_device_train_batch_size=cfg["batch_size"], gradient_accumulation_steps=1,
            learning_rate=float(cfg["lr"]), lr_scheduler_type="cosine", warmup_steps=cfg["warmup_steps"],
            weight_decay=0.0, adam_beta1=0.9, adam_beta2=0.95, max_grad_norm=1.0, max_length=None,
            packing=False, completion_only_loss=True, max_steps=args.steps, logging_steps=1, report_to=[],
            save_strategy="no", use_cpu=True, bf16=False, seed=cfg["seed"], disable_tqdm=True,
            dataloader_num_workers=0)
        timer = _Timer()
        trainer = SFTTrainer(model=model, args=targs, train_dataset=data, processing_class=tok, callbacks=[timer])
        trainer.train()
    marks = timer.marks
    return {"step_s": [b - a for a, b in zip(marks, marks[1:])]}


def make_sft(args) -> dict:
    """The demo's SFT stage from the base model, saved to --out: the checkpoint GRPO starts from."""
    from course_lib.training.sft_trainer import train_sft

    spec = demo_spec()
    t0 = time.perf_counter()
    train_sft({**spec["common"], **spec["sft"], "eval_examples": 0, "output_dir": args.out, "device": "cpu"}, eval_data=[],
              progress=False)
    return {"model": str(Path(args.out) / "model"), "seconds": time.perf_counter() - t0}


def rollouts(args) -> dict:
    """Sampled rollouts in GRPO's layout (B / 8 questions x 8 samples, T = 1, at most 100 tokens,
    stop at "</answer>"): completions and completion tokens per second, per repeat."""
    import torch

    from course_lib.rollouts import SamplingParams

    cfg = grpo_settings(args.model, 1)
    questions = grpo_questions_in_order(cfg, 64)
    if args.engine == "vllm":
        from course_lib.rollouts.vllm_engine import VLLMEngine

        engine = VLLMEngine(args.model, dtype="float32")
    else:
        from course_lib.rollouts import make_engine
        from course_lib.training.config import build_config
        from course_lib.training.models import load_model_and_tokenizer

        model, tok = load_model_and_tokenizer(build_config("eval", {"model": args.model, "device": "cpu"}))
        model.eval()
        engine = make_engine(args.engine, model, tok, batch_size=max(args.batch))
    out = {}
    for batch in args.batch:
        times, tokens = [], []
        for rep in range(args.repeats + 1):  # the first is a warm-up
            qs = questions[rep * batch // 8 : (rep + 1) * batch // 8]
            params = SamplingParams(temperature=1.0, max_tokens=100, min_tokens=4, stop=("</answer>",), n=8, seed=rep)
            t0 = time.perf_counter()
            rs = engine.generate([q["prompt"] for q in qs], params)
            dt = time.perf_counter() - t0
            if rep:
                times.append(dt)
                tokens.append(sum(len(r.token_ids) for r in rs))
        out[str(batch)] = {"seconds": times, "completions_per_s": [batch / t for t in times],
                           "tokens_per_s": [n / t for n, t in zip(tokens, times)]}
    out["torch_threads"] = torch.get_num_threads()
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["grpo-course", "grpo-trl", "sft-course", "sft-trl", "rollouts", "make-sft"])
    p.add_argument("--model", default="qwen2-base")
    p.add_argument("--out", default="runs/bench/sft")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--engine", default="fast")
    p.add_argument("--update", choices=["packed", "plain"], default="packed",
                   help="course GRPO: the trainer's packed update (default) or the plain grpo_train_step, which "
                        "scores rows of advantage 0 too (as before)")
    p.add_argument("--batch", type=int, nargs="+", default=[32, 64, 128])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
    import torch

    if args.engine != "vllm":
        torch.set_num_threads(args.threads)
    fn = {"grpo-course": grpo_course, "grpo-trl": grpo_trl, "sft-course": sft_course, "sft-trl": sft_trl,
          "rollouts": rollouts, "make-sft": make_sft}[args.what]
    result = fn(args)
    result["threads"] = torch.get_num_threads()
    print("RESULT " + json.dumps(result))


def median_min_max(values: list[float], skip: int = 1) -> dict:
    """Median, min and max of `values` after the first `skip` (warm-up)."""
    vals = values[skip:]
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)}


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()

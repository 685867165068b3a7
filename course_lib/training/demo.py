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

    python -m course_lib.training.demo [--seed N] [--threads N] [--quick] [--output-dir DIR]
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

from ..paths import REPO_ROOT

DEFAULT_CONFIG = REPO_ROOT / "configs" / "demo.yaml"
EVAL_KEYS = ("data", "eval_split", "eval_examples", "eval_max_tokens", "eval_batch_size", "seed", "model")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m course_lib.training.demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=str(DEFAULT_CONFIG))
    parser.add_argument("--output-dir", default="runs/demo")
    parser.add_argument("--quick", action="store_true", help="a seconds-long smoke run (tests); figures meaningless")
    parser.add_argument("--model", help="start from this model instead of the config's (a name or folder)")
    parser.add_argument("--seed", type=int, help="override the config's seed (data order, sampling)")
    parser.add_argument("--threads", type=int, help="torch threads (default: the config's)")
    parser.add_argument("--no-progress", action="store_true")
    return parser.parse_args(argv)


def load_spec(args: argparse.Namespace) -> dict:
    """The demo's settings: the YAML file, its `quick` overrides with --quick, then the flags."""
    import yaml

    spec = yaml.safe_load(Path(args.config).read_text())
    if args.quick:
        for stage, quick in spec.get("quick", {}).items():
            spec[stage].update(quick)
    common = spec.setdefault("common", {})
    if args.model:
        common["model"] = args.model
    if args.seed is not None:
        common["seed"] = args.seed
    if args.threads:
        spec["threads"] = args.threads
    return spec


class Stages:
    """The four models of the story, each trained from the one before and measured the same way."""

    def __init__(self, spec: dict, out: Path, progress: bool):
        from ..world.tiny_models import load_tiny
        from .common import eval_examples_for
        from .config import build_config
        from .models import set_seed

        self.spec, self.out, self.progress = spec, out, progress
        self.common = spec["common"]
        self.times: dict[str, float] = {}
        self.summary: dict = {}
        set_seed(self.common.get("seed", 0))
        self.model, self.tokenizer = load_tiny(self.common.get("model", "qwen2-base"))
        self.eval_cfg = build_config("eval", {k: v for k, v in {**self.common, **spec.get("eval", {})}.items()
                                              if k in EVAL_KEYS})
        self.held_out = eval_examples_for(self.eval_cfg)

    def config(self, kind: str, *stages: str):
        from .config import build_config

        values = {**self.common}
        for stage in stages:
            values.update(self.spec[stage])
        return build_config(kind, {**values, "output_dir": str(self.out / stages[-1]), "eval_examples": 0})

    def timed(self, name: str, fn):
        t0 = time.perf_counter()
        result = fn()
        self.times[name] = round(time.perf_counter() - t0, 1)
        return result

    def measure(self, name: str, model) -> None:
        from .evaluation import evaluate

        res = self.timed(f"eval_{name}", lambda: evaluate(
            model, self.tokenizer, self.held_out, max_tokens=self.eval_cfg.eval_max_tokens,
            batch_size=self.eval_cfg.eval_batch_size, progress=self.progress))
        print(f"[demo] {name:8s} format {res['format_reward']:.3f}  answer {res['answer_reward']:.3f}  "
              f"(n={res['n']}, {self.times[f'eval_{name}']} s)", flush=True)
        self.summary[name] = {k: res[k] for k in ("format_reward", "answer_reward", "n", "mean_response_tokens")}

    def run(self) -> dict[str, list[dict]]:
        """base -> sft -> sft_more (the control) and, from the same sft weights, grpo."""
        from .grpo_trainer import train_grpo
        from .sft_trainer import train_sft

        tok, progress = self.tokenizer, self.progress
        self.measure("base", self.model)
        # SFT to its plateau on a limited set of worked solutions
        sft = self.timed("sft", lambda: train_sft(self.config("sft", "sft"), model=self.model, tokenizer=tok,
                                                  eval_data=[], progress=progress))
        self.measure("sft", sft.model)
        sft_state = copy.deepcopy(sft.model.state_dict())
        # the control: the same budget of further SFT on the same worked solutions
        more = self.timed("sft_more", lambda: train_sft(self.config("sft", "sft", "sft_more"), model=sft.model,
                                                        tokenizer=tok, eval_data=[], progress=progress))
        self.measure("sft_more", more.model)
        # GRPO from the same SFT checkpoint, on many questions with final answers only
        policy = more.model
        policy.load_state_dict(sft_state)
        self.grpo_cfg = self.config("grpo", "grpo")
        grpo = self.timed("grpo", lambda: train_grpo(self.grpo_cfg, model=policy, tokenizer=tok, eval_data=[],
                                                     progress=progress))
        self.measure("grpo", grpo.model)
        return {"sft": sft.metrics, "sft_more": more.metrics, "grpo": grpo.metrics, "grpo_model": grpo.model}


def write_summary(stages: Stages, metrics: dict, quick: bool, started: float) -> dict:
    """summary.json (figures, gains, data sizes, stage times, settings), curves.png and a generations report."""
    import torch

    from .evaluation import log_generations
    from .plots import plot_demo
    from .sft_trainer import sft_examples

    out, summary, spec = stages.out, stages.summary, stages.spec
    log_generations(metrics.pop("grpo_model"), stages.tokenizer, stages.held_out[:100], out / "generations_grpo.jsonl",
                    max_tokens=stages.eval_cfg.eval_max_tokens)
    n_sft = len(sft_examples(stages.config("sft", "sft")))
    stages.times["total"] = round(time.perf_counter() - started, 1)
    answer = {k: summary[k]["answer_reward"] for k in ("sft", "sft_more", "grpo")}
    summary["gains"] = {
        "grpo_minus_sft_answer": round(answer["grpo"] - answer["sft"], 4),
        "grpo_minus_sft_more_answer": round(answer["grpo"] - answer["sft_more"], 4),
        "sft_more_minus_sft_answer": round(answer["sft_more"] - answer["sft"], 4),
    }
    summary["data"] = {"sft_worked_solutions": n_sft, "grpo_questions": stages.grpo_cfg.n_questions or "all train",
                       "held_out_problems": len(stages.held_out)}
    summary["seconds"] = stages.times
    summary["settings"] = {**{k: spec[k] for k in ("common", "sft", "sft_more", "grpo")},
                           "threads": torch.get_num_threads()}
    summary["quick"] = quick
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    plot_demo(metrics, summary, out / "curves.png")
    print(json.dumps({k: summary[k] for k in ("base", "sft", "sft_more", "grpo", "seconds")}, indent=2))
    return summary


def check_targets(summary: dict) -> bool:
    """The demo's three targets, each printed PASS or FAIL."""
    checks = {
        "sft format reward >= 0.95": summary["sft"]["format_reward"] >= 0.95,
        "grpo answer reward >= sft + 0.15": summary["gains"]["grpo_minus_sft_answer"] >= 0.15,
        "grpo answer reward > sft_more": summary["gains"]["grpo_minus_sft_more_answer"] > 0,
    }
    for name, ok in checks.items():
        print(f"[demo] {'PASS' if ok else 'FAIL'}  {name}")
    return all(checks.values())


def main(argv: list[str] | None = None) -> int:
    import torch

    args = parse_args(argv)
    spec = load_spec(args)
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    if spec.get("threads"):
        torch.set_num_threads(int(spec["threads"]))
    started = time.perf_counter()
    stages = Stages(spec, out, progress=not args.no_progress)
    summary = write_summary(stages, stages.run(), bool(args.quick), started)
    return 0 if (check_targets(summary) or args.quick) else 1


if __name__ == "__main__":
    sys.exit(main())

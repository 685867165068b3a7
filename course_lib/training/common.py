"""What both trainers share: the optimizer and schedule, the data order, evaluation, the run's
bookkeeping around each step (metrics, progress bar, checkpoints) and data parallelism.

Neither trainer imports the other; both import this module.
"""

from __future__ import annotations

import copy
import math
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from ..gsm8k import as_r1_zero, load_problems
from .checkpoint import MetricsLog, NonFiniteLossError, latest_checkpoint, save_checkpoint, write_run_config
from .config import build_config


@dataclass
class TrainResult:
    model: torch.nn.Module
    tokenizer: object
    metrics: list[dict]
    eval: dict | None = None
    evals: list[dict] = field(default_factory=list)
    output_dir: str | None = None
    steps: int = 0
    seconds: float = 0.0


def resolve_config(kind: str, config, overrides: dict):
    """A config of `kind` from a dataclass, a dict or None (the defaults), with `overrides` applied."""
    if config is None:
        return build_config(kind, overrides)
    if isinstance(config, dict):
        return build_config(kind, {**config, **overrides})
    if overrides:
        import dataclasses

        return dataclasses.replace(config, **overrides)
    return config


def frozen_copy(model: torch.nn.Module) -> torch.nn.Module:
    """A reference policy: a copy of the starting policy in eval mode, without gradients (GRPO's KL penalty,
    DPO's reference)."""
    ref = copy.deepcopy(model).eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref


def make_optimizer(model: torch.nn.Module, lr: float, weight_decay: float, betas,
                   fused: bool = False) -> torch.optim.Optimizer:
    """AdamW over `model`'s parameters. `fused`: one kernel updates every parameter (the Hugging Face Trainer's
    default `adamw_torch_fused`); off, torch picks its default (a foreach loop on GPU, one parameter at a time on
    CPU). The two agree to rounding, not bit for bit."""
    return torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay, betas=tuple(betas),
                             fused=fused or None)


def make_scheduler(optimizer, warmup_steps: int, total_steps: int, min_lr_ratio: float = 0.1):
    """Linear warmup over `warmup_steps`, then cosine decay to `lr * min_lr_ratio` at `total_steps`."""

    def factor(step: int) -> float:
        if warmup_steps > 0 and step < warmup_steps:
            return (step + 1) / warmup_steps
        span = max(total_steps - warmup_steps, 1)
        progress = min(max(step - warmup_steps, 0) / span, 1.0)
        return min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def epoch_order(n: int, seed: int, epoch: int) -> list[int]:
    order = list(range(n))
    random.Random(seed * 1_000_003 + epoch).shuffle(order)
    return order


def data_indices(n: int, seed: int, start: int, count: int) -> list[int]:
    """Positions start .. start+count of an endless stream of seeded per-epoch permutations.

    A step number fixes the data position exactly: that is what makes `--resume` exact."""
    out, cache = [], {}
    for pos in range(start, start + count):
        epoch, offset = divmod(pos, n)
        if epoch not in cache:
            cache[epoch] = epoch_order(n, seed, epoch)
        out.append(cache[epoch][offset])
    return out


def check_finite(value: float, what: str, step: int, output_dir) -> None:
    """Stop the run on a NaN or infinite loss or gradient norm, naming the checkpoint that is kept."""
    if not math.isfinite(value):
        ckpt = latest_checkpoint(output_dir) if output_dir else None
        kept = f"the last good checkpoint is kept at {ckpt}" if ckpt else "no checkpoint was written yet"
        raise NonFiniteLossError(f"non-finite {what} ({value}) at step {step}: stopping the run; {kept}")


def load_records(cfg, split: str, records: list[dict] | None, need: tuple[str, ...], first: int | None) -> list[dict]:
    """r1_zero records of `records` (default: the config's data split), the first `first` of them."""
    if records is None:
        records = load_problems(cfg.data, split)
    records = as_r1_zero(records, need)
    return records[:first] if first is not None else records


def eval_examples_for(cfg) -> list[dict]:
    """The held-out records of a config: the first `eval_examples` of its eval split."""
    return load_records(cfg, split=cfg.eval_split, records=None, need=("prompt", "ground_truth"),
                        first=cfg.eval_examples)


def run_eval(model, tokenizer, cfg, examples, engine=None) -> dict:
    """Greedy held-out accuracy with the config's token budget (the model's own engine unless given)."""
    from .evaluation import evaluate

    return evaluate(engine or model, tokenizer, examples, max_tokens=cfg.eval_max_tokens,
                    batch_size=cfg.eval_batch_size)


def save_final(model, tokenizer, output_dir) -> Path:
    path = Path(output_dir) / "model"
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    return path


class RunLog:
    """The bookkeeping of a run, the same for both trainers; the loops decide when each is due.

    `log_eval` records an evaluation, `log_step` a step's metrics (metrics.jsonl, `on_step`, the
    progress bar), `save_checkpoint` writes a checkpoint that resumes exactly, `finish` saves the
    model and returns the run's result. A resumed run keeps the metrics written up to its
    checkpoint. With `output_dir` None (or on a process other than rank 0) nothing is written.
    """

    def __init__(self, *, kind: str, cfg, total_steps: int, start_step: int, resume: bool, output_dir,
                 progress: bool, on_step: Callable[[dict], None] | None):
        from tqdm.auto import tqdm

        self.kind, self.cfg, self.total_steps, self.output_dir = kind, cfg, total_steps, output_dir
        self.on_step = on_step
        self.log = MetricsLog(output_dir, resume_step=start_step if resume else None)
        if output_dir:
            write_run_config(output_dir, kind, cfg)
        self.evals = [r for r in self.log.records if r.get("kind") == "eval"]
        self.bar = tqdm(total=total_steps, initial=start_step, desc=kind, disable=not progress, dynamic_ncols=True)
        self.started = time.perf_counter()

    def log_eval(self, step: int, result: dict) -> None:
        """Record the evaluation `result` made after optimizer step `step` (1-based)."""
        ev = {"kind": "eval", "step": step, **result}
        self.evals.append(ev)
        self.log.log(ev)

    def log_step(self, record: dict, **postfix) -> None:
        """Record a step's metrics, pass them to `on_step`, and advance the progress bar (showing `postfix`)."""
        self.log.log(record)
        if self.on_step is not None:
            self.on_step(record)
        self.bar.set_postfix(**postfix)
        self.bar.update(1)

    def save_checkpoint(self, *, step: int, model, tokenizer, optimizer, scheduler, data_position: int,
                        extra_state=None):
        """Checkpoint `step` in `output_dir` (model, optimizer, scheduler, RNG states and the data position,
        and `extra_state.state_dict()` when given: PPO's critic and its optimizer); returns its folder."""
        extra = {"data_position": data_position, "kind": self.kind}
        if extra_state is not None:
            extra["extra_state"] = extra_state.state_dict()
        return save_checkpoint(self.output_dir, step=step, model=model, tokenizer=tokenizer, optimizer=optimizer,
                               scheduler=scheduler, extra=extra, keep=self.cfg.keep_checkpoints)

    def finish(self, model, tokenizer) -> TrainResult:
        """Close the bar, put the model in eval mode, save `model/`, and return the run's result."""
        self.bar.close()
        if self.cfg.gradient_checkpointing:
            model.gradient_checkpointing_disable()
        model.eval()
        if self.output_dir:
            save_final(model, tokenizer, self.output_dir)
        return TrainResult(model=model, tokenizer=tokenizer, metrics=self.log.records,
                           eval=self.evals[-1] if self.evals else None, evals=self.evals,
                           output_dir=self.cfg.output_dir, steps=self.total_steps,
                           seconds=time.perf_counter() - self.started)


# ---------------------------------------------------------------------------------------------
# several processes (torchrun): SFT runs data-parallel


def distributed_context(cfg) -> tuple[int, int]:
    """(rank, world_size). Under `torchrun` (WORLD_SIZE > 1) joins the process group and pins
    this process to GPU LOCAL_RANK; otherwise (0, 1) and nothing happens."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return 0, 1
    import torch.distributed as dist

    local = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        torch.cuda.set_device(local)
        if cfg.device in ("auto", "cuda"):
            cfg.device = f"cuda:{local}"
    if not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    return dist.get_rank(), world


def all_reduce_mean(value: float, world: int) -> float:
    """The mean of `value` over the `world` processes (itself when there is one)."""
    if world == 1:
        return value
    import torch.distributed as dist

    t = torch.tensor([value], dtype=torch.float64)
    if dist.get_backend() == "nccl":
        t = t.cuda()
    dist.all_reduce(t)
    return float(t.item()) / world

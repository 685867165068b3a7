"""Supervised fine-tuning on worked solutions in the r1_zero format, from the reference functions.

    for each optimizer step:
        for each of `gradient_accumulation_steps` micro-batches:
            batch = tokenize_fn(prompts, outputs, tokenizer)            # mask = response tokens
            logp  = log_probs_fn(model, input_ids, labels)["log_probs"]
            loss  = train_step_fn(logp, response_mask, gradient_accumulation_steps)  # backward inside
        clip the gradient norm to 1.0; AdamW step; cosine schedule with linear warmup

The three functions are injectable (notebook 05 passes the student's own) and default to the
course's reference implementations: there is no second copy of the loss here.

Several GPUs: launched with `torchrun --nproc_per_node N -m course_lib.train sft ...`, each
process holds the policy (DistributedDataParallel) and takes every N-th example of each batch;
rank 0 logs, evaluates and saves.

Simplifications, named: the batch is padded to its longest sequence (no packing); the data
order is a seeded permutation per epoch, so a step number fixes the data position exactly
(that is what makes `--resume` exact); on CPU the model runs in float32, on GPU in bfloat16.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from .checkpoint import (MetricsLog, NonFiniteLossError, latest_checkpoint, restore_checkpoint, save_checkpoint,
                         write_run_config)
from .config import SFTConfig, build_config, load_model_and_tokenizer, set_seed
from .gsm8k import gsm8k_to_r1_zero, load_problems
from .logprobs import get_response_log_probs
from .rewards import r1_zero_reward_fn
from .sft import sft_microbatch_train_step
from .tokenization import tokenize_prompt_and_output


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


# ---------------------------------------------------------------------------------------------
# pieces shared with the GRPO trainer


def make_optimizer(model: torch.nn.Module, lr: float, weight_decay: float, betas) -> torch.optim.Optimizer:
    return torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay, betas=tuple(betas))


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
    import random

    order = list(range(n))
    random.Random(seed * 1_000_003 + epoch).shuffle(order)
    return order


def data_indices(n: int, seed: int, start: int, count: int) -> list[int]:
    """Positions start .. start+count of an endless stream of seeded per-epoch permutations."""
    out, cache = [], {}
    for pos in range(start, start + count):
        epoch, offset = divmod(pos, n)
        if epoch not in cache:
            cache[epoch] = epoch_order(n, seed, epoch)
        out.append(cache[epoch][offset])
    return out


def check_finite(value: float, what: str, step: int, output_dir) -> None:
    if not math.isfinite(value):
        ckpt = latest_checkpoint(output_dir) if output_dir else None
        kept = f"the last good checkpoint is kept at {ckpt}" if ckpt else "no checkpoint was written yet"
        raise NonFiniteLossError(f"non-finite {what} ({value}) at step {step}: stopping the run; {kept}")


def maybe_progress(total: int, initial: int, desc: str, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc=desc, disable=not enabled, dynamic_ncols=True)


def eval_examples_for(cfg) -> list[dict]:
    problems = load_problems(cfg.data, cfg.eval_split)
    if cfg.eval_examples is not None:
        problems = problems[: cfg.eval_examples]
    return [gsm8k_to_r1_zero(p) for p in problems]


def run_eval(model, tokenizer, cfg, examples, engine=None) -> dict:
    from .evaluation import evaluate

    return evaluate(engine or model, tokenizer, examples, max_tokens=cfg.eval_max_tokens,
                    batch_size=cfg.eval_batch_size)


def save_final(model, tokenizer, output_dir) -> Path:
    path = Path(output_dir) / "model"
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    return path


def distributed_context(cfg) -> tuple[int, int]:
    """(rank, world_size). Under `torchrun` (WORLD_SIZE > 1) joins the process group and pins
    this process to GPU LOCAL_RANK; otherwise (0, 1) and nothing happens."""
    import os

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


def _all_reduce_mean(value: float, world: int) -> float:
    if world == 1:
        return value
    import torch.distributed as dist

    t = torch.tensor([value], dtype=torch.float64)
    if dist.get_backend() == "nccl":
        t = t.cuda()
    dist.all_reduce(t)
    return float(t.item()) / world


def resolve_config(kind: str, config, overrides: dict):
    if config is None:
        return build_config(kind, overrides)
    if isinstance(config, dict):
        return build_config(kind, {**config, **overrides})
    if overrides:
        import dataclasses

        return dataclasses.replace(config, **overrides)
    return config


# ---------------------------------------------------------------------------------------------


def sft_examples(cfg: SFTConfig, problems: list[dict] | None = None) -> list[dict]:
    """The r1_zero training examples: the first `n_examples`, optionally only those graded correct."""
    if problems is None:
        problems = load_problems(cfg.data, cfg.train_split)
    examples = [p if "prompt" in p and "output" in p else gsm8k_to_r1_zero(p) for p in problems]
    if cfg.n_examples is not None:
        examples = examples[: cfg.n_examples]
    if cfg.filter_correct:
        examples = [ex for ex in examples if r1_zero_reward_fn(ex["output"], ex["ground_truth"])["reward"] == 1.0]
    if not examples:
        raise ValueError("no SFT examples left (check n_examples and filter_correct)")
    return examples


def sft_train_step(
    model: torch.nn.Module,
    tokenizer,
    optimizer: torch.optim.Optimizer,
    batch_examples: list[dict],
    gradient_accumulation_steps: int,
    max_grad_norm: float = 1.0,
    scheduler=None,
    tokenize_fn=tokenize_prompt_and_output,
    log_probs_fn=get_response_log_probs,
    train_step_fn=sft_microbatch_train_step,
) -> dict:
    """One optimizer step of SFT on `batch_examples`, as `gradient_accumulation_steps` micro-batches.

        for each of the k micro-batches (consecutive slices of len(batch_examples) / k examples):
            batch = tokenize_fn(prompts, outputs, tokenizer)
            log_probs = log_probs_fn(model, input_ids, labels)["log_probs"]
            loss = train_step_fn(log_probs, response_mask, k)      # backward inside: .grad adds up
        clip the gradient norm to max_grad_norm; optimizer.step(); scheduler.step(); zero the grads

    Args:
        batch_examples: r1_zero records with "prompt" and "output"; their number divisible by k.
        scheduler: stepped once after the optimizer when given.
        tokenize_fn, log_probs_fn, train_step_fn: your functions of notebooks 01, 03 and 04.

    Returns:
        {"loss": the sum of the k returned (scaled) losses, i.e. the batch loss (float),
         "grad_norm": the gradient norm before clipping (float),
         "response_tokens": response tokens in the batch (int),
         "nll_sum": the summed negative log-likelihood of those tokens (float)}
    """
    if len(batch_examples) % gradient_accumulation_steps != 0:
        raise ValueError(f"{len(batch_examples)} examples do not split into {gradient_accumulation_steps} micro-batches")
    device = next(model.parameters()).device
    micro = len(batch_examples) // gradient_accumulation_steps
    total_loss, tokens, nll_sum = 0.0, 0, 0.0
    for j in range(gradient_accumulation_steps):
        chunk = batch_examples[j * micro : (j + 1) * micro]
        batch = tokenize_fn([e["prompt"] for e in chunk], [e["output"] for e in chunk], tokenizer)
        mask = batch["response_mask"].to(device)
        log_probs = log_probs_fn(model, batch["input_ids"].to(device), batch["labels"].to(device))["log_probs"]
        loss, _ = train_step_fn(log_probs, mask, gradient_accumulation_steps)
        total_loss += float(loss)
        tokens += int(mask.sum())
        nll_sum += float(-(log_probs.detach() * mask).sum())
    grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm))
    optimizer.step()
    if scheduler is not None:
        scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return {"loss": total_loss, "grad_norm": grad_norm, "response_tokens": tokens, "nll_sum": nll_sum}


def train_sft(
    config: SFTConfig | dict | None = None,
    model: torch.nn.Module | None = None,
    tokenizer=None,
    train_data: list[dict] | None = None,
    eval_data: list[dict] | None = None,
    *,
    tokenize_fn: Callable = tokenize_prompt_and_output,
    log_probs_fn: Callable = get_response_log_probs,
    train_step_fn: Callable = sft_microbatch_train_step,
    resume: bool = False,
    progress: bool = True,
    on_step: Callable[[dict], None] | None = None,
    **overrides,
) -> TrainResult:
    """Fine-tune `model` (or `config.model`) on worked solutions; returns metrics and the model.

    Args:
        config: an `SFTConfig` (or a dict of its fields); keyword overrides replace fields.
        model, tokenizer: a policy to train in place; loaded from `config.model` when None.
        train_data: GSM8K-style or r1_zero records; default: the config's data split.
            `n_examples` and `filter_correct` apply to them.
        eval_data: held-out records for evaluation (default: the first `eval_examples` of the
            config's eval split); pass [] to skip evaluation.
        tokenize_fn, log_probs_fn, train_step_fn: the graded functions, injectable.
        resume: continue from the latest checkpoint in `output_dir`.
        on_step: called with each step's metrics (e.g. a notebook's live plot).
    """
    cfg = resolve_config("sft", config, overrides)
    if cfg.batch_size % cfg.gradient_accumulation_steps != 0:
        raise ValueError(f"batch_size ({cfg.batch_size}) must be divisible by gradient_accumulation_steps "
                         f"({cfg.gradient_accumulation_steps})")
    rank, world = distributed_context(cfg)
    if cfg.batch_size % (cfg.gradient_accumulation_steps * world) != 0:
        raise ValueError(f"batch_size ({cfg.batch_size}) must be divisible by gradient_accumulation_steps x "
                         f"world size ({cfg.gradient_accumulation_steps} x {world})")
    set_seed(cfg.seed)
    if model is None:
        model, tokenizer = load_model_and_tokenizer(cfg)
    elif tokenizer is None:
        raise ValueError("pass the tokenizer together with the model")
    device = next(model.parameters()).device
    forward_model = model
    if world > 1:  # data parallel: each rank takes every world-th example of a batch
        from torch.nn.parallel import DistributedDataParallel

        forward_model = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    main_process = rank == 0
    progress = progress and main_process
    examples = sft_examples(cfg, train_data)
    if eval_data is None:
        eval_data = eval_examples_for(cfg) if cfg.eval_examples != 0 else []

    steps = cfg.steps if cfg.steps is not None else max(1, math.ceil(cfg.epochs * len(examples) / cfg.batch_size))
    if not main_process:
        eval_data = []
    output_dir = cfg.output_dir if main_process else None
    if cfg.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    model.train()
    optimizer = make_optimizer(model, cfg.lr, cfg.weight_decay, cfg.betas)
    scheduler = make_scheduler(optimizer, cfg.warmup_steps, steps, cfg.min_lr_ratio)

    start_step = restore_checkpoint(cfg, resume, model, optimizer, scheduler)
    log = MetricsLog(output_dir, resume_step=start_step if resume else None)
    if output_dir:
        write_run_config(output_dir, "sft", cfg)

    evals: list[dict] = [r for r in log.records if r.get("kind") == "eval"]
    t_start = time.perf_counter()
    bar = maybe_progress(steps, start_step, "sft", progress)
    for step in range(start_step, steps):
        t0 = time.perf_counter()
        idx = data_indices(len(examples), cfg.seed, step * cfg.batch_size, cfg.batch_size)[rank::world]
        batch_examples = [examples[i] for i in idx]
        lr = scheduler.get_last_lr()[0]
        # the last good checkpoint is on disk: a non-finite step raises before the next one is saved
        out = sft_train_step(forward_model, tokenizer, optimizer, batch_examples, cfg.gradient_accumulation_steps,
                             cfg.max_grad_norm, scheduler, tokenize_fn, log_probs_fn, train_step_fn)
        total_loss, grad_norm, nll_sum, tokens = out["loss"], out["grad_norm"], out["nll_sum"], out["response_tokens"]
        check_finite(total_loss, "loss", step + 1, cfg.output_dir)
        check_finite(grad_norm, "gradient norm", step + 1, cfg.output_dir)
        if world > 1:
            total_loss = _all_reduce_mean(total_loss, world)
            nll_sum, tokens = _all_reduce_mean(nll_sum, world) * world, int(_all_reduce_mean(tokens, world) * world)
        record = {"kind": "train", "step": step + 1, "loss": total_loss, "nll_per_token": nll_sum / max(tokens, 1),
                  "grad_norm": grad_norm, "lr": lr, "response_tokens": tokens,
                  "examples_seen": (step + 1) * cfg.batch_size, "step_time": time.perf_counter() - t0}
        done = step + 1 == steps
        if eval_data and ((cfg.eval_every and (step + 1) % cfg.eval_every == 0) or done):
            model.eval()
            res = run_eval(model, tokenizer, cfg, eval_data)
            model.train()
            ev = {"kind": "eval", "step": step + 1, **res}
            evals.append(ev)
            log.log(ev)
        log.log(record)
        if on_step is not None:
            on_step(record)
        bar.set_postfix(loss=f"{total_loss:.3f}", nll=f"{record['nll_per_token']:.3f}")
        bar.update(1)
        if output_dir and ((cfg.checkpoint_every and (step + 1) % cfg.checkpoint_every == 0) or done):
            save_checkpoint(output_dir, step + 1, model, tokenizer, optimizer, scheduler,
                            extra={"data_position": (step + 1) * cfg.batch_size, "kind": "sft"},
                            keep=cfg.keep_checkpoints)
    bar.close()
    if cfg.gradient_checkpointing:
        model.gradient_checkpointing_disable()
    model.eval()
    if output_dir:
        save_final(model, tokenizer, output_dir)
    if world > 1:
        import torch.distributed as dist

        dist.barrier()
    final_eval = evals[-1] if evals else None
    return TrainResult(model=model, tokenizer=tokenizer, metrics=log.records, eval=final_eval, evals=evals,
                       output_dir=cfg.output_dir, steps=steps, seconds=time.perf_counter() - t_start)

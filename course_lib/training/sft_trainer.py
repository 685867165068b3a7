"""Supervised fine-tuning on worked solutions in the r1_zero format, from the graded functions.

    for each optimizer step:
        sft_train_step(model, tokenizer, optimizer, next batch_size examples, k, ...)
            # k micro-batches of: tokenize_fn -> log_probs_fn -> train_step_fn (backward inside);
            # clip the gradient norm; AdamW step; cosine schedule with linear warmup

The step is `course_lib.sft.sft_train_step` (graded in notebook 05); it and its three functions
are injectable (`step_fn`, `tokenize_fn`, `log_probs_fn`, `train_step_fn`: notebook 05 passes the
student's own, so the trainer runs where the reference step is a stub); they default to the
course's reference implementations: there is no second copy of the loss here.

Evaluation (every `eval_every` steps and at the end) samples through the config's rollout engine (`engine`,
`engine_kwargs`: the fast engine on the tiny default, vLLM in the GPU config), synced to the policy before each.

Several GPUs: launched with `torchrun --nproc_per_node N -m course_lib.training sft ...`, each
process holds the policy (DistributedDataParallel) and takes every N-th example of each batch;
rank 0 logs, evaluates and saves. Its evaluation cannot be vLLM's (a vLLM engine started inside
torchrun's process group hangs): such a run is refused before it starts.

`expert_iteration` (notebook 05) is SFT on the model's own correct samples: sample, keep what the
reward grades correct, SFT on it with `train_sft`, repeat.

Simplifications, named: the batch is padded to its longest sequence (no packing); the data
order is a seeded permutation per epoch, so a step number fixes the data position exactly
(that is what makes `--resume` exact); on CPU the model runs in float32, on GPU in bfloat16.
"""

from __future__ import annotations

import math
import time
from typing import Callable

import torch

from ..gsm8k import as_r1_zero
from ..logprobs import get_response_log_probs
from ..rewards import r1_zero_reward_fn
from ..rollouts import make_engine
from ..sft import sft_microbatch_train_step, sft_train_step
from ..tokenization import tokenize_prompt_and_output
from .checkpoint import restore_checkpoint
from .common import (RunLog, TrainResult, all_reduce_mean, check_finite, data_indices, distributed_context,
                     eval_examples_for, load_records, make_optimizer, make_scheduler, resolve_config, run_eval)
from .config import SFTConfig
from .models import load_model_and_tokenizer, set_seed


def sft_examples(cfg: SFTConfig, problems: list[dict] | None = None) -> list[dict]:
    """The r1_zero training examples: the first `n_examples`, optionally only those graded correct."""
    examples = load_records(cfg, split=cfg.train_split, records=problems, need=("prompt", "output"),
                            first=cfg.n_examples)
    if cfg.filter_correct:
        examples = [ex for ex in examples if r1_zero_reward_fn(ex["output"], ex["ground_truth"])["reward"] == 1.0]
    if not examples:
        raise ValueError("no SFT examples left (check n_examples and filter_correct)")
    return examples


def _check_batch(cfg: SFTConfig, world: int) -> None:
    if cfg.batch_size % (cfg.gradient_accumulation_steps * world) != 0:
        raise ValueError(f"batch_size ({cfg.batch_size}) must be divisible by gradient_accumulation_steps "
                         f"({cfg.gradient_accumulation_steps})" + (f" x world size ({world})" if world > 1 else ""))


def _policy(cfg: SFTConfig, model, tokenizer, world: int):
    """(model, tokenizer, the module to run forward): loaded from the config when not given,
    and wrapped in DistributedDataParallel under torchrun (each rank takes every world-th example)."""
    if model is None:
        model, tokenizer = load_model_and_tokenizer(cfg)
    elif tokenizer is None:
        raise ValueError("pass the tokenizer together with the model")
    if world == 1:
        return model, tokenizer, model
    from torch.nn.parallel import DistributedDataParallel

    device = next(model.parameters()).device
    return model, tokenizer, DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)


def _optimizer_and_scheduler(model, cfg: SFTConfig, steps: int):
    """AdamW, and its schedule over the run's `steps`: linear warmup, then cosine to lr * min_lr_ratio."""
    optimizer = make_optimizer(model, lr=cfg.lr, weight_decay=cfg.weight_decay, betas=cfg.betas,
                               fused=cfg.fused_adamw)
    return optimizer, make_scheduler(optimizer, warmup_steps=cfg.warmup_steps, total_steps=steps,
                                     min_lr_ratio=cfg.min_lr_ratio)


def _eval_engine(cfg: SFTConfig, model, tokenizer, eval_data: list, rank: int, world: int):
    """The engine the run evaluates with (rank 0; None on the others and without evaluation): the config's `engine`
    and `engine_kwargs` (vLLM on a GPU: a copy of the weights that `load_weights` refreshes before each evaluation,
    in its `gpu_memory_utilization` share); the fast and HF engines sample the policy itself, `eval_batch_size` rows
    at a time. Under torchrun, vLLM is refused on every rank alike, so that none is left waiting."""
    if not eval_data:
        return None
    if world > 1 and cfg.engine == "vllm":
        raise ValueError("engine 'vllm' cannot evaluate data-parallel SFT: a vLLM engine started inside torchrun's "
                         "process group hangs (seen with vLLM 0.32); evaluate with engine=fast "
                         "'engine_kwargs={}' eval_batch_size=64, or set eval_examples=0 and run the eval command "
                         "afterwards")
    if rank != 0:
        return None
    kwargs = dict(cfg.engine_kwargs or {})
    if cfg.engine in ("fast", "hf"):
        kwargs.setdefault("batch_size", cfg.eval_batch_size)
    return make_engine(cfg.engine, model, tokenizer, **kwargs)


def _evaluate(run: RunLog, *, engine, model, tokenizer, cfg: SFTConfig, eval_data: list, step: int) -> None:
    """Evaluate the policy after optimizer step `step` and log it: the engine synced first (vLLM holds its own copy of
    the weights; the fast and HF engines sample the policy itself), the policy in eval mode meanwhile."""
    model.eval()
    engine.load_weights(model)
    run.log_eval(step=step, result=run_eval(model=model, tokenizer=tokenizer, cfg=cfg, examples=eval_data,
                                            engine=engine))
    model.train()


def _step_record(step: int, out: dict, lr: float, cfg: SFTConfig, world: int, t0: float) -> dict:
    """One line of metrics.jsonl; under data parallelism, summed or averaged over the processes."""
    loss, nll_sum, tokens = out["loss"], out["nll_sum"], out["response_tokens"]
    if world > 1:
        loss = all_reduce_mean(loss, world)
        nll_sum, tokens = all_reduce_mean(nll_sum, world) * world, int(all_reduce_mean(tokens, world) * world)
    return {"kind": "train", "step": step, "loss": loss, "nll_per_token": nll_sum / max(tokens, 1),
            "grad_norm": out["grad_norm"], "lr": lr, "response_tokens": tokens,
            "examples_seen": step * cfg.batch_size, "step_time": time.perf_counter() - t0}


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
    step_fn: Callable = sft_train_step,
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
        step_fn: one optimizer step, called as `sft_train_step` is, by keyword (graded in notebook 05).
        resume: continue from the latest checkpoint in `output_dir`.
        on_step: called with each step's metrics (e.g. a notebook's live plot).
    """
    cfg = resolve_config("sft", config, overrides)
    _check_batch(cfg, 1)
    rank, world = distributed_context(cfg)
    _check_batch(cfg, world)
    set_seed(cfg.seed)
    model, tokenizer, forward_model = _policy(cfg, model=model, tokenizer=tokenizer, world=world)
    main_process = rank == 0
    examples = sft_examples(cfg, train_data)
    if eval_data is None:
        eval_data = eval_examples_for(cfg) if cfg.eval_examples != 0 else []
    steps = cfg.steps if cfg.steps is not None else max(1, math.ceil(cfg.epochs * len(examples) / cfg.batch_size))
    output_dir = cfg.output_dir if main_process else None
    # made before the optimizer's states exist: vLLM takes its share of the GPU first
    engine = _eval_engine(cfg, model=model, tokenizer=tokenizer, eval_data=eval_data, rank=rank, world=world)
    if cfg.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    model.train()
    optimizer, scheduler = _optimizer_and_scheduler(model, cfg, steps)
    start_step = restore_checkpoint(cfg, resume=resume, model=model, optimizer=optimizer, scheduler=scheduler)
    run = RunLog(kind="sft", cfg=cfg, total_steps=steps, start_step=start_step, resume=resume, output_dir=output_dir,
                 progress=progress and main_process, on_step=on_step)

    for step in range(start_step, steps):
        t0 = time.perf_counter()
        done, last = step + 1, step + 1 == steps  # 1-based, as metrics and checkpoints count
        # this process's share (every world-th) of the next batch_size examples of a seeded order
        idx = data_indices(len(examples), seed=cfg.seed, start=step * cfg.batch_size, count=cfg.batch_size)
        lr = scheduler.get_last_lr()[0]
        out = step_fn(model=forward_model, tokenizer=tokenizer, optimizer=optimizer,
                      batch_examples=[examples[i] for i in idx[rank::world]],
                      gradient_accumulation_steps=cfg.gradient_accumulation_steps, max_grad_norm=cfg.max_grad_norm,
                      scheduler=scheduler, tokenize_fn=tokenize_fn, log_probs_fn=log_probs_fn,
                      train_step_fn=train_step_fn)
        # the last good checkpoint is on disk: a non-finite step raises before the next one is saved
        check_finite(out["loss"], what="loss", step=done, output_dir=cfg.output_dir)
        check_finite(out["grad_norm"], what="gradient norm", step=done, output_dir=cfg.output_dir)
        record = _step_record(step=done, out=out, lr=lr, cfg=cfg, world=world, t0=t0)
        if engine is not None and (cfg.eval_every and done % cfg.eval_every == 0 or last):
            _evaluate(run, engine=engine, model=model, tokenizer=tokenizer, cfg=cfg, eval_data=eval_data, step=done)
        run.log_step(record, loss=f"{record['loss']:.3f}", nll=f"{record['nll_per_token']:.3f}")
        if output_dir and (cfg.checkpoint_every and done % cfg.checkpoint_every == 0 or last):
            run.save_checkpoint(step=done, model=model, tokenizer=tokenizer, optimizer=optimizer, scheduler=scheduler,
                                data_position=done * cfg.batch_size)
    result = run.finish(model, tokenizer)
    if world > 1:
        import torch.distributed as dist

        dist.barrier()
    return result


def expert_iteration(
    model: torch.nn.Module,
    tokenizer,
    questions: list[dict],
    eval_data: list[dict],
    *,
    evaluate_fn: Callable,
    n_iterations: int = 3,
    questions_per_iteration: int = 128,
    samples_per_question: int = 4,
    temperature: float = 1.0,
    max_tokens: int = 100,
    sft: dict | None = None,
    seed: int = 0,
    on_iteration: Callable[[dict], None] | None = None,
    **sft_functions,
) -> list[dict]:
    """Expert iteration (CS336's EI): sample, keep the correct responses, SFT on them, repeat.

        for i = 1 .. n_iterations:
            Q_i = the next questions_per_iteration questions (records with a ground truth)
            sample samples_per_question responses to each at `temperature` (seed + i)
            keep every distinct response that evaluate_fn grades correct
            SFT the policy, in place, on the kept (prompt, response) pairs: train_sft(sft)
            evaluate greedily on eval_data

    Only final answers are needed, never a worked solution: the model writes its own, and the
    reward decides which to learn from. `evaluate_fn` is called as `course_lib.evaluate` is
    (graded in notebook 05; a notebook passes its own), for the samples and the evaluations;
    `sft_functions` (step_fn, tokenize_fn, log_probs_fn, train_step_fn) go to `train_sft`.

    Returns one record per evaluation, the first before any iteration: {"iteration", "questions",
    "samples", "correct_samples", "kept" (distinct correct responses), "sft_steps",
    "format_reward", "answer_reward", "seconds"}.
    """
    import time

    from .evaluation import evaluate

    questions = as_r1_zero(questions)
    history = []

    def record(i: int, **extra) -> None:
        res = evaluate(model, tokenizer, eval_data, max_tokens=max_tokens, batch_size=max(len(eval_data), 1),
                       evaluate_fn=evaluate_fn)
        history.append({"iteration": i, **extra, "format_reward": res["format_reward"],
                        "answer_reward": res["answer_reward"]})
        if on_iteration is not None:
            on_iteration(history[-1])

    record(0, questions=0, samples=0, correct_samples=0, kept=0, sft_steps=0, seconds=0.0)
    for i in range(1, n_iterations + 1):
        t0 = time.perf_counter()
        batch = questions[(i - 1) * questions_per_iteration : i * questions_per_iteration]
        repeated = [q for q in batch for _ in range(samples_per_question)]
        sampled = evaluate(model, tokenizer, repeated, max_tokens=max_tokens, temperature=temperature,
                           batch_size=len(repeated), seed=seed + i, return_rollouts=True, evaluate_fn=evaluate_fn)
        kept, seen = [], set()
        for q, rollout, category in zip(repeated, sampled["rollouts"], sampled["categories"]):
            if category == "correct" and (q["prompt"], rollout.text) not in seen:
                seen.add((q["prompt"], rollout.text))
                kept.append({"prompt": q["prompt"], "output": rollout.text, "ground_truth": q["ground_truth"]})
        steps = 0
        if kept:
            run = train_sft(dict(sft or {}, seed=seed + i, n_examples=None, filter_correct=False), model=model,
                            tokenizer=tokenizer, train_data=kept, eval_data=[], progress=False, **sft_functions)
            steps = run.steps
        record(i, questions=len(batch), samples=len(repeated), correct_samples=sampled["counts"]["correct"],
               kept=len(kept), sft_steps=steps, seconds=time.perf_counter() - t0)
    return history

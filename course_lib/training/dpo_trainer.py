"""DPO (notebook 12): preference pairs built once, their reference log-probs computed once, then
optimizer steps of the graded `dpo_loss` on the policy's sequence log-probs. No sampling while it trains.

    pairs = build_pairs(cfg, policy)              # on_policy: group_size samples per question (the rollout
                                                  #   engine, sampling_temperature), a correct one chosen against
                                                  #   a wrong one (r1_zero_reward_fn, `on_policy_pairs`);
                                                  # off_policy: the gold solution against it with its answer
                                                  #   changed (`off_policy_pairs`)
    ref   = reference_log_probs(pi_ref, pairs)    # (N, 2) [chosen, rejected], once, eval mode, no gradient
    for step in 1 .. steps:
        dpo_train_step(the next batch_size pairs) # k micro-batches of: one forward of their chosen and rejected
                                                  #   rows together -> sequence_log_probs -> dpo_loss / k -> backward;
                                                  # clip the gradient norm; AdamW step; schedule
        evaluate every eval_every steps and at the last: held-out answer reward (greedy) and the exact KL to pi_ref
        checkpoint every checkpoint_every steps and at the last, the pairs and reference log-probs inside it

The reference pi_ref is a frozen copy of the starting policy (`common.frozen_copy`), made before a
checkpoint is restored, so a resumed run measures its KL to the same model. Its log-probs are data:
computed once in eval mode (dropout off) and never again; a notebook passes `ref_log_probs` of its
own to show what a reference scored in train mode does. The graded functions the step calls are
injectable (`sequence_log_probs_fn`, `loss_fn`, and `step_fn` itself: notebook 12 passes the
student's own) and default to the course's references in `course_lib.dpo`.

Each response is scored with the tokenizer's eos token appended (as `compute_per_instance_dpo_loss`
does): where a response ends is part of what is preferred. A pair's "prompt" is the formatted r1_zero
prompt already.

Simplifications, named: one round of pairs, fixed before training (iterative or online DPO would
rebuild them from the trained policy); the data order is a seeded permutation per epoch over the
pairs, so a step number fixes the data position exactly (that is what makes `--resume` exact).
"""

from __future__ import annotations

import math
import time
from typing import Callable

import torch

from ..dpo import dpo_loss, sequence_log_probs
from ..gsm8k import as_r1_zero
from ..preferences import off_policy_pairs, on_policy_pairs
from ..rewards import r1_zero_reward_fn
from ..rollouts import SamplingParams, make_engine
from ..tokenization import tokenize_prompt_and_output
from .checkpoint import restore_checkpoint, saved_extra_state
from .common import (RunLog, TrainResult, check_finite, data_indices, eval_examples_for, frozen_copy, load_records,
                     make_optimizer, make_scheduler, resolve_config, run_eval)
from .config import DPOConfig
from .evaluation import exact_kl_to_reference
from .models import load_model_and_tokenizer, set_seed

PAIR_SOURCES = ("on_policy", "off_policy")
PAIR_FIELDS = ("prompt", "chosen", "rejected")


def check_dpo_config(cfg: DPOConfig) -> None:
    """The settings DPO cannot run with, each named."""
    if cfg.pair_source not in PAIR_SOURCES:
        raise ValueError(f"pair_source must be one of {', '.join(PAIR_SOURCES)}, not {cfg.pair_source!r}")
    if not cfg.beta > 0:
        raise ValueError(f"beta must be > 0, got {cfg.beta}")
    for name in ("batch_size", "gradient_accumulation_steps", "max_pairs_per_group"):
        if getattr(cfg, name) < 1:
            raise ValueError(f"{name} must be >= 1, got {getattr(cfg, name)}")
    if cfg.batch_size % cfg.gradient_accumulation_steps != 0:
        raise ValueError(f"batch_size ({cfg.batch_size}) must be divisible by gradient_accumulation_steps "
                         f"({cfg.gradient_accumulation_steps})")
    if cfg.pair_source == "on_policy" and cfg.group_size < 2:
        raise ValueError(f"group_size must be >= 2 for on_policy pairs (a pair takes two samples), got {cfg.group_size}")
    if cfg.pair_source == "on_policy" and not cfg.sampling_temperature > 0:
        raise ValueError("sampling_temperature must be > 0 for on_policy pairs: greedy samples of one question are "
                         "identical and pair nothing")
    if cfg.n_questions is not None and cfg.n_questions < 1:
        raise ValueError(f"n_questions must be >= 1 or null (all), got {cfg.n_questions}")
    if cfg.steps is None and not cfg.epochs > 0:
        raise ValueError(f"epochs must be > 0 (or set steps), got {cfg.epochs}")
    if cfg.steps is not None and cfg.steps < 1:
        raise ValueError(f"steps must be >= 1 or null (from epochs), got {cfg.steps}")
    if cfg.kl_eval_prompts < 0:
        raise ValueError(f"kl_eval_prompts must be >= 0, got {cfg.kl_eval_prompts}")


def check_tokenizer(tokenizer) -> None:
    if getattr(tokenizer, "eos_token", None) is None:
        raise ValueError("tokenizer has no eos_token: DPO appends it to each response")


def check_pairs(pairs: list[dict]) -> None:
    """Every pair has a non-empty prompt, chosen and rejected, and prefers something: ValueError naming the pair."""
    if not pairs:
        raise ValueError("no preference pairs (on_policy: no group had both a correct and a wrong response; "
                         "try more n_questions, a larger group_size or another model)")
    for i, pair in enumerate(pairs):
        for name in PAIR_FIELDS:
            if name not in pair:
                raise ValueError(f"pair {i}: no {name!r} field (a pair is {{'prompt', 'chosen', 'rejected'}})")
            if not isinstance(pair[name], str) or not pair[name]:
                raise ValueError(f"pair {i}: {name!r} is empty or not a string")
        if pair["chosen"] == pair["rejected"]:
            raise ValueError(f"pair {i}: 'chosen' and 'rejected' are identical: the pair prefers nothing")


def _sample_responses(cfg: DPOConfig, model, tokenizer, prompts: list[str]) -> list[str]:
    """`group_size` responses to each prompt, consecutive, from the course's rollout engine (seeded)."""
    params = SamplingParams(temperature=cfg.sampling_temperature, top_p=cfg.sampling_top_p,
                            max_tokens=cfg.sampling_max_tokens, min_tokens=cfg.sampling_min_tokens,
                            stop=tuple(cfg.stop), n=cfg.group_size, seed=cfg.seed)
    engine = make_engine(name=cfg.engine, model=model, tokenizer=tokenizer, **(cfg.engine_kwargs or {}))
    was_training = model.training
    model.eval()
    try:
        rollouts = engine.generate(prompts, params)
    finally:
        model.train(was_training)
    return [r.text for r in rollouts]


def build_pairs(cfg: DPOConfig | dict | None, model, tokenizer, questions: list[dict] | None = None, *,
                on_policy_pairs_fn: Callable = on_policy_pairs, off_policy_pairs_fn: Callable = off_policy_pairs
                ) -> list[dict]:
    """The run's preference pairs {"prompt", "chosen", "rejected", "ground_truth"}, from the first `n_questions`
    of `questions` (default: the config's train split). The two graded pairing functions are injectable
    (notebook 12 passes the student's own).

    on_policy: `group_size` samples per question from `model` at `sampling_temperature` (seed `cfg.seed`: the
    same config gives the same pairs), paired by `on_policy_pairs(r1_zero_reward_fn, ...)`; a pair with an
    empty side (possible with sampling_min_tokens 0) is dropped. off_policy: `off_policy_pairs` of the gold
    r1_zero records.
    """
    cfg = resolve_config("dpo", cfg, {})
    check_dpo_config(cfg)
    if cfg.pair_source == "off_policy":
        records = load_records(cfg, split=cfg.train_split, records=questions, need=("prompt", "output", "ground_truth"),
                               first=cfg.n_questions)
        return off_policy_pairs_fn(records)
    records = load_records(cfg, split=cfg.train_split, records=questions, need=("prompt", "ground_truth"),
                           first=cfg.n_questions)
    responses = _sample_responses(cfg, model, tokenizer, prompts=[q["prompt"] for q in records])
    pairs = on_policy_pairs_fn(r1_zero_reward_fn, prompts=[q["prompt"] for q in records for _ in range(cfg.group_size)],
                            responses=responses,
                            ground_truths=[q["ground_truth"] for q in records for _ in range(cfg.group_size)],
                            group_size=cfg.group_size, max_pairs_per_group=cfg.max_pairs_per_group)
    return [p for p in pairs if p["chosen"] and p["rejected"]]


def pair_rows(tokenizer, pairs: list[dict]) -> dict[str, torch.Tensor]:
    """The (2B, T) tokenized rows of B pairs: rows 0..B-1 the chosen responses, B..2B-1 the rejected ones, each
    after its pair's prompt and with eos appended ("input_ids", "labels", "response_mask", as
    `tokenize_prompt_and_output` makes them)."""
    eos = tokenizer.eos_token
    prompts = [p["prompt"] for p in pairs] * 2
    responses = [p["chosen"] + eos for p in pairs] + [p["rejected"] + eos for p in pairs]
    return tokenize_prompt_and_output(prompts, responses, tokenizer)


def pair_log_probs(model, tokenizer, pairs: list[dict], average: bool, sequence_log_probs_fn) -> torch.Tensor:
    """(B, 2) [chosen, rejected] sequence log-probs of `pairs` under `model`: one forward of the 2B rows."""
    device = next(model.parameters()).device
    batch = {k: v.to(device) for k, v in pair_rows(tokenizer, pairs).items()}
    lp = sequence_log_probs_fn(model=model, input_ids=batch["input_ids"], labels=batch["labels"],
                               response_mask=batch["response_mask"], average=average)  # (2B,)
    return torch.stack([lp[: len(pairs)], lp[len(pairs):]], dim=1)


@torch.no_grad()
def reference_log_probs(reference, tokenizer, pairs: list[dict], batch_size: int, average: bool = False, *,
                        sequence_log_probs_fn: Callable = sequence_log_probs) -> torch.Tensor:
    """(N, 2) float32 on the CPU: [chosen, rejected] sequence log-probs of the N pairs under `reference`.

    Summed over each response's tokens (eos included; the mean when `average`), `batch_size` pairs a
    forward, without gradients and in eval mode (dropout off: the reference is one fixed function);
    `reference` gets its own mode back afterwards.
    """
    check_tokenizer(tokenizer)
    was_training = reference.training
    reference.eval()
    try:
        chunks = [pair_log_probs(reference, tokenizer, pairs[start : start + batch_size], average=average,
                                  sequence_log_probs_fn=sequence_log_probs_fn).float().cpu()
                  for start in range(0, len(pairs), batch_size)]
    finally:
        reference.train(was_training)
    return torch.cat(chunks) if chunks else torch.zeros(0, 2)


def dpo_train_step(*, model, tokenizer, optimizer, batch_pairs: list[dict], ref_log_probs: torch.Tensor, beta: float,
                   gradient_accumulation_steps: int, max_grad_norm: float, scheduler=None, average: bool = False,
                   sequence_log_probs_fn: Callable = sequence_log_probs, loss_fn: Callable = dpo_loss) -> dict:
    """One optimizer step of DPO on `batch_pairs` (B pairs; `ref_log_probs` their (B, 2) reference log-probs).

        for each of the k micro-batches (consecutive slices of B / k pairs):
            pi = sequence_log_probs_fn(model, the 2B/k chosen and rejected rows)    # one forward
            loss, meta = loss_fn(pi_chosen, pi_rejected, ref_chosen, ref_rejected, beta);  (loss / k).backward()
        clip the gradient norm to max_grad_norm; optimizer.step(); scheduler.step(); zero the grads

    Returns floats: "loss" (the batch's mean DPO loss), "reward_margin", "reward_accuracy",
    "chosen_rewards", "rejected_rewards" (batch means of the implicit rewards beta * (pi - ref)),
    "chosen_log_probs", "rejected_log_probs" (batch means of the policy's sequence log-probs: a falling
    chosen log-prob is likelihood displacement) and "grad_norm" (before clipping).
    """
    k, n = gradient_accumulation_steps, len(batch_pairs)
    if k < 1 or n == 0 or n % k != 0:
        raise ValueError(f"{n} pairs do not split into gradient_accumulation_steps={k} micro-batches")
    if tuple(ref_log_probs.shape) != (n, 2):
        raise ValueError(f"ref_log_probs has shape {tuple(ref_log_probs.shape)}, expected ({n}, 2) for {n} pairs")
    micro = n // k
    out = dict.fromkeys(("loss", "reward_margin", "reward_accuracy", "chosen_rewards", "rejected_rewards",
                         "chosen_log_probs", "rejected_log_probs"), 0.0)
    for j in range(k):
        rows = slice(j * micro, (j + 1) * micro)
        policy = pair_log_probs(model, tokenizer, batch_pairs[rows], average=average,
                                 sequence_log_probs_fn=sequence_log_probs_fn)  # (micro, 2)
        ref = ref_log_probs[rows].to(device=policy.device, dtype=policy.dtype)
        loss, meta = loss_fn(policy_chosen_log_probs=policy[:, 0], policy_rejected_log_probs=policy[:, 1],
                             ref_chosen_log_probs=ref[:, 0], ref_rejected_log_probs=ref[:, 1], beta=beta)
        (loss / k).backward()
        # equal micro-batches: the mean of their means is the batch mean
        for key, value in (("loss", loss), ("reward_margin", meta["reward_margin"]),
                           ("reward_accuracy", meta["reward_accuracy"]),
                           ("chosen_rewards", meta["chosen_rewards"].mean()),
                           ("rejected_rewards", meta["rejected_rewards"].mean()),
                           ("chosen_log_probs", policy[:, 0].mean()), ("rejected_log_probs", policy[:, 1].mean())):
            out[key] += float(value.detach()) / k
    out["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm))
    optimizer.step()
    if scheduler is not None:
        scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return out


class PreferenceData:
    """The run's pairs and their (N, 2) reference log-probs: fixed before the first step, checkpointed as the
    trainer's extra state, restored on resume (never resampled)."""

    def __init__(self, pairs: list[dict], ref_log_probs: torch.Tensor):
        if tuple(ref_log_probs.shape) != (len(pairs), 2):
            raise ValueError(f"ref_log_probs has shape {tuple(ref_log_probs.shape)}, expected ({len(pairs)}, 2): "
                             f"one [chosen, rejected] row per pair")
        if not bool(torch.isfinite(ref_log_probs).all()):
            raise ValueError("ref_log_probs holds a NaN or infinite value")
        self.pairs, self.ref_log_probs = pairs, ref_log_probs.detach().float().cpu()

    def state_dict(self) -> dict:
        return {"pairs": self.pairs, "ref_log_probs": self.ref_log_probs}

    def load_state_dict(self, state: dict) -> None:
        self.__init__(list(state["pairs"]), state["ref_log_probs"])


def preference_data(cfg: DPOConfig, *, model, tokenizer, reference, pairs: list[dict] | None,
                    ref_log_probs: torch.Tensor | None, resume: bool, sequence_log_probs_fn: Callable) -> PreferenceData:
    """The pairs and reference log-probs of the run: those of the latest checkpoint when resuming one; else
    `pairs` (default: `build_pairs` from the starting policy), checked, and `ref_log_probs` (default: computed
    now, once, under `reference`)."""
    saved = saved_extra_state(cfg.output_dir) if resume else None
    if saved is not None:
        data = PreferenceData(list(saved["pairs"]), saved["ref_log_probs"])
        if pairs is not None and list(pairs) != data.pairs:
            raise ValueError(f"pairs: the pairs given differ from those of the checkpoint in {cfg.output_dir}, "
                             f"which a resumed run trains on")
        return data
    if pairs is None:
        pairs = build_pairs(cfg, model, tokenizer)
    check_pairs(pairs)
    if ref_log_probs is None:
        ref_log_probs = reference_log_probs(reference, tokenizer, pairs,
                                            batch_size=cfg.batch_size // cfg.gradient_accumulation_steps,
                                            average=cfg.average_log_probs, sequence_log_probs_fn=sequence_log_probs_fn)
    return PreferenceData(list(pairs), ref_log_probs)


def evaluate_dpo(model, reference, tokenizer, cfg: DPOConfig, eval_data: list[dict]) -> dict:
    """The held-out evaluation (`run_eval`: greedy format and answer reward) and "exact_kl": KL(pi || pi_ref)
    per response token on the policy's samples for the first `kl_eval_prompts` held-out prompts."""
    model.eval()
    result = run_eval(model=model, tokenizer=tokenizer, cfg=cfg, examples=eval_data)
    if cfg.kl_eval_prompts:
        prompts = [ex["prompt"] for ex in as_r1_zero(eval_data[: cfg.kl_eval_prompts])]
        result["exact_kl"] = exact_kl_to_reference(model, reference, tokenizer, prompts=prompts,
                                                   max_tokens=cfg.eval_max_tokens, seed=cfg.seed,
                                                   batch_size=cfg.eval_batch_size)
    model.train()
    return result


def _step_record(step: int, out: dict, lr: float, cfg: DPOConfig, t0: float) -> dict:
    """One line of metrics.jsonl."""
    return {"kind": "train", "step": step, **out, "lr": lr, "pairs_seen": step * cfg.batch_size,
            "step_time": time.perf_counter() - t0}


def _policy(cfg: DPOConfig, model, tokenizer):
    """(model, tokenizer): as given, or loaded from the config when `model` is None; the tokenizer needs eos."""
    if model is None:
        model, tokenizer = load_model_and_tokenizer(cfg)
    elif tokenizer is None:
        raise ValueError("pass the tokenizer together with the model")
    check_tokenizer(tokenizer)
    return model, tokenizer


def train_dpo(
    config: DPOConfig | dict | None = None,
    model: torch.nn.Module | None = None,
    tokenizer=None,
    pairs: list[dict] | None = None,
    eval_data: list[dict] | None = None,
    *,
    reference: torch.nn.Module | None = None,
    ref_log_probs: torch.Tensor | None = None,
    step_fn: Callable = dpo_train_step,
    sequence_log_probs_fn: Callable = sequence_log_probs,
    loss_fn: Callable = dpo_loss,
    resume: bool = False,
    progress: bool = True,
    on_step: Callable[[dict], None] | None = None,
    **overrides,
) -> TrainResult:
    """Train `model` (or `config.model`) with DPO; returns the run's result (its `pairs`, `ref_log_probs` and
    `reference` attached).

    Args: as `train_sft`, and
        pairs: preference pairs {"prompt", "chosen", "rejected"} (default: `build_pairs` from the starting
            policy, as the config's `pair_source` says: "on_policy" | "off_policy").
        reference: the frozen reference (default: a copy of `model` before any checkpoint is restored).
        ref_log_probs: (N, 2) [chosen, rejected] reference log-probs of `pairs` (default: computed once, before
            the first step, by `reference_log_probs`).
        step_fn, sequence_log_probs_fn, loss_fn: the step and the graded functions it calls, injectable.
        resume: continue from the latest checkpoint in `output_dir`, with its pairs and reference log-probs.
    """
    cfg = resolve_config("dpo", config, overrides)
    check_dpo_config(cfg)
    if resume and not cfg.output_dir:
        raise ValueError("resume needs output_dir")
    set_seed(cfg.seed)
    model, tokenizer = _policy(cfg, model, tokenizer)
    reference = frozen_copy(model) if reference is None else reference  # the starting policy, before any restore
    eval_data = (eval_examples_for(cfg) if cfg.eval_examples != 0 else []) if eval_data is None else eval_data
    data = preference_data(cfg, model=model, tokenizer=tokenizer, reference=reference, pairs=pairs,
                           ref_log_probs=ref_log_probs, resume=resume, sequence_log_probs_fn=sequence_log_probs_fn)
    steps = cfg.steps if cfg.steps is not None else max(1, math.ceil(cfg.epochs * len(data.pairs) / cfg.batch_size))
    if cfg.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    model.train()
    optimizer = make_optimizer(model, lr=cfg.lr, weight_decay=cfg.weight_decay, betas=cfg.betas,
                               fused=cfg.fused_adamw)
    scheduler = make_scheduler(optimizer, warmup_steps=cfg.warmup_steps, total_steps=steps,
                               min_lr_ratio=cfg.min_lr_ratio)
    start_step = restore_checkpoint(cfg, resume=resume, model=model, optimizer=optimizer, scheduler=scheduler,
                                    extra_state=data)
    run = RunLog(kind="dpo", cfg=cfg, total_steps=steps, start_step=start_step, resume=resume,
                 output_dir=cfg.output_dir, progress=progress, on_step=on_step)
    for step in range(start_step, steps):
        t0 = time.perf_counter()
        done, last = step + 1, step + 1 == steps  # 1-based, as metrics and checkpoints count
        idx = data_indices(len(data.pairs), seed=cfg.seed, start=step * cfg.batch_size, count=cfg.batch_size)
        lr = scheduler.get_last_lr()[0]
        out = step_fn(model=model, tokenizer=tokenizer, optimizer=optimizer, batch_pairs=[data.pairs[i] for i in idx],
                      ref_log_probs=data.ref_log_probs[idx], beta=cfg.beta,
                      gradient_accumulation_steps=cfg.gradient_accumulation_steps, max_grad_norm=cfg.max_grad_norm,
                      scheduler=scheduler, average=cfg.average_log_probs, sequence_log_probs_fn=sequence_log_probs_fn,
                      loss_fn=loss_fn)
        # the last good checkpoint is on disk: a non-finite step raises before the next one is saved
        check_finite(out["loss"], what="loss", step=done, output_dir=cfg.output_dir)
        check_finite(out["grad_norm"], what="gradient norm", step=done, output_dir=cfg.output_dir)
        record = _step_record(step=done, out=out, lr=lr, cfg=cfg, t0=t0)
        if eval_data and (cfg.eval_every and done % cfg.eval_every == 0 or last):
            run.log_eval(step=done, result=evaluate_dpo(model, reference, tokenizer, cfg=cfg, eval_data=eval_data))
        run.log_step(record, loss=f"{record['loss']:.3f}", acc=f"{record['reward_accuracy']:.2f}")
        if cfg.output_dir and (cfg.checkpoint_every and done % cfg.checkpoint_every == 0 or last):
            run.save_checkpoint(step=done, model=model, tokenizer=tokenizer, optimizer=optimizer, scheduler=scheduler,
                                data_position=done * cfg.batch_size, extra_state=data)
    result = run.finish(model, tokenizer)
    result.pairs, result.ref_log_probs, result.reference = data.pairs, data.ref_log_probs, reference
    return result

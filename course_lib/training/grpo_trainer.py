"""GRPO on questions with final answers only, from the graded functions (CS336's knobs).

    for step in 1 .. n_grpo_steps:
        batch = collect_rollouts(...)     # the next rollout_batch_size / group_size questions:
            rollouts   = engine.generate(prompts, SamplingParams(T, min/max tokens, stop "</answer>", n=group_size))
            A, r, meta = advantage_fn(r1_zero_reward_fn, responses, answers, group_size, eps, use_std)
            tensors    = tokenize_fn(prompts, responses); old log-probs (grpo_clip) and reference
                         log-probs (kl_coef > 0) under the policy before any update
        grpo_train_step(policy / T, optimizer, batch.tensors, ...)   # epochs x optimizer steps x micro-batches
        engine.load_weights(policy)                                  # vLLM holds its own copy

`grpo_train_step` is `course_lib.grpo.grpo_train_step` (graded in notebook 09); the advantage,
log-prob, micro-batch step and tokenize functions are injectable (notebook 09 passes the
student's own) and default to the course's reference implementations.

Why logits / T: rollouts sampled at temperature T come from softmax(logits / T). The policy-
gradient estimate grad E_{o~pi}[A] = E[A grad log pi(o)] needs log pi of that same
distribution. Scoring with raw logits would make the old, new and reference log-probs those of
the T = 1 policy: on-policy the importance ratio pi/pi_old would be computed against a policy
nobody sampled from, the clip would act on the wrong ratio, and the gradient would push a
different distribution than the one whose rewards were measured. So sampling and scoring share
one temperature, here and in the engines (`course_lib.training.models.TemperatureScaled`).

Simplifications, named: the reward is the r1_zero answer reward (format alone earns nothing);
responses are re-tokenized from their text with `tokenize_fn` (as CS336 does), so the scored
ids are those of the text; the reference policy for KL is the starting policy, frozen; with the
HF engine the policy itself samples (no weight copy), with vLLM the weights are synced after
every optimizer step.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Callable

import torch

from ..grpo import (LOSS_TYPES, compute_group_normalized_rewards, grpo_microbatch_train_step, grpo_train_step,
                    slice_micro_batch)
from ..logprobs import get_response_log_probs
from ..rewards import r1_zero_reward_fn
from ..rollouts import Rollout, SamplingParams, make_engine
from ..tokenization import tokenize_prompt_and_output
from .checkpoint import restore_checkpoint
from .common import (RunLog, TrainResult, check_finite, checkpoint_saver, data_indices, eval_examples_for,
                     load_records, make_optimizer, make_scheduler, resolve_config, run_eval)
from .config import GRPOConfig
from .models import TemperatureScaled, load_model_and_tokenizer, set_seed


def check_batch_sizes(cfg: GRPOConfig) -> None:
    """The divisibility rules of the batch knobs, each with a message that says what to change."""
    if cfg.loss_type not in LOSS_TYPES:
        raise ValueError(f"loss_type {cfg.loss_type!r} is not one of {', '.join(LOSS_TYPES)}")
    if cfg.rollout_batch_size % cfg.group_size != 0:
        raise ValueError(f"rollout_batch_size ({cfg.rollout_batch_size}) must be divisible by group_size "
                         f"({cfg.group_size}): each question gets group_size rollouts")
    if cfg.train_batch_size % cfg.gradient_accumulation_steps != 0:
        raise ValueError(f"train_batch_size ({cfg.train_batch_size}) must be divisible by "
                         f"gradient_accumulation_steps ({cfg.gradient_accumulation_steps})")
    if cfg.rollout_batch_size % cfg.train_batch_size != 0:
        raise ValueError(f"rollout_batch_size ({cfg.rollout_batch_size}) must be divisible by train_batch_size "
                         f"({cfg.train_batch_size}): each rollout batch splits into whole optimizer steps")
    if cfg.train_batch_size < cfg.group_size:
        raise ValueError(f"train_batch_size ({cfg.train_batch_size}) must be at least group_size ({cfg.group_size})")
    if cfg.epochs_per_rollout_batch < 1:
        raise ValueError("epochs_per_rollout_batch must be >= 1")
    if cfg.loss_type != "grpo_clip" and cfg.epochs_per_rollout_batch > 1:
        raise ValueError(f"epochs_per_rollout_batch={cfg.epochs_per_rollout_batch} reuses rollouts off-policy, "
                         f"which needs loss_type='grpo_clip' (the importance ratio), not {cfg.loss_type!r}")


def grpo_questions(cfg: GRPOConfig, problems: list[dict] | None = None) -> list[dict]:
    """The r1_zero questions (prompt and ground truth) GRPO draws from: the first `n_questions`."""
    questions = load_records(cfg, cfg.train_split, problems, ("prompt", "ground_truth"), cfg.n_questions)
    if not questions:
        raise ValueError("no GRPO questions (check n_questions and the data split)")
    return questions


@dataclass
class RolloutBatch:
    """One step's rollouts, scored and tokenized: what `grpo_train_step` trains on.

    `tensors` holds "input_ids", "labels", "response_mask" (N, T), "raw_rewards", "advantages"
    (N,), and "old_log_probs" / "ref_log_probs" (N, T) when the loss or the KL needs them.
    """

    rollouts: list[Rollout]
    tensors: dict[str, torch.Tensor]
    reward_meta: dict
    rollout_seconds: float


@torch.no_grad()
def _score(model, tensors: dict, micro: int, log_probs_fn, temperature: float,
           rows: torch.Tensor | None = None) -> torch.Tensor:
    """(N, T) log-probs of the responses under `model` at `temperature`, a micro-batch at a time.

    Only `rows` (default: all) are scored, sorted by length so that each micro-batch is padded
    to about its own length; the other rows stay 0."""
    scored = TemperatureScaled(model, temperature)
    out = torch.zeros_like(tensors["labels"], dtype=torch.float32)
    if rows is None:
        rows = torch.arange(tensors["labels"].shape[0], device=tensors["labels"].device)
    if len(rows) == 0:
        return out
    mask = tensors["response_mask"][rows]
    rows = rows[(mask.shape[1] - mask.flip(-1).long().argmax(-1)).argsort(stable=True)]
    for chunk in rows.split(micro):
        mb = slice_micro_batch(tensors, chunk)
        lp = log_probs_fn(scored, mb["input_ids"], mb["labels"])["log_probs"].detach()
        out[chunk, : lp.shape[1]] = lp
    return out


def once_per_pair(reward_fn: Callable) -> Callable:
    """`reward_fn` called once per distinct (response, ground truth) pair; repeats read the result.

    A group often repeats an answer word for word (about 30 of the demo's 128 responses per
    step are distinct), so scoring a rollout batch takes a few milliseconds instead of 10-40
    (measured on the tiny SFT model; an answer that is not a plain number goes to math-verify).
    Exact for a reward that is a function of its two arguments, as `r1_zero_reward_fn` is.
    Each caller gets its own copy of the result dict.
    """
    seen: dict[tuple[str, str], dict] = {}

    def memo(response: str, ground_truth: str) -> dict:
        key = (response, ground_truth)
        if key not in seen:
            seen[key] = reward_fn(response, ground_truth)
        return dict(seen[key])

    return memo


def collect_rollouts(engine, model, tokenizer, questions: list[dict], cfg: GRPOConfig, step: int, *,
                     advantage_fn: Callable, reward_fn: Callable, tokenize_fn: Callable, log_probs_fn: Callable,
                     ref_model: torch.nn.Module | None = None) -> RolloutBatch:
    """Sample `group_size` responses to each question, score them, and tokenize them for the update.

    The sampling seed is a function of the run's seed and the step number, so a resumed run
    repeats the step exactly. An empty response (end-of-text sampled first) is scored as that
    end-of-text token, so that its mask is not empty (a mean over no tokens is NaN).
    """
    t0 = time.perf_counter()
    params = SamplingParams(temperature=cfg.sampling_temperature, top_p=cfg.sampling_top_p,
                            max_tokens=cfg.sampling_max_tokens, min_tokens=cfg.sampling_min_tokens,
                            stop=tuple(cfg.stop), n=cfg.group_size, seed=cfg.seed * 1_000_003 + step)
    model.eval()
    rollouts = engine.generate([q["prompt"] for q in questions], params)
    seconds = time.perf_counter() - t0
    if len(rollouts) != cfg.rollout_batch_size:
        raise RuntimeError(f"the engine returned {len(rollouts)} rollouts, expected {cfg.rollout_batch_size}")
    responses = [r.text if r.text else (tokenizer.eos_token or "") for r in rollouts]
    gold = [q["ground_truth"] for q in questions for _ in range(cfg.group_size)]
    prompts = [q["prompt"] for q in questions for _ in range(cfg.group_size)]
    advantages, raw_rewards, reward_meta = advantage_fn(
        once_per_pair(reward_fn), responses, gold, cfg.group_size, cfg.advantage_eps, cfg.use_std_normalization)
    device = next(model.parameters()).device
    tensors = {k: v.to(device) for k, v in tokenize_fn(prompts, responses, tokenizer).items()}
    tensors["raw_rewards"] = raw_rewards.to(device).float()
    tensors["advantages"] = advantages.to(device).float()
    micro = cfg.train_batch_size // cfg.gradient_accumulation_steps
    temperature = cfg.sampling_temperature if cfg.sampling_temperature > 0 else 1.0
    if cfg.loss_type == "grpo_clip":  # the policy that sampled, before any update of this step
        # without a KL term, rows of advantage exactly 0 are never scored by the update (see
        # `grpo_train_step`): their old log-probs are not needed either
        needed = (tensors["advantages"] != 0).nonzero().flatten() if cfg.kl_coef == 0 else None
        tensors["old_log_probs"] = _score(model, tensors, micro, log_probs_fn, temperature, needed)
    if ref_model is not None:
        tensors["ref_log_probs"] = _score(ref_model, tensors, micro, log_probs_fn, temperature)
    return RolloutBatch(rollouts, tensors, reward_meta, seconds)


def _mean(values: list[float], empty: float) -> float:
    return sum(values) / len(values) if values else empty


def _step_record(step: int, batch: RolloutBatch, update: dict, lr: float, t0: float) -> dict:
    """One line of metrics.jsonl: the update's means, the rollouts' rewards and lengths, times."""
    rollouts, meta = batch.rollouts, batch.reward_meta
    lengths = [len(r.token_ids) for r in rollouts]
    record = {
        "kind": "train", "step": step,
        "loss": _mean(update["loss"], float("nan")),
        "grad_norm": _mean(update["grad_norm"], float("nan")),
        "token_entropy": _mean(update["token_entropy"], float("nan")),
        "clip_fraction": _mean(update["clip_fraction"], 0.0),
        "train_reward": meta.get("reward_mean", float(batch.tensors["raw_rewards"].mean())),
        "format_reward": meta.get("format_reward"),
        "answer_reward": meta.get("answer_reward"),
        "zero_std_group_fraction": meta.get("zero_std_group_fraction"),
        "response_length": sum(lengths) / len(lengths),
        "truncated_fraction": sum(r.finish_reason == "length" for r in rollouts) / len(rollouts),
        "lr": lr,
        "rollout_time": batch.rollout_seconds,
        "step_time": time.perf_counter() - t0,
    }
    if update["kl"]:
        record["kl"] = _mean(update["kl"], 0.0)
    return record


def frozen_copy(model: torch.nn.Module) -> torch.nn.Module:
    """The reference policy of the KL penalty: a copy of the starting policy, without gradients."""
    ref = copy.deepcopy(model).eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref


def train_grpo(
    config: GRPOConfig | dict | None = None,
    model: torch.nn.Module | None = None,
    tokenizer=None,
    train_data: list[dict] | None = None,
    eval_data: list[dict] | None = None,
    *,
    advantage_fn: Callable = compute_group_normalized_rewards,
    train_step_fn: Callable = grpo_microbatch_train_step,
    log_probs_fn: Callable = get_response_log_probs,
    tokenize_fn: Callable = tokenize_prompt_and_output,
    reward_fn: Callable = r1_zero_reward_fn,
    update_fn: Callable = grpo_train_step,
    engine=None,
    resume: bool = False,
    progress: bool = True,
    on_step: Callable[[dict], None] | None = None,
    **overrides,
) -> TrainResult:
    """Train `model` (or `config.model`) with GRPO; returns per-step metrics and the model.

    Args: as `train_sft`, plus the injectable `advantage_fn`, `train_step_fn`, `log_probs_fn`,
    `tokenize_fn` (the graded functions of notebooks 06, 07, 03 and 01), `update_fn` (the
    rollout batch's update, notebook 09) and an optional ready `engine` (default:
    `make_engine(config.engine, ...)`).
    """
    cfg = resolve_config("grpo", config, overrides)
    check_batch_sizes(cfg)
    set_seed(cfg.seed)
    if model is None:
        model, tokenizer = load_model_and_tokenizer(cfg)
    elif tokenizer is None:
        raise ValueError("pass the tokenizer together with the model")
    questions = grpo_questions(cfg, train_data)
    if eval_data is None:
        eval_data = eval_examples_for(cfg) if cfg.eval_examples != 0 else []
    n_prompts = cfg.rollout_batch_size // cfg.group_size
    opt_steps = cfg.n_grpo_steps * (cfg.rollout_batch_size // cfg.train_batch_size) * cfg.epochs_per_rollout_batch
    ref_model = frozen_copy(model) if cfg.kl_coef > 0 else None
    if cfg.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    optimizer = make_optimizer(model, cfg.lr, cfg.weight_decay, cfg.betas)
    scheduler = make_scheduler(optimizer, cfg.warmup_steps, opt_steps, min_lr_ratio=1.0)
    start_step = restore_checkpoint(cfg, resume, model, optimizer, scheduler)
    if engine is None:
        engine = make_engine(cfg.engine, model, tokenizer, **(cfg.engine_kwargs or {}))
    engine.load_weights(model)
    run = RunLog("grpo", cfg, cfg.n_grpo_steps, start_step, resume, cfg.output_dir, eval_data, progress, on_step)
    policy = TemperatureScaled(model, cfg.sampling_temperature if cfg.sampling_temperature > 0 else 1.0)

    def evaluate() -> dict:
        model.eval()
        return run_eval(model, tokenizer, cfg, eval_data, engine=engine)

    for step in range(start_step, cfg.n_grpo_steps):
        t0 = time.perf_counter()
        # a fixed, seeded question order: the run is a function of the step number
        batch_q = [questions[i] for i in data_indices(len(questions), cfg.seed, step * n_prompts, n_prompts)]
        batch = collect_rollouts(engine, model, tokenizer, batch_q, cfg, step, advantage_fn=advantage_fn,
                                 reward_fn=reward_fn, tokenize_fn=tokenize_fn, log_probs_fn=log_probs_fn,
                                 ref_model=ref_model)
        model.train()
        update = update_fn(policy, optimizer, batch.tensors, cfg.loss_type, cfg.train_batch_size,
                           cfg.gradient_accumulation_steps, cfg.epochs_per_rollout_batch, cfg.cliprange,
                           cfg.max_grad_norm, cfg.kl_coef, scheduler, log_probs_fn, train_step_fn)
        for loss, norm in zip(update["loss"], update["grad_norm"]):
            check_finite(loss, "loss", step + 1, cfg.output_dir)
            check_finite(norm, "gradient norm", step + 1, cfg.output_dir)
        engine.load_weights(model)
        record = _step_record(step + 1, batch, update, scheduler.get_last_lr()[0], t0)
        run.end_step(step + 1, record, evaluate,
                     checkpoint_saver(cfg.output_dir, step + 1, model, tokenizer, optimizer, scheduler, cfg, "grpo",
                                      (step + 1) * n_prompts),
                     reward=f"{record['train_reward']:.3f}", len=f"{record['response_length']:.0f}")
    return run.finish(model, tokenizer)

"""GRPO on questions with final answers only, from the reference functions (CS336's knobs).

    for step in 1 .. n_grpo_steps:
        questions  = next rollout_batch_size / group_size questions
        rollouts   = engine.generate(prompts, SamplingParams(T, min/max tokens, stop "</answer>", n=group_size))
        A, r, meta = advantage_fn(r1_zero_reward_fn, responses, answers, group_size, eps, use_std)
        old_logp   = log-probs of the rollouts under the policy that sampled them (grpo_clip / off-policy)
        for epoch in 1 .. epochs_per_rollout_batch:            # 1 = on-policy
            for each train batch of train_batch_size rollouts:
                for each micro-batch:
                    logp = log_probs_fn(policy / T, ...)
                    [kl_coef * k3(logp, ref_logp)].backward()       # optional KL to the start policy
                    train_step_fn(logp, mask, gas, loss_type, r, A, old_logp, cliprange)
                clip grad norm to 1.0; AdamW step
        engine.load_weights(policy)                              # vLLM holds its own copy

Why logits / T: rollouts sampled at temperature T come from softmax(logits / T). The policy-
gradient estimate grad E_{o~pi}[A] = E[A grad log pi(o)] needs log pi of that same
distribution. Scoring with raw logits would make the old, new and reference log-probs those of
the T = 1 policy: on-policy the importance ratio pi/pi_old would be computed against a policy
nobody sampled from, the clip would act on the wrong ratio, and the gradient would push a
different distribution than the one whose rewards were measured. So sampling and scoring share
one temperature, here and in the engines (`course_lib.config.TemperatureScaled`).

Simplifications, named: the reward is the r1_zero answer reward (format alone earns nothing);
responses are re-tokenized from their text with `tokenize_fn` (as CS336 does), so the scored
ids are those of the text; the reference policy for KL is the starting policy, frozen; with the
HF engine the policy itself samples (no weight copy), with vLLM the weights are synced after
every optimizer step.
"""

from __future__ import annotations

import time
from typing import Callable

import torch

from .checkpoint import MetricsLog, restore_checkpoint, save_checkpoint, write_run_config
from .config import GRPOConfig, TemperatureScaled, load_model_and_tokenizer, set_seed
from .grpo import LOSS_TYPES, compute_group_normalized_rewards, grpo_microbatch_train_step
from .gsm8k import gsm8k_to_r1_zero, load_problems
from .kl import kl_k3
from .logprobs import get_response_log_probs
from .masking import masked_mean
from .rewards import r1_zero_reward_fn
from .rollouts import SamplingParams, make_engine
from .sft_trainer import (
    TrainResult,
    check_finite,
    data_indices,
    eval_examples_for,
    make_optimizer,
    make_scheduler,
    maybe_progress,
    resolve_config,
    run_eval,
    save_final,
)
from .tokenization import tokenize_prompt_and_output


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
    if problems is None:
        problems = load_problems(cfg.data, cfg.train_split)
    examples = [p if "prompt" in p and "ground_truth" in p else gsm8k_to_r1_zero(p) for p in problems]
    if cfg.n_questions is not None:
        examples = examples[: cfg.n_questions]
    if not examples:
        raise ValueError("no GRPO questions (check n_questions and the data split)")
    return examples


@torch.no_grad()
def _score(model, batches, log_probs_fn, temperature) -> list[torch.Tensor]:
    scored = TemperatureScaled(model, temperature)
    return [log_probs_fn(scored, b["input_ids"], b["labels"])["log_probs"].detach() for b in batches]


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
    engine=None,
    resume: bool = False,
    progress: bool = True,
    on_step: Callable[[dict], None] | None = None,
    **overrides,
) -> TrainResult:
    """Train `model` (or `config.model`) with GRPO; returns per-step metrics and the model.

    Args: as `train_sft`, plus the injectable `advantage_fn`, `train_step_fn`, `log_probs_fn`
    (the graded functions of notebooks 06, 07 and 03) and an optional ready `engine`
    (default: `make_engine(config.engine, ...)`).
    """
    cfg = resolve_config("grpo", config, overrides)
    check_batch_sizes(cfg)
    set_seed(cfg.seed)
    if model is None:
        model, tokenizer = load_model_and_tokenizer(cfg)
    elif tokenizer is None:
        raise ValueError("pass the tokenizer together with the model")
    device = next(model.parameters()).device
    questions = grpo_questions(cfg, train_data)
    if eval_data is None:
        eval_data = eval_examples_for(cfg) if cfg.eval_examples != 0 else []

    n_prompts = cfg.rollout_batch_size // cfg.group_size
    micro = cfg.train_batch_size // cfg.gradient_accumulation_steps
    opt_steps_per_rollout = cfg.rollout_batch_size // cfg.train_batch_size
    total_opt_steps = cfg.n_grpo_steps * opt_steps_per_rollout * cfg.epochs_per_rollout_batch
    need_old = cfg.loss_type == "grpo_clip"
    temperature = cfg.sampling_temperature if cfg.sampling_temperature > 0 else 1.0

    ref_model = None
    if cfg.kl_coef > 0:
        import copy

        ref_model = copy.deepcopy(model).eval()
        for p in ref_model.parameters():
            p.requires_grad_(False)
    if cfg.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    optimizer = make_optimizer(model, cfg.lr, cfg.weight_decay, cfg.betas)
    scheduler = make_scheduler(optimizer, cfg.warmup_steps, total_opt_steps, min_lr_ratio=1.0)

    start_step = restore_checkpoint(cfg, resume, model, optimizer, scheduler)
    if engine is None:
        engine = make_engine(cfg.engine, model, tokenizer, **(cfg.engine_kwargs or {}))
    engine.load_weights(model)
    log = MetricsLog(cfg.output_dir, resume_step=start_step if resume else None)
    if cfg.output_dir:
        write_run_config(cfg.output_dir, "grpo", cfg)

    evals: list[dict] = [r for r in log.records if r.get("kind") == "eval"]
    t_start = time.perf_counter()
    bar = maybe_progress(cfg.n_grpo_steps, start_step, "grpo", progress)
    for step in range(start_step, cfg.n_grpo_steps):
        t0 = time.perf_counter()
        # 1. rollouts: a fixed, seeded question order and a per-step sampling seed, so the run
        #    is a function of the step number (and a resumed run repeats it exactly)
        idx = data_indices(len(questions), cfg.seed, step * n_prompts, n_prompts)
        batch_q = [questions[i] for i in idx]
        params = SamplingParams(temperature=cfg.sampling_temperature, top_p=cfg.sampling_top_p,
                                max_tokens=cfg.sampling_max_tokens, min_tokens=cfg.sampling_min_tokens,
                                stop=tuple(cfg.stop), n=cfg.group_size, seed=cfg.seed * 1_000_003 + step)
        model.eval()
        rollouts = engine.generate([q["prompt"] for q in batch_q], params)
        t_rollout = time.perf_counter() - t0
        if len(rollouts) != cfg.rollout_batch_size:
            raise RuntimeError(f"the engine returned {len(rollouts)} rollouts, expected {cfg.rollout_batch_size}")
        # an empty response (end-of-text sampled first) is scored as that end-of-text token, so
        # that its mask is not empty (a mean over no tokens is NaN)
        responses = [r.text if r.text else (tokenizer.eos_token or "") for r in rollouts]
        gold = [q["ground_truth"] for q in batch_q for _ in range(cfg.group_size)]
        prompts = [q["prompt"] for q in batch_q for _ in range(cfg.group_size)]

        # 2. rewards and group-normalised advantages
        advantages, raw_rewards, reward_meta = advantage_fn(
            reward_fn, responses, gold, cfg.group_size, cfg.advantage_eps, cfg.use_std_normalization)
        advantages = advantages.to(device).float()
        raw_rewards = raw_rewards.to(device).float()

        # 3. tokenize once per micro-batch; old and reference log-probs before any update
        n_micro = cfg.rollout_batch_size // micro
        batches = []
        for m in range(n_micro):
            sl = slice(m * micro, (m + 1) * micro)
            b = tokenize_fn(prompts[sl], responses[sl], tokenizer)
            batches.append({k: v.to(device) for k, v in b.items()})
        old_lp = _score(model, batches, log_probs_fn, temperature) if need_old else None
        ref_lp = _score(ref_model, batches, log_probs_fn, temperature) if ref_model is not None else None

        # 4. policy updates
        model.train()
        scored = TemperatureScaled(model, temperature)
        losses, grad_norms, entropies, clip_fracs, kls = [], [], [], [], []
        gas = cfg.gradient_accumulation_steps
        for _epoch in range(cfg.epochs_per_rollout_batch):
            for opt_step in range(opt_steps_per_rollout):
                step_loss = 0.0
                for g in range(gas):
                    m = opt_step * gas + g
                    b = batches[m]
                    sl = slice(m * micro, (m + 1) * micro)
                    out = log_probs_fn(scored, b["input_ids"], b["labels"], return_token_entropy=True)
                    logp, mask = out["log_probs"], b["response_mask"]
                    if out.get("token_entropy") is not None:
                        entropies.append(float(masked_mean(out["token_entropy"], mask)))
                    if ref_lp is not None:
                        kl = masked_mean(kl_k3(logp, ref_lp[m]), mask, dim=-1).mean()
                        (cfg.kl_coef * kl / gas).backward(retain_graph=True)
                        kls.append(float(kl.detach()))
                        step_loss += float(cfg.kl_coef * kl.detach() / gas)
                    loss, meta = train_step_fn(
                        logp, mask, gas, cfg.loss_type,
                        raw_rewards=raw_rewards[sl, None], advantages=advantages[sl, None],
                        old_log_probs=old_lp[m] if old_lp is not None else None,
                        cliprange=cfg.cliprange)
                    loss_value = float(loss)
                    check_finite(loss_value, "loss", step + 1, cfg.output_dir)
                    step_loss += loss_value
                    if "clip_fraction" in meta:
                        clip_fracs.append(float(meta["clip_fraction"]))
                grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm))
                check_finite(grad_norm, "gradient norm", step + 1, cfg.output_dir)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                losses.append(step_loss)
                grad_norms.append(grad_norm)
        engine.load_weights(model)

        lengths = [len(r.token_ids) for r in rollouts]
        record = {
            "kind": "train", "step": step + 1,
            "loss": sum(losses) / len(losses),
            "grad_norm": sum(grad_norms) / len(grad_norms),
            "token_entropy": sum(entropies) / len(entropies) if entropies else float("nan"),
            "clip_fraction": sum(clip_fracs) / len(clip_fracs) if clip_fracs else 0.0,
            "train_reward": reward_meta.get("reward_mean", float(raw_rewards.mean())),
            "format_reward": reward_meta.get("format_reward"),
            "answer_reward": reward_meta.get("answer_reward"),
            "zero_std_group_fraction": reward_meta.get("zero_std_group_fraction"),
            "response_length": sum(lengths) / len(lengths),
            "truncated_fraction": sum(r.finish_reason == "length" for r in rollouts) / len(rollouts),
            "lr": scheduler.get_last_lr()[0],
            "rollout_time": t_rollout,
            "step_time": time.perf_counter() - t0,
        }
        if kls:
            record["kl"] = sum(kls) / len(kls)
        done = step + 1 == cfg.n_grpo_steps
        if eval_data and ((cfg.eval_every and (step + 1) % cfg.eval_every == 0) or done):
            model.eval()
            res = run_eval(model, tokenizer, cfg, eval_data, engine=engine)
            ev = {"kind": "eval", "step": step + 1, **res}
            evals.append(ev)
            log.log(ev)
        log.log(record)
        if on_step is not None:
            on_step(record)
        bar.set_postfix(reward=f"{record['train_reward']:.3f}", len=f"{record['response_length']:.0f}")
        bar.update(1)
        if cfg.output_dir and ((cfg.checkpoint_every and (step + 1) % cfg.checkpoint_every == 0) or done):
            save_checkpoint(cfg.output_dir, step + 1, model, tokenizer, optimizer, scheduler,
                            extra={"data_position": (step + 1) * n_prompts, "kind": "grpo"},
                            keep=cfg.keep_checkpoints)
    bar.close()
    if cfg.gradient_checkpointing:
        model.gradient_checkpointing_disable()
    model.eval()
    if cfg.output_dir:
        save_final(model, tokenizer, cfg.output_dir)
    return TrainResult(model=model, tokenizer=tokenizer, metrics=log.records, eval=evals[-1] if evals else None,
                       evals=evals, output_dir=cfg.output_dir, steps=cfg.n_grpo_steps,
                       seconds=time.perf_counter() - t_start)

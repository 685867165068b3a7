"""Train/inference mismatch (notebook 15): the log-probs an inference engine reports for its own
samples are not the ones the trainer computes for the same tokens (other kernels, another
precision, a sampler that truncates the distribution), so "on-policy" GRPO is off-policy.

With d = log pi_train(o_t) - log pi_rollout(o_t) on the response tokens:

- `mismatch_report`: how large the mismatch is (the signed mean alone hides it: it is about 0
  when the two engines disagree both ways), per token and per sequence;
- `sampler_log_probs`: the log-prob of a token under the distribution a sampler really draws
  from (temperature, then top-k, then top-p, as vLLM applies them);
- `importance_weights`: truncated or masked importance weights pi_train / pi_rollout, per token
  or per sequence;
- `corrected_grpo_loss`: the GRPO-clip loss with those weights (truncated / masked importance
  sampling, Yao et al. 2025, "Your efficient RL framework secretly brings you off-policy RL
  training").
"""

from __future__ import annotations

import torch

from .grpo import compute_grpo_clip_loss

MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")
AGGREGATES = ("sum", "mean")


def _response_mask(train_log_probs: torch.Tensor, rollout_log_probs: torch.Tensor,
                   response_mask: torch.Tensor) -> torch.Tensor:
    """The mask as bool, once the three (B, T) shapes agree and the mask holds only 0 and 1."""
    if train_log_probs.shape != rollout_log_probs.shape:
        raise ValueError(f"train_log_probs has shape {tuple(train_log_probs.shape)} and rollout_log_probs "
                         f"{tuple(rollout_log_probs.shape)}: they must have the same shape")
    if train_log_probs.dim() != 2:
        raise ValueError(f"train_log_probs must be (B, T), got shape {tuple(train_log_probs.shape)}")
    if response_mask.shape != train_log_probs.shape:
        raise ValueError(f"response_mask has shape {tuple(response_mask.shape)} and the log-probs "
                         f"{tuple(train_log_probs.shape)}: they must have the same shape")
    if not bool(((response_mask == 0) | (response_mask == 1)).all()):
        raise ValueError("response_mask must hold only 0 and 1 (1 on response tokens)")
    return response_mask.bool()


def mismatch_report(train_log_probs: torch.Tensor, rollout_log_probs: torch.Tensor,
                    response_mask: torch.Tensor) -> dict[str, torch.Tensor]:
    """Statistics of d = train_log_probs - rollout_log_probs over the response tokens.

    train_log_probs, rollout_log_probs: (B, T) floating; response_mask: (B, T) bool or 0/1.
    Positions where the mask is 0 are never read (they may hold anything). With r = exp(d):

        mean_diff = mean(d)   mean_abs = mean(|d|)   std_abs = std(|d|) (unbiased: NaN for 1 token)
        p95_abs = quantile(|d|, 0.95) (linear)   max_abs = max(|d|)
        frac_outside = mean(r < 0.9 or r > 1.1)
        mean_k3 = mean(r - log r - 1) = mean(expm1(d) - d): the tokens come from the rollout engine,
                  so this estimates KL(pi_rollout || pi_train)
        seq_log_ratio[b] = sum_t d[b, t] over row b's response tokens   (B,); 0 for a row without one
        seq_quantiles = quantile(seq_log_ratio, (0.05, 0.5, 0.95)) over the rows that have a
                  response token (a row without one has no sequence to compare)   (3,)

    Each is a 0-dim tensor (but the two shapes said) of the log-probs' (promoted) dtype; the
    inputs are left unchanged.

    Raises:
        ValueError: log-probs of two shapes (the message names both), or not (B, T).
        ValueError: a response_mask of another shape than the log-probs.
        ValueError: a mask that holds anything but 0 and 1.
        ValueError: a mask without a response token.
    """
    m = _response_mask(train_log_probs, rollout_log_probs, response_mask)
    if not bool(m.any()):
        raise ValueError("response_mask has no response token: there is nothing to compare")
    diff = train_log_probs - rollout_log_probs
    d = diff[m]
    a = d.abs()
    r = torch.exp(d)
    seq = torch.where(m, diff, torch.zeros_like(diff)).sum(dim=-1)
    q = torch.tensor([0.05, 0.5, 0.95], dtype=d.dtype)
    return {
        "mean_diff": d.mean(),
        "mean_abs": a.mean(),
        "std_abs": a.std(),
        "p95_abs": torch.quantile(a, 0.95),
        "max_abs": a.max(),
        "frac_outside": ((r < 0.9) | (r > 1.1)).to(d.dtype).mean(),
        "mean_k3": (torch.expm1(d) - d).mean(),
        "seq_log_ratio": seq,
        "seq_quantiles": torch.quantile(seq[m.any(dim=-1)], q),
    }


def sampler_log_probs(logits: torch.Tensor, tokens: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                      top_p: float | None = None, renormalize: bool = True) -> torch.Tensor:
    """log p(token) under the distribution a sampler draws from: logits (..., V), tokens (...) -> (...).

        z = logits / temperature; keep every z at least the top_k-th largest (None or 0: all);
        then, among those, by probability of softmax over the kept z in descending order, keep a
        token iff the sum of the probabilities strictly before it is < top_p (None or 1.0: all;
        the most likely is always kept); log p = log_softmax over the kept z, -inf outside
        (renormalize=True), or log_softmax(z) over the whole vocabulary (renormalize=False: what
        a trainer that ignores the truncation computes; the kept set then does not matter).

    Top-k before top-p, as vLLM applies them. A tie at the k-th place is kept whole (top_k 3 of
    z = 3, 2, 1, 1, 0 keeps four tokens), as vLLM's and Hugging Face's samplers keep it; where a
    cumulative probability equals top_p within rounding the kept set is undefined (no hidden case
    has one). Any leading shape ((V,) logits and 0-dim tokens too); the log-probs are in the
    logits' dtype (float32, float64 or bfloat16 logits give float32, float64 or bfloat16
    log-probs); the inputs are left unchanged.

    Raises:
        ValueError: temperature <= 0.
        ValueError: top_k < 0 or > V.
        ValueError: top_p outside (0, 1].
        ValueError: tokens whose shape is not logits.shape[:-1].
    """
    V = logits.shape[-1]
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if top_k is not None and not 0 <= top_k <= V:
        raise ValueError(f"top_k must be None or in 0 .. V = {V}, got {top_k}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p must be None or in (0, 1], got {top_p}")
    if tokens.shape != logits.shape[:-1]:
        raise ValueError(f"tokens has shape {tuple(tokens.shape)}, logits {tuple(logits.shape)}: tokens must "
                         f"have the shape of logits without its last dim")
    z = logits / temperature
    if renormalize:
        keep = torch.ones_like(z, dtype=torch.bool)
        if top_k:
            keep = z >= z.topk(top_k, dim=-1).values[..., -1:]
        if top_p is not None and top_p < 1:
            probs = torch.softmax(z.masked_fill(~keep, float("-inf")), dim=-1)
            sorted_probs, order = probs.sort(dim=-1, descending=True)
            before = torch.cat([torch.zeros_like(sorted_probs[..., :1]), sorted_probs.cumsum(-1)[..., :-1]], -1)
            keep = keep & torch.zeros_like(keep).scatter(-1, order, before < top_p)
        z = z.masked_fill(~keep, float("-inf"))
    return torch.log_softmax(z, dim=-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)


def importance_weights(train_log_probs: torch.Tensor, rollout_log_probs: torch.Tensor, response_mask: torch.Tensor,
                       mode: str, cap: float, aggregate: str = "sum") -> torch.Tensor:
    """Truncated or masked importance weights pi_train / pi_rollout: (B, T) x3 -> (B, T), detached.

        token_*:    log w[b, t] = train[b, t] - rollout[b, t]
        sequence_*: log w[b, t] = sum_t' (train - rollout)[b, t'] over row b's response tokens
                    (aggregate="mean": divided by their count), the same for every token of the row
        *_truncate: w = min(exp(log w), cap)        *_mask: w = exp(log w) if it is <= cap, else 0

    and w = 0 where response_mask is 0 (positions there are never read). The log-ratio is summed in
    the inputs' dtype and exponentiated after: a sum that overflows exp gives cap (truncate) or 0
    (mask), never inf or NaN. The weights are constants of the loss: the result is detached (no
    gradient flows into either log-prob). `aggregate` matters for the sequence modes only. The
    mask is bool or 0/1 of an int or float dtype; the result is in the log-probs' dtype, and the
    inputs are left unchanged.

    Raises:
        ValueError: an unknown mode.
        ValueError: an unknown aggregate.
        ValueError: cap <= 0.
        ValueError: shapes that differ (all three are (B, T)), or a mask that holds anything but 0 and 1.
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
    if aggregate not in AGGREGATES:
        raise ValueError(f"unknown aggregate {aggregate!r}; expected one of {', '.join(AGGREGATES)}")
    if not cap > 0:
        raise ValueError(f"cap must be > 0, got {cap}")
    m = _response_mask(train_log_probs, rollout_log_probs, response_mask)
    diff = (train_log_probs - rollout_log_probs).detach()
    zero = torch.zeros_like(diff)
    log_w = torch.where(m, diff, zero)
    if mode.startswith("sequence"):
        log_w = log_w.sum(dim=-1, keepdim=True)
        if aggregate == "mean":
            log_w = log_w / m.sum(dim=-1, keepdim=True).clamp(min=1)
        log_w = log_w.expand_as(diff)
    ratio = torch.exp(log_w)
    w = ratio.clamp(max=cap) if mode.endswith("truncate") else torch.where(ratio <= cap, ratio, zero)
    return torch.where(m, w, zero)


def corrected_grpo_loss(advantages: torch.Tensor, policy_log_probs: torch.Tensor, old_log_probs: torch.Tensor,
                        rollout_log_probs: torch.Tensor, response_mask: torch.Tensor, cliprange: float, mode: str,
                        cap: float, aggregate: str = "sum") -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """GRPO-clip loss of a micro-batch whose rollouts came from another engine, with truncated or
    masked importance weights (Yao et al. 2025); a scalar loss and metadata. No backward inside.

        w        = importance_weights(old_log_probs, rollout_log_probs, response_mask, mode, cap,
                   aggregate)                                            (B, T), constants
        ratio    = exp(policy - old);  l = -min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A)
        kept     = response_mask & (w > 0) for the "*_mask" modes, response_mask for "*_truncate"
        loss     = mean_b [ sum_t (w * l * kept)[b] / max(kept[b].sum(), 1) ]

    advantages: (B, 1) (or (B,)); policy_log_probs, old_log_probs, rollout_log_probs, response_mask:
    (B, T). A token the mask mode rejects leaves the denominator of its row; a row with no kept
    token contributes 0 and still counts in the mean over rows (a micro-batch where every token is
    rejected gives loss 0, still in the graph, and a zero gradient, never NaN). Positions where response_mask is 0 are
    never read in rollout_log_probs. The gradient flows into policy_log_probs (and old_log_probs
    through the ratio), never through w. Metadata: "weights" w (B, T); "kept_fraction" =
    kept.sum() / response_mask.sum() (0 for an empty mask); "clip_fraction": the fraction of kept
    tokens whose clipped term is strictly the smaller one (0 when none is kept). The loss, w and
    both fractions are tensors in the log-probs' dtype (the loss and the fractions 0-dim): float64
    log-probs give float64 fractions, not float32 ones or Python floats.

    Raises:
        ValueError: what importance_weights refuses (mode, aggregate, cap, shapes, mask).
        ValueError: policy_log_probs of another shape than old_log_probs.
    """
    if policy_log_probs.shape != old_log_probs.shape:
        raise ValueError(f"policy_log_probs has shape {tuple(policy_log_probs.shape)} and old_log_probs "
                         f"{tuple(old_log_probs.shape)}: they must have the same shape")
    w = importance_weights(train_log_probs=old_log_probs, rollout_log_probs=rollout_log_probs,
                           response_mask=response_mask, mode=mode, cap=cap, aggregate=aggregate)
    per_token, clip = compute_grpo_clip_loss(advantages, policy_log_probs, old_log_probs, cliprange)
    m = response_mask.bool()
    kept = m & (w > 0) if mode.endswith("mask") else m
    row_sums = torch.where(kept, w * per_token, torch.zeros_like(per_token)).sum(dim=-1)
    loss = (row_sums / kept.sum(dim=-1).clamp(min=1)).mean()
    n_kept = kept.sum().to(loss.dtype)
    metadata = {
        "weights": w,
        "kept_fraction": n_kept / m.sum().clamp(min=1).to(loss.dtype),
        "clip_fraction": (clip["clipped"] & kept).sum().to(loss.dtype) / n_kept.clamp(min=1),
    }
    return loss, metadata

"""Tools of notebook 15's mismatch atlas: the same sampled tokens scored two ways.

The trainer scores a rollout with a full forward of a right-padded batch (`full_forward`, through
`get_response_log_probs`); an inference engine scored it while it sampled, with a KV cache, in its
own precision and batch shape. Each tool here returns per-token log-probs laid out like the
trainer's labels, so that `course_lib.mismatch.mismatch_report` compares them position by position:

- `batch_of`: the trainer's batch, built from the token ids (never from re-tokenized text, which
  need not give back the ids sampled);
- `full_forward`, `scored_alone`: the trainer's forward, micro-batched or one sequence at a time;
- `kv_decode`: the fast engine's own decode path (its prefill and one-token steps) teacher-forced
  on the sampled tokens;
- `topp_log_probs`: a top-p sampler's log-probs, renormalised over the tokens it keeps;
- `sample`: rollouts of the fast engine with their prompt ids; `atlas_row`: a report as floats;
- `cosine`: the cosine similarity of two gradients, in float64 and never above 1.
"""

from __future__ import annotations

import torch

from ..logprobs import get_response_log_probs
from ..mismatch import mismatch_report, sampler_log_probs
from ..tokenization import tokenize_prompt_and_output


class _Tokenized:
    """A tokenizer for text that is token ids already: `tokenize_prompt_and_output` batches them as it
    batches what a tokenizer gives."""

    def __init__(self, pad: int):
        self.pad_token_id = pad

    def __call__(self, texts: list[list[int]], add_special_tokens: bool = False) -> dict:
        return {"input_ids": [list(ids) for ids in texts]}


def batch_of(prompt_ids: list[list[int]], response_ids: list[list[int]], pad: int, extra: int = 0) -> dict:
    """The trainer's batch of prompt + response ids, right-padded with `extra` more pad columns:
    input_ids and labels (B, T), labels the inputs shifted by one; response_mask (B, T) bool, True
    on the labels that are response tokens. Every response must hold a token.

    The batch is `tokenize_prompt_and_output`'s (notebook 01) of the ids as they are: the trainer's
    own padding, shift and mask, never a copy of them."""
    if any(not r for r in response_ids):
        raise ValueError("batch_of: an empty response has no token to score")
    batch = tokenize_prompt_and_output(prompt_ids, response_ids, _Tokenized(pad))
    if not extra:
        return batch
    rows = len(prompt_ids)
    full = torch.cat([batch["input_ids"], batch["labels"][:, -1:], torch.full((rows, extra), pad, dtype=torch.long)], 1)
    mask = torch.cat([batch["response_mask"], torch.zeros(rows, extra, dtype=torch.bool)], 1)
    return {"input_ids": full[:, :-1], "labels": full[:, 1:], "response_mask": mask}


@torch.no_grad()
def full_forward(model, batch: dict, micro: int = 32) -> torch.Tensor:
    """(B, T) float32 log-probs of the labels: the trainer's full forward, `micro` rows at a time."""
    return torch.cat([get_response_log_probs(model, batch["input_ids"][i : i + micro],
                                             batch["labels"][i : i + micro])["log_probs"].float()
                      for i in range(0, len(batch["input_ids"]), micro)])


@torch.no_grad()
def scored_alone(model, prompt_ids: list[list[int]], response_ids: list[list[int]], pad: int) -> torch.Tensor:
    """Each sequence scored in a batch of its own (no padding), laid out as `batch_of`'s labels."""
    out = torch.zeros(batch_of(prompt_ids, response_ids, pad)["labels"].shape)
    for i, (p, r) in enumerate(zip(prompt_ids, response_ids)):
        one = full_forward(model, batch_of([p], [r], pad))[0]
        out[i, : len(one)] = one
    return out


@torch.no_grad()
def kv_decode(model, tokenizer, prompt_ids: list[list[int]], response_ids: list[list[int]], rows: int = 64) -> torch.Tensor:
    """The fast engine's decode path teacher-forced on the sampled tokens: `FastEngine`'s prefill
    (left-padded prompts in its KV cache), then one token per step as it samples, each step's
    log-softmax read at the token that follows. (B, T) float32, laid out as `batch_of`'s labels."""
    from .fast_engine import FastEngine, _Network

    engine, net = FastEngine(model, tokenizer), _Network(model)
    device = next(model.parameters()).device
    out = torch.zeros(batch_of(prompt_ids, response_ids, tokenizer.pad_token_id)["labels"].shape)
    for s in range(0, len(prompt_ids), rows):
        ps, rs = prompt_ids[s : s + rows], response_ids[s : s + rows]
        steps = max(len(r) for r in rs)
        cache, logits, valid, positions, (cos, sin) = engine._prefill(net, ps, steps, device)
        width, next_pos = positions.shape[1], positions[:, -1] + 1
        for t in range(steps):
            lp = torch.log_softmax(logits.float(), dim=-1)
            for j, r in enumerate(rs):
                if t < len(r):
                    out[s + j, len(ps[j]) - 1 + t] = lp[j, r[t]]
            if t + 1 == steps:
                break
            live = torch.tensor([t + 1 < len(r) for r in rs])  # a row whose response has ended feeds a pad, unseen
            tokens = torch.tensor([r[t] if t + 1 < len(r) else tokenizer.pad_token_id for r in rs])
            valid[:, width + t] = live
            logits = net.forward(tokens[:, None], cos[next_pos][:, None], sin[next_pos][:, None], cache, width + t,
                                 valid[:, None, None, : width + t + 1])
            next_pos = next_pos + 1
    return out


@torch.no_grad()
def topp_log_probs(model, batch: dict, top_p: float, micro: int = 32) -> torch.Tensor:
    """(B, T) log-probs of the labels under a top-p sampler of `model` at temperature 1 (renormalised
    over the kept tokens), from the trainer's full forward."""
    return torch.cat([sampler_log_probs(model(batch["input_ids"][i : i + micro]).logits.float(),
                                        batch["labels"][i : i + micro], top_p=top_p, renormalize=True)
                      for i in range(0, len(batch["input_ids"]), micro)])


def sample(model, tokenizer, prompts: list[str], n: int, seed: int, top_p: float = 1.0, max_tokens: int = 100):
    """(rollouts, prompt ids) of the fast engine at temperature 1; empty responses left out."""
    from .interface import SamplingParams
    from .fast_engine import FastEngine

    params = SamplingParams(temperature=1.0, top_p=top_p, n=n, seed=seed, max_tokens=max_tokens)
    rollouts = [r for r in FastEngine(model, tokenizer).generate(prompts, params) if r.token_ids]
    return rollouts, tokenizer([r.prompt for r in rollouts], add_special_tokens=False)["input_ids"]


def atlas_row(train: torch.Tensor, other: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    """`mismatch_report(train, other, mask)` in float64 as plain floats (the sequence quantiles as
    seq_q05, seq_q50, seq_q95) and the number of tokens compared."""
    r = mismatch_report(train.double(), other.double(), mask)
    q05, q50, q95 = r["seq_quantiles"].tolist()
    out = {k: float(v) for k, v in r.items() if k not in ("seq_log_ratio", "seq_quantiles")}
    return {**out, "seq_q05": q05, "seq_q50": q50, "seq_q95": q95, "tokens": int(mask.sum())}


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    """The cosine similarity of two vectors (any shape, flattened; any floating dtype), computed in
    float64 as 1 - |a/|a| - b/|b||^2 / 2: never above 1, and exact near 1, where torch's float32
    `cosine_similarity` is not (for two gradients of the tiny model it gave 1.00017).
    0.0 when either vector is 0 (it has no direction; torch's `cosine_similarity` says 0 too).

    Raises:
        ValueError: vectors of different sizes.
    """
    a, b = a.detach().double().flatten(), b.detach().double().flatten()
    if a.numel() != b.numel():
        raise ValueError(f"cosine of vectors of {a.numel()} and {b.numel()} entries")
    na, nb = a.norm(), b.norm()
    if not (na > 0 and nb > 0):
        return 0.0
    return float(1.0 - 0.5 * (a / na - b / nb).pow(2).sum())


__all__ = ["atlas_row", "cosine", "batch_of", "full_forward", "kv_decode", "sample", "scored_alone", "topp_log_probs"]

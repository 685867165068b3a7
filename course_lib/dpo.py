"""DPO: preference learning from log-prob ratios, without sampling during training (notebook 12).

SFT fits fixed labels; GRPO and PPO sample a response and push its log-prob up or down by its
advantage (the score function). Direct Preference Optimization (Rafailov et al., 2023) needs
neither a reward model nor a sampler while it trains: from a pair of responses to one prompt,
one preferred (chosen, y_c) and one not (rejected, y_r), it fits the policy so that

    loss = -log sigmoid( beta * [ (log pi(y_c) - log ref(y_c)) - (log pi(y_r) - log ref(y_r)) ] )

where log pi(y) is the summed log-prob of the response tokens given the prompt, and ref a frozen
copy of the starting policy. beta * (log pi(y) - log ref(y)) is the *implicit reward* of y; the
loss is the logistic loss of the Bradley-Terry model on the implicit rewards' margin.

Pairs: on-policy (two sampled responses to one question, one graded correct, one wrong) and
off-policy (a gold solution against the same solution with its final answer changed).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .gsm8k import format_r1_zero_prompt
from .logprobs import get_response_log_probs
from .tokenization import tokenize_prompt_and_output


def sequence_log_probs(model: torch.nn.Module, input_ids: torch.Tensor, labels: torch.Tensor,
                       response_mask: torch.Tensor, average: bool = False) -> torch.Tensor:
    """The log-prob of each response under `model`: the sum over its tokens (the mean when `average`).

        log pi(y | x) = sum_t mask_t * log pi(labels_t | input_ids_<=t)

    Args:
        model: a causal LM whose forward returns `.logits` (B, T, V).
        input_ids, labels: (B, T) as `tokenize_prompt_and_output` makes them (labels shifted by one).
        response_mask: (B, T), 1 on the response tokens' label positions; prompt and padding 0
            (their log-probs never count, however low); bool or 0/1 of an int or float dtype.
        average: divide each row's sum by its number of response tokens (a length-normalised
            score, as SimPO and some DPO variants use; DPO itself uses the sum).
    Returns:
        (B,) float32 at least (float64 for a float64 model), differentiable with respect to the
        model's parameters.
    Raises:
        ValueError: response_mask of another shape than labels (also one torch would broadcast).
        ValueError: a row with no response token.
    """
    if response_mask.shape != labels.shape:
        raise ValueError(f"response_mask has shape {tuple(response_mask.shape)}, labels {tuple(labels.shape)}")
    counts = response_mask.sum(dim=-1)
    if bool((counts == 0).any()):
        row = int((counts == 0).nonzero()[0, 0])
        raise ValueError(f"response_mask: row {row} has no response token (an empty response has no log-prob)")
    log_probs = get_response_log_probs(model, input_ids, labels)["log_probs"]  # (B, T)
    # torch.where, not log_probs * mask: a padding position's log-prob never enters the sum
    total = torch.where(response_mask.bool(), log_probs, torch.zeros_like(log_probs)).sum(dim=-1)
    return total / counts.to(total.dtype) if average else total


def dpo_loss(policy_chosen_log_probs: torch.Tensor, policy_rejected_log_probs: torch.Tensor,
             ref_chosen_log_probs: torch.Tensor, ref_rejected_log_probs: torch.Tensor,
             beta: float) -> tuple[torch.Tensor, dict]:
    """The DPO loss of a batch of pairs from their four (B,) sequence log-probs.

        chosen_rewards = beta * (pi_c - ref_c),   rejected_rewards = beta * (pi_r - ref_r)
        loss = mean_b -logsigmoid(chosen_rewards - rejected_rewards)

    logsigmoid, never log(sigmoid(x)): sigmoid(-800) is 0 in float32, and its log -inf, while
    logsigmoid(-800) = -800 exactly. The reference terms are data: no gradient reaches them, also
    when they require one. The loss is differentiable with respect to both policy inputs, in
    their dtype.

    Returns:
        (loss, metadata): loss a 0-dim tensor; metadata "chosen_rewards", "rejected_rewards"
        ((B,), detached), "reward_margin" (their mean difference) and "reward_accuracy" (the
        fraction of pairs with chosen_rewards > rejected_rewards, strictly: a tie is no win).
    Raises:
        ValueError: the four inputs not (B,) tensors of one shape (a (B, 1) input, a reference of
            another length, even one of length 1 that torch would broadcast).
        ValueError: beta <= 0.
    """
    named = {"policy_chosen_log_probs": policy_chosen_log_probs, "policy_rejected_log_probs": policy_rejected_log_probs,
             "ref_chosen_log_probs": ref_chosen_log_probs, "ref_rejected_log_probs": ref_rejected_log_probs}
    for name, t in named.items():
        if t.dim() != 1 or t.shape != policy_chosen_log_probs.shape:
            raise ValueError(f"{name} has shape {tuple(t.shape)}: the four log-prob tensors must be (B,) alike")
    if not beta > 0:
        raise ValueError(f"beta must be > 0, got {beta}")
    chosen = beta * (policy_chosen_log_probs - ref_chosen_log_probs.detach())
    rejected = beta * (policy_rejected_log_probs - ref_rejected_log_probs.detach())
    margins = chosen - rejected
    loss = -F.logsigmoid(margins).mean()
    margins = margins.detach()
    metadata = {"chosen_rewards": chosen.detach(), "rejected_rewards": rejected.detach(), "reward_margin": margins.mean(),
                "reward_accuracy": (margins > 0).to(margins.dtype).mean()}
    return loss, metadata


def compute_per_instance_dpo_loss(lm: torch.nn.Module, lm_ref: torch.nn.Module, tokenizer, beta: float,
                                  prompt: str, response_chosen: str, response_rejected: str) -> torch.Tensor:
    """The DPO loss of one preference pair (CS336's signature), on the policy's device.

    `prompt` is the question; it is put into the course's r1_zero template, and each response
    follows it with the tokenizer's eos token appended (the end of a response is part of what
    is preferred). The policy `lm` is scored with gradients on its own device; the frozen
    reference `lm_ref` (every parameter requires_grad False) without gradients on *its* device,
    its log-probs moved to the policy's; it gets no gradient and is left unchanged. The two rows
    are padded to one length: padding never counts, and each response's log-prob is the sum over
    its tokens (eos included), not the mean.

    Returns:
        a 0-dim tensor: dpo_loss of the pair's four summed sequence log-probs, in their dtype (the
        models', float32 at least: float64 for float64 models), differentiable with respect to the
        policy's parameters.
    Raises:
        ValueError: lm_ref with a parameter that requires gradients.
        ValueError: a tokenizer without an eos token.
        ValueError: an empty response (chosen or rejected).
        ValueError: identical chosen and rejected responses.
    """
    if any(p.requires_grad for p in lm_ref.parameters()):
        raise ValueError("lm_ref requires gradients: freeze the reference (lm_ref.requires_grad_(False))")
    if tokenizer.eos_token is None:
        raise ValueError("tokenizer has no eos_token: DPO appends it to each response")
    for name, text in (("response_chosen", response_chosen), ("response_rejected", response_rejected)):
        if not text:
            raise ValueError(f"{name} is empty")
    if response_chosen == response_rejected:
        raise ValueError("response_chosen and response_rejected are identical: the pair prefers nothing")
    prompt_text = format_r1_zero_prompt(prompt)
    # row 0 the chosen response, row 1 the rejected one, each ended by eos; padding masked out
    batch = tokenize_prompt_and_output([prompt_text, prompt_text],
                                       [response_chosen + tokenizer.eos_token, response_rejected + tokenizer.eos_token],
                                       tokenizer)
    device = next(lm.parameters()).device
    ref_device = next(lm_ref.parameters()).device
    policy = sequence_log_probs(lm, **{k: v.to(device) for k, v in batch.items()})
    with torch.no_grad():
        ref = sequence_log_probs(lm_ref, **{k: v.to(ref_device) for k, v in batch.items()}).to(device)
    loss, _ = dpo_loss(policy_chosen_log_probs=policy[:1], policy_rejected_log_probs=policy[1:],
                       ref_chosen_log_probs=ref[:1], ref_rejected_log_probs=ref[1:], beta=beta)
    return loss

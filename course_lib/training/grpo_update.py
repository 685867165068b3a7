"""The GRPO trainer's update of one rollout batch: the graded `grpo_train_step`, packed.

`course_lib.grpo.grpo_train_step` (notebook 09) is the plain loop: every train batch of
`train_batch_size` consecutive rows is cut into k = gradient_accumulation_steps consecutive
micro-batches of train_batch_size / k rows, and every row is scored. `packed_grpo_train_step`,
the trainer's default `update_fn`, takes the same arguments and gives the same update, with
less work:

- **Rows of weight exactly 0 are left out.** The weight of a row's log-prob in the loss is its
  raw reward ("no_baseline") or its advantage (the other two). A row of weight exactly 0 has a
  per-token loss of exactly 0 (-0 * log pi for the REINFORCE losses, -min(ratio * 0,
  clip(ratio) * 0) for grpo_clip) and so a gradient of exactly 0, for every loss type, when there
  is no KL term. A group whose rewards are all equal gets advantage 0 (about half of the demo's
  groups): its rows are never scored, and the trainer does not score their old log-probs either.
- **The rest are packed by length.** The kept rows of a train batch are sorted by length
  (prompt + response) and cut into ceil(kept / micro) micro-batches of near-equal size, so that
  each is padded only to about its own longest row (`slice_micro_batch` cuts the columns after
  it). A micro-batch of m rows is passed train_batch_size / m as its accumulation, so that each
  row still weighs 1 / train_batch_size in its step: the sum over micro-batches is the plain
  loop's, added in another order (float rounding apart, the same gradient).
- **With a KL term no row is left out**: every row then has a gradient (the KL's); the rows are
  still packed by length. The KL's per-token term is a keyword of its own (`kl_term`, default
  k3 as in the graded step; `training/kl_penalty.py` holds the others).
- **A step with nothing left still steps the optimizer**, on zero gradients, as the plain loop
  does: AdamW moves the weights on its momentum and weight decay even then.

`tests/test_grpo_update.py` holds it equal to `grpo_train_step`, parameter for parameter in
float64, for every loss type, with rows of weight 0, a KL term and an all-skipped step.

Being the graded update, packed, it is a *twin* of `grpo_train_step` (`autograder.student_view`):
a student kit, and the grader's sandbox, stub it while notebook 09 is open, and the trainer then
runs the plain loop in its place (`plain_where_stubbed`).

**The mismatch correction** (notebook 15) is a micro-batch step, `CorrectedStep`: passed as
`train_step_fn`, it trains the graded `corrected_grpo_loss` (importance weights between the
trainer's old log-probs and the sampler's) instead of the plain loss. The rollout batch then
carries the sampler's per-token log-probs, "rollout_log_probs" (N, T), laid out as
"old_log_probs"; the update hands each micro-batch's slice to the step by keyword, and only when
the batch holds them, so a batch without them calls the step exactly as before.
`tests/test_is_correction.py` holds the corrected step equal to the plain grpo_clip step where
every weight is 1.
"""

from __future__ import annotations

from typing import Callable

import torch

from ..grpo import _check_rollout_batch, _k3_per_token, grpo_microbatch_train_step, grpo_train_step, slice_micro_batch
from ..logprobs import get_response_log_probs
from ..masking import masked_mean
from ..mismatch import AGGREGATES, MODES, corrected_grpo_loss


def check_correction(is_correction: str | None, is_cap: float, is_aggregate: str) -> None:
    """The correction's settings (`GRPOConfig`'s is_correction, is_cap, is_aggregate), each refused by name."""
    if is_correction is not None and is_correction not in MODES:
        raise ValueError(f"is_correction {is_correction!r} is not None or one of {', '.join(MODES)}")
    if isinstance(is_cap, bool) or not isinstance(is_cap, (int, float)) or not is_cap > 0:
        raise ValueError(f"is_cap must be a number > 0, got {is_cap!r}")
    if is_aggregate not in AGGREGATES:
        raise ValueError(f"is_aggregate {is_aggregate!r} is not one of {', '.join(AGGREGATES)}")


class CorrectedStep:
    """A micro-batch step (`train_step_fn`) that trains `loss_fn` (default the graded `corrected_grpo_loss`;
    notebook 15 passes the student's) with importance weights between the old and the sampler's log-probs:

        loss = corrected_grpo_loss(A, policy, old, rollout, mask, cliprange, mode, cap, aggregate)
               / gradient_accumulation_steps,   backpropagated

    policy_log_probs, old_log_probs, rollout_log_probs, response_mask: (B, T); advantages (B, 1). The
    arguments are `grpo_microbatch_train_step`'s plus rollout_log_probs; grpo_clip only (the loss is the
    clip loss). Returns (the scaled loss, detached; the loss's metadata: "weights", "kept_fraction",
    "clip_fraction")."""

    def __init__(self, mode: str, cap: float, aggregate: str = "sum", loss_fn: Callable = corrected_grpo_loss):
        check_correction(mode, cap, aggregate)
        if mode is None:
            raise ValueError("is_correction must name a mode for a corrected step, got None")
        self.mode, self.cap, self.aggregate, self.loss_fn = mode, cap, aggregate, loss_fn

    def __call__(self, policy_log_probs, response_mask, gradient_accumulation_steps, loss_type, raw_rewards=None,
                 advantages=None, old_log_probs=None, cliprange=None, rollout_log_probs=None):
        if loss_type != "grpo_clip":
            raise ValueError(f"is_correction trains the clip loss: loss_type must be 'grpo_clip', not {loss_type!r}")
        if old_log_probs is None or rollout_log_probs is None:
            raise ValueError("is_correction needs the batch's old_log_probs and rollout_log_probs (the sampler's)")
        loss, meta = self.loss_fn(advantages=advantages, policy_log_probs=policy_log_probs,
                                  old_log_probs=old_log_probs, rollout_log_probs=rollout_log_probs,
                                  response_mask=response_mask, cliprange=cliprange, mode=self.mode, cap=self.cap,
                                  aggregate=self.aggregate)
        loss = loss / gradient_accumulation_steps  # each micro-batch's share of its optimizer step, as the plain step
        loss.backward()
        return loss.detach(), meta


def micro_batch_rows(rollout_batch: dict[str, torch.Tensor], first: int, train_batch_size: int, micro: int,
                     weight_key: str) -> list[torch.Tensor]:
    """Row indices of the packed micro-batches of the train batch of rows first .. first+train_batch_size-1.

    The rows whose `weight_key` entry ("advantages" or "raw_rewards"; None: keep every row) is exactly 0 are left out;
    the rest are sorted by length (one past the last response token) and cut into
    ceil(kept / micro) micro-batches of near-equal size. May return no micro-batch at all.
    """
    rows = torch.arange(first, first + train_batch_size, device=rollout_batch["advantages"].device)
    if weight_key is not None:
        rows = rows[rollout_batch[weight_key][rows] != 0]
    if len(rows) == 0:
        return []
    mask = rollout_batch["response_mask"][rows]
    length = mask.shape[1] - mask.flip(-1).long().argmax(-1)  # one past the last response token
    rows = rows[length.argsort(stable=True)]
    return list(rows.tensor_split(-(-len(rows) // micro)))


def packed_grpo_train_step(
    policy: torch.nn.Module, optimizer: torch.optim.Optimizer, rollout_batch: dict[str, torch.Tensor],
    loss_type: str, train_batch_size: int, gradient_accumulation_steps: int, epochs_per_rollout_batch: int = 1,
    cliprange: float | None = None, max_grad_norm: float = 1.0, kl_coef: float = 0.0, scheduler=None,
    log_probs_fn=get_response_log_probs, train_step_fn=grpo_microbatch_train_step, *, kl_term=_k3_per_token,
) -> dict[str, list[float]]:
    """`grpo_train_step` with the rows of weight 0 left out and the rest packed by length (see above).

    Arguments and result as `course_lib.grpo.grpo_train_step`, except that "token_entropy" and
    "clip_fraction" have one entry per micro-batch *scored* (none for a step whose rows all
    have weight 0), and `kl_term`, the per-token KL term (policy_log_probs, ref_log_probs) ->
    (B, T) of the penalty when kl_coef > 0 (default k3, as the graded step; others:
    `training/kl_penalty.py`). With "rollout_log_probs" in the batch, each micro-batch's slice goes to
    `train_step_fn` by keyword (a `CorrectedStep`), and a step whose metadata holds "kept_fraction"
    adds that list (one entry per micro-batch scored).
    """
    n, k = rollout_batch["advantages"].shape[0], gradient_accumulation_steps
    _check_rollout_batch(n, train_batch_size, k, kl_coef, rollout_batch)
    micro = train_batch_size // k
    # with a KL term every row has a gradient (the KL's): none is left out
    weight_key = None if kl_coef > 0 else "raw_rewards" if loss_type == "no_baseline" else "advantages"
    out: dict[str, list[float]] = {"loss": [], "grad_norm": [], "token_entropy": [], "clip_fraction": [], "kl": []}
    for _epoch in range(epochs_per_rollout_batch):
        for step in range(n // train_batch_size):
            step_loss = 0.0
            batches = micro_batch_rows(rollout_batch, step * train_batch_size, train_batch_size, micro, weight_key)
            for rows in batches:
                mb = slice_micro_batch(rollout_batch, rows)
                accumulation = train_batch_size / len(rows)  # each row weighs 1 / train_batch_size
                scored = log_probs_fn(policy, mb["input_ids"], mb["labels"], return_token_entropy=True)
                log_probs, mask = scored["log_probs"], mb["response_mask"]
                if scored.get("token_entropy") is not None:
                    out["token_entropy"].append(float(masked_mean(scored["token_entropy"], mask)))
                if kl_coef > 0:  # the penalty, each row weighing 1 / train_batch_size as in the policy-gradient loss
                    kl = masked_mean(kl_term(log_probs, mb["ref_log_probs"]), mask, dim=-1)
                    kl_loss = kl_coef * kl.sum() / train_batch_size
                    kl_loss.backward(retain_graph=True)  # the policy-gradient loss backprops through log_probs next
                    step_loss += float(kl_loss.detach())
                    out["kl"].append(float(kl.detach().mean()))
                # the sampler's log-probs reach the step only where the batch holds them (a corrected run)
                sampler = {"rollout_log_probs": mb["rollout_log_probs"]} if "rollout_log_probs" in mb else {}
                loss, meta = train_step_fn(log_probs, mask, accumulation, loss_type, raw_rewards=mb["raw_rewards"],
                                           advantages=mb["advantages"], old_log_probs=mb.get("old_log_probs"),
                                           cliprange=cliprange, **sampler)
                step_loss += float(loss)
                if "clip_fraction" in meta:
                    out["clip_fraction"].append(float(meta["clip_fraction"]))
                if "kept_fraction" in meta:  # a corrected step: the share of response tokens a mask mode kept
                    out.setdefault("kept_fraction", []).append(float(meta["kept_fraction"]))
            if not batches:  # every row left out: the gradient is exactly 0, and the optimizer still steps on it
                for p in (p for p in policy.parameters() if p.requires_grad):
                    p.grad = torch.zeros_like(p)
            out["grad_norm"].append(float(torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)))
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            out["loss"].append(step_loss)
    return out


def plain_where_stubbed(update_fn: Callable) -> Callable:
    """The update the GRPO trainer runs for `update_fn`: itself, except the packed update where it is a
    stub (a student kit while notebook 09 is open), for which the plain loop of this copy of the library
    runs, `course_lib.grpo.grpo_train_step`: in that kit the student's own to write, and notebook 09
    passes the student's own as `update_fn`. Elsewhere nothing changes."""
    return grpo_train_step if update_fn is packed_grpo_train_step and _is_stub(update_fn) else update_fn


def _is_stub(fn: Callable) -> bool:
    """Whether `fn` is a stub of a student kit (`autograder.stubs`): its body, after its docstring, only
    raises NotImplementedError."""
    import ast
    import inspect
    import textwrap

    try:
        node = ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0]
    except (OSError, TypeError):
        return False
    body = node.body[1:] if ast.get_docstring(node) is not None else node.body
    return len(body) == 1 and isinstance(body[0], ast.Raise) and "NotImplementedError" in ast.unparse(body[0])

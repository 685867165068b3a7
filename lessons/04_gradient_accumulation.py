# %% [markdown]
# # 04 · The SFT step and gradient accumulation
#
# **Goal.** A real SFT batch does not fit in memory at once (notebook 03 worked out why: for a
# real model the logits alone are gigabytes), so the trainer splits each batch of $B$ examples into $k$ micro-batches,
# runs forward and backward on each, lets the gradients *add up* in `.grad`, and steps the
# optimizer once. Done right, this is exactly the gradient of the full batch, only slower. Done
# wrong, it is a gradient $k$ times too large, or a subtly re-weighted one, and training still
# "works", which is what makes these bugs expensive. You write the SFT micro-batch step,
# `sft_microbatch_train_step`, and then *prove with autograd* on the course's tiny model that
# $k$ accumulated micro-batches give the full-batch gradient to float precision, and show what the
# two classic bugs do.
#
# Graded: `sft_microbatch_train_step` (visible checks and hidden cases in one cell: all its points
# go through the hidden cases; `make check NB=04` runs practice cases of the same kinds on your
# machine).

# %%
import os

import matplotlib.pyplot as plt
import torch

torch.manual_seed(0)
# One thread: the tiny model's matrices are too small for threads to pay off, and on a busy machine
# (or while many notebooks are graded side by side) competing threads make it ten times slower.
torch.set_num_threads(1)
GRADING = bool(os.environ.get("NBGRADER_EXECUTION"))  # set by nbgrader while grading: keep cells small
from course_lib.selfcheck import cmp, expect  # cmp: exact / approximate / max diff; expect: a named mistake

# %% [markdown]
# ## The math
#
# For example $b$ of a batch, with per-token log-probs $\ell_{b,t} = \log \pi_\theta(y_{b,t} \mid \cdot)$
# (notebook 03) and response mask $m_{b,t}$, the SFT loss of the sequence is its negative
# log-likelihood divided by a fixed constant $c$ (notebook 03's `masked_normalize`), and the batch
# loss is the mean over the batch:
#
# $$\mathcal{L}_b = \frac{1}{c}\sum_t m_{b,t}\,(-\ell_{b,t}), \qquad
# \mathcal{L} = \frac{1}{B}\sum_{b=1}^{B} \mathcal{L}_b .$$
#
# Split the batch into $k$ micro-batches $M_1, \dots, M_k$ of $B/k$ examples each. Then
#
# $$\mathcal{L} = \frac{1}{k}\sum_{j=1}^{k} \underbrace{\frac{1}{B/k}\sum_{b \in M_j} \mathcal{L}_b}_{\text{micro-batch mean } \bar{\mathcal{L}}_j}
# \quad\Longrightarrow\quad
# \nabla_\theta \mathcal{L} = \sum_{j=1}^{k} \nabla_\theta \frac{\bar{\mathcal{L}}_j}{k} .$$
#
# The gradient is linear, and PyTorch's `backward()` *adds* into `.grad`. So each micro-batch
# backpropagates $\bar{\mathcal{L}}_j / k$, and after $k$ calls `.grad` holds the full-batch
# gradient. Two ways to get it wrong:
#
# - forget the $1/k$: `.grad` holds $k\,\nabla\mathcal{L}$;
# - normalise each micro-batch by *its own* token count (a per-micro-batch token mean): the
#   pieces add up to the gradient of a *re-weighted* loss, in which a token of micro-batch $j$
#   weighs $1/(k\,N_j)$, with $N_j$ that micro-batch's number of response tokens, instead of the
#   $1/N$ of the token mean over the whole batch ($N = \sum_j N_j$). Micro-batches have different
#   numbers of response tokens, so the tokens of a short micro-batch count more. A fixed constant
#   $c$ (or one token count for the whole batch) avoids this by construction.
#
# The gradient with respect to the log-probs themselves is simple enough to check by hand
# ($B$ is always the full batch; a micro-batch holds $B/k$ examples):
#
# $$\frac{\partial}{\partial \ell_{b,t}} \frac{\bar{\mathcal{L}}_j}{k} = -\frac{m_{b,t}}{c \cdot (B/k) \cdot k} = -\frac{m_{b,t}}{c\,B}.$$

# %% [markdown]
# ## A worked example on tiny tensors
#
# One micro-batch of two sequences, four positions, from a batch of $B = 4$ split into $k = 2$
# micro-batches ($B/k = 2$), $c = 42$. Sequence 0 has response tokens at positions 1 and 2,
# sequence 1 at positions 2 and 3:

# %%
logp = torch.tensor([[-0.1, -0.5, -2.0, -9.0], [-3.0, -0.7, -0.2, -1.0]], requires_grad=True)
mask = torch.tensor([[0, 1, 1, 0], [0, 0, 1, 1]], dtype=torch.bool)
c, k, B = 42.0, 2, 4  # B: the full batch; this micro-batch holds B / k = 2 of its examples
per_sequence = torch.where(mask, -logp, 0.0).sum(-1) / c
print("per-sequence NLL / c :", per_sequence.tolist(), " = [(0.5 + 2.0) / 42, (0.2 + 1.0) / 42]")
loss = per_sequence.mean() / k
print("micro-batch loss / k :", loss.item(), " = mean / 2")
loss.backward()
print("d loss / d logp      :", logp.grad.tolist())
print("-mask / (c * B)      :", (-mask.float() / (c * B)).tolist())

# %% [markdown]
# The masked sum from notebook 03, which the step uses (given):

# %% [given] course_lib.masking:masked_normalize
import torch

# %% [markdown]
# ## Your turn: `sft_microbatch_train_step`
#
# Compute the loss of one micro-batch, **call `backward()` on it**, and return it with some
# metadata. The loss you return is the one you backpropagated (already divided by
# `gradient_accumulation_steps`), as a 0-dim tensor (not a Python float). Do not zero, overwrite
# or step anything: that is the trainer's job, once per $k$ micro-batches.
#
# The hidden cases run $k = 1..5$ micro-batches whose log-probs all depend on one shared
# parameter, and compare the loss returned by each call (a 0-dim tensor of the log-probs' dtype),
# the parameter's `.grad` after each call and `metadata["nll_per_sequence"]`: with constants 42,
# 0.5 and the default, bool, int and float masks, float64, one example per micro-batch, $T = 1$, empty rows and an
# all-empty mask, very large log-probs, $-\infty$ on padding, a gradient already in `.grad`, and
# log-probs that *are* a leaf tensor with a gradient already in its `.grad` (so zeroing or
# replacing the `.grad` of your input shows).

# %% [solution] course_lib.sft:sft_microbatch_train_step
import torch

# %% [markdown]
# ## Self-checks

# %% [tests] sft_microbatch_train_step 5
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("sft_microbatch_train_step", sft_microbatch_train_step)
### END HIDDEN TESTS
# one micro-batch of n = 3 examples, from a batch of B = n * k = 12 split into k = 4 micro-batches
n, T, c, k = 3, 5, 42.0, 4
logp_values = -torch.rand(n, T) * 3
mask = torch.tensor([[0, 1, 1, 1, 0], [0, 0, 1, 1, 1], [1, 1, 1, 1, 1]], dtype=torch.bool)
expected_per_seq = (-logp_values * mask).sum(-1) / c

leaf = logp_values.clone().requires_grad_()
loss, meta = sft_microbatch_train_step(leaf, mask, gradient_accumulation_steps=k, normalize_constant=c)
expect(leaf.grad is not None, "no gradient reached the log-probs: call loss.backward() inside the step")
expect(isinstance(loss, torch.Tensor) and loss.dim() == 0,
       "the returned loss should be a 0-dim tensor: return the tensor you backpropagated (detached), not loss.item()")
ratio = (expected_per_seq.mean() / k) / torch.as_tensor(loss).detach()
expect(not torch.isclose(ratio, torch.tensor(1.0 / k)) or k == 1,
       "returned loss is k times too large: return the loss divided by gradient_accumulation_steps (the one you backpropagated)")
expect(cmp("loss = mean_b(NLL_b / c) / k", torch.as_tensor(loss).detach(), expected_per_seq.mean() / k),
       "wrong loss: sum -logp over response tokens, divide by normalize_constant (not by the token count), "
       "mean over the batch, divide by gradient_accumulation_steps")
expected_grad = -mask.float() / (c * n * k)  # = -mask / (c B): the full batch's mean, split k ways
grad_ratio = (leaf.grad.abs().sum() / expected_grad.abs().sum()).item()
expect(abs(grad_ratio - k) > 1e-3, f"forgot to divide by gradient_accumulation_steps: gradient is k = {k} times too large")
expect(cmp("d loss / d logp = -mask / (c n k)", leaf.grad, expected_grad),
       "wrong gradient: it should be -mask / (normalize_constant * micro-batch size * gradient_accumulation_steps); "
       "masked positions must get 0")
expect(cmp("metadata nll_per_sequence", meta["nll_per_sequence"], expected_per_seq),
       "metadata['nll_per_sequence'] should be the (n,) masked NLL sums of the micro-batch / normalize_constant, before / k")

# two calls add up: the step accumulates into .grad, never overwrites
sft_microbatch_train_step(leaf, mask, gradient_accumulation_steps=k, normalize_constant=c)
expect(not torch.allclose(leaf.grad, expected_grad), "gradients were overwritten, not accumulated: never assign .grad or zero it in the step")
expect(cmp("after two calls .grad holds twice the gradient", leaf.grad, 2 * expected_grad),
       "gradients were overwritten, not accumulated: let backward() add into .grad")

# the normaliser is the constant, not the number of tokens
loss_c1, _ = sft_microbatch_train_step(logp_values.clone().requires_grad_(), mask, 1)
expect(cmp("default normalize_constant = 1 (a plain sum)", torch.as_tensor(loss_c1).detach(), (-logp_values * mask).sum(-1).mean()),
       "you divided by the number of tokens: use normalize_constant (default 1.0), not mask.sum()")
padded = logp_values.clone()
padded[~mask] = -float("inf")  # a padding position may well carry -inf
padded_leaf = padded.requires_grad_()
loss_inf, _ = sft_microbatch_train_step(padded_leaf, mask, k, c)
expect(bool(torch.isfinite(torch.as_tensor(loss_inf))) and bool(torch.isfinite(padded_leaf.grad).all()),
       "a -inf log-prob at a masked position made the loss or gradient non-finite: mask with torch.where (masked_normalize)")
print("all visible checks passed")

# Hidden cases (run by the grader on your sft_microbatch_train_step, in a fresh process): listed above.

# %% [markdown]
# ## The proof, on a real model
#
# Take the course's tiny Qwen2 and a batch of real r1_zero examples of different lengths. Compute
# the gradient of every parameter twice: once on the whole batch in one call ($k = 1$), once as
# $k$ micro-batches through your step, with `.grad` accumulating in between. Linearity says they
# are equal; autograd agrees up to float32 rounding (the sums happen in a different order).
# `get_response_log_probs` and `tokenize_prompt_and_output` are the functions of notebooks 03
# and 01: here the course's released references, imported from `course_lib` (their deadlines have
# passed), to keep this notebook short.

# %%
from course_lib import get_response_log_probs, gsm8k_to_r1_zero, load_problems, tokenize_prompt_and_output
from course_lib.world.tiny_models import load_tiny

model, tokenizer = load_tiny("qwen2-base")
model.train()
BATCH = 4 if GRADING else 8
examples = [gsm8k_to_r1_zero(p) for p in load_problems("arith", "train")[:BATCH]]
C = 42.0
print("response tokens per example:",
      tokenize_prompt_and_output([e["prompt"] for e in examples], [e["output"] for e in examples], tokenizer)["response_mask"].sum(-1).tolist())


def accumulated_gradient(step_fn, k):
    """Run the batch as k micro-batches through `step_fn`; return the flat accumulated gradient."""
    model.zero_grad(set_to_none=True)
    size = len(examples) // k
    for j in range(k):
        part = examples[j * size : (j + 1) * size]
        batch = tokenize_prompt_and_output([e["prompt"] for e in part], [e["output"] for e in part], tokenizer)
        logp = get_response_log_probs(model, batch["input_ids"], batch["labels"])["log_probs"]
        step_fn(logp, batch["response_mask"], k)
    return torch.cat([p.grad.flatten() for p in model.parameters()])


def correct_step(logp, mask, k):
    return sft_microbatch_train_step(logp, mask, gradient_accumulation_steps=k, normalize_constant=C)


def rel_error(g, ref):
    return ((g - ref).norm() / ref.norm()).item()


KS = [4] if GRADING else [2, 4, 8]
full = accumulated_gradient(correct_step, 1)
errors = {"your step": []}
for k in KS:
    acc = accumulated_gradient(correct_step, k)
    errors["your step"].append(rel_error(acc, full))
    expect(cmp(f"k = {k} micro-batches vs the full batch (all params)", acc, full, atol=1e-6, rtol=1e-4),
           f"accumulated gradient over k = {k} micro-batches differs from the full-batch gradient")

# %% [markdown]
# ## The two classic bugs, measured
#
# Now the same experiment with two broken steps: one forgets the $1/k$, one normalises each
# micro-batch by its own number of response tokens and compares against the full batch normalised
# by the total number of response tokens (the loss it was *meant* to compute, the token mean).
# The plot shows the relative error $\lVert g_{\text{accumulated}} - g_{\text{full}}\rVert / \lVert g_{\text{full}}\rVert$
# as $k$ grows.

# %%
def forgot_k_step(logp, mask, k):
    return sft_microbatch_train_step(logp, mask, gradient_accumulation_steps=1, normalize_constant=C)


def token_mean_step(logp, mask, k):
    """Bug: each micro-batch divides by its own token count, then by k."""
    loss = masked_normalize(-logp, mask, normalize_constant=mask.sum()) / k
    loss.backward()
    return loss.detach(), {}


def full_token_mean_gradient():
    """What token_mean_step was meant to compute: the token mean over the whole batch."""
    model.zero_grad(set_to_none=True)
    batch = tokenize_prompt_and_output([e["prompt"] for e in examples], [e["output"] for e in examples], tokenizer)
    logp = get_response_log_probs(model, batch["input_ids"], batch["labels"])["log_probs"]
    masked_normalize(-logp, batch["response_mask"], normalize_constant=batch["response_mask"].sum()).backward()
    return torch.cat([p.grad.flatten() for p in model.parameters()])


full_token_mean = full_token_mean_gradient()
errors["forgot / k"] = [rel_error(accumulated_gradient(forgot_k_step, k), full) for k in KS]
errors["token mean per micro-batch"] = [rel_error(accumulated_gradient(token_mean_step, k), full_token_mean) for k in KS]
for name, errs in errors.items():
    print(f"{name:28s}", "  ".join(f"k={k}: {e:.1e}" for k, e in zip(KS, errs)))
expect(abs(errors["forgot / k"][-1] - (KS[-1] - 1)) < 1e-3, "forgetting / k should make the gradient exactly k times too large")

fig, ax = plt.subplots(figsize=(7, 3.8))
markers = {"your step": "o-", "forgot / k": "s--", "token mean per micro-batch": "^:"}
for name, errs in errors.items():
    ax.plot(KS, [max(e, 1e-9) for e in errs], markers[name], label=name, lw=2)
ax.set_xscale("log", base=2)
ax.set_yscale("log")
ax.set_xticks(KS, [str(k) for k in KS])
ax.axhspan(1e-9, 1e-5, color="green", alpha=0.08, label="float32 rounding")
ax.set_xlabel("micro-batches k (same total batch)")
ax.set_ylabel("‖g_acc − g_full‖ / ‖g_full‖")
ax.set_title("Accumulated vs full-batch gradient, tiny Qwen2, real examples")
ax.legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# Reading the plot (and the lines above it): your step sits at float32 rounding for every $k$
# ($10^{-7}$ to $6 \cdot 10^{-7}$); forgetting $1/k$ gives a relative error of exactly $k - 1$ (the gradient is
# $k$ times too long, pointing the right way); the per-micro-batch token mean is off by a few
# percent to tens of percent. Its error grows with how unequal the micro-batches' token counts
# are: in student mode, 4% with $k = 2$, 5% with $k = 4$ and 31% with $k = 8$, where each
# micro-batch is a single example and the response lengths (printed above) run from 27 to 78
# tokens.
#
# Why "forgot / k" can go unnoticed: Adam divides each update by a running estimate of the
# gradient's size, so a gradient scaled by $k$ gives almost the same update. But gradient
# clipping (the course's trainer clips the norm to 1.0) acts on the scaled norm and clips
# $k$ times too early, the logged gradient norm is wrong, and plain SGD takes a step $k$ times too
# long. The re-weighting bug is worse: no optimizer undoes it.

# %% [markdown]
# ## Pitfall from practice: the gradient accumulation bug of 2024
#
# In October 2024 it was found that the Hugging Face `Trainer` (and many training scripts copied
# from it) computed a wrong loss with gradient accumulation: each micro-batch's cross-entropy was a
# mean over *that micro-batch's* tokens, and the $k$ means were averaged. With padding-free or
# variable-length batches, micro-batches have different token counts, so long and short
# micro-batches were weighted alike, and a run with accumulation $k = 16$ reached a visibly higher
# loss than the same run with one big batch (as reported when the bug was found and fixed, in
# `transformers` 4.46; not measured here). The fix (`num_items_in_batch`) divides every
# micro-batch by the token count of the *whole* batch: a normaliser fixed before the
# micro-batches are cut, exactly the role of `normalize_constant` here. The lesson: check any
# accumulation code the way you did above, by comparing gradients with the full batch on a tiny
# model, not by watching the loss go down.
#
# ## Summary
#
# - SFT micro-batch loss: $\operatorname{mean}_b\!\big[\sum_t m_{b,t}(-\ell_{b,t}) / c\big] / k$;
#   call `backward()` in the step; return the scaled loss.
# - `.grad` accumulates across `backward()` calls: never assign or zero it inside the step. The
#   trainer zeroes once per optimizer step.
# - The $1/k$ and a normaliser fixed for the whole batch make $k$ micro-batches equal the full
#   batch; autograd confirms it to float32 rounding on a real model.
# - Forgetting $1/k$: $k$ times the gradient (Adam half-hides it, clipping and SGD do not).
#   Per-micro-batch token means: a re-weighted gradient no optimizer undoes.
#
# Next, notebook 05 wires your tokenization, log-probs and step into the course's SFT trainer and
# teaches the tiny model the r1_zero format.

# %% [markdown]
# # 03 · Per-token log-probabilities, masked sums, and the memory they cost
#
# **Goal.** Every loss of this course, the SFT negative log-likelihood and every GRPO objective,
# is built from one quantity: the log-probability the policy gives to each token of a response,
#
# $$\log \pi_\theta(y_t \mid x, y_{<t}) \quad \text{for every position } t,$$
#
# turned into one number per sequence by a *masked* reduction over the response tokens. You write
# both pieces here: `masked_normalize` (a masked sum divided by a constant) and
# `get_response_log_probs` (the per-token log-probs of a batch under a model), together with the
# small autograd function underneath it that never makes a second copy of the logits. Then you
# measure why that matters: three ways to get the same numbers, three very different memory bills.
#
# Graded: `masked_normalize`, `log_probs_from_logits` (with the `_SelectedLogProb` function it
# applies) and `get_response_log_probs`, each in one cell of visible checks followed by hidden
# cases (all the points go through the hidden cases; `make check NB=03` runs practice cases of
# the same kinds on your machine).

# %%
import json
import math
import os
import subprocess
import sys

import matplotlib.pyplot as plt
import torch

torch.manual_seed(0)
# One thread: the tiny model's matrices are too small for threads to pay off, and on a busy machine
# (or while many notebooks are graded side by side) competing threads make it ten times slower.
torch.set_num_threads(1)
GRADING = bool(os.environ.get("NBGRADER_EXECUTION"))  # set by nbgrader while grading: keep cells small
from course_lib.selfcheck import cmp, expect  # cmp: exact / approximate / max diff; expect: a named mistake

# %% [markdown]
# ## Part 1: masked reductions
#
# A batch of responses has different lengths, and the tensors also hold prompt and padding
# positions. `response_mask` (notebook 01) is 1 exactly on the response tokens. Two reductions
# turn a per-token quantity $x_{b,t}$ into something per sequence:
#
# $$\operatorname{masked\_normalize}(x, m, c)_b = \frac{1}{c}\sum_t m_{b,t}\, x_{b,t}, \qquad
# \operatorname{masked\_mean}(x, m)_b = \frac{\sum_t m_{b,t}\, x_{b,t}}{\sum_t m_{b,t}} .$$
#
# The difference matters. The mean divides each sequence by its *own* length, so a token of a
# short response weighs more than a token of a long one; dividing every sequence by the same
# constant $c$ gives every token of the batch the same weight. GRPO's objective (notebook 07)
# averages each response's tokens, a factor $1/|o_i|$ per response $o_i$, and that factor is
# the length bias Dr. GRPO (Liu et al., 2025) points out: a short correct response gets a larger
# push per token than a long one, and a long wrong response a smaller penalty per token than a
# short one, so wrong responses are free to grow long. Its fix divides by a constant instead (the
# generation's maximal length), which is `masked_normalize`. SFT in this course uses
# `masked_normalize` too, with $c = 1$ (notebook 04: each sequence's summed negative
# log-likelihood, averaged over the batch). To make sure a wrong normaliser cannot pass by
# accident, the checks use an odd constant: 42.
#
# One implementation detail is a real bug in disguise: `(x * m).sum()` is wrong when a masked-out
# entry is $\pm\infty$ or NaN (a log-probability of a padding token can be $-\infty$), because
# $0 \cdot \infty = \text{NaN}$. Select with `torch.where(m.bool(), x, 0.0)` instead: `where`
# needs a bool condition, and the masks of these checks are bool, int (0/1) or float, so
# `torch.where(m, x, 0)` with an int mask raises an error.
#
# Worked example: $x = \begin{pmatrix}1 & 2 & 3\\ 4 & 5 & 6\end{pmatrix}$,
# $m = \begin{pmatrix}1 & 1 & 0\\ 0 & 1 & 1\end{pmatrix}$, $c = 2$: per row (dim=-1)
# $(1+2)/2 = 1.5$ and $(5+6)/2 = 5.5$; over everything (dim=None) $(3 + 11)/2 = 7$.
#
# The hidden cases try every `dim` of 3-d tensors (negative ones and None too), masks of dtype
# bool, int (0/1) and float (0./1.), a mask that broadcasts (a mask of shape (2, 3, 1) with a
# tensor of shape (2, 3, 4): the mask's one column stands for all four),
# constants 42, 0.5 and the int 3, the default constant, empty masks, masked $-\infty$ and NaN,
# a float64 tensor (the result stays float64: keep the tensor's dtype), and the gradient
# through the masked sum.

# %% [solution] course_lib.masking:masked_normalize
import torch

# %% [tests] masked_normalize 3
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("masked_normalize", masked_normalize)
### END HIDDEN TESTS
x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
m = torch.tensor([[1, 1, 0], [0, 1, 1]], dtype=torch.bool)
expect(cmp("worked example, dim=-1, c=2", masked_normalize(x, m, dim=-1, normalize_constant=2.0), torch.tensor([1.5, 5.5])),
       "per-row masked sum / 2 should be [1.5, 5.5]: sum only where the mask is 1, over dim, then divide by the constant")
expect(cmp("worked example, dim=None, c=2", masked_normalize(x, m, normalize_constant=2.0), torch.tensor(7.0)),
       "dim=None must sum over *all* entries to a 0-dim tensor")
expect(masked_normalize(x, m).shape == (), "dim=None should return a 0-dim tensor (a scalar), not a vector")
expect(cmp("dim=0, c=42", masked_normalize(x, m, dim=0, normalize_constant=42), torch.tensor([1.0, 7.0, 6.0]) / 42),
       "you divided by the number of tokens (a mean): divide by normalize_constant")
expect(cmp("all-zero mask gives 0", masked_normalize(x, torch.zeros_like(m), dim=-1), torch.zeros(2)),
       "an empty mask must give 0, not NaN: masked_normalize divides by a constant, not by the count")
logp = torch.tensor([[-0.5, -1.0, -float("inf")], [-2.0, float("nan"), -0.1]])
mask = torch.tensor([[1, 1, 0], [1, 0, 1]])
expect(cmp("masked -inf and NaN do not leak", masked_normalize(logp, mask, dim=-1, normalize_constant=42), torch.tensor([-1.5, -2.1]) / 42),
       "NaN from masked positions: tensor * mask turns a masked -inf into NaN (0 * inf); use torch.where(mask.bool(), tensor, 0.0)")
print("all visible checks passed")

# Hidden cases (run by the grader on your masked_normalize, in a fresh process): listed above.

# %% [markdown]
# ## Part 2: log-probabilities of the labels
#
# A causal LM maps `input_ids` (B, T) to logits (B, T, V); position $t$ predicts the *next*
# token, which `tokenize_prompt_and_output` already put at `labels[:, t]` (notebook 01: labels
# are the inputs shifted by one, so there is no second shift here). With
# $\log p_{b,t,v} = z_{b,t,v} - \operatorname{logsumexp}_u z_{b,t,u}$:
#
# $$\ell_{b,t} = \log p_{b,t,\,y_{b,t}} = z_{b,t,\,y_{b,t}} - \operatorname{logsumexp}_u z_{b,t,u} .$$
#
# Its gradient with respect to the logits of the same position is the famous
# "one-hot minus softmax":
#
# $$\frac{\partial \ell_{b,t}}{\partial z_{b,t,v}} = \mathbb{1}[v = y_{b,t}] - p_{b,t,v} .$$
#
# **Memory.** The logits are the biggest tensor of post-training:
#
# | batch | B, T, V | dtype | one copy |
# |---|---|---|---|
# | this notebook (student mode) | 4, 256, 32 000 | float32 | 131 MB |
# | Qwen2.5-Math-1.5B SFT micro-batch | 8, 1024, 151 936 | bfloat16 | 2.5 GB |
# | the same, upcast to float32 | 8, 1024, 151 936 | float32 | 5.0 GB |
#
# The obvious code `torch.log_softmax(logits, -1).gather(-1, labels[..., None])` makes a second
# (B, T, V) tensor *and autograd keeps it until backward*. The right code needs only one number per
# row besides the label's logit: $\operatorname{logsumexp}$. We write it as a small
# `torch.autograd.Function` that computes the log-normaliser a few rows at a time in forward, and
# writes $g\,(\text{onehot} - \operatorname{softmax})$ a few rows at a time in backward, so the only
# (B, T, V) tensors ever alive are the logits and their gradient.
#
# Worked example, one position, $V = 4$, logits $z = (1, 2, 3, 0)$, label $y = 2$:
# $\operatorname{logsumexp} z = 3.4402$, $\ell = 3 - 3.4402 = -0.4402$, and
# $\partial \ell / \partial z = (0,0,1,0) - (0.0871, 0.2369, 0.6439, 0.0321)$.

# %%
z = torch.tensor([[[1.0, 2.0, 3.0, 0.0]]], requires_grad=True)  # (B=1, T=1, V=4)
y = torch.tensor([[2]])
ell = torch.log_softmax(z, dim=-1).gather(-1, y[..., None]).squeeze(-1)
ell.sum().backward()
print("logsumexp       ", torch.logsumexp(z, -1).item())
print("log p(label)    ", ell.item())
print("autograd grad   ", z.grad[0, 0])
print("onehot - softmax", (torch.nn.functional.one_hot(y, 4)[0, 0] - torch.softmax(z, -1)[0, 0]).detach())

# %% [markdown]
# The chunking helpers and the entropy from notebook 02 (given; `entropy_from_logits` applies
# your `compute_entropy` a few rows at a time and without gradient, as a diagnostic):

# %%
# rows of the flattened (B*T, V) logits handled at once: bounds temporaries to ~CHUNK_ELEMENTS floats
CHUNK_ELEMENTS = 1 << 22

# %% [given] course_lib.logprobs:_row_chunks course_lib.logprobs:_float course_lib.logprobs:compute_entropy course_lib.logprobs:entropy_from_logits
import torch

# %% [markdown]
# ### A custom `autograd.Function`, on a smaller example
#
# Autograd records every operation of a forward pass and keeps what each one's backward needs:
# that is where the extra (B, T, V) copy of the obvious code lives. A `torch.autograd.Function`
# lets you write an operation's forward and backward yourself, and so decide what is kept.
# It has two static methods:
#
# - `forward(ctx, *inputs)` computes the output and stores on `ctx` what backward will need.
#   Tensors go through `ctx.save_for_backward(t1, t2, ...)` (autograd then knows they are kept
#   and checks that nobody modified them in place before backward); plain Python values (a
#   shape, a dtype) can be attributes, `ctx.shape = ...`. A tensor stored as an attribute
#   (`ctx.probs = ...`) is kept alive just the same, only hidden from that bookkeeping.
# - `backward(ctx, grad_out)` receives $g = \partial L / \partial\,\text{output}$ (same shape as
#   the output), reads the saved tensors back with `ctx.saved_tensors`, and returns one gradient
#   per input of `forward`, in order: for a tensor input, $\partial L / \partial\,\text{input}$
#   with that input's shape **and dtype**; `None` for an input that has no gradient, such as
#   integer labels.
#
# The smallest useful example picks each row's label entry, $\text{out}_n = x_{n, y_n}$, whose
# gradient is $g_n$ at $(n, y_n)$ and 0 elsewhere. `gradcheck` compares the hand-written backward
# with finite differences (in float64, where those are accurate):

# %%
class PickLabel(torch.autograd.Function):
    """out[n] = x[n, y[n]]: x (N, V) float, y (N,) long -> (N,)."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(y)  # backward needs the labels; x itself is not needed
        ctx.shape, ctx.dtype = x.shape, x.dtype  # plain values may be attributes
        return x.gather(-1, y[:, None]).squeeze(-1)

    @staticmethod
    def backward(ctx, grad_out):  # grad_out: (N,)
        (y,) = ctx.saved_tensors
        grad = torch.zeros(ctx.shape, dtype=ctx.dtype)  # the input's shape and dtype
        grad.scatter_(-1, y[:, None], grad_out[:, None].to(ctx.dtype))
        return grad, None  # one per input of forward: a gradient for x, None for the labels y


x64 = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
y3 = torch.tensor([4, 0, 2])
print("out         ", PickLabel.apply(x64, y3).detach())
print("gradcheck ok", torch.autograd.gradcheck(lambda t: PickLabel.apply(t, y3), (x64,)))

# %% [markdown]
# ### Your turn: the selected log-prob, chunked, forward and backward
#
# `forward(ctx, logits, labels)` gets the flattened logits (N, V) and labels (N,) and returns the
# (N,) log-probs: compute $\operatorname{logsumexp}$ over each chunk of `_row_chunks(N, V)` rows
# (in float32 at least, `_float`), pick the label's logit with `gather`, save what backward needs
# (the logits, which exist anyway, the labels and the (N,) log-normalisers: nothing of size
# (N, V) that is new). `backward(ctx, grad_out)` allocates one gradient tensor like the logits
# and fills it chunk by chunk with $-g\,e^{z - \operatorname{lse}}$ plus $g$ at the label
# (`scatter_add_`). `log_probs_from_logits` flattens (B, T, V) to (B·T, V) and back. The shape of
# it, with the parts that are yours left as `...`:
#
# ```python
# class _SelectedLogProb(torch.autograd.Function):
#     @staticmethod
#     def forward(ctx, logits, labels):              # (N, V), (N,) -> (N,)
#         rows = _row_chunks(*logits.shape)
#         lse = ...       # (N,): logsumexp of each chunk logits.split(rows), each upcast with _float
#         picked = ...    # (N,): the label's logit of each row, upcast with _float
#         ctx.save_for_backward(logits, labels, lse)  # not a softmax, not a float32 copy of the logits
#         return picked - lse
#
#     @staticmethod
#     def backward(ctx, grad_out):                   # grad_out: (N,), float32 or float64
#         logits, labels, lse = ctx.saved_tensors
#         rows = _row_chunks(*logits.shape)
#         grad = torch.empty_like(logits)            # the one new (N, V) tensor, in the logits' dtype
#         for start in range(0, logits.shape[0], rows):
#             ...                                    # these rows: -g * exp(z - lse), then + g at the label
#             grad[start : start + rows] = ...       # computed in float32 at least, stored as grad.dtype
#         return grad, None                          # no gradient for the integer labels
# ```
#
# The hidden cases try T = 1, V = 1, B = 1, labels at both ends of the vocabulary, float64 logits
# (log-probs stay float64), bfloat16 and float16 logits (log-probs in float32), logits of
# magnitude $10^4$ and shifted by $10^4$, a small `CHUNK_ELEMENTS` (3 or 7 rows per chunk, the
# last one partial: keep reading the chunk size from that global), the gradient with respect to
# the logits, that the logits are left unchanged, and, on (4, 64, 2000) logits, that autograd keeps
# less than an eighth of their size for backward.

# %% [solution] course_lib.logprobs:_SelectedLogProb course_lib.logprobs:log_probs_from_logits
import torch

# %% [tests] log_probs_from_logits 3
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("log_probs_from_logits", log_probs_from_logits)
### END HIDDEN TESTS
def reference_log_probs(logits, labels):  # the obvious formula, in float64
    return torch.log_softmax(logits.double(), dim=-1).gather(-1, labels[..., None]).squeeze(-1)


logits = torch.randn(2, 5, 11) * 3
labels = torch.randint(0, 11, (2, 5))
lp = log_probs_from_logits(logits, labels)
expect(lp.shape == (2, 5), f"shape {tuple(lp.shape)}, expected (B, T) = (2, 5): one log-prob per position")
expect(cmp("values vs log_softmax + gather (float64)", lp, reference_log_probs(logits, labels)),
       "wrong log-probs: log p(label) = logits[label] - logsumexp(logits) at the same position (no extra shift)")
expect(bool((lp <= 0).all()), "positive log-probs: subtract the logsumexp, do not add it")

# backward: onehot - softmax, checked against finite differences in float64
z64 = torch.randn(2, 3, 5, dtype=torch.float64, requires_grad=True)
y64 = torch.randint(0, 5, (2, 3))
expect(torch.autograd.gradcheck(lambda t: log_probs_from_logits(t, y64), (z64,), raise_exception=False),
       "backward is wrong (gradcheck failed): d logp / d logits = grad_out * (onehot(label) - softmax(logits))")

# chunk boundaries: a tiny chunk size makes several chunks and a partial last one
saved_chunk, CHUNK_ELEMENTS = CHUNK_ELEMENTS, 3 * 11 + 5  # 3 rows per chunk, 10 rows in all
try:
    small = torch.randn(2, 5, 11, requires_grad=True)
    lp_small = log_probs_from_logits(small, labels)
    (lp_small * torch.arange(10.0).view(2, 5)).sum().backward()
    z_ref = small.detach().clone().requires_grad_()
    (reference_log_probs(z_ref, labels).float() * torch.arange(10.0).view(2, 5)).sum().backward()
finally:
    CHUNK_ELEMENTS = saved_chunk
expect(cmp("several chunks: values", lp_small, reference_log_probs(small, labels)),
       "wrong values with several chunks: loop over *all* rows, including a last partial chunk")
expect(cmp("several chunks: gradient", small.grad, z_ref.grad),
       "wrong gradient with several chunks: each chunk's rows must get their own grad_out rows and log-normalisers")

# extreme and low-precision logits
huge = torch.randn(2, 4, 50) * 1e4
expect(bool(torch.isfinite(log_probs_from_logits(huge, torch.randint(0, 50, (2, 4)))).all()),
       "non-finite log-probs for logits of magnitude 1e4: use logsumexp, not log(sum(exp))")
bf = (torch.randn(2, 3, 1000) * 4).bfloat16()
y_bf = torch.randint(0, 1000, (2, 3))
lp_bf = log_probs_from_logits(bf, y_bf)
expect(lp_bf.dtype == torch.float32, f"bfloat16 logits gave {lp_bf.dtype} log-probs: compute the logsumexp in float32 (_float)")
expect(cmp("bfloat16 logits vs float64", lp_bf, reference_log_probs(bf, y_bf), atol=1e-5),
       "bfloat16 logits: upcast each chunk to float32 before logsumexp")


# memory: what autograd keeps for backward, besides the logits themselves: the tensors saved for
# backward (seen by saved-tensor hooks) and any tensor kept as an attribute of a ctx (`ctx.probs = ...`,
# which the hooks never see: found by walking the graph's nodes)
def bytes_kept_for_backward(fn, logits, labels):
    own = logits.untyped_storage().data_ptr()
    kept = {}

    def keep(t):
        if t.untyped_storage().data_ptr() != own:
            kept[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
        out = fn(logits, labels)
    nodes, seen = [out.grad_fn], set()
    while nodes:
        node = nodes.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        for value in getattr(node, "__dict__", {}).values():  # a custom Function's ctx attributes
            for t in value if isinstance(value, (list, tuple)) else [value]:
                if isinstance(t, torch.Tensor):
                    keep(t)
        nodes += [f for f, _ in node.next_functions]
    return sum(kept.values())


big = torch.randn(4, 64, 2000, requires_grad=True)
y_big = torch.randint(0, 2000, (4, 64))
kept = bytes_kept_for_backward(log_probs_from_logits, big, y_big)
naive = bytes_kept_for_backward(lambda a, b: torch.log_softmax(a, -1).gather(-1, b[..., None]).squeeze(-1), big, y_big)
print(f"kept for backward besides the logits: yours {kept / 1e6:.3f} MB, log_softmax + gather {naive / 1e6:.3f} MB "
      f"(the logits are {big.numel() * 4 / 1e6:.1f} MB)")
expect(kept < big.numel() * big.element_size() / 8,
       "log_probs_from_logits keeps a (B, T, V)-sized tensor for backward: save the logits, labels and the (N,) "
       "logsumexp only (ctx.save_for_backward), not a log_softmax or softmax output or a float32 copy, "
       "whether saved or kept as a ctx attribute")
print("all visible checks passed")

# Hidden cases (run by the grader on your log_probs_from_logits, in a fresh process): listed above.

# %% [markdown]
# ### Your turn: `get_response_log_probs`
#
# Run the model, take `.logits`, and return the log-probs of the labels and, when asked, the
# per-token entropy (a diagnostic, without gradient: `entropy_from_logits`), both in the model's
# dtype, float32 at least (a bfloat16 model's are float32). The results are unmasked: prompt
# and padding positions are there too, and the caller masks them with `response_mask`.
#
# The hidden cases run it on small causal LMs whose forward returns `.logits` (float32, float64
# and bfloat16 weights), with T = 1, V = 1, labels at the vocabulary's edges, logits of magnitude
# $10^4$, a large vocabulary and many chunks, with and without `return_token_entropy`, and
# compare the log-probs, the entropies (or None), that the entropy carries no graph, and the
# gradients of the model's parameters. Your `log_probs_from_logits` must do the work:
# `course_lib`'s is not there when the grader runs your function.

# %% [solution] course_lib.logprobs:get_response_log_probs
import torch

# %% [markdown]
# We check it on the course's tiny model (`qwen2-base`, about a million parameters, the course
# tokenizer of 2 000-odd tokens) and a batch of two real examples tokenized the notebook-01 way.

# %%
from course_lib import gsm8k_to_r1_zero, load_problems, tokenize_prompt_and_output  # tokenize: notebook 01
from course_lib.world.tiny_models import load_tiny

model, tokenizer = load_tiny("qwen2-base")
examples = [gsm8k_to_r1_zero(e) for e in load_problems("arith", "test")[:2]]
batch = tokenize_prompt_and_output([e["prompt"] for e in examples], [e["output"] for e in examples], tokenizer)
print({k: tuple(v.shape) for k, v in batch.items()}, "vocabulary", len(tokenizer))

# %% [tests] get_response_log_probs 4
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("get_response_log_probs", get_response_log_probs)
### END HIDDEN TESTS
out = get_response_log_probs(model, batch["input_ids"], batch["labels"], return_token_entropy=True)
logits_ref = model(batch["input_ids"]).logits.detach().double()
expected = torch.log_softmax(logits_ref, -1).gather(-1, batch["labels"][..., None]).squeeze(-1)
expect(set(out) == {"log_probs", "token_entropy"}, f"keys {sorted(out)}: return a dict with 'log_probs' and 'token_entropy'")
expect(out["log_probs"].shape == batch["labels"].shape, f"log_probs shape {tuple(out['log_probs'].shape)}: expected (B, T) like labels")
expect(cmp("log_probs vs log_softmax(model logits) (float64)", out["log_probs"], expected, atol=1e-5),
       "wrong log-probs: labels are already shifted by one (tokenize_prompt_and_output): use logits[:, t] with labels[:, t]")
expect(out["log_probs"].requires_grad, "log_probs carry no gradient: do not run the model under torch.no_grad or detach")
expected_H = -(torch.log_softmax(logits_ref, -1).exp() * torch.log_softmax(logits_ref, -1)).sum(-1)
expect(cmp("token_entropy vs float64", out["token_entropy"], expected_H, atol=1e-5), "token_entropy is wrong: the entropy of each position's logits")
expect(not out["token_entropy"].requires_grad, "token_entropy carries a graph: it is a diagnostic, compute it without gradient")
expect(get_response_log_probs(model, batch["input_ids"], batch["labels"])["token_entropy"] is None,
       "token_entropy must be None when return_token_entropy=False (and the entropy not computed)")
print("all visible checks passed")

# Hidden cases (run by the grader on your get_response_log_probs, in a fresh process): listed above.

# %% [markdown]
# ## Putting them together: how likely is a response?
#
# The log-likelihood of a response is the masked sum of its per-token log-probs,
# `masked_normalize(log_probs, response_mask, dim=-1)`. Compare each held-out problem's gold
# response with the same response whose final answer, inside the tags, is off by one. A model
# that reads its answer off its own reasoning should prefer the gold one. Two models: the base
# model, which never saw the tags, and `qwen2-sft`, the same model after the SFT of notebook 05
# (committed with the course, so that this notebook does not have to train it).

# %%
def answer_preference(model, examples):
    """log p(gold response) - log p(the same with the answer + 1), per example; and the last pair's details."""
    margins = []
    for ex in examples:
        wrong = str(int(ex["ground_truth"]) + 1)
        outputs = [ex["output"], ex["output"].replace(f"<answer> {ex['ground_truth']} </answer>", f"<answer> {wrong} </answer>")]
        pair = tokenize_prompt_and_output([ex["prompt"]] * 2, outputs, tokenizer)
        with torch.no_grad():
            lp_pair = get_response_log_probs(model, pair["input_ids"], pair["labels"])["log_probs"]
        total = masked_normalize(lp_pair, pair["response_mask"], dim=-1)
        margins.append((total[0] - total[1]).item())
    return torch.tensor(margins), (outputs, total, lp_pair, pair)


sft_model, _ = load_tiny("qwen2-sft")
N_PAIRS = 20 if GRADING else 200
pair_examples = [gsm8k_to_r1_zero(e) for e in load_problems("arith", "test")[:N_PAIRS]]
for name, m in [("qwen2-base", model), ("qwen2-sft", sft_model)]:
    margins, (outputs, total, lp_pair, pair) = answer_preference(m, pair_examples[:1])
    print(f"{name}, problem 0:")
    for text, score in zip(outputs, total):
        print(f"    log p(response) = {score:8.2f}   ...{text[-32:]!r}")
    # where the two responses' per-token log-probs differ (torch.where: a masked position stays out)
    diff = torch.where(pair["response_mask"][0], lp_pair[0] - lp_pair[1], 0.0)
    where = diff.abs() > 1e-6
    print("    the positions that differ:", [tokenizer.decode([t]) for t in pair["labels"][0][where]], "->",
          [round(d, 2) for d in diff[where].tolist()])
    margins, _ = answer_preference(m, pair_examples)
    print(f"    over {len(margins)} problems: prefers the gold answer in {int((margins > 0).sum())}, "
          f"median margin {margins.median():.2f} nats")

# %% [markdown]
# What it shows (the lines above; on the 200 problems of student mode: the base model prefers
# the gold answer on 117, by a median of 0.3 nats, `qwen2-sft` on all 200, by a median of 11.9
# nats). Only the answer's tokens and the tokens right after them differ between the two
# responses. The base model barely tells the right answer inside the tags from a wrong one,
# although it does this arithmetic well in its own pretraining format (notebook 05 measures
# that): it has not learnt that the number in `<answer>` is the one its reasoning arrived at.
# After SFT on worked solutions it prefers the gold answer everywhere, by a wide margin. The same
# masked sum is the quantity SFT maximises, and, with a reward in front of it, the one GRPO
# pushes up and down.

# %% [markdown]
# ## Measured: the memory of three ways to get log-probs
#
# The methods run in a separate Python process on the same random logits (B, T, V) float32 that
# require grad (as they do in training), with a gradient flowing back, as in a loss:
#
# - **(a)** `log_softmax(logits).gather(labels)`: one full (B, T, V) output, kept for backward;
# - **(b)** `logits.gather(labels) - logsumexp(logits)`: keeps nothing new, but `logsumexp` makes
#   full-size temporaries, and its backward a full-size $e^{z - \text{lse}}$;
# - **(c)** the chunked function you wrote: your `log_probs_from_logits` as defined in this
#   notebook (with your `_SelectedLogProb`), sent to the child process by value with
#   `cloudpickle`, with its `CHUNK_ELEMENTS` set there to the size below.
#
# We read the process's resident-memory high-water mark (reset before each phase on Linux, where
# one process measures the three methods in turn; elsewhere each method gets a fresh process and
# the phases share one peak) and report what each method adds *on top of the logits*. Large allocations go straight to the operating system
# (`MALLOC_MMAP_THRESHOLD_`), so a freed temporary does not linger in the numbers.

# %%
MEMORY_CHILD = r'''
import json, resource, sys, cloudpickle, torch
B, T, V, chunk, methods = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
with open(sys.argv[6], "rb") as f:
    yours = cloudpickle.load(f)  # your log_probs_from_logits, with the helpers it uses
yours.__globals__["CHUNK_ELEMENTS"] = chunk  # the chunk size the helpers read
torch.set_num_threads(1)
LINUX = sys.platform.startswith("linux")

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024

def current():
    return status("VmRSS") if LINUX else peak()

def peak():
    if LINUX:
        return status("VmHWM")
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r if sys.platform == "darwin" else r * 1024

def reset_peak():
    if LINUX:
        open("/proc/self/clear_refs", "w").write("5")

METHODS = {
    "a": lambda z, y: torch.log_softmax(z, -1).gather(-1, y[..., None]).squeeze(-1),
    "b": lambda z, y: z.gather(-1, y[..., None]).squeeze(-1) - torch.logsumexp(z, -1),
    "c": yours,
}
g = torch.Generator().manual_seed(0)
logits = torch.randn(B, T, V, generator=g).requires_grad_()
labels = torch.randint(0, V, (B, T), generator=g)
weights = torch.randn(B, T, generator=g)
for method in methods:
    METHODS[method](logits[:1, :2].detach(), labels[:1, :2])  # warm up outside the measurement
    logits.grad = None
    base = current(); reset_peak()
    out = METHODS[method](logits, labels)
    forward_peak, retained = peak() - base, current() - base
    reset_peak()
    (out * weights).sum().backward()
    backward_peak = peak() - base
    del out
    print(json.dumps({"method": method, "forward_peak": forward_peak, "retained": retained,
                      "backward_peak": backward_peak, "logits": logits.numel() * 4}))
'''

import tempfile

import cloudpickle

SHAPE, CHUNK = ((2, 128, 8000), 1 << 18) if GRADING else ((4, 256, 32000), 1 << 22)
env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", OMP_NUM_THREADS="1")
yours_file = os.path.join(tempfile.mkdtemp(), "log_probs_from_logits.pkl")
with open(yours_file, "wb") as f:
    cloudpickle.dump(log_probs_from_logits, f)
# Linux resets the high-water mark between methods, so one process measures all three;
# elsewhere the peak cannot be reset, so each method gets a fresh process.
runs = ["abc"] if sys.platform.startswith("linux") else ["a", "b", "c"]
memory = {}
for methods in runs:
    proc = subprocess.run([sys.executable, "-c", MEMORY_CHILD, *map(str, SHAPE), str(CHUNK), methods, yours_file],
                          capture_output=True, text=True, env=env, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-2000:])
    for line in proc.stdout.strip().splitlines():
        row = json.loads(line)
        memory[row.pop("method")] = row

MB = 1e6
logits_mb = memory["a"]["logits"] / MB
names = {"a": "(a) log_softmax + gather", "b": "(b) gather - logsumexp", "c": "(c) your log_probs_from_logits"}
print(f"logits {SHAPE} float32 = {logits_mb:.0f} MB; memory added on top of them, in MB:")
print(f"{'method':32s} {'forward peak':>13s} {'kept after fwd':>15s} {'backward peak':>14s}")
for k, r in memory.items():
    print(f"{names[k]:32s} {r['forward_peak'] / MB:13.0f} {r['retained'] / MB:15.0f} {r['backward_peak'] / MB:14.0f}")

# %%
fig, ax = plt.subplots(figsize=(8, 3.8))
phases = [("forward_peak", "forward peak"), ("retained", "kept for backward"), ("backward_peak", "backward peak")]
width = 0.26
for i, (key, label) in enumerate(phases):
    ax.bar([j + (i - 1) * width for j in range(3)], [memory[k][key] / MB for k in "abc"], width, label=label)
ax.axhline(logits_mb, color="black", ls="--", lw=1, label=f"one copy of the logits ({logits_mb:.0f} MB)")
ax.set_xticks(range(3))
ax.set_xticklabels([names[k] for k in "abc"])
ax.set_ylabel("MB on top of the logits")
ax.set_title(f"Memory of per-token log-probs, logits {SHAPE} float32 (measured)")
ax.legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# How to read it. The backward of any method needs one (B, T, V) tensor, the gradient of the
# logits, so "one copy" is the floor of the backward peak. In student mode ((4, 256, 32000), 131
# MB of logits; the figures move by a few MB from run to run): (a) keeps a full copy alive from
# forward to backward and needs about three in backward (about 395 MB); (b) keeps nothing, but
# its forward and backward peaks are as high as (a)'s; (c) keeps nothing of that size, adds
# about 17 MB in forward (a chunk of `CHUNK_ELEMENTS` floats and its temporaries) and about 1.25
# copies in backward (about 160 MB). On a GPU these are the gigabytes that decide the micro-batch
# size.

# %% [markdown]
# ## Pitfall from practice: the loss, not the model, runs out of memory
#
# The arithmetic of the table above, for Qwen2.5-Math-1.5B (1.5 billion parameters, a vocabulary
# of 151 936): its weights take 3.1 GB in bfloat16, and one micro-batch of 8 sequences of 1024
# tokens has 2.5 GB of bf16 logits. The usual first loss, `logits.float().log_softmax(-1)`,
# makes a 5.0 GB float32 copy and a 5.0 GB log_softmax output, and autograd keeps the latter until
# backward: 10 GB for the loss alone, more than three times the weights, so the loss is what runs
# out of memory first as the micro-batch grows. (Arithmetic from the shapes; not measured here,
# where no GPU runs.) The fix used in practice is the one you wrote: compute
# `logit[label] - logsumexp` chunk by chunk in float32. TRL's `selective_log_softmax` loops over
# rows for the same reason, and fused kernels such as Liger's never materialise the logits at all
# (both from their documentation and source; not measured here). The second classic of this step
# is the *double shift*: `tokenize_prompt_and_output` already shifted the labels, and slicing
# `logits[:, :-1]` and `labels[:, 1:]` again pairs each position with the token after next; the
# shapes still match, so nothing fails, and the model is trained on the wrong targets.
#
# ## Summary
#
# - `masked_normalize(x, m, dim, c)` = masked sum / constant; `torch.where`, not `x * m`, so masked
#   infinities cannot turn into NaN; an empty mask gives 0.
# - $\log p(y_t) = z_{t, y_t} - \operatorname{logsumexp}(z_t)$; its gradient is
#   $\text{onehot} - \operatorname{softmax}$.
# - Get it without a second (B, T, V) tensor: a custom `autograd.Function` that saves only the
#   logits, labels and (N,) log-normalisers and works in row chunks. Measured above: about 1.25
#   copies of the logits in backward instead of three, and nothing of their size kept between
#   forward and backward.
# - `get_response_log_probs` returns unmasked (B, T) log-probs (with gradient) and, optionally,
#   the per-token entropy (without). Masking happens in the loss: notebook 04.

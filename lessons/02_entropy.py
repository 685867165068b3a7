# %% [markdown]
# # 02 · Entropy of the next-token distribution
#
# **Goal.** A language model turns every position of a sequence into a distribution over the
# vocabulary. Its *entropy* says how unsure the model is about the next token: 0 when it is
# certain, $\log V$ when every token of a vocabulary of size $V$ is equally likely. Entropy is the
# first thing to watch in post-training: SFT lowers it on the response format, and GRPO runs are
# famous for "entropy collapse". In this notebook you write `compute_entropy(logits)`, the
# function behind the token entropy that the course's GRPO trainer logs at every step and its
# `log_generations` reports per response, and you learn why it must be computed from
# `log_softmax` and never from `softmax` followed by `log`. At the end you watch the entropy of
# the course's tiny model move along a real response.
#
# Graded: `compute_entropy` (visible checks here and hidden cases in the same cell: all its
# points go through the hidden cases).

# %%
import math
import os

import matplotlib.pyplot as plt
import torch

torch.manual_seed(0)
# One thread: the tiny model's matrices are too small for threads to pay off, and on a busy machine
# (or while many notebooks are graded side by side) competing threads make it ten times slower.
torch.set_num_threads(1)
GRADING = bool(os.environ.get("NBGRADER_EXECUTION"))  # set by nbgrader while grading: keep cells small
from course_lib.selfcheck import cmp, expect  # cmp: exact / approximate / max diff; expect: a named mistake


def entropy64(x):
    """The reference point of the checks: the stable formula in float64 (about 15 digits)."""
    log_p = torch.log_softmax(x.double(), dim=-1)
    return -(log_p.exp() * log_p).sum(-1)

# %% [markdown]
# ## The math
#
# For logits $z \in \mathbb{R}^V$ the model's distribution is $p = \operatorname{softmax}(z)$,
# $p_v = e^{z_v} / \sum_u e^{z_u}$, and its entropy (in nats) is
#
# $$H(p) = -\sum_{v=1}^{V} p_v \log p_v, \qquad 0 \le H(p) \le \log V .$$
#
# The log-probabilities have a closed form that never forms a ratio of huge numbers:
#
# $$\log p_v = z_v - \operatorname{logsumexp}(z), \qquad \operatorname{logsumexp}(z) = m + \log \sum_u e^{z_u - m},\; m = \max_u z_u .$$
#
# That is `torch.log_softmax`. Every term $z_u - m \le 0$, so no exponential overflows, and the
# largest term is $e^0 = 1$, so the sum never underflows to 0. Then
#
# $$H = -\sum_v e^{\log p_v} \log p_v .$$
#
# Where $\log p_v$ is very negative, $e^{\log p_v}$ underflows to exactly 0 and the term is
# $0 \cdot (\text{finite}) = 0$: correct. The tempting alternative `torch.log(torch.softmax(z))`
# first rounds those tiny $p_v$ to 0 and then takes $\log 0 = -\infty$, and $0 \cdot (-\infty)$ is
# `NaN`. A third formula, $H = \operatorname{logsumexp}(z) - \sum_v p_v z_v$, is exact on paper but
# subtracts two numbers of the size of the logits: at $|z| \approx 10^4$ float32 keeps only about
# $10^{-3}$ of absolute precision, so the entropy comes out wrong in the third decimal.
#
# Two facts to check any implementation against: $H$ does not change when a constant is added to
# every logit (softmax is shift-invariant), and uniform logits give $H = \log V$.

# %% [markdown]
# ## A worked example on tiny tensors
#
# Three tokens with logits $(2, 1, 0)$. By hand:
# $\operatorname{logsumexp} = \log(e^2 + e^1 + e^0) = 2.4076$, so
# $\log p = (-0.4076, -1.4076, -2.4076)$, $p = (0.6652, 0.2447, 0.0900)$ and
# $H = 0.6652 \cdot 0.4076 + 0.2447 \cdot 1.4076 + 0.0900 \cdot 2.4076 = 0.8324$ nats.

# %%
z = torch.tensor([2.0, 1.0, 0.0])
log_p = torch.log_softmax(z, dim=-1)
print("log p      ", log_p)
print("p          ", log_p.exp())
print("H          ", -(log_p.exp() * log_p).sum().item())
print("log V      ", math.log(3), " <- the uniform distribution's entropy, the maximum")

# %% [markdown]
# Now the same computation with large logits, the way a confident model (or a bfloat16 model with
# a large final layer) produces them. Watch the naive route break:

# %%
big = torch.tensor([1e4, 0.0, -1e4])
p_naive = torch.softmax(big, dim=-1)
print("softmax           ", p_naive, " <- the small probabilities are exactly 0")
print("log(softmax)      ", torch.log(p_naive), " <- log 0 = -inf")
print("naive entropy     ", -(p_naive * torch.log(p_naive)).sum().item(), " <- 0 * -inf = nan")
log_p_big = torch.log_softmax(big, dim=-1)
print("log_softmax       ", log_p_big, " <- finite")
print("stable entropy    ", -(log_p_big.exp() * log_p_big).sum().item(), " <- exactly 0 (-0.0): the model is certain")

# %% [markdown]
# ## Your turn: `compute_entropy`
#
# Implement the entropy over the **last** dimension, for logits of any leading shape
# $(\dots, V)$ and any float dtype. Compute in float32 at least: bfloat16 keeps 8 significant
# bits, about 2.4 decimal digits ($8 \log_{10} 2 = 2.41$), and a sum computed in it over a 32k
# vocabulary is off by about two hundredths of a nat (measured in the last section); a float64
# input stays float64. About two lines.
#
# What the hidden cases check, beyond the self-checks below: any number of leading dimensions
# (none, too: a vector of $V$ logits gives a 0-dim entropy), $V = 1$, an empty batch, float64
# (the result stays float64), bfloat16 and float16 (the result is float32), logits of magnitude
# $10^4$ and logits shifted by $\pm 10^4$, a vocabulary of 32 000, and that the logits you are
# given are left unchanged (no in-place `-=`).

# %% [solution] course_lib.logprobs:compute_entropy
import torch

# %% [markdown]
# ## Self-checks
#
# Each check names the mistake it is built to catch. The reference point is the same formula in
# float64, which is accurate to about 15 digits.

# %% [tests] compute_entropy 5
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("compute_entropy", compute_entropy)
### END HIDDEN TESTS
# shape: the entropy reduces the last dimension only
logits = torch.randn(2, 3, 7)
H = compute_entropy(logits)
expect(H.shape == (2, 3), f"shape {tuple(H.shape)}, expected (2, 3): reduce over the last dimension (dim=-1) only")
expect(H.dtype == torch.float32, f"dtype {H.dtype}: float32 logits should give float32 entropies")

# value: against the formula in float64 and against torch.distributions
ref64 = entropy64(logits)
expect(cmp("random logits vs float64", H, ref64), "entropy is wrong on ordinary logits: H = -sum p log p over dim=-1, in nats (natural log)")
expect(cmp("vs torch.distributions.Categorical", H, torch.distributions.Categorical(logits=logits).entropy()),
       "entropy differs from torch.distributions.Categorical(logits=...).entropy()")
expect(bool((H >= 0).all()), "negative entropy: did you drop the minus sign in -sum p log p?")

# uniform logits give log V
expect(cmp("uniform logits give log V", compute_entropy(torch.zeros(4, 50)), torch.full((4,), math.log(50))),
       "uniform logits should give log V: use the natural log, not log2, and sum over the vocabulary")

# large logits: finite and exact
huge = torch.randn(3, 100) * 1e4
H_huge = compute_entropy(huge)
expect(bool(torch.isfinite(H_huge).all()), "entropy is NaN for large logits: compute from log_softmax, not log(softmax)")
expect(cmp("logits of magnitude 1e4 (one-hot limit)", H_huge, torch.zeros(3), atol=1e-6),
       "large logits should give entropy ~0: compute from log_softmax, not log(softmax + eps)")

# shift invariance at large offsets
shifted = torch.randn(5, 200) * 2 + 1e4
ref_shifted = entropy64(shifted)
expect(cmp("logits shifted by 1e4 vs float64", compute_entropy(shifted), ref_shifted, atol=1e-4),
       "entropy changes when every logit is shifted by 1e4: use exp(log_softmax) * log_softmax, "
       "not logsumexp(z) - sum(p * z), which cancels two numbers of size 1e4")

# low-precision input: computed in float32 at least
low = (torch.randn(4, 32000) * 4).bfloat16()
H_low = compute_entropy(low)
expect(H_low.dtype == torch.float32, f"bfloat16 logits gave {H_low.dtype} entropies: upcast to float32 before log_softmax")
expect(cmp("bfloat16 logits (V=32000) vs float64", H_low, entropy64(low), atol=1e-4),
       "bfloat16 logits: upcast to float32 before log_softmax (bf16 keeps 8 significant bits, ~2.4 digits)")
expect(compute_entropy(torch.randn(3, 5, dtype=torch.float64)).dtype == torch.float64,
       "float64 logits should stay float64: upcast to *at least* float32 (torch.promote_types)")
print("all visible checks passed")

# Hidden cases (the grader runs them on your compute_entropy, in a fresh process): see the list
# above this cell. `make check NB=02` runs practice cases of the same kinds on your machine.

# %% [markdown]
# ## Figure 1: entropy against temperature
#
# Sampling at temperature $\tau$ draws from $\operatorname{softmax}(z / \tau)$. Low temperature
# sharpens the distribution (entropy $\to 0$: greedy decoding), high temperature flattens it
# (entropy $\to \log V$). GRPO rollouts are sampled at $\tau = 1$; the plot shows how much that
# choice matters for the diversity of a group. The naive formula is drawn too: it is fine at
# moderate temperatures and turns to NaN (a gap in the curve) as soon as one probability
# underflows.

# %%
V = 1000
z = torch.randn(V) * 3
taus = torch.logspace(-2.5, 1.5, 200)
stable = torch.stack([compute_entropy(z / t) for t in taus])
p_t = torch.softmax(z[None, :] / taus[:, None], dim=-1)
naive = -(p_t * torch.log(p_t)).sum(-1)

fig, ax = plt.subplots(figsize=(7, 3.8))
ax.plot(taus, stable, lw=3, label="compute_entropy (log_softmax)")
ax.plot(taus, naive, "--", color="crimson", label="-sum p log(softmax): NaN where p underflows")
ax.axhline(math.log(V), color="gray", ls=":", label=f"log V = {math.log(V):.2f}")
ax.axvline(1.0, color="gray", lw=0.8)
ax.set_xscale("log")
ax.set_xlabel("temperature τ")
ax.set_ylabel("entropy (nats)")
ax.set_title(f"Entropy of softmax(z / τ), V = {V}")
ax.legend(loc="upper left", fontsize=8)
plt.show()
print(f"naive formula NaN at {int(torch.isnan(naive).sum())} of {len(taus)} temperatures (the low ones)")

# %% [markdown]
# ## Figure 2: entropy along a real response
#
# The course's tiny model (`qwen2-base`, a Qwen2 of about 0.9 million parameters) was pretrained
# on arithmetic text but never saw the r1_zero tags. Below, it reads a prompt and a worked answer
# in the `<think> ... </think> <answer> ... </answer>` format, and we plot, for every response
# token, the entropy of the model's prediction *for* that token. Expect low entropy where the
# text is predictable (the worked solution is written in the style the model was pretrained on,
# down to the calculator notes `<<41-38=3>>3`) and high entropy where the model has to choose.
# What the figure and the lines under it show: the reasoning is nearly certain (a few words and
# first digits reach 0.2 to 1.2 nats), and everything from `</think>` on, the format the model
# never saw, sits at 1.5 to 2.3 nats, the answer's digits inside the tags included. Those tags
# are still far from a uniform guess ($\log V = 6.7$ nats): the prompt itself spells out
# `<think> </think> <answer> </answer>`, and even a tiny model copies from its context. SFT
# (notebook 05) is what makes the whole format confident.

# %%
from course_lib import gsm8k_to_r1_zero, load_problems
from course_lib.world.tiny_models import load_tiny

model, tokenizer = load_tiny("qwen2-base")
example = gsm8k_to_r1_zero(load_problems("arith", "test")[0])
prompt_ids = tokenizer(example["prompt"], add_special_tokens=False)["input_ids"]
output_ids = tokenizer(example["output"], add_special_tokens=False)["input_ids"]
ids = torch.tensor([prompt_ids + output_ids])
with torch.no_grad():
    logits = model(ids).logits[0]  # (T, V): position t predicts token t + 1
# the prediction for output token j comes from position len(prompt) - 1 + j
H_response = compute_entropy(logits[len(prompt_ids) - 1 : -1])
tokens = [tokenizer.decode([t]) for t in output_ids]
print(example["output"])
print(f"{len(tokens)} response tokens, mean entropy {H_response.mean():.2f} nats, "
      f"max possible log V = {math.log(logits.shape[-1]):.2f}")

fig, ax = plt.subplots(figsize=(max(8, 0.28 * len(tokens)), 3.6))
colors = plt.cm.viridis(H_response / math.log(logits.shape[-1]))
ax.bar(range(len(tokens)), H_response, color=colors)
ax.set_xticks(range(len(tokens)))
ax.set_xticklabels([repr(t)[1:-1] for t in tokens], rotation=90, fontsize=7, family="monospace")
ax.set_ylabel("entropy (nats)")
ax.set_title("Entropy of the tiny base model's next-token distribution along a response")
plt.tight_layout()
plt.show()
for j in H_response.argsort(descending=True)[:5].tolist():
    print(f"highest entropy: {H_response[j]:.2f} nats before {tokens[j]!r}")
for j, t in enumerate(tokens):
    if "<" in t and ">" in t and "<<" not in t and ">>" not in t:
        print(f"at a tag:        {H_response[j]:.2f} nats before {t!r}")

# %% [markdown]
# ## Pitfall from practice: entropy in half precision, and the `+ 1e-10` patch
#
# Real models are trained in bfloat16 or float16, so their logits arrive in half precision, and a
# logging line such as `-(probs * probs.log()).sum(-1)` runs in half precision too. Two things go
# wrong. First, the NaN of `log(0)` appears as soon as one probability underflows, and the common
# "fix" `log(probs + 1e-10)` only hides it in float32: in float16, 1e-10 is below the smallest
# representable number, rounds to 0, and the NaN is back. Second, even the *stable* formula loses
# digits in bfloat16: over a vocabulary of tens of thousands of tokens the rounding errors of the
# sum add up. Entropy is only a diagnostic, but it is the diagnostic that tells you whether a GRPO
# run is collapsing, and an error of two hundredths of a nat (measured below) is as large as the
# whole entropy of a confident position (the float16 rows below: 0.04 nats and less). Measured:

# %%
low = (torch.randn(8, 32000) * 4).bfloat16()
truth = entropy64(low)
lp16 = torch.log_softmax(low, dim=-1)
in_bf16 = -(lp16.exp() * lp16).sum(-1)
confident = (torch.randn(4, 1000) * 30).half()  # a confident float16 model: many probabilities underflow
p_half = torch.softmax(confident, dim=-1)
eps_patch = -(p_half * torch.log(p_half + 1e-10)).sum(-1)
print(f"stable formula run in bfloat16 (V=32000): max error {(in_bf16.double() - truth).abs().max():.1e} nats")
print(f"compute_entropy on the same logits      : max error {(compute_entropy(low).double() - truth).abs().max():.1e} nats")
print(f"float16: 1e-10 rounds to {torch.tensor(1e-10).half().item()}, so log(p + 1e-10) gives {eps_patch.tolist()}")
print(f"compute_entropy on the float16 logits   : {compute_entropy(confident).tolist()}")

# %% [markdown]
# ## Summary
#
# - $H = -\sum_v p_v \log p_v$ over the last dimension, in nats; $0 \le H \le \log V$.
# - Compute $\log p$ with `log_softmax` ($z - \operatorname{logsumexp} z$): finite for any finite
#   logits, and $e^{\log p}\log p$ is exactly 0 where $p$ underflows. `log(softmax)` gives NaN,
#   `log(p + eps)` gives a bias, `logsumexp(z) - sum(p z)` cancels catastrophically.
# - Upcast bfloat16 logits to float32 before the reduction; keep float64 as float64.
# - Entropy is the running diagnostic of post-training: low where the model is sure, high at
#   what it has not learnt yet (for the base model: the format tags).
#
# Next, notebook 03 turns the same `logsumexp` into the per-token log-probabilities that every
# loss of the course is built on, without making a second copy of the logits.

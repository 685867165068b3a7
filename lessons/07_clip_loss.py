# %% [markdown]
# # 07 · Policy-gradient losses: REINFORCE, the GRPO clip, and how to average them
#
# **Goal.** Notebook 06 turned rewards into one advantage per sampled response. This notebook
# turns advantages into a loss whose gradient improves the policy. A reward is a number about a
# *sampled* answer, and sampling is not differentiable, so the loss is not the reward: it is a
# surrogate whose gradient equals the gradient of the expected reward. You will check that
# identity (the score function, or REINFORCE, estimator) against finite differences on a small
# categorical policy, then write the three losses the course trains with, no baseline,
# REINFORCE with a baseline, and GRPO's clipped objective, the dispatcher that picks one,
# `masked_mean`, and the micro-batch step that averages per-token losses and backpropagates.
# Along the way: the clipped objective and its gradient plotted against the probability ratio,
# with the flat regions found by autograd; an on-policy loss that reads 0 while its gradient
# does not; and the length bias of three ways to average over tokens, measured on real
# responses of the SFT model.
#
# Graded: `compute_naive_policy_gradient_loss`, `compute_grpo_clip_loss`,
# `compute_policy_gradient_loss`, `masked_mean`, `grpo_microbatch_train_step` (visible checks
# and hidden cases).

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

# %% [markdown]
# ## The math
#
# The policy $\pi_\theta$ answers a question $q$ with a response $o = (o_1, \dots, o_T)$, and a
# reward $R(q, o)$ scores it. Reinforcement learning maximises the expected reward
#
# $$J(\theta) = \mathbb{E}_{o \sim \pi_\theta(\cdot \mid q)}\big[R(q, o)\big] = \sum_o \pi_\theta(o \mid q)\, R(q, o).$$
#
# The sum runs over every possible response, so $J$ is never computed; it is *estimated* from
# samples. Its gradient has a form that can be estimated from samples too, because
# $\nabla \pi = \pi \, \nabla \log \pi$ (the score-function identity):
#
# $$\nabla_\theta J = \sum_o \pi_\theta(o)\, R(o)\, \nabla_\theta \log \pi_\theta(o)
# = \mathbb{E}_{o \sim \pi_\theta}\big[R(o)\, \nabla_\theta \log \pi_\theta(o)\big],
# \qquad \log \pi_\theta(o) = \sum_t \log \pi_\theta(o_t \mid q, o_{<t}).$$
#
# So the gradient of the *per-token loss* $-R(o)\log\pi_\theta(o_t \mid \cdot)$, summed over
# tokens and averaged over samples, is an unbiased estimate of $-\nabla J$. That is REINFORCE,
# `loss_type="no_baseline"`. Replacing $R$ by an advantage $A = R - b$ with a baseline $b$ that
# does not depend on the sampled response (notebook 06's group mean, up to a constant factor)
# keeps the estimate unbiased and cuts its variance: `"reinforce_with_baseline"`.
#
# GRPO also reuses a batch of samples for more than one optimizer step. After the first step
# the samples come from an *old* policy $\pi_{\text{old}}$, and the per-token importance ratio
# corrects for it:
#
# $$\rho_t = \frac{\pi_\theta(o_t \mid \cdot)}{\pi_{\text{old}}(o_t \mid \cdot)} = \exp\big(\log\pi_\theta(o_t) - \log\pi_{\text{old}}(o_t)\big), \qquad
# \ell_t = -\min\big(\rho_t A,\; \operatorname{clip}(\rho_t, 1-\epsilon, 1+\epsilon)\, A\big).$$
#
# The clip stops the ratio from moving far from 1 in the direction the advantage rewards: once
# a token with $A > 0$ has $\rho_t > 1+\epsilon$, or one with $A < 0$ has $\rho_t < 1-\epsilon$,
# the clipped term is the smaller one, it is constant in $\theta$, and the token's gradient is 0.
# The min makes the objective a pessimistic (lower) bound: a move in the *wrong* direction is
# never clipped.
#
# Finally the per-token losses $\ell_{b,t}$ of a micro-batch become one number. GRPO as written
# averages over the tokens of each response, then over responses, and divides by the number
# of micro-batches $k$ (notebook 04's accumulation):
#
# $$\mathcal{L} = \frac{1}{k}\cdot\frac{1}{B}\sum_{b=1}^{B} \frac{\sum_t m_{b,t}\,\ell_{b,t}}{\sum_t m_{b,t}} .$$

# %% [markdown]
# ## Why a sampled answer is not differentiable, and what REINFORCE does instead
#
# The smallest policy with the same structure: one question, $K = 6$ possible answers, logits
# $\theta \in \mathbb{R}^6$, $\pi_\theta = \operatorname{softmax}(\theta)$, and a reward of 1 for
# answers 1 and 3, 0 for the others. Here $J(\theta) = \sum_k \pi_k r_k$ has 6 terms, so its
# true gradient is known: by finite differences, and in closed form,
# $\nabla J = \pi \odot (r - J)$.

# %%
theta0 = torch.tensor([0.5, -0.3, 1.2, 0.0, -1.0, 0.4], dtype=torch.float64)
reward = torch.tensor([0.0, 1.0, 0.0, 1.0, 0.0, 0.0], dtype=torch.float64)


def expected_reward(theta):
    return (torch.softmax(theta, dim=-1) * reward).sum(-1)


h = 1e-6
grad_fd = torch.stack([(expected_reward(theta0 + h * e) - expected_reward(theta0 - h * e)) / (2 * h)
                       for e in torch.eye(6, dtype=torch.float64)])
p0 = torch.softmax(theta0, dim=-1)
grad_exact = p0 * (reward - expected_reward(theta0))
print(f"J(theta0) = {expected_reward(theta0):.4f}")
expect(cmp("finite differences vs pi * (r - J)", grad_fd, grad_exact, atol=1e-8), "finite differences disagree with the closed form")

# %% [markdown]
# Now do what a language model does: *sample* an answer and score it. The sample is an integer
# index. Autograd has nothing to differentiate: `torch.multinomial` returns a tensor without a
# gradient history, and so does the reward looked up with it.

# %%
theta = theta0.clone().requires_grad_()
answer = torch.multinomial(torch.softmax(theta, dim=-1), 1)
sampled_reward = reward[answer]
print(f"sampled answer {answer.item()}, reward {sampled_reward.item()}, "
      f"requires_grad: {answer.requires_grad} / {sampled_reward.requires_grad}")
try:
    sampled_reward.sum().backward()
except RuntimeError as e:
    print("backward() through the sample:", str(e).splitlines()[0])

# %% [markdown]
# Even with the sampling written as a function of $\theta$ (fix the uniform noise $u$ and take
# the answer where the cumulative probabilities first pass $u$), the reward of the sample is a
# *step function* of $\theta$: flat almost everywhere, with jumps where the sampled answer
# changes. Its derivative is 0 or undefined, never $\nabla J$. The plot moves $\theta_1$ (the
# logit of a right answer) and shows the reward of the sample for three fixed noises, against
# the expected reward $J$.

# %%
def sample_with_noise(theta, u):
    """The answer drawn with uniform noise u (inverse CDF): a function of theta, but an integer."""
    cdf = torch.softmax(theta, dim=-1).cumsum(-1)
    return int(torch.searchsorted(cdf, torch.tensor([u], dtype=cdf.dtype)).clamp(max=len(cdf) - 1))


grid = torch.linspace(-3, 4, 701, dtype=torch.float64)
fig, ax = plt.subplots(figsize=(7, 3.6))
for u, style in ((0.15, "-"), (0.45, "--"), (0.8, ":")):
    values = []
    for t1 in grid.tolist():
        th = theta0.clone()
        th[1] = t1
        values.append(float(reward[sample_with_noise(th, u)]))
    ax.plot(grid, values, style, lw=1.5, label=f"reward of the sample, noise u = {u}")
J_curve = [float(expected_reward(torch.cat([theta0[:1], torch.tensor([t1], dtype=torch.float64), theta0[2:]])))
           for t1 in grid.tolist()]
ax.plot(grid, J_curve, color="black", lw=2.5, label="expected reward J")
ax.set_xlabel("θ₁ (logit of right answer 1)")
ax.set_ylabel("reward")
ax.set_title("A sampled reward is a step function of the parameters")
ax.legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# REINFORCE sidesteps the sampling: draw $n$ answers $a_i$, and differentiate the surrogate
# $-\frac{1}{n}\sum_i R(a_i)\log\pi_\theta(a_i)$, in which the rewards are constants and
# $\log\pi_\theta$ is differentiable. Its gradient is minus an unbiased estimate of $\nabla J$.
# With a baseline, $R(a_i)$ becomes $R(a_i) - b_i$. The leave-one-out mean
# $b_i = \frac{1}{n-1}\sum_{j \ne i} R(a_j)$ does not depend on $a_i$, so the estimate stays
# unbiased; and $R(a_i) - b_i = \frac{n}{n-1}\big(R(a_i) - \bar R\big)$, notebook 06's Dr. GRPO
# advantage times $\frac{n}{n-1}$. Below, autograd computes the estimate for many independent
# batches of $n$ samples at once (one row of `theta_rows` per batch), and we measure its relative
# error against the finite-difference gradient.

# %%
def reinforce_estimates(n, repeats, baseline, gen, offset=0.0):
    """(repeats, 6) estimates of grad J, each from n samples, by autograd through -A log pi.

    offset: a constant added to every reward (it changes neither J's gradient nor the best answer)."""
    theta_rows = theta0.expand(repeats, 6).clone().requires_grad_()
    log_pi = torch.log_softmax(theta_rows, dim=-1)
    samples = torch.multinomial(log_pi.exp().detach(), n, replacement=True, generator=gen)  # (repeats, n)
    r = reward[samples] + offset
    adv = (r - r.mean(dim=1, keepdim=True)) * n / (n - 1) if baseline else r  # leave-one-out baseline
    surrogate = -(adv * log_pi.gather(1, samples)).mean(dim=1)  # one REINFORCE loss per row
    surrogate.sum().backward()  # rows do not interact: each row's gradient is its own estimate
    return -theta_rows.grad


gen = torch.Generator().manual_seed(0)
estimate = reinforce_estimates(400_000, 1, baseline=True, gen=gen)[0]
expect(cmp("REINFORCE, n = 400000 samples, vs finite differences", estimate, grad_fd, atol=5e-3),
       "the score-function estimate does not converge to the finite-difference gradient")

ns = [2, 4, 8, 16, 64, 256, 1024, 4096]
REPEATS = 50 if GRADING else 400
variants = {"R · ∇log π (no baseline)": (False, 0.0), "(R + 1) · ∇log π (no baseline, rewards shifted by 1)": (False, 1.0),
            "(R − leave-one-out mean) · ∇log π (either reward)": (True, 0.0)}
errors = {name: [] for name in variants}
for n in ns:
    for name, (baseline, offset) in variants.items():
        est = reinforce_estimates(n, REPEATS, baseline, gen, offset)
        errors[name].append(float(((est - grad_fd).norm(dim=1) / grad_fd.norm()).mean()))
shifted_baseline = reinforce_estimates(64, 3, True, torch.Generator().manual_seed(1), offset=1.0)
expect(cmp("the baseline removes the shift exactly", shifted_baseline,
           reinforce_estimates(64, 3, True, torch.Generator().manual_seed(1)), atol=1e-12),
       "with the leave-one-out baseline a constant reward shift should cancel")

fig, ax = plt.subplots(figsize=(7, 3.8))
for (name, errs), style in zip(errors.items(), ["o-", "^--", "s-"]):
    ax.plot(ns, errs, style, lw=2, label=name)
first = errors["R · ∇log π (no baseline)"][0]
ax.plot(ns, [first * math.sqrt(ns[0] / n) for n in ns], "k:", label="∝ 1/√n")
ax.set_xscale("log", base=2)
ax.set_yscale("log")
ax.set_xlabel("samples n per estimate")
ax.set_ylabel("mean ‖ĝ − ∇J‖ / ‖∇J‖")
ax.set_title("REINFORCE against the finite-difference gradient")
ax.legend(fontsize=8)
plt.tight_layout()
plt.show()
names = list(variants)
print("error without / with the baseline, rewards R    :", [round(a / b, 2) for a, b in zip(errors[names[0]], errors[names[2]])])
print("error without / with the baseline, rewards R + 1:", [round(a / b, 2) for a, b in zip(errors[names[1]], errors[names[2]])])

# %% [markdown]
# Every estimate converges to the true gradient at the Monte Carlo rate $1/\sqrt{n}$; what
# differs is the constant. On these 0/1 rewards (right answers have probability $J \approx 0.2$)
# the baseline lowers the error only a little, and for $n \le 4$ it raises it. Shift every reward
# by 1, which changes neither $\nabla J$ nor which answer is best, and the estimate without a
# baseline becomes about three times noisier (the ratios printed above): now *every* sample pushes its own logit up and all
# the others down, and the signal is only in the small differences between those pushes. With
# the baseline the shift cancels exactly (checked above), so its curve is the same for both
# rewards. That is why REINFORCE needs a baseline whenever rewards are not centred (a format
# bonus, a reward in $[0, 10]$), and GRPO's group mean is that baseline at no extra cost.

# %% [markdown]
# ## A worked example of the clip, on three tokens
#
# $\epsilon = 0.2$, ratios $\rho = (0.5, 1.0, 1.5)$. For $A = +1$: unclipped $\rho A = (0.5, 1.0, 1.5)$,
# clipped $(0.8, 1.0, 1.2)$, min $(0.5, 1.0, 1.2)$, loss $(-0.5, -1.0, -1.2)$; only the third
# token is clipped. For $A = -1$: unclipped $(-0.5, -1.0, -1.5)$, clipped $(-0.8, -1.0, -1.2)$,
# min $(-0.8, -1.0, -1.5)$, loss $(0.8, 1.0, 1.5)$; only the first token is clipped.

# %%
rho = torch.tensor([0.5, 1.0, 1.5])
for A in (1.0, -1.0):
    unclipped, clipped = rho * A, rho.clamp(0.8, 1.2) * A
    print(f"A = {A:+.0f}: loss {(-torch.minimum(unclipped, clipped)).tolist()}, clipped {(clipped < unclipped).tolist()}")

# %% [markdown]
# ## Your turn, 1 of 5: `compute_naive_policy_gradient_loss`
#
# The per-token REINFORCE loss $-A_b \log\pi_\theta(o_{b,t})$: one scalar per *response*
# broadcast over its tokens. The scalar comes as a column $(B, 1)$; accept a vector $(B,)$ too,
# and read it as a column (the helper below does that). Return the $(B, T)$ loss in the inputs'
# dtype, not reduced.

# %% [given] course_lib.grpo:_as_column
import torch

# %% [solution] course_lib.grpo:compute_naive_policy_gradient_loss
import torch

# %% [tests] compute_naive_policy_gradient_loss 2
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("compute_naive_policy_gradient_loss", compute_naive_policy_gradient_loss)
### END HIDDEN TESTS
A = torch.tensor([[2.0], [-1.0], [0.0]])
logp = -torch.rand(3, 3) * 4  # B = T = 3: a reward broadcast over the wrong dimension would run silently
logp_leaf = logp.clone().requires_grad_()
loss = compute_naive_policy_gradient_loss(A, logp_leaf)
expect(loss.shape == (3, 3), f"shape {tuple(loss.shape)}: the loss is per token, (B, T), not reduced")
expect(not torch.allclose(loss, A * logp), "sign flipped: the loss is -A * log pi (minimising it raises the log-prob of A > 0 answers)")
expect(not torch.allclose(loss, -A.view(1, -1) * logp), "the advantage was broadcast over tokens of one row, not over rows: "
       "A[b] multiplies every token of response b (keep A as a (B, 1) column)")
expect(cmp("-A * log pi", loss, -A * logp), "wrong loss: -A[b] * log_probs[b, t] for every token")
loss.sum().backward()
expect(cmp("d loss / d log pi = -A", logp_leaf.grad, (-A).expand(3, 3)), "the gradient should be -A for every token (keep the graph: no .detach())")
expect(cmp("a (B,) vector is read as (B, 1)", compute_naive_policy_gradient_loss(A.view(-1), logp), -A * logp),
       "advantages of shape (B,) must act per row like (B, 1), not be broadcast over tokens")
print("all visible checks passed")
# Hidden cases: other shapes (B = 1, T = 1, B = T), 0/1 rewards, float64, (B,) inputs.

# %% [markdown]
# ## Your turn, 2 of 5: `compute_grpo_clip_loss`
#
# The per-token clipped loss $\ell_t$ above, $(B, T)$ in the inputs' dtype. Compute the ratio as
# $\exp(\log\pi_\theta - \log\pi_{\text{old}})$, never as $\exp(\log\pi_\theta) / \exp(\log\pi_{\text{old}})$,
# which is $0/0$ for log-probs below about $-104$ in float32. Return `(loss, metadata)` with
# `metadata["clipped"]`, a bool $(B, T)$ tensor that is True exactly where the clipped term is
# *strictly smaller* than the unclipped one (where the gradient is 0: a ratio below $1-\epsilon$
# with $A > 0$ is *not* clipped), and, if you like, more entries (the reference adds the
# detached `"ratio"`).

# %% [solution] course_lib.grpo:compute_grpo_clip_loss
import torch

# %% [tests] compute_grpo_clip_loss 4
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("compute_grpo_clip_loss", compute_grpo_clip_loss)
### END HIDDEN TESTS
A = torch.tensor([[1.0], [-1.0], [2.0]])
old = torch.log(torch.tensor([[0.5, 0.2, 0.9], [0.5, 0.2, 0.9], [0.1, 0.1, 0.1]]))
ratios = torch.tensor([[0.5, 1.0, 1.5], [0.5, 1.0, 1.5], [0.9, 1.1, 3.0]])
new = (old + ratios.log()).requires_grad_()
loss, meta = compute_grpo_clip_loss(A, new, old, cliprange=0.2)
expected = torch.tensor([[-0.5, -1.0, -1.2], [0.8, 1.0, 1.5], [-1.8, -2.2, -2.4]])
expect(loss.shape == (3, 3), f"shape {tuple(loss.shape)}: the loss is per token, (B, T)")
expect(not torch.allclose(loss, -expected, atol=1e-5), "sign flipped: the loss is -min(ratio * A, clip(ratio) * A)")
expect(not torch.allclose(loss, -torch.minimum(A / ratios, (1 / ratios).clamp(0.8, 1.2) * A), atol=1e-5),
       "ratio inverted: it is pi_new / pi_old = exp(new - old), not exp(old - new)")
expect(not torch.allclose(loss, -torch.maximum(ratios * A, ratios.clamp(0.8, 1.2) * A), atol=1e-5),
       "max instead of min: the clipped objective takes the smaller (pessimistic) of the two terms")
expect(not torch.allclose(loss, -torch.minimum(ratios * A, ratios * A.clamp(0.8, 1.2)), atol=1e-5),
       "the clamp is on the advantage: clamp the ratio to [1 - eps, 1 + eps], then multiply by A")
expect(cmp("clipped loss", loss, expected), "wrong clipped loss: -min(ratio * A, clamp(ratio, 1 - eps, 1 + eps) * A); "
       "clamp the ratio, not the advantage")
clipped = meta.get("clipped") if isinstance(meta, dict) else None
expect(clipped is not None and clipped.dtype == torch.bool and clipped.shape == (3, 3),
       "metadata['clipped'] should be a (B, T) bool tensor")
expect(not bool(clipped[0, 0]), "a ratio below 1 - eps with A > 0 is NOT clipped (the min picks the unclipped term, its gradient flows): "
       "clipped means 'the clipped term is strictly smaller', not 'the ratio is outside the range'")
expect(torch.equal(clipped, torch.tensor([[False, False, True], [True, False, False], [False, False, True]])),
       "metadata['clipped'] is wrong: True exactly where clamp(ratio) * A < ratio * A")
loss.sum().backward()
expect(bool((new.grad[clipped] == 0).all()) and bool((new.grad[~clipped] != 0).all()),
       "the gradient should be exactly 0 on clipped tokens and nonzero elsewhere (compute the loss with torch ops, keep the graph)")
expect(cmp("gradient on unclipped tokens = -ratio * A", new.grad[~clipped], (-ratios * A)[~clipped]),
       "on unclipped tokens d loss / d log pi = -ratio * A")
# on-policy: ratio 1, loss -A, gradient -A
lp = -torch.rand(3, 5) * 3
lp_leaf = lp.clone().requires_grad_()
on_loss, _ = compute_grpo_clip_loss(A, lp_leaf, lp, 0.2)
on_loss.sum().backward()
expect(cmp("on-policy (old = new): loss = -A", on_loss, (-A).expand(3, 5)) and cmp("on-policy gradient = -A", lp_leaf.grad, (-A).expand(3, 5)),
       "with old_log_probs equal to the policy's, ratio = 1: loss -A and gradient -A per token")
# very negative log-probs: the ratio from a difference of logs, not a quotient of exps
deep = torch.full((3, 2), -110.0)
deep_loss, _ = compute_grpo_clip_loss(A, deep + 0.1, deep, 0.2)
expect(bool(torch.isfinite(deep_loss).all()), "NaN for log-probs near -110: compute the ratio as exp(new - old), not exp(new) / exp(old)")
print("all visible checks passed")
# Hidden cases: advantages of both signs and zero, clip ranges 0.1 to 0.5, wide and narrow
# ratios, on-policy, very negative log-probs, float64, (B,) advantages.

# %% [markdown]
# ### Figure: the clipped objective and its gradient against the ratio
#
# Your `compute_grpo_clip_loss` on a grid of ratios $\rho \in [0.3, 2]$ (one "token" per grid
# point, $\log\pi_\theta = \log\rho$, $\log\pi_{\text{old}} = 0$), for $A = +1$ and $A = -1$,
# $\epsilon = 0.2$. Top: the objective $-\ell = \min(\rho A, \operatorname{clip}(\rho)A)$.
# Bottom: $\partial(-\ell)/\partial\rho$ computed by autograd through your function. The shaded
# regions are where autograd returned exactly 0; nothing about them is drawn by hand.

# %%
EPS = 0.2
grid = torch.linspace(0.3, 2.0, 1701)
fig, axes = plt.subplots(2, 2, figsize=(12, 6), sharex=True)
for col, A_value in enumerate((1.0, -1.0)):
    ratio = grid.clone().requires_grad_()
    loss, meta = compute_grpo_clip_loss(torch.tensor([[A_value]]), torch.log(ratio)[None, :], torch.zeros(1, len(grid)), EPS)
    objective = -loss[0]
    (slope,) = torch.autograd.grad(objective.sum(), ratio)  # d objective_i / d ratio_i (tokens are independent)
    flat = slope == 0
    ax_obj, ax_grad = axes[0, col], axes[1, col]
    ax_obj.plot(grid, grid * A_value, "k:", lw=1, label="unclipped ρA")
    ax_obj.plot(grid, objective.detach(), lw=2.5, label="min(ρA, clip(ρ)A)")
    ax_grad.plot(grid, slope, lw=2.5, color="tab:orange")
    for ax in (ax_obj, ax_grad):
        ymin, ymax = (-2.2, 2.2)
        ax.fill_between(grid, ymin, ymax, where=flat.numpy(), color="crimson", alpha=0.12, step="mid",
                        label="autograd: gradient exactly 0")
        for edge in (1 - EPS, 1 + EPS):
            ax.axvline(edge, color="gray", lw=0.8, ls="--")
        ax.set_ylim(ymin, ymax)
    ax_obj.set_title(f"A = {A_value:+.0f}")
    ax_obj.legend(fontsize=8, loc="upper left")
    ax_grad.set_xlabel("ratio ρ = π_θ / π_old")
    lo, hi = grid[flat].min().item() if flat.any() else float("nan"), grid[flat].max().item() if flat.any() else float("nan")
    print(f"A = {A_value:+.0f}: gradient exactly 0 for ratio in [{lo:.3f}, {hi:.3f}] "
          f"({int(flat.sum())} of {len(grid)} grid points); metadata['clipped'] marks the same points: "
          f"{bool(torch.equal(meta['clipped'][0], flat))}")
axes[0, 0].set_ylabel("objective −ℓ (maximised)")
axes[1, 0].set_ylabel("∂(−ℓ)/∂ρ (autograd)")
plt.tight_layout()
plt.show()

# %% [markdown]
# For $A > 0$ the objective rises with the ratio up to $1 + \epsilon$ and is flat after it: once
# the policy has made a good token $1+\epsilon$ times more likely than the sampling policy did,
# this batch stops pushing it. Below $1 - \epsilon$ nothing is clipped: a good token that became
# *less* likely keeps its full gradient. For $A < 0$ it is the mirror image: flat below
# $1 - \epsilon$ (a bad token already made rare enough), full gradient above $1 + \epsilon$.
# The slope where the gradient flows is $A$ itself, the REINFORCE slope.

# %% [markdown]
# ## Your turn, 3 of 5: `compute_policy_gradient_loss`
#
# One entry point for the three losses, chosen by `loss_type`, so the trainer's configuration is
# a string: `"no_baseline"` (the naive loss on `raw_rewards`), `"reinforce_with_baseline"` (the
# naive loss on `advantages`), `"grpo_clip"` (your clip loss on `advantages`, `old_log_probs`,
# `cliprange`). Use your two functions above. Ignore the arguments the chosen loss does not
# need; raise a `ValueError` that says what is wrong for any other `loss_type` (names are
# case-sensitive: `"GRPO_clip"` is unknown), and when an argument the loss needs is `None` (a
# `TypeError` from `None * tensor` deep inside is not a clear error). Return `(loss, metadata)`:
# the $(B, T)$ loss in the inputs' dtype, and `{}` for the first two, the clip loss's metadata for
# the third (its `clipped` a bool $(B, T)$ tensor).

# %% [given] course_lib.grpo:LOSS_TYPES
import torch

# %% [solution] course_lib.grpo:compute_policy_gradient_loss
import torch

# %% [tests] compute_policy_gradient_loss 3
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("compute_policy_gradient_loss", compute_policy_gradient_loss)
### END HIDDEN TESTS
B, T = 4, 6
logp = -torch.rand(B, T) * 3
raw_r = torch.tensor([[1.0], [0.0], [1.0], [0.0]])
adv = torch.tensor([[0.5], [-0.5], [1.5], [-1.5]])
old = logp + 0.3 * (torch.rand(B, T) - 0.5)
args = dict(raw_rewards=raw_r, advantages=adv, old_log_probs=old, cliprange=0.2)
loss_nb, meta_nb = compute_policy_gradient_loss(logp, "no_baseline", **args)
expect(cmp("no_baseline = -raw_rewards * log pi", loss_nb, -raw_r * logp), "'no_baseline' is the naive loss on raw_rewards")
loss_rb, _ = compute_policy_gradient_loss(logp, "reinforce_with_baseline", **args)
expect(not torch.allclose(loss_rb, -raw_r * logp), "'reinforce_with_baseline' used raw_rewards: it is the naive loss on the advantages")
expect(cmp("reinforce_with_baseline = -advantages * log pi", loss_rb, -adv * logp), "'reinforce_with_baseline' is the naive loss on advantages")
loss_clip, meta_clip = compute_policy_gradient_loss(logp, "grpo_clip", **args)
ref_clip = -torch.minimum(torch.exp(logp - old) * adv, torch.exp(logp - old).clamp(0.8, 1.2) * adv)
expect(cmp("grpo_clip = your clipped loss", loss_clip, ref_clip), "'grpo_clip' is the clip loss on advantages, old_log_probs, cliprange")
expect("clipped" in meta_clip, "return the clip loss's metadata for 'grpo_clip'")
compute_policy_gradient_loss(logp, "no_baseline", raw_rewards=raw_r)  # needs nothing else
compute_policy_gradient_loss(logp, "reinforce_with_baseline", advantages=adv)  # needs nothing else


def raises_value_error(**kwargs):
    try:
        compute_policy_gradient_loss(logp, **kwargs)
    except ValueError as e:
        print(f"ValueError for {kwargs.get('loss_type')!r} with {sorted(k for k in kwargs if k != 'loss_type')}: {e}")
        return True
    except Exception as e:  # noqa: BLE001 - any other exception is the mistake this check names
        print(f"{type(e).__name__} (not ValueError) for {kwargs}: {e}")
    return False


expect(raises_value_error(loss_type="grpo-clip", **args), "an unknown loss_type must raise ValueError")
expect(raises_value_error(loss_type="no_baseline", advantages=adv), "'no_baseline' without raw_rewards must raise ValueError")
expect(raises_value_error(loss_type="grpo_clip", advantages=adv, cliprange=0.2),
       "'grpo_clip' without old_log_probs must raise ValueError (check the arguments before computing)")
print("all visible checks passed")
# Hidden cases: each loss type with all and with only its own arguments, unknown names, and
# each missing argument.

# %% [markdown]
# ## Your turn, 4 of 5: `masked_mean`
#
# The mean of `tensor` over the entries where `mask` is 1, along `dim` (all entries when `dim`
# is None), in the dtype of `tensor`:
#
# $$\operatorname{masked\_mean}(x, m)_b = \frac{\sum_t m_{b,t}\, x_{b,t}}{\sum_t m_{b,t}} .$$
#
# The mask may be bool, int or float 0/1 (`tensor[mask]` works only for bool). As in
# notebook 03's `masked_normalize`, select with `torch.where`, not `tensor * mask`: a masked-out
# $-\infty$ must not turn into $0 \cdot \infty = $ NaN. A row with no entry in the mask has no
# mean: return NaN there ($0/0$), on purpose, rather than a silent 0 that would hide an empty
# response.

# %% [solution] course_lib.masking:masked_mean
import torch

# %% [tests] masked_mean 2
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("masked_mean", masked_mean)
### END HIDDEN TESTS
x = torch.tensor([[1.0, 2.0, 3.0, 4.0], [10.0, 20.0, 30.0, 40.0], [5.0, 6.0, 7.0, 8.0]])
m = torch.tensor([[1, 1, 0, 0], [0, 1, 1, 1], [0, 0, 0, 0]], dtype=torch.bool)
rows = masked_mean(x, m, dim=-1)
expect(rows.shape == (3,), f"shape {tuple(rows.shape)}: dim=-1 reduces the last dimension")
expect(not torch.allclose(rows[:2], torch.tensor([3.0 / 5, 90.0 / 5])), "divided by the mask count of the whole tensor: count along dim")
expect(cmp("per-row means", rows[:2], torch.tensor([1.5, 30.0])), "wrong mean: sum of the masked entries / number of masked entries, per row")
expect(bool(torch.isnan(rows[2])), "a row with an empty mask should give NaN (0/0), not 0")
expect(cmp("dim=None: one mean over all masked entries", masked_mean(x, m), torch.tensor(93.0 / 5)),
       "dim=None should average every masked entry of the tensor")
for kind in (torch.long, torch.float32):
    expect(cmp(f"a {kind} mask", masked_mean(x[:2], m[:2].to(kind), dim=-1), torch.tensor([1.5, 30.0])),
           f"a 0/1 mask of dtype {kind} must work like a bool mask (tensor[mask] indexes rows for non-bool masks)")
inf_x = x[:2].clone()
inf_x[~m[:2]] = -float("inf")
expect(bool(torch.isfinite(masked_mean(inf_x, m[:2], dim=-1)).all()),
       "a masked-out -inf made the mean NaN: select with torch.where(mask.bool(), tensor, 0.0), not tensor * mask")
leaf = x[:2].clone().requires_grad_()
masked_mean(leaf, m[:2], dim=-1).sum().backward()
expect(cmp("gradient = mask / count", leaf.grad, m[:2].float() / m[:2].sum(-1, keepdim=True)), "the gradient should be mask / count per row")
print("all visible checks passed")
# Hidden cases: every dim of 3-d tensors, dim=None, mask dtypes, empty rows, masked infinities,
# float64, the gradient.

# %% [markdown]
# ## Your turn, 5 of 5: `grpo_microbatch_train_step`
#
# The GRPO counterpart of notebook 04's SFT step: compute the per-token loss with your
# `compute_policy_gradient_loss`, average it with your `masked_mean` over the response tokens of
# each sequence (`dim=-1`), then over the batch, divide by `gradient_accumulation_steps`, call
# `backward()`, and return `(loss, metadata)`: the scaled loss you backpropagated (a 0-dim tensor
# in the inputs' dtype), and the loss's metadata. For `"grpo_clip"`, add
# `metadata["clip_fraction"]`, the fraction of response tokens (over the whole micro-batch, mask 1)
# that were clipped, as a float32 number (also for float64 inputs): the trainer logs it. Never
# zero or assign `.grad`: micro-batches add up.

# %% [solution] course_lib.grpo:grpo_microbatch_train_step
import torch

# %% [tests] grpo_microbatch_train_step 4
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("grpo_microbatch_train_step", grpo_microbatch_train_step)
### END HIDDEN TESTS
B, T, k = 3, 6, 2
mask = torch.tensor([[0, 1, 1, 1, 1, 1], [0, 0, 1, 0, 0, 0], [0, 1, 1, 1, 0, 0]], dtype=torch.bool)  # lengths 5, 1, 3
adv = torch.tensor([[1.0], [-2.0], [0.5]])
logp_values = -torch.rand(B, T) * 3
leaf = logp_values.clone().requires_grad_()
loss, meta = grpo_microbatch_train_step(leaf, mask, k, "reinforce_with_baseline", advantages=adv)
per_seq = ((-adv * logp_values) * mask).sum(-1) / mask.sum(-1)
expect(leaf.grad is not None, "no gradient reached the log-probs: call loss.backward() inside the step")
expect(torch.as_tensor(loss).dim() == 0, "return the scalar loss")
token_mean = ((-adv * logp_values) * mask).sum() / mask.sum() / k
expect(not torch.isclose(torch.as_tensor(loss).detach(), token_mean),
       "token-level mean: average each response over its own tokens first (masked_mean dim=-1), then over the batch")
expect(not torch.isclose(torch.as_tensor(loss).detach(), per_seq.mean()),
       "forgot to divide by gradient_accumulation_steps")
expect(cmp("loss = mean_b masked_mean_t(-A log pi) / k", torch.as_tensor(loss).detach(), per_seq.mean() / k),
       "wrong loss: masked_mean over dim=-1, mean over the batch, / gradient_accumulation_steps")
expected_grad = -adv * mask.float() / mask.sum(-1, keepdim=True) / (B * k)
expect(cmp("d loss / d log pi = -A m / (len B k)", leaf.grad, expected_grad), "wrong gradient: -A[b] * mask / (length_b * B * k)")
grpo_microbatch_train_step(leaf, mask, k, "reinforce_with_baseline", advantages=adv)
expect(cmp("after two calls .grad holds twice the gradient", leaf.grad, 2 * expected_grad),
       "gradients were overwritten, not accumulated: let backward() add into .grad")
# grpo_clip: the clip fraction over response tokens
old = logp_values + torch.tensor([[0.0, 0.5, -0.5, 0.0, 0.5, 0.0]])  # ratios e^-0.5, e^0.5 at some tokens
_, meta_clip = grpo_microbatch_train_step(logp_values.clone().requires_grad_(), mask, 1, "grpo_clip",
                                          advantages=adv, old_log_probs=old, cliprange=0.2)
ratio = torch.exp(logp_values - old)
clipped = ratio.clamp(0.8, 1.2) * adv < ratio * adv
expect("clip_fraction" in meta_clip, "for grpo_clip, return metadata['clip_fraction']")
expect(cmp("clip_fraction over response tokens", torch.as_tensor(meta_clip["clip_fraction"]).float(),
           clipped[mask].float().mean()), "clip_fraction: the mean of metadata['clipped'] over response tokens (mask 1) only")
print("all visible checks passed")
# Hidden cases: several micro-batches into one shared parameter (accumulation across calls, on
# top of an existing .grad), all three loss types, k = 1..4, responses of different lengths,
# mask dtypes, float64.

# %% [markdown]
# ## On a real model: an on-policy loss of 0, with a gradient
#
# Rollouts from the course's SFT model `qwen2-sft` (as in notebook 06: temperature 1, $G = 8$
# answers per question, training questions the SFT stage never saw), scored by
# `r1_zero_reward_fn`, advantages from your notebook 06 function, tokenized and scored with your
# notebook 01 and 03 functions where `course_lib.selfcheck.your_functions` finds your notebooks
# next to this one, and the released references otherwise (it prints which).
# `gsm8k_to_r1_zero`, which builds the prompts, is the released reference of notebook 01's.
#
# In GRPO's first optimizer step on a batch, the policy *is* the sampling policy:
# $\log\pi_{\text{old}} = \log\pi_\theta$ (detached), every ratio is 1, and the clipped loss of a
# response is $-A_b$ times the mean of ones. The loss of a micro-batch of whole groups is
# $-\frac{1}{B}\sum_b A_b$, and the advantages of each group sum to 0 (with or without the
# std). So the logged loss is 0, up to float rounding, whatever the model and whatever it has
# learnt. The gradient is not 0:
# $\nabla\rho_t = \rho_t\nabla\log\pi_\theta(o_t) = \nabla\log\pi_\theta(o_t)$, the REINFORCE
# gradient.

# %%
from course_lib import gsm8k_to_r1_zero, load_problems, r1_zero_reward_fn
from course_lib.rollouts import HFEngine, SamplingParams
from course_lib.selfcheck import your_functions
from course_lib.world.tiny_models import load_tiny

compute_group_normalized_rewards = your_functions("06", "compute_group_normalized_rewards")
tokenize_prompt_and_output = your_functions("01", "tokenize_prompt_and_output")
get_response_log_probs, masked_normalize = your_functions("03", "get_response_log_probs", "masked_normalize")

model, tokenizer = load_tiny("qwen2-sft")
G = 8
N_QUESTIONS = 8 if GRADING else 64
questions = [gsm8k_to_r1_zero(p) for p in load_problems("arith", "train")[128 : 128 + N_QUESTIONS]]
rollouts = HFEngine(model, tokenizer).generate([q["prompt"] for q in questions],
                                               SamplingParams(temperature=1.0, max_tokens=100, min_tokens=4, n=G, seed=0))
responses = [r.text for r in rollouts]
prompts = [q["prompt"] for q in questions for _ in range(G)]
truths = [q["ground_truth"] for q in questions for _ in range(G)]
advantages, raw_rewards, _ = compute_group_normalized_rewards(r1_zero_reward_fn, responses, truths, G, 1e-6, True)
batch = tokenize_prompt_and_output(prompts, responses, tokenizer)
print(f"{len(responses)} responses, mean reward {raw_rewards.mean():.3f}, "
      f"response tokens {batch['response_mask'].sum(-1).float().mean():.1f} on average")

# %%
ONPOLICY_QUESTIONS = 4  # 32 responses: two micro-batches of two groups each
rows = slice(0, ONPOLICY_QUESTIONS * G)
K = 2


def gradient_of(loss_type):
    """Accumulate one optimizer step's gradient over K micro-batches; return (sum of losses, flat gradient)."""
    model.zero_grad(set_to_none=True)
    n, total = ONPOLICY_QUESTIONS * G, 0.0
    for j in range(K):
        mb = slice(j * n // K, (j + 1) * n // K)
        logp = get_response_log_probs(model, batch["input_ids"][mb], batch["labels"][mb])["log_probs"]
        loss, _ = grpo_microbatch_train_step(logp, batch["response_mask"][mb], K, loss_type,
                                             raw_rewards=raw_rewards[mb, None], advantages=advantages[mb, None],
                                             old_log_probs=logp.detach(), cliprange=0.2)
        total += float(loss)
    return total, torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])


model.train()
loss_clip, grad_clip = gradient_of("grpo_clip")
loss_rb, grad_rb = gradient_of("reinforce_with_baseline")
print(f"grpo_clip, on-policy:    loss {loss_clip:+.2e}   gradient norm {grad_clip.norm():.3e}")
print(f"reinforce_with_baseline: loss {loss_rb:+.2e}   gradient norm {grad_rb.norm():.3e}")
expect(abs(loss_clip) < 1e-5, "the on-policy grpo_clip loss should be ~0: each group's advantages sum to 0 and every ratio is 1")
expect(grad_clip.norm() > 1e-4, "the on-policy gradient should not be 0")
expect(cmp("on-policy grpo_clip gradient = REINFORCE-with-baseline gradient", grad_clip, grad_rb, atol=1e-7, rtol=1e-4),
       "on-policy, the clipped loss and REINFORCE with baseline must have the same gradient")

# %% [markdown]
# The clipped loss reads 0 and the REINFORCE loss reads something else entirely, yet the two
# gradients agree to float rounding. The *value* of a policy-gradient loss is not an objective
# you can watch go down: it is a device whose gradient is right. To see whether GRPO learns,
# watch the reward, and for the clip, the clip fraction (notebook 09).

# %% [markdown]
# ## Three ways to average over tokens: the length bias, measured
#
# The step above averages each response over its own tokens, then over responses. Two other
# normalisers are in use:
#
# | normaliser | loss | weight of token $t$ of response $b$ | total weight of response $b$ |
# |---|---|---|---|
# | per-sequence mean (GRPO) | $\frac{1}{B}\sum_b \frac{1}{L_b}\sum_t \ell_{b,t}$ | $\frac{1}{B L_b}$ | $\frac{1}{B}$ |
# | per-token mean (DAPO) | $\frac{1}{\sum_b L_b}\sum_{b,t} \ell_{b,t}$ | $\frac{1}{\sum_b L_b}$ | $\frac{L_b}{\sum_b L_b}$ |
# | constant (Dr. GRPO) | $\frac{1}{B\,C}\sum_{b,t} \ell_{b,t}$ | $\frac{1}{B\,C}$ | $\frac{L_b}{B\,C}$ |
#
# with $L_b$ the length of response $b$ and $C$ a constant (the generation budget, here 100
# tokens). The per-sequence mean gives every response the same total weight, so the longer the
# response, the smaller the push on each of its tokens: a long wrong answer ($A < 0$) is
# penalised less per token than a short one, and a short right answer ($A > 0$) is rewarded
# more per token than a long one. Liu et al. (2025, Dr. GRPO) argue this biases training toward
# long wrong answers; DAPO (Yu et al., 2025) moves to the per-token mean for the same reason.
# Below, autograd measures the weight $\partial \mathcal{L} / \partial \log\pi(o_{b,t})$ that each
# normaliser gives each token of the real responses sampled above (a leaf tensor stands in for
# the log-probs; the weights do not depend on their values).

# %%
mask = batch["response_mask"]
lengths = mask.sum(-1).float()
right = raw_rewards == 1
C = 100.0


def token_weights(normalise):
    logp = torch.zeros(mask.shape, requires_grad=True)  # stands in for log pi: the loss is linear in it
    per_token = -advantages[:, None] * logp
    normalise(per_token).backward()
    return -logp.grad  # the push on each token's log-prob, sign included: + raises it, - lowers it


weights = {
    "per-sequence mean (GRPO)": token_weights(lambda x: masked_mean(x, mask, dim=-1).mean()),
    "per-token mean (DAPO)": token_weights(lambda x: masked_mean(x, mask)),
    "constant C = 100 (Dr. GRPO)": token_weights(lambda x: masked_normalize(x, mask, dim=-1, normalize_constant=C).mean()),
}
has_signal = advantages != 0
print(f"mean length: right answers {lengths[right].mean():.1f} tokens, wrong answers {lengths[~right].mean():.1f} tokens "
      f"({int(right.sum())} right, {int((~right).sum())} wrong; {int(has_signal.sum())} with a nonzero advantage)")

fig, axes = plt.subplots(1, 3, figsize=(14, 3.8), sharey=True)
for ax, (name, w) in zip(axes, weights.items()):
    per_token = (w * mask).sum(-1) / lengths  # the (constant) weight of each token of response b
    for sel, color, label in ((right & has_signal, "tab:green", "right (A > 0)"), (~right & has_signal, "crimson", "wrong (A < 0)")):
        ax.scatter(lengths[sel], per_token[sel] / advantages[sel].abs(), s=12, color=color, alpha=0.7, label=label)
    ax.axhline(0, color="gray", lw=0.8)
    ax.set_title(name)
    ax.set_xlabel("response length L (tokens)")
axes[0].set_ylabel("push per token / |A|")
axes[0].legend(fontsize=8)
plt.tight_layout()
plt.show()

for name, w in weights.items():
    per_token = ((w * mask).sum(-1) / lengths)[has_signal] / advantages[has_signal].abs()
    total = (w * mask).sum(-1)[has_signal] / advantages[has_signal].abs()
    L = lengths[has_signal]
    short, long = L <= L.median(), L > L.median()
    print(f"{name:28s} per-token push, short vs long responses: {per_token.abs()[short].mean():.2e} vs "
          f"{per_token.abs()[long].mean():.2e};  total push per response: {total.abs()[short].mean():.2e} vs {total.abs()[long].mean():.2e}")

# %% [markdown]
# Reading the three panels (each point is one sampled response, its per-token push divided by
# the size of its advantage): with the per-sequence mean the push per token falls as $1/L$,
# for right and wrong answers alike, so the long responses of the batch get a weaker signal per
# token; the total push per response is the same for all. With the per-token mean and with the
# constant, every token of every response gets the same push for a given $|A|$, and a long
# response's total push grows with its length. In this batch the wrong answers are also the
# longer ones on average (61 against 55 tokens in the student-mode run that wrote this text;
# printed above), so the per-sequence mean penalises exactly them the least per token. The
# per-token mean depends on the batch (its
# total token count), the constant does not; and a per-token mean computed per micro-batch
# divides each micro-batch by its own token count, so the pieces no longer add up to the
# batch's token mean (notebook 04's lesson), while the per-sequence mean over equal-sized
# micro-batches and the constant add up exactly.
#
# In the course trainer the choice is the loss step you pass (`train_step_fn`); the step you
# wrote is the per-sequence mean that the GRPO paper and CS336 use, and CS336's GRPO
# experiments (notebook 09) compare it with the constant normaliser.

# %% [markdown]
# ## Pitfall from practice: reading the GRPO loss curve
#
# A GRPO run's logged loss is one of the most misread numbers in post-training. On-policy
# (one optimizer step per rollout batch, the common setting), the clipped loss is 0 up to
# rounding at every step, as measured above, however well or badly the run is going; with
# REINFORCE and a baseline it is a weighted sum of log-probs that drifts with the response
# lengths and the entropy. Neither is an objective that should go down. "Why is my GRPO loss 0?"
# is among the questions most asked about GRPO trainers (for example huggingface/trl issue
# #2703 and huggingface/open-r1 issue #239); the answer is the one measured above. What to watch
# instead: the reward
# (and the held-out reward), the clip fraction (0 on-policy; when it is large off-policy, the
# policy moves too far per batch), the token entropy and the response length (collapse and
# length blow-up show there first), and the gradient norm.
#
# ## Summary
#
# - Sampling is not differentiable; the score-function identity
#   $\nabla\mathbb{E}[R] = \mathbb{E}[R\,\nabla\log\pi]$ is, and REINFORCE's estimate matches
#   finite differences, at the Monte Carlo rate $1/\sqrt{n}$; a baseline removes the noise a
#   reward offset adds.
# - Per-token losses: $-A\log\pi$ (no baseline: $A = R$); clipped:
#   $-\min(\rho A, \operatorname{clip}(\rho, 1\pm\epsilon)A)$ with $\rho = e^{\log\pi - \log\pi_{\text{old}}}$;
#   the gradient is exactly 0 where the clipped term is the smaller one.
# - `masked_mean` over each response, mean over the batch, $/k$, `backward()`; gradients
#   accumulate.
# - On-policy, the clipped loss is 0 and its gradient is REINFORCE's.
# - The per-sequence mean weighs each token by $1/L$; per-token and constant normalisers do not.
#
# Next, notebook 08 looks at a silent mismatch between the log-probs of training and of
# generation, and notebook 09 puts your functions of 06 and 07 into the full GRPO loop.

# %% [markdown]
# # 11 · PPO with a critic: per-token advantages from a learned value
#
# **Goal.** GRPO (notebooks 06-09) scores a whole response and gives each of its tokens the same
# advantage: its reward against its group's. PPO, the algorithm GRPO was cut down from, learns a
# second network, the **critic** $V(s_t)$, that predicts the reward still to come from every
# position, and gives each token its own advantage from the critic's predictions. You write the
# pieces that turn one reward per response into per-token advantages and train the critic beside
# the actor; then you measure what the critic costs (memory, seconds), what it buys on the tiny
# task (held-out reward at an equal number of samples), how GAE's $\lambda$ trades bias for
# variance, and three bugs that users of PPO trainers report.
#
# Graded: `token_level_rewards`, `compute_gae`, `masked_whiten`, `value_loss` and
# `ppo_microbatch_train_step` (visible checks and hidden cases in the same cell: all the points
# go through the hidden cases).

# %%
import json
import os
import time

import matplotlib.pyplot as plt
import torch

torch.manual_seed(0)
# One thread: the tiny model's matrices are too small for threads to pay off, and on a busy machine
# (or while many notebooks are graded side by side) competing threads slow them down.
torch.set_num_threads(1)
GRADING = bool(os.environ.get("NBGRADER_EXECUTION"))  # set by nbgrader while grading: keep cells small
from course_lib.selfcheck import cmp, expect  # cmp: exact / approximate / max diff; expect: a named mistake

# %% [markdown]
# ## Four models, and what they cost
#
# PPO as InstructGPT runs it (Ouyang et al., 2022) holds four models: the **actor** $\pi_\theta$
# (the policy, trained), a frozen **reference** $\pi_\text{ref}$ (for the KL penalty), the
# **critic** (the policy's backbone with a value head instead of the LM head, trained) and the
# **reward model** (frozen).
# Trained in float32 with AdamW, a model of $N$ parameters holds its weights (4 bytes each), its
# gradients (4) and Adam's two moments (8): $16N$ bytes. A frozen one holds its weights: $4N$.
#
# | setup | actor | critic | reference | reward model | total |
# |---|---|---|---|---|---|
# | PPO | $16N$ | $16N$ | $4N$ | $4N$ | $40N$ |
# | GRPO with a KL reference | $16N$ | | $4N$ | | $20N$ |
# | GRPO without one | $16N$ | | | | $16N$ |
#
# Here the reward is a rule (`r1_zero_reward_fn`), so the course's PPO holds three networks,
# $36N$. The cell below builds each setup on the tiny model, takes one real AdamW step, and
# *counts* the bytes of every weight, gradient and optimizer state that then exists; then it
# computes the same for Qwen2.5-Math-1.5B from its shape (built on PyTorch's `meta` device,
# which allocates nothing).

# %%
from transformers import Qwen2Config, Qwen2ForCausalLM

from course_lib.training.common import make_optimizer
from course_lib.training.critic import Critic, parameter_count
from course_lib.training.grpo_trainer import frozen_copy
from course_lib.world.tiny_models import load_tiny


def tensor_bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


def trained_bytes(model, optimizer) -> dict:
    """Bytes of the weights, gradients and optimizer state of a model after an optimizer step."""
    state = [v for s in optimizer.state.values() for v in s.values() if isinstance(v, torch.Tensor) and v.dim() > 0]
    return {"weights": tensor_bytes(model.parameters()), "grads": tensor_bytes(p.grad for p in model.parameters()),
            "adam": tensor_bytes(state)}


def measure_setup(critic: bool, reference: bool) -> int:
    policy, tok = load_tiny("qwen2-sft")
    models = [policy] + ([Critic(policy)] if critic else [])
    ids = torch.randint(0, len(tok), (4, 32))
    total = 0
    for m in models:
        opt = make_optimizer(m, lr=1e-4, weight_decay=0.0, betas=(0.9, 0.95))
        out = m(ids)
        (out.logits if hasattr(out, "logits") else out).float().mean().backward()
        opt.step()  # Adam's moments exist from the first step on
        total += sum(trained_bytes(m, opt).values())
    if reference:
        total += tensor_bytes(frozen_copy(policy).parameters())
    return total


n_tiny = parameter_count(load_tiny("qwen2-sft")[0])
setups = {"PPO (actor, critic, reference)": (True, True), "GRPO with a reference": (False, True),
          "GRPO without one": (False, False)}
print(f"tiny model: N = {n_tiny:,} parameters")
measured = {}
for name, (critic, reference) in setups.items():
    measured[name] = measure_setup(critic, reference)
    print(f"  {name:32s} {measured[name] / 1e6:7.2f} MB = {measured[name] / n_tiny:5.2f} N bytes")

qwen = Qwen2Config(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                   num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True)
with torch.device("meta"):
    n_qwen = parameter_count(Qwen2ForCausalLM(qwen))
print(f"Qwen2.5-Math-1.5B: N = {n_qwen / 1e9:.3f} B parameters (its published shape, counted on the meta device)")
for name, per_param in (("PPO with a reward model (40N)", 40), ("PPO, rule reward (36N)", 36),
                        ("GRPO with a reference (20N)", 20), ("GRPO without one (16N)", 16)):
    print(f"  {name:32s} {per_param * n_qwen / 2**30:6.1f} GiB before a single activation")

# %% [markdown]
# Counted: $36.00N$, $20.00N$ and $16.00N$. The critic drops the LM head, which holds no
# weights of its own here (the tiny model ties it to the embeddings), and adds a head of $d + 1$
# parameters, too few to show in the rounding.
#
# At 1.5 B parameters, PPO's states alone are 51.8 GiB with a rule reward (57.5 GiB with a reward
# model), before activations: on one 80 GB GPU that leaves far less room for the batch than GRPO's
# 23.0-28.8 GiB. This is the cost GRPO's paper removes. Not measured here: the activation peak of a
# real step (it depends on batch, length and checkpointing; the machine here has no GPU).
#
# ## Rewards per token: `token_level_rewards`
#
# The reward function scores a whole response: one number per row, `scores` of shape (B,).
# PPO needs a reward per token: the score goes on the **last response token** (the action that
# ended the response), 0 on the others; with a KL penalty, every response token also pays
# $\beta \cdot \mathrm{kl}_t$ (InstructGPT's per-token $k_1$):
#
# $$r_t = \text{score} \cdot [t = \text{last response position}] - \beta\, \mathrm{kl}_t \,[\text{mask}_t = 1].$$
#
# Find the last position from `response_mask`, never from token ids: a pad id that equals the
# end-of-sequence id (common) moves a position found by searching ids (measured at the end).
#
# The cell below gives the pieces of notebooks 04 and 07 this notebook builds on (`masked_mean`,
# the clip loss) and a shape check the references share.

# %% [given] course_lib.masking:masked_mean course_lib.grpo:_as_column course_lib.grpo:compute_grpo_clip_loss course_lib.ppo:_check_same_shape

# %% [markdown]
# ### Your turn: `token_level_rewards(scores, response_mask, kl=None, kl_coef=0.0)`
#
# Returns (B, T), in the dtype of `scores` (promoted with `kl`'s when it is given); a row with no
# response token is all 0. What the hidden cases check: prompts of any length before the response
# and padding after it, responses that end at the last column, one-token responses, empty rows,
# bool, long and float masks, `kl` None, given with `kl_coef` 0 and with `kl_coef` > 0, large
# values of `kl` outside the mask (they must not count), square B = T inputs, float32 and float64.

# %% [solution] course_lib.ppo:token_level_rewards
import torch

# %% [tests] token_level_rewards 2
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("token_level_rewards", token_level_rewards)
### END HIDDEN TESTS
mask = torch.tensor([[0, 1, 1, 1, 0, 0], [0, 0, 1, 0, 0, 0], [0, 0, 0, 0, 0, 0]])
scores = torch.tensor([1.0, -2.0, 5.0])
got = token_level_rewards(scores, mask)
expect(got.shape == mask.shape and got.dtype == scores.dtype, f"shape {tuple(got.shape)} / dtype {got.dtype}: one reward per position")
expect(got[0, 4] == 0, "the score landed one past the last response token, on the padding: it is masked away there")
expect(got[0, 2] == 0 or got[0, 3] != 0, "put the score on the LAST response token, not on mask.sum() - 1 (that ignores the prompt)")
expect(cmp("the score on each row's last response token", got, torch.tensor(
    [[0, 0, 0, 1.0, 0, 0], [0, 0, -2.0, 0, 0, 0], [0, 0, 0, 0, 0, 0]])), "score on the last position where the mask is 1; an empty row stays 0")
kl = torch.full((3, 6), 0.5)
got = token_level_rewards(scores, mask, kl=kl, kl_coef=0.1)
expect(got[0, 0] == 0, "the KL penalty counts on response tokens only: the prompt's positions stay 0")
expect(cmp("reward minus kl_coef * kl on response tokens", got, torch.tensor(
    [[0, -0.05, -0.05, 0.95, 0, 0], [0, 0, -2.05, 0, 0, 0], [0, 0, 0, 0, 0, 0]])), "subtract kl_coef * kl on every response token")
print("all visible checks passed")

# %% [markdown]
# ## Advantages from the critic: `compute_gae`
#
# With values $V_t$ from the critic, the temporal-difference residual of token $t$ is
# $\delta_t = r_t + \gamma V_{t+1} - V_t$: what this token's action earned, as judged by how
# much it changed the critic's prediction. Generalised advantage estimation (Schulman et al.,
# 2015) sums them with a decay $\gamma\lambda$:
#
# $$A_t = \sum_{l \ge 0} (\gamma\lambda)^l \delta_{t+l} = \delta_t + \gamma\lambda A_{t+1},
# \qquad \text{returns}_t = A_t + V_t .$$
#
# - $\lambda = 0$: $A_t = \delta_t$, one step of the critic's judgement (low variance, biased by
#   the critic's errors);
# - $\lambda = \gamma = 1$: $A_t = \sum_{l} r_{t+l} - V_t$, the Monte Carlo return less the
#   critic's baseline (unbiased, high variance).
#
# The recursion runs backward over each row's response positions, with $V = 0$ after the last
# response token (the episode ended: there is nothing to bootstrap from; the value the critic
# happens to output at a padding position means nothing). Advantages and returns are 0 outside
# the mask, and rewards and values there are never read.
#
# ### Your turn: `compute_gae(rewards, values, response_mask, gamma, lam)`
#
# Returns `(advantages, returns)`, each (B, T), in the promoted dtype of rewards and values. What
# the hidden cases check: prompts and padding of every length (with large values and rewards at
# the masked positions), empty rows, one-token responses, responses that end at the last column,
# $(\gamma, \lambda)$ of (1, 1), (1, 0), (0.99, 0.95), (0.9, 0.5), (1, 0.95), rewards on every
# token (as with a KL penalty), responses up to 64 tokens, bool, long and float masks, square
# inputs, float32 and float64.

# %% [solution] course_lib.ppo:compute_gae
import torch

# %% [tests] compute_gae 3
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("compute_gae", compute_gae)
### END HIDDEN TESTS
mask = torch.tensor([[0, 1, 1, 1, 0], [0, 0, 1, 1, 1]])
rewards = torch.tensor([[9.0, 0.0, 0.0, 1.0, 9.0], [9.0, 9.0, 0.0, 0.0, 2.0]])  # 9: outside the mask, never read
values = torch.tensor([[7.0, 0.5, 0.25, 0.75, 7.0], [7.0, 7.0, 1.0, 1.0, 1.0]])  # 7: outside the mask
adv, ret = compute_gae(rewards, values, mask, gamma=1.0, lam=1.0)
expect(adv.shape == mask.shape and ret.shape == mask.shape, "advantages and returns are (B, T) each")
expect(adv[0, 3] != 1.0 + 7.0 - 0.75, "you bootstrapped from the padding's value: V = 0 after the last response token")
expect(cmp("lam = gamma = 1: the Monte Carlo return minus V", adv, torch.tensor(
    [[0, 0.5, 0.75, 0.25, 0], [0, 0, 1.0, 1.0, 1.0]])), "with lam = gamma = 1, A_t = (sum of the rewards from t on) - V_t")
expect(cmp("returns = advantages + values on the response", ret, torch.tensor(
    [[0, 1.0, 1.0, 1.0, 0], [0, 0, 2.0, 2.0, 2.0]])), "returns_t = A_t + V_t where the mask is 1, and 0 elsewhere")
adv0, _ = compute_gae(rewards, values, mask, gamma=0.9, lam=0.0)
expect(cmp("lam = 0: the TD residual r_t + gamma V_{t+1} - V_t", adv0, torch.tensor(
    [[0, 0.9 * 0.25 - 0.5, 0.9 * 0.75 - 0.25, 1.0 - 0.75, 0], [0, 0, 0.9 - 1.0, 0.9 - 1.0, 2.0 - 1.0]])),
    "with lam = 0, A_t = r_t + gamma * V_{t+1} - V_t (gamma in delta, V = 0 after the last response token)")
print("all visible checks passed")

# %% [markdown]
# ## Whitening: `masked_whiten`
#
# PPO normalises the advantages of a rollout batch over its response tokens, so that the actor's
# step size does not depend on the reward's scale: $(A - \mu) / \sqrt{\sigma^2 + 10^{-8}}$ with
# the mean and the unbiased variance taken over the masked entries only (TRL's `masked_whiten`).
# Padding must not count: a batch of short responses padded to a long one would otherwise have
# its mean pulled to the padding's 0.
#
# ### Your turn: `masked_whiten(values, mask, shift_mean=True)`
#
# Same shape and dtype out, 0 where the mask is 0; `shift_mean=False` adds the mean back (only the
# scale changes). Raise a `ValueError` when fewer than 2 entries are masked in. What the hidden
# cases check: 1-d, 2-d and 3-d inputs, bool, long and float masks, both values of `shift_mean`,
# large values outside the mask, constant values under the mask (variance 0), values with a large
# common offset, float32 and float64.

# %% [solution] course_lib.ppo:masked_whiten
import torch

# %% [tests] masked_whiten 1
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("masked_whiten", masked_whiten)
### END HIDDEN TESTS
x = torch.tensor([[1.0, 2.0, 3.0, 100.0], [4.0, 5.0, -50.0, 0.0]])
m = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
got = masked_whiten(x, m)
kept = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])
want = torch.zeros_like(x)
want[m.bool()] = (kept - kept.mean()) / torch.sqrt(kept.var() + 1e-8)
expect(got[0, 3] == 0 and got[1, 2] == 0, "masked-out entries must be 0 in the output")
expect(not torch.allclose(got[m.bool()], (kept - kept.mean()) / torch.sqrt(kept.var(unbiased=False) + 1e-8)),
       "use the unbiased variance (divide by n - 1)")
expect(cmp("whitened over the masked entries", got, want), "mean and variance over the entries where the mask is 1 only")
expect(cmp("shift_mean=False adds the mean back", masked_whiten(x, m, shift_mean=False), torch.where(m.bool(), want + kept.mean(), 0.0)),
       "with shift_mean=False, add the masked mean back after scaling")
print("all visible checks passed")

# %% [markdown]
# ## The critic's loss: `value_loss`
#
# The critic regresses $V$ on the returns. As the actor's ratio is clipped, PPO clips how far an
# update moves the value from the one the batch was scored with, $V_\text{old}$, and takes the
# *larger* of the two errors, so that the clip only ever removes an improvement, never adds one:
#
# $$L_V = \tfrac12 \,\mathrm{mean}_{\text{mask}} \max\big((V - R)^2,\; (\mathrm{clip}(V, V_\text{old} - c, V_\text{old} + c) - R)^2\big).$$
#
# The mean is over every response token of the batch (the sum over the mask divided by the
# number of masked entries), as TRL's and verl's value losses take it.
#
# ### Your turn: `value_loss(values, old_values, returns, response_mask, cliprange_value)`
#
# A 0-dim tensor in the values' dtype, differentiable in `values`. What the hidden cases check:
# the clip active on either side, inactive, a range so wide it never clips, rows of very different
# lengths (a mean of per-row means differs from the token mean), large values outside the mask,
# bool, long and float masks, square inputs, float32 and float64, and the gradient with respect
# to `values`.

# %% [solution] course_lib.ppo:value_loss
import torch

# %% [tests] value_loss 2
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("value_loss", value_loss)
### END HIDDEN TESTS
v = torch.tensor([[0.0, 1.0, 2.0, 9.0], [0.5, 0.0, 0.0, 9.0]], requires_grad=True)
v_old = torch.tensor([[0.0, 0.5, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
R = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
m = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0]])
got = value_loss(v, v_old, R, m, cliprange_value=0.2)
# token by token: (V - R)^2 = 1, 0, 1, .25; clipped V = 0, 0.7, 1.2, 0.2 -> (clipped - R)^2 = 1, .09, .04, .64
expect(got.dim() == 0, "value_loss returns one number")
expect(not torch.isclose(got, torch.tensor(0.5 * (1 + 0 + 0.04 + 0.25) / 4)), "max, not min: the clip may only remove an improvement")
expect(not torch.isclose(got, torch.tensor(0.5 * ((1 + 0.09 + 1) / 3 + 0.64) / 2)), "the mean is over tokens, not a mean of per-row means")
expect(cmp("0.5 * token mean of the larger squared error", got, torch.tensor(0.5 * (1 + 0.09 + 1 + 0.64) / 4)),
       "0.5 * masked mean over all response tokens of max((V - R)^2, (clip(V, V_old - c, V_old + c) - R)^2)")
got.backward()
expect(v.grad is not None and v.grad[0, 3] == 0, "the gradient must reach values, and be 0 outside the mask")
print("all visible checks passed")

# %% [markdown]
# ## The PPO update: `ppo_microbatch_train_step`
#
# The actor's loss is notebook 07's clip loss with one advantage **per token** instead of one per
# response, aggregated exactly as 07's micro-batch step does (the mean over each response's
# tokens, then over the batch), so that PPO and GRPO differ in their advantages alone. The
# critic's loss is added with a weight `vf_coef`; the sum, divided by the number of micro-batches,
# is backpropagated into both networks (their graphs are separate: the actor's gradient comes
# from the policy loss, the critic's from the value loss).
#
# $$\text{loss} = \frac{\mathrm{mean}_b\, \mathrm{mean}_{t \in o_b} \big(-\min(\rho_t A_t, \mathrm{clip}(\rho_t, 1 \pm \epsilon) A_t)\big) + c_V L_V}{\text{gradient\_accumulation\_steps}}$$
#
# ### Your turn: `ppo_microbatch_train_step(policy_log_probs, values, response_mask, gradient_accumulation_steps, *, advantages, old_log_probs, old_values, returns, cliprange, cliprange_value, vf_coef)`
#
# All tensors (B, T). Backpropagate the loss, return it (detached, in the dtype of the log-probs
# and values) with a dict of `policy_loss`, `value_loss` (both unscaled, in that dtype too),
# `clip_fraction` (the fraction of response tokens whose clipped actor term is strictly the
# smaller) and `value_clip_fraction` (the fraction of response tokens whose clipped value term is
# strictly the larger), the two fractions as float32 numbers, also for float64 inputs. Write the
# clip loss and the masked mean yourself or call your own functions of this notebook; the
# course's copies do not count. What the hidden cases check: 1 to 4 micro-batches accumulating
# into the `.grad` of an actor and a critic parameter (also on top of an existing gradient),
# responses of different lengths, `vf_coef` 0, 0.5 and 1, square inputs, float32 and float64, and
# each returned number.

# %% [solution] course_lib.ppo:ppo_microbatch_train_step
import torch

# %% [tests] ppo_microbatch_train_step 3
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("ppo_microbatch_train_step", ppo_microbatch_train_step)
### END HIDDEN TESTS
theta = torch.zeros(2, 3, requires_grad=True)  # the actor's log-probs are theta - 1
phi = torch.zeros(2, 3, requires_grad=True)  # the critic's values are phi
m = torch.tensor([[1, 1, 0], [1, 0, 0]])
A = torch.tensor([[1.0, -1.0, 5.0], [2.0, 5.0, 5.0]])
R = torch.tensor([[1.0, 1.0, 0.0], [0.5, 0.0, 0.0]])
loss, meta = ppo_microbatch_train_step(theta - 1.0, phi, m, 2, advantages=A, old_log_probs=torch.full((2, 3), -1.0),
                                       old_values=torch.zeros(2, 3), returns=R, cliprange=0.2, cliprange_value=10.0,
                                       vf_coef=0.5)
# on-policy: ratio 1, policy loss = -mean_b mean_t A = -((1 - 1) / 2 + 2) / 2 = -1; value loss = 0.5 * (1 + 1 + 0.25) / 3
expect(float(meta["clip_fraction"]) == 0.0, "on-policy (log-probs equal to the old ones) nothing is clipped")
expect(cmp("policy_loss: mean over each response, then over the batch", meta["policy_loss"], torch.tensor(-1.0)),
       "the actor's loss is 07's: masked mean over each response's tokens, then mean over the batch, each token with its own advantage")
expect(cmp("value_loss", meta["value_loss"], torch.tensor(0.375)), "value_loss as you wrote it above (unscaled)")
expect(cmp("loss = (policy_loss + vf_coef * value_loss) / accumulation", loss, torch.tensor((-1.0 + 0.5 * 0.375) / 2)),
       "return (policy_loss + vf_coef * value_loss) / gradient_accumulation_steps")
expect(phi.grad is not None and phi.grad.abs().sum() > 0, "the critic got no gradient: do not detach the values")
expect(cmp("the actor's gradient", theta.grad, torch.tensor([[-0.125, 0.125, 0.0], [-0.5, 0.0, 0.0]])),
       "d loss / d log pi_t = -A_t / (|o_b| * B * accumulation) on-policy")
print("all visible checks passed")

# %% [markdown]
# ## The critic, and PPO as the GRPO trainer with another update
#
# The course's critic (`course_lib.training.critic.Critic`) copies the policy's transformer (the
# features that already predict the answer are a good start for predicting its reward) and puts
# a linear head on it whose weights start at 0, so that $V = 0$ at the first step: the first
# advantages are then plain discounted returns, with no noise from a random head.
#
# The PPO trainer (`course_lib.training.ppo_trainer.train_ppo`) is the GRPO trainer's loop of
# notebook 09 with another update function (`ppo_update.PPOUpdate`): the same rollouts, reward and
# old log-probs; the critic scores the batch, your `token_level_rewards`, `compute_gae` and
# `masked_whiten` make per-token advantages, and your step trains actor and critic. Below, 8
# steps with your functions, from the SFT model of notebook 05.

# %% [given] course_lib.training.critic:Critic
import copy

# %%
from course_lib.training.ppo_trainer import train_ppo

policy, tokenizer = load_tiny("qwen2-sft")
critic = Critic(policy)
probe = torch.randint(0, len(tokenizer), (2, 7))
expect(bool((critic(probe) == 0).all()), "the critic's head starts at 0, so V = 0 everywhere at the first step")

PPO_SETTINGS = dict(lr=3e-4, critic_lr=1e-3, rollout_batch_size=64, group_size=8, train_batch_size=64,
                    gradient_accumulation_steps=2, sampling_min_tokens=4, sampling_max_tokens=100, lam=0.95,
                    gamma=1.0, eval_examples=0, seed=0)
YOURS = dict(step_fn=ppo_microbatch_train_step, token_rewards_fn=token_level_rewards, gae_fn=compute_gae,
             whiten_fn=masked_whiten)  # your four functions, in the trainer
live = []
if not GRADING:
    t0 = time.perf_counter()
    result = train_ppo({**PPO_SETTINGS, "n_grpo_steps": 8}, model=policy, tokenizer=tokenizer, critic=critic,
                       eval_data=[], progress=False, **YOURS)
    live = [r for r in result.metrics if r["kind"] == "train"]
    print(f"8 PPO steps in {time.perf_counter() - t0:.0f} s")
    for r in live:
        print(f"step {r['step']}: reward {r['train_reward']:.3f}  value loss {r['value_loss']:.4f}  "
              f"explained variance {r['explained_variance']:+.3f}  V mean {r['value_mean']:.3f}  "
              f"clip fraction {r['clip_fraction']:.3f}")

# %% [markdown]
# ## PPO against GRPO at an equal number of samples
#
# Both from `qwen2-sft`, 30 steps of 64 responses (8 per question, the same questions in the same
# order), the same clip loss and learning rate; GRPO's advantages are the group's, PPO's the
# critic's. Three seeds each; every 5 steps greedy decoding answers 200 held-out problems. An
# instructor command, `OMP_NUM_THREADS=1 python benchmarks/ppo_11.py`, wrote the data file the
# next cell plots.

# %%
from course_lib.paths import DATA_DIR

RESULTS = json.loads((DATA_DIR / "experiments" / "ppo_11.json").read_text())
runs = RESULTS["runs"]
fig, axes = plt.subplots(1, 4, figsize=(18, 3.8))
colours = {"grpo": "tab:blue", "ppo": "tab:red"}
for run in runs:
    c, label = colours[run["kind"]], f"{run['kind']} seed {run['seed']}"
    samples = [e["step"] * RESULTS["settings"]["rollout_batch_size"] for e in run["evals"]]
    axes[0].plot(samples, [e["answer_reward"] for e in run["evals"]], "o-", color=c, alpha=0.6, label=label)
    elapsed, seconds = 0.0, {}
    for s in run["steps"]:
        elapsed += s["step_time"]
        seconds[s["step"]] = elapsed
    axes[1].plot([seconds[e["step"]] for e in run["evals"]], [e["answer_reward"] for e in run["evals"]], "o-",
                 color=c, alpha=0.6)
    axes[3].plot([s["step"] for s in run["steps"]], [s["advantage_var"] for s in run["steps"]], color=c, alpha=0.6)
    if run["kind"] == "ppo":
        axes[2].plot([s["step"] for s in run["steps"]], [s["explained_variance"] for s in run["steps"]], color=c,
                     alpha=0.6)
axes[0].set(xlabel="sampled responses", ylabel="held-out answer reward", title="reward against samples")
axes[1].set(xlabel="training seconds (rollouts, evaluation excluded)", title="reward against wall clock")
axes[2].set(xlabel="step", ylabel="explained variance", title="the critic (PPO)")
axes[3].set(xlabel="step", ylabel="variance over tokens", title="advantage before normalisation")
axes[0].legend(fontsize=7)
plt.tight_layout()
plt.show()


def final(kind, key):
    values = [run["evals"][-1][key] for run in runs if run["kind"] == kind]
    mean = sum(values) / len(values)
    spread = (sum((v - mean) ** 2 for v in values) / max(1, len(values) - 1)) ** 0.5
    return mean, spread, values


per_step = {}
for kind in ("grpo", "ppo"):
    mean, spread, values = final(kind, "answer_reward")
    of_kind = [run for run in runs if run["kind"] == kind]
    secs = [sum(s["step_time"] for s in run["steps"]) / len(run["steps"]) for run in of_kind]
    per_step[kind] = sum(secs) / len(secs)
    variance = [sum(s["advantage_var"] for s in run["steps"]) / len(run["steps"]) for run in of_kind]
    print(f"{kind}: held-out answer after {RESULTS['settings']['steps']} steps {mean:.3f} +- {spread:.3f} "
          f"(seeds: {', '.join(f'{v:.3f}' for v in values)}); {per_step[kind]:.1f} s per step; per-token advantage "
          f"variance, each run's mean over its steps: {min(variance):.3f} to {max(variance):.3f}")
explained = [[s["explained_variance"] for s in run["steps"]] for run in runs if run["kind"] == "ppo"]
last_5 = [v for run in explained for v in run[-5:]]
print(f"ppo: the critic's explained variance {min(map(min, explained)):+.2f} to {max(map(max, explained)):+.2f}, "
      f"{sum(last_5) / len(last_5):+.3f} on average over each run's last 5 steps; "
      f"GRPO takes {per_step['ppo'] / per_step['grpo']:.1f} times fewer seconds per step")

# %% [markdown]
# Measured (`data/experiments/ppo_11.json`; the start, `qwen2-sft`, answers 0.520 of the 200; a
# score on 200 problems has a standard error of about 0.035):
#
# | | held-out answer after 30 steps (3 seeds) | seconds per step | critic's explained variance | per-token advantage variance |
# |---|---|---|---|---|
# | GRPO | 0.550 +- 0.013 (0.540, 0.545, 0.565) | 1.2 | | 0.080-0.099 |
# | PPO | 0.523 +- 0.019 (0.515, 0.545, 0.510) | 3.4 | -0.28 to +0.08; +0.008 on average over the last 5 steps | 0.044-0.045 |
#
# - **At an equal number of samples GRPO's mean over the three seeds ended higher, by 0.027**
#   (seed by seed: higher on two, equal on one), less than one standard error of a single score:
#   on this task and budget the two are not told apart by reward. **On the wall clock GRPO wins
#   plainly**: 2.9 times fewer seconds per step. The critic doubles the forward and backward work,
#   and GRPO's packed update skips the rows of a group whose rewards are all equal (advantage
#   exactly 0; about half of the demo's groups, notebook 09), which PPO's per-token advantages
#   never are.
# - **The critic learned the mean and little else.** Its explained variance stayed near 0 (it
#   was negative on some steps: worse than predicting the batch mean) in every run: 30 optimizer
#   steps, one per rollout batch, are not enough for it to tell an easy question from a hard one
#   by its prefix. GRPO's group mean *is* such a per-question estimate, from 8 fresh samples, for
#   free. This is the case GRPO's paper makes.
# - The per-token variance of PPO's raw advantage is about half of GRPO's: partly the critic's
#   baseline, partly GAE's discount, which shrinks the advantage of tokens far from the end by
#   $0.95^{\text{distance}}$. A lower variance of a *biased* estimate is not a better gradient:
#   the next section measures the bias.
#
# ## GAE's lambda: bias against variance, measured against Monte Carlo
#
# For one state — a held-out question and a response prefix through token $t$ — the
# $\lambda$-return $G_t = A_t + V_t$ estimates $Q(s_t, a_t)$, the expected reward after that
# token. The truth is one resampling away: sample many continuations of the prefix and average
# their rewards. `benchmarks/ppo_11.py` took the policy and critic of PPO's first seed at the
# end of its run, 64 prefixes (32 questions, 2 positions each), and 32 continuations of each:
# the mean reward of 16 is the Monte Carlo $Q$; on the other 16 it computes $G_t$ for each
# $\lambda$ (with $\gamma = 1$ and the critic's values along each continuation). Bias: the mean
# over prefixes of (mean $G_t$ minus $Q$); variance: the mean over prefixes of the variance of
# $G_t$ over its 16 continuations.

# %%
sweep = RESULTS["lambda_sweep"]
print(f"{sweep['states']} states, {sweep['k']} + {sweep['k']} continuations each ({sweep['policy']}); "
      f"noise of the Monte Carlo Q itself (variance of its mean): {sweep['q_mc_noise_variance']:.4f}")
print(f"{'lambda':>7s} {'bias':>8s} {'mean |bias|':>12s} {'variance':>9s}")
for row in sweep["rows"]:
    print(f"{row['lam']:7.2f} {row['bias']:+8.4f} {row['abs_bias']:12.4f} {row['variance']:9.4f}")
fig, ax = plt.subplots(figsize=(5, 3.5))
ax.plot([r["lam"] for r in sweep["rows"]], [r["abs_bias"] for r in sweep["rows"]], "o-", label="mean |bias|")
ax.plot([r["lam"] for r in sweep["rows"]], [r["variance"] for r in sweep["rows"]], "s-", label="variance")
ax.set(xlabel="lambda", ylabel="mean |bias| and variance of G_t", title="the lambda-return against Monte Carlo Q")
ax.legend()
plt.show()

# %% [markdown]
# Measured (`benchmarks/ppo_11.py`, the critic of the table above, explained variance about 0):
#
# | $\lambda$ | bias | mean \|bias\| | variance |
# |---|---|---|---|
# | 0 | +0.040 | 0.447 | 0.0000 |
# | 0.5 | +0.059 | 0.428 | 0.0000 |
# | 0.95 | +0.094 | 0.294 | 0.0036 |
# | 1 | +0.003 | 0.032 | 0.047 |
#
# The trade, measured: $\lambda = 1$ is unbiased (its mean |bias| of 0.032 is the noise of a
# 16-sample mean on each side; the Monte Carlo $Q$'s own variance is 0.0028) and has the largest
# variance; $\lambda = 0$ has none (the next state is fixed once the token is chosen, so
# $r_t + V_{t+1}$ does not depend on the continuation) and is as wrong as the critic, 0.45 on
# average. With this critic every $\lambda < 1$ buys its low variance with a bias larger than the
# spread it removes; $\lambda = 0.95$, the common default, still errs by 0.29 on average. The
# better the critic, the smaller that bias: the choice of $\lambda$ is a bet on the critic.
#
# ## Three bugs users of PPO trainers report, run
#
# **1. The reward on a pad token.** An off-by-one puts the score one past the last response
# token. The position is padding, outside the mask: GAE never reads it, every advantage is the
# critic's own noise (exactly 0 at the start, V = 0), and nothing is learned.

# %%
from course_lib import get_response_log_probs, tokenize_prompt_and_output
from course_lib.training.config import build_config
from course_lib.training.ppo_update import PPOUpdate


def reward_on_pad(scores, response_mask, kl=None, kl_coef=0.0):
    """The bug: every reward one position later, so the score sits on the pad after the response."""
    out = token_level_rewards(scores, response_mask, kl=kl, kl_coef=kl_coef)
    return torch.cat([torch.zeros_like(out[:, :1]), out[:, :-1]], dim=1)


def a_batch(model, seed=0):
    """One rollout batch of 64 responses from `model`, scored as the PPO trainer scores it."""
    from course_lib import compute_group_normalized_rewards, r1_zero_reward_fn
    from course_lib.rollouts import make_engine
    from course_lib.training.grpo_trainer import collect_rollouts, grpo_questions

    cfg = build_config("ppo", {**PPO_SETTINGS, "seed": seed})
    questions = grpo_questions(cfg)[:8]
    return collect_rollouts(make_engine("fast", model, tokenizer), model, tokenizer, questions, cfg, step=0,
                            advantage_fn=compute_group_normalized_rewards, reward_fn=r1_zero_reward_fn,
                            tokenize_fn=tokenize_prompt_and_output, log_probs_fn=get_response_log_probs)


fresh, _ = load_tiny("qwen2-sft")
batch = a_batch(fresh)
settings = dict(gamma=1.0, lam=0.95, vf_coef=0.5, cliprange_value=0.2, critic_lr=1e-3, weight_decay=0.0,
                betas=(0.9, 0.95), whiten_advantages=False, kl_coef=0.0)
mask = batch.tensors["response_mask"].bool()
for name, fn in (("reward on the last response token", token_level_rewards), ("reward on the pad after it", reward_on_pad)):
    prepared = PPOUpdate(Critic(fresh), token_rewards_fn=fn, gae_fn=compute_gae, **settings).prepare(batch.tensors,
                                                                                                   micro=32)
    adv = prepared["advantages"][mask]
    print(f"{name:36s} rewards inside the mask {fn(batch.tensors['raw_rewards'], batch.tensors['response_mask'])[mask].sum():5.1f} "
          f"(of {batch.tensors['raw_rewards'].sum():.0f}); advantages: mean |A| {adv.abs().mean():.4f}, max |A| {adv.abs().max():.4f}")

# %% [markdown]
# Measured on 64 responses of `qwen2-sft`: with the score one position late, none of the 61
# points of reward lies inside the mask, and every advantage is exactly 0 (the critic starts at
# V = 0 and its returns are 0, so it stays there): the clip loss and its gradient are exactly 0
# on every token, for the whole run. Nothing crashes and the logged reward is right: only the
# flat curve tells.
#
# **2. Pad id equal to eos id, masks taken from token ids.** Many tokenizers have no pad token,
# and the usual fix sets `pad_token = eos_token`. A trainer that then builds the response mask as
# `input_ids != pad_token_id` also masks out every real end-of-sequence token: the token that
# *ended* the response loses its reward (it lands on the token before) and its gradient, so the
# model is never taught to stop. Below, the same responses with an eos appended (as a chat
# template or CS336's DPO data does), masked two ways.

# %%
eos = tokenizer.eos_token_id
sample = batch.rollouts[:16]
enc = tokenize_prompt_and_output([r.prompt for r in sample], [r.text + tokenizer.eos_token for r in sample], tokenizer)
ids, labels, right = enc["input_ids"], enc["labels"], enc["response_mask"].bool()
from_ids = right & (labels != eos)  # the bug: with pad = eos, "not padding" read as "not the eos id"
eos_positions = right & (labels == eos)
ones = torch.ones(len(sample))
for name, m in (("mask from lengths", right), ("mask from ids", from_ids)):
    on_eos = (token_level_rewards(ones, m) * eos_positions).sum()
    lp = get_response_log_probs(fresh, ids, labels)["log_probs"]
    lp.retain_grad()
    (-(lp * m).sum()).backward()  # any loss that weighs each masked-in token's log-prob
    print(f"{name:18s}: eos tokens masked in {int((eos_positions & m).sum())} of {int(eos_positions.sum())}, "
          f"reward on an eos token {on_eos:.0f} of {len(sample)}, gradient reaching the eos log-probs "
          f"{lp.grad[eos_positions].abs().sum():.1f} (other tokens: {lp.grad[m & ~eos_positions].abs().sum():.1f})")
fresh.zero_grad(set_to_none=True)

# %% [markdown]
# Measured on 16 responses with an eos appended: the mask from lengths keeps all 16 eos tokens,
# puts the reward on each, and gives each eos log-prob a gradient; the mask from ids keeps none:
# the reward moves to the token before it, and no gradient reaches the eos log-probs,
# however long the run. The fix is the course's: build `response_mask` from lengths when
# tokenizing, never compare ids to `pad_token_id` afterwards.
#
# **3. Dropout left on.** Old log-probs are scored in eval mode (no dropout); the update's forward
# runs in train mode. With dropout in the model, the first minibatch of an on-policy update then
# sees a ratio $\ne 1$ and clips tokens it should not: the clip fraction on the very first
# minibatch, which must be 0, is not. Qwen2's `attention_dropout` is the knob; TRL and verl set
# every dropout to 0 for RL.

# %%
def first_minibatch_clip_fraction(attention_dropout: float, seed=0) -> tuple[float, float]:
    model, _ = load_tiny("qwen2-sft")
    model.config.attention_dropout = attention_dropout
    for layer in model.model.layers:
        layer.self_attn.attention_dropout = attention_dropout
    seen = []

    def step_fn(*args, **kwargs):
        loss, meta = ppo_microbatch_train_step(*args, **kwargs)
        log_probs, mask = args[0].detach(), args[2].bool()
        seen.append((float(meta["clip_fraction"]), float((log_probs - kwargs["old_log_probs"])[mask].abs().mean())))
        return loss, meta

    train_ppo({**PPO_SETTINGS, "n_grpo_steps": 1, "seed": seed}, model=model, tokenizer=tokenizer, eval_data=[],
              progress=False, **{**YOURS, "step_fn": step_fn})
    return seen[0]


if not GRADING:
    for p in (0.0, 0.1):
        clip, gap = first_minibatch_clip_fraction(p)
        print(f"attention_dropout {p}: first minibatch clip fraction {clip:.4f}, mean |log pi - log pi_old| {gap:.4f}")

# %% [markdown]
# Measured, one PPO step from `qwen2-sft`: with `attention_dropout` 0 the first minibatch's
# log-probs equal the old ones exactly and nothing is clipped; with 0.1 the same weights give log-
# probs 0.34 nats away on average and 5.7% of the tokens are clipped before the policy has moved
# at all. The clip then throws away the gradient of tokens for noise, and the ratio logs lie about
# how far the update went. The fix: every dropout at 0 for RL (or the scoring and the update in the
# same mode).
#
# ## Pitfalls from practice
#
# - **No bootstrap past the end.** The value at a padding position is whatever the head outputs
#   there; GAE must treat the step after the last response token as terminal (V = 0).
# - **The mask, not the ids.** The last token, the eos token and the padding are all found from
#   the mask built from lengths; a mask rebuilt from ids breaks as soon as pad = eos.
# - **Eval mode is not enough.** The scoring pass and the update's forward must see the same
#   network; with dropout in the model the on-policy ratio is not 1.
# - **Whiten over tokens that exist.** Padding counted in the mean and variance moves every
#   advantage.

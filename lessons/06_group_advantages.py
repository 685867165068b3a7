# %% [markdown]
# # 06 · Group advantages: how GRPO turns rewards into a learning signal
#
# **Goal.** Supervised fine-tuning needs worked solutions. Reinforcement learning needs only a
# way to *score* an answer: here `r1_zero_reward_fn`, 1 for a well-formed correct answer and 0
# otherwise. GRPO samples a *group* of $G$ answers to each question from the current model,
# scores them, and asks of each answer: was it better or worse than its siblings? That relative
# score is the *advantage*, and it is the only number from the reward that reaches the gradient.
# You write `compute_group_normalized_rewards`, then run it on real rollouts of the course's
# SFT model, and measure three things every GRPO practitioner meets: dividing by the group's
# standard deviation (GRPO) or not (Dr. GRPO) re-weights easy and hard questions; a group whose
# answers all score the same carries no signal at all, and on a real batch that is a large share
# of the work; `advantage_eps` and a group of size 1 decide what happens at the edges.
#
# Graded: `compute_group_normalized_rewards` (visible checks and hidden cases).

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
# A rollout batch holds $N = n_q \cdot G$ responses: $G$ consecutive samples $o_1, \dots, o_G$ for
# each of $n_q$ questions $q$, each scored $r_i = R(q, o_i)$. GRPO's advantage of response $i$ is
# its reward relative to the rest of its group:
#
# $$A_i = \frac{r_i - \operatorname{mean}(r_1, \dots, r_G)}{\operatorname{std}(r_1, \dots, r_G) + \varepsilon}
# \qquad \text{(GRPO, \texttt{normalize\_by\_std=True})}$$
#
# $$A_i = r_i - \operatorname{mean}(r_1, \dots, r_G)
# \qquad \text{(Dr. GRPO, \texttt{normalize\_by\_std=False})}$$
#
# with the *unbiased* standard deviation, PyTorch's default:
# $\operatorname{std} = \sqrt{\tfrac{1}{G-1}\sum_j (r_j - \bar r)^2}$.
#
# Why subtract the mean: the policy gradient $\mathbb{E}[r \, \nabla \log \pi(o)]$ stays the same
# in expectation when any baseline $b$ that does not depend on $o$ is subtracted from $r$ (because
# $\mathbb{E}_o[\nabla \log \pi(o)] = \nabla \sum_o \pi(o) = \nabla 1 = 0$), and a good baseline
# shrinks its variance a lot. The group mean is a baseline that costs nothing: no value network,
# only the other samples of the same question (strictly, each $r_i$ is part of its own mean, which
# scales the expected gradient of the mean-only version by $(G-1)/G$: a constant factor that the
# learning rate absorbs).
#
# Two facts fall out of the formulas, and they drive the rest of this notebook:
#
# - if all $G$ rewards of a group are equal, every $A_i = 0$: the group says nothing about which
#   answer is better, and it contributes no gradient. Then $\operatorname{std} = 0$, and the
#   formula is $0 / (0 + \varepsilon)$: with $\varepsilon = 0$ it is $0/0 = $ NaN, which would
#   poison the whole batch. The contract: advantage exactly 0, never NaN, for any $\varepsilon \ge 0$.
#   Decide "constant" by comparing the rewards (max = min), not by the std or by $r - \text{mean}$:
#   in float32 the mean of three rewards of 0.9 is not 0.9, so every $r - \text{mean}$ is
#   $6.0 \cdot 10^{-8}$ and the std $7.3 \cdot 10^{-8}$, and with $\varepsilon = 0$ their ratio is
#   0.82 for every answer, not 0 (printed by the check under "Your turn").
# - with 0/1 rewards and $k$ correct answers out of $G$ ($p = k/G$), the mean is $p$ and the
#   unbiased std is $\sqrt{\tfrac{G}{G-1}p(1-p)}$. A correct answer gets $A = 1 - p$ without the
#   std and $(1-p)/\operatorname{std}$ with it, so a *rare* success ($p$ small) or a *rare*
#   failure ($p$ near 1) is amplified by the division: $\operatorname{std} \to 0$ at both ends.
#
# A group of size $G = 1$ has no siblings: $A = r - r = 0$ always (and its unbiased std is
# undefined, $0/0$): GRPO needs $G \ge 2$.

# %% [markdown]
# ## A worked example on tiny tensors
#
# Two questions, $G = 4$. The first group has one correct answer, the second three:

# %%
rewards = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0])
grouped = rewards.view(-1, 4)  # (n_questions, G): row q holds the G consecutive rewards of question q
mean = grouped.mean(dim=1, keepdim=True)
std = grouped.std(dim=1, keepdim=True)  # unbiased: divides by G - 1
print("group means        ", mean.view(-1).tolist())
print("group stds         ", std.view(-1).tolist(), " = sqrt(0.75 / 3) for both")
print("Dr. GRPO  r - mean ", (grouped - mean).view(-1).tolist())
print("GRPO  / (std + eps)", ((grouped - mean) / (std + 1e-6)).view(-1).tolist())
print("with the biased std", ((grouped - mean) / (grouped.std(dim=1, keepdim=True, unbiased=False) + 1e-6)).view(-1).tolist(),
      " <- not the contract")

# %% [markdown]
# The rare success of group 1 gets $+1.5$, three times the size of each failure's $-0.5$; the
# advantages of a group always sum to 0. Note the layout: `view(-1, G)` puts each group in a
# *row*, because the $G$ samples of a question are consecutive. `view(G, -1)` has the same number
# of elements and silently mixes questions.

# %% [markdown]
# ## Your turn: `compute_group_normalized_rewards`
#
# Score every response with `reward_fn(response, ground_truth)`, which returns a dict; the
# reward is its `"reward"` entry (`r1_zero_reward_fn` also reports `"format_reward"` and
# `"answer_reward"`, useful for the metadata). Then compute the advantages of each group as
# above. Return float32 tensors of shape $(N,)$, in the order of the inputs, and a dict of
# batch statistics of your choice (the course's trainer logs the reference's: mean, std, max and
# min reward, format and answer reward, and the fraction of groups whose rewards are all equal).

# %% [solution] course_lib.grpo:compute_group_normalized_rewards
from typing import Callable

import torch

# %% [markdown]
# ## Self-checks
#
# A reward function for the checks: an answer is right when it equals the ground truth.

# %% [tests] compute_group_normalized_rewards 5
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("compute_group_normalized_rewards", compute_group_normalized_rewards)
### END HIDDEN TESTS
def exact_match(response, ground_truth):
    right = float(response.strip() == ground_truth)
    return {"format_reward": 1.0, "answer_reward": right, "reward": right}


responses = ["7", "3", "5", "1", "12", "12", "12", "10"]
truths = ["7"] * 4 + ["12"] * 4
adv, raw, meta = compute_group_normalized_rewards(exact_match, responses, truths, group_size=4,
                                                  advantage_eps=1e-6, normalize_by_std=True)
expect(isinstance(meta, dict), "return a third value, a dict of batch statistics (it may be small)")
expect(adv.shape == (8,) and raw.shape == (8,), f"shapes {tuple(adv.shape)}, {tuple(raw.shape)}: both should be (N,) = (8,)")
expect(adv.dtype == torch.float32 and raw.dtype == torch.float32, f"dtypes {adv.dtype}, {raw.dtype}: return float32 tensors")
expect(cmp("raw rewards", raw, torch.tensor([1.0, 0, 0, 0, 1, 1, 1, 0])), "raw_rewards should be reward_fn(response, ground_truth)['reward'], in input order")
expect(not torch.allclose(adv, torch.tensor([1.7320, -0.5774, -0.5774, -0.5774, 0.5774, 0.5774, 0.5774, -1.7320]), atol=1e-3),
       "you used the biased std (unbiased=False, divides by G): use torch's default, unbiased std (divides by G - 1)")
expect(cmp("advantages, GRPO (std)", adv, torch.tensor([1.5, -0.5, -0.5, -0.5, 0.5, 0.5, 0.5, -1.5]), atol=1e-5),
       "wrong advantages: each group of group_size CONSECUTIVE responses is one question (view(-1, group_size), "
       "not view(group_size, -1)); A = (r - group mean) / (group std + eps)")

adv_dr, _, _ = compute_group_normalized_rewards(exact_match, responses, truths, 4, 1e-6, normalize_by_std=False)
expect(cmp("advantages, Dr. GRPO (no std)", adv_dr, torch.tensor([0.75, -0.25, -0.25, -0.25, 0.25, 0.25, 0.25, -0.75])),
       "normalize_by_std=False: A = r - group mean, with no division by the std")

# the reward is the "reward" entry, not "answer_reward"
half_credit = lambda r, g: {"format_reward": 1.0, "answer_reward": float(r == g), "reward": 0.5 + 0.5 * float(r == g)}
_, raw_half, _ = compute_group_normalized_rewards(half_credit, responses, truths, 4, 1e-6, True)
expect(cmp("reward key", raw_half, 0.5 + 0.5 * raw), "use the 'reward' entry of reward_fn's dict, not 'answer_reward'")

# constant groups: exactly 0, never NaN, also with eps = 0
constant = ["7"] * 4 + ["1"] * 4
for eps in (1e-6, 0.0):
    adv_c, _, _ = compute_group_normalized_rewards(exact_match, constant, truths, 4, eps, True)
    expect(not bool(torch.isnan(adv_c).any()), f"NaN advantages for a group whose rewards are all equal (eps = {eps}): "
           "std is 0 there; such a group must get advantage exactly 0")
    expect(bool((adv_c == 0).all()), f"a group whose rewards are all equal must get advantage exactly 0 (eps = {eps})")

# a constant group of rewards whose float32 mean is not the reward itself (three 0.9s), eps = 0
point_nine = lambda r, g: {"format_reward": 1.0, "answer_reward": 1.0, "reward": 0.9}
adv_09, _, _ = compute_group_normalized_rewards(point_nine, ["a", "b", "c"], ["1"] * 3, 3, 0.0, True)
rewards_09 = torch.tensor([0.9] * 3)
print(f"three 0.9s in float32: r - mean = {(rewards_09 - rewards_09.mean()).tolist()}, std = {rewards_09.std().item():.2e}")
expect(bool((adv_09 == 0).all()), f"three rewards of 0.9 (eps = 0) gave advantages {adv_09.tolist()}: decide a constant "
       "group by comparing its rewards (max == min), not by its std or r - mean, which float rounding leaves non-zero")

# eps is added to the std, not to the variance
adv_eps, _, _ = compute_group_normalized_rewards(exact_match, responses, truths, 4, advantage_eps=0.5, normalize_by_std=True)
expect(cmp("eps = 0.5: (r - mean) / (std + eps)", adv_eps, torch.tensor([0.75, -0.25, -0.25, -0.25, 0.25, 0.25, 0.25, -0.75]) / 1.0),
       "with eps = 0.5 the std 0.5 becomes 1.0: divide by (std + eps), not sqrt(var + eps) or std alone")

# group size 1: no siblings, no signal
adv_1, _, _ = compute_group_normalized_rewards(exact_match, responses, truths, 1, 1e-6, True)
expect(bool((adv_1 == 0).all()) and not bool(torch.isnan(adv_1).any()),
       "group_size = 1 must give advantage 0 (a response minus its own mean), not NaN (the unbiased std of one value is NaN)")
print("all visible checks passed")
# Hidden cases: groups of 1 to 16 responses, 0/1 and continuous rewards, constant groups with
# eps 0, a large eps, both settings of normalize_by_std.

# %% [markdown]
# ## Real rollouts from the SFT model
#
# `qwen2-sft` is the course's tiny Qwen2 after the demo's SFT stage: it answers in the r1_zero
# format almost always and is right about half the time (greedy, on 1,000 held-out problems:
# format 0.985, answer 0.523, recorded in `data/tiny/qwen2-sft/build_info.json` by
# `python scripts/make_world.py sft`, which built it). GRPO
# starts from here. Below, it samples $G = 8$ answers at temperature 1 to each of a batch of
# training questions that the SFT stage never saw (the first 128 were its worked solutions), with
# the same sampling settings as the demo's GRPO stage (`configs/demo.yaml`: at most 100 tokens,
# at least 4), and `r1_zero_reward_fn` scores them. (`gsm8k_to_r1_zero`, which builds the
# prompts, is the released reference of notebook 01's function.)

# %%
import time

from course_lib import gsm8k_to_r1_zero, load_problems, r1_zero_reward_fn
from course_lib.rollouts import HFEngine, SamplingParams
from course_lib.world.tiny_models import load_tiny

model, tokenizer = load_tiny("qwen2-sft")
G = 8
N_QUESTIONS = 16 if GRADING else 128
questions = [gsm8k_to_r1_zero(p) for p in load_problems("arith", "train")[128 : 128 + N_QUESTIONS]]
engine = HFEngine(model, tokenizer)
t0 = time.perf_counter()
rollouts = engine.generate([q["prompt"] for q in questions],
                           SamplingParams(temperature=1.0, max_tokens=100, min_tokens=4, n=G, seed=0))
responses = [r.text for r in rollouts]
truths = [q["ground_truth"] for q in questions for _ in range(G)]
print(f"{len(rollouts)} rollouts ({N_QUESTIONS} questions x {G}) in {time.perf_counter() - t0:.1f} s")

adv_std, raw, meta = compute_group_normalized_rewards(r1_zero_reward_fn, responses, truths, G, 1e-6, normalize_by_std=True)
adv_dr, _, _ = compute_group_normalized_rewards(r1_zero_reward_fn, responses, truths, G, 1e-6, normalize_by_std=False)
correct = raw.view(-1, G).sum(dim=1).long()  # (n_questions,): correct answers per group
print(f"mean reward {raw.mean():.3f}; correct answers per group of {G}: {correct.tolist()}")

# %% [markdown]
# ### Figure 1: an easy and a hard question, with and without the std
#
# The easy question is the batch's group with the most correct answers that still has a wrong
# one; the hard question, the group with the fewest correct answers that still has a right one.
# Each bar is one sampled answer's advantage.

# %%
n_right = correct.tolist()
mixed = [q for q in range(len(questions)) if 0 < n_right[q] < G]
if len(mixed) >= 2:
    easy = max(mixed, key=lambda q: (n_right[q], -q))
    hard = min(mixed, key=lambda q: (n_right[q], q))
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.6), sharey=True)
    for ax, q, name in ((axes[0], easy, "easy"), (axes[1], hard, "hard")):
        rows = slice(q * G, (q + 1) * G)
        x = torch.arange(G)
        ax.bar(x - 0.2, adv_std[rows], width=0.4, label="GRPO: / (std + eps)")
        ax.bar(x + 0.2, adv_dr[rows], width=0.4, label="Dr. GRPO: r - mean")
        ax.set_xticks(x, ["right" if r else "wrong" for r in raw[rows].tolist()], fontsize=8)
        ax.axhline(0, color="gray", lw=0.8)
        ax.set_title(f"{name} question: {n_right[q]} of {G} right")
    axes[0].set_ylabel("advantage")
    axes[0].legend(fontsize=8)
    plt.tight_layout()
    plt.show()
    for q, name in ((easy, "easy"), (hard, "hard")):
        rows = slice(q * G, (q + 1) * G)
        print(f"{name}: a right answer gets {adv_std[rows][raw[rows] == 1][0]:+.2f} with the std, "
              f"{adv_dr[rows][raw[rows] == 1][0]:+.2f} without; a wrong one {adv_std[rows][raw[rows] == 0][0]:+.2f} / "
              f"{adv_dr[rows][raw[rows] == 0][0]:+.2f}")
else:
    print(f"only {len(mixed)} group(s) with mixed rewards in this batch: no easy/hard pair to show")

# %% [markdown]
# Without the std (Dr. GRPO) the advantage is $1 - p$ for a right answer and $-p$ for a wrong
# one, so every advantage lies in $[-1, 1]$ and the rare outcome of a group gets the large one.
# With the std, both are divided by $\sqrt{\tfrac{G}{G-1}p(1-p)}$, which is smallest when $p$ is
# near 0 or 1: the one right answer to a hard question, and the one wrong answer to an easy one,
# get advantages well above 1 in size.
#
# ### Figure 2: how much each question weighs in the update
#
# How hard a group pushes on the policy is, to first order, the size of its advantages:
# $\sum_i |A_i|$. Below, your function computes it for every possible group of 0/1 rewards
# ($k = 0..8$ right answers out of 8), with and without the std, next to how often each $k$
# occurred in the real batch above.

# %%
ks = list(range(G + 1))
weight = {True: [], False: []}
for k in ks:
    group = ["right"] * k + ["wrong"] * (G - k)
    truth = ["right"] * G
    for use_std in (True, False):
        a, _, _ = compute_group_normalized_rewards(exact_match, group, truth, G, 1e-6, normalize_by_std=use_std)
        weight[use_std].append(float(a.abs().sum()))
counts = torch.bincount(correct, minlength=G + 1)

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 3.8))
ax1.plot(ks, weight[True], "o-", lw=2, label="GRPO: / (std + eps)")
ax1.plot(ks, weight[False], "s-", lw=2, label="Dr. GRPO: r - mean")
ax1.set_xlabel(f"right answers in the group (of {G})")
ax1.set_ylabel("sum of |advantage| over the group")
ax1.set_title("Weight of a question in the update")
ax1.legend(fontsize=8)
ax2.bar(ks, counts, color=["crimson" if k in (0, G) else "tab:blue" for k in ks])
ax2.set_xlabel(f"right answers in the group (of {G})")
ax2.set_ylabel("groups in the batch")
ax2.set_title(f"Real batch: {N_QUESTIONS} questions of qwen2-sft (red: no signal)")
plt.tight_layout()
plt.show()
ratio = [s / d if d else float("nan") for s, d in zip(weight[True], weight[False])]
print("GRPO / Dr. GRPO weight for k = 1..7:", [round(r, 2) for r in ratio[1:-1]])

# %% [markdown]
# The ratio of the two curves is $1/\operatorname{std}$: the division by the std weighs a
# question with 1 or 7 right answers out of 8 about 1.5 times as much, relative to one with 4,
# as Dr. GRPO does. Liu et al. (2025, "Understanding R1-Zero-Like Training: A Critical
# Perspective") call this a question-level difficulty bias and drop the std (their "Dr. GRPO");
# the course trainer has both (`use_std_normalization`), and CS336's GRPO experiments
# (notebook 09) compare them.

# %% [markdown]
# ## Zero-variance groups: no signal, measured
#
# A group whose answers are all right, or all wrong, gets advantage exactly 0 for every answer.
# Its rollouts cost a full generation and a forward and backward pass, and contribute nothing to
# the policy-gradient term of the update. How much of a real batch is that?

# %%
zero_var = (raw.view(-1, G).std(dim=1) == 0)
all_right = int((correct == G).sum())
all_wrong = int((correct == 0).sum())
print(f"groups with no signal: {int(zero_var.sum())} of {len(questions)} = {zero_var.float().mean():.0%} "
      f"({all_right} all right, {all_wrong} all wrong)")
if "zero_std_group_fraction" in meta:
    print(f"your metadata says zero_std_group_fraction = {meta['zero_std_group_fraction']:.3f}")
nonzero_adv = (adv_std != 0).float().mean()
expect(bool((adv_std.view(-1, G)[zero_var] == 0).all()), "a zero-variance group got a nonzero advantage")
print(f"rollouts with a nonzero advantage: {nonzero_adv:.0%} of the batch")

# %% [markdown]
# On the full batch of 128 questions, 42% of the groups carried no signal when this text was
# written (student mode; while grading, the batch shrinks to 16 questions and the share moves a
# lot), most of them all wrong: questions the SFT model never gets right in 8 tries, and some all
# right. The course trainer logs this fraction at every step as `zero_std_group_fraction` in
# `metrics.jsonl`; in a `make demo` run (seed 0) the GRPO stage logged 0.44 on average over its
# first 10 steps and 0.49 over all 100: about half of every batch teaches nothing. Larger
# groups help at the "never right" end (more tries, more chances of one success), at the price
# of more generation. DAPO (Yu et al., 2025) goes further with "dynamic sampling": it samples more
# questions than it needs and drops the groups whose answers are all right or all wrong before
# the update, so that every group of the batch carries a signal.

# %% [markdown]
# ## The edges: `advantage_eps` and a group of one
#
# Dividing by the std makes the advantages *scale-free*: multiply all rewards of a group by
# $10^{-6}$ and the advantages do not change. That is a feature for rewards of arbitrary units,
# and a trap for tiny differences: a group whose rewards differ only by noise (a reward with a
# small length penalty, a floating-point tie broken differently) gets advantages as large as a
# group with one right answer. `advantage_eps` sets the scale below which differences are treated
# as noise. Below: a group of 8 whose rewards are $\delta \cdot (1, 0, \dots, 0)$, for $\delta$
# from $10^{-8}$ to 1; the advantage of its one "better" answer, from your function.

# %%
deltas = torch.logspace(-8, 0, 33)
curves = {"/ (std + 0)": (True, 0.0), "/ (std + 1e-6)": (True, 1e-6), "/ (std + 1e-2)": (True, 1e-2), "r - mean (no std)": (False, 1e-6)}
best = {name: [] for name in curves}
for d in deltas.tolist():
    table = {f"o{i}": (d if i == 0 else 0.0) for i in range(G)}
    graded_by_table = lambda r, g: {"reward": table[r]}
    for name, (use_std, eps) in curves.items():
        a, _, _ = compute_group_normalized_rewards(graded_by_table, list(table), ["-"] * G, G, eps, use_std)
        best[name].append(float(a[0]))

fig, ax = plt.subplots(figsize=(7, 3.8))
for (name, values), style in zip(best.items(), ["o-", "s--", "^-", "k:"]):
    ax.plot(deltas, [max(v, 1e-12) for v in values], style, label=name, lw=2, ms=4)
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlabel("reward difference δ inside the group")
ax.set_ylabel("advantage of the better answer")
ax.set_title(f"A group of {G}: rewards δ·(1, 0, ..., 0)")
ax.legend(fontsize=8)
plt.tight_layout()
plt.show()
print(f"delta = 1e-8: eps 0 gives {best['/ (std + 0)'][0]:.2f}, eps 1e-6 gives {best['/ (std + 1e-6)'][0]:.4f}, "
      f"no std gives {best['r - mean (no std)'][0]:.1e}")

# %% [markdown]
# With $\varepsilon = 0$ the advantage is $0.875 / 0.354 = 2.47$ whatever $\delta$ is: a
# difference of $10^{-8}$ pushes the policy as hard as a right answer among wrong ones. With
# $\varepsilon > 0$ the advantage falls off once $\delta$ drops below about $\varepsilon$, and
# without the std it is simply proportional to $\delta$. With the course's 0/1 rewards and
# $G = 8$ the std of a mixed group is at least $0.354$, so $\varepsilon = 10^{-6}$ never matters
# there; it matters the day the reward gets a small continuous term.
#
# And a group of one: every advantage is 0, whichever normalisation.

# %%
adv_g1, raw_g1, _ = compute_group_normalized_rewards(r1_zero_reward_fn, responses[:8], truths[:8], 1, 1e-6, True)
print("rewards   ", raw_g1.tolist())
print("advantages", adv_g1.tolist(), " <- no siblings, no baseline, no signal")

# %% [markdown]
# With $G = 1$ the group mean is the reward itself, so REINFORCE *with this baseline* learns
# nothing. To learn from single samples one needs another baseline (a running mean of rewards, a
# value network as in PPO) or none at all (`loss_type="no_baseline"` in notebook 07, which uses
# the raw reward, with a much noisier gradient).

# %% [markdown]
# ## Pitfall from practice: the std, the eps and the empty signal
#
# Three things go wrong in real GRPO code, and each is silent:
#
# - **NaN from a constant group.** `(r - mean) / std` without an epsilon gives NaN for every group
#   whose answers all score the same, which early in training (all wrong) and late (all right) is
#   a large part of the batch; one NaN advantage makes the loss, the gradient and then every
#   weight NaN. An epsilon fixes it only while it is positive: the contract here is "exactly 0",
#   checked with $\varepsilon = 0$.
# - **The biased std, or the wrong axis.** `std(unbiased=False)` gives advantages
#   $\sqrt{G/(G-1)}$ times larger (7% at $G = 8$, 41% at $G = 2$): a silent change of learning
#   rate. A reshape to `(G, -1)` instead of `(-1, G)` has the right number of elements and mixes
#   the answers of different questions into one "group": the run still trains, on noise.
# - **The cost of zero-variance groups.** They add nothing to the loss (advantage 0), but their
#   generation and their forward and backward passes cost as much as those of any other group.
#   Log `zero_std_group_fraction` and watch it: when it approaches 1, the run has stopped
#   learning, whatever the loss curve says.
#
# ## Summary
#
# - $A_i = r_i - \bar r_{\text{group}}$, divided by $(\operatorname{std} + \varepsilon)$ for
#   GRPO; unbiased std; groups are `view(-1, G)` of consecutive responses.
# - A constant group gets advantage exactly 0 (never NaN, also for $\varepsilon = 0$ and $G = 1$).
# - The std division weighs very easy and very hard questions more (Dr. GRPO drops it); the
#   $\varepsilon$ sets the reward scale below which differences count as noise.
# - On a real batch of the SFT model, a large share of the groups carries no signal: measured
#   above, logged by the trainer as `zero_std_group_fraction`.
#
# Next, notebook 07 turns advantages into a loss: REINFORCE, the clipped GRPO objective, and how
# to average per-token losses without a length bias.

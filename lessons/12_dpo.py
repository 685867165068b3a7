# %% [markdown]
# # 12 · DPO: preference learning without sampling
#
# **Goal.** Three ways a training signal reaches the weights:
#
# | method | what the loss sees | where the gradient comes from |
# |---|---|---|
# | SFT (05) | fixed labels | the log-prob of the label tokens |
# | GRPO, PPO (09, 11) | a *sampled* response and its reward | the score function: $A \nabla \log \pi(y)$, y drawn from $\pi$ |
# | DPO (here) | a fixed pair, one response preferred | log-prob *ratios* against a frozen reference, no sampling while training |
#
# Direct Preference Optimization (Rafailov et al., 2023) turns a preference between two responses
# into a classification loss on the policy's own log-probs. You write the sequence log-prob, the
# loss, CS336's per-instance loss and the two ways the course makes pairs; then you run it and
# measure what it buys against SFT and GRPO on the same questions, what its logged numbers mean
# (both log-probs falling while the loss improves), how $\beta$ holds the policy near the
# reference, and what a careless reference does to every metric.
#
# Graded: `sequence_log_probs`, `dpo_loss`, `compute_per_instance_dpo_loss`, `on_policy_pairs` and
# `off_policy_pairs` (visible checks and hidden cases in the same cell: all the points go through
# the hidden cases).

# %%
import copy
import json
import math
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
# ## The loss
#
# A preference dataset holds triples $(x, y_c, y_r)$: a prompt, a chosen and a rejected response.
# The Bradley-Terry model says the chance that $y_c$ is preferred is $\sigma(r(x, y_c) - r(x, y_r))$
# for some reward $r$. RLHF fits a reward model to that, then maximises it with a KL leash to a
# reference: $\max_\pi \mathbb{E}[r] - \beta\,\mathrm{KL}(\pi \,\|\, \pi_\text{ref})$. That problem
# has a closed-form optimum, $\pi^*(y|x) \propto \pi_\text{ref}(y|x)\, e^{r(x,y)/\beta}$, so the
# reward is a function of the optimal policy itself:
# $r(x, y) = \beta \log \frac{\pi^*(y|x)}{\pi_\text{ref}(y|x)} + \beta \log Z(x)$. Put it into
# Bradley-Terry: $Z(x)$ cancels in the difference, and what is left is a loss on the policy alone,
#
# $$\mathcal{L}_\text{DPO} = -\log \sigma\Big(\underbrace{\beta\,[\log \pi_\theta(y_c|x) - \log \pi_\text{ref}(y_c|x)]}_{\text{implicit reward of } y_c}
# - \underbrace{\beta\,[\log \pi_\theta(y_r|x) - \log \pi_\text{ref}(y_r|x)]}_{\text{implicit reward of } y_r}\Big).$$
#
# Here $\log \pi(y|x)$ is the **sum** over the response's tokens of their log-probs given the prompt
# and the tokens before (the prompt's own tokens do not count). Its gradient,
#
# $$\nabla_\theta \mathcal{L} = -\beta\,\sigma(-m)\,\big[\nabla \log \pi_\theta(y_c|x) - \nabla \log \pi_\theta(y_r|x)\big], \qquad m = \text{the margin inside } \sigma,$$
#
# raises the chosen log-prob and lowers the rejected one, weighted by how wrong the current margin
# is: a pair already ranked right by a wide margin ($\sigma(-m) \approx 0$) stops contributing.
# Nothing in it says the chosen log-prob must *rise*: only the difference is asked for (measured
# below).
#
# At the first step the policy *is* the reference: every implicit reward is 0, the margin is 0, and
# the loss is exactly $\log 2 = 0.6931$, whatever the data. That is the first self-check of any DPO
# run.
#
# ## The sequence log-prob: `sequence_log_probs`
#
# From notebook 03's `get_response_log_probs` (per-token log-probs of the labels) and 01's
# `response_mask`: the masked sum over each row, or, with `average=True`, that sum over the row's
# number of response tokens (a length-normalised score some DPO variants use; DPO itself takes the
# sum). Raise a `ValueError` for a row with no response token (it has no log-prob to compare) and
# for `response_mask` of another shape than `labels` (also one torch would broadcast).
#
# ### Your turn: `sequence_log_probs(model, input_ids, labels, response_mask, average=False)`
#
# Returns (B,) in the model's dtype (float32 at least: a bfloat16 model's log-probs are float32),
# differentiable in the model's parameters. What the hidden cases check: float32 and
# float64 models, the sum and the mean, prompt and padding positions whose log-probs must not count,
# rows of very different response lengths, B = 1 and T = 1, the gradient of the model's parameters
# through a weighted sum of the outputs, an empty row and a mask of the wrong shape (ValueError).

# %% [solution] course_lib.dpo:sequence_log_probs
import torch

from course_lib import get_response_log_probs, tokenize_prompt_and_output
from course_lib.world.tiny_models import load_tiny

# %% [tests] sequence_log_probs 2
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("sequence_log_probs", sequence_log_probs)
### END HIDDEN TESTS
model, tokenizer = load_tiny("qwen2-sft")
model.eval()
enc = tokenize_prompt_and_output(["Q: 2 + 3?", "Q: 10 + 7 + 1?"], [" 5 </answer>", " 18 </answer> and more"], tokenizer)
per_token = get_response_log_probs(model, enc["input_ids"], enc["labels"])["log_probs"]
mask = enc["response_mask"]
got = sequence_log_probs(model, enc["input_ids"], enc["labels"], mask)
expect(got.shape == (2,), f"one log-prob per response: shape {tuple(got.shape)}, expected (2,)")
expect(not torch.allclose(got, per_token.sum(-1)), "you summed over every position: the prompt's and the padding's log-probs must not count")
expect(cmp("the masked sum of the response's token log-probs", got, (per_token * mask).sum(-1)),
       "sum the per-token log-probs where response_mask is 1")
avg = sequence_log_probs(model, enc["input_ids"], enc["labels"], mask, average=True)
expect(cmp("average=True: the sum over the number of response tokens", avg, (per_token * mask).sum(-1) / mask.sum(-1)),
       "with average=True divide each row's sum by ITS number of response tokens")
empty = mask.clone()
empty[0] = False
try:
    sequence_log_probs(model, enc["input_ids"], enc["labels"], empty)
    raised = False
except ValueError:
    raised = True
expect(raised, "a row with no response token must raise a ValueError (there is nothing to compare)")
print("all visible checks passed")

# %% [markdown]
# ## The loss of a batch: `dpo_loss`
#
# From the four (B,) sequence log-probs: the implicit rewards $\beta(\pi - \pi_\text{ref})$ of the
# chosen and the rejected responses, their margin, and the mean of $-\log\sigma(\text{margin})$.
# Two traps:
#
# - **`torch.log(torch.sigmoid(x))` underflows.** For $x = -200$ in float32, $\sigma(x) = e^{-200}$
#   is below the smallest float32 and rounds to 0; its log is $-\infty$ and the loss infinite. A
#   pair ranked wrong by a wide margin is exactly where the gradient matters most. Use
#   `torch.nn.functional.logsigmoid`, which computes $-\mathrm{softplus}(-x)$ and is exact there.
# - **The reference is data.** Its log-probs enter the margin as constants: no gradient may flow
#   into them (detach them), even when the caller hands in tensors that require one.
#
# Return `(loss, metadata)` with `chosen_rewards` and `rejected_rewards` ((B,), detached),
# `reward_margin` (the mean of their difference) and `reward_accuracy` (the fraction of pairs whose
# chosen reward is *strictly* above the rejected one: at the first step, with every margin 0, it is
# 0, not 1); the loss and the rewards are in the log-probs' dtype. Raise a `ValueError` when the
# four inputs are not (B,) tensors of one shape (a (B, 1) input, a reference of another length,
# even one of length 1 that torch would broadcast) and for `beta <= 0`.
#
# ### Your turn: `dpo_loss(policy_chosen_log_probs, policy_rejected_log_probs, ref_chosen_log_probs, ref_rejected_log_probs, beta)`
#
# What the hidden cases check: $\beta$ of 0.01 to 2, margins of $\pm 200$ and $\pm 1000$ ($\sigma(-200)$
# underflows to 0 in float32, $\sigma(-1000)$ in float64), the policy equal to the reference (loss
# $\log 2$, accuracy 0), float32 and float64, the gradient with respect to both policy inputs,
# reference inputs that require a gradient (which must get none), each metadata entry, and the
# errors.

# %% [solution] course_lib.dpo:dpo_loss
import torch
import torch.nn.functional as F

# %% [tests] dpo_loss 3
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("dpo_loss", dpo_loss)
### END HIDDEN TESTS
pc, pr = torch.tensor([-5.0, -9.0, -2.0], requires_grad=True), torch.tensor([-6.0, -4.0, -2.5], requires_grad=True)
rc, rr = torch.tensor([-5.5, -8.0, -2.0]), torch.tensor([-5.0, -5.0, -3.0])
loss, meta = dpo_loss(pc, pr, rc, rr, beta=0.5)
margins = 0.5 * ((pc - rc) - (pr - rr))  # 1.0, -1.0, -0.25
expect(loss.dim() == 0, "dpo_loss returns one number: the mean over the pairs")
expect(not torch.isclose(loss, -F.logsigmoid(-margins.detach()).mean()), "the margin's sign is flipped: chosen minus rejected")
expect(not torch.isclose(loss, -F.logsigmoid(0.5 * (pc - pr).detach()).mean()), "the reference terms are missing: subtract ref from each policy log-prob")
expect(cmp("mean of -logsigmoid(beta * ((pi_c - ref_c) - (pi_r - ref_r)))", loss, -F.logsigmoid(margins.detach()).mean()),
       "loss = mean over pairs of -logsigmoid(margin)")
expect(cmp("chosen_rewards = beta * (pi_c - ref_c)", meta["chosen_rewards"], torch.tensor([0.25, -0.5, 0.0])),
       "implicit reward = beta * (policy log-prob - reference log-prob)")
expect(cmp("reward_accuracy", meta["reward_accuracy"], torch.tensor(1 / 3)), "the fraction of pairs with chosen_rewards > rejected_rewards")
same, same_meta = dpo_loss(rc, rr, rc, rr, beta=0.1)
expect(cmp("policy = reference: loss log 2", same, torch.tensor(math.log(2.0))), "with the policy equal to the reference every margin is 0: loss = log 2")
expect(float(same_meta["reward_accuracy"]) == 0.0, "a tie is not a win: reward_accuracy counts chosen > rejected strictly")
far, _ = dpo_loss(torch.tensor([-1000.0]), torch.tensor([-1.0]), torch.tensor([-1.0]), torch.tensor([-1.0]), beta=0.5)
expect(bool(torch.isfinite(far)),
       "an infinite loss for a margin of -500: sigmoid underflows to 0 there and log(0) = -inf; use F.logsigmoid")
print("all visible checks passed")

# %% [markdown]
# ## One pair, CS336's way: `compute_per_instance_dpo_loss`
#
# CS336's supplement grades the DPO loss of a single pair with this signature. In the course's
# world, `prompt` is the question: put it into the r1_zero template (`format_r1_zero_prompt`, which
# ends in "Assistant: &lt;think&gt;"), and let each response follow it **with the end-of-sequence
# token appended**: where a response stops is part of what is preferred, and without the eos a
# policy may learn to prefer a response and never end it. Tokenize with notebook 01's
# `tokenize_prompt_and_output` (the two rows padded to the same length; the mask keeps the padding
# out), score the policy with gradients on its own device and the frozen reference without them on
# *its* device (a 1.5B reference often lives on a second GPU), and return the loss on the policy's
# device, a 0-dim tensor in the models' dtype (float32 at least, as `sequence_log_probs`).
#
# Raise a `ValueError` for identical chosen and rejected responses (the pair prefers nothing), an
# empty response, `lm_ref` with a parameter that requires gradients (freeze it:
# `lm_ref.requires_grad_(False)`), and a tokenizer without an eos token.
#
# ### Your turn: `compute_per_instance_dpo_loss(lm, lm_ref, tokenizer, beta, prompt, response_chosen, response_rejected)`
#
# What the hidden cases check: the loss and the policy's gradients on arithmetic questions with gold
# and off-policy responses, short and long ones, several $\beta$; that the reference gets no gradient
# and is left unchanged; and the four errors.

# %% [solution] course_lib.dpo:compute_per_instance_dpo_loss
import torch

from course_lib import format_r1_zero_prompt

# %% [tests] compute_per_instance_dpo_loss 3
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("compute_per_instance_dpo_loss", compute_per_instance_dpo_loss)
### END HIDDEN TESTS
from course_lib import load_problems, gsm8k_to_r1_zero

policy, tokenizer = load_tiny("qwen2-sft")
reference = copy.deepcopy(policy).eval().requires_grad_(False)
policy.eval()  # no dropout in the tiny model; eval mode makes that explicit
problem = load_problems("arith", "train")[0]
gold = gsm8k_to_r1_zero(problem)["output"]
wrong = gold.replace("<answer> 39 </answer>", "<answer> 40 </answer>")
loss = compute_per_instance_dpo_loss(policy, reference, tokenizer, 0.1, problem["question"], gold, wrong)
expect(loss.dim() == 0, "one pair, one number")
expect(cmp("policy = reference: the loss is log 2", loss, torch.tensor(math.log(2.0))),
       "at the start the policy equals the reference and the loss is log 2; a different value means the two were scored differently")
loss.backward()
expect(all(p.grad is None for p in reference.parameters()), "a gradient reached the reference: score it under torch.no_grad()")
expect(any(p.grad is not None and bool(p.grad.abs().sum() > 0) for p in policy.parameters()), "the policy got no gradient")
policy.zero_grad(set_to_none=True)
with torch.no_grad():
    for p in policy.parameters():
        p.add_(0.01 * torch.randn_like(p))
moved = compute_per_instance_dpo_loss(policy, reference, tokenizer, 0.1, problem["question"], gold, wrong)
prompt_text = format_r1_zero_prompt(problem["question"])
enc = tokenize_prompt_and_output([prompt_text] * 2, [gold + tokenizer.eos_token, wrong + tokenizer.eos_token], tokenizer)
with torch.no_grad():
    pi = sequence_log_probs(policy, enc["input_ids"], enc["labels"], enc["response_mask"])
    ref = sequence_log_probs(reference, enc["input_ids"], enc["labels"], enc["response_mask"])
want = -F.logsigmoid(0.1 * ((pi[0] - ref[0]) - (pi[1] - ref[1])))
no_eos = tokenize_prompt_and_output([prompt_text] * 2, [gold, wrong], tokenizer)
with torch.no_grad():
    pi_n = sequence_log_probs(policy, no_eos["input_ids"], no_eos["labels"], no_eos["response_mask"])
    ref_n = sequence_log_probs(reference, no_eos["input_ids"], no_eos["labels"], no_eos["response_mask"])
expect(not torch.isclose(moved.detach(), -F.logsigmoid(0.1 * ((pi_n[0] - ref_n[0]) - (pi_n[1] - ref_n[1]))), rtol=0, atol=1e-6),
       "the eos token is missing: append tokenizer.eos_token to each response")
expect(cmp("the loss of the r1_zero prompt, each response + eos", moved.detach(), want),
       "format the question with format_r1_zero_prompt, append eos to each response, sum the response log-probs")
print("all visible checks passed")

# %% [markdown]
# ## Where pairs come from
#
# DPO needs pairs, and who wrote them matters:
#
# - **On-policy pairs**: sample a group of responses to each question from the policy itself, grade
#   them with the reward function, and pair a correct one (chosen) with a wrong one (rejected). A
#   group whose responses are all correct or all wrong gives no pair (GRPO would give it advantage
#   0: the same questions carry no signal for either). The sampling happens once, *before*
#   training: DPO on these pairs is "offline on-policy", and the pairs go stale as the policy moves.
# - **Off-policy pairs** from the data alone: the gold worked solution against the same solution
#   with the number in its answer block changed. No sampling at all, but the rejected response is
#   one the policy would rarely write (its reasoning says 39 and its answer 40).
#
# ### Your turn: `on_policy_pairs(reward_fn, prompts, responses, ground_truths, group_size, max_pairs_per_group=1)`
#
# Entries `g * group_size` to `(g + 1) * group_size - 1` are group $g$ (one prompt, one ground
# truth). A response is correct when `reward_fn(response, ground_truth)["reward"] == 1.0`, wrong
# otherwise. In each group, in order of appearance and counting a repeated text once, the $k$-th
# distinct correct response is paired with the $k$-th distinct wrong one, for
# $k <$ `max_pairs_per_group`. Return the pairs in group order as dicts
# `{"prompt", "chosen", "rejected", "ground_truth"}`. Raise a `ValueError` for `prompts`,
# `responses` and `ground_truths` of different lengths, a `group_size` < 1 or one that does not
# divide their length, a `max_pairs_per_group` < 1, and a group with different prompts or
# different ground truths. What the hidden cases check: groups all correct, all wrong and mixed,
# repeated texts, one and several pairs per group, groups of one, the course's `r1_zero_reward_fn`
# and other reward functions, and the errors.

# %% [solution] course_lib.preferences:on_policy_pairs
from typing import Callable

from course_lib import r1_zero_reward_fn

# %% [tests] on_policy_pairs 2
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("on_policy_pairs", on_policy_pairs)
### END HIDDEN TESTS
right, right_b = " 17 * 3 = 51 apples </think> <answer> 51 </answer>", " that makes 51 </think> <answer> 51 </answer>"
wrong_a, wrong_b = " 17 * 3 = 41 apples </think> <answer> 41 </answer>", " no idea"
prompts, truths = ["P1"] * 4 + ["P2"] * 4 + ["P3"] * 4, ["51"] * 12
responses = [wrong_a, right, wrong_a, right_b] + [right] * 4 + [wrong_b, right, wrong_a, right_b]
got = on_policy_pairs(r1_zero_reward_fn, prompts, responses, truths, group_size=4, max_pairs_per_group=2)
expect(isinstance(got, list) and all(isinstance(p, dict) for p in got), "return a list of dicts")
expect(len(got) == 0 or got[0]["chosen"] == right, "the chosen response is the one the reward function grades correct")
expect(not any(p["prompt"] == "P2" for p in got), "a group whose responses are all correct gives no pair")
expect(sum(p["prompt"] == "P1" for p in got) == 1, "a text repeated in a group counts once: group P1 has one distinct wrong response, so one pair")
want = [{"prompt": "P1", "chosen": right, "rejected": wrong_a, "ground_truth": "51"},
        {"prompt": "P3", "chosen": right, "rejected": wrong_b, "ground_truth": "51"},
        {"prompt": "P3", "chosen": right_b, "rejected": wrong_a, "ground_truth": "51"}]
expect(got == want, "pair the k-th distinct correct with the k-th distinct wrong response of the same group, in order")
print("all visible checks passed")

# %% [markdown]
# ### Your turn: `off_policy_pairs(examples)`
#
# For each r1_zero record `{"prompt", "output", "ground_truth"}` whose ground truth is an integer
# $n$: chosen is the output; rejected is the output with the text inside its **last**
# `<answer> ... </answer>` block replaced by `" {n + 1} "`; keep the prompt and the ground truth
# (stripped). Raise a `ValueError` for a record that lacks a field, a ground truth that is not an
# integer (3.5 is not rounded), and an output without a closed `<answer> ... </answer>` block.
# What the hidden cases check: one and several answer blocks, negative and multi-digit answers,
# spacing inside the block, and the errors.

# %% [solution] course_lib.preferences:off_policy_pairs
ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"

# %% [tests] off_policy_pairs 1
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("off_policy_pairs", off_policy_pairs)
### END HIDDEN TESTS
ex = {"prompt": "P", "output": " 4 * 5 = 20 </think> <answer> 20 </answer>", "ground_truth": "20"}
got = off_policy_pairs([ex])
expect(len(got) == 1 and got[0]["chosen"] == ex["output"], "chosen is the gold output, unchanged")
expect(got[0]["rejected"] == " 4 * 5 = 20 </think> <answer> 21 </answer>",
       "rejected: the inside of the answer block replaced by f' {n + 1} '")
twice = {"prompt": "P", "output": " <answer> 1 </answer> then <answer>7</answer>", "ground_truth": "7"}
expect(off_policy_pairs([twice])[0]["rejected"] == " <answer> 1 </answer> then <answer> 8 </answer>",
       "change the LAST answer block, the one the reward function reads")
print("all visible checks passed")

# %% [markdown]
# ## DPO in the trainer, with your functions
#
# The course's DPO trainer (`course_lib.training.dpo_trainer.train_dpo`) builds the pairs once,
# scores them under the frozen reference once (eval mode, no gradient: the reference is one fixed
# function, and its log-probs are data), then takes optimizer steps of your loss on batches of
# pairs; each micro-batch is one forward of its chosen and rejected rows together. Below: on-policy
# pairs from 64 training questions (8 samples each, temperature 1, up to 2 pairs a question), then
# 10 steps with your `sequence_log_probs` and `dpo_loss`, from the SFT model of notebook 05.

# %%
from course_lib import gsm8k_to_r1_zero, load_problems
from course_lib.training.dpo_trainer import build_pairs, train_dpo

questions = [gsm8k_to_r1_zero(p) for p in load_problems("arith", "train")[:64]]
live = []
if not GRADING:
    policy, tokenizer = load_tiny("qwen2-sft")
    t0 = time.perf_counter()
    pairs = build_pairs({"pair_source": "on_policy", "group_size": 8, "max_pairs_per_group": 2,
                         "sampling_max_tokens": 100, "seed": 0}, policy, tokenizer, questions=questions,
                        on_policy_pairs_fn=on_policy_pairs)  # your function pairs the samples
    print(f"{len(pairs)} on-policy pairs from {len(questions)} questions in {time.perf_counter() - t0:.0f} s")
    print("a pair:", {k: v if k != "prompt" else "..." + v[-30:] for k, v in pairs[0].items()})
    t0 = time.perf_counter()
    result = train_dpo({"lr": 3e-5, "beta": 0.1, "batch_size": 16, "steps": 10, "eval_examples": 0, "seed": 0},
                       model=policy, tokenizer=tokenizer, pairs=pairs, eval_data=[], progress=False,
                       sequence_log_probs_fn=sequence_log_probs, loss_fn=dpo_loss)
    live = [r for r in result.metrics if r["kind"] == "train"]
    print(f"10 DPO steps in {time.perf_counter() - t0:.0f} s")
    for r in live:
        print(f"step {r['step']:2d}: loss {r['loss']:.4f}  margin {r['reward_margin']:+.3f}  accuracy "
              f"{r['reward_accuracy']:.3f}  log pi(chosen) {r['chosen_log_probs']:7.2f}  log pi(rejected) "
              f"{r['rejected_log_probs']:7.2f}")
    expect(abs(live[0]["loss"] - math.log(2)) < 1e-4, "the first step's loss is not log 2: the policy and the reference "
           "were scored differently")

# %% [markdown]
# At the first step every margin is 0 in exact arithmetic, so the accuracy should read 0. In
# float32 it need not: the reference's log-probs were computed once, in batches of one shape, and
# the step scores the same pairs in shuffled batches of another. Padding a row to another length
# changes the shapes of the matrix products, and with them the rounding of each sum of a few
# dozen log-probs; a margin of +1e-8 is then a "win". The cell below measures it: the same model
# scoring the same pairs in batches of 16 and one at a time.

# %%
from course_lib.training.dpo_trainer import reference_log_probs

if not GRADING:
    start_model, _ = load_tiny("qwen2-sft")
    together = reference_log_probs(start_model, tokenizer, pairs, batch_size=16, sequence_log_probs_fn=sequence_log_probs)
    alone = reference_log_probs(start_model, tokenizer, pairs, batch_size=1, sequence_log_probs_fn=sequence_log_probs)
    gap = (together - alone).abs()
    tie_margins = 0.1 * ((together[:, 0] - alone[:, 0]) - (together[:, 1] - alone[:, 1]))
    print(f"one model, batches of 16 against batches of 1: |difference| of a sequence log-prob: max {gap.max():.2e}, "
          f"mean {gap.mean():.2e} nats; margins > 0 (a 'win' at a tie): {float((tie_margins > 0).float().mean()):.3f}")

# %% [markdown]
# A rounding-level difference (a few millionths of a nat) that the accuracy, a comparison, turns
# into a fraction well above 0: the benchmark below logged a first-step accuracy of 0.125 for
# this reason. The loss is not fooled ($\log 2$ to 1e-8). The same mechanism, at the size of whole kernels
# and precisions, is the train/inference mismatch of notebook 15.
#
# ## DPO, SFT on the chosen responses, and GRPO, on one budget of questions
#
# One budget of questions, four ways to use it: from `qwen2-sft`, the first 256 training questions,
# and each method's own use of them (`OMP_NUM_THREADS=1 python benchmarks/dpo_12.py`, an instructor
# command, wrote the data file the cells below read):
#
# - **DPO on on-policy pairs**: 8 samples per question at temperature 1 (2,048 responses, the same
#   number GRPO samples), graded, up to 2 pairs per question; 2 epochs over the pairs, 16 pairs a
#   step, $\beta = 0.1$, learning rate 3e-5;
# - **DPO on off-policy pairs**: the gold solution of each question against it with the answer + 1,
#   no sampling; the same settings;
# - **SFT on the chosen responses only** of the on-policy pairs: the same number of steps, batch and
#   learning rate (what DPO adds over "train on the good samples" is the rejected side);
# - **GRPO**: the same 256 questions, each once, 8 samples each (32 steps of 64 responses), the
#   settings of notebook 11's comparison (learning rate 1e-4, the clip loss).
#
# Each is scored by greedy decoding on 200 held-out problems (a score on 200 has a standard error
# of about 0.035), on three seeds (the seed sets the sampled responses and the data order).

# %%
from course_lib.paths import DATA_DIR

RESULTS = json.loads((DATA_DIR / "experiments" / "dpo_12.json").read_text())
METHODS = {"dpo_on": "DPO, on-policy pairs", "dpo_off": "DPO, off-policy pairs", "sft_chosen": "SFT on chosen",
           "grpo": "GRPO"}


def mean_sd(values):
    mean = sum(values) / len(values)
    return mean, (sum((v - mean) ** 2 for v in values) / max(1, len(values) - 1)) ** 0.5


print(f"start (qwen2-sft): held-out answer reward {RESULTS['start']['held_out_answer']:.3f}")
print(f"{'method':24s} {'held-out answer':>22s}   seeds                 seconds")
for key, name in METHODS.items():
    values = [row[key]["held_out_answer"] for row in RESULTS["seeds"]]
    mean, sd = mean_sd(values)
    secs = mean_sd([row[key]["seconds"] for row in RESULTS["seeds"]])[0]
    print(f"{name:24s} {mean:14.3f} +- {sd:.3f}   {', '.join(f'{v:.3f}' for v in values):20s} {secs:7.0f}")
print("pairs per seed: on-policy", [row["pairs_on_policy"] for row in RESULTS["seeds"]],
      "off-policy", [row["pairs_off_policy"] for row in RESULTS["seeds"]],
      "; sampling the on-policy pairs:", [f"{row['sampling_seconds']:.0f} s" for row in RESULTS["seeds"]])
start = RESULTS["start"]["held_out_answer"]
print("held-out answer minus the start's, per seed:",
      {name: [round(row[key]["held_out_answer"] - start, 3) for row in RESULTS["seeds"]] for key, name in METHODS.items()})


def all_won_from(steps):
    """The first step from which every batch's reward accuracy is 1.0 (None if the last one's is not)."""
    k = len(steps)
    while k and steps[k - 1]["reward_accuracy"] == 1.0:
        k -= 1
    return steps[k]["step"] if k < len(steps) else None


for key in ("dpo_on", "dpo_off"):
    runs = [row[key] for row in RESULTS["seeds"]]
    print(f"{METHODS[key]}, per seed: loss at the last step {[round(run['steps'][-1]['loss'], 3) for run in runs]} "
          f"(log 2 = 0.693 at the first), exact KL(pi || pi_ref) per token at the end "
          f"{[round(run['exact_kl'], 3) for run in runs]}")
print("DPO, off-policy pairs: every batch's accuracy 1.0 from step",
      [all_won_from(row["dpo_off"]["steps"]) for row in RESULTS["seeds"]], "on (per seed)")

fig, ax = plt.subplots(figsize=(7, 3.5))
for i, (key, name) in enumerate(METHODS.items()):
    values = [row[key]["held_out_answer"] for row in RESULTS["seeds"]]
    ax.bar(i, mean_sd(values)[0], yerr=mean_sd(values)[1], color=f"C{i}", alpha=0.7, capsize=4)
    ax.plot([i] * len(values), values, "k.", ms=8)
ax.axhline(RESULTS["start"]["held_out_answer"], color="grey", ls="--", label="start (qwen2-sft)")
ax.set_xticks(range(len(METHODS)), list(METHODS.values()), fontsize=8)
ax.set(ylabel="held-out answer reward", title="one budget of 256 questions, three seeds")
ax.legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# Measured (`data/experiments/dpo_12.json`; the start, `qwen2-sft`, answers 0.520 of the 200; the
# whole benchmark took 10 minutes on one core):
#
# | method | held-out answer, 3 seeds | seeds | pairs or samples | seconds |
# |---|---|---|---|---|
# | DPO, on-policy pairs | 0.563 +- 0.023 | 0.550, 0.590, 0.550 | 142-159 pairs (18-20 steps) | 17 + 16 of sampling |
# | DPO, off-policy pairs | 0.395 +- 0.044 | 0.345, 0.410, 0.430 | 256 pairs (32 steps) | 28 |
# | SFT on the chosen responses | 0.572 +- 0.025 | 0.545, 0.595, 0.575 | 142-159 responses | 7 + 16 of sampling |
# | GRPO | 0.550 +- 0.015 | 0.550, 0.565, 0.535 | 2,048 samples (32 steps) | 45 |
#
# - **On-policy DPO, SFT on the chosen responses and GRPO end within one standard error of each
#   other** (0.55-0.57, against a standard error of 0.035 for one score), all a few hundredths
#   above the start. On this task and budget the rejected side bought nothing measurable over
#   SFT on the good samples alone; SFT on chosen was the best mean and the cheapest.
# - **Off-policy DPO lost 0.125 on average** (0.175, 0.110 and 0.090 on the three seeds, to a mean
#   of 0.395), while its loss fell (from $\log 2$ to 0.45-0.46) and, from step 5 on, every batch's
#   accuracy was 1.0 on every seed. The rejected responses differ from the gold ones in the answer
#   alone, a response the policy does not write, so the loss is easy to win by moving the answer
#   tokens in ways that do not transfer: its exact KL to the reference grew to 0.055-0.130 per
#   token, against 0.007-0.012 for on-policy DPO at the same settings (it also took more steps:
#   256 pairs against about 150). Who wrote the pairs matters more here than the loss.
#
# ## Likelihood displacement: both log-probs fall
#
# Users of DPO trainers report that the log-prob of the *chosen* responses falls during training,
# and read it as a bug. The loss only asks that chosen rise *relative to* rejected, against the
# reference; both may fall, as long as rejected falls faster. The curves below are the logged
# per-batch means of $\log \pi(y_c)$ and $\log \pi(y_r)$ of the on-policy runs, and of three learning
# rates on the first seed's pairs.

# %%
fig, axes = plt.subplots(1, 2, figsize=(13, 4))
for row in RESULTS["seeds"]:
    steps = row["dpo_on"]["steps"]
    axes[0].plot([s["step"] for s in steps], [s["chosen_log_probs"] for s in steps], "C2-", alpha=0.7)
    axes[0].plot([s["step"] for s in steps], [s["rejected_log_probs"] for s in steps], "C3-", alpha=0.7)
axes[0].plot([], [], "C2-", label="log pi(chosen)")
axes[0].plot([], [], "C3-", label="log pi(rejected)")
axes[0].set(xlabel="DPO step", ylabel="batch mean of the sequence log-prob", title="on-policy DPO, lr 3e-5, 3 seeds")
axes[0].legend()
for i, run in enumerate(RESULTS["lr_sweep"]):
    steps = run["steps"]
    axes[1].plot([s["step"] for s in steps], [s["chosen_log_probs"] for s in steps], "-", color=f"C{i}",
                 label=f"lr {run['lr']:g}: chosen (held-out answer {run['held_out_answer']:.2f}, KL {run['exact_kl']:.3f})")
    axes[1].plot([s["step"] for s in steps], [s["rejected_log_probs"] for s in steps], ":", color=f"C{i}",
                 label=f"lr {run['lr']:g}: rejected")
axes[1].set(xlabel="DPO step", title="three learning rates, seed 0 (solid chosen, dotted rejected)")
axes[1].legend(fontsize=7)
plt.tight_layout()
plt.show()
for run in RESULTS["lr_sweep"]:
    first, last = run["steps"][0], run["steps"][-1]
    print(f"lr {run['lr']:g}: log pi(chosen) {first['chosen_log_probs']:6.1f} -> {last['chosen_log_probs']:6.1f}, "
          f"log pi(rejected) {first['rejected_log_probs']:6.1f} -> {last['rejected_log_probs']:6.1f}, "
          f"last batch accuracy {last['reward_accuracy']:.2f}, exact KL {run['exact_kl']:.4f}, "
          f"held-out answer {run['held_out_answer']:.3f}")

# %% [markdown]
# Measured (the same file): at learning rate 3e-5 the chosen log-prob hardly moves (-21.7 to
# -21.9 on seed 0) while the rejected one falls (-27.0 to -30.4): the margin grows by pushing the
# rejected response down. At 1e-4 the chosen log-prob falls too (to -23.1) and at 3e-4 both fall
# far (chosen -31.8, rejected -66.3), the batch accuracy reaching 1.0, the exact KL to the
# reference 0.71 per token, and the held-out answer reward falling from 0.52 to 0.055. So a falling
# chosen log-prob alone is expected (the loss does not ask it to rise), but a fast fall of both is
# the sign of a step too large: the probability mass leaves both responses for others, and the
# held-out answers with it. Read the margin and a held-out score, not the chosen log-prob.
#
# ## beta: what it holds
#
# $\beta$ scales the implicit reward, and with it the gradient: $\nabla\mathcal{L} = -\beta\,\sigma(-m)\,[\dots]$.
# With Adam the scale of the gradient hardly matters (each parameter's step is normalised by its
# own running size), so $\beta$ acts through $\sigma(-m)$: the larger $\beta$, the sooner a pair's
# margin $m = \beta \cdot (\dots)$ is wide enough that the pair stops pulling, so the policy moves less
# far from the reference for the same ranking. Measured on the first seed's pairs at learning rate
# 1e-4 (at 3e-5 no run moved far enough to tell): the implicit-reward accuracy on *held-out*
# on-policy pairs (from 128 test questions, sampled from the start), against the exact
# $\mathrm{KL}(\pi \,\|\, \pi_\text{ref})$ per response token on the policy's own responses to 32
# held-out prompts.

# %%
sweep = RESULTS["beta_sweep"]
print(f"held-out pairs: {RESULTS['settings']['held_out_pairs']}")
print(f"{'beta':>6s} {'held-out pair accuracy':>23s} {'exact KL':>9s} {'held-out answer':>16s} {'last batch accuracy':>20s}")
for run in sweep:
    print(f"{run['beta']:6g} {run['held_out_pair_accuracy']:23.3f} {run['exact_kl']:9.4f} {run['held_out_answer']:16.3f} "
          f"{run['train_reward_accuracy_last']:20.2f}")
fig, ax = plt.subplots(figsize=(5, 3.5))
ax.plot([r["exact_kl"] for r in sweep], [r["held_out_pair_accuracy"] for r in sweep], "o-")
for r in sweep:
    ax.annotate(f"beta {r['beta']:g}", (r["exact_kl"], r["held_out_pair_accuracy"]), fontsize=8)
ax.set(xlabel="exact KL(pi || pi_ref) per token", ylabel="held-out pair accuracy", title="beta, lr 1e-4, 2 epochs")
plt.show()

# %% [markdown]
# Measured at learning rate 1e-4, 2 epochs over the first seed's 158 pairs, 101 held-out pairs:
#
# | $\beta$ | held-out pair accuracy | exact KL per token | held-out answer |
# |---|---|---|---|
# | 0.01 | 0.743 | 0.144 | 0.375 |
# | 0.1 | 0.683 | 0.086 | 0.385 |
# | 0.5 | 0.683 | 0.037 | 0.535 |
#
# **$\beta$ controls the KL to the reference**: from 0.01 to 0.5 it fell fourfold, and the
# held-out answer reward stayed near the start only at $\beta = 0.5$. The held-out pairs are ranked
# better at the lowest $\beta$ (0.74 against 0.68, a difference of about 6 of 101 pairs, within the
# noise of so few): ranking held-out pairs and answering held-out questions are not the same
# skill, and the policy that ranked best answered worst.
#
# ## Reference hygiene, run
#
# **1. The reference in train mode, with dropout.** The reference's log-probs must be one fixed
# function of the pair. Give the model attention dropout 0.1 (Qwen2's `attention_dropout`; many
# checkpoints ship with dropout on) and score the reference without `.eval()`: every sequence
# log-prob gets a random offset. **2. The reference's log-probs taken from the policy being
# trained** (a trainer that scores "the reference" with the live model under `no_grad`): every margin
# is 0 at every step, so the loss reads $\log 2$ and the accuracy 0 forever, while the gradient,
# $-\frac{\beta}{2}[\nabla \log\pi(y_c) - \nabla\log\pi(y_r)]$, still moves the weights, with no
# anchor: the implicit KL leash is gone. All three runs are the first seed's on-policy DPO at
# learning rate 1e-4 (where the policy moves far enough for the leash to matter), with one thing
# changed (`benchmarks/dpo_12.py`).

# %%
hyg = RESULTS["hygiene"]
good = hyg["correct"]
gap = hyg["dropout_reference_gap"]
print(f"dropout 0.1, train mode against eval mode: |difference| of a sequence log-prob, mean {gap['mean_abs']:.1f}, "
      f"max {gap['max_abs']:.1f} nats")
print(f"{'run':34s} {'first loss':>10s} {'first accuracy':>15s} {'last loss':>10s} {'last accuracy':>14s} "
      f"{'exact KL':>9s} {'held-out answer':>16s}")
for name, run in (("correct (frozen reference, eval mode)", good), ("reference in train mode, dropout", hyg["reference_train_mode"]),
                  ("reference = the trained policy", hyg["reference_from_policy"])):
    first, last = run["steps"][0], run["steps"][-1]
    print(f"{name:34s} {first['loss']:10.4f} {first['reward_accuracy']:15.3f} {last['loss']:10.4f} "
          f"{last['reward_accuracy']:14.3f} {run['exact_kl']:9.4f} {run['held_out_answer']:16.3f}")
fig, axes = plt.subplots(1, 2, figsize=(12, 3.6))
for name, run, c in (("correct", good, "C0"), ("reference in train mode", hyg["reference_train_mode"], "C1"),
                     ("reference = policy", hyg["reference_from_policy"], "C3")):
    axes[0].plot([s["step"] for s in run["steps"]], [s["loss"] for s in run["steps"]], color=c, label=name)
    axes[1].plot([s["step"] for s in run["steps"]], [s["reward_accuracy"] for s in run["steps"]], color=c, label=name)
axes[0].axhline(math.log(2), color="grey", ls=":", label="log 2")
axes[0].set(xlabel="DPO step", ylabel="logged loss")
axes[1].set(xlabel="DPO step", ylabel="logged reward accuracy")
axes[0].legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# Measured (first seed, learning rate 1e-4):
#
# - **Dropout in the reference**: train mode moved each reference log-prob by 27.7 nats on average
#   (up to 115) against eval mode. The first logged loss was 1.63 instead of $\log 2$ and the first
#   accuracy 0.44 instead of about 0, before any update: every margin carried the reference's noise
#   from the start, so no logged loss, margin or accuracy of the run measured the policy. (It ended
#   at 0.425 held-out, against the correct run's 0.385: within one standard error; the noise did
#   not make the run fail here, it made its numbers meaningless.)
# - **The reference is the policy**: the loss read exactly $\log 2$ and the accuracy exactly 0 at
#   every one of the 20 steps, as if nothing were learned, while the policy moved *twice as far*
#   from the start as the correct run (exact KL 0.180 against 0.086) and answered worse (0.345
#   against 0.385): the gradient kept pulling at full strength ($\sigma(-m) = \frac12$ forever),
#   with nothing to say that a pair was already won.
#
# ## Cost: no sampling while training
#
# A DPO step runs two forwards (chosen and rejected; the reference's were paid once, before
# training) and one backward, and samples nothing. A GRPO step samples its 64 responses, scores them
# and then trains on them.

# %%
cost = RESULTS["cost"]
grpo_steps = [t for row in RESULTS["seeds"] for t in row["grpo"]["step_time"][1:]]
print(f"DPO step on 32 pairs (64 responses): {cost['dpo_step_64_responses']:.2f} s (median of steps 2-8)")
print(f"GRPO step on 64 responses, sampling included: {sorted(grpo_steps)[len(grpo_steps) // 2]:.2f} s (median)")
print(f"DPO's one-time costs: sampling the on-policy pairs {RESULTS['seeds'][0]['sampling_seconds']:.0f} s, "
      f"the reference's log-probs of {cost['pairs']} pairs {cost['reference_log_probs_seconds']:.1f} s")
prompt_tokens = [len(tokenizer(q["prompt"])["input_ids"]) for q in questions]
print(f"a prompt's length: {min(prompt_tokens)} to {max(prompt_tokens)} tokens, "
      f"{sum(prompt_tokens) / len(prompt_tokens):.0f} on average (the first {len(questions)} training questions)")

# %% [markdown]
# Measured (one core): a DPO step on 32 pairs took 1.53 s against 1.40 s for a GRPO step on 64
# responses, sampling included. **DPO's step was not cheaper here.** Both put 64 rows of prompt
# (about 115 tokens) and response through the model; GRPO's packed update skips the rows whose
# advantage is exactly 0 (about half of the demo's groups in notebook 09), and on a model this
# small sampling is cheap (the fast engine). Not measured: how each step's seconds divide between
# forward, backward and sampling. What DPO saves is the *online* sampling: its pairs were sampled
# once (17 s on the first seed) and its reference scored once (2.6 s for 158 pairs); with a 1.5B policy,
# where generation dominates an RL step, that is the saving the method is known for. Not measured
# here: the same comparison on a GPU.
#
# ## Pitfalls from practice
#
# - **Sum, not mean, and never the prompt.** DPO's $\log\pi(y|x)$ is the sum over the response's
#   tokens; a mean is another objective (length-normalised variants such as SimPO use it, with
#   their own settings). The prompt's tokens cancel in the margin (they are the same in both rows)
#   but swamp every per-response number logged, the chosen and rejected log-probs among them.
# - **logsigmoid.** `log(sigmoid(x))` is $-\infty$ at $x = -200$ in float32, exactly where a pair is
#   ranked most wrongly.
# - **The reference is data.** Scored once, in eval mode, without gradient, from the frozen start;
#   a live or noisy reference corrupts every logged number and, when it is the policy itself,
#   removes the leash.
# - **Falling chosen log-probs are not a bug by themselves**: read the margin and the held-out
#   reward. A learning rate too high drives both log-probs down fast and the answers with them.
# - **A tie is not a win**, and rounding makes ties look like wins: a first-step accuracy of 0.1 is
#   float32 noise, not learning.
#
# ## Summary
#
# DPO turns preferences into a classification loss on log-prob ratios against a frozen reference;
# it samples nothing while it trains. On the tiny task and a budget of 256 questions, DPO on the
# policy's own pairs, SFT on its correct samples and GRPO ended within noise of each other, a few
# hundredths above the start; DPO on pairs the policy would not write lost 0.09 to 0.175. $\beta$
# held the KL to the reference (fourfold from 0.01 to 0.5); a learning rate too high made both
# log-probs fall and the answers with them; and a careless reference corrupted every logged
# number, or, when it was the policy itself, removed the leash while the loss read $\log 2$.

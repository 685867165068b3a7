# %% [markdown]
# # 05 · An SFT run: the tiny model learns the format, and how much data it takes
#
# **Goal.** Put the pieces together. Notebooks 01, 03 and 04 gave you
# `tokenize_prompt_and_output`, `get_response_log_probs` and `sft_microbatch_train_step`. Here you
# write the loop around them, one optimizer step of supervised fine-tuning, and check it against
# the same step computed directly. Then the course trainer runs *with your functions plugged in* and teaches
# the tiny base model (which has never seen a `<think>` tag) to answer in the
# `<think> ... </think> <answer> ... </answer>` format, and you measure what the number of worked
# solutions buys: the data-size ablation 128 / 256 / 512 / 1024 / all, in format reward and in
# answer reward. A last section runs the same code on Qwen2.5-Math-1.5B and GSM8K when a GPU is
# present.
#
# Graded: `sft_train_step` (a visible check and hidden cases; see "How this is graded").

# %%
import math
import os
import time

import matplotlib.pyplot as plt
import torch

torch.manual_seed(0)
# One thread: the tiny model's matrices are too small for threads to pay off, and on a busy machine
# (or while many notebooks are graded side by side) competing threads make it ten times slower.
torch.set_num_threads(1)
GRADING = bool(os.environ.get("NBGRADER_EXECUTION"))  # set by nbgrader while grading: keep cells small
from course_lib.selfcheck import expect  # expect(ok, mistake): a self-check that names the mistake

# %% [markdown]
# ## The loop
#
# One optimizer step on a batch of $B$ examples, split into $k$ micro-batches $M_1..M_k$:
#
# $$g = \sum_{j=1}^{k} \nabla_\theta \frac{1}{k}\,\frac{1}{|M_j|}\sum_{b \in M_j} \frac{1}{c}\sum_t m_{b,t}\,\big(-\log \pi_\theta(y_{b,t}\mid x_b, y_{b,<t})\big),
# \qquad g \leftarrow g \cdot \min\!\Big(1, \frac{G_{\max}}{\lVert g\rVert}\Big), \qquad \theta \leftarrow \operatorname{AdamW}(\theta, g).$$
#
# In code, each micro-batch goes tokenize → log-probs → loss and backward (your three functions);
# then the gradient norm is clipped to `max_grad_norm`, the optimizer and the learning-rate
# schedule step once, and the gradients are zeroed for the next batch. The order matters: clipping
# must see the *whole* accumulated gradient, the zeroing must come after the step (and never
# between micro-batches), and the schedule steps once per optimizer step, not per micro-batch.
#
# Your functions from the earlier notebooks: `your_functions` runs the graded cells of your own
# notebook `../NN/` and takes them from there; where that notebook is missing, fails to run or
# still holds the stub, it takes the course's released reference instead (their deadlines have
# passed), and it prints which one each name is.

# %%
from course_lib.selfcheck import your_functions

tokenize_prompt_and_output = your_functions("01", "tokenize_prompt_and_output")
masked_normalize, get_response_log_probs = your_functions("03", "masked_normalize", "get_response_log_probs")
sft_microbatch_train_step = your_functions("04", "sft_microbatch_train_step")

# %% [markdown]
# ## The base model, before any SFT
#
# The tiny `qwen2-base` was pretrained on arithmetic text in a plain `Question: ... Answer: ...`
# style. Given the r1_zero prompt, it continues in its own style and never closes `</think>` or
# opens `<answer>`: format reward 0, so answer reward 0, whatever arithmetic it knows.

# %%
from course_lib import gsm8k_to_r1_zero, load_problems, r1_zero_reward_fn
from course_lib.training.evaluation import evaluate
from course_lib.world.tiny_models import load_tiny

EVAL_N = 8 if GRADING else 200
EVAL_MAX_TOKENS = 24 if GRADING else 80
held_out = [gsm8k_to_r1_zero(p) for p in load_problems("arith", "test")[:EVAL_N]]
train_records = [gsm8k_to_r1_zero(p) for p in load_problems("arith", "train")]
print(f"{len(train_records)} worked solutions to train on, {len(held_out)} held-out problems to evaluate on")

base_model, tokenizer = load_tiny("qwen2-base")
base = evaluate(base_model, tokenizer, held_out, max_tokens=EVAL_MAX_TOKENS, batch_size=EVAL_N, return_rollouts=True)
print(f"base model: format reward {base['format_reward']:.3f}, answer reward {base['answer_reward']:.3f}")
print("a base-model response:", repr(base["rollouts"][0].text[:200]))

# %% [markdown]
# ## Your turn: `sft_train_step`
#
# Write one optimizer step as described above. Use the three functions you are given as
# arguments (their defaults are the functions above), slice the batch into `k` consecutive
# micro-batches (a batch that does not split into `k` raises `ValueError`), move the tensors to
# the model's device, clip with `torch.nn.utils.clip_grad_norm_` (it returns the norm *before*
# clipping, which you return), and zero the gradients with `set_to_none=True` at the end. The
# numbers you return are Python floats (`response_tokens` an int).

# %% [solution] course_lib.sft:sft_train_step
import torch

# %% [markdown]
# ## How this is graded
#
# The visible check below needs nothing but your step: from the same starting weights, one call
# of your `sft_train_step` on a batch of 4 examples in $k = 2$ micro-batches must leave the same
# parameters, to float rounding, as the same optimizer step computed directly, on the whole batch at once (the loss
# $\frac{1}{B}\sum_b \sum_t m_{b,t}(-\ell_{b,t})$ with $c = 1$, one `backward()`, clipping, AdamW,
# the schedule): the step of the math above. Two steps run, with clipping active and a schedule
# that halves the learning rate at every step, so the order of clip, step, schedule and
# zero_grad shows. It runs with the course's released `tokenize_prompt_and_output`,
# `get_response_log_probs` and `sft_microbatch_train_step`, so it tests your step alone.
#
# The hidden cases run your step for a few optimizer steps of a small causal LM (with those
# released functions passed in, wrapped to count their calls), with $k = 1..4$, clipping active
# and not, with and without a schedule, weight decay, examples of very different lengths, and a
# batch that does not split into $k$ (`ValueError`). After every step they compare the
# parameters with those of the reference step (to float rounding), the learning rate, that no
# gradient is left over, the returned `loss`, `grad_norm` (before clipping), `response_tokens`
# and `nll_sum`, and that each passed function was called once per micro-batch.

# %% [tests] sft_train_step 5
import copy

import course_lib  # the released references of notebooks 01, 03 and 04: this check tests your step alone

BATCH, K, LR, CLIP = 4, 2, 3e-3, 0.5
batches = [train_records[:BATCH], train_records[BATCH:2 * BATCH]]
mine_model, direct_model = copy.deepcopy(base_model), copy.deepcopy(base_model)
mine_model.train()
direct_model.train()


def adamw_and_schedule(model):
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.95), weight_decay=0.0)
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 0.5 ** s)


calls = {"tokenize_fn": 0, "log_probs_fn": 0, "train_step_fn": 0}


def counting(name, fn):
    def wrapped(*args, **kwargs):
        calls[name] += 1
        return fn(*args, **kwargs)
    return wrapped


mine_opt, mine_sched = adamw_and_schedule(mine_model)
direct_opt, direct_sched = adamw_and_schedule(direct_model)
for step, examples in enumerate(batches):
    out = sft_train_step(mine_model, tokenizer, mine_opt, examples, K, max_grad_norm=CLIP, scheduler=mine_sched,
                         tokenize_fn=counting("tokenize_fn", course_lib.tokenize_prompt_and_output),
                         log_probs_fn=counting("log_probs_fn", course_lib.get_response_log_probs),
                         train_step_fn=counting("train_step_fn", course_lib.sft_microbatch_train_step))
    # the same optimizer step, computed directly on the whole batch
    full = course_lib.tokenize_prompt_and_output([e["prompt"] for e in examples], [e["output"] for e in examples], tokenizer)
    logp = course_lib.get_response_log_probs(direct_model, full["input_ids"], full["labels"])["log_probs"]
    direct_loss = course_lib.masked_normalize(-logp, full["response_mask"], dim=-1).mean()
    direct_loss.backward()
    direct_norm = torch.nn.utils.clip_grad_norm_(direct_model.parameters(), CLIP)
    direct_opt.step()
    direct_sched.step()
    direct_opt.zero_grad(set_to_none=True)
    print(f"step {step + 1}: loss {out['loss']:.4f} (direct {direct_loss.item():.4f}), "
          f"grad_norm {out['grad_norm']:.4f} (direct {direct_norm.item():.4f}), lr now {mine_opt.param_groups[0]['lr']:.2e}")
    expect(all(isinstance(out[key], float) for key in ("loss", "grad_norm", "nll_sum")),
           "return the loss, grad_norm and nll_sum as Python floats (float(...))")
    expect(math.isclose(out["loss"], direct_loss.item(), rel_tol=1e-4),
           "the returned loss is not the batch loss: return the sum of the k scaled micro-batch losses")
    expect(math.isclose(out["grad_norm"], direct_norm.item(), rel_tol=1e-3),
           "grad_norm differs: return clip_grad_norm_'s value (the norm before clipping) of the whole accumulated gradient")
    expect(out["response_tokens"] == int(full["response_mask"].sum()),
           "response_tokens should count the response tokens of the whole batch")
    expect(math.isclose(out["nll_sum"], (direct_loss * BATCH).item(), rel_tol=1e-4),
           "nll_sum should be the summed negative log-likelihood of the batch's response tokens")
    expect(math.isclose(mine_opt.param_groups[0]["lr"], direct_opt.param_groups[0]["lr"]),
           "the learning rate differs: step the scheduler once per optimizer step (after optimizer.step), not per micro-batch")
    expect(all(p.grad is None or not p.grad.any() for p in mine_model.parameters()),
           "gradients are left over after the step: zero them after optimizer.step() (optimizer.zero_grad(set_to_none=True))")

expect(calls == {name: len(batches) * K for name in calls},
       f"calls per function {calls}, expected {len(batches) * K} each: call tokenize_fn, log_probs_fn and train_step_fn "
       f"once per micro-batch (k = {K} per step), and use the functions passed as arguments")
worst = max((p - q).abs().max().item() for p, q in zip(mine_model.parameters(), direct_model.parameters()))
print(f"largest parameter difference after {len(batches)} steps: {worst:.2e}")
# AdamW's first steps move every parameter by about the learning rate (3e-3) whatever the size of its
# gradient, so float rounding in a near-zero gradient can move one by ~1e-5 (measured); a wrong step, ~1e-3
expect(worst < 1e-4,
       "parameters differ from the direct full-batch step: check the order (all k micro-batches, then clip, then "
       "optimizer.step, then scheduler.step, then zero_grad), and that the gradient is not zeroed between micro-batches")
try:
    sft_train_step(mine_model, tokenizer, mine_opt, train_records[:5], 2, scheduler=mine_sched)
    raised = False
except ValueError:
    raised = True
expect(raised, "5 examples do not split into k = 2 micro-batches: raise ValueError")
print("all visible checks passed")

# Hidden cases (run by the grader on your sft_train_step, in a fresh process): listed above.
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("sft_train_step", sft_train_step)
### END HIDDEN TESTS

# %% [markdown]
# ## The run, and the data-size ablation
#
# Now the course trainer runs with your step and your three functions plugged in
# (`step_fn`, `tokenize_fn`, `log_probs_fn`, `train_step_fn`), once per training-set size: the first
# 128, 256, 512, 1024 worked solutions, and all of them. Every run gets the same budget of
# optimizer steps (so the small sets are seen many times, the full set about once), starts from
# the same base weights, and is evaluated on the same held-out problems with greedy decoding and
# `r1_zero_reward_fn`. While grading, the runs shrink to a few steps (the figures then mean
# nothing).

# %%
from course_lib.training.sft_trainer import train_sft

SIZES = [128, None] if GRADING else [128, 256, 512, 1024, None]  # None: all
RUN = dict(steps=2 if GRADING else 60, batch_size=4 if GRADING else 16, gradient_accumulation_steps=1,
           lr=3e-3, warmup_steps=1 if GRADING else 6, seed=0,
           eval_max_tokens=EVAL_MAX_TOKENS, eval_batch_size=EVAL_N)
runs = {}
t_all = time.perf_counter()
for n in SIZES:
    model, _ = load_tiny("qwen2-base")
    t0 = time.perf_counter()
    result = train_sft(dict(RUN, n_examples=n), model=model, tokenizer=tokenizer, train_data=train_records,
                       eval_data=held_out, progress=not GRADING,
                       tokenize_fn=tokenize_prompt_and_output, log_probs_fn=get_response_log_probs,
                       train_step_fn=sft_microbatch_train_step, step_fn=sft_train_step)
    label = "all" if n is None else str(n)
    runs[label] = {"n": len(train_records) if n is None else n, "metrics": result.metrics, "eval": result.eval, "model": result.model}
    print(f"n = {label:>5s}: format {result.eval['format_reward']:.3f}  answer {result.eval['answer_reward']:.3f}  "
          f"final loss {[r['loss'] for r in result.metrics if r['kind'] == 'train'][-1]:.3f}  ({time.perf_counter() - t0:.0f} s)")
print(f"all runs: {time.perf_counter() - t_all:.0f} s")

# %% [markdown]
# ### What the fine-tuned model writes
#
# The largest run's model on a few held-out problems, with the reward of each response:

# %%
best = runs["all"]["model"]
SHOW = 2 if GRADING else 4
shown = evaluate(best, tokenizer, held_out[:SHOW], max_tokens=EVAL_MAX_TOKENS, batch_size=SHOW, return_rollouts=True)
for ex, rollout, score in zip(held_out[:SHOW], shown["rollouts"], shown["scores"]):
    print(f"gold {ex['ground_truth']:>6s} | format {score['format_reward']:.0f} answer {score['answer_reward']:.0f} | {rollout.text.strip()[:150]!r}")

# %% [markdown]
# ### Figure: loss curves and the ablation

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4))
for label, run in runs.items():
    train = [r for r in run["metrics"] if r["kind"] == "train"]
    ax1.plot([r["step"] for r in train], [r["nll_per_token"] for r in train], label=f"n = {label}")
ax1.set_xlabel("optimizer step")
ax1.set_ylabel("training NLL per response token")
ax1.set_yscale("log")
ax1.set_title("SFT with your functions in the course trainer")
ax1.legend(fontsize=8)

ns = [run["n"] for run in runs.values()]
ax2.plot(ns, [run["eval"]["format_reward"] for run in runs.values()], "o-", lw=2, label="format reward")
ax2.plot(ns, [run["eval"]["answer_reward"] for run in runs.values()], "s-", lw=2, label="answer reward")
ax2.axhline(base["answer_reward"], color="gray", ls=":", label="base model (both ~0)")
ax2.set_xscale("log", base=2)
ax2.set_xticks(ns, [label for label in runs])
ax2.set_ylim(-0.02, 1.02)
ax2.set_xlabel("worked solutions used for SFT (n_examples)")
ax2.set_ylabel(f"reward on {EVAL_N} held-out problems")
ax2.set_title(f"Data-size ablation ({RUN['steps']} steps of {RUN['batch_size']} each)")
ax2.legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# How to read it. The format is a fixed pattern that every worked solution repeats, so it is
# learnt first and from little data: format reward climbs from 0 to between about 0.7 and 0.9
# for every data size, already with 128 examples, and the training curves of all sizes lie on
# top of each other. Answer reward lands near 0.3 for every size at this budget (60 steps of 16
# examples). The differences between sizes are within run-to-run variation (one seed; where the
# last optimizer steps happen to land), so do not read a ranking into them: rerun with another
# `seed` and watch them move.
#
# Why answer reward stays far below format reward is worth a look. The base model *can* do this
# arithmetic: asked in its own pretraining form (`Question: ...` / `Answer:`, like the base
# response printed at the top) it solves about 94% of these held-out problems. A short SFT run
# teaches the new format, and fitting few examples hard costs part of that arithmetic (look at
# the calculator notes above: the format is right, some sums are not). That gap between
# "formatted" and "correct" is what GRPO works on in notebooks 06 to 09, with a signal that needs
# only final answers (cheap) instead of worked solutions (expensive); `make demo` measures it:
# SFT on 128 worked solutions reaches about 0.5 answer reward, GRPO from there about 0.7. On a
# GPU, with the real model below, answer reward is where the data sizes differ.

# %% [markdown]
# ## On a GPU: Qwen2.5-Math-1.5B on GSM8K
#
# The same trainer, the same three functions, a real model and real data: the configuration
# `configs/sft_qwen2.5_math_1.5b_gsm8k.yaml` (bfloat16, flash-attention where installed, micro-batch
# 4 with gradient accumulation 16, evaluation through vLLM). The cell below runs it for one
# ablation point when a CUDA GPU is present, and is skipped on a CPU. From the command line, for
# each point of the ablation:
#
# ```
# python -m course_lib.training sft --config configs/sft_qwen2.5_math_1.5b_gsm8k.yaml n_examples=1024 output_dir=runs/sft_qwen_1024
# ```

# %%
if torch.cuda.is_available() and not GRADING:
    from course_lib.training.config import load_config
    from course_lib.paths import REPO_ROOT

    gpu_cfg = load_config("sft", REPO_ROOT / "configs" / "sft_qwen2.5_math_1.5b_gsm8k.yaml",
                          {"n_examples": 1024, "output_dir": str(REPO_ROOT / "runs" / "sft_qwen_1024")})
    gpu_run = train_sft(gpu_cfg, tokenize_fn=tokenize_prompt_and_output, log_probs_fn=get_response_log_probs,
                        train_step_fn=sft_microbatch_train_step, step_fn=sft_train_step)
    print("Qwen2.5-Math-1.5B after SFT on 1024 GSM8K solutions:", gpu_run.eval)
else:
    print("no CUDA GPU (or grading): the Qwen2.5-Math-1.5B + GSM8K run is skipped")

# %% [markdown]
# ## Pitfall from practice: the model that never stops
#
# Look at the training outputs: they end with `</answer>` and no end-of-text token. The model
# therefore never learns to *stop*; after `</answer>` it keeps writing whatever comes next in its
# pretraining data. Evaluation hides this, because generation is cut at the stop string
# `</answer>` (the rollout engines here, and vLLM's `stop=["</answer>"]` in real runs). This is a
# well-known trap when SFT data and inference settings are prepared separately: drop the stop
# string, or serve the model somewhere that does not set it, and every answer runs on to the token
# limit, costs that many tokens, and may be graded wrong by a parser that reads the last
# `<answer>`. Either train with the end-of-text token appended to every output, or make the stop
# string part of the model's serving configuration and test it. The same goes for the response
# mask: a mask that includes the prompt (notebook 01) trains the model to reproduce the system
# prompt, and the loss still goes down.
#
# ## Summary
#
# - One SFT step: for each of $k$ micro-batches tokenize, get log-probs, loss and backward; then
#   clip the accumulated gradient, `optimizer.step()`, `scheduler.step()`, zero the gradients.
# - Your step matches the same step computed directly on the whole batch, parameter for
#   parameter; the trainer ran with your step, tokenization, log-probs and loss plugged in.
# - SFT teaches the tiny model the format within a few dozen steps; correct answers are much
#   harder to get from it, and the gap between format and answer reward is where RL comes in.
# - Match training data and inference: what ends a response (stop string or end-of-text token) is
#   part of the format.

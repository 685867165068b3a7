# %% [markdown]
# # 05 · SFT: the zero-shot baseline, the SFT step and run, what data buys, and expert iteration
#
# **Goal.** Put the pieces together, the way CS336's SFT assignment does. First measure where
# the model starts: you write `evaluate`, which samples a response per problem, grades it with
# the r1_zero reward and sorts it into one of three categories (format wrong, answer wrong,
# correct), and you run it on the tiny base model, which has never seen a `<think>` tag. Then you
# write one optimizer step of supervised fine-tuning, `sft_train_step`, from the functions of
# notebooks 01, 03 and 04, check it against the same step computed directly, and run the course
# trainer with it, watching the model's generations (`log_generations`: reward, length and
# entropy of correct and wrong responses) while it learns the
# `<think> ... </think> <answer> ... </answer>` format. Then what the number of worked solutions
# buys (the data-size ablation 128 / 256 / 512 / 1024 / all, each size trained for many
# epochs, two or three seeds), and expert iteration: the model writes its own solutions, keeps the correct ones
# and learns from them, against SFT on the gold solutions of the same questions. A last section
# runs the same code on Qwen2.5-Math-1.5B and GSM8K when a GPU is present.
#
# Graded: `evaluate` and `sft_train_step` (visible checks and hidden cases in one cell each; all
# their points go through the hidden cases; `make check NB=05` runs practice cases of the same
# kinds on your machine).
#
# Time: in student mode the whole notebook ran in 11 minutes (8.5 minutes of CPU time on one
# thread) on a 2-core machine that other jobs kept busy (`jupyter nbconvert --execute`; the SFT
# runs and expert iteration take most of it); in grading mode it shrinks every run to a few
# steps.

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
# ## Your functions from the earlier notebooks
#
# `your_functions` runs the graded cells of your own notebook `../NN/` and takes the functions
# from there; where that notebook is missing, fails to run or still holds the stub, it takes the
# course's released reference instead (their deadlines have passed). It prints which one each
# name is: every run below uses the functions printed here, yours or the references.

# %%
from course_lib.selfcheck import your_functions

tokenize_prompt_and_output = your_functions("01", "tokenize_prompt_and_output")
masked_normalize, get_response_log_probs = your_functions("03", "masked_normalize", "get_response_log_probs")
sft_microbatch_train_step = your_functions("04", "sft_microbatch_train_step")

# %% [markdown]
# ## Part 1: evaluating a model, and the zero-shot baseline
#
# Before training anything, measure where the model starts. An evaluation samples one response
# $o_i$ per held-out prompt $q_i$ (greedy: temperature 0, stopping at `</answer>`), grades it
# against the gold answer $a_i$ with the reward function of notebook 01's format,
# $r(o_i, a_i) = $ `r1_zero_reward_fn(response, ground_truth)`
# $\to$ {`format_reward`, `answer_reward`, `reward`}, and reports the means over the $N$
# problems. The means hide *why* a response earns 0, so each response also gets a category:
#
# | category | when | what it usually means |
# |---|---|---|
# | `format_wrong` | `format_reward` is 0 (whatever the answer reward says) | no `</think> <answer> ... </answer>`: the model does not know the format, or the parser cannot read it |
# | `answer_wrong` | the format is right, `answer_reward` is 0 | the model knows the format and got the arithmetic wrong |
# | `correct` | both are 1 | |
#
# The first category is where a zero-shot model usually sits, and the one to read by hand: a
# format reward of 0 may be the model's fault or the parser's.
#
# ### Your turn: `evaluate`
#
# Write `evaluate(engine, prompts, ground_truths, sampling_params, reward_fn)`. The engine is a
# rollout engine of `course_lib.rollouts` (the fast engine for the tiny model, vLLM for a real
# one): `engine.generate(prompts, sampling_params)` returns one `Rollout` per prompt, in order,
# whose `.text` is the response. Pass `sampling_params` on unchanged (the stop string, the
# token budget and the temperature are the caller's), grade the response alone (not the prompt
# plus the response) with `reward_fn(response, ground_truth)`, and return the rollouts, the
# per-example rewards, the categories, their counts (all three keys, zeros included) and the
# three means as Python floats. Raise `ValueError` for a different number of prompts and ground
# truths, no prompts at all, or `sampling_params.n != 1`.
#
# The hidden cases run it on a scripted engine (it answers each prompt with a given response and
# records what it is asked) with real r1_zero prompts and responses of every category, a
# `\boxed{}` answer, base-model rambles only, correct responses only, a reward function of the
# caller's under which an answer can be right while the format is wrong (that example is
# `format_wrong`) and whose two arguments cannot be swapped, unusual sampling settings, one
# prompt, the same prompt twice with two different ground truths, and the three `ValueError`s.

# %% [solution] course_lib.rewards:evaluate
from typing import Callable

from course_lib.rewards import CATEGORIES, r1_zero_reward_fn  # ("format_wrong", "answer_wrong", "correct")

# %% [markdown]
# The checks below use a scripted engine too, and real held-out problems of the arithmetic data
# set in the r1_zero format (notebook 01).

# %%
from course_lib import gsm8k_to_r1_zero, load_problems
from course_lib.rollouts import FastEngine, Rollout, SamplingParams
from course_lib.world.tiny_models import load_tiny

EVAL_N = 8 if GRADING else 500  # held-out problems (500: about +-2 points of noise on a reward near 0.5)
EVAL_MAX_TOKENS = 32 if GRADING else 100
test_problems = load_problems("arith", "test")
held_out = [gsm8k_to_r1_zero(p) for p in test_problems[:EVAL_N]]
train_records = [gsm8k_to_r1_zero(p) for p in load_problems("arith", "train")]
print(f"{len(train_records)} worked solutions to train on, {len(held_out)} held-out problems to evaluate on")


class ScriptedEngine:
    """A rollout engine that answers prompt p with responses[p] and records every call."""

    def __init__(self, responses):
        self.responses, self.calls = responses, []

    def generate(self, prompts, params):
        self.calls.append((list(prompts), params))
        return [Rollout(prompt=p, text=self.responses[p], token_ids=[], finish_reason="stop") for p in prompts]

# %% [tests] evaluate 4
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("evaluate", evaluate)
### END HIDDEN TESTS
ex = [gsm8k_to_r1_zero(p) for p in test_problems[:4]]
reasoning = [e["output"].split(" </think>")[0] for e in ex]
responses = {
    ex[0]["prompt"]: ex[0]["output"],                                                      # correct
    ex[1]["prompt"]: f"{reasoning[1]} </think> <answer> {int(ex[1]['ground_truth']) + 1} </answer>",  # answer wrong
    ex[2]["prompt"]: f"{reasoning[2]} </think> <answer> {ex[2]['ground_truth']}",           # no </answer>
    ex[3]["prompt"]: f" Question: what next?\nAnswer: {reasoning[3]}\n#### {ex[3]['ground_truth']}",  # a ramble
}
engine = ScriptedEngine(responses)
params = SamplingParams(temperature=0.0, max_tokens=64, stop=("</answer>",))
prompts, truths = [e["prompt"] for e in ex], [e["ground_truth"] for e in ex]
out = evaluate(engine, prompts, truths, params)
expect(isinstance(out, dict) and {"rollouts", "rewards", "categories", "counts", "format_reward", "answer_reward", "reward"} <= set(out),
       "return a dict with rollouts, rewards, categories, counts, format_reward, answer_reward and reward")
expect(len(engine.calls) >= 1 and [p for call in engine.calls for p in call[0]] == prompts,
       "ask the engine for each prompt once, in order: engine.generate(prompts, sampling_params)")
expect(all(call[1] is params for call in engine.calls),
       "pass sampling_params to the engine unchanged: its stop string, budget and temperature are the caller's")
expect([r.text for r in out["rollouts"]] == [responses[p] for p in prompts], "rollouts must be the engine's rollouts, in the prompts' order")
expect(out["rewards"] == [r1_zero_reward_fn(responses[p], t) for p, t in zip(prompts, truths)],
       "rewards[i] must be reward_fn(response i, ground truth i): the response alone, then its gold answer")
expect(out["categories"][3] != "answer_wrong",
       "a ramble without tags came out answer_wrong: grade the response alone, not prompt + response "
       "(the r1_zero prompt itself shows '</think> <answer> answer here </answer>')")
expect(out["categories"] == ["correct", "answer_wrong", "format_wrong", "format_wrong"],
       f"categories {out['categories']}: format_wrong when format_reward is 0, else answer_wrong when answer_reward is 0, else correct")
expect(out["counts"] == {"format_wrong": 2, "answer_wrong": 1, "correct": 1}, f"counts {out['counts']} do not match the categories")
expect(all(type(out[k]) is float for k in ("format_reward", "answer_reward", "reward")),
       "return the three means as Python floats")
expect(math.isclose(out["format_reward"], 0.5) and math.isclose(out["answer_reward"], 0.25) and math.isclose(out["reward"], 0.25),
       "the means are over all N examples: format 2/4, answer 1/4")
rambles = evaluate(ScriptedEngine({ex[3]["prompt"]: responses[ex[3]["prompt"]]}), [ex[3]["prompt"]], [truths[3]], params)
expect(rambles["counts"] == {"format_wrong": 1, "answer_wrong": 0, "correct": 0},
       f"counts {rambles['counts']}: every category needs its key, zeros included")


def answer_anywhere(response, ground_truth):
    """A caller's reward: the answer counts wherever the gold number stands; the format needs the closing tag."""
    answer_ok = 1.0 if ground_truth in response.split() else 0.0
    return {"format_reward": 1.0 if response.rstrip().endswith("</answer>") else 0.0, "answer_reward": answer_ok, "reward": answer_ok}


custom = evaluate(engine, prompts[3:], truths[3:], params, answer_anywhere)
expect(custom["rewards"] == [answer_anywhere(responses[prompts[3]], truths[3])], "use the reward_fn you are given, not r1_zero_reward_fn")
expect(custom["categories"] == ["format_wrong"],
       "the format is checked first: a right answer with the format wrong is format_wrong, not correct")
try:
    evaluate(engine, prompts, truths[:3], params)
    raised = False
except ValueError:
    raised = True
expect(raised, "4 prompts and 3 ground truths must raise ValueError (zip would silently drop one)")
print("all visible checks passed")

# Hidden cases (run by the grader on your evaluate, in a fresh process): listed above.

# %% [markdown]
# ### The zero-shot baseline
#
# The tiny `qwen2-base` was pretrained on arithmetic text in a plain `Question: ... Answer: ...`
# style and never saw the r1_zero tags. Greedy, on the held-out problems, through the fast
# rollout engine and your `evaluate`:

# %%
base_model, tokenizer = load_tiny("qwen2-base")
GREEDY = SamplingParams(temperature=0.0, max_tokens=EVAL_MAX_TOKENS, stop=("</answer>",))


def held_out_eval(model, records=held_out):
    """Your evaluate, greedy, on r1_zero records, with a fast engine over `model`'s current weights."""
    engine = FastEngine(model, tokenizer, batch_size=len(records))
    return evaluate(engine, [r["prompt"] for r in records], [r["ground_truth"] for r in records], GREEDY)


def show_categories(result, records=held_out, per_category=2, width=160):
    print("counts:", result["counts"], f"| format reward {result['format_reward']:.3f}, answer reward {result['answer_reward']:.3f}")
    for category in CATEGORIES:
        shown = [i for i, c in enumerate(result["categories"]) if c == category][:per_category]
        print(f"--- {category}: {'none' if not shown else ''}")
        for i in shown:
            print(f"  gold {records[i]['ground_truth']:>5s} | {result['rollouts'][i].text.strip()[:width]!r}")


t0 = time.perf_counter()
base = held_out_eval(base_model)
show_categories(base)
print(f"({time.perf_counter() - t0:.0f} s)")

# %% [markdown]
# Every response is `format_wrong` (all 500 in student mode): the base model never closes
# `</think>` or opens `<answer>`, so format reward is 0 and answer reward 0, whatever arithmetic
# it knows. Read the examples, though: it writes a worked solution in its pretraining style and
# ends it with `#### N`. Is the zero the model's ignorance or the parser's? Grade the same
# responses with a reward function that reads the model's own form (the answer is the rest of
# the line after the first `####`), and ask the same problems in its pretraining form,
# `Question: ...\nAnswer:`: same engine, same `evaluate`, another prompt and another reward.

# %%
from course_lib.rewards import grade_answer  # the value comparison inside r1_zero_reward_fn


def own_format_reward(response, ground_truth):
    """The base model's pretraining format: '... #### N'. Format 1 when '####' is there; answer 1 when N is right."""
    if "####" not in response:
        return {"format_reward": 0.0, "answer_reward": 0.0, "reward": 0.0}
    right = 1.0 if grade_answer(response.split("####", 1)[1].split("\n")[0], ground_truth) else 0.0
    return {"format_reward": 1.0, "answer_reward": right, "reward": right}


regraded = [own_format_reward(r.text, e["ground_truth"])["answer_reward"] for r, e in zip(base["rollouts"], held_out)]
print(f"the same r1_zero responses, graded in the model's own format: answer reward {sum(regraded) / len(regraded):.3f}")
plain_prompts = [f"Question: {p['question']}\nAnswer:" for p in test_problems[:EVAL_N]]
own = evaluate(FastEngine(base_model, tokenizer, batch_size=EVAL_N), plain_prompts, [r["ground_truth"] for r in held_out],
               SamplingParams(temperature=0.0, max_tokens=100, stop=("\nQuestion",)), own_format_reward)
print(f"the base model in its own format: {own['counts']} | answer reward {own['answer_reward']:.3f}")
print("e.g.", repr(own["rollouts"][0].text.strip()[:200]))

# %% [markdown]
# Measured in student mode (500 problems): the r1_zero responses, which all score 0, hold the
# right answer after `####` in 0.558 of the problems, and asked in its own form the model solves
# 0.938 (`tests/test_tiny_world.py` checks at least 0.8 on 200). The zero of the r1_zero
# evaluation is a format failure, not a lack of arithmetic: the unfamiliar prompt costs the model
# some of its arithmetic, and its format costs it all of the reward. What SFT has to teach is the
# format, and the danger is that teaching it costs some of the arithmetic. Reading
# `format_wrong` examples by hand is how you tell the two apart on a real model too (CS336 asks
# exactly this question of its zero-shot baseline of Qwen2.5-Math-1.5B on GSM8K; not measured
# here).
#
# ## Part 2: one SFT step
#
# One optimizer step on a batch of $B$ examples, split into $k$ micro-batches $M_1..M_k$ of
# $B/k$ examples each:
#
# $$g = \sum_{j=1}^{k} \nabla_\theta \frac{1}{k}\,\frac{1}{|M_j|}\sum_{b \in M_j} \frac{1}{c}\sum_t m_{b,t}\,\big(-\log \pi_\theta(y_{b,t}\mid x_b, y_{b,<t})\big),
# \qquad g \leftarrow g \cdot \min\!\Big(1, \frac{G_{\max}}{\lVert g\rVert}\Big), \qquad \theta \leftarrow \operatorname{AdamW}(\theta, g).$$
#
# In code, each micro-batch goes tokenize → log-probs → loss and backward (the three functions
# above); then the gradient norm is clipped to `max_grad_norm`, the optimizer and the
# learning-rate schedule step once, and the gradients are zeroed for the next batch. The order
# matters: clipping must see the *whole* accumulated gradient, the zeroing must come after the
# step (and never between micro-batches), and the schedule steps once per optimizer step, not per
# micro-batch. The course's trainer uses $c = 1$ (the default `normalize_constant`).

# %% [markdown]
# ## Your turn: `sft_train_step`
#
# Write one optimizer step as described above. Use the three functions you are given as
# arguments (their defaults are the functions above), slice the batch into `k` consecutive
# micro-batches (raise `ValueError` for a batch whose size `gradient_accumulation_steps` does not
# divide), move the tensors to the model's device, clip with `torch.nn.utils.clip_grad_norm_` (it
# returns the norm *before* clipping, which you return), and zero the gradients with
# `set_to_none=True` at the end. The numbers you return are Python floats (`response_tokens` an
# int).

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
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("sft_train_step", sft_train_step)
### END HIDDEN TESTS
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

# %% [markdown]
# ## Part 3: the SFT run, with its generations logged
#
# Now the course trainer runs with your step and the three functions above plugged in
# (`step_fn`, `tokenize_fn`, `log_probs_fn`, `train_step_fn`): the first 128 worked solutions,
# 300 optimizer steps of 32 (75 epochs: this size's plateau, see Part 4), AdamW at
# $10^{-3}$ with 10 warmup steps and a cosine decay. The trainer's own evaluation is off
# (`eval_data=[]`): every evaluation here is your `evaluate`.
#
# Watching the loss is not enough to understand a run. Every few steps `log_generations`
# (from `course_lib.training.evaluation`; it calls your `evaluate` through `evaluate_fn`)
# generates greedy responses to a fixed set of held-out problems and reports, besides the
# rewards, the mean response length and the mean token entropy (notebook 02, under the model
# being trained) of the correct and of the wrong responses. A model that is wrong with long,
# high-entropy answers is guessing; short, confident wrong answers are a systematic mistake.

# %%
from course_lib.training.evaluation import log_generations
from course_lib.training.sft_trainer import train_sft

SFT = dict(steps=3 if GRADING else 300, batch_size=8 if GRADING else 32, gradient_accumulation_steps=1, lr=1e-3,
           warmup_steps=1 if GRADING else 10, seed=0)
LOG_EVERY = 1 if GRADING else 50
log_set = held_out[: 4 if GRADING else 64]
SFT_FUNCTIONS = dict(tokenize_fn=tokenize_prompt_and_output, log_probs_fn=get_response_log_probs,
                     train_step_fn=sft_microbatch_train_step, step_fn=sft_train_step)
generation_logs = []


def log_during_sft(record):
    """The trainer's on_step hook: log generations at step 1 and every LOG_EVERY steps."""
    step = record["step"]
    if step != 1 and step % LOG_EVERY:
        return
    summary = log_generations(sft_model, tokenizer, log_set, max_tokens=EVAL_MAX_TOKENS, batch_size=len(log_set),
                              step=step, evaluate_fn=evaluate, return_records=True)
    generation_logs.append(summary)
    part = lambda key: (f"{summary[key]['n']:2d} x {summary[key]['mean_response_tokens']:5.1f} tok, "
                        f"H {summary[key]['mean_token_entropy']:.2f}") if summary[key]["n"] else " 0" + " " * 20
    wrong = next((r for r in summary["records"] if r["category"] != "correct"), None)
    print(f"step {step:3d} | loss {record['loss']:.3f} | format {summary['format_reward']:.2f} answer "
          f"{summary['answer_reward']:.2f} | correct {part('correct')} | wrong {part('wrong')}"
          + (f" | e.g. {wrong['category']}: {wrong['response'].strip()[-60:]!r}" if wrong else ""))


sft_model, _ = load_tiny("qwen2-base")
t0 = time.perf_counter()
sft_run = train_sft(dict(SFT, n_examples=128), model=sft_model, tokenizer=tokenizer, train_data=train_records,
                    eval_data=[], progress=False, on_step=log_during_sft, **SFT_FUNCTIONS)
sft_seconds = time.perf_counter() - t0
print(f"{SFT['steps']} steps in {sft_seconds:.0f} s, generations logged included")

# %%
steps = [s["step"] for s in generation_logs]
fig, axes = plt.subplots(1, 3, figsize=(14, 3.6))
axes[0].plot(steps, [s["format_reward"] for s in generation_logs], "o-", label="format reward")
axes[0].plot(steps, [s["answer_reward"] for s in generation_logs], "s-", label="answer reward")
axes[0].set_ylim(-0.02, 1.02)
axes[0].set_title(f"rewards on {len(log_set)} logged problems")
for key, title, ax in [("mean_response_tokens", "mean response length (tokens)", axes[1]),
                       ("mean_token_entropy", "mean token entropy (nats)", axes[2])]:
    for group, marker in [("correct", "o-"), ("wrong", "x--")]:
        points = [(s["step"], s[group][key]) for s in generation_logs if s[group]["n"]]
        ax.plot([p[0] for p in points], [p[1] for p in points], marker, label=f"{group} responses")
    ax.set_title(title)
for ax in axes:
    ax.set_xlabel("optimizer step")
    ax.legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# How to read it (the log lines above, as measured in student mode). At step 1 every logged
# response is `format_wrong`, and confidently so (0.07 nats per token): the base model writes a
# solution in its pretraining style and ends it with `#### N`. At step 50 the format is half
# learnt (format reward 0.80) and the entropy has doubled (0.13 to 0.15 nats): the model is
# between two formats. At step 100 the format reward is 0.98, and from step 150 on it is 1.00,
# the answer reward settles at 0.50 to 0.53, and the entropy falls to a few hundredths of a nat
# while the training loss goes to 0.001 (the 128 solutions are learnt by heart). The wrong
# answers are then confident (0.03 to 0.05 nats, against 0.01 to 0.02 for the correct ones) and
# longer (about 61 tokens against 51: a solution of more steps has more places to slip):
# well-formed solutions with an arithmetic slip, not guesses. The format is a fixed pattern
# every worked solution repeats; the arithmetic of new problems is not.
#
# The fine-tuned model on all the held-out problems, with examples of each category:

# %%
after_sft = held_out_eval(sft_model)
show_categories(after_sft)

# %% [markdown]
# ## Part 4: the data-size ablation, where the sizes differ
#
# How much does the number of worked solutions buy? Each size $n$ (the first $n$ solutions of the
# training set) is trained from the base model for $\max(300, \lceil 4n / 32 \rceil)$ steps of 32:
# a small set is seen many times (128: 75 epochs), until its held-out curve is flat, and the
# full set of 10,000 four times (1,250 steps). A fixed budget of steps for every size would not
# show what data buys: 60 steps of 16 are 960 examples, so any set larger than that is not even
# seen once. Seeds (the data order) give the spread: three per size up to 1024, two for the
# full set.
#
# The 14 runs took two hours on a 2-core machine shared with other jobs (a 300-step run takes 4
# to 12 minutes on one core, the full set 25 to 27), so they are instructor commands whose
# results are committed, and this notebook plots them:
#
# ```
# OMP_NUM_THREADS=1 python benchmarks/sft_data_size.py --seeds 0 1     # -> data/experiments/sft_data_size.json
# OMP_NUM_THREADS=1 python benchmarks/sft_data_size.py --seeds 2 --sizes 128 256 512 1024 --resume
# ```
#
# In student mode you rerun two of its points yourself with your functions: $n = 128$ is the run
# of Part 3 (the same settings and seed 0 as the committed runs), and $n = 1024$ below (289 s
# on one core of a busy machine, when measured). They should land on the committed seed-0
# points to within a point or two (your functions may round differently from the references;
# with the reference functions both landed exactly on them: 0.478 and 0.888).

# %%
import json

from course_lib.paths import DATA_DIR

ablation = json.loads((DATA_DIR / "experiments" / "sft_data_size.json").read_text())
print("committed:", ablation["command"])
yours = {128: after_sft["answer_reward"] if not GRADING else None}
big = 16 if GRADING else 1024
t0 = time.perf_counter()
big_model, _ = load_tiny("qwen2-base")
train_sft(dict(SFT, n_examples=big, steps=SFT["steps"]), model=big_model, tokenizer=tokenizer, train_data=train_records,
          eval_data=[], progress=False, **SFT_FUNCTIONS)
yours[big] = held_out_eval(big_model)["answer_reward"]
print(f"your n = {big}: answer reward {yours[big]:.3f} ({time.perf_counter() - t0:.0f} s)")

# %%
runs = ablation["runs"]
labels = list(dict.fromkeys(r["label"] for r in runs))
by_label = {lab: [r for r in runs if r["label"] == lab] for lab in labels}
ns = [by_label[lab][0]["n"] for lab in labels]
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4))
for key, marker, name in [("answer_reward", "s", "answer reward"), ("format_reward", "o", "format reward")]:
    values = [[r[key] for r in by_label[lab]] for lab in labels]
    means = [sum(v) / len(v) for v in values]
    spread = [[max(0.0, m - min(v)) for m, v in zip(means, values)],  # max(0, .): a mean of equal floats can
              [max(0.0, max(v) - m) for m, v in zip(means, values)]]  # round a hair past them
    ax1.errorbar(ns, means, yerr=spread,
                 fmt=marker + "-", capsize=4, label=f"{name}: mean and min-max over the seeds")
if not GRADING:
    ax1.plot(list(yours), list(yours.values()), "r*", ms=14, label="your runs (seed 0), answer reward")
ax1.set_xscale("log", base=2)
ax1.set_xticks(ns, labels)
ax1.set_ylim(0, 1.02)
ax1.set_xlabel("worked solutions used for SFT (n)")
ax1.set_ylabel(f"reward on {ablation['settings']['eval_n']} held-out problems")
ax1.set_title("Data-size ablation, each size trained for many epochs")
ax1.legend(fontsize=8, loc="lower right")
for lab in labels:
    seed0 = by_label[lab][0]
    ax2.plot([c["step"] * ablation["settings"]["batch_size"] / seed0["n"] for c in seed0["curve"]],
             [c["answer_reward"] for c in seed0["curve"]], "o-", label=f"n = {lab}")
ax2.set_xscale("log")
ax2.set_xlabel("epochs over the n solutions")
ax2.set_ylabel("held-out answer reward")
ax2.set_title("The held-out curves (seed 0): 512 and 1024 still rising at the end")
ax2.legend(fontsize=8)
plt.tight_layout()
plt.show()
for lab in labels:
    v = [r["answer_reward"] for r in by_label[lab]]
    print(f"n = {lab:>5s}: answer reward {sum(v) / len(v):.3f} (seeds: {', '.join(f'{x:.3f}' for x in v)}), "
          f"{by_label[lab][0]['steps']} steps, {by_label[lab][0]['epochs']:.1f} epochs")

# %% [markdown]
# How to read it (the committed runs, printed above). The format is learnt from any size: format
# reward is 0.99 to 1.00 from 128 solutions on. The answer reward is where the sizes differ, and
# it climbs with every doubling: a mean of 0.485 with 128 solutions, 0.687 with 256, 0.787 with
# 512, 0.892 with 1024 and 0.957 with all 10,000. The spread between seeds (1 to 6 points) is
# smaller than the gap between neighbouring sizes (6 to 20 points). Read the curves before
# trusting the gaps: 128 and the full set have flattened (their last evaluations move by about
# the $\pm 2$ points of noise of 500 problems), 256 nearly, but 512 and 1024 still gained 1 to 5
# points in their last 50 steps (while the learning rate decays). Their figures are lower
# bounds, so the gaps they open over the smaller sets could only grow with a longer run. The
# small sets fit their solutions and then stop improving on new problems: 128 worked solutions
# teach the format and part of the arithmetic, and keep the rest of what the base model could do
# in its own format out of reach.
#
# Worked solutions are expensive (someone writes each one). Final answers are cheap. The rest of
# the course asks how far a model gets from questions with final answers only: expert iteration
# below, GRPO in notebooks 06 to 09.
#
# ## Part 5: expert iteration, against SFT on gold solutions
#
# Expert iteration (EI) needs no worked solutions: the model writes its own, and the reward
# decides which to learn from.
#
# ```
# for i = 1 .. n_iterations:
#     Q_i = the next questions (with final answers only)
#     sample G responses to each at temperature 1
#     keep every distinct response your evaluate grades correct
#     SFT the model, in place, on the kept (prompt, response) pairs
#     evaluate greedily on the held-out problems
# ```
#
# `course_lib.training.sft_trainer.expert_iteration` is this loop (read it there: about 30 lines),
# with your `evaluate` as `evaluate_fn` and your SFT functions for its SFT. It starts from
# `qwen2-sft`, the base model after the demo's SFT stage (committed with the course: 100 steps of
# 32 on the first 128 worked solutions at $10^{-3}$, a shorter run than Part 3's), and runs 3
# iterations of 128 new questions, 4 samples each, SFT for 2 epochs over each iteration's kept
# responses at a learning rate of $2 \cdot 10^{-4}$. The comparison is SFT from the same start
# on the gold worked solutions of the same 384 questions, with the same settings: what the
# worked solutions would have bought.

# %%
from course_lib.training.sft_trainer import expert_iteration

EI = dict(n_iterations=1 if GRADING else 3, questions_per_iteration=4 if GRADING else 128,
          samples_per_question=2 if GRADING else 4, max_tokens=EVAL_MAX_TOKENS,
          sft=dict(lr=2e-4, batch_size=8 if GRADING else 32, epochs=2, warmup_steps=0), seed=0)
questions = train_records[128 : 128 + EI["n_iterations"] * EI["questions_per_iteration"]]


def report(r):
    print(f"iteration {r['iteration']}: {r['correct_samples']:3d} of {r['samples']:3d} samples correct, "
          f"{r['kept']:3d} distinct kept, {r['sft_steps']:2d} SFT steps | held-out format {r['format_reward']:.3f} "
          f"answer {r['answer_reward']:.3f} ({r['seconds']:.0f} s)")


t0 = time.perf_counter()
ei_model, _ = load_tiny("qwen2-sft")
ei_history = expert_iteration(ei_model, tokenizer, questions, held_out, evaluate_fn=evaluate, on_iteration=report,
                              **EI, **SFT_FUNCTIONS)
gold_model, _ = load_tiny("qwen2-sft")
gold_run = train_sft(dict(EI["sft"], seed=EI["seed"]), model=gold_model, tokenizer=tokenizer, train_data=questions,
                     eval_data=[], progress=False, **SFT_FUNCTIONS)
gold = held_out_eval(gold_model)
print(f"SFT on the {len(questions)} gold solutions: {gold_run.steps} steps | held-out format {gold['format_reward']:.3f} "
      f"answer {gold['answer_reward']:.3f} | expert iteration and gold SFT together: {time.perf_counter() - t0:.0f} s")

# %%
ei_committed = json.loads((DATA_DIR / "experiments" / "expert_iteration.json").read_text())
print("committed:", ei_committed["command"])
fig, ax = plt.subplots(figsize=(8, 4))
colours = {2e-4: "tab:blue", 1e-3: "tab:red"}
for run in ei_committed["runs"]:
    curve = run["expert_iteration"]
    ax.plot([h["iteration"] for h in curve], [h["answer_reward"] for h in curve], "-", color=colours.get(run["lr"], "gray"),
            alpha=0.5, label=f"EI, lr {run['lr']:g} (committed seeds)" if run["seed"] == 0 else None)
    ax.plot([curve[-1]["iteration"] + 0.15], [run["gold_sft"]["answer_reward"]], "D", color=colours.get(run["lr"], "gray"),
            alpha=0.5, label=f"SFT on gold, lr {run['lr']:g}" if run["seed"] == 0 else None)
if not GRADING:
    ax.plot([h["iteration"] for h in ei_history], [h["answer_reward"] for h in ei_history], "k*-", ms=10, label="your EI run")
    ax.plot([ei_history[-1]["iteration"] + 0.3], [gold["answer_reward"]], "kD", ms=8, label="your SFT on gold")
ax.set_xlabel("EI iteration (0: qwen2-sft, the start)")
ax.set_ylabel(f"held-out answer reward ({ei_committed['settings']['eval_n']} problems)")
ax.set_xticks(range(ei_committed["settings"]["iterations"] + 1))
ax.set_title("Expert iteration on the model's own correct samples vs SFT on gold solutions")
ax.legend(fontsize=8)
plt.tight_layout()
plt.show()
for lr in sorted({r["lr"] for r in ei_committed["runs"]}):
    rs = [r for r in ei_committed["runs"] if r["lr"] == lr]
    print(f"lr {lr:g}: EI " + " | ".join(" -> ".join(f"{h['answer_reward']:.3f}" for h in r["expert_iteration"]) for r in rs)
          + "; gold SFT " + ", ".join(f"{r['gold_sft']['answer_reward']:.3f}" for r in rs))

# %% [markdown]
# What it shows (the committed runs, three seeds, printed above; your run is the black stars).
# At a learning rate of $2 \cdot 10^{-4}$, expert iteration improves the model at every
# iteration from questions with final answers only: held-out answer reward from 0.514 to 0.610,
# 0.638 and 0.610 after three iterations (+10 to +12 points). SFT on the gold worked solutions of
# the same 384 questions does better: 0.706 to 0.728. The log lines say why the model's own
# solutions teach less: they exist only for the questions it already solves when sampling (184 to
# 280 of the 512 samples of an iteration are correct, 119 to 190 distinct responses kept), so the
# questions it gets wrong teach nothing, and what is kept repeats what the model already says. At
# $10^{-3}$, where SFT on the gold solutions still gains (0.656 to 0.688), expert iteration makes
# the model *worse* at every iteration (0.514 down to 0.352 to 0.388). An explanation, not
# measured here: the kept responses already have a high likelihood, so their gradients are
# small, and AdamW's first steps (a fresh optimizer each iteration) move every weight by about
# the learning rate whatever the gradient's size, which turns a weak signal into a large step of
# mostly noise. The learning rate, the questions per iteration, the samples per question and the
# SFT epochs are the knobs of CS336's expert-iteration experiment, which also asks you to track
# the entropy of the responses: a model that learns from its own samples narrows its own
# distribution.
#
# ## Pitfall from practice: the model that never stops
#
# The training outputs end with `</answer>` and no end-of-text token, so the model never sees
# where a response *ends*. Evaluation hides this, because generation is cut at the stop string
# `</answer>` (the rollout engines here, and vLLM's `stop=["</answer>"]` in real runs). Without
# the stop string, here is what the fine-tuned model of Part 3 writes after `</answer>`, on a few
# held-out problems (the engine still stops at the end-of-text token or the budget):

# %%
SHOW = 2 if GRADING else 4
no_stop = evaluate(FastEngine(sft_model, tokenizer, batch_size=SHOW), [r["prompt"] for r in held_out[:SHOW]],
                   [r["ground_truth"] for r in held_out[:SHOW]], SamplingParams(temperature=0.0, max_tokens=EVAL_MAX_TOKENS, stop=()))
for rollout, category in zip(no_stop["rollouts"], no_stop["categories"]):
    after = rollout.text.split("</answer>", 1)[1] if "</answer>" in rollout.text else "(no </answer> at all)"
    print(f"{category:12s} {len(rollout.token_ids)} tokens, finish {rollout.finish_reason}; after </answer>: {after[:120]!r}")

# %% [markdown]
# Measured in student mode: all four responses run to the 100-token budget (finish `length`)
# instead of ending at their answer. Three repeat the answer and the closing tag over and over
# (` 86 </answer> 8 </answer> 86 </answer> ...`). The fourth writes one more calculation line
# after its correct answer, ` 5 = <<5*5=50>>50 candies. </think> <answer> 50 </answer> ...`, and
# is graded `answer_wrong`: `r1_zero_reward_fn` reads the *last* `<answer>` block, and with the
# stop string (Part 3's evaluation) the same response was `correct`. So every response costs
# the whole budget, and a right answer can be graded wrong. Either train with the end-of-text
# token appended to every output, or make the stop string part of the model's serving
# configuration and test it, as this cell does: what ends a response is part of the format.
#
# ## On a GPU: Qwen2.5-Math-1.5B on GSM8K
#
# The same trainer, the same functions, a real model and real data: the configuration
# `configs/sft_qwen2.5_math_1.5b_gsm8k.yaml` (bfloat16, flash-attention where installed, micro-batch
# 4 with gradient accumulation 16). The cell below runs one ablation point when a CUDA GPU is
# present, and is skipped on a CPU; the evaluation is your `evaluate`, with the trainer's own
# evaluation off. Not measured by the course: no figure of this notebook comes from a GPU run,
# and none says how the data sizes compare on GSM8K. From the command line, for each point of
# the ablation (with the course's reference functions):
#
# ```
# python -m course_lib.training sft --config configs/sft_qwen2.5_math_1.5b_gsm8k.yaml n_examples=1024 output_dir=runs/sft_qwen_1024
# ```

# %%
if torch.cuda.is_available() and not GRADING:
    from course_lib.paths import REPO_ROOT
    from course_lib.training.common import eval_examples_for
    from course_lib.training.config import load_config
    from course_lib.training.evaluation import evaluate as evaluate_records  # records -> your evaluate

    gpu_cfg = load_config("sft", REPO_ROOT / "configs" / "sft_qwen2.5_math_1.5b_gsm8k.yaml",
                          {"n_examples": 1024, "output_dir": str(REPO_ROOT / "runs" / "sft_qwen_1024")})
    gpu_run = train_sft(gpu_cfg, eval_data=[], **SFT_FUNCTIONS)
    gpu_eval = evaluate_records(gpu_run.model, gpu_run.tokenizer, eval_examples_for(gpu_cfg), max_tokens=gpu_cfg.eval_max_tokens,
                                batch_size=gpu_cfg.eval_batch_size, evaluate_fn=evaluate)
    print("Qwen2.5-Math-1.5B after SFT on 1024 GSM8K solutions:",
          {k: gpu_eval[k] for k in ("format_reward", "answer_reward", "counts")})
else:
    print("no CUDA GPU (or grading): the Qwen2.5-Math-1.5B + GSM8K run is skipped")

# %% [markdown]
# ## Summary
#
# - Evaluate before you train: `evaluate` grades one response per problem and sorts it into
#   format wrong / answer wrong / correct. The tiny base model is all `format_wrong` in the
#   r1_zero format and solves most problems in its own format: the zero was the format.
# - One SFT step: for each of $k$ micro-batches tokenize, get log-probs, loss and backward; then
#   clip the accumulated gradient, `optimizer.step()`, `scheduler.step()`, zero the gradients.
#   Your step matches the same step computed directly on the whole batch, parameter for
#   parameter, and the trainer ran with it and the functions printed at the top.
# - `log_generations` during training: the format is learnt within about 100 steps of 32, after
#   which the wrong answers are confident, well-formed and longer than the right ones.
# - Data buys answers, not format: each doubling of the worked solutions raised held-out answer
#   reward (0.485 with 128, 0.957 with 10,000, means over the seeds), while the format was learnt
#   from 128.
# - Expert iteration learns from final answers only and improves the model at a small learning
#   rate; gold worked solutions of the same questions buy more; too large a learning rate on the
#   model's own samples makes it worse.
# - Match training data and inference: what ends a response (stop string or end-of-text token) is
#   part of the format.

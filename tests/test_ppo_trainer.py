"""The PPO trainer: the critic, the batch it prepares, the loop it shares with GRPO, its checks."""

from __future__ import annotations

import copy

import pytest
import torch

from course_lib import compute_group_normalized_rewards, get_response_log_probs, tokenize_prompt_and_output
from course_lib.ppo import ppo_microbatch_train_step
from course_lib.rollouts import make_engine
from course_lib.training.checkpoint import STATE_FILE, latest_checkpoint
from course_lib.training.common import data_indices
from course_lib.training.config import build_config
from course_lib.training.critic import Critic
from course_lib.training.grpo_trainer import collect_rollouts, grpo_questions
from course_lib.training.ppo_trainer import train_ppo
from course_lib.training.ppo_update import PPOUpdate
from tests.helpers import largest_gap, problems, random_qwen2


def small_ppo(**kw):
    base = dict(n_grpo_steps=2, rollout_batch_size=8, group_size=4, train_batch_size=8,
                gradient_accumulation_steps=2, sampling_max_tokens=12, sampling_min_tokens=1, lr=1e-3,
                critic_lr=1e-2, eval_examples=0)
    return {**base, **kw}


def odd_length_reward(response, gold):  # varies inside groups, so every step has a signal
    r = float(len(response) % 2)
    return {"reward": r, "format_reward": r, "answer_reward": r}


def a_rollout_batch(tok, model, **kw):
    cfg = build_config("ppo", small_ppo(**kw))
    questions = grpo_questions(cfg, problems(8))
    batch_q = [questions[i] for i in data_indices(len(questions), cfg.seed, 0, cfg.rollout_batch_size // cfg.group_size)]
    return cfg, collect_rollouts(make_engine(cfg.engine, model, tok), model, tok, batch_q, cfg, 0,
                                 advantage_fn=compute_group_normalized_rewards, reward_fn=odd_length_reward,
                                 tokenize_fn=tokenize_prompt_and_output, log_probs_fn=get_response_log_probs)


def test_the_critic_starts_at_zero_and_lines_up_with_the_log_probs(tok):
    policy = random_qwen2(tok)
    critic = Critic(policy)
    ids = torch.randint(0, len(tok), (3, 9))
    values = critic(ids)
    assert values.shape == (3, 9) and torch.equal(values, torch.zeros(3, 9))
    # a copy: training the critic leaves the policy's backbone alone
    assert all(p.data_ptr() != q.data_ptr() for p, q in zip(critic.backbone.parameters(), policy.parameters()))
    with pytest.raises(ValueError, match="base_model"):
        Critic(torch.nn.Linear(2, 2))


def test_prepare_at_v_zero_and_lambda_one_gives_every_token_its_reward(tok):
    """With V = 0 and gamma = lam = 1, GAE is the Monte Carlo return: the response's reward on every token."""
    model = random_qwen2(tok)
    cfg, batch = a_rollout_batch(tok, model)
    update = PPOUpdate(Critic(model), gamma=1.0, lam=1.0, vf_coef=0.5, cliprange_value=0.2, critic_lr=1e-3,
                       weight_decay=0.0, betas=(0.9, 0.95), whiten_advantages=False, kl_coef=0.0)
    prepared = update.prepare(batch.tensors, micro=4)
    mask = batch.tensors["response_mask"].bool()
    expected = torch.where(mask, batch.tensors["raw_rewards"][:, None].expand_as(mask), 0.0)
    assert batch.tensors["raw_rewards"].std() > 0, "the reward should vary for this test to mean something"
    assert torch.equal(prepared["advantages"], expected)
    assert torch.equal(prepared["returns"], expected)
    # every row's old log-probs are scored (GRPO skips rows of advantage 0; PPO's are never all 0)
    assert batch.tensors["old_log_probs"][mask].ne(0).all()


def test_ppo_trains_actor_and_critic_with_the_injected_step_and_logs_the_critic(tok):
    start = random_qwen2(tok, seed=3)
    calls = []

    def step_fn(*a, **k):
        calls.append(k["vf_coef"])
        return ppo_microbatch_train_step(*a, **k)

    res = train_ppo(small_ppo(vf_coef=0.7), model=copy.deepcopy(start), tokenizer=tok, train_data=problems(16),
                    eval_data=[], progress=False, reward_fn=odd_length_reward, step_fn=step_fn)
    assert calls and set(calls) == {0.7}
    train = [m for m in res.metrics if m["kind"] == "train"]
    assert [m["step"] for m in train] == [1, 2]
    for key in ("loss", "grad_norm", "clip_fraction", "value_loss", "value_clip_fraction", "explained_variance",
                "value_mean", "advantage_var", "critic_grad_norm", "train_reward"):
        assert isinstance(train[-1][key], float), key
    assert train[0]["value_mean"] == 0.0 and train[1]["value_mean"] != 0.0  # V = 0 first, then it learned
    moved = max((p - q).abs().max().item() for p, q in zip(res.model.parameters(), start.parameters()))
    assert moved > 1e-4
    assert res.critic.head.weight.abs().max() > 0


def test_on_policy_the_first_minibatch_is_never_clipped(tok):
    """Old log-probs and the first forward of the update see the same weights: ratio 1, clip fraction 0."""
    seen = []

    def step_fn(*a, **k):
        loss, meta = ppo_microbatch_train_step(*a, **k)
        seen.append(float(meta["clip_fraction"]))
        return loss, meta

    train_ppo(small_ppo(n_grpo_steps=1, train_batch_size=8, gradient_accumulation_steps=2), model=random_qwen2(tok),
              tokenizer=tok, train_data=problems(8), eval_data=[], progress=False, reward_fn=odd_length_reward,
              step_fn=step_fn)
    assert seen == [0.0, 0.0]


@pytest.mark.parametrize("bad, message", [
    ({"loss_type": "reinforce_with_baseline"}, "loss_type must be 'grpo_clip'"),
    ({"kl_coef": 0.1, "kl_penalty": "k3"}, "kl_penalty must be 'k1_reward'"),
    ({"lam": 1.5}, "lam must be in"),
])
def test_settings_ppo_does_not_take_are_named(tok, bad, message):
    with pytest.raises(ValueError, match=message):
        train_ppo(small_ppo(**bad), model=random_qwen2(tok), tokenizer=tok, train_data=problems(8), eval_data=[],
                  progress=False)


def test_a_kl_penalty_goes_into_the_per_token_reward(tok):
    model = random_qwen2(tok)
    cfg, batch = a_rollout_batch(tok, model)
    tensors = dict(batch.tensors)
    tensors["ref_log_probs"] = tensors["old_log_probs"] - 0.25 * tensors["response_mask"]  # k1 = 0.25 per token
    kw = dict(gamma=1.0, lam=1.0, vf_coef=0.5, cliprange_value=0.2, critic_lr=1e-3, weight_decay=0.0,
              betas=(0.9, 0.95), whiten_advantages=False)
    plain = PPOUpdate(Critic(model), kl_coef=0.0, **kw).prepare(tensors, micro=4)
    penalised = PPOUpdate(Critic(model), kl_coef=0.1, **kw).prepare(tensors, micro=4)
    mask = tensors["response_mask"].bool()
    # with lam = gamma = 1 and V = 0 a token's return is the reward less 0.025 for it and every token after it
    to_go = mask.flip(-1).cumsum(-1).flip(-1).float()
    torch.testing.assert_close(penalised["returns"], torch.where(mask, plain["returns"] - 0.025 * to_go, 0.0))


class CountingEngine:
    """A real engine, counting the trainer's calls to it."""

    def __init__(self, engine):
        self.engine, self.calls = engine, []

    def generate(self, prompts, params):
        self.calls.append("generate")
        return self.engine.generate(prompts, params)

    def load_weights(self, model):
        self.calls.append("load_weights")
        self.engine.load_weights(model)


def test_an_engine_object_reaches_the_loop_and_an_engine_name_is_a_setting(tok):
    """`engine` is a config field (a name) and train_grpo's keyword (an object): an object must not become the
    config's engine name (it did: 'unknown rollout engine <FastEngine object>')."""
    model = random_qwen2(tok)
    engine = CountingEngine(make_engine("fast", model, tok))
    train_ppo(small_ppo(n_grpo_steps=1), model=model, tokenizer=tok, train_data=problems(8), eval_data=[],
              progress=False, reward_fn=odd_length_reward, engine=engine)
    assert engine.calls == ["load_weights", "generate", "load_weights"]
    with pytest.raises(ValueError, match="unknown rollout engine 'nope'"):
        train_ppo(small_ppo(n_grpo_steps=1), model=model, tokenizer=tok, train_data=problems(8), eval_data=[],
                  progress=False, engine="nope")


def test_gradient_checkpointing_covers_the_critic(tok):
    """The critic's backbone, copied before the policy's checkpointing is switched on, gets its own."""
    model = random_qwen2(tok)
    critic = Critic(model)
    seen = []
    train_ppo(small_ppo(n_grpo_steps=1, gradient_checkpointing=True), model=model, tokenizer=tok, critic=critic,
              train_data=problems(8), eval_data=[], progress=False, reward_fn=odd_length_reward,
              on_step=lambda record: seen.append((model.is_gradient_checkpointing,
                                                  critic.backbone.is_gradient_checkpointing)))
    assert seen == [(True, True)]


def test_fused_adamw_drives_both_optimizers_and_agrees_to_rounding(tok, tmp_path):
    """`fused_adamw` (the GPU configs') builds the actor's and the critic's AdamW fused, as their checkpoint says;
    the run it trains is the default kernel's up to rounding (the critic starts the same: its head is zero)."""
    start = random_qwen2(tok)
    trained = {}
    for fused in (False, True):
        critic = Critic(copy.deepcopy(start))
        res = train_ppo(small_ppo(n_grpo_steps=1, fused_adamw=fused, output_dir=str(tmp_path / str(fused))),
                        model=copy.deepcopy(start), tokenizer=tok, critic=critic, train_data=problems(8),
                        eval_data=[], progress=False, reward_fn=odd_length_reward)
        trained[fused] = (res.model, critic)
        state = torch.load(latest_checkpoint(tmp_path / str(fused)) / STATE_FILE, weights_only=False)
        critic_state = state["extra"]["extra_state"]["critic_optimizer"]
        assert [g["fused"] for g in (state["optimizer"]["param_groups"][0], critic_state["param_groups"][0])] == \
            [fused or None] * 2
    for plain, fused, begin in zip(trained[False], trained[True], (start, Critic(start))):
        moved, gap = largest_gap(plain, begin), largest_gap(plain, fused)
        assert moved > 1e-3 and gap < 1e-5, (moved, gap)

"""Thinking modes in training (course_lib.training.thinking, notebook 13): chat data in both modes,
the loss mask the SFT trainer sees, the rewards of either mode and the prefilled-<think> bug run in
the real GRPO trainer, the thinking switch of a real Jinja template, and bad input."""

from __future__ import annotations

import copy
import json

import pytest
import torch

from course_lib import assistant_loss_mask, load_problems, load_tiny, tokenize_prompt_and_output
from course_lib.gsm8k import DataFormatError
from course_lib.rollouts import make_engine
from course_lib.thinking import EMPTY_THINK
from course_lib.training.grpo_trainer import train_grpo
from course_lib.training.thinking import (RecordingEngine, apply_template, by_mode, chat_reward, chat_reward_fn,
                                          chat_target, conversations, followed, load_conversations,
                                          prefilled_reward_fn, rl_questions, sft_records, starts_with_think_reward_fn)
from course_lib.world.tokenizer_build import QWEN3_STYLE_TEMPLATE, with_chat_template

PROBLEMS = load_problems("arith", "train")[:40]
RUN = dict(lr=1e-4, rollout_batch_size=16, group_size=4, train_batch_size=16, gradient_accumulation_steps=2,
           loss_type="grpo_clip", sampling_max_tokens=96, sampling_min_tokens=1, eval_examples=0, seed=0)


@pytest.fixture(scope="module")
def think():
    return load_tiny("qwen2-think")


def test_targets_hold_the_worked_lines_in_thinking_mode_and_the_empty_block_in_direct_mode():
    p = PROBLEMS[0]
    thought, direct = chat_target(p, thinking=True), chat_target(p, thinking=False)
    answer = p["answer"].split("####")[-1].strip()
    assert thought.startswith("<think>\n") and p["answer"].split("\n")[0] in thought
    assert thought.endswith(f"</think>\n\n<answer> {answer} </answer>") and "####" not in thought
    assert direct == f"{EMPTY_THINK}<answer> {answer} </answer>"


@pytest.mark.parametrize("keep", [0.0, 0.3, 1.0])
def test_sft_records_tokenize_to_the_graded_loss_mask(think, keep):
    """The trainer tokenizes prompt and output separately: the same ids and mask as assistant_loss_mask
    of the conversation in the record's mode, for kept and removed empty blocks alike."""
    _, tok = think
    convs = conversations(PROBLEMS, thinking_share=0.5, seed=3)
    records = sft_records(convs, keep_prob=keep, seed=4)
    direct = [c for c in convs if not c["thinking"]]
    with_block = [r for r, c in zip(records, convs) if not c["thinking"] and not r["thinking"]]
    assert len(with_block) == {0.0: 0, 1.0: len(direct)}.get(keep, len(with_block))
    if keep == 0.3:
        assert 0 < len(with_block) < len(direct)
    for conv, record in zip(convs, records):
        reply = conv["messages"][-1]["content"]
        if not conv["thinking"] and record["thinking"]:  # the block was removed: the reply the model now sees
            reply = reply[len(EMPTY_THINK):]
        graded = assistant_loss_mask(tok, [conv["messages"][0], {"role": "assistant", "content": reply}],
                                     template="qwen3", thinking=record["thinking"])
        enc = tokenize_prompt_and_output([record["prompt"]], [record["output"]], tok)
        full = torch.cat([enc["input_ids"][0], enc["labels"][0, -1:]])
        assert torch.equal(full, graded["input_ids"])
        assert torch.equal(enc["response_mask"][0], graded["loss_mask"][1:])


def test_conversations_on_disk_are_checked_line_by_line(tmp_path):
    assert len(load_conversations()) == 2000
    good = json.dumps(conversations(PROBLEMS[:1], 0.5, seed=0)[0])
    for bad, says in (({"messages": "hi", "ground_truth": "1", "thinking": True}, "'messages'"),
                      ({"messages": [{"role": "user"}], "ground_truth": "1", "thinking": True}, "'messages'"),
                      ({"messages": [{"role": "user", "content": "q"}], "ground_truth": "1", "thinking": "yes"},
                       "'thinking'")):
        path = tmp_path / "c.jsonl"
        path.write_text(good + "\n\n" + json.dumps(bad) + "\n")
        with pytest.raises(DataFormatError, match=rf"c.jsonl:3: {says}"):
            load_conversations(path)


def test_rl_questions_draw_the_mode_per_prompt_and_refuse_a_ratio_outside_0_1():
    half = rl_questions(PROBLEMS, thinking_ratio=0.5, seed=0)
    assert 5 < sum(q["thinking"] for q in half) < 35
    for q in half:
        assert q["prompt"].endswith(EMPTY_THINK) != q["thinking"]
    assert all(q["prompt"].endswith("<think>\n") for q in rl_questions(PROBLEMS, 1.0, seed=0, template="course"))
    for ratio in (-0.1, 1.5):
        with pytest.raises(ValueError, match="thinking_ratio"):
            rl_questions(PROBLEMS, thinking_ratio=ratio, seed=0)


def test_chat_reward_reads_both_modes_and_the_bug_reads_none_under_a_prefilled_prompt():
    thought = "<think>\n2 + 3 = 5\n</think>\n\n<answer> 5 </answer>"
    assert chat_reward_fn(thought, "5")["reward"] == 1.0
    assert chat_reward_fn("<answer> 5 </answer>", "5")["reward"] == 1.0  # direct
    assert chat_reward_fn("<answer> 6 </answer>", "5") == {"format_reward": 1.0, "answer_reward": 0.0, "reward": 0.0}
    assert chat_reward_fn("<think>\n2 + 3 = 5\n<answer> 5 </answer>", "5")["format_reward"] == 0.0  # never closed
    prefilled = "2 + 3 = 5\n</think>\n\n<answer> 5 </answer>"
    assert prefilled_reward_fn(prefilled, "5")["reward"] == 1.0
    assert starts_with_think_reward_fn(prefilled, "5")["reward"] == 0.0
    # read as generated it opens no block: a direct reply, its answer block graded (accuracy whatever the mode
    # taken), though not a reply in the direct mode (text before the answer)
    assert chat_reward(prefilled, "5", prefilled=False)["reward"] == 1.0
    assert followed(thought, thinking=True, prefilled=False) and not followed(thought, thinking=False, prefilled=False)
    assert followed("<answer> 5 </answer>", thinking=False, prefilled=False)
    assert not followed("2 + 3 = 5\n</think>\n\n<answer> 5 </answer>", thinking=False, prefilled=False)


def test_a_template_without_a_thinking_switch_is_refused(think):
    _, tok = think
    chat = [{"role": "user", "content": "What is 2 + 3?"}]
    assert apply_template(tok, chat, thinking=False).endswith(EMPTY_THINK)
    assert apply_template(with_chat_template(tok, QWEN3_STYLE_TEMPLATE), chat, thinking=True).endswith("assistant\n")
    plain = with_chat_template(tok, "{% for m in messages %}{{ m['content'] }}{% endfor %}")
    with pytest.raises(ValueError, match="no thinking switch"):
        apply_template(plain, chat, thinking=False)
    assert apply_template(plain, chat) == "What is 2 + 3?"  # no mode asked: nothing to refuse


def test_the_prefilled_reward_bug_leaves_the_weights_exactly_unchanged_and_the_fix_moves_them(think):
    """Under the course template's prefilled <think>, a format check that wants the completion to start
    with <think> gives every group equal rewards: advantages 0 and an update of exactly 0 (the weights
    are bit-identical after the step). The prefilled-aware reward gives signal and moves them."""
    start, tok = think
    questions = rl_questions(PROBLEMS[:4], thinking_ratio=1.0, seed=0, template="course")
    moved = {}
    for name, fn in (("bug", starts_with_think_reward_fn), ("fix", prefilled_reward_fn)):
        model = copy.deepcopy(start)
        res = train_grpo({**RUN, "n_grpo_steps": 1}, model=model, tokenizer=tok, train_data=questions, eval_data=[],
                         reward_fn=fn, progress=False)
        record = [r for r in res.metrics if r["kind"] == "train"][0]
        moved[name] = max((p - q).abs().max().item() for p, q in zip(model.parameters(), start.parameters()))
        if name == "bug":
            assert record["zero_std_group_fraction"] == 1.0 and record["train_reward"] == 0.0
    assert moved["bug"] == 0.0
    assert moved["fix"] > 0.0


def test_a_grpo_run_with_both_modes_is_read_per_mode(think):
    """thinking_ratio 0.5 in the real trainer: the recording engine holds each step's rollouts, and
    their rewards and lengths split by the prompt's mode (thinking replies are the long ones)."""
    start, tok = think
    model = copy.deepcopy(start)
    questions = rl_questions(PROBLEMS[:16], thinking_ratio=0.5, seed=1)
    truth = {q["prompt"]: q["ground_truth"] for q in questions}
    engine = RecordingEngine(make_engine("fast", model, tok), keep_all=False)
    seen = []
    train_grpo({**RUN, "n_grpo_steps": 2}, model=model, tokenizer=tok, train_data=questions, eval_data=[],
               reward_fn=chat_reward_fn, engine=engine, progress=False,
               on_step=lambda r: seen.append(by_mode(engine.calls[-1], lambda x: chat_reward_fn(x.text, truth[x.prompt])["reward"]))
               if r.get("kind") == "train" else None)
    assert len(seen) == 2 and len(engine.calls) == 1 and len(engine.calls[0]) == RUN["rollout_batch_size"]
    both = [s for s in seen if set(s) == {"thinking", "direct"}]
    assert both, seen
    for split in both:
        assert split["thinking"]["tokens"] > 3 * split["direct"]["tokens"]
        assert split["thinking"]["n"] + split["direct"]["n"] == RUN["rollout_batch_size"]


def test_the_helpers_call_the_graded_functions_they_are_given():
    """A notebook passes the student's functions (in a kit the references are stubs): each helper calls
    those, never the references behind them."""
    from course_lib import thinking as ref
    from course_lib.training.thinking import Graded

    calls = []

    def counted(name):
        fn = getattr(ref, {"render": "render_conversation", "remove": "remove_empty_think", "flags": "thinking_flags",
                           "split": "split_reasoning", "format_reward": "thinking_format_reward"}[name])
        return lambda *a, **k: calls.append(name) or fn(*a, **k)

    fns = Graded(**{name: counted(name) for name in ("render", "remove", "flags", "split", "format_reward")})
    convs = conversations(PROBLEMS[:4], 0.5, seed=0, fns=fns)
    sft_records(convs, keep_prob=0.5, seed=0, fns=fns)
    rl_questions(PROBLEMS[:2], 0.5, seed=0, fns=fns)
    chat_reward_fn("<think>\n1\n</think>\n\n<answer> 1 </answer>", "1", fns=fns)
    followed("<answer> 1 </answer>", thinking=True, prefilled=False, fns=fns)
    assert set(calls) == {"render", "remove", "flags", "split", "format_reward"}

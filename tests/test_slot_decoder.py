"""SlotDecoder (a KV cache per slot on the fast engine's network) under both batchers of notebook 14:
every request gets exactly the tokens FastEngine's greedy decoding of it alone gives, and continuous
batching keeps the slots busier than static batching on requests of mixed lengths."""

from __future__ import annotations

import pytest
import torch

from course_lib import continuous_batch_generate, static_batch_generate
from course_lib.rollouts import FastEngine, SamplingParams
from course_lib.rollouts.slot_decoder import SlotDecoder

N = 24
MAX_TOKENS = [8 + (7 * i) % 57 for i in range(N)]  # 8 .. 64, mixed along the list


@pytest.fixture(scope="module")
def world():
    from course_lib import gsm8k_to_r1_zero, load_problems
    from course_lib.world.tiny_models import load_tiny

    model, tok = load_tiny("qwen2-sft")
    prompts = [gsm8k_to_r1_zero(p)["prompt"] for p in load_problems("arith", "test")[:N]]
    ids = tok(prompts, add_special_tokens=False)["input_ids"]
    return model.eval(), tok, prompts, ids


def alone(world, prompt: str, max_tokens: int) -> list[int]:
    """FastEngine's greedy tokens for one prompt decoded by itself, with its eos when it ended on one."""
    model, tok, _, _ = world
    rollout = FastEngine(model, tok, batch_size=1).generate(
        [prompt], SamplingParams(temperature=0, max_tokens=max_tokens, n=1, stop=()))[0]
    return rollout.token_ids + ([tok.eos_token_id] if rollout.finish_reason == "stop" else [])


@pytest.fixture(scope="module")
def reference(world):
    return [alone(world, p, m) for p, m in zip(world[2], MAX_TOKENS)]


@pytest.mark.slow
@pytest.mark.parametrize("batch_size", [8, 5])
def test_both_batchers_are_token_identical_to_greedy_alone(world, reference, batch_size):
    model, tok, _, ids = world
    requests = [{"prompt_ids": x, "max_tokens": m} for x, m in zip(ids, MAX_TOKENS)]
    reports = {}
    for fn in (static_batch_generate, continuous_batch_generate):
        reports[fn.__name__] = got = fn(SlotDecoder(model, batch_size, max_len=256), requests, batch_size, tok.eos_token_id)
        differ = [i for i in range(N) if got["outputs"][i] != reference[i]]
        assert not differ, f"{fn.__name__}: requests {differ} differ from greedy decoding alone"
    static, continuous = reports["static_batch_generate"], reports["continuous_batch_generate"]
    assert continuous["utilization"] > static["utilization"]
    assert continuous["steps"] < static["steps"]


@pytest.mark.slow
def test_requests_that_end_on_a_token_of_their_own(world):
    """The tiny SFT model never writes its eos, so here a request ends at its first `</answer>`
    token instead (eos_id = that token): lengths set by the responses themselves. The reference is
    FastEngine's greedy decoding alone, cut after that token."""
    model, tok, prompts, ids = world
    end = tok.convert_tokens_to_ids("</answer>")
    full = [alone(world, p, 64) for p in prompts[:12]]
    expected = [x[: x.index(end) + 1] if end in x else x for x in full]
    assert len({len(x) for x in expected}) > 3 and any(end in x for x in expected)
    requests = [{"prompt_ids": x, "max_tokens": 64} for x in ids[:12]]
    for fn in (static_batch_generate, continuous_batch_generate):
        got = fn(SlotDecoder(model, 4, max_len=256), requests, 4, end)
        assert got["outputs"] == expected, fn.__name__


def test_prefill_resets_a_slot_and_bad_use_raises(world):
    model, tok, _, ids = world
    dec = SlotDecoder(model, 2, max_len=160)
    first = dec.prefill(0, ids[0])
    second = dec.decode([0], [first])
    dec.prefill(1, ids[1])
    dec.decode([1, 0], [7, second[0]])  # the slots in any order, each its own token
    assert dec.prefill(0, ids[0]) == first  # a used slot prefilled again is a fresh one
    assert dec.decode([0], [first]) == second
    with pytest.raises(ValueError, match="never prefilled"):
        SlotDecoder(model, 2, max_len=160).decode([1], [5])
    with pytest.raises(ValueError, match="prompt_ids"):
        dec.prefill(1, list(range(200)))
    with pytest.raises(ValueError, match="distinct"):
        dec.decode([0, 0], [1, 2])
    assert isinstance(first, int) and torch.is_tensor(dec.cache[0][0])

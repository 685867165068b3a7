"""The rollout interface and the Hugging Face engine: padding, grouping, stop strings, seeds."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from course_lib.rollouts import HFEngine, Rollout, RolloutEngine, SamplingParams, make_engine
from tests.helpers import random_qwen2


@pytest.fixture(scope="module")
def model(tok):
    return random_qwen2(tok, seed=1)


class Bigram(torch.nn.Module):
    """A scripted 'model': the next token is table[last token] (everything else -inf-ish)."""

    def __init__(self, vocab: int, table: dict[int, int], default: int):
        super().__init__()
        self.vocab, self.table, self.default = vocab, table, default
        self.dummy = torch.nn.Parameter(torch.zeros(1))

    def forward(self, input_ids, attention_mask=None, position_ids=None, past_key_values=None, use_cache=False):
        b, t = input_ids.shape
        logits = torch.full((b, t, self.vocab), -10.0)
        for i in range(b):
            for j in range(t):
                logits[i, j, self.table.get(int(input_ids[i, j]), self.default)] = 10.0
        return SimpleNamespace(logits=logits, past_key_values=None)


def test_engine_satisfies_protocol(model, tok):
    engine = make_engine("hf", model, tok)
    assert isinstance(engine, RolloutEngine)
    with pytest.raises(ValueError, match="unknown rollout engine"):
        make_engine("nope", model, tok)


def test_greedy_left_padding_matches_unpadded_generate(model, tok):
    """Batched, left-padded greedy decoding equals Hugging Face `generate` on each prompt alone."""
    prompts = ["Tom has 3 apples.", "A conversation between User and Assistant. User: 2 + 2?", "x"]
    engine = HFEngine(model, tok, batch_size=8)
    out = engine.generate(prompts, SamplingParams(temperature=0, max_tokens=10, stop=()))
    for prompt, r in zip(prompts, out):
        ids = tok(prompt, return_tensors="pt", add_special_tokens=False).input_ids
        ref = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=10, do_sample=False,
                             eos_token_id=None, pad_token_id=tok.pad_token_id)
        assert r.token_ids == ref[0, ids.shape[1]:].tolist(), "left padding changed a row's greedy tokens"
        assert r.finish_reason == "length" and r.prompt == prompt
        assert r.text == tok.decode(r.token_ids)


def test_groups_are_consecutive_and_seed_reproducible(model, tok):
    prompts = ["first prompt", "second one, longer than the first"]
    engine = HFEngine(model, tok, batch_size=3)  # batches cut across groups on purpose
    params = SamplingParams(temperature=1.0, max_tokens=6, stop=(), n=4, seed=123)
    a = engine.generate(prompts, params)
    assert len(a) == 8 and all(isinstance(r, Rollout) for r in a)
    assert [r.prompt for r in a] == [prompts[0]] * 4 + [prompts[1]] * 4
    b = engine.generate(prompts, params)
    assert [r.token_ids for r in a] == [r.token_ids for r in b]
    assert len({tuple(r.token_ids) for r in a}) > 1, "samples of a group should differ at temperature 1"


def test_stop_string_is_kept_and_nothing_after(tok):
    vocab = len(tok)
    seven = tok.convert_tokens_to_ids("7")
    close = tok.convert_tokens_to_ids("</answer>")
    start = tok("go", add_special_tokens=False).input_ids[-1]
    after = tok.convert_tokens_to_ids("<think>")
    fake = Bigram(vocab, {start: seven, seven: close, close: after}, default=after)
    r = HFEngine(fake, tok).generate(["go"], SamplingParams(temperature=0, max_tokens=10))[0]
    assert r.text == "7</answer>" and r.finish_reason == "stop"
    assert r.token_ids == [seven, close]
    # without the stop string it runs on to max_tokens
    r = HFEngine(fake, tok).generate(["go"], SamplingParams(temperature=0, max_tokens=4, stop=()))[0]
    assert r.finish_reason == "length" and len(r.token_ids) == 4


def test_eos_stops_and_min_tokens_delays_it(tok):
    vocab = len(tok)
    start = tok("go", add_special_tokens=False).input_ids[-1]
    seven = tok.convert_tokens_to_ids("7")
    fake = Bigram(vocab, {start: tok.eos_token_id}, default=seven)
    r = HFEngine(fake, tok).generate(["go"], SamplingParams(temperature=0, max_tokens=5))[0]
    assert r.text == "" and r.token_ids == [] and r.finish_reason == "stop"
    r = HFEngine(fake, tok).generate(["go"], SamplingParams(temperature=0, max_tokens=5, min_tokens=2))[0]
    assert len(r.token_ids) >= 2 and tok.eos_token_id not in r.token_ids


def test_sampling_params_are_checked():
    with pytest.raises(ValueError):
        SamplingParams(temperature=-1)
    with pytest.raises(ValueError):
        SamplingParams(top_p=0)
    with pytest.raises(ValueError):
        SamplingParams(n=0)


def test_an_engine_refuses_the_settings_of_another_by_name(model, tok):
    """A GPU config's vLLM `engine_kwargs` with `engine=fast` or `engine=hf` was a TypeError from the engine's
    constructor; it names the setting and what to do."""
    for name in ("fast", "hf"):
        with pytest.raises(ValueError, match=r"engine '(fast|hf)' takes no gpu_memory_utilization .*engine_kwargs=\{\}"):
            make_engine(name, model, tok, gpu_memory_utilization=0.3)
        assert make_engine(name, model, tok, batch_size=3).batch_size == 3

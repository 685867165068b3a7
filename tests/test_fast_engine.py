"""The fast rollout engine: greedy parity with the HF engine, its sampling distribution (chi-square
against the model's own softmax), seeds, stop strings, weight sharing, and the architecture fallback."""

from __future__ import annotations

import math
from collections import Counter

import pytest
import torch

from course_lib.rollouts import FastEngine, HFEngine, SamplingParams, UnsupportedModelError, make_engine
from tests.helpers import random_qwen2


@pytest.fixture(scope="module")
def sft():
    from course_lib.world.tiny_models import load_tiny

    model, tok = load_tiny("qwen2-sft")
    return model.eval(), tok


@pytest.fixture(scope="module")
def prompts():
    from course_lib import load_problems
    from course_lib.gsm8k import as_r1_zero

    return [r["prompt"] for r in as_r1_zero(load_problems("arith", "test")[:300])]


def same(a, b) -> list[int]:
    """Indices where two lists of rollouts differ in ids, text or finish reason."""
    return [i for i, (x, y) in enumerate(zip(a, b))
            if (x.token_ids, x.text, x.finish_reason, x.prompt) != (y.token_ids, y.text, y.finish_reason, y.prompt)]


@pytest.mark.slow
def test_greedy_is_token_identical_to_hf_engine_on_300_prompts(sft, prompts):
    model, tok = sft
    params = SamplingParams(temperature=0, max_tokens=100)
    hf = HFEngine(model, tok, batch_size=100).generate(prompts, params)
    fast = FastEngine(model, tok, batch_size=128).generate(prompts, params)  # other batch cuts on purpose
    assert len(fast) == 300
    assert same(hf, fast) == [], "greedy outputs differ from the HF engine's"
    assert sum(r.finish_reason == "stop" for r in fast) > 250, "the check should cover rows that stop"


@pytest.mark.parametrize("stop,min_tokens", [((), 0), ((), 30), (("</answer>",), 4), ((" + ", "= 1"), 0),
                                             (("nswer> ", "\u00e9"), 2)])
def test_greedy_parity_with_stop_strings_eos_and_min_tokens(sft, prompts, stop, min_tokens):
    """Multi-token stop strings (checked only after tokens that can complete them), a stop string
    ending in a space (checked after every token), a two-token UTF-8 character, the end-of-text
    token with and without min_tokens: the same cuts as the HF engine, which decodes every row."""
    model, tok = sft
    params = SamplingParams(temperature=0, max_tokens=80, stop=stop, min_tokens=min_tokens)
    hf = HFEngine(model, tok).generate(prompts[:40], params)
    fast = FastEngine(model, tok).generate(prompts[:40], params)
    assert same(hf, fast) == []
    for r in fast:
        if r.finish_reason == "stop" and stop:
            assert any(r.text.endswith(s) for s in stop) or not any(s in r.text for s in stop)


def test_stop_string_hits_are_real(sft, prompts):
    model, tok = sft
    params = SamplingParams(temperature=0, max_tokens=80, stop=(" + ", "= 1"))
    out = FastEngine(model, tok).generate(prompts[:40], params)
    stopped = [r for r in out if r.finish_reason == "stop"]
    assert len(stopped) > 10, "the multi-token stop strings should fire on this data"
    for r in stopped:
        assert r.text.endswith(" + ") or r.text.endswith("= 1"), r.text
        assert r.text == tok.decode(r.token_ids)  # the last id completed the stop string
        assert not any(s in tok.decode(r.token_ids[:-1]) for s in (" + ", "= 1"))


def test_random_model_left_padding_and_batch_cuts(tok):
    model = random_qwen2(tok, seed=3)
    ps = ["Tom has 3 apples.", "A conversation between User and Assistant. User: 2 + 2?", "x", "y z"] * 3
    params = SamplingParams(temperature=0, max_tokens=12, stop=())
    ref = HFEngine(model, tok, batch_size=64).generate(ps, params)
    for bs in (1, 5, 64):
        assert same(ref, FastEngine(model, tok, batch_size=bs).generate(ps, params)) == []


def test_seeds_groups_and_shared_weights(sft, prompts):
    model, tok = sft
    engine = FastEngine(model, tok, batch_size=7)  # batches cut across groups on purpose
    params = SamplingParams(temperature=1.0, max_tokens=40, n=4, seed=11)
    a = engine.generate(prompts[:3], params)
    assert [r.prompt for r in a] == [p for p in prompts[:3] for _ in range(4)]
    assert same(a, engine.generate(prompts[:3], params)) == [], "the same seed must give the same samples"
    other = engine.generate(prompts[:3], SamplingParams(temperature=1.0, max_tokens=40, n=4, seed=12))
    assert same(a, other), "another seed must give other samples"
    assert len({tuple(r.token_ids) for r in a}) > 3


def test_engine_reads_the_policy_weights_at_every_call(tok):
    model = random_qwen2(tok, seed=4)
    engine = make_engine("fast", model, tok)
    assert isinstance(engine, FastEngine)
    params = SamplingParams(temperature=0, max_tokens=10, stop=())
    before = engine.generate(["a b c", "d e"], params)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))  # an optimizer step, in place
    after = engine.generate(["a b c", "d e"], params)
    assert same(before, after), "perturbed weights changed no output: the engine copied the weights"
    assert same(after, HFEngine(model, tok).generate(["a b c", "d e"], params)) == []
    other = random_qwen2(tok, seed=5)
    engine.load_weights(other)  # another module: its weights are copied in
    assert same(engine.generate(["a b c", "d e"], params), HFEngine(other, tok).generate(["a b c", "d e"], params)) == []


def test_other_architectures_fall_back_to_hf_by_name(tok, capsys):
    from course_lib.world.tiny_models import load_tiny

    gemma, gtok = load_tiny("gemma2-softcap")
    with pytest.raises(UnsupportedModelError, match="gemma2"):
        FastEngine(gemma, gtok)
    engine = make_engine("fast", gemma, gtok)
    assert isinstance(engine, HFEngine)
    assert "gemma2" in capsys.readouterr().err
    with pytest.raises(ValueError, match="unknown rollout engine"):
        make_engine("nope", gemma, gtok)


# ---------------------------------------------------------------------------------------------
# the sampling distribution


def chi_square_p(observed: list[int], expected: list[float]) -> float:
    """Upper-tail p-value of Pearson's chi-square (Wilson-Hilferty normal approximation).

    Bins with an expected count under 5 are lumped into one."""
    obs, exp, rest_o, rest_e = [], [], 0, 0.0
    for o, e in zip(observed, expected):
        if e >= 5:
            obs.append(o)
            exp.append(e)
        else:
            rest_o, rest_e = rest_o + o, rest_e + e
    if rest_e > 0:
        obs.append(rest_o)
        exp.append(rest_e)
    stat = sum((o - e) ** 2 / e for o, e in zip(obs, exp))
    k = len(obs) - 1
    z = ((stat / k) ** (1 / 3) - (1 - 2 / (9 * k))) / math.sqrt(2 / (9 * k))
    return 0.5 * math.erfc(z / math.sqrt(2))


def next_token_probs(model, tok, prompt: str, prefix: list[int], temperature: float, top_p: float = 1.0) -> torch.Tensor:
    ids = tok(prompt, add_special_tokens=False).input_ids + prefix
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, -1].double() / temperature
    probs = logits.softmax(-1)
    if top_p < 1:
        sorted_p, order = probs.sort(descending=True)
        drop = sorted_p.cumsum(-1) - sorted_p > top_p
        probs = probs.clone()
        probs[order[drop]] = 0
        probs = probs / probs.sum()
    return probs


@pytest.mark.slow
@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (1.6, 1.0), (1.6, 0.9)])
def test_sampled_tokens_follow_the_models_distribution(sft, prompts, temperature, top_p):
    """20,000 samples of three tokens from one prompt: the first token's frequencies, and the
    second and third tokens' frequencies after each frequent prefix (which go through the KV
    cache), against softmax(logits / T) of the model itself (top-p cut where set). A sampler with
    the wrong temperature must fail the same test, so the test can tell."""
    model, tok = sft
    prompt, n = prompts[0], 20_000
    out = FastEngine(model, tok, batch_size=n).generate(
        [prompt], SamplingParams(temperature=temperature, top_p=top_p, max_tokens=3, stop=(), n=n, seed=2024))
    # a sample that ended on the end-of-text token drew that token at its last position
    seqs = [tuple(r.token_ids) + ((tok.eos_token_id,) if r.finish_reason == "stop" else ()) for r in out]
    assert all(len(s) == 3 or s[-1] == tok.eos_token_id for s in seqs)
    vocab = model.config.vocab_size
    positions = set()
    for pos in range(3):
        prefixes = Counter(s[:pos] for s in seqs if len(s) > pos)
        for prefix, count in prefixes.items():
            if count < 1000:
                continue
            counts = Counter(s[pos] for s in seqs if len(s) > pos and s[:pos] == prefix)
            observed = [counts.get(v, 0) for v in range(vocab)]
            probs = next_token_probs(model, tok, prompt, list(prefix), temperature, top_p)
            if probs.max() > 0.995:
                continue  # nearly deterministic: nothing to test
            assert all(observed[v] == 0 for v in range(vocab) if probs[v] == 0), "a token outside the top-p nucleus"
            p = chi_square_p(observed, (probs * count).tolist())
            assert p > 1e-4, f"position {pos} after {prefix}: frequencies differ from the model's (p={p:.2e})"
            wrong = next_token_probs(model, tok, prompt, list(prefix), temperature * 0.8, top_p)
            assert chi_square_p(observed, (wrong * count).tolist()) < 1e-4, "the test cannot tell a wrong temperature"
            positions.add(pos)
            print(f"position {pos} after {prefix}: {count} samples, p = {p:.3f}")
    assert 0 in positions, "the first token was not tested"
    if top_p == 1.0 and temperature > 1:
        assert positions & {1, 2}, "no later position (read through the KV cache) was tested"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_greedy_parity_on_gpu(sft, prompts):
    model, tok = sft
    model = model.to("cuda")
    try:
        params = SamplingParams(temperature=0, max_tokens=100)
        hf = HFEngine(model, tok, batch_size=128).generate(prompts, params)
        fast = FastEngine(model, tok).generate(prompts, params)
        assert same(hf, fast) == []
        sampled = FastEngine(model, tok).generate(prompts[:4], SamplingParams(temperature=1.0, max_tokens=50, n=8, seed=1))
        again = FastEngine(model, tok).generate(prompts[:4], SamplingParams(temperature=1.0, max_tokens=50, n=8, seed=1))
        assert same(sampled, again) == []
    finally:
        model.to("cpu")

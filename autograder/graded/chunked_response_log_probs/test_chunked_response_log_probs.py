"""chunked_response_log_probs (notebook 08): the reference's contract (on the two real tiny models and
on small random Gemma 2 models). Its correct versions and known mistakes are in grader.py
(tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import functools
import pytest
import torch
from hypothesis import given, strategies as st

from course_lib import chunked_response_log_probs
from tests.helpers import PROPERTY_SETTINGS, seeds


# ---------------------------------------------------------------- the reference
@pytest.fixture(scope="module")
def batch():
    from course_lib import gsm8k_to_r1_zero, load_problems, load_tiny_tokenizer, tokenize_prompt_and_output

    examples = [gsm8k_to_r1_zero(p) for p in load_problems("arith", "test")[:3]]
    tok = load_tiny_tokenizer()
    return tokenize_prompt_and_output([e["prompt"] for e in examples], [e["output"] for e in examples], tok)


@pytest.mark.parametrize("name, capped", [("gemma2-softcap", True), ("qwen2-base", False)])
def test_chunked_path_matches_the_models_own_forward(name, capped, batch):
    """The fixed path equals `get_response_log_probs` (the model's forward, which caps) within 1e-5
    on the response tokens, for every chunk size, and the path without the cap is far off exactly
    when the model caps. (Over all positions the float32 rounding of log-probs near -40 reaches
    1.1e-5 with one-row chunks, measured: hence a relative term there.)"""
    from course_lib import get_response_log_probs, load_tiny

    torch.manual_seed(0)
    model, _ = load_tiny(name)
    ids, labels, mask = batch["input_ids"], batch["labels"], batch["response_mask"].bool()
    with torch.no_grad():
        forward = get_response_log_probs(model, ids, labels)["log_probs"]
        for chunk in (1, 7, 64, ids.numel() + 5):
            chunked = chunked_response_log_probs(model, ids, labels, chunk_size=chunk)
            assert chunked.shape == labels.shape and chunked.dtype == torch.float32
            gap = (chunked - forward)[mask].abs().max().item()
            assert gap < 1e-5, f"{name}, chunk {chunk}: gap {gap:.2e} against the model's own forward"
            torch.testing.assert_close(chunked, forward, atol=1e-5, rtol=1e-6)
        raw = model.get_output_embeddings()(model.get_decoder()(input_ids=ids).last_hidden_state)
        uncapped = torch.log_softmax(raw, -1).gather(-1, labels[..., None]).squeeze(-1)
    missing_cap_gap = (uncapped - forward)[mask].abs().mean().item()
    if capped:
        assert missing_cap_gap > 0.5, f"without the cap the response log-probs move by only {missing_cap_gap:.3f} nat"
    else:
        assert missing_cap_gap < 1e-5, f"{name} has no cap, yet the raw path differs by {missing_cap_gap:.2e}"


def test_chunked_path_applies_the_output_layer_a_block_at_a_time(batch):
    """No (B, T, V) logits: the output layer never sees more than `chunk_size` rows at once."""
    from course_lib import load_tiny

    model, _ = load_tiny("gemma2-softcap")
    rows = []
    hook = model.get_output_embeddings().register_forward_hook(lambda m, args, out: rows.append(out.shape))
    try:
        with torch.no_grad():
            chunked_response_log_probs(model, batch["input_ids"], batch["labels"], chunk_size=16)
    finally:
        hook.remove()
    n = batch["input_ids"].numel()
    assert [r[0] for r in rows] == [16] * (n // 16) + ([n % 16] if n % 16 else []), rows
    assert all(len(r) == 2 for r in rows), "the output layer saw a (B, T, H) tensor"


@functools.lru_cache(maxsize=None)
def small_gemma2(cap, dtype=torch.float32, seed=0):
    """A random two-layer Gemma 2 of the suite's shape (vocabulary 40), final-logit cap `cap`."""
    from autograder.graded.chunked_response_log_probs import build_model
    from autograder.graded.chunked_response_log_probs.grader import config_dict

    torch.manual_seed(seed)
    model = build_model("gemma2", config_dict("gemma2", 40, cap), dtype=dtype)
    with torch.no_grad():
        model.model.norm.weight.add_(4.0)  # raw logits beyond a cap of 5
    return model


@PROPERTY_SETTINGS
@given(seeds, st.integers(1, 3), st.integers(1, 7), st.integers(1, 30), st.sampled_from([5.0, None, 0.0]))
def test_reference_is_the_same_for_every_chunk_size(seed, B, T, chunk, cap):
    model = small_gemma2(cap)
    g = torch.Generator().manual_seed(seed)
    full = torch.randint(2, 40, (B, T + 1), generator=g)
    ids, labels = full[:, :-1], full[:, 1:]
    with torch.no_grad():
        chunked = chunked_response_log_probs(model, ids, labels, chunk_size=chunk)
        raw = model.get_output_embeddings()(model.get_decoder()(input_ids=ids).last_hidden_state)
        by_hand = torch.log_softmax(cap * torch.tanh(raw / cap) if cap else raw, -1).gather(-1, labels[..., None])[..., 0]
        if cap:  # Gemma 2's forward caps too (with a cap of 0 it divides by zero: NaN)
            forward = torch.log_softmax(model(ids).logits, -1).gather(-1, labels[..., None])[..., 0]
            torch.testing.assert_close(chunked, forward, atol=1e-5, rtol=1e-6)
    assert chunked.shape == (B, T)
    torch.testing.assert_close(chunked, by_hand, atol=1e-5, rtol=1e-6)


def test_reference_keeps_float64_and_a_graph():
    model = small_gemma2(7.5, dtype=torch.float64, seed=1)
    ids = torch.randint(2, 40, (2, 5), generator=torch.Generator().manual_seed(1))
    out = chunked_response_log_probs(model, ids[:, :-1], ids[:, 1:], chunk_size=3)
    assert out.dtype == torch.float64 and out.requires_grad
    out.sum().backward()
    assert model.get_output_embeddings().weight.grad.abs().sum() > 0

"""chunked_response_log_probs (notebook 08): the reference's contract (on the two real tiny models and
on small random Gemma 2 models), correct versions that earn full marks through the real judge, and
realistic mistakes that lose them (CONTRIBUTING.md, "Adding a graded function").

The suite's tripwire forbids calling course_lib's `final_logits_softcap`: each version carries the
student's own, as notebook 08 has it in the cell above."""

from __future__ import annotations

import functools

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from autograder.mistakes.chunked_response_log_probs import FLATTEN_AND_GATHER, SOFTCAP
from course_lib import chunked_response_log_probs
from tests.helpers import PROPERTY_SETTINGS, corpus_tests, many_draws_test, seeds

SUITE = "chunked_response_log_probs"


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
    from autograder.suites.chunked_response_log_probs import build_model, config_dict

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


CORRECT = {
    "flatten_and_gather": FLATTEN_AND_GATHER,
    # log p(y) = z_y - logsumexp(z), the two pieces of log_softmax taken separately
    "label_logit_minus_logsumexp": SOFTCAP + """
    def chunked_response_log_probs(model, input_ids, labels, chunk_size=1024):
        out = model.get_decoder()(input_ids=input_ids)
        h = out.last_hidden_state.flatten(0, 1)
        y = labels.flatten()
        cap = model.config.to_dict().get("final_logit_softcapping")
        result = []
        for i in range(0, len(y), chunk_size):
            z = final_logits_softcap(model.get_output_embeddings()(h[i:i + chunk_size]), cap)
            if z.dtype not in (torch.float32, torch.float64):
                z = z.float()
            picked = z.gather(1, y[i:i + chunk_size].unsqueeze(1)).squeeze(1)
            result.append(picked - torch.logsumexp(z, dim=1))
        return torch.cat(result).reshape(labels.shape)
    """,
    # cross-entropy is -log p of the label: no reduction, the sign flipped back
    "cross_entropy_on_split_chunks": SOFTCAP + """
    import torch.nn.functional as F
    def chunked_response_log_probs(model, input_ids, labels, chunk_size=1024):
        hidden = model.get_decoder()(input_ids=input_ids).last_hidden_state
        B, T, H = hidden.shape
        cap = getattr(model.config, "final_logit_softcapping", None) or None
        lm_head = model.get_output_embeddings()
        pieces = [
            -F.cross_entropy(final_logits_softcap(lm_head(h), cap).to(torch.promote_types(h.dtype, torch.float32)),
                             y, reduction="none")
            for h, y in zip(torch.split(hidden.reshape(B * T, H), chunk_size), torch.split(labels.reshape(B * T), chunk_size))
        ]
        return torch.cat(pieces).reshape(B, T)
    """,
    # the output layer's weight applied by hand, in float64, the result cast back
    "float64_matmul": SOFTCAP + """
    def chunked_response_log_probs(model, input_ids, labels, chunk_size=1024):
        hidden = model.get_decoder()(input_ids=input_ids).last_hidden_state
        weight = model.get_output_embeddings().weight  # (V, H): Gemma 2's and Qwen2's heads have no bias
        cap = getattr(model.config, "final_logit_softcapping", None)
        out_dtype = torch.promote_types(hidden.dtype, torch.float32)
        flat = hidden.reshape(-1, hidden.shape[-1]).double()
        ids = labels.reshape(-1)
        parts = []
        for s in range(0, flat.shape[0], chunk_size):
            logits = final_logits_softcap(flat[s:s + chunk_size] @ weight.double().T, cap)
            parts.append(torch.log_softmax(logits, -1)[torch.arange(len(ids[s:s + chunk_size])), ids[s:s + chunk_size]])
        return torch.cat(parts).reshape(labels.shape).to(out_dtype)
    """,
    # chunks of positions within each sequence (never more than chunk_size rows of logits at once)
    "chunks_within_each_sequence": SOFTCAP + """
    def chunked_response_log_probs(model, input_ids, labels, chunk_size=1024):
        hidden = model.get_decoder()(input_ids=input_ids).last_hidden_state
        head = model.get_output_embeddings()
        cap = getattr(model.config, "final_logit_softcapping", 0)
        rows = []
        for b in range(hidden.shape[0]):
            row = []
            for t in range(0, hidden.shape[1], chunk_size):
                logits = final_logits_softcap(head(hidden[b, t:t + chunk_size]), cap)
                logp = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
                row.append(logp.gather(-1, labels[b, t:t + chunk_size, None])[:, 0])
            rows.append(torch.cat(row))
        return torch.stack(rows)
    """,
}


test_correct_version_earns_full_marks, test_mistake_loses_its_points = corpus_tests(SUITE, CORRECT)
test_each_version_holds_on_many_draws = many_draws_test(SUITE, CORRECT, draws=4)

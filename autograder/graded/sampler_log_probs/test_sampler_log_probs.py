"""sampler_log_probs (notebook 15): the reference's contract. Its correct versions and known mistakes
are in grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import math
import pytest
import torch
from hypothesis import assume, given, strategies as st

from autograder.graded.sampler_log_probs.grader import _kept_count
from course_lib import sampler_log_probs
from tests.helpers import PROPERTY_SETTINGS, randn, seeds


settings_ = st.tuples(st.sampled_from([0.5, 1.0, 1.7]), st.sampled_from([None, 0, 1, 3, 8]),
                      st.sampled_from([None, 1.0, 0.05, 0.5, 0.9]))


def by_hand(row: list[float], token: int, temperature, top_k, top_p) -> float:
    """One row in Python floats: sort, keep every z at least the k-th largest, the nucleus of what
    is left, log-softmax over it."""
    z = [x / temperature for x in row]
    order = sorted(range(len(z)), key=lambda i: -z[i])
    if top_k:
        order = [i for i in order if z[i] >= z[order[top_k - 1]]]
    top = max(z[i] for i in order)
    total = sum(math.exp(z[i] - top) for i in order)
    kept, before = [], 0.0
    for i in order:
        if top_p is None or before < top_p:
            kept.append(i)
        before += math.exp(z[i] - top) / total
    if token not in kept:
        return -math.inf
    return z[token] - top - math.log(sum(math.exp(z[i] - top) for i in kept))


# ---------------------------------------------------------------- the reference
@PROPERTY_SETTINGS
@given(seeds, st.integers(1, 5), st.integers(2, 12), settings_, st.sampled_from([torch.float32, torch.float64]))
def test_reference_matches_the_sampler_by_hand(seed, N, V, setting, dtype):
    temperature, top_k, top_p = setting
    assume(not top_k or top_k <= V)
    logits = randn(N, V, seed=seed, dtype=torch.float64, scale=2.0)
    assume(all(_kept_count(row / temperature, top_k, top_p)[1] for row in logits))  # decided with room
    tokens = torch.randint(0, V, (N,), generator=torch.Generator().manual_seed(seed))
    got = sampler_log_probs(logits.to(dtype), tokens, temperature=temperature, top_k=top_k, top_p=top_p)
    assert got.shape == (N,) and got.dtype == dtype
    expected = torch.tensor([by_hand(logits[i].tolist(), int(tokens[i]), temperature, top_k, top_p) for i in range(N)],
                            dtype=torch.float64)
    torch.testing.assert_close(got.double(), expected, atol=64 * torch.finfo(dtype).eps * 10, rtol=1e-5)


@PROPERTY_SETTINGS
@given(seeds, st.integers(2, 12), settings_)
def test_reference_is_a_distribution_over_the_kept_tokens(seed, V, setting):
    temperature, top_k, top_p = setting
    assume(not top_k or top_k <= V)
    logits = randn(3, V, seed=seed, dtype=torch.float64, scale=2.0)
    every = torch.arange(V).expand(3, V)
    lp = sampler_log_probs(logits[:, None, :].expand(3, V, V), every, temperature, top_k, top_p)
    torch.testing.assert_close(torch.logsumexp(lp, -1), torch.zeros(3, dtype=torch.float64))
    assert (lp[torch.arange(3), logits.argmax(-1)] > -math.inf).all()  # the most likely is always kept
    kept = (lp > -math.inf).sum(-1)
    assert (kept <= (top_k or V)).all()
    if top_k and not top_p:
        assert (kept == top_k).all()


@PROPERTY_SETTINGS
@given(seeds, st.integers(2, 12), settings_)
def test_reference_without_renormalisation_is_the_full_log_softmax(seed, V, setting):
    temperature, top_k, top_p = setting
    assume(not top_k or top_k <= V)
    logits = randn(4, V, seed=seed, scale=2.0)
    tokens = torch.randint(0, V, (4,), generator=torch.Generator().manual_seed(seed))
    got = sampler_log_probs(logits, tokens, temperature, top_k, top_p, renormalize=False)
    full = torch.log_softmax(logits / temperature, -1).gather(-1, tokens[:, None]).squeeze(-1)
    assert torch.equal(got, full)


def test_reference_off_values_are_off():
    logits = randn(2, 3, 7, seed=5, scale=2.0)
    tokens = torch.randint(0, 7, (2, 3), generator=torch.Generator().manual_seed(1))
    plain = sampler_log_probs(logits, tokens, 0.8)
    assert torch.equal(plain, torch.log_softmax(logits / 0.8, -1).gather(-1, tokens[..., None]).squeeze(-1))
    assert torch.equal(sampler_log_probs(logits, tokens, 0.8, top_k=0, top_p=1.0), plain)
    assert torch.equal(sampler_log_probs(logits, tokens, 0.8, top_k=7), plain)


def test_reference_keeps_the_token_that_crosses_top_p_and_cuts_to_k_first():
    logits = torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05]))
    every = torch.arange(4)
    # before = 0, 0.5, 0.8, 0.95: with top_p 0.7 the third token (before 0.8) goes, the second (crossing 0.7) stays
    got = sampler_log_probs(logits.expand(4, 4), every, top_p=0.7)
    torch.testing.assert_close(got[:2], torch.log(torch.tensor([0.625, 0.375])))
    assert got[2:].tolist() == [-math.inf, -math.inf]
    # top_k 2 first: renormalised 0.625, 0.375; with top_p 0.6 only the first stays (before 0.625 >= 0.6)
    got = sampler_log_probs(logits.expand(4, 4), every, top_k=2, top_p=0.6)
    assert got.tolist() == [0.0, -math.inf, -math.inf, -math.inf]


def test_reference_keeps_a_tie_at_the_kth_place_whole():
    """Top-k keeps every z at least the k-th largest, as vLLM's and Hugging Face's samplers do: two
    equal logits at the k-th place are both kept, and both renormalised over k + 1 tokens."""
    logits = torch.tensor([3.0, 2.0, 1.0, 1.0, 0.0], dtype=torch.float64)
    every = torch.arange(5)
    got = sampler_log_probs(logits.expand(5, 5), every, top_k=3)
    kept = torch.log_softmax(logits[:4], dim=-1)
    torch.testing.assert_close(got[:4], kept)
    assert got[4] == -math.inf
    assert torch.equal(sampler_log_probs(logits.expand(5, 5), every, top_k=4), got)


def test_reference_keeps_bfloat16_logits_in_bfloat16():
    """bfloat16 logits give bfloat16 log-probs, within two units of bfloat16's rounding (2^-7) of the
    float64 truth on the same logits (over 50 seeds the largest error was 0.0055 of max(|truth|, 1))."""
    logits = randn(6, 32, seed=3, scale=2.0).to(torch.bfloat16)
    tokens = torch.randint(0, 32, (6,), generator=torch.Generator().manual_seed(3))
    got = sampler_log_probs(logits, tokens, temperature=0.5, top_k=12)
    truth = sampler_log_probs(logits.double(), tokens, temperature=0.5, top_k=12)
    assert got.dtype == torch.bfloat16
    assert torch.equal(torch.isinf(got), torch.isinf(truth))
    finite = torch.isfinite(truth)
    torch.testing.assert_close(got.double()[finite], truth[finite], atol=2 ** -6, rtol=2 ** -6)


def test_reference_leaves_its_inputs_unchanged():
    logits, tokens = randn(3, 9, seed=2), torch.tensor([0, 4, 8])
    before = logits.clone()
    sampler_log_probs(logits, tokens, 0.7, 3, 0.9)
    assert torch.equal(logits, before)


@pytest.mark.parametrize(("kwargs", "name"), [({"temperature": 0.0}, "temperature"), ({"temperature": -0.5}, "temperature"),
                                              ({"top_k": -1}, "top_k"), ({"top_k": 10}, "top_k"), ({"top_p": 0.0}, "top_p"),
                                              ({"top_p": 1.01}, "top_p")])
def test_reference_rejects_bad_settings(kwargs, name):
    with pytest.raises(ValueError, match=name):
        sampler_log_probs(torch.zeros(2, 9), torch.zeros(2, dtype=torch.long), **kwargs)


def test_reference_rejects_tokens_of_another_shape():
    with pytest.raises(ValueError, match="tokens"):
        sampler_log_probs(torch.zeros(2, 9), torch.zeros(2, 1, dtype=torch.long))

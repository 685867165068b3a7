"""Notebook 15's atlas tools on the tiny model: the trainer's batch laid out from the sampled ids,
and each other way of scoring them (the fast engine's KV-cache decode, a batch of one, a top-p
sampler) aligned with it position by position."""

from __future__ import annotations

import pytest
import torch

from course_lib import gsm8k_to_r1_zero, load_problems
from course_lib.rollouts.mismatch_atlas import (atlas_row, batch_of, cosine, full_forward, kv_decode, sample, scored_alone,
                                                topp_log_probs)
from course_lib.world.tiny_models import load_tiny


@pytest.fixture(scope="module")
def scored():
    torch.set_num_threads(1)
    model, tok = load_tiny("qwen2-sft")
    prompts = [gsm8k_to_r1_zero(p)["prompt"] for p in load_problems("arith", "test")[:4]]
    rollouts, pids = sample(model, tok, prompts, n=2, seed=0, max_tokens=40)
    rids = [r.token_ids for r in rollouts]
    return model, tok, pids, rids, batch_of(pids, rids, tok.pad_token_id)


def test_batch_of_lays_out_the_sampled_ids_shifted_by_one(scored):
    _, tok, pids, rids, batch = scored
    for i, (p, r) in enumerate(zip(pids, rids)):
        mask = batch["response_mask"][i]
        assert batch["labels"][i][mask].tolist() == r, "the masked labels are the sampled ids, in order"
        assert batch["input_ids"][i, : len(p)].tolist() == p
        assert int(mask.nonzero()[0]) == len(p) - 1, "the first response label follows the last prompt token"
    with pytest.raises(ValueError, match="empty response"):
        batch_of([[1, 2]], [[]], tok.pad_token_id)


def test_every_way_of_scoring_agrees_with_the_trainer_to_float32_rounding(scored):
    model, tok, pids, rids, batch = scored
    mask, train = batch["response_mask"], full_forward(model, batch)
    assert bool((train[mask] < 0).all()) and bool((train[~mask] != 0).any())
    for other in (kv_decode(model, tok, pids, rids, rows=3), scored_alone(model, pids, rids, tok.pad_token_id),
                  full_forward(model, batch_of(pids, rids, tok.pad_token_id, extra=16))[:, : mask.shape[1]]):
        row = atlas_row(train, other, mask)
        assert row["tokens"] == sum(len(r) for r in rids)
        assert row["max_abs"] < 1e-4, row
    shifted = torch.roll(kv_decode(model, tok, pids, rids), 1, dims=1)  # misaligned by one position: far off
    assert atlas_row(train, shifted, mask)["mean_abs"] > 1e-2


def test_top_p_log_probs_are_the_full_ones_less_the_log_kept_mass(scored):
    model, _, _, _, batch = scored
    mask, full = batch["response_mask"], full_forward(model, batch)
    top = topp_log_probs(model, batch, top_p=0.8)
    kept = mask & torch.isfinite(top)  # a token sampled at top-p 1 may lie outside the 0.8 set: -inf there
    assert bool(kept.any()) and bool((top[kept] >= full[kept] - 1e-6).all()), \
        "renormalised over the kept tokens: never below the full log-softmax"
    torch.testing.assert_close(topp_log_probs(model, batch, top_p=1.0)[mask], full[mask], atol=1e-5, rtol=0)


def test_the_cosine_of_two_gradients_is_float64_and_never_above_1():
    """Two float32 vectors of a million entries, one a copy of the other moved by 1e-4 of each entry:
    the cosine is within 1e-12 of the float64 dot product's, and at most 1 (a float32 dot product of
    the same vectors can exceed 1 by its rounding); a vector with itself gives 1, with its negative -1
    (to 1e-12), an orthogonal one 0, a zero vector 0."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(1_000_000, generator=g) * torch.rand(1_000_000, generator=g) ** 4
    b = a + 1e-4 * torch.randn(1_000_000, generator=g) * a.abs()
    exact = float(a.double() @ b.double() / (a.double().norm() * b.double().norm()))
    got = cosine(a, b)
    assert abs(got - exact) < 1e-12 and got <= 1.0
    assert cosine(a, a) == 1.0 and abs(cosine(a, -a) + 1.0) < 1e-12
    assert abs(cosine(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 3.0]))) < 1e-15
    assert cosine(a, torch.zeros_like(a)) == 0.0
    with pytest.raises(ValueError, match="entries"):
        cosine(a, a[:10])


def test_every_cosine_the_benchmark_recorded_is_at_most_1():
    """benchmarks/mismatch_15.py's cosines (the sampled gradients and the exact decision) are computed
    in float64 by `cosine`: none above 1, as a float32 dot product's once were (1.00017)."""
    import json

    from course_lib.paths import DATA_DIR

    results = json.loads((DATA_DIR / "experiments" / "mismatch_15.json").read_text())
    found = []

    def walk(x):
        if isinstance(x, dict):
            found.extend(v for k, v in x.items() if k == "cosine")
            for v in x.values():
                walk(v)

    walk({k: results[k] for k in ("gradient", "decision")})
    assert len(found) >= 20 and all(-1.0 <= c <= 1.0 for c in found), sorted(found)[-3:]

"""importance_weights (notebook 15): the reference's contract. Its correct versions and known mistakes
are in grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import math
import pytest
import torch
from hypothesis import given, strategies as st

from course_lib import importance_weights
from tests.helpers import log_prob_pair, PROPERTY_SETTINGS, response_runs, seeds, with_garbage


MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")
modes = st.sampled_from(MODES)


def by_hand(train, rollout, spans, T, mode, cap, aggregate):
    out = [[0.0] * T for _ in spans]
    for b, (start, n) in enumerate(spans):
        d = [float(train[b, t]) - float(rollout[b, t]) for t in range(start, start + n)]
        if mode.startswith("sequence") and n:
            d = [(sum(d) / n if aggregate == "mean" else sum(d))] * n
        for i, x in enumerate(d):
            r = math.exp(x)
            out[b][start + i] = min(r, cap) if mode.endswith("truncate") else (r if r <= cap else 0.0)
    return torch.tensor(out, dtype=torch.float64)


# ---------------------------------------------------------------- the reference
@PROPERTY_SETTINGS
@given(response_runs(), seeds, modes, st.sampled_from([0.5, 1.5, 2.0, 5.0]), st.sampled_from(["sum", "mean"]),
       st.sampled_from([torch.float32, torch.float64]), st.sampled_from(["bool", "long", "float"]))
def test_reference_matches_the_weights_by_hand(run, seed, mode, cap, aggregate, dtype, mask_kind):
    T, spans = run
    train, rollout, mask = log_prob_pair(run, seed, dtype, scale=0.5)
    expected = by_hand(train, rollout, spans, T, mode, cap, aggregate)
    # a ratio within rounding of the cap may land on either side in float32: leave those draws out
    ratios = by_hand(train, rollout, spans, T, mode.replace("mask", "truncate"), math.inf, aggregate)
    if ((ratios - cap).abs() < 1e-4 * cap).any():
        return
    mk = {"bool": mask, "long": mask.long(), "float": mask.to(dtype)}[mask_kind]
    got = importance_weights(train, rollout, mk, mode, cap, aggregate)
    assert got.shape == mask.shape and got.dtype == dtype
    torch.testing.assert_close(got.double(), expected, atol=0.0, rtol=64 * T * torch.finfo(dtype).eps)
    assert (got[~mask] == 0).all() and (got <= cap).all() and (got >= 0).all()


@PROPERTY_SETTINGS
@given(response_runs(), seeds, modes, st.sampled_from(["sum", "mean"]))
def test_reference_never_reads_outside_the_response(run, seed, mode, aggregate):
    train, rollout, mask = log_prob_pair(run, seed, torch.float32, scale=0.5)
    a = importance_weights(train, rollout, mask, mode, 2.0, aggregate)
    b = importance_weights(with_garbage(train, mask, seed + 11), with_garbage(rollout, mask, seed + 13), mask, mode, 2.0,
                           aggregate)
    assert torch.equal(a, b)


@pytest.mark.parametrize("mode", MODES)
def test_reference_is_detached(mode):
    train, rollout, mask = log_prob_pair((6, [(1, 3), (0, 6)]), 3, torch.float32)
    train.requires_grad_()
    rollout.requires_grad_()
    w = importance_weights(train, rollout, mask, mode, 2.0)
    assert not w.requires_grad


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_reference_overflow_gives_the_cap_or_0_never_nan(dtype):
    train = torch.zeros(2, 4, dtype=dtype)
    rollout = torch.tensor([[-300.0, -300.0, -300.0, 0.0], [300.0, 300.0, 300.0, 0.0]], dtype=dtype)
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 0]])
    truncated = importance_weights(train, rollout, mask, "sequence_truncate", 2.0)
    assert truncated.tolist() == [[2.0, 2.0, 2.0, 0.0], [0.0, 0.0, 0.0, 0.0]]
    assert importance_weights(train, rollout, mask, "sequence_mask", 2.0).tolist() == [[0.0] * 4, [0.0] * 4]
    assert importance_weights(train, rollout, mask, "token_mask", 2.0)[0].tolist() == [0.0] * 4


def test_reference_sum_and_mean_of_a_row():
    train = torch.tensor([[0.0, 0.0, 0.0, 9.0]], dtype=torch.float64)
    rollout = torch.tensor([[-0.1, -0.2, 0.9, -9.0]], dtype=torch.float64)  # log-ratios 0.1, 0.2, -0.9
    mask = torch.tensor([[1, 1, 1, 0]])
    w = importance_weights(train, rollout, mask, "sequence_truncate", 5.0, "sum")
    torch.testing.assert_close(w, torch.tensor([[math.exp(-0.6)] * 3 + [0.0]], dtype=torch.float64))
    w = importance_weights(train, rollout, mask, "sequence_mask", 5.0, "mean")
    torch.testing.assert_close(w, torch.tensor([[math.exp(-0.2)] * 3 + [0.0]], dtype=torch.float64))
    w = importance_weights(train, rollout, mask, "token_mask", 1.15, "mean")  # aggregate: sequence modes only
    torch.testing.assert_close(w, torch.tensor([[math.exp(0.1), 0.0, math.exp(-0.9), 0.0]], dtype=torch.float64))


def test_reference_rejects_bad_input():
    t, m = torch.zeros(2, 3), torch.ones(2, 3)
    with pytest.raises(ValueError, match="mode"):
        importance_weights(t, t, m, "token_clip", 2.0)
    with pytest.raises(ValueError, match="aggregate"):
        importance_weights(t, t, m, "sequence_mask", 2.0, "max")
    with pytest.raises(ValueError, match="cap"):
        importance_weights(t, t, m, "token_mask", 0.0)
    with pytest.raises(ValueError, match=r"train_log_probs.*rollout_log_probs"):
        importance_weights(t, torch.zeros(2, 4), m, "token_mask", 2.0)
    with pytest.raises(ValueError, match="response_mask"):
        importance_weights(t, t, torch.ones(3, 3), "token_mask", 2.0)

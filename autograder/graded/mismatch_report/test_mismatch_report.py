"""mismatch_report (notebook 15): the reference's contract. Its correct versions and known mistakes are
in grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import math
import pytest
import torch
from hypothesis import assume, given, strategies as st

from course_lib import mismatch_report
from tests.helpers import log_prob_pair, PROPERTY_SETTINGS, response_runs, seeds, with_garbage


def quantile_by_hand(values: list[float], q: float) -> float:
    """Linear interpolation between the order statistics at position q * (n - 1)."""
    v = sorted(values)
    pos = q * (len(v) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (pos - lo) * (v[hi] - v[lo])


# ---------------------------------------------------------------- the reference
@PROPERTY_SETTINGS
@given(response_runs(), seeds, st.sampled_from([torch.float32, torch.float64]), st.sampled_from(["bool", "long", "float"]))
def test_reference_matches_statistics_by_hand(run, seed, dtype, mask_kind):
    T, spans = run
    assume(sum(n for _, n in spans) >= 2)
    train, rollout, mask = log_prob_pair(run, seed, dtype)
    mk = {"bool": mask, "long": mask.long(), "float": mask.to(dtype)}[mask_kind]
    got = mismatch_report(train, rollout, mk)
    d = [float(train[b, t]) - float(rollout[b, t]) for b, (s, n) in enumerate(spans) for t in range(s, s + n)]
    a = [abs(x) for x in d]
    n = len(d)
    mean_abs = sum(a) / n
    expected = {
        "mean_diff": sum(d) / n, "mean_abs": mean_abs,
        "std_abs": math.sqrt(sum((x - mean_abs) ** 2 for x in a) / (n - 1)),
        "p95_abs": quantile_by_hand(a, 0.95), "max_abs": max(a),
        "frac_outside": sum(math.exp(x) < 0.9 or math.exp(x) > 1.1 for x in d) / n,
        "mean_k3": sum(math.expm1(x) - x for x in d) / n,
    }
    tol = 64 * torch.finfo(dtype).eps
    for key, value in expected.items():
        assert got[key].shape == () and got[key].dtype == dtype, key
        assert abs(float(got[key]) - value) <= tol * (1 + abs(value)) * 10, (key, float(got[key]), value)
    rows = [sum(float(train[b, t]) - float(rollout[b, t]) for t in range(s, s + n)) for b, (s, n) in enumerate(spans)]
    torch.testing.assert_close(got["seq_log_ratio"].double(), torch.tensor(rows, dtype=torch.float64), atol=tol * 50, rtol=tol)
    kept = [r for r, (_, n) in zip(rows, spans) if n > 0]
    torch.testing.assert_close(got["seq_quantiles"].double(), torch.tensor([quantile_by_hand(kept, q) for q in (0.05, 0.5, 0.95)],
                                                                           dtype=torch.float64), atol=tol * 50, rtol=tol)


@PROPERTY_SETTINGS
@given(response_runs(), seeds)
def test_reference_never_reads_outside_the_response(run, seed):
    T, spans = run
    assume(any(n for _, n in spans))
    train, rollout, mask = log_prob_pair(run, seed, torch.float32)
    a = mismatch_report(train, rollout, mask)
    b = mismatch_report(with_garbage(train, mask, seed + 11), with_garbage(rollout, mask, seed + 13), mask)
    for key in a:
        assert torch.equal(a[key], b[key]) or (torch.isnan(a[key]).all() and torch.isnan(b[key]).all()), key


def test_reference_the_signed_mean_hides_a_symmetric_mismatch():
    train = torch.tensor([[-1.0, -1.5, -2.0, -2.5]])
    rollout = train + torch.tensor([[0.5, -0.5, 0.5, -0.5]])
    report = mismatch_report(train, rollout, torch.ones(1, 4))
    assert report["mean_diff"] == 0 and report["mean_abs"] == 0.5 and report["frac_outside"] == 1.0


def test_reference_k3_estimates_kl_rollout_to_train():
    """Over a whole vocabulary, E_{o ~ rollout}[k3] = KL(rollout || train): each token weighted by its
    rollout probability (repeated in proportion: exactly, with probabilities of a common denominator)."""
    counts = torch.tensor([5, 3, 1, 1])
    rollout = torch.log(counts.double() / counts.sum())
    train = torch.log_softmax(torch.tensor([0.3, -0.2, 0.9, -1.0], dtype=torch.float64), -1)
    tokens = torch.repeat_interleave(torch.arange(4), counts)
    report = mismatch_report(train[tokens][None], rollout[tokens][None], torch.ones(1, len(tokens)))
    kl = (rollout.exp() * (rollout - train)).sum()
    torch.testing.assert_close(report["mean_k3"], kl)


def test_reference_leaves_out_rows_without_a_response_from_the_quantiles():
    train = torch.tensor([[-1.0, -2.0], [-1.0, -1.0], [-3.0, -1.0]])
    rollout = torch.tensor([[-2.0, -2.0], [-1.0, -1.0], [-1.0, -1.0]])
    report = mismatch_report(train, rollout, torch.tensor([[1, 0], [0, 0], [1, 1]]))
    assert report["seq_log_ratio"].tolist() == [1.0, 0.0, -2.0]
    assert report["seq_quantiles"].tolist() == pytest.approx([-1.85, -0.5, 0.85])


def test_reference_std_of_one_token_is_nan():
    report = mismatch_report(torch.tensor([[-1.0, -2.0]]), torch.tensor([[-1.5, 7.0]]), torch.tensor([[1, 0]]))
    assert torch.isnan(report["std_abs"]) and report["max_abs"] == 0.5


def test_reference_leaves_its_inputs_unchanged():
    train, rollout, mask = log_prob_pair((6, [(1, 3), (0, 6)]), 3, torch.float32)
    before = (train.clone(), rollout.clone())
    mismatch_report(train, rollout, mask)
    assert torch.equal(train, before[0]) and torch.equal(rollout, before[1])


def test_reference_rejects_bad_input():
    with pytest.raises(ValueError, match=r"train_log_probs.*\(2, 3\).*rollout_log_probs.*\(2, 4\)"):
        mismatch_report(torch.zeros(2, 3), torch.zeros(2, 4), torch.ones(2, 3))
    with pytest.raises(ValueError, match="response_mask"):
        mismatch_report(torch.zeros(2, 3), torch.zeros(2, 3), torch.ones(2, 4))
    with pytest.raises(ValueError, match="response_mask"):
        mismatch_report(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2, 3))
    with pytest.raises(ValueError, match="response_mask"):
        mismatch_report(torch.zeros(2, 3), torch.zeros(2, 3), torch.full((2, 3), 2))

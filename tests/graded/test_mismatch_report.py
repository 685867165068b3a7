"""mismatch_report (notebook 15): the reference's contract, correct versions that earn full marks
through the real judge, and realistic mistakes that lose them (CONTRIBUTING.md, "Adding a graded
function")."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from autograder.mistakes.mismatch_report import INDEXING
from course_lib import mismatch_report
from tests.helpers import (PROPERTY_SETTINGS, corpus_tests, log_prob_pair, many_draws_test,
                           response_runs, seeds, with_garbage)

SUITE = "mismatch_report"


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


# ---------------------------------------------------------------- correct versions and mistakes
CORRECT = {
    "boolean_indexing": INDEXING,
    # Python lists row by row, everything in float64, quantiles by hand, cast back at the end
    "loop_over_rows_float64_by_hand": """
        import math
        import torch
        def quantile(values, q):
            v = sorted(values)
            pos = q * (len(v) - 1)
            lo = int(math.floor(pos))
            hi = min(lo + 1, len(v) - 1)
            return v[lo] + (pos - lo) * (v[hi] - v[lo])
        def mismatch_report(train_log_probs, rollout_log_probs, response_mask):
            if train_log_probs.shape != rollout_log_probs.shape:
                raise ValueError(f"shapes differ: train_log_probs {list(train_log_probs.shape)}, rollout_log_probs {list(rollout_log_probs.shape)}")
            if list(response_mask.shape) != list(train_log_probs.shape):
                raise ValueError("response_mask and the log-probs have different shapes")
            dtype = train_log_probs.dtype
            B, T = train_log_probs.shape
            for b in range(B):
                for t in range(T):
                    if float(response_mask[b, t]) not in (0.0, 1.0):
                        raise ValueError(f"response_mask[{b}, {t}] is {float(response_mask[b, t])}, not 0 or 1")
            d, rows, nonempty = [], [], []
            for b in range(B):
                total = 0.0
                for t in range(T):
                    if response_mask[b, t] != 0:
                        x = float(train_log_probs[b, t]) - float(rollout_log_probs[b, t])
                        d.append(x)
                        total += x
                rows.append(total)
                if (response_mask[b] != 0).any():
                    nonempty.append(total)
            if not d:
                raise ValueError("response_mask has no token")
            n = len(d)
            a = [abs(x) for x in d]
            mean_abs = sum(a) / n
            std = math.sqrt(sum((x - mean_abs) ** 2 for x in a) / (n - 1)) if n > 1 else float("nan")
            out = {"mean_diff": sum(d) / n, "mean_abs": mean_abs, "std_abs": std,
                   "p95_abs": quantile(a, 0.95), "max_abs": max(a),
                   "frac_outside": sum(1 for x in d if math.exp(x) < 0.9 or math.exp(x) > 1.1) / n,
                   "mean_k3": sum(math.expm1(x) - x for x in d) / n}
            out = {k: torch.tensor(v, dtype=dtype) for k, v in out.items()}
            out["seq_log_ratio"] = torch.tensor(rows, dtype=dtype)
            out["seq_quantiles"] = torch.tensor([quantile(nonempty, q) for q in (0.05, 0.5, 0.95)], dtype=dtype)
            return out
    """,
    # no boolean indexing: sums with torch.where and the count, order statistics from a sort
    # that puts the masked positions last
    "where_and_counts_sorted_quantiles": """
        import torch
        def interpolate(sorted_values, n, q):
            pos = q * (n - 1)
            lo = int(pos)
            hi = min(lo + 1, n - 1)
            return sorted_values[lo] + (pos - lo) * (sorted_values[hi] - sorted_values[lo])
        def _response_mask(train_log_probs, rollout_log_probs, response_mask):
            # the notebook's given helper (shapes, (B, T), 0/1), as a student who calls it runs it
            if train_log_probs.shape != rollout_log_probs.shape or response_mask.shape != train_log_probs.shape:
                raise ValueError("the shapes differ")
            if train_log_probs.dim() != 2:
                raise ValueError("not (B, T)")
            if not bool(((response_mask == 0) | (response_mask == 1)).all()):
                raise ValueError("response_mask must hold only 0 and 1")
            return response_mask.bool()
        def mismatch_report(train_log_probs, rollout_log_probs, response_mask):
            m = _response_mask(train_log_probs, rollout_log_probs, response_mask)
            n = int(m.sum())
            if n == 0:
                raise ValueError("response_mask selects nothing")
            zero = torch.zeros((), dtype=train_log_probs.dtype)
            diff = torch.where(m, train_log_probs - rollout_log_probs, zero)
            a = diff.abs()
            mean_abs = a.sum() / n
            var = torch.where(m, (a - mean_abs) ** 2, zero).sum() / (n - 1)
            ordered = torch.where(m, a, torch.full_like(a, float("inf"))).flatten().sort().values
            k3 = torch.where(m, torch.special.expm1(diff) - diff, zero)
            outside = m & ((torch.exp(diff) > 1.1) | (torch.exp(diff) < 0.9))
            seq = diff.sum(dim=1)
            rows = m.any(dim=1)
            seq_sorted = seq[rows].sort().values
            k = int(rows.sum())
            return {"mean_diff": diff.sum() / n, "mean_abs": mean_abs, "std_abs": var.sqrt(),
                    "p95_abs": interpolate(ordered, n, 0.95), "max_abs": ordered[n - 1],
                    "frac_outside": outside.sum().to(diff.dtype) / n, "mean_k3": k3.sum() / n,
                    "seq_log_ratio": seq,
                    "seq_quantiles": torch.stack([interpolate(seq_sorted, k, q) for q in (0.05, 0.5, 0.95)])}
    """,
    # numpy in float64 (np.quantile is linear by default; ddof=1 for the unbiased std)
    "numpy_float64": """
        import numpy as np
        import torch
        def mismatch_report(train_log_probs, rollout_log_probs, response_mask):
            if tuple(train_log_probs.shape) != tuple(rollout_log_probs.shape):
                raise ValueError(f"train_log_probs {tuple(train_log_probs.shape)} != rollout_log_probs {tuple(rollout_log_probs.shape)}")
            train = train_log_probs.detach().double().numpy()
            rollout = rollout_log_probs.detach().double().numpy()
            if tuple(response_mask.shape) != tuple(train_log_probs.shape):
                raise ValueError("response_mask does not align with the log-probs")
            raw = response_mask.detach().double().numpy()
            if not np.isin(raw, (0.0, 1.0)).all():
                raise ValueError("response_mask holds values other than 0 and 1")
            m = raw.astype(bool)
            if m.sum() == 0:
                raise ValueError("empty response_mask")
            diff = np.where(m, train - rollout, 0.0)
            d = diff[m]
            a = np.abs(d)
            r = np.exp(d)
            seq = diff.sum(axis=1)
            out = {"mean_diff": d.mean(), "mean_abs": a.mean(), "std_abs": a.std(ddof=1),
                   "p95_abs": np.quantile(a, 0.95), "max_abs": a.max(),
                   "frac_outside": np.mean((r < 0.9) | (r > 1.1)), "mean_k3": np.mean(np.expm1(d) - d),
                   "seq_log_ratio": seq, "seq_quantiles": np.quantile(seq[m.any(axis=1)], [0.05, 0.5, 0.95])}
            return {k: torch.as_tensor(v).to(train_log_probs.dtype) for k, v in out.items()}
    """,
}


test_correct_version_earns_full_marks, test_mistake_loses_its_points = corpus_tests(SUITE, CORRECT)
test_each_version_holds_on_many_draws = many_draws_test(SUITE, CORRECT)

"""The notebooks' visible self-checks: a comparison that shows its numbers, and named mistakes."""

from __future__ import annotations

import torch


def cmp(name, got, expected, atol=1e-6, rtol=1e-5):
    """Compare two tensors the nn-zero-to-hero way: exact? approximately? largest difference?"""
    got, expected = torch.as_tensor(got), torch.as_tensor(expected)
    same_shape = got.shape == expected.shape
    exact = same_shape and torch.equal(got, expected)
    close = same_shape and torch.allclose(got.double(), expected.double(), atol=atol, rtol=rtol, equal_nan=True)
    diff = (got.double() - expected.double()).abs().nan_to_num(nan=float("inf")).max().item() if same_shape and got.numel() else 0.0
    if not same_shape:
        diff = float("nan")
    print(f"{name:48s} | exact: {str(exact):5s} | approximate: {str(close):5s} | maxdiff: {diff:.2e}")
    return close


def expect(ok, mistake):
    """A self-check that fails with the name of the mistake it catches."""
    if not ok:
        raise AssertionError(mistake)
    return True

"""Response masks the suites share (`token_level_rewards`, `compute_gae`, `sequence_log_probs`): one
contiguous run of response positions per row (prompt, response, padding), drawn from one generator.

Grader side only: each suite imports it inside its `make_inputs`, which a suite's harness (what
student code sees) leaves out; `autograder.cases.fingerprint` covers it.
"""

from __future__ import annotations

import torch


class MaskDraw:
    """Random integers, signs, garbage and (prompt, response) spans from one generator."""

    def __init__(self, gen: torch.Generator):
        self.gen = gen

    def randint(self, low: int, high: int) -> int:
        """An integer in [low, high]."""
        return int(torch.randint(low, high + 1, (), generator=self.gen))

    def signs(self, *shape) -> torch.Tensor:
        """+1 or -1 with equal odds (float64)."""
        return torch.where(torch.rand(*shape, generator=self.gen) < 0.5, -1.0, 1.0).double()

    def garbage(self, *shape) -> torch.Tensor:
        """Values of magnitude 5 to 50, either sign (float64): what masked-out positions hold."""
        return self.signs(*shape) * (5.0 + 45.0 * torch.rand(*shape, generator=self.gen, dtype=torch.float64))

    @staticmethod
    def mask_of(T: int, spans) -> torch.Tensor:
        """(B, T) bool: row b is 1 on columns start .. start + length - 1 of its (start, length)."""
        m = torch.zeros(len(spans), T, dtype=torch.bool)
        for b, (start, length) in enumerate(spans):
            m[b, start:start + length] = True
        return m

    def spans(self, B: int, T: int, lengths=(2, None), prompt_min=1, pad_min=1, last_row_ends=True):
        """Random (prompt, response) spans: responses of `lengths` tokens, prompts of at least
        prompt_min, trailing padding of at least pad_min, except that the last row's response
        ends at the last column when last_row_ends."""
        low, high = lengths
        high = T - prompt_min - pad_min if high is None else high
        out = []
        for b in range(B):
            n = self.randint(low, high)
            out.append((T - n, n) if last_row_ends and b == B - 1 else (self.randint(prompt_min, T - n - pad_min), n))
        return out

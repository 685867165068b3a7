"""Response masks the suites share (`token_level_rewards`, `compute_gae`, `sequence_log_probs`, and
notebook 15's `mismatch_report`, `importance_weights`, `corrected_grpo_loss`): one contiguous run
of response positions per row (prompt, response, padding), drawn from one generator; and pairs of
log-probs whose difference on the response is chosen, with garbage elsewhere.

Grader side only: each folder's grader.py imports it, no harness (what student code sees) does;
`autograder.cases.fingerprint` covers it.
"""

from __future__ import annotations

import math

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

    def log_ratios(self, *shape, scale=0.03, tail=0.2, tail_scale=(0.1, 1.5)) -> torch.Tensor:
        """Train-minus-rollout log-prob differences as engines show them (float64): most tokens
        N(0, scale^2), a fraction `tail` of magnitude tail_scale[0] to tail_scale[1], either sign."""
        d = scale * torch.randn(*shape, generator=self.gen, dtype=torch.float64)
        low, high = tail_scale
        big = self.signs(*shape) * (low + (high - low) * torch.rand(*shape, generator=self.gen, dtype=torch.float64))
        return torch.where(torch.rand(*shape, generator=self.gen) < tail, big, d)

    @staticmethod
    def away_from(x: torch.Tensor, points, margin: float) -> torch.Tensor:
        """x with every value closer than `margin` to one of `points` moved to 2 * margin from it
        (on its side): no comparison with a point is then decided by rounding."""
        for p in points:
            near = (x - p).abs() < margin
            x = torch.where(near, p + torch.where(x >= p, 2 * margin, -2 * margin), x)
        return x

    def log_prob_pair(self, d: torch.Tensor, mask: torch.Tensor, level: float = 6.0, garbage: bool = True):
        """(train, rollout) float64 log-probs at or below 0 with train - rollout = d where the mask
        is 1; where it is 0, independent garbage in each (`garbage`) or the same log-prob in both."""
        rollout = -level * torch.rand(*d.shape, generator=self.gen, dtype=torch.float64) - d.clamp(min=0)
        train = rollout + d
        if not garbage:
            return torch.where(mask, train, rollout), rollout
        return torch.where(mask, train, self.garbage(*d.shape)), torch.where(mask, rollout, self.garbage(*d.shape))

    def capped_log_ratios(self, spans, T: int, mode: str, cap: float, aggregate: str = "sum", targets=None):
        """(B, T) float64 train-minus-rollout log-ratios for importance weights capped at `cap`:
        for a token mode, `log_ratios` with a ratio above cap planted in row 0 and one below 1 / cap
        in row 1, each followed by a token of ratio near 1; for a sequence mode, each row's sum
        (aggregate "mean": mean) over its response set to `targets` (default: alternately below and
        above log cap). No token log-ratio is within 1e-4 of log cap, no target within 1e-3."""
        x = self.log_ratios(len(spans), T)
        log_cap = math.log(cap)
        if mode.startswith("token"):
            for b, (start, n) in enumerate(spans[:2]):
                if n:
                    beyond = log_cap + 0.2 + 0.5 * float(torch.rand((), generator=self.gen))
                    x[b, start] = beyond if b == 0 else -beyond
                if n > 1:  # and a token well inside the cap beside it: a row whose every token a mask
                    # rejects has nothing left to normalise, which would hide the denominator's mistakes
                    x[b, start + 1] = 0.03 * float(torch.randn((), generator=self.gen))
            return self.away_from(x, [log_cap], 1e-4)
        if targets is None:
            sides = torch.tensor([(-1.0) ** b for b in range(len(spans))], dtype=torch.float64)
            targets = log_cap + sides * (0.05 + 1.5 * torch.rand(len(spans), generator=self.gen, dtype=torch.float64))
        targets = self.away_from(targets, [log_cap], 1e-3)
        for b, (start, n) in enumerate(spans):
            if n:
                row = x[b, start:start + n]
                goal = targets[b] * (n if aggregate == "mean" else 1)
                x[b, start:start + n] = row + (goal - row.sum()) / n
        return x

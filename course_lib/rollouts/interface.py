"""The rollout interface: how to sample (`SamplingParams`), what comes back (`Rollout`), and
the `RolloutEngine` protocol every engine keeps.

Contract of `generate` (every engine keeps it; a test checks greedy parity between them):
- it returns `len(prompts) * params.n` rollouts, the `n` samples of each prompt consecutive
  (a *group*, as GRPO's advantages expect);
- `text` includes the stop string when generation stopped on one (the reward must see
  "</answer>") and nothing after it; `finish_reason` is "stop" (stop string or end-of-text
  token) or "length" (`max_tokens` reached);
- `token_ids` are the generated ids, up to and including the one that completed the stop
  string (never the end-of-text token itself);
- temperature 0 means greedy decoding.

Temperature matters beyond sampling: sampling at temperature T draws from softmax(logits / T),
so every log-probability the trainer uses for that sample (old, new and reference policy) must
be computed from logits / T too. See `course_lib.training.grpo_trainer`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch


@dataclass
class SamplingParams:
    """How to sample. `n` samples per prompt; `seed` makes one call reproducible by itself."""

    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 256
    min_tokens: int = 0
    stop: tuple[str, ...] = ("</answer>",)
    n: int = 1
    seed: int | None = None

    def __post_init__(self):
        self.stop = tuple(self.stop or ())
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.n < 1 or self.max_tokens < 1 or self.min_tokens < 0:
            raise ValueError(f"need n >= 1, max_tokens >= 1, min_tokens >= 0; got {self}")


class RolloutEngineError(RuntimeError):
    """An engine that could not give the rollouts asked for (a server that died or does not answer)."""


@dataclass
class Rollout:
    """One sampled completion of `prompt`."""

    prompt: str
    text: str
    token_ids: list[int]
    finish_reason: str  # "stop" | "length"
    log_probs: list[float] | None = None  # the sampler's log-prob of each token, when the engine reports them


@runtime_checkable
class RolloutEngine(Protocol):
    def generate(self, prompts: list[str], params: SamplingParams) -> list[Rollout]:
        """`len(prompts) * params.n` rollouts, grouped by prompt; see the module docstring."""
        ...

    def load_weights(self, model: torch.nn.Module) -> None:
        """Make the engine sample from `model`'s current weights."""
        ...


def cut_at_stop(text: str, stops: tuple[str, ...]) -> tuple[str, bool]:
    """`text` up to and including the earliest stop string, and whether one was found."""
    best = None
    for s in stops:
        i = text.find(s)
        if i >= 0 and (best is None or i + len(s) < best):
            best = i + len(s)
    return (text, False) if best is None else (text[:best], True)

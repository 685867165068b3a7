"""The hidden cases both batchers share (static_batch_generate, continuous_batch_generate):
requests for a `course_lib.batching.SyntheticDecodeStep`, whose next token is a hash of the
slot's history (this draw's salt), eos with a chosen rate per request.

Where a case must catch a mistake on every draw, its lengths are fixed, not left to the hash:
a request of eos rate 0 ends at exactly its max_tokens, one of rate 1 at its first token. The
prompts (1 to 12 tokens, distinct unless a case repeats them), the eos id, the salt and the
rates and lengths of the mixed cases are drawn.
"""

from __future__ import annotations

import torch

VOCAB = 64


class BatchDraw:
    def __init__(self, gen: torch.Generator):
        self.gen = gen
        self.eos_id = self.integer(0, VOCAB - 1)
        self.salt = self.integer(0, 2**62)
        self.used: set[tuple[int, ...]] = set()

    def integer(self, low: int, high: int) -> int:
        """One integer in low .. high (both included)."""
        return int(torch.randint(low, high + 1, (), generator=self.gen))

    def integers(self, n: int, low: int, high: int) -> list[int]:
        return [self.integer(low, high) for _ in range(n)]

    def prompt(self, length: int | None = None) -> list[int]:
        """A prompt no earlier request of this draw has."""
        while True:
            ids = self.integers(length or self.integer(1, 12), 0, VOCAB - 1)
            if tuple(ids) not in self.used:
                self.used.add(tuple(ids))
                return ids

    def case(self, max_tokens: list[int], rates, batch_size: int, prompts=None, expect_error: bool = False) -> dict:
        rates = [rates] * len(max_tokens) if isinstance(rates, float) else list(rates)
        prompts = prompts or [self.prompt() for _ in max_tokens]
        return {"requests": [{"prompt_ids": p, "max_tokens": m} for p, m in zip(prompts, max_tokens)],
                "batch_size": batch_size, "eos_id": self.eos_id, "eos_rates": rates, "vocab": VOCAB,
                "salt": self.salt, "expect_error": expect_error}


def batching_cases(gen: torch.Generator) -> list[tuple[str, dict]]:
    d = BatchDraw(gen)
    mixed = [min(m, 23) for m in d.integers(12, 4, 24)]
    mixed[0], mixed[1] = 24, 3  # a long request beside a short one in the first batch
    # and the last request the longest of the rest, never ending early (eos rate 0): admitted after every
    # other one, it ends after every other one, so some slot idles at the end of every draw
    mixed[11] = 24
    tail = [16] * 16
    for i in (1, 6, 11):
        tail[i] = d.integer(40, 48)
    tail_rates = [0.0 if i in (1, 6, 11) else 0.4 for i in range(16)]
    only_max = d.integers(9, 1, 12)
    only_max[:3] = [7, 2, 1]
    group = [d.prompt(), d.prompt()]
    last_batch = d.integers(10, 6, 15)
    last_batch[8:] = [6, 9]
    broken_prompt = d.case(d.integers(8, 2, 9), 0.2, 3, expect_error=True)
    broken_prompt["requests"][5]["prompt_ids"] = []
    broken_max = d.case(d.integers(6, 2, 9), 0.2, 2, expect_error=True)
    broken_max["requests"][3]["max_tokens"] = 0
    broken_negative = d.case(d.integers(4, 2, 9), 0.2, 2, expect_error=True)
    broken_negative["requests"][0]["max_tokens"] = -2
    return [
        ("mixed_lengths_12_requests_batch_4", d.case(mixed, [0.0, 0.0] + [0.12] * 9 + [0.0], 4)),
        ("long_tail_16_requests_batch_4", d.case(tail, tail_rates, 4)),
        ("max_tokens_only_9_requests_batch_3", d.case(only_max, 0.0, 3)),
        ("eos_only_8_requests_batch_3", d.case([200] * 8, 0.2, 3)),
        ("finish_at_prefill_10_requests_batch_2",
         d.case([5, 4, 9, 1, 6, 3, 2, 8, 1, 5], [1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0], 2)),
        ("simultaneous_finishes_9_requests_batch_3", d.case([3, 3, 3, 5, 2, 2, 4, 4, 4], 0.0, 3)),
        ("batch_size_1_5_requests", d.case(d.integers(5, 3, 10), 0.2, 1)),
        ("more_slots_than_requests_3_requests_batch_8", d.case([5, 9, 2], 0.0, 8)),
        ("partial_last_batch_10_requests_batch_4", d.case(last_batch, [0.1] * 8 + [0.0, 0.0], 4)),
        ("every_request_one_token_6_requests_batch_4", d.case([1] * 6, 0.3, 4)),
        ("repeated_prompts_9_requests_batch_3",
         d.case([12] * 4 + [7] + [12] * 4, [0.15] * 4 + [0.0] + [0.15] * 4, 3,
                prompts=[group[0]] * 4 + [d.prompt()] + [group[1]] * 4)),
        ("one_token_and_30_token_prompts_6_requests_batch_2",
         d.case(d.integers(6, 3, 12), 0.1, 2, prompts=[d.prompt(1), d.prompt(30), d.prompt(1), d.prompt(30),
                                                      d.prompt(30), d.prompt(1)])),
        ("no_requests_batch_4", d.case([], 0.0, 4)),
        ("error_batch_size_0", d.case(d.integers(4, 2, 9), 0.2, 0, expect_error=True)),
        ("error_batch_size_negative", d.case(d.integers(4, 2, 9), 0.2, -1, expect_error=True)),
        ("error_empty_prompt_ids", broken_prompt),
        ("error_max_tokens_0", broken_max),
        ("error_max_tokens_negative", broken_negative),
    ]


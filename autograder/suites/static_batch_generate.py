"""Hidden cases of `static_batch_generate(step, requests, batch_size, eos_id) -> dict` (notebook 14):
greedy decoding of requests {"prompt_ids", "max_tokens"} in batches of batch_size, in request
order, each batch decoded until all of its requests have finished (eos_id, kept, or max_tokens
tokens), a finished request no longer fed; the accounting of `course_lib.batching`.

The step is a `course_lib.batching.SyntheticDecodeStep` (no model: the next token is a hash of
the slot's history; eos at a rate chosen per request), which raises on a use against the
`DecodeStep` contract; a batcher that misuses it gets {"misuse": the message} as its output.
Outputs: the report's six keys, the step's own counts (prefills, decode calls, slots fed),
whether the requests were left unchanged. Error cases must raise ValueError: their output is
{"raises": "ValueError"}, {"raises": "other"} or {"raises": None}. The cases:
`autograder/suites/_batching_cases.py`.

What the cases are built to catch:

- every case: outputs in completion order, eos dropped (`eos_only_*`, `finish_at_prefill_*`),
  the last token at max_tokens lost or one too many (`max_tokens_only_*`), a finished request
  still fed (the step raises), the next batch started before the slowest request of a batch
  finishes (`long_tail_*`, `mixed_lengths_*`), the batches reordered (sorted by max_tokens);
- `partial_last_batch_*`, `more_slots_than_requests_*`: utilization over the requests of a batch
  instead of its batch_size slots;
- `every_request_one_token_*`, `no_requests_*`: no decode step at all (utilization 0.0, not a
  division by zero);
- `finish_at_prefill_*`: a request whose first token ends it, decoded anyway;
- `repeated_prompts_*`: outputs kept by prompt (equal prompts, equal outputs, but each counts);
- the `error_*` cases: batch_size < 1, a request without prompt ids, max_tokens < 1.
"""

from __future__ import annotations

import torch

GRADED = "static_batch_generate"
# each error case and the phrase of the reference's `Raises:` section that states it (tests/test_contracts.py)
RAISES = {
    "error_batch_size_0": "batch_size < 1",
    "error_batch_size_negative": "batch_size < 1",
    "error_empty_prompt_ids": "a request without prompt_ids",
    "error_max_tokens_0": "a request whose max_tokens is < 1",
    "error_max_tokens_negative": "a request whose max_tokens is < 1",
}
TRIPWIRE = ["static_batch_generate", "continuous_batch_generate"]


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    from ._batching_cases import batching_cases  # grader side only

    return batching_cases(gen)


def call(fn, inputs: dict) -> dict:
    from course_lib.batching import run_checked

    return run_checked(fn, **inputs)

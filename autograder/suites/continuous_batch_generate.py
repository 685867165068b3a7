"""Hidden cases of `continuous_batch_generate(step, requests, batch_size, eos_id) -> dict` (notebook
14): greedy decoding of requests {"prompt_ids", "max_tokens"} in batch_size slots, every free
slot taking the next waiting request (in request order) before the first decode step and after
each one, a request leaving its slot in the step in which it finishes (eos_id, kept, or
max_tokens tokens); the accounting of `course_lib.batching`.

The decode step (`course_lib.batching.SyntheticDecodeStep`, which raises on misuse), the outputs
and the cases are those of `static_batch_generate`'s suite (`autograder/suites/_batching_cases.py`).

What the cases are built to catch:

- `mixed_lengths_*`, `long_tail_*`: no admission until the batch drains (static batching:
  more steps, lower utilization, later admitted_at), requests admitted last-in first-out;
- every case: outputs in completion order, eos dropped (`eos_only_*`), the last token at
  max_tokens lost or one too many (`max_tokens_only_*`), a finished request still fed or
  prefilled over (the step raises), admitted_at counted after the step;
- `simultaneous_finishes_*`: one admission per step when several slots free at once;
- `finish_at_prefill_*` (eos first, max_tokens 1): such a request decoded anyway, or its slot
  left empty for a step instead of taking the next request at once;
- a freed slot given the new request by decode instead of prefill (the step raises), or the
  slot's token buffer not reset (the previous request's tokens in the new output);
- `more_slots_than_requests_*`: utilization over min(batch_size, requests) slots;
- `every_request_one_token_*`, `no_requests_*`: no decode step at all (utilization 0.0);
- the `error_*` cases: batch_size < 1, a request without prompt ids, max_tokens < 1.
"""

from __future__ import annotations

import torch

from .static_batch_generate import RAISES  # noqa: F401 - its error cases and their Raises: phrases are these too

GRADED = "continuous_batch_generate"
TRIPWIRE = ["continuous_batch_generate", "static_batch_generate"]


def make_inputs(gen: torch.Generator) -> list[tuple[str, dict]]:
    from ._batching_cases import batching_cases  # grader side only

    return batching_cases(gen)


def call(fn, inputs: dict) -> dict:
    from course_lib.batching import run_checked

    return run_checked(fn, **inputs)

"""static_batch_generate (notebook 14): the reference's contract. The synthetic decode step's own
checks are tested here too. Its correct versions and known mistakes are in grader.py
(tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import pytest
from hypothesis import given

from course_lib import continuous_batch_generate, static_batch_generate
from course_lib.batching import DecodeStepMisuse, SyntheticDecodeStep
from tests.helpers import BATCH_EOS, batch_requests, checked_batcher_run, PROPERTY_SETTINGS


# ---------------------------------------------------------------- the reference
@PROPERTY_SETTINGS
@given(batch_requests())
def test_reference_gives_each_request_its_own_greedy_tokens(drawn):
    got, _ = checked_batcher_run(static_batch_generate, drawn)
    requests, batch_size = drawn[0], drawn[2]
    batches = [got["outputs"][i:i + batch_size] for i in range(0, len(requests), batch_size)]
    assert got["steps"] == sum(max(len(o) for o in b) - 1 for b in batches)  # each batch waits for its longest
    assert got["admitted_at"] == [sum(max(len(o) for o in b) - 1 for b in batches[:i // batch_size])
                                  for i in range(len(requests))]
    assert 0.0 <= got["utilization"] <= 1.0


@PROPERTY_SETTINGS
@given(batch_requests())
def test_continuous_batching_never_takes_more_steps(drawn):
    """FIFO admission starts every batch of static batching no later than static batching does."""
    reports = [checked_batcher_run(fn, drawn)[0] for fn in (static_batch_generate, continuous_batch_generate)]
    assert reports[0]["slot_steps"] == reports[1]["slot_steps"]
    assert reports[1]["steps"] <= reports[0]["steps"]
    assert reports[1]["utilization"] >= reports[0]["utilization"]


def test_reference_errors():
    step = SyntheticDecodeStep([], slots=1, eos_id=BATCH_EOS, eos_rates=[])
    with pytest.raises(ValueError, match="batch_size"):
        static_batch_generate(step, [{"prompt_ids": [1], "max_tokens": 3}], 0, BATCH_EOS)
    with pytest.raises(ValueError, match=r"requests\[1\] has no prompt_ids"):
        static_batch_generate(step, [{"prompt_ids": [1], "max_tokens": 3}, {"prompt_ids": [], "max_tokens": 3}], 2, 7)
    with pytest.raises(ValueError, match="max_tokens"):
        static_batch_generate(step, [{"prompt_ids": [1], "max_tokens": 0}], 2, BATCH_EOS)


def test_synthetic_step_resets_on_prefill_and_raises_on_misuse():
    requests = [{"prompt_ids": [1, 2], "max_tokens": 3}, {"prompt_ids": [3], "max_tokens": 1}]
    step = SyntheticDecodeStep(requests, slots=2, eos_id=BATCH_EOS, eos_rates=[0.0, 0.0], salt=5)
    first = step.prefill(0, [1, 2])
    with pytest.raises(DecodeStepMisuse, match="never prefilled"):
        step.decode([1], [first])
    with pytest.raises(DecodeStepMisuse, match="last token"):
        step.decode([0], [first + 1])
    with pytest.raises(DecodeStepMisuse, match="not finished"):
        step.prefill(0, [3])
    with pytest.raises(DecodeStepMisuse, match="no request"):
        step.prefill(1, [9, 9])
    with pytest.raises(DecodeStepMisuse, match="not one of"):
        step.prefill(2, [3])
    second = step.decode([0], [first])[0]
    third = step.decode([0], [second])[0]
    with pytest.raises(DecodeStepMisuse, match="has finished"):  # max_tokens 3 reached
        step.decode([0], [third])
    assert step.prefill(0, [1, 2]) == first  # reset: the same history gives the same token
    step.prefill(1, [3])
    with pytest.raises(DecodeStepMisuse, match="distinct"):
        step.decode([0, 0], [first, first])
    assert (step.prefills, step.decodes, step.fed) == (3, 2, 2)

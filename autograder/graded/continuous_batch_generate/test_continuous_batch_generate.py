"""continuous_batch_generate (notebook 14): the reference's contract. Its correct versions and known
mistakes are in grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import pytest
from hypothesis import given

from course_lib import continuous_batch_generate
from course_lib.batching import SyntheticDecodeStep
from tests.helpers import BATCH_EOS, batch_requests, checked_batcher_run, PROPERTY_SETTINGS


class Recording(SyntheticDecodeStep):
    """The synthetic step, recording which slots each decode call fed."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls = []

    def decode(self, slots, tokens):
        self.calls.append(list(slots))
        return super().decode(slots, tokens)


# ---------------------------------------------------------------- the reference
@PROPERTY_SETTINGS
@given(batch_requests())
def test_reference_gives_each_request_its_own_greedy_tokens_with_every_slot_busy(drawn):
    got, step = checked_batcher_run(continuous_batch_generate, drawn, Recording)
    batch_size = drawn[2]
    lengths = [len(o) - 1 for o in got["outputs"]]  # decode steps each request takes
    for k, slots in enumerate(step.calls):
        waiting = sum(a > k for a in got["admitted_at"])
        assert waiting == 0 or len(slots) == batch_size, "a slot idle while a request waits"
        busy = sum(a <= k < a + n for a, n in zip(got["admitted_at"], lengths))
        assert len(slots) == busy
    assert got["admitted_at"] == sorted(got["admitted_at"])  # request order


def test_reference_admits_as_soon_as_a_slot_frees():
    requests = [{"prompt_ids": [i], "max_tokens": m} for i, m in enumerate([5, 2, 1, 3, 1, 2])]
    step = SyntheticDecodeStep(requests, slots=2, eos_id=BATCH_EOS, eos_rates=[0.0] * 6)
    got = continuous_batch_generate(step, requests, 2, BATCH_EOS)
    # request 1 ends after 1 step; 2 finishes at its prefill, so 3 takes the slot at once
    assert got["admitted_at"] == [0, 0, 1, 1, 3, 3]
    assert [len(o) for o in got["outputs"]] == [5, 2, 1, 3, 1, 2]
    assert (got["steps"], got["slot_steps"]) == (4, 4 + 1 + 2 + 1)


def test_reference_errors():
    step = SyntheticDecodeStep([], slots=1, eos_id=BATCH_EOS, eos_rates=[])
    with pytest.raises(ValueError, match="batch_size"):
        continuous_batch_generate(step, [{"prompt_ids": [1], "max_tokens": 3}], -1, BATCH_EOS)
    with pytest.raises(ValueError, match=r"requests\[0\] has no prompt_ids"):
        continuous_batch_generate(step, [{"prompt_ids": [], "max_tokens": 3}], 2, BATCH_EOS)
    with pytest.raises(ValueError, match="max_tokens"):
        continuous_batch_generate(step, [{"prompt_ids": [1], "max_tokens": 0}], 2, BATCH_EOS)

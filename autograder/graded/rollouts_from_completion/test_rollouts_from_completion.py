"""rollouts_from_completion (notebook 14): the reference's contract. Its correct versions and known
mistakes are in grader.py (tests/test_graded.py runs them through the judge).
"""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from course_lib import rollouts_from_completion
from tests.helpers import PROPERTY_SETTINGS


EOS = 1


def choice(index, ids, lps, reason="stop"):
    return {"index": index, "finish_reason": reason, "text": "x",
            "logprobs": {"tokens": [f"token_id:{i}" for i in ids], "token_logprobs": lps}}


# ---------------------------------------------------------------- the reference
@PROPERTY_SETTINGS
@given(st.lists(st.tuples(st.lists(st.integers(2, 900), max_size=20), st.booleans(),
                          st.sampled_from(["stop", "length", "abort"])), max_size=6), st.randoms())
def test_reference_orders_by_index_and_drops_only_a_final_eos(samples, rng):
    choices = [choice(j, ids + [EOS] * eos, [-0.5 * (k + 1) for k in range(len(ids) + eos)], reason)
               for j, (ids, eos, reason) in enumerate(samples)]
    rng.shuffle(choices)
    out = rollouts_from_completion({"choices": choices}, eos_token_id=EOS)
    assert [r["index"] for r in out] == list(range(len(samples)))
    for r, (ids, eos, reason) in zip(out, samples):
        assert r["token_ids"] == ids and r["log_probs"] == [-0.5 * (k + 1) for k in range(len(ids))]
        assert r["finish_reason"] == ("length" if reason == "length" else "stop")


def test_reference_errors_say_what_the_request_lacked():
    good = choice(0, [5, 6, EOS], [-1.0, -2.0, -0.1])
    with pytest.raises(ValueError, match="no 'choices'"):
        rollouts_from_completion({"object": "error"}, EOS)
    with pytest.raises(ValueError, match="logprobs"):
        rollouts_from_completion({"choices": [{**good, "logprobs": None}]}, EOS)
    with pytest.raises(ValueError, match="return_tokens_as_token_ids"):
        rollouts_from_completion({"choices": [{**good, "logprobs": {"tokens": [" a"], "token_logprobs": [-1.0]}}]}, EOS)
    with pytest.raises(ValueError, match="3 tokens but 2 log-probs"):
        rollouts_from_completion({"choices": [{**good, "logprobs": {**good["logprobs"], "token_logprobs": [-1.0, -2.0]}}]}, EOS)
    with pytest.raises(ValueError, match="same index"):
        rollouts_from_completion({"choices": [good, good]}, EOS)

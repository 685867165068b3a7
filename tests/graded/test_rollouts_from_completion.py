"""rollouts_from_completion (notebook 14): the reference's contract, correct versions that earn full
marks through the real judge, and realistic mistakes that lose them (CONTRIBUTING.md, "Adding a
graded function")."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autograder.mistakes.rollouts_from_completion import BASE
from course_lib import rollouts_from_completion
from tests.helpers import PROPERTY_SETTINGS, corpus_tests, many_draws_test

SUITE = "rollouts_from_completion"
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


CORRECT = {
    "sorted_then_parse": BASE,
    # a dict by index first (duplicates caught on insert), then read in index order
    "dict_by_index": """
        import re
        TOKEN = re.compile(r"token_id:(\\d+)")
        def rollouts_from_completion(reply, eos_token_id):
            try:
                choices = reply["choices"]
            except (KeyError, TypeError):
                raise ValueError("reply has no choices") from None
            by_index = {}
            for ch in choices:
                if ch["index"] in by_index:
                    raise ValueError("index twice")
                logprobs = ch.get("logprobs") or {}
                tokens, values = logprobs.get("tokens"), logprobs.get("token_logprobs")
                if tokens is None or values is None:
                    raise ValueError("ask for logprobs")
                if len(tokens) != len(values):
                    raise ValueError("misaligned")
                matches = [TOKEN.fullmatch(t) for t in tokens]
                if not all(matches):
                    raise ValueError("tokens must be token_id:N")
                ids = [int(m.group(1)) for m in matches]
                keep = len(ids) - 1 if ids and ids[-1] == eos_token_id else len(ids)
                by_index[ch["index"]] = {"index": ch["index"], "token_ids": ids[:keep],
                                         "log_probs": [float(v) for v in values[:keep]],
                                         "finish_reason": {"length": "length"}.get(ch.get("finish_reason"), "stop")}
            return [by_index[i] for i in sorted(by_index)]
    """,
    # pairs of (id, log-prob) zipped and trimmed together; a loop over positions for the order
    "zip_pairs_and_pop": """
        def rollouts_from_completion(reply, eos_token_id):
            if "choices" not in reply:
                raise ValueError("no choices in the reply")
            choices = list(reply["choices"])
            indices = [c["index"] for c in choices]
            if len(set(indices)) != len(indices):
                raise ValueError("duplicate index")
            result = []
            for index in sorted(indices):
                c = choices[indices.index(index)]
                if c.get("logprobs") is None:
                    raise ValueError("logprobs missing")
                pairs = []
                if len(c["logprobs"]["tokens"]) != len(c["logprobs"]["token_logprobs"]):
                    raise ValueError("tokens and logprobs differ in length")
                for tok, val in zip(c["logprobs"]["tokens"], c["logprobs"]["token_logprobs"]):
                    prefix, _, number = tok.partition("token_id:")
                    if prefix or not number.isdigit():
                        raise ValueError(f"bad token {tok!r}")
                    pairs.append((int(number), float(val)))
                if pairs and pairs[-1][0] == eos_token_id:
                    pairs.pop()
                reason = c.get("finish_reason")
                result.append({"index": index, "token_ids": [p[0] for p in pairs], "log_probs": [p[1] for p in pairs],
                               "finish_reason": "length" if reason == "length" else "stop"})
            return result
    """,
    # preallocated slots filled by index
    "slots_by_index": """
        def rollouts_from_completion(reply, eos_token_id):
            choices = reply.get("choices") if isinstance(reply, dict) else None
            if choices is None:
                raise ValueError("not a completions reply")
            slots = [None] * len(choices)
            for c in choices:
                i = c["index"]
                if slots[i] is not None:
                    raise ValueError("two choices share an index")
                lp = c.get("logprobs")
                if not isinstance(lp, dict):
                    raise ValueError("no logprobs")
                n = len(lp["tokens"])
                if n != len(lp["token_logprobs"]):
                    raise ValueError("lengths")
                ids = []
                for t in lp["tokens"]:
                    if not (isinstance(t, str) and t[:9] == "token_id:" and t[9:].isdigit()):
                        raise ValueError("token format")
                    ids.append(int(t[9:]))
                end = n - 1 if n and ids[-1] == eos_token_id else n
                slots[i] = {"index": i, "token_ids": ids[:end], "log_probs": list(map(float, lp["token_logprobs"][:end])),
                            "finish_reason": "length" if c["finish_reason"] == "length" else "stop"}
            return slots
    """,
}


test_correct_version_earns_full_marks, test_mistake_loses_its_points = corpus_tests(SUITE, CORRECT)
test_each_version_holds_on_many_draws = many_draws_test(SUITE, CORRECT, draws=20)

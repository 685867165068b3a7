"""static_batch_generate (notebook 14): the reference's contract, correct versions that earn full
marks through the real judge, and realistic mistakes that lose them (CONTRIBUTING.md, "Adding a
graded function"). The synthetic decode step's own checks are tested here too."""

from __future__ import annotations

import pytest
from hypothesis import given

from autograder.mistakes.static_batch_generate import BASE
from course_lib import continuous_batch_generate, static_batch_generate
from course_lib.batching import DecodeStepMisuse, SyntheticDecodeStep
from tests.helpers import BATCH_EOS, PROPERTY_SETTINGS, batch_requests, checked_batcher_run, corpus_tests, many_draws_test

SUITE = "static_batch_generate"


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


CORRECT = {
    "slot_list_and_a_dict_of_rows": BASE,
    # a deque of batches, per-row done flags, the batch's rows fed while any is not done
    "deque_of_batches_done_flags": """
        from collections import deque
        def static_batch_generate(step, requests, batch_size, eos_id):
            if batch_size <= 0:
                raise ValueError(f"batch_size={batch_size}")
            if any(not r.get("prompt_ids") for r in requests):
                raise ValueError("a request has no prompt_ids")
            if any(r["max_tokens"] <= 0 for r in requests):
                raise ValueError("max_tokens must be positive")
            queue = deque(range(len(requests)))
            outputs = [[] for _ in requests]
            admitted = [0] * len(requests)
            n_steps = busy = 0
            while queue:
                batch = [queue.popleft() for _ in range(min(batch_size, len(queue)))]
                done = []
                for slot, idx in enumerate(batch):
                    admitted[idx] = n_steps
                    outputs[idx].append(step.prefill(slot, requests[idx]["prompt_ids"][:]))
                    done.append(outputs[idx][-1] == eos_id or requests[idx]["max_tokens"] == 1)
                while not all(done):
                    slots = [s for s in range(len(batch)) if not done[s]]
                    nxt = step.decode(slots, [outputs[batch[s]][-1] for s in slots])
                    n_steps += 1
                    busy += len(slots)
                    for s, t in zip(slots, nxt):
                        o = outputs[batch[s]]
                        o.append(t)
                        done[s] = t == eos_id or len(o) == requests[batch[s]]["max_tokens"]
            return dict(outputs=outputs, steps=n_steps, prefills=len(requests), slot_steps=busy,
                        utilization=(busy / n_steps / batch_size) if n_steps else 0.0, admitted_at=admitted)
    """,
    # the number of decode steps of a batch fixed in advance would need the model: a while loop
    # over a set of unfinished slots instead, the accounting gathered in a small class
    "set_of_unfinished_slots_and_a_counter_class": """
        class Counter:
            def __init__(self):
                self.steps = 0
                self.fed = 0
        def static_batch_generate(step, requests, batch_size, eos_id):
            if not isinstance(batch_size, int) or batch_size < 1:
                raise ValueError("batch_size")
            for k, r in enumerate(requests):
                if not r["prompt_ids"]:
                    raise ValueError(f"request {k}: empty prompt")
                if r["max_tokens"] < 1:
                    raise ValueError(f"request {k}: max_tokens")
            c = Counter()
            results = {}
            starts = {}
            for b in range(0, len(requests), batch_size):
                slot_of = {slot: b + slot for slot in range(min(batch_size, len(requests) - b))}
                gen = {}
                for slot, idx in slot_of.items():
                    starts[idx] = c.steps
                    gen[slot] = [step.prefill(slot, list(requests[idx]["prompt_ids"]))]
                def running(slot):
                    g = gen[slot]
                    return g[-1] != eos_id and len(g) < requests[slot_of[slot]]["max_tokens"]
                live = {s for s in slot_of if running(s)}
                while live:
                    order = sorted(live)
                    for s, t in zip(order, step.decode(order, [gen[s][-1] for s in order])):
                        gen[s].append(t)
                    c.steps += 1
                    c.fed += len(order)
                    live = {s for s in live if running(s)}
                for slot, idx in slot_of.items():
                    results[idx] = gen[slot]
            n = len(requests)
            return {"outputs": [results[i] for i in range(n)], "steps": c.steps, "prefills": n, "slot_steps": c.fed,
                    "utilization": c.fed / (c.steps * batch_size) if c.steps else 0.0,
                    "admitted_at": [starts[i] for i in range(n)]}
    """,
    # batches as slices through itertools; finished rows dropped from the fed lists (zip of
    # parallel lists), the utilization from the total of output lengths
    "islice_batches_parallel_lists": """
        from itertools import islice
        def static_batch_generate(step, requests, batch_size, eos_id):
            if batch_size < 1:
                raise ValueError("batch_size < 1")
            for r in requests:
                if not r["prompt_ids"]:
                    raise ValueError("prompt_ids empty")
                if not r["max_tokens"] >= 1:
                    raise ValueError("max_tokens < 1")
            it = iter(enumerate(requests))
            outputs, admitted_at, steps = {}, {}, 0
            while True:
                batch = list(islice(it, batch_size))
                if not batch:
                    break
                slots, idxs, lasts = [], [], []
                for slot, (i, r) in enumerate(batch):
                    admitted_at[i] = steps
                    t = step.prefill(slot, list(r["prompt_ids"]))
                    outputs[i] = [t]
                    if t != eos_id and r["max_tokens"] > 1:
                        slots.append(slot); idxs.append(i); lasts.append(t)
                while slots:
                    new = step.decode(slots, lasts)
                    steps += 1
                    keep = [(s, i, t) for s, i, t in zip(slots, idxs, new)
                            if not outputs[i].append(t) and t != eos_id and len(outputs[i]) < requests[i]["max_tokens"]]
                    slots, idxs, lasts = [list(x) for x in zip(*keep)] if keep else ([], [], [])
            n = len(requests)
            slot_steps = sum(len(outputs[i]) - 1 for i in range(n))
            return {"outputs": [outputs[i] for i in range(n)], "steps": steps, "prefills": n, "slot_steps": slot_steps,
                    "utilization": slot_steps / (batch_size * steps) if steps else 0.0,
                    "admitted_at": [admitted_at[i] for i in range(n)]}
    """,
}


test_correct_version_earns_full_marks, test_mistake_loses_its_points = corpus_tests(SUITE, CORRECT)
test_each_version_holds_on_many_draws = many_draws_test(SUITE, CORRECT)
